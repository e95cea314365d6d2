/* client.c: the connection to cushared (see client.h).
 *
 * Threading: `fd` belongs to the I/O thread (and to cs_client_start before
 * that thread exists). Other threads send through `send_fd`, which is only
 * published, under `mu`, once a connection has finished its handshake
 * (HELLO, WELCOME, one ATTACH per device), so a daemon never sees an
 * ACQUIRE before it knows who is asking. Lock order: locks.h (a device's
 * mu, then mu).
 */
#include "hook/client.h"
#include "hook/config.h"
#include "hook/device.h"
#include "hook/mem.h"
#include "hook/tsg.h"
#include "common/fsafe.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct {
    pthread_mutex_t mu;   /* guards send_fd, gen, lost_ns */
    int fd;               /* I/O thread's own connection, -1 if none */
    int send_fd;          /* published copy of fd for senders, -1 if none */
    uint64_t gen;         /* connection generation */
    uint64_t lost_ns;     /* when the last connection dropped */
    uint64_t client_id;   /* I/O thread only */
    _Atomic uint32_t idle_ms;
    bool ever_connected;  /* I/O thread only */
    bool tsg;             /* I/O thread only: the daemon took CS_HELLO_TSG */
    uint32_t caps;        /* mu: the capabilities the daemon of send_fd took */
    bool tsg_sent;        /* I/O thread only: tsg_last went out on this connection */
    char untrusted[256];  /* I/O thread only: why the socket is not trusted, "" if it is */
    struct cs_msg_tsg_state tsg_last;
    uint64_t next_try_ns; /* I/O thread only: no connection attempt before this */
    uint32_t refuse_ms;   /* I/O thread only: pause after the next refusal, 0 = none yet */
    char refused[CS_TEXT_LEN]; /* mu: why the daemon refused us last, "" = it did not */
    char refused_logged[CS_TEXT_LEN]; /* I/O thread only: the refusal last logged */
} cl = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .fd = -1,
    .send_fd = -1,
};

static pthread_once_t start_once = PTHREAD_ONCE_INIT;

/* What the layer above does with the connection's events: written once by
 * the constructor (cs_client_set_ops), before the I/O thread exists. */
static const struct cs_client_ops *ops;

void cs_client_set_ops(const struct cs_client_ops *o)
{
    ops = o;
}

/* Outstanding ROOM requests, answered by the I/O thread. Guarded by
 * room_mu; a handful at most (one per thread allocating or restoring). */
#define ROOM_MAX 32
static pthread_mutex_t room_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t room_cv = PTHREAD_COND_INITIALIZER;
static struct {
    uint64_t id;   /* 0 = free slot */
    bool done;
    int32_t status;
} room[ROOM_MAX];
static uint64_t room_next_id = 1;

int cs_client_send_cap(uint32_t cap, const struct cs_msg *m)
{
    pthread_mutex_lock(&cl.mu);
    int rc = cl.send_fd >= 0 && (cl.caps & cap) == cap ? cs_send(cl.send_fd, m) : -ENOTCONN;
    pthread_mutex_unlock(&cl.mu);
    if (rc < 0 && rc != -ENOTCONN)
        cs_debug("send %s: %s", cs_msg_name(m->type), strerror(-rc));
    return rc < 0 ? -1 : 0;
}

int cs_client_send(const struct cs_msg *m)
{
    return cs_client_send_cap(0, m);
}

bool cs_client_is_connected(void)
{
    pthread_mutex_lock(&cl.mu);
    bool c = cl.send_fd >= 0;
    pthread_mutex_unlock(&cl.mu);
    return c;
}

uint64_t cs_client_generation(void)
{
    pthread_mutex_lock(&cl.mu);
    uint64_t g = cl.gen;
    pthread_mutex_unlock(&cl.mu);
    return g;
}

