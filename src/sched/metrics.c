/* metrics.c: see metrics.h. Series names are documented in docs/metrics.md;
 * a name here and there must match. */
#include "sched/metrics.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/log.h"
#include "common/util.h"
#include "sched/mguard.h"
#include "sched/server.h"

/* Idle time after which libmicrohttpd closes a connection (no byte read or
 * written): a scrape takes milliseconds. */
#define METRICS_TIMEOUT_S 5u
/* Per-connection memory for the request and the reply's headers (the page
 * itself is a separate buffer); a scraper's request is a few hundred bytes. */
#define METRICS_CONN_MEMORY (16u * 1024u)
/* libmicrohttpd's log lines let through a minute. */
#define METRICS_LOG_BURST 10u
#define METRICS_LOG_WINDOW_NS 60000000000ull

struct sd_metrics {
    struct MHD_Daemon *mhd;
    const struct sd_server *srv;
    int epfd;
    uint16_t port;
    struct sd_mguard guard; /* who may keep a connection open */
    uint64_t log_window_ns;   /* mhd_log's current minute, and its counts */
    unsigned log_count, log_dropped;
};

/* ---- rendering ------------------------------------------------------------------ */

static void help(struct sd_buf *b, const char *name, const char *type, const char *text)
{
    sd_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, text, name, type);
}

static double secs(uint64_t ns)
{
    return (double)ns / 1e9;
}

/* Labels of a client series: gpu, client, pid, uid, priority, pod,
 * namespace, container. client is the name the process chose; uid
 * (SO_PEERCRED) says whose it is; pod, namespace and container are "" unless
 * the daemon believed them (dispatch.c: an allocation that names them, or a
 * trusted peer). Every text value is escaped; each is at most
 * CS_NAME_LEN - 1 printable characters (the codec's check), so a hostile one
 * can neither break the page nor make it large. */
static void client_labels(struct sd_buf *b, const struct sd_member *m)
{
    const struct sd_client_info *in = &m->client->info;
    char uuid[CS_UUID_STR_LEN];
    cs_uuid_format(m->gpu->uuid, uuid);
    sd_buf_printf(b, "gpu=\"%s\",client=\"", uuid);
    sd_buf_label(b, in->name);
    sd_buf_printf(b, "\",pid=\"%u\",uid=\"%u\",priority=\"%s\",pod=\"", in->pid, in->uid,
                  cs_priority_name((int)in->priority));
    sd_buf_label(b, in->pod);
    sd_buf_printf(b, "\",namespace=\"");
    sd_buf_label(b, in->ns);
    sd_buf_printf(b, "\",container=\"");
    sd_buf_label(b, in->container);
    sd_buf_printf(b, "\"");
}

static void gpu_labels(struct sd_buf *b, const struct sd_gpu *g)
{
    char uuid[CS_UUID_STR_LEN];
    cs_uuid_format(g->uuid, uuid);
    sd_buf_printf(b, "gpu=\"%s\",index=\"%u\"", uuid, g->index);
}

static void hist_lines(struct sd_buf *b, const char *name, const struct sd_hist *h,
                       void (*labels)(struct sd_buf *, const void *), const void *obj)
{
    uint64_t cum = 0;
    for (size_t i = 0; i < SD_HIST_BUCKETS; i++) {
        cum += h->bucket[i];
        sd_buf_printf(b, "%s_bucket{", name);
        labels(b, obj);
        if (i < SD_HIST_BOUNDS)
            sd_buf_printf(b, ",le=\"%g\"} %" PRIu64 "\n", secs(sd_hist_bound_ns(i)), cum);
        else
            sd_buf_printf(b, ",le=\"+Inf\"} %" PRIu64 "\n", cum);
    }
    sd_buf_printf(b, "%s_sum{", name);
    labels(b, obj);
    sd_buf_printf(b, "} %.9f\n%s_count{", secs(h->sum_ns), name);
    labels(b, obj);
    sd_buf_printf(b, "} %" PRIu64 "\n", h->count);
}

static void client_labels_v(struct sd_buf *b, const void *m)
{
    client_labels(b, m);
}

static void gpu_labels_v(struct sd_buf *b, const void *g)
{
    gpu_labels(b, g);
}

enum { V_U64, V_SEC };

/* One client series: every member of every GPU. */
static void client_series(struct sd_buf *b, const struct sd_policy *p, uint64_t now,
                          const char *name, const char *type, const char *text,
                          uint64_t (*get)(const struct sd_member *, uint64_t), int kind)
{
    help(b, name, type, text);
    for (size_t i = 0; i < p->ngpu; i++) {
        for (size_t j = 0; j < p->gpu[i]->n; j++) {
            const struct sd_member *m = p->gpu[i]->m[j];
            sd_buf_printf(b, "%s{", name);
            client_labels(b, m);
            uint64_t v = get(m, now);
            if (kind == V_SEC)
                sd_buf_printf(b, "} %.9f\n", secs(v));
            else
                sd_buf_printf(b, "} %" PRIu64 "\n", v);
        }
    }
}

