/* dp_server.c: one gRPC server (the DevicePlugin service) per resource.
 *
 * Each incoming call is a struct dp_rpc driven by the batches it has in
 * flight (`ops`); it is freed when none is left and it is finished. Unary
 * methods: receive the request, answer (dp_service_call), done.
 * ListAndWatch: receive the Empty, send the list, then send it again each
 * time it changes (one send in flight at a time: `dirty` remembers a change
 * that arrived during a send); a RECV_CLOSE_ON_SERVER batch tells when the
 * kubelet goes away. Stopping the server ends each stream with status OK. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "common/log.h"
#include "common/util.h"
#include "k8s/dp_grpc.h"
#include "k8s/dp_plugin.h"

/* How long a stopping server waits for its calls before cancelling them. */
#define DP_STOP_GRACE_NS (2ull * 1000000000ull)

enum rpc_state {
    RPC_NEW,
    RPC_UNARY_RECV,
    RPC_UNARY_SEND,
    RPC_LIST_START,
    RPC_LIST_IDLE,
    RPC_LIST_SENDING,
    RPC_LIST_ENDING,
    RPC_DEAD,
};

struct dp_rpc {
    struct dp_srv *srv;
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array md;
    grpc_byte_buffer *recv, *send;
    int cancelled;
    grpc_slice status_msg;
    struct dp_op op_new, op_io, op_close;
    unsigned ops;
    enum rpc_state state;
    bool finished; /* nothing more will be started */
    bool md_sent;
    bool dirty;
    bool close_armed; /* a RECV_CLOSE_ON_SERVER batch was started */
    bool closed;      /* ... and completed */
    struct dp_rpc *next, **prevp; /* in srv->streams */
};

struct dp_srv {
    struct dp_slot *slot;
    grpc_server *server;
    struct dp_rpc *streams;
    unsigned ncalls; /* dp_rpc alive, the armed one included */
    struct dp_op op_shut;
    bool stopping, shut_done, cancelled;
    uint64_t stop_at;
};

static void rpc_new_done(struct dp_op *op, bool ok);
static void rpc_io_done(struct dp_op *op, bool ok);
static void rpc_close_done(struct dp_op *op, bool ok);
static void srv_maybe_gone(struct dp_srv *srv);

/* ---- calls ------------------------------------------------------------------- */

static void arm(struct dp_srv *srv)
{
    struct dp_rpc *r = dp_xcalloc(1, sizeof *r);
    r->srv = srv;
    r->op_new.done = rpc_new_done;
    r->op_io.done = rpc_io_done;
    r->op_close.done = rpc_close_done;
    r->status_msg = grpc_empty_slice();
    grpc_call_details_init(&r->details);
    grpc_metadata_array_init(&r->md);
    srv->ncalls++;
    r->ops++;
    grpc_call_error e = grpc_server_request_call(srv->server, &r->call, &r->details, &r->md,
                                                 srv->slot->p->cq, srv->slot->p->cq, &r->op_new);
    if (e != GRPC_CALL_OK) {
        cs_error("%s: grpc_server_request_call: %d", srv->slot->res->name, (int)e);
        r->ops--;
        r->finished = true;
        grpc_call_details_destroy(&r->details);
        grpc_metadata_array_destroy(&r->md);
        free(r);
        srv->ncalls--;
    }
}

static void rpc_free(struct dp_rpc *r)
{
    struct dp_srv *srv = r->srv;
    if (r->prevp) {
        *r->prevp = r->next;
        if (r->next)
            r->next->prevp = r->prevp;
    }
    if (r->call)
        grpc_call_unref(r->call);
    grpc_call_details_destroy(&r->details);
    grpc_metadata_array_destroy(&r->md);
    grpc_byte_buffer_destroy(r->recv);
    grpc_byte_buffer_destroy(r->send);
    grpc_slice_unref(r->status_msg);
    free(r);
    srv->ncalls--;
    srv_maybe_gone(srv);
}

static void rpc_maybe_free(struct dp_rpc *r)
{
    if (r->ops == 0 && (r->finished || r->closed))
        rpc_free(r);
}

static bool start(struct dp_rpc *r, grpc_op *ops, size_t n, struct dp_op *tag)
{
    grpc_call_error e = grpc_call_start_batch(r->call, ops, n, tag, NULL);
    if (e != GRPC_CALL_OK) {
        char *m = grpc_slice_to_c_string(r->details.method);
        cs_warn("%s: %s: grpc_call_start_batch: error %d", r->srv->slot->res->name, m, (int)e);
        gpr_free(m);
        r->finished = true;
        return false;
    }
    r->ops++;
    return true;
}

