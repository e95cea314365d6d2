/* swap.c: see swap.h. */
#include "hook/swap.h"
#include "hook/config.h"
#include "common/log.h"
#include "common/util.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CS_ALL_BYTES UINT64_MAX

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

/* Queues g's copy out as its backing grows: each step's pieces (up to
 * CS_LEND_MAX lent ones, or one pinned here) are copied into while the
 * next step is taken in. A lent piece's import costs ~14 ms/GiB on an
 * H100 and the copy ~19 ms/GiB: taken one after the other they moved
 * 16 GiB at 32 GB/s (bench/results/oversubscription.md, run P1); this
 * way the import hides behind the copy. Unified addressing: both ends
 * are virtual addresses the device reaches, so one copy call serves
 * either kind of backing. CUDA_ERROR_OUT_OF_MEMORY: no more backing
 * (host memory); the part already queued is harmless, g stays resident. */
static CUresult copy_out_locked(struct cs_segs *s, struct cs_seg *g)
{
    for (uint64_t done = 0;;) {
        uint64_t ready = g->backing.pinned; /* the usable prefix */
        if (ready > done) {
            CUresult r = cs_real.cuMemcpyAsync(g->backing.va + done, g->va + done, ready - done,
                                               s->stream);
            if (r != CUDA_SUCCESS)
                return r;
            done = ready;
        }
        if (done >= g->size)
            return CUDA_SUCCESS;
        if (!cs_backing_grow(&g->backing, g->size, g->dev, &s->backing))
            return CUDA_ERROR_OUT_OF_MEMORY;
    }
}

