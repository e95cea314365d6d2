/* cs_swapbench: swap-out and swap-in throughput of the hook, and the stall a
 * job sees at the start of its slice with and without a prefetch.
 *
 *   cs_swapbench [--gib N] [--allocs K] [--rounds R]
 *
 * Runs itself under libcushare.so with a scripted scheduler (the tests'
 * mock_sched) on one GPU: allocates N GiB in K allocations, fills them, and
 * per round: revokes the lease asking for everything to be swapped out
 * (RELEASE reports bytes and time: out GB/s), then runs one kernel, which
 * must wait for the grant and the restore (RESTORED reports bytes and time:
 * in GB/s; the app measures the stall from submit to kernel done); then the
 * same with a PREFETCH before the grant (stall with overlap). The first
 * round includes pinning the host backing; later rounds reuse it. Data is
 * checked at the end. Prints a markdown table.
 */
#include "../../tests/hook/mock_sched.h"
#include "../../tests/progs/fckern.h"

#include <dlfcn.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct mock_sched *mock;
static struct fck k;

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
        fprintf(stderr, "cs_swapbench: %s: %s\n", what, n);
        exit(1);
    }
}

static void need(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "cs_swapbench: %s\n", what);
        exit(1);
    }
}

/* Re-executes under the hook, with the scheduler socket in a private dir. */
static void preload(char **argv, const char *sock)
{
    if (dlsym(RTLD_DEFAULT, "cushare_get_stats"))
        return;
    const char *b = getenv("CUSHARE_BUILD");
    char hook[4096];
    snprintf(hook, sizeof hook, "%s/lib/libcushare.so", b ? b : "build");
    setenv("LD_PRELOAD", hook, 1);
    setenv("CUSHARE_SOCKET", sock, 1);
    execv("/proc/self/exe", argv);
    perror("cs_swapbench: re-exec");
    exit(2);
}

int main(int argc, char **argv)
{
    double gib = 8;
    unsigned allocs = 8, rounds = 4;
    static const struct option lo[] = {{"gib", required_argument, 0, 'g'},
                                       {"allocs", required_argument, 0, 'a'},
                                       {"rounds", required_argument, 0, 'r'},
                                       {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "g:a:r:", lo, NULL)) != -1) {
        if (c == 'g')
            gib = atof(optarg);
        else if (c == 'a')
            allocs = (unsigned)atoi(optarg);
        else if (c == 'r')
            rounds = (unsigned)atoi(optarg);
        else
            return 2;
    }
    if (gib <= 0 || allocs == 0 || allocs > 1024 || rounds == 0)
        return 2;
    char sock[256];
    snprintf(sock, sizeof sock, "/tmp/cs_swapbench-%d.sock", (int)getppid());
    if (getenv("CS_SWAPBENCH_SOCK"))
        snprintf(sock, sizeof sock, "%s", getenv("CS_SWAPBENCH_SOCK"));
    setenv("CS_SWAPBENCH_SOCK", sock, 1);
    preload(argv, sock);
    mock = mock_start(sock, 600000);
    need(mock != NULL, "cannot start the scheduler stand-in");
    mock_set_auto_grant(mock, true);

    CUcontext ctx;
    check(cuInit(0), "cuInit");
    check(cuDevicePrimaryCtxRetain(&ctx, 0), "retain");
    check(cuCtxSetCurrent(ctx), "set current");
    check(fck_load(&k), "load kernels");
    uint64_t each = (uint64_t)(gib * (double)(1ull << 30)) / allocs / 4 * 4;
    CUdeviceptr *p = calloc(allocs, sizeof *p);
    for (unsigned i = 0; i < allocs; i++) {
        check(cuMemAlloc(&p[i], each), "cuMemAlloc");
        check(fck_fill32(0, p[i], each / 4, i + 1), "fill");
    }
    check(cuCtxSynchronize(), "sync");

    printf("| round | out GB/s | out s | in GB/s | in s | stall ms (no prefetch) | "
           "prefetch GB/s | stall ms (prefetched) |\n|---|---:|---:|---:|---:|---:|---:|---:|\n");
    for (unsigned r = 0; r < rounds; r++) {
        struct cs_msg m;
        /* Out, then in on demand (the job's next kernel waits for it). */
        mock_revoke(mock, 0, mock_lease(mock, 0), CS_ALL_BYTES);
        need(mock_wait(mock, CS_MSG_RELEASE, 600000, &m, NULL), "no RELEASE");
        double out_gbps = (double)m.u.release.swapped_bytes / (double)m.u.release.swap_ns;
        double out_s = (double)m.u.release.swap_ns / 1e9;
        while (mock_wait(mock, CS_MSG_RESTORED, 0, NULL, NULL))
            ;
        uint64_t t0 = now_ns();
        check(fck_add32(0, p[0], 1, 0), "kernel");
        check(cuCtxSynchronize(), "sync");
        double stall_ms = (double)(now_ns() - t0) / 1e6;
        need(mock_wait(mock, CS_MSG_RESTORED, 600000, &m, NULL), "no RESTORED");
        double in_gbps = (double)m.u.restored.bytes / (double)m.u.restored.ns;
        double in_s = (double)m.u.restored.ns / 1e9;

        /* Out, prefetch while the gate is closed, then the same kernel. */
        mock_revoke(mock, 0, mock_lease(mock, 0), CS_ALL_BYTES);
        need(mock_wait(mock, CS_MSG_RELEASE, 600000, &m, NULL), "no RELEASE");
        mock_prefetch(mock, 0, 1000 + r, CS_ALL_BYTES >> 2);
        need(mock_wait(mock, CS_MSG_PREFETCHED, 600000, &m, NULL), "no PREFETCHED");
        double pf_gbps = (double)m.u.prefetched.bytes / (double)m.u.prefetched.ns;
        t0 = now_ns();
        check(fck_add32(0, p[0], 1, 0), "kernel");
        check(cuCtxSynchronize(), "sync");
        double stall_pf_ms = (double)(now_ns() - t0) / 1e6;
        printf("| %u | %.1f | %.3f | %.1f | %.3f | %.1f | %.1f | %.2f |\n", r + 1, out_gbps, out_s,
               in_gbps, in_s, stall_ms, pf_gbps, stall_pf_ms);
        fflush(stdout);
    }
    /* Every allocation still holds its pattern after all the round trips. */
    CUdeviceptr out;
    check(cuMemAlloc(&out, 8), "alloc");
    for (unsigned i = 0; i < allocs; i++) {
        uint64_t zero = 0, sum = 0;
        check(cuMemcpyHtoD(out, &zero, 8), "zero");
        check(fck_sum32(0, p[i], each / 4, out), "sum");
        check(cuMemcpyDtoH(&sum, out, 8), "read");
        need(sum == (uint64_t)(i + 1) * (each / 4), "data changed across swaps");
    }
    printf("\n%.2f GiB in %u allocations, %u rounds; data verified after every round trip\n",
           (double)each * allocs / (1ull << 30), allocs, rounds);
    mock_stop(mock);
    return 0;
}
