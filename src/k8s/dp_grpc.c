/* dp_grpc.c: byte buffers <-> protobuf-c messages, deadlines, dispatch. */
#include <stdio.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
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
