/* dp_service.c: the unary methods of the DevicePlugin service, from a
 * request's bytes to an answer's bytes and a status. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "k8s/dp_build.h"
#include "k8s/dp_grpc.h"
#include "k8s/dp_ids.h"
#include "k8s/dp_plugin.h"

/* An absent message (a client that half-closed at once) is the empty one. */
static ProtobufCMessage *unpack(const ProtobufCMessageDescriptor *d, grpc_byte_buffer *req)
{
    static const uint8_t none[1];
    return req ? dp_pb_unpack(d, req) : protobuf_c_message_unpack(d, NULL, 0, none);
}

grpc_byte_buffer *dp_service_list(struct dp_slot *s)
{
    struct dp_arena a = DP_ARENA_INIT;
    V1beta1__ListAndWatchResponse *l = dp_build_list(&a, s->res, &s->p->node);
    grpc_byte_buffer *bb = dp_pb_pack(&l->base);
    dp_arena_free(&a);
    return bb;
}

static grpc_status_code options(struct dp_slot *s, grpc_byte_buffer **resp)
{
    V1beta1__DevicePluginOptions o = V1BETA1__DEVICE_PLUGIN_OPTIONS__INIT;
    o.pre_start_required = s->p->cfg->prestart && s->res->kind == DP_KIND_SLOTS;
    o.get_preferred_allocation_available = 1;
    *resp = dp_pb_pack(&o.base);
    return GRPC_STATUS_OK;
}

static grpc_status_code prefer(struct dp_slot *s, const V1beta1__PreferredAllocationRequest *rq,
                               grpc_byte_buffer **resp)
{
    struct dp_arena a = DP_ARENA_INIT;
    V1beta1__PreferredAllocationResponse o = V1BETA1__PREFERRED_ALLOCATION_RESPONSE__INIT;
    for (size_t i = 0; i < rq->n_container_requests; i++)
        *(V1beta1__ContainerPreferredAllocationResponse **)dp_arena_push(
            &a, (void ***)&o.container_responses, &o.n_container_responses) =
            dp_build_prefer(&a, s->p->cfg, s->res, &s->p->node, rq->container_requests[i]);
    *resp = dp_pb_pack(&o.base);
    dp_arena_free(&a);
    return GRPC_STATUS_OK;
}

/* A slots resource's container gets its own daemon endpoint: NULL in *dir
 * when endpoints are off or not needed, else FAILED_PRECONDITION if the
 * daemon cannot make one (never the daemon's own socket instead). */
static grpc_status_code endpoint_of(struct dp_slot *s, struct dp_arena *a,
                                    const V1beta1__ContainerAllocateRequest *c, char **dir,
                                    char *msg, size_t cap)
{
    *dir = NULL;
    if (!s->p->cfg->endpoints || s->res->kind != DP_KIND_SLOTS)
        return GRPC_STATUS_OK;
    bool gpus[DP_MAX_GPUS] = {false};
    enum dp_alloc_err e = dp_build_resolve(s->res, &s->p->node, c->devices_ids, c->n_devices_ids,
                                           gpus, msg, cap);
    if (e != DP_ALLOC_OK) /* dp_build_alloc says so again, with its status */
        return GRPC_STATUS_OK;
    *dir = dp_arena_alloc(a, DP_PATH_MAX);
    /* An identity already on its way must land before this CREATE, which
     * may start the same endpoint over for another container. */
    dp_podres_settle(&s->p->podres);
    if (dp_ep_acquire(&s->p->eps, s->p->cfg, s->res, &s->p->node, gpus, c->devices_ids,
                      c->n_devices_ids, *dir, DP_PATH_MAX, msg, cap) < 0) {
        cs_error("%s", msg);
        return GRPC_STATUS_FAILED_PRECONDITION;
    }
    /* Its pod shows in pod-resources once this answer is out. */
    dp_podres_want(&s->p->podres, s->res->name, c->devices_ids, c->n_devices_ids);
    return GRPC_STATUS_OK;
}

static grpc_status_code allocate(struct dp_slot *s, const V1beta1__AllocateRequest *rq,
                                 grpc_byte_buffer **resp, char *msg, size_t cap)
{
    struct dp_arena a = DP_ARENA_INIT;
    V1beta1__AllocateResponse o = V1BETA1__ALLOCATE_RESPONSE__INIT;
    grpc_status_code code = GRPC_STATUS_OK;
    for (size_t i = 0; i < rq->n_container_requests && code == GRPC_STATUS_OK; i++) {
        const V1beta1__ContainerAllocateRequest *c = rq->container_requests[i];
        V1beta1__ContainerAllocateResponse *ca = NULL;
        char *ep_dir;
        if ((code = endpoint_of(s, &a, c, &ep_dir, msg, cap)) != GRPC_STATUS_OK)
            break;
        enum dp_alloc_err e = dp_build_alloc(&a, s->p->cfg, s->res, &s->p->node, c->devices_ids,
                                             c->n_devices_ids, ep_dir, &ca, msg, cap);
        if (e == DP_ALLOC_UNKNOWN)
            code = GRPC_STATUS_INVALID_ARGUMENT;
        else if (e == DP_ALLOC_UNHEALTHY)
            code = GRPC_STATUS_FAILED_PRECONDITION;
        else
            *(V1beta1__ContainerAllocateResponse **)dp_arena_push(
                &a, (void ***)&o.container_responses, &o.n_container_responses) = ca;
    }
    if (code == GRPC_STATUS_OK) {
        *resp = dp_pb_pack(&o.base);
        cs_info("%s: allocated %zu container(s)", s->res->name, o.n_container_responses);
    }
    dp_arena_free(&a);
    return code;
}

