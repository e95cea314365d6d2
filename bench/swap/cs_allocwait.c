/* cs_allocwait: what a tenant's device allocations wait while the node's
 * pool grows (issue 20, pool_pace_pct).
 *
 *   cs_allocwait [--series M:K[,M:K...]] [--go FILE] [--hold FILE] [--hold-gpu]
 *
 * Takes GPU 0's primary context and allocates 2 MiB once (under the hook:
 * the job connects to cushared, so the daemon paces the pool's growth for
 * it), waits until
 * FILE exists when --go is given (the benchmark starts the pool's growth
 * first), then, per series, makes K device allocations of M MiB
 * (cuMemAlloc, as a framework's caching allocator does when it grows;
 * default 64:256, 16 GiB), timing each, and frees them. Prints a line per
 * series: "alloc M K MEDIAN_MS P90_MS MAX_MS TOTAL_MS". With --hold, stays
 * (connected) until that FILE exists.
 *
 * Under cushared, a job that does not hold its GPU gets an allocation as
 * reserved addresses showing the hook's host placeholder (its device memory
 * comes at the grant), 0.56-0.78 ms per 64 MiB on the H200 against
 * 0.05-0.09 natively. --hold-gpu writes the first allocation (cuMemsetD8,
 * which waits for the lease) before the series, so that they take the
 * path of a job running on its GPU: device memory at once. 
 * Exit 2 on any driver error. Built with the tree (mk/bench.mk); run by
 * bench/gpu/run.sh's pace section. */
#define _POSIX_C_SOURCE 200809L
#include "../gpu/cuprobe.h"
#include <getopt.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#define MAXK 4096

/* Waits (1 ms polls, 10 min at most) until path exists. */
static bool await(const char *path)
{
    for (int i = 0; access(path, F_OK) != 0; i++) {
        if (i > 600000) {
            fprintf(stderr, "cs_allocwait: %s never appeared\n", path);
            return false;
        }
        usleep(1000);
    }
    return true;
}

static CUdeviceptr d[MAXK];
static double t[MAXK];

/* One series: k allocations of mib MiB, timed, then freed; its line. */
static void series(size_t mib, int k)
{
    double t0 = probe_now();
    for (int i = 0; i < k; i++) {
        double a = probe_now();
        CK(cuMemAlloc(&d[i], mib << 20));
        t[i] = probe_now() - a;
    }
    double total = probe_now() - t0;
    for (int i = 0; i < k; i++)
        CK(cuMemFree(d[i]));
    double med = probe_median(t, k); /* sorts t */
    printf("alloc %zu %d %.3f %.3f %.3f %.1f\n", mib, k, 1e3 * med, 1e3 * t[k * 9 / 10],
           1e3 * t[k - 1], 1e3 * total);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    const char *spec = "64:256", *go = NULL, *hold = NULL;
    int hold_gpu = 0;
    static const struct option opts[] = {{"series", 1, 0, 's'}, {"go", 1, 0, 'g'},
                                         {"hold", 1, 0, 'h'}, {"hold-gpu", 0, 0, 'G'},
                                         {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        if (c == 's')
            spec = optarg;
        else if (c == 'g')
            go = optarg;
        else if (c == 'h')
            hold = optarg;
        else if (c == 'G')
            hold_gpu = 1;
        else
            return 2;
    }
    size_t mib[16];
    int k[16], n = 0;
    for (const char *q = spec; *q && n < 16;) {
        char *e;
        mib[n] = strtoul(q, &e, 10);
        if (*e != ':')
            break;
        k[n] = (int)strtol(e + 1, &e, 10);
        if (!mib[n] || mib[n] > 65536 || k[n] < 1 || k[n] > MAXK || (*e && *e != ','))
            break;
        n++;
        q = *e ? e + 1 : e;
        if (!*q)
            spec = NULL; /* parsed whole */
    }
    if (spec || !n) {
        fprintf(stderr, "cs_allocwait: --series M:K[,M:K...], M 1..65536 MiB, K 1..%d\n", MAXK);
        return 2;
    }
    CUdevice dev;
    probe_primary(&dev);
    /* Under the hook a job connects at its first allocation: one now, so
     * that the daemon knows it before the pool grows. */
    CUdeviceptr first;
    CK(cuMemAlloc(&first, 2 << 20));
    if (go && !await(go))
        return 2;
    if (hold_gpu)
        CK(cuMemsetD8(first, 0, 2 << 20));
    for (int i = 0; i < n; i++)
        series(mib[i], k[i]);
    CK(cuMemFree(first));
    return hold && !await(hold) ? 2 : 0;
}
