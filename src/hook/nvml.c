/* nvml.c: NVML (libnvidia-ml.so.1) as the job should see it.
 *
 * Under a quota, cuMemGetInfo already shows the job its share; tools that
 * size themselves from NVML (nvidia-smi, pynvml, DCGM, Ollama's discovery,
 * torch.cuda.list_gpu_processes) would still see the whole card and other
 * tenants' processes. The few NVML calls that describe memory and the
 * processes on a GPU are answered for the job here; every other NVML call
 * is the library's own, untouched (docs/coverage.md, "NVML").
 *
 * What the job is: the processes the daemon shows a view connection
 * (view.h): those of its pod or endpoint, or of its uid on a plain node.
 * The calling process's own figures are its own records (mem.c), the same
 * cuMemGetInfo uses, so that pynvml and torch.cuda.mem_get_info agree in
 * one process. Memory that is swapped out counts as used: it is the job's,
 * counted against its quota, only not on the GPU now.
 *
 *   total = the quota (CUSHARE_MEM_LIMIT, the grant of the connection) if
 *           smaller than the GPU, else the GPU
 *   used  = resident + swapped of the job's processes on that GPU
 *   free  = total - used (0 if the job is over)
 *
 * With no daemon (or one that refuses views) and no quota, NVML is
 * untouched; with a quota, the process's own memory is all it knows.
 *
 * How calls get here: programs dlopen libnvidia-ml.so.1 and look its
 * symbols up with dlsym (nvidia-smi, ctypes, Go), which the dlsym override
 * sends to cs_nvml_map; programs linked against it bind to the exports
 * below, which find the library's own definitions through RTLD_NEXT. Not a
 * hot path: an NVML call may lock, log and talk to the daemon (at most one
 * view every VIEW_TTL_NS per process, cached under view_mu: a monitoring
 * loop polling every GPU costs the daemon one connection per period).
 */
#include "hook/nvml.h"
#include "hook/config.h"
#include "hook/device.h"
#include "hook/hook.h"
#include "hook/mem.h"
#include "hook/view.h"
#include "common/log.h"
#include "common/util.h"

#include <dlfcn.h>
#include <stddef.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* NVML's ABI, as its header declares it (the layouts are stable: new ones
 * come under new, versioned names). */
typedef int nvml_ret;
typedef void *nvml_dev;
#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_FUNCTION_NOT_FOUND 13
#define NVML_UUID_BUF 96
#define NVML_NO_INSTANCE 0xFFFFFFFFu /* gpuInstanceId / computeInstanceId without MIG */

struct nvml_memory { /* nvmlMemory_t */
    unsigned long long total, free, used;
};
struct nvml_memory_v2 { /* nvmlMemory_v2_t */
    unsigned int version;
    unsigned long long total, reserved, free, used;
};
struct nvml_proc_v1 { /* nvmlProcessInfo_v1_t: ..._v1 names */
    unsigned int pid;
    unsigned long long usedGpuMemory;
};
struct nvml_proc_v2 { /* nvmlProcessInfo_v2_t / nvmlProcessInfo_t: _v2 and _v3 */
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
};
struct nvml_util_sample { /* nvmlProcessUtilizationSample_t */
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil, memUtil, encUtil, decUtil;
};

/* ---- the real entry points ------------------------------------------------------ */

/* Every NVML name this module answers for, with its wrapper and the
 * library's own definition (learned from the dlsym answer that was swapped
 * for the wrapper, or looked up once through RTLD_NEXT / the loaded
 * library). Written with atomics: two threads may learn the same pointer. */
enum {
    N_UUID, /* not wrapped: how a handle is named */
    N_MEM,
    N_MEM_V2,
    N_COMPUTE,
    N_COMPUTE_V2,
    N_COMPUTE_V3,
    N_GRAPHICS,
    N_GRAPHICS_V2,
    N_GRAPHICS_V3,
    N_MPS,
    N_MPS_V2,
    N_MPS_V3,
    N_PROC_UTIL,
    N_DETAIL_LIST,
    N_PROCS_UTIL_INFO,
    N_ACCT_PIDS,
    N_ACCT_STATS,
    N_XTAB,
    N_COUNT,
};

