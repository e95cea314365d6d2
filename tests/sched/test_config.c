/* test_config.c: cushared's knobs (src/sched/config.c): defaults, every
 * knob's parser with good and bad values, start-up-only knobs refused at
 * run time, cross-knob rules, per-client overrides, and the INI loader's
 * error reporting (file:line: reason). Also the state file round trip. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "sched/config.h"
#include "sched/buf.h"
#include "sched/metrics.h"
#include "sched/server.h"

static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    const char *t = getenv("TEST_TMP");
    snprintf(tmpdir, sizeof tmpdir, "%s", t && *t ? t : "/tmp");
    cs_log_init("test_config", CS_LOG_ERROR);
    return 0;
}

static void test_defaults(void **state)
{
    (void)state;
    struct sd_config c;
    sd_config_defaults(&c);
    assert_int_equal(c.mode, CS_MODE_MIXED);
    assert_int_equal(c.client_reserve_mb, SD_RESERVE_AUTO);
    assert_int_equal(c.mem_sample_ms, 1000);
    assert_int_equal(c.quantum_floor_ms, 100);
    assert_int_equal(c.quantum_cap_ms, 30000);
    assert_int_equal(c.idle_release_ms, 250);
    assert_int_equal(c.idle_report_ms, 50);
    assert_int_equal(sd_config_idle_report(&c), 50);
    assert_int_equal(c.revoke_timeout_ms, 10000);
    assert_true(c.force_release);
    assert_int_equal(c.reconnect_grace_ms, 1500);
    assert_true(c.switch_cost_target > 0.0499 && c.switch_cost_target < 0.0501);
    assert_string_equal(c.metrics, "");
    assert_int_equal(sd_config_check(&c, NULL, 0), 0);
}

struct kv {
    const char *key, *value;
    int ok;
};

static void test_every_knob(void **state)
{
    (void)state;
    static const struct kv cases[] = {
        {"mode", "shared", 1},           {"mode", "EXCLUSIVE", 1},
        {"mode", "fair", 0},             {"mode", "", 0},
        {"quantum_floor_ms", "1", 1},    {"quantum_floor_ms", "0", 0},
        {"quantum_floor_ms", "-5", 0},   {"quantum_floor_ms", "12x", 0},
        {"quantum_cap_ms", "3600000", 1}, {"quantum_cap_ms", "3600001", 0},
        {"idle_release_ms", "100", 1},   {"idle_release_ms", "", 0},
        {"idle_report_ms", "1", 1},      {"idle_report_ms", "0", 0},
        {"idle_report_ms", "3600001", 0},
        {"revoke_timeout_ms", "500", 1}, {"revoke_timeout_ms", "0", 0},
        {"reconnect_grace_ms", "0", 1},  {"reconnect_grace_ms", "1e3", 0},
        {"force_release", "false", 1},   {"force_release", "on", 1},
        {"force_release", "maybe", 0},   {"mem_reserve_mb", "1024", 1},
        {"mem_reserve_mb", "99999999999", 0},
        {"client_reserve_mb", "auto", 1}, {"client_reserve_mb", "AUTO", 1},
        {"client_reserve_mb", "512", 1}, {"client_reserve_mb", "1048577", 0},
        {"client_reserve_mb", "automatic", 0}, {"client_reserve_mb", "", 0},
        {"mem_sample_ms", "0", 1},       {"mem_sample_ms", "250", 1},
        {"mem_sample_ms", "3600001", 0},
        {"switch_cost_target", "0.1", 1}, {"switch_cost_target", "0", 0},
        {"switch_cost_target", "2", 0},  {"switch_cost_target", "nan", 0},
        {"switch_cost_target", "0.05x", 0},
        {"log_level", "debug", 1},       {"log_level", "2", 1},
        {"log_level", "loud", 0},        {"max_clients", "10", 1},
        {"max_clients", "0", 0},         {"metrics", "127.0.0.1:9400", 1},
        {"metrics", "[::1]:0", 1},       {"metrics", "localhost", 0},
        {"metrics", ":80", 0},           {"metrics", "h:70000", 0},
        {"state_file", "/run/x.state", 1}, {"state_file", "none", 1},
        {"state_file", "relative", 0},   {"quantum", "5", 0},
        {"default_max_priority", "low", 1}, {"default_max_priority", "HIGH", 1},
        {"default_max_priority", "top", 0}, {"default_max_weight", "1000000", 1},
        {"default_max_weight", "0", 0},  {"default_max_weight", "1000001", 0},
        {"default_mem_limit", "20G", 1}, {"default_mem_limit", "0", 1},
        {"default_mem_limit", "12Q", 0}, {"default_mem_limit", "-1", 0},
        {"endpoint_dir", "/run/cushare/ep", 1}, {"endpoint_dir", "none", 1},
        {"endpoint_dir", "ep", 0},       {"max_endpoints", "1", 1},
        {"max_endpoints", "0", 0},       {"endpoint_max_conns", "65536", 1},
        {"endpoint_max_conns", "0", 0},  {"endpoint_idle_ttl_s", "0", 1},
        {"endpoint_idle_ttl_s", "x", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sd_config c;
        sd_config_defaults(&c);
        char err[200] = "";
        int rc = sd_config_set(&c, cases[i].key, cases[i].value, false, err, sizeof err);
        if ((rc == 0) != cases[i].ok)
            fail_msg("%s=%s: rc %d (%s)", cases[i].key, cases[i].value, rc, err);
        if (!cases[i].ok)
            assert_true(strlen(err) > 0);
    }
    struct sd_config c;
    sd_config_defaults(&c);
    assert_int_equal(sd_config_set(&c, "mode", "shared", true, NULL, 0), 0);
    assert_int_equal(c.mode, CS_MODE_SHARED);
    assert_int_equal(sd_config_set(&c, "switch_cost_target", "0.2", true, NULL, 0), 0);
    assert_true(c.switch_cost_target > 0.199 && c.switch_cost_target < 0.201);
    assert_int_equal(sd_config_set(&c, "force_release", "0", true, NULL, 0), 0);
    assert_false(c.force_release);
}

static void test_runtime_refusals(void **state)
{
    (void)state;
    struct sd_config c;
    sd_config_defaults(&c);
    char err[200];
    assert_int_equal(sd_config_set(&c, "metrics", "127.0.0.1:1", true, err, sizeof err), -1);
    assert_non_null(strstr(err, "start-up"));
    assert_int_equal(sd_config_set(&c, "state_file", "none", true, err, sizeof err), -1);
    /* a grant is made at accept: its knobs are start-up only */
    assert_int_equal(sd_config_set(&c, "default_max_priority", "high", true, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "start-up"));
    assert_int_equal(sd_config_set(&c, "endpoint_dir", "/x", true, err, sizeof err), -1);
    assert_int_equal(sd_config_set(&c, "endpoint_idle_ttl_s", "60", true, err, sizeof err), 0);
    assert_int_equal(sd_config_set(&c, "nope", "1", true, err, sizeof err), -1);
    assert_string_equal(err, "unknown key 'nope'");
}

