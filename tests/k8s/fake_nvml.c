/* fake_nvml.c: a libnvidia-ml.so.1 for the device plugin's tests, with the
 * entry points the plugin may use and nothing else. Built twice: the full
 * one exports the versioned names (nvmlInit_v2, ..._v2/_v3) and the event
 * API; with -DFAKE_NVML_LEGACY only the unversioned names and no events, as
 * an old driver would, so the plugin's fallbacks are exercised.
 *
 * Configured by the environment, read at nvmlInit:
 *   FAKE_NVML_GPUS       number of GPUs (default 1, at most 16)
 *   FAKE_NVML_UUIDS      comma-separated UUIDs (default GPU-00000000-...-00000000000<i>)
 *   FAKE_NVML_MEM_MB     memory per GPU (default 16384)
 *   FAKE_NVML_INIT_FAIL  1: nvmlInit fails with NVML_ERROR_DRIVER_NOT_LOADED
 *   FAKE_NVML_USED_MB    memory in use on every GPU, as the card reports it (default 0)
 *   FAKE_NVML_PROCS      processes on the GPUs, "GPU:PID:MB[:g]" comma-separated
 *                        (g: a graphics process, else compute): the card's
 *                        view, every tenant's (cushare's NVML hooks must
 *                        show only the job's)
 *   FAKE_NVML_STATE      a file read at every query, one directive a line:
 *                          lost I        GPU I has fallen off the bus
 *                          xid I CODE    an Xid event on GPU I (delivered once)
 *                          proc G:P:MB   a compute process (as in FAKE_NVML_PROCS)
 *   FAKE_NVML_XTAB_SIZE  the size word of the private export table (default
 *                        2160, driver 580's; another value stands for a
 *                        driver whose layout cushare does not know)
 * The full build also has nvmlInternalGetExportTable, the private table
 * nvidia-smi lists processes through, in driver 580's layout as measured
 * on the H200 (src/hook/nvml.c): table id c4fe3e6c-..., entries 212, 213,
 * 214 the compute, graphics and MPS lists in 4128-byte records; every other
 * entry answers NOT_SUPPORTED.
 * GPU i has PCI bus id 00000000:0<i+1>:00.0 and minor number i. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FN __attribute__((visibility("default")))
#define MAXG 16

enum {
    OK = 0,
    E_INVALID = 2,
    E_NOT_SUPPORTED = 3,
    E_NOT_FOUND = 6,
    E_DRIVER = 9,
    E_TIMEOUT = 10,
    E_LOST = 15,
    E_UNINIT = 1,
};

struct gpu {
    char uuid[96];
    unsigned long long mem;
};

typedef struct {
    unsigned long long total, free, used;
} mem_t;

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} pci_t;

typedef struct {
    struct gpu *device;
    unsigned long long eventType, eventData;
    unsigned int gi, ci;
} event_t;

/* The exported entry points (prototypes: the build checks for them). */
FN const char *nvmlErrorString(int r);
FN int nvmlInit(void);
FN int nvmlShutdown(void);
FN int nvmlDeviceGetCount(unsigned *n);
FN int nvmlDeviceGetHandleByIndex(unsigned i, struct gpu **h);
FN int nvmlDeviceGetHandleByUUID(const char *uuid, struct gpu **h);
FN int nvmlDeviceGetUUID(struct gpu *d, char *out, unsigned len);
FN int nvmlDeviceGetName(struct gpu *d, char *out, unsigned len);
FN int nvmlDeviceGetMemoryInfo(struct gpu *d, mem_t *m);
FN int nvmlDeviceGetMinorNumber(struct gpu *d, unsigned *minor);
FN int nvmlSystemGetDriverVersion(char *out, unsigned len);
FN int nvmlInit_v2(void);
FN int nvmlDeviceGetCount_v2(unsigned *n);
FN int nvmlDeviceGetHandleByIndex_v2(unsigned i, struct gpu **h);
FN int nvmlDeviceGetHandleByUUID_v2(const char *uuid, struct gpu **h);
FN int nvmlDeviceGetPciInfo_v3(struct gpu *d, pci_t *p);
FN int nvmlEventSetCreate(int **set);
FN int nvmlDeviceGetSupportedEventTypes(struct gpu *d, unsigned long long *types);
FN int nvmlDeviceRegisterEvents(struct gpu *d, unsigned long long types, int *set);
FN int nvmlEventSetWait_v2(int *set, event_t *ev, unsigned timeout_ms);
FN int nvmlEventSetFree(int *set);
FN int nvmlDeviceGetComputeRunningProcesses(struct gpu *d, unsigned *n, void *out);
FN int nvmlDeviceGetMemoryInfo_v2(struct gpu *d, void *m);
FN int nvmlDeviceGetComputeRunningProcesses_v2(struct gpu *d, unsigned *n, void *out);
FN int nvmlDeviceGetComputeRunningProcesses_v3(struct gpu *d, unsigned *n, void *out);
FN int nvmlDeviceGetGraphicsRunningProcesses_v3(struct gpu *d, unsigned *n, void *out);
FN int nvmlDeviceGetProcessUtilization(struct gpu *d, void *out, unsigned *n,
                                       unsigned long long last);
