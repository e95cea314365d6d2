/* server.c: the listening socket, the event loop and connection I/O.
 * See server.h for the threading and lifetime rules. */
#include "sched/server.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "common/fsafe.h"
#include "common/log.h"
#include "common/util.h"
#include "sched/metrics.h"
#include "sched/overhead.h"

/* epoll user data: connections use their pointer; the fixed fds use these
 * small tags, which no heap pointer can equal. */
enum {
    TAG_LISTEN = 1,
    TAG_TIMER = 2,
    TAG_SIGNAL = 3,
    TAG_METRICS = 4,
    TAG_POOL = SD_TAG_POOL,
    TAG_METER = SD_TAG_METER
};

static uint64_t mono_clock(void *ctx)
{
    (void)ctx;
    return cs_now_ns();
}

uint64_t sd_server_now(const struct sd_server *s)
{
    return s->clock(s->clock_ctx);
}

/* ---- the listening socket -------------------------------------------------- */

/* Only one daemon per socket: an exclusive lock on "<socket>.lock" decides
 * between two starting at once (e.g. two cushare-run racing), and a probe
 * of the socket catches a live daemon that holds no lock. A socket file
 * nobody answers on is stale and replaced. */
static int claim_socket(struct sd_server *s)
{
    char dir[sizeof s->sock_path], lock[sizeof s->sock_path + 8], err[512];
    cs_fs_split(s->sock_path, dir, sizeof dir);
    /* Created (or found) ours and closed to others before anything is put
     * in it: the lock, the socket and the state file live here. */
    if (cs_fs_ensure_dir(dir, cs_fs_sock_dir_mode(), err, sizeof err) < 0) {
        cs_error("not using the socket directory: %s", err);
        return -1;
    }
    snprintf(lock, sizeof lock, "%s.lock", s->sock_path);
    /* flock works on a write-only descriptor; this open follows no link
     * and takes only a regular file of ours. */
    s->lockfd = cs_fs_open_append(lock, err, sizeof err);
    if (s->lockfd < 0) {
        cs_error("%s", err);
        return -1;
    }
    if (flock(s->lockfd, LOCK_EX | LOCK_NB) < 0) {
        cs_error("another cushared is running on %s (%s is locked)", s->sock_path, lock);
        return -1;
    }
    struct stat st;
    if (lstat(s->sock_path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            cs_error("%s exists and is not a socket; not touching it", s->sock_path);
            return -1;
        }
        int fd = cs_connect(s->sock_path);
        if (fd >= 0) {
            close(fd);
            cs_error("another daemon answers on %s; not starting", s->sock_path);
            return -1;
        }
        cs_info("replacing stale socket %s", s->sock_path);
        unlink(s->sock_path);
    }
    return 0;
}

static int open_listener(struct sd_server *s)
{
    if (claim_socket(s) < 0)
        return -1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    cs_strlcpy(sa.sun_path, s->sock_path, sizeof sa.sun_path);
    s->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        cs_error("cannot bind %s: %s", s->sock_path, strerror(errno));
        return -1;
    }
    s->have_socket = true;
    /* Any local user or pod may register GPU work; control changes are
     * checked against SO_PEERCRED, not against the socket's mode. */
    if (chmod(s->sock_path, 0666) < 0 || listen(s->lfd, 128) < 0) {
        cs_error("cannot listen on %s: %s", s->sock_path, strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- epoll helpers ----------------------------------------------------------- */

static int ep_add(struct sd_server *s, int fd, uint32_t events, uint64_t tag)
{
    struct epoll_event ev = {.events = events, .data.u64 = tag};
    return epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev);
}

static void conn_poll_out(struct sd_server *s, struct sd_conn *c, bool on)
{
    if (c->polling_out == on || c->fd < 0 || s->epfd < 0)
        return;
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0u), .data.ptr = c};
    if (epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
        c->polling_out = on;
}

/* ---- connections --------------------------------------------------------------- */

