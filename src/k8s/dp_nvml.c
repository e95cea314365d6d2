/* dp_nvml.c: NVML through dlopen, with fallbacks for versioned names. The
 * few types used are declared here (their layouts are part of NVML's stable
 * ABI), so neither the build nor the GPU machine needs nvml.h. */
#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "k8s/dp_nvml.h"

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
/* nvmlPciInfo_t as filled by nvmlDeviceGetPciInfo_v2 and _v3 (the v1 call
 * had another layout and is not used). */
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
/* nvmlEventData_t of nvmlEventSetWait_v2; the v1 call fills a prefix. */
typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_TIMEOUT 10
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_EVENT_XID_CRITICAL 0x8ull
#define NVML_UUID_LEN 96

static struct {
    void *dl;
    nvmlReturn_t (*init)(void);
    nvmlReturn_t (*shutdown)(void);
    const char *(*error_string)(nvmlReturn_t);
    nvmlReturn_t (*count)(unsigned int *);
    nvmlReturn_t (*by_index)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*by_uuid)(const char *, nvmlDevice_t *);
    nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*minor)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*pci)(nvmlDevice_t, nvmlPciInfo_t *);
    nvmlReturn_t (*driver_version)(char *, unsigned int);
    nvmlReturn_t (*ev_create)(nvmlEventSet_t *);
    nvmlReturn_t (*ev_register)(nvmlDevice_t, unsigned long long, nvmlEventSet_t);
    nvmlReturn_t (*ev_supported)(nvmlDevice_t, unsigned long long *);
    nvmlReturn_t (*ev_wait)(nvmlEventSet_t, nvmlEventData_t *, unsigned int);
    nvmlReturn_t (*ev_free)(nvmlEventSet_t);
    nvmlEventSet_t evset;
} nv;

/* Names tried in order, newest first. */
struct nv_sym {
    const char *names[4];
    void **slot;
    bool required;
};

