/* fc_engine.c: the simulated device's engines, shared by every process on
 * the same FAKECUDA_SHM: per device one kernel engine and one copy engine
 * per direction.
 *
 * Each engine is a FIFO queue of tickets in the shared object. A waiter
 * takes the next ticket and is granted the engine when every entry ahead
 * of it shares its owner (kernels of the same context on several streams
 * run together; different contexts never do; owner 0 shares with nobody).
 * A process that releases and immediately re-acquires queues behind those
 * already waiting, so a tight loop cannot starve another process, which a
 * bare mutex would allow.
 *
 * Time slices (kernel engine, FAKECUDA_TIMESLICE_US > 0). A real GPU
 * time-slices the channel groups of different processes: a context that
 * has the compute engine keeps it, running its queued kernels back to
 * back, until its timeslice expires or it runs out of work; only then does
 * another context's kernel run. The queue models that with one running
 * slice per device (struct fc_slice) and these rules, all applied under
 * the shared lock, so every process sees one order:
 *  - an entry is never granted while an entry of another owner holds the
 *    engine (`held`), so kernels of different contexts never overlap;
 *  - while the slice lasts, its owner's entries are granted at once, ahead
 *    of older waiters of other owners, whose entries wait;
 *  - otherwise (no slice, or it expired) the FIFO rule above applies;
 *  - granting an entry of another owner than the slice's, or granting
 *    after the slice expired, starts a new slice for the entry's owner
 *    (owner 0 gets none and ends the slice);
 *  - the slice ends early when its owner runs out of work: a release by
 *    the slice owner that leaves it no entry in the queue and no kernel
 *    queued on its context's streams ends it. The releasing stream worker
 *    passes the context's count of queued kernels (its "more queued"
 *    signal), read here under the lock: of several concurrent releases of
 *    one context the last one sees the final count, and a kernel whose
 *    worker has dequeued it but not yet taken a ticket is still counted.
 * A kernel running when the slice expires finishes (nothing is preempted
 * inside a kernel); the waiters first in FIFO order then go before the
 * former owner's next kernel, which took a later ticket. So a slice always
 * ends, by time at the latest, and nobody starves. Waiters kept out by a
 * slice sleep at most until it ends; the slice of a dead owner is dropped
 * with its entries. With no slice configured the rules reduce to the FIFO
 * rule (a holder of another owner is always ahead in FIFO order).
 *
 * Waiters sleep on a futex word of the queue, bumped on every change.
 * They wake at least every FC_POLL_NS and then check the queue for dead
 * owners (SIGKILL leaves its entry behind), dropping their entries, so a
 * dead holder is taken over within about FC_POLL_NS plus the /proc reads.
 */
#include "fakecuda/fc_shm.h"

#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define FC_POLL_NS 20000000ull
#define FC_NO_DEADLINE UINT64_MAX

static struct fc_queue *queue(int dev, int eng)
{
    return &fc_proc.shm->dev[dev].q[eng];
}

/* The slice length of engine `eng`: kernels only; 0 = FIFO. */
static uint64_t slice_ns(int eng)
{
    return eng == FC_ENG_KERNEL ? fc_proc.shm->timeslice_ns : 0;
}

