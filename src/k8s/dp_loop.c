/* dp_loop.c: the plugin's one thread. It waits on the completion queue for
 * at most DP_TICK_MS, runs the op of each event, and between events looks
 * at its other sources without blocking: the signalfd, the inotify fd, the
 * health and check timers and the pod-resources lookups (dp_podres). (gRPC's
 * C core cannot wait on foreign file descriptors; a short tick costs nothing
 * measurable and keeps every state change on this thread, so nothing here
 * needs a lock.) */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "k8s/dp_grpc.h"
#include "k8s/dp_plugin.h"

#define DP_TICK_MS 100
#define DP_CHECK_NS (1000ull * 1000000ull)
#define DP_BACKOFF_MIN_MS 1000u
#define DP_BACKOFF_MAX_MS 30000u

/* ---- slots ---------------------------------------------------------------------- */

static void slot_start(struct dp_slot *s)
{
    char err[256];
    s->srv = dp_srv_start(s, err, sizeof err);
    if (!s->srv)
        cs_error("%s: %s (retrying)", s->res->name, err);
}

/* New server, new registration: what the kubelet needs after it restarted
 * or lost our socket. The old server must be gone first: it unlinks its
 * socket path when it shuts down. */
static void slot_restart(struct dp_slot *s)
{
    s->registered = false;
    s->retry_at = 0;
    s->backoff_ms = DP_BACKOFF_MIN_MS;
    dp_reg_cancel(s);
    if (s->srv) {
        s->old = s->srv;
        s->srv = NULL;
        s->restart = true;
        dp_srv_stop(s->old);
    } else if (!s->old) {
        slot_start(s);
    } else {
        s->restart = true;
    }
}

static void slot_srv_gone(struct dp_slot *s, struct dp_srv *srv)
{
    if (s->old == srv)
        s->old = NULL;
    if (s->restart && !s->p->stopping) {
        s->restart = false;
        slot_start(s);
        dp_plugin_check(s->p);
    }
}

static void slot_reg_done(struct dp_slot *s, bool ok)
{
    if (s->p->stopping)
        return;
    s->registered = ok;
    if (ok) {
        s->backoff_ms = DP_BACKOFF_MIN_MS;
        cs_info("%s: registered with the kubelet", s->res->name);
        return;
    }
    /* A call cancelled by a restart is retried as soon as the new server is up. */
    s->retry_at = s->srv ? cs_now_ns() + (uint64_t)s->backoff_ms * 1000000ull : 0;
    if (s->srv && s->backoff_ms < DP_BACKOFF_MAX_MS)
        s->backoff_ms *= 2;
}

static const struct dp_slot_ops slot_ops = {.srv_gone = slot_srv_gone,
                                             .reg_done = slot_reg_done};

static bool socket_intact(const struct dp_slot *s)
{
    struct stat st;
    return stat(s->sock_path, &st) == 0 && st.st_ino == s->sock_ino && st.st_dev == s->sock_dev;
}

static void check_slot(struct dp_slot *s, const struct stat *kst, uint64_t now)
{
    if (s->srv && !socket_intact(s)) {
        cs_warn("%s: socket %s was removed; serving again and re-registering", s->res->name,
                s->sock_path);
        slot_restart(s);
        return;
    }
    if (!s->srv && !s->old)
        slot_start(s);
    if (!kst) {
        if (s->registered)
            cs_warn("%s: the kubelet's socket is gone; waiting for it", s->res->name);
        s->registered = false;
        return;
    }
    if ((s->registered || s->reg) && (s->kubelet_ino != kst->st_ino || s->p->kubelet_new)) {
        cs_info("%s: the kubelet restarted; re-registering", s->res->name);
        slot_restart(s);
        return;
    }
    if (!s->registered && !s->reg && s->srv && now >= s->retry_at) {
        s->kubelet_ino = kst->st_ino;
        dp_reg_start(s);
    }
}

void dp_plugin_check(struct dp_plugin *p)
{
    if (p->stopping)
        return;
    struct stat st;
    bool kubelet = stat(p->kubelet_path, &st) == 0 && S_ISSOCK(st.st_mode);
    uint64_t now = cs_now_ns();
    for (size_t i = 0; i < p->nslots; i++)
        check_slot(&p->slot[i], kubelet ? &st : NULL, now);
    p->kubelet_new = false;
}

