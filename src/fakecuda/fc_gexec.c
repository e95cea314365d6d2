/* fc_gexec.c: instantiated graphs: instantiation, launch, destruction.
 *
 * Instantiation copies the graph's nodes (struct fc_xnode: type, op
 * template, recorded memcpy operands, dependencies by position) in a
 * topological order, so the exec is independent of its graph afterwards.
 * The order is Kahn's, first in first out from the roots in creation
 * order: a graph built twice the same way gets the same order, which is
 * how cuGraphExecUpdate pairs nodes (fc_gupdate.c). A cycle (possible
 * through cuGraphAddDependencies) fails instantiation.
 *
 * cuGraphLaunch submits copies of the templates, in that order, to the
 * launch stream: one graph launch runs in one stream, so dependencies are
 * respected by the order alone. Empty nodes submit nothing.
 */
#include "fakecuda/fc_internal.h"

#include <stdlib.h>
#include <string.h>

/* Scratch of one ordering: the nodes by creation rank, each one's
 * dependents (CSR: outs[off[i]..off[i+1])), and dependencies left. */
struct order {
    struct fc_gnode **all, **outs;
    size_t *off, *left, *pos;
};

static void order_free(struct order *o)
{
    free(o->all);
    free(o->outs);
    free(o->off);
    free(o->left);
    free(o->pos);
}

static bool order_alloc(struct order *o, size_t n)
{
    o->all = calloc(n + 1, sizeof *o->all);
    o->off = calloc(n + 2, sizeof *o->off);
    o->left = calloc(n + 1, sizeof *o->left);
    o->pos = calloc(n + 1, sizeof *o->pos);
    return o->all && o->off && o->left && o->pos;
}

/* Fills the dependents lists, each in creation order of the dependent:
 * counted into off[i+2], summed, then filled by advancing off[i+1], after
 * which node i's dependents are outs[off[i]..off[i+1]). */
static bool order_edges(struct order *o, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        o->left[i] = o->all[i]->ndeps;
        for (size_t d = 0; d < o->all[i]->ndeps; d++)
            o->off[o->all[i]->deps[d]->idx + 2]++;
    }
    for (size_t i = 2; i <= n + 1; i++)
        o->off[i] += o->off[i - 1];
    o->outs = calloc(o->off[n + 1] + 1, sizeof *o->outs);
    if (!o->outs)
        return false;
    for (size_t i = 0; i < n; i++)
        for (size_t d = 0; d < o->all[i]->ndeps; d++)
            o->outs[o->off[o->all[i]->deps[d]->idx + 1]++] = o->all[i];
    return true;
}

/* The topological order into out[0..n): false on a cycle. */
static bool order_run(struct order *o, size_t n, struct fc_gnode **out)
{
    size_t head = 0, tail = 0;
    for (size_t i = 0; i < n; i++)
        if (o->left[i] == 0)
            out[tail++] = o->all[i];
    while (head < tail) {
        struct fc_gnode *x = out[head++];
        for (size_t e = o->off[x->idx]; e < o->off[x->idx + 1]; e++) {
            struct fc_gnode *y = o->outs[e];
            if (--o->left[y->idx] == 0)
                out[tail++] = y;
        }
    }
    return tail == n;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* One exec node from graph node n, its dependencies by position. */
static bool xnode_fill(struct fc_xnode *xn, const struct fc_gnode *n, const size_t *pos)
{
    xn->orig = n;
    xn->type = n->type;
    xn->op = n->op;
    xn->op.next = NULL;
    if (n->type == CU_GRAPH_NODE_TYPE_MEMCPY)
        memcpy(xn->opnd, n->u.copy.opnd, sizeof xn->opnd);
    xn->ndeps = n->ndeps;
    xn->deps = malloc((n->ndeps + 1) * sizeof *xn->deps);
    if (!xn->deps)
        return false;
    for (size_t d = 0; d < n->ndeps; d++)
        xn->deps[d] = pos[n->deps[d]->idx];
    qsort(xn->deps, xn->ndeps, sizeof *xn->deps, cmp_size);
    return true;
}

void fc_xnodes_free(struct fc_xnode *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i].deps);
    free(v);
}

