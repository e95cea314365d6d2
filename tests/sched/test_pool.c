/* test_pool.c: the node-wide pinned pool's bookkeeping (src/sched/pool.c)
 * on simulated time.
 *
 * Each test drives the pool through its functions with a time variable and
 * made-up descriptors (never touched by the pool). After every step,
 * check() verifies the pool against its own piece table: the stats add up
 * (free + lent == pinned, each equal to the pieces' sizes), every piece is
 * found by its id, borrower and tenant counts match the pieces, and
 * nothing exceeds max_bytes or max_pieces. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/log.h"
#include "sched/pool.h"

#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define SEC 1000000000ull
#define BIG (64 * MiB)
#define SMALL SD_POOL_SMALL
#define HOST (1ull << 40) /* host memory available: plenty */
#define LINGER (10 * SEC)

enum { TA = 10, TB = 20 }; /* tenants */

static struct sd_pool_cfg cfg;
static struct sd_pool pool;
static bool started;
static uint64_t now;

/* ---- the invariant checker --------------------------------------------------- */

static uint32_t lent_to(uint64_t client)
{
    uint32_t k = 0;
    for (size_t i = 0; i < pool.n; i++)
        k += pool.pc[i].state == SD_PIECE_LENT && pool.pc[i].borrower == client;
    return k;
}

static uint32_t tainted_by(uint64_t tenant)
{
    uint32_t k = 0;
    for (size_t i = 0; i < pool.n; i++)
        k += pool.pc[i].taint == tenant;
    return k;
}

static const struct sd_pool_client *client_entry(uint64_t id)
{
    for (size_t i = 0; i < pool.ncl; i++)
        if (pool.cl[i].id == id)
            return &pool.cl[i];
    return NULL;
}

static uint32_t live_clients_of(uint64_t tenant)
{
    uint32_t k = 0;
    for (size_t i = 0; i < pool.ncl; i++)
        k += pool.cl[i].live && pool.cl[i].tenant == tenant;
    return k;
}

static void check_piece(const struct sd_piece *pc, uint64_t *free_b, uint64_t *lent_b)
{
    assert_true(pc->id != 0 && pc->id <= pool.last_id);
    assert_ptr_equal(sd_pool_find(&pool, pc->id), pc);
    assert_true(pc->size == pool.cfg.piece || pc->size == SMALL);
    if (pool.cfg.share_node)
        assert_int_equal(pc->taint, 0);
    if (pc->state == SD_PIECE_FREE) {
        assert_int_equal(pc->borrower, 0);
        *free_b += pc->size;
        return;
    }
    assert_int_equal(pc->state, SD_PIECE_LENT);
    const struct sd_pool_client *c = client_entry(pc->borrower);
    assert_non_null(c);
    if (!pool.cfg.share_node)
        assert_int_equal(pc->taint, c->tenant);
    *lent_b += pc->size;
}

static void check_tables(void)
{
    for (size_t i = 0; i < pool.ncl; i++) {
        const struct sd_pool_client *c = &pool.cl[i];
        assert_int_equal(c->lent, lent_to(c->id));
        assert_true(c->live || c->lent);
        assert_int_equal(sd_pool_has_lent(&pool, c->id), c->lent > 0);
    }
    for (size_t i = 0; i < pool.ntn; i++) {
        const struct sd_pool_tenant *t = &pool.tn[i];
        assert_int_equal(t->tainted, tainted_by(t->id));
        assert_int_equal(t->live, live_clients_of(t->id));
        assert_true(t->live || t->tainted);
    }
    for (size_t i = 0; i < pool.n; i++)
        if (pool.pc[i].taint) {
            bool known = false;
            for (size_t j = 0; j < pool.ntn; j++)
                known |= pool.tn[j].id == pool.pc[i].taint;
            assert_true(known);
        }
}

static void check(void)
{
    struct sd_pool_stats st;
    sd_pool_get_stats(&pool, &st);
    uint64_t free_b = 0, lent_b = 0;
    for (size_t i = 0; i < pool.n; i++)
        check_piece(&pool.pc[i], &free_b, &lent_b);
    assert_int_equal(st.free_bytes, free_b);
    assert_int_equal(st.lent_bytes, lent_b);
    assert_int_equal(st.pinned_bytes, free_b + lent_b);
    assert_int_equal(st.free_bytes + st.lent_bytes, st.pinned_bytes);
    assert_true(st.pinned_bytes <= pool.cfg.max_bytes);
    assert_true(pool.n <= pool.cfg.max_pieces);
    assert_int_equal(st.pieces_pinned_total - st.pieces_released_total, pool.n);
    assert_int_equal(st.target_bytes, pool.target);
    check_tables();
}

/* ---- the fixture and steps ---------------------------------------------------- */

static void start(void)
{
    sd_pool_init(&pool, &cfg);
    started = true;
    check();
}

static void restart(void)
{
    sd_pool_fini(&pool);
    start();
}

static int setup(void **state)
{
    (void)state;
    cs_log_init("test_pool", CS_LOG_ERROR);
    cfg = (struct sd_pool_cfg){.max_bytes = GiB, .piece = BIG, .linger_ns = LINGER,
                               .max_pieces = 1000};
    now = 1000 * SEC;
    started = false;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (started) {
        check();
        sd_pool_fini(&pool);
    }
    return 0;
}

static struct sd_pool_stats stats(void)
{
    struct sd_pool_stats st;
    sd_pool_get_stats(&pool, &st);
    return st;
}

