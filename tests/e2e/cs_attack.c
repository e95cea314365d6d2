/* cs_attack: a hostile (or buggy) tenant speaking the wire protocol
 * directly, for the adversarial end-to-end tests (tests/e2e/adv_*.sh) and
 * the measurement (bench/adversarial/run.sh). Issue 17's attacks, one mode
 * each; every mode ends by itself within --seconds.
 *
 *   cs_attack uuid
 *       Prints `uuid=GPU-... total_mem=N` of device 0, found as the hook
 *       finds it (the driver, libcuda.so.1: the simulated one through
 *       LD_LIBRARY_PATH). The tests run it as the daemon's uid and give
 *       the attacker --uuid, so the attacker never touches the simulator.
 *   cs_attack hold [--priority P] [--weight W] [--go-file F]
 *       HELLO asking P (default high) and W (default 1), ATTACH the GPU,
 *       then (once F exists, if given) ACQUIRE every --period-ms (an
 *       ACQUIRE while waiting or holding changes nothing): on GRANT it
 *       never RELEASEs and never answers REVOKE, EVICT or PREFETCH.
 *   cs_attack burst [--priority P] [--period-ms N] [--hold-ms H]
 *       HELLO asking P (default high); every N ms (default 300) ACQUIRE,
 *       hold H ms (default 1) after the GRANT, RELEASE. Answers a REVOKE
 *       at once: it is a runaway job, not a silent one.
 * (The other modes ask for normal unless --priority says otherwise.)
 *   cs_attack silent [--resident SIZE]
 *       HELLO, ATTACH, USAGE: SIZE (default 1G) resident, all of it
 *       swappable; never answers EVICT (PREPARE included) or PREFETCH.
 *   cs_attack attach [--count N] [--conns C] [--seed S]
 *       ATTACHes N (default 64) random GPU UUIDs over C (default 4)
 *       connections, one at a time, each followed by a short wait for an
 *       ERROR; a connection closed by the daemon is opened again (HELLO
 *       again) for the next one. Then stays connected.
 *   cs_attack borrow
 *       HELLO with CS_HELLO_POOL, ATTACH, then BORROWs big pieces of the
 *       node's pinned pool 32 at a time, keeping every descriptor, until
 *       three LENDs in a row come empty, says `hoarded lent_bytes=N`, and
 *       holds them, connected, never RETURNing, until --seconds pass.
 *   cs_attack linger [--resident SIZE] [--hold-ms H] [--no-borrow]
 *       HELLO with CS_HELLO_POOL, ATTACH, USAGE: SIZE (default 1G)
 *       resident, BORROWs one batch of pieces (so that the pool watches
 *       the process), then closes the connection, says `left`, and lives
 *       on H ms (default 1) before it exits: a job whose process outlives
 *       its connection, its GPU memory still its own. --no-borrow: no
 *       CS_HELLO_POOL and no BORROW (a job that never swapped).
 *   cs_attack flood [--conns N] [--reopen-ms P]
 *       Opens N (default 1040) connections that never send HELLO
 *       (RLIMIT_NOFILE raised as far as allowed) and keeps them open;
 *       with P > 0, connections the daemon closed are opened again every
 *       P ms, so that the pressure lasts the whole --seconds.
 *
 * Common options: --socket PATH (default $CUSHARE_SOCKET, else the default
 * socket), --seconds S (default 10), --uuid GPU-... and --total-mem SIZE
 * (default: from the driver), --name NAME.
 *
 * Output: one line per event, `cs_attack: EVENT key=value ...`, flushed at
 * once, e.g.
 *   cs_attack: welcome conn=0 client_id=3
 *   cs_attack: refused conn=7 text=refused: too many connections
 *   cs_attack: grant lease=5 t_ns=...
 * and a last line `cs_attack: done mode=M key=value ...` with the counts.
 * Exit status: 0 when the attack ran its course (refusals included), 1 when
 * it could not start (no daemon, no GPU), 2 for bad usage.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/proto.h"
#include "common/util.h"

#define ATK_REPLY_MS 2000  /* longest wait for a WELCOME */
#define ATK_ATTACH_MS 50   /* wait for an ERROR after each ATTACH */
#define ATK_MAX_CONNS 65536
#define ATK_SHOWN 5        /* refusal texts printed in full, per kind */