struct sd_conn *sd_conn_adopt(struct sd_server *s, int fd, uint32_t pid, uint32_t uid,
                              uint32_t gid)
{
    struct sd_conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return NULL;
    }
    c->fd = fd;
    c->id = ++s->next_conn_id;
    c->pid = pid;
    c->uid = uid;
    c->gid = gid;
    sd_access_grant_peer(&s->cfg, s->owner_uid, fd, uid, gid, &c->grant);
    if (s->epfd >= 0) {
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
            close(fd);
            free(c);
            return NULL;
        }
    }
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->nconns++;
    s->ctr.connections_total++;
    /* Accept order is deadline order: the oldest NEW connection is the
     * next to time out, so the timer needs only the head. */
    c->accepted_ns = sd_server_now(s);
    c->in_new = true;
    c->new_prev = s->new_tail;
    if (s->new_tail)
        s->new_tail->new_next = c;
    else
        s->new_head = c;
    s->new_tail = c;
    return c;
}

void sd_conn_greeted(struct sd_server *s, struct sd_conn *c)
{
    if (!c->in_new)
        return;
    if (c->new_prev)
        c->new_prev->new_next = c->new_next;
    else
        s->new_head = c->new_next;
    if (c->new_next)
        c->new_next->new_prev = c->new_prev;
    else
        s->new_tail = c->new_prev;
    c->new_next = c->new_prev = NULL;
    c->in_new = false;
}

struct sd_conn *sd_server_conn_by_fd(const struct sd_server *s, int fd)
{
    for (struct sd_conn *c = s->conns; c; c = c->next)
        if (c->fd == fd)
            return c;
    return NULL;
}

/* Records the peer sent that were never read make the kernel reset its end
 * of the socket at close (ECONNRESET), and it may then never see the ERROR
 * queued for it just before: a refused job took that for a daemon gone and
 * knocked again at once instead of backing off. Read them away first,
 * bounded, since a peer can keep writing. */
static void drain_input(int fd)
{
    uint8_t buf[CS_MSG_MAX + 1];
    for (int i = 0; i < 64; i++)
        if (recv(fd, buf, sizeof buf, MSG_DONTWAIT) <= 0)
            return;
}

static void outrec_free(struct sd_outrec *r)
{
    for (int i = 0; i < r->nfds; i++)
        close(r->fds[i]);
    free(r);
}

/* A departed client that borrowed nothing (the lender watches borrowers)
 * but left GPU memory: its process is watched until it exits, so that the
 * policy counts that memory until then (exitwatch.h). False when it cannot
 * be: its memory is then planned as free at once. */
static bool watch_exit(struct sd_server *s, const struct sd_conn *c, const struct sd_client *cl)
{
    bool resident = false;
    for (int i = 0; i < CS_MAX_DEVICES; i++)
        resident |= cl->slot[i] && cl->slot[i]->resident;
    if (!resident)
        return false;
    uint64_t tag;
    int fd = sd_exitwatch_add(&s->xw, cl->id, c->pid, sd_server_now(s) + SD_EXITWATCH_NS, &tag);
    if (fd < 0) {
        cs_debug("client %llu (pid %u): its exit cannot be watched: %s", (unsigned long long)cl->id,
                 c->pid, strerror(errno));
        return false;
    }
    if (sd_server_add_listener(s, fd, tag) < 0) {
        sd_exitwatch_event(&s->xw, tag); /* closes it */
        return false;
    }
    return true;
}

static void conn_free(struct sd_server *s, struct sd_conn *c)
{
    sd_conn_greeted(s, c); /* off the HELLO deadline list */
    if (c->client) {
        struct sd_client *cl = c->client;
        c->client = NULL;
        cs_info("client %llu (pid %u, %s) disconnected", (unsigned long long)cl->id, c->pid,
                cl->info.name[0] ? cl->info.name : "unnamed");
        /* May grant other clients, whose sends may mark them dead: the
         * caller's reap loop picks those up. */
        if (sd_lender_client_gone(s, c, cl->id) || watch_exit(s, c, cl))
            sd_policy_client_departing(&s->policy, cl, sd_server_now(s));
        sd_policy_client_remove(&s->policy, cl, sd_server_now(s));
    }
    while (c->qhead) {
        struct sd_outrec *r = c->qhead;
        c->qhead = r->next;
        outrec_free(r);
    }
    free(c->batch);
    sd_ep_conn_closed(s, c);
    if (c->fd >= 0) {
        drain_input(c->fd);
        close(c->fd); /* also removes it from the epoll set */
    }
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconns--;
    free(c);
}

static void conn_drop_slow(struct sd_server *s, struct sd_conn *c)
{
    s->ctr.dropped_slow++;
    cs_warn("connection %llu (pid %u) is not reading its messages; dropping it",
            (unsigned long long)c->id, c->pid);
    c->dead = true;
}