static void futex_wait(_Atomic uint32_t *word, uint32_t val, uint64_t ns)
{
    struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull),
                           .tv_nsec = (long)(ns % 1000000000ull) };
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word)
{
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Under the lock: may `me` run beside entry e? Only with the same non-zero
 * owner. */
static bool shares(const struct fc_qent *me, const struct fc_qent *e)
{
    return me->owner != 0 && e->owner == me->owner;
}

/* Under the lock: does an entry that `me` cannot share with hold the
 * engine? */
static bool held_by_other(const struct fc_queue *q, int idx)
{
    for (int j = 0; j < FC_QUEUE_LEN; j++) {
        const struct fc_qent *e = &q->ent[j];
        if (j != idx && e->ticket && e->held && !shares(&q->ent[idx], e))
            return true;
    }
    return false;
}

/* Under the lock: is every entry ahead of idx one it shares with? */
static bool first_in_fifo(const struct fc_queue *q, int idx)
{
    const struct fc_qent *me = &q->ent[idx];
    for (int j = 0; j < FC_QUEUE_LEN; j++) {
        const struct fc_qent *e = &q->ent[j];
        if (j == idx || e->ticket == 0 || e->ticket > me->ticket)
            continue;
        if (!shares(me, e))
            return false;
    }
    return true;
}

static bool slice_live(const struct fc_queue *q, uint64_t now)
{
    return q->slice.owner != 0 && now < q->slice.end_ns;
}

/* Under the lock: is entry idx granted at time now? When a live slice of
 * another owner keeps it waiting, *until is set to the slice's end. */
static bool granted(const struct fc_queue *q, int idx, uint64_t now, uint64_t *until)
{
    *until = FC_NO_DEADLINE;
    if (held_by_other(q, idx))
        return false;
    if (slice_live(q, now)) {
        if (q->ent[idx].owner == q->slice.owner)
            return true;
        *until = q->slice.end_ns;
        return false;
    }
    return first_in_fifo(q, idx);
}

/* Under the lock: grants entry idx at time now. On an engine with slices
 * of ts ns, a new slice starts unless the entry's owner has a live one. */
static void grant(struct fc_queue *q, int idx, uint64_t now, uint64_t ts)
{
    struct fc_qent *e = &q->ent[idx];
    e->held = 1;
    if (ts == 0 || (slice_live(q, now) && q->slice.owner == e->owner))
        return;
    memset(&q->slice, 0, sizeof q->slice);
    if (e->owner == 0)
        return;
    q->slice.pid = e->pid;
    q->slice.start = e->start;
    q->slice.end_ns = now + ts;
    q->slice.owner = e->owner;
}

/* Under the lock: has `owner` run out of work, i.e. no entry left in the
 * queue and nothing in its backlog? */
static bool owner_idle(const struct fc_queue *q, uint64_t owner, const atomic_uint *backlog)
{
    if (backlog && atomic_load(backlog) != 0)
        return false;
    for (int j = 0; j < FC_QUEUE_LEN; j++)
        if (q->ent[j].ticket && q->ent[j].owner == owner)
            return false;
    return true;
}

/* Under the lock: removes the entries of dead processes, and the slice of
 * a dead owner. */
static bool reap_dead(struct fc_queue *q)
{
    bool changed = false;
    for (int j = 0; j < FC_QUEUE_LEN; j++) {
        struct fc_qent *e = &q->ent[j];
        if (e->ticket && !fc_shm_owner_alive(e->pid, e->start)) {
            memset(e, 0, sizeof *e);
            changed = true;
        }
    }
    if (q->slice.owner && !fc_shm_owner_alive(q->slice.pid, q->slice.start)) {
        memset(&q->slice, 0, sizeof q->slice);
        changed = true;
    }
    return changed;
}

static int take_entry(struct fc_queue *q, uint64_t owner)
{
    for (int j = 0; j < FC_QUEUE_LEN; j++) {
        struct fc_qent *e = &q->ent[j];
        if (e->ticket == 0) {
            e->pid = fc_proc.pid;
            e->start = fc_proc.start;
            e->owner = owner;
            e->held = 0;
            e->ticket = ++q->next_ticket;   /* written last: entry valid */
            return j;
        }
    }
    return -1;
}

/* Sleeps on the queue's futex (lock released meanwhile) until a change,
 * FC_POLL_NS or `until` (CLOCK_MONOTONIC), whichever comes first; every
 * FC_POLL_NS of waiting, clears dead entries. Returns with the lock held. */
static void wait_for_change(struct fc_queue *q, uint64_t *last_reap, uint64_t until)
{
    uint32_t seq = atomic_load(&q->seq);
    uint64_t now = fc_now_ns(), ns = FC_POLL_NS;
    if (until != FC_NO_DEADLINE)
        ns = until <= now ? 0 : until - now < ns ? until - now : ns;
    fc_shm_unlock();
    if (ns > 0)
        futex_wait(&q->seq, seq, ns);
    fc_shm_lock();
    now = fc_now_ns();
    if (now - *last_reap >= FC_POLL_NS) {
        *last_reap = now;
        if (reap_dead(q)) {
            atomic_fetch_add(&q->seq, 1);
            futex_wake_all(&q->seq);
        }
    }
}

void fc_engine_acquire(int dev, int eng, uint64_t owner, struct fc_hold *h)
{
    struct fc_queue *q = queue(dev, eng);
    uint64_t last_reap = fc_now_ns(), until;
    fc_shm_lock();
    int idx;
    while ((idx = take_entry(q, owner)) < 0)
        wait_for_change(q, &last_reap, FC_NO_DEADLINE);   /* queue full: rare */
    for (;;) {
        uint64_t now = fc_now_ns();
        if (granted(q, idx, now, &until)) {
            grant(q, idx, now, slice_ns(eng));
            break;
        }
        wait_for_change(q, &last_reap, until);
    }
    h->dev = dev;
    h->eng = eng;
    h->idx = idx;
    h->ticket = q->ent[idx].ticket;
    fc_shm_unlock();
}

void fc_engine_release(const struct fc_hold *h, const atomic_uint *backlog)
{
    struct fc_queue *q = queue(h->dev, h->eng);
    fc_shm_lock();
    struct fc_qent *e = &q->ent[h->idx];
    if (e->ticket == h->ticket && e->pid == fc_proc.pid) {
        uint64_t owner = e->owner;
        memset(e, 0, sizeof *e);
        if (q->slice.owner == owner && owner_idle(q, owner, backlog))
            memset(&q->slice, 0, sizeof q->slice);   /* out of work */
    }
    atomic_fetch_add(&q->seq, 1);
    fc_shm_unlock();
    futex_wake_all(&q->seq);
}
