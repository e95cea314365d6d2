/* tkubelet.c: the Registration and pod-resources servers of the test
 * kubelet (see tkubelet.h): one gRPC server, listening on both sockets.
 * Calls are driven by dp_op callbacks on the kubelet's own completion queue,
 * in its own thread; what tests read and set is under a mutex. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <grpc/grpc_security.h>

#include "k8s/dp_arena.h"
#include "k8s/dp_grpc.h"
#include "k8s/podresources.pb-c.h"
#include "tkubelet.h"

#define TK_MAX_REGS 512
#define TK_MAX_CTRS 64

/* A container of the pod-resources answers (tk_ctr, copied). */
struct tk_pc {
    char *ns, *pod, *container, *resource;
    size_t pod_len;
    char **ids;
    size_t nids;
    unsigned from_call;
};

struct tk_call;

struct tk {
    char dir[512], path[600];
    grpc_completion_queue *cq;
    grpc_server *server;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    V1beta1__RegisterRequest *regs[TK_MAX_REGS];
    unsigned nregs;
    unsigned reject;
    struct dp_op op_shut;
    char podres[600];       /* "" none */
    struct tk_pc ctrs[TK_MAX_CTRS];
    unsigned nctrs;
    unsigned list_calls;    /* answered, failures included */
    unsigned list_fail;
    grpc_status_code list_code;
    size_t list_pad;
};

struct tk_call {
    struct tk *k;
    grpc_call *call;
    grpc_call_details details;
    grpc_metadata_array md;
    grpc_byte_buffer *recv, *send;
    int cancelled;
    grpc_slice msg;
    struct dp_op op_new, op_recv, op_done;
};

static void call_new(struct dp_op *op, bool ok);

static void arm(struct tk *k)
{
    struct tk_call *c = calloc(1, sizeof *c);
    c->k = k;
    c->op_new.done = call_new;
    c->msg = grpc_empty_slice();
    grpc_call_details_init(&c->details);
    grpc_metadata_array_init(&c->md);
    grpc_server_request_call(k->server, &c->call, &c->details, &c->md, k->cq, k->cq, &c->op_new);
}

static void call_free(struct tk_call *c)
{
    if (c->call)
        grpc_call_unref(c->call);
    grpc_call_details_destroy(&c->details);
    grpc_metadata_array_destroy(&c->md);
    grpc_byte_buffer_destroy(c->recv);
    grpc_byte_buffer_destroy(c->send);
    grpc_slice_unref(c->msg);
    free(c);
}

static void call_done(struct dp_op *op, bool ok)
{
    call_free(DP_OWNER(op, struct tk_call, op_done));
}

/* Records the request and decides the answer, as the kubelet's
 * device manager does (version first). */
static grpc_status_code judge(struct tk *k, V1beta1__RegisterRequest *rq, const char **why)
{
    pthread_mutex_lock(&k->mu);
    grpc_status_code code = GRPC_STATUS_OK;
    if (!rq) {
        code = GRPC_STATUS_INVALID_ARGUMENT;
        *why = "malformed RegisterRequest";
    } else if (strcmp(rq->version, "v1beta1")) {
        code = GRPC_STATUS_INVALID_ARGUMENT;
        *why = "unsupported API version";
    } else if (k->reject) {
        k->reject--;
        code = GRPC_STATUS_UNAVAILABLE;
        *why = "test kubelet refuses this registration";
    }
    if (rq && code == GRPC_STATUS_OK && k->nregs < TK_MAX_REGS)
        k->regs[k->nregs++] = rq;
    else if (rq)
        protobuf_c_message_free_unpacked(&rq->base, NULL);
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    return code;
}

static grpc_status_code answer_register(struct tk_call *c, bool ok, const char **why)
{
    V1beta1__RegisterRequest *rq =
        ok ? (V1beta1__RegisterRequest *)dp_pb_unpack(&v1beta1__register_request__descriptor,
                                                      c->recv)
           : NULL;
    grpc_status_code code = judge(c->k, rq, why);
    V1beta1__Empty empty = V1BETA1__EMPTY__INIT;
    if (code == GRPC_STATUS_OK)
        c->send = dp_pb_pack(&empty.base);
    return code;
}

