/* mem.c: the memory model of each GPU and the swap decisions it drives.
 *
 * Model. A GPU's capacity is what its clients' swappable and unswappable
 * allocations may occupy: total_mem (ATTACH) minus mem_reserve_mb minus a
 * reserve per attached client for what the driver charges its process
 * beyond those allocations (its context, modules, library workspaces) and
 * one more (the context of the next process to start). The reserve is
 * measured (client_reserve_mb = auto, the default): the driver's figure
 * for the process (NVML, meter.c) minus what its USAGE says resident, the
 * median of the last few samples; members not measured yet and the next
 * process get the largest overhead measured on the GPU. A number in
 * client_reserve_mb overrides the measurement for every client.
 * Each member reports resident, swapped, unswappable and
 * footprint bytes in USAGE; between two USAGEs the daemon adjusts its copy
 * with what EVICTED, RELEASE (swapped_bytes), RESTORED and PREFETCHED say
 * moved. The figures are estimates by nature (USAGE comes at the client's
 * pace); ROOM, sent by a client whose cuMemCreate failed, is the safety net
 * for anything the model gets wrong.
 *
 * Rules, for the waiter w that policy will grant next (sd_best_waiter):
 *   1. Room before the grant: w is granted only when its whole footprint
 *      fits beside what every other member keeps resident (in its first
 *      lease, the footprint it is expected to grow to: sd_mem_expected). The shortfall
 *      is taken from the others, furthest from running first (idle before
 *      waiting, lower class first, then larger vtime), each only for what
 *      is still missing (partial eviction): third parties by EVICT, the
 *      outgoing holder by REVOKE.evict_bytes (policy.c make_room). The
 *      grant waits for those answers; it goes ahead anyway when nothing is
 *      left to move (ROOM then decides) or after revoke_timeout_ms. Where
 *      the pool lends, what the movers would pin of their own is left to
 *      w's ROOMs, which bring back the pool's pieces of what w restored
 *      (takeback.c sd_takeback_paced, swap_in_turns).
 *   2. Overlap: while a holder still runs, third parties are evicted for w
 *      at once (the copy engines are idle while kernels run), and w is sent
 *      PREFETCH as soon as its missing memory, or at least PREFETCH_MIN of
 *      it, fits in what is free: it restores with its gate closed while
 *      the holder computes, so the switch only moves what could not move
 *      earlier. A prefetch that stops short (the client's cuMemCreate
 *      failed) is not repeated until some memory is freed on the GPU.
 *      In mixed mode beside a holder of w's own class side, only the
 *      prefetch: into what is free, less 1/16 of the GPU left for the
 *      holder (sd_mem_plan says why).
 *   3. Preparation: on an oversubscribed GPU (sum of footprints above the
 *      capacity), members with resident memory not yet known to have host
 *      backing are sent EVICT PREPARE for it, so that pinning (0.2-0.6
 *      s/GiB) happens before the first swap-out rather than inside it.
 *      The driver pins for one process at a time, so the node has one
 *      PREPARE out at a time, of at most PREP_CHUNK, none while an EVICT
 *      for ROOM is outstanding, furthest from running first; a member is asked
 *      again when its footprint changes (at most once per PREP_INTERVAL)
 *      or at once for the next chunk of its target. When the node's pool
 *      lends, waiters' pin-ahead leaves the pool what the holders lack for
 *      the swap-outs their revokes would ask now (holders_uncovered): those
 *      are on a switch's critical path, a waiter's planned eviction is not.
 *
 * Everything here runs inside policy calls, on simulated time in the unit
 * tests; nothing a client reports can make it loop: every EVICT, PREFETCH
 * and PREPARE is one outstanding request per member, and a member that
 * moved less than asked is not asked again until its memory changes.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "sched/policy_int.h"

#define PREFETCH_MIN (4ull << 20)
/* How long a member's first USAGE is waited for before it is planned
 * around as having nothing (plan_prefetch): the hook reports at its first
 * tick after ATTACH (report.c), ten times sooner. */
#define FIRST_USAGE_NS (1000ull * SD_MS)
#define PREP_INTERVAL_NS (1000ull * SD_MS)
/* A prefetch for the next holder beside a holder of its own class side
 * leaves 1/16 of the GPU free (sd_mem_plan): 8.7 GB of an H200, 5 GB of an
 * H100, above the 4 GB a pytorch-add job of 45 GB adds at its end. */
#define SAME_SIDE_KEEP_DIV 16
/* One PREPARE asks for at most this much (~1 s of pinning on an H100): the
 * next one in line, or an eviction someone waits for, is never stuck
 * behind a long pin. */
#define PREP_CHUNK (4ull << 30)

