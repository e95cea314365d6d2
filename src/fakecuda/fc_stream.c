/* fc_stream.c: streams.
 *
 * Each stream is a FIFO of operations run in order by its own worker
 * thread, so different streams really run concurrently (a copy on one
 * stream overlaps a kernel on another; kernels still serialize on the
 * device's engine, see fc_engine.c). An API call builds an fc_op and
 * submits it; the synchronous forms submit and wait.
 *
 * Default streams, like the real driver:
 *  - the legacy NULL stream (NULL, CU_STREAM_LEGACY) of a context: work
 *    submitted to it waits for all work already submitted to the
 *    context's blocking streams, and work submitted to a blocking stream
 *    waits for the legacy stream's pending work. CU_STREAM_NON_BLOCKING
 *    streams are exempt. The waits are STREAM_WAIT ops inserted ahead of
 *    the submitted op, computed under ctx->lock so that concurrent
 *    submissions observe one order.
 *  - the per-thread default stream (the _ptsz/_ptds forms with stream 0,
 *    or CU_STREAM_PER_THREAD): a blocking stream per (thread, context),
 *    made on first use, destroyed when the thread exits or with the
 *    context.
 *
 * Lifetime: a stream is reference counted (its owner, i.e. the user handle
 * or the context for default streams; its worker; every op or waiter that
 * points at it). Destroying it stops the worker once the queue is empty;
 * the worker leaves ctx->streams and drops its reference.
 */
#include "fakecuda/fc_internal.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* cuStreamGetId values: never reused in a process (atomic counter). */
static atomic_ullong next_stream_id = 0x100;

struct fc_op *fc_op_new(int kind)
{
    struct fc_op *op = calloc(1, sizeof *op);
    if (op)
        op->kind = kind;
    return op;
}

static void op_free_list(struct fc_op *op)
{
    while (op) {
        struct fc_op *next = op->next;
        free(op);
        op = next;
    }
}

bool fc_stream_capturing(struct fc_stream *s)
{
    pthread_mutex_lock(&s->ctx->lock);
    bool cap = s->cap != NULL;
    pthread_mutex_unlock(&s->ctx->lock);
    return cap;
}

bool fc_stream_blocking(const struct fc_stream *s)
{
    return s->kind != FC_S_LEGACY && !(s->flags & CU_STREAM_NON_BLOCKING);
}

void fc_stream_ref(struct fc_stream *s)
{
    pthread_mutex_lock(&s->lock);
    s->refs++;
    pthread_mutex_unlock(&s->lock);
}

void fc_stream_unref(struct fc_stream *s)
{
    pthread_mutex_lock(&s->lock);
    int left = --s->refs;
    pthread_mutex_unlock(&s->lock);
    if (left == 0) {
        op_free_list(s->head);
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->lock);
        free(s);
    }
}

/* ------------------------------------------------------------ execution */

static bool value_reached(uint64_t cur, uint64_t want, unsigned flags, unsigned size)
{
    if (size == 4) {
        cur = (uint32_t)cur;
        want = (uint32_t)want;
    }
    switch (flags & 0x3u) {
    case CU_STREAM_WAIT_VALUE_GEQ:
        return size == 4 ? (int32_t)((uint32_t)cur - (uint32_t)want) >= 0
                         : (int64_t)(cur - want) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ:
        return cur == want;
    case CU_STREAM_WAIT_VALUE_AND:
        return (cur & want) != 0;
    default: /* NOR */
        return (size == 4 ? (uint32_t) ~(cur | want) : ~(cur | want)) != 0;
    }
}

static CUresult write_value(const struct fc_op *op)
{
    CUresult r = CUDA_ERROR_ILLEGAL_ADDRESS;
    fc_map_rdlock();
    if (fc_map_covered_locked(op->u.val.addr, op->u.val.size, FC_PROT_W)) {
        if (op->u.val.size == 4)
            __atomic_store_n((uint32_t *)op->u.val.addr, (uint32_t)op->u.val.value, __ATOMIC_SEQ_CST);
        else
            __atomic_store_n((uint64_t *)op->u.val.addr, op->u.val.value, __ATOMIC_SEQ_CST);
        r = CUDA_SUCCESS;
    }
    fc_map_unlock();
    return r;
}