static uint64_t m_gpu(const struct sd_member *m, uint64_t now) { return sd_member_gpu_ns(m, now); }
static uint64_t m_wait(const struct sd_member *m, uint64_t now) { return sd_member_wait_ns(m, now); }
static uint64_t m_slices(const struct sd_member *m, uint64_t now) { (void)now; return m->st.slices; }
static uint64_t m_preempt(const struct sd_member *m, uint64_t now) { (void)now; return m->st.preemptions; }
static uint64_t m_revokes(const struct sd_member *m, uint64_t now) { (void)now; return m->st.revokes; }
static uint64_t m_forced(const struct sd_member *m, uint64_t now) { (void)now; return m->st.forced; }
static uint64_t m_res(const struct sd_member *m, uint64_t now) { (void)now; return m->resident; }
static uint64_t m_swp(const struct sd_member *m, uint64_t now) { (void)now; return m->swapped; }
static uint64_t m_fp(const struct sd_member *m, uint64_t now) { (void)now; return m->footprint; }
static uint64_t m_swapns(const struct sd_member *m, uint64_t now) { (void)now; return m->st.swap_ns; }
static uint64_t m_state(const struct sd_member *m, uint64_t now) { (void)now; return m->state; }
static uint64_t m_unsw(const struct sd_member *m, uint64_t now) { (void)now; return m->unswappable; }
static uint64_t m_ovh(const struct sd_member *m, uint64_t now) { (void)now; return m->overhead; }
static uint64_t m_pinned(const struct sd_member *m, uint64_t now) { (void)now; return m->pinned; }
static uint64_t m_outb(const struct sd_member *m, uint64_t now) { (void)now; return m->st.swap_out_bytes; }
static uint64_t m_inb(const struct sd_member *m, uint64_t now) { (void)now; return m->st.swap_in_bytes; }
static uint64_t m_inns(const struct sd_member *m, uint64_t now) { (void)now; return m->st.swap_in_ns; }
static uint64_t m_evict(const struct sd_member *m, uint64_t now) { (void)now; return m->st.evictions; }
static uint64_t m_pref(const struct sd_member *m, uint64_t now) { (void)now; return m->st.prefetches; }
static uint64_t m_weight(const struct sd_member *m, uint64_t now) { (void)now; return m->client->info.weight; }
/* Timeslices are kept in µs (the protocol's unit) and shown in seconds,
 * Prometheus's base unit: ns for client_series' V_SEC. */
static uint64_t m_ts(const struct sd_member *m, uint64_t now)
{
    (void)now;
    return (uint64_t)m->ts_sent * 1000u;
}

static uint64_t m_ts_in(const struct sd_member *m, uint64_t now)
{
    (void)now;
    return (uint64_t)m->client->tsg.applied_us * 1000u;
}
/* enum cs_tsg_mech, or one past it for a client that never reported (an
 * older client, or one that did not announce CS_HELLO_TSG). */
static uint64_t m_tsg(const struct sd_member *m, uint64_t now)
{
    (void)now;
    return m->client->tsg_reported ? m->client->tsg.state : CS_TSG_MECH_MAX + 1u;
}

static uint64_t m_unresp(const struct sd_member *m, uint64_t now)
{
    (void)now;
    return (m->client->unresponsive ? CS_CTL_CLIENT_UNRESPONSIVE : 0u) |
           (m->client->demoted ? CS_CTL_CLIENT_DEMOTED : 0u);
}

static uint64_t m_lcmech(const struct sd_member *m, uint64_t now) { (void)now; return m->lc_mech; }
static uint64_t m_lcpre(const struct sd_member *m, uint64_t now) { (void)now; return m->st.lc_preempted; }

static void render_client_hist(struct sd_buf *b, const struct sd_policy *p, const char *name,
                               const char *text, size_t off)
{
    help(b, name, "histogram", text);
    for (size_t i = 0; i < p->ngpu; i++)
        for (size_t j = 0; j < p->gpu[i]->n; j++) {
            const struct sd_member *m = p->gpu[i]->m[j];
            hist_lines(b, name, (const struct sd_hist *)(const void *)((const uint8_t *)m + off),
                       client_labels_v, m);
        }
}