struct nvml_entry {
    const char *name;
    void *wrapper; /* NULL: looked up for our own use, never swapped */
    _Atomic(void *) real;
};

#define W(fn) ((void *)&fn)
static struct nvml_entry entries[N_COUNT] = {
    [N_UUID] = {"nvmlDeviceGetUUID", NULL, NULL},
    [N_MEM] = {"nvmlDeviceGetMemoryInfo", W(nvmlDeviceGetMemoryInfo), NULL},
    [N_MEM_V2] = {"nvmlDeviceGetMemoryInfo_v2", W(nvmlDeviceGetMemoryInfo_v2), NULL},
    [N_COMPUTE] = {"nvmlDeviceGetComputeRunningProcesses", W(nvmlDeviceGetComputeRunningProcesses), NULL},
    [N_COMPUTE_V2] = {"nvmlDeviceGetComputeRunningProcesses_v2", W(nvmlDeviceGetComputeRunningProcesses_v2), NULL},
    [N_COMPUTE_V3] = {"nvmlDeviceGetComputeRunningProcesses_v3", W(nvmlDeviceGetComputeRunningProcesses_v3), NULL},
    [N_GRAPHICS] = {"nvmlDeviceGetGraphicsRunningProcesses", W(nvmlDeviceGetGraphicsRunningProcesses), NULL},
    [N_GRAPHICS_V2] = {"nvmlDeviceGetGraphicsRunningProcesses_v2", W(nvmlDeviceGetGraphicsRunningProcesses_v2), NULL},
    [N_GRAPHICS_V3] = {"nvmlDeviceGetGraphicsRunningProcesses_v3", W(nvmlDeviceGetGraphicsRunningProcesses_v3), NULL},
    [N_MPS] = {"nvmlDeviceGetMPSComputeRunningProcesses", W(nvmlDeviceGetMPSComputeRunningProcesses), NULL},
    [N_MPS_V2] = {"nvmlDeviceGetMPSComputeRunningProcesses_v2", W(nvmlDeviceGetMPSComputeRunningProcesses_v2), NULL},
    [N_MPS_V3] = {"nvmlDeviceGetMPSComputeRunningProcesses_v3", W(nvmlDeviceGetMPSComputeRunningProcesses_v3), NULL},
    [N_PROC_UTIL] = {"nvmlDeviceGetProcessUtilization", W(nvmlDeviceGetProcessUtilization), NULL},
    [N_DETAIL_LIST] = {"nvmlDeviceGetRunningProcessDetailList", W(nvmlDeviceGetRunningProcessDetailList), NULL},
    [N_PROCS_UTIL_INFO] = {"nvmlDeviceGetProcessesUtilizationInfo", W(nvmlDeviceGetProcessesUtilizationInfo), NULL},
    [N_ACCT_PIDS] = {"nvmlDeviceGetAccountingPids", W(nvmlDeviceGetAccountingPids), NULL},
    [N_ACCT_STATS] = {"nvmlDeviceGetAccountingStats", W(nvmlDeviceGetAccountingStats), NULL},
    [N_XTAB] = {"nvmlInternalGetExportTable", W(nvmlInternalGetExportTable), NULL},
};
#undef W

void *cs_nvml_map(const char *name, void *p)
{
    cs_debug("nvml: dlsym(%s)", name);
    for (int i = 0; i < N_COUNT; i++) {
        if (strcmp(entries[i].name, name) != 0)
            continue;
        if (p != entries[i].wrapper) /* a lookup in our own library gives the wrapper */
            atomic_store_explicit(&entries[i].real, p, memory_order_release);
        return entries[i].wrapper ? entries[i].wrapper : p;
    }
    return p;
}

/* The library's definition of entry i: as learned, else from the copy of
 * libnvidia-ml.so.1 the process has loaded (never loading one ourselves),
 * else whatever follows us in the lookup order. NULL if none. */