static struct {
    const char *mode, *sock, *name, *go_file;
    uint64_t seconds, period_ms, hold_ms, resident, count, conns, seed, reopen_ms;
    uint64_t total_mem;
    uint32_t priority, weight;
    unsigned char uuid[CS_UUID_LEN];
    bool have_uuid, priority_set, no_borrow;
} o = {
    .seconds = 10, .period_ms = 100, .hold_ms = 1, .resident = 1ull << 30, .count = 64,
    .seed = 1, .priority = CS_PRIO_HIGH, .weight = 1,
};

static uint64_t deadline_ns;

/* ---- output ------------------------------------------------------------------------ */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("cs_attack: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

static void die(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void die(int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("cs_attack: error ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    exit(rc);
}

/* ---- time ------------------------------------------------------------------------------ */

static bool expired(void)
{
    return cs_now_ns() >= deadline_ns;
}

/* Milliseconds left until min(now + ms, the deadline), for poll. */
static int wait_ms(uint64_t ms)
{
    uint64_t now = cs_now_ns(), until = now + ms * 1000000ull;
    if (until > deadline_ns)
        until = deadline_ns;
    return until > now ? (int)((until - now + 999999) / 1000000) : 0;
}

static void sleep_ms(uint64_t ms)
{
    poll(NULL, 0, wait_ms(ms));
}

/* ---- the GPU as the driver names it ---------------------------------------------------- */

typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_dev_get_fn)(int *, int);
typedef int (*cu_uuid_fn)(void *, int);
typedef int (*cu_total_fn)(size_t *, int);

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);
    if (!p)
        die(1, "libcuda.so.1 has no %s", name);
    return p;
}

/* Device 0's UUID and memory, as the hook reads them (lease.c). */
static void driver_gpu(unsigned char uuid[CS_UUID_LEN], uint64_t *total)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        die(1, "no driver: %s (give --uuid)", dlerror());
    int dev = 0, rc;
    size_t bytes = 0;
    if ((rc = ((cu_init_fn)(uintptr_t)sym(lib, "cuInit"))(0)) != 0 ||
        (rc = ((cu_dev_get_fn)(uintptr_t)sym(lib, "cuDeviceGet"))(&dev, 0)) != 0 ||
        (rc = ((cu_uuid_fn)(uintptr_t)sym(lib, "cuDeviceGetUuid_v2"))(uuid, dev)) != 0 ||
        (rc = ((cu_total_fn)(uintptr_t)sym(lib, "cuDeviceTotalMem_v2"))(&bytes, dev)) != 0)
        die(1, "the driver failed: CUresult %d", rc);
    *total = bytes;
}

/* The GPU to attack: --uuid/--total-mem, else the driver's device 0. */
static void need_gpu(void)
{
    uint64_t total = 0;
    if (!o.have_uuid)
        driver_gpu(o.uuid, &total);
    if (!o.total_mem)
        o.total_mem = total ? total : 1ull << 30;
    o.have_uuid = true;
}

/* ---- connections ----------------------------------------------------------------------- */

/* A non-blocking SEQPACKET connection; a full listen backlog (EAGAIN) is
 * tried again for patience_ms (within the deadline). Returns fd or -errno. */
static int open_conn(uint64_t patience_ms)
{
    uint64_t until = cs_now_ns() + patience_ms * 1000000ull;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(o.sock) >= sizeof sa.sun_path)
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, o.sock, strlen(o.sock) + 1);
    for (;;) {
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            return -errno;
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0)
            return fd;
        int e = errno;
        close(fd);
        if (e != EAGAIN || expired() || cs_now_ns() >= until)
            return -e;
        sleep_ms(1);
    }
}

/* One record within ms (bounded by the deadline): 1 message, 0 closed,
 * -EAGAIN nothing came, other -errno. */