uint64_t sd_add_sat(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t sub0(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

static uint64_t min64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static uint64_t max64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

uint64_t sd_mem_movable(const struct sd_member *m)
{
    return m->client->unresponsive ? 0 : sub0(m->resident, m->unswappable);
}

/* An unresponsive client's memory report is not planned around: it will
 * not move it, and it may be lying (a tenant that claims the whole GPU and
 * never answers would otherwise shrink every other job's room for good:
 * 2.4 x the honest jobs' makespan on the simulated GPU). Planning evictions,
 * prefetches and ROOM's "cannot fit" shortcut are all optimizations: if the
 * memory is real, the next allocation fails in the driver and ROOM makes
 * room among the others (and asks it last, room.c last_resort()). Status
 * still shows what it reported. */
uint64_t sd_mem_fixed(const struct sd_member *m)
{
    return m->client->unresponsive ? 0 : m->unswappable;
}

/* Bytes m was asked to move out that are not yet known gone. */
static uint64_t pending_out(const struct sd_member *m)
{
    return min64(sub0(m->evict_bytes, m->evict_seen), sd_mem_movable(m));
}

/* ---- a job's growth in its first lease -------------------------------------- */

/* A job allocates most of its working set after its first kernel, that is
 * in its first lease: on the H200 a 45 GB pytorch-add job came to its
 * first grant with 15 GiB and grew by 28-30 GiB through ROOMs, 0.87-2.9 s
 * of the GPU idle while others' memory moved for it; planned ahead, that
 * switch took 0.28 s, the outgoing holder's own swap-out
 * (oversubscription.md, 2026-11-30, session 9). Planned at the footprint
 * it is expected to reach, that memory moves out of third parties while
 * the outgoing holder drains (1.4 s for such a job), and a ROOM it still
 * sends asks for the rest at once. The guess is the quantum's (policy.c, expected_overflow):
 * like the largest job that has run, for a job holding at least
 * 1/SD_GROW_LIKE of it. As a holder only for the first SD_GROW_NS of its
 * first lease: a job sets up at its start, and in shared mode a first
 * lease may last for the job's life. A wrong guess costs other jobs'
 * memory moved out for it (while the outgoing holder drains) and, for
 * those 5 s, no prefetch into the room kept for it. Only the tenant's own
 * jobs set the guess: a footprint is the client's word, and one tenant's
 * claim must not move memory for another tenant's jobs (a tenant's own
 * new job could claim as much itself). */

uint64_t sd_mem_expected(const struct sd_gpu *g, const struct sd_member *m)
{
    bool waiting_new = m->state == CS_STATE_WAITING && !sd_has_run(m);
    bool growing = sd_is_holder(m) && m->grow_until;
    if (!waiting_new && !growing)
        return m->footprint;
    uint64_t largest = 0;
    for (size_t i = 0; i < g->n; i++) {
        const struct sd_member *x = g->m[i];
        if (x != m && sd_has_run(x) && sd_same_tenant(x, m) && x->footprint > largest)
            largest = x->footprint;
    }
    return m->footprint < largest && m->footprint >= largest / SD_GROW_LIKE ? largest
                                                                            : m->footprint;
}

/* Ends the growth window of g's holders whose SD_GROW_NS is over at now;
 * sets g's deadline for the others whose window counts now (a job alone,
 * or the largest, wakes nobody). */
static void growth_check(struct sd_gpu *g, uint64_t now)
{
    for (size_t i = 0; i < g->n; i++) {
        struct sd_member *m = g->m[i];
        if (m->grow_until && now >= m->grow_until)
            m->grow_until = 0;
        else if (m->grow_until && sd_mem_expected(g, m) > m->footprint)
            sd_gpu_want_at(g, m->grow_until);
    }
}

/* What m holds on the GPU now. A holder's whole footprint counts: its
 * grant restores everything before its gate opens (room was made for it),
 * even while its USAGE still shows the restore under way; likewise an
 * outstanding prefetch counts as done. A holder in its first lease counts
 * at what it is expected to grow to: room made for that growth is not
 * prefetched into for the next holder. */
static uint64_t res_now(const struct sd_member *m)
{
    if (m->client->unresponsive)
        return 0; /* not planned around (sd_mem_fixed) */
    uint64_t r = m->resident;
    if ((sd_is_holder(m) || m->prefetch_id) && m->footprint > m->resident)
        r = m->footprint;
    r = sd_add_sat(r, m->room_bytes);
    if (sd_is_holder(m))
        r = max64(r, sd_mem_expected(m->gpu, m));
    return r;
}

/* What m will keep resident once its outstanding eviction is done. */
static uint64_t res_after(const struct sd_member *m)
{
    return res_now(m) - min64(pending_out(m), res_now(m));
}

/* ---- what the driver charges beyond the allocations ------------------------- */

uint64_t sd_gpu_client_reserve(const struct sd_policy *p, const struct sd_gpu *g)
{
    if (p->cfg->client_reserve_mb != SD_RESERVE_AUTO)
        return (uint64_t)p->cfg->client_reserve_mb << 20;
    return g->overhead_seen;
}

static uint64_t member_reserve(const struct sd_policy *p, const struct sd_gpu *g,
                               const struct sd_member *m)
{
    if (p->cfg->client_reserve_mb == SD_RESERVE_AUTO && m->overhead_known)
        return m->overhead;
    return sd_gpu_client_reserve(p, g);
}

/* One reserve more than there are clients: the next process to start needs
 * room for its context before it can even ask for any. */
uint64_t sd_gpu_capacity(const struct sd_policy *p, const struct sd_gpu *g)
{
    uint64_t reserve = (uint64_t)p->cfg->mem_reserve_mb << 20;
    for (size_t i = 0; i < g->n; i++)
        reserve = sd_add_sat(reserve, member_reserve(p, g, g->m[i]));
    reserve = sd_add_sat(reserve, sd_gpu_client_reserve(p, g));
    return sub0(g->mem_total, reserve);
}

/* The median of m's samples: one sample taken while an allocation was
 * made but not yet reported in USAGE (too high), or freed and reported
 * before the driver let go of it (too low), does not move it. */
static uint64_t ovh_median(const struct sd_member *m)
{
    uint64_t v[SD_OVH_SAMPLES];
    uint32_t n = m->ovh_n;
    memcpy(v, m->ovh_ring, n * sizeof v[0]);
    for (uint32_t i = 1; i < n; i++)
        for (uint32_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            uint64_t t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[n / 2];
}

static void ovh_add(struct sd_member *m, uint64_t sample)
{
    m->ovh_ring[m->ovh_at] = sample;
    m->ovh_at = (m->ovh_at + 1) % SD_OVH_SAMPLES;
    if (m->ovh_n < SD_OVH_SAMPLES)
        m->ovh_n++;
    m->overhead = ovh_median(m);
    m->overhead_known = true;
}

/* The reserve of the next process and of members not measured yet: the
 * largest overhead of the members measured now, at most SD_OVH_GUESS_MAX.
 * Not the largest ever: one member's passing overhead (an allocation the
 * driver saw long before the USAGE that reports it) would shrink the GPU for
 * the daemon's lifetime. Bounded because it is a guess made for others: a
 * client that under-reports its resident memory raises its own measured
 * overhead (which is real memory, reserved for it alone), but must not make
 * every newcomer reserve as much (PyTorch measures ~0.6 GiB on an H200).
 * With none measured, the last figure stays: the next process is likely the
 * same program again. */
static void ovh_reserve(struct sd_gpu *g)
{
    bool any = false;
    uint64_t mx = 0;
    for (size_t i = 0; i < g->n; i++) {
        const struct sd_member *m = g->m[i];
        if (!m->overhead_known)
            continue;
        any = true;
        if (m->overhead > mx)
            mx = m->overhead;
    }
    if (any)
        g->overhead_seen = mx < SD_OVH_GUESS_MAX ? mx : SD_OVH_GUESS_MAX;
}

/* What the members of x[i]'s process report resident; whether x[i] is
 * the first of them (the one its overhead is charged to). */
static uint64_t proc_resident(const struct sd_measured *x, size_t n, size_t i, bool *first)
{
    uint64_t r = 0;
    *first = true;
    for (size_t j = 0; j < n; j++) {
        if (x[j].proc != x[i].proc)
            continue;
        if (j < i)
            *first = false;
        r = sd_add_sat(r, x[j].m->resident);
    }
    return r;
}

void sd_policy_measured(struct sd_policy *p, struct sd_gpu *g, const struct sd_measured *x,
                        size_t n, uint64_t now)
{
    uint64_t cap = sd_gpu_capacity(p, g);
    for (size_t i = 0; i < n; i++) {
        if (x[i].used == UINT64_MAX || x[i].m->gpu != g)
            continue;
        bool first;
        uint64_t res = proc_resident(x, n, i, &first);
        uint64_t o = first ? sub0(x[i].used, res) : 0;
        /* A figure past the GPU's memory is nobody's overhead. */
        if (g->mem_total && o > g->mem_total)
            o = g->mem_total;
        ovh_add(x[i].m, o);
    }
    ovh_reserve(g);
    if (sd_gpu_capacity(p, g) != cap)
        sd_gpu_reschedule(p, g, now); /* once a second per GPU: only on a change */
}

uint64_t sd_gpu_footprint(const struct sd_gpu *g)
{
    uint64_t s = 0;
    for (size_t i = 0; i < g->n; i++)
        s = sd_add_sat(s, g->m[i]->footprint);
    return s;
}

uint64_t sd_gpu_swapped(const struct sd_gpu *g)
{
    uint64_t s = 0;
    for (size_t i = 0; i < g->n; i++)
        s = sd_add_sat(s, g->m[i]->swapped);
    return s;
}

bool sd_mem_evict_before(const struct sd_member *a, const struct sd_member *b)
{
    if ((a->state == CS_STATE_IDLE) != (b->state == CS_STATE_IDLE))
        return a->state == CS_STATE_IDLE;
    if (a->client->info.priority != b->client->info.priority)
        return a->client->info.priority > b->client->info.priority;
    if (a->vtime != b->vtime)
        return a->vtime > b->vtime;
    return a->client->id > b->client->id;
}

/* What must leave g for w to have `fp` bytes resident. */
static uint64_t shortfall_for(const struct sd_policy *p, const struct sd_gpu *g,
                              const struct sd_member *w, uint64_t fp)
{
    uint64_t cap = sd_gpu_capacity(p, g);
    if (!cap || !w->footprint)
        return 0;
    uint64_t sum = fp;
    for (size_t i = 0; i < g->n; i++)
        if (g->m[i] != w)
            sum = sd_add_sat(sum, res_after(g->m[i]));
    uint64_t s = sub0(sum, cap);
    return s > SD_MEM_SLACK ? s : 0;
}

uint64_t sd_mem_shortfall(const struct sd_policy *p, const struct sd_gpu *g,
                          const struct sd_member *w)
{
    return shortfall_for(p, g, w, sd_mem_expected(g, w));
}

uint64_t sd_mem_shortfall_allocated(const struct sd_policy *p, const struct sd_gpu *g,
                                    const struct sd_member *w)
{
    return shortfall_for(p, g, w, w->footprint);
}

void sd_mem_send_evict(struct sd_policy *p, struct sd_member *v, uint64_t bytes,
                       struct sd_member *asker, uint64_t now)
{
    v->evict_id = ++p->next_evict_id;
    v->evict_ns = now;
    v->evict_for = asker;
    v->evict_beside_exit = asker && asker->room_copies; /* timed apart (room.c) */
    v->evict_bytes = bytes;
    v->evict_seen = 0;
    v->st.evictions++;
    v->gpu->st.evictions++;
    cs_debug("gpu %u: evict %llu bytes of pid %u%s", v->gpu->index, (unsigned long long)bytes,
             v->client->info.pid, asker ? " (room)" : "");
    p->ops.evict(p->ctx, v, v->evict_id, bytes);
    sd_takeback_for(p, v, bytes, now);
}

/* A third party that may be asked to move memory out for w now. */
static bool plannable(const struct sd_member *v, const struct sd_member *w)
{
    return v != w && !sd_is_holder(v) && !v->evict_id && !v->prefetch_id && !v->no_swap &&
           !v->evict_stuck && !v->restore_blocked && sd_mem_movable(v) > 0;
}

static struct sd_member **by_eviction_order(const struct sd_gpu *g);

/* Evicts from third parties, furthest from running first, until `need`
 * bytes are on their way out or nobody is left. Paced where the pool
 * lends: what a victim would pin of its own is left to w's ROOMs, which
 * come with the pieces of what w has restored since (sd_takeback_paced).
 * While a holder runs too: on the H200 (4 x 45 GB, 8 s slices) the part
 * of a revoke's swap-out left to the next holder was asked at once of a
 * third party that lacked all of it, whose 14.9 GB pinned beside the
 * revoke's swap-out, both at a crawl, and held every other process's
 * allocations up (pinning holds a driver lock); jobs pinning their own
 * took the host to its reserve. */
static void evict_third_parties(struct sd_policy *p, struct sd_gpu *g, struct sd_member *w,
                                uint64_t need, uint64_t now)
{
    uint64_t fp = sd_mem_expected(g, w), returns = w->client->info.giveback ? w->swapped : 0;
    bool said = fp <= w->footprint;
    if (need <= SD_MEM_SLACK)
        return;
    struct sd_member **order = by_eviction_order(g);
    if (!order)
        return; /* the next decision retries */
    for (size_t i = 0; i < g->n && need > SD_MEM_SLACK; i++) {
        struct sd_member *v = order[i];
        if (!plannable(v, w))
            continue;
        uint64_t amount = min64(sd_mem_movable(v), need);
        need -= amount;
        amount = sd_takeback_paced(p, v, amount, &returns);
        if (amount <= SD_MEM_SLACK)
            continue;
        if (!said) /* why memory moves for more than w has, once per plan */
            cs_debug("gpu %u: pid %u is planned at %llu bytes (it has %llu): a job's first "
                     "lease, expected to grow like the largest", g->index, w->client->info.pid,
                     (unsigned long long)fp, (unsigned long long)w->footprint);
        said = true;
        sd_mem_send_evict(p, v, amount, NULL, now);
    }
    free(order);
}

/* Memory on its way out: an EVICT or a REVOKE with evict_bytes unanswered.
 * An EVICT that a grant has already waited out is not waited for again: a
 * client that sits on it would otherwise cost every later switch
 * revoke_timeout_ms until its answer deadline marks it (issue 17). Nor is
 * an unresponsive client's (room.c asks one as a last resort): only the
 * ROOM that asked waits for it. */
static bool evictions_in_flight(const struct sd_gpu *g)
{
    for (size_t i = 0; i < g->n; i++) {
        const struct sd_member *m = g->m[i];
        if (m->client->unresponsive)
            continue;
        if ((m->evict_id && m->evict_id != m->evict_waited) ||
            (m->state == CS_STATE_REVOKING && m->evict_bytes))
            return true;
    }
    return false;
}

static void evictions_waited_out(struct sd_gpu *g)
{
    for (size_t i = 0; i < g->n; i++)
        g->m[i]->evict_waited = g->m[i]->evict_id;
}

bool sd_mem_grant_ready(struct sd_policy *p, struct sd_gpu *g, struct sd_member *w,
                        uint64_t now)
{
    uint64_t cap = sd_gpu_capacity(p, g);
    uint64_t sum = sd_mem_expected(g, w);
    for (size_t i = 0; i < g->n; i++)
        if (g->m[i] != w && !g->m[i]->client->unresponsive) /* (sd_mem_fixed) */
            sum = sd_add_sat(sum, g->m[i]->resident);
    if (!cap || !w->footprint || sum <= sd_add_sat(cap, SD_MEM_SLACK)) {
        g->room_wait_since = 0;
        return true;
    }
    evict_third_parties(p, g, w, sd_mem_shortfall(p, g, w), now);
    if (!evictions_in_flight(g)) {
        /* Nothing more can move: grant, and let ROOM sort out whatever the
         * model got wrong (or the client learn it does not fit). */
        g->room_wait_since = 0;
        return true;
    }
    if (!g->room_wait_since) {
        g->room_wait_since = now;
        g->st.room_waits++;
    }
    uint64_t until = g->room_wait_since + (uint64_t)p->cfg->revoke_timeout_ms * SD_MS;
    if (now >= until) {
        cs_warn("gpu %u: evictions for pid %u not answered within %u ms; granting anyway",
                g->index, w->client->info.pid, p->cfg->revoke_timeout_ms);
        g->room_wait_since = 0;
        g->sw_waited_out = true;
        evictions_waited_out(g);
        return true;
    }
    sd_gpu_want_at(g, until);
    return false;
}

/* ---- planning while a holder runs ------------------------------------------------ */

/* Prefetches w's missing memory into what is free on g, less `keep`
 * bytes left free. */
static void plan_prefetch(struct sd_policy *p, struct sd_gpu *g, struct sd_member *w,
                          uint64_t cap, uint64_t keep, uint64_t now)
{
    if (!p->ops.prefetch || w->prefetch_id || w->no_swap || w->restore_blocked ||
        w->client->unresponsive)
        return; /* (a blocked one is restoring already) */
    if (w->prefetch_stuck && w->prefetch_epoch == g->freed_epoch)
        return;
    /* A member that has not sent USAGE since it attached (a new job, or any
     * job right after a daemon restart) has memory the model does not know
     * of: counted as none, a prefetch was budgeted into memory in use and
     * took the room the next holder's restore needed, and ROOM then
     * evicted the prefetched memory again (docs/model.md, finding 5). Its
     * first USAGE comes within one report tick (report.c). The wait is
     * bounded (FIRST_USAGE_NS): a client that never reports (broken, or a
     * tenant that attaches and stays silent) must not switch prefetching
     * off for everyone else on its GPU; after that it is planned around as
     * having nothing, as before, and ROOM is the safety net. An
     * unresponsive one is not planned around anyway. */
    for (size_t i = 0; i < g->n; i++) {
        const struct sd_member *o = g->m[i];
        if (o->usage_seen || o->client->unresponsive)
            continue;
        uint64_t until = sd_add_sat(o->attach_ns, FIRST_USAGE_NS);
        if (now < until) {
            sd_gpu_want_at(g, until);
            return;
        }
    }
    /* Nor while an unresponsive member holds the GPU: its memory and the
     * room its ROOM asked for are not planned around (res_now() 0), so
     * that room looked free and went to w's prefetch, its allocation
     * failed again, and its next ROOM evicted w's prefetched memory, which
     * then looked free again: a room/prefetch ping-pong for as long as it
     * held the GPU (docs/model.md, finding 7). */
    for (size_t i = 0; i < g->n; i++)
        if (sd_is_holder(g->m[i]) && g->m[i]->client->unresponsive)
            return;
    uint64_t need = sub0(w->footprint, w->resident);
    if (need <= SD_MEM_SLACK)
        return;
    /* Departed clients' memory is the driver's until their processes
     * exit: a prefetch planned into it at the disconnect found no room
     * (error 2 on an H200, 0.36 s before the process was gone). */
    uint64_t used = sd_gpu_departed_bytes(g, now);
    for (size_t i = 0; i < g->n; i++)
        used = sd_add_sat(used, res_now(g->m[i]));
    uint64_t free_now = sub0(sub0(cap, used), keep);
    if (free_now < min64(need, PREFETCH_MIN))
        return;
    /* Room for it is on its way: one prefetch when it is there rather than
     * one now for crumbs and another after. (A real part of it is worth
     * moving now: it overlaps the evictions, the other copy direction.) */
    if (free_now < need / 4 && evictions_in_flight(g))
        return;
    w->prefetch_id = ++p->next_evict_id;
    w->prefetch_ns = now;
    w->prefetch_bytes = min64(need, free_now);
    w->prefetch_base = w->resident;
    w->prefetch_epoch = g->freed_epoch; /* memory freed after this: worth a retry */
    w->prefetch_stuck = false;
    w->st.prefetches++;
    g->st.prefetches++;
    cs_debug("gpu %u: prefetch pid %u (%llu of %llu bytes fit)", g->index, w->client->info.pid,
             (unsigned long long)min64(need, free_now), (unsigned long long)need);
    p->ops.prefetch(p->ctx, w, w->prefetch_id, min64(need, free_now));
}

/* What one client should have pinned: its movable memory, but no more than
 * the GPU's overflow (footprints beyond capacity) and a quarter more for
 * segment granularity. At any moment only the overflow must be out, and
 * partial eviction takes about that much from one job per switch; pinning
 * every job's whole footprint (96 GB for two 48 GB jobs) starves the host
 * and made pinning 3-5 times slower on the H100 (0.3 -> 1.7 s/GiB). */
static uint64_t prepare_target(const struct sd_member *m, uint64_t over)
{
    return min64(sd_mem_movable(m), sd_add_sat(over, over / 4));
}

/* The node's pin-ahead budget (sd_config_pin_budget), the GPUs' memory
 * counted over the GPUs clients attached since the daemon started (their
 * mem_total is the node's figure: dispatch.c). Pinned memory cannot be reclaimed; each client's
 * target alone is bounded (the overflow), but n clients on one GPU each
 * pinning the overflow pinned 120 GB for 4 x 30 GB jobs on a 125 GiB host,
 * and the kernel OOM-killed one. The pool pins what pin-ahead would have
 * the clients hold, within this budget (sd_policy_pool_want), so the
 * budget, not pool_max_mb, is what bounds the pool: on the H200 shown as
 * an H100 (2026-12-02) a pool allowed 80 GiB stopped at 62.9 while the
 * budget was half of 125 GiB. A pool_max_mb above a pin_budget_mb that is
 * set is refused (sd_config_check). */
static uint64_t pin_budget(const struct sd_policy *p)
{
    uint64_t gpus = 0, reserve = (uint64_t)p->cfg->mem_reserve_mb << 20;
    for (size_t i = 0; i < p->ngpu; i++)
        gpus = sd_add_sat(gpus, sub0(p->gpu[i]->mem_total, reserve));
    return sd_config_pin_budget(p->cfg, cs_host_mem_total(), gpus);
}

/* What one member holds pinned for swapping. A client that reports it
 * (PINNED) is taken at its word, which includes backing kept for resident
 * memory (CUSHARE_PIN_KEEP, invisible otherwise: four jobs keeping 16 GB
 * each were 64 GB the budget did not see); a PREPARE still in flight may
 * raise it to the bytes asked. For an older client: its swapped bytes and
 * what it pinned ahead (or was asked to). */
static uint64_t member_pinned(const struct sd_member *m)
{
    uint64_t ahead = m->prep_covered;
    if (m->prep_id && m->prep_asked > ahead)
        ahead = m->prep_asked;
    uint64_t est = sd_add_sat(m->swapped, ahead);
    if (!m->pinned_known)
        return est;
    uint64_t held = m->pinned > m->swapped ? m->pinned : m->swapped;
    return m->prep_id && est > held ? est : held;
}

static uint64_t pinned_estimate(const struct sd_policy *p)
{
    uint64_t s = 0;
    for (size_t i = 0; i < p->ngpu; i++)
        for (size_t j = 0; j < p->gpu[i]->n; j++)
            s = sd_add_sat(s, member_pinned(p->gpu[i]->m[j]));
    return s;
}

int sd_policy_pinned(struct sd_policy *p, struct sd_client *c, const struct cs_msg_pinned *m,
                     uint64_t now, const char **why)
{
    if (!c->info.pin) {
        *why = "PINNED from a client that did not announce CS_HELLO_PIN";
        return SD_EPROTO;
    }
    struct sd_member *mb = c->slot[m->slot];
    if (!mb) {
        *why = "PINNED for a slot that is not attached";
        return SD_EPROTO;
    }
    /* More backing than when it last answered a GIVEBACK short (kept
     * backing, say): it may have pieces to give again. */
    if (!mb->pinned_known || m->bytes > mb->pinned)
        mb->gb_dry = false;
    mb->pinned_known = true;
    mb->pinned = m->bytes;
    /* Backing let go (lent pieces go back to the pool after each grant,
     * kept backing is dropped when the host runs short) no longer covers
     * what a PREPARE once did: the next plan asks again. Not while one is
     * out: its answer says what it covered. */
    if (!mb->prep_id)
        mb->prep_covered = min64(mb->prep_covered, sub0(m->bytes, mb->swapped));
    sd_gpu_reschedule(p, mb->gpu, now);
    return SD_OK;
}

/* g's members, furthest from running first (the first to be evicted get
 * their backing first); NULL on allocation failure. */
static struct sd_member **by_eviction_order(const struct sd_gpu *g)
{
    struct sd_member **v = malloc(g->n * sizeof *v);
    if (!v)
        return NULL;
    for (size_t i = 0; i < g->n; i++) {
        size_t j = i;
        for (; j > 0 && sd_mem_evict_before(g->m[i], v[j - 1]); j--)
            v[j] = v[j - 1];
        v[j] = g->m[i];
    }
    return v;
}

/* Pinning is one resource per node: the driver pins for one process at a
 * time (cs_pincontend on an H100: 4-5 GB/s in all whether 1 or 4 processes
 * pin at once), so PREPAREs pinning side by side all finish late, and an
 * eviction someone waits for that must pin (its memory had no backing yet)
 * shares the host with them: on the H100 a 10 GiB room eviction took 4.8 s
 * beside two PREPAREs. So: one PREPARE at a time on the node, none while an
 * EVICT or a revoke's swap-out is outstanding: a move is for a switch that
 * is coming (a planned eviction is for the next holder, whose grant waits
 * for it once the holder's slice ends), and it needs the pool's pieces that
 * takeback.c asked back for it. On the H200 those came back while the
 * revoked holder drained, pin-ahead lent them to a waiter at once, and the
 * swap-out pinned 12 GiB of its own in 3.95 s. */
static bool node_pinning(const struct sd_policy *p)
{
    for (size_t i = 0; i < p->ngpu; i++)
        for (size_t j = 0; j < p->gpu[i]->n; j++) {
            const struct sd_member *m = p->gpu[i]->m[j];
            if (m->prep_id || m->evict_id || (m->state == CS_STATE_REVOKING && m->evict_bytes))
                return true;
        }
    return false;
}

/* What m has pinned for its resident memory: what a PREPARE covered, or
 * what it reports pinned beyond its swapped bytes, if more (kept backing,
 * or pinned ahead before the footprint last changed). */
uint64_t sd_mem_backing_covered(const struct sd_member *m)
{
    uint64_t have = m->prep_covered;
    if (m->pinned_known && sub0(m->pinned, m->swapped) > have)
        have = sub0(m->pinned, m->swapped);
    return have;
}

uint64_t sd_mem_backing_lack(const struct sd_member *m, uint64_t bytes)
{
    return sub0(min64(bytes, sd_mem_movable(m)), sd_mem_backing_covered(m));
}

bool sd_mem_pins_known(const struct sd_member *m)
{
    return m->pinned_known || m->client->info.pin;
}

/* Whether m is asked to pin ahead at all. */
static bool preparable(const struct sd_member *m)
{
    return !m->no_swap && !m->prep_off && m->state != CS_STATE_REVOKING &&
           !m->client->unresponsive;
}

/* The next PREPARE for m, or 0: what it should have pinned beyond what it
 * has (*have_out), in PREP_CHUNK steps, if the node's pinned bytes stay
 * within the budget. */
static uint64_t prepare_ask(const struct sd_member *m, uint64_t over, uint64_t budget,
                            uint64_t pinned, uint64_t *have_out)
{
    if (!preparable(m))
        return 0;
    uint64_t movable = prepare_target(m, over);
    uint64_t have = sd_mem_backing_covered(m);
    if (movable <= sd_add_sat(have, SD_MEM_SLACK))
        return 0;
    uint64_t ask = min64(movable - have, PREP_CHUNK);
    if (sd_add_sat(pinned, ask) > budget)
        return 0; /* over the node's budget: it pins when it must */
    *have_out = have;
    return ask;
}

static void send_prepare(struct sd_policy *p, struct sd_gpu *g, struct sd_member *m,
                         uint64_t have, uint64_t ask, uint64_t now)
{
    m->prep_id = ++p->next_evict_id;
    m->prep_ns = now;
    m->prep_covered = have;
    m->prep_asked = have + ask;
    m->st.prepares++;
    g->st.prepares++;
    /* What this asks is spoken for until the client borrows it or answers
     * (sd_takeback_lendable): nothing else planned meanwhile counts on it. */
    m->prep_due = p->pool_lends ? ask : 0;
    cs_debug("gpu %u: prepare pid %u: pin %llu bytes ahead", g->index, m->client->info.pid,
             (unsigned long long)ask);
    p->ops.prepare(p->ctx, m, m->prep_id, ask);
}

/* Where pin-ahead starts: past the GPU's capacity when each job pins its
 * own backing (pinning costs host memory and ~0.3 s/GiB: a node that never
 * oversubscribes should pay nothing), from nine tenths of it when the pool
 * lends (a borrow costs ~10 ms/GiB, and the pool pins for that threshold
 * anyway: sd_policy_pool_want), so that a GPU's first switch finds its
 * jobs' backing in place. */
static uint64_t prepare_from(const struct sd_policy *p, uint64_t cap)
{
    return p->pool_lends ? cap - cap / 10 : cap;
}

struct sd_member *sd_next_holder(const struct sd_gpu *g)
{
    return g->draining ? NULL : g->share_pending ? g->share_pending : sd_best_waiter(g);
}

/* g's footprints as they are expected to be: each member at the footprint
 * it is planned at (sd_mem_expected: a job waiting for its first lease, or
 * in its first SD_GROW_NS of it, at what it is expected to grow to). Pin-ahead
 * and the pool plan with it, so that a GPU's first switch finds its backing
 * in place. On the H200 shown as an H100 (2026-12-02, session 17) the pair
 * of 45 GB jobs' first switch moved 14 GB of the first holder out for the
 * second's growth, and nothing had been pinned ahead for it (what the jobs
 * had allocated, 65 of 82 GB, was below nine tenths): the eviction borrowed
 * its backing on the spot, 15 GB in 328-349 ms (43-46 GB/s, five runs) with
 * the GPU idle; planned with the growth, 276 and 283 ms (53-54 GB/s, two
 * runs), and 4 x 30 GB jobs pinned none of their own (oversubscription.md).
 * A wrong guess (a job that does not grow) lends pieces for a move that
 * never comes: they go back at the borrower's next grant (its trim), when
 * the pool asks for them (GIVEBACK) or at its exit, as any pin-ahead's do. */
static uint64_t expected_footprint(const struct sd_gpu *g)
{
    uint64_t s = 0;
    for (size_t i = 0; i < g->n; i++)
        s = sd_add_sat(s, sd_mem_expected(g, g->m[i]));
    return s;
}

/* What g's holders lack in backing for the moves the next switch would
 * ask of them now: the next holder's shortfall at its expected footprint
 * (policy.c asks the leaving holders first for what it has allocated, and
 * mem.c the rest of them, then third parties, for its growth), each for
 * what it can move, less what it has pinned. */
static uint64_t holders_uncovered(const struct sd_policy *p, const struct sd_gpu *g)
{
    const struct sd_member *w = sd_next_holder(g);
    uint64_t need = w ? sd_mem_shortfall(p, g, w) : 0, lack = 0;
    for (size_t i = 0; need && i < g->n; i++) {
        const struct sd_member *h = g->m[i];
        if (sd_is_holder(h) && preparable(h))
            lack = sd_add_sat(lack, sd_mem_backing_lack(h, need));
    }
    return lack;
}

/* What waiters' pin-ahead leaves in the node's pool: what every GPU's
 * holders lack (holders_uncovered). A holder's revoke swap-out is on the
 * critical path (the next holder waits for it), a waiter's planned
 * eviction is not; on the H200 three waiters' targets took all the pool
 * had, and a holder revoked at its end for 615 MiB pinned its own backing
 * for 0.10-0.19 s between the two jobs (oversubscription.md, 2026-11-30). */
static uint64_t pool_kept_for_holders(const struct sd_policy *p)
{
    uint64_t keep = 0;
    for (size_t i = 0; i < p->ngpu; i++) {
        uint64_t cap = sd_gpu_capacity(p, p->gpu[i]);
        if (cap && expected_footprint(p->gpu[i]) > cap)
            keep = sd_add_sat(keep, holders_uncovered(p, p->gpu[i]));
    }
    return keep;
}

/* With prepare_holder_lead_ms, whether holder m's pin-ahead waits: lent
 * from the pool at once, its revoke's backing sits behind resident memory
 * for the whole slice. On the H200 a new holder was lent 17 GiB 0.3-0.7 s
 * after its grant, for a revoke 30 s away, and 0.3 s later the victim of
 * that holder's own ROOM lacked 2.95 GiB and pinned them itself (0.98 s);
 * asking the holder for them cannot help, its hook holds the segment lock
 * while it waits for the room (takeback.c). So the holder is lent from
 * `lead` before its slice ends, and the pieces stay in the pool meanwhile,
 * kept from the waiters' pin-ahead (pool_kept_for_holders) and lent to the
 * moves its ROOMs order (no PREPARE goes out while those are under way:
 * node_pinning). A holder waiting for room has its slice paused, so its
 * end moves later (room.c). At once when it is idle: an idle revoke may
 * come at any moment. The cost: a revoke before the slice's end (idle,
 * preempt) borrows its backing then. */
static bool holder_prepares_later(const struct sd_policy *p, struct sd_gpu *g,
                                  const struct sd_member *m, uint64_t now)
{
    uint64_t lead = (uint64_t)p->cfg->prepare_holder_lead_ms * SD_MS;
    if (!lead || !p->pool_lends || m->state != CS_STATE_HELD || m->idle)
        return false;
    uint64_t end = sd_add_sat(m->slice_ns, sd_gpu_quantum_ns(p, g));
    if (sd_add_sat(now, lead) >= end)
        return false;
    sd_gpu_want_at(g, end - lead);
    return true;
}

static void plan_prepare(struct sd_policy *p, struct sd_gpu *g, uint64_t cap, uint64_t now)
{
    uint64_t footprint = expected_footprint(g), from = prepare_from(p, cap);
    if (!p->ops.prepare || footprint <= from || node_pinning(p))
        return;
    uint64_t over = footprint - from;
    uint64_t budget = pin_budget(p), pinned = pinned_estimate(p);
    uint64_t keep = p->pool_lends ? pool_kept_for_holders(p) : 0;
    uint64_t lendable = sd_takeback_lendable(p);
    struct sd_member **order = by_eviction_order(g);
    if (!order)
        return; /* the next decision retries */
    for (size_t i = 0; i < g->n; i++) {
        struct sd_member *m = order[i];
        if (holder_prepares_later(p, g, m, now))
            continue;
        uint64_t have = 0, ask = prepare_ask(m, over, budget, pinned, &have);
        if (p->pool_lends)
            ask = min64(ask, sd_is_holder(m) ? lendable : sub0(lendable, keep));
        if (!ask)
            continue;
        /* A footprint that keeps changing is not chased more than once a
         * second; the next chunk of a target is asked at once. */
        if (!m->prep_more && m->prep_ns && now < m->prep_ns + PREP_INTERVAL_NS) {
            sd_gpu_want_at(g, m->prep_ns + PREP_INTERVAL_NS);
            continue;
        }
        send_prepare(p, g, m, have, ask, now);
        break;
    }
    free(order);
}

/* What the node's pool should hold pinned now (issue 20): what pin-ahead
 * would have the clients hold, counted before anyone asks, so that the
 * pool is warm by the first switch: per GPU whose footprints reach past
 * nine tenths of its capacity, each member's prepare target against the
 * overflow of a GPU a tenth smaller, within the pin budget. Nothing on a
 * node far from oversubscription. */
uint64_t sd_policy_pool_want(const struct sd_policy *p)
{
    uint64_t want = 0;
    for (size_t i = 0; i < p->ngpu; i++) {
        const struct sd_gpu *g = p->gpu[i];
        uint64_t cap = sd_gpu_capacity(p, g), near = cap - cap / 10;
        uint64_t footprint = expected_footprint(g);
        if (!cap || footprint <= near)
            continue;
        for (size_t j = 0; j < g->n; j++)
            want = sd_add_sat(want, prepare_target(g->m[j], footprint - near));
    }
    return min64(want, pin_budget(p));
}

/* When a holder's restore, begun at its grant, is overdue: timed like an
 * EVICT of its footprint, the most the restore can move, and a figure that
 * stays put while the restore's USAGEs bring `swapped` down. The planner's
 * wait for RESTORED (usage_ends_restore) and the pool's hold for the
 * restore (moves_of) both use it: one restore, one bound. */
static uint64_t restore_deadline(const struct sd_policy *p, const struct sd_member *m)
{
    return sd_answer_deadline(p, m->grant_ns, m->footprint);
}

/* The answer deadline of each move m was asked for and has not answered
 * (0 where none), the first MOVES_BACKED of them those that take in swap
 * backing: an EVICT, a REVOKE's swap-out; then a PREFETCH and a holder's
 * restore: a PREFETCH timed like an EVICT of its bytes, a restore by
 * restore_deadline. */
#define MOVES 4
#define MOVES_BACKED 2
static void moves_of(const struct sd_policy *p, const struct sd_member *m, uint64_t d[MOVES])
{
    bool revoking = m->state == CS_STATE_REVOKING && m->evict_bytes;
    d[0] = m->evict_id ? sd_answer_deadline(p, m->evict_ns, m->evict_bytes) : 0;
    d[1] = revoking ? sd_answer_deadline(p, m->revoke_ns, m->evict_bytes) : 0;
    d[2] = m->prefetch_id ? sd_answer_deadline(p, m->prefetch_ns, m->prefetch_bytes) : 0;
    d[3] = sd_is_holder(m) && m->restoring ? restore_deadline(p, m) : 0;
}

/* Why the pool waits (issue 20): on the H200 (driver 580), a client mapping
 * 16 GiB of lent 64 MiB pieces took 0.2 s alone and 8.1-10.3 s while the
 * pool pinned beside it (bench/swap/cs_pinpar.c --map): each import and map
 * waits for the piece being pinned, 30-40 ms. A cold pool turned a 16 GB
 * eviction into 10 s (oversubscription.md, 2026-11-29). Pinning itself does
 * not go faster with threads, so it yields to the switches' critical path:
 * to restores always, and to swap-outs while the pool has pieces to lend
 * them (an empty pool pins for them: they would pin their own, serialized
 * with it, anyway). An EVICT PREPARE is no move: pin-ahead is background
 * work like the pool's own (holding for it, the pool pinned a piece per
 * PREPARE and grew no further). Only the daemon's own requests count, each
 * until its deadline, none of a client found unresponsive: a client cannot
 * hold the pool's growth back longer than an honest move takes. */
bool sd_policy_moving(const struct sd_policy *p, uint64_t now, uint64_t *until)
{
    bool moving = false;
    *until = 0;
    for (size_t i = 0; i < p->ngpu; i++)
        for (size_t j = 0; j < p->gpu[i]->n; j++) {
            const struct sd_member *m = p->gpu[i]->m[j];
            uint64_t d[MOVES];
            if (m->client->unresponsive)
                continue;
            moves_of(p, m, d);
            for (size_t k = p->pool_free ? 0 : MOVES_BACKED; k < MOVES; k++) {
                if (!d[k] || now >= d[k])
                    continue;
                moving = true;
                if (!*until || d[k] < *until)
                    *until = d[k];
            }
        }
    return moving;
}

void sd_policy_pool_changed(struct sd_policy *p, uint64_t free_bytes, uint64_t now)
{
    bool more = free_bytes > p->pool_free;
    p->pool_free = free_bytes;
    for (size_t i = 0; more && i < p->ngpu; i++)
        sd_gpu_reschedule(p, p->gpu[i], now);
}

void sd_mem_plan(struct sd_policy *p, struct sd_gpu *g, uint64_t now)
{
    growth_check(g, now);
    uint64_t cap = sd_gpu_capacity(p, g);
    if (!cap || g->restoring)
        return;
    plan_prepare(p, g, cap, now);
    struct sd_member *w = sd_next_holder(g);
    if (!w)
        return;
    bool running = false, leaving = false;
    for (size_t i = 0; i < g->n; i++) {
        const struct sd_member *h = g->m[i];
        running |= sd_is_holder(h);
        leaving |= h->state == CS_STATE_REVOKING;
        /* A holder still restoring (its grant's swap-in) has the critical
         * path: nothing else is started until it runs. A client's prefetch
         * takes whatever the driver has free, not what the model set aside
         * for it, so the two would also race for the same bytes. */
        if (sd_is_holder(h) && h->restoring)
            return;
    }
    /* In shared mode w may wait for holders that stay (a higher class, a
     * slice not over): moving memory for it would only churn, until it
     * fits beside them or one of them is on its way out. In exclusive mode
     * the holder's slice ends for w anyway.
     * Mixed mode beside a holder of w's own class side (the default with
     * jobs of one class) is between the two: the holder's slice ends for
     * w, but evicting third parties for w while it runs gained nothing on
     * an H200 (the holder's drain covers those moves) and raced the
     * holder's own allocations (bench/results/oversubscription.md, "Mixed
     * mode plans the next holder only at the revoke"). What the drain does
     * not cover is the switch after a holder that ends its work (no drain):
     * w then restored on the critical path, 0.39-0.49 s for 16-20 GB,
     * although that memory had been free for seconds. So w's memory comes
     * in ahead into what is free, less a margin (SAME_SIDE_KEEP_DIV) left
     * for the holder, which keeps running and may still grow: its growth
     * must find free memory, not ROOM evicting what was just prefetched. */
    if (sd_mode_coruns(p->cfg) && !leaving && !sd_fits_beside_holders(p, g, w)) {
        if (running && !sd_corun_with_holders(p, g, w))
            plan_prefetch(p, g, w, cap, cap / SAME_SIDE_KEEP_DIV, now);
        return;
    }
    if (running)
        evict_third_parties(p, g, w, sd_mem_shortfall(p, g, w), now);
    plan_prefetch(p, g, w, cap, 0, now);
}

/* ---- answer deadlines ---------------------------------------------------------------- */

/* When a request of `bytes` sent at `sent` is overdue: answer_timeout_ms, and
 * the bytes at SD_ANSWER_MIN_BPS on top, so that an honest client moving a
 * large working set whose backing must be pinned first (0.3-1.7 s/GiB on
 * the H100) is never taken for a silent one. */
uint64_t sd_answer_deadline(const struct sd_policy *p, uint64_t sent, uint64_t bytes)
{
    uint64_t t = sd_add_sat(sent, (uint64_t)p->cfg->answer_timeout_ms * SD_MS);
    return sd_add_sat(t, bytes / SD_ANSWER_MIN_BPS * 1000000000ull +
                             bytes % SD_ANSWER_MIN_BPS * 1000000000ull / SD_ANSWER_MIN_BPS);
}

/* The first of m's EVICT, PREFETCH and EVICT PREPARE that is overdue at now
 * (its name), or NULL; *next: the earliest deadline still ahead. */
static const char *overdue(const struct sd_policy *p, const struct sd_member *m, uint64_t now,
                           uint64_t *next)
{
    struct { bool out; uint64_t sent, bytes; const char *what; } rq[] = {
        {m->prep_id != 0, m->prep_ns, sub0(m->prep_asked, m->prep_covered), "EVICT PREPARE"},
        {m->evict_id != 0, m->evict_ns, m->evict_bytes, "EVICT"},
        {m->prefetch_id != 0, m->prefetch_ns, m->prefetch_bytes, "PREFETCH"},
    };
    for (size_t i = 0; i < sizeof rq / sizeof rq[0]; i++) {
        if (!rq[i].out)
            continue;
        uint64_t d = sd_answer_deadline(p, rq[i].sent, rq[i].bytes);
        if (now >= d)
            return rq[i].what;
        if (!*next || d < *next)
            *next = d;
    }
    return NULL;
}

/* An EVICT PREPARE past its deadline. Nobody waits for pin-ahead, so it
 * does not make the client unresponsive: on two H200s an honest DDP rank's
 * borrow waited behind the daemon's own pool pinning (a cold pool holds the
 * driver's lock that imports need) and was demoted for it, and its job
 * then crawled. But the node pins one PREPARE at a time, so this one is
 * forgotten and its member asked no more: it pins when it swaps, and its
 * late answer is ignored. */
static void prepare_missed(struct sd_gpu *g, struct sd_member *m)
{
    m->prep_id = 0;
    m->prep_off = true;
    cs_warn("gpu %u: %s (pid %u) did not answer EVICT PREPARE in time: no more pin-ahead for "
            "it on this GPU (it pins its backing when it swaps)", g->index,
            m->client->info.name, m->client->info.pid);
}

void sd_mem_check_answers(struct sd_policy *p, struct sd_gpu *g, uint64_t now)
{
    for (size_t i = 0; i < g->n; i++) {
        struct sd_member *m = g->m[i];
        uint64_t next = 0;
        if (m->prep_id &&
            now >= sd_answer_deadline(p, m->prep_ns, sub0(m->prep_asked, m->prep_covered)))
            prepare_missed(g, m);
        const char *what = overdue(p, m, now, &next);
        if (what) {
            char why[64];
            snprintf(why, sizeof why, "did not answer %s in time", what);
            sd_unresponsive(p, m->client, why, now);
        } else {
            sd_gpu_want_at(g, next);
        }
    }
}

/* An unresponsive member: what it was asked is forgotten (nobody waits
 * for it), and what it holds counts as resident where it is. */
void sd_mem_forget_requests(struct sd_policy *p, struct sd_member *m, uint64_t now)
{
    if (m->evict_id) {
        m->evict_id = 0;
        sd_room_victim_lost(p, m, now);
    }
    if (m->prefetch_id && m->footprint > m->resident)
        m->resident = sd_add_sat(m->resident, min64(m->prefetch_bytes,
                                                    m->footprint - m->resident));
    m->prefetch_id = 0;
    m->prep_id = 0;
    sd_takeback_forget(p, m);
    m->gb_short = 0;
    m->evict_bytes = 0;
    m->evict_seen = 0;
    m->room_bytes = 0;
}

/* ---- reports ------------------------------------------------------------------------ */

/* Whether a USAGE showing holder m's memory all resident ends its restore.
 * Not for a client that sends RESTORED, until the RESTORED of its current
 * lease: the USAGE may be older than the grant's restore (sent before an
 * older revoke's swap-out finished: after a daemon restart it cleared the
 * flag and a prefetch took the room the restore then needed; the lease
 * model's finding 6). Yes again once the restore is overdue (its answer
 * deadline from the grant): a client that says RESTORED and never sends
 * it holds prefetching up on its GPU no longer than an honest restore. */
static bool usage_ends_restore(const struct sd_policy *p, const struct sd_member *m,
                               uint64_t now)
{
    if (!sd_is_holder(m) || !m->reports_restore || m->lease_restored)
        return true;
    return now >= restore_deadline(p, m);
}

void sd_mem_on_usage(const struct sd_policy *p, struct sd_member *m, const struct cs_msg_usage *u,
                     uint64_t now)
{
    struct sd_gpu *g = m->gpu;
    /* The allocation the room was for is placed once the client's memory
     * grows; a USAGE about something else leaves it counted. (A RELEASE
     * ends it too: policy.c.) */
    if (!m->room_active && (u->resident > m->resident || u->footprint != m->footprint))
        m->room_bytes = 0;
    if (u->resident < m->resident) {
        g->freed_epoch++;
        if (m->evict_bytes) /* part of the eviction under way, most likely */
            m->evict_seen = sd_add_sat(m->evict_seen, m->resident - u->resident);
    }
    if (u->resident != m->resident || u->footprint != m->footprint)
        m->evict_stuck = false;
    if (u->footprint != m->footprint)
        m->prep_covered = 0; /* new allocations have no host backing yet */
    /* A holder's memory is all resident but while its grant restores it
     * (allocations made while holding are placed at once). */
    if (sd_add_sat(u->resident, SD_MEM_SLACK) >= u->footprint) {
        if (usage_ends_restore(p, m, now))
            m->restoring = false;
        m->restore_blocked = false; /* whatever it restored is all back */
    } else if (m->state == CS_STATE_HELD) {
        m->restoring = true;
    }
}

/* moved bytes left the GPU: what a USAGE has not shown yet comes off. The
 * backing pinned ahead went with them (the hook picks backed segments
 * first, swap.c evict_cost): it backs swapped memory now, not the rest. PINNED
 * does not say so, the backing held did not change; counted again, the
 * next move's takeback asked too little (on the H200, 4.8 GiB short for a
 * room eviction 60 ms after a revoke's swap-out). */
static void moved_out(struct sd_gpu *g, struct sd_member *m, uint64_t moved, uint64_t ns)
{
    uint64_t off = min64(sub0(moved, m->evict_seen), m->resident);
    m->resident -= off;
    m->swapped = sd_add_sat(m->swapped, off);
    m->prep_covered = sub0(m->prep_covered, moved);
    m->evict_bytes = 0;
    m->evict_seen = 0;
    if (!moved)
        return;
    g->freed_epoch++;
    m->st.swap_out_bytes = sd_add_sat(m->st.swap_out_bytes, moved);
    m->st.swap_ns += ns;
    g->st.swap_out_bytes = sd_add_sat(g->st.swap_out_bytes, moved);
    sd_hist_add(&g->st.swap_out, ns);
}

void sd_mem_on_release(struct sd_gpu *g, struct sd_member *m, const struct cs_msg_release *r,
                       bool held)
{
    if (!m->room_active)
        m->room_bytes = 0; /* not holding: what was not placed waits for its next grant */
    if (held) {
        /* Its grant made everything resident before the gate opened (a
         * revoke that overtakes a grant waits for its restore), so what it
         * keeps is its footprint less what it just swapped out, whatever
         * USAGE last said. */
        if (m->footprint > m->resident)
            m->resident = m->footprint;
        m->swapped = 0;
        m->evict_seen = 0;
        m->restoring = false;
    }
    moved_out(g, m, r->swapped_bytes, r->swap_ns);
}

/* An EVICTED answering m's outstanding PREPARE. */
static void prepared(struct sd_member *m, const struct cs_msg_evicted *e)
{
    m->prep_id = 0;
    m->prep_due = 0;
    if (e->status == 0 && e->bytes)
        m->gb_dry = false; /* lent pieces again: it may be asked for them */
    if (e->status == CUDA_ERROR_NOT_SUPPORTED)
        m->no_swap = true;
    /* A chunk pinned in full: the rest of the target follows at once.
     * Short, or failed for host memory: not asked again until the
     * footprint changes. */
    m->prep_more = e->status == 0 && e->bytes >= m->prep_asked - m->prep_covered;
    if (m->prep_asked > m->prep_covered)
        m->prep_covered = m->prep_asked;
}

uint64_t sd_mem_on_evicted(struct sd_member *m, const struct cs_msg_evicted *e)
{
    uint64_t asked = m->evict_bytes;
    m->evict_id = 0;
    if (e->status == CUDA_ERROR_NOT_SUPPORTED)
        m->no_swap = true;
    /* A swap is all-or-nothing per allocation: what the client says it
     * moved did move, even when it stopped early. */
    moved_out(m->gpu, m, e->bytes, e->ns);
    if (e->bytes < asked)
        m->evict_stuck = true;
    return e->bytes;
}

int sd_mem_evicted_prepare(struct sd_member *m, const struct cs_msg_evicted *e)
{
    if (!m->prep_id || e->request_id != m->prep_id)
        return 0;
    prepared(m, e);
    return 1;
}

static void count_in(struct sd_gpu *g, struct sd_member *m, uint64_t bytes, uint64_t ns)
{
    m->st.swap_in_ns += ns;
    if (!bytes)
        return;
    m->st.swap_in_bytes = sd_add_sat(m->st.swap_in_bytes, bytes);
    g->st.swap_in_bytes = sd_add_sat(g->st.swap_in_bytes, bytes);
    sd_hist_add(&g->st.swap_in, ns);
}

int sd_policy_restored(struct sd_policy *p, struct sd_client *c, const struct cs_msg_restored *r,
                       uint64_t now, const char **why)
{
    struct sd_member *m = r->slot < CS_MAX_DEVICES ? c->slot[r->slot] : NULL;
    if (!m) {
        *why = "slot not attached";
        return SD_EPROTO;
    }
    struct sd_gpu *g = m->gpu;
    count_in(g, m, r->bytes, r->ns);
    if (sd_is_holder(m) && r->lease_id == m->lease_id) {
        /* The gate opened only once everything was resident. */
        if (m->footprint > m->resident)
            m->resident = m->footprint;
        m->swapped = 0;
        m->evict_stuck = false;
        m->restoring = false;
        m->lease_restored = true;
        sd_slice_gate_opened(m, now);
    }
    m->reports_restore = true;
    sd_switch_restored(g, r->lease_id, r->ns);
    sd_gpu_reschedule(p, g, now);
    return SD_OK;
}

int sd_policy_prefetched(struct sd_policy *p, struct sd_client *c,
                         const struct cs_msg_prefetched *r, uint64_t now, const char **why)
{
    struct sd_member *m = r->slot < CS_MAX_DEVICES ? c->slot[r->slot] : NULL;
    if (!m) {
        *why = "slot not attached";
        return SD_EPROTO;
    }
    /* One that crossed a reconnect matches nothing here. */
    if (!m->prefetch_id || r->request_id != m->prefetch_id)
        return SD_OK;
    struct sd_gpu *g = m->gpu;
    m->prefetch_id = 0;
    count_in(g, m, r->bytes, r->ns);
    g->st.prefetch_bytes = sd_add_sat(g->st.prefetch_bytes, r->bytes);
    /* Status 0 says that what fit in the bytes offered was placed, not
     * that everything is back: offered less than it missed (what was
     * free), a prefetch brings back whole segments within the offer, often
     * fewer bytes. Taken as all back, a member offered 4 MiB that brought
     * none of its 16 MiB segments back was counted resident until its next
     * USAGE, which an unchanged client does not send: the next holder's
     * revoke and room were planned around memory that was not there
     * (tests/e2e/swap_paced.sh). One that brought back less than offered
     * is not offered again until memory is freed. */
    if (r->status == 0 && m->prefetch_bytes >= sub0(m->footprint, m->prefetch_base)) {
        if (m->footprint > m->resident)
            m->resident = m->footprint;
        m->swapped = 0;
    } else {
        uint64_t r2 = min64(sd_add_sat(m->prefetch_base, r->bytes), m->footprint);
        if (r2 > m->resident)
            m->resident = r2;
        m->swapped = sub0(m->swapped, r->bytes);
        m->prefetch_stuck = r->status != 0 || r->bytes < m->prefetch_bytes;
        if (r->status == CUDA_ERROR_NOT_SUPPORTED)
            m->no_swap = true;
    }
    m->evict_stuck = false;
    sd_gpu_reschedule(p, g, now);
    return SD_OK;
}
