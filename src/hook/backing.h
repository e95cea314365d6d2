/* backing.h: pinned host memory, the home of swapped-out device memory.
 *
 * A backing (struct cs_backing) is pinned a piece at a time
 * (CUSHARE_PIN_PIECE) and kept across swaps: pinning costs ~0.2 s/GiB and
 * copying ~0.02. Pieces, because the driver holds a lock that every
 * process's device allocations need for as long as one cuMemCreate pins: a
 * 10 GiB backing in one piece stalled another job's allocation for seconds
 * on an H100, in 64 MiB pieces for milliseconds
 * (bench/results/oversubscription.md, cs_pincontend). Pinning that would
 * leave the host less than CUSHARE_HOST_RESERVE is refused.
 *
 * This module only pins and frees: which segment gets a backing, when, and
 * who may touch it meanwhile is seg.c's (the pinner's hold-off) and
 * swap.c's (swap-out, pin-ahead, trim). A backing is owned by whoever holds
 * it: these functions take no lock.
 */
#ifndef CS_HOOK_BACKING_H
#define CS_HOOK_BACKING_H

#include "hook/hook.h"

/* Pinned host memory addressed by `va` in either form:
 *   - cuMemCreate(HOST) memory in pieces of `piece` bytes, mapped one after
 *     another into a range reserved for the whole backing (the cheapest to
 *     pin);
 *   - one cuMemHostAlloc block (piece == 0), the fallback.
 * Usable once complete (pinned == size). */
struct cs_backing {
    CUdeviceptr va;
    uint64_t size;                   /* bytes at va, 0 = none */
    uint64_t pinned;                 /* the prefix pinned so far */
    uint64_t piece;                  /* VMM piece size; 0 = cuMemHostAlloc */
};

/* Alignment of a VMM backing's reserved range (the granularity). */
#define CS_BACKING_ALIGN (2ull << 20)

static inline bool cs_backing_complete(const struct cs_backing *b)
{
    return b->size && b->pinned == b->size;
}

/* One step towards a complete backing of `size` bytes for device dev: the
 * whole block with cuMemHostAlloc, else the next VMM piece (reserving the
 * range first). False when no more can be pinned now (host memory, the
 * reserve, the driver); what was pinned stays. */
bool cs_backing_step(struct cs_backing *b, uint64_t size, int dev);

/* Completes b, pinning what it lacks; adds what it pins to *held. */
bool cs_backing_ensure(struct cs_backing *b, uint64_t size, int dev, _Atomic uint64_t *held);

/* ---- showing host memory at a segment's addresses ----------------------
 * Host memory that is not on the GPU stays visible to the driver at the
 * segment's own addresses (seg.h): the same physical allocations are
 * mapped a second time there. The driver maps an allocation only whole
 * (part of one is CUDA_ERROR_NOT_SUPPORTED, measured on an H100), so a
 * tiling is a list of whole allocations laid end to end:
 *   - a VMM backing: its pieces, at their offsets in the segment (each
 *     found again with cuMemRetainAllocationHandle); a range that would
 *     need part of a piece is refused;
 *   - a placeholder (memory without contents): one allocation of `tile`
 *     bytes mapped again and again, the rest of the range with one of
 *     `small` bytes (the granularity), wherever the range starts. */
struct cs_tiling {
    CUdeviceptr src;                    /* backing: its pieces' addresses; 0 with one */
    CUmemGenericAllocationHandle one;   /* placeholder: the big allocation, or 0 */
    CUmemGenericAllocationHandle small; /* placeholder: the granule-sized one */
    uint64_t tile;                      /* piece or big allocation size */
    uint64_t small_size;
};

/* A complete VMM backing's tiling; false for one that cannot be mapped
 * again (cuMemHostAlloc memory, or incomplete). */
bool cs_backing_tiling(const struct cs_backing *b, struct cs_tiling *t);

/* Maps [off, off + size) of the tiled memory at va. On failure nothing of
 * it stays mapped. Access is the caller's (cuMemSetAccess). */
CUresult cs_tiling_map(const struct cs_tiling *t, CUdeviceptr va, uint64_t size, uint64_t off);
/* Unmaps what cs_tiling_map mapped with the same arguments (a mapping is
 * unmapped whole: one call per tile). On a refusal the tiles already
 * unmapped are mapped back (their access is the caller's to restore). */
CUresult cs_tiling_unmap(const struct cs_tiling *t, CUdeviceptr va, uint64_t size, uint64_t off);

/* Creates `size` bytes of pinned HOST-located memory that the device can
 * reach (the placeholder); subject to the host reserve. */
CUresult cs_backing_create_host(uint64_t size, CUmemGenericAllocationHandle *h);

/* Frees b (if any) and takes its bytes off *held. */
void cs_backing_drop(struct cs_backing *b, _Atomic uint64_t *held);

/* Frees b without accounting (the caller took it off already). */
void cs_backing_free(struct cs_backing *b);

#endif
