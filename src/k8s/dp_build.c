/* dp_build.c: ListAndWatch lists, Allocate answers, preferred allocations. */
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "k8s/dp_build.h"
#include "k8s/dp_ids.h"

#define PUSH(a, msg, field) dp_arena_push((a), (void ***)&(msg)->field, &(msg)->n_##field)

/* ---- ListAndWatch ------------------------------------------------------------- */

static V1beta1__TopologyInfo *topology(struct dp_arena *a, int numa)
{
    if (numa < 0)
        return NULL;
    V1beta1__TopologyInfo *t = dp_arena_alloc(a, sizeof *t);
    v1beta1__topology_info__init(t);
    V1beta1__NUMANode *node = dp_arena_alloc(a, sizeof *node);
    v1beta1__numanode__init(node);
    node->id = numa;
    *PUSH(a, t, nodes) = node;
    return t;
}

V1beta1__ListAndWatchResponse *dp_build_list(struct dp_arena *a, const struct dp_resource *r,
                                             const struct dp_node *n)
{
    V1beta1__ListAndWatchResponse *l = dp_arena_alloc(a, sizeof *l);
    v1beta1__list_and_watch_response__init(l);
    for (size_t i = 0; i < n->ngpus; i++) {
        const struct dp_gpu *g = &n->gpu[i];
        V1beta1__TopologyInfo *topo = topology(a, g->numa);
        unsigned count = dp_ids_per_gpu(r, g);
        for (unsigned k = 0; k < count; k++) {
            V1beta1__Device *d = dp_arena_alloc(a, sizeof *d);
            v1beta1__device__init(d);
            d->id = dp_arena_alloc(a, DP_ID_MAX + 1);
            if (dp_id_make(d->id, r, g, k) < 0)
                continue; /* a UUID too long to name: checked at start */
            d->health = g->healthy ? DP_HEALTHY : DP_UNHEALTHY;
            d->topology = topo;
            *PUSH(a, l, devices) = d;
        }
    }
    return l;
}

/* ---- Allocate ----------------------------------------------------------------- */

char *dp_size_text(struct dp_arena *a, uint64_t b)
{
    static const char sfx[] = "TGMK";
    for (int i = 0; i < 4; i++) {
        uint64_t unit = 1ull << (10 * (4 - i));
        if (b && b % unit == 0)
            return dp_arena_printf(a, "%llu%c", (unsigned long long)(b / unit), sfx[i]);
    }
    return dp_arena_printf(a, "%llu", (unsigned long long)b);
}

static void env(struct dp_arena *a, V1beta1__ContainerAllocateResponse *c, const char *k,
                const char *v)
{
    V1beta1__ContainerAllocateResponse__EnvsEntry *e = dp_arena_alloc(a, sizeof *e);
    v1beta1__container_allocate_response__envs_entry__init(e);
    e->key = dp_arena_strdup(a, k);
    e->value = dp_arena_strdup(a, v);
    *PUSH(a, c, envs) = e;
}

static void mount(struct dp_arena *a, V1beta1__ContainerAllocateResponse *c, const char *host,
                  const char *ctr)
{
    V1beta1__Mount *m = dp_arena_alloc(a, sizeof *m);
    v1beta1__mount__init(m);
    m->host_path = dp_arena_strdup(a, host);
    m->container_path = dp_arena_strdup(a, ctr);
    m->read_only = 1; /* nothing a container does may change the node's files */
    *PUSH(a, c, mounts) = m;
}

static void devnode(struct dp_arena *a, V1beta1__ContainerAllocateResponse *c, const char *path)
{
    V1beta1__DeviceSpec *d = dp_arena_alloc(a, sizeof *d);
    v1beta1__device_spec__init(d);
    d->host_path = dp_arena_strdup(a, path);
    d->container_path = d->host_path;
    d->permissions = "rw";
    *PUSH(a, c, devices) = d;
}

/* The directory of the daemon socket: mounting the directory, not the
 * socket file, keeps a restarted daemon's new socket visible to the pod. */
static char *socket_dir(struct dp_arena *a, const char *sock)
{
    char *d = dp_arena_strdup(a, sock);
    char *slash = strrchr(d, '/');
    if (slash == d)
        slash[1] = 0;
    else
        *slash = 0;
    return d;
}