/* Polls with a growing interval (the host writes the value). */
static CUresult wait_value(struct fc_ctx *c, const struct fc_op *op)
{
    uint64_t nap = 20000;
    for (;;) {
        fc_map_rdlock();
        bool ok = fc_map_covered_locked(op->u.val.addr, op->u.val.size, FC_PROT_R);
        uint64_t cur = 0;
        if (ok)
            cur = op->u.val.size == 4
                      ? __atomic_load_n((uint32_t *)op->u.val.addr, __ATOMIC_SEQ_CST)
                      : __atomic_load_n((uint64_t *)op->u.val.addr, __ATOMIC_SEQ_CST);
        fc_map_unlock();
        if (!ok)
            return CUDA_ERROR_ILLEGAL_ADDRESS;
        if (value_reached(cur, op->u.val.value, op->u.val.flags, op->u.val.size)
            || atomic_load(&c->sticky))
            return CUDA_SUCCESS;
        fc_sleep_ns(nap);
        if (nap < 1000000)
            nap *= 2;
    }
}

/* Runs one op on the worker. Device work is skipped once the context has
 * faulted (its results would be garbage on a real GPU too); host-side
 * bookkeeping (events, waits, frees) always runs so nothing hangs. */
static void run_op(struct fc_stream *s, struct fc_op *op)
{
    struct fc_ctx *c = s->ctx;
    bool faulted = atomic_load(&c->sticky) != CUDA_SUCCESS;
    CUresult r = CUDA_SUCCESS;
    switch (op->kind) {
    case FC_OP_KERNEL:
        if (!faulted)
            r = fc_kernel_run(c, op);             /* leaves kernels_pending */
        else    /* skipped: never takes the engine (a slice ends by time) */
            atomic_fetch_sub(&c->kernels_pending, 1);
        break;
    case FC_OP_COPY:
        if (!faulted)
            r = fc_copy_run(c, &op->u.copy);
        break;
    case FC_OP_MEMSET:
        if (!faulted)
            r = fc_memset_run(&op->u.set);
        break;
    case FC_OP_HOSTFN:
        if (!faulted)
            op->u.host.fn(op->u.host.arg);
        break;
    case FC_OP_CALLBACK:
        op->u.cb.fn(op->u.cb.handle, (CUresult)atomic_load(&c->sticky), op->u.cb.arg);
        break;
    case FC_OP_EVENT_RECORD:
        fc_event_complete(op->u.ev.ev, op->u.ev.gen);
        fc_event_unref(op->u.ev.ev);
        break;
    case FC_OP_EVENT_WAIT:
        fc_event_wait_gen(op->u.ev.ev, op->u.ev.gen);
        fc_event_unref(op->u.ev.ev);
        break;
    case FC_OP_STREAM_WAIT:
        fc_stream_wait(op->u.sw.s, op->u.sw.seq);
        fc_stream_unref(op->u.sw.s);
        break;
    case FC_OP_WRITE_VALUE:
        if (!faulted)
            r = write_value(op);
        break;
    case FC_OP_WAIT_VALUE:
        if (!faulted)
            r = wait_value(c, op);
        break;
    case FC_OP_FREE:
        fc_mem_free_addr(op->u.free.addr, false);
        break;
    }
    if (r != CUDA_SUCCESS) {
        int expected = CUDA_SUCCESS;
        atomic_compare_exchange_strong(&c->sticky, &expected, (int)r);
    }
}

