/* cs_pincontend: what pinning swap backing costs while other work goes on.
 *
 *   cs_pincontend [--gib N] [--procs P] [--piece MiB]
 *
 * P processes each pin N GiB of host memory at once, as cushare's swap
 * backing does (cuMemCreate with a HOST location, mapped at one reserved
 * range), in pieces of --piece MiB (0: one allocation for the whole N GiB).
 * While they pin, two probes time what a job would need meanwhile: placing
 * 1 GiB of device memory (cuMemCreate + map + access + unmap + release),
 *   - "same": a thread inside the first pinning process (the job whose own
 *     pin-ahead thread runs while it allocates), and
 *   - "other": a process that pins nothing (another job on the GPU).
 * Prints one markdown row: aggregate pinning rate, the slowest process's
 * s/GiB, and each probe's median and worst latency. Runs on the real
 * driver; the GPU run (bench/gpu/run.sh swap) calls it with several sizes.
 */
#include <cuda.h>

#include "bench_util.h"

#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 16
#define MAX_SAMPLES 4096

static void init_ctx(void)
{
    CUcontext ctx;
    bench_check(cuInit(0), "cuInit");
    bench_check(cuDevicePrimaryCtxRetain(&ctx, 0), "retain");
    bench_check(cuCtxSetCurrent(ctx), "set current");
}

static void access_rw(CUdeviceptr va, size_t size)
{
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = 0;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    bench_check(cuMemSetAccess(va, size, &acc, 1), "cuMemSetAccess");
}

/* Pins `size` bytes in pieces of `piece` (the handle is released once
 * mapped: the mapping keeps it alive), then frees it. Returns seconds. */
static double pin_and_free(size_t size, size_t piece)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_HOST;
    CUdeviceptr va;
    double t0 = bench_now_s();
    bench_check(cuMemAddressReserve(&va, size, 2u << 20, 0, 0), "reserve");
    for (size_t off = 0; off < size; off += piece) {
        size_t n = size - off < piece ? size - off : piece;
        CUmemGenericAllocationHandle h;
        bench_check(cuMemCreate(&h, n, &p, 0), "cuMemCreate(HOST)");
        bench_check(cuMemMap(va + off, n, 0, h, 0), "map");
        bench_check(cuMemRelease(h), "release");
        access_rw(va + off, n);
    }
    double t = bench_now_s() - t0;
    for (size_t off = 0; off < size; off += piece)
        cuMemUnmap(va + off, size - off < piece ? size - off : piece);
    cuMemAddressFree(va, size);
    return t;
}

/* One device placement of 1 GiB, as the hook does for a segment. */
static double place_device_gib(void)
{
    size_t size = 1ull << 30;
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUdeviceptr va;
    CUmemGenericAllocationHandle h;
    double t0 = bench_now_s();
    bench_check(cuMemAddressReserve(&va, size, 2u << 20, 0, 0), "reserve");
    bench_check(cuMemCreate(&h, size, &p, 0), "cuMemCreate(DEVICE)");
    bench_check(cuMemMap(va, size, 0, h, 0), "map");
    access_rw(va, size);
    bench_check(cuMemUnmap(va, size), "unmap");
    bench_check(cuMemRelease(h), "release");
    bench_check(cuMemAddressFree(va, size), "free");
    return bench_now_s() - t0;
}

struct probe {
    atomic_bool stop;
    int n;
    double lat[MAX_SAMPLES];
};

static void probe_loop(struct probe *pr, int stop_fd)
{
    struct timespec gap = {0, 50 * 1000000L};
    while (!atomic_load(&pr->stop) && pr->n < MAX_SAMPLES) {
        pr->lat[pr->n++] = place_device_gib();
        if (stop_fd >= 0) {
            char c;
            if (read(stop_fd, &c, 1) == 1)
                break;
        }
        nanosleep(&gap, NULL);
    }
}

static void *probe_thread(void *arg)
{
    bench_check(cuCtxSetCurrent(NULL), "unset"); /* this thread's own binding */
    CUcontext ctx;
    CUdevice dev;
    bench_check(cuDeviceGet(&dev, 0), "device");
    bench_check(cuDevicePrimaryCtxRetain(&ctx, dev), "retain");
    bench_check(cuCtxSetCurrent(ctx), "set current");
    probe_loop(arg, -1);
    return NULL;
}

/* What a child sends back: its pinning time, or a probe's samples. */
struct report {
    double pin_s;
    int n;
    double med, max;
};

static void summarize(struct probe *pr, struct report *r)
{
    r->n = pr->n;
    if (!pr->n)
        return;
    qsort(pr->lat, (size_t)pr->n, sizeof pr->lat[0], bench_cmp_double);
    r->med = pr->lat[pr->n / 2];
    r->max = pr->lat[pr->n - 1];
}