enum dp_alloc_err dp_build_resolve(const struct dp_resource *r, const struct dp_node *n,
                                   char *const *ids, size_t nids, bool *gpus, char *err,
                                   size_t cap)
{
    for (size_t i = 0; i < nids; i++) {
        unsigned k;
        int gi = dp_id_parse(r, n, ids[i], &k);
        if (gi < 0) {
            snprintf(err, cap, "%s: unknown device ID '%s'", r->name, ids[i]);
            return DP_ALLOC_UNKNOWN;
        }
        if (!n->gpu[gi].healthy) {
            snprintf(err, cap, "%s: device %s is on an unhealthy GPU", r->name, ids[i]);
            return DP_ALLOC_UNHEALTHY;
        }
        gpus[gi] = true;
    }
    return DP_ALLOC_OK;
}

static void alloc_gpu_envs(struct dp_arena *a, const struct dp_config *c,
                           const struct dp_resource *r, V1beta1__ContainerAllocateResponse *ca,
                           const char *uuids)
{
    env(a, ca, "NVIDIA_VISIBLE_DEVICES", uuids);
    env(a, ca, "CUSHARE_SOCKET", c->daemon_socket);
    if (c->inject == DP_INJECT_ENV)
        env(a, ca, "LD_PRELOAD", c->lib_container);
    if (c->require_daemon)
        env(a, ca, "CUSHARE_REQUIRE_DAEMON", "1");
    if (r->priority >= 0)
        env(a, ca, "CUSHARE_PRIORITY", cs_priority_name(r->priority));
    if (r->weight)
        env(a, ca, "CUSHARE_WEIGHT", dp_arena_printf(a, "%u", r->weight));
    if (r->mem_limit)
        env(a, ca, "CUSHARE_MEM_LIMIT", dp_size_text(a, r->mem_limit));
}

static void alloc_gpu(struct dp_arena *a, const struct dp_config *c, const struct dp_resource *r,
                      const struct dp_node *n, const bool *gpus, const char *ep_dir,
                      V1beta1__ContainerAllocateResponse *ca)
{
    char *uuids = dp_arena_alloc(a, n->ngpus * DP_UUID_MAX + 1);
    for (size_t i = 0; i < n->ngpus; i++)
        if (gpus[i])
            strcat(strcat(uuids, *uuids ? "," : ""), n->gpu[i].uuid);
    alloc_gpu_envs(a, c, r, ca, uuids);
    mount(a, ca, c->lib, c->lib_container);
    /* The endpoint's socket has the daemon's socket's name, so the same
     * CUSHARE_SOCKET reaches it. */
    char *sdir = socket_dir(a, c->daemon_socket);
    mount(a, ca, ep_dir ? ep_dir : sdir, sdir);
    if (c->inject == DP_INJECT_PRELOAD)
        mount(a, ca, c->preload_file, "/etc/ld.so.preload");
    if (c->device_nodes) {
        devnode(a, ca, "/dev/nvidiactl");
        devnode(a, ca, "/dev/nvidia-uvm");
        devnode(a, ca, "/dev/nvidia-uvm-tools");
        for (size_t i = 0; i < n->ngpus; i++)
            if (gpus[i] && n->gpu[i].minor >= 0)
                devnode(a, ca, dp_arena_printf(a, "/dev/nvidia%d", n->gpu[i].minor));
    }
    V1beta1__ContainerAllocateResponse__AnnotationsEntry *an = dp_arena_alloc(a, sizeof *an);
    v1beta1__container_allocate_response__annotations_entry__init(an);
    an->key = DP_DOMAIN "/gpus";
    an->value = uuids;
    *PUSH(a, ca, annotations) = an;
}

enum dp_alloc_err dp_build_alloc(struct dp_arena *a, const struct dp_config *c,
                                 const struct dp_resource *r, const struct dp_node *n,
                                 char *const *ids, size_t nids, const char *ep_dir,
                                 V1beta1__ContainerAllocateResponse **out, char *err, size_t cap)
{
    bool gpus[DP_MAX_GPUS] = {false};
    enum dp_alloc_err e = dp_build_resolve(r, n, ids, nids, gpus, err, cap);
    if (e != DP_ALLOC_OK)
        return e;
    V1beta1__ContainerAllocateResponse *ca = dp_arena_alloc(a, sizeof *ca);
    v1beta1__container_allocate_response__init(ca);
    /* A memory resource only sizes the quota: the GPU, the library and the
     * socket come with the slots resource the container also asks for. */
    if (r->kind == DP_KIND_MEMORY)
        env(a, ca, "CUSHARE_MEM_LIMIT", dp_size_text(a, (uint64_t)nids * r->unit));
    else
        alloc_gpu(a, c, r, n, gpus, ep_dir, ca);
    *out = ca;
    return DP_ALLOC_OK;
}

