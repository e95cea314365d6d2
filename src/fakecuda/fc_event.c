/* fc_event.c: events.
 *
 * An event counts the records asked for (rec_gen, bumped by cuEventRecord)
 * and the records completed (done_gen, set by the RECORD op when the
 * stream's worker reaches it). It is complete when every record asked for
 * so far has completed; a waiter remembers the generation it must see, so
 * re-recording the event later does not change what an earlier
 * cuStreamWaitEvent waits for (the real driver's semantics). Events are
 * reference counted so that queued ops may outlive cuEventDestroy.
 *
 * Recording into a capturing stream records nothing: it marks the event
 * as belonging to the capture (cap_id), which lets another stream join
 * the capture through cuStreamWaitEvent (fork/join of captured work).
 */
#include "fakecuda/fc_internal.h"

#include <stdlib.h>

#define FC_EVENT_FLAGS (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)

static void event_ref(struct fc_event *e)
{
    pthread_mutex_lock(&e->lock);
    e->refs++;
    pthread_mutex_unlock(&e->lock);
}

void fc_event_unref(struct fc_event *e)
{
    pthread_mutex_lock(&e->lock);
    int left = --e->refs;
    pthread_mutex_unlock(&e->lock);
    if (left == 0) {
        pthread_cond_destroy(&e->cv);
        pthread_mutex_destroy(&e->lock);
        free(e);
    }
}

void fc_event_complete(struct fc_event *e, uint64_t gen)
{
    uint64_t now = fc_now_ns();
    pthread_mutex_lock(&e->lock);
    if (gen > e->done_gen) {
        e->done_gen = gen;
        e->ts_ns = now;
    }
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->lock);
}

void fc_event_wait_gen(struct fc_event *e, uint64_t gen)
{
    pthread_mutex_lock(&e->lock);
    while (e->done_gen < gen)
        pthread_cond_wait(&e->cv, &e->lock);
    pthread_mutex_unlock(&e->lock);
}

static CUresult event_get(CUevent h, struct fc_event **out)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_handle_is(h, FC_H_EVENT))
        return CUDA_ERROR_INVALID_HANDLE;
    *out = (struct fc_event *)h;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    if (!phEvent || (Flags & ~(unsigned)FC_EVENT_FLAGS))
        return CUDA_ERROR_INVALID_VALUE;
    if ((Flags & CU_EVENT_INTERPROCESS) && !(Flags & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c;
    CUresult r = fc_ctx_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_event *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->flags = Flags;
    e->refs = 1;
    pthread_mutex_init(&e->lock, NULL);
    pthread_cond_init(&e->cv, NULL);
    if (fc_handle_add(e, FC_H_EVENT) != 0) {
        fc_event_unref(e);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *phEvent = (CUevent)e;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent)
{
    struct fc_event *e;
    CUresult r = event_get(hEvent, &e);
    if (r != CUDA_SUCCESS)
        return r;
    fc_handle_del(e);
    fc_event_unref(e);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy(CUevent hEvent)
{
    return cuEventDestroy_v2(hEvent);
}

static CUresult event_record(CUevent h, CUstream hs, bool pt, unsigned flags)
{
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_event *e;
    CUresult r = event_get(h, &e);
    struct fc_stream *s;
    if (r == CUDA_SUCCESS)
        r = fc_stream_resolve(hs, pt, &s);
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_ctx *c = s->ctx;
    pthread_mutex_lock(&c->lock);
    if (s->cap) {
        /* Captured: only the membership is recorded (see file comment). */
        if (flags & CU_EVENT_RECORD_EXTERNAL) {
            fc_capture_invalidate(s->cap);
            r = CUDA_ERROR_NOT_SUPPORTED;
        } else {
            pthread_mutex_lock(&e->lock);
            e->cap_id = s->cap->id;
            pthread_mutex_unlock(&e->lock);
        }
        pthread_mutex_unlock(&c->lock);
        return r;
    }
    pthread_mutex_unlock(&c->lock);
    struct fc_op *op = fc_op_new(FC_OP_EVENT_RECORD);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    event_ref(e);
    pthread_mutex_lock(&e->lock);
    e->cap_id = 0;
    op->u.ev.gen = ++e->rec_gen;
    pthread_mutex_unlock(&e->lock);
    uint64_t gen = op->u.ev.gen;
    op->u.ev.ev = e;
    r = fc_submit(s, op, NULL);
    if (r != CUDA_SUCCESS) {
        /* Never queued: complete its generation so nobody waits on it. */
        fc_event_complete(e, gen);
        fc_event_unref(e);
    }
    return r;
}

CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream) { return event_record(hEvent, hStream, false, 0); }
CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) { return event_record(hEvent, hStream, true, 0); }
CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags) { return event_record(hEvent, hStream, false, flags); }
CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream, unsigned int flags) { return event_record(hEvent, hStream, true, flags); }

