/* bound.c: see bound.h. */
#include "hook/bound.h"
#include "common/log.h"
#include "common/util.h"

#include <string.h>

/* Before any sample: a few submissions, enough to keep the GPU fed. */
#define BOUND_DEFAULT_K 8u
#define BOUND_MAX_PENDING (CS_BOUND_RING - 2u)

void cs_bound_init(struct cs_bound *b)
{
    memset(b, 0, sizeof *b);
    pthread_mutex_init(&b->mu, NULL);
}

/* Under mu: events in the current context, created once. Default events
 * (not blocking-sync): a window of one kernel leaves nothing queued behind
 * the one being waited for, and a sleeping waiter's wake-up (tens of µs)
 * would be GPU time lost at every kernel; the context's scheduling flags
 * decide between spinning and yielding, as for the job's own syncs. */
static bool ensure_events(struct cs_bound *b, CUcontext cur)
{
    if (b->ctx == cur)
        return !b->broken;
    if (b->ctx) /* another context is current: leave that one's events be */
        return false;
    for (unsigned i = 0; i < CS_BOUND_RING; i++) {
        if (cs_real.cuEventCreate(&b->ev[i], CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
            while (i-- > 0)
                cs_real.cuEventDestroy_v2(b->ev[i]);
            if (!b->broken)
                cs_warn("cannot create events to bound this job's queued work: "
                        "a revoke will drain all of it");
            b->broken = true;
            return false;
        }
    }
    b->ctx = cur;
    b->broken = false;
    b->head = b->tail = 0;
    b->have_prev = false;
    return true;
}

/* Under mu: the events no longer belong to a live context. */
static void drop_events(struct cs_bound *b)
{
    b->ctx = NULL;
    b->head = b->tail = 0;
    b->have_prev = false;
}

/* EWMA with weight 1/8: a few submissions follow a change of kernel size. */
static void sample(struct cs_bound *b, uint64_t ns)
{
    b->est_ns = b->est_ns ? b->est_ns - b->est_ns / 8 + ns / 8 : ns;
}

/* Under mu: takes completed events off the front, measuring each one's
 * distance to the one before it. */
static void retire(struct cs_bound *b)
{
    while (b->head < b->tail) {
        CUevent e = b->ev[b->head % CS_BOUND_RING];
        CUresult r = cs_real.cuEventQuery(e);
        if (r == CUDA_ERROR_NOT_READY)
            return;
        if (r != CUDA_SUCCESS) { /* the context died under us */
            drop_events(b);
            return;
        }
        float ms;
        if (b->have_prev &&
            cs_real.cuEventElapsedTime_v2(&ms, b->ev[(b->head - 1) % CS_BOUND_RING], e) ==
                CUDA_SUCCESS &&
            ms >= 0)
            sample(b, (uint64_t)((double)ms * 1e6));
        b->have_prev = true;
        b->head++;
    }
}

static uint64_t limit(const struct cs_bound *b, uint32_t window_us)
{
    if (!b->est_ns)
        return BOUND_DEFAULT_K;
    uint64_t k = (uint64_t)window_us * 1000u / b->est_ns;
    return k < 1 ? 1 : (k > BOUND_MAX_PENDING ? BOUND_MAX_PENDING : k);
}

void cs_bound_set_window(struct cs_bound *b, uint32_t window_us)
{
    pthread_mutex_lock(&b->mu);
    b->window_us = window_us;
    pthread_mutex_unlock(&b->mu);
}

bool cs_bound_admit(struct cs_bound *b)
{
    CUcontext cur = NULL;
    if (cs_real.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || !cur)
        return false;
    pthread_mutex_lock(&b->mu);
    if (!b->window_us || !ensure_events(b, cur)) {
        pthread_mutex_unlock(&b->mu);
        return false;
    }
    retire(b);
    while (b->ctx && b->window_us && b->tail - b->head >= limit(b, b->window_us)) {
        CUevent oldest = b->ev[b->head % CS_BOUND_RING];
        pthread_mutex_unlock(&b->mu);
        /* Outside the lock: other threads may retire (or even re-record)
         * this event meanwhile, which only makes the wait longer. */
        uint64_t t0 = cs_now_ns();
        cs_real.cuEventSynchronize(oldest);
        uint64_t dt = cs_now_ns() - t0;
        pthread_mutex_lock(&b->mu);
        b->waits++;
        b->wait_ns += dt;
        retire(b);
    }
    bool ok = b->ctx == cur;
    pthread_mutex_unlock(&b->mu);
    return ok;
}

void cs_bound_record(struct cs_bound *b, CUstream s, int per_thread)
{
    CUcontext cur = NULL;
    if (cs_real.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || !cur)
        return;
    if (per_thread && !s)
        s = CU_STREAM_PER_THREAD;
    pthread_mutex_lock(&b->mu);
    if (b->ctx == cur && b->tail - b->head < BOUND_MAX_PENDING &&
        cs_real.cuEventRecord(b->ev[b->tail % CS_BOUND_RING], s) == CUDA_SUCCESS) {
        b->tail++;
        b->recorded++;
    }
    pthread_mutex_unlock(&b->mu);
}

void cs_bound_forget_ctx(struct cs_bound *b, CUcontext ctx)
{
    pthread_mutex_lock(&b->mu);
    if (b->ctx == ctx)
        drop_events(b);
    pthread_mutex_unlock(&b->mu);
}

void cs_bound_drop(struct cs_bound *b)
{
    pthread_mutex_lock(&b->mu);
    drop_events(b);
    pthread_mutex_unlock(&b->mu);
}
