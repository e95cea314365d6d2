/* room.c: making room on a GPU for a client's allocation (ROOM, EVICT).
 *
 * The hook asks for room (ROOM) when the driver refuses an allocation or a
 * swap-in because other jobs' memory fills the GPU. Only jobs that do not
 * hold the GPU can move their memory out (their gates are closed, their
 * work drained), so the daemon asks them (EVICT), furthest from running
 * first: idle before waiting, lower class before higher, larger vtime
 * before smaller; clients marked unresponsive last, and only for what the
 * others cannot free (last_resort()). The ROOM is answered when every EVICT
 * it caused has been answered (EVICTED) or after revoke_timeout_ms: 0 when
 * anything was moved (the hook retries its allocation),
 * CUDA_ERROR_OUT_OF_MEMORY when nothing could be, or when the allocation cannot fit even with the GPU to itself
 * (the capacity minus the other jobs' unswappable memory), which is what a
 * bare GPU would answer.
 *
 * Room is normally made before a grant (mem.c); ROOM is the safety net for
 * what the model does not see (contexts, libraries, stale reports). A ROOM
 * from a member that does not hold the GPU comes from a prefetch, which is
 * speculative: it is declined at once (the prefetch keeps what fit) — except
 * a ROOM flagged CS_ROOM_CONTEXT, which any client may send when the driver
 * cannot create its context: idle jobs' memory is moved for it.
 *
 * The memory figures come from USAGE and are stale by design; EVICTED
 * adjusts the victim's until its next USAGE.
 *
 * Memory on its way out is waited for rather than replaced by others':
 * a victim that answers with its driver shut down (its process exiting),
 * and a client that disconnected while its process lives on ("departed":
 * the server reports the exit, sd_policy_process_gone), each for a second
 * at most; a uid whose process outlives that is not waited for again for
 * a minute. depart.c keeps that state; what a ROOM does about it is here.
 * A departed client's memory is not waited for when moving what the ROOM
 * needs out of others costs less, both ways, than the exit is still
 * expected to take (copy_beats_exits), with both figures learnt here: how
 * long exits take after the client left (a prior until one was seen), and
 * how fast EVICTs move (those chosen over an exit apart: they run beside a
 * driver's teardown); backing that the victims lack and the pool cannot
 * lend is priced as pinned on the spot. */
#include <cuda.h>
#include <stdlib.h>

#include "common/log.h"
#include "sched/policy_int.h"

/* An EVICT's rate is learnt from moves of at least SD_RATE_MIN_BYTES (a
 * smaller one is mostly the round trip), each taken as at most
 * SD_RATE_MAX_BPS: the bytes are the client's word, and no copy over PCIe
 * 5 x16 is faster, so a client claiming more only counts as that. */
#define SD_RATE_MIN_BYTES (256ull << 20)
#define SD_RATE_MAX_BPS 64000000000ull
/* The most an exit is expected to take after its client left, whatever
 * was learnt: honest ones took 0.1-0.4 s on the H200, and a tenant whose
 * processes linger (up to SD_DEPART_WAIT_NS each) would otherwise have
 * every ROOM beside a departure copy others' memory out instead. */
#define SD_EXIT_EXPECT_MAX_NS (400 * 1000000ull)
/* What an exit is expected to take before any was seen: the lower quartile
 * of 16 on the H200 (101-481 ms from the client's leaving to its process's
 * end, median 146; bench/results/oversubscription.md, 2026-11-30, session
 * 4). Without it a daemon waited at its first job end, the one most runs
 * of a benchmark and a fresh node have: 141-164 ms with the GPU idle, for
 * 2 GiB that an EVICT moves in 45 ms. The lower quartile, so that an exit
 * faster than expected rarely makes the copy the slower choice. */
#define SD_EXIT_PRIOR_NS (130 * 1000000ull)
/* How fast a victim gets backing that neither its own pinning nor the pool
 * covers: it pins it on the spot, a 64 MiB piece per BORROW that came back
 * empty, 15-16 ms each on the H200 (2026-11-30's logs: about 4 GB/s with
 * the round trip). */