static ProtobufCBinaryData bin(const char *s, size_t n)
{
    return (ProtobufCBinaryData){n, (uint8_t *)s};
}

/* t as one more pod of r (a pod per container: the plugin must not care). */
static void push_ctr(struct dp_arena *a, V1__ListPodResourcesResponse *r, const struct tk_pc *t)
{
    V1__PodResources *p = dp_arena_alloc(a, sizeof *p);
    V1__ContainerResources *c = dp_arena_alloc(a, sizeof *c);
    V1__ContainerDevices *d = dp_arena_alloc(a, sizeof *d);
    v1__pod_resources__init(p);
    v1__container_resources__init(c);
    v1__container_devices__init(d);
    p->name = bin(t->pod, t->pod_len);
    p->namespace_ = bin(t->ns, strlen(t->ns));
    c->name = bin(t->container, strlen(t->container));
    d->resource_name = bin(t->resource, strlen(t->resource));
    d->device_ids = dp_arena_alloc(a, (t->nids + 1) * sizeof *d->device_ids);
    for (d->n_device_ids = 0; d->n_device_ids < t->nids; d->n_device_ids++)
        d->device_ids[d->n_device_ids] = bin(t->ids[d->n_device_ids],
                                             strlen(t->ids[d->n_device_ids]));
    *(V1__ContainerDevices **)dp_arena_push(a, (void ***)&c->devices, &c->n_devices) = d;
    *(V1__ContainerResources **)dp_arena_push(a, (void ***)&p->containers, &p->n_containers) = c;
    *(V1__PodResources **)dp_arena_push(a, (void ***)&r->pod_resources, &r->n_pod_resources) = p;
}

/* The n-th List: the containers listed from it on, and the filler. */
static grpc_byte_buffer *list_answer(struct tk *k, unsigned n)
{
    struct dp_arena a = DP_ARENA_INIT;
    V1__ListPodResourcesResponse r = V1__LIST_POD_RESOURCES_RESPONSE__INIT;
    for (unsigned i = 0; i < k->nctrs; i++)
        if (k->ctrs[i].from_call <= n)
            push_ctr(&a, &r, &k->ctrs[i]);
    char *big = NULL;
    if (k->list_pad) {
        big = malloc(k->list_pad + 1);
        memset(big, 'x', k->list_pad);
        big[k->list_pad] = '\0';
        struct tk_pc pad = {"filler", "filler", "filler", "example.com/pad", 6, &big, 1, 0};
        push_ctr(&a, &r, &pad);
    }
    grpc_byte_buffer *bb = dp_pb_pack(&r.base);
    dp_arena_free(&a);
    free(big);
    return bb;
}

static grpc_status_code answer_list(struct tk_call *c, const char **why)
{
    struct tk *k = c->k;
    pthread_mutex_lock(&k->mu);
    unsigned n = ++k->list_calls;
    grpc_status_code code = GRPC_STATUS_OK;
    if (k->list_fail) {
        k->list_fail--;
        code = k->list_code;
        *why = "the test kubelet fails this List";
    } else {
        c->send = list_answer(k, n);
    }
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
    return code;
}

static void call_recv(struct dp_op *op, bool ok)
{
    struct tk_call *c = DP_OWNER(op, struct tk_call, op_recv);
    const char *why = NULL;
    grpc_status_code code = grpc_slice_str_cmp(c->details.method, DP_M_REGISTER)
                                ? answer_list(c, &why)
                                : answer_register(c, ok, &why);
    grpc_op ops[3];
    memset(ops, 0, sizeof ops);
    size_t n = 0;
    if (code == GRPC_STATUS_OK) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = c->send;
    }
    grpc_slice_unref(c->msg);
    c->msg = grpc_slice_from_copied_string(why ? why : "");
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = code;
    ops[n++].data.send_status_from_server.status_details = why ? &c->msg : NULL;
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
    c->op_done.done = call_done;
    if (grpc_call_start_batch(c->call, ops, n, &c->op_done, NULL) != GRPC_CALL_OK)
        call_free(c);
}

