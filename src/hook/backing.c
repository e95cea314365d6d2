/* backing.c: see backing.h. */
#include "hook/backing.h"
#include "hook/config.h"
#include "common/log.h"
#include "common/util.h"

#include <string.h>
#include <time.h>

/* ---- host backing --------------------------------------------------------
 * Measured on an H100 (bench/results/oversubscription.md): cuMemCreate with a
 * HOST location pins in ~0.21 s/GiB against ~0.35 for mmap+cuMemHostRegister
 * and ~0.43 for cuMemHostAlloc, and copies at full PCIe speed both ways. So
 * that is the default (CUSHARE_HOST_BACKING=vmm), in CUSHARE_PIN_PIECE pieces
 * (seg.h says why); where the driver refuses it, cuMemHostAlloc takes over
 * for the rest of the process's life. */

/* Cleared the first time the driver refuses a HOST-located cuMemCreate.
 * Read and written by the device workers; a relaxed atomic is enough (the
 * worst race is one more refused attempt). */
static _Atomic bool vmm_backing_ok = true;

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

/* The length of the next piece a reserved VMM backing needs. */
static uint64_t next_piece_len(const struct cs_backing *b)
{
    uint64_t left = b->size - b->pinned;
    return left < b->piece ? left : b->piece;
}

/* Pins one piece at va: create, map, let the mapping own it, give the GPU
 * access. Returns the driver's answer to the cuMemCreate; the other steps
 * failing count as CUDA_ERROR_UNKNOWN. Touches nothing but [va, va + n). */
static CUresult pin_vmm_piece(CUdeviceptr va, uint64_t n, int dev)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_HOST;
    CUmemGenericAllocationHandle h;
    CUresult r = cs_real.cuMemCreate(&h, n, &p, 0);
    if (r != CUDA_SUCCESS)
        return r;
    if (cs_real.cuMemMap(va, n, 0, h, 0) != CUDA_SUCCESS) {
        cs_real.cuMemRelease(h);
        return CUDA_ERROR_UNKNOWN;
    }
    cs_real.cuMemRelease(h); /* freed by the unmap */
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = dev;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (cs_real.cuMemSetAccess(va, n, &acc, 1) != CUDA_SUCCESS) {
        cs_real.cuMemUnmap(va, n);
        return CUDA_ERROR_UNKNOWN;
    }
    return CUDA_SUCCESS;
}

/* The driver refused host-located VMM for good: say so once. */
static void vmm_backing_refused(CUresult r)
{
    if (atomic_exchange(&vmm_backing_ok, false))
        cs_info("the driver refuses host-located cuMemCreate (error %d): using "
                "cuMemHostAlloc for swap backing", (int)r);
}

/* One step towards a complete backing of `size` bytes in *b: the whole
 * block with cuMemHostAlloc, else the next VMM piece (reserving the range
 * first). Whoever calls it owns *b for the duration: a worker holding
 * segs.mu with the pinner held off, or the pinner with `pinning` set.
 * Returns false when no more can be pinned now (host memory, the guard,
 * the driver). */
