/* tkubelet.h: a test kubelet. The Registration side is a real gRPC server
 * (package v1beta1) on <dir>/kubelet.sock that records every RegisterRequest;
 * the DevicePlugin side (tclient.h) calls the plugin's socket as the kubelet
 * does. Like the kubelet, it refuses an API version other than v1beta1. */
#ifndef TKUBELET_H
#define TKUBELET_H

#include <stdbool.h>

#include "k8s/api.pb-c.h"

struct tk;

/* Serves Registration on dir/sock (a thread drives it). */
struct tk *tk_start(const char *dir, const char *sock);
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
