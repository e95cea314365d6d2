/* cusharectl: look at and steer cushared.
 *
 *   cusharectl [--socket PATH] status [--json]
 *   cusharectl [--socket PATH] top
 *   cusharectl [--socket PATH] set KEY=VALUE...
 *   cusharectl [--socket PATH] drain GPU | undrain GPU
 *   cusharectl [--socket PATH] endpoint create ID [--priority P] [--weight-max N]
 *              [--mem-limit SIZE] [--gpus UUID[,UUID...]] [--max-conns N]
 *              [--pod P] [--namespace N]
 *   cusharectl [--socket PATH] endpoint remove ID
 *   cusharectl [--socket PATH] endpoint identity ID --pod P --namespace N
 *              [--container C]
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
            "  endpoint create ID [--priority P] [--weight-max N] [--mem-limit SIZE]\n"
            "                  [--gpus UUID[,UUID...]] [--max-conns N] [--pod P]\n"
            "                  [--namespace N]\n"
            "                      a socket whose clients may claim at most these terms\n"
            "                      (default: normal, weight 1, any GPU); prints its path\n"
            "  endpoint remove ID  close it (its open connections keep running)\n"
            "  endpoint identity ID --pod P --namespace N [--container C]\n"
            "                      name the pod of an endpoint that names none yet (what\n"
            "                      the device plugin does); its clients are shown with it\n"
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

/* ---- endpoint ------------------------------------------------------------------------ */

static int parse_gpus(const char *arg, struct cs_msg_ctl_endpoint *e)
{
    char buf[CS_MAX_DEVICES * CS_UUID_STR_LEN + 1];
    if (strlen(arg) >= sizeof buf)
        return -1;
    cs_strlcpy(buf, arg, sizeof buf);
    char *save = NULL;
    for (char *u = strtok_r(buf, ",", &save); u; u = strtok_r(NULL, ",", &save))
        if (e->ngpus == CS_MAX_DEVICES || cs_uuid_parse(u, e->gpus[e->ngpus++]) < 0)
            return -1;
    return e->ngpus ? 0 : -1;
}

static int set_text(char *dst, const char *v)
{
    if (strlen(v) >= CS_NAME_LEN)
        return -1;
    for (const char *c = v; *c; c++)
        if (*c < 0x21 || *c > 0x7e)
            return -1;
    cs_strlcpy(dst, v, CS_NAME_LEN);
    return 0;
}

/* One option of `endpoint create` or `identity` (container: the latter's
 * --container); -1 with a message on a bad value. */
static int endpoint_opt(int ch, const char *v, struct cs_msg_ctl_endpoint *e, char *container)
{
    uint64_t x;
    int p;
    switch (ch) {
    case 'p':
        if ((p = cs_priority_parse(v)) < 0)
            break;
        e->max_priority = (uint32_t)p;
        return 0;
    case 'w':
        if (cs_parse_u64(v, 1, CS_WEIGHT_MAX, &x) < 0)
            break;
        e->max_weight = (uint32_t)x;
        return 0;
    case 'm':
        if (cs_parse_size(v, &x) < 0)
            break;
        e->mem_limit = x;
        return 0;
    case 'g':
        if (parse_gpus(v, e) < 0)
            break;
        return 0;
    case 'c':
        if (cs_parse_u64(v, 0, 65536, &x) < 0)
            break;
        e->max_conns = (uint32_t)x;
        return 0;
    case 'P':
        if (set_text(e->pod, v) < 0)
            break;
        return 0;
    case 'n':
        if (set_text(e->ns, v) < 0)
            break;
        return 0;
    case 'C':
        if (set_text(container, v) < 0)
            break;
        return 0;
    }
    fprintf(stderr, "cusharectl: endpoint: bad value '%s'\n", v);
    return -1;
}

/* m (CTL_ENDPOINT, parsed as for create) becomes the CTL_EP_IDENTITY of
 * its id, pod and namespace, and container. -1: usage error. */