static int recv_within(int fd, struct cs_msg *m, uint64_t ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int n = poll(&p, 1, wait_ms(ms));
    if (n < 0)
        return errno == EINTR ? -EAGAIN : -errno;
    if (n == 0)
        return -EAGAIN;
    const char *why = NULL;
    int r = cs_recv(fd, m, &why);
    if (r == -EPROTO)
        die(1, "undecodable record from the daemon: %s", why ? why : "?");
    return r;
}

static void send_or_die(int fd, const struct cs_msg *m)
{
    int r = cs_send(fd, m);
    if (r < 0)
        say("send-failed type=%s err=%s", cs_msg_name(m->type), strerror(-r));
}

/* HELLO on a new connection; true on WELCOME. An ERROR is printed as a
 * refusal. */
static bool hello(int fd, int conn)
{
    struct cs_msg h = {.type = CS_MSG_HELLO};
    h.u.hello.priority = o.priority;
    h.u.hello.weight = o.weight;
    h.u.hello.proto_min = 1;
    bool pool = !strcmp(o.mode, "borrow") || (!strcmp(o.mode, "linger") && !o.no_borrow);
    h.u.hello.flags = pool ? CS_HELLO_POOL : 0;
    cs_strlcpy(h.u.hello.name, o.name, sizeof h.u.hello.name);
    send_or_die(fd, &h);
    struct cs_msg r;
    int rc = recv_within(fd, &r, ATK_REPLY_MS);
    if (rc == 1 && r.type == CS_MSG_WELCOME) {
        say("welcome conn=%d client_id=%" PRIu64, conn, r.u.welcome.client_id);
        return true;
    }
    if (rc == 1 && r.type == CS_MSG_ERROR)
        say("refused conn=%d at=hello text=%s", conn, r.u.error.text);
    else
        say("no-welcome conn=%d rc=%d type=%u", conn, rc, rc == 1 ? r.type : 0u);
    return false;
}

static int connect_hello(int conn)
{
    int fd = open_conn(ATK_REPLY_MS);
    if (fd < 0)
        die(1, "cannot connect to %s: %s", o.sock, strerror(-fd));
    if (!hello(fd, conn)) {
        close(fd);
        return -1;
    }
    return fd;
}

static void attach(int fd, uint32_t slot, const unsigned char uuid[CS_UUID_LEN])
{
    struct cs_msg a = {.type = CS_MSG_ATTACH};
    a.u.attach.slot = slot;
    memcpy(a.u.attach.uuid, uuid, CS_UUID_LEN);
    a.u.attach.total_mem = o.total_mem;
    send_or_die(fd, &a);
}

static void acquire(int fd)
{
    struct cs_msg a = {.type = CS_MSG_ACQUIRE};
    send_or_die(fd, &a);
}

static void release(int fd, uint64_t lease, uint32_t reason)
{
    struct cs_msg r = {.type = CS_MSG_RELEASE};
    r.u.release.reason = reason;
    r.u.release.lease_id = lease;
    send_or_die(fd, &r);
}

/* Prints a daemon message the attack ignores (or notes); false when the
 * connection is over (ERROR or closed). */
static bool note(int conn, int rc, const struct cs_msg *m)
{
    if (rc == 0) {
        say("closed conn=%d", conn);
        return false;
    }
    if (rc < 0)
        return rc == -EAGAIN;
    switch (m->type) {
    case CS_MSG_ERROR:
        say("refused conn=%d text=%s", conn, m->u.error.text);
        return false;
    case CS_MSG_REVOKE:
        say("revoke-ignored conn=%d lease=%" PRIu64 " reason=%u", conn, m->u.revoke.lease_id,
            m->u.revoke.reason);
        break;
    case CS_MSG_EVICT:
        say("evict-ignored conn=%d request=%" PRIu64 " bytes=%" PRIu64 " prepare=%d", conn,
            m->u.evict.request_id, m->u.evict.bytes, !!(m->u.evict.flags & CS_EVICT_PREPARE));
        break;
    case CS_MSG_PREFETCH:
        say("prefetch-ignored conn=%d request=%" PRIu64, conn, m->u.prefetch.request_id);
        break;
    case CS_MSG_GRANT:
        say("grant conn=%d lease=%" PRIu64 " t_ns=%" PRIu64, conn, m->u.grant.lease_id,
            cs_now_ns());
        break;
    default:
        say("message conn=%d type=%s", conn, cs_msg_name(m->type));
        break;
    }
    return true;
}

