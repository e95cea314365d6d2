/* cs_poolbench: what a node-wide pool of pinned host memory would cost,
 * per mechanism, on the real driver (issue 20: pin once per node, lend
 * pieces to whichever job swaps).
 *
 *   cs_poolbench [--gib N] [--piece-mib M] [--reps R]
 *
 * The "daemon" (this process) makes N GiB of pinned host memory in M MiB
 * pieces two ways, and a "client" (this program re-executed, inheriting
 * the descriptors as a client would receive them by SCM_RIGHTS) takes them
 * into its own CUDA context and copies through them:
 *   vmmfd   cuMemCreate(HOST, POSIX fd) + cuMemExportToShareableHandle in
 *           the daemon; the client imports each fd, reserves, maps, grants
 *           the device access;
 *   memfd   a memfd populated (and mlocked) by the daemon; the client
 *           mmaps it and cuMemHostRegisters it (pages already resident);
 *           the same again after the first registration is undone;
 * and, for comparison, the client pinning its own: cuMemCreate(HOST) in
 * pieces, mapped, access granted (what the hook does today).
 * Per mechanism: seconds per GiB to make it usable in the client, and
 * device-to-host / host-to-device copy rates through it (median of R).
 * GPU only; no cushare involved. Prints a markdown table. Built by hand:
 *   gcc -O2 -I$CUDA/include bench/swap/cs_poolbench.c -o cs_poolbench -lcuda
 */
#define _GNU_SOURCE
#include "../gpu/cuprobe.h"
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>


#define MAXP 4096

static size_t gib = 8, piece_mib = 64, size, piece, np;
static int reps = 3;
static CUdevice dev;
static CUcontext ctx;
static CUstream st;

static void init_cuda(void)
{
    ctx = probe_primary(&dev);
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
}

static CUmemAllocationProp host_prop(int fd_handles)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_HOST;
    if (fd_handles)
        p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return p;
}

static void grant(CUdeviceptr va, size_t n)
{
    CUmemAccessDesc a;
    memset(&a, 0, sizeof a);
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = (int)dev;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CK(cuMemSetAccess(va, n, &a, 1));
}

/* D2H and H2D GB/s between `host` (size bytes the device reaches) and
 * device memory, medians of reps. */
static void copy_rates(CUdeviceptr host, double *d2h, double *h2d)
{
    CUdeviceptr d;
    CK(cuMemAlloc(&d, size));
    double a[16], b[16];
    for (int r = 0; r < reps; r++) {
        double t0 = probe_now();
        CK(cuMemcpyAsync(host, d, size, st));
        CK(cuStreamSynchronize(st));
        a[r] = size / (probe_now() - t0) / 1e9;
        t0 = probe_now();
        CK(cuMemcpyAsync(d, host, size, st));
        CK(cuStreamSynchronize(st));
        b[r] = size / (probe_now() - t0) / 1e9;
    }
    *d2h = probe_median(a, reps);
    *h2d = probe_median(b, reps);
    CK(cuMemFree(d));
}

static void row(const char *what, double s, double d2h, double h2d)
{
    printf("| %s | %.3f | %.1f | %.1f |\n", what, s / (double)gib, d2h, h2d);
}

/* ---- the client ------------------------------------------------------------ */

