/* policy.c: see policy.h for the rules. This file is the only place that
 * changes lease state, so every transition is one of a few small functions:
 * start_wait, grant, revoke, end_lease. Each GPU is re-evaluated by
 * gpu_schedule after any event that touches it; gpu_schedule is idempotent,
 * so calling it more often than needed is harmless. */
#include "sched/policy.h"
#include "sched/policy_int.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"

#define MS 1000000ull

static void gpu_schedule(struct sd_policy *p, struct sd_gpu *g, uint64_t now);

/* ---- small helpers -------------------------------------------------------- */

static bool is_holder(const struct sd_member *m)
{
    return m->state == CS_STATE_HELD || m->state == CS_STATE_REVOKING;
}

bool sd_is_holder(const struct sd_member *m)
{
    return is_holder(m);
}

static bool is_active(const struct sd_member *m)
{
    return m->state != CS_STATE_IDLE;
}

static void want_at(struct sd_gpu *g, uint64_t t)
{
    if (t && (!g->deadline || t < g->deadline))
        g->deadline = t;
}

void sd_gpu_want_at(struct sd_gpu *g, uint64_t t)
{
    want_at(g, t);
}

static uint64_t sub0(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

/* held_ns * SD_VT_SCALE / weight without overflow for any realistic hold. */
static uint64_t vt_delta(uint64_t held_ns, uint32_t weight)
{
    uint64_t w = weight ? weight : 1;
    return held_ns / w * SD_VT_SCALE + held_ns % w * SD_VT_SCALE / w;
}

static uint64_t capacity(const struct sd_policy *p, const struct sd_gpu *g)
{
    return sd_gpu_capacity(p, g);
}

static const char *client_name(const struct sd_member *m)
{
    return m->client->info.name[0] ? m->client->info.name : "?";
}

/* Busy/idle accounting: close the interval that ran under the old flag,
 * open one under the current flag. Call after every holder change. */
static void gpu_account(struct sd_gpu *g, uint64_t now)
{
    uint64_t d = sub0(now, g->acct_ns);
    if (g->busy)
        g->st.busy_ns += d;
    else
        g->st.idle_ns += d;
    g->acct_ns = now;
    g->busy = sd_gpu_count(g, CS_STATE_HELD) + sd_gpu_count(g, CS_STATE_REVOKING) > 0;
}

static void holders_changed(struct sd_policy *p)
{
    if (p->ops.holders_changed)
        p->ops.holders_changed(p->ctx);
}

/* ---- vtime ----------------------------------------------------------------- */

/* The time to charge holder m since its last settlement (vt_ns): all of it
 * while it works, and its idle time only while someone waits for the GPU.
 * A job that keeps the lease while nobody else wants the GPU (sleeping
 * between phases) costs nobody anything, and charging it would make the
 * job pay later with a starved turn as long as its idle hold (on the H200,
 * a ResNet-50 job that held 10 s idle before a common start then got 1 step
 * in the next 10 s while its peer ran alone: issue 21). But an idle holder
 * that a waiter waits for (its grace before an idle revoke: up to
 * idle_release_ms less its report on a GPU whose jobs fit) keeps the GPU
 * from someone, and a client that said idle while it went on working
 * would otherwise run that long uncharged at every turn (with the report
 * at 50 ms and the revoke at 250: 0.57 of a GPU beside an honest busy
 * peer, test_idle_while_waited_for_is_charged). */
static uint64_t charged_ns(const struct sd_member *m, uint64_t now)
{
    if (!m->idle || m->idle_ns >= now)
        return sub0(now, m->vt_ns);
    uint64_t w = m->gpu->waited_since;
    uint64_t from = m->idle_ns > m->vt_ns ? m->idle_ns : m->vt_ns;
    if (w > from)
        from = w;
    return sub0(m->idle_ns, m->vt_ns) + (w ? sub0(now, from) : 0);
}

/* Charges the time held since the last settlement to vtime, at the
 * holder's current weight. */
static void settle_vtime(struct sd_member *m, uint64_t now)
{
    m->vtime += vt_delta(charged_ns(m, now), m->client->info.weight);
    if (now > m->vt_ns)
        m->vt_ns = now;
}

/* vtime as if settled now: what a holder is compared with. */
static uint64_t eff_vtime(const struct sd_member *m, uint64_t now)
{
    if (!is_holder(m))
        return m->vtime;
    return m->vtime + vt_delta(charged_ns(m, now), m->client->info.weight);
}

/* g->waited_since follows whether anyone waits for g. At each change its
 * idle holders are settled first: the time before it is charged by the
 * rule that held then. */
static void track_waiting(struct sd_gpu *g, uint64_t now)
{
    bool waits = false;
    for (size_t i = 0; i < g->n && !waits; i++)
        waits = g->m[i]->state == CS_STATE_WAITING;
    if (waits == (g->waited_since != 0))
        return;
    for (size_t i = 0; i < g->n; i++)
        if (is_holder(g->m[i]) && g->m[i]->idle)
            settle_vtime(g->m[i], now);
    g->waited_since = waits ? (now ? now : 1) : 0;
}

/* The class minimum only moves forward (like CFS's min_vruntime): it is the
 * least vtime among the class's active members, or stays put when none is
 * active, so that a client that was away cannot come back below it. A
 * holder counts with its vtime as of now: nobody settles a holder alone on
 * the GPU (its time is charged at its lease's end, or when a slice is
 * renewed for a waiter), so its stored vtime is as old as its grant, and a
 * client placed there was owed the holder's whole solo run (a job alone
 * for ten minutes, then a newcomer: 0.63 of the next two minutes to the
 * newcomer, test_new_client_after_long_solo_hold). */
static void update_min_vtime(struct sd_gpu *g, uint64_t now)
{
    for (int c = 0; c < CS_PRIO_COUNT; c++) {
        bool any = false;
        uint64_t lo = UINT64_MAX;
        for (size_t i = 0; i < g->n; i++) {
            const struct sd_member *m = g->m[i];
            if (is_active(m) && (int)m->client->info.priority == c) {
                any = true;
                uint64_t v = eff_vtime(m, now);
                if (v < lo)
                    lo = v;
            }
        }
        if (any && lo > g->min_vtime[c])
            g->min_vtime[c] = lo;
    }
}

static void place_vtime(struct sd_member *m, uint64_t now)
{
    struct sd_gpu *g = m->gpu;
    update_min_vtime(g, now);
    uint64_t lo = g->min_vtime[m->client->info.priority];
    if (m->vtime < lo)
        m->vtime = lo;
}

static void hold_from(struct sd_member *m, uint64_t now)
{
    m->state = CS_STATE_HELD;
    m->grant_ns = m->slice_ns = m->vt_ns = now;
}

/* ---- transitions --------------------------------------------------------- */

/* A member that went idle moments ago (a busy client between its RELEASE
 * and its next ACQUIRE) keeps its vtime: it is still competing, and placing
 * it would erase the credit its weight earned. One that was away longer
 * than a quantum floor, or is new, is placed at the class minimum. The
 * credit a client can bank by short absences is thus bounded by what the
 * others consume in one floor. */
static void start_wait(const struct sd_policy *p, struct sd_member *m, uint64_t now)
{
    uint64_t away = sub0(now, m->idle_since);
    if (!m->idle_since || away > (uint64_t)p->cfg->quantum_floor_ms * MS)
        place_vtime(m, now);
    m->state = CS_STATE_WAITING;
    m->wait_since = now;
    m->want = false;
}

/* A lease ends (RELEASE, forced, disconnect): account it and leave the
 * member idle, or waiting again if it asked while being revoked. */
static void end_lease(struct sd_policy *p, struct sd_member *m, uint64_t now)
{
    struct sd_gpu *g = m->gpu;
    m->st.gpu_ns += sub0(now, m->grant_ns);
    settle_vtime(m, now);
    m->prev_lease_id = m->lease_id;
    m->had_lease = true;
    m->grow_until = 0;
    m->lease_id = 0;
    m->state = CS_STATE_IDLE;
    m->idle_since = now;
    m->idle = false;
    m->timeout_reported = false;
    m->restoring = false;
    gpu_account(g, now);
    if (m->want)
        start_wait(p, m, now);
    if (sd_gpu_count(g, CS_STATE_WAITING) > 0) {
        g->handover = true;
    } else {
        /* Nobody waits: the next grant is not a switch. */
        g->revoke_mark_ns = 0;
        g->sw_drain_ns = 0;
        g->handover = false;
    }
    holders_changed(p);
}

/* EWMA with weight 1/4: follows a change within a few switches but one
 * slow switch does not triple the quantum. */
uint64_t sd_ewma(uint64_t prev, uint64_t sample)
{
    return prev ? prev / 4 * 3 + (prev % 4 * 3 + sample % 4) / 4 + sample / 4 : sample;
}

/* A sample whose RESTORED never came counts as it is. */
static void switch_flush(struct sd_gpu *g)
{
    if (!g->sw_lease)
        return;
    sd_hist_add(&g->st.switch_cost, g->sw_sample_ns);
    g->sw_lease = 0;
}

/* The switch overhead: REVOKE -> GRANT minus the outgoing holder's drain
 * (its own queued GPU work, already charged to it), plus the new holder's
 * restore (GRANT -> gate open, from its RESTORED). What remains is swap-out,
 * restore and protocol gaps: the time the GPU does nobody's work. */
static void measure_switch(struct sd_gpu *g, const struct sd_member *w, uint64_t now)
{
    if (g->revoke_mark_ns || g->handover)
        g->st.switches++;
    switch_flush(g);
    /* A handover that waited out a deadline (an answer that never came)
     * measured the silent client, not what a switch costs. */
    if (g->revoke_mark_ns && g->sw_waited_out)
        sd_hist_add(&g->st.switch_latency, sub0(now, g->revoke_mark_ns));
    else if (g->revoke_mark_ns) {
        sd_hist_add(&g->st.switch_latency, sub0(now, g->revoke_mark_ns));
        uint64_t s = sub0(sub0(now, g->revoke_mark_ns), g->sw_drain_ns);
        g->sw_prev_ewma = g->switch_ewma_ns;
        g->sw_sample_ns = s;
        g->sw_lease = w->lease_id ? w->lease_id : UINT64_MAX;
        g->sw_sample_lease = g->sw_lease;
        g->switch_ewma_ns = sd_ewma(g->sw_prev_ewma, s);
    } else {
        g->sw_sample_lease = 0;
    }
    g->revoke_mark_ns = 0;
    g->sw_drain_ns = 0;
    g->sw_waited_out = false;
    g->handover = false;
}

void sd_switch_restored(struct sd_gpu *g, uint64_t lease_id, uint64_t ns)
{
    if (!g->sw_lease || g->sw_lease != lease_id)
        return;
    g->sw_sample_ns = sd_add_sat(g->sw_sample_ns, ns);
    g->switch_ewma_ns = sd_ewma(g->sw_prev_ewma, g->sw_sample_ns);
    cs_debug("gpu %u: switch overhead %.3f ms (restore %.3f ms), smoothed %.3f ms", g->index,
             (double)g->sw_sample_ns / 1e6, (double)ns / 1e6, (double)g->switch_ewma_ns / 1e6);
    switch_flush(g);
}

/* Room the holder waited for in the lease a switch gave it (its allocation
 * blocked while evictions made room): time in which the GPU did nobody's
 * work, as much as a swap-out before the grant, so it belongs to that
 * switch's sample. On the H100 a job granted on an oversubscribed GPU
 * asked for its room right after the grant and waited 0.2-0.4 s, while the
 * switch measured 0.3 ms: the quantum stayed at 4-6 s beside 8-13 s jobs,
 * and most were switched out once mid-run (bench/results/oversubscription.md,
 * issue 20). Not in the switch-cost histogram, which has the sample already. */
void sd_switch_room_waited(struct sd_gpu *g, const struct sd_member *m, uint64_t ns)
{
    if (!ns || !g->sw_sample_lease || g->sw_sample_lease != m->lease_id)
        return;
    g->sw_sample_ns = sd_add_sat(g->sw_sample_ns, ns);
    g->switch_ewma_ns = sd_ewma(g->sw_prev_ewma, g->sw_sample_ns);
    cs_debug("gpu %u: switch overhead %.3f ms with %.3f ms of room waited for, smoothed %.3f ms",
             g->index, (double)g->sw_sample_ns / 1e6, (double)ns / 1e6,
             (double)g->switch_ewma_ns / 1e6);
}

static void gang_align(const struct sd_policy *p, const struct sd_member *m, uint64_t now);
static void gang_slice_end(struct sd_policy *p, const struct sd_member *m, uint64_t now);

/* The grant's restore (GRANT until the gate opens) is not the holder's
 * slice. A slice that started at the grant ended, at the 100 ms quantum
 * floor of a GPU whose jobs were still allocating, while a first restore
 * of 0.1-0.3 s was under way: the job was revoked having run nothing, and
 * the swap-in and swap-out were for nothing (6 of 18 H200 runs; one such
 * job then waited 14 s for its next turn; bench/results/oversubscription.md).
 * A client that reports its restores (RESTORED) starts its slice when its
 * gate opens: until then the slice is taken to start a quantum after the
 * grant, and its RESTORED brings the start back to when it came
 * (sd_slice_gate_opened). A client that delays or never sends RESTORED
 * thus gains at most one quantum. (A ROOM answered first starts it then,
 * room.c: its gate is open.) One that does not report restores starts
 * its slice at the grant, as before. */
static void slice_after_restore(struct sd_member *m, uint64_t now, uint64_t q)
{
    if (m->reports_restore)
        m->slice_ns = sd_add_sat(now, q);
}

void sd_slice_gate_opened(struct sd_member *m, uint64_t now)
{
    if (m->slice_ns > now)
        m->slice_ns = now;
}

static void grant(struct sd_policy *p, struct sd_member *m, uint64_t now)
{
    struct sd_gpu *g = m->gpu;
    uint64_t waited = sub0(now, m->wait_since);
    m->st.wait_ns += waited;
    sd_hist_add(&m->st.lease_latency, waited);
    m->st.slices++;
    hold_from(m, now);
    m->lease_id = p->next_lease_id++;
    m->idle = false;
    m->want = false;
    m->evict_stuck = false;
    m->lease_restored = false;
    /* A first lease (not one resumed after a daemon restart): its job
     * allocates its working set now (mem.c, sd_mem_expected). */
    m->grow_until = !m->had_lease && !m->resumed ? now + SD_GROW_NS : 0;
    m->resumed = false;
    m->restore_blocked = false;
    /* A member that has not sent USAGE since it attached (a new job, or
     * any job right after a daemon restart) may have memory to restore
     * that the model does not know of yet: restoring until its RESTORED or
     * a USAGE says otherwise. Counted done at once, the planner sent the
     * next waiter a PREFETCH budgeted as if this one had nothing, which
     * raced its restore for the same bytes (docs/model.md, finding 5). A
     * client that reports its restores restores from every grant until
     * that lease's RESTORED: its resident figure may come from a USAGE sent
     * before an older revoke's swap-out finished (read while it held
     * nothing, after a daemon restart: the lease model's finding 6). */
    m->restoring = m->reports_restore || !m->usage_seen ||
                   m->footprint > sd_add_sat(m->resident, SD_MEM_SLACK);
    gang_align(p, m, now);
    sd_share_granted(p, g, m, now);
    measure_switch(g, m, now);
    gpu_account(g, now);
    uint64_t q = sd_gpu_quantum_ns(p, g);
    slice_after_restore(m, now, q);
    cs_debug("gpu %u: grant lease %llu to %s (pid %u) after %.3f ms", g->index,
             (unsigned long long)m->lease_id, client_name(m), m->client->info.pid,
             (double)waited / 1e6);
    sd_ts_update(p, m);
    p->ops.grant(p->ctx, m, (uint32_t)(q / MS));
    holders_changed(p);
}

/* A lease ends without a RELEASE (force_release): the client's gate closed
 * when it got the REVOKE, so the next holder does not overlap with its new
 * work, only with whatever it still has in flight. Its memory stays where
 * it is: all resident (its grant restored it; nothing says it moved). */
static void take_back(struct sd_policy *p, struct sd_member *m, uint64_t now)
{
    m->gpu->st.forced_releases++;
    m->st.forced++;
    m->timeout_reported = true;
    m->takeback_due = false;
    if (m->footprint > m->resident)
        m->resident = m->footprint;
    m->evict_bytes = 0;
    m->evict_seen = 0;
    end_lease(p, m, now);
}

/* How often a pending take-back looks whether the REVOKE was read. */
#define TAKEBACK_POLL_NS (5 * MS)

/* The lease of an unresponsive client, REVOKING, without waiting for its
 * answer: at once if it read the REVOKE (its gate is closed: the hook
 * closes it as the REVOKE arrives), if its process is stopped, or once
 * revoke_timeout_ms passed (a client that reads nothing for that long is
 * broken or hostile, and its gate protects no one else); else later (the
 * GPU's ticks). Taking it back as the REVOKE is sent would let the next
 * holder's gate open beside this one's, still open until its I/O thread
 * reads the REVOKE. */
static void take_back_when_read(struct sd_policy *p, struct sd_member *m, uint64_t now)
{
    bool read = !p->ops.delivered || p->ops.delivered(p->ctx, m);
    bool stopped = !read && p->ops.stopped && p->ops.stopped(p->ctx, m);
    if (read || stopped || now >= m->revoke_ns + (uint64_t)p->cfg->revoke_timeout_ms * MS) {
        take_back(p, m, now);
        return;
    }
    m->takeback_due = true;
    want_at(m->gpu, now + TAKEBACK_POLL_NS);
}

static void check_takebacks(struct sd_policy *p, struct sd_gpu *g, uint64_t now)
{
    for (size_t i = 0; i < g->n; i++) {
        struct sd_member *m = g->m[i];
        if (m->takeback_due && m->state == CS_STATE_REVOKING)
            take_back_when_read(p, m, now);
        else
            m->takeback_due = false;
    }
}

static void revoke(struct sd_policy *p, struct sd_member *m, uint32_t reason, uint64_t evict,
                   uint64_t now)
{
    struct sd_gpu *g = m->gpu;
    m->state = CS_STATE_REVOKING;
    m->revoke_ns = now;
    m->revoke_reason = reason;
    m->evict_bytes = evict;
    m->evict_seen = 0;
    m->timeout_reported = false;
    m->st.revokes++;
    if (reason == CS_REVOKE_PREEMPT)
        m->st.preemptions++;
    if (!g->revoke_mark_ns)
        g->revoke_mark_ns = now;
    want_at(g, now + (uint64_t)p->cfg->revoke_timeout_ms * MS);
    cs_debug("gpu %u: revoke lease %llu of %s (pid %u), reason %u", g->index,
             (unsigned long long)m->lease_id, client_name(m), m->client->info.pid, reason);
    cs_debug("gpu %u: lease %llu held %.0f ms, its slice %.0f ms (quantum %.0f ms; footprints "
             "%llu of %llu MiB, switch %.1f ms)", g->index, (unsigned long long)m->lease_id,
             (double)sub0(now, m->grant_ns) / 1e6, (double)sub0(now, m->slice_ns) / 1e6,
             (double)sd_gpu_quantum_ns(p, g) / 1e6, (unsigned long long)(sd_gpu_footprint(g) >> 20),
             (unsigned long long)(sd_gpu_capacity(p, g) >> 20), (double)g->switch_ewma_ns / 1e6);
    p->ops.revoke(p->ctx, m, reason, evict);
    sd_takeback_for(p, m, evict, now);
    holders_changed(p); /* a restarted daemon revokes it again (state.c) */
    if (reason == CS_REVOKE_QUANTUM)
        gang_slice_end(p, m, now);
    /* Told, in case it still listens; never waited for again, but its lease
     * ends only once it read the REVOKE (docs/model.md, finding 2). */
    if (m->client->unresponsive && p->cfg->force_release)
        take_back_when_read(p, m, now);
}

void sd_lc_revoke(struct sd_policy *p, struct sd_member *m, uint64_t now)
{
    uint64_t mark = m->gpu->revoke_mark_ns;
    revoke(p, m, CS_REVOKE_PREEMPT, 0, now);
    m->gpu->revoke_mark_ns = mark;
    m->st.lc_preempted++;
}

/* ---- ordering -------------------------------------------------------------- */

/* Waiter order: class, then a client stuck in the restore of an earlier
 * grant (resumed after a restart, or restore_blocked), then vtime, then
 * longest waiting, then oldest client. */
static bool waiter_before(const struct sd_member *a, const struct sd_member *b)
{
    if (a->client->info.priority != b->client->info.priority)
        return a->client->info.priority < b->client->info.priority;
    bool ra = a->resumed || a->restore_blocked, rb = b->resumed || b->restore_blocked;
    if (ra != rb)
        return ra;
    if (a->vtime != b->vtime)
        return a->vtime < b->vtime;
    if (a->wait_since != b->wait_since)
        return a->wait_since < b->wait_since;
    return a->client->id < b->client->id;
}

/* Holder rank, best first: class, then longest holding, then oldest client. */
static bool holder_before(const struct sd_member *a, const struct sd_member *b)
{
    if (a->client->info.priority != b->client->info.priority)
        return a->client->info.priority < b->client->info.priority;
    if (a->grant_ns != b->grant_ns)
        return a->grant_ns < b->grant_ns;
    return a->client->id < b->client->id;
}

bool sd_waiter_before(const struct sd_member *a, const struct sd_member *b)
{
    return waiter_before(a, b);
}

struct sd_member *sd_best_waiter(const struct sd_gpu *g)
{
    struct sd_member *best = NULL;
    for (size_t i = 0; i < g->n; i++) {
        struct sd_member *m = g->m[i];
        if (m->state == CS_STATE_WAITING && (!best || waiter_before(m, best)))
            best = m;
    }
    return best;
}

/* ---- one client on several GPUs ---------------------------------------------- */

/* A process on two GPUs whose work reaches both (peer access couples its
 * gates: src/hook/gate.c) runs only while it holds both leases. Each GPU
 * decides on its own, so two such processes crossed over the same two GPUs
 * could be handed one GPU each, by turns, for ever, and neither ever held
 * both (the lease model's finding 8, docs/model.md, found with
 * model/lease2.pml). Three rules make the GPUs agree; a client on one GPU
 * is untouched by them:
 *  - no crossing: the waiter a GPU would grant is passed over for a
 *    same-class waiter whose client holds (HELD) a GPU that the first one's
 *    client waits for: granting the first would leave each client holding
 *    what the other waits for. The one passed over could not have used the
 *    GPU without the other (coupled), or loses one slice of it (not);
 *  - a slice that ends in a revoke ends the client's slices on its other
 *    GPUs too: the client's next turn is decided on all its GPUs at once,
 *    by the same waiters, rather than one GPU at a time one slice apart;
 *  - a grant that gives a client its last lease restarts its running
 *    slices on the other GPUs (within quantum_cap_ms of each lease), so
 *    that the client gets a whole slice with all of them.
 * "Waits" includes a member being revoked that asked again (m->want: the
 * hook sends ACQUIRE before RELEASE, cs_lease_ask_again_locked()), so that
 * the rule sees the released member in the decision its RELEASE makes. */

/* The slice of holder o is still running at now. */
static bool slice_running(const struct sd_policy *p, const struct sd_member *o, uint64_t now)
{
    return o->state == CS_STATE_HELD && !o->room_active &&
           now < o->slice_ns + sd_gpu_quantum_ns(p, o->gpu);
}

static bool member_waits(const struct sd_member *o)
{
    return o->state == CS_STATE_WAITING || (o->state == CS_STATE_REVOKING && o->want);
}

/* c's member on GPU g, if any. */
static struct sd_member *member_on(const struct sd_client *c, const struct sd_gpu *g)
{
    for (size_t s = 0; s < CS_MAX_DEVICES; s++)
        if (c->slot[s] && c->slot[s]->gpu == g)
            return c->slot[s];
    return NULL;
}

/* A waiter of g whose client holds (HELD) the GPU of o, which w's client
 * waits for; NULL if none may go before w (class, gating). */
static struct sd_member *holder_partner(const struct sd_policy *p, const struct sd_gpu *g,
                                        const struct sd_member *w, const struct sd_member *o)
{
    bool gated = sd_lc_active(p, g);
    const struct sd_gpu *h = o->gpu;
    for (size_t i = 0; i < h->n; i++) {
        const struct sd_member *hd = h->m[i];
        if (hd->state != CS_STATE_HELD || hd->client == w->client)
            continue;
        struct sd_member *x = member_on(hd->client, g);
        if (x && x->state == CS_STATE_WAITING &&
            x->client->info.priority == w->client->info.priority && !x->restore_blocked &&
            !(gated && sd_lc_gated(p, x)))
            return x;
    }
    return NULL;
}

/* w (the waiter g would grant), or a waiter whose grant does not cross. */
static struct sd_member *gang_waiter(const struct sd_policy *p, const struct sd_gpu *g,
                                     struct sd_member *w)
{
    if (!w || w->resumed || w->restore_blocked)
        return w;
    for (size_t s = 0; s < CS_MAX_DEVICES; s++) {
        const struct sd_member *o = w->client->slot[s];
        if (!o || o == w || o->gpu == g || !member_waits(o))
            continue;
        struct sd_member *x = holder_partner(p, g, w, o);
        if (x)
            return x;
    }
    return w;
}

/* m was revoked at the end of its slice: its client's slices on other GPUs
 * end now too, and those GPUs decide at this tick. */
static void gang_slice_end(struct sd_policy *p, const struct sd_member *m, uint64_t now)
{
    for (size_t s = 0; s < CS_MAX_DEVICES; s++) {
        struct sd_member *o = m->client->slot[s];
        if (!o || o == m || o->gpu == m->gpu || !slice_running(p, o, now))
            continue;
        o->slice_ns = sub0(now, sd_gpu_quantum_ns(p, o->gpu));
        want_at(o->gpu, now);
    }
}

/* m was just granted: its client's slices still running on other GPUs
 * start again with this one, within quantum_cap_ms of their leases. */
static void gang_align(const struct sd_policy *p, const struct sd_member *m, uint64_t now)
{
    uint64_t cap = (uint64_t)p->cfg->quantum_cap_ms * MS;
    for (size_t s = 0; s < CS_MAX_DEVICES; s++) {
        struct sd_member *o = m->client->slot[s];
        if (o && o != m && o->gpu != m->gpu && slice_running(p, o, now) &&
            now < o->grant_ns + cap)
            o->slice_ns = now;
    }
}

static uint64_t holders_footprint(const struct sd_gpu *g)
{
    uint64_t s = 0;
    for (size_t i = 0; i < g->n; i++)
        if (is_holder(g->m[i]))
            s = sd_add_sat(s, g->m[i]->footprint);
    return s;
}

/* ---- decisions ------------------------------------------------------------- */

bool sd_may_corun(const struct sd_policy *p, const struct sd_member *a, const struct sd_member *b)
{
    switch (p->cfg->mode) {
    case CS_MODE_SHARED:
        return true;
    case CS_MODE_MIXED:
        return (a->client->info.priority == CS_PRIO_HIGH) !=
               (b->client->info.priority == CS_PRIO_HIGH);
    default:
        return false;
    }
}

/* Every holder (leaving ones included: their work still runs) may run
 * beside w. */
bool sd_corun_with_holders(const struct sd_policy *p, const struct sd_gpu *g,
                           const struct sd_member *w)
{
    for (size_t i = 0; i < g->n; i++)
        if (g->m[i] != w && is_holder(g->m[i]) && !sd_may_corun(p, g->m[i], w))
            return false;
    return true;
}

static bool fits(const struct sd_policy *p, const struct sd_gpu *g, const struct sd_member *w)
{
    if (sd_gpu_count(g, CS_STATE_HELD) + sd_gpu_count(g, CS_STATE_REVOKING) == 0)
        return true; /* alone on the GPU: always, even if it is too big */
    if (!sd_mode_coruns(p->cfg) || !sd_corun_with_holders(p, g, w))
        return false;
    uint64_t cap = capacity(p, g);
    return cap > 0 && sd_add_sat(holders_footprint(g), w->footprint) <= cap;
}

bool sd_fits_beside_holders(const struct sd_policy *p, const struct sd_gpu *g,
                            const struct sd_member *w)
{
    return fits(p, g, w);
}

/* While a GPU is oversubscribed, its switch cost is at least what moving
 * the overflow (at most one job's footprint) takes at SD_PREDICT_BPS: the
 * measured cost lags (an EWMA), and switches measured while the jobs still
 * fitted (start-up, allocations under way) cost nothing. Without this floor
 * the quantum stayed at 1 s while 30 GB working sets started swapping, and
 * a first switch swapped a whole working set whose host backing was not
 * pinned yet (~0.3 s/GiB). 10 GB/s lies between a copy to pinned backing
 * (~50 GB/s) and a first one that pins (~3 GB/s). */
#define SD_PREDICT_BPS 10000000000.0
/* What a switch moves when footprints fp exceed the capacity cap: the
 * overflow, at most the largest job's footprint; 0 when they fit (or the
 * capacity is unknown). */
static uint64_t overflow_of(uint64_t cap, uint64_t fp, uint64_t largest)
{
    if (!cap || fp <= cap)
        return 0;
    return fp - cap < largest ? fp - cap : largest;
}

/* What a switch moves while g is oversubscribed. */
static uint64_t overflow_bytes(const struct sd_policy *p, const struct sd_gpu *g)
{
    uint64_t largest = 0;
    for (size_t i = 0; i < g->n; i++)
        if (g->m[i]->footprint > largest)
            largest = g->m[i]->footprint;
    return overflow_of(sd_gpu_capacity(p, g), sd_gpu_footprint(g), largest);
}

/* How long moving `bytes` is predicted to take. */
static uint64_t predict_ns(uint64_t bytes)
{
    return (uint64_t)((double)bytes / SD_PREDICT_BPS * 1e9);
}

static uint64_t predicted_switch_ns(const struct sd_policy *p, const struct sd_gpu *g)
{
    return predict_ns(overflow_bytes(p, g));
}

/* The switch cost the daemon plans with: the measured EWMA, and at least
 * the prediction while the GPU is oversubscribed (*over, when not NULL). */
static uint64_t planned_switch_ns(const struct sd_policy *p, const struct sd_gpu *g, bool *over)
{
    uint64_t sw = predicted_switch_ns(p, g);
    if (over)
        *over = sw > 0;
    return g->switch_ewma_ns > sw ? g->switch_ewma_ns : sw;
}

/* The quantum for a switch cost of sw: sw / switch_cost_target, within
 * floor..cap. */
static uint64_t quantum_for(const struct sd_policy *p, uint64_t sw)
{
    uint64_t lo = (uint64_t)p->cfg->quantum_floor_ms * MS;
    uint64_t hi = (uint64_t)p->cfg->quantum_cap_ms * MS;
    /* Clamped as a double: a footprint a client may claim (up to 2^62) over
     * a 0.001 target does not fit in 64 bits. */
    double qd = (double)sw / p->cfg->switch_cost_target;
    uint64_t q = qd >= (double)hi ? hi : (uint64_t)qd;
    if (q < lo)
        q = lo;
    if (q > hi)
        q = hi;
    return q;
}

bool sd_has_run(const struct sd_member *m)
{
    return is_holder(m) || m->had_lease || m->resumed;
}

bool sd_same_tenant(const struct sd_member *a, const struct sd_member *b)
{
    return a->client == b->client ||
           (a->client->info.tenant && a->client->info.tenant == b->client->info.tenant);
}

/* The overflow g's footprints are expected to reach: each waiter that has
 * not run yet counted at the footprint it is expected to grow to
 * (sd_mem_expected: the largest footprint of a member of its tenant that
 * has, when it holds at least 1/SD_GROW_LIKE of that). A job that has not held the GPU
 * is setting up: what it allocated before its first kernel is not its
 * working set. On the H200 two 82 GiB pytorch-add jobs started together;
 * the second waited at its first kernel with 29 GB, the first (83 GB) was
 * revoked at the 100 ms floor because 112 GB fitted the 141, and the
 * second's growth then moved 30 GB of the first out on its critical path
 * (0.72 s) and back at its end (1.03 s): held / work 1.086 against 1.033
 * when the first ran its job (oversubscription.md, 2026-11-30). A notebook's
 * 1 GB beside a trainer's 83 is not expected to become another trainer.
 * The memory plan counts the same growth (mem.c, sd_mem_expected). */
static uint64_t expected_overflow(const struct sd_policy *p, const struct sd_gpu *g)
{
    uint64_t largest = 0, growth = 0;
    for (size_t i = 0; i < g->n; i++)
        if (sd_has_run(g->m[i]) && g->m[i]->footprint > largest)
            largest = g->m[i]->footprint;
    for (size_t i = 0; i < g->n; i++) {
        const struct sd_member *m = g->m[i];
        if (m->state == CS_STATE_WAITING && !sd_has_run(m))
            growth = sd_add_sat(growth, sd_mem_expected(g, m) - m->footprint);
    }
    if (!growth)
        return 0;
    return overflow_of(sd_gpu_capacity(p, g), sd_add_sat(sd_gpu_footprint(g), growth), largest);
}

uint64_t sd_gpu_quantum_ns(const struct sd_policy *p, const struct sd_gpu *g)
{
    uint64_t sw = planned_switch_ns(p, g, NULL);
    uint64_t expect = predict_ns(expected_overflow(p, g));
    return quantum_for(p, expect > sw ? expect : sw);
}

/* How long an idle holder h stays before an idle revoke in favour of w,
 * beyond the idle period h waited before it said so (its WELCOME's,
 * idle_report_ms by default, 50 ms).
 *
 * On a GPU whose jobs fit, a switch moves no memory: h keeps the GPU until
 * it has been idle for idle_release_ms in all (issue 4: a job's pauses up
 * to that long never cost it its turn).
 *
 * On an oversubscribed one, revoking a holder that resumes soon costs a
 * switch (the waiter's memory in, and what must go out for it): this is
 * the ski-rental rule, wait as long as buying would cost, which never
 * loses more than twice the best choice made with hindsight. On the H100
 * the 4 x 30 GB jobs paused between phases and every idle revoke cost 1-3 s
 * of restore; a truly idle holder keeps the GPU for one predicted switch
 * (at most a quantum). The cost is w's own switch, not the GPU's: the
 * planned cost scaled by what w's switch moves against the overflow.
 *
 * A waiter already resident (the next holder is prefetched while the
 * holder runs, mem.c) moves nothing, and the holder's memory stays where
 * it is, so the idle holder goes at its report: a job that ended its work
 * held the GPU 200 ms longer when the report came at idle_release_ms.
 * A switch that moves memory still waits idle_release_ms at least: the
 * idle holder is likely a job that ended, and what it is asked to move
 * out is wasted (its exit frees it) and slow (its teardown races the copy:
 * on the H200, a job revoked 50 ms after its last work spent 272 ms on a
 * swap-out that its exit then failed, and the next holder waited longer
 * than for the exit alone; bench/results/oversubscription.md). */
static uint64_t idle_grace_ns(const struct sd_policy *p, const struct sd_gpu *g,
                              const struct sd_member *h, const struct sd_member *w)
{
    uint64_t said = (uint64_t)(h->client->info.idle_ms ? h->client->info.idle_ms
                                                         : p->cfg->idle_release_ms) * MS;
    uint64_t floor = (uint64_t)p->cfg->idle_release_ms * MS;
    bool over;
    uint64_t sw = planned_switch_ns(p, g, &over);
    if (!over)
        return sub0(floor, said);
    uint64_t q = quantum_for(p, sw);
    /* The planned cost is for moving the overflow; w's switch moves what
     * w lacks and what must go out for it, at the same rate (the measured
     * one, when it is slower than the prediction's). */
    uint64_t moved = sd_add_sat(sub0(w->footprint, w->resident), sd_mem_shortfall(p, g, w));
    if (moved <= SD_MEM_SLACK)
        return 0;
    uint64_t ovf = overflow_bytes(p, g);
    if (moved < ovf)
        sw = (uint64_t)((double)sw * (double)moved / (double)ovf);
    uint64_t wait = sw < q ? sw : q;
    return sub0(wait > floor ? wait : floor, said);
}

static bool idle_revocable(const struct sd_policy *p, const struct sd_gpu *g,
                           const struct sd_member *h, const struct sd_member *w, uint64_t now)
{
    return h->idle && now >= h->idle_ns + idle_grace_ns(p, g, h, w);
}

/* A holder owed time renews its slice rather than pay a switch it would
 * win anyway, but not for longer than quantum_cap_ms in one lease: a huge
 * weight (1000000 beside 1) would otherwise keep the GPU for ever while a
 * peer waits. */
static bool renewals_over(const struct sd_policy *p, const struct sd_member *h, uint64_t now)
{
    return now >= h->grant_ns + (uint64_t)p->cfg->quantum_cap_ms * MS;
}

/* Why holder h may be revoked now in favour of waiter w; 0 if it may not.
 * A same-class holder goes at the end of its slice unless it is still
 * behind w in vtime (then make_room renews its slice: a switch to the
 * client that would be chosen next anyway only costs a drain). */
static uint32_t revoke_reason_for(const struct sd_policy *p, const struct sd_gpu *g,
                                  const struct sd_member *h, const struct sd_member *w,
                                  uint64_t now)
{
    if (idle_revocable(p, g, h, w, now))
        return CS_REVOKE_IDLE;
    uint32_t hc = h->client->info.priority, wc = w->client->info.priority;
    if (hc > wc) /* not during its class's share turn (share.c) */
        return sd_share_protected(g, h, now) ? 0 : CS_REVOKE_PREEMPT;
    if (hc < wc) /* a better class goes only for a starved class's turn */
        return sd_share_owed(g, w) ? CS_REVOKE_QUANTUM : 0;
    /* Not while it waits for room being made for it (room.c gives it the
     * waiting time back when the room is there). */
    if (h->room_active || now < h->slice_ns + sd_gpu_quantum_ns(p, g))
        return 0;
    return eff_vtime(h, now) >= w->vtime || renewals_over(p, h, now) ? CS_REVOKE_QUANTUM : 0;
}

/* Victim order: idle first, then the lowest class, then the longest holding. */
static int victim_rank(const struct sd_member *h)
{
    return h->idle ? 0 : CS_PRIO_COUNT - (int)h->client->info.priority;
}

static bool victim_before(const struct sd_member *a, const struct sd_member *b)
{
    if (victim_rank(a) != victim_rank(b))
        return victim_rank(a) < victim_rank(b);
    return a->grant_ns < b->grant_ns;
}

static void sort_victims(struct sd_member **v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        struct sd_member *x = v[i];
        size_t j = i;
        for (; j > 0 && victim_before(x, v[j - 1]); j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

/* A same-class holder whose renewals ran out while still owed time
 * (renewals_over) gives up the rest of it: w, whom it would otherwise beat
 * again at once, gets the next slice. */
static void forfeit_credit(struct sd_member *h, const struct sd_member *w, uint32_t why,
                           uint64_t now)
{
    if (why != CS_REVOKE_QUANTUM || h->client->info.priority != w->client->info.priority ||
        eff_vtime(h, now) >= w->vtime)
        return;
    settle_vtime(h, now);
    h->vtime = w->vtime;
}

/* Puts the holders of v (n) that may not run beside w first, keeping each
 * part's order; returns how many there are. */
static size_t incompatible_first(const struct sd_policy *p, const struct sd_member *w,
                                 struct sd_member **v, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (sd_may_corun(p, v[i], w))
            continue;
        struct sd_member *x = v[i];
        for (size_t j = i; j > k; j--)
            v[j] = v[j - 1];
        v[k++] = x;
    }
    return k;
}

/* How many of the sorted candidates v (nv of the `holding` holders) must go
 * for w: every holder that may not run beside w (none can stay behind:
 * then none go now), then enough of the others for w's memory. 0: w
 * waits. */
static size_t victims_needed(const struct sd_policy *p, struct sd_gpu *g, struct sd_member *w,
                             struct sd_member **v, size_t nv, size_t holding)
{
    uint64_t cap = capacity(p, g);
    if (!sd_mode_coruns(p->cfg) || cap == 0 || w->footprint > cap)
        return nv == holding ? nv : 0; /* w needs the GPU to itself */
    size_t must = incompatible_first(p, w, v, nv), must_all = 0;
    for (size_t i = 0; i < g->n; i++)
        if (g->m[i]->state == CS_STATE_HELD && !sd_may_corun(p, g->m[i], w))
            must_all++;
    if (must < must_all)
        return 0; /* one that may not run beside w stays: w waits for it */
    uint64_t used = holders_footprint(g);
    uint64_t excess = sub0(sd_add_sat(used, w->footprint), cap);
    for (size_t i = 0; i < g->n; i++) /* already leaving */
        if (g->m[i]->state == CS_STATE_REVOKING)
            excess = sub0(excess, g->m[i]->footprint);
    uint64_t freed = 0;
    size_t take = 0;
    while (take < nv && (take < must || freed < excess))
        freed += v[take++]->footprint;
    return freed < excess ? 0 : take;
}

/* w does not fit: revoke enough holders that may go now, or none. */
static void make_room(struct sd_policy *p, struct sd_gpu *g, struct sd_member *w, uint64_t now)
{
    /* Scratch list of candidates; on allocation failure nothing is revoked
     * now and the next event retries. */
    struct sd_member **v = malloc(g->n * sizeof *v);
    if (!v)
        return;
    size_t nv = 0, holding = 0;
    uint64_t q = sd_gpu_quantum_ns(p, g);
    for (size_t i = 0; i < g->n; i++) {
        struct sd_member *h = g->m[i];
        if (h->state != CS_STATE_HELD)
            continue;
        holding++;
        if (h->idle && !idle_revocable(p, g, h, w, now))
            want_at(g, h->idle_ns + idle_grace_ns(p, g, h, w));
        if (revoke_reason_for(p, g, h, w, now)) {
            v[nv++] = h;
        } else if (h->client->info.priority == w->client->info.priority && !h->room_active) {
            if (now >= h->slice_ns + q) { /* still owed time: a new slice */
                settle_vtime(h, now);
                h->slice_ns = now;
            }
            want_at(g, h->slice_ns + q);
        }
    }
    sort_victims(v, nv);
    size_t take = victims_needed(p, g, w, v, nv, holding);
    /* Room for w's whole footprint beside what the others keep: what the
     * third parties are not already moving out, the leaving holders swap
     * out after their drain (REVOKE.evict_bytes); mem.c asks the rest of
     * the third parties right after. What w is only expected to grow by
     * (its first lease) is not asked of the leaving holders: third parties
     * move it while they drain, and what they cannot give is asked of the
     * holder once it is idle (mem.c, before the grant). */
    uint64_t need = sd_mem_shortfall_allocated(p, g, w);
    /* What the leaving holders would pin of their own is left to w's
     * ROOMs, which come with the pieces of what w restored since
     * (sd_takeback_paced): on the H200 a 32 GB revoke lacked 15 GiB with
     * the pool spent on memory that was out, and pinned it in 4.7 s. */
    uint64_t returns = w->client->info.giveback ? w->swapped : 0;
    for (size_t i = 0; i < take; i++) {
        uint64_t movable = sd_mem_movable(v[i]);
        uint64_t ev = need < movable ? need : movable;
        need -= ev;
        ev = sd_takeback_paced(p, v[i], ev, &returns);
        uint32_t why = revoke_reason_for(p, g, v[i], w, now);
        forfeit_credit(v[i], w, why, now);
        revoke(p, v[i], why, ev, now);
    }
    free(v);
}

/* A REVOKE unanswered for revoke_timeout_ms is reported once and, with
 * force_release, the lease is taken back: the client's gate closed when it
 * got the REVOKE, so the next holder does not overlap with its new work,
 * only with whatever it still has in flight. */
static void check_revoke_timeouts(struct sd_policy *p, struct sd_gpu *g, uint64_t now)
{
    uint64_t to = (uint64_t)p->cfg->revoke_timeout_ms * MS;
    for (size_t i = 0; i < g->n; i++) {
        struct sd_member *m = g->m[i];
        if (m->state != CS_STATE_REVOKING || m->timeout_reported)
            continue;
        if (now < m->revoke_ns + to) {
            want_at(g, m->revoke_ns + to);
            continue;
        }
        m->timeout_reported = true;
        g->st.revoke_timeouts++;
        cs_warn("gpu %u: %s (pid %u) did not release lease %llu within %u ms%s", g->index,
                client_name(m), m->client->info.pid, (unsigned long long)m->lease_id,
                p->cfg->revoke_timeout_ms,
                p->cfg->force_release ? "; taking it back" : "; waiting (force_release off)");
        if (!m->client->unresponsive)
            sd_unresponsive(p, m->client, "did not answer REVOKE", now);
    }
}

/* ---- unresponsive clients ------------------------------------------------------ */

/* How often a client the daemon waits for is checked for a stopped
 * process, and how many checks in a row must find it stopped: a process
 * under strace stops for a moment at every system call, one under SIGSTOP
 * or a debugger's breakpoint stays stopped. */
#define STOP_PROBE_NS (50 * MS)
#define STOP_PROBES 2

/* When the oldest answer the daemon waits for from m was asked; 0 = none. */
static uint64_t awaited_since(const struct sd_member *m)
{
    uint64_t t = UINT64_MAX;
    if (m->state == CS_STATE_REVOKING && !m->timeout_reported && m->revoke_ns < t)
        t = m->revoke_ns;
    if (m->evict_id && m->evict_ns < t)
        t = m->evict_ns;
    if (m->prefetch_id && m->prefetch_ns < t)
        t = m->prefetch_ns;
    if (m->prep_id && m->prep_ns < t)
        t = m->prep_ns;
    return t == UINT64_MAX ? 0 : t;
}

/* A stopped process answers nothing until it is continued: waiting
 * revoke_timeout_ms for it only idles the GPU. The server reads the
 * process state (ops.stopped); the policy asks while it waits. */
static void check_stopped(struct sd_policy *p, struct sd_gpu *g, uint64_t now)
{
    for (size_t i = 0; p->ops.stopped && i < g->n; i++) {
        struct sd_member *m = g->m[i];
        struct sd_client *c = m->client;
        uint64_t since = awaited_since(m);
        if (c->unresponsive || !since)
            continue;
        uint64_t due = since + STOP_PROBE_NS;
        if (c->stop_probe_ns && c->stop_probe_ns + STOP_PROBE_NS > due)
            due = c->stop_probe_ns + STOP_PROBE_NS;
        if (now < due) {
            want_at(g, due);
            continue;
        }
        bool stopped = p->ops.stopped(p->ctx, m);
        bool series = c->stop_seen && now <= c->stop_probe_ns + 2 * STOP_PROBE_NS;
        c->stop_seen = stopped ? (series ? c->stop_seen + 1 : 1) : 0;
        c->stop_probe_ns = now;
        if (c->stop_seen >= STOP_PROBES)
            sd_unresponsive(p, c, "its process is stopped while the daemon waits for it",
                            now);
        else
            want_at(g, now + STOP_PROBE_NS);
    }
}

/* Class and weight, the time held so far charged at the old weight, a
 * member that changes class placed in its new class. */
static void set_class(struct sd_client *c, uint32_t priority, uint32_t weight, uint64_t now)
{
    bool moved = priority != c->info.priority;
    for (int s = 0; s < CS_MAX_DEVICES; s++)
        if (c->slot[s] && is_holder(c->slot[s]))
            settle_vtime(c->slot[s], now);
    c->info.priority = priority < CS_PRIO_COUNT ? priority : CS_PRIO_LOW;
    c->info.weight = weight ? weight : 1;
    for (int s = 0; s < CS_MAX_DEVICES; s++)
        if (moved && c->slot[s] && is_active(c->slot[s]))
            place_vtime(c->slot[s], now);
}

void sd_unresponsive(struct sd_policy *p, struct sd_client *c, const char *why, uint64_t now)
{
    if (c->unresponsive)
        return;
    c->unresponsive = true;
    c->demoted = c->info.priority != CS_PRIO_LOW || c->info.weight != 1;
    cs_warn("client %llu (pid %u, %s) %s: marked unresponsive%s for the rest of its "
            "connection; asked nothing more, its memory counted where it is%s",
            (unsigned long long)c->id, c->info.pid, c->info.name[0] ? c->info.name : "unnamed",
            why, c->demoted ? " and demoted to low, weight 1," : "",
            p->cfg->force_release ? ", its leases taken back at once"
                                  : " (force_release off: its revokes are waited for)");
    if (c->demoted)
        set_class(c, CS_PRIO_LOW, 1, now);
    for (int s = 0; s < CS_MAX_DEVICES; s++) {
        struct sd_member *m = c->slot[s];
        if (!m)
            continue;
        m->gpu->st.unresponsive++;
        m->gpu->st.demotions += c->demoted;
        sd_mem_forget_requests(p, m, now);
        if (m->state == CS_STATE_REVOKING && p->cfg->force_release) {
            m->gpu->sw_waited_out = true;
            take_back_when_read(p, m, now);
        }
        want_at(m->gpu, now); /* its other GPUs: at this tick */
    }
}

static uint64_t holding_footprint(const struct sd_gpu *g)
{
    uint64_t s = 0;
    for (size_t i = 0; i < g->n; i++)
        if (g->m[i]->state == CS_STATE_HELD)
            s = sd_add_sat(s, g->m[i]->footprint);
    return s;
}

/* Every two holders (HELD) may run together. */
static bool holders_corun(const struct sd_policy *p, const struct sd_gpu *g)
{
    for (size_t i = 0; i < g->n; i++)
        for (size_t j = i + 1; j < g->n; j++)
            if (g->m[i]->state == CS_STATE_HELD && g->m[j]->state == CS_STATE_HELD &&
                !sd_may_corun(p, g->m[i], g->m[j]))
                return false;
    return true;
}

/* More holders than the mode allows (claims after a restart, a switch from
 * shared to exclusive, footprints that grew): keep the best, revoke the rest
 * (the ones already revoking are on their way out and not counted). */
static void trim_holders(struct sd_policy *p, struct sd_gpu *g, uint64_t now)
{
    for (;;) {
        struct sd_member *worst = NULL;
        size_t holding = 0;
        for (size_t i = 0; i < g->n; i++) {
            struct sd_member *m = g->m[i];
            if (m->state != CS_STATE_HELD)
                continue;
            holding++;
            if (!worst || holder_before(worst, m))
                worst = m;
        }
        if (holding < 2)
            return;
        if (!sd_mode_coruns(p->cfg) || !holders_corun(p, g)) {
            revoke(p, worst, CS_REVOKE_PREEMPT, 0, now);
            continue;
        }
        uint64_t cap = capacity(p, g);
        if (cap && holding_footprint(g) <= cap)
            return;
        revoke(p, worst, CS_REVOKE_MEMORY, 0, now);
    }
}

static void restore_check(struct sd_gpu *g, uint64_t now)
{
    if (!g->restoring)
        return;
    bool all_back = !g->restore_all && g->nexpect == 0;
    if (!all_back && now < g->restore_deadline) {
        want_at(g, g->restore_deadline);
        return;
    }
    g->restoring = false;
    if (all_back)
        cs_info("gpu %u: every previous holder is back; scheduling resumes", g->index);
    else
        cs_info("gpu %u: reconnect grace over (%zu previous holder(s) did not come back)",
                g->index, g->nexpect);
    g->nexpect = 0;
}

static void gpu_decide(struct sd_policy *p, struct sd_gpu *g, uint64_t now)
{
    update_min_vtime(g, now);
    sd_room_check(p, g, now);
    sd_mem_check_answers(p, g, now);
    sd_takeback_check(p, g, now);
    check_stopped(p, g, now);
    check_revoke_timeouts(p, g, now);
    check_takebacks(p, g, now);
    trim_holders(p, g, now);
    restore_check(g, now);
    if (g->restoring)
        return;
    if (g->draining) {
        for (size_t i = 0; i < g->n; i++)
            if (g->m[i]->state == CS_STATE_HELD)
                revoke(p, g->m[i], CS_REVOKE_DRAIN, 0, now);
        return;
    }
    sd_lc_decide(p, g, now);
    for (;;) {
        struct sd_member *w = sd_share_target(p, g, now);
        if (!w)
            w = gang_waiter(p, g, sd_lc_best_waiter(p, g));
        if (!w)
            return;
        if (!fits(p, g, w)) {
            make_room(p, g, w, now);
            if (!fits(p, g, w))
                return;
            continue; /* leases taken back at once (an unresponsive client) */
        }
        if (!sd_mem_grant_ready(p, g, w, now))
            return; /* evictions for it are under way */
        grant(p, w, now);
    }
}

static void gpu_schedule(struct sd_policy *p, struct sd_gpu *g, uint64_t now)
{
    g->deadline = 0;
    track_waiting(g, now);
    sd_share_account(p, g, now);
    gpu_decide(p, g, now);
    sd_mem_plan(p, g, now);
    sd_ts_plan(p, g);
    sd_lc_plan(p, g);
    /* Deadlines of the requests this decision sent. */
    sd_mem_check_answers(p, g, now);
    sd_takeback_check(p, g, now);
    check_stopped(p, g, now);
    sd_share_update(g);
}

void sd_gpu_reschedule(struct sd_policy *p, struct sd_gpu *g, uint64_t now)
{
    gpu_schedule(p, g, now);
}

void sd_node_reschedule(struct sd_policy *p, uint64_t now)
{
    for (size_t i = 0; i < p->ngpu; i++)
        gpu_schedule(p, p->gpu[i], now);
}

/* ---- domains -------------------------------------------------------------- */

static struct sd_gpu *gpu_new(struct sd_policy *p, const uint8_t *uuid, uint32_t index,
                              uint64_t now)
{
    if (p->ngpu == SD_MAX_GPUS)
        return NULL;
    struct sd_gpu *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    memcpy(g->uuid, uuid, CS_UUID_LEN);
    g->index = index;
    g->acct_ns = now;
    if (p->past_unknown && p->cfg->reconnect_grace_ms &&
        now < p->start_ns + (uint64_t)p->cfg->reconnect_grace_ms * MS) {
        g->restoring = true;
        g->restore_all = true;
        g->restore_deadline = p->start_ns + (uint64_t)p->cfg->reconnect_grace_ms * MS;
    }
    p->gpu[p->ngpu++] = g;
    char txt[CS_UUID_STR_LEN];
    cs_uuid_format(uuid, txt);
    cs_info("gpu %u: %s%s", index, txt, g->restoring ? " (waiting for previous holders)" : "");
    return g;
}

static uint32_t next_index(const struct sd_policy *p)
{
    uint32_t idx = 0;
    for (size_t i = 0; i < p->ngpu; i++)
        if (p->gpu[i]->index >= idx)
            idx = p->gpu[i]->index + 1;
    return idx;
}

static int gpu_add_member(struct sd_gpu *g, struct sd_member *m)
{
    if (g->n == g->cap) {
        size_t nc = g->cap ? g->cap * 2 : 8;
        struct sd_member **nm = realloc(g->m, nc * sizeof *nm);
        if (!nm)
            return -1;
        g->m = nm;
        g->cap = nc;
    }
    g->m[g->n++] = m;
    return 0;
}

static void gpu_remove_member(struct sd_gpu *g, struct sd_member *m)
{
    for (size_t i = 0; i < g->n; i++) {
        if (g->m[i] == m) {
            memmove(&g->m[i], &g->m[i + 1], (g->n - i - 1) * sizeof g->m[0]);
            g->n--;
            return;
        }
    }
}

/* ---- public: life cycle ------------------------------------------------------ */

void sd_policy_init(struct sd_policy *p, const struct sd_config *cfg,
                    const struct sd_policy_ops *ops, void *ctx, uint64_t lease_base,
                    uint64_t now)
{
    memset(p, 0, sizeof *p);
    p->cfg = cfg;
    p->ops = *ops;
    p->ctx = ctx;
    p->next_client_id = 1;
    p->next_lease_id = lease_base ? lease_base : 1;
    p->start_ns = now;
}

void sd_policy_fini(struct sd_policy *p)
{
    while (p->clients) {
        struct sd_client *c = p->clients;
        p->clients = c->next;
        for (int s = 0; s < CS_MAX_DEVICES; s++)
            free(c->slot[s]);
        free(c);
    }
    for (size_t i = 0; i < p->ngpu; i++) {
        free(p->gpu[i]->m);
        free(p->gpu[i]);
    }
    memset(p, 0, sizeof *p);
}

void sd_policy_restore(struct sd_policy *p, const struct sd_restore *r, uint64_t now)
{
    if (r->unknown) {
        p->past_unknown = true;
        cs_warn("previous state unreadable: every GPU waits %u ms for its holders",
                p->cfg->reconnect_grace_ms);
    }
    if (r->next_client_id > p->next_client_id)
        p->next_client_id = r->next_client_id;
    for (size_t i = 0; i < r->ngpu; i++) {
        const struct sd_restore_gpu *rg = &r->gpu[i];
        if (sd_policy_gpu_by_uuid(p, rg->uuid))
            continue;
        bool taken = false;
        for (size_t j = 0; j < p->ngpu; j++)
            taken |= p->gpu[j]->index == rg->index;
        struct sd_gpu *g = gpu_new(p, rg->uuid, taken ? next_index(p) : rg->index, now);
        if (!g)
            return;
        g->mem_total = rg->mem_total;
        size_t n = rg->nholders < SD_RESTORE_MAX_IDS ? rg->nholders : SD_RESTORE_MAX_IDS;
        if (n && p->cfg->reconnect_grace_ms) {
            memcpy(g->expect, rg->holders, n * sizeof g->expect[0]);
            memcpy(g->expect_revoke, rg->revoking, n * sizeof g->expect_revoke[0]);
            g->nexpect = n;
            g->restoring = true;
            g->restore_deadline = now + (uint64_t)p->cfg->reconnect_grace_ms * MS;
            cs_info("gpu %u: waiting up to %u ms for %zu previous holder(s)", g->index,
                    p->cfg->reconnect_grace_ms, n);
        }
    }
}

/* ---- public: clients -------------------------------------------------------- */

struct sd_client *sd_policy_client_add(struct sd_policy *p, const struct sd_client_info *info,
                                       uint64_t now)
{
    struct sd_client *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->id = p->next_client_id++;
    c->info = *info;
    if (c->info.weight < 1)
        c->info.weight = 1;
    if (c->info.priority >= CS_PRIO_COUNT)
        c->info.priority = CS_PRIO_LOW;
    c->next = p->clients;
    if (p->clients)
        p->clients->prev = c;
    p->clients = c;
    p->nclients++;
    (void)now;
    return c;
}

void sd_policy_client_remove(struct sd_policy *p, struct sd_client *c, uint64_t now)
{
    for (int s = 0; s < CS_MAX_DEVICES; s++) {
        struct sd_member *m = c->slot[s];
        if (!m)
            continue;
        struct sd_gpu *g = m->gpu;
        bool held = is_holder(m), pinning = m->prep_id || m->evict_id;
        if (held) {
            m->want = false;
            end_lease(p, m, now);
            cs_info("gpu %u: %s (pid %u) left while holding the GPU", g->index,
                    client_name(m), c->info.pid);
        }
        sd_room_forget(p, m);
        sd_takeback_forget(p, m);
        sd_share_forget(g, m);
        if (m->resident)
            g->freed_epoch++;
        gpu_remove_member(g, m);
        free(m);
        c->slot[s] = NULL;
        gpu_account(g, now);
        gpu_schedule(p, g, now);
        if (pinning) /* the node's pinning is free for other GPUs' members */
            sd_node_reschedule(p, now);
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        p->clients = c->next;
    if (c->next)
        c->next->prev = c->prev;
    p->nclients--;
    free(c);
}

void sd_policy_client_update(struct sd_policy *p, struct sd_client *c, uint32_t priority,
                             uint32_t weight, uint64_t now)
{
    if (c->demoted) { /* for the rest of its connection, whoever asks */
        priority = CS_PRIO_LOW;
        weight = 1;
    }
    set_class(c, priority, weight, now);
    for (int s = 0; s < CS_MAX_DEVICES; s++)
        if (c->slot[s])
            gpu_schedule(p, c->slot[s]->gpu, now);
}

/* ---- public: messages ---------------------------------------------------------- */

static struct sd_member *member_of(struct sd_client *c, uint32_t slot, const char **why)
{
    struct sd_member *m = slot < CS_MAX_DEVICES ? c->slot[slot] : NULL;
    if (!m)
        *why = "slot not attached";
    return m;
}

/* Returns whether c held g under the previous daemon; *revoking: the
 * REVOKE reason that daemon had given it, 0 if none. */
static bool restore_resolve(struct sd_gpu *g, const struct sd_client *c, uint32_t *revoking)
{
    *revoking = 0;
    if (!g->restoring || !c->info.reconnect)
        return false;
    for (size_t i = 0; i < g->nexpect; i++) {
        if (g->expect[i] == c->info.prev_id) {
            *revoking = g->expect_revoke[i];
            g->nexpect--;
            g->expect[i] = g->expect[g->nexpect];
            g->expect_revoke[i] = g->expect_revoke[g->nexpect];
            return true;
        }
    }
    return false;
}

static int attach_check(struct sd_client *c, const struct cs_msg_attach *a, struct sd_gpu *g,
                        const char **why)
{
    if (c->slot[a->slot]) {
        *why = "slot already attached";
        return SD_EPROTO;
    }
    for (int s = 0; g && s < CS_MAX_DEVICES; s++) {
        if (c->slot[s] && c->slot[s]->gpu == g) {
            *why = "GPU already attached on another slot";
            return SD_EPROTO;
        }
    }
    /* A HELD claim (CS_ATTACH_HELD) is not checked against anything: the
     * client's gate is open, whatever the daemon thinks, and refusing the
     * claim would only hide it. It may come without RECONNECT and with lease 0 from a
     * process that started while no daemon answered and ran unmanaged. */
    return SD_OK;
}

int sd_policy_attach(struct sd_policy *p, struct sd_client *c, const struct cs_msg_attach *a,
                     uint64_t now, const char **why)
{
    struct sd_gpu *g = sd_policy_gpu_by_uuid(p, a->uuid);
    int rc = attach_check(c, a, g, why);
    if (rc != SD_OK)
        return rc;
    if (!g && !(g = gpu_new(p, a->uuid, next_index(p), now))) {
        *why = "too many GPUs";
        return SD_ELIMIT;
    }
    struct sd_member *m = calloc(1, sizeof *m);
    if (!m || gpu_add_member(g, m) < 0) {
        free(m);
        *why = "out of memory";
        return SD_ELIMIT;
    }
    m->client = c;
    m->gpu = g;
    m->slot = a->slot;
    m->state = CS_STATE_IDLE;
    m->attach_ns = now;
    m->reports_restore = c->info.restored; /* else learnt from its first RESTORED */
    c->slot[a->slot] = m;
    if (a->total_mem > g->mem_total)
        g->mem_total = a->total_mem;
    /* A previous holder that comes back without its lease may still be
     * restoring memory for it (its gate opens only after): it goes first,
     * so that this restore becomes the next grant's and is not left
     * waiting for room nobody will make. */
    uint32_t revoking;
    bool held = restore_resolve(g, c, &revoking);
    /* One that was being revoked is done with its grant: not first. */
    m->resumed = held && !revoking && !(a->flags & CS_ATTACH_HELD);
    if (a->flags & CS_ATTACH_HELD) {
        /* Its gate is open under a lease of the previous daemon (or of a
         * connection that dropped): adopt the lease as is. A conflicting
         * holder is sorted out by trim_holders. */
        place_vtime(m, now);
        hold_from(m, now);
        m->lease_id = a->lease_id;
        gpu_account(g, now);
        cs_info("gpu %u: %s (pid %u) resumes lease %llu%s", g->index, client_name(m),
                c->info.pid, (unsigned long long)a->lease_id,
                revoking ? ", which the previous daemon was revoking: revoked again" : "");
        holders_changed(p);
        if (revoking) /* its slice was over: no new one */
            revoke(p, m, revoking, 0, now);
    } else if (a->flags & CS_ATTACH_WAITING) {
        start_wait(p, m, now);
    }
    gpu_schedule(p, g, now);
    return SD_OK;
}

int sd_policy_acquire(struct sd_policy *p, struct sd_client *c, uint32_t slot, uint64_t now,
                      const char **why)
{
    struct sd_member *m = member_of(c, slot, why);
    if (!m)
        return SD_EPROTO;
    switch (m->state) {
    case CS_STATE_IDLE:
        start_wait(p, m, now);
        gpu_schedule(p, m->gpu, now);
        break;
    case CS_STATE_REVOKING:
        m->want = true; /* its threads want the GPU again after the drain */
        break;
    default: /* WAITING, HELD: already asked or already has it */
        break;
    }
    return SD_OK;
}

int sd_policy_release(struct sd_policy *p, struct sd_client *c, const struct cs_msg_release *r,
                      uint64_t now, const char **why)
{
    struct sd_member *m = member_of(c, r->slot, why);
    if (!m)
        return SD_EPROTO;
    if (is_holder(m) && r->lease_id == m->lease_id) {
        struct sd_gpu *g = m->gpu;
        m->st.drain_ns += r->drain_ns;
        cs_debug("gpu %u: %s (pid %u) released lease %llu: drain %.3f ms, swap-out %.3f ms "
                 "(%llu bytes)", g->index, client_name(m), c->info.pid,
                 (unsigned long long)r->lease_id, (double)r->drain_ns / 1e6,
                 (double)r->swap_ns / 1e6, (unsigned long long)r->swapped_bytes);
        sd_mem_on_release(g, m, r, true);
        if (m->state == CS_STATE_REVOKING && g->revoke_mark_ns) {
            /* The drain is the job's own work: not switch overhead. */
            uint64_t span = sub0(now, g->revoke_mark_ns);
            uint64_t d = r->drain_ns < span ? r->drain_ns : span;
            if (d > g->sw_drain_ns)
                g->sw_drain_ns = d;
        }
        if (r->reason == CS_RELEASE_DETACH)
            m->want = false;
        end_lease(p, m, now);
        gpu_schedule(p, m->gpu, now);
        return SD_OK;
    }
    if (r->reason == CS_RELEASE_DETACH && r->lease_id == 0 && !is_holder(m)) {
        /* The context goes away while waiting: stop asking. */
        if (m->state == CS_STATE_WAITING) {
            m->st.wait_ns += sub0(now, m->wait_since);
            m->state = CS_STATE_IDLE;
            m->idle_since = now;
            gpu_schedule(p, m->gpu, now);
        }
        return SD_OK;
    }
    if (m->had_lease && r->lease_id != 0 && r->lease_id <= m->prev_lease_id) {
        /* Crossed a REVOKE, or arrived after the lease was taken back: its
         * swap still happened. Also one before the previous: the hook asks
         * again before it releases (cs_lease_ask_again_locked()), so a
         * lease granted on that ACQUIRE may be taken back (an unresponsive
         * client's, once it read the REVOKE) before this RELEASE is read
         * (found by the lease model). Lease ids only grow. */
        sd_mem_on_release(m->gpu, m, r, false);
        gpu_schedule(p, m->gpu, now);
        return SD_OK;
    }
    *why = "RELEASE for a lease not held";
    return SD_EPROTO;
}

int sd_policy_usage(struct sd_policy *p, struct sd_client *c, const struct cs_msg_usage *u,
                    uint64_t now, const char **why)
{
    struct sd_member *m = member_of(c, u->slot, why);
    if (!m)
        return SD_EPROTO;
    sd_mem_on_usage(p, m, u, now);
    m->usage_seen = true;
    m->resident = u->resident;
    m->swapped = u->swapped;
    m->unswappable = u->unswappable < u->resident ? u->unswappable : u->resident;
    m->footprint = u->footprint;
    m->submissions = u->submissions;
    /* Idle means idle while holding: not before the gate opened. A client
     * that reports its restores (RESTORED) is only believed idle after the
     * current lease's; its USAGEs during the restore may still carry the
     * idleness of its previous lease. */
    bool was_idle = m->idle;
    bool idle = (u->flags & CS_USAGE_IDLE) && m->state == CS_STATE_HELD &&
                (!m->reports_restore || m->lease_restored);
    if (idle != was_idle && is_holder(m))
        settle_vtime(m, now); /* up to the change, by the rule that held */
    m->idle = idle;
    if (m->idle && !was_idle)
        m->idle_ns = now;
    gpu_schedule(p, m->gpu, now);
    return SD_OK;
}

void sd_policy_drain(struct sd_policy *p, struct sd_gpu *g, bool on, uint64_t now)
{
    if (g->draining != on)
        cs_info("gpu %u: %s", g->index, on ? "draining" : "undrained");
    g->draining = on;
    gpu_schedule(p, g, now);
}

void sd_policy_reconfigure(struct sd_policy *p, uint64_t now)
{
    for (size_t i = 0; i < p->ngpu; i++)
        gpu_schedule(p, p->gpu[i], now);
}

uint64_t sd_policy_tick(struct sd_policy *p, uint64_t now)
{
    /* A decision on one GPU can make another's due at once (a client
     * marked unresponsive there): a second pass takes those. */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < p->ngpu; i++)
            if (p->gpu[i]->deadline && now >= p->gpu[i]->deadline)
                gpu_schedule(p, p->gpu[i], now);
    return sd_policy_deadline(p);
}

uint64_t sd_policy_deadline(const struct sd_policy *p)
{
    uint64_t d = 0;
    for (size_t i = 0; i < p->ngpu; i++) {
        uint64_t t = p->gpu[i]->deadline;
        if (t && (!d || t < d))
            d = t;
    }
    return d;
}

/* ---- public: views ------------------------------------------------------------- */

struct sd_gpu *sd_policy_gpu_by_uuid(const struct sd_policy *p, const uint8_t *uuid)
{
    for (size_t i = 0; i < p->ngpu; i++)
        if (memcmp(p->gpu[i]->uuid, uuid, CS_UUID_LEN) == 0)
            return p->gpu[i];
    return NULL;
}

struct sd_gpu *sd_policy_gpu_by_text(const struct sd_policy *p, const char *text)
{
    uint8_t uuid[CS_UUID_LEN];
    uint64_t idx;
    if (cs_uuid_parse(text, uuid) == 0)
        return sd_policy_gpu_by_uuid(p, uuid);
    if (cs_parse_u64(text, 0, UINT32_MAX, &idx) == 0)
        for (size_t i = 0; i < p->ngpu; i++)
            if (p->gpu[i]->index == idx)
                return p->gpu[i];
    return NULL;
}

void sd_gpu_times(const struct sd_gpu *g, uint64_t now, uint64_t *idle_ns, uint64_t *busy_ns)
{
    uint64_t open = sub0(now, g->acct_ns);
    *idle_ns = g->st.idle_ns + (g->busy ? 0 : open);
    *busy_ns = g->st.busy_ns + (g->busy ? open : 0);
}

uint32_t sd_gpu_count(const struct sd_gpu *g, uint32_t state)
{
    uint32_t n = 0;
    for (size_t i = 0; i < g->n; i++)
        n += g->m[i]->state == state;
    return n;
}

uint64_t sd_gpu_resident(const struct sd_gpu *g)
{
    uint64_t s = 0;
    for (size_t i = 0; i < g->n; i++)
        s += g->m[i]->resident;
    return s;
}

uint64_t sd_member_gpu_ns(const struct sd_member *m, uint64_t now)
{
    return m->st.gpu_ns + (is_holder(m) ? sub0(now, m->grant_ns) : 0);
}

uint64_t sd_member_wait_ns(const struct sd_member *m, uint64_t now)
{
    return m->st.wait_ns + (m->state == CS_STATE_WAITING ? sub0(now, m->wait_since) : 0);
}
