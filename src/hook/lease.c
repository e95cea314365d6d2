/* lease.c: see lease.h for the state machine. */
#include "hook/lease.h"
#include "hook/client.h"
#include "hook/config.h"
#include "hook/mem.h"
#include "hook/swap.h"
#include "hook/backing.h"
#include "hook/tsg.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <sched.h>
#include <string.h>
#include <time.h>

static void *worker_main(void *arg);
static void *pinner_main(void *arg);

/* Open, or open with the in-flight bound when the daemon asked this
 * device for it (LC_MODE BOUNDED, bound.h). */
static uint32_t open_value_locked(const struct cs_dev *d)
{
    return d->lc_mode == CS_LC_BOUNDED ? CS_GATE_BOUNDED : CS_GATE_OPEN;
}

static void open_gate_locked(struct cs_dev *d)
{
    atomic_store_explicit(&d->open, open_value_locked(d), memory_order_seq_cst);
    pthread_cond_broadcast(&d->gate_cv);
}

static bool enqueue_locked(struct cs_dev *d, struct cs_job job);
static bool jobq_has(struct cs_jobq *q, uint8_t kind, uint64_t id);

static void close_gate_locked(struct cs_dev *d)
{
    /* seq_cst store, then (in the worker) a seq_cst read of the inside
     * count: with the seq_cst add+load in cs_gate_enter this is Dekker's
     * pattern, so either the submitter sees the gate closed or we see it
     * inside, never neither. */
    atomic_store_explicit(&d->open, 0, memory_order_seq_cst);
}

static void set_unmanaged_locked(struct cs_dev *d)
{
    d->state = CS_LEASE_UNMANAGED;
    d->lc_mode = CS_LC_NONE; /* no daemon, no latency-critical neighbour it knows of */
    cs_bound_set_window(&d->bound, 0);
    open_gate_locked(d);
}

/* RELEASE_IDLE: the worker watches the burst the lease was taken for and
 * gives the lease back when it is done (job_burst). */
static void watch_burst_locked(struct cs_dev *d)
{
    if (d->lc_mode == CS_LC_RELEASE_IDLE && d->state == CS_LEASE_HELD &&
        !jobq_has(&d->work, CS_JOB_BURST, d->lease_id) &&
        !enqueue_locked(d, (struct cs_job){.kind = CS_JOB_BURST, .id = d->lease_id}))
        cs_warn("GPU %d: too much queued scheduler work; the lease is kept until idle",
                d->ordinal);
}

static void hold_locked(struct cs_dev *d, uint64_t lease_id)
{
    d->state = CS_LEASE_HELD;
    d->lease_id = lease_id;
    d->acquire_sent = false;
    d->grants++;
    d->idle_last_entries = (uint32_t)(atomic_load(&d->subm) >> 32);
    d->idle_last_host_done = atomic_load(&d->host_done);
    d->idle_last_activity_ns = cs_now_ns();
    d->idle_reported = false;
    d->idle_gpu_done = false;
    uint64_t now = cs_now_ns();
    d->burst_wait_ns = d->burst_wait_t0 ? now - d->burst_wait_t0 : 0;
    d->burst_wait_t0 = 0;
    d->burst_open_ns = now;
    open_gate_locked(d);
    watch_burst_locked(d);
}

/* The ATTACH describing this device's state to a (re)connected daemon. An
 * open gate claims its hold; waiting work counts as an ACQUIRE. */
static void attach_msg_locked(struct cs_dev *d, struct cs_msg *m)
{
    memset(m, 0, sizeof *m);
    m->type = CS_MSG_ATTACH;
    m->u.attach.slot = (uint32_t)d->ordinal;
    memcpy(m->u.attach.uuid, d->uuid, CS_UUID_LEN);
    m->u.attach.total_mem = d->total_mem;
    if (d->state == CS_LEASE_HELD || d->state == CS_LEASE_UNMANAGED) {
        m->u.attach.flags = CS_ATTACH_HELD;
        m->u.attach.lease_id = d->lease_id;
    } else if (d->state == CS_LEASE_WAITING || d->waiters > 0) {
        m->u.attach.flags = CS_ATTACH_WAITING;
    }
}

static void after_attach_sent_locked(struct cs_dev *d, const struct cs_msg *m)
{
    d->attach_sent = true;
    memset(d->usage_sent, 0, sizeof d->usage_sent); /* report afresh */
    d->pinned_sent = 0;
    d->lost_warned = false;
    if (m->u.attach.flags & CS_ATTACH_HELD) {
        if (d->state == CS_LEASE_UNMANAGED) {
            d->state = CS_LEASE_HELD;
            d->lease_id = 0;
        }
    } else if (m->u.attach.flags & CS_ATTACH_WAITING) {
        if (d->state == CS_LEASE_IDLE)
            d->state = CS_LEASE_WAITING;
        d->acquire_sent = true;
    }
}

static void send_acquire_locked(struct cs_dev *d)
{
    if (d->acquire_sent || !d->attach_sent)
        return;
    struct cs_msg m = {.type = CS_MSG_ACQUIRE};
    m.u.acquire.slot = (uint32_t)d->ordinal;
    d->acquire_sent = cs_client_send(&m) == 0;
}

static void start_worker_locked(struct cs_dev *d)
{
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (!d->worker_started) {
        if (pthread_create(&d->worker, &a, worker_main, d) == 0)
            d->worker_started = true;
        else
            cs_error("cannot start the drain thread for GPU %d: revokes cannot be honoured",
                     d->ordinal);
    }
    /* Without a pinner, PREPARE requests run on the worker (slower revokes,
     * nothing lost). */
    if (!d->pinner_started && pthread_create(&d->pinner, &a, pinner_main, d) == 0)
        d->pinner_started = true;
    pthread_attr_destroy(&a);
}

void cs_lease_attach(struct cs_dev *d, int ordinal)
{
    pthread_mutex_lock(&d->mu);
    enum cs_lease st = d->state;
    pthread_mutex_unlock(&d->mu);
    if (st != CS_LEASE_DETACHED)
        return;

    /* Driver queries and the first connection happen outside the lock. */
    unsigned char uuid[CS_UUID_LEN] = {0};
    size_t total = 0;
    CUdevice dev;
    CUuuid u;
    if (cs_real.cuDeviceGet(&dev, ordinal) == CUDA_SUCCESS) {
        if (cs_real.cuDeviceGetUuid_v2(&u, dev) == CUDA_SUCCESS)
            memcpy(uuid, u.bytes, CS_UUID_LEN);
        cs_real.cuDeviceTotalMem_v2(&total, dev);
    }
    cs_client_start();
    int count = 0;
    if (cs_real.cuDeviceGetCount(&count) == CUDA_SUCCESS && count == 1)
        atomic_store_explicit(&cs_single_device, true, memory_order_relaxed);

    pthread_mutex_lock(&d->mu);
    if (d->state == CS_LEASE_DETACHED) {
        d->ordinal = ordinal;
        memcpy(d->uuid, uuid, CS_UUID_LEN);
        d->total_mem = total;
        if (cs_cfg.disabled) {
            set_unmanaged_locked(d);
        } else {
            if (cs_client_is_connected() || cs_cfg.require_daemon) {
                d->state = CS_LEASE_IDLE;
                close_gate_locked(d);
                struct cs_msg m;
                attach_msg_locked(d, &m);
                if (cs_client_send(&m) == 0)
                    after_attach_sent_locked(d, &m);
            } else {
                set_unmanaged_locked(d);
            }
            start_worker_locked(d);
        }
        char us[CS_UUID_STR_LEN];
        cs_uuid_format(d->uuid, us);
        cs_info("GPU %d (%s) attached: %s", ordinal, us, cs_lease_name(d->state));
    }
    pthread_mutex_unlock(&d->mu);
}

void cs_lease_wait_open(struct cs_dev *d)
{
    uint64_t t0 = cs_now_ns();
    pthread_mutex_lock(&d->mu);
    d->waiters++;
    if (d->lc_mode == CS_LC_RELEASE_IDLE && !d->burst_wait_t0 &&
        !atomic_load_explicit(&d->open, memory_order_seq_cst))
        d->burst_wait_t0 = t0; /* the burst's first submission waits from here */
    while (!atomic_load_explicit(&d->open, memory_order_seq_cst)) {
        if (d->state == CS_LEASE_IDLE)
            d->state = CS_LEASE_WAITING;
        if (d->state == CS_LEASE_WAITING)
            send_acquire_locked(d);
        pthread_cond_wait(&d->gate_cv, &d->mu);
    }
    d->waiters--;
    d->wait_ns_total += cs_now_ns() - t0;
    pthread_mutex_unlock(&d->mu);
}

/* The i-th queued job (0 = next); d->mu held. */
static struct cs_job *jobq_at(struct cs_jobq *q, unsigned i)
{
    return &q->jobs[(q->head + i) % CS_JOBQ];
}

/* Queues a job and wakes its thread; d->mu held. False if the queue is
 * full (the daemon is flooding us: the caller answers with an error). */
static bool jobq_push_locked(struct cs_jobq *q, struct cs_job job)
{
    if (q->count == CS_JOBQ)
        return false;
    job.conn = cs_client_generation();
    job.t0 = cs_now_ns();
    *jobq_at(q, q->count) = job;
    q->count++;
    pthread_cond_signal(&q->cv);
    return true;
}

/* Waits for the next job of q and takes it out; d->mu is taken and given
 * back. A GRANT taken off the worker's queue is marked as being granted in
 * the same critical section: a REVOKE for it that arrives in between must
 * find it somewhere (grant_queued_locked), or it would be ignored and the
 * lease kept until the daemon's revoke timeout. */
static struct cs_job jobq_pop(struct cs_dev *d, struct cs_jobq *q)
{
    pthread_mutex_lock(&d->mu);
    while (q->count == 0)
        pthread_cond_wait(&q->cv, &d->mu);
    struct cs_job job = *jobq_at(q, 0);
    q->head = (q->head + 1) % CS_JOBQ;
    q->count--;
    if (q == &d->work && job.kind == CS_JOB_GRANT) {
        d->granting = true;
        d->granting_lease = job.id;
    }
    pthread_mutex_unlock(&d->mu);
    return job;
}

/* Whether a job of this kind and id waits in q; d->mu held. */
static bool jobq_has(struct cs_jobq *q, uint8_t kind, uint64_t id)
{
    for (unsigned i = 0; i < q->count; i++)
        if (jobq_at(q, i)->kind == kind && jobq_at(q, i)->id == id)
            return true;
    return false;
}

/* Work for the device's worker; d->mu held. */
static bool enqueue_locked(struct cs_dev *d, struct cs_job job)
{
    return jobq_push_locked(&d->work, job);
}

/* The gate opens on the worker, after the job's memory is resident again
 * (a thread hand-off of a few microseconds when nothing was swapped). */
void cs_lease_on_grant(struct cs_dev *d, uint64_t lease_id)
{
    pthread_mutex_lock(&d->mu);
    if (d->state != CS_LEASE_DETACHED &&
        !enqueue_locked(d, (struct cs_job){.kind = CS_JOB_GRANT, .id = lease_id}))
        cs_error("GPU %d: too much queued scheduler work; grant %llu dropped", d->ordinal,
                 (unsigned long long)lease_id);
    pthread_mutex_unlock(&d->mu);
}

/* A revoke may overtake its own grant: the daemon can take a lease back
 * before the worker has finished restoring memory for it. It then queues
 * behind the grant, which the worker completes first. */
static bool grant_queued_locked(struct cs_dev *d, uint64_t lease_id)
{
    return (d->granting && d->granting_lease == lease_id) ||
           jobq_has(&d->work, CS_JOB_GRANT, lease_id);
}

void cs_lease_on_revoke(struct cs_dev *d, const struct cs_msg_revoke *rv)
{
    pthread_mutex_lock(&d->mu);
    bool held = d->state == CS_LEASE_HELD && rv->lease_id == d->lease_id;
    if (held || grant_queued_locked(d, rv->lease_id)) {
        if (held) {
            d->state = CS_LEASE_REVOKING; /* stop new work now, not when the worker runs */
            close_gate_locked(d);
        }
        d->revokes++;
        if (!enqueue_locked(d, (struct cs_job){.kind = CS_JOB_REVOKE, .id = rv->lease_id,
                                               .bytes = rv->evict_bytes}))
            cs_error("GPU %d: too much queued scheduler work; revoke dropped", d->ordinal);
    } else {
        cs_debug("GPU %d: ignoring revoke of lease %llu (state %s, lease %llu)", d->ordinal,
                 (unsigned long long)rv->lease_id, cs_lease_name(d->state),
                 (unsigned long long)d->lease_id);
    }
    pthread_mutex_unlock(&d->mu);
}

void cs_lease_on_evict(struct cs_dev *d, const struct cs_msg_evict *ev)
{
    struct cs_job job = {.kind = CS_JOB_EVICT, .id = ev->request_id, .bytes = ev->bytes,
                         .flags = ev->flags};
    pthread_mutex_lock(&d->mu);
    bool queued = d->state != CS_LEASE_DETACHED &&
                  (ev->flags & CS_EVICT_PREPARE && d->pinner_started ? jobq_push_locked(&d->pins, job)
                                                                     : enqueue_locked(d, job));
    pthread_mutex_unlock(&d->mu);
    if (!queued) {
        struct cs_msg r = {.type = CS_MSG_EVICTED};
        r.u.evicted.slot = ev->slot;
        r.u.evicted.request_id = ev->request_id;
        r.u.evicted.status = CUDA_ERROR_NOT_READY;
        cs_client_send(&r);
    }
}

void cs_lease_on_prefetch(struct cs_dev *d, const struct cs_msg_prefetch *pf)
{
    pthread_mutex_lock(&d->mu);
    bool queued = d->state != CS_LEASE_DETACHED &&
                  enqueue_locked(d, (struct cs_job){.kind = CS_JOB_PREFETCH,
                                                    .id = pf->request_id, .bytes = pf->bytes});
    pthread_mutex_unlock(&d->mu);
    if (!queued) {
        struct cs_msg r = {.type = CS_MSG_PREFETCHED};
        r.u.prefetched.slot = pf->slot;
        r.u.prefetched.request_id = pf->request_id;
        r.u.prefetched.status = CUDA_ERROR_NOT_READY;
        cs_client_send(&r);
    }
}

/* The daemon that asked for a shorter timeslice is gone, and the next one
 * starts from the defaults (it sends TIMESLICE only on change): put them
 * back, so that both sides agree and a BE job left alone does not keep a
 * 1 µs slice for nothing. */
void cs_lease_on_disconnect(struct cs_dev *d)
{
    pthread_mutex_lock(&d->mu);
    d->attach_sent = false;
    d->acquire_sent = false;
    /* A new daemon starts every client at LC_MODE NONE. */
    d->lc_mode = CS_LC_NONE;
    d->lc_param_us = 0;
    cs_bound_set_window(&d->bound, 0);
    if (atomic_load(&d->open) == CS_GATE_BOUNDED)
        open_gate_locked(d);
    if (d->ts_want) {
        d->ts_want = 0;
        if (!enqueue_locked(d, (struct cs_job){.kind = CS_JOB_TIMESLICE}))
            cs_error("GPU %d: too much queued scheduler work; timeslice restore dropped",
                     d->ordinal);
    }
    pthread_mutex_unlock(&d->mu);
}

/* The worker runs the timeslice change. It blocks for one RM round trip
 * per compute group (0.16-0.3 ms on an H100, one group per context), so a
 * REVOKE queued behind it waits well under the 1 ms a drain budget allows;
 * the pinner would be the wrong place (a PREPARE pins for ~0.2 s/GiB and
 * the LC job would wait that long for its protection). The I/O thread, which
 * answers the daemon, never blocks on it. */
void cs_lease_on_timeslice(struct cs_dev *d, uint64_t us)
{
    pthread_mutex_lock(&d->mu);
    if (d->state != CS_LEASE_DETACHED) {
        d->ts_want = us;
        if (!enqueue_locked(d, (struct cs_job){.kind = CS_JOB_TIMESLICE, .id = us}))
            cs_error("GPU %d: too much queued scheduler work; timeslice %llu us dropped",
                     d->ordinal, (unsigned long long)us);
    }
    pthread_mutex_unlock(&d->mu);
}

/* LC_MODE: BOUNDED takes effect at once on an open gate (the next gated
 * call goes through the bound); RELEASE_IDLE starts watching a held lease. */
void cs_lease_on_lc_mode(struct cs_dev *d, uint32_t mode, uint32_t param_us)
{
    pthread_mutex_lock(&d->mu);
    if (d->state != CS_LEASE_DETACHED && d->state != CS_LEASE_UNMANAGED) {
        d->lc_mode = mode;
        d->lc_param_us = param_us;
        /* Lock order: d->mu, then the bound's own. */
        cs_bound_set_window(&d->bound, mode == CS_LC_BOUNDED ? param_us : 0);
        if (atomic_load(&d->open) != CS_GATE_CLOSED)
            open_gate_locked(d);
        watch_burst_locked(d);
        cs_debug("GPU %d: LC mode %u (%u us)", d->ordinal, mode, param_us);
    }
    pthread_mutex_unlock(&d->mu);
}

void cs_lease_hint(struct cs_dev *d, uint32_t expected_us)
{
    pthread_mutex_lock(&d->mu);
    if (d->lc_mode == CS_LC_RELEASE_IDLE &&
        (d->state == CS_LEASE_IDLE || d->state == CS_LEASE_WAITING || d->state == CS_LEASE_HELD)) {
        uint64_t until = cs_now_ns() + (uint64_t)expected_us * 1000u;
        if (until > d->hint_until_ns)
            d->hint_until_ns = until;
        d->hints++;
        if (d->state == CS_LEASE_IDLE)
            d->state = CS_LEASE_WAITING;
        if (d->state == CS_LEASE_WAITING)
            send_acquire_locked(d);
    }
    pthread_mutex_unlock(&d->mu);
}

void cs_lease_handshake(struct cs_dev *d, int fd)
{
    pthread_mutex_lock(&d->mu);
    if (d->state != CS_LEASE_DETACHED && !cs_cfg.disabled) {
        struct cs_msg m;
        attach_msg_locked(d, &m);
        if (cs_send(fd, &m) == 0)
            after_attach_sent_locked(d, &m);
    }
    pthread_mutex_unlock(&d->mu);
}

void cs_lease_rescan(struct cs_dev *d)
{
    pthread_mutex_lock(&d->mu);
    if (d->state != CS_LEASE_DETACHED && !cs_cfg.disabled) {
        if (!d->attach_sent) {
            struct cs_msg m;
            attach_msg_locked(d, &m);
            if (cs_client_send(&m) == 0)
                after_attach_sent_locked(d, &m);
        }
        if (d->state == CS_LEASE_WAITING)
            send_acquire_locked(d);
    }
    pthread_mutex_unlock(&d->mu);
}

static void tick_lost_daemon_locked(struct cs_dev *d, uint64_t now)
{
    bool wants = d->state == CS_LEASE_WAITING || (d->state == CS_LEASE_IDLE && d->waiters > 0);
    uint64_t lost = cs_client_lost_ns();
    if (!wants || cs_cfg.require_daemon || lost == 0)
        return;
    /* Refused (logged with its reason by client.c): there is a scheduler,
     * and waiting for it would not change its answer. */
    bool refused = cs_client_refused(NULL, 0);
    if (!refused && now - lost < (uint64_t)cs_cfg.daemon_wait_ms * 1000000ull)
        return;
    if (!d->lost_warned && refused)
        cs_warn("GPU %d: refused by cushared: running unmanaged until it accepts this process",
                d->ordinal);
    else if (!d->lost_warned)
        cs_warn("GPU %d: no scheduler for %u ms: running unmanaged until it returns",
                d->ordinal, cs_cfg.daemon_wait_ms);
    d->lost_warned = true;
    /* Memory allocated while it waited is only reserved, made resident by
     * the restore of the next grant: so the gate opens after one, of lease
     * 0 (held under lease 0 is what a reconnect makes of an unmanaged
     * device). Opening it at once failed the job's first copy. */
    if (!cs_cfg.swap || (!grant_queued_locked(d, 0) &&
                         !enqueue_locked(d, (struct cs_job){.kind = CS_JOB_GRANT, .id = 0})))
        set_unmanaged_locked(d);
}

/* Idle tracking while held: a holder that has submitted nothing for the
 * daemon's idle period (no gated call begun or still running, no allocation,
 * free or room wait: host_busy) *and* has no work left on the GPU says so, and says
 * so again when work resumes. Submissions are counted by the gate; whether
 * work is still in flight is asked by the worker (an idle probe: it waits
 * for the contexts, then restarts the idle clock from when the GPU finished,
 * so a job blocked on a long kernel is not mistaken for an idle one). */
static bool idle_changed_locked(struct cs_dev *d, uint64_t now, bool *idle_now)
{
    uint32_t idle_ms = cs_client_idle_ms();
    *idle_now = false;
    if (d->state != CS_LEASE_HELD || idle_ms == 0)
        return false;
    uint64_t subm = atomic_load_explicit(&d->subm, memory_order_relaxed);
    uint32_t entries = (uint32_t)(subm >> 32), inside = (uint32_t)subm;
    uint32_t host_done = atomic_load_explicit(&d->host_done, memory_order_relaxed);
    /* A thread still inside a gated call (a synchronous copy, a launch the
     * driver holds back while its queue is full) is busy too. */
    if (entries != d->idle_last_entries || inside > 0 || host_done != d->idle_last_host_done ||
        atomic_load_explicit(&d->host_busy, memory_order_relaxed) > 0) {
        d->idle_last_entries = entries;
        d->idle_last_host_done = host_done;
        d->idle_last_activity_ns = now;
        d->idle_gpu_done = false;
    } else if (now - d->idle_last_activity_ns >= (uint64_t)idle_ms * 1000000ull) {
        if (d->idle_gpu_done)
            *idle_now = true;
        else if (!d->idle_probe_pending &&
                 enqueue_locked(d, (struct cs_job){.kind = CS_JOB_IDLE_PROBE, .id = entries}))
            d->idle_probe_pending = true;
    }
    return *idle_now != d->idle_reported;
}

/* PINNED goes out when the host backing held for this GPU changed (to a
 * daemon that took CS_HELLO_PIN; others never see it). */
static void report_pinned_locked(struct cs_dev *d)
{
    uint64_t bytes = cs_seg_backing(d->ordinal);
    if (bytes == d->pinned_sent)
        return;
    struct cs_msg m = {.type = CS_MSG_PINNED};
    m.u.pinned.slot = (uint32_t)d->ordinal;
    m.u.pinned.bytes = bytes;
    if (cs_client_send_cap(CS_HELLO_PIN, &m) == 0)
        d->pinned_sent = bytes;
}

/* USAGE goes out when idleness flips or the memory picture changed. The
 * usage is computed before taking d->mu (segment lock order). */
static void tick_report(struct cs_dev *d, uint64_t now)
{
    struct cs_msg m = {.type = CS_MSG_USAGE};
    m.u.usage.slot = (uint32_t)d->ordinal;
    cs_mem_fill_usage(d, &m.u.usage);
    pthread_mutex_lock(&d->mu);
    if (d->state != CS_LEASE_DETACHED && d->attach_sent) {
        bool idle_now;
        bool idle_flip = idle_changed_locked(d, now, &idle_now);
        bool mem_changed = d->usage_sent[0] != m.u.usage.resident ||
                           d->usage_sent[1] != m.u.usage.swapped ||
                           d->usage_sent[2] != m.u.usage.footprint ||
                           d->usage_sent[3] != m.u.usage.unswappable; /* an IPC export */
        if (idle_flip || mem_changed) {
            bool idle = d->state == CS_LEASE_HELD && (idle_flip ? idle_now : d->idle_reported);
            m.u.usage.flags = idle ? CS_USAGE_IDLE : 0;
            if (cs_client_send(&m) == 0) {
                if (idle_flip)
                    cs_debug("GPU %d: %s", d->ordinal, idle ? "idle" : "busy again");
                d->idle_reported = m.u.usage.flags & CS_USAGE_IDLE;
                d->usage_sent[0] = m.u.usage.resident;
                d->usage_sent[1] = m.u.usage.swapped;
                d->usage_sent[2] = m.u.usage.footprint;
                d->usage_sent[3] = m.u.usage.unswappable;
            }
        }
        report_pinned_locked(d);
    }
    pthread_mutex_unlock(&d->mu);
}

void cs_lease_tick(struct cs_dev *d, uint64_t now)
{
    if (cs_cfg.disabled)
        return;
    if (cs_client_is_connected()) {
        tick_report(d, now);
        return;
    }
    pthread_mutex_lock(&d->mu);
    if (d->state != CS_LEASE_DETACHED)
        tick_lost_daemon_locked(d, now);
    pthread_mutex_unlock(&d->mu);
}

uint32_t cs_lease_tick_interval_ms(void)
{
    /* A holder's idle period counts from the tick that sees its last
     * submission (the gate only counts calls; it takes no timestamps), so
     * the idle report comes up to one tick late: a tenth of the idle
     * period, at most 30 ms. And the tick is brought forward to the moment
     * a held device's idle period ends, so that the report is not rounded
     * up to the next tick on top of that. Together they keep the handover
     * to a waiter within idle_ms + 50 ms (issue 4's bound, checked by
     * tests/e2e/e2e_idle.sh) at any idle_ms; a plain tick of a fifth of the
     * idle period, capped at 100 ms, reached idle_ms + 50 at the default
     * 250 ms and idle_ms + 100 from 500 ms up. Never busier than every
     * 5 ms, except once when an idle period is about to end. */
    uint32_t idle = cs_client_idle_ms();
    if (!idle)
        return 100;
    uint32_t t = idle / 10;
    t = t < 5 ? 5 : (t > 30 ? 30 : t);
    uint64_t now = cs_now_ns(), idle_ns = (uint64_t)idle * 1000000ull;
    for (int i = 0; i < CS_MAX_DEVICES; i++) {
        struct cs_dev *d = &cs_devs[i];
        pthread_mutex_lock(&d->mu);
        if (d->state == CS_LEASE_HELD && d->attach_sent && !d->idle_reported) {
            uint64_t due = d->idle_last_activity_ns + idle_ns;
            uint64_t ms = due > now ? (due - now + 999999) / 1000000 : 1;
            if (ms < t)
                t = (uint32_t)(ms ? ms : 1);
        }
        pthread_mutex_unlock(&d->mu);
    }
    return t;
}

/* ---- the worker: drains, swaps, opens the gate --------------------------- */

static void wait_inside_zero(struct cs_dev *d)
{
    /* Threads inside a submission are in the middle of one driver call
     * (microseconds): yield first, then sleep in short steps. */
    struct timespec step = {0, 50000};
    for (int i = 0; (atomic_load_explicit(&d->subm, memory_order_seq_cst) & 0xffffffffu) != 0;
         i++) {
        if (i < 200)
            sched_yield();
        else
            nanosleep(&step, NULL);
    }
}

static void drain_contexts(struct cs_dev *d)
{
    CUcontext ctxs[CS_MAX_CTX];
    int n = cs_ctx_list(d->ordinal, ctxs, CS_MAX_CTX);
    /* Relaxed capture mode for this thread: a synchronize from here must not
     * invalidate a global-mode capture running on an application thread. */
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    cs_real.cuThreadExchangeStreamCaptureMode(&mode);
    for (int i = 0; i < n; i++) {
        if (cs_real.cuCtxPushCurrent_v2(ctxs[i]) != CUDA_SUCCESS)
            continue;
        cs_real.cuCtxSynchronize();
        CUcontext popped;
        cs_real.cuCtxPopCurrent_v2(&popped);
    }
    cs_real.cuThreadExchangeStreamCaptureMode(&mode);
}

static void job_revoke(struct cs_dev *d, const struct cs_job *job)
{
    pthread_mutex_lock(&d->mu);
    if (d->state == CS_LEASE_HELD && d->lease_id == job->id) {
        d->state = CS_LEASE_REVOKING; /* the revoke overtook its grant */
        close_gate_locked(d);
    }
    pthread_mutex_unlock(&d->mu);
    wait_inside_zero(d);
    drain_contexts(d);
    uint64_t drain_ns = cs_now_ns() - job->t0;
    struct cs_swap_result sw = {CUDA_SUCCESS, 0, 0};
    if (job->bytes && cs_cfg.swap) {
        pthread_mutex_lock(&cs_segs[d->ordinal].mu);
        sw = cs_swap_out_locked(d, job->bytes);
        pthread_mutex_unlock(&cs_segs[d->ordinal].mu);
    }

    pthread_mutex_lock(&d->mu);
    d->drain_ns_total += drain_ns;
    if (job->conn == cs_client_generation() && cs_client_is_connected()) {
        struct cs_msg m = {.type = CS_MSG_RELEASE};
        m.u.release.slot = (uint32_t)d->ordinal;
        m.u.release.reason = CS_RELEASE_REVOKED;
        m.u.release.lease_id = job->id;
        m.u.release.drain_ns = drain_ns;
        m.u.release.swap_ns = sw.ns;
        m.u.release.swapped_bytes = sw.bytes;
        cs_client_send(&m);
        /* The grant answered our ACQUIRE even when its restore was abandoned
         * (revoked before the gate opened: hold_locked never ran); the
         * daemon now counts us idle, so a waiter must ask again. */
        d->acquire_sent = false;
    }
    d->state = CS_LEASE_IDLE;
    d->idle_reported = false; /* idleness belongs to the lease just ended */
    if (d->waiters > 0) {
        d->state = CS_LEASE_WAITING;
        send_acquire_locked(d);
    }
    pthread_mutex_unlock(&d->mu);
}

/* A grant still being restored is abandoned when the connection it came on
 * is gone (a new daemon knows nothing of it: the device re-attached as
 * WAITING) or when the daemon has already revoked it (the queued REVOKE then
 * answers with RELEASE). */
static bool grant_stale(struct cs_dev *d, const struct cs_job *job)
{
    pthread_mutex_lock(&d->mu);
    bool stale = job->conn != cs_client_generation() ||
                 jobq_has(&d->work, CS_JOB_REVOKE, job->id);
    pthread_mutex_unlock(&d->mu);
    return stale;
}

static void job_evict(struct cs_dev *d, const struct cs_job *job);

/* While a restore waits for room, EVICT requests still get answered (the
 * daemon may be moving this very job's memory to make room elsewhere). */
static void serve_queued_evicts(struct cs_dev *d)
{
    struct cs_job ev[CS_JOBQ];
    unsigned n = 0;
    pthread_mutex_lock(&d->mu);
    unsigned kept = 0;
    for (unsigned i = 0; i < d->work.count; i++) {
        struct cs_job j = *jobq_at(&d->work, i);
        if (j.kind == CS_JOB_EVICT)
            ev[n++] = j;
        else
            *jobq_at(&d->work, kept++) = j;
    }
    d->work.count = kept;
    pthread_mutex_unlock(&d->mu);
    for (unsigned i = 0; i < n; i++)
        job_evict(d, &ev[i]);
}

/* Restores the job's memory and opens the gate, holding the segment lock
 * throughout so that no allocation can appear unmapped in between. Retries
 * (asking for room each time) until the memory fits: a gate opened over
 * unmapped memory would fault the job's kernels. */
static void job_grant(struct cs_dev *d, const struct cs_job *job)
{
    struct cs_segs *s = &cs_segs[d->ordinal];
    uint64_t first_fail = 0, restored = 0;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        struct cs_swap_result sw = {CUDA_SUCCESS, 0, 0};
        if (cs_cfg.swap)
            sw = cs_swap_in_locked(d, UINT64_MAX, false);
        if (sw.status == CUDA_SUCCESS)
            restored += sw.bytes;
        if (sw.status == CUDA_SUCCESS) {
            pthread_mutex_lock(&d->mu);
            if (d->state != CS_LEASE_DETACHED)
                hold_locked(d, job->id);
            cs_debug("GPU %d: lease %llu open after restoring %llu bytes in %.1f ms",
                     d->ordinal, (unsigned long long)job->id, (unsigned long long)restored,
                     (double)(cs_now_ns() - job->t0) / 1e6);
            if (job->conn == cs_client_generation()) {
                struct cs_msg m = {.type = CS_MSG_RESTORED};
                m.u.restored.slot = (uint32_t)d->ordinal;
                m.u.restored.status = first_fail ? CUDA_ERROR_OUT_OF_MEMORY : 0;
                m.u.restored.lease_id = job->id;
                m.u.restored.bytes = restored;
                m.u.restored.ns = cs_now_ns() - job->t0;
                cs_client_send(&m);
            }
            pthread_mutex_unlock(&d->mu);
            pthread_mutex_unlock(&s->mu);
            if (cs_cfg.swap)
                cs_backing_trim(d); /* after the gate opened: off the critical path */
            return;
        }
        restored += sw.bytes;
        pthread_mutex_unlock(&s->mu);
        if (grant_stale(d, job))
            return;
        serve_queued_evicts(d);
        uint64_t now = cs_now_ns();
        if (!first_fail)
            first_fail = now;
        if (now - first_fail > 5000000000ull) {
            const char *why = "?";
            cs_real.cuGetErrorName(sw.status, &why);
            if (sw.status == CUDA_ERROR_OUT_OF_MEMORY)
                cs_warn("GPU %d: still waiting for room to restore this job's memory", d->ordinal);
            else
                cs_error("GPU %d: restoring this job's memory keeps failing with %s (not a lack "
                         "of room); retrying", d->ordinal, why);
            first_fail = now;
        }
        struct timespec ts = {0, 100000000};
        nanosleep(&ts, NULL);
    }
}

