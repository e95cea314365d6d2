/* cs_overhead: cost of the driver calls the interposer touches, per call.
 *
 *   cs_overhead [--ops N] [--reps R] MODE...
 *
 * MODE is one of
 *   launch      cuLaunchKernel of an empty fc_sleep(0), N back to back, then one sync
 *   launch-err  cuLaunchKernel with a NULL function: the driver rejects it at
 *               once, so the time is the call path itself (the hook's gate
 *               included when run under libcushare.so)
 *   memcpy      4-byte cuMemcpyHtoDAsync from pinned memory, N, then one sync
 *   memcpy-sync 4-byte cuMemcpyHtoD
 *   alloc       cuMemAlloc + cuMemFree of 4 KiB
 *   alloc-big   cuMemAlloc + cuMemFree of 64 MiB
 * and prints one line per mode: `MODE ns_per_op_median ns_min ns_max`, the
 * statistics over R repetitions of N operations. bench/overhead/run.sh runs
 * it natively and under the hook, interleaved, on the same GPU.
 */
#include "../../tests/progs/fckern.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        const char *n = "?";
        cuGetErrorName(r, &n);
        fprintf(stderr, "cs_overhead: %s: %s\n", what, n);
        exit(1);
    }
}

static struct fck k;
static CUdeviceptr dbuf;
static void *hbuf;

static void run_launch(unsigned n)
{
    uint64_t ns = 0;
    void *params[] = {&ns};
    for (unsigned i = 0; i < n; i++)
        check(cuLaunchKernel(k.sleep, 1, 1, 1, 1, 1, 1, 0, 0, params, NULL), "launch");
    check(cuCtxSynchronize(), "sync");
}

static void run_launch_err(unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        if (cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, 0, NULL, NULL) == CUDA_SUCCESS)
            check(CUDA_ERROR_UNKNOWN, "a NULL launch succeeded");
}

static void run_memcpy(unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        check(cuMemcpyHtoDAsync(dbuf, hbuf, 4, 0), "memcpy");
    check(cuCtxSynchronize(), "sync");
}

static void run_memcpy_sync(unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        check(cuMemcpyHtoD(dbuf, hbuf, 4), "memcpy");
}

static void run_alloc(unsigned n, size_t bytes)
{
    for (unsigned i = 0; i < n; i++) {
        CUdeviceptr p;
        check(cuMemAlloc(&p, bytes), "alloc");
        check(cuMemFree(p), "free");
    }
}

static void run_alloc_small(unsigned n)
{
    run_alloc(n, 4096);
}

static void run_alloc_big(unsigned n)
{
    run_alloc(n, 64u << 20);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    unsigned ops = 20000, reps = 7;
    static const struct option lo[] = {
        {"ops", required_argument, 0, 'n'}, {"reps", required_argument, 0, 'r'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "n:r:", lo, NULL)) != -1) {
        if (c == 'n')
            ops = (unsigned)strtoul(optarg, NULL, 10);
        else if (c == 'r')
            reps = (unsigned)strtoul(optarg, NULL, 10);
        else
            return 2;
    }
    if (ops == 0 || reps == 0 || reps > 100 || optind == argc) {
        fprintf(stderr, "usage: cs_overhead [--ops N] [--reps R] MODE...\n");
        return 2;
    }
    CUcontext ctx;
    check(cuInit(0), "cuInit");
    check(cuDevicePrimaryCtxRetain(&ctx, 0), "retain");
    check(cuCtxSetCurrent(ctx), "set current");
    check(fck_load(&k), "load kernels");
    check(cuMemAlloc(&dbuf, 4096), "alloc");
    check(cuMemAllocHost(&hbuf, 4096), "alloc host");

    static const struct {
        const char *name;
        void (*fn)(unsigned);
        unsigned div; /* fewer ops for slow modes */
    } modes[] = {
        {"launch", run_launch, 1},       {"launch-err", run_launch_err, 1},
        {"memcpy", run_memcpy, 1},       {"memcpy-sync", run_memcpy_sync, 4},
        {"alloc", run_alloc_small, 4},   {"alloc-big", run_alloc_big, 100},
    };
    for (int a = optind; a < argc; a++) {
        size_t m = 0;
        while (m < sizeof modes / sizeof modes[0] && strcmp(modes[m].name, argv[a]))
            m++;
        if (m == sizeof modes / sizeof modes[0]) {
            fprintf(stderr, "cs_overhead: unknown mode %s\n", argv[a]);
            return 2;
        }
        unsigned n = ops / modes[m].div ? ops / modes[m].div : 1;
        modes[m].fn(n); /* warm-up */
        uint64_t per[100];
        for (unsigned r = 0; r < reps; r++) {
            uint64_t t0 = now_ns();
            modes[m].fn(n);
            per[r] = (now_ns() - t0) / n;
        }
        qsort(per, reps, sizeof per[0], cmp_u64);
        printf("%s %llu %llu %llu\n", modes[m].name, (unsigned long long)per[reps / 2],
               (unsigned long long)per[0], (unsigned long long)per[reps - 1]);
        fflush(stdout);
    }
    return 0;
}