static void call_new(struct dp_op *op, bool ok)
{
    struct tk_call *c = DP_OWNER(op, struct tk_call, op_new);
    if (!ok) {
        call_free(c);
        return;
    }
    arm(c->k);
    grpc_op ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_RECV_MESSAGE;
    ops[1].data.recv_message.recv_message = &c->recv;
    bool list = c->k->podres[0] && !grpc_slice_str_cmp(c->details.method, DP_M_PODRES_LIST);
    if (grpc_slice_str_cmp(c->details.method, DP_M_REGISTER) && !list) {
        /* Neither Register nor List: answer UNIMPLEMENTED right away. */
        c->op_recv.done = call_recv;
        grpc_op st[3];
        memset(st, 0, sizeof st);
        st[0].op = GRPC_OP_SEND_INITIAL_METADATA;
        st[1].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        st[1].data.send_status_from_server.status = GRPC_STATUS_UNIMPLEMENTED;
        st[2].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        st[2].data.recv_close_on_server.cancelled = &c->cancelled;
        c->op_done.done = call_done;
        if (grpc_call_start_batch(c->call, st, 3, &c->op_done, NULL) != GRPC_CALL_OK)
            call_free(c);
        return;
    }
    c->op_recv.done = call_recv;
    if (grpc_call_start_batch(c->call, ops, 2, &c->op_recv, NULL) != GRPC_CALL_OK)
        call_free(c);
}

static void *run(void *arg)
{
    struct tk *k = arg;
    while (dp_cq_dispatch(k->cq, 1000) >= 0)
        ;
    return NULL;
}

static void listen_on(struct tk *k, const char *path)
{
    char target[700];
    dp_unix_target(target, sizeof target, path);
    grpc_server_credentials *cr = grpc_insecure_server_credentials_create();
    int port = grpc_server_add_http2_port(k->server, target, cr);
    grpc_server_credentials_release(cr);
    if (!port) {
        fprintf(stderr, "tkubelet: cannot listen on %s\n", path);
        abort();
    }
}

struct tk *tk_start(const char *dir, const char *sock)
{
    return tk_start_podres(dir, sock, NULL);
}

struct tk *tk_start_podres(const char *dir, const char *sock, const char *podres)
{
    struct tk *k = calloc(1, sizeof *k);
    snprintf(k->dir, sizeof k->dir, "%s", dir);
    snprintf(k->path, sizeof k->path, "%s/%s", dir, sock);
    snprintf(k->podres, sizeof k->podres, "%s", podres ? podres : "");
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cv, NULL);
    k->cq = grpc_completion_queue_create_for_next(NULL);
    k->server = grpc_server_create(NULL, NULL);
    grpc_server_register_completion_queue(k->server, k->cq, NULL);
    listen_on(k, k->path);
    if (podres)
        listen_on(k, podres);
    grpc_server_start(k->server);
    arm(k);
    pthread_create(&k->thread, NULL, run, k);
    return k;
}

static unsigned count_locked(struct tk *k, const char *resource)
{
    unsigned n = 0;
    for (unsigned i = 0; i < k->nregs; i++)
        n += !resource || !strcmp(k->regs[i]->resource_name, resource);
    return n;
}

unsigned tk_register_count(struct tk *k, const char *resource)
{
    pthread_mutex_lock(&k->mu);
    unsigned n = count_locked(k, resource);
    pthread_mutex_unlock(&k->mu);
    return n;
}

static const V1beta1__RegisterRequest *nth_locked(struct tk *k, const char *resource, unsigned n)
{
    for (unsigned i = 0; i < k->nregs; i++)
        if ((!resource || !strcmp(k->regs[i]->resource_name, resource)) && n-- == 0)
            return k->regs[i];
    return NULL;
}

/* timeout_ms from now, for pthread_cond_timedwait. */
static struct timespec deadline_in(int timeout_ms)
{
    struct timespec end;
    clock_gettime(CLOCK_REALTIME, &end);
    end.tv_sec += timeout_ms / 1000;
    end.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (end.tv_nsec >= 1000000000L) {
        end.tv_sec++;
        end.tv_nsec -= 1000000000L;
    }
    return end;
}

