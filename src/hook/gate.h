/* gate.h: the lease gate every work-submitting hook passes through.
 *
 * Hot path (lease held): one driver TLS read to find the current context, a
 * per-thread cache hit for its device, one atomic add (count the call as
 * inside, and as activity) and loads of the gate word and of the coupling
 * word beside it; on the way out one atomic subtract. No lock, allocation,
 * system call or getenv.
 *
 * A device coupled to others (peer access: struct cs_dev_gate's couple)
 * takes the slow path, which also passes each coupled device's gate, never
 * waiting while inside any of them (as cs_gate_enter2).
 *
 * The gate word is CS_GATE_OPEN on the hot path. CS_GATE_BOUNDED (a
 * best-effort job beside a latency-critical one, bound.h) also lets work
 * through, but by the slow path, which limits the work in flight and has the
 * exit record an event.
 *
 * A revoke closes the gate (seq_cst store) and then waits for the inside
 * count to reach zero; the seq_cst add and load here make that safe (Dekker).
 * A thread that finds the gate closed backs out and blocks in the slow path
 * until the lease comes back, except for work recorded by stream capture,
 * which does not execute and so needs no lease.
 */
#ifndef CS_HOOK_GATE_H
#define CS_HOOK_GATE_H

#include "hook/device.h"

struct cs_ticket {
    struct cs_dev *dev; /* the gate passed, to leave on exit; NULL if none */
    uint32_t coupled;   /* the other devices' gates passed with it (bit = ordinal) */
    bool bound;         /* passed a bounded gate: record the work's event on exit */
    int per_thread;     /* with bound: the call's stream and its flavour */
    CUstream stream;
};

/* Loads the real driver on the first hooked call. */
int cs_hook_init_slow(void);

CUresult cs_gate_slow(struct cs_ticket *t, CUstream s, int per_thread);

/* per_thread: the _ptsz/_ptds variants, where stream 0 means the per-thread
 * default stream. Returns CUDA_SUCCESS once the caller may submit, or an
 * error to return to the application (the driver could not be loaded). */
static inline CUresult cs_gate_enter(struct cs_ticket *t, CUstream s, int per_thread)
{
    t->dev = NULL;
    t->coupled = 0;
    t->bound = false;
    if (cs_unlikely(!cs_real_ready()) && cs_hook_init_slow() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (cs_tls_depth++ != 0)
        return CUDA_SUCCESS; /* a call made by one of our own hooks */
    struct cs_dev *d = cs_dev_current();
    if (!d)
        return CUDA_SUCCESS;
    t->dev = d;
    atomic_fetch_add_explicit(&d->gate.subm, CS_SUBM_ENTRY | CS_SUBM_INSIDE, memory_order_seq_cst);
    if (cs_likely(atomic_load_explicit(&d->gate.open, memory_order_seq_cst) == CS_GATE_OPEN &&
                  !atomic_load_explicit(&d->gate.couple, memory_order_relaxed)))
        return CUDA_SUCCESS;
    return cs_gate_slow(t, s, per_thread);
}

/* The bounded exit: records the submitted work's event (gate.c). */
void cs_gate_exit_bound(struct cs_ticket *t);
/* Leaves the coupled devices' gates (gate.c). */
void cs_gate_exit_coupled(struct cs_ticket *t);

static inline void cs_gate_exit(struct cs_ticket *t)
{
    if (t->dev) {
        if (cs_unlikely(t->bound))
            cs_gate_exit_bound(t);
        if (cs_unlikely(t->coupled))
            cs_gate_exit_coupled(t);
        atomic_fetch_sub_explicit(&t->dev->gate.subm, CS_SUBM_INSIDE, memory_order_release);
    }
    cs_tls_depth--;
}

/* Two gates at once (peer copies). Never blocks while inside either gate,
 * so two threads taking the same pair in opposite orders cannot deadlock
 * with a revoke that waits for one of them. While it waits, both leases
 * are asked for and the one held is not idle (cs_lease_pair_begin). a or
 * b may be NULL. */
CUresult cs_gate_enter2(struct cs_ticket *ta, struct cs_ticket *tb, struct cs_dev *a,
                        struct cs_dev *b, CUstream s, int per_thread);
void cs_gate_exit2(struct cs_ticket *ta, struct cs_ticket *tb);

/* From now on work on device a may touch device b's memory (peer access):
 * a's gated calls also pass b's gate (struct cs_dev_gate's couple). */
void cs_gate_couple(struct cs_dev *a, struct cs_dev *b);

/* For calls that submit no work but record where device memory is (the
 * generated wrappers of class `placed`, src/hook/api_classes.txt): waits
 * for the lease only while some of the job's memory on the current
 * device is not on the GPU, and then holds the gate (left with
 * cs_gate_exit) so that it stays there during the call. */
CUresult cs_gate_enter_placed(struct cs_ticket *t);

/* Hooks that are not gated but call the driver (allocation, queries) mark
 * themselves so that driver calls they cause are not gated either. */
static inline void cs_nest_enter(void)
{
    cs_tls_depth++;
}
static inline void cs_nest_exit(void)
{
    cs_tls_depth--;
}

#endif