/* Sends queued records until the kernel pushes back. Returns -1 if the
 * peer is gone. */
static int conn_flush(struct sd_server *s, struct sd_conn *c)
{
    while (c->qhead && !c->dead) {
        struct sd_outrec *r = c->qhead;
        ssize_t w = r->nfds ? cs_send_record_fds(c->fd, r->data, r->len, r->fds, r->nfds)
                            : send(c->fd, r->data, r->len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        if (w < 0) {
            c->dead = true;
            return -1;
        }
        c->qhead = r->next;
        if (!c->qhead)
            c->qtail = NULL;
        c->qbytes -= r->len;
        outrec_free(r);
    }
    conn_poll_out(s, c, c->qhead != NULL);
    return 0;
}

static void conn_enqueue(struct sd_server *s, struct sd_conn *c, const uint8_t *buf, size_t n)
{
    struct sd_outrec *r = malloc(sizeof *r + n);
    if (!r) {
        c->dead = true;
        return;
    }
    r->next = NULL;
    r->len = n;
    r->nfds = 0;
    memcpy(r->data, buf, n);
    if (c->qtail)
        c->qtail->next = r;
    else
        c->qhead = r;
    c->qtail = r;
    c->qbytes += n;
    conn_poll_out(s, c, true);
}

void sd_conn_send(struct sd_server *s, struct sd_conn *c, const struct cs_msg *m, bool force)
{
    if (c->dead)
        return;
    uint8_t buf[CS_MSG_MAX];
    int n = cs_msg_encode(m, buf, sizeof buf);
    if (n < 0) {
        cs_error("internal: cannot encode message type %u", m->type);
        return;
    }
    if (!c->qhead) {
        for (;;) {
            ssize_t w = send(c->fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w == n)
                return;
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                break;
            c->dead = true; /* EPIPE, ECONNRESET: the peer is gone */
            return;
        }
    }
    if (!force && c->qbytes + (size_t)n > SD_OUTQ_BYTES) {
        conn_drop_slow(s, c);
        return;
    }
    conn_enqueue(s, c, buf, (size_t)n);
}

void sd_conn_send_fds(struct sd_server *s, struct sd_conn *c, const struct cs_msg *m,
                      const int *fds, int n)
{
    if (n <= 0) {
        sd_conn_send(s, c, m, false);
        return;
    }
    if (c->dead)
        return;
    uint8_t buf[CS_MSG_MAX];
    int len = cs_msg_encode(m, buf, sizeof buf);
    if (len < 0 || n > CS_LEND_MAX) {
        cs_error("internal: cannot encode message type %u", m->type);
        return;
    }
    if (!c->qhead) {
        for (;;) {
            ssize_t w = cs_send_record_fds(c->fd, buf, (size_t)len, fds, n);
            if (w == len)
                return;
            if (w < 0 && errno == EINTR)
                continue;
            if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                break;
            c->dead = true;
            return;
        }
    }
    if (c->qbytes + (size_t)len > SD_OUTQ_BYTES) {
        conn_drop_slow(s, c);
        return;
    }
    conn_enqueue(s, c, buf, (size_t)len);
    if (c->dead || !c->qtail)
        return;
    struct sd_outrec *r = c->qtail;
    for (; r->nfds < n; r->nfds++) {
        r->fds[r->nfds] = fcntl(fds[r->nfds], F_DUPFD_CLOEXEC, 0);
        if (r->fds[r->nfds] < 0) { /* out of descriptors: the peer gets none */
            c->dead = true;
            return;
        }
    }
}

void sd_conn_fail(struct sd_server *s, struct sd_conn *c, const char *why)
{
    if (c->dead)
        return;
    s->ctr.protocol_errors++;
    cs_warn("connection %llu (pid %u): protocol error: %s; closing it",
            (unsigned long long)c->id, c->pid, why);
    struct cs_msg e = {.type = CS_MSG_ERROR};
    e.u.error.code = EPROTO;
    snprintf(e.u.error.text, sizeof e.u.error.text, "protocol error: %s", why);
    sd_conn_send(s, c, &e, true);
    c->dead = true;
}

/* ---- refusals ------------------------------------------------------------------- */

const char *sd_refusal_name(enum sd_refusal k)
{
    static const char *const names[SD_REFUSE_COUNT] = {
        [SD_REFUSE_CLIENTS] = "max_clients",
        [SD_REFUSE_UID_CONNS] = "max_conns_per_uid",
        [SD_REFUSE_CONNS] = "connections",
        [SD_REFUSE_GPU] = "unknown_gpu",
        [SD_REFUSE_HELLO_TIMEOUT] = "hello_timeout",
    };
    return (unsigned)k < SD_REFUSE_COUNT ? names[k] : "?";
}

/* A refusal is logged at most once a second per reason, with the count of
 * those not logged: a client refused in a loop, or an attacker, must not be
 * able to fill the log. */
static void log_refusal(struct sd_server *s, enum sd_refusal k, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void log_refusal(struct sd_server *s, enum sd_refusal k, const char *fmt, ...)
{
    uint64_t now = sd_server_now(s);
    if (now < s->refusal_log_ns[k]) {
        s->refusal_unlogged[k]++;
        return;
    }
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (s->refusal_unlogged[k])
        cs_warn("%s (and %llu more refusals like it in the last second)", msg,
                (unsigned long long)s->refusal_unlogged[k]);
    else
        cs_warn("%s", msg);
    s->refusal_unlogged[k] = 0;
    s->refusal_log_ns[k] = now + 1000000000ull;
}

static void count_refusal(struct sd_server *s, enum sd_refusal k)
{
    s->ctr.refused++;
    s->ctr.refusals[k]++;
}

void sd_conn_refuse(struct sd_server *s, struct sd_conn *c, enum sd_refusal why_kind,
                    uint32_t code, const char *why)
{
    if (c->dead)
        return;
    count_refusal(s, why_kind);
    log_refusal(s, why_kind, "connection %llu (pid %u, uid %u) refused: %s",
                (unsigned long long)c->id, c->pid, c->uid, why);
    struct cs_msg e = {.type = CS_MSG_ERROR};
    e.u.error.code = code;
    snprintf(e.u.error.text, sizeof e.u.error.text, "refused: %s", why);
    sd_conn_send(s, c, &e, true);
    c->dead = true;
}

/* Open connections of one uid. A scan, bounded by the connection cap
 * (max_clients + SD_OWNER_RESERVE) and run once per accept. */
static size_t conns_of_uid(const struct sd_server *s, uint32_t uid)
{
    size_t n = 0;
    for (const struct sd_conn *c = s->conns; c; c = c->next)
        n += !c->dead && c->uid == uid;
    return n;
}

/* Why a fresh connection may not be adopted, or NULL. The daemon's owner
 * and root are exempt from the per-uid cap and alone may use the last
 * SD_OWNER_RESERVE slots, so that cusharectl works whatever other uids
 * open. */
static const char *admit_check(struct sd_server *s, uint32_t uid, enum sd_refusal *k,
                               char *buf, size_t cap)
{
    bool privileged = uid == s->owner_uid || uid == 0;
    size_t total = (size_t)s->cfg.max_clients + (privileged ? SD_OWNER_RESERVE : 0);
    if (s->nconns >= total) {
        *k = SD_REFUSE_CONNS;
        snprintf(buf, cap, "%zu connections open (max_clients%s)", s->nconns,
                 privileged ? " + the owner's reserve" : "; the rest is kept for the owner");
        return buf;
    }
    size_t mine = privileged ? 0 : conns_of_uid(s, uid);
    if (mine >= s->cfg.max_conns_per_uid) {
        *k = SD_REFUSE_UID_CONNS;
        snprintf(buf, cap, "uid %u has %zu connections open (max_conns_per_uid)", uid, mine);
        return buf;
    }
    return NULL;
}

/* Tells a fresh connection why it is refused and closes it. Its buffer is
 * empty: the ERROR fits, and MSG_DONTWAIT makes sure that a peer cannot make
 * us wait for it. What it sent already is read away first (drain_input). */
static void refuse_fd(int fd, const char *why)
{
    struct cs_msg e = {.type = CS_MSG_ERROR};
    e.u.error.code = EBUSY;
    snprintf(e.u.error.text, sizeof e.u.error.text, "refused: %.150s", why);
    uint8_t buf[CS_MSG_MAX];
    int n = cs_msg_encode(&e, buf, sizeof buf);
    if (n > 0 && send(fd, buf, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
        cs_debug("refusal not delivered: %s", strerror(errno));
    drain_input(fd);
    close(fd);
}

struct sd_conn *sd_server_admit(struct sd_server *s, int fd, uint32_t pid, uint32_t uid,
                                uint32_t gid)
{
    char why[128];
    enum sd_refusal k;
    if (!admit_check(s, uid, &k, why, sizeof why))
        return sd_conn_adopt(s, fd, pid, uid, gid);
    count_refusal(s, k);
    log_refusal(s, k, "connection from pid %u (uid %u) refused: %s", pid, uid, why);
    refuse_fd(fd, why);
    return NULL;
}

/* Closes the connections that did not say HELLO within hello_timeout_ms:
 * a connection slot is not for holding. */
static void expire_hellos(struct sd_server *s, uint64_t now)
{
    uint64_t timeout = (uint64_t)s->cfg.hello_timeout_ms * 1000000ull;
    while (s->new_head && s->new_head->accepted_ns + timeout <= now) {
        struct sd_conn *c = s->new_head;
        sd_conn_greeted(s, c);
        char why[96];
        snprintf(why, sizeof why, "no HELLO within %u ms (hello_timeout_ms)",
                 s->cfg.hello_timeout_ms);
        sd_conn_refuse(s, c, SD_REFUSE_HELLO_TIMEOUT, ETIMEDOUT, why);
    }
}

void sd_conn_input(struct sd_server *s, struct sd_conn *c, const uint8_t *rec, size_t len)
{
    if (c->dead)
        return;
    struct cs_msg m;
    const char *why = "record longer than any message";
    if (len > CS_MSG_MAX || cs_msg_decode(rec, len, &m, &why) < 0) {
        sd_conn_fail(s, c, why);
        return;
    }
    sd_dispatch(s, c, &m);
}

static void conn_readable(struct sd_server *s, struct sd_conn *c)
{
    uint8_t buf[CS_MSG_MAX + 1];
    for (int i = 0; i < SD_READ_BURST && !c->dead; i++) {
        /* MSG_TRUNC returns the record's real length, so an oversized
         * record is seen as such rather than silently cut. */
        ssize_t r = recv(c->fd, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (r <= 0) {
            c->dead = true; /* EOF or reset: a dead client loses its leases */
            return;
        }
        sd_conn_input(s, c, buf, (size_t)r);
    }
}

/* The next connection on lfd with its credentials: its fd, or -1 when
 * none is left (an error is logged, naming where). One whose credentials
 * cannot be read is closed and skipped. */
static int accept_peer(int lfd, struct ucred *cr, const char *where)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                cs_warn("%s: accept: %s", where, strerror(errno));
            return -1;
        }
        socklen_t cl = sizeof *cr;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cr, &cl) == 0)
            return fd;
        close(fd);
    }
}