uint64_t cs_client_lost_ns(void)
{
    pthread_mutex_lock(&cl.mu);
    uint64_t t = cl.lost_ns;
    pthread_mutex_unlock(&cl.mu);
    return t;
}

uint32_t cs_client_idle_ms(void)
{
    return atomic_load_explicit(&cl.idle_ms, memory_order_relaxed);
}

bool cs_client_refused(char *why, size_t cap)
{
    pthread_mutex_lock(&cl.mu);
    bool r = cl.refused[0] != '\0';
    if (why && cap)
        cs_strlcpy(why, cl.refused, cap);
    pthread_mutex_unlock(&cl.mu);
    return r;
}

/* The pause after a refusal: 1 s, doubling to 30 s while refusals go on. A
 * refused client must not knock again at once: that was ~6500 connections
 * a second, and as many log lines, for a GPU the daemon does not know. */
#define REFUSE_FIRST_MS 1000u
#define REFUSE_MAX_MS 30000u

/* The daemon refused this process (an ERROR that is not a protocol error:
 * a cap, a GPU it does not know). Logged once per reason, as an error;
 * the next attempt waits for the growing pause. I/O thread (or the
 * starting thread before it exists). */
static void note_refusal(const char *text)
{
    if (strcmp(text, cl.refused_logged) != 0) {
        cs_error("cushared refused this process: %s", text);
        cs_strlcpy(cl.refused_logged, text, sizeof cl.refused_logged);
    }
    pthread_mutex_lock(&cl.mu);
    cs_strlcpy(cl.refused, text, sizeof cl.refused);
    pthread_mutex_unlock(&cl.mu);
    cl.refuse_ms = cl.refuse_ms ? cl.refuse_ms * 2 : REFUSE_FIRST_MS;
    if (cl.refuse_ms > REFUSE_MAX_MS)
        cl.refuse_ms = REFUSE_MAX_MS;
    cl.next_try_ns = cs_now_ns() + (uint64_t)cl.refuse_ms * 1000000ull;
    cs_debug("next connection attempt in %u ms", cl.refuse_ms);
}

/* Waits up to timeout_ms for one record on fd, taking the descriptors it
 * carries into fds (up to CS_LEND_MAX; *nfds of them, NULL: none may come).
 * 1, 0 (timeout) or -1. */
static int recv_fds_timeout(int fd, struct cs_msg *m, int timeout_ms, int *fds, int *nfds)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r, none;
    do
        r = poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    if (r <= 0)
        return r;
    const char *why = "";
    int spare[1];
    r = fds ? cs_recv_fds(fd, m, &why, fds, CS_LEND_MAX, nfds)
            : cs_recv_fds(fd, m, &why, spare, 0, &none);
    if (r == -EPROTO)
        cs_warn("malformed message from the scheduler: %s", why);
    return r == 1 ? 1 : -1;
}

static int recv_timeout(int fd, struct cs_msg *m, int timeout_ms)
{
    return recv_fds_timeout(fd, m, timeout_ms, NULL, NULL);
}

/* ---- TERMS: what the node granted (docs/protocol.md, TERMS) ---------------- */

/* The last terms warned about: a reconnect to the same daemon, or to one
 * that grants the same, does not warn again. I/O thread (or the starting
 * thread before it exists). */
static struct cs_msg_terms terms_warned;
static bool terms_did_warn;

static void terms_warn(const struct cs_msg_terms *t)
{
    if (!t->flags || (terms_did_warn && memcmp(t, &terms_warned, sizeof *t) == 0))
        return;
    terms_warned = *t;
    terms_did_warn = true;
    char got[48] = "", asked[40] = "", a[24], b[24];
    if (t->flags & CS_TERMS_CUT_MEM) {
        snprintf(got, sizeof got, ", memory limit %s", cs_format_size(t->mem_limit, a, sizeof a));
        snprintf(asked, sizeof asked, "/%s",
                 cs_cfg.mem_limit ? cs_format_size(cs_cfg.mem_limit, b, sizeof b) : "no limit");
    }
    cs_warn("cushared: running at priority %s, weight %u%s instead of %s/%u%s: %s",
            cs_priority_name((int)t->priority), t->weight, got, cs_priority_name(cs_cfg.priority),
            cs_cfg.weight, asked, t->text);
}

