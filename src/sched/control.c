/* control.c: cusharectl's requests.
 *
 * Every request gets exactly one CTL_DONE (a status reply puts CTL_DAEMON,
 * then CTL_GPU and its CTL_CLIENTs per GPU, before it). Status is open to
 * every local user, like nvidia-smi; changes (set, drain, endpoint and its
 * identity) need the uid the daemon runs as, or root, taken from
 * SO_PEERCRED. */
#include "sched/server.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "sched/metrics.h"

static void done(struct sd_server *s, struct sd_conn *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void done(struct sd_server *s, struct sd_conn *c, int status, const char *fmt, ...)
{
    struct cs_msg d = {.type = CS_MSG_CTL_DONE};
    d.u.ctl_done.status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d.u.ctl_done.text, sizeof d.u.ctl_done.text, fmt, ap);
    va_end(ap);
    sd_conn_send(s, c, &d, true);
}

static bool authorized(struct sd_server *s, struct sd_conn *c, const char *what)
{
    if (c->uid == 0 || c->uid == s->owner_uid)
        return true;
    s->ctr.control_denied++;
    cs_warn("uid %u (pid %u) may not %s: the daemon belongs to uid %u", c->uid, c->pid, what,
            s->owner_uid);
    done(s, c, -EPERM, "permission denied: %s needs uid %u or root (you are uid %u)", what,
         s->owner_uid, c->uid);
    return false;
}

/* ---- status ---------------------------------------------------------------------- */

static void status_daemon(struct sd_server *s, struct sd_conn *c, uint64_t now)
{
    struct cs_msg m = {.type = CS_MSG_CTL_DAEMON};
    struct cs_msg_ctl_daemon *d = &m.u.ctl_daemon;
    const struct sd_config *k = &s->cfg;
    d->pid = (uint32_t)getpid();
    d->uid = s->owner_uid;
    d->epoch = s->epoch;
    d->uptime_ns = now - s->start_ns;
    d->mode = k->mode;
    d->metrics_port = s->metrics ? sd_metrics_port(s->metrics) : 0;
    d->clients = (uint32_t)s->policy.nclients;
    d->connections = (uint32_t)s->nconns;
    d->connections_total = s->ctr.connections_total;
    d->protocol_errors = s->ctr.protocol_errors;
    d->dropped_slow = s->ctr.dropped_slow;
    d->quantum_floor_ms = k->quantum_floor_ms;
    d->quantum_cap_ms = k->quantum_cap_ms;
    d->idle_release_ms = k->idle_release_ms;
    d->revoke_timeout_ms = k->revoke_timeout_ms;
    d->reconnect_grace_ms = k->reconnect_grace_ms;
    d->force_release = k->force_release;
    d->mem_reserve = (uint64_t)k->mem_reserve_mb << 20;
    d->switch_cost_ppm = (uint32_t)(k->switch_cost_target * 1e6 + 0.5);
    sd_conn_send(s, c, &m, true);
}

/* Only to a control connection that announced CS_HELLO_LIMITS. */
static void status_limits(struct sd_server *s, struct sd_conn *c)
{
    struct cs_msg m = {.type = CS_MSG_CTL_LIMITS};
    struct cs_msg_ctl_limits *l = &m.u.ctl_limits;
    const uint64_t *r = s->ctr.refusals;
    l->max_conns_per_uid = s->cfg.max_conns_per_uid;
    l->hello_timeout_ms = s->cfg.hello_timeout_ms;
    l->owner_reserve = SD_OWNER_RESERVE;
    l->node_gpus = (uint32_t)s->node.n;
    l->refused_max_clients = r[SD_REFUSE_CLIENTS];
    l->refused_max_conns_per_uid = r[SD_REFUSE_UID_CONNS];
    l->refused_connections = r[SD_REFUSE_CONNS];
    l->refused_unknown_gpu = r[SD_REFUSE_GPU];
    l->refused_hello_timeout = r[SD_REFUSE_HELLO_TIMEOUT];
    sd_conn_send(s, c, &m, true);
}

