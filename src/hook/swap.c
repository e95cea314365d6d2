/* swap.c: see swap.h. */
#include "hook/swap.h"
#include "hook/backing.h"
#include "hook/client.h"
#include "hook/config.h"
#include "common/log.h"
#include "common/util.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the swap context and stream ----------------------------------------- */

/* Why the swap context or stream is not there yet, at debug level: the
 * callers retry (a grant every 100 ms) and report only a status. */
static bool not_ready(int dev, const char *step, CUresult r)
{
    cs_debug("GPU %d: no swap stream yet: %s failed (error %d)", dev, step, (int)r);
    return false;
}

bool cs_segs_ensure_ready_locked(struct cs_segs *s, int dev)
{
    if (s->ready)
        return true;
    CUdevice d;
    CUresult r = cs_real.cuDeviceGet(&d, dev);
    if (r != CUDA_SUCCESS)
        return not_ready(dev, "cuDeviceGet", r);
    /* Retained once: a retry after a later step failed must not retain
     * the primary context again (each retain is one more reference). */
    if (!s->pctx && (r = cs_real.cuDevicePrimaryCtxRetain(&s->pctx, d)) != CUDA_SUCCESS) {
        s->pctx = NULL;
        return not_ready(dev, "cuDevicePrimaryCtxRetain", r);
    }
    if ((r = cs_real.cuCtxPushCurrent_v2(s->pctx)) != CUDA_SUCCESS)
        return not_ready(dev, "cuCtxPushCurrent", r);
    r = cs_real.cuStreamCreate(&s->stream, CU_STREAM_NON_BLOCKING);
    CUcontext popped;
    cs_real.cuCtxPopCurrent_v2(&popped);
    if (r != CUDA_SUCCESS)
        return not_ready(dev, "cuStreamCreate", r);
    s->ready = true;
    return true;
}

/* ---- room on the GPU ------------------------------------------------------- */

/* cuMemCreate for a segment, asking the scheduler to make room when the
 * GPU is full of other jobs' memory. */
/* Room can be short for a moment that no eviction helps with: a job that
 * is exiting holds its memory until the driver tears its context down, and
 * cannot swap it out meanwhile. So a refused ROOM is asked again, with a
 * growing pause, for up to 5 s before the allocation fails. */
#define ROOM_PATIENCE_NS 5000000000ull

static CUresult map_with_room_locked(struct cs_dev *d, struct cs_seg *g)
{
    CUresult r = cs_seg_map_locked(g);
    bool asked = false;
    uint64_t t0 = cs_now_ns();
    for (uint32_t pause_ms = 0; r == CUDA_ERROR_OUT_OF_MEMORY;) {
        if (asked && cs_now_ns() - t0 > ROOM_PATIENCE_NS)
            break;
        if (cs_client_request_room(d->ordinal, g->size) != 0) {
            if (!cs_client_is_connected())
                break;
            cs_backoff_sleep(&pause_ms);
        }
        asked = true;
        r = cs_seg_map_locked(g);
    }
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        char b[32];
        cs_warn("GPU %d is full: %s could not be placed%s", d->ordinal,
                cs_format_size(g->size, b, sizeof b),
                asked ? " (the scheduler could not make room)" : " (no scheduler to make room)");
    }
    return r;
}

CUresult cs_swap_map_new_locked(struct cs_dev *d, struct cs_segs *s, struct cs_seg *g)
{
    (void)s;
    return map_with_room_locked(d, g);
}

/* ---- swap-out -------------------------------------------------------------- */

/* ---- choosing what to move out ---------------------------------------------
 * A swap-out is all-or-nothing per segment, and segments range from 2 MiB
 * chunks to one 27 GB tensor. Taking the largest first moved that whole
 * tensor (29 GB, 14 s with its backing still to pin) when the scheduler
 * asked for 1.6 GB on the H100. So each pick is costed: copying out and
 * later back in (~0.04 s/GiB at ~50 GB/s each way) and pinning what
 * backing it still lacks (~0.25 s/GiB). A pick is the cheapest segment
 * that covers the rest of the request on its own, or, when none does, the
 * one moving the most bytes per unit of cost (then the next). With every
 * backing pinned that is best fit: the smallest segment that is enough,
 * else the largest. */

/* Cost of moving g out and back, in 16 MiB copy units (integer: the
 * comparisons must be exact). */