static void client(int first_fd, int memfd)
{
    init_cuda();
    double d2h, h2d;
    /* vmmfd: import, reserve, map, access */
    CUdeviceptr va;
    double t0 = probe_now();
    CK(cuMemAddressReserve(&va, size, 2ull << 20, 0, 0));
    for (size_t i = 0; i < np; i++) {
        CUmemGenericAllocationHandle h;
        CK(cuMemImportFromShareableHandle(&h, (void *)(intptr_t)(first_fd + (int)i),
                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
        CK(cuMemMap(va + i * piece, piece, 0, h, 0));
        CK(cuMemRelease(h));
    }
    grant(va, size);
    double s = probe_now() - t0;
    copy_rates(va, &d2h, &h2d);
    row("vmmfd: import the daemon's cuMemCreate(HOST) pieces, map, grant access", s, d2h, h2d);
    for (size_t i = 0; i < np; i++)
        CK(cuMemUnmap(va + i * piece, piece));
    CK(cuMemAddressFree(va, size));

    /* memfd: mmap, register (twice: the second after unregistering) */
    for (int pass = 0; pass < 2; pass++) {
        t0 = probe_now();
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, memfd, 0);
        if (p == MAP_FAILED) {
            perror("mmap");
            exit(2);
        }
        CK(cuMemHostRegister(p, size, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP));
        s = probe_now() - t0;
        CUdeviceptr dp;
        CK(cuMemHostGetDevicePointer(&dp, p, 0));
        copy_rates(dp, &d2h, &h2d);
        row(pass ? "memfd: register again (after unregistering)"
                 : "memfd: mmap the daemon's populated memfd, cuMemHostRegister",
            s, d2h, h2d);
        CK(cuMemHostUnregister(p));
        munmap(p, size);
    }

    /* the client pins its own, as today */
    t0 = probe_now();
    CUmemAllocationProp hp = host_prop(0);
    CK(cuMemAddressReserve(&va, size, 2ull << 20, 0, 0));
    for (size_t i = 0; i < np; i++) {
        CUmemGenericAllocationHandle h;
        CK(cuMemCreate(&h, piece, &hp, 0));
        CK(cuMemMap(va + i * piece, piece, 0, h, 0));
        CK(cuMemRelease(h));
    }
    grant(va, size);
    s = probe_now() - t0;
    copy_rates(va, &d2h, &h2d);
    row("own: cuMemCreate(HOST) in the client (today)", s, d2h, h2d);
}

/* ---- the daemon ----------------------------------------------------------- */

int main(int argc, char **argv)
{
    int child_fd = -1, child_memfd = -1;
    static const struct option opts[] = {{"gib", 1, 0, 'g'},   {"piece-mib", 1, 0, 'p'},
                                         {"reps", 1, 0, 'r'},  {"child", 1, 0, 'c'},
                                         {"memfd", 1, 0, 'm'}, {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        if (c == 'g')
            gib = strtoul(optarg, NULL, 10);
        else if (c == 'p')
            piece_mib = strtoul(optarg, NULL, 10);
        else if (c == 'r')
            reps = atoi(optarg) < 1 ? 1 : atoi(optarg) > 16 ? 16 : atoi(optarg);
        else if (c == 'c')
            child_fd = atoi(optarg);
        else if (c == 'm')
            child_memfd = atoi(optarg);
        else
            return 2;
    }
    size = gib << 30;
    piece = piece_mib << 20;
    np = size / piece;
    if (np == 0 || np > MAXP || size % piece) {
        fprintf(stderr, "cs_poolbench: --gib / --piece-mib give %zu pieces (1..%d, whole)\n", np,
                MAXP);
        return 2;
    }
    if (child_fd >= 0) {
        client(child_fd, child_memfd);
        return 0;
    }
    /* The memfd first (no CUDA needed): populated and locked, as a daemon
     * holding a pool would keep it. */
    double t0 = probe_now();
    int memfd = memfd_create("cs_pool", 0);
    if (memfd < 0 || ftruncate(memfd, (off_t)size) != 0) {
        perror("memfd");
        return 2;
    }
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, memfd, 0);
    if (m == MAP_FAILED || mlock(m, size) != 0)
        fprintf(stderr, "cs_poolbench: mlock of the memfd failed: populated only\n");
    double memfd_s = probe_now() - t0;
    init_cuda();
    CUmemAllocationProp hp = host_prop(1);
    /* Exportable host memory: HOST location if the driver takes it, else
     * HOST_NUMA node 0 (the driver may only export NUMA-placed memory). */
    CUmemGenericAllocationHandle probe;
    CUresult pr = cuMemCreate(&probe, piece, &hp, 0);
    if (pr != CUDA_SUCCESS) {
        printf("cuMemCreate(HOST, POSIX fd): error %d; using HOST_NUMA node 0\n", (int)pr);
        hp.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
        hp.location.id = 0;
    } else {
        CK(cuMemRelease(probe));
    }
    /* Pieces exported as descriptors at consecutive numbers, for the child. */
    int base = 100;
    t0 = probe_now();
    for (size_t i = 0; i < np; i++) {
        CUmemGenericAllocationHandle h;
        CK(cuMemCreate(&h, piece, &hp, 0));
        int fd = -1;
        CK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        if (dup2(fd, base + (int)i) < 0) {
            perror("dup2");
            return 2;
        }
        close(fd);
        /* h stays referenced: the daemon keeps the pool */
    }
    double vmm_s = probe_now() - t0;
    printf("%zu GiB in %zu MiB pieces, copies median of %d\n\n", gib, piece_mib, reps);
    printf("| mechanism | s/GiB to make usable | D2H GB/s | H2D GB/s |\n|---|---:|---:|---:|\n");
    row("daemon: cuMemCreate(HOST, POSIX fd) + export, per piece (paid once per node)", vmm_s, 0, 0);
    row("daemon: memfd populated + mlock (paid once per node)", memfd_s, 0, 0);
    fflush(stdout);
    char a1[32], a2[32], a3[32], a4[32], a5[32];
    snprintf(a1, sizeof a1, "--child=%d", base);
    snprintf(a2, sizeof a2, "--memfd=%d", memfd);
    snprintf(a3, sizeof a3, "--gib=%zu", gib);
    snprintf(a4, sizeof a4, "--piece-mib=%zu", piece_mib);
    snprintf(a5, sizeof a5, "--reps=%d", reps);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/proc/self/exe", argv[0], a1, a2, a3, a4, a5, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