static void render_clients(const struct sd_server *s, struct sd_buf *b, uint64_t now)
{
    const struct sd_policy *p = &s->policy;
    client_series(b, p, now, "cushare_client_gpu_seconds_total", "counter",
                  "Time the client held the GPU's lease.", m_gpu, V_SEC);
    client_series(b, p, now, "cushare_client_wait_seconds_total", "counter",
                  "Time the client waited for the lease.", m_wait, V_SEC);
    client_series(b, p, now, "cushare_client_slices_total", "counter",
                  "Leases granted to the client.", m_slices, V_U64);
    client_series(b, p, now, "cushare_client_preemptions_total", "counter",
                  "Leases revoked because a higher priority class waited.", m_preempt, V_U64);
    client_series(b, p, now, "cushare_client_revokes_total", "counter",
                  "Leases revoked for any reason.", m_revokes, V_U64);
    client_series(b, p, now, "cushare_client_forced_releases_total", "counter",
                  "Leases taken back after revoke_timeout_ms.", m_forced, V_U64);
    client_series(b, p, now, "cushare_client_memory_resident_bytes", "gauge",
                  "Device memory the client reports resident.", m_res, V_U64);
    client_series(b, p, now, "cushare_client_memory_swapped_bytes", "gauge",
                  "Memory the client holds swapped out to the host.", m_swp, V_U64);
    client_series(b, p, now, "cushare_client_memory_footprint_bytes", "gauge",
                  "Everything the client allocated on the GPU.", m_fp, V_U64);
    client_series(b, p, now, "cushare_client_memory_unswappable_bytes", "gauge",
                  "Part of the resident memory that can never move.", m_unsw, V_U64);
    client_series(b, p, now, "cushare_client_memory_overhead_bytes", "gauge",
                  "What the driver charges the client's process on the GPU beyond its "
                  "allocations (context, modules), measured through NVML (0: not measured).",
                  m_ovh, V_U64);
    client_series(b, p, now, "cushare_client_pinned_bytes", "gauge",
                  "Host memory the client holds pinned as swap backing, as it reports it "
                  "(PINNED; 0 from a client that does not).", m_pinned, V_U64);
    client_series(b, p, now, "cushare_client_swap_seconds_total", "counter",
                  "Swap-out time the client reported (RELEASE and EVICTED).", m_swapns, V_SEC);
    client_series(b, p, now, "cushare_client_swap_out_bytes_total", "counter",
                  "Bytes the client moved to host memory.", m_outb, V_U64);
    client_series(b, p, now, "cushare_client_swap_in_bytes_total", "counter",
                  "Bytes the client copied back to the GPU (grants and prefetches).", m_inb,
                  V_U64);
    client_series(b, p, now, "cushare_client_swap_in_seconds_total", "counter",
                  "Restore time the client reported (RESTORED and PREFETCHED).", m_inns, V_SEC);
    client_series(b, p, now, "cushare_client_evictions_total", "counter",
                  "EVICTs the client was sent.", m_evict, V_U64);
    client_series(b, p, now, "cushare_client_prefetches_total", "counter",
                  "PREFETCHes the client was sent.", m_pref, V_U64);
    client_series(b, p, now, "cushare_client_state", "gauge",
                  "Lease state: 0 idle, 1 waiting, 2 holding, 3 revoking.", m_state, V_U64);
    client_series(b, p, now, "cushare_client_unresponsive", "gauge",
                  "0, or 1 for a client that missed a deadline or was stopped (asked nothing "
                  "more), 3 when it was also demoted to low, weight 1.", m_unresp, V_U64);
    client_series(b, p, now, "cushare_client_weight", "gauge",
                  "The client's weight within its priority class.", m_weight, V_U64);
    client_series(b, p, now, "cushare_client_timeslice_seconds", "gauge",
                  "Channel-group timeslice the daemon last asked of the client on this GPU "
                  "(0: the driver's defaults).", m_ts, V_SEC);
    client_series(b, p, now, "cushare_client_timeslice_applied_seconds", "gauge",
                  "Timeslice the client reports in force for its compute channel groups "
                  "(0: the driver's defaults).", m_ts_in, V_SEC);
    client_series(b, p, now, "cushare_client_tsg_mechanism", "gauge",
                  "Channel-group timeslice mechanism of the client: 0 off, 1 unprobed, "
                  "2 ready, 3 active, 4 unavailable, 5 not reported.", m_tsg, V_U64);
    client_series(b, p, now, "cushare_client_lc_mechanism", "gauge",
                  "What keeps latency-critical jobs on this GPU from waiting for the client "
                  "(shared mode): 0 nothing needed, 1 channel-group timeslices, 2 gating, "
                  "3 the client is the latency-critical job.", m_lcmech, V_U64);
    client_series(b, p, now, "cushare_client_lc_preemptions_total", "counter",
                  "Leases revoked because a latency-critical job had work (gating).", m_lcpre,
                  V_U64);
    render_client_hist(b, p, "cushare_client_lease_latency_seconds", "Time from ACQUIRE to GRANT.",
                       offsetof(struct sd_member, st.lease_latency));
    render_client_hist(b, p, "cushare_client_lc_wait_seconds",
                       "Latency-critical bursts: time the first submission waited at the gate "
                       "for the lease (gating).",
                       offsetof(struct sd_member, st.burst_wait));
    render_client_hist(b, p, "cushare_client_lc_busy_seconds",
                       "Latency-critical bursts: gate open until the GPU finished the burst's "
                       "work, the request latency cushare sees (gating).",
                       offsetof(struct sd_member, st.burst_busy));
}