static void accept_all(struct sd_server *s)
{
    for (;;) {
        struct ucred cr;
        int fd = accept_peer(s->lfd, &cr, s->sock_path);
        if (fd < 0)
            return;
        /* Control connections count too: the caps bound fds and memory. */
        sd_server_admit(s, fd, (uint32_t)cr.pid, (uint32_t)cr.uid, (uint32_t)cr.gid);
    }
}

/* ---- endpoint listeners (endpoint.c owns them) ------------------------------- */

int sd_server_add_listener(struct sd_server *s, int fd, uint64_t tag)
{
    if (s->epfd < 0) {
        errno = EBADF;
        return -1;
    }
    return ep_add(s, fd, EPOLLIN, tag);
}

/* Connections on an endpoint carry its grant and count against its cap.
 * At most SD_READ_BURST per wakeup: a flood cannot hold the loop. */
static void accept_endpoint(struct sd_server *s, struct sd_ep *ep)
{
    for (int i = 0; i < SD_READ_BURST; i++) {
        struct ucred cr;
        int fd = accept_peer(ep->lfd, &cr, ep->id);
        if (fd < 0)
            return;
        uint32_t cap = sd_ep_max_conns(s, ep);
        if (ep->nconns >= cap || s->nconns >= (size_t)s->cfg.max_clients) {
            char why[CS_TEXT_LEN];
            snprintf(why, sizeof why, "too many connections on endpoint %.63s (%u open, cap %u)",
                     ep->id, ep->nconns, cap);
            uint64_t k = ++ep->refused;
            if ((k & (k - 1)) == 0) /* the 1st, 2nd, 4th...: no log flood */
                cs_warn("pid %d: %s", (int)cr.pid, why);
            count_refusal(s, SD_REFUSE_CONNS);
            refuse_fd(fd, why);
            continue;
        }
        struct sd_conn *c = sd_conn_adopt(s, fd, (uint32_t)cr.pid, (uint32_t)cr.uid,
                                          (uint32_t)cr.gid);
        if (c)
            sd_ep_conn_opened(s, ep, c);
    }
}

