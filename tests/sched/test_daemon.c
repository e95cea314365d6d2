/* test_daemon.c: cushared, cusharectl and cushare-run as real processes.
 *
 * Each test starts its own daemon on its own socket under TEST_TMP and
 * talks to it with the scripted client of tclient.c (the lease protocol) or
 * by running cusharectl and cushare-run (the tools). What they prove is in
 * the comment above each test. Waits are generous; timing is asserted only
 * where it is the point (an EOF hands the GPU over well under a second). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/util.h"
#include "jsmall.h"
#include "tclient.h"
#include "thttp.h"

/* Short quanta so that revokes happen within a test; long revoke timeout
 * and grace so that they never fire by accident. */
static const char *const fast_conf = "quantum_floor_ms = 100\n"
                                     "quantum_cap_ms = 100\n"
                                     "idle_release_ms = 50\n"
                                     "revoke_timeout_ms = 5000\n"
                                     "reconnect_grace_ms = 3000\n";

static struct tc_daemon d;

static int teardown(void **state)
{
    (void)state;
    if (d.pid > 0)
        assert_int_equal(tc_daemon_stop(&d, SIGTERM), 0); /* clean exit, always */
    return 0;
}

static void start_on(const char *name, const char *conf, unsigned gpus)
{
    if (tc_daemon_start(&d, name, tc_node_conf(conf, gpus), NULL) < 0)
        fail_msg("cushared did not start; see %s", d.log);
}

/* A daemon whose node has GPU 0. */
static void start(const char *name, const char *conf)
{
    start_on(name, conf, 1u << 0);
}

/* Status as parsed JSON; the parse itself proves the output is valid JSON. */
static struct js *status_json(const char *sock)
{
    static struct tc_out o;
    tc_ctl(&o, (uid_t)-1, sock, "status", "--json", NULL);
    if (o.status != 0)
        fail_msg("cusharectl status --json: exit %d: %s", o.status, o.err);
    size_t at = 0;
    struct js *j = js_parse(o.out, &at);
    if (!j)
        fail_msg("status --json is not JSON (offset %zu):\n%s", at, o.out);
    return j;
}

static void js_done(struct js *j)
{
    js_free(j);
    free(j);
}

static double jnum(const struct js *o, const char *key)
{
    const struct js *v = js_get(o, key);
    if (!v || (v->kind != JS_NUM && v->kind != JS_BOOL))
        fail_msg("no number '%s' in status", key);
    return v->num;
}

static const char *jstr(const struct js *o, const char *key)
{
    const struct js *v = js_get(o, key);
    if (!v || v->kind != JS_STR)
        fail_msg("no string '%s' in status", key);
    return v->str;
}

static double daemon_num(const char *key)
{
    struct js *j = status_json(d.sock);
    double v = jnum(js_get(j, "daemon"), key);
    js_done(j);
    return v;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ---- leases ---------------------------------------------------------------------------- */

/* The basic exchange across three clients: grant on a free GPU, quantum
 * revoke only when someone of the same class waits, no grant before the
 * RELEASE, preemption by a higher class, no quantum revoke of a higher class
 * by a lower one, idle revoke. */
static void test_lease_cycle(void **state)
{
    (void)state;
    /* Exclusive mode's exchange: mixed mode (the default) would grant
     * gamma beside alpha (test_policy's test_mixed_*). */
    char conf[256];
    snprintf(conf, sizeof conf, "mode = exclusive\n%s", fast_conf);
    start("cycle", conf);
    int a = tc_client(d.sock, CS_PRIO_NORMAL, 1, "alpha");
    int b = tc_client(d.sock, CS_PRIO_NORMAL, 1, "beta");
    int c = tc_client(d.sock, CS_PRIO_HIGH, 1, "gamma");
    tc_attach(a, 0, 0, 0, 0);
    tc_attach(b, 2, 0, 0, 0); /* slots are per client */
    tc_attach(c, 0, 0, 0, 0);
    tc_acquire(a, 0);
    uint64_t la = tc_expect_grant(a, 0), l;
    tc_acquire(b, 2);
    assert_int_equal(tc_expect_revoke(a, 0, &l), CS_REVOKE_QUANTUM);
    assert_int_equal(l, la);
    tc_quiet(b, 100); /* a still drains: nobody else runs */
    tc_release(a, 0, la);
    uint64_t lb = tc_expect_grant(b, 2);
    assert_true(lb != la);
    /* c asks first: with a (b's class) already waiting, b's 100 ms slice
     * could end before c's ACQUIRE reached a loaded daemon, and the revoke
     * would be QUANTUM (seen once in CI, under ASan). */
    tc_acquire(c, 0);
    assert_int_equal(tc_expect_revoke(b, 2, &l), CS_REVOKE_PREEMPT);
    tc_acquire(a, 0); /* both wait at the release: c goes first, by class */
    tc_release(b, 2, lb);
    uint64_t lc = tc_expect_grant(c, 0);
    tc_quiet(c, 300); /* a (normal) waits, but cannot end a high slice */
    tc_usage(c, 0, CS_USAGE_IDLE, 0, 0);
    assert_int_equal(tc_expect_revoke(c, 0, &l), CS_REVOKE_IDLE);
    tc_release(c, 0, lc);
    tc_expect_grant(a, 0);
    close(a);
    close(b);
    close(c);
}

/* No revoke when nobody waits, idle or not. */
static void test_lone_holder_keeps_gpu(void **state)
{
    (void)state;
    start("lone", fast_conf);
    int a = tc_client(d.sock, CS_PRIO_LOW, 1, "alone");
    tc_attach(a, 0, 0, 0, 0);
    tc_acquire(a, 0);
    tc_expect_grant(a, 0);
    tc_quiet(a, 500); /* five quanta */
    tc_usage(a, 0, CS_USAGE_IDLE, 0, 0);
    tc_quiet(a, 200);
    close(a);
}

/* A malformed or out-of-place record closes that connection only, and
 * bumps the protocol-error counter; the holder is not disturbed. */
static void test_bad_records_close_only_their_connection(void **state)
{
    (void)state;
    start("bad", fast_conf);
    int a = tc_client(d.sock, CS_PRIO_NORMAL, 1, "good");
    tc_attach(a, 0, 0, 0, 0);
    tc_acquire(a, 0);
    uint64_t la = tc_expect_grant(a, 0);

    int x = tc_connect(d.sock); /* garbage */
    assert_int_equal(send(x, "hello daemon", 12, 0), 12);
    tc_expect_closed(x);
    int y = tc_connect(d.sock); /* ATTACH before HELLO */
    tc_attach(y, 0, 0, 0, 0);
    tc_expect_closed(y);
    int z = tc_client(d.sock, CS_PRIO_NORMAL, 1, "twice"); /* second HELLO */
    struct cs_msg h = {.type = CS_MSG_HELLO};
    h.u.hello.weight = 1;
    h.u.hello.proto_min = 1;
    tc_send(z, &h);
    tc_expect_closed(z);
    int w = tc_client(d.sock, CS_PRIO_NORMAL, 1, "liar"); /* RELEASE not held */
    tc_attach(w, 0, 0, 0, 0);
    tc_release(w, 0, la);
    tc_expect_closed(w);
    int v = tc_client(d.sock, CS_PRIO_NORMAL, 1, "big"); /* oversized record */
    char big[700];
    memset(big, 0, sizeof big);
    assert_int_equal(send(v, big, sizeof big, 0), (ssize_t)sizeof big);
    tc_expect_closed(v);
    int u = tc_client(d.sock, CS_PRIO_NORMAL, 1, "forger"); /* a daemon message */
    struct cs_msg g = {.type = CS_MSG_GRANT};
    g.u.grant.lease_id = 1;
    tc_send(u, &g);
    tc_expect_closed(u);
    int t = tc_client(d.sock, CS_PRIO_NORMAL, 1, "ctl-on-client"); /* CTL on a client */
    struct cs_msg s = {.type = CS_MSG_CTL_STATUS};
    tc_send(t, &s);
    tc_expect_closed(t);

    tc_usage(a, 0, 0, 1 << 20, 1 << 20); /* the holder is fine */
    tc_quiet(a, 100);
    struct js *j = status_json(d.sock);
    assert_int_equal(jnum(js_get(j, "daemon"), "protocol_errors"), 7);
    assert_int_equal(jnum(js_get(j, "daemon"), "clients"), 1);
    const struct js *c0 = js_at(js_get(js_at(js_get(j, "gpus"), 0), "clients"), 0);
    assert_string_equal(jstr(c0, "state"), "holding");
    assert_int_equal(jnum(c0, "mem_resident_bytes"), 1 << 20);
    js_done(j);
    close(a);
}

/* The holder's connection ends (EOF) and a SIGKILLed holder process: the
 * next waiter is granted at once. The brief's bound is 100 ms; the test
 * allows a second for loaded CI machines and prints the measurement. */
static void test_dead_holder_hands_over(void **state)
{
    (void)state;
    start("eof", fast_conf);
    int a = tc_client(d.sock, CS_PRIO_HIGH, 1, "holder");
    int b = tc_client(d.sock, CS_PRIO_LOW, 1, "waiter");
    tc_attach(a, 0, 0, 0, 0);
    tc_attach(b, 0, 0, 0, 0);
    tc_acquire(a, 0);
    tc_expect_grant(a, 0);
    tc_acquire(b, 0);
    tc_quiet(b, 100);
    uint64_t t0 = tc_now_ms();
    close(a);
    uint64_t lb = tc_expect_grant(b, 0);
    uint64_t dt = tc_now_ms() - t0;
    print_message("EOF -> next GRANT: %llu ms\n", (unsigned long long)dt);
    assert_true(dt < 1000);

    /* A real process holding the lease, killed with SIGKILL. */
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        int k = tc_client(d.sock, CS_PRIO_HIGH, 1, "victim");
        tc_attach(k, 0, 0, 0, 0);
        tc_acquire(k, 0);
        tc_expect_grant(k, 0);
        ssize_t wr = write(pfd[1], "x", 1);
        (void)wr;
        pause();
        _exit(0);
    }
    uint64_t l;
    assert_int_equal(tc_expect_revoke(b, 0, &l), CS_REVOKE_PREEMPT);
    tc_release(b, 0, lb);
    tc_acquire(b, 0);
    char ch;
    assert_int_equal(read(pfd[0], &ch, 1), 1);
    t0 = tc_now_ms();
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    tc_expect_grant(b, 0);
    dt = tc_now_ms() - t0;
    print_message("SIGKILL -> next GRANT: %llu ms\n", (unsigned long long)dt);
    assert_true(dt < 1000);
    close(pfd[0]);
    close(pfd[1]);
    close(b);
}