/* Sends the status (and the answer, if any); the last batch of a call. */
static void finish(struct dp_rpc *r, grpc_status_code code, const char *msg, grpc_byte_buffer *bb)
{
    grpc_op ops[4];
    size_t n = 0;
    memset(ops, 0, sizeof ops);
    if (!r->md_sent)
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    r->md_sent = true;
    if (bb) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = bb;
    }
    grpc_slice_unref(r->status_msg);
    r->status_msg = grpc_slice_from_copied_string(msg ? msg : "");
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = code;
    ops[n++].data.send_status_from_server.status_details = msg ? &r->status_msg : NULL;
    if (!r->close_armed) {
        r->close_armed = true;
        ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        ops[n++].data.recv_close_on_server.cancelled = &r->cancelled;
    }
    grpc_byte_buffer_destroy(r->send);
    r->send = bb;
    start(r, ops, n, &r->op_io);
    r->finished = true;
}

/* ---- unary ---------------------------------------------------------------------- */

static void unary_begin(struct dp_rpc *r)
{
    grpc_op ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_RECV_MESSAGE;
    ops[1].data.recv_message.recv_message = &r->recv;
    r->md_sent = true;
    r->state = RPC_UNARY_RECV;
    start(r, ops, 2, &r->op_io);
}

static void unary_answer(struct dp_rpc *r)
{
    char method[128], msg[512] = "";
    char *m = grpc_slice_to_c_string(r->details.method);
    cs_strlcpy(method, m, sizeof method);
    gpr_free(m);
    grpc_byte_buffer *resp = NULL;
    grpc_status_code code = dp_service_call(r->srv->slot, method, r->recv, &resp, msg, sizeof msg);
    if (code != GRPC_STATUS_OK)
        cs_warn("%s: %s: %s", r->srv->slot->res->name, method, msg);
    r->state = RPC_UNARY_SEND;
    finish(r, code, code == GRPC_STATUS_OK ? NULL : msg, resp);
}

/* ---- ListAndWatch ------------------------------------------------------------------ */

static void list_begin(struct dp_rpc *r)
{
    struct dp_srv *srv = r->srv;
    grpc_op close_op, ops[2];
    memset(&close_op, 0, sizeof close_op);
    memset(ops, 0, sizeof ops);
    close_op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    close_op.data.recv_close_on_server.cancelled = &r->cancelled;
    if (!start(r, &close_op, 1, &r->op_close))
        return;
    r->close_armed = true;
    r->next = srv->streams;
    if (r->next)
        r->next->prevp = &r->next;
    r->prevp = &srv->streams;
    srv->streams = r;
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_RECV_MESSAGE;
    ops[1].data.recv_message.recv_message = &r->recv;
    r->md_sent = true;
    r->state = RPC_LIST_START;
    start(r, ops, 2, &r->op_io);
    cs_info("%s: kubelet is watching the device list", srv->slot->res->name);
}

static void list_send(struct dp_rpc *r)
{
    grpc_op op;
    memset(&op, 0, sizeof op);
    grpc_byte_buffer_destroy(r->send);
    r->send = dp_service_list(r->srv->slot);
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = r->send;
    r->dirty = false;
    r->state = RPC_LIST_SENDING;
    start(r, &op, 1, &r->op_io);
}

static void list_end(struct dp_rpc *r)
{
    r->state = RPC_LIST_ENDING;
    finish(r, GRPC_STATUS_OK, NULL, NULL);
}

/* What a stream does when it may start something new. */
static void list_next(struct dp_rpc *r)
{
    if (r->closed || r->finished)
        return;
    if (r->srv->stopping)
        list_end(r);
    else if (r->dirty || r->state == RPC_LIST_START)
        list_send(r);
    else
        r->state = RPC_LIST_IDLE;
}

/* ---- completions ------------------------------------------------------------------- */

static bool method_is(const struct dp_rpc *r, const char *m)
{
    return grpc_slice_str_cmp(r->details.method, m) == 0;
}

static void rpc_new_done(struct dp_op *op, bool ok)
{
    struct dp_rpc *r = DP_OWNER(op, struct dp_rpc, op_new);
    struct dp_srv *srv = r->srv;
    r->ops--;
    if (!ok) { /* the server is shutting down */
        r->finished = true;
        rpc_maybe_free(r);
        return;
    }
    if (!srv->stopping)
        arm(srv);
    if (method_is(r, DP_M_LIST))
        list_begin(r);
    else if (method_is(r, DP_M_OPTIONS) || method_is(r, DP_M_PREFER) ||
             method_is(r, DP_M_ALLOCATE) || method_is(r, DP_M_PRESTART))
        unary_begin(r);
    else {
        r->state = RPC_UNARY_SEND;
        finish(r, GRPC_STATUS_UNIMPLEMENTED, "no such method", NULL);
    }
    rpc_maybe_free(r);
}