static void *real_of(int i)
{
    void *p = atomic_load_explicit(&entries[i].real, memory_order_acquire);
    if (p)
        return p;
    cs_dlsym_init();
    void *h = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (h) {
        p = cs_real_dlsym(h, entries[i].name);
        dlclose(h);
    }
    if (!p)
        p = cs_real_dlsym(RTLD_NEXT, entries[i].name);
    if (p == entries[i].wrapper)
        p = NULL;
    if (p)
        atomic_store_explicit(&entries[i].real, p, memory_order_release);
    return p;
}

/* ---- the job's figures for one GPU ------------------------------------------------ */

#define VIEW_TTL_NS 200000000ull /* a view is reused for 200 ms */
#define VIEW_TIMEOUT_MS 1000     /* a daemon that does not answer: the process alone */

/* view_mu (a leaf, locks.h) guards the cached view; held across fetching a
 * new one, so that threads asking at once cost one connection. */
static pthread_mutex_t view_mu = PTHREAD_MUTEX_INITIALIZER;
static struct cs_view view_cache;
static uint64_t view_at;  /* when view_cache was fetched, 0 = never */
static bool view_ok;      /* the last fetch succeeded */

static bool view_copy(struct cs_view *out)
{
    pthread_mutex_lock(&view_mu);
    uint64_t now = cs_now_ns();
    if (!view_at || now - view_at > VIEW_TTL_NS) {
        view_ok = cs_view_fetch(&view_cache, VIEW_TIMEOUT_MS) == 0;
        view_at = cs_now_ns();
    }
    bool ok = view_ok;
    if (ok)
        memcpy(out, &view_cache, sizeof *out);
    pthread_mutex_unlock(&view_mu);
    return ok;
}

/* What the job is on one GPU, for the calls below. */
struct job_gpu {
    bool managed;              /* false: answer as the library does */
    bool have_view;            /* the daemon answered */
    uint64_t used;             /* the job's processes' memory on the GPU */
    uint64_t limit;            /* per-GPU quota, 0 = none */
    unsigned n;                /* processes */
    struct nvml_proc_v2 proc[CS_VIEW_PROCS + 1];
    struct cs_view v;          /* scratch: the daemon's view */
};

/* This process's memory on the GPU with this UUID (its records: what
 * cuMemGetInfo counts), and whether it uses that GPU at all. */
static bool own_usage(const unsigned char uuid[CS_UUID_LEN], uint64_t *used)
{
    for (int i = 0; i < CS_MAX_DEVICES; i++) {
        struct cs_dev *d = &cs_devs[i];
        pthread_mutex_lock(&d->mu);
        bool mine = d->lease.state != CS_LEASE_DETACHED && !memcmp(d->uuid, uuid, CS_UUID_LEN);
        pthread_mutex_unlock(&d->mu);
        if (mine) {
            *used = atomic_load_explicit(&d->mem.used, memory_order_relaxed);
            return true;
        }
    }
    return false;
}

static void add_proc(struct job_gpu *j, uint32_t pid, uint64_t bytes)
{
    if (j->n >= sizeof j->proc / sizeof j->proc[0])
        return;
    j->proc[j->n++] = (struct nvml_proc_v2){pid, bytes, NVML_NO_INSTANCE, NVML_NO_INSTANCE};
    j->used += bytes;
}

/* The daemon's clients on that GPU, this process's own entry replaced by
 * its own records (and added if the daemon does not list it yet). */
static void from_view(struct job_gpu *j, const struct cs_view *v, const struct cs_view_gpu *g,
                      bool mine, uint64_t own)
{
    bool self_seen = false;
    for (unsigned i = 0; i < v->nproc; i++) {
        const struct cs_view_proc *p = &v->proc[i];
        if (p->gpu_index != g->index)
            continue;
        bool self = p->pid == v->self_pid;
        self_seen |= self;
        add_proc(j, p->pid, self && mine ? own : p->resident + p->swapped);
    }
    if (mine && !self_seen)
        add_proc(j, v->self_pid, own);
}

static uint64_t min_limit(uint64_t a, uint64_t b)
{
    if (!a || !b)
        return a | b;
    return a < b ? a : b;
}

