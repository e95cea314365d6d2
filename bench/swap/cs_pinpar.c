/* cs_pinpar: does pinning the node's pool scale with threads? (issue 20)
 *
 *   cs_pinpar [--gib N] [--piece-mib M] [--threads T,T,...] [--rounds R]
 *   cs_pinpar --map K [--alloc] [--idle-only] [--piece-mib M] [--rounds R]
 *
 * The daemon's pinner makes the pool's pieces one at a time on one thread
 * (cuMemCreate, location HOST_NUMA, POSIX descriptor handles, then
 * cuMemExportToShareableHandle), at 1.9-5 GiB/s. A pool that must grow by
 * tens of GiB when jobs arrive together is that slow on their first
 * switch. This measures the same calls made by T threads at once, each
 * pinning its share of N GiB in M MiB pieces, every handle released
 * before the next configuration. Each round runs every T in the order
 * given (the first round's first configuration also pays for memory the
 * host has not yet touched; it is reported as such). Prints a markdown
 * table: per configuration, the wall time and GiB/s of each round.
 *
 * --map K: does pinning slow a client that maps pieces it was lent? This
 * process pins K pieces and exports them (the daemon's pool), then runs a
 * client (this program re-executed, inheriting the descriptors as a client
 * receives them by SCM_RIGHTS) that imports, maps and grants the device
 * access to each (the hook's map_lent), timing every piece: R rounds with
 * this process idle, then R while it pins more pieces nonstop on a thread
 * (the pool growing). Prints the client's per-piece median and maximum and
 * its total, for both, then the same for unmapping and releasing them (what
 * a member giving pieces back pays). --idle-only skips the rounds beside
 * pinning (piece sizes compared). With --alloc the client allocates K pieces of
 * device memory instead (cuMemAlloc, as any job's allocator does): what a
 * growing pool costs the other tenants of the node.
 * GPU only; no cushare involved. Built by hand:
 *   gcc -O2 -I$CUDA/include bench/swap/cs_pinpar.c -o cs_pinpar -lcuda -lpthread
 */
#define _GNU_SOURCE
#include "../gpu/cuprobe.h"
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAXT 32
#define MAXCFG 8
#define MAXROUNDS 8

static size_t gib = 16, piece_mib = 64;
static int rounds = 2, numa;
static int threads[MAXCFG] = {1, 2, 4, 8}, ncfg = 4;

struct worker {
    pthread_t t;
    size_t pieces;
    CUmemGenericAllocationHandle *h;
    int *fd;
};

static CUmemAllocationProp prop(void)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    p.location.id = numa;
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    return p;
}