static uint64_t evict_cost(const struct cs_seg *g)
{
    uint64_t pinned = cs_backing_complete(&g->backing) ? g->size : g->backing.pinned;
    return (g->size >> 24) + ((g->size - pinned) >> 24) * 6 + 1; /* 0.04 : 0.25 s/GiB */
}

/* True if a is the better pick than b for `rest` more bytes. */
static bool better_pick(const struct cs_seg *a, const struct cs_seg *b, uint64_t rest)
{
    bool ac = a->size >= rest, bc = b->size >= rest;
    if (ac != bc)
        return ac;
    uint64_t ca = evict_cost(a), cb = evict_cost(b);
    if (ac) /* both enough alone: the cheaper; whole segments before shared chunks */
        return ca != cb ? ca < cb : (a->chunk != b->chunk ? !a->chunk : a->size < b->size);
    /* neither: the most bytes per cost, then the larger (fewer operations) */
    unsigned __int128 ra = (unsigned __int128)a->size * cb, rb = (unsigned __int128)b->size * ca;
    return ra != rb ? ra > rb : a->size > b->size;
}

static bool movable(const struct cs_seg *g)
{
    return g->state == CS_SEG_RESIDENT && !g->exported; /* exported: mapped elsewhere too */
}

/* Fills out[] with up to max movable segments totalling at least `want`
 * bytes (or all there are), in eviction order. Returns the count. */
static int choose_victims_locked(struct cs_segs *s, uint64_t want, struct cs_seg **out, int max)
{
    int all = 0;
    for (struct cs_seg *g = s->head; g; g = g->next)
        all += movable(g);
    if (!all)
        return 0;
    struct cs_seg **cand = malloc((size_t)all * sizeof *cand);
    if (!cand)
        return 0;
    int k = 0;
    for (struct cs_seg *g = s->head; g; g = g->next)
        if (movable(g))
            cand[k++] = g;
    int n = 0;
    uint64_t got = 0;
    while (k > 0 && n < max && got < want) {
        int best = 0;
        for (int i = 1; i < k; i++)
            if (better_pick(cand[i], cand[best], want - got))
                best = i;
        out[n++] = cand[best];
        got += cand[best]->size;
        cand[best] = cand[--k];
    }
    free(cand);
    return n;
}

#define SWAP_BATCH 512

/* One batch: copy out, wait, then unmap what was copied. */
static void swap_out_batch_locked(struct cs_segs *s, struct cs_seg **v, int n,
                                  struct cs_swap_result *res)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        if (!cs_backing_ensure_locked(s, v[i])) {
            res->status = CUDA_ERROR_OUT_OF_MEMORY; /* host memory: keep the rest */
            break;
        }
        /* Unified addressing: both ends are virtual addresses the device
         * reaches, so one copy call serves either kind of backing. */
        CUresult r = cs_real.cuMemcpyAsync(v[i]->backing.va, v[i]->va, v[i]->size, s->stream);
        if (r != CUDA_SUCCESS) {
            res->status = r;
            break;
        }
        ok++;
    }
    /* All-or-nothing per segment: unmap only what is known to be copied. */
    CUresult sync = cs_real.cuStreamSynchronize(s->stream);
    if (sync != CUDA_SUCCESS) {
        res->status = sync;
        ok = 0;
    }
    for (int i = 0; i < ok; i++) {
        CUresult r = cs_seg_unmap_locked(v[i]);
        if (r != CUDA_SUCCESS) { /* still on the GPU, intact: it stays resident */
            res->status = res->status == CUDA_SUCCESS ? r : res->status;
            continue;
        }
        cs_seg_set_state_locked(s, v[i], CS_SEG_SWAPPED);
        res->bytes += v[i]->size;
    }
}

/* What stopped a swap-out, named. Memory that was not copied stays
 * resident (all-or-nothing per segment), so nothing is lost either way; a
 * driver that is shutting down (the process exits while a revoke drains)
 * is said at info level: its memory is about to go with it. */
static void swap_out_failed(const struct cs_dev *d, const struct cs_swap_result *res)
{
    const char *name = "?";
    cs_real.cuGetErrorName(res->status, &name);
    bool exiting = res->status == CUDA_ERROR_DEINITIALIZED ||
                   res->status == CUDA_ERROR_CONTEXT_IS_DESTROYED;
    cs_log(exiting ? CS_LOG_INFO : CS_LOG_WARN,
           "GPU %d: swap-out stopped after %llu bytes: %s (%s); the rest stays resident%s",
           d->ordinal, (unsigned long long)res->bytes,
           res->status == CUDA_ERROR_OUT_OF_MEMORY ? "no host memory for the backing copy"
                                                   : "a copy or unmap failed",
           name, exiting ? ": the process is exiting" : "");
}