CUresult fc_xnodes_build(struct fc_graph *g, struct fc_xnode **out)
{
    size_t n = g->n, i = 0;
    struct order o = { 0 };
    struct fc_gnode **seq = calloc(n + 1, sizeof *seq);
    struct fc_xnode *v = calloc(n + 1, sizeof *v);
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    if (seq && v && order_alloc(&o, n)) {
        for (struct fc_list *l = g->nodes.next; l != &g->nodes; l = l->next, i++) {
            o.all[i] = FC_CONTAINER(l, struct fc_gnode, link);
            o.all[i]->idx = i;
        }
        if (order_edges(&o, n))
            r = order_run(&o, n, seq) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    for (i = 0; r == CUDA_SUCCESS && i < n; i++)
        o.pos[seq[i]->idx] = i;
    for (i = 0; r == CUDA_SUCCESS && i < n; i++)
        if (!xnode_fill(&v[i], seq[i], o.pos))
            r = CUDA_ERROR_OUT_OF_MEMORY;
    order_free(&o);
    free(seq);
    if (r != CUDA_SUCCESS) {
        fc_xnodes_free(v, n);
        return r;
    }
    *out = v;
    return CUDA_SUCCESS;
}

CUresult fc_gexec_get(CUgraphExec h, struct fc_gexec **out)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_handle_is(h, FC_H_GEXEC))
        return CUDA_ERROR_INVALID_VALUE;
    *out = (struct fc_gexec *)h;
    return CUDA_SUCCESS;
}

/* ---------------------------------------------------------- instantiation */

static CUresult instantiate(CUgraphExec *pexec, CUgraph hGraph)
{
    if (!pexec)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_graph *g;
    CUresult r = fc_graph_get(hGraph, &g);
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_gexec *x = calloc(1, sizeof *x);
    if (!x)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r = fc_xnodes_build(g, &x->v);
    if (r == CUDA_SUCCESS && fc_handle_add(x, FC_H_GEXEC) != 0) {
        fc_xnodes_free(x->v, g->n);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r != CUDA_SUCCESS) {
        free(x);
        return r;
    }
    x->n = g->n;
    *pexec = (CUgraphExec)x;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph, unsigned long long flags)
{
    return instantiate(phGraphExec, hGraph);
}

CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                       char *logBuffer, size_t bufferSize)
{
    if (phErrorNode)
        *phErrorNode = NULL;
    if (logBuffer && bufferSize)
        logBuffer[0] = 0;
    return instantiate(phGraphExec, hGraph);
}

CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                                    char *logBuffer, size_t bufferSize)
{
    return cuGraphInstantiate_v2(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

static CUresult instantiate_params(CUgraphExec *pexec, CUgraph hGraph,
                                   CUDA_GRAPH_INSTANTIATE_PARAMS *p, bool pt)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) {
        struct fc_stream *s;
        CUresult r = fc_stream_resolve(p->hUploadStream, pt, &s);
        if (r != CUDA_SUCCESS)
            return r;
    }
    CUresult r = instantiate(pexec, hGraph);
    p->hErrNode_out = NULL;
    p->result_out = r == CUDA_SUCCESS         ? CUDA_GRAPH_INSTANTIATE_SUCCESS
                    : r == CUDA_ERROR_INVALID_VALUE ? CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE
                                                    : CUDA_GRAPH_INSTANTIATE_ERROR;
    return r;
}

CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                              CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return instantiate_params(phGraphExec, hGraph, instantiateParams, false);
}

CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                   CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    return instantiate_params(phGraphExec, hGraph, instantiateParams, true);
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    struct fc_gexec *x;
    CUresult r = fc_gexec_get(hGraphExec, &x);
    if (r != CUDA_SUCCESS)
        return r;
    fc_handle_del(x);
    fc_xnodes_free(x->v, x->n);
    free(x);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ launch */

static CUresult graph_launch(CUgraphExec h, CUstream hs, bool pt)
{
    struct fc_gexec *x;
    CUresult r = fc_gexec_get(h, &x);
    struct fc_stream *s;
    if (r == CUDA_SUCCESS)
        r = fc_stream_resolve(hs, pt, &s);
    struct fc_ctx *c;
    if (r == CUDA_SUCCESS)
        r = fc_ctx_enter(&c);
    for (size_t i = 0; r == CUDA_SUCCESS && i < x->n; i++) {
        if (x->v[i].op.kind == 0)
            continue;                  /* an empty node */
        struct fc_op *op = fc_op_new(x->v[i].op.kind);
        if (op) {
            *op = x->v[i].op;
            op->next = NULL;
        }
        r = fc_submit(s, op, NULL);
    }
    return r;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) { return graph_launch(hGraphExec, hStream, false); }
CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) { return graph_launch(hGraphExec, hStream, true); }

static CUresult graph_upload(CUgraphExec h, CUstream hs, bool pt)
{
    struct fc_gexec *x;
    CUresult r = fc_gexec_get(h, &x);
    struct fc_stream *s;
    if (r == CUDA_SUCCESS)
        r = fc_stream_resolve(hs, pt, &s);
    return r;
}

CUresult CUDAAPI cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream) { return graph_upload(hGraphExec, hStream, false); }
CUresult CUDAAPI cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream) { return graph_upload(hGraphExec, hStream, true); }
