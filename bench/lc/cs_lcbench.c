/* cs_lcbench: a latency-critical (LC) or best-effort (BE) GPU job, for
 * measuring how LC latency suffers beside a busy BE process (bench/lc/run.sh).
 *
 *   cs_lcbench --role lc [--seconds S] [--kernel-us K] [--period-us P] [--start-at T]
 *   cs_lcbench --role be [--seconds S] [--kernel-us K] [--be-mb M] [--start-at T]
 *
 * lc: every P µs (default 5000) launches one ~K µs kernel (default 200:
 *     fc_sleep, one thread spinning on %globaltimer) on its stream and waits
 *     for it with cuStreamSynchronize; the latency of a request is launch to
 *     completion, host-timed. Prints one line:
 *       cs_lcbench role=lc n=N p50_us=.. p99_us=.. max_us=.. mean_us=.. kernel_us=K period_us=P
 * be: keeps the GPU busy with back-to-back fc_add32 kernels over an M MiB
 *     buffer (default 1024), sized so that one takes about K µs (default
 *     1000, calibrated at start), at most --be-depth (default 4, up to 1024)
 *     in flight (PyTorch queues ~1000: a deep queue is what makes a revoked
 *     BE job slow to drain). Work, not time: a
 *     kernel that loses the GPU takes longer, so lost GPU time shows as lost
 *     throughput (a %globaltimer spin would not show it). Prints:
 *       cs_lcbench role=be kernels=N seconds=.. kernels_per_s=.. melem_per_s=.. kernel_us=.. n=..
 *     melem_per_s (elements processed per second, millions) compares runs
 *     whatever each one's calibration chose.
 * be --be-kernel sleep: fc_sleep kernels of K µs instead (melem_per_s is
 *     then 0: compare kernels_per_s). On the simulated GPU an fc_add32
 *     computes on a host CPU, so a BE job of them takes a whole core of a
 *     small CI machine and its throughput measures the host; a sleep
 *     occupies the simulated engine for K µs and nothing else, and the
 *     simulated engine never preempts inside a kernel, so lost GPU time
 *     still shows as lost kernels. On a real GPU keep add (a spin on
 *     %globaltimer would hide a timeslice taken away mid-kernel).
 * lc --hint-us H: H µs before each launch, call cushare_hint(device,
 *     CUSHARE_HINT_WORK_SOON, H) when libcushare.so is preloaded (docs/priority.md:
 *     the switch away from a gated BE job starts before the launch).
 * --start-at T (seconds since the epoch, fractional): start the measured
 * phase at that wall-clock time, after initialization, so that two
 * processes measure the same window. Without it, start at once.
 *
 * Kernels are the fc_* catalogue (tests/kernels), so this runs unchanged on
 * the simulated driver (LD_LIBRARY_PATH=$BUILD/fakecuda) for CI smoke runs.
 */