static void status_gpu(struct sd_server *s, struct sd_conn *c, const struct sd_gpu *g,
                       uint64_t now)
{
    struct cs_msg m = {.type = CS_MSG_CTL_GPU};
    struct cs_msg_ctl_gpu *o = &m.u.ctl_gpu;
    o->index = g->index;
    o->mode = s->cfg.mode;
    memcpy(o->uuid, g->uuid, CS_UUID_LEN);
    o->clients = (uint32_t)g->n;
    o->draining = g->draining;
    o->holders = sd_gpu_count(g, CS_STATE_HELD) + sd_gpu_count(g, CS_STATE_REVOKING);
    o->waiters = sd_gpu_count(g, CS_STATE_WAITING);
    o->restoring = g->restoring;
    o->quantum_ms = (uint32_t)(sd_gpu_quantum_ns(&s->policy, g) / 1000000);
    o->mem_total = g->mem_total;
    o->mem_reserve = (uint64_t)s->cfg.mem_reserve_mb << 20;
    o->mem_resident = sd_gpu_resident(g);
    o->switches = g->st.switches;
    sd_gpu_times(g, now, &o->idle_ns, &o->busy_ns);
    o->switch_ns = g->switch_ewma_ns;
    o->revoke_timeouts = g->st.revoke_timeouts;
    o->forced_releases = g->st.forced_releases;
    sd_conn_send(s, c, &m, true);

    struct cs_msg mm = {.type = CS_MSG_CTL_GPU_MEM};
    struct cs_msg_ctl_gpu_mem *x = &mm.u.ctl_gpu_mem;
    x->index = g->index;
    x->share_turns = g->st.share_turns < UINT32_MAX ? (uint32_t)g->st.share_turns : UINT32_MAX;
    x->capacity = sd_gpu_capacity(&s->policy, g);
    x->client_reserve = sd_gpu_client_reserve(&s->policy, g);
    x->footprint = sd_gpu_footprint(g);
    x->swapped = sd_gpu_swapped(g);
    x->swap_out_bytes = g->st.swap_out_bytes;
    x->swap_out_ns = g->st.swap_out.sum_ns;
    x->swap_in_bytes = g->st.swap_in_bytes;
    x->swap_in_ns = g->st.swap_in.sum_ns;
    x->evictions = g->st.evictions;
    x->prefetches = g->st.prefetches;
    x->prefetch_bytes = g->st.prefetch_bytes;
    x->prepares = g->st.prepares;
    x->room_made = g->st.room_made;
    x->room_refused = g->st.room_refused;
    x->room_waits = g->st.room_waits;
    sd_conn_send(s, c, &mm, true);
}

/* Only to a control connection that announced CS_HELLO_TSG: an older
 * cusharectl would reject the unknown type and lose the whole reply. */
static void status_member_tsg(struct sd_server *s, struct sd_conn *c, const struct sd_member *mb)
{
    const struct sd_client *cl = mb->client;
    struct cs_msg m = {.type = CS_MSG_CTL_CLIENT_TSG};
    struct cs_msg_ctl_client_tsg *t = &m.u.ctl_client_tsg;
    t->client_id = cl->id;
    t->gpu_index = mb->gpu->index;
    t->reported = cl->tsg_reported;
    t->asked_us = mb->ts_sent;
    if (cl->tsg_reported) {
        t->state = cl->tsg.state;
        t->status = cl->tsg.status;
        t->requested_us = cl->tsg.requested_us;
        t->applied_us = cl->tsg.applied_us;
        t->groups = cl->tsg.groups;
        memcpy(t->reason, cl->tsg.reason, sizeof t->reason);
    }
    sd_conn_send(s, c, &m, true);
}

/* Only to a control connection that announced CS_HELLO_LC. The burst
 * figures are histogram bucket bounds (sd_hist_quantile_ns). */
