/* lender.c: see lender.h. */
#include "sched/lender.h"
#include "sched/pinner.h"
#include "sched/server.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"

/* Descriptors kept for connections, listeners and the daemon's own files
 * when the pool's pieces take the rest of RLIMIT_NOFILE. */
#define FD_HEADROOM 256u

/* ---- settings ------------------------------------------------------------- */

/* The most the pool pins: pool_max_mb, else the pin budget
 * (sd_config_pin_budget over the node's GPUs), and never more than one and
 * a half times the node's GPU memory (more than that is never out at
 * once). The policy bounds what it wants by the budget over the GPUs
 * clients attached (mem.c pin_budget), never more than this. */
static uint64_t pool_max(const struct sd_server *s)
{
    if (s->cfg.pool_max_mb)
        return (uint64_t)s->cfg.pool_max_mb << 20;
    uint64_t gpus = 0, usable = 0, reserve = (uint64_t)s->cfg.mem_reserve_mb << 20;
    for (size_t i = 0; i < s->node.n; i++) {
        gpus += s->node.gpu[i].mem_total;
        usable += s->node.gpu[i].mem_total > reserve ? s->node.gpu[i].mem_total - reserve : 0;
    }
    uint64_t max = sd_config_pin_budget(&s->cfg, cs_host_mem_total(), usable);
    if (gpus && max > gpus + gpus / 2)
        max = gpus + gpus / 2;
    return max;
}

static void pool_cfg(const struct sd_server *s, uint32_t max_pieces, struct sd_pool_cfg *pc)
{
    *pc = (struct sd_pool_cfg){
        .max_bytes = pool_max(s),
        .min_bytes = (uint64_t)s->cfg.pool_min_mb << 20,
        .reserve_bytes = sd_config_host_reserve(&s->cfg, cs_host_mem_total()),
        .piece = (uint64_t)s->cfg.pool_piece_mb << 20,
        .linger_ns = (uint64_t)s->cfg.pool_linger_ms * 1000000ull,
        .max_pieces = max_pieces,
        .share_node = s->cfg.pool_share_tenants,
        .pace_pct = s->cfg.pool_pace_pct,
        /* the first swap-out of every job has tails (2 MiB chunks of small
         * allocations): pieces for them before anyone missed one */
        .small_floor = 64ull << 20,
    };
    if (pc->min_bytes > pc->max_bytes)
        pc->min_bytes = pc->max_bytes;
}

/* ---- start and stop ---------------------------------------------------------- */

void sd_lender_init(struct sd_server *s)
{
    struct sd_lender *l = &s->lend;
    memset(l, 0, sizeof *l);
    l->next_serial = 1;
    l->piece = (uint64_t)s->cfg.pool_piece_mb << 20;
    if (!s->cfg.pool) {
        cs_info("pinned pool: off (pool = false): jobs pin their own swap backing");
        return;
    }
    char err[256];
    if (sd_pinner_start(&l->pinner, NULL, err, sizeof err) < 0) {
        cs_info("pinned pool: off: %s; jobs pin their own swap backing", err);
        l->pinner = NULL;
        return;
    }
    uint32_t nofile = 0;
    sd_pinner_raise_nofile(&nofile);
    uint32_t keep = s->cfg.max_clients + FD_HEADROOM;
    uint32_t max_pieces = nofile > keep ? nofile - keep : 0;
    struct sd_pool_cfg pc;
    pool_cfg(s, max_pieces, &pc);
    sd_pool_init(&l->pool, &pc);
    l->max_pieces = max_pieces;
    l->reserve = pc.reserve_bytes;
    l->pool_ready = true;
    if (sd_server_add_listener(s, sd_pinner_fd(l->pinner), SD_TAG_POOL) < 0) {
        cs_warn("pinned pool: off: cannot watch the pinner: %s", strerror(errno));
        sd_pinner_stop(l->pinner);
        l->pinner = NULL;
        return;
    }
    s->policy.pool_lends = true;
    /* What it will pin at start is its target (pool_min_mb within the
     * most, in whole pieces), not pool_min_mb: the line said 62.92 GiB
     * where 62.88 were pinned and called the target. */
    struct sd_pool_stats st;
    sd_pool_get_stats(&l->pool, &st);
    char a[32], b[32], r[32], m[32];
    cs_info("pinned pool: on, up to %s in %s pieces (%u at most), keeping %s of host memory "
            "available; %s pinned at start",
            cs_format_size(pc.max_bytes, a, sizeof a), cs_format_size(pc.piece, b, sizeof b),
            max_pieces, cs_format_size(pc.reserve_bytes, r, sizeof r),
            st.target_bytes ? cs_format_size(st.target_bytes, m, sizeof m) : "nothing");
}

