/* server.h: cushared's event loop, connections and message dispatch.
 *
 * One thread does everything: an epoll set holds the listening socket, every
 * connection, a timerfd armed at the policy's next deadline, a signalfd for
 * SIGTERM/SIGINT, and (with --metrics) libmicrohttpd's own epoll fd, which
 * runs in MHD's "external" mode on this same thread. Nothing blocks: sockets
 * are non-blocking, a connection's output beyond what the kernel takes is
 * queued, and a connection whose queue passes SD_OUTQ_BYTES is dropped.
 *
 * Modules:
 *   server.c    listening socket, loop, connection I/O and lifetime
 *   dispatch.c  HELLO and the lease/memory messages -> policy calls, and the
 *               policy's grant/revoke decisions -> messages
 *   control.c   cusharectl requests: status, set, drain, endpoint
 *   metrics.c   the Prometheus page and its HTTP endpoint
 *   state.c     the lease holders, persisted for a restarted daemon
 *   endpoint.c  sockets made for one allocation each, with their grant
 *
 * A connection is closed in one place (reap, after the current event), so
 * code that finds a connection dead mid-event only marks it: policy
 * callbacks may run while another connection is being processed.
 */
#ifndef SD_SERVER_H
#define SD_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>

#include "common/proto.h"
#include "sched/access.h"
#include "sched/config.h"
#include "sched/endpoint.h"
#include "sched/exitwatch.h"
#include "sched/lender.h"
#include "sched/node.h"
#include "sched/policy.h"

#define SD_OUTQ_BYTES (256u * 1024) /* queued output a connection may owe */
#define SD_READ_BURST 32            /* records read per connection per wakeup */
#define SD_BATCH_MAX 32             /* client overrides in one `set` batch */
/* Connections beyond max_clients that only the daemon's owner and root may
 * open: cusharectl keeps working while other uids fill the rest. */
#define SD_OWNER_RESERVE 16

enum sd_conn_kind {
    SD_CONN_NEW = 0,     /* no HELLO yet */
    SD_CONN_CLIENT = 1,  /* a GPU client (libcushare.so) */
    SD_CONN_CONTROL = 2, /* cusharectl */
};

struct sd_outrec {
    struct sd_outrec *next;
    size_t len;
    int nfds;               /* descriptors sent with it (duplicates, closed once sent) */
    int fds[CS_LEND_MAX];
    uint8_t data[];
};

/* A `set` batch being staged on a control connection (CS_CTL_SET_MORE). */
struct sd_batch {
    struct sd_config cfg;
    size_t nov;
    struct sd_override ov[SD_BATCH_MAX];
    size_t npairs;
};

struct sd_conn {
    int fd;
    uint64_t id;
    uint32_t pid, uid, gid; /* SO_PEERCRED at accept */
    uint32_t kind;          /* enum sd_conn_kind */
    uint32_t caps;          /* capability bits of its HELLO (CS_HELLO_TSG, _LC, _LIMITS...) */
    struct sd_grant grant;  /* what it may claim (access.h): set at accept */
    uint64_t accepted_ns;   /* a NEW one is closed at this + hello_timeout_ms */
    bool in_new;            /* on the server's list of connections without HELLO */
    bool dead;              /* close at the next reap */
    bool polling_out;       /* EPOLLOUT is registered */
    struct sd_client *client;
    struct sd_batch *batch;
    struct sd_outrec *qhead, *qtail;
    size_t qbytes;
    struct sd_conn *next, *prev;
    bool labeled;           /* its LABELS came (one per connection) */
    char claim[CS_NAME_LEN];/* LABELS' container as claimed: shown where the pod is believed
                               and the allocation names no container (dispatch.c) */
    bool on_endpoint;       /* accepted on an endpoint: no control, grant from it */
    bool view;              /* a control connection that may only read its view (CS_HELLO_VIEW) */
    struct sd_ep *ep;       /* that endpoint while it exists (its connection count) */
    /* NEW connections, oldest first (accept order is deadline order) */
    struct sd_conn *new_next, *new_prev;
};