static bool backing_step(struct cs_backing *b, uint64_t size, int dev)
{
    bool vmm = cs_cfg.host_backing_vmm &&
               atomic_load_explicit(&vmm_backing_ok, memory_order_relaxed);
    if (!b->size && !vmm) {
        void *p = NULL;
        if (!host_has_room(size) ||
            cs_real.cuMemHostAlloc(&p, size, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS)
            return false;
        *b = (struct cs_backing){(CUdeviceptr)p, size, size, 0};
        return true;
    }
    if (!b->size) {
        CUdeviceptr va;
        if (cs_real.cuMemAddressReserve(&va, size, CS_CHUNK_SIZE, 0, 0) != CUDA_SUCCESS)
            return false;
        uint64_t piece = cs_cfg.pin_piece ? cs_cfg.pin_piece : size;
        *b = (struct cs_backing){va, size, 0, piece};
    }
    uint64_t n = next_piece_len(b);
    if (!host_has_room(n))
        return false;
    CUresult r = pin_vmm_piece(b->va + b->pinned, n, dev);
    if (r == CUDA_SUCCESS) {
        b->pinned += n;
        return true;
    }
    /* Only a driver that does not do host-located VMM turns it off for
     * good (and only before a piece exists: the rest of this backing must
     * be VMM too); running out of host memory is tried again next time. */
    if ((r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_VALUE) && !b->pinned) {
        vmm_backing_refused(r);
        cs_real.cuMemAddressFree(b->va, b->size);
        memset(b, 0, sizeof *b);
        return backing_step(b, size, dev);
    }
    return false;
}

static void backing_free(struct cs_backing *b)
{
    if (!b->size)
        return;
    if (b->piece) {
        /* A mapping is unmapped whole: one piece at a time. */
        for (uint64_t off = 0; off < b->pinned; off += b->piece)
            cs_real.cuMemUnmap(b->va + off,
                               b->pinned - off < b->piece ? b->pinned - off : b->piece);
        cs_real.cuMemAddressFree(b->va, b->size);
    } else {
        cs_real.cuMemFreeHost((void *)b->va);
    }
    memset(b, 0, sizeof *b);
}

void cs_backing_drop_locked(struct cs_segs *s, struct cs_seg *g)
{
    if (!g->backing.size)
        return;
    s->backing -= g->backing.pinned;
    backing_free(&g->backing);
}

bool cs_backing_ensure_locked(struct cs_segs *s, struct cs_seg *g)
{
    while (!cs_backing_complete(&g->backing)) {
        uint64_t before = g->backing.pinned;
        if (!backing_step(&g->backing, g->size, g->dev))
            return false;
        s->backing += g->backing.pinned - before;
    }
    return true;
}

void cs_backing_hold_pinner_locked(struct cs_segs *s)
{
    s->pin_holdoff++;
    while (s->pinning)
        pthread_cond_wait(&s->pin_cv, &s->mu);
}

void cs_backing_release_pinner_locked(struct cs_segs *s)
{
    if (--s->pin_holdoff == 0)
        pthread_cond_broadcast(&s->pin_cv);
}

/* ---- pinning ahead of need -------------------------------------------------- */

/* A resident segment that may be swapped out and whose backing is not
 * complete, or NULL. */
static struct cs_seg *unbacked_locked(struct cs_segs *s)
{
    for (struct cs_seg *g = s->head; g; g = g->next)
        if (g->state == CS_SEG_RESIDENT && !g->exported && !cs_backing_complete(&g->backing))
            return g;
    return NULL;
}

/* Pin-ahead gives way to the job's own allocations and frees: in one
 * process the driver lets a pinning thread hold the lock they need for the
 * whole of a pin, piece after piece (cs_pincontend: a 1 GiB allocation
 * waited 1.4 s behind an 8 GiB pin in 64 MiB pieces). Waits, between
 * pieces, while an application thread is inside one. */
static void yield_to_app(struct cs_dev *d)
{
    struct timespec ms = {0, 1000000};
    while (atomic_load_explicit(&d->host_busy, memory_order_relaxed) > 0)
        nanosleep(&ms, NULL);
}

/* Claims the next piece to pin (setting s->pinning), or returns NULL when
 * nothing is left to pin. Waits while the pinner is held off. */
static struct cs_seg *claim_piece_locked(struct cs_segs *s)
{
    while (s->pin_holdoff)
        pthread_cond_wait(&s->pin_cv, &s->mu);
    struct cs_seg *g = unbacked_locked(s);
    s->pinning = g;
    return g;
}

/* The claimed piece landed (or did not): s->pinning is released, and who
 * waits for it is woken. */
static void piece_done_locked(struct cs_segs *s, struct cs_seg *g, uint64_t before)
{
    s->backing += g->backing.pinned - before;
    s->pinning = NULL;
    pthread_cond_broadcast(&s->pin_cv);
}

struct cs_swap_result cs_backing_prepare(struct cs_dev *d, uint64_t bytes)
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
        yield_to_app(d);
        pthread_mutex_lock(&s->mu);
        struct cs_seg *g = claim_piece_locked(s);
        pthread_mutex_unlock(&s->mu);
        if (!g)
            break;
        /* Pin without the lock (~15 ms per 64 MiB piece): while `pinning`
         * names g, nothing else touches its backing or frees it. */
        uint64_t before = g->backing.pinned;
        bool ok = backing_step(&g->backing, g->size, g->dev);
        uint64_t got = g->backing.pinned - before;
        pthread_mutex_lock(&s->mu);
        piece_done_locked(s, g, before);
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

/* ---- keeping host backing within a budget --------------------------------- */

void cs_backing_trim(struct cs_dev *d)
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
        cs_backing_hold_pinner_locked(s);
        while (n < BATCH && s->backing > keep) {
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
        cs_backing_release_pinner_locked(s);
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < n; i++)
            backing_free(&drop[i]);
        if (n < BATCH)
            return;
    }
}
