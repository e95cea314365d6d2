/* swap.c: see swap.h. */
#include "hook/swap.h"
#include "hook/client.h"
#include "hook/config.h"
#include "common/log.h"
#include "common/util.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- host backing --------------------------------------------------------
 * Measured on an H100 (bench/results/oversubscription.md): cuMemCreate with a
 * HOST location pins in ~0.21 s/GiB against ~0.35 for mmap+cuMemHostRegister
 * and ~0.43 for cuMemHostAlloc, and copies at full PCIe speed both ways. So
 * that is the default (CUSHARE_HOST_BACKING=vmm); where the driver refuses it,
 * cuMemHostAlloc takes over for the rest of the process's life. */

/* Cleared the first time the driver refuses a HOST-located cuMemCreate.
 * Read and written by the device workers; a relaxed atomic is enough (the
 * worst race is one more refused attempt). */
static _Atomic bool vmm_backing_ok = true;

/* Returns the driver's answer to the cuMemCreate; the other steps failing
 * count as CUDA_ERROR_UNKNOWN. */
static CUresult backing_alloc_vmm(struct cs_backing *b, uint64_t bytes, int dev)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_HOST;
    CUmemGenericAllocationHandle h;
    CUresult r = cs_real.cuMemCreate(&h, bytes, &p, 0);
    if (r != CUDA_SUCCESS)
        return r;
    CUdeviceptr va;
    if (cs_real.cuMemAddressReserve(&va, bytes, CS_CHUNK_SIZE, 0, 0) != CUDA_SUCCESS) {
        cs_real.cuMemRelease(h);
        return CUDA_ERROR_UNKNOWN;
    }
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = dev;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (cs_real.cuMemMap(va, bytes, 0, h, 0) != CUDA_SUCCESS ||
        cs_real.cuMemSetAccess(va, bytes, &acc, 1) != CUDA_SUCCESS) {
        cs_real.cuMemUnmap(va, bytes);
        cs_real.cuMemAddressFree(va, bytes);
        cs_real.cuMemRelease(h);
        return CUDA_ERROR_UNKNOWN;
    }
    b->va = va;
    b->h = h;
    b->size = bytes;
    return CUDA_SUCCESS;
}

/* Pinning that would leave the host less than CUSHARE_HOST_RESERVE
 * available is refused: the swap-out then stops cleanly (what was not
 * copied stays resident), where pinning the last of the RAM would have the
 * kernel kill a process. One warning per process. */
static bool host_has_room(uint64_t bytes)
{
    if (!cs_cfg.host_reserve)
        return true;
    uint64_t avail = cs_host_mem_available();
    if (!avail) /* no /proc: no guard */
        return true;
    if (avail > bytes && avail - bytes >= cs_cfg.host_reserve)
        return true;
    static _Atomic bool warned;
    char a[32], b[32], r[32];
    if (!atomic_exchange(&warned, true))
        cs_warn("not pinning %s of swap backing: the host has %s available and keeps %s "
                "(CUSHARE_HOST_RESERVE); the memory stays on the GPU",
                cs_format_size(bytes, b, sizeof b), cs_format_size(avail, a, sizeof a),
                cs_format_size(cs_cfg.host_reserve, r, sizeof r));
    return false;
}

static bool backing_alloc(struct cs_backing *b, uint64_t bytes, int dev)
{
    if (!host_has_room(bytes))
        return false;
    if (cs_cfg.host_backing_vmm && atomic_load_explicit(&vmm_backing_ok, memory_order_relaxed)) {
        CUresult r = backing_alloc_vmm(b, bytes, dev);
        if (r == CUDA_SUCCESS)
            return true;
        /* Only a driver that does not do host-located VMM turns it off for
         * good; running out of host memory is tried again next time. */
        if ((r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_VALUE) &&
            atomic_exchange(&vmm_backing_ok, false))
            cs_info("the driver refuses host-located cuMemCreate (error %d): using "
                    "cuMemHostAlloc for swap backing", (int)r);
    }
    void *p = NULL;
    if (cs_real.cuMemHostAlloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS)
        return false;
    b->va = (CUdeviceptr)p;
    b->h = 0;
    b->size = bytes;
    return true;
}

static void backing_free(struct cs_backing *b)
{
    if (!b->size)
        return;
    if (b->h) {
        cs_real.cuMemUnmap(b->va, b->size);
        cs_real.cuMemAddressFree(b->va, b->size);
        cs_real.cuMemRelease(b->h);
    } else {
        cs_real.cuMemFreeHost((void *)b->va);
    }
    memset(b, 0, sizeof *b);
}