/* ---- hold, silent ---------------------------------------------------------------------- */

/* One registered connection with the GPU on slot 0; exits if refused. */
static int join_gpu(void)
{
    need_gpu();
    int fd = connect_hello(0);
    if (fd < 0)
        die(1, "not registered");
    attach(fd, 0, o.uuid);
    say("attached conn=0 slot=0");
    return fd;
}

static void wait_go_file(int fd)
{
    struct cs_msg m;
    while (o.go_file && access(o.go_file, F_OK) != 0 && !expired())
        if (!note(0, recv_within(fd, &m, 10), &m))
            die(1, "connection lost before the go file");
}

static int cmd_hold(void)
{
    int fd = join_gpu();
    wait_go_file(fd);
    uint64_t grants = 0, revokes = 0, next = 0;
    bool alive = true;
    while (alive && !expired()) {
        if (cs_now_ns() >= next) {
            acquire(fd);
            next = cs_now_ns() + o.period_ms * 1000000ull;
        }
        struct cs_msg m;
        int rc = recv_within(fd, &m, o.period_ms);
        grants += rc == 1 && m.type == CS_MSG_GRANT;
        revokes += rc == 1 && m.type == CS_MSG_REVOKE;
        alive = note(0, rc, &m);
    }
    say("done mode=hold grants=%" PRIu64 " revokes_ignored=%" PRIu64 " connected=%d", grants,
        revokes, alive);
    return 0;
}

/* ---- borrow: hoard the node's pinned pool --------------------------------------------- */

/* BORROWs `count` big pieces and waits for the LEND (*r, its descriptors in
 * fds, *n of them; kept open); 1, or what ended the wait. */
static int borrow_big(int fd, uint64_t id, uint32_t count, struct cs_msg *r, int *fds, int *n)
{
    struct cs_msg m = {.type = CS_MSG_BORROW};
    m.u.borrow = (struct cs_msg_borrow){0, CS_PIECE_BIG, id, count, 0};
    send_or_die(fd, &m);
    int rc = -EAGAIN;
    *n = 0;
    while (rc == -EAGAIN && !expired()) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        const char *why = NULL;
        rc = cs_recv_fds(fd, r, &why, fds, CS_LEND_MAX, n);
        if (rc == 1 && r->type != CS_MSG_LEND)
            rc = -EAGAIN; /* something else: keep waiting for the LEND */
    }
    return rc;
}

static int cmd_borrow(void)
{
    int fd = join_gpu();
    uint64_t lent = 0, pieces = 0, id = 1;
    for (int empty = 0; empty < 3 && !expired();) {
        struct cs_msg r;
        int fds[CS_LEND_MAX], n;
        if (borrow_big(fd, id++, CS_LEND_MAX, &r, fds, &n) != 1)
            break;
        lent += (uint64_t)n * r.u.lend.piece_size; /* the descriptors stay open: hoarded */
        pieces += (uint64_t)n;
        empty = n ? 0 : empty + 1;
    }
    say("hoarded lent_bytes=%" PRIu64 " pieces=%" PRIu64 " total_mem=%" PRIu64, lent, pieces,
        o.total_mem);
    while (!expired()) /* holding them, connected, until the end */
        sleep_ms(50);
    say("done mode=borrow lent_bytes=%" PRIu64 " pieces=%" PRIu64, lent, pieces);
    return 0;
}

/* join_gpu(), then USAGE: --resident bytes resident, all of it swappable. */
static int join_with_usage(void)
{
    int fd = join_gpu();
    struct cs_msg u = {.type = CS_MSG_USAGE};
    u.u.usage.resident = o.resident;
    u.u.usage.footprint = o.resident;
    send_or_die(fd, &u);
    return fd;
}

/* ---- linger: a process that outlives its connection ------------------------------------- */