/* Fills *j for NVML device dev. A handle the library does not know, or a
 * GPU cushare does not manage here (a MIG instance, a GPU outside the
 * connection's grant, no daemon and no quota), leaves j->managed false. */
static void job_gpu(nvml_dev dev, struct job_gpu *j)
{
    memset(j, 0, sizeof *j);
    if (cs_cfg.disabled)
        return;
    nvml_ret (*uuid_fn)(nvml_dev, char *, unsigned) = real_of(N_UUID);
    char text[NVML_UUID_BUF];
    unsigned char uuid[CS_UUID_LEN];
    if (!uuid_fn || uuid_fn(dev, text, sizeof text) != NVML_SUCCESS || cs_uuid_parse(text, uuid))
        return;
    uint64_t own = 0;
    bool mine = own_usage(uuid, &own);
    j->have_view = view_copy(&j->v);
    const struct cs_view_gpu *g = j->have_view ? cs_view_find_gpu(&j->v, uuid) : NULL;
    j->limit = min_limit(cs_mem_limit(), j->have_view ? j->v.mem_limit : 0);
    if (g)
        from_view(j, &j->v, g, mine, own);
    if (g)
        j->managed = true;
    else if (!j->have_view && (j->limit || mine)) {
        j->managed = true; /* no daemon: the process alone */
        if (mine)
            add_proc(j, (uint32_t)getpid(), own);
    }
}

/* The job on dev's GPU, or NULL when cushare does not manage it there: the
 * caller answers as the library does then. Free it. (NULL too when 16 KiB
 * cannot be had: a process that short of memory gets the library's answer.) */
static struct job_gpu *job_for(nvml_dev dev)
{
    struct job_gpu *j = malloc(sizeof *j);
    if (!j)
        return NULL;
    job_gpu(dev, j);
    if (!j->managed) {
        free(j);
        return NULL;
    }
    return j;
}

/* Rewrites the library's figures (card total in *total) for the job:
 * total = the quota if smaller, used = the job's, free = the rest. */
static void job_memory(nvml_dev dev, unsigned long long *total, unsigned long long *used,
                       unsigned long long *free_, unsigned long long *reserved)
{
    struct job_gpu *j = job_for(dev);
    if (!j)
        return;
    *total = j->limit && j->limit < *total ? j->limit : *total;
    *used = j->used;
    *free_ = *total > j->used ? *total - j->used : 0;
    if (reserved)
        *reserved = 0; /* the driver's reserve is not the job's */
    free(j);
}

/* ---- memory ---------------------------------------------------------------------------- */

CS_EXPORT nvml_ret nvmlDeviceGetMemoryInfo(nvml_dev dev, struct nvml_memory *m)
{
    nvml_ret (*real)(nvml_dev, struct nvml_memory *) = real_of(N_MEM);
    nvml_ret r = real ? real(dev, m) : NVML_ERROR_FUNCTION_NOT_FOUND;
    if (r == NVML_SUCCESS && m)
        job_memory(dev, &m->total, &m->used, &m->free, NULL);
    return r;
}

/* v2 also reports what the driver reserves; under cushare the job has
 * none of it: reserved is 0 and total = used + free. */
CS_EXPORT nvml_ret nvmlDeviceGetMemoryInfo_v2(nvml_dev dev, struct nvml_memory_v2 *m)
{
    nvml_ret (*real)(nvml_dev, struct nvml_memory_v2 *) = real_of(N_MEM_V2);
    nvml_ret r = real ? real(dev, m) : NVML_ERROR_FUNCTION_NOT_FOUND;
    if (r == NVML_SUCCESS && m)
        job_memory(dev, &m->total, &m->used, &m->free, &m->reserved);
    return r;
}

/* ---- processes -------------------------------------------------------------------------- */

enum proc_kind { PK_COMPUTE, PK_OTHER };

/* The job's list in NVML's two-call protocol: *count in, the entries
 * needed out; INSUFFICIENT_SIZE when they do not fit. Graphics and MPS
 * lists show none of the job (cushare schedules compute contexts only)
 * and nothing of anyone else. */