/* A holder that never answers its REVOKE: after revoke_timeout_ms the lease
 * is taken back, the waiter runs, it is counted, and the late RELEASE is
 * accepted without closing the slow client. */
static void test_revoke_timeout_forces_release(void **state)
{
    (void)state;
    start("timeout", "mode = exclusive\nrevoke_timeout_ms = 300\nquantum_floor_ms = 100\n"
                     "quantum_cap_ms = 100\n");
    int a = tc_client(d.sock, CS_PRIO_LOW, 1, "stuck");
    int b = tc_client(d.sock, CS_PRIO_HIGH, 1, "urgent");
    tc_attach(a, 0, 0, 0, 0);
    tc_attach(b, 0, 0, 0, 0);
    tc_acquire(a, 0);
    uint64_t la = tc_expect_grant(a, 0), l;
    uint64_t t0 = tc_now_ms();
    tc_acquire(b, 0);
    assert_int_equal(tc_expect_revoke(a, 0, &l), CS_REVOKE_PREEMPT);
    tc_expect_grant(b, 0);
    assert_true(tc_now_ms() - t0 >= 250);
    tc_release(a, 0, la); /* late */
    tc_quiet(a, 200);
    struct js *j = status_json(d.sock);
    const struct js *g = js_at(js_get(j, "gpus"), 0);
    assert_int_equal(jnum(g, "forced_releases"), 1);
    assert_int_equal(jnum(g, "revoke_timeouts"), 1);
    assert_int_equal(jnum(js_get(j, "daemon"), "clients"), 2);
    assert_int_equal(jnum(js_get(j, "daemon"), "protocol_errors"), 0);
    js_done(j);
    assert_true(tc_log_contains(&d, "did not release lease"));
    close(a);
    close(b);
}

/* ROOM over the wire: the holder's allocation failed; the daemon asks an
 * idle job to move memory out (EVICT) and answers once it has (EVICTED).
 * A process that ran unmanaged (lease 0, no RECONNECT) may claim its hold. */
/* Waits until the daemon shows client `name` with `bytes` resident: its
 * USAGE was read. Messages on different connections have no order, so a
 * test that needs one processed before another's must see it happen. */
static void wait_resident(const char *name, uint64_t bytes)
{
    for (int i = 0; i < 1000; i++) {
        struct js *j = status_json(d.sock);
        const struct js *cl = js_get(js_at(js_get(j, "gpus"), 0), "clients");
        bool seen = false;
        for (size_t k = 0; cl && k < cl->n; k++) {
            const struct js *c = js_at(cl, k);
            if (strcmp(jstr(c, "name"), name) == 0 && jnum(c, "mem_resident_bytes") == (double)bytes)
                seen = true;
        }
        js_done(j);
        if (seen)
            return;
        usleep(10000);
    }
    fail_msg("client %s never showed %llu bytes resident", name, (unsigned long long)bytes);
}

