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

bool cs_backing_step(struct cs_backing *b, uint64_t size, int dev)
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
        if (cs_real.cuMemAddressReserve(&va, size, CS_BACKING_ALIGN, 0, 0) != CUDA_SUCCESS)
            return false;
        uint64_t piece = cs_cfg.pin_piece ? cs_cfg.pin_piece : size;
        *b = (struct cs_backing){va, size, 0, piece};
    }
    uint64_t n = next_piece_len(b);
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
        return cs_backing_step(b, size, dev);
    }
    return false;
}

/* ---- tilings ------------------------------------------------------------- */

bool cs_backing_tiling(const struct cs_backing *b, struct cs_tiling *t)
{
    if (!b->piece || !cs_backing_complete(b))
        return false;
    *t = (struct cs_tiling){.src = b->va, .tile = b->piece};
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
    /* A piece is mapped whole or not at all: the range must start at one;
     * the backing's last piece may be shorter (what the range has left;
     * a range ending inside a piece gets the driver's refusal). */
    uint64_t pos = off + at, start = pos / t->tile * t->tile;
    uint64_t len = start != pos ? 0 : left < t->tile ? left : t->tile;
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
        for (uint64_t off = 0; off < b->pinned; off += b->piece)
            cs_real.cuMemUnmap(b->va + off,
                               b->pinned - off < b->piece ? b->pinned - off : b->piece);
        cs_real.cuMemAddressFree(b->va, b->size);
    } else {
        cs_real.cuMemFreeHost((void *)b->va);
    }
    memset(b, 0, sizeof *b);
}

bool cs_backing_ensure(struct cs_backing *b, uint64_t size, int dev, _Atomic uint64_t *held)
{
    while (!cs_backing_complete(b)) {
        uint64_t before = b->pinned;
        if (!cs_backing_step(b, size, dev))
            return false;
        atomic_fetch_add_explicit(held, b->pinned - before, memory_order_relaxed);
    }
    return true;
}

void cs_backing_drop(struct cs_backing *b, _Atomic uint64_t *held)
{
    if (!b->size)
        return;
    atomic_fetch_sub_explicit(held, b->pinned, memory_order_relaxed);
    cs_backing_free(b);
}
