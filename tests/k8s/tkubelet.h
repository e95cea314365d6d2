/* tkubelet.h: a test kubelet. The Registration side is a real gRPC server
 * (package v1beta1) on <dir>/kubelet.sock that records every RegisterRequest;
 * the DevicePlugin side (tclient.h) calls the plugin's socket as the kubelet
 * does. Like the kubelet, it refuses an API version other than v1beta1.
 * Optionally it also serves the pod-resources API (v1 PodResourcesLister
 * List) on a socket of its own, listing the containers a test adds. */
#ifndef TKUBELET_H
#define TKUBELET_H

#include <stdbool.h>

#include <grpc/status.h>
#include <stddef.h>

#include "k8s/api.pb-c.h"

struct tk;

/* Serves Registration on dir/sock (a thread drives it). */
struct tk *tk_start(const char *dir, const char *sock);
/* The same, and pod-resources List on the socket podres. */
struct tk *tk_start_podres(const char *dir, const char *sock, const char *podres);

/* A container pod-resources List names, with the devices of one resource. */
struct tk_ctr {
    const char *ns, *pod, *container;
    size_t pod_len;          /* 0: strlen(pod); else exactly that many bytes (a NUL inside) */
    const char *resource;
    const char *const *ids;  /* NULL-terminated */
    unsigned from_call;      /* listed from the n-th List call on (1 = the first; 0 too) */
};
/* Adds c (copied) to what List answers. */
void tk_podres_add(struct tk *k, const struct tk_ctr *c);
void tk_podres_clear(struct tk *k);
/* The next n List calls end with status code instead of an answer. */
void tk_podres_fail(struct tk *k, unsigned n, grpc_status_code code);
/* Answers carry a filler container with one device ID of this many bytes
 * (0: none): an answer larger than a client takes. */
void tk_podres_pad(struct tk *k, size_t bytes);
/* Waits up to timeout_ms for the n-th List call to be answered; the number
 * answered so far. */
unsigned tk_podres_calls(struct tk *k, unsigned n, int timeout_ms);
/* The n-th (0-based) registration for resource, waiting up to timeout_ms;
 * NULL on timeout. The request belongs to the kubelet (valid until tk_stop). */
const V1beta1__RegisterRequest *tk_wait_register(struct tk *k, const char *resource, unsigned n,
                                                 int timeout_ms);
unsigned tk_register_count(struct tk *k, const char *resource);
/* Answers the next n registrations with UNAVAILABLE. */
void tk_reject(struct tk *k, unsigned n);
/* Stops serving and removes kubelet.sock; with wipe, also every other
 * socket in the directory, as a restarting kubelet does. */
void tk_stop(struct tk *k, bool wipe);

#endif
