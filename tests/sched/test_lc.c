/* test_lc.c: latency-critical clients beside best-effort ones, on simulated
 * time. The channel-group timeslice rule (tslice.c: which holders are told
 * TIMESLICE, with what value, only on change; run with lc_mechanism = tsg)
 * and gating (lcgate.c: who is revoked and when, who waits, which LC_MODE
 * each client is told, and how lc_mechanism and the clients' TSG_STATE
 * choose between the two). Every GRANT, REVOKE, TIMESLICE and LC_MODE the
 * policy sends is recorded. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "sched/policy.h"

#define SEC 1000000000ull
#define MS 1000000ull
#define GiB (1ull << 30)

enum ev_kind { EV_GRANT, EV_REVOKE, EV_TS, EV_MODE };
struct ev {
    enum ev_kind kind;
    struct sd_member *m;
    uint32_t a, b; /* REVOKE: reason; TS: µs; MODE: mode, param */
};

static struct sd_config cfg;
static struct sd_policy pol;
static uint64_t now;
static struct ev evs[512];
static size_t nev;

static void push(enum ev_kind k, struct sd_member *m, uint32_t a, uint32_t b)
{
    assert_true(nev < sizeof evs / sizeof evs[0]);
    evs[nev++] = (struct ev){k, m, a, b};
}

static void on_grant(void *ctx, struct sd_member *m, uint32_t q)
{
    (void)ctx, (void)q;
    push(EV_GRANT, m, 0, 0);
}

static void on_revoke(void *ctx, struct sd_member *m, uint32_t reason, uint64_t evict)
{
    (void)ctx, (void)evict;
    push(EV_REVOKE, m, reason, 0);
}

static void on_timeslice(void *ctx, struct sd_member *m, uint32_t us)
{
    (void)ctx;
    push(EV_TS, m, us, 0);
}

static void on_lc_mode(void *ctx, struct sd_member *m, uint32_t mode, uint32_t param)
{
    (void)ctx;
    push(EV_MODE, m, mode, param);
}

static void on_evict(void *ctx, struct sd_member *m, uint64_t id, uint64_t bytes)
{
    (void)ctx, (void)m, (void)id, (void)bytes;
}

static void on_room(void *ctx, struct sd_member *m, uint64_t id, int32_t status)
{
    (void)ctx, (void)m, (void)id, (void)status;
}

static const struct sd_policy_ops ops = {.grant = on_grant,         .revoke = on_revoke,
                                         .evict = on_evict,         .room_reply = on_room,
                                         .timeslice = on_timeslice, .lc_mode = on_lc_mode};

static int setup(void **state)
{
    (void)state;
    cs_log_init("test_lc", CS_LOG_ERROR);
    sd_config_defaults(&cfg);
    cfg.mem_reserve_mb = 0;
    cfg.mode = CS_MODE_SHARED;
    now = 1000 * SEC;
    nev = 0;
    sd_policy_init(&pol, &cfg, &ops, NULL, 1, now);
    return 0;
}

/* The timeslice rule alone (gating, where timeslices are unavailable, has
 * the tests run with setup). */
static int setup_tsg(void **state)
{
    setup(state);
    cfg.lc_mechanism = SD_LC_TSG;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sd_policy_fini(&pol);
    return 0;
}

/* A client (with CS_HELLO_LC; CS_HELLO_TSG if tsg) on GPU 0, 1 GiB. */
static struct sd_member *member(uint32_t prio, bool tsg, const char *name)
{
    struct sd_client_info info = {.pid = 1000 + (uint32_t)pol.nclients, .priority = prio,
                                  .weight = 1, .tsg = tsg, .lc = true};
    strncpy(info.name, name, sizeof info.name - 1);
    struct sd_client *c = sd_policy_client_add(&pol, &info, now);
    assert_non_null(c);
    struct cs_msg_attach a = {.slot = 0, .total_mem = 16 * GiB};
    a.uuid[0] = 0xa0;
    const char *why = NULL;
    assert_int_equal(sd_policy_attach(&pol, c, &a, now, &why), SD_OK);
    struct cs_msg_usage u = {.slot = 0, .resident = GiB, .footprint = GiB};
    assert_int_equal(sd_policy_usage(&pol, c, &u, now, &why), SD_OK);
    return c->slot[0];
}