/* After WELCOME: a daemon that took CS_HELLO_TERMS sends TERMS at once; its
 * memory limit becomes the quota (mem.c). A daemon without it grants no
 * limit of its own. 0, or -1 when TERMS does not come. */
static int receive_terms(int fd, uint32_t caps)
{
    if (!(caps & CS_HELLO_TERMS)) {
        cs_mem_set_granted(0);
        return 0;
    }
    struct cs_msg r;
    if (recv_timeout(fd, &r, 2000) != 1 || r.type != CS_MSG_TERMS) {
        cs_warn("the scheduler sent no TERMS after WELCOME");
        return -1;
    }
    cs_mem_set_granted(r.u.terms.mem_limit);
    terms_warn(&r.u.terms);
    return 0;
}

/* After WELCOME and TERMS, before any ATTACH: what HELLO has no room for,
 * to a daemon that took CS_HELLO_LABELS. 0, or -1. */
static int send_labels(int fd, uint32_t caps)
{
    if (!(caps & CS_HELLO_LABELS))
        return 0;
    struct cs_msg m = {.type = CS_MSG_LABELS};
    cs_strlcpy(m.u.labels.container, cs_cfg.container, sizeof m.u.labels.container);
    return cs_send(fd, &m) < 0 ? -1 : 0;
}

#define HELLO_REFUSED (-2)
#define HELLO_DENIED (-3)

/* 0, -1 (no answer), HELLO_REFUSED (a protocol error or closed: with caps,
 * maybe an older daemon that does not know them; quiet then), or
 * HELLO_DENIED (the daemon refused this process: note_refusal). */
static int hello(int fd, uint32_t caps)
{
    struct cs_msg m = {.type = CS_MSG_HELLO};
    struct cs_msg_hello *h = &m.u.hello;
    h->flags = (cl.ever_connected ? CS_HELLO_RECONNECT : 0) | caps;
    h->priority = (uint32_t)cs_cfg.priority;
    h->weight = cs_cfg.weight;
    h->proto_min = CS_PROTO_VERSION;
    h->mem_limit = cs_cfg.mem_limit;
    h->prev_client_id = cl.client_id;
    cs_strlcpy(h->name, cs_cfg.name, sizeof h->name);
    cs_strlcpy(h->pod, cs_cfg.pod, sizeof h->pod);
    cs_strlcpy(h->ns, cs_cfg.ns, sizeof h->ns);
    if (cs_send(fd, &m) < 0)
        return -1;
    struct cs_msg r;
    int got = recv_timeout(fd, &r, 2000);
    if (got == 0)
        return -1;
    if (got < 0)
        return HELLO_REFUSED;
    if (r.type == CS_MSG_ERROR && (r.u.error.code != EPROTO || !caps)) {
        note_refusal(r.u.error.text);
        return HELLO_DENIED;
    }
    if (r.type == CS_MSG_ERROR) {
        cs_debug("the scheduler refused HELLO with capabilities 0x%x: %s", caps,
                 r.u.error.text);
        return HELLO_REFUSED;
    }
    if (r.type != CS_MSG_WELCOME)
        return -1;
    cl.client_id = r.u.welcome.client_id;
    atomic_store_explicit(&cl.idle_ms, r.u.welcome.idle_ms, memory_order_relaxed);
    if (receive_terms(fd, caps) < 0)
        return -1;
    return send_labels(fd, caps);
}

/* One connection attempt with the full handshake. I/O thread (or the
 * starting thread before the I/O thread exists). */
