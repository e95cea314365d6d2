/* fc_graph.c: stream capture, graph objects and their nodes.
 *
 * A graph is a list of nodes (struct fc_gnode) in creation order, each an
 * op template (a kernel with its copied parameters, a copy, a memset, a
 * host function, a stream memory op; none for an empty node) with its
 * dependencies. Nodes come from the explicit API (fc_gnode.c) or from
 * stream capture: while a stream captures, fc_submit hands its work here
 * instead of to the worker and each op becomes a node depending on the
 * previous one. Other streams joining the capture (cuStreamWaitEvent on an
 * event recorded in it) append to the same chain, so a captured graph
 * replays in submission order -- a valid, if stricter, schedule of the
 * real graph's DAG. Instantiation and launch are fc_gexec.c's.
 *
 * Capture modes follow the real driver: a "potentially unsafe" call (an
 * allocation, a context synchronization) fails with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the captures that
 * forbid it: the calling thread's own non-relaxed capture, or, when the
 * thread's mode is global, any global-mode capture of another thread.
 * cuThreadExchangeStreamCaptureMode sets the calling thread's mode.
 *
 * Not simulated: memory alloc/free nodes (cuMemAllocAsync during capture
 * fails), event record nodes (CU_EVENT_RECORD_EXTERNAL), conditional
 * nodes, child graphs, removing nodes or edges.
 */
#include "fakecuda/fc_internal.h"

#include <stdlib.h>
#include <string.h>

/* Active captures of the process, guarded by cap_lock. A capture is
 * created by cuStreamBeginCapture and freed by cuStreamEndCapture (or
 * with its context); both also hold the context's lock, so code holding
 * ctx->lock may use a capture found here. */
static pthread_mutex_t cap_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fc_list captures = { &captures, &captures };
static uint64_t next_cap_id = 1;           /* under cap_lock */

/* The calling thread's capture mode (owned by the thread). */
static __thread CUstreamCaptureMode tls_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

static struct fc_graph *graph_new(void)
{
    struct fc_graph *g = calloc(1, sizeof *g);
    if (g && fc_handle_add(g, FC_H_GRAPH) != 0) {
        free(g);
        g = NULL;
    }
    if (g)
        FC_LIST_INIT(&g->nodes);
    return g;
}

struct fc_gnode *fc_gnode_alloc(CUgraphNodeType type)
{
    struct fc_gnode *n = calloc(1, sizeof *n);
    if (n && fc_handle_add(n, FC_H_GNODE) != 0) {
        free(n);
        n = NULL;
    }
    if (n) {
        FC_LIST_INIT(&n->link);
        n->type = type;
    }
    return n;
}

void fc_gnode_discard(struct fc_gnode *n)
{
    fc_handle_del(n);
    free(n->deps);
    free(n);
}

void fc_graph_free(struct fc_graph *g)
{
    fc_handle_del(g);
    while (!fc_list_empty(&g->nodes)) {
        struct fc_gnode *n = FC_CONTAINER(g->nodes.next, struct fc_gnode, link);
        fc_list_del(&n->link);
        fc_gnode_discard(n);
    }
    free(g);
}

bool fc_gnode_has_dep(const struct fc_gnode *n, const struct fc_gnode *d)
{
    for (size_t i = 0; i < n->ndeps; i++)
        if (n->deps[i] == d)
            return true;
    return false;
}

CUresult fc_gnode_add_dep(struct fc_gnode *n, struct fc_gnode *from)
{
    if (fc_gnode_has_dep(n, from))
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_gnode **v = realloc(n->deps, (n->ndeps + 1) * sizeof *v);
    if (!v)
        return CUDA_ERROR_OUT_OF_MEMORY;
    v[n->ndeps++] = from;
    n->deps = v;
    return CUDA_SUCCESS;
}

bool fc_edge_default(const CUgraphEdgeData *e)
{
    static const CUgraphEdgeData zero;
    return !e || memcmp(e, &zero, sizeof zero) == 0;
}

