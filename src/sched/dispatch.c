/* dispatch.c: what each message means on each kind of connection.
 *
 * A connection starts as NEW and must say HELLO first; the HELLO's CONTROL
 * flag makes it a control connection (cusharectl), otherwise a GPU client.
 * Each kind accepts only its own messages; anything else, including a
 * second HELLO or a daemon-to-client type, is a protocol error that closes
 * that connection. The policy decides; this file only translates. */
#include "sched/server.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>

#include "common/log.h"
#include "common/util.h"
#include "sched/procstat.h"

/* ---- policy -> messages -------------------------------------------------------- */

static void on_grant(void *ctx, struct sd_member *m, uint32_t quantum_ms)
{
    struct sd_server *s = ctx;
    /* Persist before the GRANT leaves: if this daemon dies right after,
     * the next one must know that this client's gate is open. (Other
     * changes are written once per event, by sd_server_settle.) */
    sd_server_save_state(s);
    struct cs_msg g = {.type = CS_MSG_GRANT};
    g.u.grant.slot = m->slot;
    g.u.grant.quantum_ms = quantum_ms;
    g.u.grant.lease_id = m->lease_id;
    sd_conn_send(s, m->client->owner, &g, false);
}

static void on_revoke(void *ctx, struct sd_member *m, uint32_t reason, uint64_t evict_bytes)
{
    struct sd_server *s = ctx;
    struct cs_msg r = {.type = CS_MSG_REVOKE};
    r.u.revoke.slot = m->slot;
    r.u.revoke.reason = reason;
    r.u.revoke.lease_id = m->lease_id;
    r.u.revoke.evict_bytes = evict_bytes;
    sd_conn_send(s, m->client->owner, &r, false);
}

/* EVICT moves memory out; with CS_EVICT_PREPARE it only pins host backing. */
static void send_evict(struct sd_server *s, struct sd_member *m, uint64_t request_id,
                       uint64_t bytes, uint32_t flags)
{
    struct cs_msg e = {.type = CS_MSG_EVICT};
    e.u.evict.slot = m->slot;
    e.u.evict.flags = flags;
    e.u.evict.request_id = request_id;
    e.u.evict.bytes = bytes;
    sd_conn_send(s, m->client->owner, &e, false);
}

static void on_evict(void *ctx, struct sd_member *m, uint64_t request_id, uint64_t bytes)
{
    send_evict(ctx, m, request_id, bytes, 0);
}

static void on_prepare(void *ctx, struct sd_member *m, uint64_t request_id, uint64_t bytes)
{
    send_evict(ctx, m, request_id, bytes, CS_EVICT_PREPARE);
}

static void on_giveback(void *ctx, struct sd_member *m, uint64_t request_id, uint64_t bytes)
{
    send_evict(ctx, m, request_id, bytes, CS_EVICT_GIVEBACK);
}

static void on_prefetch(void *ctx, struct sd_member *m, uint64_t request_id, uint64_t bytes)
{
    struct sd_server *s = ctx;
    struct cs_msg f = {.type = CS_MSG_PREFETCH};
    f.u.prefetch.slot = m->slot;
    f.u.prefetch.request_id = request_id;
    f.u.prefetch.bytes = bytes;
    sd_conn_send(s, m->client->owner, &f, false);
}

static void on_room_reply(void *ctx, struct sd_member *m, uint64_t request_id, int32_t status)
{
    struct sd_server *s = ctx;
    struct cs_msg r = {.type = CS_MSG_ROOM_REPLY};
    r.u.room_reply.slot = m->slot;
    r.u.room_reply.status = status;
    r.u.room_reply.request_id = request_id;
    sd_conn_send(s, m->client->owner, &r, false);
}

/* Only to clients with CS_HELLO_TSG (tslice.c checks it). */
static void on_timeslice(void *ctx, struct sd_member *m, uint32_t us)
{
    struct sd_server *s = ctx;
    struct cs_msg t = {.type = CS_MSG_TIMESLICE};
    t.u.timeslice.slot = m->slot;
    t.u.timeslice.timeslice_us = us;
    sd_conn_send(s, m->client->owner, &t, false);
}

