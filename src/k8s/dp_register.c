/* dp_register.c: Registration.Register on the kubelet's socket, as an
 * asynchronous call on the plugin's completion queue (the thread never
 * blocks on the kubelet), on a fresh channel per attempt (dp_ucall). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/support/alloc.h>

#include "common/log.h"
#include "k8s/api.pb-c.h"
#include "k8s/dp_grpc.h"
#include "k8s/dp_plugin.h"

#define DP_REGISTER_TIMEOUT_MS 10000

struct dp_reg {
    struct dp_slot *slot;
    struct dp_ucall u;
};

static void reg_free(struct dp_reg *g)
{
    dp_ucall_free(&g->u);
    free(g);
}

static void reg_done(struct dp_op *op, bool ok)
{
    struct dp_reg *g = DP_OWNER(op, struct dp_reg, u.op);
    struct dp_slot *s = g->slot;
    bool good = ok && g->u.status == GRPC_STATUS_OK;
    /* A call the slot gave up on (dp_reg_cancel) answers for a server that
     * is gone: its outcome no longer means anything. */
    bool current = s->reg == g;
    if (!good && current && !s->p->stopping) {
        char *why = grpc_slice_to_c_string(g->u.details);
        cs_warn("%s: registration with the kubelet failed: status %d%s%s", s->res->name,
                (int)g->u.status, *why ? ": " : "", why);
        gpr_free(why);
    }
    s->p->live--;
    if (current)
        s->reg = NULL;
    reg_free(g);
    if (current)
        s->p->ops->reg_done(s, good);
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

void dp_reg_start(struct dp_slot *s)
{
    struct dp_reg *g = dp_xcalloc(1, sizeof *g);
    g->slot = s;
    s->reg = g;
    s->p->live++;
    cs_info("%s: registering with the kubelet (%s)", s->res->name, s->p->kubelet_path);
    if (!dp_ucall_start(&g->u, s->p->cq, s->p->kubelet_path, DP_M_REGISTER,
                        DP_REGISTER_TIMEOUT_MS, 0, request(s), reg_done))
        reg_done(&g->u.op, false); /* not expected with a fresh call: a failed attempt */
}

void dp_reg_cancel(struct dp_slot *s)
{
    if (s->reg)
        dp_ucall_cancel(&s->reg->u);
    s->reg = NULL; /* it still completes, and frees itself, in reg_done */
}