static void want(uint64_t bytes)
{
    sd_pool_set_want(&pool, bytes, now);
    check();
}

/* Finishes the pin next_pin asked for, successfully. */
static uint32_t pinned(uint64_t size)
{
    uint32_t id = sd_pool_pinned(&pool, true, size, 100 + (int)pool.last_id, 0xab00 + size, now);
    check();
    return id;
}

/* Pins everything next_pin asks for, checking after every piece or (for
 * thousands of them) only at the end; returns how many pieces. */
static unsigned pin_all(bool check_each)
{
    unsigned k = 0;
    uint64_t size;
    while ((size = sd_pool_next_pin(&pool, HOST))) {
        if (check_each)
            assert_int_not_equal(pinned(size), 0);
        else
            assert_int_not_equal(sd_pool_pinned(&pool, true, size, -1, 0, now), 0);
        k++;
    }
    check();
    return k;
}

static unsigned fill(void)
{
    return pin_all(true);
}

/* A pool at want bytes, pinned; returns how many pieces. */
static unsigned start_filled(uint64_t bytes)
{
    start();
    want(bytes);
    return fill();
}

static uint32_t borrow(uint64_t client, uint64_t tenant, uint64_t size, uint32_t n,
                       const struct sd_piece **out)
{
    uint32_t k = sd_pool_borrow(&pool, client, tenant, size, n, out, now);
    check();
    return k;
}

/* Borrows n pieces and keeps only their ids (pointers go stale). */
static uint32_t borrow_ids(uint64_t client, uint64_t tenant, uint64_t size, uint32_t n,
                           uint32_t *ids)
{
    const struct sd_piece *out[64];
    assert_true(n <= 64);
    uint32_t k = borrow(client, tenant, size, n, out);
    for (uint32_t i = 0; i < k; i++)
        ids[i] = out[i]->id;
    return k;
}

static int ret(uint64_t client, uint32_t id)
{
    int rc = sd_pool_return(&pool, client, id, now);
    check();
    return rc;
}

static void exited(uint64_t client)
{
    sd_pool_client_exited(&pool, client, now);
    check();
}

/* Releases what shrink offers, as the daemon does; returns how many. */
static unsigned shrink_all(void)
{
    unsigned k = 0;
    const struct sd_piece *pc;
    while ((pc = sd_pool_shrink(&pool, now))) {
        sd_pool_remove(&pool, pc->id);
        check();
        k++;
    }
    return k;
}

/* The orphan loop of pool.h; returns how many pieces left the pool. */
static unsigned orphan(uint64_t client)
{
    unsigned k = 0;
    const struct sd_piece *pc;
    while ((pc = sd_pool_orphan_next(&pool, client))) {
        assert_int_equal(pc->state, SD_PIECE_LENT);
        assert_int_equal(pc->borrower, client);
        sd_pool_remove(&pool, pc->id);
        check();
        k++;
    }
    sd_pool_client_lost(&pool, client, now);
    check();
    return k;
}

static uint64_t taint_of(uint32_t id)
{
    const struct sd_piece *pc = sd_pool_find(&pool, id);
    assert_non_null(pc);
    return pc->taint;
}