static void *pin_main(void *arg)
{
    struct worker *w = arg;
    CUmemAllocationProp p = prop();
    size_t piece = piece_mib << 20;
    for (size_t i = 0; i < w->pieces; i++) {
        CK(cuMemCreate(&w->h[i], piece, &p, 0));
        CK(cuMemExportToShareableHandle(&w->fd[i], w->h[i], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    }
    return NULL;
}

/* ---- --map: a client mapping lent pieces, beside pinning or not ---------- */

#define MAXMAP 1024

static double t[MAXMAP];

/* The --alloc client: k device allocations of piece bytes, timed each;
 * one line "alloc MED MAX TOTAL" (ms). */
static int client_alloc(int k, size_t piece)
{
    static CUdeviceptr d[MAXMAP];
    double t0 = probe_now();
    for (int i = 0; i < k; i++) {
        double a = probe_now();
        CK(cuMemAlloc(&d[i], piece));
        t[i] = probe_now() - a;
    }
    double total = probe_now() - t0, mx = 0;
    for (int i = 0; i < k; i++) {
        CK(cuMemFree(d[i]));
        mx = t[i] > mx ? t[i] : mx;
    }
    printf("alloc %.2f %.2f %.1f\n", 1e3 * probe_median(t, k), 1e3 * mx, 1e3 * total);
    return 0;
}

/* The client: pieces on fds fd0 .. fd0+k-1; one line
 * "map MED MAX TOTAL; unmap MED MAX TOTAL" (ms). */
static int client(int fd0, int k)
{
    CUdevice dev;
    probe_primary(&dev);
    size_t piece = piece_mib << 20;
    if (getenv("CS_PINPAR_ALLOC"))
        return client_alloc(k, piece);
    CUdeviceptr va;
    CK(cuMemAddressReserve(&va, piece * (size_t)k, piece, 0, 0));
    CUmemAccessDesc acc;
    memset(&acc, 0, sizeof acc);
    acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    acc.location.id = dev;
    acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CUmemGenericAllocationHandle h[MAXMAP];
    double t0 = probe_now();
    for (int i = 0; i < k; i++) {
        double a = probe_now();
        CK(cuMemImportFromShareableHandle(&h[i], (void *)(uintptr_t)(fd0 + i),
                                          CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
        CK(cuMemMap(va + piece * (size_t)i, piece, 0, h[i], 0));
        CK(cuMemSetAccess(va + piece * (size_t)i, piece, &acc, 1));
        t[i] = probe_now() - a;
    }
    double total = probe_now() - t0, mx = 0;
    for (int i = 0; i < k; i++)
        mx = t[i] > mx ? t[i] : mx;
    printf("map %.2f %.2f %.1f; ", 1e3 * probe_median(t, k), 1e3 * mx, 1e3 * total);
    t0 = probe_now();
    for (int i = 0; i < k; i++) {
        double a = probe_now();
        CK(cuMemUnmap(va + piece * (size_t)i, piece));
        CK(cuMemRelease(h[i]));
        t[i] = probe_now() - a;
    }
    total = probe_now() - t0;
    CK(cuMemAddressFree(va, piece * (size_t)k));
    mx = 0;
    for (int i = 0; i < k; i++)
        mx = t[i] > mx ? t[i] : mx;
    printf("unmap %.2f %.2f %.1f\n", 1e3 * probe_median(t, k), 1e3 * mx, 1e3 * total);
    return 0;
}

static volatile int pin_stop;
static size_t pinned_meanwhile;

/* Pins and releases pieces nonstop, as a pool growing: each piece is kept
 * until 64 are held, then the oldest goes (host memory stays bounded). */
static void *pin_forever(void *arg)
{
    (void)arg;
    CUmemAllocationProp p = prop();
    CUmemGenericAllocationHandle ring[64] = {0};
    int fds[64];
    size_t n = 0;
    while (!pin_stop) {
        size_t k = n % 64;
        if (ring[k]) {
            close(fds[k]);
            CK(cuMemRelease(ring[k]));
        }
        CK(cuMemCreate(&ring[k], piece_mib << 20, &p, 0));
        CK(cuMemExportToShareableHandle(&fds[k], ring[k], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        n++;
    }
    for (size_t k = 0; k < 64 && k < n; k++) {
        close(fds[k]);
        CK(cuMemRelease(ring[k]));
    }
    pinned_meanwhile = n;
    return NULL;
}

/* Runs the client once on the k pieces at fds fd0..; its line into line. */
static void run_client(const char *self, int fd0, int k, char *line, size_t cap)
{
    int pfd[2];
    if (pipe(pfd) != 0)
        exit(2);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1);
        char a[32], b[32], c[32];
        snprintf(a, sizeof a, "%d", fd0);
        snprintf(b, sizeof b, "%d", k);
        snprintf(c, sizeof c, "%zu", piece_mib);
        execl(self, self, "--client", a, b, c, (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    ssize_t got = read(pfd[0], line, cap - 1);
    line[got > 0 ? got : 0] = 0;
    close(pfd[0]);
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "client failed (status %d)\n", st);
        exit(2);
    }
}

static int alloc_mode, idle_only;

static int map_bench(int k)
{
    if (k < 1 || k > MAXMAP)
        return 2;
    CUdevice dev;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    if (cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev) != CUDA_SUCCESS || numa < 0)
        numa = 0;
    /* The lent pieces, on consecutive descriptors the client inherits. */
    CUmemAllocationProp p = prop();
    static CUmemGenericAllocationHandle h[MAXMAP];
    int fd0 = -1;
    if (alloc_mode)
        setenv("CS_PINPAR_ALLOC", "1", 1); /* the client allocates: no pieces to lend */
    for (int i = 0; i < k && !alloc_mode; i++) {
        int fd;
        CK(cuMemCreate(&h[i], piece_mib << 20, &p, 0));
        CK(cuMemExportToShareableHandle(&fd, h[i], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        fcntl(fd, F_SETFD, 0); /* exported O_CLOEXEC: the client inherits it */
        if (fd0 < 0)
            fd0 = fd;
        if (fd != fd0 + i) {
            fprintf(stderr, "descriptors not consecutive\n");
            return 2;
        }
    }
    printf("| pinning beside the client | %d pieces of %zu MiB: per-piece median ms, max ms, total ms |\n",
           k, piece_mib);
    printf("|---|---|\n");
    char line[128];
    for (int busy = 0; busy < (idle_only ? 1 : 2); busy++) {
        for (int r = 0; r < rounds; r++) {
            pthread_t t;
            pin_stop = 0;
            if (busy && pthread_create(&t, NULL, pin_forever, NULL) != 0)
                return 2;
            if (busy)
                usleep(200000); /* the pinner under way */
            run_client("/proc/self/exe", fd0, k, line, sizeof line);
            if (busy) {
                pin_stop = 1;
                pthread_join(t, NULL);
            }
            line[strcspn(line, "\n")] = 0;
            printf("| %s | %s", busy ? "yes" : "no", line);
            if (busy)
                printf(" (%zu pieces pinned meanwhile)", pinned_meanwhile);
            printf(" |\n");
            fflush(stdout);
        }
    }
    return 0;
}

static double run(int nt)
{
    size_t total = (gib << 30) / (piece_mib << 20);
    struct worker w[MAXT];
    memset(w, 0, sizeof w);
    for (int i = 0; i < nt; i++) {
        w[i].pieces = total / (size_t)nt + ((size_t)i < total % (size_t)nt);
        w[i].h = calloc(w[i].pieces ? w[i].pieces : 1, sizeof *w[i].h);
        w[i].fd = calloc(w[i].pieces ? w[i].pieces : 1, sizeof *w[i].fd);
        if (!w[i].h || !w[i].fd) {
            fprintf(stderr, "out of memory\n");
            exit(2);
        }
    }
    double t0 = probe_now();
    for (int i = 0; i < nt; i++)
        if (pthread_create(&w[i].t, NULL, pin_main, &w[i]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            exit(2);
        }
    for (int i = 0; i < nt; i++)
        pthread_join(w[i].t, NULL);
    double dt = probe_now() - t0;
    for (int i = 0; i < nt; i++) {
        for (size_t k = 0; k < w[i].pieces; k++) {
            close(w[i].fd[k]);
            CK(cuMemRelease(w[i].h[k]));
        }
        free(w[i].h);
        free(w[i].fd);
    }
    return dt;
}

static void parse_threads(const char *s)
{
    ncfg = 0;
    for (const char *q = s; *q && ncfg < MAXCFG;) {
        char *end;
        long v = strtol(q, &end, 10);
        if (end == q || v < 1 || v > MAXT) {
            fprintf(stderr, "--threads: 1..%d, comma-separated\n", MAXT);
            exit(2);
        }
        threads[ncfg++] = (int)v;
        q = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            break;
    }
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--client")) {
        piece_mib = strtoul(argv[4], NULL, 10);
        return client(atoi(argv[2]), atoi(argv[3]));
    }
    int map_k = 0;
    static const struct option opts[] = {{"gib", 1, 0, 'g'}, {"piece-mib", 1, 0, 'p'},
                                         {"threads", 1, 0, 't'}, {"rounds", 1, 0, 'r'},
                                         {"map", 1, 0, 'm'}, {"alloc", 0, 0, 'a'},
                                         {"idle-only", 0, 0, 'i'},
                                         {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        if (c == 'g')
            gib = strtoul(optarg, NULL, 10);
        else if (c == 'p')
            piece_mib = strtoul(optarg, NULL, 10);
        else if (c == 't')
            parse_threads(optarg);
        else if (c == 'r')
            rounds = atoi(optarg);
        else if (c == 'm')
            map_k = atoi(optarg);
        else if (c == 'a')
            alloc_mode = 1;
        else if (c == 'i')
            idle_only = 1;
        else
            return 2;
    }
    if (!gib || !piece_mib || piece_mib % 2 || rounds < 1 || rounds > MAXROUNDS) {
        fprintf(stderr, "usage: cs_pinpar [--gib N] [--piece-mib M (even)] [--threads T,..] [--rounds R<=%d]\n",
                MAXROUNDS);
        return 2;
    }
    if (map_k)
        return map_bench(map_k);
    CUdevice dev;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    if (cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev) != CUDA_SUCCESS || numa < 0)
        numa = 0;
    double dt[MAXCFG][MAXROUNDS];
    for (int r = 0; r < rounds; r++)
        for (int c = 0; c < ncfg; c++)
            dt[c][r] = run(threads[c]);
    printf("| threads | %zu GiB in %zu MiB pieces: seconds (GiB/s), each round |\n", gib, piece_mib);
    printf("|---|---|\n");
    for (int c = 0; c < ncfg; c++) {
        printf("| %d |", threads[c]);
        for (int r = 0; r < rounds; r++)
            printf(" %.2f (%.2f)%s", dt[c][r], (double)gib / dt[c][r],
                   r == 0 && c == 0 ? " first touch" : "");
        printf(" |\n");
    }
    return 0;
}
