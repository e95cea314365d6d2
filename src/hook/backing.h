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

/* Frees b (if any) and takes its bytes off *held. */
void cs_backing_drop(struct cs_backing *b, _Atomic uint64_t *held);

/* Frees b without accounting (the caller took it off already). */
void cs_backing_free(struct cs_backing *b);

#endif