void cs_swap_drop_backing_locked(struct cs_segs *s, struct cs_seg *g)
{
    if (!g->backing.size)
        return;
    s->backing -= g->backing.size;
    backing_free(&g->backing);
}

static bool ensure_backing_locked(struct cs_segs *s, struct cs_seg *g)
{
    if (g->backing.size)
        return true;
    if (!backing_alloc(&g->backing, g->size, g->dev))
        return false;
    s->backing += g->size;
    return true;
}

/* ---- the swap context and stream ----------------------------------------- */

bool cs_segs_ensure_ready_locked(struct cs_segs *s, int dev)
{
    if (s->ready)
        return true;
    CUdevice d;
    if (cs_real.cuDeviceGet(&d, dev) != CUDA_SUCCESS)
        return false;
    if (cs_real.cuDevicePrimaryCtxRetain(&s->pctx, d) != CUDA_SUCCESS)
        return false;
    if (cs_real.cuCtxPushCurrent_v2(s->pctx) != CUDA_SUCCESS)
        return false;
    CUresult r = cs_real.cuStreamCreate(&s->stream, CU_STREAM_NON_BLOCKING);
    CUcontext popped;
    cs_real.cuCtxPopCurrent_v2(&popped);
    if (r != CUDA_SUCCESS)
        return false;
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
            pause_ms = pause_ms ? (pause_ms < 400 ? pause_ms * 2 : 400) : 25;
            struct timespec ts = {0, (long)pause_ms * 1000000L};
            nanosleep(&ts, NULL);
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

/* Eviction order: segments whose host backing is already pinned first
 * (pinning costs ~0.2 s/GiB, copying ~0.02), then whole large segments
 * before shared chunks, larger before smaller (fewest operations per byte
 * moved). */
static int victim_cmp(const void *a, const void *b)
{
    const struct cs_seg *x = *(struct cs_seg *const *)a, *y = *(struct cs_seg *const *)b;
    if (!x->backing.size != !y->backing.size)
        return x->backing.size ? -1 : 1;
    if (x->chunk != y->chunk)
        return x->chunk ? 1 : -1;
    return x->size < y->size ? 1 : (x->size > y->size ? -1 : 0);
}

/* Fills out[] with up to max resident segments totalling at least `want`
 * bytes (or all there are), in eviction order. Returns the count. */
static int choose_victims_locked(struct cs_segs *s, uint64_t want, struct cs_seg **out, int max)
{
    int all = 0;
    for (struct cs_seg *g = s->head; g; g = g->next)
        all += g->state == CS_SEG_RESIDENT;
    if (!all)
        return 0;
    struct cs_seg **cand = malloc((size_t)all * sizeof *cand);
    if (!cand)
        return 0;
    int k = 0;
    for (struct cs_seg *g = s->head; g; g = g->next)
        if (g->state == CS_SEG_RESIDENT)
            cand[k++] = g;
    qsort(cand, (size_t)k, sizeof *cand, victim_cmp);
    int n = 0;
    uint64_t got = 0;
    for (int i = 0; i < k && n < max && got < want; i++) {
        out[n++] = cand[i];
        got += cand[i]->size;
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
        if (!ensure_backing_locked(s, v[i])) {
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
        cs_seg_unmap_locked(v[i]);
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
                                                   : "a copy failed",
           name, exiting ? ": the process is exiting" : "");
}

struct cs_swap_result cs_swap_out_locked(struct cs_dev *d, uint64_t bytes)
{
    struct cs_swap_result res = {CUDA_SUCCESS, 0, 0};
    struct cs_segs *s = &cs_segs[d->ordinal];
    struct cs_seg *v[SWAP_BATCH];
    uint64_t t0 = cs_now_ns();
    if (!s->resident)
        return res;
    if (!cs_segs_ensure_ready_locked(s, d->ordinal)) {
        res.status = CUDA_ERROR_NOT_INITIALIZED;
        return res;
    }
    cs_real.cuCtxPushCurrent_v2(s->pctx);
    while (res.bytes < bytes && res.status == CUDA_SUCCESS) {
        int n = choose_victims_locked(s, bytes - res.bytes, v, SWAP_BATCH);
        if (n == 0)
            break;
        swap_out_batch_locked(s, v, n, &res);
    }
    CUcontext popped;
    cs_real.cuCtxPopCurrent_v2(&popped);
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
        CUresult r = prefetch ? cs_seg_map_locked(g) : map_with_room_locked(d, g);
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
    if (res.status != CUDA_SUCCESS && !prefetch)
        cs_warn("GPU %d: restoring device memory stopped (error %d) after %llu bytes",
                d->ordinal, (int)res.status, (unsigned long long)res.bytes);
    else if (res.status != CUDA_SUCCESS)
        cs_debug("GPU %d: prefetch stopped (error %d) after %llu bytes", d->ordinal,
                 (int)res.status, (unsigned long long)res.bytes);
    return res;
}

/* ---- pinning ahead of need -------------------------------------------------- */

/* A resident segment without backing, or NULL. */
static struct cs_seg *unbacked_locked(struct cs_segs *s)
{
    for (struct cs_seg *g = s->head; g; g = g->next)
        if (!g->backing.size && g->state == CS_SEG_RESIDENT)
            return g;
    return NULL;
}

static bool still_listed_locked(struct cs_segs *s, const struct cs_seg *want, uint64_t size)
{
    for (struct cs_seg *g = s->head; g; g = g->next)
        if (g == want && g->size == size)
            return true;
    return false;
}

struct cs_swap_result cs_swap_prepare(struct cs_dev *d, uint64_t bytes)
{
    struct cs_swap_result res = {CUDA_SUCCESS, 0, 0};
    struct cs_segs *s = &cs_segs[d->ordinal];
    uint64_t t0 = cs_now_ns();
    /* Pinning calls need a current context on this (worker) thread. */
    pthread_mutex_lock(&s->mu);
    bool ready = cs_segs_ensure_ready_locked(s, d->ordinal);
    pthread_mutex_unlock(&s->mu);
    if (!ready || cs_real.cuCtxPushCurrent_v2(s->pctx) != CUDA_SUCCESS) {
        res.status = CUDA_ERROR_NOT_INITIALIZED;
        return res;
    }
    while (res.bytes < bytes) {
        pthread_mutex_lock(&s->mu);
        struct cs_seg *g = unbacked_locked(s);
        uint64_t size = g ? g->size : 0;
        pthread_mutex_unlock(&s->mu);
        if (!g)
            break;
        /* Pin without the lock: it takes ~0.2-0.4 s per GiB. */
        struct cs_backing b;
        if (!backing_alloc(&b, size, d->ordinal)) {
            res.status = CUDA_ERROR_OUT_OF_MEMORY;
            break;
        }
        pthread_mutex_lock(&s->mu);
        if (still_listed_locked(s, g, size) && !g->backing.size) {
            g->backing = b;
            s->backing += size;
            b.size = 0;
        }
        pthread_mutex_unlock(&s->mu);
        backing_free(&b);
        res.bytes += size;
    }
    CUcontext popped;
    cs_real.cuCtxPopCurrent_v2(&popped);
    res.ns = cs_now_ns() - t0;
    return res;
}

/* ---- keeping host backing within a budget --------------------------------- */

void cs_swap_trim_backing(struct cs_dev *d)
{
    uint64_t keep = cs_cfg.pin_keep;
    struct cs_segs *s = &cs_segs[d->ordinal];
    /* Backing kept for resident memory only saves a later pin; when the
     * host runs short (less than twice its reserve available), other
     * processes need that RAM for swap-outs that cannot wait: drop it. */
    uint64_t avail = cs_cfg.host_reserve ? cs_host_mem_available() : 0;
    if (avail && avail < 2 * cs_cfg.host_reserve)
        keep = 0;
    if (keep == UINT64_MAX)
        return;
    enum { BATCH = 64 };
    for (;;) {
        struct cs_backing drop[BATCH];
        int n = 0;
        pthread_mutex_lock(&s->mu);
        while (n < BATCH && s->backing > keep) {
            struct cs_seg *big = NULL;
            for (struct cs_seg *g = s->head; g; g = g->next)
                if (g->state == CS_SEG_RESIDENT && g->backing.size &&
                    (!big || g->backing.size > big->backing.size))
                    big = g;
            if (!big)
                break;
            drop[n++] = big->backing;
            s->backing -= big->backing.size;
            memset(&big->backing, 0, sizeof big->backing);
        }
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < n; i++)
            backing_free(&drop[i]);
        if (n < BATCH)
            return;
    }
}
