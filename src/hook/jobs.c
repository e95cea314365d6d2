/* jobs.c: what the device's worker and pinner do for each job (worker.h).
 *
 * A revoke drains the job's work and swaps out what the daemon asked, then
 * RELEASEs; a grant restores the job's memory, then opens the gate; EVICT
 * swaps out (or, with PREPARE, pins ahead) while the job does not hold the
 * GPU; PREFETCH restores ahead of a grant; an idle probe (report.c), a
 * timeslice change (tsg.c) and a latency-critical burst (burst.c) run here
 * too, so that the client I/O thread never blocks.
 */
#include "hook/jobs.h"
#include "hook/burst.h"
#include "hook/client.h"
#include "hook/config.h"
#include "hook/lease.h"
#include "hook/report.h"
#include "hook/swap.h"
#include "hook/tsg.h"
#include "hook/worker.h"
#include "common/log.h"
#include "common/util.h"

#include <time.h>

static void job_revoke(struct cs_dev *d, const struct cs_job *job)
{
    pthread_mutex_lock(&d->mu);
    if (d->lease.state == CS_LEASE_HELD && d->lease.id == job->id) {
        d->lease.state = CS_LEASE_REVOKING; /* the revoke overtook its grant */
        cs_lease_close_gate_locked(d);
    }
    pthread_mutex_unlock(&d->mu);
    cs_dev_wait_inside_zero(d);
    cs_dev_drain_reaching(d);
    uint64_t drain_ns = cs_now_ns() - job->t0;
    struct cs_swap_result sw = {CUDA_SUCCESS, 0, 0};
    if (job->bytes && cs_cfg.swap)
        sw = cs_swap_out(d, job->bytes);

    pthread_mutex_lock(&d->mu);
    d->stats.drain_ns += drain_ns;
    if (job->conn == cs_client_generation() && cs_client_is_connected()) {
        cs_lease_ask_again_locked(d);
        struct cs_msg m = {.type = CS_MSG_RELEASE};
        m.u.release.slot = (uint32_t)d->ordinal;
        m.u.release.reason = CS_RELEASE_REVOKED;
        m.u.release.lease_id = job->id;
        m.u.release.drain_ns = drain_ns;
        m.u.release.swap_ns = sw.ns;
        m.u.release.swapped_bytes = sw.bytes;
        cs_client_send(&m);
    }
    cs_lease_released_locked(d);
    pthread_mutex_unlock(&d->mu);
}

/* A grant still being restored is abandoned when the connection it came on
 * is gone (a new daemon knows nothing of it: the device re-attached as
 * WAITING) or when the daemon has already revoked it (the queued REVOKE then
 * answers with RELEASE). */
static bool grant_stale_locked(const struct cs_dev *d, const struct cs_job *job)
{
    return job->conn != cs_client_generation() ||
           cs_worker_has_locked(d, CS_JOB_REVOKE, job->id);
}

static bool grant_stale(struct cs_dev *d, const struct cs_job *job)
{
    pthread_mutex_lock(&d->mu);
    bool stale = grant_stale_locked(d, job);
    pthread_mutex_unlock(&d->mu);
    return stale;
}

static void job_evict(struct cs_dev *d, const struct cs_job *job);

/* While a restore waits for room, EVICT requests still get answered (the
 * daemon may be moving this very job's memory to make room elsewhere). */
static void serve_queued_evicts(struct cs_dev *d)
{
    struct cs_job ev[CS_JOBQ];
    pthread_mutex_lock(&d->mu);
    unsigned n = cs_worker_take_locked(d, CS_JOB_EVICT, ev);
    pthread_mutex_unlock(&d->mu);
    for (unsigned i = 0; i < n; i++)
        job_evict(d, &ev[i]);
}

/* What a grant does once the memory is back, segs.mu still held (so that
 * no allocation can appear unplaced before the gate opens): hold the lease
 * and say RESTORED. */
struct grant_ctx {
    const struct cs_job *job;
    uint64_t restored;
    bool failed;      /* an attempt before this one failed */
};

