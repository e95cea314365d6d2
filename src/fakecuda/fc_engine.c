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

static struct fc_queue *queue(int dev, int eng)
{
    return &fc_proc.shm->dev[dev].q[eng];
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

/* Under the lock: is entry idx granted? */
static bool granted(const struct fc_queue *q, int idx)
{
    const struct fc_qent *me = &q->ent[idx];
    for (int j = 0; j < FC_QUEUE_LEN; j++) {
        const struct fc_qent *e = &q->ent[j];
        if (j == idx || e->ticket == 0 || e->ticket > me->ticket)
            continue;
        if (me->owner == 0 || e->owner != me->owner)
            return false;
    }
    return true;
}

/* Under the lock: removes the entries of dead processes. */
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
            e->ticket = ++q->next_ticket;   /* written last: entry valid */
            return j;
        }
    }
    return -1;
}

/* Sleeps on the queue's futex (lock released meanwhile); every FC_POLL_NS
 * of waiting, clears dead entries. Returns with the lock held. */
static void wait_for_change(struct fc_queue *q, uint64_t *last_reap)
{
    uint32_t seq = atomic_load(&q->seq);
    fc_shm_unlock();
    futex_wait(&q->seq, seq, FC_POLL_NS);
    fc_shm_lock();
    uint64_t now = fc_now_ns();
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
    uint64_t last_reap = fc_now_ns();
    fc_shm_lock();
    int idx;
    while ((idx = take_entry(q, owner)) < 0)
        wait_for_change(q, &last_reap);   /* queue full: rare */
    while (!granted(q, idx))
        wait_for_change(q, &last_reap);
    h->dev = dev;
    h->eng = eng;
    h->idx = idx;
    h->ticket = q->ent[idx].ticket;
    fc_shm_unlock();
}

void fc_engine_release(const struct fc_hold *h)
{
    struct fc_queue *q = queue(h->dev, h->eng);
    fc_shm_lock();
    struct fc_qent *e = &q->ent[h->idx];
    if (e->ticket == h->ticket && e->pid == fc_proc.pid)
        memset(e, 0, sizeof *e);
    atomic_fetch_add(&q->seq, 1);
    fc_shm_unlock();
    futex_wake_all(&q->seq);
}
