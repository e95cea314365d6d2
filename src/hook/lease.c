/* lease.c: the lease state machine on the client side (lease.h).
 *
 * Transitions run under the device's mu, from three kinds of thread: the
 * application's (requesting: cs_lease_wait_open, cs_lease_hint), the
 * client I/O thread (daemon messages, timers: through the client ops this
 * module registers) and the device's worker (jobs.c and burst.c finish
 * revokes, grants and bursts with the _locked transitions below).
 */
#include "hook/lease.h"
#include "hook/client.h"
#include "hook/config.h"
#include "hook/report.h"
#include "hook/seg.h"
#include "hook/swap.h"
#include "hook/tsg.h"
#include "hook/worker.h"
#include "common/log.h"
#include "common/util.h"

#include <string.h>

/* ---- the gate word ------------------------------------------------------------- */

/* Open, or open with the in-flight bound when the daemon asked this
 * device for it (LC_MODE BOUNDED, bound.h). */
static uint32_t open_value_locked(const struct cs_dev *d)
{
    return d->lc.mode == CS_LC_BOUNDED ? CS_GATE_BOUNDED : CS_GATE_OPEN;
}

void cs_lease_open_gate_locked(struct cs_dev *d)
{
    atomic_store_explicit(&d->gate.open, open_value_locked(d), memory_order_seq_cst);
    pthread_cond_broadcast(&d->lease.gate_cv);
}

void cs_lease_close_gate_locked(struct cs_dev *d)
{
    /* seq_cst store, then (in the worker) a seq_cst read of the inside
     * count: with the seq_cst add+load in cs_gate_enter this is Dekker's
     * pattern, so either the submitter sees the gate closed or we see it
     * inside, never neither. */
    atomic_store_explicit(&d->gate.open, 0, memory_order_seq_cst);
}

/* ---- transitions ----------------------------------------------------------------- */

static void set_unmanaged_locked(struct cs_dev *d)
{
    d->lease.state = CS_LEASE_UNMANAGED;
    d->lc.mode = CS_LC_NONE; /* no daemon, no latency-critical neighbour it knows of */
    cs_bound_set_window(&d->bound, 0);
    cs_lease_open_gate_locked(d);
}

/* RELEASE_IDLE: the worker watches the burst the lease was taken for and
 * gives the lease back when it is done (burst.c). */
static void watch_burst_locked(struct cs_dev *d)
{
    if (d->lc.mode == CS_LC_RELEASE_IDLE && d->lease.state == CS_LEASE_HELD &&
        !cs_worker_has_locked(d, CS_JOB_BURST, d->lease.id) &&
        !cs_worker_push_locked(d, (struct cs_job){.kind = CS_JOB_BURST, .id = d->lease.id}))
        cs_warn("GPU %d: too much queued scheduler work; the lease is kept until idle",
                d->ordinal);
}

void cs_lease_hold_locked(struct cs_dev *d, uint64_t lease_id)
{
    d->lease.state = CS_LEASE_HELD;
    d->lease.id = lease_id;
    d->lease.acquire_sent = false;
    d->stats.grants++;
    uint64_t now = cs_now_ns();
    cs_report_held_locked(d, now);
    d->lc.wait_ns = d->lc.wait_t0 ? now - d->lc.wait_t0 : 0;
    d->lc.wait_t0 = 0;
    d->lc.open_ns = now;
    cs_lease_open_gate_locked(d);
    watch_burst_locked(d);
}

static void send_acquire_locked(struct cs_dev *d)
{
    if (d->lease.acquire_sent || !d->lease.attach_sent)
        return;
    cs_report_usage_locked(d);
    struct cs_msg m = {.type = CS_MSG_ACQUIRE};
    m.u.acquire.slot = (uint32_t)d->ordinal;
    d->lease.acquire_sent = cs_client_send(&m) == 0;
}

/* Threads wait for the lease, or want it with another device's (pairs). */
static bool wanted_locked(const struct cs_dev *d)
{
    return d->lease.waiters > 0 || d->lease.pairs > 0;
}

/* Gate closed, the lease wanted: ask for it, once. */
static void request_locked(struct cs_dev *d)
{
    if (d->lease.state == CS_LEASE_IDLE)
        d->lease.state = CS_LEASE_WAITING;
    if (d->lease.state == CS_LEASE_WAITING)
        send_acquire_locked(d);
}