static void status_member_lc(struct sd_server *s, struct sd_conn *c, const struct sd_member *mb)
{
    struct cs_msg m = {.type = CS_MSG_CTL_CLIENT_LC};
    struct cs_msg_ctl_client_lc *t = &m.u.ctl_client_lc;
    t->client_id = mb->client->id;
    t->gpu_index = mb->gpu->index;
    t->mechanism = sd_lc_mechanism_of(&s->policy, mb);
    t->mode = mb->lc_mode_sent;
    t->param_us = mb->lc_param_sent;
    t->lc_preempted = mb->st.lc_preempted;
    t->bursts = mb->st.bursts;
    t->burst_wait_p50_ns = sd_hist_quantile_ns(&mb->st.burst_wait, 0.5);
    t->burst_wait_p99_ns = sd_hist_quantile_ns(&mb->st.burst_wait, 0.99);
    t->burst_busy_p50_ns = sd_hist_quantile_ns(&mb->st.burst_busy, 0.5);
    t->burst_busy_p99_ns = sd_hist_quantile_ns(&mb->st.burst_busy, 0.99);
    sd_conn_send(s, c, &m, true);
}

/* Only to a control connection that announced CS_HELLO_LABELS. */
static void status_member_labels(struct sd_server *s, struct sd_conn *c,
                                 const struct sd_member *mb)
{
    struct cs_msg m = {.type = CS_MSG_CTL_CLIENT_LABELS};
    m.u.ctl_client_labels.client_id = mb->client->id;
    m.u.ctl_client_labels.gpu_index = mb->gpu->index;
    memcpy(m.u.ctl_client_labels.container, mb->client->info.container,
           sizeof m.u.ctl_client_labels.container);
    sd_conn_send(s, c, &m, true);
}

static void status_member(struct sd_server *s, struct sd_conn *c, const struct sd_member *mb,
                          uint64_t now)
{
    const struct sd_client *cl = mb->client;
    const struct sd_conn *owner = cl->owner;
    struct cs_msg m = {.type = CS_MSG_CTL_CLIENT};
    struct cs_msg_ctl_client *o = &m.u.ctl_client;
    o->client_id = cl->id;
    o->pid = cl->info.pid;
    o->uid = owner ? owner->uid : cl->info.uid;
    o->gpu_index = mb->gpu->index;
    o->priority = cl->info.priority;
    o->weight = cl->info.weight;
    o->state = mb->state;
    o->idle = mb->idle;
    o->flags = (cl->unresponsive ? CS_CTL_CLIENT_UNRESPONSIVE : 0u) |
               (cl->demoted ? CS_CTL_CLIENT_DEMOTED : 0u);
    o->gpu_ns = sd_member_gpu_ns(mb, now);
    o->wait_ns = sd_member_wait_ns(mb, now);
    o->slices = mb->st.slices;
    o->preemptions = mb->st.preemptions;
    o->revokes = mb->st.revokes;
    o->forced = mb->st.forced;
    o->resident = mb->resident;
    o->swapped = mb->swapped;
    o->unswappable = mb->unswappable;
    o->footprint = mb->footprint;
    o->swap_ns = mb->st.swap_ns;
    o->mem_limit = cl->info.mem_limit;
    o->vtime = mb->vtime;
    memcpy(o->name, cl->info.name, sizeof o->name);
    memcpy(o->pod, cl->info.pod, sizeof o->pod);
    memcpy(o->ns, cl->info.ns, sizeof o->ns);
    sd_conn_send(s, c, &m, true);

    struct cs_msg mm = {.type = CS_MSG_CTL_CLIENT_MEM};
    struct cs_msg_ctl_client_mem *x = &mm.u.ctl_client_mem;
    x->client_id = cl->id;
    x->gpu_index = mb->gpu->index;
    x->swap_out_bytes = mb->st.swap_out_bytes;
    x->swap_out_ns = mb->st.swap_ns;
    x->swap_in_bytes = mb->st.swap_in_bytes;
    x->swap_in_ns = mb->st.swap_in_ns;
    x->evictions = mb->st.evictions;
    x->prefetches = mb->st.prefetches;
    x->prepares = mb->st.prepares;
    x->rooms = mb->st.rooms;
    x->rooms_refused = mb->st.rooms_refused;
    x->drain_ns = mb->st.drain_ns;
    uint64_t ovh_mib = mb->overhead >> 20;
    x->overhead_mib = ovh_mib < UINT32_MAX ? (uint32_t)ovh_mib : UINT32_MAX;
    sd_conn_send(s, c, &mm, true);
    if (c->caps & CS_HELLO_TSG)
        status_member_tsg(s, c, mb);
    if (c->caps & CS_HELLO_LC)
        status_member_lc(s, c, mb);
    if (c->caps & CS_HELLO_LABELS)
        status_member_labels(s, c, mb);
}

