/* procstat.c: see procstat.h. The policy asks (ops.stopped) while it waits
 * for an answer from a client; reading /proc is the server's business, so
 * the policy stays free of system calls. One read of a small file per ask,
 * at most every 50 ms per awaited client. */
#include "sched/procstat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sched/server.h"

bool sd_proc_stopped(uint32_t pid)
{
    if (pid == 0)
        return false;
    char path[32], buf[512];
    snprintf(path, sizeof path, "/proc/%u/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return false;
    ssize_t n;
    do
        n = read(fd, buf, sizeof buf - 1);
    while (n < 0 && errno == EINTR);
    close(fd);
    if (n <= 0)
        return false;
    buf[n] = '\0';
    /* "pid (comm) S ...": comm may hold spaces and parentheses, the state
     * follows the last ')'. */
    const char *rp = strrchr(buf, ')');
    if (!rp || rp[1] != ' ')
        return false;
    return rp[2] == 'T' || rp[2] == 't';
}

bool sd_proc_member_stopped(void *ctx, const struct sd_member *m)
{
    (void)ctx;
    const struct sd_conn *c = m->client->owner;
    return c && sd_proc_stopped(c->pid);
}