#define SD_SELF_PIN_BPS 4000000000.0
/* How fast a copy chosen over an exit is expected to move before one was
 * timed: it runs while the departed process's driver tears its context
 * down, and the H200's two such copies with the pool's pieces at hand
 * moved 2 GiB in 176 and 181 ms (the learnt rate of other EVICTs said
 * 50 ms), beside the victim's own pin-ahead (bench/results/
 * oversubscription.md, 2026-12-01). Learnt from them from then on
 * (exit_copy_bps), apart from other EVICTs. */
#define SD_EXIT_COPY_PRIOR_BPS 12000000000.0

/* Not one whose last eviction moved less than asked (evict_stuck, until its
 * memory changes): it would answer the same again. */
static bool may_evict(const struct sd_member *v, const struct sd_member *asker)
{
    return v != asker && !sd_is_holder(v) && !v->evict_id && !v->no_swap &&
           !v->evict_stuck && !v->restore_blocked && sd_mem_movable(v) > 0;
}

static struct sd_member *next_victim(const struct sd_gpu *g, const struct sd_member *asker)
{
    struct sd_member *best = NULL;
    for (size_t i = 0; i < g->n; i++)
        if (may_evict(g->m[i], asker) && (!best || sd_mem_evict_before(g->m[i], best)))
            best = g->m[i];
    return best;
}

/* An unresponsive client's memory is not planned around (its report may be
 * a lie, and it will not be waited for), so its REVOKEs ask for no swap-out
 * and nothing else moves it. But a ROOM follows a real allocation failure:
 * when nobody else can move enough, its memory is what is in the way. It
 * is asked last, for what is still missing, one EVICT at a time (an
 * unanswered one is not repeated), and the ROOM waits for its answer up to
 * its deadline like any other's. Without this, a client marked once (one
 * drain longer than revoke_timeout_ms) and honest afterwards kept its
 * memory on the GPU for the rest of its connection, and a job that did not
 * fit beside it stalled in the restore of every grant (docs/model.md,
 * finding 4). */
static bool may_ask_unresponsive(const struct sd_member *v, const struct sd_member *asker)
{
    return v != asker && v->client->unresponsive && !sd_is_holder(v) && !v->evict_id &&
           !v->no_swap && v->resident > v->unswappable;
}

static struct sd_member *last_resort(const struct sd_gpu *g, const struct sd_member *asker)
{
    struct sd_member *best = NULL;
    for (size_t i = 0; i < g->n; i++)
        if (may_ask_unresponsive(g->m[i], asker) &&
            (!best || sd_mem_evict_before(g->m[i], best)))
            best = g->m[i];
    return best;
}

/* Asks victim v for what of *need it can move (movable), for m's ROOM. */
static void ask(struct sd_policy *p, struct sd_member *m, struct sd_member *v, uint64_t movable,
                uint64_t *need, uint64_t now)
{
    uint64_t amount = movable < *need ? movable : *need;
    *need -= amount;
    m->room_wait++;
    sd_mem_send_evict(p, v, amount, m, now);
}

/* Asks the victims after v for the `short_by` bytes v did not move for m's
 * ROOM. A victim can move less than the memory it reported: its process is
 * exiting (its driver is shut down: on the H200 a job revoked as idle at
 * its end was first in line and answered 0 bytes, and the allocation it
 * was asked for was refused while two waiting jobs had 30 GB they could
 * move), or its host memory ran short. */
static void ask_rest(struct sd_policy *p, struct sd_member *m, uint64_t short_by, uint64_t now)
{
    struct sd_member *v;
    while (short_by > 0 && (v = next_victim(m->gpu, m)))
        ask(p, m, v, sd_mem_movable(v), &short_by, now);
}

/* m's ROOM waits for exiting v (sd_room_victim_lost() counts its memory as
 * moved), until v's exit_until; counted in m->room_wait like an EVICT. */
static void wait_for_exit(struct sd_member *v, struct sd_member *m, uint64_t asked)
{
    v->evict_for = m;
    v->exit_asked = asked;
    m->room_wait++;
    sd_gpu_want_at(m->gpu, v->exit_until);
}

/* When the departed clients' exits m's ROOM would wait for are expected to
 * end: the latest of their leaving plus the learnt exit time (the prior
 * before any was seen). */