static void gpu_u64(struct sd_buf *b, const struct sd_policy *p, const char *name,
                    const char *type, const char *text, size_t off)
{
    help(b, name, type, text);
    for (size_t i = 0; i < p->ngpu; i++) {
        uint64_t v;
        memcpy(&v, (const uint8_t *)p->gpu[i] + off, sizeof v);
        sd_buf_printf(b, "%s{", name);
        gpu_labels(b, p->gpu[i]);
        sd_buf_printf(b, "} %" PRIu64 "\n", v);
    }
}

static void render_gpus(const struct sd_server *s, struct sd_buf *b, uint64_t now)
{
    const struct sd_policy *p = &s->policy;
    help(b, "cushare_gpu_clients", "gauge", "Clients attached to the GPU.");
    for (size_t i = 0; i < p->ngpu; i++) {
        sd_buf_printf(b, "cushare_gpu_clients{");
        gpu_labels(b, p->gpu[i]);
        sd_buf_printf(b, "} %zu\n", p->gpu[i]->n);
    }
    help(b, "cushare_gpu_waiters", "gauge", "Clients waiting for the GPU's lease.");
    for (size_t i = 0; i < p->ngpu; i++) {
        sd_buf_printf(b, "cushare_gpu_waiters{");
        gpu_labels(b, p->gpu[i]);
        sd_buf_printf(b, "} %u\n", sd_gpu_count(p->gpu[i], CS_STATE_WAITING));
    }
    gpu_u64(b, p, "cushare_gpu_switches_total", "counter",
            "Times the lease passed to another client while someone waited.",
            offsetof(struct sd_gpu, st.switches));
    gpu_u64(b, p, "cushare_gpu_revoke_timeouts_total", "counter",
            "Revokes not answered within revoke_timeout_ms.",
            offsetof(struct sd_gpu, st.revoke_timeouts));
    gpu_u64(b, p, "cushare_gpu_forced_releases_total", "counter",
            "Leases taken back after revoke_timeout_ms (force_release).",
            offsetof(struct sd_gpu, st.forced_releases));
    gpu_u64(b, p, "cushare_gpu_share_turns_total", "counter",
            "Turns given to a waiting lower class kept from the GPU beyond class_share_max_pct.",
            offsetof(struct sd_gpu, st.share_turns));
    gpu_u64(b, p, "cushare_gpu_unresponsive_clients_total", "counter",
            "Clients of the GPU marked unresponsive (a missed deadline, a stopped process).",
            offsetof(struct sd_gpu, st.unresponsive));
    gpu_u64(b, p, "cushare_gpu_demotions_total", "counter",
            "Of those, clients demoted to low, weight 1 (the others already were).",
            offsetof(struct sd_gpu, st.demotions));
    gpu_u64(b, p, "cushare_gpu_swap_out_bytes_total", "counter",
            "Bytes moved from the GPU to host memory.", offsetof(struct sd_gpu, st.swap_out_bytes));
    gpu_u64(b, p, "cushare_gpu_swap_in_bytes_total", "counter",
            "Bytes copied back to the GPU.", offsetof(struct sd_gpu, st.swap_in_bytes));
    gpu_u64(b, p, "cushare_gpu_evictions_total", "counter",
            "EVICTs sent (room for a grant, ROOM, third parties).",
            offsetof(struct sd_gpu, st.evictions));
    gpu_u64(b, p, "cushare_gpu_prefetches_total", "counter",
            "PREFETCHes sent to the next holder while another ran.",
            offsetof(struct sd_gpu, st.prefetches));
    gpu_u64(b, p, "cushare_gpu_prefetched_bytes_total", "counter",
            "Bytes the prefetches copied back.", offsetof(struct sd_gpu, st.prefetch_bytes));
    gpu_u64(b, p, "cushare_gpu_prepares_total", "counter",
            "EVICT PREPAREs sent (host backing pinned ahead of need).",
            offsetof(struct sd_gpu, st.prepares));
    gpu_u64(b, p, "cushare_gpu_givebacks_total", "counter",
            "EVICT GIVEBACKs sent (pool pieces asked back from pin-ahead for a move).",
            offsetof(struct sd_gpu, st.givebacks));
    gpu_u64(b, p, "cushare_gpu_given_back_bytes_total", "counter",
            "Bytes of pool-lent backing the GIVEBACKs freed.",
            offsetof(struct sd_gpu, st.given_back));
    gpu_u64(b, p, "cushare_gpu_room_made_total", "counter", "ROOM requests answered 0.",
            offsetof(struct sd_gpu, st.room_made));
    gpu_u64(b, p, "cushare_gpu_room_refused_total", "counter",
            "ROOM requests answered CUDA_ERROR_OUT_OF_MEMORY.",
            offsetof(struct sd_gpu, st.room_refused));
    gpu_u64(b, p, "cushare_gpu_room_waits_total", "counter",
            "Grants held back until evictions made room.", offsetof(struct sd_gpu, st.room_waits));
    help(b, "cushare_gpu_memory_capacity_bytes", "gauge",
         "What clients may keep resident: total - mem_reserve_mb - each client's reserve "
         "(measured overhead, or client_reserve_mb) - the next process's.");
    help(b, "cushare_gpu_memory_client_reserve_bytes", "gauge",
         "Reserve planned for a client not measured yet and for the next process: "
         "client_reserve_mb, or the largest overhead measured on the GPU.");
    help(b, "cushare_gpu_memory_resident_bytes", "gauge", "Sum of the clients' resident memory.");
    help(b, "cushare_gpu_memory_footprint_bytes", "gauge", "Sum of the clients' footprints.");
    help(b, "cushare_gpu_memory_swapped_bytes", "gauge", "Sum of the clients' swapped memory.");
    help(b, "cushare_gpu_switch_cost_seconds", "gauge",
         "Smoothed switch overhead the quantum is sized against.");
    for (size_t i = 0; i < p->ngpu; i++) {
        const struct sd_gpu *g = p->gpu[i];
        const char *names[] = {"cushare_gpu_memory_capacity_bytes",
                               "cushare_gpu_memory_client_reserve_bytes",
                               "cushare_gpu_memory_resident_bytes",
                               "cushare_gpu_memory_footprint_bytes",
                               "cushare_gpu_memory_swapped_bytes"};
        uint64_t vals[] = {sd_gpu_capacity(p, g), sd_gpu_client_reserve(p, g),
                           sd_gpu_resident(g), sd_gpu_footprint(g), sd_gpu_swapped(g)};
        for (int k = 0; k < 5; k++) {
            sd_buf_printf(b, "%s{", names[k]);
            gpu_labels(b, g);
            sd_buf_printf(b, "} %" PRIu64 "\n", vals[k]);
        }
        sd_buf_printf(b, "cushare_gpu_switch_cost_seconds{");
        gpu_labels(b, g);
        sd_buf_printf(b, "} %.9f\n", secs(g->switch_ewma_ns));
    }
    help(b, "cushare_gpu_idle_seconds_total", "counter", "Time with no lease holder.");
    help(b, "cushare_gpu_busy_seconds_total", "counter", "Time with a lease holder.");
    help(b, "cushare_gpu_quantum_seconds", "gauge", "Current slice length.");
    help(b, "cushare_gpu_draining", "gauge", "1 while the GPU is drained.");
    for (size_t i = 0; i < p->ngpu; i++) {
        const struct sd_gpu *g = p->gpu[i];
        uint64_t idle, busy;
        sd_gpu_times(g, now, &idle, &busy);
        const char *names[] = {"cushare_gpu_idle_seconds_total", "cushare_gpu_busy_seconds_total",
                               "cushare_gpu_quantum_seconds"};
        uint64_t vals[] = {idle, busy, sd_gpu_quantum_ns(p, g)};
        for (int k = 0; k < 3; k++) {
            sd_buf_printf(b, "%s{", names[k]);
            gpu_labels(b, g);
            sd_buf_printf(b, "} %.9f\n", secs(vals[k]));
        }
        sd_buf_printf(b, "cushare_gpu_draining{");
        gpu_labels(b, g);
        sd_buf_printf(b, "} %d\n", g->draining ? 1 : 0);
    }
    help(b, "cushare_gpu_switch_latency_seconds", "histogram",
         "Time from a REVOKE to the next GRANT on the GPU.");
    for (size_t i = 0; i < p->ngpu; i++)
        hist_lines(b, "cushare_gpu_switch_latency_seconds", &p->gpu[i]->st.switch_latency,
                   gpu_labels_v, p->gpu[i]);
    help(b, "cushare_gpu_switch_overhead_seconds", "histogram",
         "Switch overhead: REVOKE to GRANT minus the drain, plus the restore.");
    for (size_t i = 0; i < p->ngpu; i++)
        hist_lines(b, "cushare_gpu_switch_overhead_seconds", &p->gpu[i]->st.switch_cost,
                   gpu_labels_v, p->gpu[i]);
    help(b, "cushare_gpu_swap_out_seconds", "histogram",
         "Swap-out times (RELEASE.swap_ns, EVICTED.ns) of swaps that moved memory.");
    for (size_t i = 0; i < p->ngpu; i++)
        hist_lines(b, "cushare_gpu_swap_out_seconds", &p->gpu[i]->st.swap_out, gpu_labels_v,
                   p->gpu[i]);
    help(b, "cushare_gpu_swap_in_seconds", "histogram",
         "Restore times (RESTORED.ns, PREFETCHED.ns) of restores that moved memory.");
    for (size_t i = 0; i < p->ngpu; i++)
        hist_lines(b, "cushare_gpu_swap_in_seconds", &p->gpu[i]->st.swap_in, gpu_labels_v,
                   p->gpu[i]);
}

