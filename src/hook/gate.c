/* gate.c: the slow path of the gate (see gate.h). */
#include "hook/gate.h"
#include "hook/config.h"
#include "hook/lease.h"
#include "common/log.h"

int cs_hook_init_slow(void)
{
    return cs_real_init();
}

/* Work submitted while its stream is being captured is recorded into a
 * graph, not executed: it needs no lease. The one exception is a job whose
 * memory is swapped out: the driver may check the addresses it records, so
 * it waits for the lease (which restores the memory) like any other work. */
static bool stream_is_capturing(CUstream s, int per_thread)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult r = per_thread ? cs_real.cuStreamIsCapturing_ptsz(s, &st)
                            : cs_real.cuStreamIsCapturing(s, &st);
    return r == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* Some of the device's memory is not on the GPU (seg.c counts it). */
static bool absent(struct cs_dev *d)
{
    return atomic_load_explicit(&d->mem.absent, memory_order_relaxed) != 0;
}

static bool try_inside(struct cs_dev *d);
static CUresult enter_coupled(struct cs_ticket *t, uint32_t couple);

CUresult cs_gate_slow(struct cs_ticket *t, CUstream s, int per_thread)
{
    struct cs_dev *d = t->dev;
    if (stream_is_capturing(s, per_thread) && (!cs_cfg.swap || !absent(d)))
        return CUDA_SUCCESS; /* recorded into a graph, not run: nothing to bound */
    uint32_t couple = atomic_load_explicit(&d->gate.couple, memory_order_acquire);
    if (couple)
        return enter_coupled(t, couple);
    bool admitted = false;
    for (;;) {
        uint32_t o = atomic_load_explicit(&d->gate.open, memory_order_seq_cst);
        if (o == CS_GATE_OPEN) {
            t->bound = false; /* the bound was lifted meanwhile */
            break;
        }
        if (o == CS_GATE_BOUNDED && admitted)
            break;
        atomic_fetch_sub_explicit(&d->gate.subm, CS_SUBM_INSIDE, memory_order_release);
        if (o == CS_GATE_BOUNDED) {
            /* The window is waited for outside the gate (a revoke must not
             * wait for a thread that waits for the GPU). Without events in
             * the current context, or once the window was lifted, the call
             * goes unbounded (and records nothing). */
            t->bound = cs_bound_admit(&d->bound);
            admitted = true;
        } else {
            admitted = false;
            cs_lease_wait_open(d);
        }
        atomic_fetch_add_explicit(&d->gate.subm, CS_SUBM_INSIDE, memory_order_seq_cst);
    }
    if (t->bound) {
        t->stream = s;
        t->per_thread = per_thread;
    }
    return CUDA_SUCCESS;
}

void cs_gate_exit_bound(struct cs_ticket *t)
{
    cs_bound_record(&t->dev->bound, t->stream, t->per_thread);
}

static bool try_inside(struct cs_dev *d)
{
    atomic_fetch_add_explicit(&d->gate.subm, CS_SUBM_ENTRY | CS_SUBM_INSIDE, memory_order_seq_cst);
    if (atomic_load_explicit(&d->gate.open, memory_order_seq_cst))
        return true;
    atomic_fetch_sub_explicit(&d->gate.subm, CS_SUBM_INSIDE, memory_order_release);
    return false;
}

static void leave_all(uint32_t mask)
{
    for (int i = 0; mask; i++, mask >>= 1)
        if (mask & 1)
            atomic_fetch_sub_explicit(&cs_devs[i].gate.subm, CS_SUBM_INSIDE, memory_order_release);
}

/* d's lease and every coupled device's, wanted together (begin) or no
 * longer (end): cs_lease_pair_begin. */
static void pair_all(struct cs_dev *d, uint32_t couple, bool begin)
{
    (begin ? cs_lease_pair_begin : cs_lease_pair_end)(d);
    for (int i = 0; i < CS_MAX_DEVICES; i++)
        if ((couple & (1u << i)) && &cs_devs[i] != d)
            (begin ? cs_lease_pair_begin : cs_lease_pair_end)(&cs_devs[i]);
}

/* t->dev's gate (inside already counted, maybe closed) and every coupled
 * device's gate, all open at once. Whichever is closed is waited for with
 * none of them held, as in cs_gate_enter2: a revoke of any of them waits
 * only for calls that are running. A bounded gate (a best-effort job
 * beside a latency-critical one) counts as open here: a coupled call goes
 * unbounded rather than bounded on one device and not the other. */
static CUresult enter_coupled(struct cs_ticket *t, uint32_t couple)
{
    struct cs_dev *d = t->dev;
    bool waited = false;
    t->bound = false;
    for (;;) {
        struct cs_dev *closed = NULL;
        uint32_t got = 0;
        if (!atomic_load_explicit(&d->gate.open, memory_order_seq_cst))
            closed = d;
        for (int i = 0; !closed && i < CS_MAX_DEVICES; i++) {
            if (!(couple & (1u << i)) || &cs_devs[i] == d)
                continue;
            if (try_inside(&cs_devs[i]))
                got |= 1u << i;
            else
                closed = &cs_devs[i];
        }
        if (!closed) {
            if (waited)
                pair_all(d, couple, false);
            t->coupled = got;
            return CUDA_SUCCESS;
        }
        leave_all(got);
        atomic_fetch_sub_explicit(&d->gate.subm, CS_SUBM_INSIDE, memory_order_release);
        /* All the leases wanted for the whole wait, none held one idle
         * meanwhile (as wait_both). */
        if (!waited)
            pair_all(d, couple, true);
        waited = true;
        cs_lease_wait_open(closed);
        atomic_fetch_add_explicit(&d->gate.subm, CS_SUBM_INSIDE, memory_order_seq_cst);
    }
}

