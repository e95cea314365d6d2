/* dp_grpc.h: the glue between gRPC's C core and protobuf-c, shared by the
 * plugin and its test kubelet.
 *
 * Every batch started on a completion queue carries a struct dp_op as its
 * tag; whoever drives the queue calls op->done(op, ok) for each event. An
 * op is embedded in the object it belongs to (DP_OWNER gets that back), so
 * there is no tag table and nothing to look up. */
#ifndef DP_GRPC_H
#define DP_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>

struct dp_op {
    void (*done)(struct dp_op *op, bool ok);
};

#define DP_OWNER(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* A unary call of a client on a channel of its own, to a unix socket:
 * embed it, start it, and op.done runs on the completion queue when the
 * call is over, with status and details filled (and recv, if an answer
 * came); then dp_ucall_free. A fresh channel per call: after a kubelet
 * restart an old channel would only report its stale connection. */
struct dp_ucall {
    grpc_channel *ch;
    grpc_call *call;
    grpc_byte_buffer *send, *recv;
    grpc_metadata_array md_initial, md_trailing;
    grpc_status_code status;
    grpc_slice details;
    struct dp_op op;
};

/* Calls method on the socket at path with a deadline of timeout_ms,
 * sending send (the call owns it from now on). max_recv > 0 caps the size
 * of the answer: a larger one ends the call RESOURCE_EXHAUSTED without
 * being read. False if the call could not start: then status is INTERNAL
 * and done will not run. */
bool dp_ucall_start(struct dp_ucall *u, grpc_completion_queue *cq, const char *path,
                    const char *method, int64_t timeout_ms, int max_recv,
                    grpc_byte_buffer *send, void (*done)(struct dp_op *op, bool ok));
void dp_ucall_cancel(struct dp_ucall *u);
void dp_ucall_free(struct dp_ucall *u);

/* gRPC method paths of the v1beta1 API. */
#define DP_M_REGISTER "/v1beta1.Registration/Register"
#define DP_M_OPTIONS "/v1beta1.DevicePlugin/GetDevicePluginOptions"
#define DP_M_LIST "/v1beta1.DevicePlugin/ListAndWatch"
#define DP_M_PREFER "/v1beta1.DevicePlugin/GetPreferredAllocation"
#define DP_M_ALLOCATE "/v1beta1.DevicePlugin/Allocate"
#define DP_M_PRESTART "/v1beta1.DevicePlugin/PreStartContainer"
/* ... and of the kubelet's pod-resources API (v1). */
#define DP_M_PODRES_LIST "/v1.PodResourcesLister/List"

/* A new byte buffer holding m, serialized. */
grpc_byte_buffer *dp_pb_pack(const ProtobufCMessage *m);
/* m parsed from bb (free with protobuf_c_message_free_unpacked), or NULL if
 * bb is NULL or not a valid d. */
ProtobufCMessage *dp_pb_unpack(const ProtobufCMessageDescriptor *d, grpc_byte_buffer *bb);

gpr_timespec dp_deadline_ms(int64_t ms);
/* "unix:" + path, for channels and listening ports. */
void dp_unix_target(char *out, size_t cap, const char *path);

/* Waits up to timeout_ms for one event and runs its op. Returns 1 after an
 * event, 0 on timeout, -1 once the queue is shut down and drained. */
int dp_cq_dispatch(grpc_completion_queue *cq, int64_t timeout_ms);

#endif