static void render_daemon(const struct sd_server *s, struct sd_buf *b, uint64_t now)
{
    const struct sd_counters *c = &s->ctr;
    help(b, "cushare_protocol_errors_total", "counter",
         "Connections closed for a malformed or out-of-place record.");
    sd_buf_printf(b, "cushare_protocol_errors_total %" PRIu64 "\n", c->protocol_errors);
    help(b, "cushare_connections_total", "counter", "Connections accepted.");
    sd_buf_printf(b, "cushare_connections_total %" PRIu64 "\n", c->connections_total);
    help(b, "cushare_connections", "gauge", "Connections open now.");
    sd_buf_printf(b, "cushare_connections %zu\n", s->nconns);
    help(b, "cushare_clients", "gauge", "Registered GPU clients.");
    sd_buf_printf(b, "cushare_clients %zu\n", s->policy.nclients);
    help(b, "cushare_connections_dropped_total", "counter",
         "Connections dropped for not reading their messages.");
    sd_buf_printf(b, "cushare_connections_dropped_total %" PRIu64 "\n", c->dropped_slow);
    help(b, "cushare_connections_refused_total", "counter",
         "Connections refused or closed by a limit (the sum over cushare_refusals_total).");
    sd_buf_printf(b, "cushare_connections_refused_total %" PRIu64 "\n", c->refused);
    help(b, "cushare_refusals_total", "counter", "Connections refused or closed, by reason.");
    for (int k = 0; k < SD_REFUSE_COUNT; k++)
        sd_buf_printf(b, "cushare_refusals_total{reason=\"%s\"} %" PRIu64 "\n",
                      sd_refusal_name((enum sd_refusal)k), c->refusals[k]);
    help(b, "cushare_control_denied_total", "counter",
         "Control changes refused for the caller's uid.");
    sd_buf_printf(b, "cushare_control_denied_total %" PRIu64 "\n", c->control_denied);
    help(b, "cushare_uptime_seconds", "gauge", "Time since the daemon started.");
    sd_buf_printf(b, "cushare_uptime_seconds %.3f\n", secs(now - s->start_ns));
}