static int cmd_linger(void)
{
    int fd = join_with_usage();
    struct cs_msg r;
    int fds[CS_LEND_MAX], n = 0;
    if (!o.no_borrow && borrow_big(fd, 1, 1, &r, fds, &n) != 1)
        die(1, "no LEND");
    close(fd);
    say("left resident=%" PRIu64 " pieces=%d", o.resident, n);
    sleep_ms(o.hold_ms);
    say("done mode=linger");
    return 0;
}

static int cmd_silent(void)
{
    int fd = join_with_usage();
    say("usage conn=0 resident=%" PRIu64 " swappable=%" PRIu64, o.resident, o.resident);
    uint64_t evicts = 0;
    bool alive = true;
    while (alive && !expired()) {
        struct cs_msg m;
        int rc = recv_within(fd, &m, 100);
        evicts += rc == 1 && (m.type == CS_MSG_EVICT || m.type == CS_MSG_PREFETCH);
        alive = note(0, rc, &m);
    }
    say("done mode=silent ignored=%" PRIu64 " connected=%d", evicts, alive);
    return 0;
}

/* ---- burst ----------------------------------------------------------------------------- */

/* Waits for the GRANT of one ACQUIRE (until the next period at most).
 * Returns its lease id, 0 if none came. */
static uint64_t await_grant(int fd, uint64_t until_ns)
{
    while (!expired() && cs_now_ns() < until_ns) {
        struct cs_msg m;
        int rc = recv_within(fd, &m, (until_ns - cs_now_ns()) / 1000000 + 1);
        if (rc == 1 && m.type == CS_MSG_GRANT)
            return m.u.grant.lease_id;
        if (!note(0, rc, &m))
            die(1, "connection lost");
    }
    return 0;
}

/* Holds the lease hold_ms; a REVOKE meanwhile is answered at once.
 * Returns the ns held. */
static uint64_t hold_briefly(int fd, uint64_t lease)
{
    uint64_t t0 = cs_now_ns(), until = t0 + o.hold_ms * 1000000ull;
    uint32_t reason = CS_RELEASE_IDLE;
    while (!expired() && cs_now_ns() < until) {
        struct cs_msg m;
        int rc = recv_within(fd, &m, (until - cs_now_ns()) / 1000000 + 1);
        if (rc == 1 && m.type == CS_MSG_REVOKE) {
            reason = CS_RELEASE_REVOKED;
            break;
        }
        if (!note(0, rc, &m))
            die(1, "connection lost");
    }
    release(fd, lease, reason);
    return cs_now_ns() - t0;
}

static int cmd_burst(void)
{
    int fd = join_gpu();
    uint64_t bursts = 0, grants = 0, held = 0, period = o.period_ms * 1000000ull;
    for (uint64_t next = cs_now_ns(); !expired(); next += period) {
        acquire(fd);
        bursts++;
        uint64_t lease = await_grant(fd, next + period);
        if (lease) {
            grants++;
            held += hold_briefly(fd, lease);
        }
        while (!expired() && cs_now_ns() < next + period) {
            struct cs_msg m;
            if (!note(0, recv_within(fd, &m, (next + period - cs_now_ns()) / 1000000 + 1), &m))
                die(1, "connection lost");
        }
    }
    say("done mode=burst bursts=%" PRIu64 " grants=%" PRIu64 " held_ms=%.1f", bursts, grants,
        (double)held / 1e6);
    return 0;
}

/* ---- watching many connections ----------------------------------------------------------- */

/* Handles what came on connection idx (rc as recv_within's); false closes it. */
typedef bool (*conn_fn)(int idx, int rc, const struct cs_msg *m);

/* One poll over the open connections (fd < 0: closed), at most ms. */
static void poll_conns(int *fds, struct pollfd *p, size_t n, int ms, conn_fn fn)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (struct pollfd){.fd = fds[i], .events = POLLIN};
    if (poll(p, (nfds_t)n, ms) <= 0)
        return;
    for (size_t i = 0; i < n; i++) {
        if (fds[i] < 0 || !p[i].revents)
            continue;
        struct cs_msg m;
        const char *why = NULL;
        int rc = cs_recv(fds[i], &m, &why);
        if (rc == -EPROTO)
            say("undecodable conn=%zu why=%s", i, why ? why : "?");
        if (rc == -EPROTO || !fn((int)i, rc, &m)) {
            close(fds[i]);
            fds[i] = -1;
        }
    }
}

