/* dp_podres.c: see dp_podres.h. */
#include "k8s/dp_podres.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpc/support/alloc.h>

#include "common/log.h"
#include "common/proto.h"
#include "common/util.h"
#include "k8s/dp_grpc.h"
#include "k8s/dp_plugin.h"

#define MS 1000000ull
#define PR_FIRST_MS 100u       /* the first List: Allocate's answer is out by then */
#define PR_BACKOFF_MAX_MS 5000u

enum { PUSH_HELLO = 1, PUSH_REQ = 2 };

/* One endpoint whose pod is not named yet. */
struct dp_pr_want {
    struct dp_pr_want *next;
    char res[128];
    char ep[DP_EP_ID_LEN];
    char **ids;
    size_t nids;
    uint64_t give_up, next_at; /* CLOCK_MONOTONIC ns */
    unsigned backoff_ms;
    bool found;                /* who is known: CTL_EP_IDENTITY is due */
    struct dp_pr_who who;
};

struct dp_pr_list {
    struct dp_podres *pr;
    struct dp_ucall u;
};

/* ---- names from the kubelet ---------------------------------------------------------- */

static bool alnum(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* What cushared takes as a pod, namespace or container (endpoint.c's
 * label_ok), byte by byte (a NUL is just a bad byte): Kubernetes names are
 * narrower still, so a real one passes, unless a pod's is over 63. */
static bool name_ok(ProtobufCBinaryData b)
{
    if (b.len == 0 || b.len >= DP_PR_NAME_LEN || !alnum(b.data[0]))
        return false;
    for (size_t i = 0; i < b.len; i++) {
        uint8_t c = b.data[i];
        if (!alnum(c) && c != '.' && c != '_' && c != '-')
            return false;
    }
    return true;
}

static bool bytes_is(ProtobufCBinaryData b, const char *s)
{
    size_t n = strlen(s);
    return b.len == n && memcmp(b.data, s, n) == 0;
}

static bool bytes_same(ProtobufCBinaryData a, ProtobufCBinaryData b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.data, b.data, a.len) == 0);
}

/* b for a log line: at most 63 bytes, anything unprintable as '?'. */
static const char *shown(ProtobufCBinaryData b, char out[DP_PR_NAME_LEN + 4])
{
    size_t n = b.len < DP_PR_NAME_LEN - 1 ? b.len : DP_PR_NAME_LEN - 1, i;
    for (i = 0; i < n; i++)
        out[i] = b.data[i] >= 0x20 && b.data[i] < 0x7f ? (char)b.data[i] : '?';
    strcpy(out + i, b.len > n ? "..." : "");
    return out;
}

static void copy_name(char *dst, ProtobufCBinaryData b)
{
    memcpy(dst, b.data, b.len); /* name_ok: b.len < DP_PR_NAME_LEN */
    dst[b.len] = '\0';
}

/* ---- the match ------------------------------------------------------------------------ */

static bool has_id(ProtobufCBinaryData *v, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (bytes_is(v[i], id))
            return true;
    return false;
}

/* d lists exactly ids: as many, and each of either among the other. */
static bool holds_exactly(const V1__ContainerDevices *d, char *const *ids, size_t nids)
{
    if (d->n_device_ids != nids)
        return false;
    for (size_t i = 0; i < nids; i++)
        if (!has_id(d->device_ids, d->n_device_ids, ids[i]))
            return false;
    for (size_t i = 0; i < d->n_device_ids; i++) {
        bool in = false;
        for (size_t j = 0; j < nids && !in; j++)
            in = bytes_is(d->device_ids[i], ids[j]);
        if (!in)
            return false;
    }
    return true;
}

static bool container_holds(const V1__ContainerResources *c, const char *res, char *const *ids,
                            size_t nids)
{
    for (size_t k = 0; k < c->n_devices; k++) {
        const V1__ContainerDevices *d = c->devices[k];
        if (d && bytes_is(d->resource_name, res) && holds_exactly(d, ids, nids))
            return true;
    }
    return false;
}

