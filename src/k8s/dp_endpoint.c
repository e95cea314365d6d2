/* dp_endpoint.c: see dp_endpoint.h. */
#include "k8s/dp_endpoint.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/proto.h"
#include "common/util.h"
#include "tools/ctl_client.h"

#define EP_SOCK "/cushared.sock" /* the daemon's name for an endpoint's socket */

/* ---- the id ------------------------------------------------------------------------ */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* FNV-1a (64 bits) of s, then a 0xff byte, which no ID contains (they are
 * printable ASCII): "ab","c" and "a","bc" hash apart. */
static uint64_t fnv(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return (h ^ 0xffu) * 0x100000001b3ull;
}

void dp_ep_id(const char *res, char *const *ids, size_t nids, char out[DP_EP_ID_LEN])
{
    char **sorted = dp_xmalloc((nids ? nids : 1) * sizeof *sorted);
    memcpy(sorted, ids, nids * sizeof *sorted);
    qsort(sorted, nids, sizeof *sorted, cmp_str);
    uint64_t h = fnv(0xcbf29ce484222325ull, res);
    for (size_t i = 0; i < nids; i++)
        h = fnv(h, sorted[i]);
    free(sorted);
    snprintf(out, DP_EP_ID_LEN, "dp-%016llx", (unsigned long long)h);
}

/* ---- which device went to which endpoint ---------------------------------------------- */

static const char *owner_of(const struct dp_eps *t, const char *res, const char *dev)
{
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->v[i].res, res) && !strcmp(t->v[i].dev, dev))
            return t->v[i].ep;
    return NULL;
}

/* Drops every device of endpoint ep (the whole allocation is gone). */
static void forget_ep(struct dp_eps *t, const char *ep)
{
    for (size_t i = 0; i < t->n;)
        if (!strcmp(t->v[i].ep, ep))
            t->v[i] = t->v[--t->n];
        else
            i++;
}

static void remember(struct dp_eps *t, const char *res, const char *dev, const char *ep)
{
    struct dp_ep_entry *e = NULL;
    for (size_t i = 0; i < t->n && !e; i++)
        if (!strcmp(t->v[i].res, res) && !strcmp(t->v[i].dev, dev))
            e = &t->v[i];
    if (!e) {
        if (!cs_grow_array((void **)&t->v, &t->cap, t->n, sizeof *t->v))
            return; /* forgotten: the daemon's idle GC removes it in the end */
        e = &t->v[t->n++];
        cs_strlcpy(e->res, res, sizeof e->res);
        cs_strlcpy(e->dev, dev, sizeof e->dev);
    }
    cs_strlcpy(e->ep, ep, sizeof e->ep);
}

bool dp_ep_holds(const struct dp_eps *t, const char *res, const char *ep, char *const *ids,
                 size_t nids)
{
    for (size_t i = 0; i < nids; i++) {
        const char *owner = owner_of(t, res, ids[i]);
        if (!owner || strcmp(owner, ep) != 0)
            return false;
    }
    return nids > 0;
}

void dp_eps_free(struct dp_eps *t)
{
    free(t->v);
    memset(t, 0, sizeof *t);
}

/* ---- the daemon ----------------------------------------------------------------------- */

static int fill_terms(struct cs_msg_ctl_endpoint *e, const struct dp_resource *r,
                      const struct dp_node *n, const bool *gpus, const char *id, char *err,
                      size_t ecap)
{
    e->op = CS_EP_CREATE;
    e->max_priority = r->priority >= 0 ? (uint32_t)r->priority : CS_PRIO_NORMAL;
    e->max_weight = r->weight ? r->weight : 1;
    e->mem_limit = r->mem_limit;
    cs_strlcpy(e->id, id, sizeof e->id);
    for (size_t i = 0; i < n->ngpus; i++) {
        if (!gpus[i])
            continue;
        if (e->ngpus == CS_MAX_DEVICES) {
            snprintf(err, ecap, "%s: more than %d GPUs in one container", r->name,
                     CS_MAX_DEVICES);
            return -1;
        }
        if (cs_uuid_parse(n->gpu[i].uuid, e->gpus[e->ngpus]) < 0) {
            snprintf(err, ecap, "%s: GPU UUID '%s' cannot be given to cushared", r->name,
                     n->gpu[i].uuid);
            return -1;
        }
        e->ngpus++;
    }
    return 0;
}