static uint64_t exits_expected(const struct sd_policy *p, const struct sd_gpu *g, uint64_t now)
{
    uint64_t end = 0;
    for (size_t i = 0; i < g->ndep; i++) {
        const struct sd_departed *d = &g->dep[i];
        uint64_t expect = !p->exit_ewma_ns ? SD_EXIT_PRIOR_NS
                          : p->exit_ewma_ns < SD_EXIT_EXPECT_MAX_NS ? p->exit_ewma_ns
                                                                    : SD_EXIT_EXPECT_MAX_NS;
        uint64_t at = sd_add_sat(d->left, expect);
        if (!d->room_for && now < d->until && at > end)
            end = at;
    }
    return end;
}

/* What m's ROOM could have moved out of others without touching the next
 * holder (whose memory it would have to bring back at its grant). */
static uint64_t movable_beside(const struct sd_gpu *g, const struct sd_member *m)
{
    const struct sd_member *w = sd_next_holder(g);
    uint64_t live = 0;
    for (size_t i = 0; i < g->n; i++)
        if (g->m[i] != w && may_evict(g->m[i], m))
            live = sd_add_sat(live, sd_mem_movable(g->m[i]));
    return live;
}

/* The victim m's ROOM would ask after prev (NULL: the first), in eviction
 * order, the next holder w aside. */
static struct sd_member *victim_after(const struct sd_gpu *g, const struct sd_member *m,
                                      const struct sd_member *w, const struct sd_member *prev)
{
    struct sd_member *best = NULL;
    for (size_t i = 0; i < g->n; i++) {
        struct sd_member *v = g->m[i];
        if (v != w && may_evict(v, m) && (!prev || sd_mem_evict_before(prev, v)) &&
            (!best || sd_mem_evict_before(v, best)))
            best = v;
    }
    return best;
}

/* The backing that moving `need` out of the victims beside the next holder
 * lacks: what each moves beyond the backing it has pinned, less what the
 * pool can lend now. Known only where the pool lends and each victim says
 * what it has pinned (CS_HELLO_PIN); 0 otherwise, as before either was
 * known: the learnt rate is all there is. */
static uint64_t backing_lack(const struct sd_policy *p, const struct sd_member *m,
                             uint64_t need)
{
    const struct sd_gpu *g = m->gpu;
    const struct sd_member *w = sd_next_holder(g), *v = NULL;
    uint64_t lack = 0;
    if (!p->pool_lends)
        return 0;
    while (need > 0 && (v = victim_after(g, m, w, v))) {
        if (!sd_mem_pins_known(v))
            return 0;
        uint64_t take = sd_mem_movable(v) < need ? sd_mem_movable(v) : need;
        lack = sd_add_sat(lack, sd_mem_backing_lack(v, take));
        need -= take;
    }
    uint64_t lendable = sd_takeback_lendable(p);
    return lack > lendable ? lack - lendable : 0;
}

/* Asks the victims, in eviction order, for m's `need` bytes; returns what
 * none of them could be asked for. Paced (issue 20): while m restores, each
 * of its ROOMs comes with the pool's pieces of what it restored since (its
 * hook gives them back first), so what the victims would pin of their own
 * now is left to m's next ROOM (sd_takeback_paced), up to what m still
 * has out beyond this allocation, never below the allocation itself: on
 * the H200 a holder's restore waited 5.8 s for two victims pinning 18 GiB
 * while its own restored 32 GB sat on the pool's pieces. */
static uint64_t ask_victims(struct sd_policy *p, struct sd_member *m, uint64_t bytes,
                            uint64_t need, uint64_t now)
{
    uint64_t rest = m->swapped > bytes && m->client->info.giveback ? m->swapped - bytes : 0;
    uint64_t returns = need > bytes ? need - bytes : 0;
    if (rest < returns)
        returns = rest;
    const struct sd_member *prev = NULL;
    struct sd_member *v;
    while (need > 0 && (v = victim_after(m->gpu, m, NULL, prev))) {
        prev = v;
        uint64_t amount = sd_mem_movable(v) < need ? sd_mem_movable(v) : need;
        need -= amount;
        amount = sd_takeback_paced(p, v, amount, &returns);
        if (!amount)
            continue;
        m->room_wait++;
        sd_mem_send_evict(p, v, amount, m, now);
    }
    return need;
}