/* Why a connection was refused (an ERROR, then closed). */
enum sd_refusal {
    SD_REFUSE_CLIENTS = 0,   /* HELLO beyond max_clients (or out of memory) */
    SD_REFUSE_UID_CONNS,     /* the peer's uid has max_conns_per_uid open */
    SD_REFUSE_CONNS,         /* every connection slot taken (or all but the owner's reserve) */
    SD_REFUSE_GPU,           /* ATTACH of a GPU that is not one of the node's */
    SD_REFUSE_HELLO_TIMEOUT, /* no HELLO within hello_timeout_ms */
    SD_REFUSE_COUNT,
};

/* The reason's name in metrics and status: max_clients, max_conns_per_uid,
 * connections, unknown_gpu, hello_timeout. */
const char *sd_refusal_name(enum sd_refusal k);

struct sd_counters {
    uint64_t connections_total;
    uint64_t protocol_errors;
    uint64_t dropped_slow;
    uint64_t refused;         /* every refusal, the sum of the ones below */
    uint64_t refusals[SD_REFUSE_COUNT]; /* by reason */
    uint64_t control_denied;  /* control changes refused for the uid */
};

struct sd_metrics; /* metrics.c */
struct sd_meter;   /* meter.c */
struct sd_meter_sample;

struct sd_server_opts {
    const char *socket_path;  /* NULL: no listening socket (tests, fuzzing) */
    const char *state_path;   /* NULL: no restart state */
    /* Time source; NULL = CLOCK_MONOTONIC. Fuzzers and tests inject one. */
    uint64_t (*clock)(void *ctx);
    void *clock_ctx;
    /* First lease id; 0 = derived from the wall clock (see server.c).
     * Fuzzers fix it so that a script can name a lease. */
    uint64_t lease_base;
    /* The node's GPUs; NULL = from the `gpus` setting (discovery with
     * auto). Tests and fuzzers inject theirs. */
    const struct sd_node *node;
    /* What the previous daemon left, instead of reading state_path (a
     * fuzzer's restart scenario); NULL = the state file. */
    const struct sd_restore *restore;
};

struct sd_server {
    struct sd_config cfg;     /* live knobs; the policy reads them */
    struct sd_overrides overrides;
    struct sd_policy policy;
    int epfd, lfd, tfd, sfd, lockfd;
    char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    char state_path[SD_PATH_LEN];
    bool have_socket;
    bool state_dirty;
    bool state_warned;        /* a failed state write is logged once */
    bool stop;
    uint64_t (*clock)(void *ctx);
    void *clock_ctx;
    uint64_t epoch;
    uint64_t start_ns;
    uint32_t owner_uid;
    uint64_t next_conn_id;
    uint64_t armed_deadline;
    struct sd_node node;      /* the GPUs clients may ATTACH */
    struct sd_conn *conns;
    size_t nconns;
    struct sd_conn *new_head, *new_tail; /* connections waiting for HELLO */
    uint64_t refusal_log_ns[SD_REFUSE_COUNT]; /* next refusal log line not before */
    uint64_t refusal_unlogged[SD_REFUSE_COUNT];
    struct sd_counters ctr;
    struct sd_metrics *metrics;
    struct sd_eps eps;        /* endpoint.c */
    struct sd_lender lend;    /* lender.c: the node's pinned pool */
    struct sd_exitwatch xw;   /* exitwatch.c: departed non-borrowers' processes */
    struct sd_meter *meter;   /* overhead.c: the driver's per-process figures, or NULL */
    struct sd_meter_sample *meter_sample; /* the loop's copy of the newest one */
};

/* server.c */
int sd_server_init(struct sd_server *s, const struct sd_config *cfg,
                   const struct sd_overrides *ov, const struct sd_server_opts *o);
