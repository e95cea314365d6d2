/* main.c: cushared's command line.
 *
 *   cushared [--socket PATH] [--config FILE] [--metrics HOST:PORT]
 *            [--log-level LEVEL] [--state FILE] [--print-config]
 *
 * Options override the config file, which overrides the built-in defaults.
 * Runs in the foreground and logs to stderr (systemd or cushare-run decide
 * where that goes). Exits 0 on SIGTERM/SIGINT, 1 on a start-up error, 2 on
 * a usage error. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fsafe.h"
#include "common/log.h"
#include "common/proto.h"
#include "common/util.h"
#include "sched/config.h"
#include "sched/metrics.h"
#include "sched/server.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: cushared [--socket PATH] [--config FILE] [--metrics HOST:PORT]\n"
            "                [--log-level error|warn|info|debug] [--state FILE|none]\n"
            "                [--print-config]\n"
            "Schedules GPU leases among the processes that run under libcushare.so.\n"
            "Default socket: /run/cushare/cushared.sock as root, else\n"
            "$XDG_RUNTIME_DIR/cushare/cushared.sock. See docs/configuration.md.\n");
}

struct opts {
    char socket[SD_PATH_LEN];
    const char *config;
    const char *metrics;
    const char *log_level;
    const char *state;
    int print_config;
};

static int parse_args(int argc, char **argv, struct opts *o)
{
    static const struct option longopts[] = {
        {"socket", required_argument, NULL, 's'},
        {"config", required_argument, NULL, 'c'},
        {"metrics", required_argument, NULL, 'm'},
        {"log-level", required_argument, NULL, 'l'},
        {"state", required_argument, NULL, 'S'},
        {"print-config", no_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "s:c:m:l:h", longopts, NULL)) != -1) {
        switch (ch) {
        case 's':
            if (strlen(optarg) >= sizeof o->socket) {
                fprintf(stderr, "cushared: --socket: path too long\n");
                return -1;
            }
            cs_strlcpy(o->socket, optarg, sizeof o->socket);
            break;
        case 'c': o->config = optarg; break;
        case 'm': o->metrics = optarg; break;
        case 'l': o->log_level = optarg; break;
        case 'S': o->state = optarg; break;
        case 'p': o->print_config = 1; break;
        case 'h': usage(stdout); exit(0);
        default: return -1;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "cushared: unexpected argument '%s'\n", argv[optind]);
        return -1;
    }
    return 0;
}

/* Options go through the same validation as the config file. */
static int apply_options(struct sd_config *cfg, const struct opts *o)
{
    char err[256];
    const char *keys[] = {"metrics", "log_level", "state_file"};
    const char *vals[] = {o->metrics, o->log_level, o->state};
    for (int i = 0; i < 3; i++) {
        if (vals[i] && sd_config_set(cfg, keys[i], vals[i], false, err, sizeof err) < 0) {
            fprintf(stderr, "cushared: %s\n", err);
            return -1;
        }
    }
    return 0;
}

/* "<socket minus .sock>.state" unless the config says otherwise. */
static void state_path(const struct sd_config *cfg, const char *sock, char *out, size_t cap)
{
    if (strcmp(cfg->state_file, "none") == 0) {
        out[0] = '\0';
        return;
    }
    if (cfg->state_file[0]) {
        cs_strlcpy(out, cfg->state_file, cap);
        return;
    }
    size_t n = strlen(sock);
    if (n > 5 && strcmp(sock + n - 5, ".sock") == 0)
        n -= 5;
    snprintf(out, cap, "%.*s.state", (int)n, sock);
}

/* The state file's directory is ours and closed to others before the state
 * is read or written, as the socket's is (by default they are one): a
 * planted state file would tell the next daemon whom to wait for. */
static int check_state_dir(const char *state)
{
    char dir[SD_PATH_LEN + 8], err[512];
    cs_fs_split(state, dir, sizeof dir);
    if (cs_fs_ensure_dir(dir, cs_fs_sock_dir_mode(), err, sizeof err) < 0) {
        cs_error("not using the state file %s: %s", state, err);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o;
    memset(&o, 0, sizeof o);
    if (parse_args(argc, argv, &o) < 0) {
        usage(stderr);
        return 2;
    }
    static struct sd_config cfg;       /* main's; the server copies it */
    static struct sd_overrides ov;
    sd_config_defaults(&cfg);
    char err[512];
    if (o.config && sd_config_load(&cfg, &ov, o.config, err, sizeof err) < 0) {
        fprintf(stderr, "cushared: %s\n", err);
        return 1;
    }
    if (apply_options(&cfg, &o) < 0)
        return 2;
    if (o.print_config) {
        char buf[16384];
        size_t n = sd_config_dump(&cfg, buf, sizeof buf);
        fwrite(buf, 1, n, stdout);
        return 0;
    }
    cs_log_init("cushared", (enum cs_log_level)cfg.log_level);
    if (!o.socket[0] && cs_default_socket_path(o.socket, sizeof o.socket) < 0) {
        cs_error("cannot form the default socket path");
        return 1;
    }
    char state[SD_PATH_LEN + 8];
    state_path(&cfg, o.socket, state, sizeof state);
    if (state[0] && check_state_dir(state) < 0)
        return 1;
    struct sd_server_opts so = {.socket_path = o.socket, .state_path = state[0] ? state : NULL};
    static struct sd_server srv; /* large (policy tables); one per process */
    int rc = 1;
    if (sd_server_init(&srv, &cfg, &ov, &so) == 0) {
        if (cfg.metrics[0] && !(srv.metrics = sd_metrics_start(&srv, cfg.metrics, err,
                                                                sizeof err)))
            cs_error("%s", err);
        else
            rc = sd_server_run(&srv) == 0 ? 0 : 1;
    }
    sd_server_fini(&srv);
    if (rc == 0)
        cs_info("stopped");
    return rc;
}
