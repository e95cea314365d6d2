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

/* Pieces of the node's pinned pool (cushared) in a backing: their ids, to
 * give back when the backing is freed, and the connection they came on
 * (pieces lent on an earlier connection are this process's own: a
 * restarted daemon does not know them). */
struct cs_lent {
    uint64_t gen;                    /* cs_backing_pool.borrow's connection */
    uint32_t n, cap;
    uint32_t ids[];
};

/* Pinned host memory addressed by `va` in either form:
 *   - VMM pieces mapped one after another into a range reserved for the
 *     whole backing: `piece` bytes each up to the last whole piece, then
 *     the rest in pieces of `tail` bytes (one piece of the rest when pinned
 *     here, 2 MiB ones when lent). A piece is pinned here (cuMemCreate(HOST),
 *     the cheapest to pin) or lent by the node's pool (an imported
 *     descriptor: pinned once per node, 12-14 ms/GiB to take in);
 *   - one cuMemHostAlloc block (piece == 0), the fallback.
 * Usable once complete (pinned == size). */
struct cs_backing {
    CUdeviceptr va;
    uint64_t size;                   /* bytes at va, 0 = none */
    uint64_t pinned;                 /* the prefix pinned so far */
    uint64_t piece;                  /* VMM piece size; 0 = cuMemHostAlloc */
    uint64_t tail;                   /* piece size past the whole pieces; 0 = not yet known */
    struct cs_lent *lent;            /* pool pieces in it, NULL = none */
};

/* Where a backing's lent pieces come from: the node's pool, through the
 * scheduler connection (registered by init; none = every piece pinned
 * here). */
struct cs_backing_pool {
    /* Up to n pieces of kind (enum cs_piece_kind) for GPU dev: their
     * descriptors (the caller closes them), ids and size, and the
     * connection generation; returns how many (0: pin here). May wait for
     * the scheduler's answer (bounded). */
    uint32_t (*borrow)(int dev, uint32_t kind, uint32_t n, int *fds, uint32_t *ids,
                       uint64_t *size, uint64_t *gen);
    /* The pieces are unmapped and released here: give them back (when gen
     * is still the connection's). */
    void (*give_back)(const uint32_t *ids, uint32_t n, uint64_t gen);
};
void cs_backing_set_pool(const struct cs_backing_pool *pool);

/* What this process's backings took, over its life: pinned here, and lent
 * by the pool (taken in: import, map, access). */
struct cs_backing_stats {
    uint64_t pinned_bytes, pinned_ns;
    uint64_t lent_bytes, lent_ns;
};
void cs_backing_get_stats(struct cs_backing_stats *out);

/* True when b holds pieces of the node's pool. */
static inline bool cs_backing_lent(const struct cs_backing *b)
{
    return b->lent && b->lent->n;
}

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

/* cs_backing_step, adding what it took in to *held. */
bool cs_backing_grow(struct cs_backing *b, uint64_t size, int dev, _Atomic uint64_t *held);

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
    uint64_t whole;                     /* backing: bytes in whole `tile` pieces */
    uint64_t tail;                      /* backing: piece size past them */
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

/* At the process's exit: gives b's lent pieces back to the node's pool and
 * forgets b without unmapping or freeing anything (the process's end
 * does). The caller took it off already, and nothing copies into it
 * again. */
void cs_backing_abandon(struct cs_backing *b);

#endif
