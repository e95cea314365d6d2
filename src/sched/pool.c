/* pool.c: the node-wide pinned pool's bookkeeping; see pool.h for the
 * rules. Pure: no syscalls, no driver, no clock. Pieces live in a dense
 * array (a removed piece's place takes the last one) found by id through an
 * open-addressing index; borrower clients and tenants are short arrays
 * searched linearly (a node has few of them next to its pieces). */
#include "sched/pool.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"

enum { CL_BIG = 0, CL_SMALL = 1 };

static uint64_t sub0(uint64_t a, uint64_t b)
{
    return a > b ? a - b : 0;
}

/* x rounded up to a multiple of m (> 0); down where up would overflow. */
static uint64_t round_up(uint64_t x, uint64_t m)
{
    uint64_t r = x % m;
    if (!r)
        return x;
    return x > UINT64_MAX - (m - r) ? x - r : x + (m - r);
}

/* ---- classes and targets --------------------------------------------------- */

/* With cfg.piece == SD_POOL_SMALL every piece is big: one class. */
static int class_of(const struct sd_pool *p, uint64_t size)
{
    return size == SD_POOL_SMALL && p->cfg.piece != SD_POOL_SMALL ? CL_SMALL : CL_BIG;
}

static uint64_t class_size(const struct sd_pool *p, int c)
{
    return c == CL_SMALL ? SD_POOL_SMALL : p->cfg.piece;
}

static uint64_t class_pinned(const struct sd_pool *p, int c)
{
    return (uint64_t)p->count[c] * class_size(p, c);
}

static uint64_t pinned_bytes(const struct sd_pool *p)
{
    return class_pinned(p, CL_BIG) + class_pinned(p, CL_SMALL);
}

/* What a class is pinned up to: the small target, or the rest of the
 * target in whole big pieces (so the big class overshoots by less than a
 * piece rather than falling short of its share). */
static uint64_t class_goal(const struct sd_pool *p, int c)
{
    if (c == CL_SMALL)
        return p->small_target;
    return round_up(p->target - p->small_target, p->cfg.piece);
}

/* In whole big pieces, up where that stays within max_bytes, else down:
 * pin_allowed never pins past max_bytes, and a target rounded up past it
 * (half of a 125 GiB host's RAM is 1006.7 pieces of 64 MiB) could never be
 * reached: the pool never said it was warm, and a benchmark waiting for
 * that waited out its time (2026-12-01). */
static uint64_t target_of(const struct sd_pool_cfg *cfg, uint64_t want)
{
    uint64_t t = want < cfg->min_bytes ? cfg->min_bytes : want;
    if (t > cfg->max_bytes)
        t = cfg->max_bytes;
    uint64_t up = round_up(t, cfg->piece);
    return up <= cfg->max_bytes ? up : t - t % cfg->piece;
}

/* D (pool.h): the small demand's high-water, raised at once, halved once
 * per linger_ns without being reached again. The demand counts pieces, at
 * most max_pieces (more could never be pinned). */
static void small_demand_update(struct sd_pool *p, uint64_t now)
{
    uint64_t pieces = (uint64_t)p->lent[CL_SMALL] + p->small_missed;
    if (pieces > p->cfg.max_pieces)
        pieces = p->cfg.max_pieces;
    uint64_t d = pieces * SD_POOL_SMALL;
    p->small_missed = 0;
    if (d >= p->small_hw) {
        p->small_hw = d;
        p->small_hw_at = now;
    } else if (sub0(now, p->small_hw_at) >= p->cfg.linger_ns) {
        uint64_t half = p->small_hw / 2 / SD_POOL_SMALL * SD_POOL_SMALL;
        p->small_hw = d > half ? d : half;
        p->small_hw_at = now;
    }
}

/* ---- the index: id -> place in pc[] -------------------------------------------- */

/* An odd multiplier permutes the low bits, so consecutive ids (the usual
 * case: they are handed out in order) take distinct slots. */