static int identity_msg(struct cs_msg *m, const char *container)
{
    struct cs_msg_ctl_endpoint e = m->u.ctl_endpoint;
    if (!e.pod[0] || !e.ns[0]) {
        fprintf(stderr, "cusharectl: endpoint identity: --pod and --namespace are needed\n");
        return -1;
    }
    memset(m, 0, sizeof *m);
    m->type = CS_MSG_CTL_EP_IDENTITY;
    struct cs_msg_ctl_ep_identity *i = &m->u.ctl_ep_identity;
    cs_strlcpy(i->id, e.id, sizeof i->id);
    cs_strlcpy(i->pod, e.pod, sizeof i->pod);
    cs_strlcpy(i->ns, e.ns, sizeof i->ns);
    cs_strlcpy(i->container, container, sizeof i->container);
    return 0;
}

/* Whether option ch belongs to the verb: identity takes only the pod's
 * names, create all but --container. */
static bool opt_of(int ch, bool identity)
{
    return identity ? strchr("PnC", ch) != NULL : ch != 'C';
}

/* argv[0] is "create", "remove" or "identity", argv[1] the id, then the
 * options of create or identity. Checked whole before connecting. -1:
 * usage error. */
static int endpoint_args(int argc, char **argv, struct cs_msg *m)
{
    static const struct option lo[] = {
        {"priority", required_argument, NULL, 'p'}, {"weight-max", required_argument, NULL, 'w'},
        {"mem-limit", required_argument, NULL, 'm'}, {"gpus", required_argument, NULL, 'g'},
        {"max-conns", required_argument, NULL, 'c'}, {"pod", required_argument, NULL, 'P'},
        {"namespace", required_argument, NULL, 'n'}, {"container", required_argument, NULL, 'C'},
        {NULL, 0, NULL, 0},
    };
    struct cs_msg_ctl_endpoint *e = &m->u.ctl_endpoint;
    memset(m, 0, sizeof *m);
    m->type = CS_MSG_CTL_ENDPOINT;
    e->max_priority = CS_PRIO_NORMAL;
    e->max_weight = 1;
    bool create = argc >= 2 && strcmp(argv[0], "create") == 0;
    bool identity = argc >= 2 && strcmp(argv[0], "identity") == 0;
    if (argc < 2 || (!create && !identity && (strcmp(argv[0], "remove") != 0 || argc != 2)) ||
        strlen(argv[1]) >= sizeof e->id) {
        fprintf(stderr, "cusharectl: endpoint create ID [options] | endpoint remove ID | "
                        "endpoint identity ID --pod P --namespace N [--container C]\n");
        return -1;
    }
    e->op = create ? CS_EP_CREATE : CS_EP_REMOVE;
    cs_strlcpy(e->id, argv[1], sizeof e->id);
    optind = 0; /* glibc: a full reset; argv[1] (the id) plays the program name */
    opterr = 0;
    int ch;
    char container[CS_NAME_LEN] = "";
    while ((create || identity) && (ch = getopt_long(argc - 1, argv + 1, "", lo, NULL)) != -1) {
        if (ch == '?' || !opt_of(ch, identity)) {
            fprintf(stderr, "cusharectl: endpoint %s: unknown option or missing value "
                            "(see --help)\n", argv[0]);
            return -1;
        }
        if (endpoint_opt(ch, optarg, e, container) < 0)
            return -1;
    }
    if ((create || identity) && optind != argc - 1) {
        fprintf(stderr, "cusharectl: endpoint %s: unexpected '%s'\n", argv[0],
                argv[optind + 1]);
        return -1;
    }
    return identity ? identity_msg(m, container) : 0;
}

static int cmd_endpoint(int fd, const struct cs_msg *m, const char *verb, const char *id)
{
    struct cs_msg_ctl_done d;
    char err[256];
    if (ctl_request(fd, m, &d, err, sizeof err) < 0) {
        fprintf(stderr, "cusharectl: endpoint: %s\n", err);
        return EXIT_REFUSED;
    }
    if (d.status != 0) {
        fprintf(stderr, "cusharectl: endpoint %s %s: %s\n", verb, id, d.text);
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
    struct cs_msg ep;
    if (strcmp(cmd, "endpoint") == 0) {
        if (endpoint_args(nargs, args, &ep) < 0)
            return EXIT_USAGE;
        ok = true;
    }
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
    else if (strcmp(cmd, "endpoint") == 0)
        rc = cmd_endpoint(fd, &ep, args[0], args[1]);
    else
        rc = cmd_drain(fd, args[0], strcmp(cmd, "drain") == 0);
    close(fd);
    return rc;
}
