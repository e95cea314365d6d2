/* bound.h: the bounded in-flight queue of a best-effort job beside a
 * latency-critical one (LC_MODE BOUNDED, issue 7; docs/priority.md).
 *
 * When channel-group timeslices cannot keep a BE job's kernels out of an LC
 * job's way, the daemon revokes the BE job while the LC job has work. A
 * revoke waits for the work already queued: PyTorch queues up to ~1000
 * kernels, seconds of work. In BOUNDED mode the hook therefore keeps at most
 * about `window` of work in flight: after each submission it records an
 * event on the submission's stream, and before the next one it waits until
 * fewer than K events are pending, K = window / the measured GPU time per
 * submission (the elapsed time between consecutive completed events; an
 * adaptive window, no context synchronizes). A revoke then drains in about
 * the window, or one submission when a single kernel is longer.
 *
 * This is a slow path by design: only a gated BE job runs it, and only
 * while an LC job is attached beside it. The gate word says so (its value
 * CS_GATE_BOUNDED sends gated calls to cs_gate_slow), so the hot path of
 * everyone else is unchanged. It takes a mutex and calls the driver; it
 * never allocates.
 */
#ifndef CS_HOOK_BOUND_H
#define CS_HOOK_BOUND_H

#include "hook/hook.h"

#include <pthread.h>
#include <stdbool.h>

/* Events per device; at most CS_BOUND_RING - 2 pending (the slot before the
 * oldest keeps the last completed event, the start of the next sample). */
#define CS_BOUND_RING 128u

struct cs_bound {
    pthread_mutex_t mu;       /* guards everything below */
    CUcontext ctx;            /* the events' context; NULL = none created */
    bool broken;              /* creating events failed: do not bound */
    CUevent ev[CS_BOUND_RING];
    uint64_t head, tail;      /* pending = [head, tail), slot = seq % RING */
    bool have_prev;           /* ev[(head - 1) % RING] completed: a sample start */
    uint64_t est_ns;          /* smoothed GPU time per submission, 0 = unknown */
    uint32_t window_us;       /* LC_MODE BOUNDED's window; 0 = not bounded */
    /* statistics */
    uint64_t waits;           /* submissions that waited for the window */
    uint64_t wait_ns;
    uint64_t recorded;        /* events recorded */
};

/* LC_MODE for this device: the window in force (0: none). */
void cs_bound_set_window(struct cs_bound *b, uint32_t window_us);

/* Before a bounded submission (the caller is outside the gate): waits until
 * less than the window of work is pending. False if this submission cannot
 * be bounded (no window, or no events in the current context): it goes
 * unbounded. */
bool cs_bound_admit(struct cs_bound *b);

/* After a bounded submission on stream s (the caller is inside the gate):
 * records its completion event. */
void cs_bound_record(struct cs_bound *b, CUstream s, int per_thread);

/* The context is going away: its events with it. */
void cs_bound_forget_ctx(struct cs_bound *b, CUcontext ctx);

/* Every event forgotten (the device's contexts are being reset). */
void cs_bound_drop(struct cs_bound *b);

void cs_bound_init(struct cs_bound *b);

#endif