static size_t ix_home(const struct sd_pool *p, uint32_t id)
{
    return (size_t)(id * 2654435761u) & (p->ix_size - 1);
}

/* The slot holding id, or the empty one where it would go (the table is
 * never more than half full, so there is one). */
static size_t ix_find(const struct sd_pool *p, uint32_t id)
{
    size_t mask = p->ix_size - 1, s = ix_home(p, id);
    while (p->ix[s] && p->pc[p->ix[s] - 1].id != id)
        s = (s + 1) & mask;
    return s;
}

/* Empties slot s, shifting back the entries of its probe run that may sit
 * there, so that every entry stays reachable from its home slot. */
static void ix_delete(struct sd_pool *p, size_t s)
{
    size_t mask = p->ix_size - 1;
    for (size_t j = (s + 1) & mask; p->ix[j]; j = (j + 1) & mask) {
        size_t home = ix_home(p, p->pc[p->ix[j] - 1].id);
        if (((j - home) & mask) >= ((j - s) & mask)) {
            p->ix[s] = p->ix[j];
            s = j;
        }
    }
    p->ix[s] = 0;
}

/* Room in the index for n pieces (rebuilt larger when needed). */
static bool ix_reserve(struct sd_pool *p, size_t n)
{
    if (p->ix_size > 2 * n)
        return true;
    size_t size = p->ix_size ? p->ix_size : 64;
    while (size <= 2 * n)
        size *= 2;
    uint32_t *ix = calloc(size, sizeof *ix);
    if (!ix)
        return false;
    free(p->ix);
    p->ix = ix;
    p->ix_size = size;
    for (size_t i = 0; i < p->n; i++)
        p->ix[ix_find(p, p->pc[i].id)] = (uint32_t)i + 1;
    return true;
}

static size_t piece_index(const struct sd_pool *p, uint32_t id)
{
    if (!p->ix_size || !id)
        return SIZE_MAX;
    uint32_t v = p->ix[ix_find(p, id)];
    return v ? v - 1 : SIZE_MAX;
}

/* Takes pc[i] out of the array and the index; the last piece moves in. */
static void piece_unlink(struct sd_pool *p, size_t i)
{
    ix_delete(p, ix_find(p, p->pc[i].id));
    size_t last = p->n - 1;
    if (i != last) {
        p->pc[i] = p->pc[last];
        p->ix[ix_find(p, p->pc[i].id)] = (uint32_t)i + 1;
    }
    p->n = last;
}

/* ---- borrower clients and tenants ---------------------------------------------- */

static struct sd_pool_client *client_find(const struct sd_pool *p, uint64_t id)
{
    for (size_t i = 0; i < p->ncl; i++)
        if (p->cl[i].id == id)
            return &p->cl[i];
    return NULL;
}

static struct sd_pool_tenant *tenant_find(const struct sd_pool *p, uint64_t id)
{
    for (size_t i = 0; i < p->ntn; i++)
        if (p->tn[i].id == id)
            return &p->tn[i];
    return NULL;
}

/* An entry goes once nothing refers to it. */
static void client_maybe_drop(struct sd_pool *p, struct sd_pool_client *c)
{
    if (!c->live && !c->lent)
        *c = p->cl[--p->ncl];
}

static void tenant_maybe_drop(struct sd_pool *p, struct sd_pool_tenant *t)
{
    if (!t->live && !t->tainted)
        *t = p->tn[--p->ntn];
}

/* One piece fewer tainted by t: with none left, nothing in the pool can be
 * held by a lost process of t. */
static void tenant_untaint_one(struct sd_pool_tenant *t)
{
    t->tainted--;
    if (!t->tainted)
        t->unwatched = false;
}

/* The client's entry, made (with its tenant's) at its first lend; NULL when
 * out of memory. */
