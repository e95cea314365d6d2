/* view.c: see view.h. */
#include "hook/view.h"
#include "hook/config.h"
#include "common/fsafe.h"
#include "common/util.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

/* One record, waiting until deadline (CLOCK_MONOTONIC ns). 1, or -1. */
static int recv_until(int fd, struct cs_msg *m, uint64_t deadline)
{
    for (;;) {
        uint64_t now = cs_now_ns();
        if (now >= deadline)
            return -1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int r = poll(&p, 1, (int)((deadline - now + 999999) / 1000000));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        const char *why = "";
        return cs_recv(fd, m, &why) == 1 ? 1 : -1;
    }
}

static int say_hello(int fd)
{
    struct cs_msg m = {.type = CS_MSG_HELLO};
    struct cs_msg_hello *h = &m.u.hello;
    h->flags = CS_HELLO_CONTROL | CS_HELLO_VIEW;
    h->priority = (uint32_t)cs_cfg.priority;
    h->weight = cs_cfg.weight;
    h->proto_min = CS_PROTO_VERSION;
    cs_strlcpy(h->name, cs_cfg.name, sizeof h->name);
    cs_strlcpy(h->pod, cs_cfg.pod, sizeof h->pod);
    cs_strlcpy(h->ns, cs_cfg.ns, sizeof h->ns);
    return cs_send(fd, &m);
}

static void take_gpu(struct cs_view *v, const struct cs_msg_ctl_gpu *g)
{
    if (v->ngpu >= CS_MAX_DEVICES)
        return;
    struct cs_view_gpu *o = &v->gpu[v->ngpu++];
    memcpy(o->uuid, g->uuid, CS_UUID_LEN);
    o->index = g->index;
    o->total = g->mem_total;
}

static void take_client(struct cs_view *v, const struct cs_msg_ctl_client *c)
{
    if (v->nproc >= CS_VIEW_PROCS) {
        v->truncated = true;
        return;
    }
    struct cs_view_proc *o = &v->proc[v->nproc++];
    o->pid = c->pid;
    o->gpu_index = c->gpu_index;
    o->resident = c->resident;
    o->swapped = c->swapped;
}

/* The reply after CTL_STATUS: CTL_VIEW, CTL_GPU and CTL_CLIENT records (and
 * the CTL_CLIENT_MEM that follow each client, not needed here), CTL_DONE. */
static int read_reply(int fd, struct cs_view *v, uint64_t deadline)
{
    struct cs_msg m;
    bool saw_view = false;
    while (recv_until(fd, &m, deadline) == 1) {
        switch (m.type) {
        case CS_MSG_CTL_VIEW:
            v->self_pid = m.u.ctl_view.pid;
            v->flags = m.u.ctl_view.flags;
            v->mem_limit = m.u.ctl_view.mem_limit;
            saw_view = true;
            break;
        case CS_MSG_CTL_GPU:
            take_gpu(v, &m.u.ctl_gpu);
            break;
        case CS_MSG_CTL_CLIENT:
            take_client(v, &m.u.ctl_client);
            break;
        case CS_MSG_CTL_DONE:
            return saw_view && m.u.ctl_done.status == 0 ? 0 : -1;
        default:
            break;
        }
    }
    return -1;
}

int cs_view_fetch(struct cs_view *v, int timeout_ms)
{
    memset(v, 0, sizeof *v);
    char err[256];
    if (!cs_cfg.socket[0] || cs_fs_check_socket(cs_cfg.socket, err, sizeof err) != 0)
        return -1;
    uint64_t deadline = cs_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    int fd = cs_connect(cs_cfg.socket);
    if (fd < 0)
        return -1;
    struct cs_msg m;
    int rc = -1;
    if (say_hello(fd) == 0 && recv_until(fd, &m, deadline) == 1 && m.type == CS_MSG_WELCOME) {
        struct cs_msg q = {.type = CS_MSG_CTL_STATUS};
        if (cs_send(fd, &q) == 0)
            rc = read_reply(fd, v, deadline);
    }
    close(fd);
    return rc;
}

const struct cs_view_gpu *cs_view_find_gpu(const struct cs_view *v,
                                           const unsigned char uuid[CS_UUID_LEN])
{
    for (unsigned i = 0; i < v->ngpu; i++)
        if (!memcmp(v->gpu[i].uuid, uuid, CS_UUID_LEN))
            return &v->gpu[i];
    return NULL;
}