struct cs_swap_result cs_swap_out_locked(struct cs_dev *d, uint64_t bytes)
{
    struct cs_swap_result res = {CUDA_SUCCESS, 0, 0};
    struct cs_segs *s = &cs_segs[d->ordinal];
    struct cs_seg *v[SWAP_BATCH];
    uint64_t t0 = cs_now_ns();
    if (s->resident <= s->exported)
        return res;
    if (!cs_segs_ensure_ready_locked(s, d->ordinal)) {
        res.status = CUDA_ERROR_NOT_INITIALIZED;
        return res;
    }
    /* The pinner stops between pieces (its piece in flight lands first):
     * the backing it has started is finished here rather than pinned
     * twice, and this swap-out's own pinning, if any, has the host to
     * itself. */
    cs_backing_hold_pinner_locked(s);
    cs_real.cuCtxPushCurrent_v2(s->pctx);
    while (res.bytes < bytes && res.status == CUDA_SUCCESS) {
        int n = choose_victims_locked(s, bytes - res.bytes, v, SWAP_BATCH);
        if (n == 0)
            break;
        swap_out_batch_locked(s, v, n, &res);
    }
    CUcontext popped;
    cs_real.cuCtxPopCurrent_v2(&popped);
    cs_backing_release_pinner_locked(s);
    res.ns = cs_now_ns() - t0;
    if (res.bytes) {
        s->swap_out_bytes += res.bytes;
        s->swap_out_ns += res.ns;
        s->swap_outs++;
    }
    if (res.status != CUDA_SUCCESS)
        swap_out_failed(d, &res);
    return res;
}

/* ---- swap-in ---------------------------------------------------------------- */

struct cs_swap_result cs_swap_in_locked(struct cs_dev *d, uint64_t budget, bool prefetch)
{
    struct cs_swap_result res = {CUDA_SUCCESS, 0, 0};
    struct cs_segs *s = &cs_segs[d->ordinal];
    uint64_t t0 = cs_now_ns();
    if (!s->swapped && !s->reserved)
        return res;
    if (!cs_segs_ensure_ready_locked(s, d->ordinal)) {
        res.status = CUDA_ERROR_NOT_INITIALIZED;
        return res;
    }
    cs_real.cuCtxPushCurrent_v2(s->pctx);
    uint64_t placed = 0;
    for (struct cs_seg *g = s->head; g; g = g->next) {
        if (g->state == CS_SEG_RESIDENT)
            continue;
        if (placed + g->size > budget)
            continue; /* a smaller one may still fit */
        /* Memory a refused unmap left in place is used as it is. */
        CUresult r = g->h               ? CUDA_SUCCESS
                     : prefetch         ? cs_seg_map_locked(g)
                                        : map_with_room_locked(d, g);
        if (r != CUDA_SUCCESS) {
            res.status = r;
            break;
        }
        placed += g->size;
        if (g->state == CS_SEG_SWAPPED) {
            r = cs_real.cuMemcpyAsync(g->va, g->backing.va, g->size, s->stream);
            if (r != CUDA_SUCCESS) {
                cs_seg_unmap_locked(g);
                res.status = r;
                break;
            }
            res.bytes += g->size;
        }
        cs_seg_set_state_locked(s, g, CS_SEG_RESIDENT);
    }
    CUresult sync = cs_real.cuStreamSynchronize(s->stream);
    if (sync != CUDA_SUCCESS && res.status == CUDA_SUCCESS)
        res.status = sync;
    CUcontext popped;
    cs_real.cuCtxPopCurrent_v2(&popped);
    res.ns = cs_now_ns() - t0;
    if (res.bytes) {
        s->swap_in_bytes += res.bytes;
        s->swap_in_ns += res.ns;
        s->swap_ins++;
    }
    /* Each attempt at debug level: the grant retries every 100 ms and says
     * what keeps it waiting every 5 s (lease.c). */
    if (res.status != CUDA_SUCCESS && !prefetch)
        cs_debug("GPU %d: restoring device memory stopped (error %d) after %llu bytes",
                 d->ordinal, (int)res.status, (unsigned long long)res.bytes);
    else if (res.status != CUDA_SUCCESS)
        cs_debug("GPU %d: prefetch stopped (error %d) after %llu bytes", d->ordinal,
                 (int)res.status, (unsigned long long)res.bytes);
    return res;
}