/* ---- GetPreferredAllocation ----------------------------------------------------- */

/* An available ID, parsed. */
struct cand {
    const char *id;
    int gpu;
    unsigned k;
    bool chosen;
};

struct prefer {
    struct cand *c;
    size_t n;
    unsigned free[DP_MAX_GPUS];  /* available, not chosen, per GPU */
    unsigned taken[DP_MAX_GPUS]; /* chosen per GPU */
};

static void choose(struct prefer *p, struct cand *c, V1beta1__ContainerPreferredAllocationResponse *o,
                   struct dp_arena *a)
{
    c->chosen = true;
    p->free[c->gpu]--;
    p->taken[c->gpu]++;
    *PUSH(a, o, deviceids) = dp_arena_strdup(a, c->id);
}

/* The lowest unchosen ID of gpu (lowest k: deterministic answers). */
static struct cand *lowest_on(struct prefer *p, int gpu)
{
    struct cand *best = NULL;
    for (size_t i = 0; i < p->n; i++)
        if (!p->c[i].chosen && p->c[i].gpu == gpu && (!best || p->c[i].k < best->k))
            best = &p->c[i];
    return best;
}

/* Slots: a container asking for k slots wants k GPUs, so a GPU it already
 * has comes last; among the rest spread takes the one with the most free
 * IDs (least shared), pack the one with the fewest. Memory: the IDs fund one
 * quota, so stay on a GPU the container already has, then spread or pack
 * the same way. Ties go to the lower GPU index. */
static int next_gpu(const struct prefer *p, const struct dp_resource *r, size_t ngpus,
                    enum dp_placement place)
{
    int best = -1;
    for (size_t i = 0; i < ngpus; i++) {
        if (!p->free[i])
            continue;
        if (best < 0) {
            best = (int)i;
            continue;
        }
        bool had_i = p->taken[i] > 0, had_b = p->taken[best] > 0;
        if (had_i != had_b) {
            if (had_i == (r->kind == DP_KIND_MEMORY))
                best = (int)i;
            continue;
        }
        if (place == DP_PLACE_SPREAD ? p->free[i] > p->free[best] : p->free[i] < p->free[best])
            best = (int)i;
    }
    return best;
}

static void prefer_parse(struct prefer *p, const struct dp_resource *r, const struct dp_node *n,
                         char **ids, size_t nids, struct dp_arena *a)
{
    p->c = dp_arena_alloc(a, (nids ? nids : 1) * sizeof *p->c);
    for (size_t i = 0; i < nids; i++) {
        unsigned k;
        int gi = dp_id_parse(r, n, ids[i], &k);
        bool dup = false;
        for (size_t j = 0; j < p->n && !dup; j++)
            dup = !strcmp(p->c[j].id, ids[i]);
        if (gi < 0 || dup || !n->gpu[gi].healthy)
            continue;
        p->c[p->n++] = (struct cand){ids[i], gi, k, false};
        p->free[gi]++;
    }
}

V1beta1__ContainerPreferredAllocationResponse *dp_build_prefer(
    struct dp_arena *a, const struct dp_config *c, const struct dp_resource *r,
    const struct dp_node *n, const V1beta1__ContainerPreferredAllocationRequest *req)
{
    V1beta1__ContainerPreferredAllocationResponse *o = dp_arena_alloc(a, sizeof *o);
    v1beta1__container_preferred_allocation_response__init(o);
    struct prefer p;
    memset(&p, 0, sizeof p);
    prefer_parse(&p, r, n, req->available_deviceids, req->n_available_deviceids, a);
    size_t want = req->allocation_size > 0 ? (size_t)req->allocation_size : 0;
    /* The kubelet requires these in the answer, whatever we think of them. */
    for (size_t i = 0; i < req->n_must_include_deviceids; i++) {
        const char *id = req->must_include_deviceids[i];
        struct cand *cd = NULL;
        for (size_t j = 0; j < p.n && !cd; j++)
            if (!p.c[j].chosen && !strcmp(p.c[j].id, id))
                cd = &p.c[j];
        if (cd)
            choose(&p, cd, o, a);
        else
            *PUSH(a, o, deviceids) = dp_arena_strdup(a, id);
    }
    while (o->n_deviceids < want) {
        int g = next_gpu(&p, r, n->ngpus, c->placement);
        if (g < 0)
            break;
        choose(&p, lowest_on(&p, g), o, a);
    }
    return o;
}
