/* cs_pinbench: which pinned host memory should back swapped-out memory?
 *
 *   cs_pinbench [--gib N] [--reps R] [--duplex-gib D]
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
 *
 * With --duplex-gib D it then measures both directions at once, as when one
 * job's swap-out overlaps the next job's restore: D GiB device-to-host on
 * one stream while another D GiB go host-to-device on a second, both into
 * vmmhost backing (what cushare uses); each direction's rate from its own
 * events, and the aggregate over the wall time, median over R.
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

/* One direction's copy on its own stream, bracketed by events. */
struct leg {
    CUstream s;
    CUevent a, b;
    CUdeviceptr dst, src;
};

static void duplex(size_t size, int reps)
{
    struct leg out = {0}, in = {0};
    struct pinned ho = {.size = size}, hi = {.size = size};
    CUdeviceptr dout, din;
    bench_check(cuMemAlloc(&dout, size), "cuMemAlloc");
    bench_check(cuMemAlloc(&din, size), "cuMemAlloc");
    get_vmmhost(&ho);
    get_vmmhost(&hi);
    out.dst = ho.dptr, out.src = dout;
    in.dst = din, in.src = hi.dptr;
    struct leg *legs[2] = {&out, &in};
    for (int i = 0; i < 2; i++) {
        bench_check(cuStreamCreate(&legs[i]->s, CU_STREAM_NON_BLOCKING), "stream");
        bench_check(cuEventCreate(&legs[i]->a, CU_EVENT_DEFAULT), "event");
        bench_check(cuEventCreate(&legs[i]->b, CU_EVENT_DEFAULT), "event");
    }
    double d2h[20], h2d[20], both[20];
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now_s();
        for (int i = 0; i < 2; i++) {
            bench_check(cuEventRecord(legs[i]->a, legs[i]->s), "event");
            bench_check(cuMemcpyAsync(legs[i]->dst, legs[i]->src, size, legs[i]->s), "copy");
            bench_check(cuEventRecord(legs[i]->b, legs[i]->s), "event");
        }
        for (int i = 0; i < 2; i++)
            bench_check(cuStreamSynchronize(legs[i]->s), "sync");
        both[r] = 2.0 * (double)size / (bench_now_s() - t0) / 1e9;
        float ms;
        bench_check(cuEventElapsedTime(&ms, out.a, out.b), "elapsed");
        d2h[r] = (double)size / (ms / 1e3) / 1e9;
        bench_check(cuEventElapsedTime(&ms, in.a, in.b), "elapsed");
        h2d[r] = (double)size / (ms / 1e3) / 1e9;
    }
    printf("\n| both at once | D2H GB/s | H2D GB/s | aggregate GB/s |\n|---|---:|---:|---:|\n");
    printf("| %.1f GiB each way | %.1f | %.1f | %.1f |\n", (double)size / (1ull << 30),
           median(d2h, reps), median(h2d, reps), median(both, reps));
    put_vmmhost(&ho);
    put_vmmhost(&hi);
    cuMemFree(dout);
    cuMemFree(din);
}

int main(int argc, char **argv)
{
    double gib = 4, duplex_gib = 0;
    int reps = 3;
    static const struct option lo[] = {{"gib", required_argument, 0, 'g'},
                                       {"reps", required_argument, 0, 'r'},
                                       {"duplex-gib", required_argument, 0, 'd'},
                                       {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "g:r:d:", lo, NULL)) != -1) {
        if (c == 'g')
            gib = atof(optarg);
        else if (c == 'r')
            reps = atoi(optarg);
        else if (c == 'd')
            duplex_gib = atof(optarg);
        else
            return 2;
    }
    if (gib <= 0 || reps < 1 || reps > 20 || duplex_gib < 0)
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
    if (duplex_gib > 0) {
        bench_check(cuMemFree(dev), "cuMemFree");
        size_t dsize = (size_t)(duplex_gib * (double)(1ull << 30));
        duplex((dsize + (2u << 20) - 1) / (2u << 20) * (2u << 20), reps);
    }
    return 0;
}
