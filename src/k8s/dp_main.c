/* dp_main.c: cushare-device-plugin. Settings, NVML, the files containers
 * mount, then the loop (dp_loop.c) until SIGTERM or SIGINT. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <grpc/grpc.h>

#include "common/log.h"
#include "common/util.h"
#include "k8s/dp_config.h"
#include "k8s/dp_ids.h"
#include "k8s/dp_install.h"
#include "k8s/dp_nvml.h"
#include "k8s/dp_plugin.h"

static int settings(struct dp_config *c, int argc, char **argv, enum dp_action *act)
{
    char err[512];
    dp_config_defaults(c);
    if (dp_config_env(c, err, sizeof err) < 0) {
        fprintf(stderr, "cushare-device-plugin: %s\n", err);
        return 1;
    }
    if (dp_config_args(c, argc, argv, act, err, sizeof err) < 0) {
        fprintf(stderr, "cushare-device-plugin: %s (see --help)\n", err);
        return 2;
    }
    if (*act == DP_ACT_HELP)
        return 0;
    if (dp_config_finish(c, err, sizeof err) < 0) {
        fprintf(stderr, "cushare-device-plugin: %s\n", err);
        return 1;
    }
    return 0;
}

static void log_gpus(const struct dp_config *c, const struct dp_node *n)
{
    char sz[32];
    for (size_t i = 0; i < n->ngpus; i++)
        cs_info("GPU %zu: %s %s, %s, NUMA node %d", i, n->gpu[i].uuid, n->gpu[i].name,
                cs_format_size(n->gpu[i].mem_total, sz, sizeof sz), n->gpu[i].numa);
    for (size_t i = 0; i < c->nres; i++)
        cs_info("advertising %s: %u per GPU", c->res[i].name, dp_ids_per_gpu(&c->res[i], &n->gpu[0]));
}

/* NVML, the GPUs, and IDs that fit the kubelet's limit. */
static int discover(const struct dp_config *c, struct dp_node *n)
{
    char err[512];
    if (dp_nvml_open(c->nvml_lib, err, sizeof err) < 0 ||
        dp_nvml_discover(n, c->sysfs, err, sizeof err) < 0) {
        cs_error("%s", err);
        return -1;
    }
    for (size_t i = 0; i < n->ngpus; i++)
        for (size_t r = 0; r < c->nres; r++) {
            char id[DP_ID_MAX + 1];
            unsigned last = dp_ids_per_gpu(&c->res[r], &n->gpu[i]);
            if (dp_id_make(id, &c->res[r], &n->gpu[i], last ? last - 1 : 0) < 0) {
                cs_error("GPU UUID %s is too long for a device ID", n->gpu[i].uuid);
                return -1;
            }
        }
    dp_nvml_events_init(n);
    log_gpus(c, n);
    return 0;
}

static int install(const struct dp_config *c)
{
    char err[512];
    if (*c->install_lib && dp_install_lib(c->install_lib, c->lib, err, sizeof err) < 0) {
        cs_error("%s", err);
        return -1;
    }
    struct stat st;
    if (stat(c->lib, &st) < 0)
        cs_warn("%s does not exist (yet): containers cannot start until it does", c->lib);
    if (c->inject == DP_INJECT_PRELOAD &&
        dp_install_preload(c->preload_file, c->lib_container, err, sizeof err) < 0) {
        cs_error("%s", err);
        return -1;
    }
    return 0;
}

/* Blocked in every thread, so that they arrive only through the loop's
 * signalfd: hence before NVML is initialized (the real libnvidia-ml starts
 * threads of its own; a SIGTERM delivered to one of them would kill the
 * process with the socket left behind) and before grpc_init. */
static void block_signals(void)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
}

static int serve(const struct dp_config *c, const struct dp_node *n)
{
    static struct dp_plugin p; /* large (GPU table, slots): not on the stack */
    grpc_init();
    int rc = dp_plugin_init(&p, c, n) < 0 ? 1 : dp_plugin_run(&p);
    dp_plugin_free(&p);
    grpc_shutdown();
    return rc;
}

int main(int argc, char **argv)
{
    static struct dp_config cfg;
    static struct dp_node node;
    enum dp_action act = DP_ACT_RUN;
    int rc = settings(&cfg, argc, argv, &act);
    if (rc || act == DP_ACT_HELP) {
        if (act == DP_ACT_HELP && !rc)
            dp_config_usage(stdout);
        return rc;
    }
    if (act == DP_ACT_PRINT) {
        dp_config_print(&cfg, stdout);
        return 0;
    }
    cs_log_init("cushare-device-plugin", (enum cs_log_level)cfg.log_level);
    block_signals();
    if (discover(&cfg, &node) < 0 || install(&cfg) < 0)
        return 1;
    rc = serve(&cfg, &node);
    dp_nvml_close();
    cs_info("stopped");
    return rc;
}