static void pool_line(struct sd_buf *b, const char *name, const char *type, const char *text,
                      uint64_t v)
{
    help(b, name, type, text);
    sd_buf_printf(b, "%s %" PRIu64 "\n", name, v);
}

/* The node's pinned pool (lender.c): only where it lends (a node without
 * one shows cushare_pool_enabled 0 and nothing else). */
static void render_pool(const struct sd_server *s, struct sd_buf *b)
{
    const struct sd_lender *l = &s->lend;
    help(b, "cushare_pool_enabled", "gauge",
         "1 when the node's pinned pool lends swap backing, 0 when jobs pin their own.");
    sd_buf_printf(b, "cushare_pool_enabled %d\n", l->pinner ? 1 : 0);
    if (!l->pinner)
        return;
    struct sd_pool_stats st;
    sd_pool_get_stats(&l->pool, &st);
    pool_line(b, "cushare_pool_pinned_bytes", "gauge", "Host memory the pool holds pinned.",
              st.pinned_bytes);
    pool_line(b, "cushare_pool_free_bytes", "gauge", "Pinned pool memory not lent now.",
              st.free_bytes);
    pool_line(b, "cushare_pool_lent_bytes", "gauge", "Pinned pool memory lent to clients now.",
              st.lent_bytes);
    pool_line(b, "cushare_pool_target_bytes", "gauge",
              "What the pool should hold now (the policy's need within the pool's bounds).",
              st.target_bytes);
    help(b, "cushare_pool_pin_seconds_total", "counter", "Time the pool spent pinning pieces.");
    sd_buf_printf(b, "cushare_pool_pin_seconds_total %.6f\n", secs(l->pins_ns));
    pool_line(b, "cushare_pool_pieces_pinned_total", "counter", "Pieces the pool pinned.",
              st.pieces_pinned_total);
    pool_line(b, "cushare_pool_pieces_released_total", "counter",
              "Pieces the pool released (beyond its target for pool_linger_ms).",
              st.pieces_released_total);
    pool_line(b, "cushare_pool_lends_total", "counter", "Pieces lent.", st.lends_total);
    pool_line(b, "cushare_pool_returns_total", "counter",
              "Pieces given back by RETURN (a borrower that exits gives its pieces back without one).",
              st.returns_total);
    pool_line(b, "cushare_pool_missed_pieces_total", "counter",
              "Pieces asked for that the pool could not lend (the borrower pinned its own).",
              st.missed_pieces_total);
    pool_line(b, "cushare_pool_reserve_refusals_total", "counter",
              "Pins held back to keep host_reserve_mb available.", st.reserve_refusals_total);
    pool_line(b, "cushare_pool_pressure_releases_total", "counter",
              "Free pieces released because the host's available memory fell below "
              "host_reserve_mb.",
              st.pressure_releases_total);
    pool_line(b, "cushare_pool_bad_returns_total", "counter",
              "Pieces given back that were not lent to the client (ignored).",
              st.bad_returns_total);
    pool_line(b, "cushare_pool_move_holds_total", "counter",
              "Times pinning waited for swaps under way (pinning slows their maps).", l->holds);
    pool_line(b, "cushare_pool_pace_waits_total", "counter",
              "Times the pool's growth paused for its pace (pool_pace_pct), letting other "
              "processes' allocations through.",
              l->paces);
}