static void test_room_and_evict(void **state)
{
    (void)state;
    start_on("room", fast_conf, 1u << 0 | 1u << 1);
    int h = tc_client(d.sock, CS_PRIO_NORMAL, 1, "holder");
    int v = tc_client(d.sock, CS_PRIO_NORMAL, 1, "idle");
    tc_attach(h, 0, 0, 0, 0);
    tc_attach(v, 0, 0, 0, 0);
    tc_usage(v, 0, 0, 6ull << 30, 6ull << 30);
    tc_acquire(h, 0);
    tc_expect_grant(h, 0);
    wait_resident("idle", 6ull << 30); /* else the ROOM may find nothing to move */
    struct cs_msg r = {.type = CS_MSG_ROOM};
    r.u.room.request_id = 41;
    r.u.room.bytes = 2ull << 30;
    tc_send(h, &r);
    struct cs_msg e;
    tc_expect(v, CS_MSG_EVICT, &e);
    assert_int_equal(e.u.evict.bytes, 2ull << 30);
    tc_quiet(h, 50);
    struct cs_msg done = {.type = CS_MSG_EVICTED};
    done.u.evicted.request_id = e.u.evict.request_id;
    done.u.evicted.bytes = 2ull << 30;
    tc_send(v, &done);
    struct cs_msg rep;
    tc_expect(h, CS_MSG_ROOM_REPLY, &rep);
    assert_int_equal(rep.u.room_reply.request_id, 41);
    assert_int_equal(rep.u.room_reply.status, 0);
    /* Too big for the GPU even alone (16 GiB): refused at once. */
    r.u.room.request_id = 42;
    r.u.room.bytes = 17ull << 30;
    tc_send(h, &r);
    tc_expect(h, CS_MSG_ROOM_REPLY, &rep);
    assert_int_equal(rep.u.room_reply.status, 2 /* CUDA_ERROR_OUT_OF_MEMORY */);

    int u = tc_client(d.sock, CS_PRIO_NORMAL, 1, "unmanaged");
    tc_attach(u, 0, 1, CS_ATTACH_HELD, 0);
    tc_quiet(u, 100);
    struct js *j = status_json(d.sock);
    assert_int_equal(jnum(js_get(j, "daemon"), "protocol_errors"), 0);
    js_done(j);
    close(h);
    close(v);
    close(u);
}

/* ---- restart ------------------------------------------------------------------------------- */

/* The daemon dies (SIGKILL) while one client holds the GPU and another
 * waits. A new daemon must not grant the waiter, which comes back first,
 * until the holder is back; then it resumes at once (well before the
 * grace), with the GPU's index kept. */
static void test_restart_with_reconnecting_clients(void **state)
{
    (void)state;
    start_on("restart", fast_conf, 1u << 7);
    uint64_t aid, bid;
    int a = tc_client_full(d.sock, CS_PRIO_NORMAL, 1, "holder", 0, 0, &aid);
    int b = tc_client_full(d.sock, CS_PRIO_NORMAL, 1, "waiter", 0, 0, &bid);
    tc_attach(a, 0, 7, 0, 0);
    tc_attach(b, 0, 7, 0, 0);
    tc_acquire(a, 0);
    uint64_t la = tc_expect_grant(a, 0);
    tc_acquire(b, 0);
    assert_int_equal(tc_daemon_stop(&d, SIGKILL), 128 + SIGKILL);
    close(a);
    close(b);
    assert_int_equal(tc_daemon_restart(&d), 0);

    b = tc_client_full(d.sock, CS_PRIO_NORMAL, 1, "waiter", CS_HELLO_RECONNECT, bid, NULL);
    tc_attach(b, 0, 7, CS_ATTACH_WAITING, 0);
    tc_quiet(b, 300);
    struct js *j = status_json(d.sock);
    const struct js *g = js_at(js_get(j, "gpus"), 0);
    assert_true(jnum(g, "restoring") == 1);
    assert_int_equal(jnum(g, "index"), 0);
    js_done(j);

    uint64_t t0 = tc_now_ms();
    a = tc_client_full(d.sock, CS_PRIO_NORMAL, 1, "holder", CS_HELLO_RECONNECT, aid, NULL);
    tc_attach(a, 0, 7, CS_ATTACH_HELD, la);
    uint64_t l;
    assert_int_equal(tc_expect_revoke(a, 0, &l), CS_REVOKE_QUANTUM);
    assert_int_equal(l, la); /* its old lease, adopted */
    tc_release(a, 0, la);
    tc_expect_grant(b, 0);
    assert_true(tc_now_ms() - t0 < 2500); /* did not sit out the 3 s grace */
    assert_true(tc_log_contains(&d, "every previous holder is back"));
    close(a);
    close(b);
}

/* Two clients claim the same exclusive GPU after a restart: one keeps it,
 * the other is revoked. A previous holder that never returns holds the GPU
 * back for reconnect_grace_ms only. */
static void test_restart_claims_and_grace(void **state)
{
    (void)state;
    start_on("claims", "reconnect_grace_ms = 600\n", 1u << 1);
    uint64_t aid;
    int a = tc_client_full(d.sock, CS_PRIO_NORMAL, 1, "a", 0, 0, &aid);
    tc_attach(a, 0, 1, 0, 0);
    tc_acquire(a, 0);
    uint64_t la = tc_expect_grant(a, 0);
    assert_int_equal(tc_daemon_stop(&d, SIGKILL), 128 + SIGKILL);
    close(a);
    assert_int_equal(tc_daemon_restart(&d), 0);
    int c = tc_client_full(d.sock, CS_PRIO_NORMAL, 1, "c", CS_HELLO_RECONNECT, 999, NULL);
    tc_attach(c, 0, 1, CS_ATTACH_HELD, 77);
    a = tc_client_full(d.sock, CS_PRIO_NORMAL, 1, "a", CS_HELLO_RECONNECT, aid, NULL);
    tc_attach(a, 0, 1, CS_ATTACH_HELD, la);
    uint64_t l;
    assert_int_equal(tc_expect_revoke(a, 0, &l), CS_REVOKE_PREEMPT);
    assert_int_equal(l, la);
    tc_quiet(c, 200);
    tc_release(a, 0, la);

    /* Now c is the recorded holder; the daemon dies while c still holds,
     * and c never comes back to the next one. */
    tc_quiet(c, 100);
    assert_int_equal(tc_daemon_stop(&d, SIGKILL), 128 + SIGKILL);
    close(a);
    close(c);
    assert_int_equal(tc_daemon_restart(&d), 0);
    int w = tc_client_full(d.sock, CS_PRIO_NORMAL, 1, "w", CS_HELLO_RECONNECT, 5, NULL);
    tc_attach(w, 0, 1, CS_ATTACH_WAITING, 0);
    tc_expect_grant(w, 0);
    /* The grace runs from the daemon's start, which is after the fork. */
    uint64_t dt = tc_now_ms() - d.spawn_ms;
    print_message("granted %llu ms after the restart (grace 600 ms)\n", (unsigned long long)dt);
    assert_true(dt >= 600);
    assert_true(tc_log_contains(&d, "reconnect grace over"));
    close(w);
}