static void *worker(void *arg)
{
    struct fc_stream *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (!s->head && !s->stop)
            pthread_cond_wait(&s->cv, &s->lock);
        struct fc_op *op = s->head;
        if (!op)
            break;                     /* stopped and drained */
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        pthread_mutex_unlock(&s->lock);
        run_op(s, op);
        pthread_mutex_lock(&s->lock);
        s->completed = op->seq;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->lock);
        free(op);
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    struct fc_ctx *c = s->ctx;
    pthread_mutex_lock(&c->lock);
    fc_list_del(&s->node);
    pthread_cond_broadcast(&c->idle);
    pthread_mutex_unlock(&c->lock);
    fc_stream_unref(s);
    return NULL;
}

/* Caller holds c->lock. Workers block every signal: signals belong to the
 * application's threads, as with the real driver's threads. */
struct fc_stream *fc_stream_create(struct fc_ctx *c, int kind, unsigned flags, int prio)
{
    struct fc_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->ctx = c;
    s->kind = kind;
    s->flags = flags;
    s->priority = prio;
    s->id = atomic_fetch_add(&next_stream_id, 1);
    s->refs = 2;                       /* owner + worker */
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cv, NULL);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    int rc = pthread_create(&t, &a, worker, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
    if (rc != 0) {
        pthread_cond_destroy(&s->cv);
        pthread_mutex_destroy(&s->lock);
        free(s);
        return NULL;
    }
    fc_list_add(&c->streams, &s->node);
    return s;
}

/* Drops the owner's reference once; the worker drains and exits. */
void fc_stream_destroy(struct fc_stream *s)
{
    pthread_mutex_lock(&s->lock);
    bool first = !s->stop;
    s->stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->lock);
    if (!first)
        return;
    if (s->kind == FC_S_USER)
        fc_handle_del(s);
    fc_stream_unref(s);
}

struct fc_stream *fc_ctx_legacy_locked(struct fc_ctx *c)
{
    if (!c->legacy)
        c->legacy = fc_stream_create(c, FC_S_LEGACY, 0, 0);
    return c->legacy;
}

CUresult fc_stream_wait(struct fc_stream *s, uint64_t seq)
{
    pthread_mutex_lock(&s->lock);
    while (s->completed < seq)
        pthread_cond_wait(&s->cv, &s->lock);
    pthread_mutex_unlock(&s->lock);
    return CUDA_SUCCESS;
}

static bool pending(struct fc_stream *s, uint64_t *upto)
{
    pthread_mutex_lock(&s->lock);
    bool p = s->enqueued > s->completed;
    *upto = s->enqueued;
    pthread_mutex_unlock(&s->lock);
    return p;
}

static struct fc_op *stream_wait_op(struct fc_stream *on, uint64_t seq)
{
    struct fc_op *w = fc_op_new(FC_OP_STREAM_WAIT);
    if (w) {
        fc_stream_ref(on);
        w->u.sw.s = on;
        w->u.sw.seq = seq;
    }
    return w;
}

/* Under c->lock: the implicit dependencies of work submitted to s, as a
 * list of STREAM_WAIT ops. */
