/* nvml_probe: what a tool that sizes itself from NVML sees (issue 22).
 *
 * Loads libnvidia-ml.so.1 the way nvidia-smi and pynvml do (dlopen, then
 * dlsym of the versioned names: nvmlInit_v2, ..._v2, ..._v3) and prints,
 * for GPU --gpu (default 0), one key=value line per call:
 *
 *   mem total=B used=B free=B            nvmlDeviceGetMemoryInfo
 *   mem2 total=B reserved=B used=B free=B  nvmlDeviceGetMemoryInfo_v2
 *   procs1 n=N list=PID:B,...            nvmlDeviceGetComputeRunningProcesses
 *   procs3 n=N list=PID:B,...            ..._v3 (two-call protocol: count, then fill)
 *   graphics3 n=N list=...               nvmlDeviceGetGraphicsRunningProcesses_v3
 *   util n=N pids=PID,...                nvmlDeviceGetProcessUtilization
 *   acct n=N pids=PID,...                nvmlDeviceGetAccountingPids
 *   detail rc=R                          nvmlDeviceGetRunningProcessDetailList
 *   xtab n=N list=PID:B,...              nvidia-smi's way: the private export
 *                                        table's entries 212-214 (driver 580's
 *                                        layout, src/hook/nvml.c), capacity 500
 *                                        in, as nvidia-smi asks; "xtab rc=R"
 *                                        when the table is not there
 *   xtab-other graphics=G mps=M          entries 213, 214: how many listed
 *
 * With --cuda MB it is first a CUDA process of its own (pynvml inside a
 * training job): primary context on device 0, MB MiB allocated, then
 *   cumem total=B free=B                 cuMemGetInfo
 * Exit status 0 when every call it made answered; 1 otherwise. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*fn0)(void);
typedef int (*fn_handle)(unsigned, void **);
typedef int (*fn_mem)(void *, void *);
typedef int (*fn_procs)(void *, unsigned *, void *);
typedef int (*fn_util)(void *, void *, unsigned *, unsigned long long);
typedef int (*fn_ptr)(void *, void *);

static void *lib;

static void *sym(const char *name)
{
    void *p = dlsym(lib, name);
    if (!p) {
        fprintf(stderr, "nvml_probe: %s not found\n", name);
        exit(1);
    }
    return p;
}

struct proc {
    unsigned pid;
    unsigned long long used;
    unsigned gi, ci;
};

/* KEY n=N list=PID:BYTES,... */
static void print_list(const char *key, unsigned n, const unsigned *pid, const unsigned long long *used,
                       size_t stride)
{
    printf("%s n=%u list=", key, n);
    for (unsigned i = 0; i < n; i++)
        printf("%s%u:%llu", i ? "," : "", *(const unsigned *)((const char *)pid + i * stride),
               *(const unsigned long long *)((const char *)used + i * stride));
    printf("\n");
}

/* The two-call protocol: ask how many, then fill that many. */
static int list(const char *key, fn_procs f, void *dev)
{
    unsigned n = 0;
    int r = f(dev, &n, NULL);
    if (r != 0 && r != 7) {
        printf("%s rc=%d\n", key, r);
        return 1;
    }
    struct proc p[64];
    n = n > 64 ? 64 : n;
    if (r == 7 && (r = f(dev, &n, p)) != 0) {
        printf("%s rc=%d\n", key, r);
        return 1;
    }
    print_list(key, n, &p[0].pid, &p[0].used, sizeof p[0]);
    return 0;
}

static int list_v1(void *dev)
{
    struct {
        unsigned pid;
        unsigned long long used;
    } p[64];
    unsigned n = 64;
    int r = ((fn_procs)sym("nvmlDeviceGetComputeRunningProcesses"))(dev, &n, p);
    if (r) {
        printf("procs1 rc=%d\n", r);
        return 1;
    }
    print_list("procs1", n, &p[0].pid, &p[0].used, sizeof p[0]);
    return 0;
}

static int util(void *dev)
{
    struct {
        unsigned pid;
        unsigned long long ts;
        unsigned sm, mem, enc, dec;
    } s[64];
    unsigned n = 64;
    int r = ((fn_util)sym("nvmlDeviceGetProcessUtilization"))(dev, s, &n, 0);
    if (r) {
        printf("util rc=%d\n", r);
        return 1;
    }
    printf("util n=%u pids=", n);
    for (unsigned i = 0; i < n; i++)
        printf("%s%u", i ? "," : "", s[i].pid);
    printf("\n");
    return 0;
}