static void test_floor_above_cap(void **state)
{
    (void)state;
    struct sd_config c;
    sd_config_defaults(&c);
    char err[200];
    assert_int_equal(sd_config_set(&c, "quantum_floor_ms", "40000", true, err, sizeof err), 0);
    assert_int_equal(sd_config_check(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "quantum_floor_ms"));
    assert_int_equal(sd_config_set(&c, "quantum_cap_ms", "60000", true, err, sizeof err), 0);
    assert_int_equal(sd_config_check(&c, err, sizeof err), 0);
}

/* The pool pins within the pin budget (mem.c pin_budget): a pool_max_mb
 * above a pin_budget_mb that is set could never be reached, and is
 * refused; with the budget left at 0, pool_max_mb is the budget. */
static void test_pool_max_above_pin_budget(void **state)
{
    (void)state;
    struct sd_config c;
    sd_config_defaults(&c);
    char err[300];
    assert_int_equal(sd_config_set(&c, "pool_max_mb", "81920", true, err, sizeof err), 0);
    assert_int_equal(sd_config_check(&c, err, sizeof err), 0);
    assert_int_equal(sd_config_set(&c, "pin_budget_mb", "65536", true, err, sizeof err), 0);
    assert_int_equal(sd_config_check(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "pool_max_mb (81920) is above pin_budget_mb (65536)"));
    assert_int_equal(sd_config_set(&c, "pin_budget_mb", "81920", true, err, sizeof err), 0);
    assert_int_equal(sd_config_check(&c, err, sizeof err), 0);
}