void sd_metrics_render(const struct sd_server *s, struct sd_buf *b)
{
    uint64_t now = sd_server_now(s);
    render_daemon(s, b, now);
    render_pool(s, b);
    render_gpus(s, b, now);
    render_clients(s, b, now);
}

/* ---- HTTP -------------------------------------------------------------------------- */

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned code, const char *text)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
    enum MHD_Result ret = MHD_queue_response(conn, code, r);
    MHD_destroy_response(r);
    return ret;
}

/* The connection's slot in the guard, kept in MHD's socket context as
 * slot + 1 (0: none). */
static int conn_slot(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? (int)(uintptr_t)ci->socket_context - 1 : -1;
}

/* The endpoint's own series, after the page (they describe the HTTP side,
 * not the scheduler). */
static void render_endpoint(const struct sd_metrics *m, struct sd_buf *b)
{
    const struct sd_mguard *g = &m->guard;
    help(b, "cushare_metrics_connections", "gauge", "Connections to this endpoint open now.");
    sd_buf_printf(b, "cushare_metrics_connections %zu\n", g->live);
    help(b, "cushare_metrics_connections_total", "counter", "Connections to this endpoint taken.");
    sd_buf_printf(b, "cushare_metrics_connections_total %" PRIu64 "\n", g->opened_total);
    help(b, "cushare_metrics_connections_evicted_total", "counter",
         "Older connections closed to make room for newer ones (per-address or total cap).");
    sd_buf_printf(b, "cushare_metrics_connections_evicted_total %" PRIu64 "\n",
                  g->evicted_total);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_size, void **ptr)
{
    struct sd_metrics *m = cls;
    (void)version;
    (void)upload_data;
    sd_mguard_busy(&m->guard, conn_slot(conn));
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET\n");
    if (*upload_size != 0)
        return MHD_NO;
    (void)ptr;
    if (strcmp(url, "/metrics") != 0)
        return reply(conn, MHD_HTTP_NOT_FOUND, "not found: try /metrics\n");
    struct sd_buf b = {0};
    sd_metrics_render(m->srv, &b);
    render_endpoint(m, &b);
    if (b.oom) {
        sd_buf_free(&b);
        return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    }
    /* MHD frees b.p with free() once sent. */
    struct MHD_Response *r = MHD_create_response_from_buffer(b.len, b.p, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        sd_buf_free(&b);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; version=0.0.4");
    enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* The request's answer is sent, or the request ended otherwise: the
 * connection waits for the next one (keep-alive) and may be evicted. */
static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct sd_metrics *m = cls;
    (void)con_cls;
    (void)toe;
    sd_mguard_idle(&m->guard, conn_slot(conn));
}

/* IPv4 as IPv4-mapped IPv6, so that one key form serves both. */
static void addr_key(const struct sockaddr *sa, uint8_t key[16])
{
    memset(key, 0, 16);
    if (sa && sa->sa_family == AF_INET6) {
        memcpy(key, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
    } else if (sa && sa->sa_family == AF_INET) {
        key[10] = key[11] = 0xff;
        memcpy(key + 12, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    }
}

/* A connection accepted or closed by MHD. An accepted one may push an older
 * one out (mguard.h): shutdown() makes MHD see it end and close it within
 * the next sd_metrics_run, as if the client had gone. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct sd_metrics *m = cls;
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        sd_mguard_close(&m->guard, (int)(uintptr_t)*socket_context - 1);
        *socket_context = NULL;
        return;
    }
    const union MHD_ConnectionInfo *fi =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    int fd = fi ? fi->connect_fd : -1;
    uint8_t key[16];
    addr_key(ai ? ai->client_addr : NULL, key);
    int victim;
    int slot = sd_mguard_open(&m->guard, key, fd, &victim);
    if (slot < 0) {
        shutdown(fd, SHUT_RDWR); /* cannot happen: MHD's limit is the slot count */
        return;
    }
    *socket_context = (void *)(uintptr_t)(slot + 1);
    if (victim >= 0)
        shutdown(m->guard.slot[victim].fd, SHUT_RDWR);
}

static void mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* libmicrohttpd's messages, most of them about one client's connection (one
 * for every connection a flood has evicted): at most METRICS_LOG_BURST a
 * minute, then one line saying how many were left out, so that a client
 * cannot fill the daemon's log. */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct sd_metrics *m = cls;
    uint64_t now = sd_server_now(m->srv);
    if (now - m->log_window_ns >= METRICS_LOG_WINDOW_NS) {
        if (m->log_dropped)
            cs_warn("metrics: %u more messages of libmicrohttpd left out", m->log_dropped);
        m->log_window_ns = now;
        m->log_count = m->log_dropped = 0;
    }
    if (m->log_count >= METRICS_LOG_BURST) {
        m->log_dropped++;
        return;
    }
    m->log_count++;
    char line[256];
    vsnprintf(line, sizeof line, fmt, ap);
    line[strcspn(line, "\n")] = '\0';
    cs_warn("metrics: %s", line);
}

