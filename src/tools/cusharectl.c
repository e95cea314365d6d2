/* cusharectl: look at and steer cushared.
 *
 *   cusharectl [--socket PATH] status [--json]
 *   cusharectl [--socket PATH] top
 *   cusharectl [--socket PATH] set KEY=VALUE...
 *   cusharectl [--socket PATH] drain GPU | undrain GPU
 *
 * Exit status: 0 done; 1 the daemon refused or failed the request; 2 usage
 * error; 3 no daemon to talk to. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "common/proto.h"
#include "common/util.h"
#include "tools/ctl_client.h"
#include "tools/ctl_print.h"

enum { EXIT_REFUSED = 1, EXIT_USAGE = 2, EXIT_NODAEMON = 3 };

static void usage(FILE *f)
{
    fprintf(f,
            "usage: cusharectl [--socket PATH] COMMAND\n"
            "  status [--json]     GPUs and their clients (--json: machine-readable)\n"
            "  top                 status, refreshed every second (q or Ctrl-C quits)\n"
            "  set KEY=VALUE...    change settings at run time, all or none\n"
            "                      (keys: docs/configuration.md; per client:\n"
            "                      client.<pid or name>.weight=N, .priority=high|normal|low)\n"
            "  drain GPU           revoke the GPU and grant nobody (GPU: index or UUID)\n"
            "  undrain GPU         resume granting\n"
            "Changes need the daemon's uid or root.\n");
}

static int connect_or_die(const char *path)
{
    char err[256];
    int fd = ctl_open(path, err, sizeof err);
    if (fd < 0) {
        fprintf(stderr, "cusharectl: %s\n", err);
        if (fd == -ENOENT || fd == -ECONNREFUSED)
            fprintf(stderr, "cusharectl: is cushared running? (cushare-run starts one)\n");
        exit(EXIT_NODAEMON);
    }
    return fd;
}

static int cmd_status(int fd, bool json)
{
    struct ctl_status st;
    char err[256];
    if (ctl_status_get(fd, &st, err, sizeof err) < 0) {
        fprintf(stderr, "cusharectl: status: %s\n", err);
        return EXIT_REFUSED;
    }
    if (json)
        ctl_print_json(stdout, &st);
    else
        ctl_print_table(stdout, &st, NULL);
    ctl_status_free(&st);
    return fflush(stdout) == 0 ? 0 : EXIT_REFUSED;
}

/* ---- top ------------------------------------------------------------------------ */

/* Written by the signal handler, read by the loop: the only global. */
static volatile sig_atomic_t top_stop;

static void on_stop(int sig)
{
    (void)sig;
    top_stop = 1;
}

static int cmd_top(int fd)
{
    struct termios saved, raw;
    bool tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0;
    if (tty) {
        raw = saved;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    }
    struct sigaction sa = {.sa_handler = on_stop};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    struct ctl_status prev, cur;
    memset(&prev, 0, sizeof prev);
    bool have_prev = false;
    int rc = 0;
    char err[256];
    while (!top_stop) {
        if (ctl_status_get(fd, &cur, err, sizeof err) < 0) {
            fprintf(stderr, "cusharectl: top: %s\n", err);
            rc = EXIT_REFUSED;
            break;
        }
        fputs("\033[H\033[2J", stdout);
        ctl_print_table(stdout, &cur, have_prev ? &prev : NULL);
        fputs("\n(q quits; GPU% is over the last second; * = idle)\n", stdout);
        fflush(stdout);
        if (have_prev)
            ctl_status_free(&prev);
        prev = cur;
        have_prev = true;
        struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
        if (poll(&p, tty ? 1 : 0, 1000) > 0) {
            char ch;
            if (read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q'))
                break;
        }
    }
    if (have_prev)
        ctl_status_free(&prev);
    if (tty)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    return rc;
}

/* ---- set, drain -------------------------------------------------------------------- */

static int check_pair(const char *arg, struct cs_msg_ctl_set *s)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg) {
        fprintf(stderr, "cusharectl: set: '%s' is not KEY=VALUE\n", arg);
        return -1;
    }
    size_t kl = (size_t)(eq - arg), vl = strlen(eq + 1);
    if (kl >= sizeof s->key || vl >= sizeof s->value) {
        fprintf(stderr, "cusharectl: set: '%s': key or value too long\n", arg);
        return -1;
    }
    for (const char *c = arg; *c; c++) {
        if (*c < 0x20 || *c > 0x7e) {
            fprintf(stderr, "cusharectl: set: '%s': only printable ASCII\n", arg);
            return -1;
        }
    }
    memcpy(s->key, arg, kl);
    s->key[kl] = '\0';
    memcpy(s->value, eq + 1, vl + 1);
    return 0;
}

