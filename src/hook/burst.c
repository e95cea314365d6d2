/* burst.c: see burst.h. */
#include "hook/burst.h"
#include "hook/client.h"
#include "hook/lease.h"
#include "hook/worker.h"
#include "common/util.h"

#include <sched.h>

static uint32_t entries_of(struct cs_dev *d)
{
    return (uint32_t)(atomic_load_explicit(&d->gate.subm, memory_order_seq_cst) >> 32);
}

/* Whether job's lease is still held in RELEASE_IDLE mode; d->mu held. */
static bool burst_current_locked(const struct cs_dev *d, const struct cs_job *job)
{
    return d->lease.state == CS_LEASE_HELD && d->lease.id == job->id &&
           d->lc.mode == CS_LC_RELEASE_IDLE;
}

/* Waits up to linger_us (or until a hint's deadline) for a new submission.
 * 1: one came; 0: none; -1:
 * other work for the worker arrived (the burst job is queued again behind
 * it). Spins with sched_yield: the linger is a few hundred microseconds and
 * a sleep would overshoot it by the timer slack. */
static int linger(struct cs_dev *d, const struct cs_job *job, uint32_t e0, uint32_t linger_us)
{
    uint64_t end = cs_now_ns() + (uint64_t)linger_us * 1000u;
    pthread_mutex_lock(&d->mu);
    if (d->lc.hint_until_ns > end) /* a hint said work comes: wait for it */
        end = d->lc.hint_until_ns;
    pthread_mutex_unlock(&d->mu);
    while (cs_now_ns() < end) {
        if (entries_of(d) != e0)
            return 1;
        pthread_mutex_lock(&d->mu);
        bool other = cs_worker_pending_locked(d);
        if (other && burst_current_locked(d, job))
            cs_worker_push_locked(d, *job);
        pthread_mutex_unlock(&d->mu);
        if (other)
            return -1;
        sched_yield();
    }
    return 0;
}

/* Gives the lease back on its own (RELEASE IDLE, then LC_BURST); d->mu
 * held, the gate closed and nothing inside. */
static void release_burst_locked(struct cs_dev *d, const struct cs_job *job, uint64_t done_ns)
{
    if (job->conn == cs_client_generation() && cs_client_is_connected()) {
        struct cs_msg m = {.type = CS_MSG_RELEASE};
        m.u.release.slot = (uint32_t)d->ordinal;
        m.u.release.reason = CS_RELEASE_IDLE;
        m.u.release.lease_id = job->id;
        cs_client_send(&m);
        struct cs_msg b = {.type = CS_MSG_LC_BURST};
        b.u.lc_burst.slot = (uint32_t)d->ordinal;
        b.u.lc_burst.lease_id = job->id;
        b.u.lc_burst.wait_ns = d->lc.wait_ns;
        b.u.lc_burst.busy_ns = done_ns > d->lc.open_ns ? done_ns - d->lc.open_ns : 0;
        cs_client_send_cap(CS_HELLO_LC, &b);
    }
    d->lc.bursts++;
    cs_lease_released_locked(d);
}

/* The lease was granted for a burst of latency-critical work: wait for the
 * GPU to finish it, linger for more, then close the gate and release. A
 * submission that slips in before the gate closes reopens it and the watch
 * goes on; a REVOKE that arrives meanwhile owns the lease from then on (its
 * own job drains and releases). */
void cs_burst_run(struct cs_dev *d, const struct cs_job *job)
{
    for (;;) {
        pthread_mutex_lock(&d->mu);
        bool mine = burst_current_locked(d, job);
        uint32_t linger_us = d->lc.param_us;
        pthread_mutex_unlock(&d->mu);
        if (!mine)
            return;
        uint32_t e0 = entries_of(d);
        cs_dev_drain(d);
        uint64_t done = cs_now_ns();
        int more = linger(d, job, e0, linger_us);
        if (more < 0)
            return;
        if (more > 0)
            continue;
        pthread_mutex_lock(&d->mu);
        if (!burst_current_locked(d, job)) {
            pthread_mutex_unlock(&d->mu);
            return;
        }
        cs_lease_close_gate_locked(d);
        pthread_mutex_unlock(&d->mu);
        cs_dev_wait_inside_zero(d);
        pthread_mutex_lock(&d->mu);
        if (!burst_current_locked(d, job)) { /* revoked meanwhile: the revoke owns it */
            pthread_mutex_unlock(&d->mu);
            return;
        }
        if (entries_of(d) != e0) { /* work slipped in before the gate closed */
            cs_lease_open_gate_locked(d);
            pthread_mutex_unlock(&d->mu);
            continue;
        }
        release_burst_locked(d, job, done);
        pthread_mutex_unlock(&d->mu);
        return;
    }
}