/* Whether m's ROOM moves `need` out of others rather than wait for the
 * departed clients' exits: when the copy out, and the copy back counted as
 * if on some later critical path, take less than the exits are still
 * expected to take. On the H200 the room of a job granted at another's end
 * waited 91-150 ms for that exit (the client leaves 0.1-0.4 s before its
 * process), for 2 GiB that EVICTs moved in 40 ms. Without the rate learnt
 * (the exit time has a prior), or with the exits due, it waits:
 * SD_EXIT_WAIT_NS says why copying large amounts back and forth loses.
 * Backing the pool cannot lend is pinned by the victim on the spot, and
 * priced so (backing_lack): at a job's end the pool is often spent on the
 * memory that is out and on the departed process's pieces, and on the
 * H200 both copies chosen over an exit that way (2 GiB, 106-119 ms priced)
 * took 270-336 ms, while the exits they passed over came 180-200 ms after
 * the ROOM (bench/results/oversubscription.md, 2026-12-01). */
static bool copy_beats_exits(const struct sd_policy *p, const struct sd_member *m,
                             uint64_t need, uint64_t now)
{
    const struct sd_gpu *g = m->gpu;
    if (!need || !g->evict_bps || !g->ndep)
        return false;
    uint64_t end = exits_expected(p, g, now);
    if (end <= now || movable_beside(g, m) < need)
        return false;
    uint64_t lack = backing_lack(p, m, need);
    double out_bps = g->exit_copy_bps ? (double)g->exit_copy_bps : SD_EXIT_COPY_PRIOR_BPS;
    double copy_ns = (double)need / out_bps * 1e9 + (double)need / (double)g->evict_bps * 1e9 +
                     (double)lack / SD_SELF_PIN_BPS * 1e9;
    if (copy_ns >= (double)(end - now)) {
        if (lack)
            cs_debug("gpu %u: room for pid %u: the exits expected in %.0f ms are waited for: "
                     "moving %llu bytes out of others would pin %llu bytes the pool cannot "
                     "lend (%.0f ms)", g->index, m->client->info.pid,
                     (double)(end - now) / 1e6, (unsigned long long)need,
                     (unsigned long long)lack, copy_ns / 1e6);
        return false;
    }
    cs_debug("gpu %u: room for pid %u: %llu bytes moved out of others (%.0f ms both ways) "
             "rather than waited for from exits expected in %.0f ms", g->index,
             m->client->info.pid, (unsigned long long)need, copy_ns / 1e6,
             (double)(end - now) / 1e6);
    return true;
}

/* A new ROOM counts first on the memory of members on their way out, and
 * of departed clients whose processes are still exiting (unless copying
 * is cheaper: copy_beats_exits). */
static void wait_for_exits(const struct sd_policy *p, struct sd_member *m, uint64_t *need,
                           uint64_t now)
{
    struct sd_gpu *g = m->gpu;
    for (size_t i = 0; i < g->n && *need > 0; i++) {
        struct sd_member *v = g->m[i];
        if (!sd_depart_exit_awaited(v, m, now))
            continue;
        uint64_t amount = v->resident < *need ? v->resident : *need;
        *need -= amount;
        wait_for_exit(v, m, amount);
    }
    m->room_copies = copy_beats_exits(p, m, *need, now);
    if (m->room_copies)
        return;
    for (size_t i = 0; i < g->ndep && *need > 0; i++) {
        struct sd_departed *d = &g->dep[i];
        if (d->room_for || now >= d->until)
            continue;
        d->asked = d->bytes < *need ? d->bytes : *need;
        *need -= d->asked;
        d->room_for = m;
        m->room_wait++;
        sd_gpu_want_at(g, d->until);
    }
}

static void reply(struct sd_policy *p, struct sd_member *m, uint64_t id, int32_t status)
{
    if (status == 0) {
        m->st.rooms++;
        m->gpu->st.room_made++;
    } else {
        m->st.rooms_refused++;
        m->gpu->st.room_refused++;
    }
    p->ops.room_reply(p->ctx, m, id, status);
}

/* A holder that waited for room could not use its slice meanwhile (it was
 * blocked in an allocation, and the wait is the evictions' doing): it gets
 * that time back, or its quantum would end while the room it asked for is
 * still being made, and the evictions would have been for nothing. now = 0
 * when the answer has no time (a victim left): no credit then. */
