/* dp_nvml.c: the plugin's view of the node's GPUs through NVML. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/nvml.h"
#include "common/util.h"
#include "k8s/dp_nvml.h"

/* The loader (dlopen, versioned names, nvmlInit) is src/common/nvml.c,
 * shared with the daemon's GPU discovery; what is here is the plugin's own:
 * NUMA nodes, health probes and Xid events. */
static cs_nvml_evset evset;

const char *dp_nvml_resolved(const char *base)
{
    return cs_nvml_resolved(base);
}

int dp_nvml_open(const char *lib, char *err, size_t cap)
{
    return cs_nvml_open(lib, err, cap);
}

/* NVML's bus id "00000000:3B:00.0" -> sysfs "0000:3b:00.0" -> numa_node. */
static int numa_of(cs_nvml_device h, const char *sysfs)
{
    cs_nvml_pci pci;
    memset(&pci, 0, sizeof pci);
    if (!cs_nvml.pci || cs_nvml.pci(h, &pci) != CS_NVML_SUCCESS)
        return -1;
    pci.busId[sizeof pci.busId - 1] = 0;
    size_t n = strlen(pci.busId);
    const char *id = n > 12 ? pci.busId + n - 12 : pci.busId;
    char path[DP_PATH_MAX + 64], low[16];
    size_t i;
    for (i = 0; id[i] && i < sizeof low - 1; i++)
        low[i] = (char)tolower((unsigned char)id[i]);
    low[i] = 0;
    snprintf(path, sizeof path, "%s/bus/pci/devices/%s/numa_node", sysfs, low);
    FILE *f = fopen(path, "r");
    int node = -1;
    if (f) {
        if (fscanf(f, "%d", &node) != 1)
            node = -1;
        fclose(f);
    }
    return node;
}

static int describe(struct dp_gpu *g, unsigned idx, const char *sysfs, char *err, size_t cap)
{
    cs_nvml_device h;
    char uuid[CS_NVML_UUID_LEN];
    uint64_t mem = 0;
    if (cs_nvml_describe(idx, &h, uuid, sizeof uuid, &mem, err, cap) < 0)
        return -1;
    memset(g, 0, sizeof *g);
    g->handle = h;
    cs_strlcpy(g->uuid, uuid, sizeof g->uuid);
    if (!cs_nvml.name || cs_nvml.name(h, g->name, sizeof g->name) != CS_NVML_SUCCESS)
        cs_strlcpy(g->name, "NVIDIA GPU", sizeof g->name);
    g->mem_total = mem;
    unsigned minor;
    g->minor = cs_nvml.minor && cs_nvml.minor(h, &minor) == CS_NVML_SUCCESS ? (int)minor : -1;
    g->numa = numa_of(h, sysfs);
    g->healthy = true;
    return 0;
}

int dp_nvml_discover(struct dp_node *node, const char *sysfs, char *err, size_t cap)
{
    unsigned n = 0;
    cs_nvml_ret r = cs_nvml.count(&n);
    if (r != CS_NVML_SUCCESS) {
        snprintf(err, cap, "nvmlDeviceGetCount: %s", cs_nvml_err(r));
        return -1;
    }
    if (n == 0) {
        snprintf(err, cap, "NVML reports no GPU on this node");
        return -1;
    }
    if (n > DP_MAX_GPUS) {
        cs_warn("%u GPUs; using the first %d", n, DP_MAX_GPUS);
        n = DP_MAX_GPUS;
    }
    node->ngpus = 0;
    for (unsigned i = 0; i < n; i++) {
        if (describe(&node->gpu[i], i, sysfs, err, cap) < 0)
            return -1;
        node->ngpus++;
    }
    return 0;
}

/* The handle of g now: by UUID where NVML can, else by scanning indices
 * (a GPU that fell off the bus is found by neither). */