/* The pin budget left at 0 (sd_config_pin_budget): half the RAM, raised
 * to the GPUs' memory as far as three quarters of the RAM and the host
 * reserve allow, and to pool_max_mb; pin_budget_mb when set. */
static void test_pin_budget_default(void **state)
{
    (void)state;
    const uint64_t G = 1ull << 30;
    struct sd_config c;
    sd_config_defaults(&c);
    char err[200];
    /* 125 GiB of RAM: reserve 12.5 GiB, three quarters 93.75 */
    assert_int_equal(sd_config_host_reserve(&c, 125 * G), 125 * G / 10);
    assert_int_equal(sd_config_pin_budget(&c, 125 * G, 0), 125 * G / 2);
    assert_int_equal(sd_config_pin_budget(&c, 125 * G, 40 * G), 125 * G / 2);
    assert_int_equal(sd_config_pin_budget(&c, 125 * G, 79 * G), 79 * G);
    assert_int_equal(sd_config_pin_budget(&c, 125 * G, 640 * G), 125 * G / 4 * 3);
    /* 16 GiB: the 4 GiB reserve floor is the bound */
    assert_int_equal(sd_config_host_reserve(&c, 16 * G), 4 * G);
    assert_int_equal(sd_config_pin_budget(&c, 16 * G, 80 * G), 12 * G);
    /* 6 GiB: the reserve is at most half, and so is the budget */
    assert_int_equal(sd_config_host_reserve(&c, 6 * G), 3 * G);
    assert_int_equal(sd_config_pin_budget(&c, 6 * G, 80 * G), 3 * G);
    /* a set host reserve bounds it */
    assert_int_equal(sd_config_set(&c, "host_reserve_mb", "51200", true, err, sizeof err), 0);
    assert_int_equal(sd_config_host_reserve(&c, 125 * G), 50 * G);
    assert_int_equal(sd_config_pin_budget(&c, 125 * G, 640 * G), 75 * G);
    /* pool_max_mb above it raises it */
    assert_int_equal(sd_config_set(&c, "pool_max_mb", "102400", true, err, sizeof err), 0);
    assert_int_equal(sd_config_pin_budget(&c, 125 * G, 79 * G), 100 * G);
    /* the RAM unknown: no bound */
    assert_int_equal(sd_config_pin_budget(&c, 0, 79 * G), UINT64_MAX);
    /* pin_budget_mb set: it, whatever else */
    assert_int_equal(sd_config_set(&c, "pin_budget_mb", "204800", true, err, sizeof err), 0);
    assert_int_equal(sd_config_pin_budget(&c, 125 * G, 79 * G), 200 * G);
    assert_int_equal(sd_config_pin_budget(&c, 0, 0), 200 * G);
}