static void wait_go(int ready_fd, int go_fd)
{
    char c = 1;
    if (write(ready_fd, &c, 1) != 1 || read(go_fd, &c, 1) != 1)
        exit(1);
}

static void pinner(int idx, size_t size, size_t piece, int ready_fd, int go_fd, int out_fd)
{
    init_ctx();
    static struct probe pr;
    pthread_t t;
    bool probed = idx == 0;
    if (probed && pthread_create(&t, NULL, probe_thread, &pr) != 0)
        exit(1);
    wait_go(ready_fd, go_fd);
    struct report r = {0};
    r.pin_s = pin_and_free(size, piece);
    if (probed) {
        atomic_store(&pr.stop, true);
        pthread_join(t, NULL);
        summarize(&pr, &r);
    }
    if (write(out_fd, &r, sizeof r) != (ssize_t)sizeof r)
        exit(1);
    exit(0);
}

static void prober(int ready_fd, int go_fd, int stop_fd, int out_fd)
{
    init_ctx();
    static struct probe pr;
    wait_go(ready_fd, go_fd);
    probe_loop(&pr, stop_fd);
    struct report r = {0};
    summarize(&pr, &r);
    if (write(out_fd, &r, sizeof r) != (ssize_t)sizeof r)
        exit(1);
    exit(0);
}

int main(int argc, char **argv)
{
    double gib = 4;
    int procs = 1, piece_mb = 0;
    static const struct option lo[] = {{"gib", required_argument, 0, 'g'},
                                       {"procs", required_argument, 0, 'p'},
                                       {"piece", required_argument, 0, 'm'},
                                       {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "g:p:m:", lo, NULL)) != -1;) {
        if (c == 'g')
            gib = atof(optarg);
        else if (c == 'p')
            procs = atoi(optarg);
        else if (c == 'm')
            piece_mb = atoi(optarg);
        else
            return 2;
    }
    if (gib <= 0 || gib > 1024 || procs < 1 || procs > MAX_PROCS || piece_mb < 0)
        return 2;
    size_t gran = 2u << 20;
    size_t size = ((size_t)(gib * (double)(1ull << 30)) + gran - 1) / gran * gran;
    size_t piece = piece_mb ? ((size_t)piece_mb << 20) : size;
    piece = (piece + gran - 1) / gran * gran;

    int ready[2], go[2], stop[2], out[2];
    if (pipe(ready) || pipe(go) || pipe(stop) || pipe(out))
        return 1;
    /* The prober polls its stop pipe between samples. */
    if (fcntl(stop[0], F_SETFL, O_NONBLOCK) != 0)
        return 1;
    for (int i = 0; i <= procs; i++) {
        pid_t pid = fork();
        if (pid < 0)
            return 1;
        if (pid == 0) {
            if (i < procs)
                pinner(i, size, piece, ready[1], go[0], out[1]);
            prober(ready[1], go[0], stop[0], out[1]);
        }
    }
    char c;
    for (int i = 0; i <= procs; i++)
        if (read(ready[0], &c, 1) != 1)
            return 1;
    double t0 = bench_now_s();
    for (int i = 0; i <= procs; i++)
        if (write(go[1], &c, 1) != 1)
            return 1;
    struct report rep[MAX_PROCS + 1];
    double slowest = 0, t_end = 0;
    int got = 0, pins = 0;
    struct report same = {0}, other = {0};
    while (got <= procs && read(out[0], &rep[got], sizeof rep[0]) == (ssize_t)sizeof rep[0]) {
        struct report *r = &rep[got++];
        if (r->pin_s > 0) {
            pins++;
            slowest = r->pin_s > slowest ? r->pin_s : slowest;
            if (r->n)
                same = *r;
            if (pins == procs) {
                t_end = bench_now_s();
                if (write(stop[1], &c, 1) != 1)
                    return 1;
            }
        } else {
            other = *r;
        }
    }
    while (wait(NULL) > 0)
        ;
    double total_gib = (double)size * procs / (1ull << 30);
    printf("| %d | %.1f | %d | %.2f | %.3f | %.0f / %.0f (%d) | %.0f / %.0f (%d) |\n", procs,
           (double)size / (1ull << 30), (int)(piece >> 20), total_gib * 1.073741824 / (t_end - t0),
           slowest / ((double)size / (1ull << 30)), same.med * 1e3, same.max * 1e3, same.n,
           other.med * 1e3, other.max * 1e3, other.n);
    return got == procs + 1 ? 0 : 1;
}