static void tsg_state(struct sd_member *m, uint32_t st)
{
    struct cs_msg_tsg_state t = {.state = st};
    const char *why = NULL;
    assert_int_equal(sd_policy_tsg_state(&pol, m->client, &t, now, &why), SD_OK);
}

static void acquire(struct sd_member *m)
{
    const char *why;
    assert_int_equal(sd_policy_acquire(&pol, m->client, m->slot, now, &why), SD_OK);
}

static void release(struct sd_member *m, uint32_t reason)
{
    struct cs_msg_release r = {.slot = m->slot, .reason = reason, .lease_id = m->lease_id};
    const char *why = NULL;
    assert_int_equal(sd_policy_release(&pol, m->client, &r, now, &why), SD_OK);
}

/* A BE member of class be_prio and an LC member on GPU 0, both asking for
 * it, BE first: the scene of most tests. */
static void pair(uint32_t be_prio, bool tsg, struct sd_member **be, struct sd_member **lc)
{
    *be = member(be_prio, tsg, "be");
    *lc = member(CS_PRIO_HIGH, tsg, "lc");
    acquire(*be);
    acquire(*lc);
}

static void release_idle_(struct sd_member *m)
{
    release(m, CS_RELEASE_IDLE);
}

static size_t count(enum ev_kind k, const struct sd_member *m)
{
    size_t n = 0;
    for (size_t i = 0; i < nev; i++)
        n += evs[i].kind == k && (!m || evs[i].m == m);
    return n;
}

static const struct ev *last(enum ev_kind k, const struct sd_member *m)
{
    for (size_t i = nev; i-- > 0;)
        if (evs[i].kind == k && evs[i].m == m)
            return &evs[i];
    fail_msg("no event %d for %s", k, m->client->info.name);
    return NULL;
}

/* ---- timeslices ---------------------------------------------------------------- */

static void test_lc_beside_be_shortens_be(void **state)
{
    (void)state;
    struct sd_member *be = member(CS_PRIO_LOW, true, "be");
    struct sd_member *lc = member(CS_PRIO_HIGH, true, "lc");
    acquire(be);
    assert_int_equal(be->state, CS_STATE_HELD);
    assert_int_equal(count(EV_TS, NULL), 0); /* alone: nothing to protect */
    acquire(lc);
    assert_int_equal(lc->state, CS_STATE_HELD);
    assert_int_equal(be->state, CS_STATE_HELD); /* both fit: they share */
    assert_int_equal(count(EV_TS, be), 1);
    assert_int_equal(last(EV_TS, be)->a, 1);
    assert_int_equal(count(EV_TS, lc), 0); /* the LC job keeps its own slice */
    /* Later decisions change nothing: no repeat. */
    struct cs_msg_usage u = {.slot = 0, .resident = GiB, .footprint = GiB};
    const char *why;
    assert_int_equal(sd_policy_usage(&pol, lc->client, &u, now, &why), SD_OK);
    assert_int_equal(count(EV_TS, be), 1);
}

static void test_lc_leaves_be_restored(void **state)
{
    (void)state;
    struct sd_member *be = member(CS_PRIO_NORMAL, true, "be");
    struct sd_member *lc = member(CS_PRIO_HIGH, true, "lc");
    acquire(lc);
    acquire(be);
    assert_int_equal(be->state, CS_STATE_HELD);
    /* Granted beside the LC holder: told before its GRANT, once. */
    assert_int_equal(count(EV_TS, be), 1);
    assert_int_equal(last(EV_TS, be)->a, 1);
    release_idle_(lc);
    assert_int_equal(count(EV_TS, be), 2);
    assert_int_equal(last(EV_TS, be)->a, 0);
    /* The LC job comes back: short again; it disconnects: restored. */
    acquire(lc);
    assert_int_equal(last(EV_TS, be)->a, 1);
    sd_policy_client_remove(&pol, lc->client, now);
    assert_int_equal(count(EV_TS, be), 4);
    assert_int_equal(last(EV_TS, be)->a, 0);
}

static void test_knob_value_and_zero(void **state)
{
    (void)state;
    cfg.be_timeslice_us = 200;
    struct sd_member *be, *lc;
    pair(CS_PRIO_LOW, true, &be, &lc);
    assert_int_equal(last(EV_TS, be)->a, 200);
    /* Turned off at run time: restored at once. */
    cfg.be_timeslice_us = 0;
    sd_policy_reconfigure(&pol, now);
    assert_int_equal(count(EV_TS, be), 2);
    assert_int_equal(last(EV_TS, be)->a, 0);
}

