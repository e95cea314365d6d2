/* test_endpoint.c: endpoints (src/sched/endpoint.c), with the server in
 * this process on real sockets in a scratch directory, driven one loop pass
 * at a time (sd_server_step) and with an injected clock, so that idleness is
 * simulated time and nothing depends on how fast the machine is.
 *
 * Covered: CTL_ENDPOINT create (socket and directory modes, the reply's
 * path, idempotence, new terms for new connections only), the grant a
 * connection carries, control refused on an endpoint, ATTACH of a GPU
 * outside the grant refused naming it, the per-endpoint connection cap (its
 * own and the daemon's default), REMOVE with a connection left running,
 * persistence across a restart (malformed state lines skipped), the idle GC,
 * refusals (uid, bad names, max_endpoints, an unsafe endpoint_dir, a
 * symlink in its place, endpoints off), the atomic state write, and
 * CTL_EP_IDENTITY (the pod named after CREATE: filled in once, never
 * changed, shown for connections already open, the allocation's container
 * over a client's claim, kept across a restart, hostile state lines). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/log.h"
#include "common/proto.h"
#include "common/util.h"
#include "sched/endpoint.h"
#include "sched/server.h"

#define NS 1000000000ull

static struct sd_server srv;
static uint64_t fake_now = 1000 * NS;
static char dir[256], sock[300], epdir[320];
static unsigned test_no;

static uint64_t fake_clock(void *ctx)
{
    (void)ctx;
    return fake_now;
}

static void uuid_of(uint8_t gpu, uint8_t out[CS_UUID_LEN])
{
    for (int i = 0; i < CS_UUID_LEN; i++)
        out[i] = (uint8_t)(0x40 + i);
    out[15] = gpu;
}

/* The node's GPUs: uuid_of(1) .. uuid_of(4), 16 GiB each (the daemon
 * refuses an ATTACH of any other GPU). */
static const struct sd_node *test_node(void)
{
    static struct sd_node node;
    node.n = 4;
    node.source = "test";
    for (size_t i = 0; i < node.n; i++) {
        uuid_of((uint8_t)(i + 1), node.gpu[i].uuid);
        node.gpu[i].mem_total = 16ull << 30;
    }
    return &node;
}

static void server_start(void)
{
    struct sd_config cfg;
    sd_config_defaults(&cfg);
    cfg.log_level = CS_LOG_WARN;
    struct sd_server_opts o = {.socket_path = sock, .clock = fake_clock, .node = test_node()};
    if (sd_server_init(&srv, &cfg, NULL, &o) < 0)
        fail_msg("the server did not start on %s", sock);
}

static int setup(void **state)
{
    (void)state;
    const char *t = getenv("TEST_TMP");
    snprintf(dir, sizeof dir, "%s/e%u", t && *t ? t : "/tmp", ++test_no);
    mkdir(dir, 0755);
    snprintf(sock, sizeof sock, "%s/cushared.sock", dir);
    snprintf(epdir, sizeof epdir, "%s/endpoints", dir);
    cs_log_init("test_endpoint", CS_LOG_WARN);
    server_start();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sd_server_fini(&srv);
    return 0;
}

/* ---- a client, one loop pass at a time -------------------------------------------------- */

