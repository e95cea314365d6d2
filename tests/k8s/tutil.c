/* tutil.c: see tutil.h. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tutil.h"

extern char **environ;

void tu_tmpdir(char *out, size_t cap, const char *tag)
{
    const char *t = getenv("TEST_TMP");
    snprintf(out, cap, "%s/%s.XXXXXX", t && *t ? t : "/tmp", tag);
    if (!mkdtemp(out)) {
        perror("mkdtemp");
        abort();
    }
}

const char *tu_build(void)
{
    static char abs[PATH_MAX];
    if (!*abs) {
        const char *b = getenv("CUSHARE_BUILD");
        if (!realpath(b && *b ? b : "build", abs))
            snprintf(abs, sizeof abs, "%s", b && *b ? b : "build");
    }
    return abs;
}

void tu_write(const char *path, const char *text)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0 || rename(tmp, path) < 0) {
        perror(path);
        abort();
    }
}

char *tu_read(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    size_t r;
    while (s && (r = fread(s + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (cap - n - 1 == 0)
            s = realloc(s, cap *= 2);
    }
    fclose(f);
    if (s)
        s[n] = 0;
    return s;
}

void tu_mkdirs(const char *path)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof buf, "%s/", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(buf, 0755);
            *p = '/';
        }
}

pid_t tu_spawn(char *const argv[], char *const env[], const char *errfile)
{
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    /* A test that crashes takes its plugin with it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (size_t i = 0; env && env[i]; i++)
        putenv(env[i]);
    if (errfile) {
        int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0)
            dup2(fd, 2);
    }
    execv(argv[0], argv);
    perror(argv[0]);
    _exit(127);
}

int tu_wait_exit(pid_t pid, int timeout_ms)
{
    for (int waited = 0;; waited += 10) {
        int st;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (r < 0 && errno != EINTR)
            return -1;
        if (waited >= timeout_ms)
            return -1;
        nanosleep(&(struct timespec){0, 10 * 1000000}, NULL);
    }
}

int tu_stop(pid_t pid)
{
    kill(pid, SIGTERM);
    int rc = tu_wait_exit(pid, 20000);
    if (rc < 0) {
        kill(pid, SIGKILL);
        tu_wait_exit(pid, 20000);
    }
    return rc;
}

bool tu_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}