static int cmd_set(int fd, int argc, char **argv)
{
    /* Check everything before sending anything. */
    for (int i = 0; i < argc; i++) {
        struct cs_msg_ctl_set s;
        if (check_pair(argv[i], &s) < 0)
            return EXIT_USAGE;
    }
    for (int i = 0; i < argc; i++) {
        struct cs_msg m = {.type = CS_MSG_CTL_SET};
        check_pair(argv[i], &m.u.ctl_set);
        m.u.ctl_set.flags = i + 1 < argc ? CS_CTL_SET_MORE : 0;
        struct cs_msg_ctl_done d;
        char err[256];
        if (ctl_request(fd, &m, &d, err, sizeof err) < 0) {
            fprintf(stderr, "cusharectl: set: %s\n", err);
            return EXIT_REFUSED;
        }
        if (d.status != 0) {
            fprintf(stderr, "cusharectl: set %s: %s\n", argv[i], d.text);
            return EXIT_REFUSED;
        }
        if (i + 1 == argc)
            printf("%s\n", d.text);
    }
    return 0;
}

static int cmd_drain(int fd, const char *gpu, bool on)
{
    struct cs_msg m = {.type = CS_MSG_CTL_DRAIN};
    m.u.ctl_drain.on = on;
    if (strlen(gpu) >= sizeof m.u.ctl_drain.gpu) {
        fprintf(stderr, "cusharectl: GPU '%s' is too long\n", gpu);
        return EXIT_USAGE;
    }
    cs_strlcpy(m.u.ctl_drain.gpu, gpu, sizeof m.u.ctl_drain.gpu);
    struct cs_msg_ctl_done d;
    char err[256];
    if (ctl_request(fd, &m, &d, err, sizeof err) < 0) {
        fprintf(stderr, "cusharectl: %s\n", err);
        return EXIT_REFUSED;
    }
    if (d.status != 0) {
        fprintf(stderr, "cusharectl: %s %s: %s\n", on ? "drain" : "undrain", gpu, d.text);
        return EXIT_REFUSED;
    }
    printf("%s\n", d.text);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"socket", required_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char path[256] = "";
    int ch;
    /* "+": options stop at the command, whose own arguments follow. */
    while ((ch = getopt_long(argc, argv, "+s:h", longopts, NULL)) != -1) {
        if (ch == 's') {
            cs_strlcpy(path, optarg, sizeof path);
        } else if (ch == 'h') {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (!path[0] && cs_default_socket_path(path, sizeof path) < 0) {
        fprintf(stderr, "cusharectl: cannot form the default socket path\n");
        return EXIT_USAGE;
    }
    const char *cmd = argv[optind];
    int nargs = argc - optind - 1;
    char **args = argv + optind + 1;
    bool json = nargs == 1 && strcmp(args[0], "--json") == 0;
    bool ok = (strcmp(cmd, "status") == 0 && (nargs == 0 || json)) ||
              (strcmp(cmd, "top") == 0 && nargs == 0) ||
              (strcmp(cmd, "set") == 0 && nargs > 0) ||
              ((strcmp(cmd, "drain") == 0 || strcmp(cmd, "undrain") == 0) && nargs == 1);
    if (!ok) {
        fprintf(stderr, "cusharectl: bad command line for '%s'\n", cmd);
        usage(stderr);
        return EXIT_USAGE;
    }
    int fd = connect_or_die(path);
    int rc;
    if (strcmp(cmd, "status") == 0)
        rc = cmd_status(fd, json);
    else if (strcmp(cmd, "top") == 0)
        rc = cmd_top(fd);
    else if (strcmp(cmd, "set") == 0)
        rc = cmd_set(fd, nargs, args);
    else
        rc = cmd_drain(fd, args[0], strcmp(cmd, "drain") == 0);
    close(fd);
    return rc;
}