static void granted(struct cs_dev *d, uint64_t bytes, void *arg)
{
    struct grant_ctx *c = arg;
    const struct cs_job *job = c->job;
    c->restored += bytes;
    pthread_mutex_lock(&d->mu);
    /* A grant that went stale while its memory came back never opens the
     * gate: revoked meanwhile (its REVOKE is queued and answers with
     * RELEASE; after its revoke timeout the daemon may already have given
     * the GPU to someone else), or given by a daemon that has since gone (a
     * new one knows this client as waiting and grants anew). Opening it
     * would let this job's work run beside the next holder's: the lease
     * model found both orderings (docs/model.md). */
    if (grant_stale_locked(d, job)) {
        cs_debug("GPU %d: grant %llu went stale during its restore: gate kept closed",
                 d->ordinal, (unsigned long long)job->id);
        pthread_mutex_unlock(&d->mu);
        return;
    }
    if (d->lease.state != CS_LEASE_DETACHED)
        cs_lease_hold_locked(d, job->id);
    cs_debug("GPU %d: lease %llu open after restoring %llu bytes in %.1f ms", d->ordinal,
             (unsigned long long)job->id, (unsigned long long)c->restored,
             (double)(cs_now_ns() - job->t0) / 1e6);
    if (job->conn == cs_client_generation()) {
        struct cs_msg m = {.type = CS_MSG_RESTORED};
        m.u.restored.slot = (uint32_t)d->ordinal;
        m.u.restored.status = c->failed ? CUDA_ERROR_OUT_OF_MEMORY : 0;
        m.u.restored.lease_id = job->id;
        m.u.restored.bytes = c->restored;
        m.u.restored.ns = cs_now_ns() - job->t0;
        cs_client_send(&m);
    }
    pthread_mutex_unlock(&d->mu);
}

/* A restore that keeps failing is said every 5 s; each attempt is retried
 * after 100 ms. */
static void grant_failed(const struct cs_dev *d, CUresult status, uint64_t *first_fail)
{
    uint64_t now = cs_now_ns();
    if (!*first_fail)
        *first_fail = now;
    if (now - *first_fail <= 5000000000ull)
        return;
    const char *why = "?";
    cs_real.cuGetErrorName(status, &why);
    if (status == CUDA_ERROR_OUT_OF_MEMORY)
        cs_warn("GPU %d: still waiting for room to restore this job's memory", d->ordinal);
    else
        cs_error("GPU %d: restoring this job's memory keeps failing with %s (not a lack "
                 "of room); retrying", d->ordinal, why);
    *first_fail = now;
}

/* Restores the job's memory and opens the gate. Retries (asking for room
 * each time) until the memory fits: a gate opened over unmapped memory
 * would fault the job's kernels. */
static void job_grant(struct cs_dev *d, const struct cs_job *job)
{
    struct grant_ctx c = {job, 0, false};
    uint64_t first_fail = 0;
    for (;;) {
        struct cs_swap_result sw = {CUDA_SUCCESS, 0, 0};
        if (cs_cfg.swap)
            sw = cs_swap_restore(d, granted, &c);
        else
            granted(d, 0, &c);
        if (sw.status == CUDA_SUCCESS) {
            if (cs_cfg.swap)
                cs_swap_trim(d); /* after the gate opened: off the critical path */
            return;
        }
        c.restored += sw.bytes; /* kept resident: the next attempt skips it */
        c.failed = true;
        if (grant_stale(d, job))
            return;
        serve_queued_evicts(d);
        grant_failed(d, sw.status, &first_fail);
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
    }
}

