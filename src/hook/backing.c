/* backing.c: see backing.h. */
#include "hook/backing.h"
#include "hook/config.h"
#include "common/log.h"
#include "common/util.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* Bytes of a VMM backing held in whole `piece`-sized pieces. */
static uint64_t whole_end(const struct cs_backing *b)
{
    return b->size / b->piece * b->piece;
}

/* cs_backing_get_stats's counters: relaxed atomics (summaries only). */
static _Atomic uint64_t st_pinned_bytes, st_pinned_ns, st_lent_bytes, st_lent_ns;

void cs_backing_get_stats(struct cs_backing_stats *out)
{
    out->pinned_bytes = atomic_load_explicit(&st_pinned_bytes, memory_order_relaxed);
    out->pinned_ns = atomic_load_explicit(&st_pinned_ns, memory_order_relaxed);
    out->lent_bytes = atomic_load_explicit(&st_lent_bytes, memory_order_relaxed);
    out->lent_ns = atomic_load_explicit(&st_lent_ns, memory_order_relaxed);
}

static void count(_Atomic uint64_t *bytes, _Atomic uint64_t *ns, uint64_t n, uint64_t t0)
{
    atomic_fetch_add_explicit(bytes, n, memory_order_relaxed);
    atomic_fetch_add_explicit(ns, cs_now_ns() - t0, memory_order_relaxed);
}

/* The length of the next piece a reserved VMM backing needs: a whole
 * piece, else the tail's unit (decided here, as one piece of the rest,
 * unless lent 2 MiB pieces decided it first). */
static uint64_t next_piece_len(struct cs_backing *b)
{
    if (b->pinned < whole_end(b))
        return b->piece;
    if (!b->tail)
        b->tail = b->size - b->pinned;
    uint64_t left = b->size - b->pinned;
    return left < b->tail ? left : b->tail;
}

CUresult cs_backing_create_host(uint64_t size, CUmemGenericAllocationHandle *h)
{
    if (!host_has_room(size))
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_HOST;
    return cs_real.cuMemCreate(h, size, &p, 0);
}

/* Pins one piece at va: create, map, let the mapping own it, give the GPU
 * access. Returns the driver's answer to the cuMemCreate; the other steps
 * failing count as CUDA_ERROR_UNKNOWN. Touches nothing but [va, va + n). */
static CUresult grant_device(CUdeviceptr va, uint64_t n, int dev)
{
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = dev;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return cs_real.cuMemSetAccess(va, n, &acc, 1);
}

static CUresult pin_vmm_piece(CUdeviceptr va, uint64_t n, int dev)
{
    CUmemGenericAllocationHandle h;
    CUresult r = cs_backing_create_host(n, &h);
    if (r != CUDA_SUCCESS)
        return r;
    if (cs_real.cuMemMap(va, n, 0, h, 0) != CUDA_SUCCESS) {
        cs_real.cuMemRelease(h);
        return CUDA_ERROR_UNKNOWN;
    }
    cs_real.cuMemRelease(h); /* freed by the unmap */
    if (grant_device(va, n, dev) != CUDA_SUCCESS) {
        cs_real.cuMemUnmap(va, n);
        return CUDA_ERROR_UNKNOWN;
    }
    return CUDA_SUCCESS;
}

/* ---- pieces lent by the node's pool --------------------------------------
 * The scheduler pins pieces once per node and lends them (issue 20): taking
 * one in costs an import, a map and the device's access (~12 ms/GiB on an
 * H100, against ~300 ms/GiB to pin), so a backing takes what the pool lends
 * before it pins anything itself. */

/* Registered once by init before any device work; read-only after. */
static const struct cs_backing_pool *pool;

/* The pool's big piece size once a LEND said it (0 before): new backings
 * are laid out in it, so its pieces fit them whole. */
static _Atomic uint64_t pool_piece;

void cs_backing_set_pool(const struct cs_backing_pool *p)
{
    pool = p;
}

/* Maps n lent pieces of `unit` bytes one after another at va and gives the
 * device access. On failure nothing of it stays mapped. */
