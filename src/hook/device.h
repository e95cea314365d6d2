/* device.h: per-GPU state of this process, and the context -> GPU map.
 *
 * Each CUDA device the process touches gets a struct cs_dev, indexed by its
 * ordinal (which is also its slot in the protocol). The first cache line
 * holds the two words every gated call touches; the rest is cold and
 * guarded by the device's mutex.
 */
#ifndef CS_HOOK_DEVICE_H
#define CS_HOOK_DEVICE_H

#include "hook/hook.h"
#include "hook/bound.h"
#include "common/proto.h"

#include <pthread.h>
#include <sched.h>

#define CS_MAX_CTX 256

/* The lease as this process sees it (docs/protocol.md has the diagram). */
enum cs_lease {
    CS_LEASE_DETACHED = 0, /* device not used yet */
    CS_LEASE_UNMANAGED,    /* no daemon (or CUSHARE_DISABLE): gate open */
    CS_LEASE_IDLE,         /* managed; no lease, none requested */
    CS_LEASE_WAITING,      /* managed; lease requested */
    CS_LEASE_HELD,         /* lease held: gate open */
    CS_LEASE_REVOKING,     /* revoked: gate closed, worker draining */
};
const char *cs_dev_lease_name(enum cs_lease s);

/* Work for a device's worker thread. */
enum cs_job_kind {
    CS_JOB_REVOKE = 1, /* drain, maybe swap out, RELEASE */
    CS_JOB_GRANT = 2,  /* restore memory, then open the gate */
    CS_JOB_EVICT = 3,  /* swap out (or pin ahead) while not holding */
    CS_JOB_PREFETCH = 4, /* restore memory ahead of the grant, gate closed */
    CS_JOB_IDLE_PROBE = 5, /* no submissions for a while: is the GPU done too? */
    CS_JOB_TIMESLICE = 6, /* give the process's compute channel groups their timeslice */
    CS_JOB_BURST = 7,  /* LC_MODE RELEASE_IDLE: release once the held burst is done */
    CS_JOB_SHOW = 8,   /* map swapped memory's backing at its addresses (pinner) */
};
struct cs_job {
    uint8_t kind;
    uint32_t flags;
    uint64_t id;      /* lease id or request id */
    uint64_t bytes;
    uint64_t conn;    /* connection generation it arrived on */
    uint64_t t0;      /* arrival time */
};
#define CS_JOBQ 16

/* A FIFO of jobs for one of a device's threads, guarded by the device's mu. */
struct cs_jobq {
    struct cs_job jobs[CS_JOBQ];
    unsigned head, count;
    pthread_cond_t cv; /* the thread waiting for a job */
};

/* The gate word (cs_dev.gate.open). */
#define CS_GATE_CLOSED 0u
#define CS_GATE_OPEN 1u
#define CS_GATE_BOUNDED 2u /* open, with the in-flight bound (bound.h): slow path */

/* subm: the low 32 bits count threads inside a gated call, the high 32 bits
 * count gated calls (wrapping), so one atomic add does both jobs. */
#define CS_SUBM_INSIDE 1ull
#define CS_SUBM_ENTRY (1ull << 32)

/* struct cs_dev is cut by owner: each part below names, once, what guards
 * it and which module writes it. Lock order: locks.h. */

/* The gate: lock-free atomics, every gated call's only shared memory.
 * Written by the gate (gate.h: subm; gate.c: couple) and the lease
 * (lease.c: open).
 *
 * couple: bit i set = work on this device may touch device i's memory (the
 * application enabled peer access to it), so a gated call here also passes
 * device i's gate (gate.c). Memory of a device whose lease is away is not
 * on that GPU: host backing or a shared placeholder sits at its addresses,
 * and its worker may be moving it; a peer-access kernel or copy running
 * under this device's lease alone would read or write the wrong place
 * (seen on two H200s: a cuda:0 -> cuda:1 copy into memory allocated before
 * GPU 1's first grant was lost). Bits are only ever set (fork clears them
 * with the rest of the device table). */
struct cs_dev_gate {
    _Atomic uint32_t open;
    _Atomic uint32_t couple;
    _Atomic uint64_t subm;
};

/* The lease as this process sees it. cs_dev.mu; lease.c's. */
struct cs_dev_lease {
    pthread_cond_t gate_cv;   /* app threads waiting for the gate to open */
    enum cs_lease state;
    uint64_t id;              /* the lease held (or last held) */
    int waiters;              /* app threads blocked in the gate */
    int pairs;                /* app threads waiting for it and another device's
                                 lease at once (a peer copy: cs_lease_pair_begin) */
    bool attach_sent;         /* the daemon knows this device (this connection) */
    bool acquire_sent;        /* an ACQUIRE (or ATTACH WAITING) is with the daemon */
    bool lost_warned;         /* "running unmanaged" said for this outage */
};

