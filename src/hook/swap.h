/* swap.h: moving a job's device memory to pinned host memory and back.
 *
 * Swap-out copies RESIDENT segments to their host backing on the device's
 * swap stream, waits for the copies, and only then unmaps and releases the
 * physical memory: a failure anywhere leaves the segment resident and the
 * data where it was. Swap-in creates physical memory, maps it at the same
 * address, copies the backing back, and waits, before the gate reopens.
 * Host backing (backing.c) is pinned once and kept for the next swap:
 * pinning costs far more than copying (see bench/results/oversubscription.md);
 * it is pinned by the swap-out that needs it, or ahead of need
 * (cs_swap_prepare, the pinner thread, when the scheduler says EVICT
 * PREPARE), and beyond CUSHARE_PIN_KEEP let go after a grant (cs_swap_trim).
 *
 * Every function takes the device's segs.mu itself. They run on the
 * device's worker or pinner thread, with the job's work drained or its
 * gate closed, so no kernel can touch memory that is moving.
 */
#ifndef CS_HOOK_SWAP_H
#define CS_HOOK_SWAP_H

#include "hook/seg.h"

struct cs_swap_result {
    CUresult status;   /* CUDA_SUCCESS, or why it stopped */
    uint64_t bytes;    /* moved (or pinned) */
    uint64_t ns;       /* wall time */
};

/* Moves up to `bytes` (UINT64_MAX: everything swappable) of device d to
 * host memory. The job must not be able to submit work (gate closed, work
 * drained). */
struct cs_swap_result cs_swap_out(struct cs_dev *d, uint64_t bytes);

/* Makes every segment of device d resident again. On OUT_OF_MEMORY it asks
 * the scheduler for room and retries; it returns an error only if that
 * fails, leaving what it restored resident and the rest swapped. On
 * success it calls then(d, bytes copied back, arg) before releasing
 * segs.mu, so that no allocation can appear unplaced between the restore
 * and what `then` does (the lease opens the gate there). */
struct cs_swap_result cs_swap_restore(struct cs_dev *d,
                                      void (*then)(struct cs_dev *, uint64_t, void *), void *arg);

/* Restores ahead of the grant, the gate closed: at most `budget` bytes,
 * never asking for room, passing over what does not fit (the scheduler
 * offered what is free, not more). */
struct cs_swap_result cs_swap_prefetch(struct cs_dev *d, uint64_t budget);

/* Pins host backing for up to `bytes` of resident memory ahead of need, so
 * that a later swap-out does not pay for pinning; gives way between pieces
 * to a hold and to the job's threads inside an allocation. Takes segs.mu
 * only briefly: the pinning itself runs unlocked. */
struct cs_swap_result cs_swap_prepare(struct cs_dev *d, uint64_t bytes);

/* Gives the node's pool back its pieces that back resident segments
 * (pinned ahead or kept), whole backings until about `bytes` are off
 * (EVICT GIVEBACK: another job's swap-out needs them). res.bytes: the
 * backing freed. Takes segs.mu briefly; the freeing runs unlocked. */
struct cs_swap_result cs_swap_giveback(struct cs_dev *d, uint64_t bytes);

/* Before a holder asks for room (segs.mu held): gives the node's pool
 * back its pieces that back resident segments, after waiting for the
 * restore's copies out of them, so that the victims' swap-outs borrow them
 * rather than pin. Returns the bytes given back (0: none lent, or the
 * stream could not be synchronized). */
uint64_t cs_swap_lend_back_locked(struct cs_dev *d);

/* At the process's exit: gives the node's pool back, at once, its pieces
 * that back resident segments, without unmapping them, and stops pinning
 * ahead for good. Only tries segs.mu: nothing when the swap engine or the
 * pinner is busy (those pieces come back when the daemon sees the process
 * end). */
void cs_swap_exit(struct cs_dev *d);

/* Shows the backing of evicted segments at their addresses (seg.h,
 * cs_seg_evict_locked), one segment per hold of segs.mu, giving way to the
 * job's threads inside an allocation between segments. Run by the pinner
 * thread after a swap-out, so that no revoke waits for it. */
void cs_swap_show(struct cs_dev *d);

/* Frees the host backing of resident segments beyond CUSHARE_PIN_KEEP bytes
 * (largest first): host memory back for the price of pinning again at the
 * next swap-out. Takes segs.mu briefly; the freeing runs unlocked. */
void cs_swap_trim(struct cs_dev *d);

#endif