#define SLOT(f) ((void **)(void *)&nv.f)
static const struct nv_sym nv_syms[] = {
    {{"nvmlInit_v2", "nvmlInit"}, SLOT(init), true},
    {{"nvmlShutdown"}, SLOT(shutdown), true},
    {{"nvmlErrorString"}, SLOT(error_string), false},
    {{"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}, SLOT(count), true},
    {{"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"}, SLOT(by_index), true},
    {{"nvmlDeviceGetHandleByUUID_v2", "nvmlDeviceGetHandleByUUID"}, SLOT(by_uuid), false},
    {{"nvmlDeviceGetUUID"}, SLOT(uuid), true},
    {{"nvmlDeviceGetName"}, SLOT(name), false},
    {{"nvmlDeviceGetMemoryInfo"}, SLOT(memory), true},
    {{"nvmlDeviceGetMinorNumber"}, SLOT(minor), false},
    {{"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2"}, SLOT(pci), false},
    {{"nvmlSystemGetDriverVersion"}, SLOT(driver_version), false},
    {{"nvmlEventSetCreate"}, SLOT(ev_create), false},
    {{"nvmlDeviceRegisterEvents"}, SLOT(ev_register), false},
    {{"nvmlDeviceGetSupportedEventTypes"}, SLOT(ev_supported), false},
    {{"nvmlEventSetWait_v2", "nvmlEventSetWait"}, SLOT(ev_wait), false},
    {{"nvmlEventSetFree"}, SLOT(ev_free), false},
};
#define NSYMS (sizeof nv_syms / sizeof nv_syms[0])
/* Which name each entry resolved to (NULL: none). */
static const char *nv_found[NSYMS];

static const char *nv_err(nvmlReturn_t r)
{
    static __thread char buf[32];
    if (nv.error_string)
        return nv.error_string(r);
    snprintf(buf, sizeof buf, "NVML error %d", r);
    return buf;
}

static int resolve(char *err, size_t cap)
{
    for (size_t i = 0; i < NSYMS; i++) {
        *nv_syms[i].slot = NULL;
        nv_found[i] = NULL;
        for (const char *const *n = nv_syms[i].names; *n && !*nv_syms[i].slot; n++)
            if ((*nv_syms[i].slot = dlsym(nv.dl, *n)))
                nv_found[i] = *n;
        if (!*nv_syms[i].slot && nv_syms[i].required) {
            snprintf(err, cap, "NVML has no %s: the library is not NVML or is too old",
                     nv_syms[i].names[0]);
            return -1;
        }
        if (nv_found[i] && nv_found[i] != nv_syms[i].names[0])
            cs_info("NVML: %s not found, using %s", nv_syms[i].names[0], nv_found[i]);
    }
    return 0;
}

const char *dp_nvml_resolved(const char *base)
{
    for (size_t i = 0; i < NSYMS; i++)
        for (const char *const *n = nv_syms[i].names; *n; n++)
            if (!strcmp(*n, base))
                return nv_found[i];
    return NULL;
}

int dp_nvml_open(const char *lib, char *err, size_t cap)
{
    dlerror();
    nv.dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!nv.dl) {
        snprintf(err, cap, "NVML not found: dlopen(%s): %s. Is the NVIDIA driver installed "
                 "and its library visible here (in Kubernetes: the NVIDIA container runtime, "
                 "or the driver's library directory mounted and on LD_LIBRARY_PATH)?",
                 lib, dlerror());
        return -1;
    }
    if (resolve(err, cap) < 0)
        goto fail;
    nvmlReturn_t r = nv.init();
    if (r != NVML_SUCCESS) {
        snprintf(err, cap, "nvmlInit failed: %s (is the NVIDIA kernel driver loaded?)",
                 nv_err(r));
        goto fail;
    }
    char ver[96] = "unknown";
    if (nv.driver_version)
        nv.driver_version(ver, sizeof ver);
    cs_info("NVML loaded from %s, driver %s", lib, ver);
    return 0;
fail:
    dlclose(nv.dl);
    nv.dl = NULL;
    return -1;
}

/* NVML's bus id "00000000:3B:00.0" -> sysfs "0000:3b:00.0" -> numa_node. */
static int numa_of(nvmlDevice_t h, const char *sysfs)
{
    nvmlPciInfo_t pci;
    memset(&pci, 0, sizeof pci);
    if (!nv.pci || nv.pci(h, &pci) != NVML_SUCCESS)
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
    nvmlDevice_t h;
    nvmlReturn_t r = nv.by_index(idx, &h);
    char uuid[NVML_UUID_LEN] = "";
    nvmlMemory_t mem = {0, 0, 0};
    if (r == NVML_SUCCESS)
        r = nv.uuid(h, uuid, sizeof uuid);
    if (r == NVML_SUCCESS)
        r = nv.memory(h, &mem);
    if (r != NVML_SUCCESS) {
        snprintf(err, cap, "GPU %u: %s", idx, nv_err(r));
        return -1;
    }
    memset(g, 0, sizeof *g);
    g->handle = h;
    cs_strlcpy(g->uuid, uuid, sizeof g->uuid);
    if (!nv.name || nv.name(h, g->name, sizeof g->name) != NVML_SUCCESS)
        cs_strlcpy(g->name, "NVIDIA GPU", sizeof g->name);
    g->mem_total = mem.total;
    unsigned minor;
    g->minor = nv.minor && nv.minor(h, &minor) == NVML_SUCCESS ? (int)minor : -1;
    g->numa = numa_of(h, sysfs);
    g->healthy = true;
    return 0;
}

int dp_nvml_discover(struct dp_node *node, const char *sysfs, char *err, size_t cap)
{
    unsigned n = 0;
    nvmlReturn_t r = nv.count(&n);
    if (r != NVML_SUCCESS) {
        snprintf(err, cap, "nvmlDeviceGetCount: %s", nv_err(r));
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
static nvmlReturn_t lookup(const struct dp_gpu *g, nvmlDevice_t *h)
{
    if (nv.by_uuid)
        return nv.by_uuid(g->uuid, h);
    unsigned n = 0;
    nvmlReturn_t r = nv.count(&n);
    for (unsigned i = 0; r == NVML_SUCCESS && i < n; i++) {
        char uuid[NVML_UUID_LEN];
        if (nv.by_index(i, h) == NVML_SUCCESS && nv.uuid(*h, uuid, sizeof uuid) == NVML_SUCCESS &&
            !strcmp(uuid, g->uuid))
            return NVML_SUCCESS;
    }
    return r == NVML_SUCCESS ? NVML_ERROR_GPU_IS_LOST : r;
}

int dp_nvml_probe(struct dp_gpu *g, char *why, size_t cap)
{
    if (g->xid_dead) {
        snprintf(why, cap, "critical Xid error seen");
        return -1;
    }
    nvmlDevice_t h;
    nvmlReturn_t r = lookup(g, &h);
    nvmlMemory_t mem;
    if (r == NVML_SUCCESS)
        r = nv.memory(h, &mem);
    if (r != NVML_SUCCESS && r != NVML_ERROR_NOT_SUPPORTED) {
        snprintf(why, cap, "%s", nv_err(r));
        return -1;
    }
    return 0;
}

void dp_nvml_events_init(struct dp_node *node)
{
    if (!nv.ev_create || !nv.ev_register || !nv.ev_wait || !nv.ev_free) {
        cs_info("NVML has no event API: health from periodic probes only");
        return;
    }
    if (nv.ev_create(&nv.evset) != NVML_SUCCESS) {
        nv.evset = NULL;
        return;
    }
    for (size_t i = 0; i < node->ngpus; i++) {
        unsigned long long types = NVML_EVENT_XID_CRITICAL;
        if (nv.ev_supported && nv.ev_supported(node->gpu[i].handle, &types) != NVML_SUCCESS)
            types = 0;
        if (!(types & NVML_EVENT_XID_CRITICAL) ||
            nv.ev_register(node->gpu[i].handle, NVML_EVENT_XID_CRITICAL, nv.evset) != NVML_SUCCESS)
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

static int mark_xid(struct dp_node *node, const nvmlEventData_t *ev)
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
    if (!nv.evset)
        return 0;
    for (int n = 0; n < 1024; n++) {
        nvmlEventData_t ev;
        memset(&ev, 0, sizeof ev);
        if (nv.ev_wait(nv.evset, &ev, 0) != NVML_SUCCESS)
            break;
        if (ev.eventType & NVML_EVENT_XID_CRITICAL)
            changed += mark_xid(node, &ev);
    }
    return changed;
}

void dp_nvml_close(void)
{
    if (!nv.dl)
        return;
    if (nv.evset)
        nv.ev_free(nv.evset);
    nv.evset = NULL;
    nv.shutdown();
    dlclose(nv.dl);
    nv.dl = NULL;
}