/* SIGTERM: exit 0, socket removed; the clients see EOF, nothing else. */
static void test_clean_shutdown(void **state)
{
    (void)state;
    start("term", NULL);
    int a = tc_client(d.sock, CS_PRIO_NORMAL, 1, "a");
    assert_int_equal(tc_daemon_stop(&d, SIGTERM), 0);
    tc_expect_closed(a);
    assert_int_equal(access(d.sock, F_OK), -1);
    close(a);
}

/* ---- control ---------------------------------------------------------------------------------- */

/* status --json is valid JSON with the documented keys and values; the
 * table form works too. */
static void test_status_json(void **state)
{
    (void)state;
    start("status", "quantum_floor_ms = 60000\nquantum_cap_ms = 60000\n");
    int a = tc_client(d.sock, CS_PRIO_NORMAL, 1, "alpha");
    int b = tc_client(d.sock, CS_PRIO_LOW, 3, "beta");
    tc_attach(a, 0, 0, 0, 0);
    tc_attach(b, 1, 0, 0, 0);
    tc_acquire(a, 0);
    tc_expect_grant(a, 0);
    tc_acquire(b, 1);
    tc_usage(a, 0, 0, 3 << 20, 4 << 20);
    wait_resident("alpha", 3 << 20);
    tc_quiet(b, 100);
    struct js *j = status_json(d.sock);
    const struct js *dm = js_get(j, "daemon");
    assert_int_equal(jnum(dm, "pid"), d.pid);
    assert_string_equal(jstr(dm, "mode"), "mixed");
    assert_int_equal(jnum(dm, "clients"), 2);
    assert_int_equal(jnum(dm, "quantum_floor_ms"), 60000);
    const struct js *gpus = js_get(j, "gpus");
    assert_int_equal(gpus->n, 1);
    const struct js *g = js_at(gpus, 0);
    uint8_t u[CS_UUID_LEN];
    char uuid[CS_UUID_STR_LEN];
    tc_uuid(0, u);
    cs_uuid_format(u, uuid);
    assert_string_equal(jstr(g, "uuid"), uuid);
    assert_int_equal(jnum(g, "holders"), 1);
    assert_int_equal(jnum(g, "waiters"), 1);
    assert_int_equal(jnum(g, "mem_total_bytes"), 16ull << 30);
    const struct js *cl = js_get(g, "clients");
    assert_int_equal(cl->n, 2);
    for (size_t i = 0; i < 2; i++) {
        const struct js *c = js_at(cl, i);
        assert_int_equal(jnum(c, "pid"), getpid());
        if (strcmp(jstr(c, "name"), "alpha") == 0) {
            assert_string_equal(jstr(c, "state"), "holding");
            assert_string_equal(jstr(c, "priority"), "normal");
            assert_int_equal(jnum(c, "slices"), 1);
            assert_int_equal(jnum(c, "mem_resident_bytes"), 3 << 20);
            assert_int_equal(jnum(c, "mem_footprint_bytes"), 4 << 20);
        } else {
            assert_string_equal(jstr(c, "name"), "beta");
            assert_string_equal(jstr(c, "state"), "waiting");
            assert_string_equal(jstr(c, "priority"), "low");
            assert_int_equal(jnum(c, "weight"), 3);
            assert_true(jnum(c, "wait_s") > 0.05);
        }
    }
    js_done(j);
    static struct tc_out o;
    tc_ctl(&o, (uid_t)-1, d.sock, "status", NULL);
    assert_int_equal(o.status, 0);
    assert_non_null(strstr(o.out, "alpha"));
    assert_non_null(strstr(o.out, "waiting"));
    tc_ctl(&o, (uid_t)-1, d.sock, "status", "--yaml", NULL);
    assert_int_equal(o.status, 2);
    tc_ctl(&o, (uid_t)-1, "/nonexistent/s.sock", "status", NULL);
    assert_int_equal(o.status, 3);
    close(a);
    close(b);
}

/* A client's pod, namespace (HELLO) and container (LABELS), believed from
 * the daemon's owner, in status: a line under the client and JSON keys. */
static void test_status_labels(void **state)
{
    (void)state;
    start("labels", NULL);
    int a = tc_connect(d.sock);
    struct cs_msg m = {.type = CS_MSG_HELLO};
    m.u.hello.flags = CS_HELLO_LABELS;
    m.u.hello.weight = 1;
    m.u.hello.proto_min = CS_PROTO_VERSION;
    strcpy(m.u.hello.name, "alpha");
    strcpy(m.u.hello.pod, "train-0");
    strcpy(m.u.hello.ns, "team-a");
    tc_send(a, &m);
    tc_expect(a, CS_MSG_WELCOME, &m);
    m = (struct cs_msg){.type = CS_MSG_LABELS};
    strcpy(m.u.labels.container, "trainer");
    tc_send(a, &m);
    tc_attach(a, 0, 0, 0, 0);
    int b = tc_client(d.sock, CS_PRIO_NORMAL, 1, "beta"); /* says none of them */
    tc_attach(b, 0, 0, 0, 0);
    tc_quiet(a, 50);
    struct js *j = status_json(d.sock);
    const struct js *cl = js_get(js_at(js_get(j, "gpus"), 0), "clients");
    assert_int_equal(cl->n, 2);
    for (size_t i = 0; i < 2; i++) {
        const struct js *c = js_at(cl, i);
        bool alpha = strcmp(jstr(c, "name"), "alpha") == 0;
        assert_string_equal(jstr(c, "pod"), alpha ? "train-0" : "");
        assert_string_equal(jstr(c, "namespace"), alpha ? "team-a" : "");
        assert_string_equal(jstr(c, "container"), alpha ? "trainer" : "");
    }
    js_done(j);
    static struct tc_out o;
    tc_ctl(&o, (uid_t)-1, d.sock, "status", NULL);
    assert_int_equal(o.status, 0);
    assert_non_null(strstr(o.out, "pod team-a/train-0, container trainer\n"));
    assert_null(strstr(o.out, "pod -/-")); /* none for beta */
    close(a);
    close(b);
}

/* WELCOME's idle period: the smaller of idle_report_ms and idle_release_ms,
 * from the configuration as it is when the client registers. */
static uint32_t welcome_idle_ms(void)
{
    int a = tc_connect(d.sock);
    struct cs_msg m = {.type = CS_MSG_HELLO};
    m.u.hello.weight = 1;
    m.u.hello.proto_min = CS_PROTO_VERSION;
    strcpy(m.u.hello.name, "idle");
    tc_send(a, &m);
    tc_expect(a, CS_MSG_WELCOME, &m);
    close(a);
    return m.u.welcome.idle_ms;
}