static nvml_ret fill_procs(const struct job_gpu *j, enum proc_kind k, unsigned *count, void *out,
                           bool v1)
{
    unsigned n = k == PK_COMPUTE ? j->n : 0;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (*count < n || (n && !out)) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < n; i++) {
        if (v1)
            ((struct nvml_proc_v1 *)out)[i] = (struct nvml_proc_v1){j->proc[i].pid, j->proc[i].usedGpuMemory};
        else
            ((struct nvml_proc_v2 *)out)[i] = j->proc[i];
    }
    *count = n;
    return NVML_SUCCESS;
}

typedef nvml_ret (*procs_fn)(nvml_dev, unsigned *, void *);

static nvml_ret procs(int entry, enum proc_kind k, bool v1, nvml_dev dev, unsigned *count, void *out)
{
    procs_fn real = (procs_fn)real_of(entry);
    if (!real)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    struct job_gpu *j = job_for(dev);
    if (!j)
        return real(dev, count, out);
    nvml_ret r = fill_procs(j, k, count, out, v1);
    free(j);
    return r;
}

#define PROCS(fn, entry, kind, v1)                                                         \
    CS_EXPORT nvml_ret fn(nvml_dev dev, unsigned *count, void *infos)                       \
    {                                                                                       \
        return procs(entry, kind, v1, dev, count, infos);                                   \
    }
PROCS(nvmlDeviceGetComputeRunningProcesses, N_COMPUTE, PK_COMPUTE, true)
PROCS(nvmlDeviceGetComputeRunningProcesses_v2, N_COMPUTE_V2, PK_COMPUTE, false)
PROCS(nvmlDeviceGetComputeRunningProcesses_v3, N_COMPUTE_V3, PK_COMPUTE, false)
PROCS(nvmlDeviceGetGraphicsRunningProcesses, N_GRAPHICS, PK_OTHER, true)
PROCS(nvmlDeviceGetGraphicsRunningProcesses_v2, N_GRAPHICS_V2, PK_OTHER, false)
PROCS(nvmlDeviceGetGraphicsRunningProcesses_v3, N_GRAPHICS_V3, PK_OTHER, false)
PROCS(nvmlDeviceGetMPSComputeRunningProcesses, N_MPS, PK_OTHER, true)
PROCS(nvmlDeviceGetMPSComputeRunningProcesses_v2, N_MPS_V2, PK_OTHER, false)
PROCS(nvmlDeviceGetMPSComputeRunningProcesses_v3, N_MPS_V3, PK_OTHER, false)
#undef PROCS

static bool job_has(const struct job_gpu *j, unsigned pid)
{
    for (unsigned i = 0; i < j->n; i++)
        if (j->proc[i].pid == pid)
            return true;
    return false;
}

/* Keeps, in place and in order, the records of arr (n of stride bytes,
 * the pid at pid_off) that belong to the job; returns how many. */
static unsigned keep_job(const struct job_gpu *j, void *arr, unsigned n, size_t stride,
                         size_t pid_off)
{
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++) {
        char *rec = (char *)arr + i * stride;
        unsigned pid;
        memcpy(&pid, rec + pid_off, sizeof pid);
        if (job_has(j, pid))
            memmove((char *)arr + k++ * stride, rec, stride);
    }
    return k;
}

/* The library's samples, those of other processes taken out. */
CS_EXPORT nvml_ret nvmlDeviceGetProcessUtilization(nvml_dev dev, struct nvml_util_sample *s,
                                                   unsigned *count, unsigned long long last)
{
    nvml_ret (*real)(nvml_dev, struct nvml_util_sample *, unsigned *, unsigned long long) =
        real_of(N_PROC_UTIL);
    nvml_ret r = real ? real(dev, s, count, last) : NVML_ERROR_FUNCTION_NOT_FOUND;
    struct job_gpu *j = r == NVML_SUCCESS && s && count ? job_for(dev) : NULL;
    if (j)
        *count = keep_job(j, s, *count, sizeof *s, offsetof(struct nvml_util_sample, pid));
    free(j);
    return r;
}

