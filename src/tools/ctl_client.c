/* ctl_client.c: see ctl_client.h. */
#include "tools/ctl_client.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int timeout_ms = CTL_TIMEOUT_MS;

void ctl_set_timeout(int ms)
{
    timeout_ms = ms > 0 ? ms : CTL_TIMEOUT_MS;
}

/* Receives one message within timeout_ms. 0 or -1 with err. */
static int recv_one(int fd, struct cs_msg *m, char *err, size_t errlen)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r;
    do
        r = poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    if (r == 0) {
        snprintf(err, errlen, "the daemon did not answer within %d ms", timeout_ms);
        return -1;
    }
    const char *why = "?";
    int rc = cs_recv(fd, m, &why);
    if (rc == 1) {
        if (m->type == CS_MSG_ERROR) {
            snprintf(err, errlen, "the daemon closed the connection: %s", m->u.error.text);
            return -1;
        }
        return 0;
    }
    if (rc == 0)
        snprintf(err, errlen, "the daemon closed the connection");
    else if (rc == -EPROTO)
        snprintf(err, errlen, "bad reply from the daemon: %s", why);
    else
        snprintf(err, errlen, "reading from the daemon: %s", strerror(-rc));
    return -1;
}

static int open_caps(const char *path, uint32_t caps, char *err, size_t errlen)
{
    int fd = cs_connect(path);
    if (fd < 0) {
        snprintf(err, errlen, "cannot connect to %s: %s", path, strerror(-fd));
        return fd;
    }
    struct cs_msg h = {.type = CS_MSG_HELLO};
    h.u.hello.flags = CS_HELLO_CONTROL | caps;
    h.u.hello.priority = CS_PRIO_NORMAL;
    h.u.hello.weight = 1;
    h.u.hello.proto_min = CS_PROTO_VERSION;
    snprintf(h.u.hello.name, sizeof h.u.hello.name, "cusharectl");
    int rc = cs_send(fd, &h);
    struct cs_msg w;
    if (rc < 0) {
        snprintf(err, errlen, "cannot talk to %s: %s", path, strerror(-rc));
    } else if (recv_one(fd, &w, err, errlen) == 0) {
        if (w.type == CS_MSG_WELCOME)
            return fd;
        snprintf(err, errlen, "unexpected %s instead of WELCOME", cs_msg_name(w.type));
    }
    close(fd);
    return -EPROTO;
}

/* With CS_HELLO_TSG, CS_HELLO_LC, CS_HELLO_LIMITS and CS_HELLO_LABELS
 * (status then carries CTL_CLIENT_TSG, CTL_CLIENT_LC, CTL_LIMITS and
 * CTL_CLIENT_LABELS); an older daemon refuses an unknown bit, and is asked
 * again with fewer. */
int ctl_open(const char *path, char *err, size_t errlen)
{
    static const uint32_t caps[] = {CS_HELLO_TSG | CS_HELLO_LC | CS_HELLO_LIMITS | CS_HELLO_LABELS,
                                    CS_HELLO_TSG | CS_HELLO_LC | CS_HELLO_LIMITS,
                                    CS_HELLO_TSG | CS_HELLO_LC, CS_HELLO_TSG, 0};
    int fd = -EPROTO;
    for (size_t i = 0; i < sizeof caps / sizeof caps[0] && fd == -EPROTO; i++)
        fd = open_caps(path, caps[i], err, errlen);
    return fd;
}

int ctl_request(int fd, const struct cs_msg *req, struct cs_msg_ctl_done *done, char *err,
                size_t errlen)
{
    int rc = cs_send(fd, req);
    if (rc < 0) {
        snprintf(err, errlen, "sending to the daemon: %s", strerror(-rc));
        return -1;
    }
    for (;;) {
        struct cs_msg m;
        if (recv_one(fd, &m, err, errlen) < 0)
            return -1;
        if (m.type == CS_MSG_CTL_DONE) {
            *done = m.u.ctl_done;
            return 0;
        }
        /* Not expected outside a status reply: skip it. */
    }
}

static int push(void **arr, size_t *n, size_t *cap, size_t size, const void *item)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        void *na = realloc(*arr, nc * size);
        if (!na)
            return -1;
        *arr = na;
        *cap = nc;
    }
    memcpy((char *)*arr + *n * size, item, size);
    (*n)++;
    return 0;
}

