/* test_access.c: what a client may claim (src/sched/access.c and its use in
 * dispatch.c, control.c and room.c).
 *
 * Unit part: the resolution order ([uid.*], the best of [gid.*], owner and
 * root, defaults), keys a section leaves out, the clamp and its bits, the
 * description. Server part: the real daemon without a listening socket,
 * driven over socketpairs whose daemon end is adopted with made-up
 * credentials (as the fuzzer does), so another uid needs no root: a tenant
 * asking high gets normal/1, the owner gets what it asks, a name override
 * does not lift a tenant's grant (at HELLO and by `set`), a pid override
 * does, TERMS goes only to clients that announce it, a tenant's pod and
 * namespace are dropped and so is its container (LABELS), which is
 * believed where the pod is, and ROOM beyond the granted memory is refused
 * without evicting anyone. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <cuda.h>

#include "common/log.h"
#include "sched/access.h"
#include "sched/server.h"
#include "tserver.h"

#define OWNER 500u
#define TENANT 60001u

static struct sd_config cfg;

static int setup(void **state)
{
    (void)state;
    cs_log_init("test_access", CS_LOG_ERROR);
    sd_config_defaults(&cfg);
    return 0;
}

static void put(const char *section, const char *key, const char *value)
{
    char err[200];
    if (sd_access_parse(&cfg.access, section, key, value, err, sizeof err) != 0)
        fail_msg("[%s] %s = %s: %s", section, key, value, err);
}

static void resolve(uint32_t uid, const uint32_t *gids, size_t n, struct sd_grant *g)
{
    sd_access_resolve(&cfg, OWNER, uid, gids, n, g);
}

static void expect_grant(const struct sd_grant *g, uint32_t prio, uint32_t weight, uint64_t mem,
                         const char *source)
{
    assert_int_equal(g->max_priority, prio);
    assert_int_equal(g->max_weight, weight);
    assert_int_equal(g->mem_limit, mem);
    assert_string_equal(g->source, source);
    assert_false(g->identity);
}

/* ---- resolution ------------------------------------------------------------------- */

static void test_uid_section_wins(void **state)
{
    (void)state;
    sd_config_defaults(&cfg);
    put("uid.1000", "max_priority", "normal");
    put("uid.1000", "max_weight", "4");
    put("gid.100", "max_priority", "high");
    put("gid.100", "max_weight", "8");
    struct sd_grant g;
    const uint32_t gids[] = {1000, 100};
    resolve(1000, gids, 2, &g);
    expect_grant(&g, CS_PRIO_NORMAL, 4, 0, "uid 1000");
    resolve(1001, gids, 2, &g); /* same groups, no uid section */
    expect_grant(&g, CS_PRIO_HIGH, 8, 0, "gid 100");
    /* a uid section also binds the owner and root */
    put("uid.500", "max_weight", "2");
    resolve(OWNER, gids, 1, &g);
    expect_grant(&g, CS_PRIO_NORMAL, 2, 0, "uid 500");
}

static void test_best_of_groups_field_by_field(void **state)
{
    (void)state;
    sd_config_defaults(&cfg);
    put("gid.100", "max_priority", "low");
    put("gid.100", "max_weight", "8");
    put("gid.100", "mem_limit", "10G");
    put("gid.200", "max_priority", "normal");
    put("gid.200", "max_weight", "2");
    put("gid.200", "mem_limit", "0");
    put("gid.300", "mem_limit", "4G");
    struct sd_grant g;
    const uint32_t both[] = {7, 100, 200, 100};
    resolve(TENANT, both, 4, &g);
    expect_grant(&g, CS_PRIO_NORMAL, 8, 0, "gid 100,200"); /* repeated gid once */
    const uint32_t limited[] = {100, 300};
    resolve(TENANT, limited, 2, &g);
    expect_grant(&g, CS_PRIO_NORMAL, 8, 10ull << 30, "gid 100,300");
    /* a key left out takes its default, whenever the default was set */
    const uint32_t only300[] = {300};
    resolve(TENANT, only300, 1, &g);
    expect_grant(&g, CS_PRIO_NORMAL, 1, 4ull << 30, "gid 300");
    char err[100];
    assert_int_equal(sd_config_set(&cfg, "default_max_weight", "3", false, err, sizeof err), 0);
    resolve(TENANT, only300, 1, &g);
    expect_grant(&g, CS_PRIO_NORMAL, 3, 4ull << 30, "gid 300");
    /* a group section limits the owner too: it names the owner's group */
    resolve(OWNER, only300, 1, &g);
    expect_grant(&g, CS_PRIO_NORMAL, 3, 4ull << 30, "gid 300");
}