FN int nvmlDeviceGetRunningProcessDetailList(struct gpu *d, void *list);
FN int nvmlDeviceGetAccountingPids(struct gpu *d, unsigned *n, unsigned *pids);
FN int nvmlInternalGetExportTable(const void **table, const void *id);

static struct gpu gpus[MAXG];
static unsigned ngpus;
static int inited;
static int xids_delivered; /* xid lines already handed out */
static int evset_token __attribute__((unused)); /* the one event set (full build) */

static void load_uuids(void)
{
    const char *u = getenv("FAKE_NVML_UUIDS");
    for (unsigned i = 0; i < ngpus; i++)
        snprintf(gpus[i].uuid, sizeof gpus[i].uuid, "GPU-00000000-0000-0000-0000-%012u", i);
    if (!u)
        return;
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", u);
    char *save = NULL;
    unsigned i = 0;
    for (char *t = strtok_r(buf, ",", &save); t && i < ngpus; t = strtok_r(NULL, ",", &save))
        snprintf(gpus[i++].uuid, sizeof gpus[0].uuid, "%s", t);
}

static int init(void)
{
    const char *f = getenv("FAKE_NVML_INIT_FAIL");
    if (f && !strcmp(f, "1"))
        return E_DRIVER;
    const char *n = getenv("FAKE_NVML_GPUS");
    const char *m = getenv("FAKE_NVML_MEM_MB");
    ngpus = n ? (unsigned)atoi(n) : 1;
    if (ngpus > MAXG)
        ngpus = MAXG;
    unsigned long long mb = m ? strtoull(m, NULL, 10) : 16384;
    for (unsigned i = 0; i < ngpus; i++)
        gpus[i].mem = mb << 20;
    load_uuids();
    inited = 1;
    xids_delivered = 0;
    return OK;
}

/* Whether GPU i is lost; with xid != NULL, the next undelivered Xid. */
static int state(unsigned want_gpu, int *xid_gpu, unsigned long long *xid)
{
    const char *path = getenv("FAKE_NVML_STATE");
    FILE *f = path ? fopen(path, "r") : NULL;
    int lost = 0, nx = 0;
    char line[128];
    while (f && fgets(line, sizeof line, f)) {
        unsigned g;
        unsigned long long code;
        if (sscanf(line, "lost %u", &g) == 1 && g == want_gpu)
            lost = 1;
        if (sscanf(line, "xid %u %llu", &g, &code) == 2 && xid && nx++ == xids_delivered) {
            *xid_gpu = (int)g;
            *xid = code;
        }
    }
    if (f)
        fclose(f);
    return lost;
}

static int index_of(const struct gpu *d)
{
    if (!inited)
        return -E_UNINIT;
    if (d < gpus || d >= gpus + ngpus)
        return -E_INVALID;
    return (int)(d - gpus);
}

FN const char *nvmlErrorString(int r)
{
    switch (r) {
    case OK: return "Success";
    case E_DRIVER: return "Driver Not Loaded";
    case E_LOST: return "GPU is lost";
    case E_NOT_FOUND: return "Not Found";
    default: return "Unknown Error";
    }
}