static CUresult legacy_deps_locked(struct fc_ctx *c, struct fc_stream *s, struct fc_op **deps)
{
    uint64_t upto;
    if (s->kind == FC_S_LEGACY) {
        CUresult r = CUDA_SUCCESS;
        for (struct fc_list *l = c->streams.next; l != &c->streams; l = l->next) {
            struct fc_stream *b = FC_CONTAINER(l, struct fc_stream, node);
            if (b == s || !fc_stream_blocking(b))
                continue;
            if (b->cap) {
                /* The legacy stream would depend on a capture. */
                fc_capture_invalidate(b->cap);
                r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
            } else if (pending(b, &upto)) {
                struct fc_op *w = stream_wait_op(b, upto);
                if (!w)
                    return CUDA_ERROR_OUT_OF_MEMORY;
                w->next = *deps;
                *deps = w;
            }
        }
        return r;
    }
    if (fc_stream_blocking(s) && c->legacy && pending(c->legacy, &upto)) {
        *deps = stream_wait_op(c->legacy, upto);
        if (!*deps)
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

static CUresult submit(struct fc_stream *s, struct fc_op *op, uint64_t *seq_out, bool sync)
{
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct fc_ctx *c = s->ctx;
    struct fc_op *deps = NULL;
    CUresult r = CUDA_SUCCESS;
    if (seq_out)
        *seq_out = 0;
    pthread_mutex_lock(&c->lock);
    if (s->cap) {
        if (sync) {
            /* A synchronous call on a capturing stream: unsafe. */
            fc_capture_invalidate(s->cap);
            r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
            free(op);
        } else {
            r = fc_capture_record_locked(s, op);
        }
        pthread_mutex_unlock(&c->lock);
        return r;
    }
    r = legacy_deps_locked(c, s, &deps);
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&s->lock);
        if (s->stop) {
            r = CUDA_ERROR_INVALID_HANDLE;
        } else {
            for (struct fc_op *d = deps; d;) {
                struct fc_op *next = d->next;
                d->next = NULL;
                d->seq = ++s->enqueued;
                if (s->tail)
                    s->tail->next = d;
                else
                    s->head = d;
                s->tail = d;
                d = next;
            }
            deps = NULL;
            if (op->kind == FC_OP_KERNEL)
                atomic_fetch_add(&c->kernels_pending, 1);   /* before the worker sees it */
            op->next = NULL;
            op->seq = ++s->enqueued;
            if (s->tail)
                s->tail->next = op;
            else
                s->head = op;
            s->tail = op;
            if (seq_out)
                *seq_out = op->seq;
            op = NULL;
            pthread_cond_broadcast(&s->cv);
        }
        pthread_mutex_unlock(&s->lock);
    }
    pthread_mutex_unlock(&c->lock);
    for (struct fc_op *d = deps; d; d = d->next)
        fc_stream_unref(d->u.sw.s);
    op_free_list(deps);
    free(op);
    return r;
}

CUresult fc_submit(struct fc_stream *s, struct fc_op *op, uint64_t *seq_out)
{
    return submit(s, op, seq_out, false);
}

CUresult fc_submit_sync(struct fc_stream *s, struct fc_op *op)
{
    uint64_t seq;
    CUresult r = submit(s, op, &seq, true);
    if (r != CUDA_SUCCESS)
        return r;
    fc_stream_wait(s, seq);
    return (CUresult)atomic_load(&s->ctx->sticky);
}

/* ------------------------------------------------- per-thread streams */

struct pts_ent {
    struct fc_ctx *ctx;
    uint32_t ctx_id;
    struct fc_stream *s;
};

#define FC_PTS_MAX 16
/* The calling thread's per-thread default streams (owned by the thread;
 * an entry is live while its context is live with the same id). */
static __thread struct pts_ent tls_pts[FC_PTS_MAX];
static __thread int tls_npts;
static pthread_key_t pts_key;
static pthread_once_t pts_once = PTHREAD_ONCE_INIT;

static bool pts_live(const struct pts_ent *e)
{
    return e->ctx && fc_ctx_valid(e->ctx) && e->ctx->id == e->ctx_id;
}

/* Thread exit: destroy this thread's per-thread streams. */
static void pts_exit(void *unused)
{
    for (int i = 0; i < tls_npts; i++)
        if (pts_live(&tls_pts[i]))
            fc_stream_destroy(tls_pts[i].s);
    tls_npts = 0;
}

static void pts_key_make(void)
{
    pthread_key_create(&pts_key, pts_exit);
}

void fc_stream_tls_init(void)
{
    pthread_once(&pts_once, pts_key_make);
}

static struct fc_stream *per_thread_stream(struct fc_ctx *c)
{
    for (int i = 0; i < tls_npts; i++)
        if (tls_pts[i].ctx == c && tls_pts[i].ctx_id == c->id)
            return tls_pts[i].s;
    pthread_mutex_lock(&c->lock);
    struct fc_stream *s = fc_stream_create(c, FC_S_PERTHREAD, 0, 0);
    pthread_mutex_unlock(&c->lock);
    if (!s)
        return NULL;
    int slot = -1;
    for (int i = 0; i < tls_npts && slot < 0; i++)
        if (!pts_live(&tls_pts[i]))
            slot = i;
    if (slot < 0)
        slot = tls_npts < FC_PTS_MAX ? tls_npts++ : 0;   /* 0: its ctx keeps it */
    tls_pts[slot] = (struct pts_ent){ c, c->id, s };
    pthread_setspecific(pts_key, tls_pts);
    return s;
}