CUresult fc_gnode_attach(struct fc_graph *g, struct fc_gnode *n, const CUgraphNode *deps,
                         const CUgraphEdgeData *edges, size_t ndeps)
{
    if (ndeps && !deps)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < ndeps; i++) {
        struct fc_gnode *d = (struct fc_gnode *)deps[i];
        if (!fc_handle_is(d, FC_H_GNODE) || d->graph != g || !fc_edge_default(edges ? &edges[i] : NULL))
            return CUDA_ERROR_INVALID_VALUE;
        for (size_t j = 0; j < i; j++)
            if (deps[j] == deps[i])
                return CUDA_ERROR_INVALID_VALUE;
    }
    struct fc_gnode **v = ndeps ? malloc(ndeps * sizeof *v) : NULL;
    if (ndeps && !v)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < ndeps; i++)
        v[i] = (struct fc_gnode *)deps[i];
    free(n->deps);
    n->deps = v;
    n->ndeps = ndeps;
    n->graph = g;
    fc_list_add(&g->nodes, &n->link);
    g->n++;
    return CUDA_SUCCESS;
}

void fc_capture_invalidate(struct fc_capture *cap)
{
    atomic_store(&cap->invalidated, true);
}

/* Under cap_lock: the live capture `id`, or NULL. */
static struct fc_capture *find_locked(uint64_t id)
{
    for (struct fc_list *l = captures.next; l != &captures; l = l->next) {
        struct fc_capture *c = FC_CONTAINER(l, struct fc_capture, node);
        if (c->id == id)
            return c;
    }
    return NULL;
}

int fc_capture_lookup(uint64_t id, struct fc_ctx *ctx, struct fc_capture **out)
{
    pthread_mutex_lock(&cap_lock);
    struct fc_capture *c = find_locked(id);
    int where = !c ? FC_CAP_NONE : c->ctx == ctx ? FC_CAP_HERE : FC_CAP_ELSEWHERE;
    if (where == FC_CAP_HERE)
        *out = c;
    pthread_mutex_unlock(&cap_lock);
    return where;
}

/* Captures leave the list under cap_lock before they are freed, so one
 * found under it may be marked. */
bool fc_capture_invalidate_id(uint64_t id)
{
    pthread_mutex_lock(&cap_lock);
    struct fc_capture *c = find_locked(id);
    if (c)
        fc_capture_invalidate(c);
    pthread_mutex_unlock(&cap_lock);
    return c != NULL;
}

