/* endpoint.h: sockets made for one allocation each (Kubernetes containers).
 *
 * The device plugin's Allocate asks the daemon (CTL_ENDPOINT, control.c) for
 * an endpoint bound to that allocation and mounts only its directory into
 * the container. Every connection accepted on it carries the endpoint's
 * grant (access.h): a HELLO may ask for less, never more, whatever uid the
 * container runs as. Control (cusharectl) is not available on an endpoint.
 *
 *     <endpoint_dir>/                  0755, the daemon's, verified before use
 *     <endpoint_dir>/<id>/             0755, what a container gets mounted
 *     <endpoint_dir>/<id>/cushared.sock 0666 (the container's uid is unknown)
 *     <endpoint_dir>/endpoints.state   the endpoints, for the next daemon
 *
 * An endpoint's grant may name the pod its clients belong to: from CREATE
 * (cusharectl endpoint create --pod), or later from CTL_EP_IDENTITY, which
 * the device plugin sends once the kubelet's pod-resources API told it
 * which pod holds the allocation (Allocate carries only device IDs).
 *
 * A daemon that stops closes the sockets but keeps the directories: a
 * container's mount names the directory, and the next daemon binds a new
 * socket in the same one. REMOVE, and the idle GC (endpoint_idle_ttl_s),
 * delete both; connections already open keep running either way.
 *
 * The server owns the listeners in its epoll set under the tag
 * SD_EP_TAG | serial (server.c); a serial that no longer names an endpoint
 * (removed in the same batch of events) is ignored.
 */
#ifndef SD_ENDPOINT_H
#define SD_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/proto.h"
#include "sched/access.h"
#include "sched/config.h"

#define SD_EP_SOCK "cushared.sock"
#define SD_EP_STATE "endpoints.state"
/* Epoll tag bit of an endpoint listener: user-space pointers (the tags of
 * connections) never have bit 63 set on Linux. */
#define SD_EP_TAG (1ull << 63)

struct sd_ep {
    struct sd_ep *next;
    uint64_t serial;        /* epoll tag, with SD_EP_TAG */
    char id[CS_NAME_LEN];
    struct sd_grant grant;  /* given to connections accepted from now on */
    int lfd;
    uint32_t nconns;        /* connections open on it now */
    uint64_t idle_since;    /* ns: last close, creation or daemon start */
    uint64_t refused;       /* connections refused over its cap */
};

struct sd_eps {
    struct sd_ep *list;
    size_t n;
    uint64_t next_serial;
    char dir[SD_PATH_LEN];  /* "" = endpoints off */
};

struct sd_server;
struct sd_conn;

/* Where endpoints live (from the config and the socket) and the persisted
 * ones, recreated. Call once the server's epoll set exists. */
void sd_ep_init(struct sd_server *s);
/* Closes every listener and unlinks its socket; keeps the directories and
 * the state for the next daemon. */
void sd_ep_fini(struct sd_server *s);

/* CTL_ENDPOINT. Returns 0 with the socket path in text (CREATE), or -errno
 * with the reason. */
int sd_ep_request(struct sd_server *s, const struct cs_msg_ctl_endpoint *m, char *text,
                  size_t cap);

/* CTL_EP_IDENTITY: the endpoint's pod, namespace and container, filled in
 * where it names none (never changed: -EEXIST), for the connections already
 * open on it too. 0 or -errno, with a reason or what was done in text. */
int sd_ep_identity(struct sd_server *s, const struct cs_msg_ctl_ep_identity *m, char *text,
                   size_t cap);

struct sd_ep *sd_ep_by_tag(const struct sd_server *s, uint64_t tag);
/* A connection accepted on ep: its grant, its count. */
void sd_ep_conn_opened(struct sd_server *s, struct sd_ep *ep, struct sd_conn *c);
/* Called by the server for every connection it frees. */
void sd_ep_conn_closed(struct sd_server *s, struct sd_conn *c);
/* The connection cap of ep (its own or endpoint_max_conns). */
uint32_t sd_ep_max_conns(const struct sd_server *s, const struct sd_ep *ep);

/* Idle GC: the next time an endpoint falls due (0 = none), and removing
 * those that did. */
uint64_t sd_ep_deadline(const struct sd_server *s);
void sd_ep_tick(struct sd_server *s, uint64_t now);

/* 1-63 of [A-Za-z0-9._-], not starting with '.'. */
bool sd_ep_id_ok(const char *id);

/* Writes data to dir/name atomically: a mkstemp file in dir (which the
 * caller created and verified), fsync, rename. 0 or -1 with errno. */
int sd_ep_write_atomic(const char *dir, const char *name, const char *data, size_t len);

#endif