#include "../../tests/progs/fckern.h"

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void check(CUresult r, const char *what)
{
    if (r != CUDA_SUCCESS) {
        const char *n = "?";
        cuGetErrorName(r, &n);
        fprintf(stderr, "cs_lcbench: %s: %s\n", what, n);
        exit(1);
    }
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until_mono(uint64_t t)
{
    struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* Waits for wall-clock time `at` (epoch seconds); says so if it has passed. */
static void wait_start(double at)
{
    if (at <= 0)
        return;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    double late = (double)now.tv_sec + (double)now.tv_nsec / 1e9 - at;
    if (late > 0) {
        fprintf(stderr, "cs_lcbench: --start-at passed %.0f ms ago; starting now\n", late * 1e3);
        return;
    }
    struct timespec ts = {(time_t)at, (long)((at - floor(at)) * 1e9)};
    while (clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v[0..n). */
static double pct(const uint64_t *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    size_t k = (size_t)ceil(p / 100.0 * (double)n);
    if (k < 1)
        k = 1;
    return (double)v[k - 1] / 1e3;
}

/* cushare_hint from libcushare.so when it is preloaded, else NULL (native
 * runs: the hint is simply not given). */
typedef int (*hint_fn)(int, int, unsigned);
static hint_fn find_hint(void)
{
    return (hint_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "cushare_hint");
}

static void run_lc(double seconds, unsigned kernel_us, unsigned period_us, double start_at,
                   unsigned hint_us, int device)
{
    hint_fn hint = hint_us ? find_hint() : NULL;
    CUstream s;
    check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "stream");
    uint64_t ns = (uint64_t)kernel_us * 1000;
    /* Warm-up: module JIT, first-launch costs. */
    for (int i = 0; i < 20; i++) {
        check(fck_sleep(s, ns), "launch");
        check(cuStreamSynchronize(s), "sync");
    }
    size_t cap = (size_t)(seconds * 1e6 / period_us) + 16, n = 0;
    uint64_t *lat = calloc(cap, sizeof *lat);
    if (!lat)
        exit(1);
    wait_start(start_at);
    uint64_t t_start = now_ns(), end = t_start + (uint64_t)(seconds * 1e9);
    for (uint64_t i = 0;; i++) {
        uint64_t due = t_start + i * (uint64_t)period_us * 1000;
        if (due >= end || n == cap)
            break;
        if (hint && due > hint_us * 1000ull && now_ns() < due - hint_us * 1000ull) {
            sleep_until_mono(due - hint_us * 1000ull);
            hint(device, 1 /* CUSHARE_HINT_WORK_SOON */, hint_us);
        }
        uint64_t t = now_ns();
        if (t < due)
            sleep_until_mono(due);
        uint64_t t0 = now_ns();
        check(fck_sleep(s, ns), "launch");
        check(cuStreamSynchronize(s), "sync");
        lat[n++] = now_ns() - t0;
    }
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += (double)lat[i];
    qsort(lat, n, sizeof *lat, cmp_u64);
    printf("cs_lcbench role=lc n=%zu p50_us=%.1f p99_us=%.1f max_us=%.1f mean_us=%.1f "
           "kernel_us=%u period_us=%u\n",
           n, pct(lat, n, 50), pct(lat, n, 99), n ? (double)lat[n - 1] / 1e3 : 0.0,
           n ? sum / (double)n / 1e3 : 0.0, kernel_us, period_us);
    free(lat);
    cuStreamDestroy(s);
}

#define BE_DEPTH_MAX 1024

/* One pass of each kind, K µs: the kernel a BE job repeats. */
struct be_kernel {
    bool sleep;
    uint64_t n;  /* add: elements per kernel */
    uint64_t ns; /* sleep: duration */
};

static CUresult be_launch(CUstream s, CUdeviceptr buf, const struct be_kernel *k)
{
    return k->sleep ? fck_sleep(s, k->ns) : fck_add32(s, buf, k->n, 1);
}

/* Calibrates an add kernel: elements for about kernel_us, from the best of
 * five passes over the whole buffer. */
static uint64_t calibrate_add(CUstream s, CUdeviceptr buf, uint64_t elems, unsigned kernel_us,
                              uint64_t *best_out)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 5; i++) {
        uint64_t t0 = now_ns();
        check(fck_add32(s, buf, elems, 1), "add");
        check(cuStreamSynchronize(s), "sync");
        uint64_t dt = now_ns() - t0;
        if (dt < best)
            best = dt;
    }
    *best_out = best;
    uint64_t n = (uint64_t)((double)elems * (double)kernel_us * 1e3 / (double)best);
    if (n > elems)
        n = elems;
    if (n < 4096)
        n = 4096 < elems ? 4096 : elems;
    return n;
}

static void run_be(double seconds, unsigned kernel_us, unsigned be_mb, double start_at,
                   unsigned depth, bool sleep)
{
    CUstream s;
    check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "stream");
    uint64_t elems = (uint64_t)be_mb * (1u << 20) / 4;
    CUdeviceptr buf;
    check(cuMemAlloc(&buf, elems * 4), "alloc");
    check(fck_fill32(s, buf, elems, 0), "fill");
    check(cuStreamSynchronize(s), "sync");
    struct be_kernel k = {.sleep = sleep, .ns = (uint64_t)kernel_us * 1000};
    uint64_t best = 0;
    if (!sleep)
        k.n = calibrate_add(s, buf, elems, kernel_us, &best);
    CUevent ev[BE_DEPTH_MAX];
    for (unsigned i = 0; i < depth; i++)
        check(cuEventCreate(&ev[i], CU_EVENT_DISABLE_TIMING), "event");

    wait_start(start_at);
    uint64_t t_start = now_ns(), end = t_start + (uint64_t)(seconds * 1e9);
    uint64_t launched = 0, done = 0, t_last = t_start;
    while (1) {
        if (launched - done == depth || (now_ns() >= end && launched > done)) {
            check(cuEventSynchronize(ev[done % depth]), "event sync");
            done++;
            t_last = now_ns();
            if (t_last >= end && launched == done)
                break;
            continue;
        }
        if (now_ns() >= end)
            break;
        check(be_launch(s, buf, &k), "launch");
        check(cuEventRecord(ev[launched % depth], s), "record");
        launched++;
    }
    double secs = (double)(t_last - t_start) / 1e9;
    printf("cs_lcbench role=be kernels=%llu seconds=%.3f kernels_per_s=%.1f melem_per_s=%.1f "
           "kernel_us=%.0f n=%llu kernel=%s\n",
           (unsigned long long)done, secs, secs > 0 ? (double)done / secs : 0.0,
           secs > 0 ? (double)done * (double)k.n / secs / 1e6 : 0.0,
           sleep ? (double)kernel_us : (double)best / 1e3 * (double)k.n / (double)elems,
           (unsigned long long)k.n, sleep ? "sleep" : "add");
    for (unsigned i = 0; i < depth; i++)
        cuEventDestroy(ev[i]);
    cuMemFree(buf);
    cuStreamDestroy(s);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: cs_lcbench --role lc|be [--seconds S] [--kernel-us K] [--period-us P]\n"
            "                  [--be-mb M] [--be-depth N] [--hint-us H] [--start-at EPOCH_SECONDS]\n"
            "                  [--device D] [--be-kernel add|sleep]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"role", required_argument, NULL, 'r'},     {"seconds", required_argument, NULL, 's'},
        {"kernel-us", required_argument, NULL, 'k'}, {"period-us", required_argument, NULL, 'p'},
        {"be-mb", required_argument, NULL, 'm'},     {"start-at", required_argument, NULL, 't'},
        {"device", required_argument, NULL, 'd'},    {"be-depth", required_argument, NULL, 'q'},
        {"hint-us", required_argument, NULL, 'h'},   {"be-kernel", required_argument, NULL, 'b'},
        {NULL, 0, NULL, 0},
    };
    const char *role = NULL, *be_kernel = "add";
    double seconds = 5, start_at = 0;
    long kernel_us = -1, period_us = 5000, be_mb = 1024, device = 0, depth = 4, hint_us = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'r': role = optarg; break;
        case 's': seconds = atof(optarg); break;
        case 'k': kernel_us = atol(optarg); break;
        case 'p': period_us = atol(optarg); break;
        case 'm': be_mb = atol(optarg); break;
        case 't': start_at = atof(optarg); break;
        case 'd': device = atol(optarg); break;
        case 'q': depth = atol(optarg); break;
        case 'h': hint_us = atol(optarg); break;
        case 'b': be_kernel = optarg; break;
        default: usage();
        }
    }
    if (!role || (strcmp(role, "lc") && strcmp(role, "be")) || seconds <= 0 || period_us <= 0 ||
        be_mb <= 0 || device < 0 || depth < 1 || depth > BE_DEPTH_MAX || hint_us < 0 ||
        hint_us >= period_us || (strcmp(be_kernel, "add") && strcmp(be_kernel, "sleep")))
        usage();
    bool lc = !strcmp(role, "lc");
    if (kernel_us < 0)
        kernel_us = lc ? 200 : 1000;
    if (kernel_us == 0)
        usage();

    check(cuInit(0), "cuInit");
    CUdevice dev;
    check(cuDeviceGet(&dev, (int)device), "device");
    CUcontext ctx;
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "context");
    check(cuCtxSetCurrent(ctx), "set context");
    struct fck k;
    check(fck_load(&k), "load kernels");
    if (lc)
        run_lc(seconds, (unsigned)kernel_us, (unsigned)period_us, start_at, (unsigned)hint_us,
               (int)device);
    else
        run_be(seconds, (unsigned)kernel_us, (unsigned)be_mb, start_at, (unsigned)depth,
               !strcmp(be_kernel, "sleep"));
    fck_unload(&k);
    cuDevicePrimaryCtxRelease(dev);
    return 0;
}