/* Asked after the RELEASE, the ACQUIRE came one decision late: the GPU
 * went to the only other waiter. For a client on two GPUs whose gates are
 * coupled (gate.c), whose slices on both ended together, each GPU then went
 * to the other client, by turns, for ever, and neither ever held both (the
 * lease model's finding 8, docs/model.md): with both waiting in the
 * decision, the daemon's rule for clients on several GPUs (policy.c
 * gang_waiter) can give the GPU to the one that holds the other. */
void cs_lease_ask_again_locked(struct cs_dev *d)
{
    /* The grant answered our last ACQUIRE, also when its restore was
     * abandoned (revoked before the gate opened: cs_lease_hold_locked
     * never ran): a waiter must ask again. */
    d->lease.acquire_sent = false;
    if (wanted_locked(d))
        send_acquire_locked(d);
}

void cs_lease_released_locked(struct cs_dev *d)
{
    d->lease.state = CS_LEASE_IDLE;
    cs_report_released_locked(d); /* idleness belongs to the lease just ended */
    if (wanted_locked(d)) {
        d->lease.state = CS_LEASE_WAITING;
        send_acquire_locked(d);
    }
}

/* ---- attaching ------------------------------------------------------------------- */

/* The ATTACH describing this device's state to a (re)connected daemon. An
 * open gate claims its hold; waiting work counts as an ACQUIRE. */
static void attach_msg_locked(struct cs_dev *d, struct cs_msg *m)
{
    memset(m, 0, sizeof *m);
    m->type = CS_MSG_ATTACH;
    m->u.attach.slot = (uint32_t)d->ordinal;
    memcpy(m->u.attach.uuid, d->uuid, CS_UUID_LEN);
    m->u.attach.total_mem = d->total_mem;
    if (d->lease.state == CS_LEASE_HELD || d->lease.state == CS_LEASE_UNMANAGED) {
        m->u.attach.flags = CS_ATTACH_HELD;
        m->u.attach.lease_id = d->lease.id;
    } else if (d->lease.state == CS_LEASE_WAITING || wanted_locked(d)) {
        m->u.attach.flags = CS_ATTACH_WAITING;
    }
}

static void after_attach_sent_locked(struct cs_dev *d, const struct cs_msg *m)
{
    d->lease.attach_sent = true;
    cs_report_attached_locked(d);
    d->lease.lost_warned = false;
    if (m->u.attach.flags & CS_ATTACH_HELD) {
        if (d->lease.state == CS_LEASE_UNMANAGED) {
            d->lease.state = CS_LEASE_HELD;
            d->lease.id = 0;
        }
    } else if (m->u.attach.flags & CS_ATTACH_WAITING) {
        if (d->lease.state == CS_LEASE_IDLE)
            d->lease.state = CS_LEASE_WAITING;
        d->lease.acquire_sent = true;
    }
}

/* First use of the device (cs_dev_get, through the device ops): learn its
 * UUID and size, tell the daemon. */
static void attach(struct cs_dev *d, int ordinal)
{
    pthread_mutex_lock(&d->mu);
    enum cs_lease st = d->lease.state;
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
    if (d->lease.state == CS_LEASE_DETACHED) {
        d->ordinal = ordinal;
        memcpy(d->uuid, uuid, CS_UUID_LEN);
        d->total_mem = total;
        if (cs_cfg.disabled) {
            set_unmanaged_locked(d);
        } else {
            if (cs_client_is_connected() || cs_cfg.require_daemon) {
                d->lease.state = CS_LEASE_IDLE;
                cs_lease_close_gate_locked(d);
                struct cs_msg m;
                attach_msg_locked(d, &m);
                if (cs_client_send(&m) == 0)
                    after_attach_sent_locked(d, &m);
            } else {
                set_unmanaged_locked(d);
            }
            cs_worker_start_locked(d);
        }
        char us[CS_UUID_STR_LEN];
        cs_uuid_format(d->uuid, us);
        cs_info("GPU %d (%s) attached: %s", ordinal, us, cs_dev_lease_name(d->lease.state));
    }
    pthread_mutex_unlock(&d->mu);
}

/* ---- application threads ------------------------------------------------------------ */

void cs_lease_wait_open(struct cs_dev *d)
{
    uint64_t t0 = cs_now_ns();
    pthread_mutex_lock(&d->mu);
    d->lease.waiters++;
    if (d->lc.mode == CS_LC_RELEASE_IDLE && !d->lc.wait_t0 &&
        !atomic_load_explicit(&d->gate.open, memory_order_seq_cst))
        d->lc.wait_t0 = t0; /* the burst's first submission waits from here */
    while (!atomic_load_explicit(&d->gate.open, memory_order_seq_cst)) {
        request_locked(d);
        pthread_cond_wait(&d->lease.gate_cv, &d->mu);
    }
    d->lease.waiters--;
    d->stats.wait_ns += cs_now_ns() - t0;
    pthread_mutex_unlock(&d->mu);
}

void cs_lease_pair_begin(struct cs_dev *d)
{
    pthread_mutex_lock(&d->mu);
    d->lease.pairs++;
    if (!atomic_load_explicit(&d->gate.open, memory_order_seq_cst))
        request_locked(d);
    pthread_mutex_unlock(&d->mu);
}

void cs_lease_pair_end(struct cs_dev *d)
{
    pthread_mutex_lock(&d->mu);
    d->lease.pairs--;
    pthread_mutex_unlock(&d->mu);
}

/* ---- daemon messages (client I/O thread) ------------------------------------------------- */

/* The gate opens on the worker, after the job's memory is resident again
 * (a thread hand-off of a few microseconds when nothing was swapped). */
static void on_grant(struct cs_dev *d, uint64_t lease_id)
{
    pthread_mutex_lock(&d->mu);
    if (d->lease.state != CS_LEASE_DETACHED &&
        !cs_worker_push_locked(d, (struct cs_job){.kind = CS_JOB_GRANT, .id = lease_id}))
        cs_error("GPU %d: too much queued scheduler work; grant %llu dropped", d->ordinal,
                 (unsigned long long)lease_id);
    pthread_mutex_unlock(&d->mu);
}

static void on_revoke(struct cs_dev *d, const struct cs_msg_revoke *rv)
{
    pthread_mutex_lock(&d->mu);
    bool held = d->lease.state == CS_LEASE_HELD && rv->lease_id == d->lease.id;
    if (held || cs_worker_grant_queued_locked(d, rv->lease_id)) {
        if (held) {
            d->lease.state = CS_LEASE_REVOKING; /* stop new work now, not when the worker runs */
            cs_lease_close_gate_locked(d);
        }
        d->stats.revokes++;
        if (!cs_worker_push_locked(d, (struct cs_job){.kind = CS_JOB_REVOKE, .id = rv->lease_id,
                                               .bytes = rv->evict_bytes}))
            cs_error("GPU %d: too much queued scheduler work; revoke dropped", d->ordinal);
    } else {
        cs_debug("GPU %d: ignoring revoke of lease %llu (state %s, lease %llu)", d->ordinal,
                 (unsigned long long)rv->lease_id, cs_dev_lease_name(d->lease.state),
                 (unsigned long long)d->lease.id);
    }
    pthread_mutex_unlock(&d->mu);
}

static void on_evict(struct cs_dev *d, const struct cs_msg_evict *ev)
{
    struct cs_job job = {.kind = CS_JOB_EVICT, .id = ev->request_id, .bytes = ev->bytes,
                         .flags = ev->flags};
    pthread_mutex_lock(&d->mu);
    bool queued = d->lease.state != CS_LEASE_DETACHED &&
                  (ev->flags & (CS_EVICT_PREPARE | CS_EVICT_GIVEBACK)
                       ? cs_worker_push_pin_locked(d, job)
                                                : cs_worker_push_locked(d, job));
    pthread_mutex_unlock(&d->mu);
    if (!queued) {
        struct cs_msg r = {.type = CS_MSG_EVICTED};
        r.u.evicted.slot = ev->slot;
        r.u.evicted.request_id = ev->request_id;
        r.u.evicted.status = CUDA_ERROR_NOT_READY;
        cs_client_send(&r);
    }
}