/* The device's two threads and their queues. cs_dev.mu; worker.c's. */
struct cs_dev_jobs {
    bool worker_started;
    pthread_t worker;
    struct cs_jobq work;      /* for the worker thread, in arrival order */
    /* PREPARE (pin ahead) requests go to a second thread: pinning takes
     * ~0.2 s/GiB and a revoke queued behind it would wait that long. */
    bool pinner_started;
    pthread_t pinner;
    struct cs_jobq pins;      /* for the pinner */
    bool show_queued;         /* a CS_JOB_SHOW is queued or running */
    bool granting;            /* the worker is running a GRANT job... */
    uint64_t granting_lease;  /* ...for this lease */
};

/* Idle detection and what was last reported. cs_dev.mu; report.c's
 * (written by the client I/O thread, and probe_pending/gpu_done by the
 * worker's idle probe). */
struct cs_dev_report {
    uint32_t last_entries;
    uint32_t last_host_done;
    uint64_t last_activity_ns;
    bool idle_reported;
    bool probe_pending;       /* a CS_JOB_IDLE_PROBE is queued or running */
    bool gpu_done;            /* the probe found no work left in flight */
    uint64_t usage_sent[4];   /* resident, swapped, footprint, unswappable last reported */
    uint64_t pinned_sent;     /* host backing last reported (PINNED) */
};

/* Application threads working toward the GPU without passing the gate: an
 * allocation or free (which may materialize gigabytes), a wait for room.
 * Busy while inside, activity when done: on the H100 a job allocating its
 * tensors right after a grant was reported idle 250 ms in, revoked, and
 * then drained 5 s of work it queued meanwhile. Atomics;
 * cs_dev_host_begin/end; read by the idle detection. */
struct cs_dev_host {
    _Atomic uint32_t busy;
    _Atomic uint32_t done;    /* such calls finished (wrapping) */
};

/* Beside a latency-critical job (LC_MODE). cs_dev.mu; lease.c sets the
 * mode, burst.c runs RELEASE_IDLE's bursts. */
struct cs_dev_lc {
    uint32_t mode;            /* enum cs_lc_mode the daemon asked for */
    uint32_t param_us;        /* its linger or window */
    uint64_t wait_t0;         /* RELEASE_IDLE: first blocked submission since the
                                 last release, 0 = none */
    uint64_t wait_ns;         /* that wait, measured when the gate opened */
    uint64_t open_ns;         /* the gate opened for the current burst at */
    uint64_t bursts;          /* leases released by RELEASE_IDLE */
    uint64_t hint_until_ns;   /* cushare_hint: keep a RELEASE_IDLE lease until then */
    uint64_t hints;           /* cushare_hint calls acted on */
};

/* Memory: atomics. mem.c charges the quota (used .. ooms) and counts what
 * is recorded outside segments (unswappable); seg.c counts the bytes of
 * the device's segments that are not on the GPU (absent: swapped out or not
 * placed yet), which the gate reads for stream capture. */
struct cs_dev_mem {
    _Atomic uint64_t used;
    _Atomic uint64_t peak;
    _Atomic uint64_t allocs;
    _Atomic uint64_t ooms;
    _Atomic uint64_t unswappable;
    _Atomic uint64_t absent;
};

/* Lease statistics. cs_dev.mu; lease.c and jobs.c add to them. */
struct cs_dev_stats {
    uint64_t grants;
    uint64_t revokes;
    uint64_t drain_ns;
    uint64_t wait_ns;
};

struct cs_dev {
    /* ---- hot: read/written by every gated call, lock-free ---- */
    struct cs_dev_gate gate __attribute__((aligned(64)));

    /* ---- cold ---- */
    pthread_mutex_t mu __attribute__((aligned(64)));
    /* Who the device is: written once, under mu, when it attaches
     * (lease.c); read-only afterwards. */
    int ordinal;
    unsigned char uuid[CS_UUID_LEN];
    uint64_t total_mem;       /* as the driver reports it */
    struct cs_dev_lease lease;   /* mu */
    struct cs_dev_jobs jobs;     /* mu */
    struct cs_dev_report rep;    /* mu */
    struct cs_dev_lc lc;         /* mu */
    struct cs_dev_stats stats;   /* mu */
    struct cs_dev_host host;     /* atomics */
    struct cs_dev_mem mem;       /* atomics */
    /* Devices whose work may reach this device's memory (bit = ordinal):
     * peer access to it (cs_gate_couple) or a peer copy with it (gate.c
     * sets bits, never clears them). Its drain waits for their work too
     * (cs_dev_drain_reaching): a revoke must not move memory that a kernel or copy
     * queued on another GPU's stream is still writing. Atomic. */
    _Atomic uint32_t reached_by;
    struct cs_bound bound;       /* LC_MODE BOUNDED: events of queued work (its own lock) */
};

extern struct cs_dev cs_devs[CS_MAX_DEVICES];

/* Around an application call that works toward the GPU without passing the
 * gate (see struct cs_dev_host). Not for the launch path: two atomics. */