/* ---- a job's view (CS_HELLO_VIEW) ---------------------------------------------------- */

/* Whether the view connection v may see client cl: the processes of its own
 * job. Through an endpoint, those of the same endpoint, or of the same pod
 * when the allocation named it (never a pod a HELLO claimed); on the main
 * socket, those of its uid that are not on an endpoint, or all of them for
 * the owner and root (status shows them anyway). */
static bool view_sees(const struct sd_server *s, const struct sd_conn *v, const struct sd_client *cl)
{
    const struct sd_conn *o = cl->owner;
    if (!o)
        return false; /* gone, kept for its reconnect grace */
    if (v->on_endpoint) {
        if (!o->on_endpoint)
            return false;
        if (o->ep && o->ep == v->ep)
            return true;
        return v->grant.identity && o->grant.identity && v->grant.pod[0] &&
               !strcmp(v->grant.pod, o->grant.pod) && !strcmp(v->grant.ns, o->grant.ns);
    }
    if (v->uid == 0 || v->uid == s->owner_uid)
        return true;
    return !o->on_endpoint && o->uid == v->uid;
}

/* One GPU as the view shows it: which it is, its size, and the memory of
 * the clients the view sees (nothing of the others). */
static void view_gpu(struct sd_server *s, struct sd_conn *c, const struct sd_gpu *g)
{
    struct cs_msg m = {.type = CS_MSG_CTL_GPU};
    struct cs_msg_ctl_gpu *o = &m.u.ctl_gpu;
    o->index = g->index;
    o->mode = s->cfg.mode;
    memcpy(o->uuid, g->uuid, CS_UUID_LEN);
    o->mem_total = g->mem_total;
    for (size_t i = 0; i < g->n; i++)
        if (view_sees(s, c, g->m[i]->client)) {
            o->clients++;
            o->mem_resident += g->m[i]->resident;
        }
    sd_conn_send(s, c, &m, true);
}

static void view_status(struct sd_server *s, struct sd_conn *c, uint64_t now)
{
    struct cs_msg v = {.type = CS_MSG_CTL_VIEW};
    v.u.ctl_view.pid = c->pid;
    v.u.ctl_view.flags = c->on_endpoint ? CS_CTL_VIEW_ENDPOINT : 0u;
    v.u.ctl_view.mem_limit = c->grant.mem_limit;
    sd_conn_send(s, c, &v, true);
    const struct sd_policy *p = &s->policy;
    for (size_t k = 0; k < p->ngpu; k++) {
        const struct sd_gpu *g = p->gpu[k];
        if (!sd_grant_allows_gpu(&c->grant, g->uuid))
            continue;
        view_gpu(s, c, g);
        for (size_t i = 0; i < g->n; i++)
            if (view_sees(s, c, g->m[i]->client))
                status_member(s, c, g->m[i], now);
    }
    done(s, c, 0, "ok");
}

static void ctl_status(struct sd_server *s, struct sd_conn *c)
{
    /* The reply is queued whole; a reader that left earlier replies unread
     * is dropped rather than given more. */
    if (c->qbytes > SD_OUTQ_BYTES) {
        s->ctr.dropped_slow++;
        cs_warn("control connection %llu (pid %u) does not read its replies; dropping it",
                (unsigned long long)c->id, c->pid);
        c->dead = true;
        return;
    }
    uint64_t now = sd_server_now(s);
    if (c->view) {
        view_status(s, c, now);
        return;
    }
    status_daemon(s, c, now);
    if (c->caps & CS_HELLO_LIMITS)
        status_limits(s, c);
    /* GPUs by index, so the listing is stable. */
    const struct sd_policy *p = &s->policy;
    uint32_t last = 0;
    for (size_t k = 0; k < p->ngpu; k++) {
        const struct sd_gpu *g = NULL;
        for (size_t i = 0; i < p->ngpu; i++) {
            const struct sd_gpu *x = p->gpu[i];
            if ((k == 0 || x->index > last) && (!g || x->index < g->index))
                g = x;
        }
        if (!g)
            break;
        last = g->index;
        status_gpu(s, c, g, now);
        for (size_t i = 0; i < g->n; i++)
            status_member(s, c, g->m[i], now);
    }
    done(s, c, 0, "ok");
}

