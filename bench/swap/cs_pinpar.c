/* cs_pinpar: does pinning the node's pool scale with threads? (issue 20)
 *
 *   cs_pinpar [--gib N] [--piece-mib M] [--threads T,T,...] [--rounds R]
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
 * GPU only; no cushare involved, no CUDA context. Built by hand:
 *   gcc -O2 -I$CUDA/include bench/swap/cs_pinpar.c -o cs_pinpar -lcuda -lpthread
 */
#define _GNU_SOURCE
#include "../gpu/cuprobe.h"
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    static const struct option opts[] = {{"gib", 1, 0, 'g'}, {"piece-mib", 1, 0, 'p'},
                                         {"threads", 1, 0, 't'}, {"rounds", 1, 0, 'r'},
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
        else
            return 2;
    }
    if (!gib || !piece_mib || piece_mib % 2 || rounds < 1 || rounds > MAXROUNDS) {
        fprintf(stderr, "usage: cs_pinpar [--gib N] [--piece-mib M (even)] [--threads T,..] [--rounds R<=%d]\n",
                MAXROUNDS);
        return 2;
    }
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