static void test_welcome_idle_period(void **state)
{
    (void)state;
    start("welcome", "idle_release_ms = 300\nidle_report_ms = 40\n");
    assert_int_equal(welcome_idle_ms(), 40);
    static struct tc_out o;
    tc_ctl(&o, (uid_t)-1, d.sock, "set", "idle_report_ms=500", NULL);
    assert_int_equal(o.status, 0);
    assert_int_equal(welcome_idle_ms(), 300);
    tc_ctl(&o, (uid_t)-1, d.sock, "set", "idle_release_ms=20", NULL);
    assert_int_equal(o.status, 0);
    assert_int_equal(welcome_idle_ms(), 20);
    tc_ctl(&o, (uid_t)-1, d.sock, "set", "idle_report_ms=0", NULL);
    assert_int_equal(o.status, 1);
    assert_int_equal(welcome_idle_ms(), 20);
}

/* set applies knobs and client settings at run time, all or nothing, with
 * a reason when refused. */
static void test_set_at_run_time(void **state)
{
    (void)state;
    start("set", "quantum_floor_ms = 60000\nquantum_cap_ms = 60000\n");
    int a = tc_client(d.sock, CS_PRIO_LOW, 1, "alpha");
    int b = tc_client(d.sock, CS_PRIO_LOW, 1, "beta");
    tc_attach(a, 0, 0, 0, 0);
    tc_attach(b, 0, 0, 0, 0);
    tc_acquire(a, 0);
    uint64_t la = tc_expect_grant(a, 0), l;
    tc_acquire(b, 0);
    tc_quiet(a, 100);
    static struct tc_out o;
    tc_ctl(&o, (uid_t)-1, d.sock, "set", "quantum_floor_ms=5000", "nope=1", NULL);
    assert_int_equal(o.status, 1);
    assert_non_null(strstr(o.err, "unknown key 'nope'"));
    assert_int_equal(daemon_num("quantum_floor_ms"), 60000); /* nothing applied */
    tc_ctl(&o, (uid_t)-1, d.sock, "set", "quantum_cap_ms=100", NULL);
    assert_int_equal(o.status, 1);
    assert_non_null(strstr(o.err, "above quantum_cap_ms"));
    tc_ctl(&o, (uid_t)-1, d.sock, "set", "client.99999999.weight=2", NULL);
    assert_int_equal(o.status, 1);
    assert_non_null(strstr(o.err, "no client with pid"));
    tc_ctl(&o, (uid_t)-1, d.sock, "set", "metrics=127.0.0.1:1", NULL);
    assert_int_equal(o.status, 1);
    tc_ctl(&o, (uid_t)-1, d.sock, "set", "bad", NULL);
    assert_int_equal(o.status, 2);
    /* The waiter becomes high priority: the holder is preempted. */
    tc_ctl(&o, (uid_t)-1, d.sock, "set", "client.beta.priority=high", "client.beta.weight=7",
           "idle_release_ms=80", NULL);
    if (o.status != 0)
        fail_msg("set: %s", o.err);
    assert_int_equal(tc_expect_revoke(a, 0, &l), CS_REVOKE_PREEMPT);
    tc_release(a, 0, la);
    tc_expect_grant(b, 0);
    assert_int_equal(daemon_num("idle_release_ms"), 80);
    /* Name settings are remembered for clients that register later. */
    int c = tc_client(d.sock, CS_PRIO_LOW, 1, "beta");
    tc_attach(c, 0, 0, 0, 0);
    struct js *j = status_json(d.sock);
    const struct js *cl = js_get(js_at(js_get(j, "gpus"), 0), "clients");
    size_t betas = 0;
    for (size_t i = 0; i < cl->n; i++) {
        if (strcmp(jstr(js_at(cl, i), "name"), "beta") == 0) {
            assert_string_equal(jstr(js_at(cl, i), "priority"), "high");
            assert_int_equal(jnum(js_at(cl, i), "weight"), 7);
            betas++;
        }
    }
    assert_int_equal(betas, 2);
    js_done(j);
    close(a);
    close(b);
    close(c);
}

/* drain revokes and grants nobody until undrain. */
static void test_drain_undrain(void **state)
{
    (void)state;
    start("drain", fast_conf);
    int a = tc_client(d.sock, CS_PRIO_NORMAL, 1, "a");
    int b = tc_client(d.sock, CS_PRIO_NORMAL, 1, "b");
    tc_attach(a, 0, 0, 0, 0);
    tc_attach(b, 0, 0, 0, 0);
    tc_acquire(a, 0);
    uint64_t la = tc_expect_grant(a, 0), l;
    static struct tc_out o;
    tc_ctl(&o, (uid_t)-1, d.sock, "drain", "0", NULL);
    assert_int_equal(o.status, 0);
    assert_int_equal(tc_expect_revoke(a, 0, &l), CS_REVOKE_DRAIN);
    tc_release(a, 0, la);
    tc_acquire(b, 0);
    tc_quiet(b, 300);
    struct js *j = status_json(d.sock);
    assert_true(jnum(js_at(js_get(j, "gpus"), 0), "draining") == 1);
    js_done(j);
    char uuid[CS_UUID_STR_LEN];
    uint8_t u[CS_UUID_LEN];
    tc_uuid(0, u);
    cs_uuid_format(u, uuid);
    tc_ctl(&o, (uid_t)-1, d.sock, "undrain", uuid, NULL); /* by UUID this time */
    assert_int_equal(o.status, 0);
    tc_expect_grant(b, 0);
    tc_ctl(&o, (uid_t)-1, d.sock, "drain", "5", NULL);
    assert_int_equal(o.status, 1);
    assert_non_null(strstr(o.err, "no GPU"));
    close(a);
    close(b);
}

/* Changes need the daemon's uid or root (SO_PEERCRED); anyone may look. */
static void test_unauthorized_control_refused(void **state)
{
    (void)state;
    if (geteuid() != 0) {
        print_message("not root: cannot run cusharectl as another uid; skipped\n");
        skip();
    }
    /* The other user must reach the socket: TEST_TMP is private (0700). */
    chmod(tc_tmp(), 0711);
    start("auth", fast_conf);
    int a = tc_client(d.sock, CS_PRIO_NORMAL, 1, "a");
    tc_attach(a, 0, 0, 0, 0);
    tc_quiet(a, 50);
    const uid_t nobody = 65534;
    static struct tc_out o;
    tc_ctl(&o, nobody, d.sock, "status", NULL);
    if (o.status != 0)
        fail_msg("status as uid %u: exit %d: %s", nobody, o.status, o.err);
    tc_ctl(&o, nobody, d.sock, "set", "mode=shared", NULL);
    assert_int_equal(o.status, 1);
    assert_non_null(strstr(o.err, "permission denied"));
    tc_ctl(&o, nobody, d.sock, "drain", "0", NULL);
    assert_int_equal(o.status, 1);
    assert_non_null(strstr(o.err, "permission denied"));
    tc_ctl(&o, nobody, d.sock, "endpoint", "create", "mine", "--priority", "high", NULL);
    assert_int_equal(o.status, 1);
    assert_non_null(strstr(o.err, "permission denied"));
    struct js *j = status_json(d.sock);
    assert_string_equal(jstr(js_get(j, "daemon"), "mode"), "mixed");
    js_done(j);
    tc_ctl(&o, (uid_t)-1, d.sock, "set", "mode=shared", NULL);
    assert_int_equal(o.status, 0);
    assert_true(tc_log_contains(&d, "may not change settings"));
    close(a);
}