static void answer(struct sd_policy *p, struct sd_member *m, int32_t status, uint64_t now)
{
    if (now && sd_is_holder(m) && now > m->room_since) {
        uint64_t paused = now - m->room_since;
        m->slice_ns = m->slice_ns + paused < now ? m->slice_ns + paused : now;
        if (status == 0)
            sd_switch_room_waited(m->gpu, m, paused);
    }
    m->room_active = false;
    m->room_wait = 0;
    if (status != 0)
        m->room_bytes = 0; /* nothing will be placed */
    cs_debug("gpu %u: room for pid %u: %s (%llu bytes moved)", m->gpu->index,
             m->client->info.pid, status ? "none" : "made", (unsigned long long)m->room_freed);
    reply(p, m, m->room_id, status);
}

static int32_t outcome(const struct sd_member *m)
{
    return m->room_freed > 0 ? 0 : CUDA_ERROR_OUT_OF_MEMORY;
}

/* The most m can have resident with the GPU to itself: the capacity minus
 * what the others can never move (the raw total when the capacity is
 * unknown; no limit when that is unknown too). */
static uint64_t room_limit(const struct sd_policy *p, const struct sd_gpu *g,
                           const struct sd_member *m)
{
    uint64_t cap = sd_gpu_capacity(p, g);
    if (!cap)
        return g->mem_total ? g->mem_total : UINT64_MAX;
    uint64_t fixed = 0;
    for (size_t i = 0; i < g->n; i++)
        if (g->m[i] != m)
            fixed = sd_add_sat(fixed, sd_mem_fixed(g->m[i]));
    return cap > fixed ? cap - fixed : 0;
}

/* Nobody is evicted to take a client beyond its granted memory limit
 * (info.mem_limit, access.c), which a client without TERMS does not know.
 * Resident, not footprint: a restore asks again for bytes its footprint
 * already counts. */
static bool beyond_grant(const struct sd_member *m, uint64_t bytes)
{
    uint64_t limit = m->client->info.mem_limit;
    return limit && sd_add_sat(m->resident, bytes) > limit;
}

int sd_policy_room(struct sd_policy *p, struct sd_client *c, const struct cs_msg_room *r,
                   uint64_t now, const char **why)
{
    struct sd_member *m = r->slot < CS_MAX_DEVICES ? c->slot[r->slot] : NULL;
    if (!m) {
        *why = "slot not attached";
        return SD_EPROTO;
    }
    if (m->room_active) {
        *why = "ROOM while the previous one is unanswered";
        return SD_EPROTO;
    }
    struct sd_gpu *g = m->gpu;
    bool for_context = r->flags & CS_ROOM_CONTEXT;
    if (!sd_is_holder(m) && !for_context) {
        /* A prefetch ran out of room: it is speculative, nobody is
         * evicted for it (the planner already freed what it should). With
         * no prefetch outstanding, it is a restore for a grant that is no
         * longer current (a previous daemon's, or taken back): the
         * client's worker retries until it fits and answers nothing else
         * meanwhile. It is declined too, but never chosen as a victim,
         * and granted first: then its restore is that grant's. */
        bool blocked = !m->prefetch_id && !m->restore_blocked;
        if (blocked) {
            m->restore_blocked = true;
            cs_info("gpu %u: pid %u restores memory for a grant it no longer has; "
                    "it goes next", g->index, m->client->info.pid);
        }
        p->ops.room_reply(p->ctx, m, r->request_id, CUDA_ERROR_OUT_OF_MEMORY);
        if (blocked)
            sd_gpu_reschedule(p, g, now);
        return SD_OK;
    }
    m->room_id = r->request_id;
    m->room_freed = 0;
    m->room_wait = 0;
    if (sd_add_sat(m->resident, r->bytes) > room_limit(p, g, m) || beyond_grant(m, r->bytes)) {
        reply(p, m, r->request_id, CUDA_ERROR_OUT_OF_MEMORY);
        return SD_OK; /* cannot fit even alone, or not allowed to */
    }
    /* At least what the model says it misses: one round trip, not one per
     * allocation (a restore asks for one segment at a time). A new context
     * needs just its own bytes, whoever asks: a process that cannot create
     * its context on a GPU full of idle jobs' memory could never start. */
    uint64_t need = r->bytes;
    uint64_t model = for_context ? 0 : sd_mem_shortfall(p, g, m);
    if (model > need)
        need = model;
    wait_for_exits(p, m, &need, now);
    need = ask_victims(p, m, r->bytes, need, now);
    struct sd_member *v;
    while (need > 0 && (v = last_resort(g, m)))
        ask(p, m, v, v->resident - v->unswappable, &need, now);
    if (m->room_wait == 0) {
        reply(p, m, r->request_id, CUDA_ERROR_OUT_OF_MEMORY);
        return SD_OK;
    }
    m->room_active = true;
    m->room_since = now;
    m->room_bytes = r->bytes;
    m->room_deadline = now + (uint64_t)p->cfg->revoke_timeout_ms * 1000000ull;
    sd_gpu_want_at(g, m->room_deadline);
    return SD_OK;
}