/* Only to clients with CS_HELLO_LC (lcgate.c checks it). */
static void on_lc_mode(void *ctx, struct sd_member *m, uint32_t mode, uint32_t param_us)
{
    struct sd_server *s = ctx;
    struct cs_msg t = {.type = CS_MSG_LC_MODE};
    t.u.lc_mode.slot = m->slot;
    t.u.lc_mode.mode = mode;
    t.u.lc_mode.param_us = param_us;
    sd_conn_send(s, m->client->owner, &t, false);
}

static void on_holders_changed(void *ctx)
{
    struct sd_server *s = ctx;
    s->state_dirty = true; /* written once, at the end of the event */
}

/* Everything sent to m's client was read: nothing left in its connection's
 * queue here, nothing unread in the socket (SIOCOUTQ counts, for a Unix
 * socket, what the peer has not read yet). A client that left has nothing
 * more to read. */
static bool on_delivered(void *ctx, const struct sd_member *m)
{
    (void)ctx;
    const struct sd_conn *c = m->client->owner;
    if (!c || c->dead)
        return true;
    int unread = 0;
    if (c->qbytes)
        return false;
    return ioctl(c->fd, SIOCOUTQ, &unread) == 0 && unread == 0;
}

const struct sd_policy_ops sd_dispatch_ops = {
    .grant = on_grant,
    .revoke = on_revoke,
    .holders_changed = on_holders_changed,
    .evict = on_evict,
    .room_reply = on_room_reply,
    .prepare = on_prepare,
    .prefetch = on_prefetch,
    .timeslice = on_timeslice,
    .lc_mode = on_lc_mode,
    .stopped = sd_proc_member_stopped,
    .delivered = on_delivered,
    .giveback = on_giveback,
};

/* ---- HELLO ------------------------------------------------------------------------- */

/* A pid comes from SO_PEERCRED: its override is the operator's intent and
 * applies in full. A name is the client's own choice, and a tenant could
 * take another's to get its override: a name override stays within the
 * client's grant. */
void sd_dispatch_apply_override(const struct sd_server *s, const struct sd_grant *g,
                                struct sd_client_info *info)
{
    const struct sd_override *o = sd_overrides_find(&s->overrides, info->pid, info->name);
    if (!o)
        return;
    if (o->has_weight)
        info->weight = o->weight;
    if (o->has_priority)
        info->priority = o->priority;
    if (!sd_override_is_pid(o->who, info->pid))
        sd_grant_clamp(g, &info->priority, &info->weight);
}

static void send_welcome(struct sd_server *s, struct sd_conn *c, uint64_t id, uint32_t idle_ms)
{
    struct cs_msg w = {.type = CS_MSG_WELCOME};
    w.u.welcome.client_id = id;
    w.u.welcome.epoch = s->epoch;
    w.u.welcome.idle_ms = idle_ms;
    sd_conn_send(s, c, &w, false);
}

/* A cap was hit (max_clients, or out of memory): ERROR EBUSY, closed. */
static void refuse(struct sd_server *s, struct sd_conn *c, const char *why)
{
    sd_conn_refuse(s, c, SD_REFUSE_CLIENTS, EBUSY, why);
}

/* Pod and namespace name a tenant in status and metrics: from the
 * allocation (an endpoint's grant), or from HELLO when the peer is trusted;
 * anyone else could pass for another tenant, so theirs are dropped. */
static void set_identity(const struct sd_conn *c, const struct cs_msg_hello *h,
                         struct sd_client_info *info)
{
    const struct sd_grant *g = &c->grant;
    if (g->identity) {
        memcpy(info->pod, g->pod, sizeof info->pod);
        memcpy(info->ns, g->ns, sizeof info->ns);
        memcpy(info->container, g->container, sizeof info->container);
    } else if (sd_grant_trusted(g)) {
        memcpy(info->pod, h->pod, sizeof info->pod);
        memcpy(info->ns, h->ns, sizeof info->ns);
    } else if (h->pod[0] || h->ns[0]) {
        cs_debug("connection %llu (uid %u): pod '%s' namespace '%s' of its HELLO dropped "
                 "(%s grant: only an allocation or the daemon's owner names them)",
                 (unsigned long long)c->id, c->uid, h->pod, h->ns, g->source);
    }
}