/* cusharectl endpoint: create prints the socket, whose clients are served
 * and on which control is refused; identity names its container, shown for
 * the client already there, and refuses to rename it; remove deletes it;
 * bad command lines are usage errors that send nothing. */
static void test_endpoint_command(void **state)
{
    (void)state;
    start("endpoint", NULL);
    static struct tc_out o;
    tc_ctl(&o, (uid_t)-1, d.sock, "endpoint", "create", "job-1", "--priority", "low",
           "--weight-max", "2", "--mem-limit", "1G", "--max-conns", "4", "--gpus",
           "GPU-10111213-1415-1617-1819-1a1b1c1d1e00", "--pod", "p-0", "--namespace", "ns",
           NULL);
    if (o.status != 0)
        fail_msg("endpoint create: exit %d: %s", o.status, o.err);
    char path[300], want[300];
    snprintf(path, sizeof path, "%.299s", o.out);
    path[strcspn(path, "\n")] = '\0';
    snprintf(want, sizeof want, "%.*s/endpoints/job-1/cushared.sock",
             (int)(strrchr(d.sock, '/') - d.sock), d.sock);
    assert_string_equal(path, want);
    int a = tc_client(path, CS_PRIO_LOW, 1, "in-pod");
    tc_attach(a, 0, 0, 0, 0); /* tc_uuid(0): the endpoint's GPU */
    tc_acquire(a, 0);
    tc_expect_grant(a, 0);
    tc_ctl(&o, (uid_t)-1, path, "status", NULL);
    assert_int_not_equal(o.status, 0);
    assert_non_null(strstr(o.err, "control is not available on an endpoint"));
    tc_ctl(&o, (uid_t)-1, d.sock, "endpoint", "identity", "job-1", "--pod", "p-0",
           "--namespace", "ns", "--container", "main", NULL);
    if (o.status != 0)
        fail_msg("endpoint identity: exit %d: %s", o.status, o.err);
    assert_string_equal(o.out, "endpoint job-1: pod ns/p-0\n");
    struct js *j = status_json(d.sock);
    const struct js *c = js_at(js_get(js_at(js_get(j, "gpus"), 0), "clients"), 0);
    assert_string_equal(jstr(c, "name"), "in-pod");
    assert_string_equal(jstr(c, "pod"), "p-0");
    assert_string_equal(jstr(c, "container"), "main");
    js_done(j);
    tc_ctl(&o, (uid_t)-1, d.sock, "endpoint", "identity", "job-1", "--pod", "p-1",
           "--namespace", "ns", NULL);
    assert_int_equal(o.status, 1);
    assert_non_null(strstr(o.err, "already names ns/p-0"));
    tc_ctl(&o, (uid_t)-1, d.sock, "endpoint", "remove", "job-1", NULL);
    assert_int_equal(o.status, 0);
    assert_string_equal(o.out, "removed job-1\n");
    struct stat st;
    assert_int_equal(stat(path, &st), -1);
    tc_ctl(&o, (uid_t)-1, d.sock, "endpoint", "remove", "job-1", NULL);
    assert_int_equal(o.status, 1);
    assert_non_null(strstr(o.err, "no endpoint 'job-1'"));
    const char *const bad[][6] = {
        {"endpoint", NULL},
        {"endpoint", "create", NULL},
        {"endpoint", "remove", "x", "y"},
        {"endpoint", "create", "x", "--weight-max"},
        {"endpoint", "create", "x", "--gpus", "nope"},
        {"endpoint", "create", "x", "stray"},
        {"endpoint", "identity", "x", "--pod", "p"},
        {"endpoint", "create", "x", "--container", "c"},
        {"endpoint", "identity", "x", "--priority", "high"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tc_ctl(&o, (uid_t)-1, d.sock, bad[i][0], bad[i][1], bad[i][2], bad[i][3], bad[i][4],
               NULL);
        assert_int_equal(o.status, 2);
    }
    close(a);
}

/* A control connection that sends requests and never reads its replies is
 * dropped once it owes too much; the daemon keeps serving everyone else. */
static void test_slow_reader_dropped(void **state)
{
    (void)state;
    start("slow", NULL);
    int a = tc_client(d.sock, CS_PRIO_NORMAL, 1, "a");
    int s = tc_connect(d.sock);
    struct cs_msg h = {.type = CS_MSG_HELLO};
    h.u.hello.flags = CS_HELLO_CONTROL;
    h.u.hello.weight = 1;
    h.u.hello.proto_min = 1;
    tc_send(s, &h);
    struct cs_msg st = {.type = CS_MSG_CTL_STATUS};
    uint8_t rec[CS_MSG_MAX];
    int n = cs_msg_encode(&st, rec, sizeof rec);
    bool dropped = false;
    for (int i = 0; i < 200000 && !dropped; i++) {
        ssize_t w = send(s, rec, (size_t)n, MSG_NOSIGNAL);
        dropped = w < 0 && (errno == EPIPE || errno == ECONNRESET);
    }
    assert_true(dropped);
    assert_true(daemon_num("dropped_slow") >= 1);
    tc_attach(a, 0, 0, 0, 0);
    tc_acquire(a, 0);
    tc_expect_grant(a, 0);
    close(s);
    close(a);
}

/* Caps: max_clients refuses the next registration with a reason. */
static void test_client_cap(void **state)
{
    (void)state;
    start("cap", "max_clients = 2\n");
    int a = tc_client(d.sock, CS_PRIO_NORMAL, 1, "a");
    int b = tc_client(d.sock, CS_PRIO_NORMAL, 1, "b");
    int c = tc_connect(d.sock);
    struct cs_msg h = {.type = CS_MSG_HELLO};
    h.u.hello.weight = 1;
    h.u.hello.proto_min = 1;
    tc_send(c, &h);
    struct cs_msg e;
    tc_expect(c, CS_MSG_ERROR, &e);
    assert_non_null(strstr(e.u.error.text, "max_clients"));
    tc_expect_closed(c);
    assert_int_equal(daemon_num("clients"), 2); /* control still served */
    close(a);
    close(b);
    close(c);
}

/* A GPU that is not the node's: refused with the reason, the GPU table does
 * not grow, and status counts the refusal by reason. */
static void test_unknown_gpu_refused(void **state)
{
    (void)state;
    start("unknown", NULL);
    for (uint8_t g = 1; g < 6; g++) {
        int x = tc_client(d.sock, CS_PRIO_NORMAL, 1, "stranger");
        tc_attach(x, 0, g, 0, 0);
        struct cs_msg e;
        tc_expect(x, CS_MSG_ERROR, &e);
        assert_non_null(strstr(e.u.error.text, "is not a GPU of this node"));
        tc_expect_closed(x);
        close(x);
    }
    struct js *j = status_json(d.sock);
    assert_int_equal(js_get(j, "gpus")->n, 1);
    const struct js *dm = js_get(j, "daemon");
    assert_int_equal(jnum(dm, "refused_unknown_gpu"), 5);
    assert_int_equal(jnum(dm, "node_gpus"), 1);
    assert_int_equal(jnum(dm, "max_conns_per_uid"), 32);
    assert_int_equal(jnum(dm, "protocol_errors"), 0);
    js_done(j);
    static struct tc_out o;
    tc_ctl(&o, (uid_t)-1, d.sock, "status", NULL);
    assert_int_equal(o.status, 0);
    assert_non_null(strstr(o.out, "5 unknown GPU"));
}

/* ---- metrics ------------------------------------------------------------------------------ */

/* The Prometheus endpoint, on a port the daemon picked, served from the
 * event loop: daemon, GPU and client series with live values. */
static void test_metrics_endpoint(void **state)
{
    (void)state;
    if (tc_daemon_start(&d, "metrics", tc_node_conf(fast_conf, 1), "--metrics", "127.0.0.1:0",
                        NULL) < 0)
        fail_msg("cushared did not start; see %s", d.log);
    int a = tc_client(d.sock, CS_PRIO_NORMAL, 1, "alpha");
    tc_attach(a, 0, 0, 0, 0);
    tc_acquire(a, 0);
    tc_expect_grant(a, 0);
    int x = tc_connect(d.sock);
    assert_int_equal(send(x, "junk", 4, 0), 4);
    tc_expect_closed(x);
    close(x);
    uint16_t port = (uint16_t)daemon_num("metrics_port");
    assert_true(port > 0);
    static char page[1 << 17];
    th_get(port, "/metrics", page, sizeof page);
    assert_non_null(strstr(page, "200 OK"));
    assert_non_null(strstr(page, "\ncushare_protocol_errors_total 1\n"));
    assert_non_null(strstr(page, "\ncushare_clients 1\n"));
    char want[512];
    uint8_t u[CS_UUID_LEN];
    char uuid[CS_UUID_STR_LEN];
    tc_uuid(0, u);
    cs_uuid_format(u, uuid);
    snprintf(want, sizeof want,
             "cushare_client_slices_total{gpu=\"%s\",client=\"alpha\",pid=\"%d\","
             "uid=\"%u\",priority=\"normal\",pod=\"\",namespace=\"\",container=\"\"} 1\n",
             uuid, (int)getpid(), (unsigned)geteuid());
    assert_non_null(strstr(page, want));
    snprintf(want, sizeof want,
             "cushare_client_lease_latency_seconds_count{gpu=\"%s\",client=\"alpha\","
             "pid=\"%d\",uid=\"%u\",priority=\"normal\",pod=\"\",namespace=\"\","
             "container=\"\"} 1\n",
             uuid, (int)getpid(), (unsigned)geteuid());
    assert_non_null(strstr(page, want));
    assert_non_null(strstr(page, "le=\"+Inf\"} 1\n"));
    snprintf(want, sizeof want, "cushare_gpu_clients{gpu=\"%s\",index=\"0\"} 1\n", uuid);
    assert_non_null(strstr(page, want));
    assert_non_null(strstr(page, "# TYPE cushare_gpu_switch_latency_seconds histogram\n"));
    assert_non_null(strstr(page, "# TYPE cushare_client_gpu_seconds_total counter\n"));
    th_get(port, "/other", page, sizeof page);
    assert_non_null(strstr(page, "404"));
    close(a);
}

/* ---- the daemon's command line ------------------------------------------------------------ */

/* One daemon per socket; a stale socket file is replaced; a bad config or
 * option stops it at start with a reason. */
static void test_daemon_command_line(void **state)
{
    (void)state;
    start("cli", NULL);
    char bin[512];
    tc_bin(bin, sizeof bin, "cushared");
    static struct tc_out o;
    char *second[] = {bin, "--socket", d.sock, NULL};
    tc_run(&o, (uid_t)-1, NULL, second);
    assert_int_equal(o.status, 1);
    assert_non_null(strstr(o.err, "another cushared is running"));
    assert_int_equal(tc_daemon_stop(&d, SIGTERM), 0);

    /* A stale socket: bound, never listened, left behind. */
    char stale[256];
    snprintf(stale, sizeof stale, "%s/cli/stale.sock", tc_tmp());
    int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    cs_strlcpy(sa.sun_path, stale, sizeof sa.sun_path);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    close(fd);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        execl(bin, "cushared", "--socket", stale, (char *)NULL);
        _exit(127);
    }
    int ok = 0;
    for (int i = 0; i < 500 && !ok; i++) {
        int c = cs_connect(stale);
        if (c >= 0) {
            ok = 1;
            close(c);
        } else {
            sleep_ms(10);
        }
    }
    assert_true(ok);
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

    char conf[256];
    snprintf(conf, sizeof conf, "%s/cli/bad.conf", tc_tmp());
    FILE *f = fopen(conf, "w");
    fputs("mode = exclusive\nmode = weird\n", f);
    fclose(f);
    char *badconf[] = {bin, "--socket", stale, "--config", conf, NULL};
    tc_run(&o, (uid_t)-1, NULL, badconf);
    assert_int_equal(o.status, 1);
    assert_non_null(strstr(o.err, "bad.conf:2: mode: 'weird'"));
    char *badopt[] = {bin, "--frobnicate", NULL};
    tc_run(&o, (uid_t)-1, NULL, badopt);
    assert_int_equal(o.status, 2);
    char *badlevel[] = {bin, "--log-level", "chatty", NULL};
    tc_run(&o, (uid_t)-1, NULL, badlevel);
    assert_int_equal(o.status, 2);
    char *print[] = {bin, "--print-config", "--metrics", "127.0.0.1:9", NULL};
    tc_run(&o, (uid_t)-1, NULL, print);
    assert_int_equal(o.status, 0);
    assert_non_null(strstr(o.out, "metrics=127.0.0.1:9\n"));
}

