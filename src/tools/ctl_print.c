/* ctl_print.c: see ctl_print.h. The JSON keys are a stable interface
 * (tests and scripts read them); docs/protocol.md lists them. */
#include "tools/ctl_print.h"

#include <inttypes.h>
#include <string.h>

#include "common/util.h"

/* CS_STATE_HELD prints as "holding", the word the status output has always
 * had (tests and scripts compare it). */
const char *ctl_state_name(uint32_t state)
{
    static const char *const names[] = {"idle", "waiting", "holding", "revoking"};
    return state <= CS_STATE_MAX ? names[state] : "?";
}

const char *ctl_mode_name(uint32_t mode)
{
    return mode == CS_MODE_SHARED ? "shared" : mode == CS_MODE_MIXED ? "mixed" : "exclusive";
}

static double secs(uint64_t ns)
{
    return (double)ns / 1e9;
}

/* "12.3 s", "4m05s", "2h10m": short, for table columns. */
static char *fmt_dur(uint64_t ns, char *buf, size_t len)
{
    uint64_t s = ns / 1000000000ull;
    if (s < 100)
        snprintf(buf, len, "%.1f s", secs(ns));
    else if (s < 3600)
        snprintf(buf, len, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
    else
        snprintf(buf, len, "%" PRIu64 "h%02" PRIu64 "m", s / 3600, s % 3600 / 60);
    return buf;
}

/* Swap times: "-" for none, "35 ms", "1.24 s". */
static char *fmt_ms(uint64_t ns, char *buf, size_t len)
{
    if (ns == 0)
        snprintf(buf, len, "-");
    else if (ns < 1000000000ull)
        snprintf(buf, len, "%.0f ms", (double)ns / 1e6);
    else
        snprintf(buf, len, "%.2f s", secs(ns));
    return buf;
}

static const struct cs_msg_ctl_client *find_prev(const struct ctl_status *prev,
                                                 const struct cs_msg_ctl_client *c)
{
    for (size_t i = 0; prev && i < prev->nclient; i++)
        if (prev->client[i].client_id == c->client_id &&
            prev->client[i].gpu_index == c->gpu_index)
            return &prev->client[i];
    return NULL;
}

static void print_client(FILE *f, const struct cs_msg_ctl_client *c,
                         const struct cs_msg_ctl_client_mem *x, const struct ctl_status *st,
                         const struct ctl_status *prev)
{
    char gt[16], wt[16], res[24], swp[24], lim[24], so[16], si[16];
    char pct[8] = "-";
    const struct cs_msg_ctl_client *p = find_prev(prev, c);
    if (p && st->daemon.uptime_ns > prev->daemon.uptime_ns) {
        double d = (double)(c->gpu_ns - p->gpu_ns) /
                   (double)(st->daemon.uptime_ns - prev->daemon.uptime_ns);
        snprintf(pct, sizeof pct, "%.0f%%", d * 100);
    }
    if (c->mem_limit)
        cs_format_size(c->mem_limit, lim, sizeof lim);
    else
        snprintf(lim, sizeof lim, "-");
    fprintf(f, "  %-8u %-16.16s %-6s %6u %-8s%s %9s %9s %4s %7" PRIu64 " %7" PRIu64
               " %11s %11s %8s %8s %11s\n",
            c->pid, c->name[0] ? c->name : "-", cs_priority_name((int)c->priority), c->weight,
            ctl_state_name(c->state), c->idle ? "*" : " ", fmt_dur(c->gpu_ns, gt, sizeof gt),
            fmt_dur(c->wait_ns, wt, sizeof wt), pct, c->slices, c->preemptions,
            cs_format_size(c->resident, res, sizeof res),
            cs_format_size(c->swapped, swp, sizeof swp), fmt_ms(x->swap_out_ns, so, sizeof so),
            fmt_ms(x->swap_in_ns, si, sizeof si), lim);
}

/* Under a client the daemon no longer waits for (issue 17). */
static void print_client_mark(FILE *f, const struct cs_msg_ctl_client *c)
{
    if (!(c->flags & CS_CTL_CLIENT_UNRESPONSIVE))
        return;
    fprintf(f, "  %-8s UNRESPONSIVE: missed a deadline or stopped; asked nothing more%s\n", "",
            c->flags & CS_CTL_CLIENT_DEMOTED ? ", demoted to low, weight 1" : "");
}

/* Under a client: the pod, namespace and container the daemon believed
 * (docs/metrics.md#labels); no line when it has none. */
static void print_client_labels(FILE *f, const struct cs_msg_ctl_client *c,
                                const struct cs_msg_ctl_client_labels *b)
{
    if (!c->pod[0] && !c->ns[0] && !b->container[0])
        return;
    fprintf(f, "  %-8s pod %s/%s, container %s\n", "", c->ns[0] ? c->ns : "-",
            c->pod[0] ? c->pod : "-", b->container[0] ? b->container : "-");
}

static const char *tsg_mech_name(const struct cs_msg_ctl_client_tsg *t)
{
    static const char *const names[] = {"off", "unprobed", "ready", "active", "unavailable"};
    if (!t->reported)
        return "unknown";
    return t->state <= CS_TSG_MECH_MAX ? names[t->state] : "?";
}

/* Under a client: its channel-group timeslice, when it reports one or the
 * daemon asked for one (an older client or daemon: no line). */
static void print_client_tsg(FILE *f, const struct cs_msg_ctl_client_tsg *t)
{
    if (!t->reported && !t->asked_us)
        return;
    fprintf(f, "  %-8s timeslice: asked %" PRIu64 " us%s; mechanism %s", "",
            t->asked_us, t->asked_us ? "" : " (defaults)", tsg_mech_name(t));
    if (t->reported && t->state == CS_TSG_MECH_UNAVAILABLE)
        fprintf(f, ": %s", t->reason);
    else if (t->reported && t->state != CS_TSG_MECH_OFF)
        fprintf(f, ", %" PRIu64 " us in force, %u compute group(s)", t->applied_us, t->groups);
    if (t->reported && t->status)
        fprintf(f, " (last change: %s)", strerror(-t->status));
    fprintf(f, "\n");
}

/* A histogram bound (sd_hist_quantile_ns): "250 us", "2.5 ms", "inf". */
static char *fmt_bound(uint64_t ns, char *buf, size_t len)
{
    if (ns == UINT64_MAX)
        snprintf(buf, len, "inf");
    else if (ns < 1000000ull)
        snprintf(buf, len, "%.0f us", (double)ns / 1e3);
    else
        snprintf(buf, len, "%.1f ms", (double)ns / 1e6);
    return buf;
}

static const char *lc_mech_name(uint32_t m)
{
    static const char *const names[] = {"none", "tsg", "gate", "lc"};
    return m <= CS_LC_MECH_MAX ? names[m] : "?";
}

static const char *lc_mode_name(uint32_t m)
{
    static const char *const names[] = {"none", "release-idle", "bounded"};
    return m <= CS_LC_MODE_MAX ? names[m] : "?";
}

/* Under a client beside (or being) a latency-critical job: how it is kept
 * out of the LC job's way, and the LC job's burst timings. */
static void print_client_lc(FILE *f, const struct cs_msg_ctl_client_lc *t)
{
    char w50[16], w99[16], b50[16], b99[16];
    if (t->mechanism == CS_LC_MECH_NONE && !t->lc_preempted && !t->bursts)
        return;
    fprintf(f, "  %-8s latency-critical: %s", "", lc_mech_name(t->mechanism));
    if (t->mode != CS_LC_NONE)
        fprintf(f, ", %s %u us", lc_mode_name(t->mode), t->param_us);
    if (t->lc_preempted)
        fprintf(f, ", gated %" PRIu64 " time(s)", t->lc_preempted);
    if (t->bursts)
        fprintf(f, ", %" PRIu64 " burst(s): wait p50 <= %s p99 <= %s, busy p50 <= %s p99 <= %s",
                t->bursts, fmt_bound(t->burst_wait_p50_ns, w50, sizeof w50),
                fmt_bound(t->burst_wait_p99_ns, w99, sizeof w99),
                fmt_bound(t->burst_busy_p50_ns, b50, sizeof b50),
                fmt_bound(t->burst_busy_p99_ns, b99, sizeof b99));
    fprintf(f, "\n");
}

/* One line: the memory model and what swapping did on this GPU. */
static void print_gpu_mem(FILE *f, const struct cs_msg_ctl_gpu *g,
                          const struct cs_msg_ctl_gpu_mem *x)
{
    char cap[24], fp[24], res[24], swp[24], ob[24], ib[24], so[16], si[16];
    fprintf(f,
            "  memory: capacity %s, footprints %s, resident %s, swapped %s%s; "
            "swapped out %s (%s), in %s (%s); %" PRIu64 " eviction(s), %" PRIu64
            " prefetch(es), room made %" PRIu64 "/refused %" PRIu64 "\n",
            x->capacity ? cs_format_size(x->capacity, cap, sizeof cap)
                        : "0 (memory planning off: GPU memory unknown or within mem_reserve_mb)",
            cs_format_size(x->footprint, fp, sizeof fp),
            cs_format_size(g->mem_resident, res, sizeof res),
            cs_format_size(x->swapped, swp, sizeof swp),
            x->capacity && x->footprint > x->capacity ? " (oversubscribed)" : "",
            cs_format_size(x->swap_out_bytes, ob, sizeof ob), fmt_ms(x->swap_out_ns, so, sizeof so),
            cs_format_size(x->swap_in_bytes, ib, sizeof ib), fmt_ms(x->swap_in_ns, si, sizeof si),
            x->evictions, x->prefetches, x->room_made, x->room_refused);
}

void ctl_print_table(FILE *f, const struct ctl_status *st, const struct ctl_status *prev)
{
    const struct cs_msg_ctl_daemon *d = &st->daemon;
    char up[16];
    fprintf(f,
            "cushared pid %u (uid %u), up %s, mode %s, quantum %u..%u ms, idle %u ms, "
            "%u client(s), %" PRIu64 " protocol error(s)\n",
            d->pid, d->uid, fmt_dur(d->uptime_ns, up, sizeof up), ctl_mode_name(d->mode),
            d->quantum_floor_ms, d->quantum_cap_ms, d->idle_release_ms, d->clients,
            d->protocol_errors);
    const struct cs_msg_ctl_limits *l = &st->limits;
    if (st->have_limits)
        fprintf(f,
                "connections: %u open (at most %u per uid, HELLO within %u ms); refused: "
                "%" PRIu64 " max_clients, %" PRIu64 " max_conns_per_uid, %" PRIu64
                " connection cap, %" PRIu64 " unknown GPU, %" PRIu64 " no HELLO\n",
                d->connections, l->max_conns_per_uid, l->hello_timeout_ms,
                l->refused_max_clients, l->refused_max_conns_per_uid, l->refused_connections,
                l->refused_unknown_gpu, l->refused_hello_timeout);
    if (st->ngpu == 0)
        fprintf(f, "no GPU in use yet\n");
    for (size_t i = 0; i < st->ngpu; i++) {
        const struct cs_msg_ctl_gpu *g = &st->gpu[i];
        char uuid[CS_UUID_STR_LEN], busy[16], idle[16], tot[24];
        cs_uuid_format(g->uuid, uuid);
        fprintf(f,
                "\nGPU %u  %s  %s  quantum %.1f s  switches %" PRIu64
                " (%.1f ms)  busy %s  idle %s  memory %s%s%s\n",
                g->index, uuid, ctl_mode_name(g->mode), g->quantum_ms / 1000.0, g->switches,
                (double)g->switch_ns / 1e6, fmt_dur(g->busy_ns, busy, sizeof busy),
                fmt_dur(g->idle_ns, idle, sizeof idle),
                g->mem_total ? cs_format_size(g->mem_total, tot, sizeof tot) : "?",
                g->draining ? "  [DRAINING]" : "",
                g->restoring ? "  [waiting for previous holders]" : "");
        if (g->forced_releases)
            fprintf(f, "  %" PRIu64 " lease(s) taken back after the revoke timeout\n",
                    g->forced_releases);
        if (st->gpu_mem[i].share_turns)
            fprintf(f, "  %u turn(s) given to a waiting lower class (class_share_max_pct)\n",
                    st->gpu_mem[i].share_turns);
        print_gpu_mem(f, g, &st->gpu_mem[i]);
        fprintf(f, "  %-8s %-16s %-6s %6s %-9s %9s %9s %4s %7s %7s %11s %11s %8s %8s %11s\n",
                "PID", "NAME", "PRIO", "WEIGHT", "STATE", "GPU", "WAIT", "GPU%", "SLICES",
                "PREEMPT", "RESIDENT", "SWAPPED", "SWAP-OUT", "SWAP-IN", "LIMIT");
        for (size_t j = 0; j < st->nclient; j++)
            if (st->client[j].gpu_index == g->index)
            {
                print_client(f, &st->client[j], &st->client_mem[j], st, prev);
                print_client_mark(f, &st->client[j]);
                print_client_labels(f, &st->client[j], &st->client_labels[j]);
                print_client_tsg(f, &st->client_tsg[j]);
                print_client_lc(f, &st->client_lc[j]);
            }
    }
}

/* ---- JSON ------------------------------------------------------------------------- */

/* Strings from the daemon are printable ASCII (the codec checks), so only
 * the quote and the backslash need escaping. */
static void json_str(FILE *f, const char *key, const char *s, const char *sep)
{
    fprintf(f, "\"%s\": \"", key);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fprintf(f, "\"%s", sep);
}

static void json_u64(FILE *f, const char *key, uint64_t v, const char *sep)
{
    fprintf(f, "\"%s\": %" PRIu64 "%s", key, v, sep);
}

static void json_sec(FILE *f, const char *key, uint64_t ns, const char *sep)
{
    fprintf(f, "\"%s\": %.6f%s", key, secs(ns), sep);
}

static void json_bool(FILE *f, const char *key, uint32_t v, const char *sep)
{
    fprintf(f, "\"%s\": %s%s", key, v ? "true" : "false", sep);
}

/* CTL_LIMITS, inside "daemon" (from a daemon that sends it). */
static void json_limits(FILE *f, const struct cs_msg_ctl_limits *l)
{
    json_u64(f, "max_conns_per_uid", l->max_conns_per_uid, ", ");
    json_u64(f, "hello_timeout_ms", l->hello_timeout_ms, ", ");
    json_u64(f, "owner_reserve", l->owner_reserve, ", ");
    json_u64(f, "node_gpus", l->node_gpus, ", ");
    json_u64(f, "refused_max_clients", l->refused_max_clients, ", ");
    json_u64(f, "refused_max_conns_per_uid", l->refused_max_conns_per_uid, ", ");
    json_u64(f, "refused_connections", l->refused_connections, ", ");
    json_u64(f, "refused_unknown_gpu", l->refused_unknown_gpu, ", ");
    json_u64(f, "refused_hello_timeout", l->refused_hello_timeout, ", ");
}

static void json_daemon(FILE *f, const struct ctl_status *st)
{
    const struct cs_msg_ctl_daemon *d = &st->daemon;
    fprintf(f, "  \"daemon\": {");
    json_u64(f, "pid", d->pid, ", ");
    json_u64(f, "uid", d->uid, ", ");
    json_u64(f, "epoch", d->epoch, ", ");
    json_sec(f, "uptime_s", d->uptime_ns, ", ");
    json_str(f, "mode", ctl_mode_name(d->mode), ", ");
    json_u64(f, "metrics_port", d->metrics_port, ", ");
    json_u64(f, "clients", d->clients, ", ");
    json_u64(f, "connections", d->connections, ", ");
    json_u64(f, "connections_total", d->connections_total, ", ");
    json_u64(f, "protocol_errors", d->protocol_errors, ", ");
    json_u64(f, "dropped_slow", d->dropped_slow, ", ");
    json_u64(f, "quantum_floor_ms", d->quantum_floor_ms, ", ");
    json_u64(f, "quantum_cap_ms", d->quantum_cap_ms, ", ");
    json_u64(f, "idle_release_ms", d->idle_release_ms, ", ");
    json_u64(f, "revoke_timeout_ms", d->revoke_timeout_ms, ", ");
    json_u64(f, "reconnect_grace_ms", d->reconnect_grace_ms, ", ");
    json_bool(f, "force_release", d->force_release, ", ");
    json_u64(f, "mem_reserve_bytes", d->mem_reserve, ", ");
    if (st->have_limits)
        json_limits(f, &st->limits);
    fprintf(f, "\"switch_cost_target\": %.6f},\n", d->switch_cost_ppm / 1e6);
}

static void json_client_tsg(FILE *f, const struct cs_msg_ctl_client_tsg *t)
{
    json_u64(f, "timeslice_us", t->asked_us, ", ");
    json_str(f, "tsg_mechanism", tsg_mech_name(t), ", ");
    json_str(f, "tsg_reason", t->reason, ", ");
    json_u64(f, "tsg_requested_us", t->requested_us, ", ");
    json_u64(f, "tsg_applied_us", t->applied_us, ", ");
    fprintf(f, "\"tsg_status\": %d, ", t->status);
    json_u64(f, "tsg_groups", t->groups, ", ");
}

static void json_client_lc(FILE *f, const struct cs_msg_ctl_client_lc *l)
{
    json_str(f, "lc_mechanism", lc_mech_name(l->mechanism), ", ");
    json_str(f, "lc_mode", lc_mode_name(l->mode), ", ");
    json_u64(f, "lc_param_us", l->param_us, ", ");
    json_u64(f, "lc_preempted", l->lc_preempted, ", ");
    json_u64(f, "lc_bursts", l->bursts, ", ");
    json_u64(f, "lc_burst_wait_p50_ns", l->burst_wait_p50_ns, ", ");
    json_u64(f, "lc_burst_wait_p99_ns", l->burst_wait_p99_ns, ", ");
    json_u64(f, "lc_burst_busy_p50_ns", l->burst_busy_p50_ns, ", ");
    json_u64(f, "lc_burst_busy_p99_ns", l->burst_busy_p99_ns, ", ");
}

static void json_client(FILE *f, const struct ctl_status *st, size_t j, const char *sep)
{
    const struct cs_msg_ctl_client *c = &st->client[j];
    const struct cs_msg_ctl_client_mem *x = &st->client_mem[j];
    fprintf(f, "        {");
    json_u64(f, "id", c->client_id, ", ");
    json_u64(f, "pid", c->pid, ", ");
    json_u64(f, "uid", c->uid, ", ");
    json_str(f, "name", c->name, ", ");
    json_str(f, "pod", c->pod, ", ");
    json_str(f, "namespace", c->ns, ", ");
    json_str(f, "container", st->client_labels[j].container, ", ");
    json_str(f, "priority", cs_priority_name((int)c->priority), ", ");
    json_u64(f, "weight", c->weight, ", ");
    json_str(f, "state", ctl_state_name(c->state), ", ");
    json_bool(f, "idle", c->idle, ", ");
    json_bool(f, "unresponsive", c->flags & CS_CTL_CLIENT_UNRESPONSIVE, ", ");
    json_bool(f, "demoted", c->flags & CS_CTL_CLIENT_DEMOTED, ", ");
    json_sec(f, "gpu_s", c->gpu_ns, ", ");
    json_sec(f, "wait_s", c->wait_ns, ", ");
    json_u64(f, "slices", c->slices, ", ");
    json_u64(f, "preemptions", c->preemptions, ", ");
    json_u64(f, "revokes", c->revokes, ", ");
    json_u64(f, "forced_releases", c->forced, ", ");
    json_u64(f, "mem_resident_bytes", c->resident, ", ");
    json_u64(f, "mem_swapped_bytes", c->swapped, ", ");
    json_u64(f, "mem_unswappable_bytes", c->unswappable, ", ");
    json_u64(f, "mem_footprint_bytes", c->footprint, ", ");
    json_sec(f, "swap_s", c->swap_ns, ", ");
    json_u64(f, "mem_limit_bytes", c->mem_limit, ", ");
    json_u64(f, "vtime", c->vtime, ", ");
    json_u64(f, "mem_overhead_bytes", (uint64_t)x->overhead_mib << 20, ", ");
    json_u64(f, "swap_out_bytes", x->swap_out_bytes, ", ");
    json_sec(f, "swap_out_s", x->swap_out_ns, ", ");
    json_u64(f, "swap_in_bytes", x->swap_in_bytes, ", ");
    json_sec(f, "swap_in_s", x->swap_in_ns, ", ");
    json_u64(f, "evictions", x->evictions, ", ");
    json_u64(f, "prefetches", x->prefetches, ", ");
    json_u64(f, "prepares", x->prepares, ", ");
    json_u64(f, "rooms", x->rooms, ", ");
    json_u64(f, "rooms_refused", x->rooms_refused, ", ");
    json_client_tsg(f, &st->client_tsg[j]);
    json_client_lc(f, &st->client_lc[j]);
    json_sec(f, "drain_s", x->drain_ns, "");
    fprintf(f, "}%s\n", sep);
}

static void json_gpu(FILE *f, const struct ctl_status *st, const struct cs_msg_ctl_gpu *g,
                     const struct cs_msg_ctl_gpu_mem *x, const char *sep)
{
    char uuid[CS_UUID_STR_LEN];
    cs_uuid_format(g->uuid, uuid);
    fprintf(f, "    {");
    json_u64(f, "index", g->index, ", ");
    json_str(f, "uuid", uuid, ", ");
    json_str(f, "mode", ctl_mode_name(g->mode), ", ");
    json_u64(f, "holders", g->holders, ", ");
    json_u64(f, "waiters", g->waiters, ", ");
    json_bool(f, "draining", g->draining, ", ");
    json_bool(f, "restoring", g->restoring, ", ");
    json_u64(f, "quantum_ms", g->quantum_ms, ", ");
    json_u64(f, "mem_total_bytes", g->mem_total, ", ");
    json_u64(f, "mem_reserve_bytes", g->mem_reserve, ", ");
    json_u64(f, "mem_resident_bytes", g->mem_resident, ", ");
    json_u64(f, "switches", g->switches, ", ");
    fprintf(f, "\"switch_ms\": %.3f, ", (double)g->switch_ns / 1e6);
    json_sec(f, "idle_s", g->idle_ns, ", ");
    json_sec(f, "busy_s", g->busy_ns, ", ");
    json_u64(f, "revoke_timeouts", g->revoke_timeouts, ", ");
    json_u64(f, "forced_releases", g->forced_releases, ", ");
    json_u64(f, "mem_capacity_bytes", x->capacity, ", ");
    json_u64(f, "mem_client_reserve_bytes", x->client_reserve, ", ");
    json_u64(f, "mem_footprint_bytes", x->footprint, ", ");
    json_u64(f, "mem_swapped_bytes", x->swapped, ", ");
    json_u64(f, "swap_out_bytes", x->swap_out_bytes, ", ");
    json_sec(f, "swap_out_s", x->swap_out_ns, ", ");
    json_u64(f, "swap_in_bytes", x->swap_in_bytes, ", ");
    json_sec(f, "swap_in_s", x->swap_in_ns, ", ");
    json_u64(f, "evictions", x->evictions, ", ");
    json_u64(f, "prefetches", x->prefetches, ", ");
    json_u64(f, "prefetch_bytes", x->prefetch_bytes, ", ");
    json_u64(f, "prepares", x->prepares, ", ");
    json_u64(f, "room_made", x->room_made, ", ");
    json_u64(f, "room_refused", x->room_refused, ", ");
    json_u64(f, "room_waits", x->room_waits, ", ");
    json_u64(f, "share_turns", x->share_turns, ", ");
    fprintf(f, "\"clients\": [\n");
    size_t n = 0, total = 0;
    for (size_t j = 0; j < st->nclient; j++)
        total += st->client[j].gpu_index == g->index;
    for (size_t j = 0; j < st->nclient; j++)
        if (st->client[j].gpu_index == g->index)
            json_client(f, st, j, ++n < total ? "," : "");
    fprintf(f, "      ]}%s\n", sep);
}

void ctl_print_json(FILE *f, const struct ctl_status *st)
{
    fprintf(f, "{\n");
    json_daemon(f, st);
    fprintf(f, "  \"gpus\": [\n");
    for (size_t i = 0; i < st->ngpu; i++)
        json_gpu(f, st, &st->gpu[i], &st->gpu_mem[i], i + 1 < st->ngpu ? "," : "");
    fprintf(f, "  ]\n}\n");
}