/* An event last recorded into a capture that is still going on cannot be
 * queried or waited for from the host: CUDA_ERROR_CAPTURED_EVENT, and the
 * capture is invalidated (the real driver's behaviour). */
static CUresult refuse_if_captured(struct fc_event *e)
{
    pthread_mutex_lock(&e->lock);
    uint64_t id = e->cap_id;
    pthread_mutex_unlock(&e->lock);
    return id && fc_capture_invalidate_id(id) ? CUDA_ERROR_CAPTURED_EVENT : CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
    struct fc_event *e;
    CUresult r = event_get(hEvent, &e);
    if (r == CUDA_SUCCESS)
        r = refuse_if_captured(e);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&e->lock);
    bool done = e->done_gen >= e->rec_gen;
    pthread_mutex_unlock(&e->lock);
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
    struct fc_event *e;
    CUresult r = event_get(hEvent, &e);
    if (r == CUDA_SUCCESS)
        r = refuse_if_captured(e);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&e->lock);
    uint64_t gen = e->rec_gen;
    pthread_mutex_unlock(&e->lock);
    fc_event_wait_gen(e, gen);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    if (!pMilliseconds)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_event *a, *b;
    CUresult r = event_get(hStart, &a);
    if (r == CUDA_SUCCESS)
        r = event_get(hEnd, &b);
    if (r != CUDA_SUCCESS)
        return r;
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING)
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&a->lock);
    uint64_t a_rec = a->rec_gen, a_done = a->done_gen, a_ts = a->ts_ns;
    pthread_mutex_unlock(&a->lock);
    pthread_mutex_lock(&b->lock);
    uint64_t b_rec = b->rec_gen, b_done = b->done_gen, b_ts = b->ts_ns;
    pthread_mutex_unlock(&b->lock);
    if (a_rec == 0 || b_rec == 0)
        return CUDA_ERROR_INVALID_HANDLE;
    if (a_done < a_rec || b_done < b_rec)
        return CUDA_ERROR_NOT_READY;
    *pMilliseconds = (float)((double)((int64_t)(b_ts - a_ts)) / 1e6);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    return cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd);
}

/* cuStreamWaitEvent: joins the event's capture when it was recorded into
 * one, otherwise queues a wait for the generation recorded so far. */
static CUresult stream_wait_event(CUstream hs, bool pt, CUevent h, unsigned flags)
{
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_event *e;
    CUresult r = event_get(h, &e);
    struct fc_stream *s;
    if (r == CUDA_SUCCESS)
        r = fc_stream_resolve(hs, pt, &s);
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_ctx *c = s->ctx;
    pthread_mutex_lock(&c->lock);
    pthread_mutex_lock(&e->lock);
    uint64_t cap_id = e->cap_id, gen = e->rec_gen, done = e->done_gen;
    pthread_mutex_unlock(&e->lock);
    struct fc_capture *cap = NULL;
    int where = cap_id ? fc_capture_lookup(cap_id, c, &cap) : FC_CAP_NONE;
    if (where != FC_CAP_NONE) {
        if (where == FC_CAP_ELSEWHERE || s->kind == FC_S_LEGACY)
            r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        else if (s->cap && s->cap != cap)
            r = CUDA_ERROR_STREAM_CAPTURE_MERGE;
        else
            s->cap = cap;               /* join (a no-op if already in) */
        pthread_mutex_unlock(&c->lock);
        return r;
    }
    if (s->cap && gen > done) {
        /* A captured stream may not depend on uncaptured pending work. */
        fc_capture_invalidate(s->cap);
        pthread_mutex_unlock(&c->lock);
        return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    }
    pthread_mutex_unlock(&c->lock);
    if (gen == 0 || done >= gen || cap_id)
        return CUDA_SUCCESS;
    struct fc_op *op = fc_op_new(FC_OP_EVENT_WAIT);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    event_ref(e);
    op->u.ev.ev = e;
    op->u.ev.gen = gen;
    r = fc_submit(s, op, NULL);
    if (r != CUDA_SUCCESS)
        fc_event_unref(e);
    return r;
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    return stream_wait_event(hStream, false, hEvent, Flags);
}

CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    return stream_wait_event(hStream, true, hEvent, Flags);
}
