/* lcgate.c: latency-critical (high) jobs beside best-effort (lower-class)
 * ones when channel-group timeslices cannot protect them (issue 7; the
 * hook's side is in src/hook/bound.c and burst.c, docs/priority.md).
 *
 * In shared mode holders co-run, and the GPU time-slices their contexts
 * with a slice of about 2 ms: an LC kernel launched while a BE job is busy
 * waits for the rest of the BE slice. tslice.c shortens the BE job's slice
 * where its hook can (CS_HELLO_TSG, mechanism ready). Where it cannot (no
 * TSG support, a driver that refused, lc_mechanism = gate), this file gates
 * instead:
 *
 *   - while a high member wants or holds the GPU, every gated member that
 *     holds it is revoked (its gate closes at once; it drains), and gated
 *     waiters are passed over. The high member is granted without waiting
 *     for that drain when the memory fits: its first kernels run beside the
 *     BE job's last ones, which is what the hardware does anyway;
 *   - the drain is short because a gated member keeps at most lc_window_us
 *     of work in flight whenever a high member is attached (LC_MODE
 *     BOUNDED: the hook throttles its submissions with events);
 *   - the high member gives the lease back as soon as its burst is done
 *     (LC_MODE RELEASE_IDLE: its hook waits for the GPU, lingers
 *     lc_linger_us for more work, then releases), so the BE job gets the
 *     GPU back between requests instead of after idle_release_ms. Its next
 *     submission asks again: the switch starts with its first submission
 *     (an input copy included), the automatic early hint.
 *
 * "Gated" is decided per member at every decision: lower class than high,
 * shared mode, and lc_mechanism gate, or auto without a usable timeslice
 * mechanism (announced CS_HELLO_TSG, reported ready or active, and
 * be_timeslice_us not 0). A client whose TSG_STATE turns unavailable is
 * gated from the next decision on. LC_MODE is sent on change only and only
 * to clients that announced CS_HELLO_LC; an older client is still gated
 * (its revoke drains whatever it queued) but keeps its plain behaviour.
 */
#include "sched/policy_int.h"

#include "common/log.h"

/* Whether timeslices can keep m out of an LC job's way: it announced
 * CS_HELLO_TSG and has not reported the mechanism off or unavailable. A
 * client reports UNPROBED until its first context's channel groups are
 * seen, and turns UNAVAILABLE if it submits work without any being seen
 * (client.c), so "not yet known" does not last past its first work. */
static bool tsg_usable(const struct sd_policy *p, const struct sd_member *m)
{
    const struct sd_client *c = m->client;
    if (p->cfg->be_timeslice_us == 0 || !c->info.tsg)
        return false;
    return !c->tsg_reported || c->tsg.state == CS_TSG_MECH_UNPROBED ||
           c->tsg.state == CS_TSG_MECH_READY || c->tsg.state == CS_TSG_MECH_ACTIVE;
}

bool sd_lc_gated(const struct sd_policy *p, const struct sd_member *m)
{
    const struct sd_config *cfg = p->cfg;
    if (!sd_mode_coruns(cfg) || m->client->info.priority == CS_PRIO_HIGH)
        return false;
    switch (cfg->lc_mechanism) {
    case SD_LC_GATE:
        return true;
    case SD_LC_AUTO:
        return !tsg_usable(p, m);
    default:
        return false;
    }
}

static bool is_high(const struct sd_member *m)
{
    return m->client->info.priority == CS_PRIO_HIGH;
}

/* A high member is attached to g (whatever it is doing). */
static bool high_present(const struct sd_gpu *g)
{
    for (size_t i = 0; i < g->n; i++)
        if (is_high(g->m[i]))
            return true;
    return false;
}

bool sd_lc_active(const struct sd_policy *p, const struct sd_gpu *g)
{
    if (!sd_mode_coruns(p->cfg))
        return false;
    for (size_t i = 0; i < g->n; i++) {
        const struct sd_member *m = g->m[i];
        if (is_high(m) && (m->state == CS_STATE_WAITING || sd_is_holder(m)))
            return true;
    }
    return false;
}

/* A gated member is attached to g. Not only while it wants the GPU: a BE
 * job goes IDLE for a moment between its RELEASE and its next ACQUIRE, and
 * an LC job told NONE then would keep its lease for idle_release_ms. */