static void test_owner_root_and_defaults(void **state)
{
    (void)state;
    sd_config_defaults(&cfg);
    struct sd_grant g;
    const uint32_t gid = 4000;
    resolve(OWNER, &gid, 1, &g);
    expect_grant(&g, CS_PRIO_HIGH, CS_WEIGHT_MAX, 0, "owner");
    assert_true(sd_grant_trusted(&g));
    resolve(0, &gid, 1, &g);
    expect_grant(&g, CS_PRIO_HIGH, CS_WEIGHT_MAX, 0, "root");
    assert_true(sd_grant_trusted(&g));
    resolve(TENANT, &gid, 1, &g);
    expect_grant(&g, CS_PRIO_NORMAL, 1, 0, "default");
    assert_false(sd_grant_trusted(&g));
    char err[100];
    assert_int_equal(sd_config_set(&cfg, "default_max_priority", "low", false, err, sizeof err),
                     0);
    assert_int_equal(sd_config_set(&cfg, "default_mem_limit", "2G", false, err, sizeof err), 0);
    resolve(TENANT, NULL, 0, &g);
    expect_grant(&g, CS_PRIO_LOW, 1, 2ull << 30, "default");
    /* root under its own section is limited, and no longer trusted */
    put("uid.0", "max_priority", "normal");
    resolve(0, &gid, 1, &g);
    expect_grant(&g, CS_PRIO_NORMAL, 1, 2ull << 30, "uid 0");
    assert_false(sd_grant_trusted(&g));
}

/* ---- the clamp ------------------------------------------------------------------------ */

static void test_apply_and_bits(void **state)
{
    (void)state;
    struct sd_grant g = {.max_priority = CS_PRIO_NORMAL, .max_weight = 1, .mem_limit = 8ull << 30};
    struct sd_client_info in = {.priority = CS_PRIO_HIGH, .weight = CS_WEIGHT_MAX};
    assert_int_equal(sd_grant_apply(&g, &in),
                     SD_GRANT_CUT_PRIORITY | SD_GRANT_CUT_WEIGHT | SD_GRANT_CUT_MEM);
    assert_int_equal(in.priority, CS_PRIO_NORMAL);
    assert_int_equal(in.weight, 1);
    assert_int_equal(in.mem_limit, 8ull << 30); /* asked none: gets the grant's */
    struct sd_client_info less = {.priority = CS_PRIO_LOW, .weight = 1, .mem_limit = 4ull << 30};
    assert_int_equal(sd_grant_apply(&g, &less), 0); /* asking less is always fine */
    assert_int_equal(less.priority, CS_PRIO_LOW);
    assert_int_equal(less.mem_limit, 4ull << 30);
    struct sd_client_info more = {.priority = CS_PRIO_NORMAL, .weight = 1,
                                  .mem_limit = 16ull << 30};
    assert_int_equal(sd_grant_apply(&g, &more), SD_GRANT_CUT_MEM);
    assert_int_equal(more.mem_limit, 8ull << 30);
    struct sd_grant open = {.max_priority = CS_PRIO_HIGH, .max_weight = CS_WEIGHT_MAX};
    struct sd_client_info any = {.priority = CS_PRIO_HIGH, .weight = 77, .mem_limit = 1 << 20};
    assert_int_equal(sd_grant_apply(&open, &any), 0);
    assert_int_equal(any.mem_limit, 1 << 20);
    /* a malformed grant from elsewhere never yields weight 0 or a class past low */
    struct sd_grant bad = {.max_priority = 9, .max_weight = 0};
    uint32_t p = CS_PRIO_HIGH, w = 5;
    assert_int_equal(sd_grant_clamp(&bad, &p, &w), SD_GRANT_CUT_PRIORITY | SD_GRANT_CUT_WEIGHT);
    assert_int_equal(p, CS_PRIO_LOW);
    assert_int_equal(w, 1);
}

static void test_describe(void **state)
{
    (void)state;
    struct sd_grant g = {.max_priority = CS_PRIO_NORMAL, .max_weight = 1};
    strcpy(g.source, "default");
    char t[CS_TEXT_LEN];
    sd_grant_describe(&g, 1000, t, sizeof t);
    assert_string_equal(t, "uid 1000 may claim at most normal, weight 1 (default grant)");
    g.mem_limit = 20ull << 30;
    strcpy(g.source, "gid 100");
    sd_grant_describe(&g, 1000, t, sizeof t);
    assert_string_equal(t, "uid 1000 may claim at most normal, weight 1, memory 20.00 GiB "
                           "(gid 100 grant)");
}