static void release_piece(struct sd_lender *l, const struct sd_piece *pc)
{
    sd_pinner_release(l->pinner, pc->fd, pc->handle);
    sd_pool_remove(&l->pool, pc->id);
}

void sd_lender_fini(struct sd_server *s)
{
    struct sd_lender *l = &s->lend;
    while (l->watches) {
        struct sd_watch *w = l->watches;
        l->watches = w->next;
        if (w->pidfd >= 0)
            close(w->pidfd);
        free(w);
    }
    if (l->pinner)
        sd_pinner_stop(l->pinner);
    /* Pieces lent stay with their borrowers (their imports hold them); the
     * free ones go with the process. */
    if (l->pool_ready)
        sd_pool_fini(&l->pool);
    l->pool_ready = false;
    l->pinner = NULL;
}

/* How soon the pool asks again after a pin was refused. */
#define SD_LENDER_RETRY_NS 1000000000ull

/* ---- growing and shrinking ----------------------------------------------------- */

/* The policy caps pin-ahead at what the pool can lend: told after every
 * change (a lend, a return, a pin, a release), in the same loop iteration,
 * so that the next plan never counts pieces already lent. Big pieces only:
 * a backing takes small ones for its tail alone, so free small pieces
 * cannot stand in for big ones (counting them had a job pin 16 MiB of its
 * own beside 144 MiB "free" in tests/e2e/swap_pool.sh). */
static void tell_policy(struct sd_server *s, uint64_t now)
{
    struct sd_pool_stats st;
    sd_pool_get_stats(&s->lend.pool, &st);
    sd_policy_pool_changed(&s->policy, st.free_big_bytes, now);
}

/* Whether pinning waits for a move under way (a piece being pinned holds
 * up every import and map of the movers: sd_policy_moving); says so at
 * debug level as it starts and ends, and counts the holds. */
static bool held_for_moves(struct sd_server *s, struct sd_lender *l, uint64_t now)
{
    uint64_t until;
    bool moving = sd_policy_moving(&s->policy, now, &until);
    if (moving != l->held) {
        cs_debug("pinned pool: %s", moving ? "pinning held while swaps are under way"
                                           : "pinning again");
        l->holds += moving;
    }
    l->held = moving;
    return moving;
}

/* When the pool may start its next piece (pool.h, Pacing): at once with no
 * GPU client connected, since nobody's allocations wait behind it. */
static uint64_t pin_at(const struct sd_server *s, const struct sd_lender *l, uint64_t now)
{
    return sd_pool_pin_at(&l->pool, s->policy.nclients == 0, now);
}

/* Whether pinning waits for its pace. Counts the pauses. */
static bool paced(struct sd_server *s, struct sd_lender *l, uint64_t now)
{
    bool wait = now < pin_at(s, l, now);
    l->paces += wait && !l->pacing;
    l->pacing = wait;
    return wait;
}

/* Asks the pinner for a piece of the size the pool wants next, unless the
 * host's available memory is at the reserve (said once per stretch). */