/* ---- timer, signals, settle ------------------------------------------------- */

/* The policy's next deadline or the oldest HELLO deadline, whichever is
 * first (0: none). */
static uint64_t next_deadline(const struct sd_server *s)
{
    uint64_t d = sd_policy_deadline(&s->policy), e = sd_ep_deadline(s);
    if (e && (!d || e < d))
        d = e;
    e = sd_lender_deadline(s);
    if (e && (!d || e < d))
        d = e;
    e = sd_exitwatch_deadline(&s->xw);
    if (e && (!d || e < d))
        d = e;
    if (s->new_head) {
        uint64_t h = s->new_head->accepted_ns + (uint64_t)s->cfg.hello_timeout_ms * 1000000ull;
        if (!d || h < d)
            d = h;
    }
    return d;
}

static void arm_timer(struct sd_server *s)
{
    uint64_t d = next_deadline(s);
    if (d == s->armed_deadline || s->tfd < 0)
        return;
    struct itimerspec its = {{0, 0}, {0, 0}};
    if (d) {
        its.it_value.tv_sec = (time_t)(d / 1000000000ull);
        its.it_value.tv_nsec = (long)(d % 1000000000ull);
    }
    if (timerfd_settime(s->tfd, TFD_TIMER_ABSTIME, &its, NULL) == 0)
        s->armed_deadline = d;
}