/* ---- the daemon over socketpairs --------------------------------------------------------- */

static struct sd_server srv;

static void server_start(void)
{
    ts_start(&srv, &cfg, NULL, OWNER);
}

static void server_stop(void)
{
    sd_server_fini(&srv);
}

struct peer {
    int fd;               /* our end */
    struct sd_conn *c;    /* the daemon's */
};

static struct peer adopt(uint32_t pid, uint32_t uid)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv),
                     0);
    struct peer p = {.fd = sv[1], .c = sd_conn_adopt(&srv, sv[0], pid, uid, uid)};
    assert_non_null(p.c);
    return p;
}

static void say(struct peer *p, const struct cs_msg *m)
{
    ts_say(&srv, p->c, m);
}

/* The next message the daemon sent, which must be of this type. */
static void expect(struct peer *p, uint16_t type, struct cs_msg *out)
{
    const char *why = "";
    int r = cs_recv(p->fd, out, &why);
    if (r != 1)
        fail_msg("expected %s, got rc %d (%s)", cs_msg_name(type), r, why);
    if (out->type != type)
        fail_msg("expected %s, got %s", cs_msg_name(type), cs_msg_name(out->type));
}

static void expect_nothing(struct peer *p)
{
    struct cs_msg m;
    int r = cs_recv(p->fd, &m, NULL);
    if (r == 1)
        fail_msg("unexpected %s", cs_msg_name(m.type));
    assert_int_equal(r, -EAGAIN);
}

static struct sd_client *hello(struct peer *p, uint32_t prio, uint32_t weight, uint32_t flags,
                               const char *name)
{
    struct cs_msg h = {.type = CS_MSG_HELLO};
    h.u.hello.flags = flags;
    h.u.hello.priority = prio;
    h.u.hello.weight = weight;
    h.u.hello.proto_min = 1;
    strcpy(h.u.hello.name, name);
    strcpy(h.u.hello.pod, "pod-of-victim");
    strcpy(h.u.hello.ns, "victims");
    say(p, &h);
    struct cs_msg w;
    expect(p, CS_MSG_WELCOME, &w);
    assert_non_null(p->c->client);
    return p->c->client;
}

static void test_tenant_clamped_owner_not(void **state)
{
    (void)state;
    sd_config_defaults(&cfg);
    server_start();
    struct peer t = adopt(7001, TENANT);
    struct sd_client *tc = hello(&t, CS_PRIO_HIGH, CS_WEIGHT_MAX, CS_HELLO_TERMS, "x");
    assert_int_equal(tc->info.priority, CS_PRIO_NORMAL);
    assert_int_equal(tc->info.weight, 1);
    assert_int_equal(tc->info.uid, TENANT);
    struct cs_msg m;
    expect(&t, CS_MSG_TERMS, &m);
    assert_int_equal(m.u.terms.priority, CS_PRIO_NORMAL);
    assert_int_equal(m.u.terms.weight, 1);
    assert_int_equal(m.u.terms.mem_limit, 0);
    assert_int_equal(m.u.terms.flags, CS_TERMS_CUT_PRIORITY | CS_TERMS_CUT_WEIGHT);
    assert_string_equal(m.u.terms.text,
                        "uid 60001 may claim at most normal, weight 1 (default grant)");
    /* its pod and namespace would pass it for another tenant: dropped */
    assert_string_equal(tc->info.pod, "");
    assert_string_equal(tc->info.ns, "");

    struct peer o = adopt(7002, OWNER);
    struct sd_client *oc = hello(&o, CS_PRIO_HIGH, CS_WEIGHT_MAX, CS_HELLO_TERMS, "y");
    assert_int_equal(oc->info.priority, CS_PRIO_HIGH);
    assert_int_equal(oc->info.weight, CS_WEIGHT_MAX);
    assert_string_equal(oc->info.pod, "pod-of-victim"); /* trusted */
    expect(&o, CS_MSG_TERMS, &m);
    assert_int_equal(m.u.terms.flags, 0);
    assert_string_equal(m.u.terms.text, "");
    expect_nothing(&o);
    close(t.fd);
    close(o.fd);
    server_stop();
}

/* TERMS only to a client that announced it: an older one would close the
 * connection on the unknown type. Its grant holds all the same. */