/* ---- cushare-run --------------------------------------------------------------------------- */

static void copy_file(const char *from, const char *to, mode_t mode)
{
    FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
    assert_non_null(in);
    assert_non_null(out);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        assert_int_equal(fwrite(buf, 1, n, out), n);
    fclose(in);
    fclose(out);
    chmod(to, mode);
}

static bool has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p += n)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return true;
    return false;
}

static void wait_gone(pid_t pid)
{
    for (int i = 0; i < 1000 && kill(pid, 0) == 0; i++)
        sleep_ms(10);
    assert_int_equal(kill(pid, 0), -1);
}

/* cushare-run starts a private daemon when none answers, says so, sets
 * the environment it promises (CMD = env), reuses the daemon afterwards,
 * and rejects bad options with a clear message. A stand-in libcushare.so
 * (an empty object) is installed next to copies of the programs, so the
 * test does not depend on the hook being built. */
static void test_cushare_run(void **state)
{
    (void)state;
    char root[256], bin[300], lib[300], run[400], sock[300], empty[512], real[512];
    snprintf(root, sizeof root, "%s/run", tc_tmp());
    snprintf(bin, sizeof bin, "%s/bin", root);
    snprintf(lib, sizeof lib, "%s/lib", root);
    mkdir(root, 0755);
    mkdir(bin, 0755);
    mkdir(lib, 0755);
    char from[512], to[512];
    tc_bin(from, sizeof from, "cushared");
    snprintf(to, sizeof to, "%s/cushared", bin);
    copy_file(from, to, 0755);
    tc_bin(from, sizeof from, "cushare-run");
    snprintf(run, sizeof run, "%s/cushare-run", bin);
    copy_file(from, run, 0755);
    snprintf(from, sizeof from, "%s/tests/sched/libempty.so", tc_build());
    assert_non_null(realpath(from, empty));
    snprintf(to, sizeof to, "%s/libcushare.so", lib);
    copy_file(empty, to, 0755);
    assert_non_null(realpath(to, real));
    snprintf(sock, sizeof sock, "%s/sock/cushared.sock", root);

    static struct tc_out o;
    char pre[600], asan[600];
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s", empty);
    /* In the ASan tree cushare-run is instrumented and the inherited
     * LD_PRELOAD puts another object ahead of the runtime: allowed here. */
    const char *ao = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof asan, "ASAN_OPTIONS=%s%sverify_asan_link_order=0", ao ? ao : "",
             ao && *ao ? ":" : "");
    char *env1[] = {pre, asan, NULL};
    char *argv1[] = {run, "--socket", sock, "--priority", "low", "--weight", "3",
                     "--mem-limit", "1G", "--name", "job", "--", "/usr/bin/env", NULL};
    tc_run(&o, (uid_t)-1, env1, argv1);
    if (o.status != 0)
        fail_msg("cushare-run: exit %d: %s", o.status, o.err);
    assert_non_null(strstr(o.err, "started a private one"));
    char want[1200];
    snprintf(want, sizeof want, "LD_PRELOAD=%s:%s", real, empty);
    assert_true(has_line(o.out, want));
    snprintf(want, sizeof want, "CUSHARE_SOCKET=%s", sock);
    assert_true(has_line(o.out, want));
    assert_true(has_line(o.out, "CUSHARE_PRIORITY=low"));
    assert_true(has_line(o.out, "CUSHARE_WEIGHT=3"));
    assert_true(has_line(o.out, "CUSHARE_MEM_LIMIT=1073741824"));
    assert_true(has_line(o.out, "CUSHARE_NAME=job"));

    /* The daemon it started answers and keeps running. */
    struct js *j = status_json(sock);
    pid_t dpid = (pid_t)jnum(js_get(j, "daemon"), "pid");
    js_done(j);
    snprintf(want, sizeof want, "%s/sock/cushared.log", root);
    assert_int_equal(access(want, R_OK), 0);

    /* Second job: same daemon, defaults, the caller's CUSHARE_* kept. */
    char *env2[] = {"CUSHARE_PRIORITY=high", NULL};
    char *argv2[] = {run, "--socket", sock, "/usr/bin/env", NULL};
    tc_run(&o, (uid_t)-1, env2, argv2);
    assert_int_equal(o.status, 0);
    assert_null(strstr(o.err, "started"));
    assert_true(has_line(o.out, "CUSHARE_PRIORITY=high"));
    assert_true(has_line(o.out, "CUSHARE_WEIGHT=1"));
    assert_true(has_line(o.out, "CUSHARE_NAME=env"));
    snprintf(want, sizeof want, "LD_PRELOAD=%s", real);
    assert_true(has_line(o.out, want));

    /* Bad options: exit 2 and the option named. */
    static const char *const bad[][3] = {
        {"--priority", "urgent", "--priority"}, {"--weight", "0", "--weight"},
        {"--weight", "x", "--weight"},          {"--mem-limit", "12Q", "--mem-limit"},
        {"--name", "", "--name"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *argv[] = {run, "--socket", sock, (char *)bad[i][0], (char *)bad[i][1], "--",
                        "/bin/true", NULL};
        tc_run(&o, (uid_t)-1, NULL, argv);
        assert_int_equal(o.status, 2);
        assert_non_null(strstr(o.err, bad[i][2]));
    }
    char *nocmd[] = {run, "--socket", sock, NULL};
    tc_run(&o, (uid_t)-1, NULL, nocmd);
    assert_int_equal(o.status, 2);
    assert_non_null(strstr(o.err, "no command"));
    char *missing[] = {run, "--socket", sock, "--", "/nonexistent/prog", NULL};
    tc_run(&o, (uid_t)-1, NULL, missing);
    assert_int_equal(o.status, 127);

    /* No libcushare.so next to it: refuses rather than run unmanaged. */
    char lone[400];
    snprintf(lone, sizeof lone, "%s/lone", root);
    mkdir(lone, 0755);
    snprintf(lone, sizeof lone, "%s/lone/bin", root);
    mkdir(lone, 0755);
    snprintf(to, sizeof to, "%s/cushare-run", lone);
    copy_file(run, to, 0755);
    char *nolib[] = {to, "--socket", sock, "--", "/bin/true", NULL};
    tc_run(&o, (uid_t)-1, NULL, nolib);
    assert_int_equal(o.status, 1);
    assert_non_null(strstr(o.err, "libcushare.so"));

    kill(dpid, SIGTERM);
    wait_gone(dpid);
}

#define T(f) cmocka_unit_test_teardown(f, teardown)

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        T(test_lease_cycle),
        T(test_lone_holder_keeps_gpu),
        T(test_bad_records_close_only_their_connection),
        T(test_dead_holder_hands_over),
        T(test_revoke_timeout_forces_release),
        T(test_room_and_evict),
        T(test_restart_with_reconnecting_clients),
        T(test_restart_claims_and_grace),
        T(test_clean_shutdown),
        T(test_status_json),
        T(test_status_labels),
        T(test_welcome_idle_period),
        T(test_set_at_run_time),
        T(test_drain_undrain),
        T(test_unauthorized_control_refused),
        T(test_endpoint_command),
        T(test_slow_reader_dropped),
        T(test_client_cap),
        T(test_unknown_gpu_refused),
        T(test_metrics_endpoint),
        T(test_daemon_command_line),
        T(test_cushare_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