void sd_server_tick(struct sd_server *s)
{
    uint64_t now = sd_server_now(s);
    expire_hellos(s, now);
    sd_policy_tick(&s->policy, now);
    sd_ep_tick(s, now);
    sd_exitwatch_expire(&s->xw, now);
}

void sd_server_settle(struct sd_server *s)
{
    /* Closing one connection can grant another whose send then fails, so
     * reap until no dead connection is left. */
    for (bool again = true; again;) {
        again = false;
        for (struct sd_conn *c = s->conns, *next; c; c = next) {
            next = c->next;
            if (!c->dead && c->qhead && conn_flush(s, c) < 0)
                c->dead = true;
            if (c->dead) {
                conn_free(s, c);
                again = true;
                break; /* the list may have changed under next */
            }
        }
    }
    if (s->state_dirty)
        sd_server_save_state(s);
    arm_timer(s);
}

void sd_server_save_state(struct sd_server *s)
{
    s->state_dirty = false;
    if (!s->state_path[0])
        return;
    if (sd_state_save(s->state_path, &s->policy) < 0 && !s->state_warned) {
        s->state_warned = true;
        cs_warn("cannot write %s: %s (a restarted daemon will not know who held the GPUs)",
                s->state_path, strerror(errno));
    }
}

static int open_fds(struct sd_server *s)
{
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    s->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    /* Blocked so that they queue on the signalfd instead of killing us. */
    sigprocmask(SIG_BLOCK, &set, NULL);
    s->sfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    signal(SIGPIPE, SIG_IGN);
    if (s->epfd < 0 || s->tfd < 0 || s->sfd < 0 || ep_add(s, s->tfd, EPOLLIN, TAG_TIMER) < 0 ||
        ep_add(s, s->sfd, EPOLLIN, TAG_SIGNAL) < 0) {
        cs_error("cannot set up the event loop: %s", strerror(errno));
        return -1;
    }
    if (s->have_socket && ep_add(s, s->lfd, EPOLLIN, TAG_LISTEN) < 0)
        return -1;
    return 0;
}

/* The policy's domains: one per GPU of the node, in the node's order, with
 * the node's memory size, made now so that no client can add one. The
 * state file adds the previous daemon's lease holders to the GPUs the node
 * has; its lines for other GPUs are ignored. */