static CUresult map_lent(CUdeviceptr va, uint64_t unit, const int *fds, uint32_t n, int dev)
{
    CUresult r = CUDA_SUCCESS;
    uint32_t i = 0;
    for (; i < n; i++) {
        CUmemGenericAllocationHandle h;
        r = cs_real.cuMemImportFromShareableHandle(&h, (void *)(intptr_t)fds[i],
                                                   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        if (r != CUDA_SUCCESS)
            break;
        r = cs_real.cuMemMap(va + i * unit, unit, 0, h, 0);
        cs_real.cuMemRelease(h); /* the mapping holds it */
        if (r != CUDA_SUCCESS)
            break;
    }
    if (r == CUDA_SUCCESS)
        r = grant_device(va, n * unit, dev);
    if (r != CUDA_SUCCESS)
        for (uint32_t k = 0; k < i; k++)
            cs_real.cuMemUnmap(va + k * unit, unit);
    return r;
}

/* Records lent ids in b. Ids from an earlier connection are forgotten: a
 * restarted daemon does not know them, and they are this process's now. */
static bool lent_add(struct cs_backing *b, const uint32_t *ids, uint32_t n, uint64_t gen)
{
    struct cs_lent *l = b->lent;
    if (l && l->gen != gen)
        l->n = 0;
    if (!l || l->n + n > l->cap) {
        uint32_t cap = l ? l->cap * 2 : CS_LEND_MAX;
        while (cap < (l ? l->n : 0) + n)
            cap *= 2;
        struct cs_lent *g = realloc(l, sizeof *g + cap * sizeof g->ids[0]);
        if (!g)
            return false;
        if (!l)
            g->n = 0;
        g->cap = cap;
        b->lent = l = g;
    }
    l->gen = gen;
    memcpy(l->ids + l->n, ids, n * sizeof ids[0]);
    l->n += n;
    return true;
}

/* A lent big piece of another size than b's pieces: a backing with nothing
 * in it yet takes the pool's size (and the next ones start with it). */
static bool adopt_piece(struct cs_backing *b, uint64_t size)
{
    atomic_store_explicit(&pool_piece, size, memory_order_relaxed);
    if (size == b->piece)
        return true;
    if (b->pinned || size > b->size || size % CS_BACKING_ALIGN)
        return false;
    b->piece = size;
    return true;
}

/* Takes up to CS_LEND_MAX pieces of the pool in at b's end: the next whole
 * pieces, else 2 MiB ones for the tail. True when some came. */
static bool borrow_step(struct cs_backing *b, int dev)
{
    uint64_t end = whole_end(b);
    /* Until a LEND said the pool's piece size, an empty backing asks for
     * one big piece: it fits when the backing is at least that large, and
     * from then on new backings are laid out in it. */
    bool learn = !atomic_load_explicit(&pool_piece, memory_order_relaxed) && !b->pinned;
    bool big = b->pinned < end || learn;
    if (!pool || (!big && b->tail && b->tail != CS_BACKING_ALIGN))
        return false; /* a tail pinned here as one piece */
    uint64_t want = b->pinned < end ? (end - b->pinned) / b->piece
                    : big           ? 1
                                    : (b->size - b->pinned) / CS_BACKING_ALIGN;
    int fds[CS_LEND_MAX];
    uint32_t ids[CS_LEND_MAX];
    uint64_t size = 0, gen = 0, t0 = cs_now_ns();
    uint32_t n = pool->borrow(dev, big ? CS_PIECE_BIG : CS_PIECE_SMALL,
                              want < CS_LEND_MAX ? (uint32_t)want : CS_LEND_MAX, fds, ids, &size,
                              &gen);
    if (!n)
        return false;
    uint32_t use = 0;
    if (big ? adopt_piece(b, size) : size == CS_BACKING_ALIGN) {
        uint64_t unit = big ? b->piece : CS_BACKING_ALIGN;
        uint64_t room = big ? (whole_end(b) - b->pinned) / unit : (b->size - b->pinned) / unit;
        use = n < room ? n : (uint32_t)room;
        if (use && map_lent(b->va + b->pinned, unit, fds, use, dev) != CUDA_SUCCESS) {
            use = 0;
        } else if (use && !lent_add(b, ids, use, gen)) { /* no memory to keep their ids */
            for (uint32_t k = 0; k < use; k++)
                cs_real.cuMemUnmap(b->va + b->pinned + k * unit, unit);
            use = 0;
        } else {
            b->pinned += use * unit;
            if (!big && use)
                b->tail = CS_BACKING_ALIGN;
            count(&st_lent_bytes, &st_lent_ns, use * unit, t0);
        }
    }
    for (uint32_t i = 0; i < n; i++)
        close(fds[i]);
    if (use < n)
        pool->give_back(ids + use, n - use, gen);
    return use > 0;
}

/* The driver refused host-located VMM for good: say so once. */
static void vmm_backing_refused(CUresult r)
{
    if (atomic_exchange(&vmm_backing_ok, false))
        cs_info("the driver refuses host-located cuMemCreate (error %d): using "
                "cuMemHostAlloc for swap backing", (int)r);
}

bool cs_backing_step(struct cs_backing *b, uint64_t size, int dev)
{
    bool vmm = cs_cfg.host_backing_vmm &&
               atomic_load_explicit(&vmm_backing_ok, memory_order_relaxed);
    if (!b->size && !vmm) {
        void *p = NULL;
        if (!host_has_room(size) ||
            cs_real.cuMemHostAlloc(&p, size, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS)
            return false;
        *b = (struct cs_backing){(CUdeviceptr)p, size, size, 0, 0, NULL};
        return true;
    }
    if (!b->size) {
        CUdeviceptr va;
        if (cs_real.cuMemAddressReserve(&va, size, CS_BACKING_ALIGN, 0, 0) != CUDA_SUCCESS)
            return false;
        uint64_t piece = atomic_load_explicit(&pool_piece, memory_order_relaxed);
        if (!piece || piece > size)
            piece = cs_cfg.pin_piece ? cs_cfg.pin_piece : size;
        *b = (struct cs_backing){va, size, 0, piece, 0, NULL};
    }
    bool knew = atomic_load_explicit(&pool_piece, memory_order_relaxed) != 0;
    if (borrow_step(b, dev))
        return true;
    /* The first LEND said a piece size too large for b: its tail pieces. */
    if (!knew && atomic_load_explicit(&pool_piece, memory_order_relaxed) && borrow_step(b, dev))
        return true;
    uint64_t n = next_piece_len(b), t0 = cs_now_ns();
    CUresult r = pin_vmm_piece(b->va + b->pinned, n, dev);
    if (r == CUDA_SUCCESS) {
        b->pinned += n;
        count(&st_pinned_bytes, &st_pinned_ns, n, t0);
        return true;
    }
    /* Only a driver that does not do host-located VMM turns it off for
     * good (and only before a piece exists: the rest of this backing must
     * be VMM too); running out of host memory is tried again next time. */
    if ((r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_VALUE) && !b->pinned) {
        vmm_backing_refused(r);
        cs_real.cuMemAddressFree(b->va, b->size);
        memset(b, 0, sizeof *b);
        return cs_backing_step(b, size, dev);
    }
    return false;
}

/* ---- tilings ------------------------------------------------------------- */

bool cs_backing_tiling(const struct cs_backing *b, struct cs_tiling *t)
{
    if (!b->piece || !cs_backing_complete(b))
        return false;
    *t = (struct cs_tiling){.src = b->va, .whole = whole_end(b), .tail = b->tail,
                            .tile = b->piece};
    return true;
}

/* One whole allocation of a tiling placed at `at` bytes into a mapped range
 * that starts `off` bytes into the segment. */
struct tile_part {
    CUmemGenericAllocationHandle h; /* placeholder's; 0: retain the piece at src + seg_off */
    uint64_t seg_off;
    uint64_t len;
};

/* The tile at `at` of a range of `size` bytes starting `off` into the
 * segment; len 0 when the range cannot be tiled there (part of a piece). */
static struct tile_part tile_at(const struct cs_tiling *t, uint64_t off, uint64_t size,
                                uint64_t at)
{
    uint64_t left = size - at;
    if (t->one) /* the placeholder: big tiles while they fit, then granules */
        return left >= t->tile ? (struct tile_part){t->one, 0, t->tile}
                               : (struct tile_part){t->small, 0, t->small_size};
    /* A piece is mapped whole or not at all: the range must start at one
     * (a range ending inside a piece gets the driver's refusal). */
    uint64_t pos = off + at, start, unit;
    if (pos < t->whole || !t->tail) {
        unit = t->tile;
        start = pos / unit * unit;
    } else {
        unit = t->tail;
        start = t->whole + (pos - t->whole) / unit * unit;
    }
    uint64_t len = start != pos ? 0 : left < unit ? left : unit;
    return (struct tile_part){0, start, len};
}

static CUresult map_tile(const struct cs_tiling *t, CUdeviceptr va, struct tile_part p)
{
    if (!p.len || (t->one && !p.h))
        return CUDA_ERROR_NOT_SUPPORTED;
    if (p.h)
        return cs_real.cuMemMap(va, p.len, 0, p.h, 0);
    CUmemGenericAllocationHandle h;
    CUresult r = cs_real.cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)(t->src + p.seg_off));
    if (r != CUDA_SUCCESS)
        return r;
    r = cs_real.cuMemMap(va, p.len, 0, h, 0);
    cs_real.cuMemRelease(h); /* the mapping holds it */
    return r;
}

