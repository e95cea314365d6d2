/* dp_grpc.c: byte buffers <-> protobuf-c messages, deadlines, dispatch,
 * unary client calls. */
#include <stdio.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "k8s/dp.h"
#include "k8s/dp_grpc.h"

grpc_byte_buffer *dp_pb_pack(const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    grpc_slice s = grpc_slice_malloc(n);
    protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return bb;
}

ProtobufCMessage *dp_pb_unpack(const ProtobufCMessageDescriptor *d, grpc_byte_buffer *bb)
{
    if (!bb)
        return NULL;
    grpc_byte_buffer_reader rd;
    if (!grpc_byte_buffer_reader_init(&rd, bb))
        return NULL;
    grpc_slice s = grpc_byte_buffer_reader_readall(&rd);
    grpc_byte_buffer_reader_destroy(&rd);
    ProtobufCMessage *m =
        protobuf_c_message_unpack(d, NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
    grpc_slice_unref(s);
    return m;
}

gpr_timespec dp_deadline_ms(int64_t ms)
{
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

void dp_unix_target(char *out, size_t cap, const char *path)
{
    snprintf(out, cap, "unix:%s", path);
}

int dp_cq_dispatch(grpc_completion_queue *cq, int64_t timeout_ms)
{
    grpc_event ev = grpc_completion_queue_next(cq, dp_deadline_ms(timeout_ms), NULL);
    if (ev.type == GRPC_QUEUE_SHUTDOWN)
        return -1;
    if (ev.type == GRPC_QUEUE_TIMEOUT)
        return 0;
    struct dp_op *op = ev.tag;
    op->done(op, ev.success != 0);
    return 1;
}

/* ---- unary client calls ------------------------------------------------------------ */

static bool ucall_batch(struct dp_ucall *u)
{
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = u->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &u->md_initial;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &u->recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &u->md_trailing;
    ops[5].data.recv_status_on_client.status = &u->status;
    ops[5].data.recv_status_on_client.status_details = &u->details;
    return grpc_call_start_batch(u->call, ops, 6, &u->op, NULL) == GRPC_CALL_OK;
}

bool dp_ucall_start(struct dp_ucall *u, grpc_completion_queue *cq, const char *path,
                    const char *method, int64_t timeout_ms, int max_recv,
                    grpc_byte_buffer *send, void (*done)(struct dp_op *op, bool ok))
{
    char target[DP_JOIN_MAX + 8];
    memset(u, 0, sizeof *u);
    u->op.done = done;
    u->details = grpc_empty_slice();
    u->send = send;
    grpc_metadata_array_init(&u->md_initial);
    grpc_metadata_array_init(&u->md_trailing);
    dp_unix_target(target, sizeof target, path);
    grpc_arg arg = {.type = GRPC_ARG_INTEGER,
                    .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                    .value.integer = max_recv};
    grpc_channel_args args = {.num_args = max_recv > 0 ? 1 : 0, .args = &arg};
    grpc_channel_credentials *cr = grpc_insecure_credentials_create();
    u->ch = grpc_channel_create(target, cr, &args);
    grpc_channel_credentials_release(cr);
    grpc_slice m = grpc_slice_from_static_string(method);
    u->call = grpc_channel_create_call(u->ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, m, NULL,
                                       dp_deadline_ms(timeout_ms), NULL);
    if (ucall_batch(u))
        return true;
    u->status = GRPC_STATUS_INTERNAL;
    return false;
}

void dp_ucall_cancel(struct dp_ucall *u)
{
    grpc_call_cancel(u->call, NULL);
}

void dp_ucall_free(struct dp_ucall *u)
{
    grpc_call_unref(u->call);
    grpc_channel_destroy(u->ch);
    grpc_byte_buffer_destroy(u->send);
    grpc_byte_buffer_destroy(u->recv);
    grpc_metadata_array_destroy(&u->md_initial);
    grpc_metadata_array_destroy(&u->md_trailing);
    grpc_slice_unref(u->details);
}