static struct sd_pool_client *client_register(struct sd_pool *p, uint64_t client,
                                              uint64_t tenant)
{
    if (!cs_grow_array((void **)&p->cl, &p->clcap, p->ncl, sizeof *p->cl) ||
        !cs_grow_array((void **)&p->tn, &p->tncap, p->ntn, sizeof *p->tn))
        return NULL;
    struct sd_pool_tenant *t = tenant_find(p, tenant);
    if (!t) {
        t = &p->tn[p->ntn++];
        *t = (struct sd_pool_tenant){.id = tenant};
    }
    t->live++;
    struct sd_pool_client *c = &p->cl[p->ncl++];
    *c = (struct sd_pool_client){.id = client, .tenant = tenant, .live = true};
    return c;
}

/* The tenant has no live borrower left: no process of it can hold a FREE
 * piece it tainted any more. */
static void tenant_clear(struct sd_pool *p, struct sd_pool_tenant *t)
{
    uint32_t cleared = 0;
    for (size_t i = 0; i < p->n && t->tainted; i++) {
        struct sd_piece *pc = &p->pc[i];
        if (pc->state == SD_PIECE_FREE && pc->taint == t->id) {
            pc->taint = 0;
            tenant_untaint_one(t);
            cleared++;
        }
    }
    cs_debug("pool: tenant %llu has no live borrower: %u pieces clean", (unsigned long long)t->id,
             cleared);
}

/* The client no longer counts as live. lost: its exit was not seen, so its
 * tenant's taint must outlive it (pool.h). */
static void client_leave(struct sd_pool *p, struct sd_pool_client *c, bool lost)
{
    if (c->live) {
        struct sd_pool_tenant *t = tenant_find(p, c->tenant);
        c->live = false;
        if (t) {
            if (lost && t->tainted)
                t->unwatched = true;
            t->live--;
            if (!t->live && !t->unwatched)
                tenant_clear(p, t);
            tenant_maybe_drop(p, t);
        }
    }
    client_maybe_drop(p, c);
}

/* ---- lending ------------------------------------------------------------------- */

static void piece_lend(struct sd_pool *p, struct sd_pool_client *c, struct sd_pool_tenant *t,
                       struct sd_piece *pc)
{
    pc->state = SD_PIECE_LENT;
    pc->borrower = c->id;
    if (!p->cfg.share_node && !pc->taint) {
        pc->taint = t->id;
        t->tainted++;
    }
    c->lent++;
    p->lent[class_of(p, pc->size)]++;
    p->st.lends_total++;
}

/* A LENT piece becomes FREE; it keeps the taint its lend gave it. */
static void piece_free(struct sd_pool *p, struct sd_pool_client *c, struct sd_piece *pc,
                       uint64_t now)
{
    pc->state = SD_PIECE_FREE;
    pc->borrower = 0;
    pc->free_since = now;
    c->lent--;
    p->lent[class_of(p, pc->size)]--;
}

/* Adds to out[k..n) the FREE pieces of size tainted by taint (any taint
 * when share_node); returns the new k. */
static uint32_t pick(const struct sd_pool *p, uint64_t size, uint64_t taint, uint32_t n,
                     const struct sd_piece **out, uint32_t k)
{
    for (size_t i = 0; i < p->n && k < n; i++) {
        const struct sd_piece *pc = &p->pc[i];
        if (pc->state == SD_PIECE_FREE && pc->size == size &&
            (p->cfg.share_node || pc->taint == taint))
            out[k++] = pc;
    }
    return k;
}

static void count_missed(struct sd_pool *p, uint64_t size, uint32_t missed, uint64_t now)
{
    if (!missed)
        return;
    p->urgent_until = now > UINT64_MAX - SD_POOL_URGENT_NS ? UINT64_MAX : now + SD_POOL_URGENT_NS;
    p->st.missed_pieces_total += missed;
    if (class_of(p, size) == CL_SMALL)
        p->small_missed += missed;
}