static int connect_nb(const char *path)
{
    int fd = cs_connect(path);
    if (fd < 0)
        return fd;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

/* The next message on fd, running the server meanwhile. 1, or 0 when the
 * server closed the connection. */
static int next_msg(int fd, struct cs_msg *m)
{
    for (int i = 0; i < 2000; i++) {
        sd_server_step(&srv, 5);
        const char *why = "?";
        int rc = cs_recv(fd, m, &why);
        if (rc == 1 || rc == 0)
            return rc;
        if (rc != -EAGAIN)
            fail_msg("recv: %d (%s)", rc, why);
    }
    fail_msg("no message from the server");
    return -1;
}

static void expect(int fd, uint16_t type, struct cs_msg *out)
{
    struct cs_msg m;
    if (next_msg(fd, &m) != 1)
        fail_msg("closed while waiting for %s", cs_msg_name(type));
    if (m.type != type)
        fail_msg("got %s (%s), expected %s", cs_msg_name(m.type),
                 m.type == CS_MSG_ERROR ? m.u.error.text : "", cs_msg_name(type));
    if (out)
        *out = m;
}

/* An ERROR containing text, then the end of the connection. */
static void expect_refused(int fd, const char *text)
{
    struct cs_msg m;
    expect(fd, CS_MSG_ERROR, &m);
    if (!strstr(m.u.error.text, text))
        fail_msg("ERROR '%s' does not say '%s'", m.u.error.text, text);
    assert_int_equal(next_msg(fd, &m), 0);
    close(fd);
}

static void send_msg(int fd, const struct cs_msg *m)
{
    assert_int_equal(cs_send(fd, m), 0);
}

static void send_hello(int fd, uint32_t flags, uint32_t prio, uint32_t weight)
{
    struct cs_msg h = {.type = CS_MSG_HELLO};
    h.u.hello.flags = flags;
    h.u.hello.priority = prio;
    h.u.hello.weight = weight;
    h.u.hello.proto_min = 1;
    strcpy(h.u.hello.name, "t");
    strcpy(h.u.hello.pod, "spoofed-pod");
    send_msg(fd, &h);
}

/* A GPU client on path; *id gets its client id. */
static int client(const char *path, uint32_t prio, uint32_t weight, uint64_t *id)
{
    int fd = connect_nb(path);
    assert_true(fd >= 0);
    send_hello(fd, 0, prio, weight);
    struct cs_msg w;
    expect(fd, CS_MSG_WELCOME, &w);
    if (id)
        *id = w.u.welcome.client_id;
    return fd;
}

static void attach(int fd, uint32_t slot, uint8_t gpu)
{
    struct cs_msg a = {.type = CS_MSG_ATTACH};
    a.u.attach.slot = slot;
    uuid_of(gpu, a.u.attach.uuid);
    a.u.attach.total_mem = 16ull << 30;
    send_msg(fd, &a);
}

/* ATTACH and ACQUIRE on a free GPU: the GRANT proves both were taken. */
static void attach_and_run(int fd, uint32_t slot, uint8_t gpu)
{
    attach(fd, slot, gpu);
    struct cs_msg a = {.type = CS_MSG_ACQUIRE};
    a.u.acquire.slot = slot;
    send_msg(fd, &a);
    struct cs_msg g;
    expect(fd, CS_MSG_GRANT, &g);
    assert_int_equal(g.u.grant.slot, slot);
}

static struct sd_conn *conn_of_client(uint64_t id)
{
    for (struct sd_conn *c = srv.conns; c; c = c->next)
        if (c->client && c->client->id == id)
            return c;
    fail_msg("no connection for client %llu", (unsigned long long)id);
    return NULL;
}

/* ---- control ------------------------------------------------------------------------------ */

static int control(void)
{
    int fd = connect_nb(sock);
    assert_true(fd >= 0);
    send_hello(fd, CS_HELLO_CONTROL, CS_PRIO_NORMAL, 1);
    expect(fd, CS_MSG_WELCOME, NULL);
    return fd;
}

/* A control connection of another uid than the daemon's, not root
 * (credentials made up). */
static int stranger(void)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    fcntl(sv[1], F_SETFL, O_NONBLOCK);
    assert_non_null(sd_conn_adopt(&srv, sv[0], 4242, srv.owner_uid + 1, 4242));
    send_hello(sv[1], CS_HELLO_CONTROL, CS_PRIO_NORMAL, 1);
    expect(sv[1], CS_MSG_WELCOME, NULL);
    return sv[1];
}

struct terms {
    uint32_t prio, weight, conns;
    uint64_t mem;
    uint32_t ngpus;
    uint8_t gpu[2];
    const char *pod, *ns;
};

static int ep_request(int ctl, uint32_t op, const char *id, const struct terms *t, char *text)
{
    struct cs_msg m = {.type = CS_MSG_CTL_ENDPOINT};
    struct cs_msg_ctl_endpoint *e = &m.u.ctl_endpoint;
    e->op = op;
    e->max_priority = t ? t->prio : CS_PRIO_NORMAL;
    e->max_weight = t ? t->weight : 1;
    if (t) {
        e->max_conns = t->conns;
        e->mem_limit = t->mem;
        e->ngpus = t->ngpus;
        for (uint32_t i = 0; i < t->ngpus; i++)
            uuid_of(t->gpu[i], e->gpus[i]);
        cs_strlcpy(e->pod, t->pod ? t->pod : "", sizeof e->pod);
        cs_strlcpy(e->ns, t->ns ? t->ns : "", sizeof e->ns);
    }
    cs_strlcpy(e->id, id, sizeof e->id);
    send_msg(ctl, &m);
    struct cs_msg d;
    expect(ctl, CS_MSG_CTL_DONE, &d);
    if (text)
        strcpy(text, d.u.ctl_done.text);
    return d.u.ctl_done.status;
}