static enum dp_pr_match found(const V1__PodResources *p, const V1__ContainerResources *c,
                              struct dp_pr_who *who, char *why, size_t cap)
{
    char a[DP_PR_NAME_LEN + 4], b[DP_PR_NAME_LEN + 4], x[DP_PR_NAME_LEN + 4];
    if (!name_ok(p->name) || !name_ok(p->namespace_) || (c && !name_ok(c->name))) {
        snprintf(why, cap, "the kubelet names its holder pod '%s' namespace '%s' container "
                           "'%s', not all of them names of 1-63 [A-Za-z0-9._-]",
                 shown(p->name, a), shown(p->namespace_, b),
                 c ? shown(c->name, x) : "(several)");
        return DP_PR_INVALID;
    }
    memset(who, 0, sizeof *who);
    copy_name(who->pod, p->name);
    copy_name(who->ns, p->namespace_);
    if (c)
        copy_name(who->container, c->name);
    return DP_PR_FOUND;
}

enum dp_pr_match dp_podres_match(const V1__ListPodResourcesResponse *r, const char *res,
                                 char *const *ids, size_t nids, struct dp_pr_who *who,
                                 char *why, size_t cap)
{
    const V1__PodResources *pod = NULL;
    const V1__ContainerResources *ctr = NULL;
    bool several = false; /* more than one container of the pod: the pod alone is named */
    for (size_t i = 0; i < r->n_pod_resources; i++) {
        const V1__PodResources *p = r->pod_resources[i];
        for (size_t j = 0; p && j < p->n_containers; j++) {
            const V1__ContainerResources *c = p->containers[j];
            if (!c || !container_holds(c, res, ids, nids))
                continue;
            if (pod && (!bytes_same(pod->name, p->name) ||
                        !bytes_same(pod->namespace_, p->namespace_))) {
                char a[DP_PR_NAME_LEN + 4], b[DP_PR_NAME_LEN + 4];
                snprintf(why, cap, "two pods hold its devices, '%s' and '%s'",
                         shown(pod->name, a), shown(p->name, b));
                return DP_PR_CONFLICT;
            }
            several |= ctr && !bytes_same(ctr->name, c->name);
            pod = p;
            ctr = c;
        }
    }
    return pod ? found(pod, several ? NULL : ctr, who, why, cap) : DP_PR_NONE;
}

/* ---- the endpoints looked for ---------------------------------------------------------- */

static void want_free(struct dp_pr_want *w)
{
    for (size_t i = 0; i < w->nids; i++)
        free(w->ids[i]);
    free(w->ids);
    free(w);
}

/* Unlinks and frees w; a push on its way for it is dropped. */
static void want_drop(struct dp_podres *pr, struct dp_pr_want *w)
{
    for (struct dp_pr_want **pp = &pr->wants; *pp; pp = &(*pp)->next) {
        if (*pp == w) {
            *pp = w->next;
            pr->nwants--;
            break;
        }
    }
    if (pr->push.w == w) {
        close(pr->push.fd);
        pr->push = (struct dp_pr_push){.fd = -1};
    }
    want_free(w);
}

static void backoff(struct dp_pr_want *w, uint64_t now)
{
    w->next_at = now + (uint64_t)w->backoff_ms * MS;
    w->backoff_ms = w->backoff_ms * 2 < PR_BACKOFF_MAX_MS ? w->backoff_ms * 2 : PR_BACKOFF_MAX_MS;
}

void dp_podres_want(struct dp_podres *pr, const char *res, char *const *ids, size_t nids)
{
    if (!pr->on || nids == 0)
        return;
    char ep[DP_EP_ID_LEN];
    dp_ep_id(res, ids, nids, ep);
    for (struct dp_pr_want *w = pr->wants, *next; w; w = next) {
        next = w->next;
        if (!strcmp(w->ep, ep))
            want_drop(pr, w);
    }
    if (pr->nwants == DP_PR_WANTS_MAX) {
        cs_warn("%s: endpoint %s: more than %d endpoints wait for their pod; no longer looking "
                "for the oldest one's", res, pr->wants->ep, DP_PR_WANTS_MAX);
        want_drop(pr, pr->wants);
    }
    struct dp_pr_want *w = dp_xcalloc(1, sizeof *w);
    cs_strlcpy(w->res, res, sizeof w->res);
    cs_strlcpy(w->ep, ep, sizeof w->ep);
    w->ids = dp_xcalloc(nids, sizeof *w->ids);
    for (w->nids = 0; w->nids < nids; w->nids++)
        w->ids[w->nids] = dp_xstrdup(ids[w->nids]);
    uint64_t now = cs_now_ns();
    w->give_up = now + (uint64_t)pr->p->cfg->pod_resources_timeout_s * 1000 * MS;
    w->backoff_ms = PR_FIRST_MS;
    backoff(w, now);
    struct dp_pr_want **tail = &pr->wants;
    while (*tail)
        tail = &(*tail)->next;
    *tail = w;
    pr->nwants++;
}