uint32_t sd_pool_borrow(struct sd_pool *p, uint64_t client, uint64_t tenant, uint64_t size,
                        uint32_t n, const struct sd_piece **out, uint64_t now)
{
    struct sd_pool_client *c = client_find(p, client);
    if (!p->cfg.max_bytes || !tenant || (size != p->cfg.piece && size != SD_POOL_SMALL) ||
        (c && (!c->live || c->tenant != tenant)))
        return 0;
    uint32_t k = p->cfg.share_node ? 0 : pick(p, size, tenant, n, out, 0);
    k = pick(p, size, 0, n, out, k);
    if (k && !c && !(c = client_register(p, client, tenant)))
        k = 0;
    struct sd_pool_tenant *t = k ? tenant_find(p, tenant) : NULL;
    for (uint32_t i = 0; i < k; i++)
        piece_lend(p, c, t, &p->pc[out[i] - p->pc]);
    count_missed(p, size, n - k, now);
    return k;
}

int sd_pool_return(struct sd_pool *p, uint64_t client, uint32_t id, uint64_t now)
{
    size_t i = piece_index(p, id);
    struct sd_pool_client *c = client_find(p, client);
    if (i == SIZE_MAX || !c || p->pc[i].state != SD_PIECE_LENT || p->pc[i].borrower != client) {
        p->st.bad_returns_total++;
        return -1;
    }
    piece_free(p, c, &p->pc[i], now);
    p->st.returns_total++;
    client_maybe_drop(p, c);
    return 0;
}

void sd_pool_client_exited(struct sd_pool *p, uint64_t client, uint64_t now)
{
    struct sd_pool_client *c = client_find(p, client);
    if (!c)
        return;
    for (size_t i = 0; i < p->n && c->lent; i++)
        if (p->pc[i].state == SD_PIECE_LENT && p->pc[i].borrower == client)
            piece_free(p, c, &p->pc[i], now);
    client_leave(p, c, false);
}

/* Resumes where the previous call found a piece: the caller removes each
 * one it gets and the last piece moves into its place, so the loop costs
 * one pass over the pieces; the wrap-around keeps it right whatever else
 * was called in between. */
const struct sd_piece *sd_pool_orphan_next(struct sd_pool *p, uint64_t client)
{
    const struct sd_pool_client *c = client_find(p, client);
    if (!c || !c->lent)
        return NULL;
    size_t start = p->orphan_at < p->n ? p->orphan_at : 0;
    for (size_t k = 0; k < p->n; k++) {
        size_t i = (start + k) % p->n;
        if (p->pc[i].state == SD_PIECE_LENT && p->pc[i].borrower == client) {
            p->orphan_at = i;
            return &p->pc[i];
        }
    }
    return NULL;
}

void sd_pool_client_lost(struct sd_pool *p, uint64_t client, uint64_t now)
{
    (void)now;
    struct sd_pool_client *c = client_find(p, client);
    if (!c)
        return;
    cs_debug("pool: client %llu lost with %u pieces lent", (unsigned long long)client, c->lent);
    client_leave(p, c, true);
}

bool sd_pool_has_lent(const struct sd_pool *p, uint64_t client)
{
    const struct sd_pool_client *c = client_find(p, client);
    return c && c->lent;
}

bool sd_pool_is_borrower(const struct sd_pool *p, uint64_t client)
{
    const struct sd_pool_client *c = client_find(p, client);
    return c && c->live;
}

/* ---- pinning and releasing ------------------------------------------------------ */

void sd_pool_init(struct sd_pool *p, const struct sd_pool_cfg *cfg)
{
    memset(p, 0, sizeof *p);
    p->cfg = *cfg;
    p->cfg.piece = cfg->piece ? round_up(cfg->piece, SD_POOL_SMALL) : SD_POOL_PIECE_DEFAULT;
    p->target = target_of(&p->cfg, 0);
}