static int connect_hello(uint32_t caps)
{
    int fd = cs_connect(cs_cfg.socket);
    if (fd < 0)
        return -1;
    int r = hello(fd, caps);
    if (r < 0) {
        close(fd);
        return r;
    }
    return fd;
}

/* The socket's directory is checked before each connection attempt
 * (lstat calls, no allocation): a daemon that another user planted, e.g.
 * in /tmp/cushare-<uid> created before ours, must neither schedule this job
 * nor learn about it. Said once per reason; no socket is no daemon. */
static bool socket_trusted(void)
{
    char err[sizeof cl.untrusted];
    if (cs_fs_check_socket(cs_cfg.socket, err, sizeof err) == 0) {
        cl.untrusted[0] = '\0';
        return true;
    }
    if (errno != ENOENT && strcmp(err, cl.untrusted) != 0) {
        cs_strlcpy(cl.untrusted, err, sizeof cl.untrusted);
        cs_error("not connecting to the scheduler: %s; %s", err,
                 cs_cfg.require_daemon ? "waiting until that is fixed (CUSHARE_REQUIRE_DAEMON)"
                                       : "running unmanaged");
    }
    return false;
}

static bool try_connect(void)
{
    if (!socket_trusted())
        return false;
    /* Every decoder rejects what it does not know, an older daemon the
     * CS_HELLO_TERMS, CS_HELLO_PIN, CS_HELLO_LC and CS_HELLO_TSG bits too
     * (docs/protocol.md, Versioning): on a refusal, say HELLO again with
     * fewer, as the client it then is. */
    static const uint32_t caps[] = {CS_HELLO_TSG | CS_HELLO_LC | CS_HELLO_PIN | CS_HELLO_TERMS |
                                        CS_HELLO_POOL,
                                    CS_HELLO_TSG | CS_HELLO_LC | CS_HELLO_PIN | CS_HELLO_TERMS,
                                    CS_HELLO_TSG | CS_HELLO_LC | CS_HELLO_PIN,
                                    CS_HELLO_TSG | CS_HELLO_LC, CS_HELLO_TSG, 0};
    size_t k = cs_cfg.pool ? 0 : 1;
    uint32_t took = 0; /* the capabilities of the HELLO that was taken */
    /* The newest bits first: CS_HELLO_GIVEBACK with the pool, then
     * CS_HELLO_RESTORED (each with CS_HELLO_LABELS when there is a label
     * to send: a daemon that knows the one knows the other), then
     * CS_HELLO_LABELS alone; a daemon that refuses those knows the rest of
     * caps[k]. */
    uint32_t labels = cs_cfg.container[0] ? CS_HELLO_LABELS : 0;
    int fd = HELLO_REFUSED;
    if (k == 0)
        fd = connect_hello(took = caps[k] | labels | CS_HELLO_RESTORED | CS_HELLO_GIVEBACK);
    if (fd == HELLO_REFUSED)
        fd = connect_hello(took = caps[k] | labels | CS_HELLO_RESTORED);
    if (fd == HELLO_REFUSED && labels)
        fd = connect_hello(took = caps[k] | labels);
    for (; k < sizeof caps / sizeof caps[0] && fd == HELLO_REFUSED; k++)
        fd = connect_hello(took = caps[k]);
    if (fd < 0)
        return false;
    pthread_mutex_lock(&cl.mu);
    cl.refused[0] = '\0'; /* accepted; an ATTACH may still be refused */
    pthread_mutex_unlock(&cl.mu);
    cl.tsg = (took & CS_HELLO_TSG) != 0;
    cl.tsg_sent = false;
    if (ops)
        ops->handshake(fd);
    pthread_mutex_lock(&cl.mu);
    cl.fd = fd;
    cl.send_fd = fd;
    cl.caps = took;
    cl.gen++;
    cl.lost_ns = 0;
    pthread_mutex_unlock(&cl.mu);
    if (ops)
        ops->connected();
    if (cl.ever_connected)
        cs_info("reconnected to the scheduler at %s", cs_cfg.socket);
    else
        cs_info("connected to the scheduler at %s (client %llu)", cs_cfg.socket,
                (unsigned long long)cl.client_id);
    cl.ever_connected = true;
    return true;
}