/* ---- List ---------------------------------------------------------------------------- */

/* Once per outage: the reason, and what it costs. */
static void api_failed(struct dp_podres *pr, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void api_failed(struct dp_podres *pr, const char *fmt, ...)
{
    if (pr->api_down)
        return;
    pr->api_down = true;
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    cs_warn("pod-resources: %s; endpoints name no pod (no pod, namespace or container "
            "labels) until it answers. Mount the kubelet's pod-resources directory into "
            "this container, or --pod-resources off to stop asking", why);
}

static void api_ok(struct dp_podres *pr)
{
    if (pr->api_down)
        cs_info("pod-resources: %s answers", pr->p->cfg->pod_resources);
    pr->api_down = false;
}

/* No answer: the lookups that were due wait longer. */
static void retry_due(struct dp_podres *pr, uint64_t now)
{
    for (struct dp_pr_want *w = pr->wants; w; w = w->next)
        if (!w->found && w->next_at <= now)
            backoff(w, now);
}

/* The holder of w, as the answer r says. */
static void look_up(struct dp_podres *pr, struct dp_pr_want *w,
                    const V1__ListPodResourcesResponse *r, uint64_t now)
{
    char why[512];
    switch (dp_podres_match(r, w->res, w->ids, w->nids, &w->who, why, sizeof why)) {
    case DP_PR_FOUND:
        w->found = true;
        w->next_at = now;
        return;
    case DP_PR_NONE:
        if (w->next_at <= now)
            backoff(w, now);
        return;
    default:
        cs_warn("%s: endpoint %s: %s; its pod is not named", w->res, w->ep, why);
        want_drop(pr, w);
        return;
    }
}

static void answered(struct dp_podres *pr, struct dp_pr_list *l, bool ok)
{
    uint64_t now = cs_now_ns();
    V1__ListPodResourcesResponse *r = NULL;
    if (ok && l->u.status == GRPC_STATUS_OK)
        r = (V1__ListPodResourcesResponse *)dp_pb_unpack(
            &v1__list_pod_resources_response__descriptor, l->u.recv);
    if (!r) {
        char *d = grpc_slice_to_c_string(l->u.details);
        if (ok && l->u.status == GRPC_STATUS_OK)
            api_failed(pr, "List on %s answered something that does not parse",
                       pr->p->cfg->pod_resources);
        else
            api_failed(pr, "List on %s failed: status %d%s%s%s", pr->p->cfg->pod_resources,
                       (int)l->u.status, *d ? ": " : "", d,
                       l->u.status == GRPC_STATUS_RESOURCE_EXHAUSTED
                           ? " (answers over 16 MiB are not read)" : "");
        gpr_free(d);
        retry_due(pr, now);
        return;
    }
    api_ok(pr);
    for (struct dp_pr_want *w = pr->wants, *next; w; w = next) {
        next = w->next;
        if (!w->found)
            look_up(pr, w, r, now);
    }
    protobuf_c_message_free_unpacked(&r->base, NULL);
}

static void list_done(struct dp_op *op, bool ok)
{
    struct dp_pr_list *l = DP_OWNER(op, struct dp_pr_list, u.op);
    struct dp_podres *pr = l->pr;
    /* One that stop gave up on answers for nobody. */
    if (pr->list == l) {
        pr->list = NULL;
        answered(pr, l, ok);
    }
    pr->p->live--;
    dp_ucall_free(&l->u);
    free(l);
}

static void list_start(struct dp_podres *pr, uint64_t now)
{
    const char *path = pr->p->cfg->pod_resources;
    struct stat st;
    int e = stat(path, &st) < 0 ? errno : S_ISSOCK(st.st_mode) ? 0 : ENOTSOCK;
    if (e) {
        api_failed(pr, "no socket at %s (%s)", path, strerror(e));
        retry_due(pr, now);
        return;
    }
    struct dp_pr_list *l = dp_xcalloc(1, sizeof *l);
    l->pr = pr;
    pr->list = l;
    pr->p->live++;
    V1__ListPodResourcesRequest rq = V1__LIST_POD_RESOURCES_REQUEST__INIT;
    if (!dp_ucall_start(&l->u, pr->p->cq, path, DP_M_PODRES_LIST, DP_PR_CALL_MS, DP_PR_MAX_RECV,
                        dp_pb_pack(&rq.base), list_done))
        list_done(&l->u.op, false);
}

/* ---- CTL_EP_IDENTITY --------------------------------------------------------------- */

static void push_close(struct dp_podres *pr)
{
    if (pr->push.fd >= 0)
        close(pr->push.fd);
    pr->push = (struct dp_pr_push){.fd = -1};
}

/* The daemon could not be asked (down, restarting, slow): again later,
 * within the want's time. */
static void push_retry(struct dp_podres *pr, struct dp_pr_want *w, uint64_t now, const char *why)
{
    cs_debug("%s: endpoint %s: cannot tell cushared its pod yet: %s", w->res, w->ep, why);
    push_close(pr);
    backoff(w, now);
}

static void push_start(struct dp_podres *pr, struct dp_pr_want *w, uint64_t now)
{
    if (!dp_ep_holds(&pr->p->eps, w->res, w->ep, w->ids, w->nids)) {
        cs_info("%s: endpoint %s: its devices went to another container before its pod "
                "was named", w->res, w->ep);
        want_drop(pr, w);
        return;
    }
    int fd = cs_connect_nonblock(pr->p->cfg->daemon_socket);
    struct cs_msg h = {.type = CS_MSG_HELLO};
    h.u.hello.flags = CS_HELLO_CONTROL;
    h.u.hello.priority = CS_PRIO_NORMAL;
    h.u.hello.weight = 1;
    h.u.hello.proto_min = CS_PROTO_VERSION;
    cs_strlcpy(h.u.hello.name, "cushare-device-plugin", sizeof h.u.hello.name);
    int rc = fd < 0 ? fd : cs_send(fd, &h);
    pr->push = (struct dp_pr_push){fd, PUSH_HELLO, now + DP_EP_TIMEOUT_MS * MS, w};
    if (rc < 0)
        push_retry(pr, w, now, strerror(-rc));
}

static void push_request(struct dp_podres *pr, uint64_t now)
{
    struct dp_pr_want *w = pr->push.w;
    struct cs_msg m = {.type = CS_MSG_CTL_EP_IDENTITY};
    struct cs_msg_ctl_ep_identity *i = &m.u.ctl_ep_identity;
    cs_strlcpy(i->id, w->ep, sizeof i->id);
    cs_strlcpy(i->pod, w->who.pod, sizeof i->pod);
    cs_strlcpy(i->ns, w->who.ns, sizeof i->ns);
    cs_strlcpy(i->container, w->who.container, sizeof i->container);
    int rc = cs_send(pr->push.fd, &m);
    if (rc < 0)
        push_retry(pr, w, now, strerror(-rc));
    else
        pr->push.stage = PUSH_REQ;
}

static void push_answer(struct dp_podres *pr, const struct cs_msg_ctl_done *d)
{
    struct dp_pr_want *w = pr->push.w;
    const struct dp_pr_who *x = &w->who;
    if (d->status == 0)
        cs_info("%s: endpoint %s: pod %s/%s, container %s", w->res, w->ep, x->ns, x->pod,
                x->container[0] ? x->container : "(several: not named)");
    else if (d->status == -ENOENT)
        cs_info("%s: endpoint %s is gone before its pod was named", w->res, w->ep);
    else
        cs_warn("%s: endpoint %s: cushared did not take pod %s/%s: %s", w->res, w->ep, x->ns,
                x->pod, d->text);
    want_drop(pr, w);
}

/* The request went out and an ERROR came back: a cushared older than
 * CTL_EP_IDENTITY (its decoder refuses the type as a protocol error). */
static void push_refused(struct dp_podres *pr, const char *why)
{
    if (!pr->daemon_old)
        cs_warn("cushared closed the connection at CTL_EP_IDENTITY (%s): an older daemon? "
                "Endpoints name no pod until it is upgraded", why);
    pr->daemon_old = true;
    want_drop(pr, pr->push.w);
}

/* Reads what the daemon sent, without waiting, and takes the next step. */
static void push_step(struct dp_podres *pr, uint64_t now)
{
    while (pr->push.fd >= 0) {
        struct cs_msg m;
        const char *why = "a record it cannot decode";
        int rc = cs_recv(pr->push.fd, &m, &why);
        if (rc == -EAGAIN || rc == -EWOULDBLOCK) {
            if (now >= pr->push.deadline)
                push_retry(pr, pr->push.w, now, "cushared did not answer in time");
            return;
        }
        bool req = pr->push.stage == PUSH_REQ;
        if (rc == 1 && !req && m.type == CS_MSG_WELCOME)
            push_request(pr, now);
        else if (rc == 1 && req && m.type == CS_MSG_CTL_DONE)
            push_answer(pr, &m.u.ctl_done);
        else if (rc == 1 && m.type != CS_MSG_ERROR)
            continue; /* nothing else is sent to a control connection; skipped */
        else if (rc == 1 && req)
            push_refused(pr, m.u.error.text);
        else /* closed (a daemon restarting): the request, if it went, is harmless again */
            push_retry(pr, pr->push.w, now,
                       rc == 1    ? m.u.error.text
                       : rc == 0  ? "closed"
                       : rc == -EPROTO ? why
                                       : strerror(-rc));
    }
}

void dp_podres_settle(struct dp_podres *pr)
{
    while (pr->push.fd >= 0) {
        uint64_t now = cs_now_ns();
        struct pollfd p = {.fd = pr->push.fd, .events = POLLIN};
        if (now < pr->push.deadline)
            poll(&p, 1, (int)((pr->push.deadline - now) / MS) + 1);
        push_step(pr, cs_now_ns());
    }
}

/* ---- the loop ------------------------------------------------------------------------ */

/* What waited past --pod-resources-timeout, each said once. */
static void expire(struct dp_podres *pr, uint64_t now)
{
    for (struct dp_pr_want *w = pr->wants, *next; w; w = next) {
        next = w->next;
        if (now < w->give_up || pr->push.w == w)
            continue;
        if (w->found)
            cs_warn("%s: endpoint %s: could not tell cushared its pod %s/%s within %u s",
                    w->res, w->ep, w->who.ns, w->who.pod, pr->p->cfg->pod_resources_timeout_s);
        else
            cs_warn("%s: endpoint %s: no container of pod-resources holds its %zu device(s) "
                    "after %u s; its clients are shown without a pod", w->res, w->ep, w->nids,
                    pr->p->cfg->pod_resources_timeout_s);
        want_drop(pr, w);
    }
}

void dp_podres_tick(struct dp_podres *pr, uint64_t now)
{
    if (!pr->on)
        return;
    push_step(pr, now);
    expire(pr, now);
    bool lookup = false;
    for (struct dp_pr_want *w = pr->wants, *next; w; w = next) {
        next = w->next;
        if (w->next_at > now)
            continue;
        if (!w->found)
            lookup = true;
        else if (pr->push.fd < 0)
            push_start(pr, w, now); /* may drop w */
    }
    if (lookup && !pr->list)
        list_start(pr, now);
}

void dp_podres_init(struct dp_podres *pr, struct dp_plugin *p)
{
    memset(pr, 0, sizeof *pr);
    pr->p = p;
    pr->push.fd = -1;
    pr->on = p->cfg->endpoints && p->cfg->pod_resources[0];
    if (!pr->on)
        return;
    cs_info("pod-resources: asking %s which pod holds each endpoint", p->cfg->pod_resources);
    struct stat st;
    if (stat(p->cfg->pod_resources, &st) < 0) /* said now rather than at the first Allocate */
        api_failed(pr, "no socket at %s (%s)", p->cfg->pod_resources, strerror(errno));
}

void dp_podres_stop(struct dp_podres *pr)
{
    if (pr->list)
        dp_ucall_cancel(&pr->list->u);
    pr->list = NULL; /* it still completes, and frees itself, in list_done */
    push_close(pr);
    pr->on = false;
}

void dp_podres_free(struct dp_podres *pr)
{
    push_close(pr);
    while (pr->wants)
        want_drop(pr, pr->wants);
}