static void rpc_io_done(struct dp_op *op, bool ok)
{
    struct dp_rpc *r = DP_OWNER(op, struct dp_rpc, op_io);
    r->ops--;
    if (!ok && !r->finished) {
        /* The call broke (cancelled, connection lost): stop using it. */
        r->finished = true;
        r->state = RPC_DEAD;
    }
    if (r->state == RPC_UNARY_RECV)
        unary_answer(r);
    else if (r->state == RPC_LIST_START || r->state == RPC_LIST_SENDING)
        list_next(r);
    rpc_maybe_free(r);
}

static void rpc_close_done(struct dp_op *op, bool ok)
{
    struct dp_rpc *r = DP_OWNER(op, struct dp_rpc, op_close);
    r->ops--;
    r->closed = true;
    if (r->prevp) { /* no more updates for it */
        *r->prevp = r->next;
        if (r->next)
            r->next->prevp = r->prevp;
        r->prevp = NULL;
        r->next = NULL;
    }
    if (!r->srv->stopping)
        cs_info("%s: the kubelet stopped watching the device list", r->srv->slot->res->name);
    rpc_maybe_free(r);
}

/* ---- the server ----------------------------------------------------------------------- */

static int bind_socket(struct dp_srv *srv, char *err, size_t cap)
{
    struct dp_slot *s = srv->slot;
    char target[DP_JOIN_MAX + 8];
    /* A file left by a previous run (ours, killed) would make bind fail. */
    if (unlink(s->sock_path) < 0 && errno != ENOENT)
        cs_warn("unlink %s: %s", s->sock_path, strerror(errno));
    dp_unix_target(target, sizeof target, s->sock_path);
    grpc_server_credentials *cr = grpc_insecure_server_credentials_create();
    int port = grpc_server_add_http2_port(srv->server, target, cr);
    grpc_server_credentials_release(cr);
    if (!port) {
        snprintf(err, cap, "cannot listen on %s", s->sock_path);
        return -1;
    }
    return 0;
}

struct dp_srv *dp_srv_start(struct dp_slot *s, char *err, size_t cap)
{
    struct dp_srv *srv = dp_xcalloc(1, sizeof *srv);
    srv->slot = s;
    srv->server = grpc_server_create(NULL, NULL);
    grpc_server_register_completion_queue(srv->server, s->p->cq, NULL);
    if (bind_socket(srv, err, cap) < 0) {
        grpc_server_destroy(srv->server);
        free(srv);
        return NULL;
    }
    grpc_server_start(srv->server);
    struct stat st;
    if (stat(s->sock_path, &st) == 0) {
        s->sock_dev = st.st_dev;
        s->sock_ino = st.st_ino;
    }
    s->p->live++;
    arm(srv);
    cs_info("%s: serving on %s", s->res->name, s->sock_path);
    return srv;
}

void dp_srv_changed(struct dp_srv *srv)
{
    for (struct dp_rpc *r = srv->streams; r; r = r->next) {
        if (r->state == RPC_LIST_IDLE)
            list_send(r);
        else
            r->dirty = true;
    }
}

static void srv_shut_done(struct dp_op *op, bool ok)
{
    struct dp_srv *srv = DP_OWNER(op, struct dp_srv, op_shut);
    srv->shut_done = true;
    srv_maybe_gone(srv);
}

/* The server object goes once its shutdown completed and every call it
 * handed out is freed (grpc_server_destroy requires both). */
static void srv_maybe_gone(struct dp_srv *srv)
{
    if (!srv->shut_done || srv->ncalls)
        return;
    grpc_server_destroy(srv->server);
    srv->slot->p->live--;
    srv->slot->p->ops->srv_gone(srv->slot, srv);
    free(srv);
}

void dp_srv_stop(struct dp_srv *srv)
{
    srv->stopping = true;
    srv->stop_at = cs_now_ns();
    for (struct dp_rpc *r = srv->streams, *next; r; r = next) {
        next = r->next;
        if (r->state == RPC_LIST_IDLE)
            list_end(r);
    }
    srv->op_shut.done = srv_shut_done;
    grpc_server_shutdown_and_notify(srv->server, srv->slot->p->cq, &srv->op_shut);
}

void dp_srv_tick(struct dp_srv *srv, uint64_t now)
{
    if (srv->stopping && !srv->cancelled && now > srv->stop_at + DP_STOP_GRACE_NS) {
        cs_info("%s: cancelling calls still open", srv->slot->res->name);
        grpc_server_cancel_all_calls(srv->server);
        srv->cancelled = true;
    }
}