static int resolve(const char *host, uint16_t port, struct sockaddr_storage *ss, int *family)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *res;
    const char *h = strcmp(host, "*") == 0 ? NULL : host;
    if (getaddrinfo(h, NULL, &hints, &res) != 0 || !res)
        return -1;
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *family = res->ai_family;
    freeaddrinfo(res);
    if (*family == AF_INET)
        ((struct sockaddr_in *)ss)->sin_port = htons(port);
    else if (*family == AF_INET6)
        ((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
    else
        return -1;
    return 0;
}

struct sd_metrics *sd_metrics_start(struct sd_server *s, const char *hostport, char *err,
                                    size_t errlen)
{
    char host[SD_ADDR_LEN];
    uint16_t port;
    struct sockaddr_storage ss;
    int family;
    if (sd_parse_hostport(hostport, host, sizeof host, &port) < 0 ||
        resolve(host, port, &ss, &family) < 0) {
        snprintf(err, errlen, "metrics: cannot use address '%s' (HOST:PORT)", hostport);
        return NULL;
    }
    struct sd_metrics *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "metrics: out of memory");
        return NULL;
    }
    m->srv = s;
    unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG | (family == AF_INET6 ? MHD_USE_IPv6 : 0);
    /* No per-IP limit of MHD's own: it refuses the newest connection, which
     * is the scraper's under a flood; the guard evicts the oldest instead. */
    m->mhd = MHD_start_daemon(flags, port, NULL, NULL, on_request, m,
                              MHD_OPTION_EXTERNAL_LOGGER, mhd_log, m,
                              MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                              MHD_OPTION_CONNECTION_LIMIT, (unsigned)SD_MGUARD_SLOTS,
                              MHD_OPTION_CONNECTION_TIMEOUT, METRICS_TIMEOUT_S,
                              MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)METRICS_CONN_MEMORY,
                              MHD_OPTION_NOTIFY_CONNECTION, on_connection, m,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, m,
                              MHD_OPTION_END);
    if (!m->mhd) {
        snprintf(err, errlen, "metrics: cannot listen on %s: %s", hostport, strerror(errno));
        free(m);
        return NULL;
    }
    const union MHD_DaemonInfo *ep = MHD_get_daemon_info(m->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    const union MHD_DaemonInfo *pi = MHD_get_daemon_info(m->mhd, MHD_DAEMON_INFO_BIND_PORT);
    m->epfd = ep ? ep->epoll_fd : -1;
    m->port = pi ? pi->port : port;
    if (m->epfd < 0) {
        snprintf(err, errlen, "metrics: libmicrohttpd has no epoll support");
        sd_metrics_stop(m);
        return NULL;
    }
    cs_info("metrics on http://%s:%u/metrics", host, m->port);
    return m;
}

void sd_metrics_stop(struct sd_metrics *m)
{
    if (!m)
        return;
    MHD_stop_daemon(m->mhd);
    free(m);
}

int sd_metrics_fd(const struct sd_metrics *m)
{
    return m->epfd;
}

uint16_t sd_metrics_port(const struct sd_metrics *m)
{
    return m->port;
}

int sd_metrics_timeout_ms(struct sd_metrics *m)
{
    MHD_UNSIGNED_LONG_LONG t;
    if (MHD_get_timeout(m->mhd, &t) != MHD_YES)
        return -1;
    return t > 60000 ? 60000 : (int)t;
}

void sd_metrics_run(struct sd_metrics *m)
{
    MHD_run(m->mhd);
}