int ctl_status_get(int fd, struct ctl_status *st, char *err, size_t errlen)
{
    memset(st, 0, sizeof *st);
    struct cs_msg req = {.type = CS_MSG_CTL_STATUS};
    int rc = cs_send(fd, &req);
    if (rc < 0) {
        snprintf(err, errlen, "sending to the daemon: %s", strerror(-rc));
        return -1;
    }
    size_t gcap = 0, ccap = 0, gmcap = 0, cmcap = 0, ngm = 0, ncm = 0, ctcap = 0, nct = 0;
    size_t clcap = 0, ncl = 0, cbcap = 0, ncb = 0;
    for (;;) {
        struct cs_msg m;
        if (recv_one(fd, &m, err, errlen) < 0)
            break;
        int ok = 0;
        switch (m.type) {
        case CS_MSG_CTL_DAEMON:
            st->daemon = m.u.ctl_daemon;
            break;
        case CS_MSG_CTL_LIMITS:
            st->limits = m.u.ctl_limits;
            st->have_limits = true;
            break;
        case CS_MSG_CTL_GPU: {
            struct cs_msg_ctl_gpu_mem zero = {.index = m.u.ctl_gpu.index};
            ok = push((void **)&st->gpu, &st->ngpu, &gcap, sizeof *st->gpu, &m.u.ctl_gpu);
            if (ok == 0)
                ok = push((void **)&st->gpu_mem, &ngm, &gmcap, sizeof *st->gpu_mem, &zero);
            break;
        }
        case CS_MSG_CTL_CLIENT: {
            struct cs_msg_ctl_client_mem zero = {.client_id = m.u.ctl_client.client_id,
                                                 .gpu_index = m.u.ctl_client.gpu_index};
            ok = push((void **)&st->client, &st->nclient, &ccap, sizeof *st->client,
                      &m.u.ctl_client);
            struct cs_msg_ctl_client_tsg tzero = {.client_id = zero.client_id,
                                                  .gpu_index = zero.gpu_index};
            if (ok == 0)
                ok = push((void **)&st->client_mem, &ncm, &cmcap, sizeof *st->client_mem,
                          &zero);
            if (ok == 0)
                ok = push((void **)&st->client_tsg, &nct, &ctcap, sizeof *st->client_tsg,
                          &tzero);
            struct cs_msg_ctl_client_lc lzero = {.client_id = zero.client_id,
                                                 .gpu_index = zero.gpu_index};
            if (ok == 0)
                ok = push((void **)&st->client_lc, &ncl, &clcap, sizeof *st->client_lc, &lzero);
            struct cs_msg_ctl_client_labels lbzero = {.client_id = zero.client_id,
                                                     .gpu_index = zero.gpu_index};
            if (ok == 0)
                ok = push((void **)&st->client_labels, &ncb, &cbcap, sizeof *st->client_labels,
                          &lbzero);
            break;
        }
        case CS_MSG_CTL_CLIENT_LABELS: /* belongs to the CTL_CLIENT before it */
            if (ncb && st->client_labels[ncb - 1].client_id == m.u.ctl_client_labels.client_id &&
                st->client_labels[ncb - 1].gpu_index == m.u.ctl_client_labels.gpu_index)
                st->client_labels[ncb - 1] = m.u.ctl_client_labels;
            break;
        case CS_MSG_CTL_CLIENT_LC: /* belongs to the CTL_CLIENT before it */
            if (ncl && st->client_lc[ncl - 1].client_id == m.u.ctl_client_lc.client_id &&
                st->client_lc[ncl - 1].gpu_index == m.u.ctl_client_lc.gpu_index)
                st->client_lc[ncl - 1] = m.u.ctl_client_lc;
            break;
        case CS_MSG_CTL_CLIENT_TSG: /* belongs to the CTL_CLIENT before it */
            if (nct && st->client_tsg[nct - 1].client_id == m.u.ctl_client_tsg.client_id &&
                st->client_tsg[nct - 1].gpu_index == m.u.ctl_client_tsg.gpu_index)
                st->client_tsg[nct - 1] = m.u.ctl_client_tsg;
            break;
        case CS_MSG_CTL_GPU_MEM: /* belongs to the CTL_GPU just before it */
            if (ngm && st->gpu_mem[ngm - 1].index == m.u.ctl_gpu_mem.index)
                st->gpu_mem[ngm - 1] = m.u.ctl_gpu_mem;
            break;
        case CS_MSG_CTL_CLIENT_MEM: /* belongs to the CTL_CLIENT just before it */
            if (ncm && st->client_mem[ncm - 1].client_id == m.u.ctl_client_mem.client_id &&
                st->client_mem[ncm - 1].gpu_index == m.u.ctl_client_mem.gpu_index)
                st->client_mem[ncm - 1] = m.u.ctl_client_mem;
            break;
        case CS_MSG_CTL_DONE:
            if (m.u.ctl_done.status == 0)
                return 0;
            snprintf(err, errlen, "%s", m.u.ctl_done.text);
            ctl_status_free(st);
            return -1;
        default:
            break;
        }
        if (ok < 0) {
            snprintf(err, errlen, "out of memory");
            break;
        }
    }
    ctl_status_free(st);
    return -1;
}

void ctl_status_free(struct ctl_status *st)
{
    free(st->gpu);
    free(st->client);
    free(st->gpu_mem);
    free(st->client_mem);
    free(st->client_tsg);
    st->client_tsg = NULL;
    free(st->client_lc);
    st->client_lc = NULL;
    free(st->client_labels);
    st->client_labels = NULL;
    st->gpu = NULL;
    st->client = NULL;
    st->gpu_mem = NULL;
    st->client_mem = NULL;
    st->ngpu = st->nclient = 0;
}