/* ---- attach ---------------------------------------------------------------------------- */

#define ATK_MAX_KEPT 256

static uint64_t rng_state;

static uint64_t rng(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Connections that stay open after the ATTACHes (full ones included). */
static int kept[ATK_MAX_KEPT];
static size_t nkept;

static void keep_open(int fd)
{
    if (nkept < ATK_MAX_KEPT)
        kept[nkept++] = fd;
    else
        close(fd);
}

/* A connection filling its slots with random UUIDs. */
struct lane {
    int fd; /* -1: none */
    uint32_t slots;
};

/* One ATTACH of a random UUID; waits ATK_ATTACH_MS for an ERROR. True if
 * it was refused (the connection is then closed). */
static bool attach_random(struct lane *l, int idx)
{
    unsigned char u[CS_UUID_LEN];
    uint64_t a = rng(), b = rng();
    memcpy(u, &a, 8);
    memcpy(u + 8, &b, 8);
    char text[CS_UUID_STR_LEN];
    cs_uuid_format(u, text);
    attach(l->fd, l->slots++, u);
    struct cs_msg m;
    int rc = recv_within(l->fd, &m, ATK_ATTACH_MS);
    if (rc == -EAGAIN || (rc == 1 && m.type != CS_MSG_ERROR)) {
        say("attach conn=%d uuid=%s result=accepted", idx, text);
        return false;
    }
    if (rc == 1)
        say("attach conn=%d uuid=%s result=refused text=%s", idx, text, m.u.error.text);
    else
        say("attach conn=%d uuid=%s result=closed", idx, text);
    close(l->fd);
    l->fd = -1;
    return true;
}

static int cmd_attach(void)
{
    if (o.conns < 1 || o.conns > 64)
        die(2, "--conns must be 1..64 for attach");
    rng_state = o.seed;
    struct lane lanes[64];
    for (uint64_t i = 0; i < o.conns; i++)
        lanes[i] = (struct lane){.fd = -1};
    uint64_t refused = 0, accepted = 0;
    for (uint64_t i = 0; i < o.count && !expired(); i++) {
        struct lane *l = &lanes[i % o.conns];
        if (l->fd >= 0 && l->slots >= CS_MAX_DEVICES) {
            keep_open(l->fd); /* full: a new connection takes the next ones */
            l->fd = -1;
        }
        if (l->fd < 0 && (*l = (struct lane){.fd = connect_hello((int)(i % o.conns))}).fd < 0)
            continue;
        if (attach_random(l, (int)(i % o.conns)))
            refused++;
        else
            accepted++;
    }
    for (uint64_t i = 0; i < o.conns; i++)
        if (lanes[i].fd >= 0)
            keep_open(lanes[i].fd);
    say("attached count=%" PRIu64 " accepted=%" PRIu64 " refused=%" PRIu64 " open=%zu", o.count,
        accepted, refused, nkept);
    struct pollfd p[ATK_MAX_KEPT];
    while (!expired())
        poll_conns(kept, p, nkept, wait_ms(100), note);
    say("done mode=attach count=%" PRIu64 " accepted=%" PRIu64 " refused=%" PRIu64, o.count,
        accepted, refused);
    return 0;
}

/* ---- flood ----------------------------------------------------------------------------- */

static struct {
    uint64_t opened, failed, refused, refused_other, closed_silent, shown, shown_other;
} fl;

static void raise_nofile(uint64_t conns)
{
    struct rlimit r;
    rlim_t need = (rlim_t)conns + 64;
    if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= need)
        return;
    r.rlim_cur = r.rlim_max != RLIM_INFINITY && r.rlim_max < need ? r.rlim_max : need;
    if (setrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur < need)
        say("fd-limit nofile=%llu (fewer than %" PRIu64 " connections possible)",
            (unsigned long long)r.rlim_cur, conns);
}