static bool in(uint32_t id, const uint32_t *ids, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

/* ---- target and pinning -------------------------------------------------------- */

static void test_target_clamp(void **state)
{
    (void)state;
    cfg.min_bytes = 128 * MiB;
    start();
    assert_int_equal(stats().target_bytes, 128 * MiB); /* min pinned from the start */
    want(0);
    assert_int_equal(stats().target_bytes, 128 * MiB);
    want(200 * MiB);
    assert_int_equal(stats().target_bytes, 256 * MiB); /* whole big pieces */
    want(5 * GiB);
    assert_int_equal(stats().target_bytes, GiB);
    want(GiB + 1);
    assert_int_equal(stats().target_bytes, GiB);

    /* max_bytes not a multiple of the piece: the target rounds down to
     * what can be pinned within it, and is reached */
    cfg.min_bytes = 0;
    cfg.max_bytes = 100 * MiB;
    restart();
    want(GiB);
    assert_int_equal(stats().target_bytes, 64 * MiB);
    assert_int_equal(fill(), 1);
    assert_int_equal(stats().pinned_bytes, BIG);
    assert_true(stats().pinned_bytes >= stats().target_bytes);
    /* below max_bytes it still rounds up */
    want(10 * MiB);
    assert_int_equal(stats().target_bytes, 64 * MiB);

    /* min above max: max wins */
    cfg.min_bytes = 2 * GiB;
    cfg.max_bytes = GiB;
    restart();
    assert_int_equal(stats().target_bytes, GiB);

    /* the piece: 0 is the default, others round up to the host granularity */
    cfg.piece = 0;
    restart();
    assert_int_equal(pool.cfg.piece, SD_POOL_PIECE_DEFAULT);
    cfg.piece = 3 * MiB;
    restart();
    assert_int_equal(pool.cfg.piece, 4 * MiB);
}

static void test_next_pin_in_flight(void **state)
{
    (void)state;
    start();
    want(256 * MiB);
    assert_int_equal(sd_pool_next_pin(&pool, HOST), BIG);
    assert_int_equal(sd_pool_next_pin(&pool, HOST), 0); /* one pin at a time */
    assert_int_equal(sd_pool_next_pin(&pool, HOST), 0);
    assert_int_equal(pinned(BIG), 1);
    assert_int_equal(sd_pool_next_pin(&pool, HOST), BIG);
    assert_int_equal(pinned(BIG), 2);
    assert_int_equal(fill(), 2);
    assert_int_equal(sd_pool_next_pin(&pool, HOST), 0); /* at the target */
    assert_int_equal(stats().pinned_bytes, 256 * MiB);
    assert_int_equal(stats().pieces_pinned_total, 4);
    assert_int_equal(stats().reserve_refusals_total, 0);
}

static void test_next_pin_max_bytes(void **state)
{
    (void)state;
    cfg.max_bytes = 192 * MiB;
    start();
    want(GiB);
    assert_int_equal(stats().target_bytes, 192 * MiB);
    assert_int_equal(fill(), 3);
    /* small demand on a full pool: no room for even a small piece */
    const struct sd_piece *out[8];
    assert_int_equal(borrow(1, TA, SMALL, 5, out), 0);
    want(GiB);
    assert_int_equal(pool.small_target, 10 * MiB);
    assert_int_equal(sd_pool_next_pin(&pool, HOST), 0);
    assert_int_equal(stats().pinned_bytes, 192 * MiB);
    assert_int_equal(stats().reserve_refusals_total, 0);
}

static void test_next_pin_max_pieces(void **state)
{
    (void)state;
    cfg.max_pieces = 2;
    assert_int_equal(start_filled(GiB), 2);
    assert_int_equal(sd_pool_next_pin(&pool, HOST), 0);
    assert_int_equal(stats().reserve_refusals_total, 0);
    /* no budget at all: nothing */
    cfg.max_pieces = 0;
    restart();
    want(GiB);
    assert_int_equal(fill(), 0);
}

static void test_next_pin_reserve(void **state)
{
    (void)state;
    cfg.reserve_bytes = GiB;
    start();
    want(128 * MiB);
    assert_int_equal(sd_pool_next_pin(&pool, GiB + BIG - 1), 0);
    assert_int_equal(stats().reserve_refusals_total, 1);
    assert_int_equal(sd_pool_next_pin(&pool, GiB + BIG - 1), 0);
    assert_int_equal(stats().reserve_refusals_total, 2);
    assert_int_equal(sd_pool_next_pin(&pool, MiB), 0); /* less than the piece itself */
    assert_int_equal(stats().reserve_refusals_total, 3);
    assert_int_equal(sd_pool_next_pin(&pool, GiB + BIG), BIG);
    assert_int_equal(pinned(BIG), 1);

    /* both classes below target and both refused: one refusal for the call */
    const struct sd_piece *out[4];
    assert_int_equal(borrow(1, TA, SMALL, 2, out), 0);
    want(256 * MiB);
    assert_int_equal(sd_pool_next_pin(&pool, GiB + MiB), 0);
    assert_int_equal(stats().reserve_refusals_total, 4);
    /* a small piece fits where a big one does not */
    assert_int_equal(sd_pool_next_pin(&pool, GiB + SMALL), SMALL);
    assert_int_equal(stats().reserve_refusals_total, 4);
    assert_int_not_equal(pinned(SMALL), 0);
}

static void test_pinned_fail(void **state)
{
    (void)state;
    start();
    want(128 * MiB);
    assert_int_equal(sd_pool_next_pin(&pool, HOST), BIG);
    assert_int_equal(sd_pool_pinned(&pool, false, BIG, -1, 0, now), 0);
    check();
    assert_int_equal(pool.n, 0);
    assert_int_equal(stats().pieces_pinned_total, 0);
    /* the failure ended the pin in flight */
    assert_int_equal(sd_pool_next_pin(&pool, HOST), BIG);
    /* a size of neither class is not added (the caller releases it) */
    assert_int_equal(sd_pool_pinned(&pool, true, 3 * MiB, 7, 1, now), 0);
    check();
    assert_int_equal(pool.n, 0);
    assert_int_equal(sd_pool_next_pin(&pool, HOST), BIG);
    uint32_t id = pinned(BIG);
    assert_int_equal(id, 1);
    const struct sd_piece *pc = sd_pool_find(&pool, id);
    assert_int_equal(pc->state, SD_PIECE_FREE);
    assert_int_equal(pc->taint, 0);
    assert_int_equal(pc->free_since, now);
    assert_int_equal(pc->fd, 100);
    assert_int_equal(pc->handle, 0xab00 + BIG);
}

static void test_pool_off(void **state)
{
    (void)state;
    cfg.max_bytes = 0;
    cfg.min_bytes = BIG;
    start();
    want(GiB);
    assert_int_equal(stats().target_bytes, 0);
    assert_int_equal(sd_pool_next_pin(&pool, HOST), 0);
    const struct sd_piece *out[4];
    assert_int_equal(borrow(1, TA, BIG, 4, out), 0);
    assert_int_equal(borrow(1, TA, SMALL, 4, out), 0);
    assert_int_equal(stats().missed_pieces_total, 0);
    assert_int_equal(stats().reserve_refusals_total, 0);
    assert_false(sd_pool_is_borrower(&pool, 1));
}

/* ---- lending ----------------------------------------------------------------------- */

static void test_borrow_order(void **state)
{
    (void)state;
    assert_int_equal(start_filled(384 * MiB), 6);
    uint32_t a1[2], a2[3], b1[6], a3[3];
    assert_int_equal(borrow_ids(1, TA, BIG, 2, a1), 2);
    assert_int_equal(taint_of(a1[0]), TA);
    assert_int_equal(ret(1, a1[0]), 0);
    assert_int_equal(ret(1, a1[1]), 0);
    assert_int_equal(taint_of(a1[0]), TA); /* returned: still the tenant's */

    /* the tenant's own tainted pieces first, then clean ones */
    assert_int_equal(borrow_ids(2, TA, BIG, 3, a2), 3);
    assert_true(in(a1[0], a2, 2) && in(a1[1], a2, 2));
    assert_false(in(a2[2], a1, 2));

    /* another tenant: only the clean ones, never A's */
    assert_int_equal(borrow_ids(3, TB, BIG, 6, b1), 3);
    for (uint32_t i = 0; i < 3; i++) {
        assert_false(in(b1[i], a2, 3));
        assert_int_equal(taint_of(b1[i]), TB);
    }
    assert_int_equal(stats().missed_pieces_total, 3);
    for (uint32_t i = 0; i < 3; i++)
        assert_int_equal(ret(2, a2[i]), 0);
    /* three FREE pieces, all tainted by A: nothing for B */
    assert_int_equal(borrow_ids(4, TB, BIG, 1, b1), 0);
    assert_int_equal(stats().missed_pieces_total, 4);
    assert_false(sd_pool_is_borrower(&pool, 4)); /* lent nothing: not registered */
    assert_int_equal(borrow_ids(5, TA, BIG, 3, a3), 3);
    assert_true(in(a2[0], a3, 3) && in(a2[1], a3, 3) && in(a2[2], a3, 3));
    assert_int_equal(stats().lends_total, 11);
    assert_int_equal(stats().returns_total, 5);
}

static void test_share_node(void **state)
{
    (void)state;
    cfg.share_node = true;
    assert_int_equal(start_filled(128 * MiB), 2);
    uint32_t a[2], b[2];
    assert_int_equal(borrow_ids(1, TA, BIG, 2, a), 2);
    assert_int_equal(taint_of(a[0]), 0);
    assert_int_equal(ret(1, a[0]), 0);
    assert_int_equal(ret(1, a[1]), 0);
    assert_int_equal(taint_of(a[0]), 0);
    assert_int_equal(borrow_ids(2, TB, BIG, 2, b), 2); /* taint ignored */
    assert_true(in(a[0], b, 2) && in(a[1], b, 2));
}

static void test_partial_borrow_counts_misses(void **state)
{
    (void)state;
    assert_int_equal(start_filled(128 * MiB), 2);
    const struct sd_piece *out[8];
    assert_int_equal(borrow(1, TA, BIG, 5, out), 2);
    assert_int_equal(out[0]->state, SD_PIECE_LENT);
    assert_int_equal(out[1]->borrower, 1);
    assert_int_equal(stats().missed_pieces_total, 3);
    assert_int_equal(borrow(1, TA, BIG, 5, out), 0);
    assert_int_equal(stats().missed_pieces_total, 8);
    assert_int_equal(stats().lends_total, 2);
    assert_int_equal(stats().lent_bytes, 128 * MiB);
    /* big misses are no small demand */
    assert_int_equal(pool.small_missed, 0);
    want(128 * MiB);
    assert_int_equal(pool.small_target, 0);
    assert_int_equal(sd_pool_next_pin(&pool, HOST), 0);
    /* a size of neither class, tenant 0, another tenant: nothing, no miss */
    assert_int_equal(borrow(2, TA, 4 * MiB, 1, out), 0);
    assert_int_equal(borrow(2, 0, BIG, 1, out), 0);
    assert_int_equal(borrow(1, TB, BIG, 1, out), 0);
    assert_int_equal(stats().missed_pieces_total, 8);
}

static void test_bad_return(void **state)
{
    (void)state;
    assert_int_equal(start_filled(128 * MiB), 2);
    uint32_t x, y;
    assert_int_equal(borrow_ids(1, TA, BIG, 1, &x), 1);
    assert_int_equal(borrow_ids(2, TB, BIG, 1, &y), 1);
    struct sd_pool_stats before = stats();
    const struct sd_piece *px = sd_pool_find(&pool, x);
    assert_int_equal(ret(2, x), -1);  /* another client */
    assert_int_equal(ret(99, x), -1); /* one that never borrowed */
    assert_int_equal(ret(1, 999), -1); /* no such piece */
    assert_int_equal(ret(1, y), -1);
    assert_int_equal(ret(1, 0), -1);
    struct sd_pool_stats after = stats();
    assert_int_equal(after.bad_returns_total, before.bad_returns_total + 5);
    after.bad_returns_total = before.bad_returns_total;
    assert_memory_equal(&after, &before, sizeof after);
    assert_ptr_equal(sd_pool_find(&pool, x), px);
    assert_int_equal(px->state, SD_PIECE_LENT);
    assert_int_equal(px->borrower, 1);
    assert_int_equal(px->taint, TA);
    assert_true(sd_pool_has_lent(&pool, 1));

    now += SEC;
    assert_int_equal(ret(1, x), 0);
    assert_int_equal(sd_pool_find(&pool, x)->free_since, now);
    assert_int_equal(ret(1, x), -1); /* FREE now */
    assert_int_equal(stats().bad_returns_total, 6);
    assert_int_equal(stats().returns_total, 1);
}

static void test_exit_frees_and_clears_taint_on_last(void **state)
{
    (void)state;
    assert_int_equal(start_filled(256 * MiB), 4);
    uint32_t a1[2], r, b[4];
    assert_int_equal(borrow_ids(1, TA, BIG, 2, a1), 2);
    assert_int_equal(borrow_ids(2, TA, BIG, 1, &r), 1);
    assert_int_equal(ret(1, a1[0]), 0);
    now += SEC;
    exited(1);
    assert_false(sd_pool_has_lent(&pool, 1));
    assert_false(sd_pool_is_borrower(&pool, 1));
    const struct sd_piece *q = sd_pool_find(&pool, a1[1]);
    assert_int_equal(q->state, SD_PIECE_FREE);
    assert_int_equal(q->free_since, now);
    /* client 2 of tenant A lives: A's pieces stay A's */
    assert_int_equal(taint_of(a1[0]), TA);
    assert_int_equal(taint_of(a1[1]), TA);
    assert_int_equal(borrow_ids(3, TB, BIG, 4, b), 1);
    assert_false(in(b[0], a1, 2) || b[0] == r);
    /* A's last borrower exits: every piece of A is clean */
    exited(2);
    assert_int_equal(taint_of(a1[0]), 0);
    assert_int_equal(taint_of(a1[1]), 0);
    assert_int_equal(taint_of(r), 0);
    assert_int_equal(pool.ntn, 1); /* only B's entry is left */
    assert_int_equal(borrow_ids(3, TB, BIG, 4, b), 3);
    assert_true(in(a1[0], b, 3) && in(a1[1], b, 3) && in(r, b, 3));
    /* an exit the pool never heard of changes nothing */
    exited(77);
}

static void test_is_borrower_after_returning_all(void **state)
{
    (void)state;
    assert_int_equal(start_filled(64 * MiB), 1);
    uint32_t x;
    assert_int_equal(borrow_ids(1, TA, BIG, 1, &x), 1);
    assert_true(sd_pool_has_lent(&pool, 1));
    assert_true(sd_pool_is_borrower(&pool, 1));
    assert_int_equal(ret(1, x), 0);
    /* its process may keep the import: still watched */
    assert_false(sd_pool_has_lent(&pool, 1));
    assert_true(sd_pool_is_borrower(&pool, 1));
    exited(1);
    assert_false(sd_pool_is_borrower(&pool, 1));
    assert_int_equal(taint_of(x), 0);
    assert_int_equal(pool.ncl, 0);
    assert_int_equal(pool.ntn, 0);
}

/* ---- clients lost without an exit seen --------------------------------------------- */

static void test_orphan_path(void **state)
{
    (void)state;
    assert_int_equal(start_filled(256 * MiB), 4);
    uint32_t a[3], s[2], p2;
    assert_int_equal(borrow_ids(1, TA, BIG, 3, a), 3);
    assert_int_equal(ret(1, a[0]), 0);
    /* asking twice without removing gives the same piece */
    const struct sd_piece *o = sd_pool_orphan_next(&pool, 1);
    assert_ptr_equal(sd_pool_orphan_next(&pool, 1), o);
    assert_int_equal(orphan(1), 2);
    assert_null(sd_pool_find(&pool, a[1]));
    assert_null(sd_pool_find(&pool, a[2]));
    assert_int_equal(stats().pieces_released_total, 2);
    assert_false(sd_pool_is_borrower(&pool, 1));

    /* its process may still hold the returned piece: A's taint stays */
    assert_int_equal(taint_of(a[0]), TA);
    assert_int_equal(borrow_ids(2, TB, BIG, 2, s), 1);
    assert_int_not_equal(s[0], a[0]);
    assert_int_equal(borrow_ids(3, TA, BIG, 1, &p2), 1);
    assert_int_equal(p2, a[0]);
    assert_int_equal(ret(3, p2), 0);
    exited(3);
    assert_int_equal(taint_of(a[0]), TA); /* even with no live borrower of A */

    /* ...but nobody else can use it: shrink may release it */
    want(0);
    assert_null(sd_pool_shrink(&pool, now));
    now += LINGER;
    const struct sd_piece *pc = sd_pool_shrink(&pool, now);
    assert_non_null(pc);
    assert_int_equal(pc->id, a[0]);
    sd_pool_remove(&pool, a[0]);
    check();
    assert_int_equal(pool.ntn, 1); /* A's entry went with its last piece */
    assert_null(sd_pool_shrink(&pool, now)); /* s is lent */
}

static void test_lost_without_taint_is_not_sticky(void **state)
{
    (void)state;
    assert_int_equal(start_filled(128 * MiB), 2);
    uint32_t a[2], b[2];
    assert_int_equal(borrow_ids(1, TA, BIG, 1, a), 1);
    /* client 1 loses its only piece: no piece of A is left that its
     * process could hold, so A is not unwatched */
    assert_int_equal(orphan(1), 1);
    assert_int_equal(pool.ntn, 0);
    assert_int_equal(borrow_ids(2, TA, BIG, 1, a + 1), 1);
    assert_int_equal(ret(2, a[1]), 0);
    exited(2);
    assert_int_equal(taint_of(a[1]), 0);
    want(128 * MiB);
    assert_int_equal(fill(), 1);
    assert_int_equal(borrow_ids(3, TB, BIG, 2, b), 2);
}

static void test_orphan_many(void **state)
{
    (void)state;
    cfg.piece = 4 * MiB;
    cfg.max_bytes = 64 * GiB;
    cfg.max_pieces = 2000;
    assert_int_equal(start_filled(1000 * 4 * MiB), 1000);
    const struct sd_piece *out[600];
    assert_int_equal(sd_pool_borrow(&pool, 1, TA, 4 * MiB, 600, out, now), 600);
    uint32_t ids[600];
    for (int i = 0; i < 600; i++)
        ids[i] = out[i]->id;
    assert_int_equal(sd_pool_borrow(&pool, 2, TB, 4 * MiB, 400, out, now), 400);
    for (int i = 0; i < 600; i += 3)
        assert_int_equal(sd_pool_return(&pool, 1, ids[i], now), 0);
    check();
    unsigned k = 0;
    const struct sd_piece *pc;
    while ((pc = sd_pool_orphan_next(&pool, 1))) {
        assert_int_equal(pc->borrower, 1);
        sd_pool_remove(&pool, pc->id);
        k++;
    }
    sd_pool_client_lost(&pool, 1, now);
    check();
    assert_int_equal(k, 400);
    assert_int_equal(pool.n, 600);
    assert_int_equal(stats().lent_bytes, 400 * 4 * MiB);
    for (int i = 0; i < 600; i++)
        assert_true((sd_pool_find(&pool, ids[i]) != NULL) == (i % 3 == 0));
}

/* ---- shrinking --------------------------------------------------------------------- */

static void test_shrink_beyond_target_after_linger(void **state)
{
    (void)state;
    assert_int_equal(start_filled(384 * MiB), 6);
    want(128 * MiB);
    assert_null(sd_pool_shrink(&pool, now)); /* free for less than linger_ns */
    now += LINGER - 1;
    assert_null(sd_pool_shrink(&pool, now));
    now += 1;
    const struct sd_piece *pc = sd_pool_shrink(&pool, now);
    assert_non_null(pc);
    assert_int_equal(pc->id, 1); /* all free as long: the lowest id */
    assert_int_equal(shrink_all(), 4);
    assert_int_equal(stats().pinned_bytes, 128 * MiB);
    assert_int_equal(stats().pieces_released_total, 4);
    assert_null(sd_pool_shrink(&pool, now + 100 * LINGER));
}

static void test_shrink_never_below_min(void **state)
{
    (void)state;
    cfg.min_bytes = 192 * MiB;
    assert_int_equal(start_filled(512 * MiB), 8);
    want(0);
    assert_int_equal(stats().target_bytes, 192 * MiB);
    now += LINGER;
    assert_int_equal(shrink_all(), 5);
    assert_int_equal(stats().pinned_bytes, 192 * MiB);

    /* the big class over its share while the small pieces that take it
     * are not pinned yet: not below min either */
    const struct sd_piece *out[32];
    assert_int_equal(borrow(1, TA, SMALL, 32, out), 0);
    want(0);
    assert_int_equal(pool.small_target, 64 * MiB);
    now += LINGER;
    assert_null(sd_pool_shrink(&pool, now));
    assert_int_equal(fill(), 32);
    assert_int_equal(shrink_all(), 1); /* now a big piece may go */
    assert_int_equal(stats().pinned_bytes, 192 * MiB);
}

static void test_shrink_never_lent_or_tainted(void **state)
{
    (void)state;
    assert_int_equal(start_filled(192 * MiB), 3);
    uint32_t a[2];
    assert_int_equal(borrow_ids(1, TA, BIG, 2, a), 2);
    assert_int_equal(ret(1, a[0]), 0);
    want(0);
    now += 100 * LINGER;
    assert_int_equal(shrink_all(), 1); /* the clean free one */
    assert_non_null(sd_pool_find(&pool, a[0])); /* tainted by a live tenant */
    assert_non_null(sd_pool_find(&pool, a[1])); /* lent */
    exited(1); /* both clean now */
    const struct sd_piece *pc = sd_pool_shrink(&pool, now);
    assert_non_null(pc);
    assert_int_equal(pc->id, a[0]); /* free since its return, long ago */
    sd_pool_remove(&pool, a[0]);
    check();
    assert_null(sd_pool_shrink(&pool, now)); /* free only from its borrower's exit */
    now += LINGER;
    assert_int_equal(shrink_all(), 1);
    assert_int_equal(pool.n, 0);
}

/* The host short of its reserve (sd_pool_set_short): free pieces go within
 * the target, before their linger and below min_bytes, the longest free
 * first, until the shortfall is made up; never a lent one. The pool grows
 * again once the host has room. */
static void test_shrink_for_host(void **state)
{
    (void)state;
    cfg.min_bytes = 192 * MiB;
    assert_int_equal(start_filled(384 * MiB), 6);
    want(384 * MiB);
    uint32_t a[2];
    assert_int_equal(borrow_ids(1, TA, BIG, 2, a), 2);
    now += 10 * LINGER;
    assert_null(sd_pool_shrink(&pool, now)); /* all within the target */
    sd_pool_set_short(&pool, 100 * MiB);
    assert_int_equal(shrink_all(), 2); /* 2 x 64 MiB make up 100 */
    assert_int_equal(stats().pinned_bytes, 256 * MiB);
    assert_int_equal(stats().pressure_releases_total, 2);
    assert_int_equal(pool.short_bytes, 0);
    sd_pool_set_short(&pool, GiB); /* more than there is to give */
    assert_int_equal(shrink_all(), 2); /* every free piece, min_bytes or not */
    assert_int_equal(stats().pinned_bytes, 128 * MiB);
    assert_int_equal(stats().free_bytes, 0);
    assert_int_equal(stats().pressure_releases_total, 4);
    assert_non_null(sd_pool_find(&pool, a[0])); /* lent: never */
    assert_non_null(sd_pool_find(&pool, a[1]));
    sd_pool_set_short(&pool, 0);
    assert_null(sd_pool_shrink(&pool, now));
    assert_int_equal(stats().pieces_released_total, 4);
    assert_int_equal(sd_pool_next_pin(&pool, 100 * GiB), BIG); /* room again: it grows */
}

/* ---- small pieces -------------------------------------------------------------------- */

static void test_small_demand(void **state)
{
    (void)state;
    assert_int_equal(start_filled(256 * MiB), 4);
    uint32_t s[3];
    assert_int_equal(borrow_ids(1, TA, SMALL, 3, s), 0);
    assert_int_equal(stats().missed_pieces_total, 3);
    assert_int_equal(sd_pool_next_pin(&pool, HOST), 0); /* the split moves at set_want */
    want(256 * MiB);
    assert_int_equal(pool.small_target, 3 * SMALL);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(sd_pool_next_pin(&pool, HOST), SMALL);
        assert_int_not_equal(pinned(SMALL), 0);
    }
    assert_int_equal(sd_pool_next_pin(&pool, HOST), 0); /* big: 250 MiB -> 4 pieces, pinned */
    assert_int_equal(stats().pinned_bytes, 256 * MiB + 3 * SMALL);
    assert_int_equal(borrow_ids(1, TA, SMALL, 3, s), 3);

    /* small first: more demand and a larger target */
    assert_int_equal(borrow_ids(2, TA, SMALL, 1, s), 0);
    want(320 * MiB);
    assert_int_equal(sd_pool_next_pin(&pool, HOST), SMALL);
    assert_int_not_equal(pinned(SMALL), 0);
    assert_int_equal(sd_pool_next_pin(&pool, HOST), BIG);
    assert_int_not_equal(pinned(BIG), 0);

    /* the demand holds for linger_ns, then halves per linger_ns */
    exited(1);
    want(320 * MiB);
    assert_int_equal(pool.small_target, 4 * SMALL);
    now += LINGER;
    want(320 * MiB);
    assert_int_equal(pool.small_target, 2 * SMALL);
    assert_int_equal(shrink_all(), 2);
    assert_int_equal(stats().pinned_bytes, 320 * MiB + 2 * SMALL);
    now += LINGER;
    want(320 * MiB);
    assert_int_equal(pool.small_target, SMALL);
    now += LINGER;
    want(320 * MiB);
    assert_int_equal(pool.small_target, 0);
    assert_int_equal(shrink_all(), 2);
    assert_int_equal(stats().pinned_bytes, 320 * MiB);
}