/* Accounting (when an administrator turned it on) names every process that
 * ran on the GPU: the job's are kept, the others' taken out. */
CS_EXPORT nvml_ret nvmlDeviceGetAccountingPids(nvml_dev dev, unsigned *count, unsigned *pids)
{
    nvml_ret (*real)(nvml_dev, unsigned *, unsigned *) = real_of(N_ACCT_PIDS);
    nvml_ret r = real ? real(dev, count, pids) : NVML_ERROR_FUNCTION_NOT_FOUND;
    struct job_gpu *j = r == NVML_SUCCESS && pids && count ? job_for(dev) : NULL;
    if (j)
        *count = keep_job(j, pids, *count, sizeof *pids, 0);
    free(j);
    return r;
}

/* Another job's statistics are not found, as a process that never ran. */
CS_EXPORT nvml_ret nvmlDeviceGetAccountingStats(nvml_dev dev, unsigned pid, void *stats)
{
    nvml_ret (*real)(nvml_dev, unsigned, void *) = real_of(N_ACCT_STATS);
    if (!real)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    struct job_gpu *j = job_for(dev);
    bool hidden = j && !job_has(j, pid);
    free(j);
    return hidden ? NVML_ERROR_NOT_FOUND : real(dev, pid, stats);
}

/* Newer per-process calls whose records cushare does not rewrite: on a GPU
 * it manages they are not supported (tools fall back to the calls above),
 * rather than list other tenants. */
static nvml_ret refused_or_real(int entry, nvml_dev dev, void *arg)
{
    nvml_ret (*real)(nvml_dev, void *) = real_of(entry);
    if (!real)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    struct job_gpu *j = job_for(dev);
    bool managed = j != NULL;
    free(j);
    return managed ? NVML_ERROR_NOT_SUPPORTED : real(dev, arg);
}

CS_EXPORT nvml_ret nvmlDeviceGetRunningProcessDetailList(nvml_dev dev, void *plist)
{
    return refused_or_real(N_DETAIL_LIST, dev, plist);
}

CS_EXPORT nvml_ret nvmlDeviceGetProcessesUtilizationInfo(nvml_dev dev, void *info)
{
    return refused_or_real(N_PROCS_UTIL_INFO, dev, info);
}

/* ---- nvidia-smi's private table ------------------------------------------------------- */

/* nvidia-smi does not list processes through the calls above: it reads
 * them through NVML's undocumented export table (nvmlInternalGetExportTable:
 * the table out, a 16-byte table id in). Measured on driver 580.159.04
 * (bench/gpu/nvml_xtab.c, bench/results/nvml.md): nvidia-smi asks for one
 * table, id c4fe3e6c-c98f-6c4e-a327-ee696e12f7c4, which starts with its
 * size in bytes (2160: the size word and 269 entries); entries 212, 213 and
 * 214 list a device's compute, graphics and MPS processes as (device,
 * unsigned *count: the capacity in, 500 from nvidia-smi, the number out;
 * the records; more arguments, forwarded as they come), each record 4128
 * bytes: the pid (u32 at 0), the memory used (u64 at 8), the instance ids,
 * 8 more bytes and the command line (4096 bytes).
 *
 * The interface is private and may change with any driver, so only a table
 * with exactly that id and size is rewritten: a copy of the library's with
 * those three entries replaced. They call the library's, then keep the
 * job's records (as the public lists: compute processes of the job, with
 * cushare's figure for their memory; no graphics or MPS process). Any other
 * table, this one at another size, or a second copy of the library, is
 * handed out untouched (nvidia-smi then lists every tenant, as before). */
#define XT_SIZE 2160u         /* bytes, the size word included */
#define XT_SLOTS (XT_SIZE / 8) /* the size word, then the entries */
#define XT_COMPUTE 212
#define XT_GRAPHICS 213
#define XT_MPS 214
#define XT_REC 4128    /* one process record */
#define XT_REC_USED 8 /* its memory used, u64 */
static const unsigned char xt_id[16] = {0xc4, 0xfe, 0x3e, 0x6c, 0xc9, 0x8f, 0x6c, 0x4e,
                                        0xa3, 0x27, 0xee, 0x69, 0x6e, 0x12, 0xf7, 0xc4};