/* Whether cushared accepts connections: a container started now would
 * otherwise wait (CUSHARE_REQUIRE_DAEMON) for a daemon that is not there.
 * The daemon speaks SOCK_SEQPACKET; an empty connection is harmless to it. */
static bool daemon_answers(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    cs_strlcpy(sa.sun_path, path, sizeof sa.sun_path);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
    if (rc < 0 && errno == EPROTOTYPE) {
        close(fd);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        rc = fd < 0 ? -1 : connect(fd, (struct sockaddr *)&sa, sizeof sa);
    }
    if (fd >= 0)
        close(fd);
    return rc == 0;
}

static grpc_status_code prestart(struct dp_slot *s, const V1beta1__PreStartContainerRequest *rq,
                                 char *msg, size_t cap)
{
    const struct dp_config *c = s->p->cfg;
    for (size_t i = 0; i < rq->n_devices_ids; i++) {
        unsigned k;
        int g = dp_id_parse(s->res, &s->p->node, rq->devices_ids[i], &k);
        if (g < 0) {
            snprintf(msg, cap, "unknown device ID '%s'", rq->devices_ids[i]);
            return GRPC_STATUS_INVALID_ARGUMENT;
        }
        if (c->prestart && !s->p->node.gpu[g].healthy) {
            snprintf(msg, cap, "GPU %s is unhealthy", s->p->node.gpu[g].uuid);
            return GRPC_STATUS_FAILED_PRECONDITION;
        }
    }
    if (c->prestart && c->require_daemon && s->res->kind == DP_KIND_SLOTS &&
        !daemon_answers(c->daemon_socket)) {
        snprintf(msg, cap, "cushared does not answer on %s", c->daemon_socket);
        return GRPC_STATUS_FAILED_PRECONDITION;
    }
    return GRPC_STATUS_OK;
}

static grpc_status_code dispatch(struct dp_slot *s, const char *method, ProtobufCMessage *m,
                                 grpc_byte_buffer **resp, char *msg, size_t cap)
{
    if (!strcmp(method, DP_M_OPTIONS))
        return options(s, resp);
    if (!strcmp(method, DP_M_PREFER))
        return prefer(s, (V1beta1__PreferredAllocationRequest *)m, resp);
    if (!strcmp(method, DP_M_ALLOCATE))
        return allocate(s, (V1beta1__AllocateRequest *)m, resp, msg, cap);
    grpc_status_code code = prestart(s, (V1beta1__PreStartContainerRequest *)m, msg, cap);
    if (code == GRPC_STATUS_OK) {
        V1beta1__PreStartContainerResponse o = V1BETA1__PRE_START_CONTAINER_RESPONSE__INIT;
        *resp = dp_pb_pack(&o.base);
    }
    return code;
}

static const ProtobufCMessageDescriptor *request_type(const char *method)
{
    if (!strcmp(method, DP_M_OPTIONS))
        return &v1beta1__empty__descriptor;
    if (!strcmp(method, DP_M_PREFER))
        return &v1beta1__preferred_allocation_request__descriptor;
    if (!strcmp(method, DP_M_ALLOCATE))
        return &v1beta1__allocate_request__descriptor;
    if (!strcmp(method, DP_M_PRESTART))
        return &v1beta1__pre_start_container_request__descriptor;
    return NULL;
}

grpc_status_code dp_service_call(struct dp_slot *s, const char *method, grpc_byte_buffer *req,
                                 grpc_byte_buffer **resp, char *msg, size_t cap)
{
    const ProtobufCMessageDescriptor *d = request_type(method);
    if (!d) {
        snprintf(msg, cap, "no such method");
        return GRPC_STATUS_UNIMPLEMENTED;
    }
    ProtobufCMessage *m = unpack(d, req);
    if (!m) {
        snprintf(msg, cap, "malformed %s", d->name);
        return GRPC_STATUS_INVALID_ARGUMENT;
    }
    grpc_status_code code = dispatch(s, method, m, resp, msg, cap);
    protobuf_c_message_free_unpacked(m, NULL);
    return code;
}