/* ---- start, stop ---------------------------------------------------------------------- */

int dp_plugin_init(struct dp_plugin *p, const struct dp_config *cfg, const struct dp_node *node)
{
    memset(p, 0, sizeof *p);
    p->cfg = cfg;
    p->ops = &slot_ops;
    p->node = *node;
    dp_podres_init(&p->podres, p);
    p->sig_fd = p->watch_fd = -1;
    snprintf(p->kubelet_path, sizeof p->kubelet_path, "%s/%s", cfg->plugin_dir, cfg->kubelet_sock);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    p->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (p->sig_fd < 0) {
        cs_error("signalfd: %s", strerror(errno));
        return -1;
    }
    if ((p->watch_fd = dp_watch_open(cfg->plugin_dir)) < 0)
        return -1;
    p->cq = grpc_completion_queue_create_for_next(NULL);
    p->nslots = cfg->nres;
    for (size_t i = 0; i < cfg->nres; i++) {
        struct dp_slot *s = &p->slot[i];
        s->res = &cfg->res[i];
        s->p = p;
        s->backoff_ms = DP_BACKOFF_MIN_MS;
        snprintf(s->sock_path, sizeof s->sock_path, "%s/%s", cfg->plugin_dir, s->res->endpoint);
    }
    dp_plugin_check(p);
    return 0;
}

static void begin_stop(struct dp_plugin *p)
{
    cs_info("stopping");
    p->stopping = true;
    dp_podres_stop(&p->podres);
    for (size_t i = 0; i < p->nslots; i++) {
        struct dp_slot *s = &p->slot[i];
        dp_reg_cancel(s);
        s->restart = false;
        if (s->srv) {
            s->old = s->srv;
            s->srv = NULL;
            dp_srv_stop(s->old);
        }
    }
}

static void read_signals(struct dp_plugin *p)
{
    struct signalfd_siginfo si;
    while (read(p->sig_fd, &si, sizeof si) == (ssize_t)sizeof si)
        if (!p->stopping) {
            cs_info("signal %u", si.ssi_signo);
            begin_stop(p);
        }
}

static void health(struct dp_plugin *p)
{
    if (!dp_health_run(&p->node))
        return;
    for (size_t i = 0; i < p->nslots; i++)
        if (p->slot[i].srv)
            dp_srv_changed(p->slot[i].srv);
}

static void tick(struct dp_plugin *p, bool *cq_shut)
{
    uint64_t now = cs_now_ns();
    read_signals(p);
    unsigned w = dp_watch_drain(p->watch_fd, p->cfg->kubelet_sock);
    if (w & DP_WATCH_KUBELET)
        p->kubelet_new = true;
    if (w || now >= p->next_check) {
        dp_plugin_check(p);
        p->next_check = now + DP_CHECK_NS;
    }
    if (!p->stopping)
        dp_podres_tick(&p->podres, now);
    if (!p->stopping && now >= p->next_health) {
        health(p);
        p->next_health = now + (uint64_t)p->cfg->health_ms * 1000000ull;
    }
    for (size_t i = 0; i < p->nslots; i++)
        if (p->slot[i].old)
            dp_srv_tick(p->slot[i].old, now);
    if (p->stopping && p->live == 0 && !*cq_shut) {
        grpc_completion_queue_shutdown(p->cq);
        *cq_shut = true;
    }
}

int dp_plugin_run(struct dp_plugin *p)
{
    bool cq_shut = false;
    uint64_t now = cs_now_ns();
    p->next_check = now + DP_CHECK_NS;
    p->next_health = now + (uint64_t)p->cfg->health_ms * 1000000ull;
    while (dp_cq_dispatch(p->cq, cq_shut ? 1000 : DP_TICK_MS) >= 0)
        tick(p, &cq_shut);
    return 0;
}

void dp_plugin_free(struct dp_plugin *p)
{
    if (p->cq)
        grpc_completion_queue_destroy(p->cq);
    if (p->sig_fd >= 0)
        close(p->sig_fd);
    if (p->watch_fd >= 0)
        close(p->watch_fd);
    p->cq = NULL;
    p->sig_fd = p->watch_fd = -1;
    dp_podres_free(&p->podres);
    dp_eps_free(&p->eps);
}
