/* cuprobe.h: what the GPU probes and microbenchmarks that run on the real
 * driver without cushare share (addr_probe, cs_remapbench, cs_poolbench):
 * stop on a driver error naming the call, a monotonic clock, a median.
 * Header-only: the probes are built by hand on a GPU machine as well. */
#ifndef CS_BENCH_CUPROBE_H
#define CS_BENCH_CUPROBE_H

/* clock_gettime; included first by its users (before any system header) */
#if !defined(_POSIX_C_SOURCE) && !defined(_GNU_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x)                                                                    \
    do {                                                                         \
        CUresult r_ = (x);                                                       \
        if (r_ != CUDA_SUCCESS) {                                                \
            fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, (int)r_); \
            exit(2);                                                             \
        }                                                                        \
    } while (0)

static inline double probe_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static inline int probe_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* cuInit, GPU 0 and its primary context made current on this thread: how
 * every probe starts (stops on a driver error). The device in *dev. */
static inline CUcontext probe_primary(CUdevice *dev)
{
    CUcontext ctx;
    CK(cuInit(0));
    CK(cuDeviceGet(dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, *dev));
    CK(cuCtxSetCurrent(ctx));
    return ctx;
}

/* The median of v[0..n) (sorts v). */
static inline double probe_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, probe_cmp);
    return v[n / 2];
}

#endif
