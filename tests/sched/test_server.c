/* test_server.c: what the server lets in (src/sched/server.c, dispatch.c),
 * driven by hand: socketpairs whose daemon end is admitted with made-up
 * credentials, and an injected clock.
 *
 * - connection caps: max_conns_per_uid per peer uid (the owner and root
 *   exempt), the total cap keeping its last slots for the owner and root;
 *   each refusal an ERROR with the reason, counted by reason;
 * - the HELLO deadline: a connection that does not say HELLO within
 *   hello_timeout_ms is closed with an ERROR saying so, one that did stays;
 * - the node's GPUs: an ATTACH of another GPU is refused and the GPU table
 *   does not grow, the GPU's memory is the node's, a state file's lines for
 *   other GPUs are ignored. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "sched/server.h"
#include "tserver.h"

#define MS 1000000ull

static uint64_t now_ns;
static uint64_t test_clock(void *ctx)
{
    (void)ctx;
    return now_ns;
}

static struct sd_server srv;
static struct sd_node node;

/* The node: one GPU, ...-000000000001, 16 GiB. */
static void node_uuid(uint8_t last, uint8_t out[CS_UUID_LEN])
{
    memset(out, 0x42, CS_UUID_LEN);
    out[CS_UUID_LEN - 1] = last;
}

static void start(struct sd_config *cfg, const char *state)
{
    memset(&node, 0, sizeof node);
    node.n = 1;
    node.source = "test";
    node_uuid(1, node.gpu[0].uuid);
    node.gpu[0].mem_total = 16ull << 30;
    now_ns = 1000 * MS;
    struct sd_server_opts o = {
        .clock = test_clock, .lease_base = 1, .node = &node, .state_path = state};
    assert_int_equal(sd_server_init(&srv, cfg, NULL, &o), 0);
}

static int teardown(void **state)
{
    (void)state;
    sd_server_fini(&srv);
    return 0;
}

struct peer {
    int fd;            /* our end, -1 when refused */
    struct sd_conn *c; /* the daemon's */
    struct cs_msg err; /* the ERROR a refused one got */
};

static struct peer connect_as(uint32_t uid)
{
    struct peer p = {.fd = -1};
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv),
                     0);
    p.c = sd_server_admit(&srv, sv[0], 4000 + uid, uid, uid);
    sd_server_settle(&srv);
    if (p.c) {
        p.fd = sv[1];
        return p;
    }
    const char *why = "?";
    assert_int_equal(cs_recv(sv[1], &p.err, &why), 1);
    assert_int_equal(p.err.type, CS_MSG_ERROR);
    uint8_t b[8];
    assert_int_equal(recv(sv[1], b, sizeof b, MSG_DONTWAIT), 0); /* then closed */
    close(sv[1]);
    return p;
}

static void say(struct peer *p, const struct cs_msg *m)
{
    ts_say(&srv, p->c, m);
}

/* A record that reaches the daemon's end of the socket and stays there
 * unread (this rig hands records to sd_conn_input directly): as a client's
 * USAGE or ACQUIRE sent right after its ATTACH would. */
static void unread(struct peer *p)
{
    struct cs_msg m = {.type = CS_MSG_ACQUIRE};
    uint8_t rec[CS_MSG_MAX];
    int n = cs_msg_encode(&m, rec, sizeof rec);
    assert_true(n > 0);
    assert_int_equal(send(p->fd, rec, (size_t)n, MSG_DONTWAIT), n);
}

static void hello(struct peer *p, uint32_t flags)
{
    struct cs_msg h = {.type = CS_MSG_HELLO};
    h.u.hello.flags = flags;
    h.u.hello.weight = 1;
    h.u.hello.proto_min = CS_PROTO_VERSION;
    say(p, &h);
}

/* The next message the daemon sent p, of this type. */
static struct cs_msg expect(struct peer *p, uint16_t type)
{
    struct cs_msg m;
    const char *why = "?";
    assert_int_equal(cs_recv(p->fd, &m, &why), 1);
    if (m.type != type)
        fail_msg("got %s (%s), not %s", cs_msg_name(m.type),
                 m.type == CS_MSG_ERROR ? m.u.error.text : "", cs_msg_name(type));
    return m;
}

/* Whether the daemon still has p's connection (a closed one is freed). */
static bool open_on_daemon(const struct peer *p)
{
    for (const struct sd_conn *c = srv.conns; c; c = c->next)
        if (c == p->c)
            return true;
    return false;
}

static void hang_up(struct peer *p)
{
    p->c->dead = true; /* as an EOF would do */
    sd_server_settle(&srv);
    close(p->fd);
    p->fd = -1;
}