static void test_small_demand_takes_big_share(void **state)
{
    (void)state;
    assert_int_equal(start_filled(128 * MiB), 2);
    const struct sd_piece *out[32];
    assert_int_equal(borrow(1, TA, SMALL, 32, out), 0);
    want(128 * MiB);
    /* 64 MiB of small demand: the big class is 64 MiB over */
    assert_int_equal(pool.small_target, 64 * MiB);
    assert_int_equal(fill(), 32);
    now += LINGER;
    assert_int_equal(shrink_all(), 1); /* a big piece, its share gone to small ones */
    assert_null(sd_pool_find(&pool, 1));
    assert_int_equal(stats().pinned_bytes, 128 * MiB);
    /* no new demand for linger_ns: it halves, the big class grows back */
    want(128 * MiB);
    assert_int_equal(pool.small_target, 32 * MiB);
    assert_int_equal(fill(), 1);
    assert_int_equal(shrink_all(), 16);
    assert_int_equal(stats().pinned_bytes, 128 * MiB + 32 * MiB);
}

static void test_one_class_when_piece_is_small(void **state)
{
    (void)state;
    cfg.piece = SMALL;
    start();
    const struct sd_piece *out[4];
    assert_int_equal(borrow(1, TA, SMALL, 4, out), 0);
    assert_int_equal(pool.small_missed, 0);
    want(8 * MiB);
    assert_int_equal(pool.small_target, 0);
    assert_int_equal(fill(), 4);
    assert_int_equal(borrow(1, TA, SMALL, 4, out), 4);
}