static void room_answer(uint64_t id, int32_t status)
{
    pthread_mutex_lock(&room_mu);
    for (int i = 0; i < ROOM_MAX; i++) {
        if (room[i].id && (id == 0 || room[i].id == id)) {
            room[i].done = true;
            room[i].status = status;
        }
    }
    pthread_cond_broadcast(&room_cv);
    pthread_mutex_unlock(&room_mu);
}

int cs_client_request_room(int slot, uint64_t bytes)
{
    return cs_client_request_room_flags(slot, bytes, 0);
}

int cs_client_request_room_flags(int slot, uint64_t bytes, uint32_t flags)
{
    pthread_mutex_lock(&room_mu);
    int i = 0;
    while (i < ROOM_MAX && room[i].id)
        i++;
    if (i == ROOM_MAX || bytes == 0) {
        pthread_mutex_unlock(&room_mu);
        return -1;
    }
    uint64_t id = room_next_id++;
    room[i].id = id;
    room[i].done = false;
    pthread_mutex_unlock(&room_mu);

    /* A holder blocked here is busy, not idle (the idle report would make
     * the daemon revoke the very lease the room is being made for). */
    cs_dev_host_begin(&cs_devs[slot]);
    uint64_t t0 = cs_now_ns();
    struct cs_msg m = {.type = CS_MSG_ROOM};
    m.u.room.slot = (uint32_t)slot;
    m.u.room.flags = flags;
    m.u.room.request_id = id;
    m.u.room.bytes = bytes;
    int rc = cs_client_send(&m);

    pthread_mutex_lock(&room_mu);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 60;
    while (rc == 0 && !room[i].done)
        if (pthread_cond_timedwait(&room_cv, &room_mu, &deadline) != 0)
            break;
    int32_t status = room[i].done ? room[i].status : -1;
    room[i].id = 0;
    pthread_mutex_unlock(&room_mu);
    cs_dev_host_end(&cs_devs[slot]);
    cs_debug("GPU %d: room for %llu bytes %s after %.1f ms", slot, (unsigned long long)bytes,
             rc == 0 && status == 0 ? "made" : "refused", (double)(cs_now_ns() - t0) / 1e6);
    return rc == 0 && status == 0 ? 0 : -1;
}

/* ---- pieces of the node's pool (BORROW, LEND, RETURN) ----------------------
 * One borrower at a time (lend.one, held across the round trip; taken by
 * the pinner under no lock and by the worker under a device's segs.mu:
 * locks.h); the I/O thread hands the LEND over under lend.mu. A LEND
 * nobody waits for any more (timed out, or the connection changed) is
 * given straight back. */
#define LEND_WAIT_MS 2000
static struct {
    pthread_mutex_t one;     /* one borrower at a time */
    pthread_mutex_t mu;      /* guards the rest */
    pthread_cond_t cv;
    uint64_t next_id;        /* request ids, mu */
    uint64_t want;           /* the request waited for, 0 = none */
    bool done;
    struct cs_msg_lend got;
    int fds[CS_LEND_MAX];
} lend = {
    .one = PTHREAD_MUTEX_INITIALIZER,
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .cv = PTHREAD_COND_INITIALIZER,
    .next_id = 1,
};

static void give_back_ids(const uint32_t *ids, uint32_t n)
{
    for (uint32_t at = 0; at < n; at += CS_LEND_MAX) {
        struct cs_msg m = {.type = CS_MSG_RETURN};
        uint32_t k = n - at < CS_LEND_MAX ? n - at : CS_LEND_MAX;
        m.u.ret.count = k;
        memcpy(m.u.ret.ids, ids + at, k * sizeof ids[0]);
        if (cs_client_send_cap(CS_HELLO_POOL, &m) < 0)
            return; /* gone: the daemon takes them back when this process exits */
    }
}