void fc_stream_atfork_child(void)
{
    tls_npts = 0;
}

static bool default_stream(CUstream h)
{
    return !h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD;
}

CUresult fc_stream_resolve(CUstream h, bool per_thread, struct fc_stream **out)
{
    struct fc_ctx *c = NULL;
    if (default_stream(h)) {
        CUresult r = fc_ctx_current(&c);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return fc_stream_resolve_in(c, h, per_thread, out);
}

CUresult fc_stream_resolve_in(struct fc_ctx *c, CUstream h, bool per_thread,
                              struct fc_stream **out)
{
    if (!h)
        h = per_thread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
    if (h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        struct fc_stream *s;
        if (h == CU_STREAM_LEGACY) {
            pthread_mutex_lock(&c->lock);
            s = fc_ctx_legacy_locked(c);
            pthread_mutex_unlock(&c->lock);
        } else {
            s = per_thread_stream(c);
        }
        if (!s)
            return CUDA_ERROR_OUT_OF_MEMORY;
        *out = s;
        return CUDA_SUCCESS;
    }
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_handle_is(h, FC_H_STREAM))
        return CUDA_ERROR_INVALID_HANDLE;
    *out = (struct fc_stream *)h;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ API */

static CUresult stream_create(CUstream *ph, unsigned flags, int prio)
{
    if (!ph)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c;
    CUresult r = fc_ctx_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    prio = prio > 0 ? 0 : prio < -5 ? -5 : prio;
    pthread_mutex_lock(&c->lock);
    struct fc_stream *s = fc_stream_create(c, FC_S_USER, flags, prio);
    pthread_mutex_unlock(&c->lock);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (fc_handle_add(s, FC_H_STREAM) != 0) {
        fc_stream_destroy(s);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *ph = (CUstream)s;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    FC_FAULT(cuStreamCreate);
    return stream_create(phStream, Flags, 0);
}

CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    return stream_create(phStream, flags, priority);
}

static CUresult stream_destroy(CUstream hStream)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_stream *s = (struct fc_stream *)hStream;
    if (!fc_handle_is(s, FC_H_STREAM))
        return CUDA_ERROR_INVALID_HANDLE;
    fc_handle_del(s);
    pthread_mutex_lock(&s->ctx->lock);
    if (s->cap) {
        fc_capture_invalidate(s->cap);
        s->cap = NULL;
    }
    pthread_mutex_unlock(&s->ctx->lock);
    fc_stream_destroy(s);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream)
{
    FC_FAULT(cuStreamDestroy_v2);
    return stream_destroy(hStream);
}

CUresult CUDAAPI cuStreamDestroy(CUstream hStream)
{
    FC_FAULT(cuStreamDestroy);
    return stream_destroy(hStream);
}

/* Synchronizing with, or querying, a capturing stream is illegal and
 * invalidates the capture. */
static CUresult refuse_if_capturing(struct fc_stream *s)
{
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&s->ctx->lock);
    if (s->cap) {
        fc_capture_invalidate(s->cap);
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    pthread_mutex_unlock(&s->ctx->lock);
    return r;
}

static CUresult stream_sync(CUstream h, bool pt)
{
    struct fc_stream *s;
    CUresult r = fc_stream_resolve(h, pt, &s);
    if (r == CUDA_SUCCESS)
        r = refuse_if_capturing(s);
    if (r != CUDA_SUCCESS)
        return r;
    fc_stream_ref(s);
    pthread_mutex_lock(&s->lock);
    uint64_t upto = s->enqueued;
    pthread_mutex_unlock(&s->lock);
    fc_stream_wait(s, upto);
    r = (CUresult)atomic_load(&s->ctx->sticky);
    fc_stream_unref(s);
    return r;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
    FC_FAULT(cuStreamSynchronize);
    return stream_sync(hStream, false);
}
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream) { return stream_sync(hStream, true); }