static void test_terms_only_with_the_capability(void **state)
{
    (void)state;
    sd_config_defaults(&cfg);
    server_start();
    struct peer t = adopt(7003, TENANT);
    struct sd_client *tc = hello(&t, CS_PRIO_HIGH, 50, CS_HELLO_TSG | CS_HELLO_LC | CS_HELLO_PIN,
                                 "old");
    expect_nothing(&t);
    assert_int_equal(tc->info.priority, CS_PRIO_NORMAL);
    assert_int_equal(tc->info.weight, 1);
    close(t.fd);
    server_stop();
}

/* An endpoint's grant names the tenant: its pod and namespace win over HELLO. */
static void test_identity_from_the_grant(void **state)
{
    (void)state;
    sd_config_defaults(&cfg);
    server_start();
    struct peer t = adopt(7004, 0);
    t.c->grant.identity = true;
    strcpy(t.c->grant.pod, "train-7");
    strcpy(t.c->grant.ns, "team-a");
    strcpy(t.c->grant.source, "endpoint 3");
    struct sd_client *tc = hello(&t, CS_PRIO_NORMAL, 1, 0, "z");
    assert_string_equal(tc->info.pod, "train-7");
    assert_string_equal(tc->info.ns, "team-a");
    close(t.fd);
    server_stop();
}

static void labels(struct peer *p, const char *container)
{
    struct cs_msg l = {.type = CS_MSG_LABELS};
    strcpy(l.u.labels.container, container);
    say(p, &l);
}

/* The connection p was closed for a protocol error whose reason has why. */
static void expect_failed(struct peer *p, const char *why)
{
    struct cs_msg e;
    expect(p, CS_MSG_ERROR, &e);
    if (!strstr(e.u.error.text, why))
        fail_msg("ERROR '%s', expected '%s'", e.u.error.text, why);
    close(p->fd);
}

/* LABELS' container is believed where the pod is: from the owner, from an
 * endpoint that names the pod; a tenant's is dropped with its pod. Once per
 * connection, announced, before ATTACH: anything else is a protocol error. */
static void test_container_label(void **state)
{
    (void)state;
    sd_config_defaults(&cfg);
    server_start();
    struct peer o = adopt(7010, OWNER), t = adopt(7011, TENANT), e = adopt(7012, 0);
    e.c->grant.identity = true;
    strcpy(e.c->grant.pod, "train-7");
    strcpy(e.c->grant.source, "endpoint 3");
    struct sd_client *oc = hello(&o, CS_PRIO_NORMAL, 1, CS_HELLO_LABELS, "o");
    struct sd_client *tc = hello(&t, CS_PRIO_NORMAL, 1, CS_HELLO_LABELS, "t");
    struct sd_client *ec = hello(&e, CS_PRIO_NORMAL, 1, CS_HELLO_LABELS, "e");
    labels(&o, "server");
    labels(&t, "server");
    labels(&e, "trainer");
    assert_string_equal(oc->info.container, "server");
    assert_string_equal(tc->info.container, "");
    assert_string_equal(ec->info.container, "trainer");
    expect_nothing(&o);
    labels(&o, "again");
    expect_failed(&o, "second LABELS");
    struct peer old = adopt(7013, OWNER);
    hello(&old, CS_PRIO_NORMAL, 1, 0, "old");
    labels(&old, "x");
    expect_failed(&old, "LABELS without CS_HELLO_LABELS");
    struct peer late = adopt(7014, OWNER);
    hello(&late, CS_PRIO_NORMAL, 1, CS_HELLO_LABELS, "late");
    struct cs_msg a = {.type = CS_MSG_ATTACH};
    a.u.attach.uuid[0] = 0x17;
    say(&late, &a);
    labels(&late, "x");
    expect_failed(&late, "LABELS after ATTACH");
    close(t.fd);
    close(e.fd);
    server_stop();
}

static void control_set(struct peer *ctl, const char *key, const char *value)
{
    struct cs_msg m = {.type = CS_MSG_CTL_SET};
    strcpy(m.u.ctl_set.key, key);
    strcpy(m.u.ctl_set.value, value);
    say(ctl, &m);
    struct cs_msg d;
    expect(ctl, CS_MSG_CTL_DONE, &d);
    if (d.u.ctl_done.status != 0)
        fail_msg("set %s=%s: %s", key, value, d.u.ctl_done.text);
}

/* A name is the client's own choice: a tenant that takes the name of an
 * overridden job gets no more than its grant, at HELLO and by `set`; a pid
 * comes from SO_PEERCRED and its override applies in full. */