static void seed_gpus(struct sd_server *s, const struct sd_restore *given)
{
    struct sd_restore *prev = calloc(1, sizeof *prev), *r = calloc(1, sizeof *r);
    if (!prev || !r) {
        cs_error("out of memory at start");
        free(prev);
        free(r);
        return;
    }
    if (given)
        *prev = *given;
    if (given || (s->state_path[0] && sd_state_load(s->state_path, prev) != 1)) {
        r->unknown = prev->unknown;
        r->next_client_id = prev->next_client_id;
    }
    _Static_assert(SD_NODE_MAX_GPUS <= SD_MAX_GPUS, "the policy takes every GPU of the node");
    for (size_t i = 0; i < s->node.n; i++) {
        struct sd_restore_gpu *rg = &r->gpu[r->ngpu++];
        memcpy(rg->uuid, s->node.gpu[i].uuid, CS_UUID_LEN);
        rg->index = (uint32_t)i;
        rg->mem_total = s->node.gpu[i].mem_total;
        for (size_t j = 0; j < prev->ngpu; j++) {
            if (memcmp(prev->gpu[j].uuid, rg->uuid, CS_UUID_LEN) == 0) {
                rg->nholders = prev->gpu[j].nholders;
                memcpy(rg->holders, prev->gpu[j].holders, sizeof rg->holders);
                memcpy(rg->revoking, prev->gpu[j].revoking, sizeof rg->revoking);
            }
        }
    }
    size_t foreign = 0;
    for (size_t j = 0; j < prev->ngpu; j++)
        foreign += sd_node_find(&s->node, prev->gpu[j].uuid) < 0;
    if (foreign)
        cs_warn("%s names %zu GPU(s) that are not GPUs of this node: ignored", s->state_path,
                foreign);
    sd_policy_restore(&s->policy, r, s->start_ns);
    free(prev);
    free(r);
}

int sd_server_init(struct sd_server *s, const struct sd_config *cfg,
                   const struct sd_overrides *ov, const struct sd_server_opts *o)
{
    memset(s, 0, sizeof *s);
    s->epfd = s->lfd = s->tfd = s->sfd = s->lockfd = -1;
    s->cfg = *cfg;
    if (ov)
        s->overrides = *ov;
    s->clock = o->clock ? o->clock : mono_clock;
    s->clock_ctx = o->clock_ctx;
    s->start_ns = sd_server_now(s);
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    s->epoch = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
    s->owner_uid = (uint32_t)geteuid();
    /* Lease ids carry the start time in their high bits so that ids of a
     * previous daemon, which clients still hold, do not repeat soon. */
    uint64_t lease_base = o->lease_base ? o->lease_base
                                        : ((uint64_t)(rt.tv_sec & 0xffffff) << 32) | 1;
    sd_policy_init(&s->policy, &s->cfg, &sd_dispatch_ops, s, lease_base, s->start_ns);
    if (o->state_path)
        cs_strlcpy(s->state_path, o->state_path, sizeof s->state_path);
    /* Before the socket exists: a discovery that loads the driver never
     * sees a client of this daemon. */
    char err[256];
    if (o->node) {
        s->node = *o->node;
        sd_node_log(&s->node);
    } else if (sd_node_init(&s->node, s->cfg.gpus, err, sizeof err) < 0) {
        cs_error("gpus: %s", err);
        return -1;
    }
    if (o->socket_path) {
        if (strlen(o->socket_path) >= sizeof s->sock_path) {
            cs_error("socket path too long: %s", o->socket_path);
            return -1;
        }
        cs_strlcpy(s->sock_path, o->socket_path, sizeof s->sock_path);
        if (open_listener(s) < 0 || open_fds(s) < 0)
            return -1;
    }
    sd_ep_init(s);
    seed_gpus(s, o->restore);
    sd_lender_init(s);
    sd_exitwatch_init(&s->xw);
    sd_overhead_init(s);
    return 0;
}

static void handle_signal(struct sd_server *s)
{
    struct signalfd_siginfo si;
    while (read(s->sfd, &si, sizeof si) == (ssize_t)sizeof si) {
        if (si.ssi_signo == SIGHUP) {
            cs_info("SIGHUP ignored: change settings with cusharectl set");
            continue;
        }
        cs_info("signal %u: shutting down", si.ssi_signo);
        s->stop = true;
    }
}