static void test_knob_zero_never_sends(void **state)
{
    (void)state;
    cfg.be_timeslice_us = 0;
    struct sd_member *be, *lc;
    pair(CS_PRIO_LOW, true, &be, &lc);
    assert_int_equal(be->state, CS_STATE_HELD);
    assert_int_equal(lc->state, CS_STATE_HELD);
    release_idle_(lc);
    acquire(lc);
    assert_int_equal(count(EV_TS, NULL), 0);
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
    assert_int_equal(lc->state, CS_STATE_HELD);
    assert_int_equal(count(EV_TS, NULL), 0);
}

static void test_older_client_never_sent(void **state)
{
    (void)state;
    struct sd_member *be = member(CS_PRIO_LOW, false, "old-be");
    struct sd_member *lc = member(CS_PRIO_HIGH, true, "lc");
    acquire(be);
    acquire(lc);
    assert_int_equal(be->state, CS_STATE_HELD);
    assert_int_equal(count(EV_TS, NULL), 0);
    assert_int_equal(be->ts_sent, 0);
}

static void test_be_becomes_high_restored(void **state)
{
    (void)state;
    struct sd_member *be, *lc;
    pair(CS_PRIO_LOW, true, &be, &lc);
    assert_int_equal(last(EV_TS, be)->a, 1);
    sd_policy_client_update(&pol, be->client, CS_PRIO_HIGH, 1, now);
    assert_int_equal(count(EV_TS, be), 2);
    assert_int_equal(last(EV_TS, be)->a, 0);
}

static void test_lost_lease_keeps_setting(void **state)
{
    (void)state;
    struct sd_member *be, *lc;
    pair(CS_PRIO_LOW, true, &be, &lc);
    assert_int_equal(last(EV_TS, be)->a, 1);
    /* Its lease ends while the LC job runs: nothing of it runs, nothing is
     * sent; granted again beside the LC job: still short, nothing sent. */
    release_idle_(be);
    assert_int_equal(be->state, CS_STATE_IDLE);
    assert_int_equal(count(EV_TS, be), 1);
    acquire(be);
    assert_int_equal(be->state, CS_STATE_HELD);
    assert_int_equal(count(EV_TS, be), 1);
    /* The LC job left while it did not hold: restored at its next grant. */
    release_idle_(be);
    release_idle_(lc);
    assert_int_equal(count(EV_TS, be), 1);
    acquire(be);
    assert_int_equal(count(EV_TS, be), 2);
    assert_int_equal(last(EV_TS, be)->a, 0);
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
    assert_int_equal(sd_policy_tsg_state(&pol, old->client, &t, 0, &why), SD_EPROTO);
    assert_non_null(why);
    assert_int_equal(sd_policy_tsg_state(&pol, cur->client, &t, 0, &why), SD_OK);
    assert_true(cur->client->tsg_reported);
    assert_string_equal(cur->client->tsg.reason, "not an NVIDIA driver");
}

/* ---- gating ---------------------------------------------------------------------- */

/* One LC burst and the BE job's turn around it. */
static void test_gate_revokes_be_while_lc_has_work(void **state)
{
    (void)state;
    struct sd_member *be = member(CS_PRIO_LOW, false, "be");
    struct sd_member *lc = member(CS_PRIO_HIGH, false, "lc");
    acquire(be);
    assert_int_equal(be->state, CS_STATE_HELD);
    acquire(lc);
    /* Granted at once, beside the BE job's drain (both fit). */
    assert_int_equal(lc->state, CS_STATE_HELD);
    assert_int_equal(be->state, CS_STATE_REVOKING);
    assert_int_equal(last(EV_REVOKE, be)->a, CS_REVOKE_PREEMPT);
    assert_int_equal(be->st.lc_preempted, 1);
    release(be, CS_RELEASE_REVOKED);
    acquire(be); /* its threads want the GPU back: they wait */
    assert_int_equal(be->state, CS_STATE_WAITING);
    now += 1 * MS;
    release(lc, CS_RELEASE_IDLE); /* the burst is done */
    assert_int_equal(be->state, CS_STATE_HELD);
    /* The next burst gates it again. */
    acquire(lc);
    assert_int_equal(lc->state, CS_STATE_HELD);
    assert_int_equal(be->state, CS_STATE_REVOKING);
    assert_int_equal(be->st.lc_preempted, 2);
    /* A gating revoke is not a switch: the quantum's basis is untouched. */
    assert_int_equal(be->gpu->switch_ewma_ns, 0);
}

