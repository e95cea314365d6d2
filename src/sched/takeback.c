/* takeback.c: the pinned pool's pieces taken back from pin-ahead for a
 * move that someone waits for (issue 20).
 *
 * Pin-ahead (mem.c plan_prepare) lends the pool's pieces to the members
 * furthest from running, in the order they would be evicted now. That
 * order moves as the holder runs (its vtime is charged at its revoke): on
 * the H200, four 45 GB jobs with 30 s slices, one switch lent the pool's
 * 60 GiB to two waiters, and at the next one the ROOM's victim (the holder
 * just revoked, now furthest from running) had none. Its 26 GiB swap-out
 * pinned its own backing at about 2 GB/s, and the new holder waited 13.9 s
 * for room while 50 GiB of the pool backed memory that did not move
 * (bench/results/oversubscription.md, 2026-11-30, session 6).
 *
 * So a move the daemon orders (an EVICT, for a ROOM or for the next holder,
 * or a revoke's swap-out: each is for a switch that is coming) whose
 * backing the pool cannot lend asks the members that are not moving for
 * the pieces that back their resident memory (EVICT GIVEBACK), the member
 * closest to running first: its memory is the last to move. The mover
 * borrows them as they come back (no pin-ahead is lent meanwhile: mem.c
 * node_pinning); what it pinned of its own before they came stays its own.
 * What the pool had for a move, and what was asked back for it, is spoken
 * for that move (move_due) until it borrows it (sd_policy_lent) or ends;
 * a PREPARE's likewise (prep_due): sd_takeback_lendable is what is left.
 *
 * Asked: clients that announced CS_HELLO_GIVEBACK, of the mover's tenant
 * (pieces a live process gave back are lent to its tenant alone, lender.h)
 * unless pool_share_tenants; never a holder: its revoke's swap-out is the
 * next move, and its hook holds the device's segment lock while one of its
 * allocations waits for room (locks.h), so a GIVEBACK for the ROOM it
 * waits on would be answered only once that room was made (82cdd4b asked
 * holders; reverted for that); nor a member with a request of its own
 * outstanding: what the mover still lacks (gb_short) is asked for as such
 * members finish, while its move lasts. One GIVEBACK per member at a time;
 * one past its answer deadline is forgotten and its member asked no more
 * (nobody waits for it: the mover pins what it lacks). What a member does
 * not give back (an error: its driver is shut down; fewer bytes: it has no
 * lent pieces left behind resident memory), or a member that goes, leaves
 * its mover short of that much, asked of the others; an error stops that
 * member being asked, a short answer until pin-ahead lends it pieces again
 * (or it reports more backing).
 * A member's answer only lowers its own pin-ahead figures.
 */
#include "common/log.h"
#include "sched/policy_int.h"