static cs_nvml_ret lookup(const struct dp_gpu *g, cs_nvml_device *h)
{
    if (cs_nvml.by_uuid)
        return cs_nvml.by_uuid(g->uuid, h);
    unsigned n = 0;
    cs_nvml_ret r = cs_nvml.count(&n);
    for (unsigned i = 0; r == CS_NVML_SUCCESS && i < n; i++) {
        char uuid[CS_NVML_UUID_LEN];
        if (cs_nvml.by_index(i, h) == CS_NVML_SUCCESS &&
            cs_nvml.uuid(*h, uuid, sizeof uuid) == CS_NVML_SUCCESS && !strcmp(uuid, g->uuid))
            return CS_NVML_SUCCESS;
    }
    return r == CS_NVML_SUCCESS ? CS_NVML_ERROR_GPU_IS_LOST : r;
}

int dp_nvml_probe(struct dp_gpu *g, char *why, size_t cap)
{
    if (g->xid_dead) {
        snprintf(why, cap, "critical Xid error seen");
        return -1;
    }
    cs_nvml_device h;
    cs_nvml_ret r = lookup(g, &h);
    cs_nvml_memory mem;
    if (r == CS_NVML_SUCCESS)
        r = cs_nvml.memory(h, &mem);
    if (r != CS_NVML_SUCCESS && r != CS_NVML_ERROR_NOT_SUPPORTED) {
        snprintf(why, cap, "%s", cs_nvml_err(r));
        return -1;
    }
    return 0;
}

void dp_nvml_events_init(struct dp_node *node)
{
    if (!cs_nvml.ev_create || !cs_nvml.ev_register || !cs_nvml.ev_wait || !cs_nvml.ev_free) {
        cs_info("NVML has no event API: health from periodic probes only");
        return;
    }
    if (cs_nvml.ev_create(&evset) != CS_NVML_SUCCESS) {
        evset = NULL;
        return;
    }
    for (size_t i = 0; i < node->ngpus; i++) {
        unsigned long long types = CS_NVML_EVENT_XID_CRITICAL;
        cs_nvml_device h = node->gpu[i].handle;
        if (cs_nvml.ev_supported && cs_nvml.ev_supported(h, &types) != CS_NVML_SUCCESS)
            types = 0;
        if (!(types & CS_NVML_EVENT_XID_CRITICAL) ||
            cs_nvml.ev_register(h, CS_NVML_EVENT_XID_CRITICAL, evset) != CS_NVML_SUCCESS)
            cs_info("GPU %s: no Xid events; periodic probes only", node->gpu[i].uuid);
    }
}

/* Xids that an application causes (bad address, illegal instruction, a
 * reset it asked for...) say nothing about the GPU's health; the same list
 * as NVIDIA's own device plugin. */
static bool xid_is_app_error(unsigned long long xid)
{
    static const unsigned long long ignored[] = {13, 31, 43, 45, 68, 109};
    for (size_t i = 0; i < sizeof ignored / sizeof ignored[0]; i++)
        if (xid == ignored[i])
            return true;
    return false;
}

static int mark_xid(struct dp_node *node, const cs_nvml_event *ev)
{
    if (xid_is_app_error(ev->eventData))
        return 0;
    int changed = 0;
    for (size_t i = 0; i < node->ngpus; i++) {
        struct dp_gpu *g = &node->gpu[i];
        /* A NULL device means "all of them" (NVML says so for some Xids). */
        if ((ev->device && ev->device != g->handle) || g->xid_dead)
            continue;
        cs_error("GPU %s: critical Xid %llu: unhealthy until the plugin restarts", g->uuid,
                 ev->eventData);
        g->xid_dead = true;
        changed++;
    }
    return changed;
}

int dp_nvml_events_poll(struct dp_node *node)
{
    int changed = 0;
    if (!evset)
        return 0;
    for (int n = 0; n < 1024; n++) {
        cs_nvml_event ev;
        memset(&ev, 0, sizeof ev);
        if (cs_nvml.ev_wait(evset, &ev, 0) != CS_NVML_SUCCESS)
            break;
        if (ev.eventType & CS_NVML_EVENT_XID_CRITICAL)
            changed += mark_xid(node, &ev);
    }
    return changed;
}

void dp_nvml_close(void)
{
    if (evset && cs_nvml.ev_free)
        cs_nvml.ev_free(evset);
    evset = NULL;
    cs_nvml_close();
}