static void test_modes_follow_the_neighbours(void **state)
{
    (void)state;
    struct sd_member *be = member(CS_PRIO_LOW, false, "be");
    assert_int_equal(count(EV_MODE, NULL), 0); /* nobody to protect */
    acquire(be);
    struct sd_member *lc = member(CS_PRIO_HIGH, false, "lc");
    /* The BE job bounds its queue as soon as an LC job is attached... */
    assert_int_equal(last(EV_MODE, be)->a, CS_LC_BOUNDED);
    assert_int_equal(last(EV_MODE, be)->b, cfg.lc_window_us);
    /* ...and the LC job releases its bursts while the BE job wants the GPU. */
    assert_int_equal(last(EV_MODE, lc)->a, CS_LC_RELEASE_IDLE);
    assert_int_equal(last(EV_MODE, lc)->b, cfg.lc_linger_us);
    assert_int_equal(lc->lc_mech, CS_LC_MECH_LC);
    assert_int_equal(be->lc_mech, CS_LC_MECH_GATE);
    size_t before = count(EV_MODE, NULL);
    acquire(lc);
    release(lc, CS_RELEASE_IDLE);
    assert_int_equal(count(EV_MODE, NULL), before); /* sent on change only */
    /* The BE job between two leases: the LC job keeps releasing (told
     * NONE it would hold its lease for idle_release_ms). */
    release(be, CS_RELEASE_REVOKED);
    assert_int_equal(be->state, CS_STATE_IDLE);
    assert_int_equal(count(EV_MODE, NULL), before);
    /* The LC job gone: the BE job runs unbounded again. */
    sd_policy_client_remove(&pol, lc->client, now);
    assert_int_equal(last(EV_MODE, be)->a, CS_LC_NONE);
    assert_int_equal(be->lc_mech, CS_LC_MECH_NONE);
}

static void test_auto_prefers_timeslices(void **state)
{
    (void)state;
    struct sd_member *be = member(CS_PRIO_LOW, true, "be");
    tsg_state(be, CS_TSG_MECH_READY);
    struct sd_member *lc = member(CS_PRIO_HIGH, true, "lc");
    acquire(be);
    acquire(lc);
    assert_int_equal(be->state, CS_STATE_HELD); /* co-runs, short slices */
    assert_int_equal(last(EV_TS, be)->a, cfg.be_timeslice_us);
    assert_int_equal(count(EV_MODE, be), 0);
    assert_int_equal(be->lc_mech, CS_LC_MECH_TSG);
    /* The driver refuses later: gated from that report on. */
    tsg_state(be, CS_TSG_MECH_UNAVAILABLE);
    assert_int_equal(be->state, CS_STATE_REVOKING);
    assert_int_equal(last(EV_MODE, be)->a, CS_LC_BOUNDED);
    assert_int_equal(be->lc_mech, CS_LC_MECH_GATE);
}

/* Lines of the daemon's log (stderr) that contain `what` while fn runs. */
static int log_lines_during(void (*fn)(void), const char *what)
{
    char path[] = "/tmp/test_lc_log.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    int saved = dup(STDERR_FILENO);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fd, STDERR_FILENO), STDERR_FILENO);
    cs_log_set_level(CS_LOG_WARN);
    fn();
    cs_log_set_level(CS_LOG_ERROR);
    assert_int_equal(dup2(saved, STDERR_FILENO), STDERR_FILENO);
    close(saved);
    char buf[8192];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    close(fd);
    assert_true(n >= 0);
    buf[n] = '\0';
    int lines = 0;
    for (const char *q = buf; (q = strstr(q, what)) != NULL; q++)
        lines++;
    return lines;
}

static struct sd_member *warned_be;
static void flip_tsg_states(void)
{
    tsg_state(warned_be, CS_TSG_MECH_UNAVAILABLE);
    tsg_state(warned_be, CS_TSG_MECH_READY);
    tsg_state(warned_be, CS_TSG_MECH_UNAVAILABLE);
}

/* A client whose timeslices turn unavailable is gated from then on: the log
 * says so, once per client however often it reports (a client cannot fill
 * the log), and not where the mechanism does not matter. */
