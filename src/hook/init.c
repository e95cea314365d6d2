/* init.c: the library constructor and fork handling.
 *
 * The constructor only reads settings and prepares locks: no CUDA call, no
 * thread, no connection (those wait for the first hooked call), because it
 * runs inside every process the library is injected into, CUDA or not.
 */
#include "hook/backing.h"
#include "hook/client.h"
#include "hook/config.h"
#include "hook/device.h"
#include "hook/hooks_ctx.h"
#include "hook/hooks_table.h"
#include "hook/ipc.h"
#include "hook/jobs.h"
#include "hook/lease.h"
#include "hook/mem.h"
#include "hook/seg.h"
#include "hook/swap.h"
#include "hook/tsg.h"
#include "hook/vmm.h"

#include "common/log.h"
#include "common/util.h"

#include <pthread.h>
#include <stdlib.h>

static void after_fork_child(void)
{
    cs_client_reset_after_fork();
    cs_dev_reset_after_fork();
    cs_mem_reset_after_fork();
    cs_seg_reset_after_fork();
    cs_ipc_reset_after_fork();
    cs_vmm_reset_after_fork();
    cs_ctx_hooks_reset_after_fork();
}

/* Beside a latency-critical job (docs/priority.md): what gating did here. */
static void exit_summary_lc(struct cs_dev *d, uint64_t bursts, uint64_t hints)
{
    struct cs_bound *b = &d->bound;
    if (pthread_mutex_trylock(&b->mu) != 0)
        return;
    uint64_t rec = b->recorded, waits = b->waits, wns = b->wait_ns, est = b->est_ns;
    pthread_mutex_unlock(&b->mu);
    if (bursts || hints)
        cs_info("GPU %d latency-critical: %llu bursts released, %llu hints", d->ordinal,
                (unsigned long long)bursts, (unsigned long long)hints);
    if (rec)
        cs_info("GPU %d bounded queue: %llu submissions tracked, %llu waited for the window "
                "(%.2f s), %.1f us of GPU time per submission", d->ordinal,
                (unsigned long long)rec, (unsigned long long)waits, (double)wns / 1e9,
                (double)est / 1e3);
}

/* At exit, with CUSHARE_LOG_LEVEL=info or debug: one line per GPU used,
 * what the lease and the swap engine did for this process. Locks are only
 * tried: a worker busy at exit must not hold the process up. */
static void exit_summary(void)
{
    if (cs_log_get_level() < CS_LOG_INFO)
        return;
    for (int i = 0; i < CS_MAX_DEVICES; i++) {
        struct cs_dev *d = &cs_devs[i];
        if (pthread_mutex_trylock(&d->mu) != 0)
            continue;
        bool used = d->lease.state != CS_LEASE_DETACHED;
        uint64_t grants = d->stats.grants, revokes = d->stats.revokes, wait = d->stats.wait_ns;
        uint64_t drain = d->stats.drain_ns, bursts = d->lc.bursts, hints = d->lc.hints;
        pthread_mutex_unlock(&d->mu);
        if (!used)
            continue;
        struct cs_seg_stats st;
        if (!cs_seg_stats(i, &st, true))
            continue;
        uint64_t ob = st.swap_out_bytes, on = st.swap_out_ns, ib = st.swap_in_bytes,
                 in = st.swap_in_ns;
        char a[32], b[32], p[32];
        cs_info("GPU %d summary: %llu submissions, %llu grants, %llu revokes, waited %.2f s, "
                "drained %.2f s, swapped out %s in %.2f s, in %s in %.2f s, peak memory %s",
                i, (unsigned long long)(atomic_load(&d->gate.subm) >> 32),
                (unsigned long long)grants, (unsigned long long)revokes, (double)wait / 1e9,
                (double)drain / 1e9, cs_format_size(ob, a, sizeof a), (double)on / 1e9,
                cs_format_size(ib, b, sizeof b), (double)in / 1e9,
                cs_format_size(atomic_load(&d->mem.peak), p, sizeof p));
        exit_summary_lc(d, bursts, hints);
    }
    struct cs_backing_stats bs;
    cs_backing_get_stats(&bs);
    if (!bs.pinned_bytes && !bs.lent_bytes)
        return;
    char a[32], b[32];
    cs_info("swap backing: pinned here %s in %.2f s, lent by the node's pool %s in %.2f s",
            cs_format_size(bs.pinned_bytes, a, sizeof a), (double)bs.pinned_ns / 1e9,
            cs_format_size(bs.lent_bytes, b, sizeof b), (double)bs.lent_ns / 1e9);
}

/* At exit (the last handler: registered from the constructor): the pool's
 * pieces that hold nothing go back first (cs_swap_exit says why), then the
 * summary. */
static void at_exit(void)
{
    if (cs_cfg.swap && cs_cfg.pool)
        for (int i = 0; i < CS_MAX_DEVICES; i++)
            cs_swap_exit(&cs_devs[i]);
    exit_summary();
}

/* Swap backing borrows from the node's pool over the scheduler connection
 * (backing.c, a lower layer, takes it as callbacks). */
static const struct cs_backing_pool backing_pool = {
    .borrow = cs_client_borrow,
    .give_back = cs_client_give_back,
};

__attribute__((constructor)) static void cs_hook_ctor(void)
{
    cs_config_load();
    cs_hooks_table_register();
    cs_tsg_init();
    for (int i = 0; i < CS_MAX_DEVICES; i++)
        cs_dev_init(&cs_devs[i], i);
    cs_seg_reset_after_fork();
    if (cs_cfg.pool)
        cs_backing_set_pool(&backing_pool);
    cs_lease_init();
    cs_jobs_init();
    pthread_atfork(NULL, NULL, after_fork_child);
    atexit(at_exit);
}
