/* exitwatch.c: see exitwatch.h. */
#include "sched/exitwatch.h"

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

void sd_exitwatch_init(struct sd_exitwatch *xw)
{
    memset(xw, 0, sizeof *xw);
    xw->next_serial = 1;
    for (int i = 0; i < SD_EXITWATCH_MAX; i++)
        xw->e[i].pidfd = -1;
}

static void drop(struct sd_exitwatch_ent *e)
{
    if (e->pidfd >= 0)
        close(e->pidfd); /* also leaves the caller's epoll set */
    *e = (struct sd_exitwatch_ent){.pidfd = -1};
}

void sd_exitwatch_fini(struct sd_exitwatch *xw)
{
    for (int i = 0; i < SD_EXITWATCH_MAX; i++)
        if (xw->e[i].client)
            drop(&xw->e[i]);
}

int sd_exitwatch_add(struct sd_exitwatch *xw, uint64_t client, uint32_t pid, uint64_t until,
                     uint64_t *tag)
{
    if (!pid || !client) {
        errno = EINVAL;
        return -1;
    }
    struct sd_exitwatch_ent *e = NULL;
    for (int i = 0; i < SD_EXITWATCH_MAX && !e; i++)
        if (!xw->e[i].client)
            e = &xw->e[i];
    if (!e) {
        errno = ENOSPC;
        return -1;
    }
    int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
    if (fd < 0)
        return -1;
    /* Serials count up and never come back, so an event fetched for a
     * watch dropped in the same batch cannot name its slot's next one. */
    *e = (struct sd_exitwatch_ent){
        .client = client, .serial = xw->next_serial++, .until = until, .pidfd = fd};
    *tag = SD_EXITWATCH_TAG | e->serial;
    return fd;
}

uint64_t sd_exitwatch_event(struct sd_exitwatch *xw, uint64_t tag)
{
    uint64_t serial = tag & ~SD_EXITWATCH_TAG;
    for (int i = 0; i < SD_EXITWATCH_MAX; i++) {
        struct sd_exitwatch_ent *e = &xw->e[i];
        if (e->client && e->serial == serial) {
            uint64_t client = e->client;
            drop(e);
            return client;
        }
    }
    return 0;
}

void sd_exitwatch_expire(struct sd_exitwatch *xw, uint64_t now)
{
    for (int i = 0; i < SD_EXITWATCH_MAX; i++)
        if (xw->e[i].client && now >= xw->e[i].until)
            drop(&xw->e[i]);
}

uint64_t sd_exitwatch_deadline(const struct sd_exitwatch *xw)
{
    uint64_t d = 0;
    for (int i = 0; i < SD_EXITWATCH_MAX; i++)
        if (xw->e[i].client && (!d || xw->e[i].until < d))
            d = xw->e[i].until;
    return d;
}

uint32_t sd_exitwatch_count(const struct sd_exitwatch *xw)
{
    uint32_t n = 0;
    for (int i = 0; i < SD_EXITWATCH_MAX; i++)
        n += xw->e[i].client != 0;
    return n;
}
