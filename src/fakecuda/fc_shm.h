/* fc_shm.h: layout of the simulator's cross-process state, the POSIX
 * shared memory object "/fakecuda-<FAKECUDA_SHM>" (private to fc_shm.c and
 * fc_engine.c).
 *
 * Every field except the futex words is read and written under `lock`, a
 * process-shared robust mutex: a process SIGKILLed while holding it hands
 * it to the next locker with EOWNERDEAD, which marks it consistent; every
 * table below tolerates a half-written entry (an entry whose owner is not
 * a live process is simply reclaimed). Nothing here points into a
 * process's address space.
 */
#ifndef FC_SHM_H
#define FC_SHM_H

#include "fakecuda/fc_internal.h"

#define FC_SHM_MAGIC  0x314d48534346ull       /* "FCSHM1" */
#define FC_SHM_LAYOUT 4u                      /* bump on any layout change */
#define FC_MAX_PROCS  128                     /* process slots per device */
#define FC_QUEUE_LEN  256                     /* waiters per engine */

/* One process's use of one device's memory. pid 0 = free. The start time
 * tells a live process from a dead one whose pid was reused. */
struct fc_slot {
    int32_t pid;
    uint32_t pad;
    uint64_t start;
    uint64_t used;
};

/* A holder of, or waiter for, an engine. ticket 0 = free entry. Queue order
 * is ticket order, so the engine is granted FIFO whatever the array order
 * (a time slice lets its owner pass waiters, see fc_engine.c: `held` tells
 * the holders from the waiters). */
struct fc_qent {
    int32_t pid;
    uint32_t held;                   /* 1 once granted */
    uint64_t start;
    uint64_t owner;                  /* 0: exclusive; else share with equals */
    uint64_t ticket;
};

/* The kernel engine's running time slice (FAKECUDA_TIMESLICE_US > 0).
 * owner 0 = none; pid and start identify the owner's process so that a
 * dead owner's slice can be dropped. */
struct fc_slice {
    uint64_t owner;
    int32_t pid;
    uint32_t pad;
    uint64_t start;
    uint64_t end_ns;                 /* CLOCK_MONOTONIC */
};

struct fc_queue {
    uint64_t next_ticket;
    _Atomic uint32_t seq;            /* futex word: bumped on every change */
    uint32_t pad;
    struct fc_slice slice;           /* kernel engine only */
    struct fc_qent ent[FC_QUEUE_LEN];
};

struct fc_shm_dev {
    struct fc_slot slot[FC_MAX_PROCS];
    struct fc_queue q[FC_NENGINES];
};

struct fc_shm {
    _Atomic uint64_t magic;          /* stored last by the creator (release) */
    uint32_t layout;
    uint32_t ndev;
    uint64_t mem_bytes;              /* per device */
    uint64_t size;                   /* sizeof(struct fc_shm) */
    uint64_t timeslice_ns;           /* kernel engine; 0 = FIFO */
    pthread_mutex_t lock;
    struct fc_shm_dev dev[FC_MAX_DEVICES];
};

void fc_shm_lock(void);
void fc_shm_unlock(void);
/* True when (pid, start) is this process or a live one. */
bool fc_shm_owner_alive(int32_t pid, uint64_t start);

#endif