/* ---- ids and the index ------------------------------------------------------------- */

static void test_ids_never_reused(void **state)
{
    (void)state;
    cfg.linger_ns = 0;
    assert_int_equal(start_filled(192 * MiB), 3);
    want(0);
    assert_int_equal(shrink_all(), 3);
    sd_pool_remove(&pool, 77); /* unknown: nothing */
    check();
    assert_int_equal(stats().pieces_released_total, 3);
    want(64 * MiB);
    assert_int_equal(sd_pool_next_pin(&pool, HOST), BIG);
    assert_int_equal(pinned(BIG), 4);
    for (uint32_t id = 1; id <= 3; id++)
        assert_null(sd_pool_find(&pool, id));
    assert_null(sd_pool_find(&pool, 0));
}

/* Thousands of pieces removed in a scrambled order: every remaining one is
 * still found by its id (check() looks each up). */
static void test_index_many(void **state)
{
    (void)state;
    cfg.max_pieces = 6000;
    cfg.max_bytes = 6000 * BIG;
    start();
    want(5000 * BIG);
    assert_int_equal(pin_all(false), 5000);
    uint32_t x = 12345;
    unsigned removed = 0;
    while (removed < 2500) {
        x = x * 1103515245u + 12345u;
        uint32_t id = 1 + (x >> 8) % 5000;
        if (!sd_pool_find(&pool, id))
            continue;
        sd_pool_remove(&pool, id);
        assert_null(sd_pool_find(&pool, id));
        if (++removed % 100 == 0)
            check();
    }
    assert_int_equal(pool.n, 2500);
    assert_int_equal(pin_all(false), 2500);
    assert_int_equal(pool.last_id, 7500);
    check();
}

