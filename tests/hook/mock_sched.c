/* mock_sched.c: see mock_sched.h. */
#include "mock_sched.h"

#include "common/util.h"

#include <stdatomic.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define LOG_MAX 65536

struct entry {
    struct cs_msg msg;
    uint64_t at;
};

struct mock_sched {
    int lfd;
    int cfd;               /* guarded by mu */
    uint32_t idle_ms;
    int32_t room_status;   /* guarded by mu */
    bool auto_grant;       /* guarded by mu */
    uint32_t refuse_caps;  /* guarded by mu */
    bool have_terms;       /* guarded by mu: send `terms`, else echo HELLO */
    struct cs_msg_terms terms;
    int refuse_left;       /* guarded by mu: HELLOs still to refuse (mock_refuse_hellos) */
    uint32_t refuse_code;  /* guarded by mu */
    char refuse_text[CS_TEXT_LEN]; /* guarded by mu */
    void (*room_hook)(const struct cs_msg_room *, void *); /* set before use */
    void *room_arg;
    uint64_t next_lease;   /* guarded by mu */
    uint64_t lease[CS_MAX_DEVICES]; /* guarded by mu */
    pthread_t thread;
    _Atomic int stop;      /* set once by mock_stop, which then writes to wake[1] */
    int wake[2];           /* a pipe: its read end is polled with the socket, so that
                            * mock_stop does not wait out the poll's timeout (up to
                            * 50 ms a mock) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct entry *log;     /* guarded by mu */
    int nlog;
    int cursor[256];       /* per type: next log index mock_wait looks at */
};

static void record(struct mock_sched *m, const struct cs_msg *msg)
{
    pthread_mutex_lock(&m->mu);
    if (m->nlog < LOG_MAX) {
        m->log[m->nlog].msg = *msg;
        m->log[m->nlog].at = cs_now_ns();
        m->nlog++;
    }
    pthread_cond_broadcast(&m->cv);
    pthread_mutex_unlock(&m->mu);
}

/* As cushared does after WELCOME: the terms set by the test, else what
 * the HELLO asked, nothing cut. */
static void send_terms(struct mock_sched *m, int fd, const struct cs_msg_hello *h)
{
    struct cs_msg t = {.type = CS_MSG_TERMS};
    pthread_mutex_lock(&m->mu);
    if (m->have_terms) {
        t.u.terms = m->terms;
    } else {
        t.u.terms.priority = h->priority;
        t.u.terms.weight = h->weight;
        t.u.terms.mem_limit = h->mem_limit;
    }
    pthread_mutex_unlock(&m->mu);
    cs_send(fd, &t);
}

static void handle(struct mock_sched *m, int fd, const struct cs_msg *msg)
{
    struct cs_msg r;
    memset(&r, 0, sizeof r);
    pthread_mutex_lock(&m->mu);
    uint32_t refuse = m->refuse_caps;
    bool deny = msg->type == CS_MSG_HELLO && m->refuse_left > 0;
    if (deny) {
        m->refuse_left--;
        r.type = CS_MSG_ERROR;
        r.u.error.code = m->refuse_code;
        snprintf(r.u.error.text, sizeof r.u.error.text, "%s", m->refuse_text);
    }
    pthread_mutex_unlock(&m->mu);
    if (deny) {
        cs_send(fd, &r);
    } else if (msg->type == CS_MSG_HELLO && (msg->u.hello.flags & refuse)) {
        r.type = CS_MSG_ERROR;
        r.u.error.code = EPROTO;
        snprintf(r.u.error.text, sizeof r.u.error.text, "protocol error: field out of range");
        cs_send(fd, &r);
    } else if (msg->type == CS_MSG_HELLO) {
        r.type = CS_MSG_WELCOME;
        r.u.welcome.client_id = 1;
        r.u.welcome.epoch = 1;
        r.u.welcome.idle_ms = m->idle_ms;
        cs_send(fd, &r);
        if (msg->u.hello.flags & CS_HELLO_TERMS)
            send_terms(m, fd, &msg->u.hello);
    } else if (msg->type == CS_MSG_ACQUIRE ||
               (msg->type == CS_MSG_ATTACH && (msg->u.attach.flags & CS_ATTACH_WAITING))) {
        uint32_t slot = msg->type == CS_MSG_ACQUIRE ? msg->u.acquire.slot : msg->u.attach.slot;
        pthread_mutex_lock(&m->mu);
        bool grant = m->auto_grant;
        uint64_t id = grant ? ++m->next_lease : 0;
        if (grant)
            m->lease[slot] = id;
        pthread_mutex_unlock(&m->mu);
        if (grant) {
            r.type = CS_MSG_GRANT;
            r.u.grant.slot = slot;
            r.u.grant.lease_id = id;
            r.u.grant.quantum_ms = 1000;
            cs_send(fd, &r);
        }
    } else if (msg->type == CS_MSG_ROOM) {
        if (m->room_hook)
            m->room_hook(&msg->u.room, m->room_arg);
        r.type = CS_MSG_ROOM_REPLY;
        r.u.room_reply.slot = msg->u.room.slot;
        r.u.room_reply.request_id = msg->u.room.request_id;
        pthread_mutex_lock(&m->mu);
        r.u.room_reply.status = m->room_status;
        pthread_mutex_unlock(&m->mu);
        cs_send(fd, &r);
    } else if (msg->type == CS_MSG_BORROW) { /* a daemon with an empty pool */
        r.type = CS_MSG_LEND;
        r.u.lend.request_id = msg->u.borrow.request_id;
        cs_send(fd, &r);
    }
}