void cs_client_give_back(const uint32_t *ids, uint32_t n, uint64_t gen)
{
    if (n && gen == cs_client_generation())
        give_back_ids(ids, n);
}

/* I/O thread: a LEND arrived with fds (count checked by the caller). */
static void lend_arrived(const struct cs_msg_lend *l, const int *fds)
{
    pthread_mutex_lock(&lend.mu);
    bool taken = lend.want && lend.want == l->request_id && !lend.done;
    if (taken) {
        lend.got = *l;
        memcpy(lend.fds, fds, l->count * sizeof fds[0]);
        lend.done = true;
        pthread_cond_broadcast(&lend.cv);
    }
    pthread_mutex_unlock(&lend.mu);
    if (taken)
        return;
    for (uint32_t i = 0; i < l->count; i++)
        close(fds[i]);
    give_back_ids(l->ids, l->count);
}

uint32_t cs_client_borrow(int slot, uint32_t kind, uint32_t n, int *fds, uint32_t *ids,
                          uint64_t *size, uint64_t *gen)
{
    pthread_mutex_lock(&cl.mu);
    bool pool = cl.send_fd >= 0 && (cl.caps & CS_HELLO_POOL);
    uint64_t g = cl.gen;
    pthread_mutex_unlock(&cl.mu);
    if (!pool || !n)
        return 0;
    pthread_mutex_lock(&lend.one);
    pthread_mutex_lock(&lend.mu);
    uint64_t id = lend.next_id++;
    lend.want = id;
    lend.done = false;
    pthread_mutex_unlock(&lend.mu);
    struct cs_msg m = {.type = CS_MSG_BORROW};
    m.u.borrow = (struct cs_msg_borrow){(uint32_t)slot, kind, id, n < CS_LEND_MAX ? n : CS_LEND_MAX, 0};
    int rc = cs_client_send_cap(CS_HELLO_POOL, &m);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += LEND_WAIT_MS / 1000;
    pthread_mutex_lock(&lend.mu);
    while (rc == 0 && !lend.done)
        if (pthread_cond_timedwait(&lend.cv, &lend.mu, &deadline) != 0)
            break;
    uint32_t got = lend.done ? lend.got.count : 0;
    if (got) {
        memcpy(fds, lend.fds, got * sizeof fds[0]);
        memcpy(ids, lend.got.ids, got * sizeof ids[0]);
        *size = lend.got.piece_size;
        *gen = g;
    }
    lend.want = 0;
    pthread_mutex_unlock(&lend.mu);
    pthread_mutex_unlock(&lend.one);
    if (got && g != cs_client_generation()) { /* lent on a connection that is gone */
        for (uint32_t i = 0; i < got; i++)
            close(fds[i]);
        return 0;
    }
    return got;
}

/* refused: the daemon refused this process (already logged). */
static void disconnect(const char *why, bool refused)
{
    pthread_mutex_lock(&cl.mu);
    cl.send_fd = -1;
    cl.caps = 0;
    cl.lost_ns = cs_now_ns();
    pthread_mutex_unlock(&cl.mu);
    close(cl.fd);
    cl.fd = -1;
    if (ops)
        ops->disconnected();
    room_answer(0, -1); /* nobody will answer outstanding ROOM requests */
    if (!refused)
        cs_warn("lost the scheduler (%s): jobs holding the GPU keep running; reconnecting",
                why);
}