void sd_pool_fini(struct sd_pool *p)
{
    free(p->pc);
    free(p->ix);
    free(p->cl);
    free(p->tn);
    memset(p, 0, sizeof *p);
}

void sd_pool_set_want(struct sd_pool *p, uint64_t want, uint64_t now)
{
    p->target = target_of(&p->cfg, want);
    small_demand_update(p, now);
    /* A floor of 2 MiB pieces before anyone asked: the first swap-out of
     * every job has tails (a framework's small-allocation chunks are 2 MiB
     * segments), and a miss there is pinned by the job on its switch. */
    uint64_t floor = p->target / 16 < p->cfg.small_floor ? p->target / 16 : p->cfg.small_floor;
    floor = floor / SD_POOL_SMALL * SD_POOL_SMALL;
    uint64_t small = p->small_hw > floor ? p->small_hw : floor;
    p->small_target = small < p->target ? small : p->target;
}

/* Whether a piece of class c (size bytes) may be pinned, the host aside. */
static bool pin_allowed(const struct sd_pool *p, int c, uint64_t size)
{
    uint64_t pinned = pinned_bytes(p);
    return class_pinned(p, c) < class_goal(p, c) && p->n < p->cfg.max_pieces &&
           size <= p->cfg.max_bytes && pinned <= p->cfg.max_bytes - size;
}

uint64_t sd_pool_next_pin(struct sd_pool *p, uint64_t host_avail)
{
    static const int order[] = {CL_SMALL, CL_BIG}; /* small pieces answer misses */
    if (p->inflight)
        return 0;
    bool refused = false;
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++) {
        uint64_t size = class_size(p, order[k]);
        if (!pin_allowed(p, order[k], size))
            continue;
        if (host_avail < size || host_avail - size < p->cfg.reserve_bytes) {
            refused = true;
            continue;
        }
        p->inflight = size;
        return size;
    }
    if (refused)
        p->st.reserve_refusals_total++;
    return 0;
}

uint32_t sd_pool_pinned(struct sd_pool *p, bool ok, uint64_t size, int fd, uint64_t handle,
                        uint64_t now)
{
    p->inflight = 0;
    if (!ok || (size != p->cfg.piece && size != SD_POOL_SMALL) || p->last_id == UINT32_MAX ||
        !cs_grow_array((void **)&p->pc, &p->cap, p->n, sizeof *p->pc) ||
        !ix_reserve(p, p->n + 1))
        return 0;
    struct sd_piece *pc = &p->pc[p->n];
    *pc = (struct sd_piece){.id = ++p->last_id, .state = SD_PIECE_FREE, .size = size,
                            .fd = fd, .handle = handle, .free_since = now};
    p->ix[ix_find(p, pc->id)] = (uint32_t)++p->n;
    p->count[class_of(p, size)]++;
    p->st.pieces_pinned_total++;
    return pc->id;
}

/* ---- pacing ---------------------------------------------------------------------- */

void sd_pool_pace(struct sd_pool *p, uint64_t pin_ns, uint64_t now)
{
    uint32_t pct = p->cfg.pace_pct;
    uint64_t pause = 0;
    if (pct && pct < 100) /* pin_ns < 2^64 / 100 for any real pin; saturate otherwise */
        pause = pin_ns > UINT64_MAX / 100 ? UINT64_MAX : pin_ns * (100 - pct) / pct;
    p->pace_until = now > UINT64_MAX - pause ? UINT64_MAX : now + pause;
}

uint64_t sd_pool_pin_at(const struct sd_pool *p, bool alone, uint64_t now)
{
    if (alone || now < p->urgent_until || !p->cfg.pace_pct || p->cfg.pace_pct >= 100)
        return now;
    return p->pace_until > now ? p->pace_until : now;
}

/* A tenant whose taint can no longer serve anyone but itself and that has
 * nobody to serve: an unwatched one without live borrowers. */
