/* cs_pinbench: which pinned host memory should back swapped-out memory?
 *
 *   cs_pinbench [--gib N] [--reps R]
 *
 * For each way of getting pinned host memory the driver can DMA to —
 *   hostalloc  cuMemHostAlloc(PORTABLE)
 *   register   mmap(MAP_POPULATE) + cuMemHostRegister
 *   vmmhost    cuMemCreate(location HOST) + cuMemAddressReserve/Map/SetAccess
 *   pageable   plain malloc'd memory, never pinned: the driver stages each
 *              copy through its own pinned buffers, and the first copy into
 *              it also faults its pages in (what evicting to memory that is
 *              not pinned yet would cost on a critical path)
 * — it measures the time to obtain N GiB (seconds per GiB) and the
 * bandwidth of a device-to-host and a host-to-device copy of N GiB into it
 * (GB/s, 1e9 bytes), median over R repetitions. The swap engine keeps its
 * backing across swaps, so the first number is paid once per job and the
 * second on every switch. Runs on the real driver (no hook needed).
 */
#include <cuda.h>

#include "bench_util.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

struct pinned {
    void *host;       /* CPU pointer, or NULL for vmmhost */
    CUdeviceptr dptr; /* address the copies use */
    size_t size;
    CUmemGenericAllocationHandle h;
};

static void get_hostalloc(struct pinned *p)
{
    bench_check(cuMemHostAlloc(&p->host, p->size, CU_MEMHOSTALLOC_PORTABLE), "cuMemHostAlloc");
    p->dptr = (CUdeviceptr)p->host;
}

static void put_hostalloc(struct pinned *p)
{
    cuMemFreeHost(p->host);
}

static void get_register(struct pinned *p)
{
    p->host = mmap(NULL, p->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                   -1, 0);
    if (p->host == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    bench_check(cuMemHostRegister(p->host, p->size, CU_MEMHOSTREGISTER_PORTABLE),
                "cuMemHostRegister");
    p->dptr = (CUdeviceptr)p->host;
}

static void put_register(struct pinned *p)
{
    cuMemHostUnregister(p->host);
    munmap(p->host, p->size);
}

static void get_vmmhost(struct pinned *p)
{
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
    prop.location.id = 0;
    bench_check(cuMemCreate(&p->h, p->size, &prop, 0), "cuMemCreate(HOST)");
    bench_check(cuMemAddressReserve(&p->dptr, p->size, 0, 0, 0), "cuMemAddressReserve");
    bench_check(cuMemMap(p->dptr, p->size, 0, p->h, 0), "cuMemMap");
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = 0;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    bench_check(cuMemSetAccess(p->dptr, p->size, &acc, 1), "cuMemSetAccess");
    p->host = NULL;
}

static void put_vmmhost(struct pinned *p)
{
    cuMemUnmap(p->dptr, p->size);
    cuMemAddressFree(p->dptr, p->size);
    cuMemRelease(p->h);
}

static void get_pageable(struct pinned *p)
{
    p->host = malloc(p->size);
    if (!p->host) {
        perror("malloc");
        exit(1);
    }
    p->dptr = 0; /* copied with the explicit DtoH/HtoD calls */
}

static void put_pageable(struct pinned *p)
{
    free(p->host);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return v[n / 2];
}

int main(int argc, char **argv)
{
    double gib = 4;
    int reps = 3;
    static const struct option lo[] = {
        {"gib", required_argument, 0, 'g'}, {"reps", required_argument, 0, 'r'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "g:r:", lo, NULL)) != -1) {
        if (c == 'g')
            gib = atof(optarg);
        else if (c == 'r')
            reps = atoi(optarg);
        else
            return 2;
    }
    if (gib <= 0 || reps < 1 || reps > 20)
        return 2;
    size_t size = (size_t)(gib * (double)(1ull << 30));
    size = (size + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    CUcontext ctx;
    CUdeviceptr dev;
    CUstream s;
    bench_check(cuInit(0), "cuInit");
    bench_check(cuDevicePrimaryCtxRetain(&ctx, 0), "retain");
    bench_check(cuCtxSetCurrent(ctx), "set current");
    bench_check(cuMemAlloc(&dev, size), "cuMemAlloc");
    bench_check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "stream");
    static const struct {
        const char *name;
        void (*get)(struct pinned *);
        void (*put)(struct pinned *);
    } kinds[] = {
        {"hostalloc", get_hostalloc, put_hostalloc},
        {"register", get_register, put_register},
        {"vmmhost", get_vmmhost, put_vmmhost},
        {"pageable", get_pageable, put_pageable},
    };
    printf("| kind | obtain s/GiB | D2H GB/s | H2D GB/s |\n|---|---:|---:|---:|\n");
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        double obtain[20], d2h[20], h2d[20];
        for (int r = 0; r < reps; r++) {
            struct pinned p = {.size = size};
            double t0 = bench_now_s();
            kinds[k].get(&p);
            obtain[r] = (bench_now_s() - t0) / ((double)size / (1ull << 30));
            t0 = bench_now_s();
            if (p.dptr)
                bench_check(cuMemcpyAsync(p.dptr, dev, size, s), "D2H");
            else
                bench_check(cuMemcpyDtoHAsync(p.host, dev, size, s), "D2H");
            bench_check(cuStreamSynchronize(s), "sync");
            d2h[r] = (double)size / (bench_now_s() - t0) / 1e9;
            t0 = bench_now_s();
            if (p.dptr)
                bench_check(cuMemcpyAsync(dev, p.dptr, size, s), "H2D");
            else
                bench_check(cuMemcpyHtoDAsync(dev, p.host, size, s), "H2D");
            bench_check(cuStreamSynchronize(s), "sync");
            h2d[r] = (double)size / (bench_now_s() - t0) / 1e9;
            kinds[k].put(&p);
        }
        printf("| %s | %.3f | %.1f | %.1f |\n", kinds[k].name, median(obtain, reps),
               median(d2h, reps), median(h2d, reps));
        fflush(stdout);
    }
    printf("\n(%.1f GiB, median of %d)\n", (double)size / (1ull << 30), reps);
    return 0;
}
