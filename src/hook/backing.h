/* backing.h: the pinned host memory that swapped-out segments live in.
 *
 * A segment's backing (struct cs_backing, seg.h) is pinned a piece at a
 * time (CUSHARE_PIN_PIECE) and kept across swaps: pinning costs ~0.2 s/GiB
 * and copying ~0.02. It is pinned either by the swap-out that needs it, or
 * ahead of need by the pinner thread when the scheduler asks (EVICT
 * PREPARE), or not at all when the host would be left with less than
 * CUSHARE_HOST_RESERVE. Beyond CUSHARE_PIN_KEEP, backing of memory that is
 * back on the GPU is let go after a grant.
 *
 * The pinner works with segs.mu released, one piece at a time, and names
 * the segment it is pinning (cs_segs.pinning). Code that must not race it
 * (a swap-out, a trim, freeing a segment) holds it off: the pinner starts
 * no piece while held off, and the hold waits for the piece in flight.
 */
#ifndef CS_HOOK_BACKING_H
#define CS_HOOK_BACKING_H

#include "hook/swap.h"

static inline bool cs_backing_complete(const struct cs_backing *b)
{
    return b->size && b->pinned == b->size;
}

/* Completes g's backing, pinning what it lacks. False when the host (its
 * reserve), the guard or the driver refuses; what was pinned stays. The
 * pinner must be held off. Caller holds segs.mu. */
bool cs_backing_ensure_locked(struct cs_segs *s, struct cs_seg *g);

/* Frees g's backing (g is being destroyed). Caller holds segs.mu. */
void cs_backing_drop_locked(struct cs_segs *s, struct cs_seg *g);

/* Keeps the pinner from starting a piece, and waits (releasing mu) for
 * the one in flight to land. Every hold is released. Caller holds segs.mu. */
void cs_backing_hold_pinner_locked(struct cs_segs *s);
void cs_backing_release_pinner_locked(struct cs_segs *s);

/* Pins host backing for up to `bytes` of resident memory ahead of need, so
 * that a later swap-out does not pay for pinning; gives way between pieces
 * to a hold and to the job's threads inside an allocation. Takes
 * cs_segs[d].mu only briefly: the pinning itself runs unlocked. */
struct cs_swap_result cs_backing_prepare(struct cs_dev *d, uint64_t bytes);

/* Frees the host backing of resident segments beyond CUSHARE_PIN_KEEP bytes
 * (largest first): host memory back for the price of pinning again at the
 * next swap-out. Takes cs_segs[d].mu briefly; the freeing runs unlocked. */
void cs_backing_trim(struct cs_dev *d);

#endif