static void test_unavailable_warned_once(void **state)
{
    (void)state;
    warned_be = member(CS_PRIO_LOW, true, "be");
    assert_int_equal(log_lines_during(flip_tsg_states, "channel-group timeslices unavailable"), 1);
    assert_true(warned_be->client->tsg_warned);
    cfg.lc_mechanism = SD_LC_GATE; /* gated whatever it reports */
    warned_be = member(CS_PRIO_LOW, true, "be2");
    assert_int_equal(log_lines_during(flip_tsg_states, "timeslices unavailable"), 0);
    cfg.lc_mechanism = SD_LC_AUTO;
    cfg.mode = CS_MODE_EXCLUSIVE; /* one holder: nobody beside it */
    warned_be = member(CS_PRIO_LOW, true, "be3");
    assert_int_equal(log_lines_during(flip_tsg_states, "timeslices unavailable"), 0);
}

static void test_auto_gates_without_timeslices(void **state)
{
    (void)state;
    /* An older client, one with CUSHARE_TSG=off, and be_timeslice_us 0
     * all leave gating as the only protection. */
    struct sd_member *old = member(CS_PRIO_LOW, false, "old");
    struct sd_member *off = member(CS_PRIO_NORMAL, true, "off");
    tsg_state(off, CS_TSG_MECH_OFF);
    struct sd_member *lc = member(CS_PRIO_HIGH, true, "lc");
    acquire(old);
    acquire(off);
    assert_int_equal(old->state, CS_STATE_HELD);
    assert_int_equal(off->state, CS_STATE_HELD);
    acquire(lc);
    assert_int_equal(old->state, CS_STATE_REVOKING);
    assert_int_equal(off->state, CS_STATE_REVOKING);
    assert_int_equal(lc->state, CS_STATE_HELD);
}

static void test_knob_zero_gates_in_auto(void **state)
{
    (void)state;
    cfg.be_timeslice_us = 0;
    struct sd_member *be = member(CS_PRIO_LOW, true, "be");
    tsg_state(be, CS_TSG_MECH_READY);
    struct sd_member *lc = member(CS_PRIO_HIGH, true, "lc");
    acquire(be);
    acquire(lc);
    assert_int_equal(be->state, CS_STATE_REVOKING);
    assert_int_equal(count(EV_TS, NULL), 0);
}

static void test_mechanism_gate_and_off(void **state)
{
    (void)state;
    cfg.lc_mechanism = SD_LC_GATE; /* even where timeslices would work */
    struct sd_member *be = member(CS_PRIO_LOW, true, "be");
    tsg_state(be, CS_TSG_MECH_READY);
    struct sd_member *lc = member(CS_PRIO_HIGH, true, "lc");
    acquire(be);
    acquire(lc);
    assert_int_equal(be->state, CS_STATE_REVOKING);
    assert_int_equal(count(EV_TS, NULL), 0); /* gated: no timeslice round trips */
    release(be, CS_RELEASE_REVOKED);
    release(lc, CS_RELEASE_IDLE);
    /* Off at run time: nothing gated, modes back to NONE. */
    cfg.lc_mechanism = SD_LC_OFF;
    sd_policy_reconfigure(&pol, now);
    assert_int_equal(last(EV_MODE, be)->a, CS_LC_NONE);
    acquire(be);
    acquire(lc);
    assert_int_equal(be->state, CS_STATE_HELD);
    assert_int_equal(lc->state, CS_STATE_HELD);
}

static void test_three_classes(void **state)
{
    (void)state;
    struct sd_member *lo = member(CS_PRIO_LOW, false, "lo");
    struct sd_member *mid = member(CS_PRIO_NORMAL, false, "mid");
    struct sd_member *hi = member(CS_PRIO_HIGH, false, "hi");
    acquire(lo);
    acquire(mid);
    assert_int_equal(lo->state, CS_STATE_HELD);
    assert_int_equal(mid->state, CS_STATE_HELD); /* same rules below high */
    acquire(hi);
    assert_int_equal(lo->state, CS_STATE_REVOKING);
    assert_int_equal(mid->state, CS_STATE_REVOKING);
    release(lo, CS_RELEASE_REVOKED);
    release(mid, CS_RELEASE_REVOKED);
    acquire(lo);
    acquire(mid);
    assert_int_equal(lo->state, CS_STATE_WAITING);
    assert_int_equal(mid->state, CS_STATE_WAITING);
    release(hi, CS_RELEASE_IDLE);
    assert_int_equal(lo->state, CS_STATE_HELD);
    assert_int_equal(mid->state, CS_STATE_HELD);
}