static void pin_next(struct sd_lender *l, const struct sd_pool_stats *st, uint64_t now)
{
    uint64_t avail = cs_host_mem_available();
    uint64_t size = sd_pool_next_pin(&l->pool, avail ? avail : UINT64_MAX);
    if (!size) {
        struct sd_pool_stats after;
        sd_pool_get_stats(&l->pool, &after);
        bool held = after.reserve_refusals_total > st->reserve_refusals_total;
        if (held && !l->reserve_warned) {
            char a[32], r[32];
            cs_warn("pinned pool: not pinning more: the host has %s available and keeps %s",
                    cs_format_size(avail, a, sizeof a),
                    cs_format_size(l->reserve, r, sizeof r));
        }
        l->reserve_warned = held;
        if (held) /* else nothing may be pinned: no need to look again */
            l->retry_at = now + SD_LENDER_RETRY_NS;
        return;
    }
    l->reserve_warned = false;
    l->inflight = sd_pinner_request(l->pinner, size) == 0;
    if (!l->inflight) {
        sd_pool_pinned(&l->pool, false, size, -1, 0, 0);
        l->retry_at = now + SD_LENDER_RETRY_NS;
    }
}

/* Asks the pinner for the next piece while the pool is below its target
 * and no move is under way: one at a time (the driver pins one piece at a
 * time whatever the number of threads, ~4.5 GiB/s on the H200). Reads the
 * host's available memory only then. */
static void ask_next_piece(struct sd_server *s, struct sd_lender *l, uint64_t now)
{
    struct sd_pool_stats st;
    sd_pool_get_stats(&l->pool, &st);
    if (l->inflight || st.pinned_bytes >= st.target_bytes || now < l->retry_at ||
        held_for_moves(s, l, now) || paced(s, l, now))
        return;
    pin_next(l, &st, now);
}

/* While the pool holds pieces it does not lend, the host's available
 * memory is read once a second: below the reserve, free pieces go back
 * until it is made up (pool.h, Host pressure). The pool grows only above
 * the reserve, but the host's own memory (the jobs' pageable memory, page
 * cache that must be written) can grow after it did, and a pinned page
 * cannot be reclaimed. */
static void release_for_host(struct sd_lender *l, uint64_t now)
{
    struct sd_pool_stats st;
    sd_pool_get_stats(&l->pool, &st);
    if (!st.free_bytes || (l->avail_at && now - l->avail_at < SD_LENDER_RETRY_NS))
        return;
    l->avail_at = now;
    uint64_t avail = cs_host_mem_available();
    uint64_t short_bytes = avail && avail < l->reserve ? l->reserve - avail : 0;
    sd_pool_set_short(&l->pool, short_bytes);
    if (short_bytes && !l->pressure_warned) {
        char a[32], r[32];
        cs_warn("pinned pool: the host has %s available, under the %s it keeps: releasing "
                "pieces nobody borrows",
                cs_format_size(avail, a, sizeof a), cs_format_size(l->reserve, r, sizeof r));
    }
    l->pressure_warned = short_bytes != 0;
}

void sd_lender_drive(struct sd_server *s, uint64_t now)
{
    struct sd_lender *l = &s->lend;
    if (!l->pinner)
        return;
    struct sd_pool_cfg pc;
    pool_cfg(s, l->max_pieces, &pc);
    /* runtime knobs (cusharectl set); the piece size is start-up only */
    l->pool.cfg.max_bytes = pc.max_bytes;
    l->pool.cfg.min_bytes = pc.min_bytes;
    l->pool.cfg.reserve_bytes = pc.reserve_bytes;
    l->pool.cfg.linger_ns = pc.linger_ns;
    l->pool.cfg.share_node = pc.share_node;
    l->pool.cfg.pace_pct = pc.pace_pct;
    l->reserve = pc.reserve_bytes;
    sd_pool_set_want(&l->pool, sd_policy_pool_want(&s->policy), now);
    ask_next_piece(s, l, now);
    release_for_host(l, now);
    for (const struct sd_piece *pc2; (pc2 = sd_pool_shrink(&l->pool, now));)
        release_piece(l, pc2);
    tell_policy(s, now);
}