static CUresult stream_query(CUstream h, bool pt)
{
    struct fc_stream *s;
    CUresult r = fc_stream_resolve(h, pt, &s);
    if (r == CUDA_SUCCESS)
        r = refuse_if_capturing(s);
    if (r != CUDA_SUCCESS)
        return r;
    r = (CUresult)atomic_load(&s->ctx->sticky);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&s->lock);
    bool idle = s->completed >= s->enqueued;
    pthread_mutex_unlock(&s->lock);
    return idle ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult CUDAAPI cuStreamQuery(CUstream hStream) { return stream_query(hStream, false); }
CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream) { return stream_query(hStream, true); }

static CUresult stream_get_ctx(CUstream h, bool pt, CUcontext *pctx)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_stream *s;
    CUresult r = fc_stream_resolve(h, pt, &s);
    if (r == CUDA_SUCCESS)
        *pctx = (CUcontext)s->ctx;
    return r;
}

CUresult CUDAAPI cuStreamGetCtx(CUstream hStream, CUcontext *pctx) { return stream_get_ctx(hStream, false, pctx); }
CUresult CUDAAPI cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx) { return stream_get_ctx(hStream, true, pctx); }

CUresult CUDAAPI cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    if (pGreenCtx)
        *pGreenCtx = NULL;
    return stream_get_ctx(hStream, false, pCtx);
}

CUresult CUDAAPI cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    if (pGreenCtx)
        *pGreenCtx = NULL;
    return stream_get_ctx(hStream, true, pCtx);
}

static CUresult stream_get_device(CUstream h, bool pt, CUdevice *dev)
{
    if (!dev)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_stream *s;
    CUresult r = fc_stream_resolve(h, pt, &s);
    if (r == CUDA_SUCCESS)
        *dev = s->ctx->dev;
    return r;
}

CUresult CUDAAPI cuStreamGetDevice(CUstream hStream, CUdevice *device) { return stream_get_device(hStream, false, device); }
CUresult CUDAAPI cuStreamGetDevice_ptsz(CUstream hStream, CUdevice *device) { return stream_get_device(hStream, true, device); }

static CUresult stream_get_priority(CUstream h, bool pt, int *prio)
{
    if (!prio)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_stream *s;
    CUresult r = fc_stream_resolve(h, pt, &s);
    if (r == CUDA_SUCCESS)
        *prio = s->priority;
    return r;
}

CUresult CUDAAPI cuStreamGetPriority(CUstream hStream, int *priority) { return stream_get_priority(hStream, false, priority); }
CUresult CUDAAPI cuStreamGetPriority_ptsz(CUstream hStream, int *priority) { return stream_get_priority(hStream, true, priority); }

static CUresult stream_get_flags(CUstream h, bool pt, unsigned *flags)
{
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_stream *s;
    CUresult r = fc_stream_resolve(h, pt, &s);
    if (r == CUDA_SUCCESS)
        *flags = s->flags;
    return r;
}

CUresult CUDAAPI cuStreamGetFlags(CUstream hStream, unsigned int *flags) { return stream_get_flags(hStream, false, flags); }
CUresult CUDAAPI cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags) { return stream_get_flags(hStream, true, flags); }

static CUresult stream_get_id(CUstream h, bool pt, unsigned long long *id)
{
    if (!id)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_stream *s;
    CUresult r = fc_stream_resolve(h, pt, &s);
    if (r == CUDA_SUCCESS)
        *id = s->id;
    return r;
}

CUresult CUDAAPI cuStreamGetId(CUstream hStream, unsigned long long *streamId) { return stream_get_id(hStream, false, streamId); }
CUresult CUDAAPI cuStreamGetId_ptsz(CUstream hStream, unsigned long long *streamId) { return stream_get_id(hStream, true, streamId); }

