/* tclient.c: see tclient.h. Unary calls use a queue of their own; a
 * stream has a thread that drives its queue and hands lists over under a
 * mutex. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>

#include "k8s/dp_grpc.h"
#include "tclient.h"

#define TC_TIMEOUT_MS 20000
#define TC_QMAX 256

struct tc {
    grpc_channel *ch;
};

struct tc *tc_open(const char *sock_path)
{
    struct tc *c = calloc(1, sizeof *c);
    char target[1024];
    dp_unix_target(target, sizeof target, sock_path);
    grpc_channel_credentials *cr = grpc_insecure_credentials_create();
    c->ch = grpc_channel_create(target, cr, NULL);
    grpc_channel_credentials_release(cr);
    return c;
}

void tc_close(struct tc *c)
{
    grpc_channel_destroy(c->ch);
    free(c);
}

static void drain_destroy(grpc_completion_queue *cq)
{
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
}

grpc_status_code tc_call(struct tc *c, const char *method, const ProtobufCMessage *req,
                         const ProtobufCMessageDescriptor *resp_type, ProtobufCMessage **resp,
                         char *msg, size_t cap)
{
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    grpc_call *call = grpc_channel_create_call(c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                               grpc_slice_from_static_string(method), NULL,
                                               dp_deadline_ms(TC_TIMEOUT_MS), NULL);
    grpc_byte_buffer *send = dp_pb_pack(req), *recv = NULL;
    grpc_metadata_array mi, mt;
    grpc_metadata_array_init(&mi);
    grpc_metadata_array_init(&mt);
    grpc_status_code st = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &mi;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &mt;
    ops[5].data.recv_status_on_client.status = &st;
    ops[5].data.recv_status_on_client.status_details = &details;
    /* The only event on this queue is the batch's, with its deadline. */
    int tag;
    if (grpc_call_start_batch(call, ops, 6, &tag, NULL) == GRPC_CALL_OK)
        grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    char *d = grpc_slice_to_c_string(details);
    snprintf(msg, cap, "%s", d);
    gpr_free(d);
    *resp = st == GRPC_STATUS_OK ? dp_pb_unpack(resp_type, recv) : NULL;
    if (st == GRPC_STATUS_OK && !*resp)
        st = GRPC_STATUS_DATA_LOSS; /* an answer that does not parse */
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&mi);
    grpc_metadata_array_destroy(&mt);
    grpc_byte_buffer_destroy(send);
    grpc_byte_buffer_destroy(recv);
    grpc_call_unref(call);
    drain_destroy(cq);
    return st;
}

/* ---- ListAndWatch ----------------------------------------------------------------- */

struct tc_stream {
    grpc_completion_queue *cq;
    grpc_call *call;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    V1beta1__ListAndWatchResponse *q[TC_QMAX];
    unsigned head, tail;
    bool ended;
    grpc_status_code status;
    grpc_slice details;
    grpc_byte_buffer *send, *recv;
    grpc_metadata_array mi, mt;
    struct dp_op op_start, op_msg, op_status;
    unsigned ops;
};

static void arm_recv(struct tc_stream *s)
{
    grpc_op op;
    memset(&op, 0, sizeof op);
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &s->recv;
    if (grpc_call_start_batch(s->call, &op, 1, &s->op_msg, NULL) == GRPC_CALL_OK)
        s->ops++;
}

static void on_start(struct dp_op *op, bool ok)
{
    struct tc_stream *s = DP_OWNER(op, struct tc_stream, op_start);
    s->ops--;
    if (ok)
        arm_recv(s);
}

static void on_msg(struct dp_op *op, bool ok)
{
    struct tc_stream *s = DP_OWNER(op, struct tc_stream, op_msg);
    s->ops--;
    if (!ok || !s->recv)
        return; /* the end of the stream: the status follows */
    ProtobufCMessage *m = dp_pb_unpack(&v1beta1__list_and_watch_response__descriptor, s->recv);
    grpc_byte_buffer_destroy(s->recv);
    s->recv = NULL;
    pthread_mutex_lock(&s->mu);
    if (m && s->tail - s->head < TC_QMAX)
        s->q[s->tail++ % TC_QMAX] = (V1beta1__ListAndWatchResponse *)m;
    else if (m)
        protobuf_c_message_free_unpacked(m, NULL);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    arm_recv(s);
}