/* Once per client, at info: what its grant cut from what it asked. */
static void log_cut(const struct sd_conn *c, const struct sd_client *cl,
                    const struct cs_msg_hello *h, uint32_t cut)
{
    if (!cut)
        return;
    const struct sd_client_info *in = &cl->info;
    char asked[32] = "", got[32] = "", a[24], b[24];
    if (cut & SD_GRANT_CUT_MEM) {
        snprintf(asked, sizeof asked, " memory %s",
                 h->mem_limit ? cs_format_size(h->mem_limit, a, sizeof a) : "unlimited");
        snprintf(got, sizeof got, " memory %s", cs_format_size(in->mem_limit, b, sizeof b));
    }
    cs_info("client %llu (uid %u, '%s') asked priority %s weight %u%s: granted %s weight %u%s "
            "(%s grant; see [uid.*] in the configuration)",
            (unsigned long long)cl->id, c->uid, in->name, cs_priority_name((int)h->priority),
            h->weight, asked, cs_priority_name((int)in->priority), in->weight, got,
            c->grant.source);
}

/* Right after WELCOME, to a client that announced CS_HELLO_TERMS. */
static void send_terms(struct sd_server *s, struct sd_conn *c, const struct sd_client_info *in,
                       uint32_t cut)
{
    struct cs_msg t = {.type = CS_MSG_TERMS};
    t.u.terms.priority = in->priority;
    t.u.terms.weight = in->weight;
    t.u.terms.mem_limit = in->mem_limit;
    t.u.terms.flags = cut;
    if (cut)
        sd_grant_describe(&c->grant, c->uid, t.u.terms.text, sizeof t.u.terms.text);
    sd_conn_send(s, c, &t, false);
}

_Static_assert(SD_GRANT_CUT_PRIORITY == CS_TERMS_CUT_PRIORITY &&
                   SD_GRANT_CUT_WEIGHT == CS_TERMS_CUT_WEIGHT &&
                   SD_GRANT_CUT_MEM == CS_TERMS_CUT_MEM,
               "TERMS.flags carries the SD_GRANT_CUT_* bits as they are");

static void on_hello(struct sd_server *s, struct sd_conn *c, const struct cs_msg_hello *h)
{
    c->caps = h->flags &
              (CS_HELLO_TSG | CS_HELLO_LC | CS_HELLO_PIN | CS_HELLO_TERMS | CS_HELLO_LIMITS |
               CS_HELLO_POOL | CS_HELLO_LABELS | CS_HELLO_RESTORED | CS_HELLO_GIVEBACK);
    if ((h->flags & CS_HELLO_CONTROL) && !(h->flags & CS_HELLO_VIEW) && c->on_endpoint) {
        /* A container holds its endpoint; node control is not its business. */
        refuse(s, c, "control is not available on an endpoint");
        return;
    }
    if (h->flags & (CS_HELLO_CONTROL | CS_HELLO_VIEW)) {
        /* A view reads what its own job may see, nothing more (control.c). */
        c->kind = SD_CONN_CONTROL;
        c->view = (h->flags & CS_HELLO_VIEW) != 0;
        send_welcome(s, c, c->id, sd_config_idle_report(&s->cfg));
        return;
    }
    if (s->policy.nclients >= s->cfg.max_clients) {
        refuse(s, c, "too many clients (max_clients)");
        return;
    }
    struct sd_client_info info = {
        .pid = c->pid, /* SO_PEERCRED, never the message */
        .uid = c->uid,
        .priority = h->priority,
        .weight = h->weight,
        .mem_limit = h->mem_limit,
        .reconnect = (h->flags & CS_HELLO_RECONNECT) != 0,
        .tsg = (h->flags & CS_HELLO_TSG) != 0,
        .lc = (h->flags & CS_HELLO_LC) != 0,
        .pin = (h->flags & CS_HELLO_PIN) != 0,
        .restored = (h->flags & CS_HELLO_RESTORED) != 0,
        /* Only a borrower has pieces to give back. */
        .giveback = (h->flags & (CS_HELLO_POOL | CS_HELLO_GIVEBACK)) ==
                    (CS_HELLO_POOL | CS_HELLO_GIVEBACK),
        .tenant = sd_lender_tenant(c),
        .prev_id = h->prev_client_id,
        .idle_ms = sd_config_idle_report(&s->cfg), /* its WELCOME says so */
    };
    memcpy(info.name, h->name, sizeof info.name);
    set_identity(c, h, &info);
    /* The grant first, then the overrides (a pid's may lift it). */
    uint32_t cut = sd_grant_apply(&c->grant, &info);
    sd_dispatch_apply_override(s, &c->grant, &info);
    struct sd_client *cl = sd_policy_client_add(&s->policy, &info, sd_server_now(s));
    if (!cl) {
        refuse(s, c, "out of memory");
        return;
    }
    cl->owner = c;
    c->client = cl;
    c->kind = SD_CONN_CLIENT;
    cs_info("client %llu: pid %u uid %u '%s' priority %s weight %u%s",
            (unsigned long long)cl->id, c->pid, c->uid, info.name,
            cs_priority_name((int)info.priority), info.weight,
            info.reconnect ? " (reconnected)" : "");
    log_cut(c, cl, h, cut);
    send_welcome(s, c, cl->id, cl->info.idle_ms);
    if (c->caps & CS_HELLO_TERMS)
        send_terms(s, c, &cl->info, cut);
}