const V1beta1__RegisterRequest *tk_wait_register(struct tk *k, const char *resource, unsigned n,
                                                 int timeout_ms)
{
    struct timespec end = deadline_in(timeout_ms);
    pthread_mutex_lock(&k->mu);
    const V1beta1__RegisterRequest *r;
    while (!(r = nth_locked(k, resource, n)))
        if (pthread_cond_timedwait(&k->cv, &k->mu, &end))
            break;
    r = nth_locked(k, resource, n);
    pthread_mutex_unlock(&k->mu);
    return r;
}

void tk_reject(struct tk *k, unsigned n)
{
    pthread_mutex_lock(&k->mu);
    k->reject = n;
    pthread_mutex_unlock(&k->mu);
}

/* ---- pod-resources -------------------------------------------------------------------- */

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

void tk_podres_add(struct tk *k, const struct tk_ctr *c)
{
    pthread_mutex_lock(&k->mu);
    if (k->nctrs == TK_MAX_CTRS)
        abort();
    struct tk_pc *t = &k->ctrs[k->nctrs++];
    t->ns = strdup(c->ns);
    t->pod_len = c->pod_len ? c->pod_len : strlen(c->pod);
    t->pod = dup_n(c->pod, t->pod_len);
    t->container = strdup(c->container);
    t->resource = strdup(c->resource);
    for (t->nids = 0; c->ids[t->nids];)
        t->nids++;
    t->ids = calloc(t->nids + 1, sizeof *t->ids);
    for (size_t i = 0; i < t->nids; i++)
        t->ids[i] = strdup(c->ids[i]);
    t->from_call = c->from_call;
    pthread_mutex_unlock(&k->mu);
}

static void clear_locked(struct tk *k)
{
    for (unsigned i = 0; i < k->nctrs; i++) {
        struct tk_pc *t = &k->ctrs[i];
        for (size_t j = 0; j < t->nids; j++)
            free(t->ids[j]);
        free(t->ids);
        free(t->ns);
        free(t->pod);
        free(t->container);
        free(t->resource);
    }
    k->nctrs = 0;
}

void tk_podres_clear(struct tk *k)
{
    pthread_mutex_lock(&k->mu);
    clear_locked(k);
    pthread_mutex_unlock(&k->mu);
}

void tk_podres_fail(struct tk *k, unsigned n, grpc_status_code code)
{
    pthread_mutex_lock(&k->mu);
    k->list_fail = n;
    k->list_code = code;
    pthread_mutex_unlock(&k->mu);
}

void tk_podres_pad(struct tk *k, size_t bytes)
{
    pthread_mutex_lock(&k->mu);
    k->list_pad = bytes;
    pthread_mutex_unlock(&k->mu);
}

unsigned tk_podres_calls(struct tk *k, unsigned n, int timeout_ms)
{
    struct timespec end = deadline_in(timeout_ms);
    pthread_mutex_lock(&k->mu);
    while (k->list_calls < n)
        if (pthread_cond_timedwait(&k->cv, &k->mu, &end))
            break;
    unsigned got = k->list_calls;
    pthread_mutex_unlock(&k->mu);
    return got;
}

static void shut_done(struct dp_op *op, bool ok)
{
    struct tk *k = DP_OWNER(op, struct tk, op_shut);
    grpc_completion_queue_shutdown(k->cq);
}

/* What the kubelet's device manager does at start: clear the directory. */
static void wipe_sockets(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char path[1024];
    while (d && (e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n > 5 && !strcmp(e->d_name + n - 5, ".sock")) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    if (d)
        closedir(d);
}

void tk_stop(struct tk *k, bool wipe)
{
    k->op_shut.done = shut_done;
    grpc_server_shutdown_and_notify(k->server, k->cq, &k->op_shut);
    grpc_server_cancel_all_calls(k->server);
    pthread_join(k->thread, NULL);
    grpc_server_destroy(k->server);
    grpc_completion_queue_destroy(k->cq);
    unlink(k->path);
    if (k->podres[0])
        unlink(k->podres);
    clear_locked(k);
    if (wipe)
        wipe_sockets(k->dir);
    for (unsigned i = 0; i < k->nregs; i++)
        protobuf_c_message_free_unpacked(&k->regs[i]->base, NULL);
    pthread_mutex_destroy(&k->mu);
    pthread_cond_destroy(&k->cv);
    free(k);
}