static void test_exclusive_mode_untouched(void **state)
{
    (void)state;
    cfg.mode = CS_MODE_EXCLUSIVE;
    struct sd_member *be, *lc;
    pair(CS_PRIO_LOW, false, &be, &lc);
    assert_int_equal(be->state, CS_STATE_REVOKING); /* plain preemption */
    assert_int_equal(be->st.lc_preempted, 0);
    assert_int_equal(lc->state, CS_STATE_WAITING); /* one holder at a time */
    assert_int_equal(count(EV_MODE, NULL), 0);
}

static void test_lc_waits_when_memory_does_not_fit(void **state)
{
    (void)state;
    struct sd_member *be = member(CS_PRIO_LOW, false, "be");
    struct sd_member *lc = member(CS_PRIO_HIGH, false, "lc");
    be->gpu->mem_total = 5 * GiB / 2; /* capacity 1 GiB beside 3 client reserves: one fits */
    cfg.client_reserve_mb = 512;
    struct cs_msg_usage u = {.slot = 0, .swapped = GiB, .footprint = GiB};
    const char *why = NULL;
    assert_int_equal(sd_policy_usage(&pol, lc->client, &u, now, &why), SD_OK);
    acquire(be);
    assert_int_equal(be->state, CS_STATE_HELD);
    acquire(lc);
    assert_int_equal(be->state, CS_STATE_REVOKING);
    assert_int_equal(lc->state, CS_STATE_WAITING); /* for the drain, then room */
    /* The revoke asked it to swap out as it leaves: once it has, the LC
     * job fits. */
    struct cs_msg_release r = {.slot = 0, .reason = CS_RELEASE_REVOKED, .lease_id = be->lease_id,
                               .swapped_bytes = GiB};
    assert_int_equal(sd_policy_release(&pol, be->client, &r, now, &why), SD_OK);
    assert_int_equal(lc->state, CS_STATE_HELD);
}

static void test_burst_reports(void **state)
{
    (void)state;
    struct sd_member *lc = member(CS_PRIO_HIGH, false, "lc");
    struct cs_msg_lc_burst b = {.slot = 0, .lease_id = 1, .wait_ns = 300000, .busy_ns = 900000};
    const char *why = NULL;
    assert_int_equal(sd_policy_lc_burst(&pol, lc->client, &b, &why), SD_OK);
    assert_int_equal(lc->st.bursts, 1);
    assert_int_equal(lc->st.burst_wait.count, 1);
    assert_int_equal(lc->st.burst_busy.sum_ns, 900000);
    b.slot = 3; /* not attached */
    assert_int_equal(sd_policy_lc_burst(&pol, lc->client, &b, &why), SD_EPROTO);
    /* From a client that never announced CS_HELLO_LC: a protocol error. */
    struct sd_client_info info = {.pid = 77, .priority = CS_PRIO_HIGH, .weight = 1};
    struct sd_client *old = sd_policy_client_add(&pol, &info, now);
    b.slot = 0;
    assert_int_equal(sd_policy_lc_burst(&pol, old, &b, &why), SD_EPROTO);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup_tsg, teardown)
#define G(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
int main(void)
{
    const struct CMUnitTest tests[] = {
        /* timeslices (tslice.c) */
        T(test_lc_beside_be_shortens_be),  T(test_lc_leaves_be_restored),
        T(test_knob_value_and_zero),       T(test_knob_zero_never_sends),
        T(test_exclusive_never_sends),     T(test_older_client_never_sent),
        T(test_be_becomes_high_restored),  T(test_lost_lease_keeps_setting),
        T(test_tsg_state_needs_capability),
        /* gating (lcgate.c) */
        G(test_gate_revokes_be_while_lc_has_work), G(test_modes_follow_the_neighbours),
        G(test_auto_prefers_timeslices),           G(test_unavailable_warned_once),
        G(test_auto_gates_without_timeslices),
        G(test_knob_zero_gates_in_auto),           G(test_mechanism_gate_and_off),
        G(test_three_classes),                     G(test_exclusive_mode_untouched),
        G(test_lc_waits_when_memory_does_not_fit), G(test_burst_reports),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
