/* cushare-run: run a command under cushare.
 *
 *   cushare-run [--socket PATH] [--priority high|normal|low] [--weight N]
 *               [--mem-limit SIZE] [--name NAME] -- CMD [ARGS...]
 *
 * Puts libcushare.so (from <dir of this program>/../lib) in front of
 * LD_PRELOAD, exports the CUSHARE_* settings and execs CMD. If no daemon
 * answers on the socket, starts a private cushared for the user first
 * (detached, logging next to the socket) and leaves it running for the jobs
 * that follow. An option given wins over the same CUSHARE_* variable already
 * in the environment, which wins over the default. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/fsafe.h"
#include "common/proto.h"
#include "common/util.h"
#include "tools/ctl_client.h"

#define RUN_START_WAIT_MS 10000

struct run_opts {
    char socket[108];
    const char *priority; /* canonical name */
    char weight[16];
    char mem_limit[24];   /* bytes, decimal */
    const char *name;
    char **cmd;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: cushare-run [--socket PATH] [--priority high|normal|low] [--weight N]\n"
               "                   [--mem-limit SIZE] [--name NAME] -- CMD [ARGS...]\n"
               "Runs CMD with libcushare.so so that it shares the GPU through cushared.\n"
               "SIZE: bytes or with K, M, G, T (powers of 1024), e.g. 12G.\n");
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cushare-run: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
}

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n >= CS_NAME_LEN)
        return false;
    for (; *s; s++)
        if (*s < 0x20 || *s > 0x7e)
            return false;
    return true;
}

/* An absolute path, so the CMD may chdir without losing its daemon. */
static int set_socket(struct run_opts *o, const char *p)
{
    char cwd[PATH_MAX];
    int n;
    if (p[0] == '/')
        n = snprintf(o->socket, sizeof o->socket, "%s", p);
    else if (getcwd(cwd, sizeof cwd))
        n = snprintf(o->socket, sizeof o->socket, "%s/%s", cwd, p);
    else
        return fail("--socket: cannot resolve '%s'", p);
    if (n < 0 || (size_t)n >= sizeof o->socket)
        return fail("--socket: path too long: %s", p);
    return 0;
}

static int parse_opt(struct run_opts *o, int ch, const char *arg)
{
    uint64_t v;
    int p;
    switch (ch) {
    case 's':
        return set_socket(o, arg);
    case 'p':
        if ((p = cs_priority_parse(arg)) < 0)
            return fail("--priority: '%s' is not high, normal or low", arg);
        o->priority = cs_priority_name(p);
        return 0;
    case 'w':
        if (cs_parse_u64(arg, 1, CS_WEIGHT_MAX, &v) < 0)
            return fail("--weight: '%s' is not an integer in 1..1000000", arg);
        snprintf(o->weight, sizeof o->weight, "%llu", (unsigned long long)v);
        return 0;
    case 'm':
        if (cs_parse_size(arg, &v) < 0)
            return fail("--mem-limit: '%s' is not a size (e.g. 512M, 12G)", arg);
        snprintf(o->mem_limit, sizeof o->mem_limit, "%llu", (unsigned long long)v);
        return 0;
    case 'n':
        if (!name_ok(arg))
            return fail("--name: '%s' must be 1..63 printable ASCII characters", arg);
        o->name = arg;
        return 0;
    }
    return -1;
}