/* When the pool's growth has something to do without an event (0: never). */
static uint64_t growth_deadline(const struct sd_server *s, const struct sd_lender *l,
                                const struct sd_pool_stats *st, uint64_t now)
{
    uint64_t until = 0;
    if (l->inflight || st->pinned_bytes >= st->target_bytes)
        return 0;
    /* Pinning held for a move: again when the move's deadline passes (its
     * answer, the usual end, is an event of its own). */
    if (l->held && sd_policy_moving(&s->policy, now, &until))
        return until;
    /* Refused (the host's memory at the reserve, the pinner, the driver):
     * nothing says when that changes, and a quiet node has no event to
     * look again on (without NVML no meter wakes the daemon every second). */
    if (now < l->retry_at)
        return l->retry_at;
    /* Paced: again when the pause ends (a missed borrow, the usual reason
     * to hurry, is an event of its own). */
    if (l->pacing)
        return pin_at(s, l, now);
    return 0;
}

uint64_t sd_lender_deadline(const struct sd_server *s)
{
    const struct sd_lender *l = &s->lend;
    if (!l->pinner)
        return 0;
    struct sd_pool_stats st;
    sd_pool_get_stats(&l->pool, &st);
    uint64_t now = sd_server_now(s);
    /* Pieces past the need: look again once a second for their linger. */
    if (st.pinned_bytes > st.target_bytes)
        return now + SD_LENDER_RETRY_NS;
    uint64_t d = growth_deadline(s, l, &st, now);
    /* Free pieces: the host's memory once a second (release_for_host). */
    if (st.free_bytes && (!d || d > now + SD_LENDER_RETRY_NS))
        d = now + SD_LENDER_RETRY_NS;
    return d;
}

void sd_lender_pinned_event(struct sd_server *s, uint64_t now)
{
    struct sd_lender *l = &s->lend;
    struct sd_pinned r;
    while (l->pinner && sd_pinner_take(l->pinner, &r)) {
        sd_pool_pinned(&l->pool, r.ok, r.size, r.fd, r.handle, now);
        sd_pool_pace(&l->pool, r.ns, now);
        l->inflight = false;
        l->pins_ns += r.ns;
        struct sd_pool_stats st;
        sd_pool_get_stats(&l->pool, &st);
        if (r.ok && st.pinned_bytes >= st.target_bytes) {
            char a[32];
            cs_info("pinned pool: %s pinned, its target (%.2f s of pinning so far)",
                    cs_format_size(st.pinned_bytes, a, sizeof a), (double)l->pins_ns / 1e9);
        }
        if (!r.ok) {
            /* Not at once: a driver that refuses one piece refuses the
             * next, and the event loop would pin and fail back to back. */
            l->retry_at = now + SD_LENDER_RETRY_NS;
            static bool warned;
            if (!warned)
                cs_warn("pinned pool: the driver refused a piece (CUresult %d); trying again "
                        "each second while the need stays", r.cu_err);
            warned = true;
        }
    }
    sd_lender_drive(s, now);
}

/* ---- borrowers ----------------------------------------------------------------- */

static struct sd_watch *watch_of(struct sd_lender *l, uint64_t client)
{
    for (struct sd_watch *w = l->watches; w; w = w->next)
        if (w->client == client)
            return w;
    return NULL;
}

/* The borrower's process, watched from its first BORROW until it exits
 * (pidfd, EPOLLIN at exit); NULL only when out of memory. */