static void on_status(struct dp_op *op, bool ok)
{
    struct tc_stream *s = DP_OWNER(op, struct tc_stream, op_status);
    s->ops--;
    pthread_mutex_lock(&s->mu);
    s->ended = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

static void *stream_run(void *arg)
{
    struct tc_stream *s = arg;
    while (s->ops)
        dp_cq_dispatch(s->cq, 1000);
    return NULL;
}

static void stream_batches(struct tc_stream *s)
{
    V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
    grpc_op ops[4], st;
    memset(ops, 0, sizeof ops);
    memset(&st, 0, sizeof st);
    s->send = dp_pb_pack(&empty.base);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = s->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &s->mi;
    st.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    st.data.recv_status_on_client.trailing_metadata = &s->mt;
    st.data.recv_status_on_client.status = &s->status;
    st.data.recv_status_on_client.status_details = &s->details;
    if (grpc_call_start_batch(s->call, &st, 1, &s->op_status, NULL) == GRPC_CALL_OK)
        s->ops++;
    if (grpc_call_start_batch(s->call, ops, 4, &s->op_start, NULL) == GRPC_CALL_OK)
        s->ops++;
}

struct tc_stream *tc_list_open(struct tc *c)
{
    struct tc_stream *s = calloc(1, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->details = grpc_empty_slice();
    grpc_metadata_array_init(&s->mi);
    grpc_metadata_array_init(&s->mt);
    s->op_start.done = on_start;
    s->op_msg.done = on_msg;
    s->op_status.done = on_status;
    s->cq = grpc_completion_queue_create_for_next(NULL);
    s->call = grpc_channel_create_call(c->ch, NULL, GRPC_PROPAGATE_DEFAULTS, s->cq,
                                       grpc_slice_from_static_string(DP_M_LIST), NULL,
                                       gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    stream_batches(s);
    pthread_create(&s->thread, NULL, stream_run, s);
    return s;
}

static void deadline(struct timespec *end, int timeout_ms)
{
    clock_gettime(CLOCK_REALTIME, end);
    end->tv_sec += timeout_ms / 1000;
    end->tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (end->tv_nsec >= 1000000000L) {
        end->tv_sec++;
        end->tv_nsec -= 1000000000L;
    }
}

V1beta1__ListAndWatchResponse *tc_list_next(struct tc_stream *s, int timeout_ms)
{
    struct timespec end;
    deadline(&end, timeout_ms);
    V1beta1__ListAndWatchResponse *l = NULL;
    pthread_mutex_lock(&s->mu);
    while (s->head == s->tail && !s->ended)
        if (pthread_cond_timedwait(&s->cv, &s->mu, &end))
            break;
    if (s->head != s->tail)
        l = s->q[s->head++ % TC_QMAX];
    pthread_mutex_unlock(&s->mu);
    return l;
}

bool tc_list_ended(struct tc_stream *s, int timeout_ms, grpc_status_code *status)
{
    struct timespec end;
    deadline(&end, timeout_ms);
    pthread_mutex_lock(&s->mu);
    while (!s->ended)
        if (pthread_cond_timedwait(&s->cv, &s->mu, &end))
            break;
    bool e = s->ended;
    if (e && status)
        *status = s->status;
    pthread_mutex_unlock(&s->mu);
    return e;
}

void tc_list_close(struct tc_stream *s)
{
    grpc_call_cancel(s->call, NULL);
    pthread_join(s->thread, NULL);
    while (s->head != s->tail)
        protobuf_c_message_free_unpacked(&s->q[s->head++ % TC_QMAX]->base, NULL);
    grpc_call_unref(s->call);
    drain_destroy(s->cq);
    grpc_byte_buffer_destroy(s->send);
    grpc_byte_buffer_destroy(s->recv);
    grpc_metadata_array_destroy(&s->mi);
    grpc_metadata_array_destroy(&s->mt);
    grpc_slice_unref(s->details);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

const char *tc_health(const V1beta1__ListAndWatchResponse *l, const char *id)
{
    for (size_t i = 0; i < l->n_devices; i++)
        if (!strcmp(l->devices[i]->id, id))
            return l->devices[i]->health;
    return "";
}

const char *tc_env(const V1beta1__ContainerAllocateResponse *r, const char *key)
{
    for (size_t i = 0; i < r->n_envs; i++)
        if (!strcmp(r->envs[i]->key, key))
            return r->envs[i]->value;
    return NULL;
}
