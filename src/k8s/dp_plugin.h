/* dp_plugin.h: the plugin at run time. One thread drives one completion
 * queue; each advertised resource is a "slot" with its own gRPC server
 * (one socket per registration, as the kubelet requires) and its own
 * registration state.
 *
 * An ID names its GPU, so a restarted plugin answers Allocate as the old one
 * did; the only things kept about allocations are which endpoint each device
 * ID went to (dp_endpoint.h) and the endpoints whose pod is being looked up
 * (dp_podres.h), in memory. */
#ifndef DP_PLUGIN_H
#define DP_PLUGIN_H

#include <grpc/grpc.h>
#include <sys/types.h>

#include "k8s/dp.h"
#include "k8s/dp_endpoint.h"
#include "k8s/dp_podres.h"

struct dp_srv;
struct dp_reg;
struct dp_plugin;

struct dp_slot {
    const struct dp_resource *res;
    struct dp_plugin *p;
    char sock_path[DP_JOIN_MAX];
    struct dp_srv *srv; /* serving on sock_path, or NULL */
    struct dp_srv *old; /* shutting down; the next one starts when it is gone */
    bool restart;       /* start a server once `old` is gone */
    dev_t sock_dev;     /* our socket file as bound: a different or missing */
    ino_t sock_ino;     /*   file means the kubelet wiped the directory */
    struct dp_reg *reg; /* Register call in flight */
    bool registered;
    ino_t kubelet_ino;  /* the kubelet.sock we registered with */
    uint64_t retry_at;  /* next registration attempt (CLOCK_MONOTONIC ns) */
    unsigned backoff_ms;
};

/* What the servers and Register calls (dp_server.c, dp_register.c) tell
 * the loop that owns the slots (dp_loop.c), which registers these at init:
 * they sit below it and never call into it. */
struct dp_slot_ops {
    /* A stopped server is gone (its socket unlinked): the next may start. */
    void (*srv_gone)(struct dp_slot *s, struct dp_srv *srv);
    /* A Register call ended, accepted by the kubelet or not. */
    void (*reg_done)(struct dp_slot *s, bool ok);
};

struct dp_plugin {
    const struct dp_config *cfg;
    const struct dp_slot_ops *ops;
    struct dp_node node;
    grpc_completion_queue *cq;
    size_t nslots;
    struct dp_slot slot[DP_MAX_RES];
    char kubelet_path[DP_JOIN_MAX];
    int sig_fd;
    int watch_fd;
    bool stopping;
    bool kubelet_new; /* kubelet.sock created since the last check */
    unsigned live; /* servers and Register calls not yet finished */
    uint64_t next_health, next_check;
    struct dp_eps eps; /* device ID -> its container's endpoint */
    struct dp_podres podres; /* the pods of endpoints, being looked up */
};

/* ---- dp_server.c ---- */
/* A server for s on s->sock_path, started. NULL with err on failure. */
struct dp_srv *dp_srv_start(struct dp_slot *s, char *err, size_t cap);
/* The device list changed: every ListAndWatch stream gets the new one. */
void dp_srv_changed(struct dp_srv *srv);
/* Ends the streams, shuts down; ops->srv_gone runs when it is gone. */
void dp_srv_stop(struct dp_srv *srv);
/* Cancels the calls of a server whose shutdown takes too long. */
void dp_srv_tick(struct dp_srv *srv, uint64_t now);

/* ---- dp_service.c: the DevicePlugin methods (unary ones) ---- */
grpc_status_code dp_service_call(struct dp_slot *s, const char *method, grpc_byte_buffer *req,
                                 grpc_byte_buffer **resp, char *msg, size_t cap);
/* The current ListAndWatch answer of s, serialized. */
grpc_byte_buffer *dp_service_list(struct dp_slot *s);

/* ---- dp_register.c ---- */
void dp_reg_start(struct dp_slot *s);
void dp_reg_cancel(struct dp_slot *s);

/* ---- dp_watch.c ---- */
/* inotify on the plugin directory (created if missing). fd or -1. */
int dp_watch_open(const char *dir);
#define DP_WATCH_ANY 1u     /* something changed in the directory */
#define DP_WATCH_KUBELET 2u /* the kubelet's socket was (re)created */
/* Drains the events: DP_WATCH_* bits. */
unsigned dp_watch_drain(int fd, const char *kubelet_sock);

/* ---- dp_health.c ---- */
/* Probes every GPU; true if any GPU's health changed. */
bool dp_health_run(struct dp_node *node);

/* ---- dp_loop.c ---- */
int dp_plugin_init(struct dp_plugin *p, const struct dp_config *cfg, const struct dp_node *node);
int dp_plugin_run(struct dp_plugin *p);
void dp_plugin_free(struct dp_plugin *p);
/* Compares the directory with what the slots expect and acts: (re)starts
 * servers, (re)registers. Idempotent; run after anything changes. */
void dp_plugin_check(struct dp_plugin *p);

#endif