static void job_evict(struct cs_dev *d, const struct cs_job *job)
{
    struct cs_swap_result sw = {CUDA_ERROR_NOT_SUPPORTED, 0, 0};
    pthread_mutex_lock(&d->mu);
    bool open = atomic_load(&d->open) != 0;
    pthread_mutex_unlock(&d->mu);
    if (!cs_cfg.swap) {
        sw.status = CUDA_ERROR_NOT_SUPPORTED;
    } else if (job->flags & CS_EVICT_PREPARE) {
        sw = cs_backing_prepare(d, job->bytes);
    } else if (open) {
        sw.status = CUDA_ERROR_NOT_PERMITTED; /* running: only a revoke may move it */
    } else {
        pthread_mutex_lock(&cs_segs[d->ordinal].mu);
        sw = cs_swap_out_locked(d, job->bytes);
        pthread_mutex_unlock(&cs_segs[d->ordinal].mu);
    }
    cs_debug("GPU %d: %s %llu bytes in %.1f ms (status %d)", d->ordinal,
             job->flags & CS_EVICT_PREPARE ? "pinned ahead" : "evicted",
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
    if (cs_cfg.swap) {
        pthread_mutex_lock(&cs_segs[d->ordinal].mu);
        sw = cs_swap_in_locked(d, job->bytes, true);
        pthread_mutex_unlock(&cs_segs[d->ordinal].mu);
    }
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

/* Waits for the device's work; if nothing was submitted meanwhile, either
 * the GPU was already idle (the wait was short: confirm at once) or it just
 * finished (restart the idle clock from now). "Short" is 10 ms: a
 * synchronize with nothing to wait for takes microseconds, but up to a few
 * milliseconds on a loaded machine or under a sanitizer, and confirming up
 * to 10 ms before the GPU's last work ends costs nothing that matters (the
 * revoke drains it anyway). */
#define IDLE_PROBE_INSTANT_NS 10000000ull
static void job_idle_probe(struct cs_dev *d, const struct cs_job *job)
{
    uint64_t t0 = cs_now_ns();
    drain_contexts(d);
    uint64_t t1 = cs_now_ns();
    pthread_mutex_lock(&d->mu);
    d->idle_probe_pending = false;
    uint32_t entries = (uint32_t)(atomic_load_explicit(&d->subm, memory_order_relaxed) >> 32);
    if (d->state == CS_LEASE_HELD && entries == (uint32_t)job->id) {
        if (t1 - t0 < IDLE_PROBE_INSTANT_NS)
            d->idle_gpu_done = true;
        else
            d->idle_last_activity_ns = t1;
    }
    pthread_mutex_unlock(&d->mu);
}

/* ---- latency-critical bursts (LC_MODE RELEASE_IDLE) -------------------------- */

static uint32_t entries_of(struct cs_dev *d)
{
    return (uint32_t)(atomic_load_explicit(&d->subm, memory_order_seq_cst) >> 32);
}

/* Whether job's lease is still held in RELEASE_IDLE mode; d->mu held. */
static bool burst_current_locked(const struct cs_dev *d, const struct cs_job *job)
{
    return d->state == CS_LEASE_HELD && d->lease_id == job->id &&
           d->lc_mode == CS_LC_RELEASE_IDLE;
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
    if (d->hint_until_ns > end) /* a hint said work comes: wait for it */
        end = d->hint_until_ns;
    pthread_mutex_unlock(&d->mu);
    while (cs_now_ns() < end) {
        if (entries_of(d) != e0)
            return 1;
        pthread_mutex_lock(&d->mu);
        bool other = d->work.count > 0;
        if (other && burst_current_locked(d, job))
            jobq_push_locked(&d->work, *job);
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
        b.u.lc_burst.wait_ns = d->burst_wait_ns;
        b.u.lc_burst.busy_ns = done_ns > d->burst_open_ns ? done_ns - d->burst_open_ns : 0;
        cs_client_send_cap(CS_HELLO_LC, &b);
    }
    d->bursts++;
    d->state = CS_LEASE_IDLE;
    d->idle_reported = false;
    if (d->waiters > 0) {
        d->state = CS_LEASE_WAITING;
        send_acquire_locked(d);
    }
}

/* The lease was granted for a burst of latency-critical work: wait for the
 * GPU to finish it, linger for more, then close the gate and release. A
 * submission that slips in before the gate closes reopens it and the watch
 * goes on; a REVOKE that arrives meanwhile owns the lease from then on (its
 * own job drains and releases). */
static void job_burst(struct cs_dev *d, const struct cs_job *job)
{
    for (;;) {
        pthread_mutex_lock(&d->mu);
        bool mine = burst_current_locked(d, job);
        uint32_t linger_us = d->lc_param_us;
        pthread_mutex_unlock(&d->mu);
        if (!mine)
            return;
        uint32_t e0 = entries_of(d);
        drain_contexts(d);
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
        close_gate_locked(d);
        pthread_mutex_unlock(&d->mu);
        wait_inside_zero(d);
        pthread_mutex_lock(&d->mu);
        if (!burst_current_locked(d, job)) { /* revoked meanwhile: the revoke owns it */
            pthread_mutex_unlock(&d->mu);
            return;
        }
        if (entries_of(d) != e0) { /* work slipped in before the gate closed */
            open_gate_locked(d);
            pthread_mutex_unlock(&d->mu);
            continue;
        }
        release_burst_locked(d, job, done);
        pthread_mutex_unlock(&d->mu);
        return;
    }
}

/* ---- channel-group timeslice ------------------------------------------------ */

/* The mechanism is process-wide (tsg.c cannot tell which GPU a channel
 * group belongs to), the daemon's requests are per GPU: the process gets the
 * shortest one asked of any of its GPUs (a BE job that must not delay an LC
 * job on one GPU must be short there; on its other GPUs a short slice costs
 * it nothing measurable, docs/tsg.md), or its own CUSHARE_TSG_TIMESLICE_US.
 * ts_mu serializes the jobs of the devices' workers, so the last one to run
 * applies the latest requests. Lock order: ts_mu, then a device's mu. */
static pthread_mutex_t ts_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    bool done;          /* a job gave tsg.c a value */
    uint64_t requested; /* that value */
    int status;         /* and its answer */
} ts;

static uint64_t ts_effective(void)
{
    uint64_t eff = cs_cfg.tsg_timeslice_us;
    for (int i = 0; i < CS_MAX_DEVICES; i++) {
        struct cs_dev *d = &cs_devs[i];
        pthread_mutex_lock(&d->mu);
        uint64_t w = d->ts_want;
        pthread_mutex_unlock(&d->mu);
        if (w && (!eff || w < eff))
            eff = w;
    }
    return eff;
}

static void job_timeslice(void)
{
    pthread_mutex_lock(&ts_mu);
    uint64_t us = ts_effective();
    if (!ts.done || us != ts.requested) {
        int r = cs_tsg_set_timeslice_us(us);
        if (r < 0 && r != -ENOTSUP)
            cs_warn("channel groups: timeslice %llu us not applied: %s",
                    (unsigned long long)us, strerror(-r));
        else
            cs_debug("channel groups: timeslice %llu us (%s)", (unsigned long long)us,
                     r == 0 ? "applied" : "mechanism off or unavailable");
        ts.done = true;
        ts.requested = us;
        ts.status = r;
    }
    pthread_mutex_unlock(&ts_mu);
}

void cs_lease_timeslice_result(uint64_t *requested_us, int *status)
{
    pthread_mutex_lock(&ts_mu);
    *requested_us = ts.done ? ts.requested : cs_cfg.tsg_timeslice_us;
    *status = ts.done ? ts.status : 0;
    pthread_mutex_unlock(&ts_mu);
}

static void *worker_main(void *arg)
{
    struct cs_dev *d = arg;
    pthread_setname_np(pthread_self(), "cushare-work");
    for (;;) {
        struct cs_job job = jobq_pop(d, &d->work);
        switch (job.kind) {
        case CS_JOB_REVOKE:
            job_revoke(d, &job);
            break;
        case CS_JOB_GRANT: /* jobq_pop marked it granting */
            job_grant(d, &job);
            pthread_mutex_lock(&d->mu);
            d->granting = false;
            pthread_mutex_unlock(&d->mu);
            break;
        case CS_JOB_EVICT:
            job_evict(d, &job);
            break;
        case CS_JOB_PREFETCH:
            job_prefetch(d, &job);
            break;
        case CS_JOB_IDLE_PROBE:
            job_idle_probe(d, &job);
            break;
        case CS_JOB_TIMESLICE:
            job_timeslice();
            break;
        case CS_JOB_BURST:
            job_burst(d, &job);
            break;
        }
    }
    return NULL;
}

static void *pinner_main(void *arg)
{
    struct cs_dev *d = arg;
    pthread_setname_np(pthread_self(), "cushare-pin");
    for (;;) {
        struct cs_job job = jobq_pop(d, &d->pins);
        job_evict(d, &job);
    }
    return NULL;
}

void cs_lease_reset_after_fork(struct cs_dev *d, int ordinal)
{
    /* Once per fork (every device is reset, 0 first): a worker may have
     * held ts_mu at the fork, and the child's groups start at tsg.c's own
     * setting (its fork handler resets it). */
    if (ordinal == 0) {
        pthread_mutex_init(&ts_mu, NULL);
        memset(&ts, 0, sizeof ts);
    }
    memset(d, 0, sizeof *d);
    pthread_mutex_init(&d->mu, NULL);
    cs_bound_init(&d->bound);
    pthread_cond_init(&d->gate_cv, NULL);
    pthread_cond_init(&d->work.cv, NULL);
    pthread_cond_init(&d->pins.cv, NULL);
    d->ordinal = ordinal;
    d->state = CS_LEASE_DETACHED;
}