/* CREATE that must succeed; returns the socket path. */
static const char *create(int ctl, const char *id, const struct terms *t)
{
    static char text[CS_TEXT_LEN];
    int rc = ep_request(ctl, CS_EP_CREATE, id, t, text);
    if (rc != 0)
        fail_msg("CREATE %s: %d %s", id, rc, text);
    return text;
}

static const struct terms normal4 = {CS_PRIO_NORMAL, 4, 0, 8ull << 30, 0, {0}, "pod-a", "ns-a"};
/* The same without a pod: what the device plugin asks for at Allocate. */
static const struct terms anon4 = {CS_PRIO_NORMAL, 4, 0, 8ull << 30, 0, {0}, NULL, NULL};

static mode_t mode_of(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        fail_msg("%s: %s", path, strerror(errno));
    return st.st_mode;
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* CTL_EP_IDENTITY; container may be "". Returns the CTL_DONE status. */
static int identity(int ctl, const char *id, const char *pod, const char *ns,
                    const char *container, char *text)
{
    struct cs_msg m = {.type = CS_MSG_CTL_EP_IDENTITY};
    struct cs_msg_ctl_ep_identity *i = &m.u.ctl_ep_identity;
    cs_strlcpy(i->id, id, sizeof i->id);
    cs_strlcpy(i->pod, pod, sizeof i->pod);
    cs_strlcpy(i->ns, ns, sizeof i->ns);
    cs_strlcpy(i->container, container, sizeof i->container);
    send_msg(ctl, &m);
    struct cs_msg d;
    expect(ctl, CS_MSG_CTL_DONE, &d);
    if (text)
        strcpy(text, d.u.ctl_done.text);
    return d.u.ctl_done.status;
}

/* A GPU client that says LABELS with container (claimed), processed. */
static struct sd_client *labeled_client(const char *path, const char *container, int *fd)
{
    *fd = connect_nb(path);
    assert_true(*fd >= 0);
    send_hello(*fd, CS_HELLO_LABELS, CS_PRIO_NORMAL, 1);
    struct cs_msg w, l = {.type = CS_MSG_LABELS};
    expect(*fd, CS_MSG_WELCOME, &w);
    cs_strlcpy(l.u.labels.container, container, sizeof l.u.labels.container);
    send_msg(*fd, &l);
    struct sd_conn *c = conn_of_client(w.u.welcome.client_id);
    for (int i = 0; i < 100 && !c->labeled; i++)
        sd_server_step(&srv, 5);
    assert_true(c->labeled);
    return c->client;
}

static void expect_shown(const struct sd_client *cl, const char *pod, const char *ns,
                         const char *container)
{
    assert_string_equal(cl->info.pod, pod);
    assert_string_equal(cl->info.ns, ns);
    assert_string_equal(cl->info.container, container);
}

/* ---- tests -------------------------------------------------------------------------------- */

/* CREATE makes the directory (0755) and socket (0666) and answers its path;
 * a connection there carries the endpoint's grant whatever its HELLO asks. */
static void test_create_and_grant(void **state)
{
    (void)state;
    int ctl = control();
    char want[400], d[400];
    snprintf(want, sizeof want, "%s/job-a/cushared.sock", epdir);
    assert_string_equal(create(ctl, "job-a", &normal4), want);
    snprintf(d, sizeof d, "%s/job-a", epdir);
    assert_int_equal(mode_of(epdir) & 07777, 0755);
    assert_int_equal(mode_of(d) & 07777, 0755);
    assert_true(S_ISSOCK(mode_of(want)));
    assert_int_equal(mode_of(want) & 0777, 0666);

    uint64_t id;
    int fd = client(want, CS_PRIO_HIGH, 1000, &id);
    const struct sd_conn *c = conn_of_client(id);
    assert_true(c->on_endpoint);
    assert_int_equal(c->grant.max_priority, CS_PRIO_NORMAL);
    assert_int_equal(c->grant.max_weight, 4);
    assert_int_equal(c->grant.mem_limit, 8ull << 30);
    assert_int_equal(c->grant.ngpus, 0);
    assert_true(c->grant.identity);
    assert_string_equal(c->grant.pod, "pod-a");
    assert_string_equal(c->grant.ns, "ns-a");
    assert_string_equal(c->grant.source, "endpoint job-a");
    /* The client's settings are the grant's, not its HELLO's. */
    assert_int_equal(c->client->info.priority, CS_PRIO_NORMAL);
    assert_int_equal(c->client->info.weight, 4);
    assert_string_equal(c->client->info.pod, "pod-a");

    /* The same terms again: the same endpoint. Other terms: for new
     * connections only. */
    assert_string_equal(create(ctl, "job-a", &normal4), want);
    assert_int_equal(srv.eps.n, 1);
    struct terms low2 = normal4;
    low2.prio = CS_PRIO_LOW;
    low2.weight = 2;
    assert_string_equal(create(ctl, "job-a", &low2), want);
    assert_int_equal(srv.eps.n, 1);
    uint64_t id2;
    int fd2 = client(want, CS_PRIO_HIGH, 1000, &id2);
    assert_int_equal(conn_of_client(id2)->grant.max_priority, CS_PRIO_LOW);
    assert_int_equal(conn_of_client(id2)->grant.max_weight, 2);
    assert_int_equal(conn_of_client(id)->grant.max_weight, 4);
    assert_int_equal(srv.eps.list->nconns, 2);
    /* The main socket's connections carry no endpoint. */
    for (const struct sd_conn *x = srv.conns; x; x = x->next)
        if (x->kind == SD_CONN_CONTROL)
            assert_false(x->on_endpoint || x->ep ||
                         strncmp(x->grant.source, "endpoint", 8) == 0);
    close(fd);
    close(fd2);
    close(ctl);
}

static void test_control_refused_on_endpoint(void **state)
{
    (void)state;
    int ctl = control();
    const char *path = create(ctl, "ctl-try", &normal4);
    int fd = connect_nb(path);
    assert_true(fd >= 0);
    send_hello(fd, CS_HELLO_CONTROL, CS_PRIO_NORMAL, 1);
    expect_refused(fd, "control is not available on an endpoint");
    close(ctl);
}

/* An endpoint for GPU 1: ATTACH of GPU 1 runs, of GPU 2 is refused with
 * its UUID; a main-socket client (no list) may attach either. */
static void test_gpu_outside_grant(void **state)
{
    (void)state;
    int ctl = control();
    struct terms t = normal4;
    t.ngpus = 1;
    t.gpu[0] = 1;
    const char *path = create(ctl, "one-gpu", &t);
    int fd = client(path, CS_PRIO_NORMAL, 1, NULL);
    attach_and_run(fd, 0, 1);
    attach(fd, 1, 2);
    uint8_t u[CS_UUID_LEN];
    char txt[CS_UUID_STR_LEN], want[100];
    uuid_of(2, u);
    cs_uuid_format(u, txt);
    snprintf(want, sizeof want, "GPU %s is not in this connection's grant", txt);
    expect_refused(fd, want);
    int m = client(sock, CS_PRIO_NORMAL, 1, NULL);
    attach_and_run(m, 0, 2);
    close(m);
    close(ctl);
}

/* max_conns 2: a third connection is refused saying why; after one
 * closes, a new one is served. The daemon's default applies at 0. */
static void test_conn_cap(void **state)
{
    (void)state;
    int ctl = control();
    struct terms t = normal4;
    t.conns = 2;
    const char *p = create(ctl, "capped", &t);
    char path[CS_TEXT_LEN];
    strcpy(path, p);
    int a = client(path, CS_PRIO_NORMAL, 1, NULL);
    int b = connect_nb(path); /* no HELLO: counts all the same */
    for (int i = 0; i < 100 && srv.eps.list->nconns < 2; i++)
        sd_server_step(&srv, 5);
    assert_int_equal(srv.eps.list->nconns, 2);
    int c = connect_nb(path);
    expect_refused(c, "too many connections on endpoint capped (2 open, cap 2)");
    close(b);
    for (int i = 0; i < 100 && srv.eps.list->nconns > 1; i++)
        sd_server_step(&srv, 5);
    assert_int_equal(srv.eps.list->nconns, 1);
    int d = client(path, CS_PRIO_NORMAL, 1, NULL);
    assert_int_equal(srv.eps.list->nconns, 2);
    close(a);
    close(d);

    srv.cfg.endpoint_max_conns = 1;
    const char *q = create(ctl, "default-cap", &normal4);
    strcpy(path, q);
    int e = client(path, CS_PRIO_NORMAL, 1, NULL);
    int f = connect_nb(path);
    expect_refused(f, "cap 1");
    close(e);
    close(ctl);
}

/* REMOVE deletes the socket and the directory; the open connection keeps
 * running; a second REMOVE says there is no such endpoint. */
static void test_remove(void **state)
{
    (void)state;
    int ctl = control();
    char path[CS_TEXT_LEN], d[400], text[CS_TEXT_LEN];
    strcpy(path, create(ctl, "gone", &normal4));
    int fd = client(path, CS_PRIO_NORMAL, 1, NULL);
    assert_int_equal(ep_request(ctl, CS_EP_REMOVE, "gone", NULL, text), 0);
    assert_string_equal(text, "removed gone");
    snprintf(d, sizeof d, "%s/gone", epdir);
    assert_false(exists(path));
    assert_false(exists(d));
    assert_int_equal(srv.eps.n, 0);
    assert_int_equal(cs_connect(path), -ENOENT);
    attach_and_run(fd, 0, 3);
    assert_int_equal(ep_request(ctl, CS_EP_REMOVE, "gone", NULL, text), -ENOENT);
    assert_non_null(strstr(text, "no endpoint 'gone'"));
    close(fd); /* its endpoint is gone: nothing to count down */
    for (int i = 0; i < 5; i++)
        sd_server_step(&srv, 5);
    close(ctl);
}

static char *slurp(const char *path)
{
    static char buf[8192];
    FILE *f = fopen(path, "r");
    if (!f)
        fail_msg("cannot read %s", path);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* A restarted daemon recreates the endpoints of the state file, in the
 * directories that containers have mounted; a malformed line is skipped. */
static void test_persist_across_restart(void **state)
{
    (void)state;
    int ctl = control();
    struct terms t = {CS_PRIO_HIGH, 7, 3, 0, 2, {1, 2}, NULL, "team"};
    char p1[CS_TEXT_LEN], p2[CS_TEXT_LEN], st[400], d1[400];
    strcpy(p1, create(ctl, "keep-1", &normal4));
    strcpy(p2, create(ctl, "keep-2", &t));
    close(ctl);
    snprintf(st, sizeof st, "%s/endpoints.state", epdir);
    snprintf(d1, sizeof d1, "%s/keep-1", epdir);
    struct stat before;
    assert_int_equal(stat(d1, &before), 0);
    sd_server_fini(&srv);
    assert_false(exists(p1));    /* the socket goes with the daemon... */
    assert_true(exists(d1));     /* ...its directory stays for the mounts */
    char *text = slurp(st);
    assert_non_null(strstr(text, "ep keep-1 1 4 0 8589934592 - pod-a ns-a\n"));
    assert_non_null(strstr(text, "ep keep-2 0 7 3 0 GPU-"));
    FILE *f = fopen(st, "a");
    fputs("ep broken 9 1 0 0 - - -\n", f);
    fputs("ep ../escape 1 1 0 0 - - -\n", f);
    fputs("nonsense\n", f);
    fclose(f);

    server_start();
    assert_int_equal(srv.eps.n, 2);
    struct stat after;
    assert_int_equal(stat(d1, &after), 0);
    assert_int_equal(after.st_ino, before.st_ino); /* the same directory */
    uint64_t id;
    int fd = client(p2, CS_PRIO_HIGH, 1, &id);
    const struct sd_conn *c = conn_of_client(id);
    assert_int_equal(c->grant.max_priority, CS_PRIO_HIGH);
    assert_int_equal(c->grant.max_weight, 7);
    assert_int_equal(c->grant.max_conns, 3);
    assert_int_equal(c->grant.ngpus, 2);
    uint8_t u[CS_UUID_LEN];
    uuid_of(2, u);
    assert_memory_equal(c->grant.gpus[1], u, CS_UUID_LEN);
    assert_string_equal(c->grant.pod, "");
    assert_string_equal(c->grant.ns, "team");
    close(fd);
    int g = client(p1, CS_PRIO_NORMAL, 1, NULL);
    close(g);
    text = slurp(st); /* rewritten without the bad lines */
    assert_null(strstr(text, "broken"));
    assert_null(strstr(text, "nonsense"));
    assert_non_null(strstr(text, "ep keep-1 "));
}

/* An endpoint nobody uses for endpoint_idle_ttl_s is removed; one with a
 * connection is not, and its time starts when the last one closes. */
static void test_idle_gc(void **state)
{
    (void)state;
    srv.cfg.endpoint_idle_ttl_s = 10;
    int ctl = control();
    char idle[CS_TEXT_LEN], busy[CS_TEXT_LEN];
    strcpy(idle, create(ctl, "idle", &normal4));
    strcpy(busy, create(ctl, "busy", &normal4));
    int fd = client(busy, CS_PRIO_NORMAL, 1, NULL);
    assert_int_equal(sd_ep_deadline(&srv), fake_now + 10 * NS);
    fake_now += 9 * NS;
    sd_server_tick(&srv);
    assert_int_equal(srv.eps.n, 2);
    fake_now += 2 * NS;
    sd_server_tick(&srv);
    assert_int_equal(srv.eps.n, 1);
    assert_false(exists(idle));
    assert_string_equal(srv.eps.list->id, "busy");
    assert_int_equal(sd_ep_deadline(&srv), 0); /* busy: nothing due */
    fake_now += 100 * NS;
    sd_server_tick(&srv);
    assert_int_equal(srv.eps.n, 1);
    close(fd);
    for (int i = 0; i < 100 && srv.eps.list->nconns; i++)
        sd_server_step(&srv, 5);
    assert_int_equal(srv.eps.list->nconns, 0);
    assert_int_equal(sd_ep_deadline(&srv), fake_now + 10 * NS);
    fake_now += 10 * NS;
    sd_server_tick(&srv);
    assert_int_equal(srv.eps.n, 0);
    assert_false(exists(busy));
    /* 0: never */
    srv.cfg.endpoint_idle_ttl_s = 0;
    create(ctl, "forever", &normal4);
    fake_now += 1000000 * NS;
    sd_server_tick(&srv);
    assert_int_equal(srv.eps.n, 1);
    assert_int_equal(sd_ep_deadline(&srv), 0);
    close(ctl);
}

static void expect_create_fails(int ctl, const char *id, const struct terms *t, int rc,
                                const char *text)
{
    char got[CS_TEXT_LEN];
    assert_int_equal(ep_request(ctl, CS_EP_CREATE, id, t, got), rc);
    if (!strstr(got, text))
        fail_msg("'%s' does not say '%s'", got, text);
}

static void test_refusals(void **state)
{
    (void)state;
    int ctl = control();
    expect_create_fails(ctl, ".hidden", &normal4, -EINVAL, "not 1-63 of");
    expect_create_fails(ctl, "a/b", &normal4, -EINVAL, "not 1-63 of");
    struct terms bad = normal4;
    bad.pod = "-x";
    expect_create_fails(ctl, "ok", &bad, -EINVAL, "pod and namespace");
    srv.cfg.max_endpoints = 1;
    create(ctl, "first", &normal4);
    expect_create_fails(ctl, "second", &normal4, -ENOSPC, "max_endpoints = 1");
    srv.cfg.max_endpoints = 8;
    /* An endpoint directory others may write, or a symlink in its place. */
    assert_int_equal(chmod(epdir, 0777), 0);
    expect_create_fails(ctl, "third", &normal4, -EPERM, "writable by group or others");
    assert_int_equal(chmod(epdir, 0755), 0);
    char moved[400];
    snprintf(moved, sizeof moved, "%s.real", epdir);
    assert_int_equal(rename(epdir, moved), 0);
    assert_int_equal(symlink(moved, epdir), 0);
    expect_create_fails(ctl, "third", &normal4, -ENOTDIR, "not a directory");
    assert_int_equal(unlink(epdir), 0);
    assert_int_equal(rename(moved, epdir), 0);
    create(ctl, "third", &normal4);
    close(ctl);

    /* Not the daemon's uid nor root: refused. */
    int other = stranger();
    char text[CS_TEXT_LEN];
    assert_int_equal(ep_request(other, CS_EP_CREATE, "mine", &normal4, text), -EPERM);
    assert_non_null(strstr(text, "create an endpoint"));
    assert_int_equal(ep_request(other, CS_EP_REMOVE, "first", NULL, text), -EPERM);
    assert_int_equal(srv.eps.n, 2);
    close(other);
}

/* endpoint_dir = none: every request is refused, saying so. */
static void test_endpoints_off(void **state)
{
    (void)state;
    sd_server_fini(&srv);
    assert_int_equal(rmdir(epdir), 0);
    struct sd_config cfg;
    sd_config_defaults(&cfg);
    cs_strlcpy(cfg.endpoint_dir, "none", sizeof cfg.endpoint_dir);
    struct sd_server_opts o = {.socket_path = sock, .clock = fake_clock, .node = test_node()};
    assert_int_equal(sd_server_init(&srv, &cfg, NULL, &o), 0);
    int ctl = control();
    expect_create_fails(ctl, "x", &normal4, -EOPNOTSUPP, "endpoints are off");
    assert_false(exists(epdir));
    close(ctl);
}

/* The state write replaces a planted symlink instead of writing through it. */
static void test_atomic_write(void **state)
{
    (void)state;
    char victim[400], link[400];
    snprintf(victim, sizeof victim, "%s/victim", dir);
    snprintf(link, sizeof link, "%s/endpoints.state", epdir);
    FILE *f = fopen(victim, "w");
    fputs("precious\n", f);
    fclose(f);
    unlink(link);
    assert_int_equal(symlink(victim, link), 0);
    assert_int_equal(sd_ep_write_atomic(epdir, "endpoints.state", "new\n", 4), 0);
    assert_string_equal(slurp(victim), "precious\n");
    assert_true(S_ISREG(mode_of(link)));
    assert_string_equal(slurp(link), "new\n");
    assert_int_equal(mode_of(link) & 0777, 0644);
    assert_int_equal(sd_ep_write_atomic("/nonexistent-dir", "x", "y", 1), -1);
}

/* The device plugin learns the pod after CREATE: CTL_EP_IDENTITY names it
 * for the endpoint and for the connections already open on it (their
 * status, metrics and view); the container it names wins over a client's
 * LABELS; once named, it is never changed (only a new CREATE starts over). */
static void test_identity(void **state)
{
    (void)state;
    int ctl = control();
    char path[CS_TEXT_LEN], text[CS_TEXT_LEN];
    strcpy(path, create(ctl, "dp-1", &anon4));
    int fa, fb;
    struct sd_client *a = labeled_client(path, "claimed", &fa);
    uint64_t idb;
    fb = client(path, CS_PRIO_NORMAL, 1, &idb);
    expect_shown(a, "", "", ""); /* no pod: the claim is not shown */
    assert_false(conn_of_client(a->id)->grant.identity);

    assert_int_equal(identity(ctl, "dp-1", "trainer-0", "team-a", "main", text), 0);
    assert_string_equal(text, "endpoint dp-1: pod team-a/trainer-0");
    expect_shown(a, "trainer-0", "team-a", "main"); /* the allocation's container wins */
    expect_shown(conn_of_client(idb)->client, "trainer-0", "team-a", "main");
    const struct sd_conn *ca = conn_of_client(a->id);
    assert_true(ca->grant.identity);
    assert_string_equal(ca->grant.container, "main");
    int fc;
    struct sd_client *c = labeled_client(path, "other", &fc);
    expect_shown(c, "trainer-0", "team-a", "main");

    /* Again: nothing changes. Another pod or container: refused. */
    assert_int_equal(identity(ctl, "dp-1", "trainer-0", "team-a", "main", NULL), 0);
    assert_int_equal(identity(ctl, "dp-1", "trainer-0", "team-a", "", NULL), 0);
    assert_int_equal(identity(ctl, "dp-1", "intruder", "team-a", "main", text), -EEXIST);
    assert_non_null(strstr(text, "already names team-a/trainer-0"));
    assert_int_equal(identity(ctl, "dp-1", "trainer-0", "team-a", "side", NULL), -EEXIST);
    assert_int_equal(identity(ctl, "dp-1", "trainer-0", "team-b", "main", NULL), -EEXIST);
    expect_shown(a, "trainer-0", "team-a", "main");

    /* A pod without a container: the pod's own clients' claims are shown,
     * those made before it too. */
    char p2[CS_TEXT_LEN];
    strcpy(p2, create(ctl, "dp-2", &anon4));
    int fd2;
    struct sd_client *d = labeled_client(p2, "worker", &fd2);
    assert_int_equal(identity(ctl, "dp-2", "trainer-0", "team-a", "", NULL), 0);
    expect_shown(d, "trainer-0", "team-a", "worker");
    /* An endpoint CREATEd with a pod gets its container filled in. */
    char p3[CS_TEXT_LEN];
    strcpy(p3, create(ctl, "dp-3", &normal4));
    assert_int_equal(identity(ctl, "dp-3", "pod-a", "ns-a", "sidecar", NULL), 0);
    int fd3;
    expect_shown(labeled_client(p3, "x", &fd3), "pod-a", "ns-a", "sidecar");

    /* CREATE again without a pod starts over, for new connections only. */
    assert_string_equal(create(ctl, "dp-1", &anon4), path);
    int fe;
    struct sd_client *e = labeled_client(path, "claimed", &fe);
    expect_shown(e, "", "", "");
    expect_shown(a, "trainer-0", "team-a", "main");
    assert_int_equal(identity(ctl, "dp-1", "next-0", "team-a", "main", NULL), 0);
    expect_shown(e, "next-0", "team-a", "main");
    expect_shown(a, "trainer-0", "team-a", "main"); /* names another pod: kept */
    close(fa);
    close(fb);
    close(fc);
    close(fd2);
    close(fd3);
    close(fe);
    close(ctl);
}

/* The clients a view sees (CTL_CLIENT records of its status reply). */
static unsigned view_clients(int v)
{
    struct cs_msg st = {.type = CS_MSG_CTL_STATUS}, m;
    send_msg(v, &st);
    unsigned n = 0;
    do {
        if (next_msg(v, &m) != 1)
            fail_msg("the view was closed");
        n += m.type == CS_MSG_CTL_CLIENT;
    } while (m.type != CS_MSG_CTL_DONE);
    return n;
}

/* A view on another endpoint of the same pod sees a client once both
 * endpoints are named (the rule is the allocation's pod, never a claim),
 * the view having connected before either was. */
static void test_identity_view(void **state)
{
    (void)state;
    int ctl = control();
    char p1[CS_TEXT_LEN], p2[CS_TEXT_LEN];
    strcpy(p1, create(ctl, "dp-a", &anon4));
    strcpy(p2, create(ctl, "dp-b", &anon4));
    int fa = client(p1, CS_PRIO_NORMAL, 1, NULL);
    attach_and_run(fa, 0, 1);
    int v = connect_nb(p2);
    send_hello(v, CS_HELLO_CONTROL | CS_HELLO_VIEW, CS_PRIO_NORMAL, 1);
    expect(v, CS_MSG_WELCOME, NULL);
    assert_int_equal(view_clients(v), 0);
    assert_int_equal(identity(ctl, "dp-a", "pod-z", "ns-z", "", NULL), 0);
    assert_int_equal(view_clients(v), 0); /* its own endpoint names no pod yet */
    assert_int_equal(identity(ctl, "dp-b", "pod-z", "ns-z", "", NULL), 0);
    assert_int_equal(view_clients(v), 1);
    close(v);
    close(fa);
    close(ctl);
}

/* The identity is written with the endpoint and recreated by the next
 * daemon; a state line with a bad container, a container without a pod,
 * or a token too many is skipped. */
static void test_identity_persist(void **state)
{
    (void)state;
    int ctl = control();
    char path[CS_TEXT_LEN], st[400];
    strcpy(path, create(ctl, "dp-p", &anon4));
    assert_int_equal(identity(ctl, "dp-p", "pod-p", "ns-p", "main", NULL), 0);
    close(ctl);
    sd_server_fini(&srv);
    snprintf(st, sizeof st, "%s/endpoints.state", epdir);
    assert_non_null(strstr(slurp(st), "ep dp-p 1 4 0 8589934592 - pod-p ns-p main\n"));
    FILE *f = fopen(st, "a");
    fputs("ep bad-1 1 1 0 0 - pod ns bad/container\n", f);
    fputs("ep bad-2 1 1 0 0 - - - lonely\n", f);
    fputs("ep bad-3 1 1 0 0 - pod ns c extra\n", f);
    fputs("ep bad-4 1 1 0 0 - pod ns .dot\n", f);
    fclose(f);
    server_start();
    assert_int_equal(srv.eps.n, 1);
    int fd;
    expect_shown(labeled_client(path, "claimed", &fd), "pod-p", "ns-p", "main");
    close(fd);
    assert_null(strstr(slurp(st), "bad-"));
}

/* Refused: endpoints off, no such endpoint, names that are not names, and
 * anyone but the daemon's uid or root. */
static void test_identity_refusals(void **state)
{
    (void)state;
    int ctl = control();
    create(ctl, "dp-r", &normal4);
    char text[CS_TEXT_LEN];
    assert_int_equal(identity(ctl, "nope", "p", "n", "", text), -ENOENT);
    assert_non_null(strstr(text, "no endpoint 'nope'"));
    const char *const bad[][3] = {
        {"", "n", ""}, {"p", "", ""}, {"-p", "n", ""}, {"p", "n/x", ""}, {"p", "n", ".c"},
        {"p", "n", "c d"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(identity(ctl, "dp-r", bad[i][0], bad[i][1], bad[i][2], text), -EINVAL);
        assert_non_null(strstr(text, "must be 1-63 of"));
    }
    assert_int_equal(identity(ctl, "../x", "p", "n", "", NULL), -EINVAL);
    assert_string_equal(srv.eps.list->grant.container, "");
    close(ctl);

    int other = stranger();
    assert_int_equal(identity(other, "dp-r", "pod-a", "ns-a", "evil", text), -EPERM);
    assert_non_null(strstr(text, "name an endpoint's pod"));
    assert_string_equal(srv.eps.list->grant.container, "");
    close(other);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_create_and_grant), T(test_control_refused_on_endpoint),
        T(test_gpu_outside_grant), T(test_conn_cap),
        T(test_remove),           T(test_persist_across_restart),
        T(test_idle_gc),          T(test_refusals),
        T(test_endpoints_off),    T(test_atomic_write),
        T(test_identity),         T(test_identity_view),
        T(test_identity_persist), T(test_identity_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