static int parse_args(int argc, char **argv, struct run_opts *o)
{
    static const struct option longopts[] = {
        {"socket", required_argument, NULL, 's'},
        {"priority", required_argument, NULL, 'p'},
        {"weight", required_argument, NULL, 'w'},
        {"mem-limit", required_argument, NULL, 'm'},
        {"name", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    while ((ch = getopt_long(argc, argv, "+s:p:w:m:n:h", longopts, NULL)) != -1) {
        if (ch == 'h') {
            usage(stdout);
            exit(0);
        }
        if (ch == '?' || parse_opt(o, ch, optarg) < 0)
            return -1;
    }
    if (optind >= argc)
        return fail("%s", "no command given (cushare-run [OPTIONS] -- CMD [ARGS...])");
    o->cmd = argv + optind;
    if (!o->socket[0] && cs_default_socket_path(o->socket, sizeof o->socket) < 0)
        return fail("%s", "cannot form the default socket path");
    return 0;
}

/* ---- the private daemon ------------------------------------------------------------ */

static int self_dir(char *buf, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    char *slash = strrchr(buf, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    return 0;
}

/* Child side: a new session (no terminal signals, survives the CMD), stdin
 * from /dev/null, output to the log (opened by the parent), then the daemon. */
static void exec_daemon(const char *daemon, const char *sock, int out)
{
    setsid();
    int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
        _exit(126);
    /* Whatever else the caller had open (a pipe a script reads to EOF, a
     * lock) must not be held for the daemon's whole life. */
    if (close_range(3, ~0u, 0) < 0)
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
    execl(daemon, "cushared", "--socket", sock, (char *)NULL);
    _exit(127);
}

/* Forks twice so the daemon is nobody's child here: CMD, which replaces
 * this process, never sees it as its own. Returns the daemon's pid. */
static pid_t spawn_daemon(const char *daemon, const char *sock, int log)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -1;
    pid_t child = fork();
    if (child < 0)
        return -1;
    if (child == 0) {
        close(pfd[0]);
        pid_t d = fork();
        if (d == 0)
            exec_daemon(daemon, sock, log);
        ssize_t w = write(pfd[1], &d, sizeof d);
        _exit(w == (ssize_t)sizeof d && d > 0 ? 0 : 1);
    }
    close(pfd[1]);
    pid_t d = -1;
    if (read(pfd[0], &d, sizeof d) != (ssize_t)sizeof d)
        d = -1;
    close(pfd[0]);
    waitpid(child, NULL, 0);
    return d;
}

static bool daemon_answers(const char *sock, int *err_out)
{
    char err[256];
    int fd = ctl_open(sock, err, sizeof err);
    if (fd >= 0) {
        close(fd);
        return true;
    }
    *err_out = -fd;
    return false;
}

/* What to do about a socket directory that failed the check. */
static const char *dir_hint(const char *sock)
{
    char dflt[108];
    if (cs_default_socket_path(dflt, sizeof dflt) < 0 || strcmp(sock, dflt) != 0)
        return "; remove it or choose another --socket";
    return getenv("XDG_RUNTIME_DIR") ? "; remove it or choose another --socket"
                                     : "; remove it, or set XDG_RUNTIME_DIR or --socket";
}

/* The directory the private daemon will use, created or found ours, and
 * its log opened there (never through a planted link). The log's fd, or -1. */
static int prepare_dir(const char *sock, char *log, size_t cap)
{
    char dir[PATH_MAX], err[512];
    cs_fs_split(sock, dir, sizeof dir);
    if (cs_fs_ensure_dir(dir, cs_fs_sock_dir_mode(), err, sizeof err) < 0)
        return fail("not using the socket directory: %s%s", err, dir_hint(sock));
    snprintf(log, cap, "%s/cushared.log", dir);
    int fd = cs_fs_open_append(log, err, sizeof err);
    if (fd < 0)
        return fail("not writing the daemon's log: %s", err);
    return fd;
}

static int ensure_daemon(const char *sock, const char *bindir)
{
    /* A daemon answering in a directory someone else controls may be theirs:
     * the job would report to it and obey it. */
    char err[512];
    if (cs_fs_check_socket(sock, err, sizeof err) < 0 && errno != ENOENT)
        return fail("not using the daemon socket: %s%s", err, dir_hint(sock));
    int e = 0;
    if (daemon_answers(sock, &e))
        return 0;
    if (e != ENOENT && e != ECONNREFUSED) {
        fprintf(stderr, "cushare-run: cannot use the daemon on %s: %s\n", sock, strerror(e));
        return -1;
    }
    char daemon[PATH_MAX + 16], log[PATH_MAX + 16];
    snprintf(daemon, sizeof daemon, "%s/cushared", bindir);
    if (access(daemon, X_OK) < 0) {
        fprintf(stderr, "cushare-run: no daemon on %s and %s cannot be run: %s\n", sock, daemon,
                strerror(errno));
        return -1;
    }
    int fd = prepare_dir(sock, log, sizeof log);
    if (fd < 0)
        return -1;
    pid_t pid = spawn_daemon(daemon, sock, fd);
    close(fd);
    if (pid < 0) {
        fprintf(stderr, "cushare-run: cannot start %s: %s\n", daemon, strerror(errno));
        return -1;
    }
    for (int waited = 0; waited < RUN_START_WAIT_MS; waited += 20) {
        /* Another cushare-run may have won the race (ours then exits, the
         * socket's lock being taken): any answer will do, and only the
         * winner says it started one. */
        if (daemon_answers(sock, &e)) {
            if (kill(pid, 0) == 0)
                fprintf(stderr, "cushare-run: no cushared answered on %s; started a private one "
                                "(pid %d, log %s); it keeps running for later jobs\n",
                        sock, (int)pid, log);
            return 0;
        }
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "cushare-run: cushared did not answer within %d ms; see %s\n",
            RUN_START_WAIT_MS, log);
    return -1;
}

/* ---- environment ------------------------------------------------------------------------ */

static int set_env(const char *key, const char *opt, const char *dflt)
{
    if (opt)
        return setenv(key, opt, 1);
    return setenv(key, dflt, 0); /* keep what the caller's environment says */
}

static int find_lib(const char *bindir, char *real)
{
    char lib[PATH_MAX + 32];
    snprintf(lib, sizeof lib, "%s/../lib/libcushare.so", bindir);
    if (!realpath(lib, real)) {
        fprintf(stderr, "cushare-run: %s: %s (build or install libcushare.so)\n", lib,
                strerror(errno));
        return -1;
    }
    return 0;
}

static int prepare_env(const struct run_opts *o, const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    size_t n = strlen(lib) + (old ? strlen(old) + 2 : 1);
    char *pre = malloc(n);
    if (!pre)
        return -1;
    snprintf(pre, n, "%s%s%s", lib, old && *old ? ":" : "", old ? old : "");
    const char *base = strrchr(o->cmd[0], '/');
    base = base ? base + 1 : o->cmd[0];
    char dname[CS_NAME_LEN];
    cs_strlcpy(dname, base, sizeof dname);
    int rc = setenv("LD_PRELOAD", pre, 1) | setenv("CUSHARE_SOCKET", o->socket, 1) |
             set_env("CUSHARE_PRIORITY", o->priority, "normal") |
             set_env("CUSHARE_WEIGHT", o->weight[0] ? o->weight : NULL, "1") |
             set_env("CUSHARE_MEM_LIMIT", o->mem_limit[0] ? o->mem_limit : NULL, "0") |
             set_env("CUSHARE_NAME", o->name, dname);
    free(pre);
    return rc ? -1 : 0;
}

int main(int argc, char **argv)
{
    struct run_opts o;
    memset(&o, 0, sizeof o);
    if (parse_args(argc, argv, &o) < 0) {
        usage(stderr);
        return 2;
    }
    char bindir[PATH_MAX], lib[PATH_MAX];
    if (self_dir(bindir, sizeof bindir) < 0) {
        fprintf(stderr, "cushare-run: cannot find my own directory (/proc/self/exe)\n");
        return 1;
    }
    /* The daemon is started with the caller's environment, before
     * LD_PRELOAD and CUSHARE_* are changed for CMD. */
    if (find_lib(bindir, lib) < 0 || ensure_daemon(o.socket, bindir) < 0 ||
        prepare_env(&o, lib) < 0)
        return 1;
    execvp(o.cmd[0], o.cmd);
    fprintf(stderr, "cushare-run: %s: %s\n", o.cmd[0], strerror(errno));
    return errno == ENOENT ? 127 : 126;
}