/* ---- set ---------------------------------------------------------------------------- */

static bool all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

static bool client_matches(const struct sd_client *cl, const char *who)
{
    return sd_override_is_pid(who, cl->info.pid) || strcmp(who, cl->info.name) == 0;
}

static int stage_override(struct sd_server *s, struct sd_batch *b, const char *key,
                          const char *value, char *err, size_t errlen)
{
    struct sd_override o;
    memset(&o, 0, sizeof o);
    int rc = sd_override_parse(key, value, &o, err, errlen);
    if (rc != 0)
        return rc;
    if (all_digits(o.who)) {
        bool found = false;
        for (const struct sd_client *cl = s->policy.clients; cl; cl = cl->next)
            found |= client_matches(cl, o.who);
        if (!found) {
            snprintf(err, errlen, "no client with pid %s", o.who);
            return -1;
        }
    }
    for (size_t i = 0; i < b->nov; i++) {
        if (strcmp(b->ov[i].who, o.who) == 0) {
            struct sd_override *e = &b->ov[i];
            if (o.has_weight) {
                e->has_weight = true;
                e->weight = o.weight;
            }
            if (o.has_priority) {
                e->has_priority = true;
                e->priority = o.priority;
            }
            return 0;
        }
    }
    if (b->nov == SD_BATCH_MAX) {
        snprintf(err, errlen, "too many client settings in one batch (max %d)", SD_BATCH_MAX);
        return -1;
    }
    b->ov[b->nov++] = o;
    return 0;
}

/* Applies a checked batch: knobs first, then per-client settings; name
 * settings are also remembered for clients that register later, pid ones
 * only apply to the live process (pids are reused). A pid's applies in
 * full, a name's within each matching client's grant. */
static void apply_batch(struct sd_server *s, struct sd_conn *c, struct sd_batch *b)
{
    uint64_t now = sd_server_now(s);
    if (b->cfg.log_level != s->cfg.log_level)
        cs_log_set_level((enum cs_log_level)b->cfg.log_level);
    s->cfg = b->cfg;
    for (size_t i = 0; i < b->nov; i++) {
        const struct sd_override *o = &b->ov[i];
        if (!all_digits(o->who) && sd_overrides_put(&s->overrides, o) < 0)
            cs_warn("override table full: client.%s applies to running clients only", o->who);
        for (struct sd_client *cl = s->policy.clients; cl; cl = cl->next) {
            if (!client_matches(cl, o->who))
                continue;
            uint32_t prio = o->has_priority ? o->priority : cl->info.priority;
            uint32_t w = o->has_weight ? o->weight : cl->info.weight;
            /* As at HELLO (sd_dispatch_apply_override): a name's
             * override stays within the client's grant. */
            const struct sd_conn *owner = cl->owner;
            if (!sd_override_is_pid(o->who, cl->info.pid)) {
                if (!owner)
                    continue;
                sd_grant_clamp(&owner->grant, &prio, &w);
            }
            sd_policy_client_update(&s->policy, cl, prio, w, now);
        }
    }
    sd_policy_reconfigure(&s->policy, now);
    cs_info("uid %u (pid %u) applied %zu setting(s)", c->uid, c->pid, b->npairs);
}