/* One batch: copy out, wait, then unmap what was copied. */
static void swap_out_batch_locked(struct cs_segs *s, struct cs_seg **v, int n,
                                  struct cs_swap_result *res)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        CUresult r = copy_out_locked(s, v[i]);
        if (r != CUDA_SUCCESS) {
            res->status = r; /* host memory or the driver: keep the rest */
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
        CUresult r = cs_seg_evict_locked(s, v[i]); /* the backing is shown later */
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
static void swap_out_failed(const struct cs_dev *d, const struct cs_swap_result *res,
                            bool pushed)
{
    const char *name = "?";
    cs_real.cuGetErrorName(res->status, &name);
    bool exiting = res->status == CUDA_ERROR_DEINITIALIZED ||
                   res->status == CUDA_ERROR_CONTEXT_IS_DESTROYED;
    const char *what = !pushed ? "its context could not be made current"
                       : res->status == CUDA_ERROR_OUT_OF_MEMORY ? "no host memory for the backing copy"
                                                                 : "a copy or unmap failed";
    cs_log(exiting ? CS_LOG_INFO : CS_LOG_WARN,
           "GPU %d: swap-out stopped after %llu bytes: %s (%s); the rest stays resident%s",
           d->ordinal, (unsigned long long)res->bytes, what, name,
           exiting ? ": the process is exiting" : "");
}

static struct cs_swap_result swap_out_locked(struct cs_dev *d, uint64_t bytes)
{
    struct cs_swap_result res = {CUDA_SUCCESS, 0, 0};
    struct cs_segs *s = &cs_segs[d->ordinal];
    struct cs_seg *v[SWAP_BATCH];
    uint64_t t0 = cs_now_ns();
    if (s->resident <= s->exported)
        return res;
    if (!cs_segs_ready_locked(s, d->ordinal)) {
        res.status = CUDA_ERROR_NOT_INITIALIZED;
        return res;
    }
    /* The pinner stops between pieces (its piece in flight lands first):
     * the backing it has started is finished here rather than pinned
     * twice, and this swap-out's own pinning, if any, has the host to
     * itself. */
    cs_seg_hold_pinner_locked(s);
    /* Not pushed (the context is going: the process exits), nothing is
     * copied and nothing popped: a pop would take the calling thread's own
     * context off its stack. */
    res.status = cs_real.cuCtxPushCurrent_v2(s->pctx);
    bool pushed = res.status == CUDA_SUCCESS;
    if (pushed) {
        while (res.bytes < bytes && res.status == CUDA_SUCCESS) {
            int n = choose_victims_locked(s, bytes - res.bytes, v, SWAP_BATCH);
            if (n == 0)
                break;
            swap_out_batch_locked(s, v, n, &res);
        }
        CUcontext popped;
        cs_real.cuCtxPopCurrent_v2(&popped);
    }
    cs_seg_release_pinner_locked(s);
    res.ns = cs_now_ns() - t0;
    if (res.bytes) {
        s->swap_out_bytes += res.bytes;
        s->swap_out_ns += res.ns;
        s->swap_outs++;
    }
    if (res.status != CUDA_SUCCESS)
        swap_out_failed(d, &res, pushed);
    return res;
}

/* ---- swap-in ---------------------------------------------------------------- */

/* Places g (memory a refused eviction left in place is used as it is)
 * and queues its copy back from the backing, which stays mapped at its
 * own range for the copy. */
static CUresult restore_one_locked(struct cs_dev *d, struct cs_segs *s, struct cs_seg *g,
                                   bool prefetch, struct cs_swap_result *res)
{
    CUresult r = cs_seg_place_locked(d, g, !prefetch);
    if (r != CUDA_SUCCESS)
        return r;
    if (g->state == CS_SEG_SWAPPED) {
        r = cs_real.cuMemcpyAsync(g->va, g->backing.va, g->size, s->stream);
        if (r != CUDA_SUCCESS) {
            cs_seg_evict_locked(s, g); /* refused: left placed, used as it is next time */
            return r;
        }
        g->copied = true;
        res->bytes += g->size;
    }
    cs_seg_set_state_locked(s, g, CS_SEG_RESIDENT);
    return CUDA_SUCCESS;
}

/* The copies back were not confirmed (the stream's synchronize failed):
 * what they brought is not known to be there, so their segments are
 * swapped again, left placed: the next attempt copies them once more from
 * the backing, which still holds the bytes. */
static void unconfirm_locked(struct cs_segs *s, struct cs_swap_result *res)
{
    for (struct cs_seg *g = s->head; g; g = g->next) {
        if (!g->copied)
            continue;
        cs_seg_set_state_locked(s, g, CS_SEG_SWAPPED);
        res->bytes -= g->size;
    }
}

/* Restores what fits in budget (bytes placed), with s's context current,
 * and waits for the copies. */
static void restore_all_locked(struct cs_dev *d, struct cs_segs *s, uint64_t budget,
                               bool prefetch, struct cs_swap_result *res)
{
    uint64_t placed = 0;
    for (struct cs_seg *g = s->head; g && res->status == CUDA_SUCCESS; g = g->next) {
        if (g->state == CS_SEG_RESIDENT || placed + g->size > budget)
            continue; /* over the budget: a smaller one may still fit */
        res->status = restore_one_locked(d, s, g, prefetch, res);
        if (res->status == CUDA_SUCCESS)
            placed += g->size;
    }
    CUresult sync = cs_real.cuStreamSynchronize(s->stream);
    if (sync != CUDA_SUCCESS) {
        unconfirm_locked(s, res);
        if (res->status == CUDA_SUCCESS)
            res->status = sync;
    }
    for (struct cs_seg *g = s->head; g; g = g->next)
        g->copied = false;
}

static struct cs_swap_result swap_in_locked(struct cs_dev *d, uint64_t budget, bool prefetch)
{
    struct cs_swap_result res = {CUDA_SUCCESS, 0, 0};
    struct cs_segs *s = &cs_segs[d->ordinal];
    uint64_t t0 = cs_now_ns();
    if (!s->swapped && !s->reserved)
        return res;
    if (!cs_segs_ready_locked(s, d->ordinal)) {
        res.status = CUDA_ERROR_NOT_INITIALIZED;
        return res;
    }
    res.status = cs_real.cuCtxPushCurrent_v2(s->pctx); /* as in swap_out_locked */
    if (res.status == CUDA_SUCCESS) {
        restore_all_locked(d, s, budget, prefetch, &res);
        CUcontext popped;
        cs_real.cuCtxPopCurrent_v2(&popped);
    }
    res.ns = cs_now_ns() - t0;
    if (res.bytes) {
        s->swap_in_bytes += res.bytes;
        s->swap_in_ns += res.ns;
        s->swap_ins++;
    }
    /* Each attempt at debug level: the grant retries every 100 ms and says
     * what keeps it waiting every 5 s (jobs.c). */
    if (res.status != CUDA_SUCCESS && !prefetch)
        cs_debug("GPU %d: restoring device memory stopped (error %d) after %llu bytes",
                 d->ordinal, (int)res.status, (unsigned long long)res.bytes);
    else if (res.status != CUDA_SUCCESS)
        cs_debug("GPU %d: prefetch stopped (error %d) after %llu bytes", d->ordinal,
                 (int)res.status, (unsigned long long)res.bytes);
    return res;
}

/* ---- the entry points: each takes segs.mu -------------------------------------- */

/* Takes mu ahead of the shower (cs_swap_show), which yields to wanted. */
static void lock_engine(struct cs_segs *s)
{
    atomic_fetch_add_explicit(&s->wanted, 1, memory_order_relaxed);
    pthread_mutex_lock(&s->mu);
    atomic_fetch_sub_explicit(&s->wanted, 1, memory_order_relaxed);
}

struct cs_swap_result cs_swap_out(struct cs_dev *d, uint64_t bytes)
{
    struct cs_segs *s = &cs_segs[d->ordinal];
    lock_engine(s);
    struct cs_swap_result res = swap_out_locked(d, bytes);
    pthread_mutex_unlock(&s->mu);
    return res;
}

struct cs_swap_result cs_swap_restore(struct cs_dev *d,
                                      void (*then)(struct cs_dev *, uint64_t, void *), void *arg)
{
    struct cs_segs *s = &cs_segs[d->ordinal];
    lock_engine(s);
    struct cs_swap_result res = swap_in_locked(d, CS_ALL_BYTES, false);
    if (res.status == CUDA_SUCCESS)
        then(d, res.bytes, arg);
    pthread_mutex_unlock(&s->mu);
    return res;
}

struct cs_swap_result cs_swap_prefetch(struct cs_dev *d, uint64_t budget)
{
    struct cs_segs *s = &cs_segs[d->ordinal];
    lock_engine(s);
    struct cs_swap_result res = swap_in_locked(d, budget, true);
    pthread_mutex_unlock(&s->mu);
    return res;
}

/* ---- pinning ahead of need -------------------------------------------------- */

/* Pin-ahead gives way to the job's own allocations and frees: in one
 * process the driver lets a pinning thread hold the lock they need for the
 * whole of a pin, piece after piece (cs_pincontend: a 1 GiB allocation
 * waited 1.4 s behind an 8 GiB pin in 64 MiB pieces). Waits, between
 * pieces, while an application thread is inside one. */
static void yield_to_app(struct cs_dev *d)
{
    struct timespec ms = {0, 1000000};
    while (atomic_load_explicit(&d->host.busy, memory_order_relaxed) > 0)
        nanosleep(&ms, NULL);
}

/* Makes the device's context current on this (pinner) thread, which
 * pinning pieces and unmapping them need; false when the device has none
 * yet. The caller pops it. */
static bool push_pinner_ctx(struct cs_dev *d, struct cs_segs *s)
{
    pthread_mutex_lock(&s->mu);
    bool ready = cs_segs_ready_locked(s, d->ordinal);
    pthread_mutex_unlock(&s->mu);
    return ready && cs_real.cuCtxPushCurrent_v2(s->pctx) == CUDA_SUCCESS;
}

struct cs_swap_result cs_swap_prepare(struct cs_dev *d, uint64_t bytes)
{
    struct cs_swap_result res = {CUDA_SUCCESS, 0, 0};
    struct cs_segs *s = &cs_segs[d->ordinal];
    uint64_t t0 = cs_now_ns();
    if (!push_pinner_ctx(d, s)) {
        res.status = CUDA_ERROR_NOT_INITIALIZED;
        return res;
    }
    while (res.bytes < bytes) {
        yield_to_app(d);
        pthread_mutex_lock(&s->mu);
        struct cs_seg *g = cs_seg_claim_unbacked_locked(s);
        pthread_mutex_unlock(&s->mu);
        if (!g)
            break;
        /* Pin without the lock (~15 ms per 64 MiB piece): while `pinning`
         * names g, nothing else touches its backing or frees it. */
        uint64_t before = g->backing.pinned;
        bool ok = cs_backing_step(&g->backing, g->size, g->dev);
        uint64_t got = g->backing.pinned - before;
        pthread_mutex_lock(&s->mu);
        cs_seg_unclaim_locked(s, g, before);
        pthread_mutex_unlock(&s->mu);
        if (!ok) {
            res.status = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        res.bytes += got;
    }
    CUcontext popped;
    cs_real.cuCtxPopCurrent_v2(&popped);
    res.ns = cs_now_ns() - t0;
    return res;
}

/* ---- showing swapped memory at its addresses ----------------------------- */

void cs_swap_show(struct cs_dev *d)
{
    struct cs_segs *s = &cs_segs[d->ordinal];
    if (!cs_seg_unshown(d->ordinal))
        return;
    pthread_mutex_lock(&s->mu);
    bool ready = cs_segs_ready_locked(s, d->ordinal);
    pthread_mutex_unlock(&s->mu);
    if (!ready || cs_real.cuCtxPushCurrent_v2(s->pctx) != CUDA_SUCCESS)
        return; /* shown at the next attempt; placed segments never need it */
    /* Stops for the swap engine: what is left is either placed by it or
     * shown by the SHOW queued after its job. */
    for (bool more = true; more && !atomic_load_explicit(&s->wanted, memory_order_relaxed);) {
        yield_to_app(d);
        pthread_mutex_lock(&s->mu);
        more = cs_seg_show_next_locked(s);
        pthread_mutex_unlock(&s->mu);
    }
    CUcontext popped;
    cs_real.cuCtxPopCurrent_v2(&popped);
}

/* ---- keeping host backing within a budget --------------------------------- */

/* Takes up to max backings of resident segments off them into drop[]:
 * first every one holding pieces of the node's pool (lent for swapping,
 * they go back for whoever swaps next: the pool, not this process, keeps
 * pinned memory across swaps), then, while the device's backing exceeds
 * keep, the largest. */
static int trim_pick_locked(struct cs_segs *s, uint64_t keep, uint64_t *took,
                            struct cs_backing *drop, int max)
{
    (void)took;
    int n = 0;
    for (struct cs_seg *g = s->head; g && n < max; g = g->next) {
        if (g->state == CS_SEG_RESIDENT && cs_backing_lent(&g->backing)) {
            drop[n++] = g->backing;
            s->backing -= g->backing.pinned;
            memset(&g->backing, 0, sizeof g->backing);
        }
    }
    while (n < max && s->backing > keep) {
        struct cs_seg *big = NULL;
        for (struct cs_seg *g = s->head; g; g = g->next)
            if (g->state == CS_SEG_RESIDENT && g->backing.size &&
                (!big || g->backing.pinned > big->backing.pinned))
                big = g;
        if (!big)
            break;
        drop[n++] = big->backing;
        s->backing -= big->backing.pinned;
        memset(&big->backing, 0, sizeof big->backing);
    }
    return n;
}

/* Frees the backings pick() takes off resident segments, a batch at a
 * time: picked under segs.mu with the pinner held off, freed unlocked. */
typedef int (*backing_pick)(struct cs_segs *s, uint64_t arg, uint64_t *took,
                            struct cs_backing *drop, int max);
static void drop_backings(struct cs_segs *s, backing_pick pick, uint64_t arg, uint64_t *took)
{
    enum { BATCH = 64 };
    for (;;) {
        struct cs_backing drop[BATCH];
        pthread_mutex_lock(&s->mu);
        cs_seg_hold_pinner_locked(s);
        int n = pick(s, arg, took, drop, BATCH);
        cs_seg_release_pinner_locked(s);
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < n; i++)
            cs_backing_free(&drop[i]);
        if (n < BATCH)
            return;
    }
}

/* Takes up to max backings holding pieces of the node's pool off resident
 * segments into drop[], until `bytes` (counted in *took) are off; not the
 * one the pinner is taking a piece in for (none while it is held off). */
static int giveback_pick_locked(struct cs_segs *s, uint64_t bytes, uint64_t *took,
                                struct cs_backing *drop, int max)
{
    int n = 0;
    for (struct cs_seg *g = s->head; g && n < max && *took < bytes; g = g->next) {
        if (g != s->pinning && g->state == CS_SEG_RESIDENT && cs_backing_lent(&g->backing)) {
            *took += g->backing.pinned;
            drop[n++] = g->backing;
            s->backing -= g->backing.pinned;
            memset(&g->backing, 0, sizeof g->backing);
        }
    }
    return n;
}

struct cs_swap_result cs_swap_giveback(struct cs_dev *d, uint64_t bytes)
{
    struct cs_swap_result res = {CUDA_SUCCESS, 0, 0};
    struct cs_segs *s = &cs_segs[d->ordinal];
    uint64_t t0 = cs_now_ns();
    if (!push_pinner_ctx(d, s)) {
        res.status = CUDA_ERROR_NOT_INITIALIZED;
        return res;
    }
    drop_backings(s, giveback_pick_locked, bytes, &res.bytes);
    CUcontext popped;
    cs_real.cuCtxPopCurrent_v2(&popped);
    res.ns = cs_now_ns() - t0;
    return res;
}

/* A holder's allocation or restore that finds the GPU full gives the
 * node's pool back the pieces behind its resident memory before it asks
 * for room (issue 20): the victims' swap-outs for that room need backing,
 * and when the pool is spent (the memory that is out holds most of it)
 * they pinned their own at ~4 GB/s. On the H200 (4 x 45 GB, 8 s slices)
 * a new holder's restore waited 5.8 s for victims pinning 18 GiB while it
 * held, idle, the pieces of the 32 GB it had just restored; pin-ahead
 * pieces likewise (2 GiB rooms at jobs' ends waited 33 ms for a GIVEBACK
 * from someone else). The daemon cannot ask a holder (takeback.c: its
 * hook holds segs.mu while its room is made), so the holder does it here.
 * A real move now is worth more than a revoke's swap-out later, which
 * borrows again. With segs.mu held: the restore's copies out of those
 * pieces are waited for first (they are then confirmed: unconfirm_locked
 * must not count them again), and a segment the pinner is taking a piece
 * in for is left alone (its borrow may wait up to 2 s). Nothing when the
 * stream cannot be synchronized: the pieces stay. */
uint64_t cs_swap_lend_back_locked(struct cs_dev *d)
{
    enum { BATCH = 64 };
    struct cs_segs *s = &cs_segs[d->ordinal];
    bool any = false;
    for (struct cs_seg *g = s->head; g && !any; g = g->next)
        any = g != s->pinning && g->state == CS_SEG_RESIDENT && cs_backing_lent(&g->backing);
    if (!any || !cs_segs_ready_locked(s, d->ordinal) ||
        cs_real.cuCtxPushCurrent_v2(s->pctx) != CUDA_SUCCESS)
        return 0;
    CUresult sync = cs_real.cuStreamSynchronize(s->stream);
    uint64_t took = 0;
    if (sync == CUDA_SUCCESS) {
        for (struct cs_seg *g = s->head; g; g = g->next)
            g->copied = false;
        for (int n = BATCH; n == BATCH;) {
            struct cs_backing drop[BATCH];
            n = giveback_pick_locked(s, CS_ALL_BYTES, &took, drop, BATCH);
            for (int i = 0; i < n; i++)
                cs_backing_free(&drop[i]);
        }
    }
    CUcontext popped;
    cs_real.cuCtxPopCurrent_v2(&popped);
    if (took)
        cs_debug("GPU %d: gave the pool back %llu bytes of pieces behind resident memory "
                 "before asking for room", d->ordinal, (unsigned long long)took);
    return took;
}

/* A process's end frees its memory 0.1-0.4 s after its exit handlers run
 * (the driver tears its contexts down meanwhile), and the daemon gets the
 * pool's pieces lent to it back only when it sees the process gone. On the
 * H200 a job that ended holding the GPU held, for those 0.2 s, the 11 GiB
 * it had pinned ahead for a revoke that never came, while the next
 * holder's room lacked backing and pinned its own at 4 GB/s
 * (bench/results/oversubscription.md, 2026-12-01). Those pieces hold
 * nothing, so they go back from here. Not unmapped (25 ms for 11 GiB; the
 * process's end unmaps them): they are off their segments under segs.mu,
 * no copy into them is in flight (a swap-out synchronizes before it lets
 * go of the lock), pin-ahead is held off for good, and the pool lends a
 * piece a live process gave back only to that process's tenant until the
 * process is gone (lender.h). Nothing is waited for: not the lock, not a
 * piece the pinner is taking in. */
void cs_swap_exit(struct cs_dev *d)
{
    enum { BATCH = 64 };
    struct cs_segs *s = &cs_segs[d->ordinal];
    if (pthread_mutex_trylock(&s->mu) != 0)
        return;
    if (s->pinning) { /* a piece in flight: its borrow may wait up to 2 s */
        pthread_mutex_unlock(&s->mu);
        return;
    }
    cs_seg_hold_pinner_locked(s); /* never released: the process is ending */
    uint64_t took = 0;
    for (int n = BATCH; n == BATCH;) {
        struct cs_backing drop[BATCH];
        n = giveback_pick_locked(s, CS_ALL_BYTES, &took, drop, BATCH);
        for (int i = 0; i < n; i++)
            cs_backing_abandon(&drop[i]);
    }
    pthread_mutex_unlock(&s->mu);
}

void cs_swap_trim(struct cs_dev *d)
{
    uint64_t keep = cs_cfg.pin_keep;
    struct cs_segs *s = &cs_segs[d->ordinal];
    /* Backing kept for resident memory only saves a later pin; when the
     * host runs short (less than twice its reserve available), other
     * processes need that RAM for swap-outs that cannot wait: drop it. */
    uint64_t avail = cs_cfg.host_reserve ? cs_host_mem_available() : 0;
    if (avail && avail < 2 * cs_cfg.host_reserve)
        keep = 0;
    uint64_t took = 0;
    drop_backings(s, trim_pick_locked, keep, &took);
}
