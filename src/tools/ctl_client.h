/* ctl_client.h: the control side of the protocol, for cusharectl,
 * cushare-run and the device plugin: connect, say HELLO as a control
 * connection, send requests and collect replies (every request ends with one
 * CTL_DONE). Blocking, with a time limit on every wait so a wedged daemon
 * cannot hang a tool. */
#ifndef CTL_CLIENT_H
#define CTL_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/proto.h"

#define CTL_TIMEOUT_MS 10000

/* A status reply, as received. gpu_mem[i], client_mem[i] and client_tsg[i]
 * belong to gpu[i] and client[i] (all zero from a daemon that does not send
 * them: client_tsg[i].reported is then 0 too). */
struct ctl_status {
    struct cs_msg_ctl_daemon daemon;
    size_t ngpu, nclient;
    struct cs_msg_ctl_gpu *gpu;
    struct cs_msg_ctl_client *client;
    struct cs_msg_ctl_gpu_mem *gpu_mem;
    struct cs_msg_ctl_client_mem *client_mem;
    struct cs_msg_ctl_client_tsg *client_tsg;
    struct cs_msg_ctl_client_lc *client_lc; /* zero from a daemon without CS_HELLO_LC */
    /* zero ("" container) from a daemon without CS_HELLO_LABELS */
    struct cs_msg_ctl_client_labels *client_labels;
    bool have_limits;                  /* a CTL_LIMITS came (a daemon with CS_HELLO_LIMITS) */
    struct cs_msg_ctl_limits limits;
};

/* How long each wait for the daemon may last (ms; <= 0: CTL_TIMEOUT_MS).
 * The device plugin, whose one thread serves the kubelet, waits less. */
void ctl_set_timeout(int ms);

/* Connects to the daemon and completes the handshake. Returns the fd, or
 * -errno with a reason in err (-ENOENT/-ECONNREFUSED: no daemon there). */
int ctl_open(const char *path, char *err, size_t errlen);

/* Sends req and waits for its CTL_DONE. Returns 0 (done filled in) or -1
 * with a reason in err. */
int ctl_request(int fd, const struct cs_msg *req, struct cs_msg_ctl_done *done, char *err,
                size_t errlen);

int ctl_status_get(int fd, struct ctl_status *st, char *err, size_t errlen);
void ctl_status_free(struct ctl_status *st);

#endif