static struct sd_watch *watch(struct sd_server *s, struct sd_conn *c)
{
    struct sd_lender *l = &s->lend;
    struct sd_watch *w = watch_of(l, c->client->id);
    if (w)
        return w;
    w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->client = c->client->id;
    w->pid = c->pid;
    w->serial = l->next_serial++;
    w->connected = true;
    w->pidfd = c->pid ? (int)syscall(SYS_pidfd_open, (pid_t)c->pid, 0) : -1;
    if (w->pidfd >= 0 && sd_server_add_listener(s, w->pidfd, SD_WATCH_TAG | w->serial) < 0) {
        close(w->pidfd);
        w->pidfd = -1;
    }
    if (w->pidfd < 0)
        cs_info("pinned pool: client %llu (pid %u): its process cannot be watched; pieces "
                "lent to it are its own once its connection ends",
                (unsigned long long)w->client, c->pid);
    w->next = l->watches;
    l->watches = w;
    return w;
}

static void unwatch(struct sd_lender *l, struct sd_watch *w)
{
    for (struct sd_watch **pp = &l->watches; *pp; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    }
    if (w->pidfd >= 0)
        close(w->pidfd); /* also leaves the epoll set */
    free(w);
}

uint64_t sd_lender_tenant(const struct sd_conn *c)
{
    if (!c->on_endpoint)
        return (uint64_t)c->uid + 1;
    uint64_t h = 1469598103934665603ull; /* FNV-1a of the grant's source */
    for (const char *p = c->grant.source; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return h | (1ull << 63);
}

/* A BORROW lent less than it asked for: the borrower pins the rest itself,
 * on a swap-out's critical path when it is one. Said at debug level with
 * what the pool had and what the borrower held (its cap: its GPU's memory),
 * so that a run's misses can be told apart: an empty pool, pieces tainted
 * by another tenant (free, but not for it), or the cap. */
static void log_short_borrow(const struct sd_lender *l, const struct sd_conn *c,
                             const struct cs_msg_borrow *b, uint32_t ask, uint32_t n,
                             uint64_t lent, uint64_t cap)
{
    struct sd_pool_stats st;
    sd_pool_get_stats(&l->pool, &st);
    char f[32], fb[32], h[32], k[32];
    cs_debug("pinned pool: pid %u asked %u %s piece(s), lent %u (%u within its cap); the pool "
             "has %s free, %s in big pieces; it holds %s of %s", c->pid, b->count,
             b->kind == CS_PIECE_BIG ? "big" : "small", n, ask,
             cs_format_size(st.free_bytes, f, sizeof f),
             cs_format_size(st.free_big_bytes, fb, sizeof fb), cs_format_size(lent, h, sizeof h),
             cs_format_size(cap, k, sizeof k));
}

bool sd_lender_borrow(struct sd_server *s, struct sd_conn *c, const struct cs_msg_borrow *b,
                      const char **why)
{
    struct sd_lender *l = &s->lend;
    if (!(c->caps & CS_HELLO_POOL)) {
        *why = "BORROW from a client that did not announce CS_HELLO_POOL";
        return false;
    }
    struct cs_msg m = {.type = CS_MSG_LEND};
    m.u.lend.request_id = b->request_id;
    int fds[CS_LEND_MAX] = {0}; /* the first n are sent */
    uint32_t n = 0;
    /* A client never holds more than its GPU's memory in lent pieces: no
     * job has more than that to swap out, and a tenant that borrows to
     * hoard cannot drain the pool for the others. */
    const struct sd_member *mb = c->client->slot[b->slot];
    uint64_t cap = mb && mb->gpu ? mb->gpu->mem_total : 0;
    struct sd_watch *w = l->pinner && cap ? watch(s, c) : NULL;
    if (w) {
        uint64_t size = b->kind == CS_PIECE_BIG ? l->piece : SD_POOL_SMALL;
        uint64_t room = w->lent_bytes < cap ? (cap - w->lent_bytes) / size : 0;
        uint32_t ask = room < b->count ? (uint32_t)room : b->count;
        const struct sd_piece *out[CS_LEND_MAX];
        n = ask ? sd_pool_borrow(&l->pool, c->client->id, sd_lender_tenant(c), size, ask, out,
                                 sd_server_now(s))
                : 0;
        w->lent_bytes += n * size;
        if (n < b->count)
            log_short_borrow(l, c, b, ask, n, w->lent_bytes, cap);
        for (uint32_t i = 0; i < n; i++) {
            m.u.lend.ids[i] = out[i]->id;
            fds[i] = out[i]->fd;
        }
        m.u.lend.piece_size = n ? size : 0;
        m.u.lend.count = n;
    }
    /* A send that fails leaves the pieces lent: they come back when the
     * process exits (or, unwatched, leave with its connection). */
    sd_conn_send_fds(s, c, &m, fds, (int)n);
    if (n) {
        sd_policy_lent(&s->policy, c->client, b->slot, (uint64_t)n * m.u.lend.piece_size);
        tell_policy(s, sd_server_now(s));
    }
    return true;
}

bool sd_lender_return(struct sd_server *s, struct sd_conn *c, const struct cs_msg_return *r,
                      const char **why)
{
    struct sd_lender *l = &s->lend;
    if (!(c->caps & CS_HELLO_POOL)) {
        *why = "RETURN from a client that did not announce CS_HELLO_POOL";
        return false;
    }
    uint32_t bad = 0;
    struct sd_watch *w = l->pinner ? watch_of(l, c->client->id) : NULL;
    for (uint32_t i = 0; i < r->count; i++) {
        const struct sd_piece *pc = w ? sd_pool_find(&l->pool, r->ids[i]) : NULL;
        uint64_t size = pc ? pc->size : 0;
        if (!w || sd_pool_return(&l->pool, c->client->id, r->ids[i], sd_server_now(s)) < 0)
            bad++;
        else
            w->lent_bytes -= size < w->lent_bytes ? size : w->lent_bytes;
    }
    /* Said once per borrower (a client flooding bad RETURNs must not flood
     * the log); later ones at debug level. */
    if (bad && w && !w->warned)
        cs_warn("client %llu (pid %u) gave back %u pieces that are not lent to it: ignored",
                (unsigned long long)c->client->id, c->pid, bad);
    else if (bad)
        cs_debug("client %llu: %u pieces given back that are not lent to it",
                 (unsigned long long)c->client->id, bad);
    if (bad && w)
        w->warned = true;
    if (bad < r->count)
        tell_policy(s, sd_server_now(s));
    return true;
}

bool sd_lender_client_gone(struct sd_server *s, struct sd_conn *c, uint64_t client)
{
    (void)c;
    struct sd_lender *l = &s->lend;
    struct sd_watch *w = l->pinner ? watch_of(l, client) : NULL;
    if (!w)
        return false;
    w->connected = false;
    if (w->pidfd >= 0)
        return true; /* its process may live on and map them: wait for its exit */
    uint64_t now = sd_server_now(s);
    for (const struct sd_piece *pc; (pc = sd_pool_orphan_next(&l->pool, client));)
        release_piece(l, pc);
    sd_pool_client_lost(&l->pool, client, now);
    unwatch(l, w);
    return false;
}

void sd_lender_watch_event(struct sd_server *s, uint64_t tag, uint64_t now)
{
    struct sd_lender *l = &s->lend;
    uint64_t serial = tag & ~SD_WATCH_TAG;
    for (struct sd_watch *w = l->watches; w; w = w->next) {
        if (w->serial != serial)
            continue;
        struct sd_pool_stats before, after;
        sd_pool_get_stats(&l->pool, &before);
        sd_pool_client_exited(&l->pool, w->client, now);
        sd_pool_get_stats(&l->pool, &after);
        if (after.lent_bytes < before.lent_bytes) {
            char a[32];
            cs_info("pinned pool: pid %u exited holding %s of pieces: back in the pool", w->pid,
                    cs_format_size(before.lent_bytes - after.lent_bytes, a, sizeof a));
        }
        uint64_t client = w->client;
        unwatch(l, w);
        /* Its GPU memory is free now too (the driver's until the process
         * was gone): the policy stops counting it. */
        sd_policy_process_gone(&s->policy, client, now);
        sd_lender_drive(s, now);
        return;
    }
}
