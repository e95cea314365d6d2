/* worker.h: each device's two threads and their job queues.
 *
 * The worker runs, in arrival order, what must not run on the client I/O
 * thread (which answers the daemon and must never block) nor on an
 * application thread: revokes (drain, swap out, RELEASE), grants (restore,
 * open the gate), evictions, prefetches, idle probes, timeslice changes
 * and latency-critical bursts. The pinner runs pin-ahead (EVICT PREPARE):
 * pinning takes ~0.2 s/GiB, and a revoke must never wait behind it.
 *
 * This module only queues and runs: what a job does is the ops table's
 * (jobs.c registers it at init). The queues are guarded by the device's mu
 * (struct cs_dev_jobs); the functions named _locked expect it held.
 */
#ifndef CS_HOOK_WORKER_H
#define CS_HOOK_WORKER_H

#include "hook/device.h"

struct cs_worker_ops {
    /* Runs one job on the device's worker or pinner thread (no lock held). */
    void (*run)(struct cs_dev *d, const struct cs_job *job);
};
/* Registered once at init, before any device attaches. */
void cs_worker_set_ops(const struct cs_worker_ops *ops);

/* Starts the device's worker and pinner if not yet running. Without a
 * worker revokes cannot be honoured (logged); without a pinner, PREPARE
 * requests run on the worker (slower revokes, nothing lost). */
void cs_worker_start_locked(struct cs_dev *d);

/* Queues a job for the worker, stamped with the connection generation it
 * arrived on and the time; false if the queue is full (the daemon is
 * flooding us: the caller answers with an error). */
bool cs_worker_push_locked(struct cs_dev *d, struct cs_job job);
/* The same for the pinner (the worker when there is no pinner). */
bool cs_worker_push_pin_locked(struct cs_dev *d, struct cs_job job);
/* Whether a job of this kind and id waits in the worker's queue. */
bool cs_worker_has_locked(const struct cs_dev *d, uint8_t kind, uint64_t id);
/* Whether anything waits in the worker's queue. */
bool cs_worker_pending_locked(const struct cs_dev *d);
/* Takes every job of this kind out of the worker's queue, in order, into
 * out (room for CS_JOBQ); returns how many. */
unsigned cs_worker_take_locked(struct cs_dev *d, uint8_t kind, struct cs_job *out);
/* Whether a GRANT for this lease is queued or running: a REVOKE may
 * overtake its own grant and must then queue behind it. */
bool cs_worker_grant_queued_locked(const struct cs_dev *d, uint64_t lease_id);

#endif