/* REMOVE of the endpoints that held any of ids under another id. A failure
 * is logged, not fatal: the daemon's idle GC removes what is left. */
static void remove_previous(struct dp_eps *t, int fd, const struct dp_resource *r,
                            char *const *ids, size_t nids, const char *keep)
{
    for (size_t i = 0; i < nids; i++) {
        const char *owner = owner_of(t, r->name, ids[i]);
        if (!owner || !strcmp(owner, keep))
            continue;
        struct cs_msg m = {.type = CS_MSG_CTL_ENDPOINT};
        m.u.ctl_endpoint.op = CS_EP_REMOVE;
        m.u.ctl_endpoint.max_weight = 1;
        cs_strlcpy(m.u.ctl_endpoint.id, owner, sizeof m.u.ctl_endpoint.id);
        forget_ep(t, m.u.ctl_endpoint.id);
        struct cs_msg_ctl_done d;
        char why[256];
        if (ctl_request(fd, &m, &d, why, sizeof why) < 0)
            cs_warn("%s: endpoint %s not removed: %s", r->name, m.u.ctl_endpoint.id, why);
        else if (d.status != 0 && d.status != -ENOENT)
            cs_warn("%s: endpoint %s not removed: %s", r->name, m.u.ctl_endpoint.id, d.text);
        else
            cs_info("%s: endpoint %s removed: its devices went to a new container", r->name,
                    m.u.ctl_endpoint.id);
    }
}

/* "<dir>/cushared.sock" -> dir. The daemon's path is the host's: its
 * endpoint_dir is mounted at the same path, as its socket is. */
static int dir_of(const char *path, char *dir, size_t cap)
{
    size_t n = strlen(path), s = strlen(EP_SOCK);
    if (path[0] != '/' || n <= s || strcmp(path + n - s, EP_SOCK) != 0 || n - s >= cap)
        return -1;
    memcpy(dir, path, n - s);
    dir[n - s] = '\0';
    return 0;
}

int dp_ep_acquire(struct dp_eps *t, const struct dp_config *c, const struct dp_resource *r,
                  const struct dp_node *n, const bool *gpus, char *const *ids, size_t nids,
                  char *dir, size_t dcap, char *err, size_t ecap)
{
    char id[DP_EP_ID_LEN], why[256];
    dp_ep_id(r->name, ids, nids, id);
    struct cs_msg m = {.type = CS_MSG_CTL_ENDPOINT};
    if (fill_terms(&m.u.ctl_endpoint, r, n, gpus, id, err, ecap) < 0)
        return -1;
    ctl_set_timeout(DP_EP_TIMEOUT_MS);
    int fd = ctl_open(c->daemon_socket, why, sizeof why);
    if (fd < 0) {
        snprintf(err, ecap, "%s: cannot ask cushared for this container's endpoint: %s",
                 r->name, why);
        return -1;
    }
    remove_previous(t, fd, r, ids, nids, id);
    struct cs_msg_ctl_done d;
    int rc = ctl_request(fd, &m, &d, why, sizeof why);
    close(fd);
    if (rc < 0 || d.status != 0) {
        snprintf(err, ecap, "%s: cushared made no endpoint %s for this container: %s", r->name,
                 id, rc < 0 ? why : d.text);
        return -1;
    }
    if (dir_of(d.text, dir, dcap) < 0) {
        snprintf(err, ecap, "%s: cushared answered '%s' for endpoint %s, not a socket path",
                 r->name, d.text, id);
        return -1;
    }
    for (size_t i = 0; i < nids; i++)
        remember(t, r->name, ids[i], id);
    cs_info("%s: endpoint %s (%s) for %zu device(s)", r->name, id, dir, nids);
    return 0;
}
