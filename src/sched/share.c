/* share.c: the class share cap (issue 17, docs/priority.md).
 *
 * Strict priority lets a runaway high-class job (or a normal one beside
 * low ones) keep a GPU for ever. The cap: per GPU, over a sliding window of
 * class_share_window_ms, a class C is *denied* while one of its members
 * waits, none of them holds the GPU, and a better class holds or wants it.
 * When C has been denied more than class_share_max_pct of the window, its
 * best waiter is owed a turn: the better-class holders are revoked (REVOKE
 * QUANTUM: no new reason, old clients reject unknown ones), nothing else
 * is granted before it, and once granted it is not preempted by a better
 * class for window * (100 - cap) / 100 (at most a quantum). Then strict
 * priority resumes. The turn is what gives C its (100 - cap)% share: as
 * long as C keeps waiting, the window says it is owed one again as soon as
 * the better classes' time in it passes the cap. A class that waited a
 * whole window with no turn was denied all of it, which is above any cap
 * below 100, so it gets one. Several starved classes take turns, the best
 * first. cap = 100: never (today's strict priority).
 *
 * Co-running in shared mode is not denial (C holds the GPU beside the
 * better class: channel-group timeslices decide); a gated waiter passed
 * over for a latency-critical job (lcgate.c) is, and its turn lifts the
 * gate for its length.
 *
 * The window is kept in SD_SHARE_BUCKETS buckets of denied time per class;
 * the oldest bucket counts for the part of it still inside the window. The
 * time is accounted at the start of every decision with the flags computed
 * at the end of the previous one: every change of lease state happens in an
 * entry point that ends with a decision at the same time. */
#include "sched/policy_int.h"

#include <string.h>

#include "common/log.h"

#define NB (SD_SHARE_BUCKETS + 1) /* one more slot: the partial oldest bucket */

static uint64_t window_ns(const struct sd_policy *p)
{
    return (uint64_t)p->cfg->class_share_window_ms * SD_MS;
}

static bool capped(const struct sd_policy *p)
{
    return p->cfg->class_share_max_pct < 100;
}

/* The bucket of absolute index k, emptied first if it held an older one. */
static size_t slot_of(struct sd_gpu *g, uint64_t k)
{
    size_t s = (size_t)(k % NB);
    if (g->share_k[s] != k) {
        g->share_k[s] = k;
        for (int c = 0; c < CS_PRIO_COUNT; c++)
            g->share_ns[c][s] = 0;
    }
    return s;
}

/* Adds [a, b) to class c's denied time. */
static void add_denied(struct sd_gpu *g, int c, uint64_t a, uint64_t b, uint64_t w)
{
    uint64_t bw = g->share_bw;
    if (b > a + w)
        a = b - w; /* older than the window: it would be dropped anyway */
    while (a < b) {
        uint64_t k = a / bw, end = (k + 1) * bw < b ? (k + 1) * bw : b;
        g->share_ns[c][slot_of(g, k)] += end - a;
        a = end;
    }
}

/* Class c's denied time in the window ending at now. */
static uint64_t denied_in_window(struct sd_gpu *g, int c, uint64_t now, uint64_t w)
{
    uint64_t bw = g->share_bw, kn = now / bw, from = now > w ? now - w : 0, k0 = from / bw;
    uint64_t sum = 0;
    for (uint64_t k = k0; k <= kn; k++) {
        size_t s = (size_t)(k % NB);
        if (g->share_k[s] != k)
            continue;
        uint64_t v = g->share_ns[c][s];
        if (k == k0 && k != kn) /* the part of the oldest bucket inside the window */
            v = v / bw * ((k + 1) * bw - from) + v % bw * ((k + 1) * bw - from) / bw;
        sum += v;
    }
    return sum;
}

void sd_share_account(struct sd_policy *p, struct sd_gpu *g, uint64_t now)
{
    uint64_t w = window_ns(p), bw = w / SD_SHARE_BUCKETS;
    if (bw == 0)
        bw = 1;
    if (g->share_bw != bw) { /* the window changed: start it afresh */
        memset(g->share_k, 0xff, sizeof g->share_k);
        g->share_bw = bw;
    }
    if (g->share_mark_ns && now > g->share_mark_ns)
        for (int c = 0; c < CS_PRIO_COUNT; c++)
            if (g->share_denied[c])
                add_denied(g, c, g->share_mark_ns, now, w);
    g->share_mark_ns = now;
}