static void dispatch(const struct cs_msg *m, const int *fds, int nfds)
{
    if (m->type == CS_MSG_LEND && (uint32_t)nfds == m->u.lend.count &&
        (cl.caps & CS_HELLO_POOL)) {
        lend_arrived(&m->u.lend, fds);
        return;
    }
    if (nfds) { /* descriptors with a record that has none, or not as many */
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        cs_warn("%s from the scheduler with %d descriptors it does not account for",
                cs_msg_name(m->type), nfds);
        disconnect("protocol error", false);
        return;
    }
    switch (m->type) {
    case CS_MSG_ROOM_REPLY:
        room_answer(m->u.room_reply.request_id, m->u.room_reply.status);
        break;
    case CS_MSG_ERROR:
        if (m->u.error.code != EPROTO) { /* e.g. a GPU the daemon does not know */
            note_refusal(m->u.error.text);
            disconnect("refused", true);
            return;
        }
        cs_error("the scheduler closed this connection: %s", m->u.error.text);
        disconnect("error from the scheduler", false);
        return;
    default:
        if (!ops || !ops->message(m)) {
            cs_warn("unexpected %s from the scheduler", cs_msg_name(m->type));
            disconnect("protocol error", false);
            return;
        }
    }
    cl.refuse_ms = 0; /* served: a later refusal starts the pause afresh */
}

static void tick_devices(void)
{
    if (ops)
        ops->tick(cs_now_ns());
}

_Static_assert((int)CS_TSG_OFF == (int)CS_TSG_MECH_OFF &&
                   (int)CS_TSG_UNPROBED == (int)CS_TSG_MECH_UNPROBED &&
                   (int)CS_TSG_READY == (int)CS_TSG_MECH_READY &&
                   (int)CS_TSG_ACTIVE == (int)CS_TSG_MECH_ACTIVE &&
                   (int)CS_TSG_UNAVAILABLE == (int)CS_TSG_MECH_UNAVAILABLE,
               "TSG_STATE.state carries enum cs_tsg_state as it is");

/* The wire takes printable ASCII only, and the reason quotes the driver. */
static void copy_printable(char *dst, size_t cap, const char *src)
{
    size_t n = 0;
    for (; src[n] && n + 1 < cap; n++)
        dst[n] = src[n] >= 0x20 && src[n] <= 0x7e ? src[n] : '?';
    dst[n] = '\0';
}

static void tsg_snapshot(struct cs_msg_tsg_state *t)
{
    struct cs_tsg_info info;
    cs_tsg_get_info(&info);
    uint64_t requested;
    int status;
    cs_tsg_request_result(&requested, &status);
    memset(t, 0, sizeof *t);
    t->state = (uint32_t)info.state;
    t->status = status;
    t->requested_us = requested <= CS_TIMESLICE_MAX_US ? requested : CS_TIMESLICE_MAX_US;
    bool on = info.state != CS_TSG_OFF && info.state != CS_TSG_UNAVAILABLE;
    t->applied_us = on && info.target_us <= CS_TIMESLICE_MAX_US ? info.target_us : 0;
    t->groups = info.gr_groups;
    copy_printable(t->reason, sizeof t->reason, cs_tsg_reason());
}

/* TSG_STATE after the handshake and whenever the mechanism's state, the
 * request or its result changes; only to a daemon that took CS_HELLO_TSG
 * (an older one would close the connection on the unknown type). A few
 * loads per tick: the state changes inside libcuda's ioctls and on the
 * workers, neither of which may send. */
static void report_tsg(void)
{
    if (!cl.tsg || cl.fd < 0)
        return;
    if (cs_tsg_state() == CS_TSG_UNPROBED)
        for (int i = 0; i < CS_MAX_DEVICES; i++)
            if (atomic_load_explicit(&cs_devs[i].gate.subm, memory_order_relaxed) >> 32) {
                cs_tsg_work_without_groups();
                break;
            }
    struct cs_msg m = {.type = CS_MSG_TSG_STATE};
    tsg_snapshot(&m.u.tsg_state);
    if (cl.tsg_sent && memcmp(&m.u.tsg_state, &cl.tsg_last, sizeof cl.tsg_last) == 0)
        return;
    if (cs_client_send(&m) == 0) {
        cl.tsg_last = m.u.tsg_state;
        cl.tsg_sent = true;
    }
}