static void on_prefetch(struct cs_dev *d, const struct cs_msg_prefetch *pf)
{
    pthread_mutex_lock(&d->mu);
    bool queued = d->lease.state != CS_LEASE_DETACHED &&
                  cs_worker_push_locked(d, (struct cs_job){.kind = CS_JOB_PREFETCH,
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
static void on_disconnect(struct cs_dev *d)
{
    pthread_mutex_lock(&d->mu);
    d->lease.attach_sent = false;
    d->lease.acquire_sent = false;
    /* A new daemon starts every client at LC_MODE NONE. */
    d->lc.mode = CS_LC_NONE;
    d->lc.param_us = 0;
    cs_bound_set_window(&d->bound, 0);
    if (atomic_load(&d->gate.open) == CS_GATE_BOUNDED)
        cs_lease_open_gate_locked(d);
    if (cs_tsg_want((unsigned)d->ordinal, 0)) {
        if (!cs_worker_push_locked(d, (struct cs_job){.kind = CS_JOB_TIMESLICE}))
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
static void on_timeslice(struct cs_dev *d, uint64_t us)
{
    pthread_mutex_lock(&d->mu);
    if (d->lease.state != CS_LEASE_DETACHED) {
        cs_tsg_want((unsigned)d->ordinal, us);
        if (!cs_worker_push_locked(d, (struct cs_job){.kind = CS_JOB_TIMESLICE, .id = us}))
            cs_error("GPU %d: too much queued scheduler work; timeslice %llu us dropped",
                     d->ordinal, (unsigned long long)us);
    }
    pthread_mutex_unlock(&d->mu);
}

/* LC_MODE: BOUNDED takes effect at once on an open gate (the next gated
 * call goes through the bound); RELEASE_IDLE starts watching a held lease. */
static void on_lc_mode(struct cs_dev *d, uint32_t mode, uint32_t param_us)
{
    pthread_mutex_lock(&d->mu);
    if (d->lease.state != CS_LEASE_DETACHED && d->lease.state != CS_LEASE_UNMANAGED) {
        d->lc.mode = mode;
        d->lc.param_us = param_us;
        /* Lock order (locks.h): d->mu, then the bound's own. */
        cs_bound_set_window(&d->bound, mode == CS_LC_BOUNDED ? param_us : 0);
        if (atomic_load(&d->gate.open) != CS_GATE_CLOSED)
            cs_lease_open_gate_locked(d);
        watch_burst_locked(d);
        cs_debug("GPU %d: LC mode %u (%u us)", d->ordinal, mode, param_us);
    }
    pthread_mutex_unlock(&d->mu);
}

void cs_lease_hint(struct cs_dev *d, uint32_t expected_us)
{
    pthread_mutex_lock(&d->mu);
    if (d->lc.mode == CS_LC_RELEASE_IDLE &&
        (d->lease.state == CS_LEASE_IDLE || d->lease.state == CS_LEASE_WAITING || d->lease.state == CS_LEASE_HELD)) {
        uint64_t until = cs_now_ns() + (uint64_t)expected_us * 1000u;
        if (until > d->lc.hint_until_ns)
            d->lc.hint_until_ns = until;
        d->lc.hints++;
        request_locked(d);
    }
    pthread_mutex_unlock(&d->mu);
}

/* Reconnect, before the connection is shared: ATTACH on fd. */
static void handshake(struct cs_dev *d, int fd)
{
    pthread_mutex_lock(&d->mu);
    if (d->lease.state != CS_LEASE_DETACHED && !cs_cfg.disabled) {
        struct cs_msg m;
        attach_msg_locked(d, &m);
        if (cs_send(fd, &m) == 0)
            after_attach_sent_locked(d, &m);
    }
    pthread_mutex_unlock(&d->mu);
}

/* Reconnect, after the connection is shared: catch up what raced with it. */
static void rescan(struct cs_dev *d)
{
    pthread_mutex_lock(&d->mu);
    if (d->lease.state != CS_LEASE_DETACHED && !cs_cfg.disabled) {
        if (!d->lease.attach_sent) {
            struct cs_msg m;
            attach_msg_locked(d, &m);
            if (cs_client_send(&m) == 0)
                after_attach_sent_locked(d, &m);
        }
        if (d->lease.state == CS_LEASE_WAITING)
            send_acquire_locked(d);
    }
    pthread_mutex_unlock(&d->mu);
}

static void tick_lost_daemon_locked(struct cs_dev *d, uint64_t now)
{
    bool wants = d->lease.state == CS_LEASE_WAITING ||
                 (d->lease.state == CS_LEASE_IDLE && wanted_locked(d));
    uint64_t lost = cs_client_lost_ns();
    if (!wants || cs_cfg.require_daemon || lost == 0)
        return;
    /* Refused (logged with its reason by client.c): there is a scheduler,
     * and waiting for it would not change its answer. */
    bool refused = cs_client_refused(NULL, 0);
    if (!refused && now - lost < (uint64_t)cs_cfg.daemon_wait_ms * 1000000ull)
        return;
    if (!d->lease.lost_warned && refused)
        cs_warn("GPU %d: refused by cushared: running unmanaged until it accepts this process",
                d->ordinal);
    else if (!d->lease.lost_warned)
        cs_warn("GPU %d: no scheduler for %u ms: running unmanaged until it returns",
                d->ordinal, cs_cfg.daemon_wait_ms);
    d->lease.lost_warned = true;
    /* Memory allocated while it waited is only reserved, made resident by
     * the restore of the next grant: so the gate opens after one, of lease
     * 0 (held under lease 0 is what a reconnect makes of an unmanaged
     * device). Opening it at once failed the job's first copy. */
    if (!cs_cfg.swap || (!cs_worker_grant_queued_locked(d, 0) &&
                         !cs_worker_push_locked(d, (struct cs_job){.kind = CS_JOB_GRANT, .id = 0})))
        set_unmanaged_locked(d);
}

/* Periodic: reports while connected (report.c), the lost-daemon deadline
 * while not. */
static void tick(struct cs_dev *d, uint64_t now)
{
    if (cs_cfg.disabled)
        return;
    if (cs_client_is_connected()) {
        cs_report_tick(d, now);
        return;
    }
    pthread_mutex_lock(&d->mu);
    if (d->lease.state != CS_LEASE_DETACHED)
        tick_lost_daemon_locked(d, now);
    pthread_mutex_unlock(&d->mu);
}

/* ---- what the lower layers ask of the lease ----------------------------------------- */

static struct cs_dev *dev_of_slot(uint32_t slot)
{
    return slot < CS_MAX_DEVICES ? &cs_devs[slot] : NULL;
}

/* The daemon's lease messages, by the slot they name (client ops). */
static bool on_message(const struct cs_msg *m)
{
    struct cs_dev *d;
    switch (m->type) {
    case CS_MSG_GRANT:
        if ((d = dev_of_slot(m->u.grant.slot)))
            on_grant(d, m->u.grant.lease_id);
        return true;
    case CS_MSG_REVOKE:
        if ((d = dev_of_slot(m->u.revoke.slot)))
            on_revoke(d, &m->u.revoke);
        return true;
    case CS_MSG_EVICT:
        if ((d = dev_of_slot(m->u.evict.slot)))
            on_evict(d, &m->u.evict);
        return true;
    case CS_MSG_PREFETCH:
        if ((d = dev_of_slot(m->u.prefetch.slot)))
            on_prefetch(d, &m->u.prefetch);
        return true;
    case CS_MSG_TIMESLICE:
        if ((d = dev_of_slot(m->u.timeslice.slot)))
            on_timeslice(d, m->u.timeslice.timeslice_us);
        return true;
    case CS_MSG_LC_MODE:
        if ((d = dev_of_slot(m->u.lc_mode.slot)))
            on_lc_mode(d, m->u.lc_mode.mode, m->u.lc_mode.param_us);
        return true;
    default:
        return false;
    }
}

static void on_handshake(int fd)
{
    for (int i = 0; i < CS_MAX_DEVICES; i++)
        handshake(&cs_devs[i], fd);
}

static void on_connected(void)
{
    for (int i = 0; i < CS_MAX_DEVICES; i++)
        rescan(&cs_devs[i]);
}

static void on_disconnected(void)
{
    for (int i = 0; i < CS_MAX_DEVICES; i++)
        on_disconnect(&cs_devs[i]);
}

static void on_tick(uint64_t now)
{
    for (int i = 0; i < CS_MAX_DEVICES; i++)
        tick(&cs_devs[i], now);
}

static const struct cs_client_ops client_ops = {
    .handshake = on_handshake,
    .connected = on_connected,
    .disconnected = on_disconnected,
    .message = on_message,
    .tick = on_tick,
    .tick_interval_ms = cs_report_interval_ms,
};

/* seg.c places a new segment at once only while the job may use the GPU;
 * otherwise it waits for the next grant's restore. */
static bool may_place(struct cs_dev *d)
{
    pthread_mutex_lock(&d->mu);
    bool ok = d->lease.state == CS_LEASE_HELD || d->lease.state == CS_LEASE_UNMANAGED;
    pthread_mutex_unlock(&d->mu);
    return ok;
}

/* Called with d's segs.mu held (seg.c create_locked). */
static int make_room(struct cs_dev *d, uint64_t bytes)
{
    cs_swap_lend_back_locked(d);
    if (cs_client_request_room(d->ordinal, bytes) == 0)
        return 0;
    return cs_client_is_connected() ? -1 : -2;
}

static const struct cs_seg_ops seg_ops = {.may_place = may_place, .make_room = make_room};

static const struct cs_dev_ops dev_ops = {.attach = attach};

void cs_lease_init(void)
{
    cs_dev_set_ops(&dev_ops);
    cs_seg_set_ops(&seg_ops);
    cs_client_set_ops(&client_ops);
}