/* What a connection that never says HELLO gets: an ERROR, or a close. */
static bool flood_msg(int idx, int rc, const struct cs_msg *m)
{
    if (rc == -EAGAIN)
        return true;
    if (rc == 1 && m->type != CS_MSG_ERROR) {
        say("message conn=%d type=%s", idx, cs_msg_name(m->type));
        return true;
    }
    if (rc != 1) {
        fl.closed_silent++;
        return false;
    }
    bool ok = strncmp(m->u.error.text, "refused:", 8) == 0;
    fl.refused += ok;
    fl.refused_other += !ok;
    if ((ok ? fl.shown++ : fl.shown_other++) < ATK_SHOWN)
        say("refused conn=%d text=%s", idx, m->u.error.text);
    return false;
}

/* Opens every closed connection of the flood. */
static void flood_open(int *fds, size_t n)
{
    for (size_t i = 0; i < n && !expired(); i++) {
        if (fds[i] >= 0)
            continue;
        int fd = open_conn(100); /* a daemon that stops accepting: move on */
        if (fd >= 0) {
            fds[i] = fd;
            fl.opened++;
        } else if (fl.failed++ == 0) {
            say("connect-failed conn=%zu err=%s", i, strerror(-fd));
        }
    }
}

static int cmd_flood(void)
{
    if (o.conns < 1 || o.conns > ATK_MAX_CONNS)
        die(2, "--conns must be 1..%d", ATK_MAX_CONNS);
    raise_nofile(o.conns);
    int *fds = malloc(o.conns * sizeof *fds);
    struct pollfd *p = malloc(o.conns * sizeof *p);
    if (!fds || !p)
        die(1, "out of memory");
    for (size_t i = 0; i < o.conns; i++)
        fds[i] = -1;
    flood_open(fds, o.conns);
    say("flooded opened=%" PRIu64 " connect_failed=%" PRIu64, fl.opened, fl.failed);
    uint64_t next = cs_now_ns() + o.reopen_ms * 1000000ull;
    while (!expired()) {
        poll_conns(fds, p, o.conns, wait_ms(50), flood_msg);
        if (o.reopen_ms && cs_now_ns() >= next) {
            flood_open(fds, o.conns);
            next = cs_now_ns() + o.reopen_ms * 1000000ull;
        }
    }
    poll_conns(fds, p, o.conns, 0, flood_msg); /* what came in the last moment */
    size_t open_now = 0;
    for (size_t i = 0; i < o.conns; i++)
        if (fds[i] >= 0) {
            open_now++;
            close(fds[i]);
        }
    free(fds);
    free(p);
    say("done mode=flood opened=%" PRIu64 " connect_failed=%" PRIu64 " refused=%" PRIu64
        " refused_other=%" PRIu64 " closed_silent=%" PRIu64 " open_at_end=%zu",
        fl.opened, fl.failed, fl.refused, fl.refused_other, fl.closed_silent, open_now);
    return 0;
}