static void handle_event(struct sd_server *s, const struct epoll_event *ev)
{
    uint64_t tag = ev->data.u64;
    if (tag == TAG_LISTEN) {
        accept_all(s);
    } else if (tag == TAG_POOL) {
        sd_lender_pinned_event(s, sd_server_now(s));
    } else if (tag == TAG_METER) {
        sd_overhead_event(s, sd_server_now(s));
    } else if ((tag & SD_EXITWATCH_TAG) && !(tag & (SD_WATCH_TAG | SD_EP_TAG))) {
        uint64_t client = sd_exitwatch_event(&s->xw, tag);
        if (client) /* else dropped earlier in this batch */
            sd_policy_process_gone(&s->policy, client, sd_server_now(s));
    } else if ((tag & SD_WATCH_TAG) && !(tag & SD_EP_TAG)) {
        sd_lender_watch_event(s, tag, sd_server_now(s));
    } else if (tag & SD_EP_TAG) {
        struct sd_ep *ep = sd_ep_by_tag(s, tag);
        if (ep) /* else removed earlier in this batch */
            accept_endpoint(s, ep);
    } else if (tag == TAG_TIMER) {
        uint64_t n;
        ssize_t r = read(s->tfd, &n, sizeof n);
        (void)r;
        s->armed_deadline = 0; /* fired: arm_timer must set it again */
        sd_server_tick(s);
    } else if (tag == TAG_SIGNAL) {
        handle_signal(s);
    } else if (tag == TAG_METRICS) {
        /* Served once per pass, with MHD's timeouts, below. */
    } else {
        /* Connections are only freed by sd_server_settle after the whole
         * batch, so the pointer is valid; a dead one is left alone. */
        struct sd_conn *c = ev->data.ptr;
        if (c->dead)
            return;
        if (ev->events & EPOLLOUT)
            conn_flush(s, c);
        if (ev->events & (EPOLLIN | EPOLLHUP | EPOLLERR))
            conn_readable(s, c);
    }
}

int sd_server_run(struct sd_server *s)
{
    if (s->metrics && ep_add(s, sd_metrics_fd(s->metrics), EPOLLIN, TAG_METRICS) < 0) {
        cs_error("cannot watch the metrics endpoint: %s", strerror(errno));
        return -1;
    }
    cs_info("listening on %s (mode %s, epoch %llu)", s->sock_path,
            s->cfg.mode == CS_MODE_SHARED  ? "shared"
            : s->cfg.mode == CS_MODE_MIXED ? "mixed"
                                           : "exclusive",
            (unsigned long long)s->epoch);
    sd_server_settle(s);
    /* The pool's first piece is asked before anything else happens: a
     * pool_min_mb pool warms from the start, not from the first event (on
     * the H100 an idle daemon pinned nothing until the first client came). */
    sd_lender_drive(s, sd_server_now(s));
    arm_timer(s);
    while (!s->stop)
        if (sd_server_step(s, s->metrics ? sd_metrics_timeout_ms(s->metrics) : -1) < 0)
            return -1;
    return 0;
}

int sd_server_step(struct sd_server *s, int timeout_ms)
{
    struct epoll_event evs[64];
    int n = epoll_wait(s->epfd, evs, 64, timeout_ms);
    if (n < 0 && errno != EINTR) {
        cs_error("epoll_wait: %s", strerror(errno));
        return -1;
    }
    for (int i = 0; i < n; i++)
        handle_event(s, &evs[i]);
    if (s->metrics)
        sd_metrics_run(s->metrics);
    /* A dead holder's lease ends here, and its successor is granted, in
     * the same iteration that saw the EOF. */
    sd_server_settle(s);
    sd_lender_drive(s, sd_server_now(s));
    /* Armed again after the pool's drive: its next piece may now wait for
     * a pace or a retry, a deadline settle could not see. Without this a
     * pause set here waited for the next event, and on a quiet node (one
     * job computing, no USAGE changing) there may be none for seconds: a
     * refused pin was only retried at the next event, and this is the
     * likely cause of the pool's paced growth stalling for 20 s once in
     * tests/e2e/swap_pool.sh (right after a hold for moves ended here). */
    arm_timer(s);
    return 0;
}

void sd_server_fini(struct sd_server *s)
{
    while (s->conns) {
        struct sd_conn *c = s->conns;
        if (c->client) {
            /* Shutting down: the clients keep their gates as they are and
             * re-register with the next daemon; no policy decisions now. */
            c->client = NULL;
        }
        conn_free(s, c);
    }
    sd_ep_fini(s);
    sd_overhead_fini(s);
    sd_lender_fini(s);
    sd_exitwatch_fini(&s->xw);
    if (s->metrics)
        sd_metrics_stop(s->metrics);
    s->metrics = NULL;
    sd_policy_fini(&s->policy);
    if (s->have_socket)
        unlink(s->sock_path);
    int fds[] = {s->lfd, s->epfd, s->tfd, s->sfd, s->lockfd};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}