static bool gated_present(const struct sd_policy *p, const struct sd_gpu *g)
{
    for (size_t i = 0; i < g->n; i++)
        if (sd_lc_gated(p, g->m[i]))
            return true;
    return false;
}

void sd_lc_decide(struct sd_policy *p, struct sd_gpu *g, uint64_t now)
{
    if (!sd_lc_active(p, g))
        return;
    for (size_t i = 0; i < g->n; i++) {
        struct sd_member *m = g->m[i];
        /* Not during its class's share turn (share.c): a high job that
         * always has work would otherwise gate it for ever. */
        if (m->state == CS_STATE_HELD && sd_lc_gated(p, m) &&
            !sd_share_protected(g, m, now))
            sd_lc_revoke(p, m, now);
    }
}

struct sd_member *sd_lc_best_waiter(const struct sd_policy *p, const struct sd_gpu *g)
{
    struct sd_member *best = sd_best_waiter(g);
    if (!best || !sd_lc_gated(p, best) || !sd_lc_active(p, g))
        return best;
    /* Gated waiters wait: the best one that is not gated, if any. A high
     * waiter always sorts first, so this only finds same-class peers that
     * run on timeslices. */
    struct sd_member *alt = NULL;
    for (size_t i = 0; i < g->n; i++) {
        struct sd_member *m = g->m[i];
        if (m->state == CS_STATE_WAITING && !sd_lc_gated(p, m) &&
            (!alt || sd_waiter_before(m, alt)))
            alt = m;
    }
    return alt;
}

uint32_t sd_lc_mechanism_of(const struct sd_policy *p, const struct sd_member *m)
{
    if (!sd_mode_coruns(p->cfg) || !high_present(m->gpu))
        return CS_LC_MECH_NONE;
    if (is_high(m))
        return CS_LC_MECH_LC;
    if (sd_lc_gated(p, m))
        return CS_LC_MECH_GATE;
    return m->client->info.tsg && p->cfg->lc_mechanism != SD_LC_OFF &&
                   p->cfg->be_timeslice_us != 0
               ? CS_LC_MECH_TSG
               : CS_LC_MECH_NONE;
}

static void lc_desired(const struct sd_policy *p, const struct sd_member *m, uint32_t *mode,
                       uint32_t *param)
{
    *mode = CS_LC_NONE;
    *param = 0;
    const struct sd_gpu *g = m->gpu;
    if (!sd_mode_coruns(p->cfg))
        return;
    if (is_high(m)) {
        if (gated_present(p, g)) {
            *mode = CS_LC_RELEASE_IDLE;
            *param = p->cfg->lc_linger_us;
        }
    } else if (sd_lc_gated(p, m) && high_present(g)) {
        *mode = CS_LC_BOUNDED;
        *param = p->cfg->lc_window_us;
    }
}

void sd_lc_plan(struct sd_policy *p, struct sd_gpu *g)
{
    for (size_t i = 0; i < g->n; i++) {
        struct sd_member *m = g->m[i];
        m->lc_mech = sd_lc_mechanism_of(p, m);
        if (!m->client->info.lc || !p->ops.lc_mode)
            continue;
        uint32_t mode, param;
        lc_desired(p, m, &mode, &param);
        if (mode == m->lc_mode_sent && param == m->lc_param_sent)
            continue;
        cs_debug("gpu %u: LC mode %u (%u us) for %s (pid %u)", g->index, mode, param,
                 m->client->info.name[0] ? m->client->info.name : "unnamed",
                 m->client->info.pid);
        m->lc_mode_sent = mode;
        m->lc_param_sent = param;
        p->ops.lc_mode(p->ctx, m, mode, param);
    }
}

int sd_policy_lc_burst(struct sd_policy *p, struct sd_client *c, const struct cs_msg_lc_burst *b,
                       const char **why)
{
    (void)p;
    if (!c->info.lc) {
        *why = "LC_BURST from a client that did not announce CS_HELLO_LC";
        return SD_EPROTO;
    }
    struct sd_member *m = c->slot[b->slot];
    if (!m) {
        *why = "LC_BURST for a slot that is not attached";
        return SD_EPROTO;
    }
    m->st.bursts++;
    sd_hist_add(&m->st.burst_wait, b->wait_ns);
    sd_hist_add(&m->st.burst_busy, b->busy_ns);
    return SD_OK;
}