static bool any_stale_tenant(const struct sd_pool *p)
{
    for (size_t i = 0; i < p->ntn; i++)
        if (!p->tn[i].live && p->tn[i].unwatched)
            return true;
    return false;
}

static bool taint_releasable(const struct sd_pool *p, uint64_t taint, bool stale)
{
    if (!taint)
        return true;
    const struct sd_pool_tenant *t = stale ? tenant_find(p, taint) : NULL;
    return t && !t->live && t->unwatched;
}

static bool releasable(const struct sd_pool *p, const struct sd_piece *pc, const bool over[],
                       bool stale, uint64_t now)
{
    if (pc->state != SD_PIECE_FREE || !taint_releasable(p, pc->taint, stale))
        return false;
    return p->short_bytes ||
           (over[class_of(p, pc->size)] && sub0(now, pc->free_since) >= p->cfg.linger_ns &&
            pinned_bytes(p) - pc->size >= p->cfg.min_bytes);
}

void sd_pool_set_short(struct sd_pool *p, uint64_t bytes)
{
    p->short_bytes = bytes;
}

const struct sd_piece *sd_pool_shrink(struct sd_pool *p, uint64_t now)
{
    bool over[SD_POOL_CLASSES];
    for (int c = 0; c < SD_POOL_CLASSES; c++) {
        uint64_t pinned = class_pinned(p, c), goal = class_goal(p, c);
        over[c] = pinned > goal && pinned - goal >= class_size(p, c);
    }
    if (!over[CL_BIG] && !over[CL_SMALL] && !p->short_bytes)
        return NULL;
    bool stale = any_stale_tenant(p);
    const struct sd_piece *best = NULL;
    for (size_t i = 0; i < p->n; i++) {
        const struct sd_piece *pc = &p->pc[i];
        if (releasable(p, pc, over, stale, now) &&
            (!best || pc->free_since < best->free_since ||
             (pc->free_since == best->free_since && pc->id < best->id)))
            best = pc;
    }
    if (best && p->short_bytes) {
        p->short_bytes = sub0(p->short_bytes, best->size);
        p->st.pressure_releases_total++;
    }
    return best;
}

void sd_pool_remove(struct sd_pool *p, uint32_t id)
{
    size_t i = piece_index(p, id);
    if (i == SIZE_MAX)
        return;
    struct sd_piece *pc = &p->pc[i];
    int c = class_of(p, pc->size);
    if (pc->state == SD_PIECE_LENT) {
        struct sd_pool_client *cl = client_find(p, pc->borrower);
        p->lent[c]--;
        if (cl) {
            cl->lent--;
            client_maybe_drop(p, cl);
        }
    }
    struct sd_pool_tenant *t = pc->taint ? tenant_find(p, pc->taint) : NULL;
    if (t) {
        tenant_untaint_one(t);
        tenant_maybe_drop(p, t);
    }
    p->count[c]--;
    p->st.pieces_released_total++;
    piece_unlink(p, i);
}

/* ---- reading -------------------------------------------------------------------- */

void sd_pool_get_stats(const struct sd_pool *p, struct sd_pool_stats *out)
{
    *out = p->st;
    out->pinned_bytes = pinned_bytes(p);
    out->lent_bytes = (uint64_t)p->lent[CL_BIG] * p->cfg.piece +
                      (uint64_t)p->lent[CL_SMALL] * SD_POOL_SMALL;
    out->free_bytes = out->pinned_bytes - out->lent_bytes;
    out->free_big_bytes = (uint64_t)(p->count[CL_BIG] - p->lent[CL_BIG]) * p->cfg.piece;
    out->target_bytes = p->target;
}

const struct sd_piece *sd_pool_find(const struct sd_pool *p, uint32_t id)
{
    size_t i = piece_index(p, id);
    return i == SIZE_MAX ? NULL : &p->pc[i];
}