/* The longest pause between attempts to reach a daemon that is not there. */
#define RECONNECT_MAX_MS 200u

static void sleep_ms(uint32_t ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static void *io_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "cushare-io");
    uint32_t backoff = 25;
    for (;;) {
        uint32_t tick = ops ? ops->tick_interval_ms() : 100;
        if (cl.fd < 0) {
            uint64_t now = cs_now_ns();
            if (now >= cl.next_try_ns) {
                if (try_connect()) {
                    backoff = 25;
                    continue;
                }
                /* A refusal set its own, longer pause. Otherwise the pause
                 * stays short: a connect to a missing socket costs
                 * microseconds, while a restarted daemon keeps every GPU
                 * whose holder has not come back idle (its grace): a 2 s
                 * cap left the GPU idle 3.6-3.9 s after a restart. */
                if (cl.next_try_ns <= now)
                    cl.next_try_ns = now + (uint64_t)backoff * 1000000ull;
                backoff = backoff < RECONNECT_MAX_MS ? backoff * 2 : RECONNECT_MAX_MS;
            }
            tick_devices();
            sleep_ms(tick < backoff ? tick : backoff);
            continue;
        }
        report_tsg();
        struct cs_msg m;
        int fds[CS_LEND_MAX], nfds = 0;
        int r = recv_fds_timeout(cl.fd, &m, (int)tick, fds, &nfds);
        if (r == 1)
            dispatch(&m, fds, nfds);
        else if (r < 0)
            disconnect("connection closed", false);
        tick_devices();
    }
    return NULL;
}

static void start(void)
{
    if (cs_cfg.disabled)
        return;
    if (!try_connect()) {
        pthread_mutex_lock(&cl.mu);
        cl.lost_ns = cs_now_ns();
        bool refused = cl.refused[0] != '\0';
        pthread_mutex_unlock(&cl.mu);
        /* A refusal was logged with its reason: there is a scheduler. An
         * untrusted socket directory was logged by socket_trusted. */
        const char *what = refused ? "refused by cushared" : "no scheduler";
        if (!cl.untrusted[0] && cs_cfg.require_daemon)
            cs_warn("%s at %s: waiting for it before using the GPU (CUSHARE_REQUIRE_DAEMON)",
                    what, cs_cfg.socket);
        else if (!cl.untrusted[0])
            cs_warn("%s at %s: running unmanaged (will keep trying)", what, cs_cfg.socket);
    }
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, io_main, NULL) != 0)
        cs_error("cannot start the scheduler connection thread: running unmanaged");
    pthread_attr_destroy(&a);
}

void cs_client_start(void)
{
    pthread_once(&start_once, start);
}

void cs_client_reset_after_fork(void)
{
    /* The child has no I/O thread and must not share the parent's
     * connection (the daemon knows the parent's pid on it): start over. */
    if (cl.fd >= 0)
        close(cl.fd);
    pthread_mutex_init(&cl.mu, NULL);
    cl.fd = -1;
    cl.send_fd = -1;
    cl.gen++;
    cl.lost_ns = 0;
    cl.client_id = 0;
    cl.ever_connected = false;
    cl.tsg = false;
    cl.tsg_sent = false;
    cl.caps = 0;
    cl.next_try_ns = 0;
    cl.refuse_ms = 0;
    cl.refused[0] = cl.refused_logged[0] = cl.untrusted[0] = '\0';
    atomic_store(&cl.idle_ms, 0);
    start_once = PTHREAD_ONCE_INIT;
    pthread_mutex_init(&room_mu, NULL);
    pthread_cond_init(&room_cv, NULL);
    memset(room, 0, sizeof room);
    pthread_mutex_init(&lend.one, NULL);
    pthread_mutex_init(&lend.mu, NULL);
    pthread_cond_init(&lend.cv, NULL);
    lend.want = 0;
    lend.done = false;
}