static CUresult add_callback(CUstream h, bool pt, CUstreamCallback cb, void *ud, unsigned flags)
{
    if (!cb || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_stream *s;
    CUresult r = fc_stream_resolve(h, pt, &s);
    if (r == CUDA_SUCCESS)
        r = refuse_if_capturing(s);       /* callbacks cannot be captured */
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_op *op = fc_op_new(FC_OP_CALLBACK);
    if (op) {
        op->u.cb.fn = cb;
        op->u.cb.arg = ud;
        op->u.cb.handle = h;
    }
    return fc_submit(s, op, NULL);
}

CUresult CUDAAPI cuStreamAddCallback(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags)
{
    return add_callback(hStream, false, callback, userData, flags);
}

CUresult CUDAAPI cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback, void *userData, unsigned int flags)
{
    return add_callback(hStream, true, callback, userData, flags);
}

static CUresult host_func(CUstream h, bool pt, CUhostFn fn, void *ud)
{
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_stream *s;
    CUresult r = fc_stream_resolve(h, pt, &s);
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_op *op = fc_op_new(FC_OP_HOSTFN);
    if (op) {
        op->u.host.fn = fn;
        op->u.host.arg = ud;
    }
    return fc_submit(s, op, NULL);
}

CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData) { return host_func(hStream, false, fn, userData); }
CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData) { return host_func(hStream, true, fn, userData); }

/* cuStreamWriteValue / cuStreamWaitValue, 32 and 64 bits. */
static CUresult mem_op(CUstream h, bool pt, int kind, CUdeviceptr addr, uint64_t value,
                       unsigned size, unsigned flags)
{
    struct fc_stream *s;
    CUresult r = fc_stream_resolve(h, pt, &s);
    if (r != CUDA_SUCCESS)
        return r;
    unsigned allowed = kind == FC_OP_WRITE_VALUE ? CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER
                                                 : 0x3u | CU_STREAM_WAIT_VALUE_FLUSH;
    if ((flags & ~allowed) || addr % size)
        return CUDA_ERROR_INVALID_VALUE;
    if (!fc_map_covered(addr, size, kind == FC_OP_WRITE_VALUE ? FC_PROT_W : FC_PROT_R))
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_op *op = fc_op_new(kind);
    if (op) {
        op->u.val.addr = addr;
        op->u.val.value = value;
        op->u.val.size = size;
        op->u.val.flags = flags;
    }
    return fc_submit(s, op, NULL);
}

#define FC_MEMOP(name, pt, kind, type, size)                                   \
    CUresult CUDAAPI name(CUstream stream, CUdeviceptr addr, type value,       \
                          unsigned int flags)                                  \
    {                                                                          \
        return mem_op(stream, pt, kind, addr, value, size, flags);             \
    }
FC_MEMOP(cuStreamWriteValue32, false, FC_OP_WRITE_VALUE, cuuint32_t, 4)
FC_MEMOP(cuStreamWriteValue32_ptsz, true, FC_OP_WRITE_VALUE, cuuint32_t, 4)
FC_MEMOP(cuStreamWriteValue32_v2, false, FC_OP_WRITE_VALUE, cuuint32_t, 4)
FC_MEMOP(cuStreamWriteValue32_v2_ptsz, true, FC_OP_WRITE_VALUE, cuuint32_t, 4)
FC_MEMOP(cuStreamWriteValue64, false, FC_OP_WRITE_VALUE, cuuint64_t, 8)
FC_MEMOP(cuStreamWriteValue64_ptsz, true, FC_OP_WRITE_VALUE, cuuint64_t, 8)
FC_MEMOP(cuStreamWriteValue64_v2, false, FC_OP_WRITE_VALUE, cuuint64_t, 8)
FC_MEMOP(cuStreamWriteValue64_v2_ptsz, true, FC_OP_WRITE_VALUE, cuuint64_t, 8)
FC_MEMOP(cuStreamWaitValue32, false, FC_OP_WAIT_VALUE, cuuint32_t, 4)
FC_MEMOP(cuStreamWaitValue32_ptsz, true, FC_OP_WAIT_VALUE, cuuint32_t, 4)
FC_MEMOP(cuStreamWaitValue32_v2, false, FC_OP_WAIT_VALUE, cuuint32_t, 4)
FC_MEMOP(cuStreamWaitValue32_v2_ptsz, true, FC_OP_WAIT_VALUE, cuuint32_t, 4)
FC_MEMOP(cuStreamWaitValue64, false, FC_OP_WAIT_VALUE, cuuint64_t, 8)
FC_MEMOP(cuStreamWaitValue64_ptsz, true, FC_OP_WAIT_VALUE, cuuint64_t, 8)
FC_MEMOP(cuStreamWaitValue64_v2, false, FC_OP_WAIT_VALUE, cuuint64_t, 8)
FC_MEMOP(cuStreamWaitValue64_v2_ptsz, true, FC_OP_WAIT_VALUE, cuuint64_t, 8)

