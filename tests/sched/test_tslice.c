/* test_tslice.c: the channel-group timeslice rule of the policy (tslice.c)
 * on simulated time: which holders are told TIMESLICE, with what value, and
 * only on change. Clients are driven as in test_policy.c; every TIMESLICE
 * the policy sends is recorded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/log.h"
#include "sched/policy.h"

#define SEC 1000000000ull
#define GiB (1ull << 30)

struct ts_ev {
    struct sd_member *m;
    uint32_t us;
};

static struct sd_config cfg;
static struct sd_policy pol;
static uint64_t now;
static struct ts_ev evs[256];
static size_t nev;

static void on_grant(void *ctx, struct sd_member *m, uint32_t q)
{
    (void)ctx, (void)m, (void)q;
}

static void on_revoke(void *ctx, struct sd_member *m, uint32_t reason, uint64_t evict)
{
    (void)ctx, (void)m, (void)reason, (void)evict;
}

static void on_timeslice(void *ctx, struct sd_member *m, uint32_t us)
{
    (void)ctx;
    assert_true(nev < sizeof evs / sizeof evs[0]);
    evs[nev++] = (struct ts_ev){m, us};
}

static const struct sd_policy_ops ops = {.grant = on_grant, .revoke = on_revoke,
                                         .timeslice = on_timeslice};

static int setup(void **state)
{
    (void)state;
    cs_log_init("test_tslice", CS_LOG_ERROR);
    sd_config_defaults(&cfg);
    cfg.mem_reserve_mb = 0;
    cfg.mode = CS_MODE_SHARED;
    now = 1000 * SEC;
    nev = 0;
    sd_policy_init(&pol, &cfg, &ops, NULL, 1, now);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sd_policy_fini(&pol);
    return 0;
}

/* A client with CS_HELLO_TSG (tsg) or an older one, attached to GPU 0
 * with a 1 GiB footprint (so that several fit in shared mode). */
static struct sd_member *member(uint32_t prio, bool tsg, const char *name)
{
    struct sd_client_info info = {.pid = 1000 + (uint32_t)pol.nclients, .priority = prio,
                                  .weight = 1, .tsg = tsg};
    strncpy(info.name, name, sizeof info.name - 1);
    struct sd_client *c = sd_policy_client_add(&pol, &info, now);
    assert_non_null(c);
    struct cs_msg_attach a = {.slot = 0, .total_mem = 16 * GiB};
    a.uuid[0] = 0xa0;
    const char *why = NULL;
    assert_int_equal(sd_policy_attach(&pol, c, &a, now, &why), SD_OK);
    struct sd_member *m = c->slot[0];
    struct cs_msg_usage u = {.slot = 0, .resident = GiB, .footprint = GiB};
    assert_int_equal(sd_policy_usage(&pol, c, &u, now, &why), SD_OK);
    return m;
}

static void acquire(struct sd_member *m)
{
    const char *why;
    assert_int_equal(sd_policy_acquire(&pol, m->client, m->slot, now, &why), SD_OK);
}

static void release_idle(struct sd_member *m)
{
    struct cs_msg_release r = {.slot = m->slot, .reason = CS_RELEASE_IDLE,
                               .lease_id = m->lease_id};
    const char *why = NULL;
    assert_int_equal(sd_policy_release(&pol, m->client, &r, now, &why), SD_OK);
}

static size_t sent_to(const struct sd_member *m)
{
    size_t n = 0;
    for (size_t i = 0; i < nev; i++)
        n += evs[i].m == m;
    return n;
}

static uint32_t last_to(const struct sd_member *m)
{
    for (size_t i = nev; i-- > 0;)
        if (evs[i].m == m)
            return evs[i].us;
    fail_msg("no TIMESLICE sent to %s", m->client->info.name);
    return 0;
}

static void test_lc_beside_be_shortens_be(void **state)
{
    (void)state;
    struct sd_member *be = member(CS_PRIO_LOW, true, "be");
    struct sd_member *lc = member(CS_PRIO_HIGH, true, "lc");
    acquire(be);
    assert_int_equal(be->state, CS_STATE_HOLDING);
    assert_int_equal(nev, 0); /* alone: nothing to protect */
    acquire(lc);
    assert_int_equal(lc->state, CS_STATE_HOLDING);
    assert_int_equal(be->state, CS_STATE_HOLDING); /* both fit: they share */
    assert_int_equal(sent_to(be), 1);
    assert_int_equal(last_to(be), 1);
    assert_int_equal(sent_to(lc), 0); /* the LC job keeps its own slice */
    /* Later decisions change nothing: no repeat. */
    struct cs_msg_usage u = {.slot = 0, .resident = GiB, .footprint = GiB};
    const char *why;
    assert_int_equal(sd_policy_usage(&pol, lc->client, &u, now, &why), SD_OK);
    assert_int_equal(sent_to(be), 1);
}

static void test_lc_leaves_be_restored(void **state)
{
    (void)state;
    struct sd_member *be = member(CS_PRIO_NORMAL, true, "be");
    struct sd_member *lc = member(CS_PRIO_HIGH, true, "lc");
    acquire(lc);
    acquire(be);
    assert_int_equal(be->state, CS_STATE_HOLDING);
    /* Granted beside the LC holder: told before its GRANT, once. */
    assert_int_equal(sent_to(be), 1);
    assert_int_equal(last_to(be), 1);
    release_idle(lc);
    assert_int_equal(sent_to(be), 2);
    assert_int_equal(last_to(be), 0);
    /* The LC job comes back: short again; it disconnects: restored. */
    acquire(lc);
    assert_int_equal(last_to(be), 1);
    sd_policy_client_remove(&pol, lc->client, now);
    assert_int_equal(sent_to(be), 4);
    assert_int_equal(last_to(be), 0);
}