int sd_server_run(struct sd_server *s);
/* One pass of the loop: waits up to timeout_ms (-1: no limit) for events,
 * handles them and settles. 0, or -1 when epoll fails. Tests drive an
 * in-process server with it. */
int sd_server_step(struct sd_server *s, int timeout_ms);
void sd_server_fini(struct sd_server *s);
uint64_t sd_server_now(const struct sd_server *s);
/* Takes ownership of a connected socket with the given credentials; its
 * grant is the main socket's for them (sd_access_grant_peer). A listener
 * of another kind (an endpoint) replaces c->grant before the first read. */
struct sd_conn *sd_conn_adopt(struct sd_server *s, int fd, uint32_t pid, uint32_t uid,
                              uint32_t gid);
/* A connection just accepted: adopted, or refused at a connection cap (an
 * ERROR sent without blocking, the socket closed, NULL returned). */
struct sd_conn *sd_server_admit(struct sd_server *s, int fd, uint32_t pid, uint32_t uid,
                                uint32_t gid);
/* c said HELLO: no deadline any more. */
void sd_conn_greeted(struct sd_server *s, struct sd_conn *c);
/* Refusal: count it under `why`, log it (at most once a second per reason),
 * send ERROR code/text, close after this event. */
void sd_conn_refuse(struct sd_server *s, struct sd_conn *c, enum sd_refusal why_kind,
                    uint32_t code, const char *why);
/* Handles one received record (as read from the socket, any length). */
void sd_conn_input(struct sd_server *s, struct sd_conn *c, const uint8_t *rec, size_t len);
/* Queues one message; a connection that owes too much is marked dead.
 * force: ignore the limit (a status reply is queued whole). */
void sd_conn_send(struct sd_server *s, struct sd_conn *c, const struct cs_msg *m, bool force);
/* The same with n descriptors attached (SCM_RIGHTS); the caller keeps its
 * own (what must wait in the queue is duplicated). */
void sd_conn_send_fds(struct sd_server *s, struct sd_conn *c, const struct cs_msg *m,
                      const int *fds, int n);
/* Protocol error: count it, tell the peer why, close after this event. */
void sd_conn_fail(struct sd_server *s, struct sd_conn *c, const char *why);
/* Closes dead connections, persists state, re-arms the timer. Call after
 * every event (the loop does; tests and fuzzers that drive the server by
 * hand do too). */
void sd_server_settle(struct sd_server *s);
/* Writes the restart state now (see state.c). */
void sd_server_save_state(struct sd_server *s);
/* Runs the policy's deadlines that have passed, and closes connections
 * that did not say HELLO in time. */
void sd_server_tick(struct sd_server *s);
struct sd_conn *sd_server_conn_by_fd(const struct sd_server *s, int fd);
/* Watches a listening socket of an endpoint (tag: SD_EP_TAG | serial; see
 * endpoint.h). 0 or -1 with errno. */
int sd_server_add_listener(struct sd_server *s, int fd, uint64_t tag);

/* dispatch.c */
extern const struct sd_policy_ops sd_dispatch_ops;
void sd_dispatch(struct sd_server *s, struct sd_conn *c, const struct cs_msg *m);
/* Applies the override table to one client's HELLO settings: a pid's in
 * full, a name's within the client's grant g. */
void sd_dispatch_apply_override(const struct sd_server *s, const struct sd_grant *g,
                                struct sd_client_info *info);
/* c's grant now names a pod (CTL_EP_IDENTITY on its endpoint): its client,
 * if any, is shown with it from now on. */
void sd_dispatch_identity_changed(struct sd_conn *c);

/* control.c */
void sd_control(struct sd_server *s, struct sd_conn *c, const struct cs_msg *m);

/* state.c */
int sd_state_load(const char *path, struct sd_restore *r);
int sd_state_save(const char *path, const struct sd_policy *p);

#endif