/* Managed memory is always coherent here: attaching is a validated no-op. */
static CUresult attach_mem(CUstream h, bool pt, CUdeviceptr dptr, size_t length, unsigned flags)
{
    struct fc_stream *s;
    CUresult r = fc_stream_resolve(h, pt, &s);
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_range rg;
    if (!fc_map_find(dptr, &rg) || rg.kind != FC_R_MANAGED)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamAttachMemAsync(CUstream hStream, CUdeviceptr dptr, size_t length, unsigned int flags)
{
    return attach_mem(hStream, false, dptr, length, flags);
}

CUresult CUDAAPI cuStreamAttachMemAsync_ptsz(CUstream hStream, CUdeviceptr dptr, size_t length, unsigned int flags)
{
    return attach_mem(hStream, true, dptr, length, flags);
}

/* Launch attributes of a stream: only the priority means anything. */
static CUresult stream_get_attr(CUstream h, bool pt, CUstreamAttrID attr, CUstreamAttrValue *v)
{
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_stream *s;
    CUresult r = fc_stream_resolve(h, pt, &s);
    if (r != CUDA_SUCCESS)
        return r;
    memset(v, 0, sizeof *v);
    if (attr == CU_LAUNCH_ATTRIBUTE_PRIORITY)
        v->priority = s->priority;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamGetAttribute(CUstream hStream, CUstreamAttrID attr, CUstreamAttrValue *value_out)
{
    return stream_get_attr(hStream, false, attr, value_out);
}

CUresult CUDAAPI cuStreamGetAttribute_ptsz(CUstream hStream, CUstreamAttrID attr, CUstreamAttrValue *value_out)
{
    return stream_get_attr(hStream, true, attr, value_out);
}

static CUresult stream_set_attr(CUstream h, bool pt, CUstreamAttrID attr, const CUstreamAttrValue *v)
{
    if (!v)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_stream *s;
    return fc_stream_resolve(h, pt, &s);
}

CUresult CUDAAPI cuStreamSetAttribute(CUstream hStream, CUstreamAttrID attr, const CUstreamAttrValue *value)
{
    return stream_set_attr(hStream, false, attr, value);
}

CUresult CUDAAPI cuStreamSetAttribute_ptsz(CUstream hStream, CUstreamAttrID attr, const CUstreamAttrValue *value)
{
    return stream_set_attr(hStream, true, attr, value);
}

static CUresult copy_attrs(CUstream dst, CUstream src, bool pt)
{
    struct fc_stream *a, *b;
    CUresult r = fc_stream_resolve(dst, pt, &a);
    if (r == CUDA_SUCCESS)
        r = fc_stream_resolve(src, pt, &b);
    return r;
}

CUresult CUDAAPI cuStreamCopyAttributes(CUstream dst, CUstream src) { return copy_attrs(dst, src, false); }
CUresult CUDAAPI cuStreamCopyAttributes_ptsz(CUstream dst, CUstream src) { return copy_attrs(dst, src, true); }