CUresult cs_tiling_map(const struct cs_tiling *t, CUdeviceptr va, uint64_t size, uint64_t off)
{
    for (uint64_t at = 0; at < size;) {
        struct tile_part p = tile_at(t, off, size, at);
        CUresult r = map_tile(t, va + at, p);
        if (r != CUDA_SUCCESS) {
            if (at > 0)
                cs_tiling_unmap(t, va, at, off);
            return r;
        }
        at += p.len;
    }
    return CUDA_SUCCESS;
}

CUresult cs_tiling_unmap(const struct cs_tiling *t, CUdeviceptr va, uint64_t size, uint64_t off)
{
    for (uint64_t at = 0; at < size;) {
        struct tile_part p = tile_at(t, off, size, at);
        CUresult r = p.len ? cs_real.cuMemUnmap(va + at, p.len) : CUDA_ERROR_NOT_SUPPORTED;
        if (r != CUDA_SUCCESS) { /* what went comes back: all or nothing */
            if (at > 0)
                cs_tiling_map(t, va, at, off);
            return r;
        }
        at += p.len;
    }
    return CUDA_SUCCESS;
}

void cs_backing_free(struct cs_backing *b)
{
    if (!b->size)
        return;
    if (b->piece) {
        /* A mapping is unmapped whole: one piece at a time. */
        uint64_t end = whole_end(b);
        for (uint64_t off = 0, len; off < b->pinned; off += len) {
            len = off < end ? b->piece : b->tail;
            if (len > b->pinned - off)
                len = b->pinned - off;
            cs_real.cuMemUnmap(b->va + off, len);
        }
        cs_real.cuMemAddressFree(b->va, b->size);
    } else {
        cs_real.cuMemFreeHost((void *)b->va);
    }
    /* Unmapped and released here: the pool may lend them again. */
    if (b->lent && b->lent->n && pool)
        pool->give_back(b->lent->ids, b->lent->n, b->lent->gen);
    free(b->lent);
    memset(b, 0, sizeof *b);
}

void cs_backing_abandon(struct cs_backing *b)
{
    if (b->lent && b->lent->n && pool)
        pool->give_back(b->lent->ids, b->lent->n, b->lent->gen);
    free(b->lent);
    memset(b, 0, sizeof *b);
}

bool cs_backing_grow(struct cs_backing *b, uint64_t size, int dev, _Atomic uint64_t *held)
{
    uint64_t before = b->pinned;
    if (!cs_backing_step(b, size, dev))
        return false;
    atomic_fetch_add_explicit(held, b->pinned - before, memory_order_relaxed);
    return true;
}

void cs_backing_drop(struct cs_backing *b, _Atomic uint64_t *held)
{
    if (!b->size)
        return;
    atomic_fetch_sub_explicit(held, b->pinned, memory_order_relaxed);
    cs_backing_free(b);
}