static void ctl_set(struct sd_server *s, struct sd_conn *c, const struct cs_msg_ctl_set *m)
{
    if (!authorized(s, c, "change settings")) {
        free(c->batch);
        c->batch = NULL;
        return;
    }
    if (!c->batch) {
        c->batch = calloc(1, sizeof *c->batch);
        if (!c->batch) {
            done(s, c, -ENOMEM, "out of memory");
            return;
        }
        c->batch->cfg = s->cfg;
    }
    struct sd_batch *b = c->batch;
    char err[CS_TEXT_LEN];
    err[0] = '\0';
    int rc = stage_override(s, b, m->key, m->value, err, sizeof err);
    if (rc == 1)
        rc = sd_config_set(&b->cfg, m->key, m->value, true, err, sizeof err);
    if (rc == 0 && !(m->flags & CS_CTL_SET_MORE))
        rc = sd_config_check(&b->cfg, err, sizeof err);
    if (rc != 0) {
        done(s, c, -EINVAL, "%s (nothing applied)", err);
        free(c->batch);
        c->batch = NULL;
        return;
    }
    b->npairs++;
    if (m->flags & CS_CTL_SET_MORE) {
        done(s, c, 0, "staged");
        return;
    }
    apply_batch(s, c, b);
    done(s, c, 0, "applied %zu setting(s)", b->npairs);
    free(c->batch);
    c->batch = NULL;
}

/* ---- drain ---------------------------------------------------------------------------- */

static void ctl_drain(struct sd_server *s, struct sd_conn *c, const struct cs_msg_ctl_drain *m)
{
    const char *what = m->on ? "drain a GPU" : "undrain a GPU";
    if (!authorized(s, c, what))
        return;
    struct sd_gpu *g = sd_policy_gpu_by_text(&s->policy, m->gpu);
    if (!g) {
        done(s, c, -ENOENT, "no GPU '%s' (give its index or UUID as status lists them)", m->gpu);
        return;
    }
    sd_policy_drain(&s->policy, g, m->on != 0, sd_server_now(s));
    char uuid[CS_UUID_STR_LEN];
    cs_uuid_format(g->uuid, uuid);
    done(s, c, 0, "gpu %u (%s) %s", g->index, uuid, m->on ? "draining" : "undrained");
}

/* ---- endpoint ------------------------------------------------------------------------ */

static void ctl_endpoint(struct sd_server *s, struct sd_conn *c,
                         const struct cs_msg_ctl_endpoint *m)
{
    if (!authorized(s, c, m->op == CS_EP_CREATE ? "create an endpoint" : "remove an endpoint"))
        return;
    char text[CS_TEXT_LEN];
    int rc = sd_ep_request(s, m, text, sizeof text);
    done(s, c, rc, "%s", text);
}

/* The plugin's word on which pod an endpoint serves: only the daemon's
 * owner or root (the plugin) may give it, as only they make endpoints. */
static void ctl_ep_identity(struct sd_server *s, struct sd_conn *c,
                            const struct cs_msg_ctl_ep_identity *m)
{
    if (!authorized(s, c, "name an endpoint's pod"))
        return;
    char text[CS_TEXT_LEN];
    int rc = sd_ep_identity(s, m, text, sizeof text);
    done(s, c, rc, "%s", text);
}

void sd_control(struct sd_server *s, struct sd_conn *c, const struct cs_msg *m)
{
    if (c->view && m->type != CS_MSG_CTL_STATUS) {
        done(s, c, -EPERM, "a view connection may only read status");
        return;
    }
    switch (m->type) {
    case CS_MSG_CTL_STATUS:
        ctl_status(s, c);
        return;
    case CS_MSG_CTL_SET:
        ctl_set(s, c, &m->u.ctl_set);
        return;
    case CS_MSG_CTL_DRAIN:
        ctl_drain(s, c, &m->u.ctl_drain);
        return;
    case CS_MSG_CTL_ENDPOINT:
        ctl_endpoint(s, c, &m->u.ctl_endpoint);
        return;
    case CS_MSG_CTL_EP_IDENTITY:
        ctl_ep_identity(s, c, &m->u.ctl_ep_identity);
        return;
    default:
        sd_conn_fail(s, c, "not a control request");
        return;
    }
}