FN int nvmlInit(void) { return init(); }
FN int nvmlShutdown(void)
{
    inited = 0;
    return OK;
}
FN int nvmlDeviceGetCount(unsigned *n)
{
    if (!inited)
        return E_UNINIT;
    *n = ngpus;
    return OK;
}
FN int nvmlDeviceGetHandleByIndex(unsigned i, struct gpu **h)
{
    if (!inited)
        return E_UNINIT;
    if (i >= ngpus)
        return E_INVALID;
    *h = &gpus[i];
    return OK;
}
FN int nvmlDeviceGetHandleByUUID(const char *uuid, struct gpu **h)
{
    if (!inited)
        return E_UNINIT;
    for (unsigned i = 0; i < ngpus; i++)
        if (!strcmp(gpus[i].uuid, uuid)) {
            if (state(i, NULL, NULL))
                return E_LOST;
            *h = &gpus[i];
            return OK;
        }
    return E_NOT_FOUND;
}
FN int nvmlDeviceGetUUID(struct gpu *d, char *out, unsigned len)
{
    int i = index_of(d);
    if (i < 0)
        return -i;
    snprintf(out, len, "%s", d->uuid);
    return OK;
}
FN int nvmlDeviceGetName(struct gpu *d, char *out, unsigned len)
{
    int i = index_of(d);
    if (i < 0)
        return -i;
    snprintf(out, len, "Fake GPU %d", i);
    return OK;
}
FN int nvmlDeviceGetMemoryInfo(struct gpu *d, mem_t *m)
{
    int i = index_of(d);
    if (i < 0)
        return -i;
    if (state((unsigned)i, NULL, NULL))
        return E_LOST;
    const char *u = getenv("FAKE_NVML_USED_MB");
    unsigned long long used = u ? strtoull(u, NULL, 10) << 20 : 0;
    m->total = d->mem;
    m->used = used < d->mem ? used : d->mem;
    m->free = d->mem - m->used;
    return OK;
}
/* ---- the card's processes (FAKE_NVML_PROCS) ---- */

struct fproc {
    unsigned gpu, pid;
    unsigned long long bytes;
    int graphics;
};

/* One "GPU:PID:MB[:g]" item into p; 0 when it is not one. */
static int parse_proc(const char *t, struct fproc *p)
{
    unsigned long long mb = 0;
    char kind = 'c';
    if (sscanf(t, "%u:%u:%llu:%c", &p->gpu, &p->pid, &mb, &kind) < 3)
        return 0;
    p->bytes = mb << 20;
    p->graphics = kind == 'g';
    return 1;
}

/* FAKE_NVML_PROCS, then the "proc GPU:PID:MB[:g]" lines of FAKE_NVML_STATE
 * (processes that come and go while a test runs). */
static unsigned load_procs(struct fproc *p, unsigned cap)
{
    const char *e = getenv("FAKE_NVML_PROCS");
    char buf[2048];
    unsigned n = 0;
    snprintf(buf, sizeof buf, "%s", e ? e : "");
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t && n < cap; t = strtok_r(NULL, ",", &save))
        n += (unsigned)parse_proc(t, &p[n]);
    const char *path = getenv("FAKE_NVML_STATE");
    FILE *f = path ? fopen(path, "r") : NULL;
    char line[128];
    while (f && n < cap && fgets(line, sizeof line, f))
        if (strncmp(line, "proc ", 5) == 0)
            n += (unsigned)parse_proc(line + 5, &p[n]);
    if (f)
        fclose(f);
    return n;
}

struct proc_v1 {
    unsigned pid;
    unsigned long long used;
};
struct proc_v2 {
    unsigned pid;
    unsigned long long used;
    unsigned gi, ci;
};

/* The listed processes on d into p (at most 64), their number in *k; an
 * NVML error for a bad handle or count. */
static int gpu_procs(struct gpu *d, const unsigned *n, struct fproc *p, unsigned *k)
{
    int i = index_of(d);
    if (i < 0)
        return -i;
    if (!n)
        return E_INVALID;
    unsigned np = load_procs(p, 64);
    *k = 0;
    for (unsigned j = 0; j < np; j++)
        if (p[j].gpu == (unsigned)i)
            p[(*k)++] = p[j];
    return OK;
}

/* NVML's two-call protocol over the listed processes of one kind. */
static int list_procs(struct gpu *d, unsigned *n, void *out, int graphics, int v1)
{
    struct fproc p[64];
    unsigned np, k = 0;
    int r = gpu_procs(d, n, p, &np);
    if (r != OK)
        return r;
    for (unsigned j = 0; j < np; j++)
        if (p[j].graphics == graphics)
            p[k++] = p[j];
    if (*n < k || (k && !out)) {
        *n = k;
        return 7; /* NVML_ERROR_INSUFFICIENT_SIZE */
    }
    for (unsigned j = 0; j < k; j++) {
        if (v1)
            ((struct proc_v1 *)out)[j] = (struct proc_v1){p[j].pid, p[j].bytes};
        else
            ((struct proc_v2 *)out)[j] = (struct proc_v2){p[j].pid, p[j].bytes, ~0u, ~0u};
    }
    *n = k;
    return OK;
}