static int cuda(unsigned mb)
{
    CUdevice d;
    CUcontext c;
    CUdeviceptr p;
    size_t fr, tot;
    if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) ||
        cuCtxSetCurrent(c) || cuMemAlloc(&p, (size_t)mb << 20) || cuMemGetInfo(&fr, &tot)) {
        fprintf(stderr, "nvml_probe: CUDA setup failed\n");
        return 1;
    }
    printf("cumem total=%zu free=%zu\n", tot, fr);
    return 0;
}

/* nvidia-smi's process lists: nvmlInternalGetExportTable, then entries
 * 212 (compute), 213 (graphics), 214 (MPS) of the table, records of 4128
 * bytes (pid at 0, memory at 8), 500 at most, in one call each. */
#define XT_REC 4128
static int xtab(void *dev)
{
    static const unsigned char id[16] = {0xc4, 0xfe, 0x3e, 0x6c, 0xc9, 0x8f, 0x6c, 0x4e,
                                         0xa3, 0x27, 0xee, 0x69, 0x6e, 0x12, 0xf7, 0xc4};
    typedef int (*fn_xtab)(const void **, const void *);
    typedef int (*fn_list)(void *, unsigned *, void *, unsigned long);
    const void *t = NULL;
    int r = ((fn_xtab)sym("nvmlInternalGetExportTable"))(&t, id);
    if (r || !t) {
        printf("xtab rc=%d\n", r);
        return 1;
    }
    unsigned char *recs = calloc(500, XT_REC);
    if (!recs)
        return 1;
    unsigned n[3];
    for (int k = 0; k < 3; k++) {
        fn_list f;
        memcpy(&f, (const char *)t + 8 * (1 + 212 + k), sizeof f);
        n[k] = 500;
        if ((r = f(dev, &n[k], recs, 2)) != 0) {
            printf("xtab rc=%d entry=%d\n", r, 212 + k);
            free(recs);
            return 1;
        }
        if (k == 0)
            print_list("xtab", n[0], (const unsigned *)recs, (const unsigned long long *)(recs + 8),
                       XT_REC);
    }
    printf("xtab-other graphics=%u mps=%u\n", n[1], n[2]);
    free(recs);
    return 0;
}

int main(int argc, char **argv)
{
    unsigned gpu = 0, mb = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--gpu"))
            gpu = (unsigned)atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--cuda"))
            mb = (unsigned)atoi(argv[i + 1]);
    }
    if (mb && cuda(mb))
        return 1;
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "nvml_probe: %s\n", dlerror());
        return 1;
    }
    void *dev = NULL;
    if (((fn0)sym("nvmlInit_v2"))() || ((fn_handle)sym("nvmlDeviceGetHandleByIndex_v2"))(gpu, &dev)) {
        fprintf(stderr, "nvml_probe: no NVML device %u\n", gpu);
        return 1;
    }
    int bad = 0;
    unsigned long long m[3];
    if (((fn_mem)sym("nvmlDeviceGetMemoryInfo"))(dev, m) == 0)
        printf("mem total=%llu used=%llu free=%llu\n", m[0], m[2], m[1]);
    else
        bad = 1;
    struct {
        unsigned version;
        unsigned long long total, reserved, free, used;
    } m2 = {.version = (unsigned)(sizeof m2 | 2u << 24)};
    if (((fn_mem)sym("nvmlDeviceGetMemoryInfo_v2"))(dev, &m2) == 0)
        printf("mem2 total=%llu reserved=%llu used=%llu free=%llu\n", m2.total, m2.reserved,
               m2.used, m2.free);
    else
        bad = 1;
    bad |= list_v1(dev);
    bad |= list("procs3", (fn_procs)sym("nvmlDeviceGetComputeRunningProcesses_v3"), dev);
    bad |= list("graphics3", (fn_procs)sym("nvmlDeviceGetGraphicsRunningProcesses_v3"), dev);
    bad |= util(dev);
    unsigned pids[64], np = 64;
    int r = ((fn_procs)sym("nvmlDeviceGetAccountingPids"))(dev, &np, pids);
    if (r) {
        printf("acct rc=%d\n", r);
        bad = 1;
    } else {
        printf("acct n=%u pids=", np);
        for (unsigned i = 0; i < np; i++)
            printf("%s%u", i ? "," : "", pids[i]);
        printf("\n");
    }
    char buf[64] = {0};
    printf("detail rc=%d\n", ((fn_ptr)sym("nvmlDeviceGetRunningProcessDetailList"))(dev, buf));
    bad |= xtab(dev);
    return bad;
}