/* ---- options --------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr,
            "usage: cs_attack uuid | hold | burst | silent | attach | flood | borrow | linger "
            "[options]\n"
            "  --socket PATH  --seconds S  --uuid GPU-...  --total-mem SIZE  --name NAME\n"
            "  --priority high|normal|low  --weight W  --go-file F  (hold, burst)\n"
            "  --period-ms N  --hold-ms H  (burst; --period-ms: hold's ACQUIRE period)\n"
            "  --resident SIZE  (silent, linger)  --hold-ms H  --no-borrow  (linger: after leaving)\n"
            "  --count N  --conns C  --seed S  (attach)\n"
            "  --conns N  --reopen-ms P  (flood)\n");
    exit(2);
}

static uint64_t num(const char *s, uint64_t lo, uint64_t hi)
{
    uint64_t v;
    if (cs_parse_u64(s, lo, hi, &v) < 0)
        die(2, "not a number in %" PRIu64 "..%" PRIu64 ": %s", lo, hi, s);
    return v;
}

static uint64_t size(const char *s)
{
    uint64_t v;
    if (cs_parse_size(s, &v) < 0)
        die(2, "not a size: %s", s);
    return v;
}

static void parse(int argc, char **argv)
{
    static const struct option lo[] = {
        {"socket", 1, 0, 'S'},   {"seconds", 1, 0, 's'}, {"uuid", 1, 0, 'u'},
        {"total-mem", 1, 0, 'm'}, {"name", 1, 0, 'n'},   {"priority", 1, 0, 'p'},
        {"weight", 1, 0, 'w'},   {"go-file", 1, 0, 'g'}, {"period-ms", 1, 0, 'P'},
        {"hold-ms", 1, 0, 'H'},  {"resident", 1, 0, 'r'}, {"count", 1, 0, 'c'},
        {"conns", 1, 0, 'C'},    {"seed", 1, 0, 'e'},    {"reopen-ms", 1, 0, 'R'},
        {"no-borrow", 0, 0, 'B'}, {0, 0, 0, 0}};
    int c, prio;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'S': o.sock = optarg; break;
        case 's': o.seconds = num(optarg, 1, 3600); break;
        case 'u':
            if (cs_uuid_parse(optarg, o.uuid) < 0)
                die(2, "not a GPU UUID: %s", optarg);
            o.have_uuid = true;
            break;
        case 'm': o.total_mem = size(optarg); break;
        case 'n': o.name = optarg; break;
        case 'p':
            if ((prio = cs_priority_parse(optarg)) < 0)
                die(2, "not a priority: %s", optarg);
            o.priority = (uint32_t)prio;
            o.priority_set = true;
            break;
        case 'w': o.weight = (uint32_t)num(optarg, 1, CS_WEIGHT_MAX); break;
        case 'g': o.go_file = optarg; break;
        case 'P': o.period_ms = num(optarg, 1, 3600000); break;
        case 'H': o.hold_ms = num(optarg, 0, 3600000); break;
        case 'r': o.resident = size(optarg); break;
        case 'c': o.count = num(optarg, 1, 4096); break;
        case 'C': o.conns = num(optarg, 1, ATK_MAX_CONNS); break;
        case 'e': o.seed = num(optarg, 0, UINT64_MAX); break;
        case 'R': o.reopen_ms = num(optarg, 0, 3600000); break;
        case 'B': o.no_borrow = true; break;
        default: usage();
        }
    }
    if (optind != argc - 1)
        usage();
    o.mode = argv[optind];
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    static char path[256];
    if (!o.sock) {
        const char *env = getenv("CUSHARE_SOCKET");
        if (env && *env)
            o.sock = env;
        else if (cs_default_socket_path(path, sizeof path) == 0)
            o.sock = path;
        else
            die(2, "no socket path");
    }
    static char name[CS_NAME_LEN];
    if (!o.name) {
        snprintf(name, sizeof name, "cs_attack-%s", o.mode);
        o.name = name;
    }
    deadline_ns = cs_now_ns() + o.seconds * 1000000000ull;
    if (!strcmp(o.mode, "uuid")) {
        char text[CS_UUID_STR_LEN];
        driver_gpu(o.uuid, &o.total_mem);
        cs_uuid_format(o.uuid, text);
        printf("uuid=%s total_mem=%" PRIu64 "\n", text, o.total_mem);
        return 0;
    }
    if (!o.conns)
        o.conns = !strcmp(o.mode, "flood") ? 1040 : 4;
    if (!o.priority_set && strcmp(o.mode, "hold") && strcmp(o.mode, "burst"))
        o.priority = CS_PRIO_NORMAL;
    if (!strcmp(o.mode, "hold"))
        return cmd_hold();
    if (!strcmp(o.mode, "burst"))
        return cmd_burst();
    if (!strcmp(o.mode, "silent"))
        return cmd_silent();
    if (!strcmp(o.mode, "attach"))
        return cmd_attach();
    if (!strcmp(o.mode, "flood"))
        return cmd_flood();
    if (!strcmp(o.mode, "borrow"))
        return cmd_borrow();
    if (!strcmp(o.mode, "linger"))
        return cmd_linger();
    usage();
    return 2;
}