/* Whether class c is denied now (see the top of the file). */
static bool denied_now(const struct sd_gpu *g, int c)
{
    bool waits = false, holds = false, better = false;
    for (size_t i = 0; i < g->n; i++) {
        const struct sd_member *m = g->m[i];
        int mc = (int)m->client->info.priority;
        if (mc == c) {
            waits |= m->state == CS_STATE_WAITING;
            holds |= sd_is_holder(m);
        } else if (mc < c) {
            better |= m->state != CS_STATE_IDLE;
        }
    }
    return waits && !holds && better && !g->draining && !g->restoring;
}

void sd_share_update(struct sd_gpu *g)
{
    for (int c = 0; c < CS_PRIO_COUNT; c++)
        g->share_denied[c] = denied_now(g, c);
}

static uint64_t turn_ns(const struct sd_policy *p, const struct sd_gpu *g)
{
    uint64_t t = window_ns(p) / 100 * (100 - p->cfg->class_share_max_pct);
    uint64_t q = sd_gpu_quantum_ns(p, g);
    if (t > q)
        t = q;
    return t > SD_MS ? t : SD_MS;
}

static struct sd_member *best_of_class(const struct sd_gpu *g, int c)
{
    struct sd_member *best = NULL;
    for (size_t i = 0; i < g->n; i++) {
        struct sd_member *m = g->m[i];
        if (m->state == CS_STATE_WAITING && (int)m->client->info.priority == c &&
            (!best || sd_waiter_before(m, best)))
            best = m;
    }
    return best;
}

/* The best class over its cap, or -1. For a denied class under it: a look
 * again when it could be over (its denied time grows at most as fast as
 * the clock). */
static int starved_class(const struct sd_policy *p, struct sd_gpu *g, uint64_t now)
{
    uint64_t w = window_ns(p), allowed = w / 100 * p->cfg->class_share_max_pct;
    for (int c = CS_PRIO_HIGH + 1; c < CS_PRIO_COUNT; c++) {
        if (!denied_now(g, c))
            continue;
        uint64_t d = denied_in_window(g, c, now, w);
        if (d > allowed)
            return c;
        sd_gpu_want_at(g, now + (allowed - d) + 1);
    }
    return -1;
}

struct sd_member *sd_share_target(struct sd_policy *p, struct sd_gpu *g, uint64_t now)
{
    if (g->share_holder && (!sd_is_holder(g->share_holder) || now >= g->share_until)) {
        cs_debug("gpu %u: share turn of pid %u over", g->index,
                 g->share_holder->client->info.pid);
        g->share_holder = NULL;
    }
    if (g->share_holder) {
        sd_gpu_want_at(g, g->share_until);
        return NULL;
    }
    if (g->share_pending && g->share_pending->state != CS_STATE_WAITING)
        g->share_pending = NULL;
    if (!capped(p)) {
        g->share_pending = NULL;
        return NULL;
    }
    if (!g->share_pending) {
        int c = starved_class(p, g, now);
        if (c < 0)
            return NULL;
        g->share_pending = best_of_class(g, c);
        cs_info("gpu %u: %s class waited more than %u%% of %u ms: pid %u gets a turn",
                g->index, cs_priority_name(c), 100 - p->cfg->class_share_max_pct,
                p->cfg->class_share_window_ms, g->share_pending->client->info.pid);
    }
    return g->share_pending;
}

void sd_share_granted(const struct sd_policy *p, struct sd_gpu *g, struct sd_member *m,
                      uint64_t now)
{
    if (m != g->share_pending)
        return;
    g->share_pending = NULL;
    g->share_holder = m;
    g->share_until = now + turn_ns(p, g);
    g->st.share_turns++;
    sd_gpu_want_at(g, g->share_until);
}

bool sd_share_protected(const struct sd_gpu *g, const struct sd_member *h, uint64_t now)
{
    return h == g->share_holder && now < g->share_until;
}

bool sd_share_owed(const struct sd_gpu *g, const struct sd_member *w)
{
    return w == g->share_pending;
}

void sd_share_forget(struct sd_gpu *g, const struct sd_member *m)
{
    if (g->share_pending == m)
        g->share_pending = NULL;
    if (g->share_holder == m)
        g->share_holder = NULL;
}
