/* dp_register.c: Registration.Register on the kubelet's socket, as an
 * asynchronous call on the plugin's completion queue (the thread never
 * blocks on the kubelet). A fresh channel per attempt: after a kubelet
 * restart an old channel would only report its stale connection. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>

#include "common/log.h"
#include "k8s/api.pb-c.h"
#include "k8s/dp_grpc.h"
#include "k8s/dp_plugin.h"

#define DP_REGISTER_TIMEOUT_MS 10000

struct dp_reg {
    struct dp_slot *slot;
    grpc_channel *ch;
    grpc_call *call;
    grpc_byte_buffer *send, *recv;
    grpc_metadata_array md_initial, md_trailing;
    grpc_status_code status;
    grpc_slice details;
    struct dp_op op;
};

static void reg_free(struct dp_reg *g)
{
    grpc_call_unref(g->call);
    grpc_channel_destroy(g->ch);
    grpc_byte_buffer_destroy(g->send);
    grpc_byte_buffer_destroy(g->recv);
    grpc_metadata_array_destroy(&g->md_initial);
    grpc_metadata_array_destroy(&g->md_trailing);
    grpc_slice_unref(g->details);
    free(g);
}

static void reg_done(struct dp_op *op, bool ok)
{
    struct dp_reg *g = DP_OWNER(op, struct dp_reg, op);
    struct dp_slot *s = g->slot;
    bool good = ok && g->status == GRPC_STATUS_OK;
    /* A call the slot gave up on (dp_reg_cancel) answers for a server that
     * is gone: its outcome no longer means anything. */
    bool current = s->reg == g;
    if (!good && current && !s->p->stopping) {
        char *why = grpc_slice_to_c_string(g->details);
        cs_warn("%s: registration with the kubelet failed: status %d%s%s", s->res->name,
                (int)g->status, *why ? ": " : "", why);
        gpr_free(why);
    }
    s->p->live--;
    if (current)
        s->reg = NULL;
    reg_free(g);
    if (current)
        dp_slot_reg_done(s, good);
}

static grpc_byte_buffer *request(const struct dp_slot *s)
{
    V1beta1__RegisterRequest rq = V1BETA1__REGISTER_REQUEST__INIT;
    V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    o.pre_start_required = s->p->cfg->prestart && s->res->kind == DP_KIND_SLOTS;
    o.get_preferred_allocation_available = 1;
    rq.version = DP_API_VERSION;
    rq.endpoint = (char *)s->res->endpoint;
    rq.resource_name = (char *)s->res->name;
    rq.options = &o;
    return dp_pb_pack(&rq.base);
}

static bool reg_batch(struct dp_reg *g)
{
    grpc_op ops[6];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = g->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &g->md_initial;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &g->recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &g->md_trailing;
    ops[5].data.recv_status_on_client.status = &g->status;
    ops[5].data.recv_status_on_client.status_details = &g->details;
    return grpc_call_start_batch(g->call, ops, 6, &g->op, NULL) == GRPC_CALL_OK;
}

void dp_reg_start(struct dp_slot *s)
{
    char target[DP_JOIN_MAX + 8];
    struct dp_reg *g = dp_xcalloc(1, sizeof *g);
    g->slot = s;
    g->op.done = reg_done;
    g->details = grpc_empty_slice();
    grpc_metadata_array_init(&g->md_initial);
    grpc_metadata_array_init(&g->md_trailing);
    dp_unix_target(target, sizeof target, s->p->kubelet_path);
    grpc_channel_credentials *cr = grpc_insecure_credentials_create();
    g->ch = grpc_channel_create(target, cr, NULL);
    grpc_channel_credentials_release(cr);
    grpc_slice method = grpc_slice_from_static_string(DP_M_REGISTER);
    g->call = grpc_channel_create_call(g->ch, NULL, GRPC_PROPAGATE_DEFAULTS, s->p->cq, method, NULL,
                                       dp_deadline_ms(DP_REGISTER_TIMEOUT_MS), NULL);
    g->send = request(s);
    s->reg = g;
    s->p->live++;
    cs_info("%s: registering with the kubelet (%s)", s->res->name, s->p->kubelet_path);
    if (!reg_batch(g)) {
        /* Not expected with a fresh call; report it as a failed attempt. */
        g->status = GRPC_STATUS_INTERNAL;
        reg_done(&g->op, false);
    }
}

void dp_reg_cancel(struct dp_slot *s)
{
    if (s->reg)
        grpc_call_cancel(s->reg->call, NULL);
    s->reg = NULL; /* it still completes, and frees itself, in reg_done */
}
