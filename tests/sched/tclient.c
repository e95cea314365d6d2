/* tclient.c: see tclient.h. Failures go through cmocka (fail_msg), so a
 * helper that does not get what it waits for fails the running test with
 * the reason. */
#include "tclient.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

uint64_t tc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

const char *tc_build(void)
{
    const char *b = getenv("CUSHARE_BUILD");
    return b && *b ? b : "build";
}

const char *tc_tmp(void)
{
    const char *t = getenv("TEST_TMP");
    return t && *t ? t : "/tmp";
}

void tc_bin(char *out, size_t cap, const char *prog)
{
    char rel[512];
    snprintf(rel, sizeof rel, "%s/bin/%s", tc_build(), prog);
    /* Absolute, so that a child running as another user in another
     * directory finds it too. */
    if (!realpath(rel, out) || strlen(out) >= cap)
        fail_msg("cannot find %s", rel);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

/* ---- the daemon ------------------------------------------------------------------------ */

static bool answers(const char *sock)
{
    int fd = cs_connect(sock);
    if (fd < 0)
        return false;
    struct cs_msg h = {.type = CS_MSG_HELLO};
    h.u.hello.flags = CS_HELLO_CONTROL;
    h.u.hello.weight = 1;
    h.u.hello.proto_min = 1;
    struct cs_msg w;
    bool ok = cs_send(fd, &h) == 0 && cs_recv(fd, &w, NULL) == 1 && w.type == CS_MSG_WELCOME;
    close(fd);
    return ok;
}

static char *const *daemon_argv(struct tc_daemon *d, char **extra, char *bin, char **argv)
{
    size_t n = 0;
    argv[n++] = bin;
    argv[n++] = "--socket";
    argv[n++] = d->sock;
    argv[n++] = "--log-level";
    argv[n++] = "debug";
    if (d->conf[0]) {
        argv[n++] = "--config";
        argv[n++] = d->conf;
    }
    for (size_t i = 0; extra && extra[i] && n < 30; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    return argv;
}

/* Extra arguments kept for a restart. */
static char *saved_extra[16];

static int spawn(struct tc_daemon *d)
{
    char bin[512];
    tc_bin(bin, sizeof bin, "cushared");
    char *argv[32];
    daemon_argv(d, saved_extra, bin, argv);
    d->spawn_ms = tc_now_ms();
    d->pid = fork();
    if (d->pid == 0) {
        int fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(bin, argv);
        _exit(127);
    }
    uint64_t t0 = tc_now_ms();
    while (tc_now_ms() - t0 < TC_WAIT_MS) {
        if (answers(d->sock))
            return 0;
        int st;
        if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
            d->pid = 0;
            return -1;
        }
        sleep_ms(10);
    }
    return -1;
}

/* dir/file into out, failing the test if it does not fit. */
static void join(char *out, size_t cap, const char *dir, const char *file)
{
    size_t a = strlen(dir), b = strlen(file);
    if (a + 1 + b >= cap)
        fail_msg("path too long: %s/%s", dir, file);
    memcpy(out, dir, a);
    out[a] = '/';
    memcpy(out + a + 1, file, b + 1);
}

int tc_daemon_start(struct tc_daemon *d, const char *name, const char *conf, ...)
{
    memset(d, 0, sizeof *d);
    char dir[256];
    join(dir, sizeof dir, tc_tmp(), name);
    mkdir(dir, 0755);
    join(d->sock, sizeof d->sock, dir, "s.sock");
    join(d->log, sizeof d->log, dir, "cushared.log");
    if (conf) {
        join(d->conf, sizeof d->conf, dir, "cushared.conf");
        FILE *f = fopen(d->conf, "w");
        assert_non_null(f);
        fputs(conf, f);
        fclose(f);
    }
    for (size_t i = 0; i < 16; i++) {
        free(saved_extra[i]);
        saved_extra[i] = NULL;
    }
    va_list ap;
    va_start(ap, conf);
    const char *a;
    for (size_t i = 0; i < 15 && (a = va_arg(ap, const char *)); i++)
        saved_extra[i] = strdup(a);
    va_end(ap);
    return spawn(d);
}

int tc_daemon_restart(struct tc_daemon *d)
{
    return spawn(d);
}

int tc_daemon_stop(struct tc_daemon *d, int sig)
{
    if (d->pid <= 0)
        return -1;
    kill(d->pid, sig);
    int st = 0;
    while (waitpid(d->pid, &st, 0) < 0 && errno == EINTR) {
    }
    d->pid = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

bool tc_log_contains(const struct tc_daemon *d, const char *text)
{
    FILE *f = fopen(d->log, "r");
    if (!f)
        return false;
    char line[2048];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, text) != NULL;
    fclose(f);
    return found;
}

/* ---- a client --------------------------------------------------------------------------- */

int tc_connect(const char *sock)
{
    int fd = cs_connect(sock);
    if (fd < 0)
        fail_msg("connect %s: %s", sock, strerror(-fd));
    return fd;
}

void tc_send(int fd, const struct cs_msg *m)
{
    int rc = cs_send(fd, m);
    if (rc < 0)
        fail_msg("send %s: %s", cs_msg_name(m->type), strerror(-rc));
}

static int wait_readable(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r;
    do
        r = poll(&p, 1, ms);
    while (r < 0 && errno == EINTR);
    return r;
}

void tc_expect(int fd, uint16_t type, struct cs_msg *out)
{
    struct cs_msg m;
    if (wait_readable(fd, TC_WAIT_MS) <= 0)
        fail_msg("no %s within %d ms", cs_msg_name(type), TC_WAIT_MS);
    const char *why = "?";
    int rc = cs_recv(fd, &m, &why);
    if (rc != 1)
        fail_msg("waiting for %s: recv %d (%s)", cs_msg_name(type), rc, why);
    if (m.type != type) {
        if (m.type == CS_MSG_ERROR)
            fail_msg("got ERROR '%s' instead of %s", m.u.error.text, cs_msg_name(type));
        fail_msg("got %s instead of %s", cs_msg_name(m.type), cs_msg_name(type));
    }
    if (out)
        *out = m;
}

int tc_client_full(const char *sock, uint32_t prio, uint32_t weight, const char *name,
                   uint32_t flags, uint64_t prev_id, uint64_t *id)
{
    int fd = tc_connect(sock);
    struct cs_msg h = {.type = CS_MSG_HELLO};
    h.u.hello.flags = flags;
    h.u.hello.priority = prio;
    h.u.hello.weight = weight;
    h.u.hello.proto_min = CS_PROTO_VERSION;
    h.u.hello.prev_client_id = prev_id;
    snprintf(h.u.hello.name, sizeof h.u.hello.name, "%s", name);
    tc_send(fd, &h);
    struct cs_msg w;
    tc_expect(fd, CS_MSG_WELCOME, &w);
    if (id)
        *id = w.u.welcome.client_id;
    return fd;
}

int tc_client(const char *sock, uint32_t prio, uint32_t weight, const char *name)
{
    return tc_client_full(sock, prio, weight, name, 0, 0, NULL);
}

void tc_uuid(uint8_t gpu, uint8_t out[CS_UUID_LEN])
{
    for (int i = 0; i < CS_UUID_LEN; i++)
        out[i] = (uint8_t)(0x10 + i);
    out[15] = gpu;
}

/* conf with `gpus =` naming the node's GPUs: the tc_uuid numbers in mask
 * (bit i: GPU i), 16 GiB each as tc_attach says. Never discovered: the
 * clients here name made-up GPUs. */
const char *tc_node_conf(const char *conf, unsigned mask)
{
    static char buf[8192];
    size_t n = 0;
    for (uint8_t i = 0; i < 8; i++) {
        if (!(mask & (1u << i)))
            continue;
        uint8_t u[CS_UUID_LEN];
        char txt[CS_UUID_STR_LEN];
        tc_uuid(i, u);
        cs_uuid_format(u, txt);
        n += (size_t)snprintf(buf + n, sizeof buf - n, "gpus = %s:16G\n", txt);
    }
    snprintf(buf + n, sizeof buf - n, "%s", conf ? conf : "");
    return buf;
}

void tc_attach(int fd, uint32_t slot, uint8_t gpu, uint32_t flags, uint64_t lease)
{
    struct cs_msg a = {.type = CS_MSG_ATTACH};
    a.u.attach.slot = slot;
    a.u.attach.flags = flags;
    tc_uuid(gpu, a.u.attach.uuid);
    a.u.attach.total_mem = 16ull << 30;
    a.u.attach.lease_id = lease;
    tc_send(fd, &a);
}

void tc_acquire(int fd, uint32_t slot)
{
    struct cs_msg a = {.type = CS_MSG_ACQUIRE};
    a.u.acquire.slot = slot;
    tc_send(fd, &a);
}

void tc_release(int fd, uint32_t slot, uint64_t lease)
{
    struct cs_msg r = {.type = CS_MSG_RELEASE};
    r.u.release.slot = slot;
    r.u.release.reason = CS_RELEASE_REVOKED;
    r.u.release.lease_id = lease;
    r.u.release.drain_ns = 1000;
    tc_send(fd, &r);
}

void tc_usage(int fd, uint32_t slot, uint32_t flags, uint64_t resident, uint64_t footprint)
{
    struct cs_msg u = {.type = CS_MSG_USAGE};
    u.u.usage.slot = slot;
    u.u.usage.flags = flags;
    u.u.usage.resident = resident;
    u.u.usage.footprint = footprint;
    tc_send(fd, &u);
}

uint64_t tc_expect_grant(int fd, uint32_t slot)
{
    struct cs_msg g;
    tc_expect(fd, CS_MSG_GRANT, &g);
    assert_int_equal(g.u.grant.slot, slot);
    assert_true(g.u.grant.lease_id != 0);
    return g.u.grant.lease_id;
}

uint32_t tc_expect_revoke(int fd, uint32_t slot, uint64_t *lease)
{
    struct cs_msg r;
    tc_expect(fd, CS_MSG_REVOKE, &r);
    assert_int_equal(r.u.revoke.slot, slot);
    if (lease)
        *lease = r.u.revoke.lease_id;
    return r.u.revoke.reason;
}

void tc_quiet(int fd, int ms)
{
    if (wait_readable(fd, ms) > 0) {
        struct cs_msg m;
        int rc = cs_recv(fd, &m, NULL);
        fail_msg("expected silence for %d ms, got %s", ms,
                 rc == 1 ? cs_msg_name(m.type) : rc == 0 ? "EOF" : "an error");
    }
}

void tc_expect_closed(int fd)
{
    for (int i = 0; i < 4; i++) {
        if (wait_readable(fd, TC_WAIT_MS) <= 0)
            fail_msg("connection not closed within %d ms", TC_WAIT_MS);
        struct cs_msg m;
        int rc = cs_recv(fd, &m, NULL);
        if (rc == 0 || rc == -ECONNRESET)
            return;
        if (rc != 1 || m.type != CS_MSG_ERROR)
            fail_msg("expected ERROR then EOF, got %s", rc == 1 ? cs_msg_name(m.type) : "junk");
    }
    fail_msg("connection still open");
}

/* ---- processes ---------------------------------------------------------------------------- */

static void drain_into(int fd, char *buf, size_t cap, size_t *len)
{
    ssize_t r = read(fd, buf + *len, cap - 1 - *len);
    if (r > 0)
        *len += (size_t)r;
    buf[*len] = '\0';
}

static void become(uid_t uid)
{
    if (uid == (uid_t)-1)
        return;
    if (setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0)
        _exit(125);
}

void tc_run(struct tc_out *o, uid_t uid, char *const env[], char *const argv[])
{
    memset(o, 0, sizeof *o);
    int po[2], pe[2];
    assert_int_equal(pipe2(po, O_CLOEXEC), 0);
    assert_int_equal(pipe2(pe, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(po[1], 1);
        dup2(pe[1], 2);
        for (size_t i = 0; env && env[i]; i++)
            putenv(env[i]);
        become(uid);
        execv(argv[0], argv);
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    size_t lo = 0, le = 0;
    struct pollfd p[2] = {{.fd = po[0], .events = POLLIN}, {.fd = pe[0], .events = POLLIN}};
    uint64_t t0 = tc_now_ms();
    while ((p[0].fd >= 0 || p[1].fd >= 0) && tc_now_ms() - t0 < 30000) {
        if (poll(p, 2, 1000) <= 0)
            continue;
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP)))
                continue;
            size_t before = i ? le : lo;
            if (i)
                drain_into(pe[0], o->err, sizeof o->err, &le);
            else
                drain_into(po[0], o->out, sizeof o->out, &lo);
            if ((i ? le : lo) == before) { /* EOF (or full) */
                close(p[i].fd);
                p[i].fd = -1;
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (p[i].fd >= 0)
            close(p[i].fd);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    o->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void tc_ctl(struct tc_out *o, uid_t uid, const char *sock, ...)
{
    char bin[512];
    tc_bin(bin, sizeof bin, "cusharectl");
    char *argv[24] = {bin, "--socket", (char *)sock};
    size_t n = 3;
    va_list ap;
    va_start(ap, sock);
    char *a;
    while (n < 23 && (a = va_arg(ap, char *)))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    tc_run(o, uid, NULL, argv);
}