static void test_overrides(void **state)
{
    (void)state;
    struct sd_override o;
    char err[200];
    memset(&o, 0, sizeof o);
    assert_int_equal(sd_override_parse("mode", "x", &o, err, sizeof err), 1);
    assert_int_equal(sd_override_parse("client.trainer.weight", "4", &o, err, sizeof err), 0);
    assert_string_equal(o.who, "trainer");
    assert_true(o.has_weight);
    assert_int_equal(o.weight, 4);
    assert_int_equal(sd_override_parse("client.trainer.priority", "high", &o, err, sizeof err),
                     0);
    assert_int_equal(o.priority, CS_PRIO_HIGH);
    /* dots in a name: the field is after the last one */
    struct sd_override d;
    memset(&d, 0, sizeof d);
    assert_int_equal(sd_override_parse("client.a.b.weight", "2", &d, err, sizeof err), 0);
    assert_string_equal(d.who, "a.b");
    static const char *const bad[][2] = {
        {"client.x.weight", "0"},   {"client.x.weight", "1000001"}, {"client.x.priority", "top"},
        {"client.x.colour", "red"}, {"client.weight", "1"},         {"client..weight", "1"},
        {"client.a b.weight", "1"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&d, 0, sizeof d);
        if (sd_override_parse(bad[i][0], bad[i][1], &d, err, sizeof err) != -1)
            fail_msg("%s=%s accepted", bad[i][0], bad[i][1]);
    }
    struct sd_overrides t;
    memset(&t, 0, sizeof t);
    assert_int_equal(sd_overrides_put(&t, &o), 0);
    memset(&d, 0, sizeof d);
    sd_override_parse("client.4242.weight", "9", &d, err, sizeof err);
    assert_int_equal(sd_overrides_put(&t, &d), 0);
    assert_ptr_equal(sd_overrides_find(&t, 1, "trainer"), &t.v[0]);
    assert_ptr_equal(sd_overrides_find(&t, 4242, "trainer"), &t.v[1]); /* pid wins */
    assert_null(sd_overrides_find(&t, 1, "other"));
    assert_null(sd_overrides_find(&t, 1, ""));
    /* merging keeps both fields */
    memset(&d, 0, sizeof d);
    sd_override_parse("client.trainer.weight", "8", &d, err, sizeof err);
    assert_int_equal(sd_overrides_put(&t, &d), 0);
    assert_int_equal(t.n, 2);
    assert_int_equal(t.v[0].weight, 8);
    assert_true(t.v[0].has_priority);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int load(const char *text, struct sd_config *c, struct sd_overrides *ov, char *err,
                size_t len)
{
    char path[300];
    snprintf(path, sizeof path, "%s/test.conf", tmpdir);
    write_file(path, text);
    sd_config_defaults(c);
    memset(ov, 0, sizeof *ov);
    int rc = sd_config_load(c, ov, path, err, len);
    unlink(path);
    return rc;
}

static void test_ini_file(void **state)
{
    (void)state;
    struct sd_config c;
    static struct sd_overrides ov;
    char err[300];
    assert_int_equal(load("# comment\nmode = shared\n[cushared]\nquantum_floor_ms=2000\n"
                          "[client.trainer]\nweight = 3\npriority = low\n",
                          &c, &ov, err, sizeof err),
                     0);
    assert_int_equal(c.mode, CS_MODE_SHARED);
    assert_int_equal(c.quantum_floor_ms, 2000);
    assert_int_equal(ov.n, 1);
    assert_int_equal(ov.v[0].weight, 3);
    assert_int_equal(ov.v[0].priority, CS_PRIO_LOW);

    assert_int_equal(load("mode=shared\nbogus=1\n", &c, &ov, err, sizeof err), -1);
    assert_non_null(strstr(err, "test.conf:2: unknown key 'bogus'"));
    assert_int_equal(load("quantum_cap_ms=abc\n", &c, &ov, err, sizeof err), -1);
    assert_non_null(strstr(err, ":1: quantum_cap_ms"));
    assert_int_equal(load("[gpu0]\nmode=shared\n", &c, &ov, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown section [gpu0]"));
    assert_int_equal(load("[client.x]\nweight=0\n", &c, &ov, err, sizeof err), -1);
    assert_int_equal(load("quantum_floor_ms=5000\nquantum_cap_ms=4000\n", &c, &ov, err,
                          sizeof err),
                     -1);
    assert_non_null(strstr(err, "above quantum_cap_ms"));
    assert_int_equal(load("this is not ini\n", &c, &ov, err, sizeof err), -1);
    assert_non_null(strstr(err, ":1:"));
    assert_int_equal(sd_config_load(&c, &ov, "/nonexistent/x.conf", err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot read"));
}

/* [uid.*] and [gid.*]: numbers and names (resolved at load), keys merged
 * per section, defaults in any order; errors with FILE:LINE. */
static void test_access_sections(void **state)
{
    (void)state;
    static struct sd_config c;
    static struct sd_overrides ov;
    char err[300];
    assert_int_equal(load("[uid.1000]\nmax_priority = high\nmax_weight = 8\n"
                          "[gid.root]\nmem_limit = 20G\n[uid.root]\nmax_weight=2\n"
                          "[cushared]\ndefault_max_priority = low\ndefault_mem_limit = 1G\n"
                          "[uid.1000]\nmem_limit = 0\n",
                          &c, &ov, err, sizeof err),
                     0);
    assert_int_equal(c.default_max_priority, CS_PRIO_LOW);
    assert_int_equal(c.default_mem_limit, 1ull << 30);
    assert_int_equal(c.access.n, 3);
    const struct sd_access_rule *r = &c.access.v[0];
    assert_int_equal(r->kind, SD_ACCESS_UID);
    assert_int_equal(r->id, 1000);
    assert_true(r->has_priority && r->has_weight && r->has_mem);
    assert_int_equal(r->max_priority, CS_PRIO_HIGH);
    assert_int_equal(r->max_weight, 8);
    assert_int_equal(r->mem_limit, 0);
    r = &c.access.v[1];
    assert_int_equal(r->kind, SD_ACCESS_GID);
    assert_int_equal(r->id, 0); /* the group named root */
    assert_true(r->has_mem && !r->has_priority && !r->has_weight);
    assert_int_equal(r->mem_limit, 20ull << 30);
    assert_int_equal(c.access.v[2].kind, SD_ACCESS_UID);
    assert_int_equal(c.access.v[2].id, 0);

    assert_int_equal(load("[uid.1000]\nmax_weight=1\n[uid.no-such-user-cs17]\nmax_weight=1\n",
                          &c, &ov, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "test.conf:4: [uid.no-such-user-cs17]: no user named"));
    assert_int_equal(load("[gid.no-such-group-cs17]\nmax_weight=1\n", &c, &ov, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "test.conf:2: [gid.no-such-group-cs17]: no group named"));
    assert_int_equal(load("\n[uid.7]\nmax_weight = 0\n", &c, &ov, err, sizeof err), -1);
    assert_non_null(strstr(err, "test.conf:3: [uid.7] max_weight: '0' is not an integer"));
    assert_int_equal(load("[gid.7]\nmax_priority = top\n", &c, &ov, err, sizeof err), -1);
    assert_non_null(strstr(err, ":2: [gid.7] max_priority"));
    assert_int_equal(load("[gid.7]\nmem_limit = lots\n", &c, &ov, err, sizeof err), -1);
    assert_non_null(strstr(err, ":2: [gid.7] mem_limit"));
    assert_int_equal(load("[uid.7]\npriority = high\n", &c, &ov, err, sizeof err), -1);
    assert_non_null(strstr(err, ":2: [uid.7]: unknown key 'priority'"));
    assert_int_equal(load("[uid.4294967295]\nmax_weight = 2\n", &c, &ov, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a valid uid"));
    assert_int_equal(load("[uid.]\nmax_weight = 2\n", &c, &ov, err, sizeof err), -1);
    assert_int_equal(load("default_max_weight = 0\n", &c, &ov, err, sizeof err), -1);
    assert_non_null(strstr(err, ":1: default_max_weight"));
    /* the table's cap */
    static char big[SD_ACCESS_MAX * 32 + 64];
    size_t n = 0;
    for (int i = 0; i <= SD_ACCESS_MAX; i++)
        n += (size_t)snprintf(big + n, sizeof big - n, "[uid.%d]\nmax_weight=2\n", 10000 + i);
    assert_int_equal(load(big, &c, &ov, err, sizeof err), -1);
    assert_non_null(strstr(err, "too many [uid.*] and [gid.*] sections"));
}

static void test_shipped_example_config(void **state)
{
    (void)state;
    struct sd_config c;
    static struct sd_overrides ov;
    char err[300];
    sd_config_defaults(&c);
    int rc = sd_config_load(&c, &ov, "deploy/cushared.conf", err, sizeof err);
    if (rc != 0)
        fail_msg("deploy/cushared.conf: %s", err);
}

static void test_dump_and_hostport(void **state)
{
    (void)state;
    struct sd_config c;
    sd_config_defaults(&c);
    char buf[2048];
    size_t n = sd_config_dump(&c, buf, sizeof buf);
    assert_true(n > 0 && n < sizeof buf);
    assert_non_null(strstr(buf, "mode=mixed\n"));
    assert_non_null(strstr(buf, "client_reserve_mb=auto\n"));
    assert_non_null(strstr(buf, "quantum_cap_ms=30000\n"));
    assert_non_null(strstr(buf, "force_release=true\n"));
    /* Every dumped line parses back. */
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        assert_non_null(eq);
        *eq = '\0';
        if (eq[1] == '\0')
            continue; /* empty text knobs */
        struct sd_config d;
        sd_config_defaults(&d);
        assert_int_equal(sd_config_set(&d, line, eq + 1, false, NULL, 0), 0);
    }
    char host[64];
    uint16_t port;
    assert_int_equal(sd_parse_hostport("127.0.0.1:9400", host, sizeof host, &port), 0);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 9400);
    assert_int_equal(sd_parse_hostport("[::1]:0", host, sizeof host, &port), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(sd_parse_hostport("nohost", host, sizeof host, &port), -1);
    assert_int_equal(sd_parse_hostport("h:", host, sizeof host, &port), -1);
}

/* ---- restart state file ------------------------------------------------------------- */

static void nop_grant(void *ctx, struct sd_member *m, uint32_t q)
{
    (void)ctx;
    (void)m;
    (void)q;
}

static void nop_revoke(void *ctx, struct sd_member *m, uint32_t reason, uint64_t evict)
{
    (void)ctx;
    (void)m;
    (void)reason;
    (void)evict;
}

static void test_state_round_trip(void **state)
{
    (void)state;
    static struct sd_config cfg;
    sd_config_defaults(&cfg);
    char path[300];
    snprintf(path, sizeof path, "%s/cushared.state", tmpdir);
    unlink(path);
    static struct sd_restore r;
    assert_int_equal(sd_state_load(path, &r), 1); /* absent: no past */
    assert_false(r.unknown);

    write_file(path, "cushared-state 1\nnext_id 40\n"
                     "gpu GPU-a0000000-0000-0000-0000-000000000001 2 1024 7 9\n"
                     "gpu GPU-a0000000-0000-0000-0000-000000000002 0 0\n");
    assert_int_equal(sd_state_load(path, &r), 0);
    assert_int_equal(r.next_client_id, 40);
    assert_int_equal(r.ngpu, 2);
    assert_int_equal(r.gpu[0].index, 2);
    assert_int_equal(r.gpu[0].mem_total, 1024);
    assert_int_equal(r.gpu[0].nholders, 2);
    assert_int_equal(r.gpu[0].holders[1], 9);
    assert_int_equal(r.gpu[1].nholders, 0);

    static const char *const bad[] = {
        "",
        "cushared-state 2\n",
        "cushared-state 1\ngpu nonsense 0 0\n",
        "cushared-state 1\ngpu GPU-a0000000-0000-0000-0000-000000000001 x 0\n",
        "cushared-state 1\ngpu GPU-a0000000-0000-0000-0000-000000000001 0 0 0\n",
        "cushared-state 1\nnext_id -1\n",
        "cushared-state 1\nwhat\n",
        "cushared-state 1\nnext_id 5", /* truncated: no newline */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(path, bad[i]);
        if (sd_state_load(path, &r) != -1 || !r.unknown)
            fail_msg("state '%s' accepted", bad[i]);
    }

    /* What a daemon writes, the next one reads: holders and their GPU. */
    static struct sd_policy p;
    static const struct sd_policy_ops ops = {.grant = nop_grant, .revoke = nop_revoke};
    sd_policy_init(&p, &cfg, &ops, NULL, 1, 1000);
    struct sd_client_info info = {.pid = 1, .weight = 1};
    struct sd_client *a = sd_policy_client_add(&p, &info, 1000);
    struct sd_client *b = sd_policy_client_add(&p, &info, 1000);
    struct cs_msg_attach at = {.slot = 0, .total_mem = 4096};
    at.uuid[0] = 0x5a;
    const char *why;
    assert_int_equal(sd_policy_attach(&p, a, &at, 1000, &why), SD_OK);
    assert_int_equal(sd_policy_attach(&p, b, &at, 1000, &why), SD_OK);
    assert_int_equal(sd_policy_acquire(&p, b, 0, 1000, &why), SD_OK);
    assert_int_equal(sd_state_save(path, &p), 0);
    assert_int_equal(sd_state_load(path, &r), 0);
    assert_int_equal(r.ngpu, 1);
    assert_int_equal(r.gpu[0].uuid[0], 0x5a);
    assert_int_equal(r.gpu[0].mem_total, 4096);
    assert_int_equal(r.gpu[0].nholders, 1);
    assert_int_equal(r.gpu[0].holders[0], b->id);
    assert_true(r.next_client_id > b->id);
    sd_policy_fini(&p);
    assert_int_equal(sd_state_save("/nonexistent/dir/x.state", &p), -1);
    unlink(path);
}

/* ---- the docs name every knob and every metric ------------------------------------ */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot read %s", path);
    static char buf[1 << 17];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void test_docs_cover_knobs(void **state)
{
    (void)state;
    struct sd_config c;
    sd_config_defaults(&c);
    char dump[4096], want[80];
    sd_config_dump(&c, dump, sizeof dump);
    const char *doc = slurp("docs/configuration.md");
    char *save = NULL;
    for (char *l = strtok_r(dump, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        *strchr(l, '=') = '\0';
        snprintf(want, sizeof want, "| `%s` |", l);
        if (!strstr(doc, want))
            fail_msg("docs/configuration.md does not document %s", l);
    }
}

static void test_docs_cover_metrics(void **state)
{
    (void)state;
    static struct sd_server srv;
    struct sd_config cfg;
    sd_config_defaults(&cfg);
    static const struct sd_node none = {.source = "none"}; /* no discovery here */
    struct sd_server_opts o = {.lease_base = 1, .node = &none};
    assert_int_equal(sd_server_init(&srv, &cfg, NULL, &o), 0);
    struct sd_client_info info = {.pid = 7, .weight = 1};
    struct sd_client *cl = sd_policy_client_add(&srv.policy, &info, sd_server_now(&srv));
    struct cs_msg_attach at = {.slot = 0};
    const char *why;
    assert_int_equal(sd_policy_attach(&srv.policy, cl, &at, sd_server_now(&srv), &why), SD_OK);
    struct sd_buf b = {0};
    sd_metrics_render(&srv, &b);
    assert_false(b.oom);
    const char *doc = slurp("docs/metrics.md");
    size_t names = 0;
    char want[128];
    for (const char *p = b.p; (p = strstr(p, "# TYPE ")); p++) {
        char name[100];
        assert_int_equal(sscanf(p + 7, "%99s", name), 1);
        snprintf(want, sizeof want, "| `%s` |", name);
        if (!strstr(doc, want))
            fail_msg("docs/metrics.md does not document %s", name);
        names++;
    }
    assert_true(names >= 25);
    sd_buf_free(&b);
    sd_server_fini(&srv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_every_knob),
        cmocka_unit_test(test_runtime_refusals),
        cmocka_unit_test(test_floor_above_cap),
        cmocka_unit_test(test_pool_max_above_pin_budget),
        cmocka_unit_test(test_pin_budget_default),
        cmocka_unit_test(test_overrides),
        cmocka_unit_test(test_ini_file),
        cmocka_unit_test(test_shipped_example_config),
        cmocka_unit_test(test_dump_and_hostport),
        cmocka_unit_test(test_state_round_trip),
        cmocka_unit_test(test_access_sections),
        cmocka_unit_test(test_docs_cover_knobs),
        cmocka_unit_test(test_docs_cover_metrics),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