/* Ids far beyond the index's size (pieces pinned and released for a long
 * time): collisions in the index, and removals in the middle of probe
 * runs, keep every piece found. */
static void test_index_collisions(void **state)
{
    (void)state;
    cfg.max_bytes = 200 * BIG;
    start();
    want(200 * BIG);
    assert_int_equal(pin_all(false), 200);
    uint32_t x = 777;
    for (int i = 0; i < 20000; i++) {
        x = x * 1103515245u + 12345u;
        uint32_t id = pool.pc[(x >> 8) % pool.n].id;
        sd_pool_remove(&pool, id);
        assert_null(sd_pool_find(&pool, id));
        assert_int_equal(pin_all(false), 1); /* checks the pool */
    }
    assert_int_equal(pool.last_id, 20200);
    assert_true(pool.ix_size < pool.last_id / 8);
    check();
}

/* ---- pacing --------------------------------------------------------------------- */

#define MS 1000000ull

/* After a piece, the next waits pin time * (100 - pct) / pct, measured from
 * the piece's end; 100 (and 0) does not wait. */
static void test_pace_pause(void **state)
{
    (void)state;
    static const struct { uint32_t pct; uint64_t pause; } c[] = {
        {50, 20 * MS}, {25, 60 * MS}, {80, 5 * MS}, {1, 1980 * MS}, {100, 0}, {0, 0}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        cfg.pace_pct = c[i].pct;
        start();
        want(GiB);
        assert_int_equal(sd_pool_pin_at(&pool, false, now), now); /* nothing pinned yet */
        assert_int_equal(sd_pool_next_pin(&pool, HOST), BIG);
        sd_pool_pinned(&pool, true, BIG, 3, 3, now);
        sd_pool_pace(&pool, 20 * MS, now);
        assert_int_equal(sd_pool_pin_at(&pool, false, now), now + c[i].pause);
        assert_int_equal(sd_pool_pin_at(&pool, false, now + c[i].pause), now + c[i].pause);
        sd_pool_fini(&pool);
        started = false;
    }
}