FN int nvmlDeviceGetComputeRunningProcesses(struct gpu *d, unsigned *n, void *out)
{
    return list_procs(d, n, out, 0, 1);
}

FN int nvmlDeviceGetMinorNumber(struct gpu *d, unsigned *minor)
{
    int i = index_of(d);
    if (i < 0)
        return -i;
    *minor = (unsigned)i;
    return OK;
}
FN int nvmlSystemGetDriverVersion(char *out, unsigned len)
{
    snprintf(out, len, "fake-580.00");
    return OK;
}

#ifndef FAKE_NVML_LEGACY
FN int nvmlInit_v2(void) { return init(); }
FN int nvmlDeviceGetCount_v2(unsigned *n) { return nvmlDeviceGetCount(n); }
FN int nvmlDeviceGetHandleByIndex_v2(unsigned i, struct gpu **h)
{
    return nvmlDeviceGetHandleByIndex(i, h);
}
FN int nvmlDeviceGetHandleByUUID_v2(const char *uuid, struct gpu **h)
{
    return nvmlDeviceGetHandleByUUID(uuid, h);
}
FN int nvmlDeviceGetPciInfo_v3(struct gpu *d, pci_t *p)
{
    int i = index_of(d);
    if (i < 0)
        return -i;
    memset(p, 0, sizeof *p);
    p->bus = (unsigned)i + 1;
    snprintf(p->busId, sizeof p->busId, "00000000:%02X:00.0", (unsigned)i + 1);
    return OK;
}
FN int nvmlEventSetCreate(int **set)
{
    *set = &evset_token;
    return OK;
}
FN int nvmlDeviceGetSupportedEventTypes(struct gpu *d, unsigned long long *types)
{
    *types = 0x8ull | 0x1ull;
    return index_of(d) < 0 ? E_INVALID : OK;
}
FN int nvmlDeviceRegisterEvents(struct gpu *d, unsigned long long types, int *set)
{
    return index_of(d) < 0 || set != &evset_token ? E_INVALID : OK;
}
FN int nvmlEventSetWait_v2(int *set, event_t *ev, unsigned timeout_ms)
{
    int g = -1;
    unsigned long long code = 0;
    state(~0u, &g, &code);
    if (set != &evset_token || g < 0 || (unsigned)g >= ngpus)
        return E_TIMEOUT;
    xids_delivered++;
    memset(ev, 0, sizeof *ev);
    ev->device = &gpus[g];
    ev->eventType = 0x8ull;
    ev->eventData = code;
    return OK;
}
FN int nvmlEventSetFree(int *set) { return set == &evset_token ? OK : E_INVALID; }

/* nvmlMemory_v2_t: the card reserves 256 MiB of its memory for itself. */
struct mem_v2 {
    unsigned version;
    unsigned long long total, reserved, free, used;
};
FN int nvmlDeviceGetMemoryInfo_v2(struct gpu *d, void *mv)
{
    struct mem_v2 *m = mv;
    mem_t m1;
    int r = nvmlDeviceGetMemoryInfo(d, &m1);
    if (r != OK)
        return r;
    if (m->version != (unsigned)(sizeof *m | 2u << 24))
        return 25; /* NVML_ERROR_ARGUMENT_VERSION_MISMATCH */
    m->total = m1.total;
    m->reserved = 256ull << 20;
    m->used = m1.used;
    m->free = m1.total - m1.used - m->reserved;
    return OK;
}
FN int nvmlDeviceGetComputeRunningProcesses_v2(struct gpu *d, unsigned *n, void *out)
{
    return list_procs(d, n, out, 0, 0);
}
FN int nvmlDeviceGetComputeRunningProcesses_v3(struct gpu *d, unsigned *n, void *out)
{
    return list_procs(d, n, out, 0, 0);
}
FN int nvmlDeviceGetGraphicsRunningProcesses_v3(struct gpu *d, unsigned *n, void *out)
{
    return list_procs(d, n, out, 1, 0);
}