void cs_gate_exit_coupled(struct cs_ticket *t)
{
    leave_all(t->coupled);
    t->coupled = 0;
}

/* a's work may reach b's memory: b's drain waits for a's work too. Set
 * once (a load first: peer copies call this every time). */
static void reaches(struct cs_dev *a, struct cs_dev *b)
{
    uint32_t bit = 1u << a->ordinal;
    if (!(atomic_load_explicit(&b->reached_by, memory_order_relaxed) & bit))
        atomic_fetch_or_explicit(&b->reached_by, bit, memory_order_release);
}

void cs_gate_couple(struct cs_dev *a, struct cs_dev *b)
{
    if (!a || !b || a == b || b->ordinal < 0 || b->ordinal >= CS_MAX_DEVICES)
        return;
    reaches(a, b);
    uint32_t bit = 1u << b->ordinal;
    if (atomic_fetch_or_explicit(&a->gate.couple, bit, memory_order_acq_rel) & bit)
        return;
    cs_info("GPU %d: peer access to GPU %d: its work now waits for both GPUs' leases",
            a->ordinal, b->ordinal);
}

/* Inside both gates (a or b may be NULL), or inside neither. */
static bool try_both(struct cs_dev *a, struct cs_dev *b)
{
    if (a && !try_inside(a))
        return false;
    if (b && !try_inside(b)) {
        if (a)
            atomic_fetch_sub_explicit(&a->gate.subm, CS_SUBM_INSIDE, memory_order_release);
        return false;
    }
    return true;
}

/* Blocks, never inside either gate, until both let us in. With two
 * devices both leases are wanted for the whole wait (cs_lease_pair_begin):
 * asked for together, and the one held is not idle while the thread waits
 * for the other. Before, they were asked for one at a time and the one
 * held looked idle: two jobs copying between two GPUs in opposite orders,
 * each GPU also busy with a job of its own, were handed one GPU each by
 * turns, each lease taken back as idle before the other came
 * (e2e_multigpu.sh: up to 560 grants and 14 s for jobs that otherwise
 * take 20 to 120 grants and 1-4 s; hook_idle's peer_waiter_is_not_idle). */
static void wait_both(struct cs_dev *a, struct cs_dev *b)
{
    bool pair = a && b;
    if (pair) {
        cs_lease_pair_begin(a);
        cs_lease_pair_begin(b);
    }
    do {
        bool a_closed = a && !atomic_load_explicit(&a->gate.open, memory_order_seq_cst);
        cs_lease_wait_open(a_closed || !b ? a : b);
    } while (!try_both(a, b));
    if (pair) {
        cs_lease_pair_end(a);
        cs_lease_pair_end(b);
    }
}

CUresult cs_gate_enter2(struct cs_ticket *ta, struct cs_ticket *tb, struct cs_dev *a,
                        struct cs_dev *b, CUstream s, int per_thread)
{
    ta->dev = tb->dev = NULL;
    ta->coupled = tb->coupled = 0;
    ta->bound = tb->bound = false;
    if (cs_tls_depth++ != 0)
        return CUDA_SUCCESS;
    if (a == b)
        b = NULL;
    if (!a && !b)
        return CUDA_SUCCESS;
    if (stream_is_capturing(s, per_thread) &&
        (!cs_cfg.swap || ((!a || !absent(a)) && (!b || !absent(b)))))
        return CUDA_SUCCESS;
    if (a && b) { /* the copy runs on one's stream and writes either's memory */
        reaches(a, b);
        reaches(b, a);
    }
    if (!try_both(a, b))
        wait_both(a, b);
    ta->dev = a;
    tb->dev = b;
    return CUDA_SUCCESS;
}

void cs_gate_exit2(struct cs_ticket *ta, struct cs_ticket *tb)
{
    if (tb->dev)
        atomic_fetch_sub_explicit(&tb->dev->gate.subm, CS_SUBM_INSIDE, memory_order_release);
    cs_gate_exit(ta);
}

/* Calls that record where memory is (a graph memcpy node keeps each
 * operand's memory type, host or device, and an instantiated graph's node
 * can only be updated with memory of the type it was made with; measured
 * on the H100, bench/gpu/addr_probe.c): made while the job's memory is in
 * host backing they would differ from the same call made natively. So
 * they wait for the memory to be on the GPU, as work does, but only then:
 * with everything resident they pass, lease or not (they run no work). */
CUresult cs_gate_enter_placed(struct cs_ticket *t)
{
    t->dev = NULL;
    t->coupled = 0;
    t->bound = false;
    if (cs_unlikely(!cs_real_ready()) && cs_hook_init_slow() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (cs_tls_depth++ != 0)
        return CUDA_SUCCESS;
    struct cs_dev *d = cs_dev_current();
    if (!d)
        return CUDA_SUCCESS;
    for (;;) {
        /* Inside while the gate is open (a revoke waits for us to leave,
         * so the memory stays put during the call); not counted as work. */
        atomic_fetch_add_explicit(&d->gate.subm, CS_SUBM_INSIDE, memory_order_seq_cst);
        if (atomic_load_explicit(&d->gate.open, memory_order_seq_cst) != CS_GATE_CLOSED)
            break;
        atomic_fetch_sub_explicit(&d->gate.subm, CS_SUBM_INSIDE, memory_order_release);
        if (!cs_cfg.swap || !absent(d))
            return CUDA_SUCCESS; /* all on the GPU already */
        cs_lease_wait_open(d);
    }
    t->dev = d;
    return CUDA_SUCCESS;
}
