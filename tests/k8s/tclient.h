/* tclient.h: the kubelet's side of the DevicePlugin service, for tests:
 * unary calls and a ListAndWatch stream over the plugin's unix socket. */
#ifndef TCLIENT_H
#define TCLIENT_H

#include <grpc/grpc.h>

#include "k8s/api.pb-c.h"

struct tc;
struct tc_stream;

struct tc *tc_open(const char *sock_path);
void tc_close(struct tc *c);

/* One unary call, waiting up to 20 s. Returns the status; *resp (free with
 * protobuf_c_message_free_unpacked) is set when the status is OK. */
grpc_status_code tc_call(struct tc *c, const char *method, const ProtobufCMessage *req,
                         const ProtobufCMessageDescriptor *resp_type, ProtobufCMessage **resp,
                         char *msg, size_t cap);

/* ListAndWatch: a thread queues every list the plugin sends. */
struct tc_stream *tc_list_open(struct tc *c);
/* The next list (caller frees), or NULL after timeout_ms or at the end of
 * the stream. */
V1beta1__ListAndWatchResponse *tc_list_next(struct tc_stream *s, int timeout_ms);
/* Whether the stream has ended, and its status; waits up to timeout_ms. */
bool tc_list_ended(struct tc_stream *s, int timeout_ms, grpc_status_code *status);
void tc_list_close(struct tc_stream *s);

/* A list's device `id` and its health ("" if absent). */
const char *tc_health(const V1beta1__ListAndWatchResponse *l, const char *id);
/* The value of an env entry of a container answer (NULL if absent). */
const char *tc_env(const V1beta1__ContainerAllocateResponse *r, const char *key);

#endif