static void test_overrides_and_grants(void **state)
{
    (void)state;
    sd_config_defaults(&cfg);
    static struct sd_overrides ov;
    memset(&ov, 0, sizeof ov);
    struct sd_override o = {.has_priority = true, .has_weight = true,
                            .priority = CS_PRIO_HIGH, .weight = 50};
    strcpy(o.who, "serve");
    assert_int_equal(sd_overrides_put(&ov, &o), 0);
    ts_start(&srv, &cfg, &ov, OWNER);

    struct peer t = adopt(7005, TENANT);
    struct sd_client *tc = hello(&t, CS_PRIO_LOW, 1, 0, "serve");
    assert_int_equal(tc->info.priority, CS_PRIO_NORMAL);
    assert_int_equal(tc->info.weight, 1);
    struct peer own = adopt(7006, OWNER);
    struct sd_client *oc = hello(&own, CS_PRIO_LOW, 1, 0, "serve");
    assert_int_equal(oc->info.priority, CS_PRIO_HIGH);
    assert_int_equal(oc->info.weight, 50);

    /* the same by `set`, on clients already registered */
    struct peer ctl = adopt(7007, OWNER);
    struct cs_msg h = {.type = CS_MSG_HELLO};
    h.u.hello.flags = CS_HELLO_CONTROL;
    h.u.hello.weight = 1;
    h.u.hello.proto_min = 1;
    say(&ctl, &h);
    struct cs_msg w;
    expect(&ctl, CS_MSG_WELCOME, &w);
    control_set(&ctl, "client.serve.weight", "70");
    assert_int_equal(tc->info.weight, 1);
    assert_int_equal(oc->info.weight, 70);
    /* a pid setting is the operator's word about that process: in full */
    control_set(&ctl, "client.7005.priority", "high");
    assert_int_equal(tc->info.priority, CS_PRIO_HIGH);
    close(t.fd);
    close(own.fd);
    close(ctl.fd);
    server_stop();
}

static void usage(struct peer *p, uint64_t resident)
{
    struct cs_msg u = {.type = CS_MSG_USAGE};
    u.u.usage.resident = resident;
    u.u.usage.footprint = resident;
    say(p, &u);
}

/* An older client does not know its memory grant; the daemon evicts nobody
 * to take it beyond it. */
static void test_room_beyond_the_grant_refused(void **state)
{
    (void)state;
    sd_config_defaults(&cfg);
    char err[100];
    assert_int_equal(sd_config_set(&cfg, "default_mem_limit", "64M", false, err, sizeof err), 0);
    cfg.mem_reserve_mb = 0;
    server_start();
    struct cs_msg a = {.type = CS_MSG_ATTACH};
    a.u.attach.total_mem = 1ull << 30;
    a.u.attach.uuid[0] = 0x17;
    /* a job of the owner, resident and idle: the only possible victim */
    struct peer v = adopt(7008, OWNER);
    hello(&v, CS_PRIO_NORMAL, 1, 0, "victim");
    say(&v, &a);
    usage(&v, 512ull << 20);
    struct peer t = adopt(7009, TENANT);
    struct sd_client *tc = hello(&t, CS_PRIO_NORMAL, 1, 0, "tenant");
    assert_int_equal(tc->info.mem_limit, 64ull << 20);
    say(&t, &a);
    struct cs_msg q = {.type = CS_MSG_ACQUIRE};
    say(&t, &q);
    struct cs_msg m;
    expect(&t, CS_MSG_GRANT, &m);
    usage(&t, 60ull << 20);
    struct cs_msg r = {.type = CS_MSG_ROOM};
    r.u.room.request_id = 1;
    r.u.room.bytes = 8ull << 20;
    say(&t, &r);
    expect(&t, CS_MSG_ROOM_REPLY, &m);
    assert_int_equal(m.u.room_reply.status, CUDA_ERROR_OUT_OF_MEMORY);
    expect_nothing(&v);
    /* within the grant, room is made as before */
    r.u.room.request_id = 2;
    r.u.room.bytes = 2ull << 20;
    say(&t, &r);
    expect(&v, CS_MSG_EVICT, &m);
    close(v.fd);
    close(t.fd);
    server_stop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uid_section_wins),
        cmocka_unit_test(test_best_of_groups_field_by_field),
        cmocka_unit_test(test_owner_root_and_defaults),
        cmocka_unit_test(test_apply_and_bits),
        cmocka_unit_test(test_describe),
        cmocka_unit_test(test_tenant_clamped_owner_not),
        cmocka_unit_test(test_terms_only_with_the_capability),
        cmocka_unit_test(test_identity_from_the_grant),
        cmocka_unit_test(test_container_label),
        cmocka_unit_test(test_overrides_and_grants),
        cmocka_unit_test(test_room_beyond_the_grant_refused),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