CUresult fc_capture_record_locked(struct fc_stream *s, struct fc_op *op)
{
    struct fc_capture *cap = s->cap;
    switch (op->kind) {
    case FC_OP_KERNEL:
    case FC_OP_COPY:
    case FC_OP_MEMSET:
    case FC_OP_HOSTFN:
    case FC_OP_WRITE_VALUE:
    case FC_OP_WAIT_VALUE:
        break;
    default:
        free(op);
        fc_capture_invalidate(cap);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (atomic_load(&cap->invalidated)) {
        free(op);
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    struct fc_graph *g = cap->graph;
    struct fc_gnode *n = fc_gnode_alloc(CU_GRAPH_NODE_TYPE_EMPTY);
    if (!n) {
        free(op);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    n->op = *op;
    n->op.next = NULL;
    n->op.seq = 0;
    free(op);
    fc_gp_captured(n, (CUcontext)s->ctx);
    CUgraphNode prev = (CUgraphNode)g->last;
    CUresult r = fc_gnode_attach(g, n, g->last ? &prev : NULL, NULL, g->last ? 1 : 0);
    if (r != CUDA_SUCCESS) {
        fc_gnode_discard(n);
        return r;
    }
    g->last = n;
    return CUDA_SUCCESS;
}

CUresult fc_capture_check_unsafe(void)
{
    CUstreamCaptureMode mode = tls_mode;
    if (mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_SUCCESS;
    bool prohibited = false;
    pthread_t self = pthread_self();
    pthread_mutex_lock(&cap_lock);
    for (struct fc_list *l = captures.next; l != &captures; l = l->next) {
        struct fc_capture *c = FC_CONTAINER(l, struct fc_capture, node);
        bool mine = pthread_equal(c->thread, self);
        if ((mine && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED)
            || (!mine && mode == CU_STREAM_CAPTURE_MODE_GLOBAL
                && c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
            fc_capture_invalidate(c);
            prohibited = true;
        }
    }
    pthread_mutex_unlock(&cap_lock);
    return prohibited ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

/* Under ctx->lock: detaches every stream of the context from cap and
 * forgets the capture; returns its graph. */
static struct fc_graph *capture_end_locked(struct fc_ctx *c, struct fc_capture *cap)
{
    for (struct fc_list *l = c->streams.next; l != &c->streams; l = l->next) {
        struct fc_stream *s = FC_CONTAINER(l, struct fc_stream, node);
        if (s->cap == cap)
            s->cap = NULL;
    }
    pthread_mutex_lock(&cap_lock);
    fc_list_del(&cap->node);
    pthread_mutex_unlock(&cap_lock);
    struct fc_graph *g = cap->graph;
    free(cap);
    return g;
}

/* Lock order: ctx->lock, then cap_lock. */
void fc_capture_forget_ctx(struct fc_ctx *c)
{
    for (;;) {
        struct fc_capture *found = NULL;
        pthread_mutex_lock(&c->lock);
        pthread_mutex_lock(&cap_lock);
        for (struct fc_list *l = captures.next; l != &captures && !found; l = l->next) {
            struct fc_capture *cap = FC_CONTAINER(l, struct fc_capture, node);
            if (cap->ctx == c)
                found = cap;
        }
        pthread_mutex_unlock(&cap_lock);
        if (found)
            fc_graph_free(capture_end_locked(c, found));
        pthread_mutex_unlock(&c->lock);
        if (!found)
            return;
    }
}

static CUresult begin_capture(CUstream h, bool pt, CUstreamCaptureMode mode)
{
    if ((int)mode < 0 || mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_stream *s;
    CUresult r = fc_stream_resolve(h, pt, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (s->kind == FC_S_LEGACY)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    struct fc_capture *cap = calloc(1, sizeof *cap);
    struct fc_graph *g = graph_new();
    if (!cap || !g) {
        free(cap);
        if (g)
            fc_graph_free(g);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    cap->mode = mode;
    cap->thread = pthread_self();
    cap->ctx = s->ctx;
    cap->origin = s;
    cap->graph = g;
    pthread_mutex_lock(&s->ctx->lock);
    if (s->cap) {
        pthread_mutex_unlock(&s->ctx->lock);
        free(cap);
        fc_graph_free(g);
        return CUDA_ERROR_ILLEGAL_STATE;
    }
    pthread_mutex_lock(&cap_lock);
    cap->id = next_cap_id++;
    fc_list_add(&captures, &cap->node);
    pthread_mutex_unlock(&cap_lock);
    s->cap = cap;
    pthread_mutex_unlock(&s->ctx->lock);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) { return begin_capture(hStream, false, mode); }
CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) { return begin_capture(hStream, true, mode); }
CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream) { return begin_capture(hStream, false, CU_STREAM_CAPTURE_MODE_GLOBAL); }
CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream hStream) { return begin_capture(hStream, true, CU_STREAM_CAPTURE_MODE_GLOBAL); }

static CUresult end_capture(CUstream h, bool pt, CUgraph *phGraph)
{
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_stream *s;
    CUresult r = fc_stream_resolve(h, pt, &s);
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_ctx *c = s->ctx;
    pthread_mutex_lock(&c->lock);
    struct fc_capture *cap = s->cap;
    if (!cap)
        r = CUDA_ERROR_ILLEGAL_STATE;
    else if (cap->origin != s)
        r = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    else if (cap->mode != CU_STREAM_CAPTURE_MODE_RELAXED
             && !pthread_equal(cap->thread, pthread_self()))
        r = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    if (r != CUDA_SUCCESS) {
        pthread_mutex_unlock(&c->lock);
        return r;
    }
    bool invalid = atomic_load(&cap->invalidated);
    struct fc_graph *g = capture_end_locked(c, cap);
    pthread_mutex_unlock(&c->lock);
    if (invalid) {
        fc_graph_free(g);
        *phGraph = NULL;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) { return end_capture(hStream, false, phGraph); }
CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph) { return end_capture(hStream, true, phGraph); }

/* Capture state of a stream. Asking about the legacy stream while a
 * blocking stream of its context captures is the implicit-dependency
 * error, as with the real driver. */
static CUresult capture_state(CUstream h, bool pt, CUstreamCaptureStatus *st,
                              uint64_t *id, CUgraph *graph)
{
    struct fc_stream *s;
    CUresult r = fc_stream_resolve(h, pt, &s);
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_ctx *c = s->ctx;
    pthread_mutex_lock(&c->lock);
    struct fc_capture *cap = s->cap;
    if (s->kind == FC_S_LEGACY) {
        for (struct fc_list *l = c->streams.next; l != &c->streams; l = l->next) {
            struct fc_stream *b = FC_CONTAINER(l, struct fc_stream, node);
            if (b->cap && fc_stream_blocking(b))
                r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        }
    }
    *st = !cap ? CU_STREAM_CAPTURE_STATUS_NONE
          : atomic_load(&cap->invalidated) ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                           : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (id && cap)
        *id = cap->id;
    if (graph)
        *graph = cap ? (CUgraph)cap->graph : NULL;
    pthread_mutex_unlock(&c->lock);
    return r;
}

static CUresult is_capturing(CUstream h, bool pt, CUstreamCaptureStatus *st)
{
    if (!st)
        return CUDA_ERROR_INVALID_VALUE;
    return capture_state(h, pt, st, NULL, NULL);
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus) { return is_capturing(hStream, false, captureStatus); }
CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus) { return is_capturing(hStream, true, captureStatus); }

static CUresult capture_info(CUstream h, bool pt, CUstreamCaptureStatus *st, cuuint64_t *id,
                             CUgraph *graph, const CUgraphNode **deps,
                             const CUgraphEdgeData **edges, size_t *ndeps)
{
    if (!st)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t cid = 0;
    CUresult r = capture_state(h, pt, st, &cid, graph);
    if (r != CUDA_SUCCESS)
        return r;
    if (id && *st != CU_STREAM_CAPTURE_STATUS_NONE)
        *id = cid;
    /* Dependencies are not tracked (the graph is linear). */
    if (deps)
        *deps = NULL;
    if (edges)
        *edges = NULL;
    if (ndeps)
        *ndeps = 0;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out)
{
    return capture_info(hStream, false, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

CUresult CUDAAPI cuStreamGetCaptureInfo_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out, cuuint64_t *id_out)
{
    return capture_info(hStream, true, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                           cuuint64_t *id_out, CUgraph *graph_out,
                                           const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    return capture_info(hStream, false, captureStatus_out, id_out, graph_out, dependencies_out, NULL, numDependencies_out);
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                cuuint64_t *id_out, CUgraph *graph_out,
                                                const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    return capture_info(hStream, true, captureStatus_out, id_out, graph_out, dependencies_out, NULL, numDependencies_out);
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                           cuuint64_t *id_out, CUgraph *graph_out,
                                           const CUgraphNode **dependencies_out,
                                           const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    return capture_info(hStream, false, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out, numDependencies_out);
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                                cuuint64_t *id_out, CUgraph *graph_out,
                                                const CUgraphNode **dependencies_out,
                                                const CUgraphEdgeData **edgeData_out, size_t *numDependencies_out)
{
    return capture_info(hStream, true, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out, numDependencies_out);
}

CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    FC_FAULT(cuThreadExchangeStreamCaptureMode);
    if (!mode || (int)*mode < 0 || *mode > CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = tls_mode;
    tls_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------------- graphs */

CUresult fc_graph_get(CUgraph h, struct fc_graph **out)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_handle_is(h, FC_H_GRAPH))
        return CUDA_ERROR_INVALID_VALUE;
    *out = (struct fc_graph *)h;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    if (!phGraph || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_graph *g = graph_new();
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
    struct fc_graph *g;
    CUresult r = fc_graph_get(hGraph, &g);
    if (r == CUDA_SUCCESS)
        fc_graph_free(g);
    return r;
}

CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    if (!numNodes)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_graph *g;
    CUresult r = fc_graph_get(hGraph, &g);
    if (r != CUDA_SUCCESS)
        return r;
    if (nodes) {
        size_t i = 0;
        for (struct fc_list *l = g->nodes.next; l != &g->nodes && i < *numNodes; l = l->next)
            nodes[i++] = (CUgraphNode)FC_CONTAINER(l, struct fc_gnode, link);
        for (; i < *numNodes; i++)
            nodes[i] = NULL;
    }
    *numNodes = g->n;
    return CUDA_SUCCESS;
}

/* Forked child: the parent's captures are not the child's (they stay
 * reachable through `forsaken` for leak checkers). */
static struct fc_list *forsaken;
void fc_capture_atfork_child(void)
{
    pthread_mutex_init(&cap_lock, NULL);
    if (!fc_list_empty(&captures))
        forsaken = captures.next;
    FC_LIST_INIT(&captures);
}