/* ---- client messages ------------------------------------------------------------ */

/* The container a client is shown with: the one its allocation names
 * (the kubelet's word, through the device plugin), else its LABELS claim
 * where the pod is believed (an allocation that names the pod, or a trusted
 * peer): a claim can then only mislabel a process of its own pod. */
static void show_container(const struct sd_conn *c, struct sd_client *cl)
{
    const struct sd_grant *g = &c->grant;
    const char *v = g->container[0] ? g->container
                    : g->identity || sd_grant_trusted(g) ? c->claim
                                                          : "";
    cs_strlcpy(cl->info.container, v, sizeof cl->info.container);
}

void sd_dispatch_identity_changed(struct sd_conn *c)
{
    struct sd_client *cl = c->client;
    if (!cl)
        return; /* a control or view connection: its grant is all there is */
    memcpy(cl->info.pod, c->grant.pod, sizeof cl->info.pod);
    memcpy(cl->info.ns, c->grant.ns, sizeof cl->info.ns);
    show_container(c, cl);
}

/* LABELS: once, from a client that announced CS_HELLO_LABELS, before its
 * first ATTACH, so that every series of it carries the same labels (until
 * its allocation is named, sd_dispatch_identity_changed). The claim is kept
 * for show_container. */
static int on_labels(struct sd_conn *c, const struct cs_msg_labels *l, const char **why)
{
    struct sd_client *cl = c->client;
    if (!(c->caps & CS_HELLO_LABELS) || c->labeled) {
        *why = c->labeled ? "second LABELS" : "LABELS without CS_HELLO_LABELS";
        return SD_EPROTO;
    }
    for (int s = 0; s < CS_MAX_DEVICES; s++)
        if (cl->slot[s]) {
            *why = "LABELS after ATTACH";
            return SD_EPROTO;
        }
    c->labeled = true;
    memcpy(c->claim, l->container, sizeof c->claim);
    show_container(c, cl);
    if (l->container[0] && strcmp(cl->info.container, l->container) != 0)
        cs_debug("connection %llu (uid %u): container '%s' of its LABELS not shown (%s grant%s)",
                 (unsigned long long)c->id, c->uid, l->container, c->grant.source,
                 c->grant.container[0] ? " names the container" : "");
    return SD_OK;
}

/* An ATTACH of a GPU outside the connection's grant (an endpoint's list). */
static bool gpu_refused(struct sd_server *s, struct sd_conn *c, const uint8_t *uuid)
{
    if (sd_grant_allows_gpu(&c->grant, uuid))
        return false;
    char txt[CS_UUID_STR_LEN], why[CS_TEXT_LEN];
    cs_uuid_format(uuid, txt);
    snprintf(why, sizeof why, "GPU %s is not in this connection's grant (%s)", txt,
             c->grant.source);
    sd_conn_refuse(s, c, SD_REFUSE_GPU, ENODEV, why);
    return true;
}

/* ATTACH names one of the node's GPUs or is refused (ENODEV), so that no
 * client can add a scheduling domain; the GPU's memory size is the node's,
 * and the client's total_mem only compared. The protocol has no refusal of
 * one message: the connection is closed after the ERROR, and the hook backs
 * off before it tries again. */