/* Nobody to slow down (no GPU client: the pool pinned at start) or a borrow
 * that missed pieces within SD_POOL_URGENT_NS: no pause. */
static void test_pace_alone_or_urgent(void **state)
{
    (void)state;
    cfg.pace_pct = 50;
    assert_int_equal(start_filled(128 * MiB), 2);
    sd_pool_pace(&pool, 40 * MS, now);
    assert_int_equal(sd_pool_pin_at(&pool, true, now), now);
    assert_int_equal(sd_pool_pin_at(&pool, false, now), now + 40 * MS);
    const struct sd_piece *out[4];
    assert_int_equal(borrow(1, TA, BIG, 2, out), 2); /* no miss: still paced */
    assert_int_equal(sd_pool_pin_at(&pool, false, now), now + 40 * MS);
    assert_int_equal(borrow(1, TA, BIG, 1, out), 0); /* a miss */
    assert_int_equal(sd_pool_pin_at(&pool, false, now), now);
    now += SD_POOL_URGENT_NS - 1;
    assert_int_equal(sd_pool_pin_at(&pool, false, now), now);
    now++;
    assert_int_equal(sd_pool_pin_at(&pool, false, now), now); /* the pause is over */
    sd_pool_pace(&pool, 40 * MS, now);
    assert_int_equal(sd_pool_pin_at(&pool, false, now), now + 40 * MS); /* paced again */
    /* a huge pin time saturates rather than wrapping around */
    sd_pool_pace(&pool, UINT64_MAX / 2, now);
    assert_int_equal(sd_pool_pin_at(&pool, false, now), UINT64_MAX);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_target_clamp),
        T(test_next_pin_in_flight),
        T(test_next_pin_max_bytes),
        T(test_next_pin_max_pieces),
        T(test_next_pin_reserve),
        T(test_pinned_fail),
        T(test_pool_off),
        T(test_borrow_order),
        T(test_share_node),
        T(test_partial_borrow_counts_misses),
        T(test_bad_return),
        T(test_exit_frees_and_clears_taint_on_last),
        T(test_is_borrower_after_returning_all),
        T(test_orphan_path),
        T(test_lost_without_taint_is_not_sticky),
        T(test_orphan_many),
        T(test_shrink_beyond_target_after_linger),
        T(test_shrink_for_host),
        T(test_shrink_never_below_min),
        T(test_shrink_never_lent_or_tainted),
        T(test_small_demand),
        T(test_small_demand_takes_big_share),
        T(test_one_class_when_piece_is_small),
        T(test_ids_never_reused),
        T(test_index_many),
        T(test_index_collisions),
        T(test_pace_pause),
        T(test_pace_alone_or_urgent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