static void test_per_uid_cap(void **state)
{
    (void)state;
    struct sd_config cfg;
    sd_config_defaults(&cfg);
    cfg.max_conns_per_uid = 3;
    start(&cfg, NULL);
    struct peer a[3];
    for (int i = 0; i < 3; i++)
        assert_non_null((a[i] = connect_as(1000)).c);
    struct peer x = connect_as(1000);
    assert_null(x.c);
    assert_int_equal(x.err.u.error.code, EBUSY);
    assert_string_equal(x.err.u.error.text,
                        "refused: uid 1000 has 3 connections open (max_conns_per_uid)");
    assert_non_null(connect_as(1001).c); /* another uid is not affected */
    for (int i = 0; i < 10; i++)         /* root is exempt */
        assert_non_null(connect_as(0).c);
    if (srv.owner_uid != 0)
        for (int i = 0; i < 10; i++) /* and so is the daemon's owner */
            assert_non_null(connect_as(srv.owner_uid).c);
    assert_int_equal(srv.ctr.refusals[SD_REFUSE_UID_CONNS], 1);
    assert_int_equal(srv.ctr.refused, 1);
    hang_up(&a[0]); /* one closes: the uid may open another */
    assert_non_null(connect_as(1000).c);
}

/* Other uids may fill max_clients connections; the daemon's owner and root
 * then still have SD_OWNER_RESERVE, e.g. for cusharectl status. */
static void test_owner_reserve(void **state)
{
    (void)state;
    struct sd_config cfg;
    sd_config_defaults(&cfg);
    cfg.max_clients = 4;
    start(&cfg, NULL);
    for (uint32_t u = 0; u < 4; u++)
        assert_non_null(connect_as(2000 + u).c);
    struct peer x = connect_as(2004);
    assert_null(x.c);
    assert_non_null(strstr(x.err.u.error.text, "refused: 4 connections open (max_clients"));
    assert_int_equal(srv.ctr.refusals[SD_REFUSE_CONNS], 1);
    struct peer ctl = connect_as(srv.owner_uid);
    assert_non_null(ctl.c);
    hello(&ctl, CS_HELLO_CONTROL);
    expect(&ctl, CS_MSG_WELCOME);
    struct cs_msg st = {.type = CS_MSG_CTL_STATUS};
    say(&ctl, &st);
    expect(&ctl, CS_MSG_CTL_DAEMON);
    for (int i = 1; i < SD_OWNER_RESERVE; i++)
        assert_non_null(connect_as(0).c);
    x = connect_as(0); /* the reserve bounds root too */
    assert_null(x.c);
    assert_int_equal(srv.nconns, 4 + SD_OWNER_RESERVE);
    assert_int_equal(srv.ctr.refusals[SD_REFUSE_CONNS], 2);
}

static void test_hello_deadline(void **state)
{
    (void)state;
    struct sd_config cfg;
    sd_config_defaults(&cfg);
    assert_int_equal(cfg.hello_timeout_ms, 2000);
    start(&cfg, NULL);
    struct peer mute = connect_as(1000);
    struct peer talker = connect_as(1000);
    now_ns += 1000 * MS;
    struct peer late = connect_as(1000);
    hello(&talker, 0);
    expect(&talker, CS_MSG_WELCOME);
    now_ns += 1000 * MS - 1;
    sd_server_tick(&srv);
    sd_server_settle(&srv);
    assert_true(open_on_daemon(&mute));
    now_ns += 1;
    sd_server_tick(&srv);
    sd_server_settle(&srv);
    assert_false(open_on_daemon(&mute));
    struct cs_msg e = expect(&mute, CS_MSG_ERROR);
    assert_int_equal(e.u.error.code, ETIMEDOUT);
    assert_string_equal(e.u.error.text, "refused: no HELLO within 2000 ms (hello_timeout_ms)");
    assert_true(open_on_daemon(&late)); /* its own two seconds are not over */
    assert_true(open_on_daemon(&talker));
    now_ns += 1000 * MS;
    sd_server_tick(&srv);
    sd_server_settle(&srv);
    assert_false(open_on_daemon(&late));
    assert_true(open_on_daemon(&talker)); /* said HELLO: no deadline */
    assert_int_equal(srv.ctr.refusals[SD_REFUSE_HELLO_TIMEOUT], 2);
    assert_null(srv.new_head);
}

static void attach(struct peer *p, uint8_t gpu, uint64_t total_mem)
{
    struct cs_msg a = {.type = CS_MSG_ATTACH};
    node_uuid(gpu, a.u.attach.uuid);
    a.u.attach.total_mem = total_mem;
    say(p, &a);
}