typedef nvml_ret (*xt_fn)(nvml_dev, unsigned *, void *, uintptr_t, uintptr_t, uintptr_t);

/* xtab_mu (a leaf, locks.h) guards making the copy, once per process (the
 * library hands out one table). xt_real is written before the copy is
 * first handed out, under the lock, and only read after: a caller reaches
 * the replaced entries only through a copy it got under the lock. */
static pthread_mutex_t xtab_mu = PTHREAD_MUTEX_INITIALIZER;
static const void *xt_orig;  /* the library's table the copy was made from */
static void *xt_copy[XT_SLOTS];
static xt_fn xt_real[3];     /* compute, graphics, MPS */

/* The library's answer for list k (0 compute) filtered to the job. */
static nvml_ret xt_list(int k, nvml_dev dev, unsigned *count, void *recs, uintptr_t a3,
                        uintptr_t a4, uintptr_t a5)
{
    nvml_ret r = xt_real[k](dev, count, recs, a3, a4, a5);
    if (r != NVML_SUCCESS || !count || (*count && !recs))
        return r;
    struct job_gpu *j = job_for(dev);
    if (!j)
        return r;
    *count = k == 0 ? keep_job(j, recs, *count, XT_REC, 0) : 0;
    for (unsigned i = 0; i < *count; i++) {
        char *rec = (char *)recs + (size_t)i * XT_REC;
        unsigned pid;
        memcpy(&pid, rec, sizeof pid);
        for (unsigned p = 0; p < j->n; p++)
            if (j->proc[p].pid == pid)
                memcpy(rec + XT_REC_USED, &j->proc[p].usedGpuMemory, sizeof(unsigned long long));
    }
    free(j);
    return r;
}

#define XT_LIST(fn, k)                                                                     \
    static nvml_ret fn(nvml_dev dev, unsigned *count, void *recs, uintptr_t a3, uintptr_t a4, \
                       uintptr_t a5)                                                       \
    {                                                                                      \
        return xt_list(k, dev, count, recs, a3, a4, a5);                                   \
    }
XT_LIST(xt_compute, 0)
XT_LIST(xt_graphics, 1)
XT_LIST(xt_mps, 2)
#undef XT_LIST

/* The copy of table t to hand out, made at the first call; t itself when it
 * is not the layout measured or not the table the copy was made from. */
static const void *xt_rewrite(const void *t)
{
    uint64_t size;
    memcpy(&size, t, sizeof size);
    if (size != XT_SIZE)
        return t;
    static const int slot[3] = {XT_COMPUTE, XT_GRAPHICS, XT_MPS};
    static const xt_fn mine[3] = {xt_compute, xt_graphics, xt_mps};
    pthread_mutex_lock(&xtab_mu);
    if (!xt_orig) {
        memcpy(xt_copy, t, XT_SIZE);
        for (int k = 0; k < 3; k++) {
            memcpy(&xt_real[k], &xt_copy[1 + slot[k]], sizeof xt_real[k]);
            if (xt_real[k])
                memcpy(&xt_copy[1 + slot[k]], &mine[k], sizeof mine[k]);
        }
        xt_orig = t;
        cs_debug("nvml: export table %p rewritten (process lists)", t);
    }
    const void *out = xt_orig == t ? (const void *)xt_copy : t;
    pthread_mutex_unlock(&xtab_mu);
    return out;
}

CS_EXPORT nvml_ret nvmlInternalGetExportTable(const void **table, const void *id)
{
    nvml_ret (*real)(const void **, const void *) = real_of(N_XTAB);
    if (!real)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvml_ret r = real(table, id);
    if (r == NVML_SUCCESS && table && *table && id && !cs_cfg.disabled &&
        !memcmp(id, xt_id, sizeof xt_id))
        *table = xt_rewrite(*table);
    return r;
}