static void on_attach(struct sd_server *s, struct sd_conn *c, const struct cs_msg_attach *a,
                      uint64_t now)
{
    const char *why = "?";
    char uuid[CS_UUID_STR_LEN];
    cs_uuid_format(a->uuid, uuid);
    if (gpu_refused(s, c, a->uuid))
        return;
    int idx = sd_node_find(&s->node, a->uuid);
    if (idx < 0) {
        char text[128];
        snprintf(text, sizeof text, "GPU %s is not a GPU of this node%s", uuid,
                 s->node.n ? "" : " (no GPU was found on this node)");
        sd_conn_refuse(s, c, SD_REFUSE_GPU, ENODEV, text);
        return;
    }
    struct cs_msg_attach own = *a;
    own.total_mem = s->node.gpu[idx].mem_total;
    if (a->total_mem != own.total_mem)
        cs_debug("client %llu: ATTACH of %s says %llu bytes of memory, the node %llu",
                 (unsigned long long)c->client->id, uuid, (unsigned long long)a->total_mem,
                 (unsigned long long)own.total_mem);
    int rc = sd_policy_attach(&s->policy, c->client, &own, now, &why);
    if (rc == SD_ELIMIT)
        refuse(s, c, why);
    else if (rc != SD_OK)
        sd_conn_fail(s, c, why);
}

static void client_message(struct sd_server *s, struct sd_conn *c, const struct cs_msg *m)
{
    const char *why = "unexpected message";
    uint64_t now = sd_server_now(s);
    struct sd_client *cl = c->client;
    int rc;
    switch (m->type) {
    case CS_MSG_ATTACH:
        on_attach(s, c, &m->u.attach, now);
        return;
    case CS_MSG_ACQUIRE:
        rc = sd_policy_acquire(&s->policy, cl, m->u.acquire.slot, now, &why);
        break;
    case CS_MSG_RELEASE:
        rc = sd_policy_release(&s->policy, cl, &m->u.release, now, &why);
        break;
    case CS_MSG_USAGE:
        rc = sd_policy_usage(&s->policy, cl, &m->u.usage, now, &why);
        break;
    case CS_MSG_ROOM:
        rc = sd_policy_room(&s->policy, cl, &m->u.room, now, &why);
        break;
    case CS_MSG_EVICTED:
        rc = sd_policy_evicted(&s->policy, cl, &m->u.evicted, now, &why);
        break;
    case CS_MSG_RESTORED:
        rc = sd_policy_restored(&s->policy, cl, &m->u.restored, now, &why);
        break;
    case CS_MSG_PREFETCHED:
        rc = sd_policy_prefetched(&s->policy, cl, &m->u.prefetched, now, &why);
        break;
    case CS_MSG_TSG_STATE:
        rc = sd_policy_tsg_state(&s->policy, cl, &m->u.tsg_state, now, &why);
        break;
    case CS_MSG_LC_BURST:
        rc = sd_policy_lc_burst(&s->policy, cl, &m->u.lc_burst, &why);
        break;
    case CS_MSG_PINNED:
        rc = sd_policy_pinned(&s->policy, cl, &m->u.pinned, now, &why);
        break;
    case CS_MSG_BORROW:
        rc = sd_lender_borrow(s, c, &m->u.borrow, &why) ? SD_OK : SD_EPROTO;
        break;
    case CS_MSG_RETURN:
        rc = sd_lender_return(s, c, &m->u.ret, &why) ? SD_OK : SD_EPROTO;
        break;
    case CS_MSG_LABELS:
        rc = on_labels(c, &m->u.labels, &why);
        break;
    default:
        rc = SD_EPROTO;
        why = m->type >= CS_MSG_CTL_STATUS ? "control message on a client connection"
                                           : "daemon-to-client message sent by a client";
        break;
    }
    if (rc == SD_ELIMIT)
        refuse(s, c, why);
    else if (rc != SD_OK)
        sd_conn_fail(s, c, why);
}

void sd_dispatch(struct sd_server *s, struct sd_conn *c, const struct cs_msg *m)
{
    if (m->type == CS_MSG_HELLO) {
        if (c->kind != SD_CONN_NEW) {
            sd_conn_fail(s, c, "second HELLO");
            return;
        }
        on_hello(s, c, &m->u.hello);
        sd_conn_greeted(s, c); /* answered: no HELLO deadline any more */
        return;
    }
    switch (c->kind) {
    case SD_CONN_NEW:
        sd_conn_fail(s, c, "message before HELLO");
        return;
    case SD_CONN_CLIENT:
        client_message(s, c, m);
        return;
    case SD_CONN_CONTROL:
        sd_control(s, c, m);
        return;
    }
}
