/* tslice.c: channel-group timeslices of lower-class holders beside a
 * latency-critical one (issue 7; the mechanism is the hook's, docs/tsg.md).
 *
 * The GPU time-slices the channel groups of co-running processes with a
 * slice of about 2 ms, and a short latency-critical (LC) kernel waits for
 * the rest of a best-effort (BE) process's slice. Only shared mode co-runs
 * holders, so only there can a high-class holder share the compute engine
 * with a lower-class one. The rule, per member, evaluated after every
 * decision on its GPU:
 *
 *   - be_timeslice_us when the mode is shared, the knob is not 0, its class
 *     is lower than high, it holds the GPU (HELD or REVOKING: a revoked
 *     holder still drains work) and a high-class member holds it too;
 *   - 0 (the driver's defaults) when it holds the GPU and none of that is
 *     true, and whenever the knob, the mode or its own class rule it out;
 *   - unchanged while it does not hold the GPU: its gate is closed and its
 *     work drained, so its timeslice does not matter until its next grant,
 *     which re-evaluates it before the GRANT leaves. Restoring on every lost
 *     lease would cost two RM round trips per compute group per switch and,
 *     worse, let a re-granted BE job run its first kernels with a 2 ms slice
 *     beside the LC job until the second TIMESLICE arrived.
 *
 * A TIMESLICE is sent only when the value changes and only to clients that
 * announced CS_HELLO_TSG (older ones would drop the connection on an unknown
 * type). A reconnected client is a new sd_client starting at 0, matching
 * the hook, which restores its defaults when it loses the daemon.
 */
#include "sched/policy_int.h"

#include "common/log.h"

static bool high_holds_beside(const struct sd_gpu *g, const struct sd_member *m)
{
    for (size_t i = 0; i < g->n; i++) {
        const struct sd_member *h = g->m[i];
        if (h != m && sd_is_holder(h) && h->client->info.priority == CS_PRIO_HIGH)
            return true;
    }
    return false;
}

static uint32_t ts_desired(const struct sd_policy *p, const struct sd_member *m)
{
    const struct sd_config *cfg = p->cfg;
    if (!sd_mode_coruns(cfg) || cfg->be_timeslice_us == 0 ||
        m->client->info.priority == CS_PRIO_HIGH || cfg->lc_mechanism == SD_LC_GATE ||
        cfg->lc_mechanism == SD_LC_OFF || sd_lc_gated(p, m))
        return 0; /* gated instead (lcgate.c), or no protection asked for */
    if (!sd_is_holder(m))
        return m->ts_sent;
    return high_holds_beside(m->gpu, m) ? cfg->be_timeslice_us : 0;
}

void sd_ts_update(struct sd_policy *p, struct sd_member *m)
{
    if (!m->client->info.tsg || !p->ops.timeslice)
        return;
    uint32_t us = ts_desired(p, m);
    if (us == m->ts_sent)
        return;
    cs_debug("gpu %u: timeslice %u us for %s (pid %u)", m->gpu->index, us,
             m->client->info.name[0] ? m->client->info.name : "unnamed", m->client->info.pid);
    m->ts_sent = us;
    m->ts_msgs++;
    p->ops.timeslice(p->ctx, m, us);
}

void sd_ts_plan(struct sd_policy *p, struct sd_gpu *g)
{
    for (size_t i = 0; i < g->n; i++)
        sd_ts_update(p, g->m[i]);
}

int sd_policy_tsg_state(struct sd_policy *p, struct sd_client *c,
                        const struct cs_msg_tsg_state *t, uint64_t now, const char **why)
{
    if (!c->info.tsg) {
        *why = "TSG_STATE from a client that did not announce CS_HELLO_TSG";
        return SD_EPROTO;
    }
    c->tsg = *t;
    c->tsg_reported = true;
    /* Said once per client (a client flipping its state cannot fill the
     * log): from now on it is gated beside a high job (lc_mechanism auto),
     * which can cost it far more throughput than a timeslice does
     * (bench/results/priority.md), and nothing else in the log shows why.
     * The decoder has checked that the reason is printable. */
    bool matters = sd_mode_coruns(p->cfg) && p->cfg->be_timeslice_us != 0 &&
                   (p->cfg->lc_mechanism == SD_LC_AUTO || p->cfg->lc_mechanism == SD_LC_TSG);
    if (!c->tsg_warned && t->state == CS_TSG_MECH_UNAVAILABLE && matters) {
        c->tsg_warned = true;
        cs_warn("client %s (pid %u): channel-group timeslices unavailable (%.*s); %s",
                c->info.name[0] ? c->info.name : "unnamed", c->info.pid,
                (int)sizeof t->reason, t->reason,
                p->cfg->lc_mechanism == SD_LC_AUTO ? "it is gated beside high jobs instead"
                                                    : "nothing protects high jobs from it (lc_mechanism tsg)");
    }
    for (int i = 0; i < CS_MAX_DEVICES; i++)
        if (c->slot[i])
            sd_gpu_reschedule(p, c->slot[i]->gpu, now);
    return SD_OK;
}
