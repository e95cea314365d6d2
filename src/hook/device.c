/* device.c: the device table and the context -> device map. */
#include "hook/device.h"
#include "hook/config.h"
#include "common/log.h"

#include <string.h>
#include <time.h>

struct cs_dev cs_devs[CS_MAX_DEVICES];
_Atomic uint32_t cs_ctx_gen;
_Atomic bool cs_single_device;
__thread struct cs_tls cs_tls __attribute__((tls_model("initial-exec")));

/* Contexts seen so far and their device ordinal. Guarded by ctx_mu; only
 * slow paths (first use of a context, destroy, drain) touch it. */
static pthread_mutex_t ctx_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    CUcontext ctx;
    int ordinal;
} ctx_tab[CS_MAX_CTX];
static int ctx_count;

const char *cs_dev_lease_name(enum cs_lease s)
{
    static const char *const names[] = {"detached", "unmanaged", "idle",
                                        "waiting",  "held",      "revoking"};
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

static int ctx_find_locked(CUcontext ctx)
{
    for (int i = 0; i < ctx_count; i++)
        if (ctx_tab[i].ctx == ctx)
            return ctx_tab[i].ordinal;
    return -1;
}

static void ctx_add_locked(CUcontext ctx, int ordinal)
{
    if (ctx_count == CS_MAX_CTX) {
        /* Only draining walks this list. A context left out is still gated
         * (the per-thread cache maps it), but its work is not waited for on
         * a revoke: say so once rather than fail the application. */
        static bool warned;
        if (!warned)
            cs_warn("more than %d CUDA contexts: later ones are not drained on revoke",
                    CS_MAX_CTX);
        warned = true;
        return;
    }
    ctx_tab[ctx_count].ctx = ctx;
    ctx_tab[ctx_count].ordinal = ordinal;
    ctx_count++;
}

/* ctx must be current on the calling thread (cuCtxGetDevice asks about the
 * current context). Returns the ordinal or -1. */
static int ctx_register_current(CUcontext ctx)
{
    pthread_mutex_lock(&ctx_mu);
    int ord = ctx_find_locked(ctx);
    if (ord < 0) {
        CUdevice dev;
        if (cs_real.cuCtxGetDevice(&dev) == CUDA_SUCCESS) {
            ord = (int)dev;
            ctx_add_locked(ctx, ord);
        }
    }
    pthread_mutex_unlock(&ctx_mu);
    return ord;
}

/* Written once by the constructor (cs_dev_set_ops); read-only afterwards. */
static const struct cs_dev_ops *dev_ops;

void cs_dev_set_ops(const struct cs_dev_ops *ops)
{
    dev_ops = ops;
}

struct cs_dev *cs_dev_get(int ordinal)
{
    if (ordinal < 0 || ordinal >= CS_MAX_DEVICES) {
        static _Atomic bool warned;
        if (!atomic_exchange(&warned, true))
            cs_warn("device ordinal %d is beyond the %d devices cushare manages: "
                    "it runs unmanaged", ordinal, CS_MAX_DEVICES);
        return NULL;
    }
    struct cs_dev *d = &cs_devs[ordinal];
    if (dev_ops)
        dev_ops->attach(d, ordinal);
    return d;
}

struct cs_dev *cs_dev_lookup(CUcontext ctx)
{
    /* Read the generation first: a context destroyed while we look it up
     * must not leave a stale entry in this thread's cache. */
    uint32_t gen = atomic_load_explicit(&cs_ctx_gen, memory_order_relaxed);
    int ord = ctx_register_current(ctx);
    struct cs_dev *d = ord >= 0 ? cs_dev_get(ord) : NULL;
    cs_tls.ctx = ctx;
    cs_tls.dev = d;
    cs_tls.gen = gen;
    return d;
}

void cs_ctx_note(CUcontext ctx, int ordinal)
{
    if (!ctx)
        return;
    pthread_mutex_lock(&ctx_mu);
    if (ctx_find_locked(ctx) < 0)
        ctx_add_locked(ctx, ordinal);
    pthread_mutex_unlock(&ctx_mu);
}

struct cs_dev *cs_dev_of_ctx(CUcontext ctx)
{
    if (!ctx)
        return NULL;
    pthread_mutex_lock(&ctx_mu);
    int ord = ctx_find_locked(ctx);
    pthread_mutex_unlock(&ctx_mu);
    if (ord < 0) {
        if (cs_real.cuCtxPushCurrent_v2(ctx) != CUDA_SUCCESS)
            return NULL;
        ord = ctx_register_current(ctx);
        CUcontext popped;
        cs_real.cuCtxPopCurrent_v2(&popped);
    }
    return ord >= 0 ? cs_dev_get(ord) : NULL;
}

void cs_ctx_forget(CUcontext ctx)
{
    pthread_mutex_lock(&ctx_mu);
    for (int i = 0; i < ctx_count; i++) {
        if (ctx_tab[i].ctx == ctx) {
            ctx_tab[i] = ctx_tab[--ctx_count];
            break;
        }
    }
    atomic_fetch_add_explicit(&cs_ctx_gen, 1, memory_order_relaxed);
    pthread_mutex_unlock(&ctx_mu);
    for (int i = 0; i < CS_MAX_DEVICES; i++)
        cs_bound_forget_ctx(&cs_devs[i].bound, ctx);
}

void cs_ctx_forget_device(int ordinal)
{
    pthread_mutex_lock(&ctx_mu);
    for (int i = 0; i < ctx_count;) {
        if (ctx_tab[i].ordinal == ordinal)
            ctx_tab[i] = ctx_tab[--ctx_count];
        else
            i++;
    }
    atomic_fetch_add_explicit(&cs_ctx_gen, 1, memory_order_relaxed);
    pthread_mutex_unlock(&ctx_mu);
    if (ordinal >= 0 && ordinal < CS_MAX_DEVICES)
        cs_bound_drop(&cs_devs[ordinal].bound);
}

/* Copies up to max contexts of the device into out; returns the count. */
static int ctx_list(int ordinal, CUcontext *out, int max)
{
    int n = 0;
    pthread_mutex_lock(&ctx_mu);
    for (int i = 0; i < ctx_count && n < max; i++)
        if (ctx_tab[i].ordinal == ordinal)
            out[n++] = ctx_tab[i].ctx;
    pthread_mutex_unlock(&ctx_mu);
    return n;
}

void cs_dev_reset_after_fork(void)
{
    /* Only the forking thread exists in the child: locks held by threads
     * that are gone would never be released, so re-create them. The
     * parent's contexts are unusable in a child (CUDA forbids it). */
    pthread_mutex_init(&ctx_mu, NULL);
    ctx_count = 0;
    atomic_fetch_add_explicit(&cs_ctx_gen, 1, memory_order_relaxed);
    atomic_store(&cs_single_device, false);
    for (int i = 0; i < CS_MAX_DEVICES; i++)
        cs_dev_init(&cs_devs[i], i);
}

void cs_dev_init(struct cs_dev *d, int ordinal)
{
    memset(d, 0, sizeof *d);
    pthread_mutex_init(&d->mu, NULL);
    cs_bound_init(&d->bound);
    pthread_cond_init(&d->lease.gate_cv, NULL);
    pthread_cond_init(&d->jobs.work.cv, NULL);
    pthread_cond_init(&d->jobs.pins.cv, NULL);
    d->ordinal = ordinal;
    d->lease.state = CS_LEASE_DETACHED;
}

/* ---- draining ------------------------------------------------------------------ */

void cs_dev_wait_inside_zero(struct cs_dev *d)
{
    /* Threads inside a submission are in the middle of one driver call
     * (microseconds): yield first, then sleep in short steps. */
    struct timespec step = {0, 50000};
    for (int i = 0;
         (atomic_load_explicit(&d->gate.subm, memory_order_seq_cst) & 0xffffffffu) != 0; i++) {
        if (i < 200)
            sched_yield();
        else
            nanosleep(&step, NULL);
    }
}

static void sync_device(int ordinal)
{
    CUcontext ctxs[CS_MAX_CTX];
    int n = ctx_list(ordinal, ctxs, CS_MAX_CTX);
    for (int i = 0; i < n; i++) {
        if (cs_real.cuCtxPushCurrent_v2(ctxs[i]) != CUDA_SUCCESS)
            continue;
        cs_real.cuCtxSynchronize();
        CUcontext popped;
        cs_real.cuCtxPopCurrent_v2(&popped);
    }
}

static void drain(struct cs_dev *d, bool reaching)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    cs_real.cuThreadExchangeStreamCaptureMode(&mode);
    sync_device(d->ordinal);
    uint32_t others = reaching ? atomic_load_explicit(&d->reached_by, memory_order_acquire) : 0;
    for (int i = 0; others; i++, others >>= 1)
        if ((others & 1) && i != d->ordinal)
            sync_device(i);
    cs_real.cuThreadExchangeStreamCaptureMode(&mode);
}

void cs_dev_drain(struct cs_dev *d)
{
    drain(d, false);
}

/* Also the contexts of every device whose work may reach d's memory
 * (reached_by). Their gates stay open, but work that can reach d passes
 * d's gate too, which is closed and empty when a revoke drains: nothing
 * new that touches d's memory can be queued meanwhile. */
void cs_dev_drain_reaching(struct cs_dev *d)
{
    drain(d, true);
}
