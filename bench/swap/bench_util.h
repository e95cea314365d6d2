/* bench_util.h: what the swap benchmarks (cs_pinbench, cs_pincontend) share:
 * a monotonic clock in seconds, a driver call that must succeed, and a
 * comparison for sorting samples. Header-only: each benchmark is one
 * program linked against nothing but the driver. */
#ifndef CS_BENCH_UTIL_H
#define CS_BENCH_UTIL_H

#include <cuda.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static inline double bench_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Exits, naming the program, its pid (the benchmarks fork) and the call. */
static inline void bench_check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        const char *n = "?";
        cuGetErrorName(r, &n);
        fprintf(stderr, "%s[%d]: %s: %s\n", program_invocation_short_name, (int)getpid(), what,
                n);
        exit(1);
    }
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif
