/* swap.h: moving a job's device memory to pinned host memory and back.
 *
 * Swap-out copies RESIDENT segments to their host backing on the device's
 * swap stream, waits for the copies, and only then unmaps and releases the
 * physical memory: a failure anywhere leaves the segment resident and the
 * data where it was. Swap-in creates physical memory, maps it at the same
 * address, copies the backing back, and waits, before the gate reopens.
 * Host backing (backing.c) is pinned once and kept for the next swap:
 * pinning costs far more than copying (see bench/results/oversubscription.md).
 *
 * All of it runs on the device's worker thread (never on an application
 * thread, never inside a hook), with the job's work drained or its gate
 * closed, so no kernel can touch memory that is moving.
 */
#ifndef CS_HOOK_SWAP_H
#define CS_HOOK_SWAP_H

#include "hook/seg.h"

struct cs_swap_result {
    CUresult status;   /* CUDA_SUCCESS, or why it stopped */
    uint64_t bytes;    /* moved */
    uint64_t ns;       /* wall time */
};

/* Moves up to `bytes` (CS_ALL_BYTES: everything swappable) of device d to
 * host memory. The job must not be able to submit work (gate closed, work
 * drained). Caller holds cs_segs[d].mu. */
struct cs_swap_result cs_swap_out_locked(struct cs_dev *d, uint64_t bytes);

/* Makes every segment of device d resident again. On CUDA_ERROR_OUT_OF_MEMORY
 * it asks the scheduler for room and retries; it returns an error only if
 * that fails, leaving what it restored resident and the rest swapped.
 * Caller holds cs_segs[d].mu (and keeps it until the gate is open, so no
 * allocation can slip in unmapped).
 * A prefetch (the gate stays closed) moves at most `budget` bytes, never
 * asks for room, and stops quietly at the first segment that does not fit:
 * the scheduler offered what is free, not more. */
struct cs_swap_result cs_swap_in_locked(struct cs_dev *d, uint64_t budget, bool prefetch);

/* seg.c helpers (segs.mu held). */
CUresult cs_swap_map_new_locked(struct cs_dev *d, struct cs_segs *s, struct cs_seg *g);
CUresult cs_seg_map_locked(struct cs_seg *g);
/* Takes g's memory off the GPU. When the driver refuses to unmap, g keeps
 * its memory, still mapped (g->h stays set) and the error is returned: a
 * segment marked absent over a live mapping could never be placed again. */
CUresult cs_seg_unmap_locked(struct cs_seg *g);
void cs_seg_set_state_locked(struct cs_segs *s, struct cs_seg *g, enum cs_seg_state st);

#endif