static inline void cs_dev_host_begin(struct cs_dev *d)
{
    atomic_fetch_add_explicit(&d->host.busy, 1, memory_order_relaxed);
}

static inline void cs_dev_host_end(struct cs_dev *d)
{
    atomic_fetch_add_explicit(&d->host.done, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&d->host.busy, 1, memory_order_relaxed);
}

/* Bumped whenever a context goes away, so that per-thread caches of
 * "current context -> device" are dropped (relaxed: a stale hit can only
 * happen for a context the application is destroying concurrently). */
extern _Atomic uint32_t cs_ctx_gen;

struct cs_tls {
    CUcontext ctx;
    struct cs_dev *dev;
    uint32_t gen;
    uint32_t calls; /* fast-path hits since the last check with the driver */
};
extern __thread struct cs_tls cs_tls __attribute__((tls_model("initial-exec")));

/* Slow path of cs_dev_current: registers the context and attaches its
 * device on first use (which may connect to the daemon). */
struct cs_dev *cs_dev_lookup(CUcontext ctx);

/* True once the first device attached in a process that sees exactly one
 * device (one GPU, or one made visible to a container): every context is
 * then on it. Written once (by the lease's attach), read relaxed on the hot path. */
extern _Atomic bool cs_single_device;

/* The device of the calling thread's current context, or NULL when there is
 * none (the driver call that follows will fail on its own).
 *
 * Hot path. With one device in the process the answer cannot change, so the
 * driver is asked for the current context only every 64th call (that call
 * keeps newly current contexts registered for draining; contexts are also
 * registered when created or retained). With several devices it asks every
 * time: one driver TLS read (~50 ns on an H100's driver), two compares. */
static inline struct cs_dev *cs_dev_current(void)
{
    if (cs_likely(atomic_load_explicit(&cs_single_device, memory_order_relaxed) && cs_tls.dev &&
                  cs_tls.gen == atomic_load_explicit(&cs_ctx_gen, memory_order_relaxed) &&
                  (++cs_tls.calls & 63u) != 0))
        return cs_tls.dev;
    CUcontext c = NULL;
    if (cs_real.cuCtxGetCurrent(&c) != CUDA_SUCCESS || !c)
        return NULL;
    if (cs_likely(c == cs_tls.ctx &&
                  cs_tls.gen == atomic_load_explicit(&cs_ctx_gen, memory_order_relaxed)))
        return cs_tls.dev;
    return cs_dev_lookup(c);
}

/* As cs_dev_current, but always asks the driver (off the hot path: the
 * allocation hooks record which context owns each allocation). */
static inline struct cs_dev *cs_dev_current_exact(void)
{
    CUcontext c = NULL;
    if (cs_real.cuCtxGetCurrent(&c) != CUDA_SUCCESS || !c)
        return NULL;
    if (c == cs_tls.ctx && cs_tls.gen == atomic_load_explicit(&cs_ctx_gen, memory_order_relaxed))
        return cs_tls.dev;
    return cs_dev_lookup(c);
}

/* The device a given context belongs to (pushes it to ask the driver when
 * it is not known yet). NULL if the context is invalid. */
struct cs_dev *cs_dev_of_ctx(CUcontext ctx);

/* The device with this ordinal, attached if it was not yet. */
struct cs_dev *cs_dev_get(int ordinal);

/* Register a context the application created or retained (ordinal known). */
void cs_ctx_note(CUcontext ctx, int ordinal);

/* Forget a context (destroyed, or primary context released for good). */
void cs_ctx_forget(CUcontext ctx);
/* Forget every context of a device (primary context reset). */
void cs_ctx_forget_device(int ordinal);

/* A device back to DETACHED, as the constructor makes it: every field
 * zero, its locks and conditions initialized. */
void cs_dev_init(struct cs_dev *d, int ordinal);
/* After fork(), in the child: every device back to DETACHED. */
void cs_dev_reset_after_fork(void);

/* What the layers above do when a device is first used: the lease
 * registers attach (learn the device, tell the daemon), called by
 * cs_dev_get on every lookup until the device is attached. */
struct cs_dev_ops {
    void (*attach)(struct cs_dev *d, int ordinal);
};
/* Registered once by the constructor, before any device is looked up. */
void cs_dev_set_ops(const struct cs_dev_ops *ops);

/* Waits until no thread is inside one of d's gated calls (the gate is
 * closed: they are in the middle of one driver call, microseconds). */
void cs_dev_wait_inside_zero(struct cs_dev *d);
/* Waits for the work of every context of d (cuCtxSynchronize, in relaxed
 * capture mode so as not to invalidate an application's global capture). */
void cs_dev_drain(struct cs_dev *d);
/* The same, and the work of every device that may reach d's memory (a
 * revoke: struct cs_dev's reached_by). */
void cs_dev_drain_reaching(struct cs_dev *d);

#endif