static void *serve(void *arg)
{
    struct mock_sched *m = arg;
    while (!m->stop) {
        pthread_mutex_lock(&m->mu);
        int fd = m->cfd;
        pthread_mutex_unlock(&m->mu);
        struct pollfd p[2] = {{.fd = fd >= 0 ? fd : m->lfd, .events = POLLIN},
                              {.fd = m->wake[0], .events = POLLIN}};
        if (poll(p, 2, 50) <= 0 || !(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        if (fd < 0) {
            int c = accept4(m->lfd, NULL, NULL, SOCK_CLOEXEC);
            pthread_mutex_lock(&m->mu);
            m->cfd = c;
            pthread_mutex_unlock(&m->mu);
            continue;
        }
        struct cs_msg msg;
        const char *why = NULL;
        int r = cs_recv(fd, &msg, &why);
        if (r == 1) {
            /* Recorded before it is answered: a test that got the answer
             * can rely on finding the request in the log. */
            record(m, &msg);
            handle(m, fd, &msg);
        } else {
            if (r == -EPROTO)
                fprintf(stderr, "mock_sched: bad record from the hook: %s\n", why);
            pthread_mutex_lock(&m->mu);
            close(m->cfd);
            m->cfd = -1;
            pthread_mutex_unlock(&m->mu);
        }
    }
    return NULL;
}

struct mock_sched *mock_start(const char *path, uint32_t idle_ms)
{
    struct mock_sched *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->log = calloc(LOG_MAX, sizeof *m->log);
    m->idle_ms = idle_ms;
    m->cfd = -1;
    pthread_mutex_init(&m->mu, NULL);
    pthread_cond_init(&m->cv, NULL);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    unlink(path);
    m->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (!m->log || m->lfd < 0 || bind(m->lfd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        listen(m->lfd, 8) < 0 || pipe2(m->wake, O_CLOEXEC) < 0) {
        perror("mock_sched");
        if (m->lfd >= 0)
            close(m->lfd);
        free(m->log);
        free(m);
        return NULL;
    }
    pthread_create(&m->thread, NULL, serve, m);
    return m;
}

void mock_stop(struct mock_sched *m)
{
    m->stop = 1;
    if (write(m->wake[1], "", 1) < 0)
        perror("mock_sched: wake"); /* the poll's timeout still ends the thread */
    pthread_join(m->thread, NULL);
    close(m->wake[0]);
    close(m->wake[1]);
    if (m->cfd >= 0)
        close(m->cfd);
    close(m->lfd);
    free(m->log);
    free(m);
}

bool mock_send(struct mock_sched *m, const struct cs_msg *msg)
{
    pthread_mutex_lock(&m->mu);
    bool ok = m->cfd >= 0 && cs_send(m->cfd, msg) == 0;
    pthread_mutex_unlock(&m->mu);
    return ok;
}

bool mock_grant(struct mock_sched *m, uint32_t slot, uint64_t lease_id)
{
    pthread_mutex_lock(&m->mu);
    m->lease[slot] = lease_id;
    pthread_mutex_unlock(&m->mu);
    struct cs_msg g = {.type = CS_MSG_GRANT};
    g.u.grant.slot = slot;
    g.u.grant.lease_id = lease_id;
    g.u.grant.quantum_ms = 1000;
    return mock_send(m, &g);
}

bool mock_revoke(struct mock_sched *m, uint32_t slot, uint64_t lease_id, uint64_t evict)
{
    struct cs_msg r = {.type = CS_MSG_REVOKE};
    r.u.revoke.slot = slot;
    r.u.revoke.lease_id = lease_id;
    r.u.revoke.reason = CS_REVOKE_QUANTUM;
    r.u.revoke.evict_bytes = evict;
    return mock_send(m, &r);
}

bool mock_revoke_wait(struct mock_sched *m, uint32_t slot, uint64_t evict,
                      struct cs_msg_release *out)
{
    uint64_t lease = mock_lease(m, slot);
    struct cs_msg r;
    if (!lease || !mock_revoke(m, slot, lease, evict) ||
        !mock_wait(m, CS_MSG_RELEASE, 10000, &r, NULL) || r.u.release.lease_id != lease)
        return false;
    *out = r.u.release;
    return true;
}

bool mock_evict(struct mock_sched *m, uint32_t slot, uint64_t request_id, uint64_t bytes,
                uint32_t flags)
{
    struct cs_msg e = {.type = CS_MSG_EVICT};
    e.u.evict.slot = slot;
    e.u.evict.request_id = request_id;
    e.u.evict.bytes = bytes;
    e.u.evict.flags = flags;
    return mock_send(m, &e);
}

bool mock_prefetch(struct mock_sched *m, uint32_t slot, uint64_t request_id, uint64_t bytes)
{
    struct cs_msg p = {.type = CS_MSG_PREFETCH};
    p.u.prefetch.slot = slot;
    p.u.prefetch.request_id = request_id;
    p.u.prefetch.bytes = bytes;
    return mock_send(m, &p);
}

bool mock_wait(struct mock_sched *m, uint16_t type, int timeout_ms, struct cs_msg *out,
               uint64_t *at_ns)
{
    uint64_t deadline = cs_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    pthread_mutex_lock(&m->mu);
    int *cur = &m->cursor[type & 0xff];
    for (;;) {
        for (; *cur < m->nlog; (*cur)++) {
            if (m->log[*cur].msg.type == type) {
                if (out)
                    *out = m->log[*cur].msg;
                if (at_ns)
                    *at_ns = m->log[*cur].at;
                (*cur)++;
                pthread_mutex_unlock(&m->mu);
                return true;
            }
        }
        uint64_t now = cs_now_ns();
        if (now >= deadline)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t wait = deadline - now < 20000000ull ? deadline - now : 20000000ull;
        ts.tv_nsec += (long)wait;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&m->cv, &m->mu, &ts);
    }
    pthread_mutex_unlock(&m->mu);
    return false;
}

int mock_last_pos(struct mock_sched *m, uint16_t type)
{
    pthread_mutex_lock(&m->mu);
    int i = m->cursor[type & 0xff] - 1; /* mock_wait leaves it just past */
    int pos = i >= 0 && m->log[i].msg.type == type ? i : -1;
    pthread_mutex_unlock(&m->mu);
    return pos;
}

int mock_count(struct mock_sched *m, uint16_t type)
{
    int n = 0;
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->nlog; i++)
        n += m->log[i].msg.type == type;
    pthread_mutex_unlock(&m->mu);
    return n;
}

void mock_set_room_status(struct mock_sched *m, int32_t status)
{
    pthread_mutex_lock(&m->mu);
    m->room_status = status;
    pthread_mutex_unlock(&m->mu);
}

void mock_refuse_hellos(struct mock_sched *m, int n, uint32_t code, const char *text)
{
    pthread_mutex_lock(&m->mu);
    m->refuse_left = n;
    m->refuse_code = code;
    snprintf(m->refuse_text, sizeof m->refuse_text, "%s", text);
    pthread_mutex_unlock(&m->mu);
}

void mock_refuse_caps(struct mock_sched *m, uint32_t caps)
{
    pthread_mutex_lock(&m->mu);
    m->refuse_caps = caps;
    pthread_mutex_unlock(&m->mu);
}

void mock_drop(struct mock_sched *m)
{
    /* shutdown, not close: the serving thread sees the end and closes the
     * fd itself (a closed number could be reused under its poll). */
    pthread_mutex_lock(&m->mu);
    if (m->cfd >= 0)
        shutdown(m->cfd, SHUT_RDWR);
    pthread_mutex_unlock(&m->mu);
}

void mock_set_terms(struct mock_sched *m, const struct cs_msg_terms *t)
{
    pthread_mutex_lock(&m->mu);
    m->have_terms = true;
    m->terms = *t;
    pthread_mutex_unlock(&m->mu);
}

void mock_set_auto_grant(struct mock_sched *m, bool on)
{
    pthread_mutex_lock(&m->mu);
    m->auto_grant = on;
    pthread_mutex_unlock(&m->mu);
}

uint64_t mock_lease(struct mock_sched *m, uint32_t slot)
{
    pthread_mutex_lock(&m->mu);
    uint64_t id = m->lease[slot];
    pthread_mutex_unlock(&m->mu);
    return id;
}

void mock_set_room_hook(struct mock_sched *m, void (*fn)(const struct cs_msg_room *, void *),
                        void *arg)
{
    m->room_hook = fn;
    m->room_arg = arg;
}