/* One sample per listed process (nvmlProcessUtilizationSample_t). */
struct util_sample {
    unsigned pid;
    unsigned long long ts;
    unsigned sm, mem, enc, dec;
};
FN int nvmlDeviceGetProcessUtilization(struct gpu *d, void *out, unsigned *n,
                                       unsigned long long last)
{
    (void)last;
    struct fproc p[64];
    unsigned k;
    int r = gpu_procs(d, n, p, &k);
    if (r != OK)
        return r;
    struct util_sample *s = out;
    for (unsigned j = 0; s && j < k && j < *n; j++)
        s[j] = (struct util_sample){p[j].pid, 1000, 10 + j, 5, 0, 0};
    if (!s || k > *n) {
        *n = k;
        return 7;
    }
    *n = k;
    return OK;
}
/* Accounting: every listed process ran on the GPU. */
FN int nvmlDeviceGetAccountingPids(struct gpu *d, unsigned *n, unsigned *pids)
{
    struct fproc p[64];
    unsigned k;
    int r = gpu_procs(d, n, p, &k);
    if (r != OK)
        return r;
    for (unsigned j = 0; pids && j < k && j < *n; j++)
        pids[j] = p[j].pid;
    if (!pids || k > *n) {
        *n = k;
        return 7;
    }
    *n = k;
    return OK;
}
/* Present, so that the hook's refusal of it is what a caller sees. */
FN int nvmlDeviceGetRunningProcessDetailList(struct gpu *d, void *list)
{
    return index_of(d) < 0 || !list ? E_INVALID : OK;
}

/* ---- the private export table (nvidia-smi's process lists) ---- */

#define XT_SLOTS 270 /* 2160 bytes: the size word and 269 entries */
#define XT_REC 4128
static const unsigned char xt_id[16] = {0xc4, 0xfe, 0x3e, 0x6c, 0xc9, 0x8f, 0x6c, 0x4e,
                                        0xa3, 0x27, 0xee, 0x69, 0x6e, 0x12, 0xf7, 0xc4};
static void *xt_table[XT_SLOTS];

/* One list in records of XT_REC bytes: pid, memory at 8, instance ids
 * (none), 8 bytes, the command line "fake-PID". The two-call protocol as
 * the public lists. kind: 0 compute, 1 graphics, 2 MPS (none listed). */
static int xt_list(int kind, struct gpu *d, unsigned *n, void *out)
{
    struct fproc p[64];
    unsigned np, k = 0;
    int r = gpu_procs(d, n, p, &np);
    if (r != OK)
        return r;
    for (unsigned j = 0; j < np && kind < 2; j++)
        if (p[j].graphics == kind)
            p[k++] = p[j];
    if (*n < k || (k && !out)) {
        *n = k;
        return 7;
    }
    for (unsigned j = 0; j < k; j++) {
        unsigned char *rec = (unsigned char *)out + (size_t)j * XT_REC;
        unsigned none = ~0u;
        memset(rec, 0, XT_REC);
        memcpy(rec, &p[j].pid, 4);
        memcpy(rec + 8, &p[j].bytes, 8);
        memcpy(rec + 16, &none, 4);
        memcpy(rec + 20, &none, 4);
        snprintf((char *)rec + 32, XT_REC - 32, "fake-%u", p[j].pid);
    }
    *n = k;
    return OK;
}
/* The fourth argument is nvidia-smi's (seen as 0 and 2): ignored here. */
static int xt_compute(struct gpu *d, unsigned *n, void *out, unsigned long a3)
{
    (void)a3;
    return xt_list(0, d, n, out);
}
static int xt_graphics(struct gpu *d, unsigned *n, void *out, unsigned long a3)
{
    (void)a3;
    return xt_list(1, d, n, out);
}
static int xt_mps(struct gpu *d, unsigned *n, void *out, unsigned long a3)
{
    (void)a3;
    return xt_list(2, d, n, out);
}
static int xt_other(void) { return E_NOT_SUPPORTED; }

FN int nvmlInternalGetExportTable(const void **table, const void *id)
{
    if (!table || !id)
        return E_INVALID;
    if (memcmp(id, xt_id, sizeof xt_id) != 0)
        return 13; /* NVML_ERROR_FUNCTION_NOT_FOUND */
    const char *e = getenv("FAKE_NVML_XTAB_SIZE");
    unsigned long long size = e ? strtoull(e, NULL, 10) : 8ull * XT_SLOTS;
    int (*other)(void) = xt_other;
    int (*lists[3])(struct gpu *, unsigned *, void *, unsigned long) = {xt_compute, xt_graphics,
                                                                         xt_mps};
    memcpy(&xt_table[0], &size, sizeof size);
    for (int i = 1; i < XT_SLOTS; i++)
        memcpy(&xt_table[i], &other, sizeof other);
    for (int k = 0; k < 3; k++)
        memcpy(&xt_table[1 + 212 + k], &lists[k], sizeof lists[k]);
    *table = xt_table;
    return OK;
}
#endif