static uint64_t sub0(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

static uint64_t min64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static bool moving(const struct sd_member *m)
{
    return m->evict_id || m->state == CS_STATE_REVOKING;
}

/* The pool's pieces a request counts on until it borrows them. The lender
 * says what is free after every change and at the end of every loop
 * iteration, and the movers borrow over hundreds of milliseconds: zeroing
 * pool_free for the first move lasted only until the lender spoke again.
 * On the H200 a 16 GiB room eviction lacked 3.2 GiB; the pieces a member
 * gave back for that same move came back, the retry counted them again as
 * newly free, asked nobody for the 3.2 GiB (the busy member had finished
 * 20 ms before), and the mover pinned 2.2 GiB of its own in 0.61 s (both
 * runs of 2026-11-30's A/B, bench/results/oversubscription.md). */
static uint64_t due_of(const struct sd_member *m)
{
    uint64_t d = moving(m) ? m->move_due : 0;
    return m->prep_id ? sd_add_sat(d, m->prep_due) : d;
}

uint64_t sd_takeback_lendable(const struct sd_policy *p)
{
    uint64_t due = 0;
    for (size_t i = 0; i < p->ngpu; i++)
        for (size_t j = 0; j < p->gpu[i]->n; j++)
            due = sd_add_sat(due, due_of(p->gpu[i]->m[j]));
    return sub0(p->pool_free, due);
}

void sd_policy_lent(struct sd_policy *p, struct sd_client *c, uint32_t slot, uint64_t bytes)
{
    (void)p;
    struct sd_member *m = slot < CS_MAX_DEVICES ? c->slot[slot] : NULL;
    if (!m)
        return;
    uint64_t d = moving(m) ? min64(m->move_due, bytes) : 0;
    m->move_due -= d;
    m->prep_due = sub0(m->prep_due, bytes - d);
}

/* Whether d may be asked to give back pieces for v's move. */
static bool may_give(const struct sd_policy *p, const struct sd_member *d,
                     const struct sd_member *v)
{
    return d != v && d->client->info.giveback && !d->gb_off && !d->gb_dry && !d->gb_id &&
           !d->client->unresponsive && !sd_is_holder(d) && !d->evict_id && !d->prep_id &&
           !d->prefetch_id && !d->restoring &&
           (p->cfg->pool_share_tenants || sd_same_tenant(d, v)) &&
           sd_mem_backing_covered(d) > SD_MEM_SLACK;
}

/* The member to ask next: the one that would be evicted last. */
static struct sd_member *next_donor(const struct sd_policy *p, const struct sd_member *v)
{
    struct sd_member *best = NULL;
    for (size_t i = 0; i < p->ngpu; i++)
        for (size_t j = 0; j < p->gpu[i]->n; j++) {
            struct sd_member *d = p->gpu[i]->m[j];
            if (may_give(p, d, v) && (!best || sd_mem_evict_before(best, d)))
                best = d;
        }
    return best;
}

static void send_giveback(struct sd_policy *p, struct sd_member *d, struct sd_member *v,
                          uint64_t bytes, uint64_t now)
{
    v->move_due = sd_add_sat(v->move_due, bytes);
    d->gb_for = v;
    d->gb_id = ++p->next_evict_id;
    d->gb_ns = now;
    d->gb_asked = bytes;
    d->gpu->st.givebacks++;
    cs_debug("gpu %u: give back %llu bytes of pool pieces, pid %u, for pid %u's swap-out",
             d->gpu->index, (unsigned long long)bytes, d->client->info.pid,
             v->client->info.pid);
    p->ops.giveback(p->ctx, d, d->gb_id, bytes);
}

/* Asks the members that are not moving for short_by bytes of v's move,
 * the one closest to running first (what they give back is spoken for v);
 * returns what nobody could be asked for (0 when within SD_MEM_SLACK). */
static uint64_t ask_donors(struct sd_policy *p, struct sd_member *v, uint64_t short_by,
                           uint64_t now)
{
    struct sd_member *d;
    while (short_by > SD_MEM_SLACK && (d = next_donor(p, v))) {
        uint64_t amount = min64(sd_mem_backing_covered(d), short_by);
        short_by -= amount;
        send_giveback(p, d, v, amount, now);
    }
    return short_by > SD_MEM_SLACK ? short_by : 0;
}

void sd_takeback_for(struct sd_policy *p, struct sd_member *v, uint64_t bytes, uint64_t now)
{
    v->gb_short = 0;
    v->move_due = 0;
    if (!p->pool_lends || !bytes)
        return;
    uint64_t need = sd_mem_backing_lack(v, bytes);
    uint64_t free = sd_takeback_lendable(p);
    v->move_due = min64(need, free);
    if (need <= free || !p->ops.giveback)
        return;
    v->gb_short = ask_donors(p, v, need - free, now);
    /* The pool is spent on memory that is off the GPU, or the members
     * that hold its pieces are busy: said, so that a run's own pinning
     * can be told from a miscount. */
    if (v->gb_short)
        cs_debug("gpu %u: pid %u's move lacks %llu bytes of backing that neither the pool nor "
                 "a member that is not moving can give now: asked again as members finish "
                 "their own requests", v->gpu->index, v->client->info.pid,
                 (unsigned long long)v->gb_short);
}

uint64_t sd_takeback_paced(const struct sd_policy *p, struct sd_member *v, uint64_t amount,
                           uint64_t *returns)
{
    if (!p->cfg->swap_in_turns || !p->pool_lends || !*returns || !sd_mem_pins_known(v))
        return amount;
    uint64_t lack = sd_mem_backing_lack(v, amount);
    /* What members could give back (EVICT GIVEBACK) is not counted: the
     * daemon cannot tell their lent pieces from backing they pinned
     * themselves, which they keep, and on the H200 a member asked for
     * 12.9 GB gave back 6.4; an estimate too high is pinned by the mover,
     * one too low costs the next holder one more ROOM. */
    lack = sub0(lack, sd_takeback_lendable(p));
    uint64_t wait = min64(lack, *returns);
    *returns -= wait;
    if (wait && wait != v->paced_said)
        cs_debug("gpu %u: pid %u moves %llu of %llu bytes now: the %llu it would pin "
                 "wait for the pieces the next holder's restore gives back",
                 v->gpu->index, v->client->info.pid, (unsigned long long)(amount - wait),
                 (unsigned long long)amount, (unsigned long long)wait);
    v->paced_said = wait;
    return amount - wait;
}

/* Moves still lacking backing nobody could give when they were ordered:
 * what the pool can lend now that nothing counts on (pieces freed since,
 * not those given back for these very moves) is spoken for them, and
 * members that could not be asked then (busy with a move or a request of
 * their own) are asked now. On the H200 a 16 GiB room eviction lacked 5.6
 * GiB while the only member with pieces to spare was finishing its own
 * eviction; the mover pinned 5 GiB of its own in a second, and that
 * member, asked for the next move 1.3 s later, gave back 6 GiB. */
static void retry_short_moves(struct sd_policy *p, uint64_t now)
{
    for (size_t i = 0; i < p->ngpu; i++)
        for (size_t j = 0; j < p->gpu[i]->n; j++) {
            struct sd_member *m = p->gpu[i]->m[j];
            if (!m->gb_short)
                continue;
            if (!moving(m) || m->client->unresponsive) {
                m->gb_short = 0;
                continue;
            }
            uint64_t take = min64(sd_takeback_lendable(p), m->gb_short);
            m->move_due = sd_add_sat(m->move_due, take);
            m->gb_short = sub0(m->gb_short, take) > SD_MEM_SLACK
                              ? ask_donors(p, m, m->gb_short - take, now)
                              : 0;
        }
}

/* What donor d was asked for and did not give back (its driver shut down
 * as its process exits, say: on the H200 a job revoked as its work ended
 * answered 0 bytes of 10.8 GB) is no longer spoken for its mover, which
 * lacks it: asked of the others at the next decision (retry_short_moves). */
static void gave_short(struct sd_member *d, uint64_t given)
{
    struct sd_member *v = d->gb_for;
    uint64_t lack = sub0(d->gb_asked, given);
    d->gb_id = 0;
    d->gb_for = NULL;
    if (!v || !lack || !moving(v) || v->client->unresponsive)
        return;
    v->move_due = sub0(v->move_due, lack);
    v->gb_short = sd_add_sat(v->gb_short, lack);
}

void sd_takeback_forget(struct sd_policy *p, struct sd_member *m)
{
    if (m->gb_id)
        gave_short(m, 0);
    for (size_t i = 0; i < p->ngpu; i++)
        for (size_t j = 0; j < p->gpu[i]->n; j++)
            if (p->gpu[i]->m[j]->gb_for == m)
                p->gpu[i]->m[j]->gb_for = NULL;
}

int sd_takeback_answered(struct sd_policy *p, struct sd_member *m, const struct cs_msg_evicted *e,
                         uint64_t now)
{
    if (!m->gb_id || e->request_id != m->gb_id)
        return 0;
    gave_short(m, e->bytes);
    /* An error: its driver is shut down (its process exiting) or it cannot
     * give back at all. Short: it has no lent pieces left behind resident
     * memory (what it covers is its own pinning, which it keeps). */
    if (e->status)
        m->gb_off = true;
    else if (e->bytes < m->gb_asked)
        m->gb_dry = true;
    m->gpu->st.given_back = sd_add_sat(m->gpu->st.given_back, e->bytes);
    /* What it gave back no longer backs its memory: pin-ahead may ask it
     * again, but not before a second has passed (mem.c PREP_INTERVAL_NS),
     * or the planner would lend the pieces straight back to it. */
    m->prep_covered = sub0(m->prep_covered, e->bytes);
    if (m->pinned_known)
        m->pinned = sub0(m->pinned, e->bytes);
    m->prep_more = false;
    m->prep_ns = now;
    cs_debug("gpu %u: pid %u gave back %llu bytes of pool pieces (asked %llu)", m->gpu->index,
             m->client->info.pid, (unsigned long long)e->bytes,
             (unsigned long long)m->gb_asked);
    sd_node_reschedule(p, now);
    return 1;
}

void sd_takeback_check(struct sd_policy *p, struct sd_gpu *g, uint64_t now)
{
    for (size_t i = 0; i < g->n; i++) {
        struct sd_member *m = g->m[i];
        if (!m->gb_id)
            continue;
        uint64_t due = sd_answer_deadline(p, m->gb_ns, m->gb_asked);
        if (now < due) {
            sd_gpu_want_at(g, due);
            continue;
        }
        gave_short(m, 0);
        m->gb_off = true;
        cs_warn("gpu %u: %s (pid %u) did not answer EVICT GIVEBACK in time: its pool "
                "pieces are not asked back again", g->index, m->client->info.name,
                m->client->info.pid);
    }
    if (p->pool_lends && p->ops.giveback)
        retry_short_moves(p, now);
}