static void job_evict(struct cs_dev *d, const struct cs_job *job)
{
    struct cs_swap_result sw = {CUDA_ERROR_NOT_SUPPORTED, 0, 0};
    pthread_mutex_lock(&d->mu);
    bool open = atomic_load(&d->gate.open) != 0;
    pthread_mutex_unlock(&d->mu);
    if (!cs_cfg.swap) {
        sw.status = CUDA_ERROR_NOT_SUPPORTED;
    } else if (job->flags & CS_EVICT_GIVEBACK) {
        sw = cs_swap_giveback(d, job->bytes);
    } else if (job->flags & CS_EVICT_PREPARE) {
        sw = cs_swap_prepare(d, job->bytes);
    } else if (open) {
        sw.status = CUDA_ERROR_NOT_PERMITTED; /* running: only a revoke may move it */
    } else {
        sw = cs_swap_out(d, job->bytes);
    }
    cs_debug("GPU %d: %s %llu bytes in %.1f ms (status %d)", d->ordinal,
             job->flags & CS_EVICT_GIVEBACK  ? "gave back pool pieces of"
             : job->flags & CS_EVICT_PREPARE ? "pinned ahead"
                                             : "evicted",
             (unsigned long long)sw.bytes, (double)sw.ns / 1e6, (int)sw.status);
    struct cs_msg r = {.type = CS_MSG_EVICTED};
    r.u.evicted.slot = (uint32_t)d->ordinal;
    r.u.evicted.request_id = job->id;
    r.u.evicted.status = (int32_t)sw.status;
    r.u.evicted.bytes = sw.bytes;
    r.u.evicted.ns = sw.ns;
    cs_client_send(&r);
}

static void job_prefetch(struct cs_dev *d, const struct cs_job *job)
{
    struct cs_swap_result sw = {CUDA_ERROR_NOT_SUPPORTED, 0, 0};
    if (cs_cfg.swap)
        sw = cs_swap_prefetch(d, job->bytes);
    cs_debug("GPU %d: prefetched %llu bytes in %.1f ms (status %d)", d->ordinal,
             (unsigned long long)sw.bytes, (double)sw.ns / 1e6, (int)sw.status);
    struct cs_msg r = {.type = CS_MSG_PREFETCHED};
    r.u.prefetched.slot = (uint32_t)d->ordinal;
    r.u.prefetched.request_id = job->id;
    r.u.prefetched.status = (int32_t)sw.status;
    r.u.prefetched.bytes = sw.bytes;
    r.u.prefetched.ns = sw.ns;
    cs_client_send(&r);
}

/* After a job that may have evicted memory: its backing is shown at its
 * addresses by the pinner thread, one SHOW at a time. */
static void queue_show(struct cs_dev *d)
{
    if (!cs_seg_unshown(d->ordinal))
        return;
    pthread_mutex_lock(&d->mu);
    if (!d->jobs.show_queued &&
        cs_worker_push_pin_locked(d, (struct cs_job){.kind = CS_JOB_SHOW}))
        d->jobs.show_queued = true;
    pthread_mutex_unlock(&d->mu);
}

static void job_show(struct cs_dev *d)
{
    pthread_mutex_lock(&d->mu);
    d->jobs.show_queued = false; /* an eviction from now on queues another */
    pthread_mutex_unlock(&d->mu);
    cs_swap_show(d);
}

static void run(struct cs_dev *d, const struct cs_job *job)
{
    switch (job->kind) {
    case CS_JOB_REVOKE:
        job_revoke(d, job);
        break;
    case CS_JOB_GRANT:
        job_grant(d, job);
        break;
    case CS_JOB_EVICT:
        job_evict(d, job);
        break;
    case CS_JOB_PREFETCH:
        job_prefetch(d, job);
        break;
    case CS_JOB_IDLE_PROBE:
        cs_report_idle_probe(d, job);
        break;
    case CS_JOB_TIMESLICE:
        /* One RM round trip per compute group (0.16-0.3 ms on an H100, one
         * group per context): a REVOKE queued behind it waits well under
         * the 1 ms a drain budget allows; the pinner would be the wrong
         * place (a PREPARE pins for ~0.2 s/GiB and the LC job would wait
         * that long for its protection). */
        cs_tsg_apply();
        break;
    case CS_JOB_BURST:
        cs_burst_run(d, job);
        break;
    case CS_JOB_SHOW:
        job_show(d);
        return;
    }
    queue_show(d);
}

static const struct cs_worker_ops ops = {.run = run};

void cs_jobs_init(void)
{
    cs_worker_set_ops(&ops);
}