/* A client cannot add a GPU, however many it names, nor state one's size. */
static void test_unknown_gpu_refused(void **state)
{
    (void)state;
    struct sd_config cfg;
    sd_config_defaults(&cfg);
    cfg.max_conns_per_uid = 1000;
    start(&cfg, NULL);
    assert_int_equal(srv.policy.ngpu, 1); /* made at start, before any client */
    assert_int_equal(srv.policy.gpu[0]->mem_total, 16ull << 30);
    for (int i = 0; i < 2 * SD_MAX_GPUS; i++) {
        struct peer p = connect_as(1000);
        hello(&p, 0);
        expect(&p, CS_MSG_WELCOME);
        /* Unread records at close would reset the client's end before it
         * reads the ERROR (ECONNRESET), and it would take the refusal for a
         * daemon gone and knock again at once: the daemon reads them away. */
        unread(&p);
        attach(&p, (uint8_t)(i + 2), 16ull << 30);
        struct cs_msg e = expect(&p, CS_MSG_ERROR);
        assert_int_equal(e.u.error.code, ENODEV);
        assert_non_null(strstr(e.u.error.text, "is not a GPU of this node"));
        assert_false(open_on_daemon(&p));
        close(p.fd);
    }
    assert_int_equal(srv.policy.ngpu, 1);
    assert_int_equal(srv.ctr.refusals[SD_REFUSE_GPU], 2 * SD_MAX_GPUS);
    assert_int_equal(srv.ctr.protocol_errors, 0);
    /* The node's GPU: attached, its size the node's whatever ATTACH says. */
    struct peer ok = connect_as(1000);
    hello(&ok, 0);
    expect(&ok, CS_MSG_WELCOME);
    attach(&ok, 1, 1ull << 50);
    assert_true(open_on_daemon(&ok));
    assert_int_equal(srv.policy.gpu[0]->n, 1);
    assert_int_equal(srv.policy.gpu[0]->mem_total, 16ull << 30);
}

static void test_no_gpu_refuses_every_attach(void **state)
{
    (void)state;
    struct sd_config cfg;
    sd_config_defaults(&cfg);
    start(&cfg, NULL);
    sd_server_fini(&srv);
    static const struct sd_node none = {.source = "none"};
    struct sd_server_opts o = {.clock = test_clock, .lease_base = 1, .node = &none};
    assert_int_equal(sd_server_init(&srv, &cfg, NULL, &o), 0);
    struct peer p = connect_as(1000);
    hello(&p, 0);
    expect(&p, CS_MSG_WELCOME);
    attach(&p, 1, 16ull << 30);
    struct cs_msg e = expect(&p, CS_MSG_ERROR);
    assert_non_null(strstr(e.u.error.text, "(no GPU was found on this node)"));
    assert_int_equal(srv.policy.ngpu, 0);
}

/* A state file naming other GPUs: those lines are ignored, the node's GPU
 * waits for its recorded holder, with the node's index and size. */
static void test_state_of_other_gpus_ignored(void **state)
{
    (void)state;
    const char *t = getenv("TEST_TMP");
    char path[512];
    snprintf(path, sizeof path, "%s/node.state", t && *t ? t : "/tmp");
    uint8_t mine[CS_UUID_LEN], other[CS_UUID_LEN];
    node_uuid(1, mine);
    node_uuid(9, other);
    char a[CS_UUID_STR_LEN], b[CS_UUID_STR_LEN];
    cs_uuid_format(mine, a);
    cs_uuid_format(other, b);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "cushared-state 1\nnext_id 50\ngpu %s 0 1024 8\ngpu %s 3 99999 7\n", b, a);
    fclose(f);
    struct sd_config cfg;
    sd_config_defaults(&cfg);
    start(&cfg, path);
    assert_int_equal(srv.policy.ngpu, 1);
    const struct sd_gpu *g = srv.policy.gpu[0];
    assert_memory_equal(g->uuid, mine, CS_UUID_LEN);
    assert_int_equal(g->index, 0);
    assert_int_equal(g->mem_total, 16ull << 30);
    assert_true(g->restoring);
    assert_int_equal(g->nexpect, 1);
    assert_int_equal(g->expect[0], 7);
    assert_true(srv.policy.next_client_id >= 50);
    unlink(path);
}

int main(void)
{
    cs_log_init("test_server", CS_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_per_uid_cap, teardown),
        cmocka_unit_test_teardown(test_owner_reserve, teardown),
        cmocka_unit_test_teardown(test_hello_deadline, teardown),
        cmocka_unit_test_teardown(test_unknown_gpu_refused, teardown),
        cmocka_unit_test_teardown(test_no_gpu_refuses_every_attach, teardown),
        cmocka_unit_test_teardown(test_state_of_other_gpus_ignored, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