/* g's EVICT rates (copy_beats_exits), from an EVICT that moved `bytes` in
 * ns, sent to answered: one chosen over an exit teaches that rate alone. */
static void learn_rate(struct sd_gpu *g, uint64_t bytes, uint64_t ns, bool beside_exit)
{
    if (bytes < SD_RATE_MIN_BYTES)
        return;
    double bps = (double)bytes / (double)(ns ? ns : 1) * 1e9;
    uint64_t s = bps >= (double)SD_RATE_MAX_BPS ? SD_RATE_MAX_BPS : (uint64_t)bps;
    uint64_t *rate = beside_exit ? &g->exit_copy_bps : &g->evict_bps;
    *rate = sd_ewma(*rate, s ? s : 1);
}

int sd_policy_evicted(struct sd_policy *p, struct sd_client *c, const struct cs_msg_evicted *e,
                      uint64_t now, const char **why)
{
    struct sd_member *v = e->slot < CS_MAX_DEVICES ? c->slot[e->slot] : NULL;
    if (!v) {
        *why = "slot not attached";
        return SD_EPROTO;
    }
    /* Either answer frees the node's pinning (mem.c): every GPU may now
     * send its next PREPARE. */
    if (sd_mem_evicted_prepare(v, e)) {
        sd_node_reschedule(p, now);
        return SD_OK;
    }
    if (sd_takeback_answered(p, v, e, now))
        return SD_OK;
    /* An answer to an EVICT of an earlier connection (the hook's worker can
     * finish one after reconnecting) matches nothing here: ignored. */
    if (!v->evict_id || e->request_id != v->evict_id)
        return SD_OK;
    uint64_t asked = v->evict_bytes;
    uint64_t moved = sd_mem_on_evicted(v, e);
    learn_rate(v->gpu, moved, now - v->evict_ns, v->evict_beside_exit);
    v->evict_beside_exit = false;
    struct sd_member *asker = v->evict_for;
    v->evict_for = NULL;
    /* Waited for for SD_EXIT_WAIT_NS from its first such answer, once per
     * connection: a client that says so again later is not believed. */
    sd_depart_mark_exiting(p, v, e->status, now);
    if (asker) {
        asker->room_freed += moved;
        if (!moved && asker->room_active && sd_depart_exit_awaited(v, asker, now)) {
            asker->room_wait--; /* this EVICT's; the wait counts instead */
            wait_for_exit(v, asker, asked);
        } else if (moved < asked && asker->room_active) {
            ask_rest(p, asker, asked - moved, now);
        }
        if (!v->evict_for && --asker->room_wait == 0)
            answer(p, asker, outcome(asker), now);
    }
    sd_node_reschedule(p, now);
    return SD_OK;
}

/* Whatever serves m's ROOM no longer answers for it (answered, or m gone). */
static void forget_asker(struct sd_gpu *g, const struct sd_member *m)
{
    for (size_t j = 0; j < g->n; j++)
        if (g->m[j]->evict_for == m)
            g->m[j]->evict_for = NULL;
    for (size_t j = 0; j < g->ndep; j++)
        if (g->dep[j].room_for == m)
            g->dep[j].room_for = NULL;
}

/* ---- memory on its way out, for the ROOMs waiting for it (depart.c) --------------- */

/* Entry i of g is done: its process exited (gone), or it outlived its
 * wait. The ROOM waiting for it counts its memory as moved, or asks the
 * others for it. The caller decides on g again (this may run inside a
 * decision: sd_room_check). */