static void test_knob_value_and_zero(void **state)
{
    (void)state;
    cfg.be_timeslice_us = 200;
    struct sd_member *be = member(CS_PRIO_LOW, true, "be");
    struct sd_member *lc = member(CS_PRIO_HIGH, true, "lc");
    acquire(be);
    acquire(lc);
    assert_int_equal(last_to(be), 200);
    /* Turned off at run time: restored at once. */
    cfg.be_timeslice_us = 0;
    sd_policy_reconfigure(&pol, now);
    assert_int_equal(sent_to(be), 2);
    assert_int_equal(last_to(be), 0);
}

static void test_knob_zero_never_sends(void **state)
{
    (void)state;
    cfg.be_timeslice_us = 0;
    struct sd_member *be = member(CS_PRIO_LOW, true, "be");
    struct sd_member *lc = member(CS_PRIO_HIGH, true, "lc");
    acquire(be);
    acquire(lc);
    assert_int_equal(be->state, CS_STATE_HOLDING);
    assert_int_equal(lc->state, CS_STATE_HOLDING);
    release_idle(lc);
    acquire(lc);
    assert_int_equal(nev, 0);
}

static void test_exclusive_never_sends(void **state)
{
    (void)state;
    cfg.mode = CS_MODE_EXCLUSIVE;
    struct sd_member *be = member(CS_PRIO_LOW, true, "be");
    struct sd_member *lc = member(CS_PRIO_HIGH, true, "lc");
    acquire(be);
    acquire(lc); /* preempts: the BE holder is revoked, one holder at a time */
    assert_int_equal(be->state, CS_STATE_REVOKING);
    struct cs_msg_release r = {.slot = 0, .reason = CS_RELEASE_REVOKED,
                               .lease_id = be->lease_id};
    const char *why = NULL;
    assert_int_equal(sd_policy_release(&pol, be->client, &r, now, &why), SD_OK);
    assert_int_equal(lc->state, CS_STATE_HOLDING);
    assert_int_equal(nev, 0);
}

static void test_older_client_never_sent(void **state)
{
    (void)state;
    struct sd_member *be = member(CS_PRIO_LOW, false, "old-be");
    struct sd_member *lc = member(CS_PRIO_HIGH, true, "lc");
    acquire(be);
    acquire(lc);
    assert_int_equal(be->state, CS_STATE_HOLDING);
    assert_int_equal(nev, 0);
    assert_int_equal(be->ts_sent, 0);
}

static void test_be_becomes_high_restored(void **state)
{
    (void)state;
    struct sd_member *be = member(CS_PRIO_LOW, true, "be");
    struct sd_member *lc = member(CS_PRIO_HIGH, true, "lc");
    acquire(be);
    acquire(lc);
    assert_int_equal(last_to(be), 1);
    sd_policy_client_update(&pol, be->client, CS_PRIO_HIGH, 1, now);
    assert_int_equal(sent_to(be), 2);
    assert_int_equal(last_to(be), 0);
}

static void test_lost_lease_keeps_setting(void **state)
{
    (void)state;
    struct sd_member *be = member(CS_PRIO_LOW, true, "be");
    struct sd_member *lc = member(CS_PRIO_HIGH, true, "lc");
    acquire(be);
    acquire(lc);
    assert_int_equal(last_to(be), 1);
    /* Its lease ends while the LC job runs: nothing of it runs, nothing is
     * sent; granted again beside the LC job: still short, nothing sent. */
    release_idle(be);
    assert_int_equal(be->state, CS_STATE_IDLE);
    assert_int_equal(sent_to(be), 1);
    acquire(be);
    assert_int_equal(be->state, CS_STATE_HOLDING);
    assert_int_equal(sent_to(be), 1);
    /* The LC job left while it did not hold: restored at its next grant. */
    release_idle(be);
    release_idle(lc);
    assert_int_equal(sent_to(be), 1);
    acquire(be);
    assert_int_equal(sent_to(be), 2);
    assert_int_equal(last_to(be), 0);
}

static void test_tsg_state_needs_capability(void **state)
{
    (void)state;
    struct sd_member *old = member(CS_PRIO_LOW, false, "old");
    struct sd_member *cur = member(CS_PRIO_LOW, true, "new");
    struct cs_msg_tsg_state t = {.state = CS_TSG_MECH_UNAVAILABLE, .status = -95,
                                 .requested_us = 1};
    strcpy(t.reason, "not an NVIDIA driver");
    const char *why = NULL;
    assert_int_equal(sd_policy_tsg_state(&pol, old->client, &t, &why), SD_EPROTO);
    assert_non_null(why);
    assert_int_equal(sd_policy_tsg_state(&pol, cur->client, &t, &why), SD_OK);
    assert_true(cur->client->tsg_reported);
    assert_string_equal(cur->client->tsg.reason, "not an NVIDIA driver");
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_lc_beside_be_shortens_be),  T(test_lc_leaves_be_restored),
        T(test_knob_value_and_zero),       T(test_knob_zero_never_sends),
        T(test_exclusive_never_sends),     T(test_older_client_never_sent),
        T(test_be_becomes_high_restored),  T(test_lost_lease_keeps_setting),
        T(test_tsg_state_needs_capability),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