static void departed_done(struct sd_policy *p, struct sd_gpu *g, size_t i, bool gone,
                          uint64_t now)
{
    struct sd_departed d = sd_depart_take(p, g, i, gone, now);
    struct sd_member *m = d.room_for;
    if (m) {
        if (gone)
            m->room_freed = sd_add_sat(m->room_freed, d.asked);
        else
            ask_rest(p, m, d.asked, now);
        if (--m->room_wait == 0)
            answer(p, m, outcome(m), now);
    }
}

void sd_policy_process_gone(struct sd_policy *p, uint64_t client, uint64_t now)
{
    for (size_t k = 0; k < p->ngpu; k++) {
        struct sd_gpu *g = p->gpu[k];
        bool found = false;
        for (size_t i = g->ndep; i-- > 0;) {
            if (g->dep[i].client == client) {
                cs_debug("gpu %u: client %llu's process exited: its %llu bytes are free",
                         g->index, (unsigned long long)client,
                         (unsigned long long)g->dep[i].bytes);
                departed_done(p, g, i, true, now);
                found = true;
            }
        }
        if (found) /* its memory is free: prefetches may use it */
            sd_gpu_reschedule(p, g, now);
    }
}

static void departed_overdue(struct sd_policy *p, struct sd_gpu *g, uint64_t now)
{
    for (size_t i = g->ndep; i-- > 0;) {
        if (now < g->dep[i].until) {
            sd_gpu_want_at(g, g->dep[i].until);
            continue;
        }
        cs_info("gpu %u: client %llu's process still there %llu ms after it left; its %llu "
                "bytes no longer counted as in use", g->index,
                (unsigned long long)g->dep[i].client,
                (unsigned long long)(SD_DEPART_WAIT_NS / 1000000),
                (unsigned long long)g->dep[i].bytes);
        sd_depart_distrust(p, g->dep[i].uid, now);
        departed_done(p, g, i, false, now);
    }
}

/* A victim whose process was to exit and is still there after
 * SD_EXIT_WAIT_NS: what it was asked goes to the next victims. */
static void exits_overdue(struct sd_policy *p, struct sd_gpu *g, uint64_t now)
{
    for (size_t j = 0; j < g->n; j++) {
        struct sd_member *v = g->m[j], *m = v->evict_for;
        if (!m || v->evict_id || !v->exiting)
            continue;
        if (now < v->exit_until) {
            sd_gpu_want_at(g, v->exit_until);
            continue;
        }
        cs_info("gpu %u: pid %u still there %llu ms after its driver shut down; "
                "room for pid %u asked of others", g->index, v->client->info.pid,
                (unsigned long long)(SD_EXIT_WAIT_NS / 1000000), m->client->info.pid);
        v->evict_for = NULL;
        sd_depart_distrust(p, v->client->info.uid, now);
        ask_rest(p, m, v->exit_asked, now);
        if (--m->room_wait == 0)
            answer(p, m, outcome(m), now);
    }
}

void sd_room_check(struct sd_policy *p, struct sd_gpu *g, uint64_t now)
{
    exits_overdue(p, g, now);
    departed_overdue(p, g, now);
    for (size_t i = 0; i < g->n; i++) {
        struct sd_member *m = g->m[i];
        if (!m->room_active)
            continue;
        if (now < m->room_deadline) {
            sd_gpu_want_at(g, m->room_deadline);
            continue;
        }
        /* Victims still working on it keep their EVICT (a late EVICTED is
         * accepted) but no longer answer for this ROOM. */
        forget_asker(g, m);
        cs_warn("gpu %u: room for pid %u not made within %u ms", g->index,
                m->client->info.pid, p->cfg->revoke_timeout_ms);
        answer(p, m, outcome(m), now);
    }
}

void sd_room_victim_lost(struct sd_policy *p, struct sd_member *v, uint64_t now)
{
    struct sd_member *asker = v->evict_for;
    v->evict_for = NULL;
    if (asker && v->exiting) /* gone as it was to: its memory with it */
        asker->room_freed = sd_add_sat(asker->room_freed, v->resident);
    if (asker && --asker->room_wait == 0)
        answer(p, asker, outcome(asker), now);
}

void sd_room_forget(struct sd_policy *p, struct sd_member *m)
{
    struct sd_gpu *g = m->gpu;
    forget_asker(g, m);
    sd_room_victim_lost(p, m, 0);
}
