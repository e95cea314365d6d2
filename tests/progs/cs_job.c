/* cs_job: a driver-API GPU job for tests, the demo and GPU runs (simulated
 * or real driver alike).
 *
 *   cs_job [--mem-mb M] [--allocs K] [--iters N] [--kernel-ns NS] [--seed S]
 *          [--streams K] [--copy-mb M] [--gap-ms G] [--sync-every N]
 *          [--start-delay-ms D] [--submit-ns] [--until-file F]
 *          [--device D] [--name NAME] [--json]
 *
 * Allocates M MiB of device memory in K allocations, fills each with a
 * per-element pattern derived from S (through pinned staging memory), then
 * per iteration: on every allocation (allocation a on stream a % streams)
 * an optional fc_sleep of NS followed by an fc_add32 of a per-iteration,
 * per-allocation value; an H2D + D2H copy of --copy-mb through pinned
 * memory; and --gap-ms of host sleep with the GPU idle. At the end fc_sum32
 * sums every allocation on the device and the sums are compared with the
 * values computed on the host. Prints one line (or JSON):
 *   cs_job: ok name=.. pid=.. iters=.. elapsed_ms=.. sum=..
 *   cs_job: FAIL name=.. pid=.. reason=..       (exit status 1)
 * Everything but pid and elapsed_ms is determined by the options.
 *
 * Options for scheduling tests (none changes the work or the sums):
 *   --sync-every N     cuCtxSynchronize after every N-th iteration, as a
 *                      framework synchronizes every step, so that at most N
 *                      iterations are in flight (0, the default: only at
 *                      the end, or with --gap-ms after each iteration)
 *   --start-delay-ms D after setup (memory filled, synchronized), D ms of
 *                      host sleep before the first iteration
 *   --submit-ns        before the result line, one line per iteration:
 *                        cs_job: submit iter=I ns=T
 *                      T = CLOCK_MONOTONIC ns just before the iteration's
 *                      first GPU call (comparable with FAKECUDA_TRACE times)
 *   --until-file F     after the N iterations, go on iterating until F
 *                      exists (checked after each iteration), so that a test
 *                      can keep jobs contending for as long as it needs them
 *                      instead of guessing how long N iterations last; the
 *                      result line gives the iterations done, and the sums
 *                      are checked for that count (not with --submit-ns)
 */
#include "fckern.h"
#include "jobutil.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_ALLOCS 4096
#define MAX_STREAMS 64
#define STAGE_BYTES (16u << 20)

struct opts {
    uint64_t mem_mb, allocs, iters, kernel_ns, seed, streams, copy_mb, gap_ms;
    uint64_t sync_every, start_delay_ms;
    int device;
    const char *name, *until_file;
    bool json, submit_ns;
};

static struct opts o = {
    .mem_mb = 64, .allocs = 1, .iters = 10, .seed = 1, .streams = 1, .name = "job",
};

static void finish_fail(const char *reason)
{
    if (o.json)
        printf("{\"status\":\"fail\",\"name\":\"%s\",\"pid\":%d,\"reason\":\"%s\"}\n", o.name,
               (int)getpid(), reason);
    else
        printf("cs_job: FAIL name=%s pid=%d reason=%s\n", o.name, (int)getpid(), reason);
    fflush(stdout);
    exit(1);
}

static void check(CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS)
        return;
    const char *name = NULL;
    cuGetErrorName(r, &name);
    char reason[256];
    snprintf(reason, sizeof reason, "%s:%s", what, name ? name : "unknown");
    finish_fail(reason);
}

/* Initial value of element i of allocation a. */
static uint32_t pattern(uint64_t a, uint64_t i)
{
    return ju_mix32(o.seed * 0x9e3779b97f4a7c15ull + a * 0x100000001b3ull + i);
}

/* Value added to allocation a in iteration it. */
static uint32_t addend(uint64_t it, uint64_t a)
{
    return ju_mix32(o.seed ^ (it << 20) ^ (a << 8) ^ 0xadd) | 1;
}

static uint64_t parse_u64(const char *s, const char *opt)
{
    return ju_parse_u64("cs_job", s, opt);
}

static void usage(void)
{
    fprintf(stderr, "usage: cs_job [--mem-mb M] [--allocs K] [--iters N] [--kernel-ns NS] "
                    "[--seed S] [--streams K] [--copy-mb M] [--gap-ms G] [--sync-every N] "
                    "[--start-delay-ms D] [--submit-ns] [--until-file F] [--device D] "
                    "[--name NAME] [--json]\n");
    exit(2);
}

static void parse(int argc, char **argv)
{
    static const struct option lo[] = {
        { "mem-mb", 1, 0, 'm' }, { "allocs", 1, 0, 'a' }, { "iters", 1, 0, 'i' },
        { "kernel-ns", 1, 0, 'k' }, { "seed", 1, 0, 's' }, { "streams", 1, 0, 't' },
        { "copy-mb", 1, 0, 'c' }, { "gap-ms", 1, 0, 'g' }, { "device", 1, 0, 'd' },
        { "name", 1, 0, 'n' }, { "json", 0, 0, 'j' }, { "sync-every", 1, 0, 'y' },
        { "start-delay-ms", 1, 0, 'D' }, { "submit-ns", 0, 0, 'S' },
        { "until-file", 1, 0, 'u' }, { "help", 0, 0, 'h' }, { 0, 0, 0, 0 },
    };
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'm': o.mem_mb = parse_u64(optarg, "--mem-mb"); break;
        case 'a': o.allocs = parse_u64(optarg, "--allocs"); break;
        case 'i': o.iters = parse_u64(optarg, "--iters"); break;
        case 'k': o.kernel_ns = parse_u64(optarg, "--kernel-ns"); break;
        case 's': o.seed = parse_u64(optarg, "--seed"); break;
        case 't': o.streams = parse_u64(optarg, "--streams"); break;
        case 'c': o.copy_mb = parse_u64(optarg, "--copy-mb"); break;
        case 'g': o.gap_ms = parse_u64(optarg, "--gap-ms"); break;
        case 'd': o.device = (int)parse_u64(optarg, "--device"); break;
        case 'n': o.name = optarg; break;
        case 'j': o.json = true; break;
        case 'y': o.sync_every = parse_u64(optarg, "--sync-every"); break;
        case 'D': o.start_delay_ms = parse_u64(optarg, "--start-delay-ms"); break;
        case 'S': o.submit_ns = true; break;
        case 'u': o.until_file = optarg; break;
        default: usage();
        }
    }
    if (optind != argc || o.allocs < 1 || o.allocs > MAX_ALLOCS || o.streams < 1
        || o.streams > MAX_STREAMS || o.mem_mb < 1 || (o.mem_mb << 20) / o.allocs < 4
        || (o.until_file && o.submit_ns))
        usage();
}

struct job {
    CUstream streams[MAX_STREAMS];
    CUdeviceptr ptr[MAX_ALLOCS];
    uint64_t n;                      /* uint32 elements per allocation */
    CUdeviceptr sums;                /* one uint64 per allocation */
    void *stage;                     /* pinned staging buffer */
    void *copy_host;
    CUdeviceptr copy_dev;
    size_t copy_bytes;
    uint64_t *submit;                /* --submit-ns: per iteration */
};

/* Writes the pattern of every allocation through the staging buffer. */
static void fill_patterns(struct job *j)
{
    uint64_t per_chunk = STAGE_BYTES / 4;
    uint32_t *h = j->stage;
    for (uint64_t a = 0; a < o.allocs; a++) {
        for (uint64_t i0 = 0; i0 < j->n; i0 += per_chunk) {
            uint64_t cnt = j->n - i0 < per_chunk ? j->n - i0 : per_chunk;
            for (uint64_t i = 0; i < cnt; i++)
                h[i] = pattern(a, i0 + i);
            check(cuMemcpyHtoD(j->ptr[a] + i0 * 4, h, cnt * 4), "init-copy");
        }
    }
}

static void setup(struct job *j)
{
    CUdevice dev;
    CUcontext ctx;
    static struct fck k;
    check(cuInit(0), "cuInit");
    check(cuDeviceGet(&dev, o.device), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
    check(fck_load(&k), "load-kernels");
    for (uint64_t s = 0; s < o.streams; s++)
        check(cuStreamCreate(&j->streams[s], CU_STREAM_DEFAULT), "cuStreamCreate");
    j->n = ((o.mem_mb << 20) / o.allocs) / 4;
    for (uint64_t a = 0; a < o.allocs; a++)
        check(cuMemAlloc(&j->ptr[a], j->n * 4), "cuMemAlloc");
    check(cuMemAlloc(&j->sums, 8 * o.allocs), "cuMemAlloc");
    check(cuMemAllocHost(&j->stage, STAGE_BYTES), "cuMemAllocHost");
    if (o.copy_mb) {
        j->copy_bytes = o.copy_mb << 20;
        check(cuMemAllocHost(&j->copy_host, j->copy_bytes), "cuMemAllocHost");
        check(cuMemAlloc(&j->copy_dev, j->copy_bytes), "cuMemAlloc");
        memset(j->copy_host, 0x5a, j->copy_bytes);
    }
    fill_patterns(j);
    if (o.submit_ns) {
        j->submit = calloc(o.iters ? o.iters : 1, sizeof *j->submit);
        if (!j->submit)
            finish_fail("out-of-host-memory");
    }
}

/* True while the loop should go on once DONE iterations are queued. */
static bool more_iterations(uint64_t done)
{
    if (done < o.iters)
        return true;
    return o.until_file && access(o.until_file, F_OK) != 0;
}

/* Runs the iterations; with --until-file o.iters becomes the count done. */
static void run_iterations(struct job *j)
{
    uint64_t it;
    for (it = 0; more_iterations(it); it++) {
        if (j->submit)
            j->submit[it] = ju_now_ns();
        for (uint64_t a = 0; a < o.allocs; a++) {
            CUstream s = j->streams[a % o.streams];
            if (o.kernel_ns)
                check(fck_sleep(s, o.kernel_ns), "fc_sleep");
            check(fck_add32(s, j->ptr[a], j->n, addend(it, a)), "fc_add32");
        }
        if (o.copy_mb) {
            check(cuMemcpyHtoDAsync(j->copy_dev, j->copy_host, j->copy_bytes, j->streams[0]), "copy-h2d");
            check(cuMemcpyDtoHAsync(j->copy_host, j->copy_dev, j->copy_bytes, j->streams[0]), "copy-d2h");
        }
        if (o.gap_ms || (o.sync_every && (it + 1) % o.sync_every == 0))
            check(cuCtxSynchronize(), "cuCtxSynchronize");
        if (o.gap_ms) {
            struct timespec ts = { (time_t)(o.gap_ms / 1000), (long)(o.gap_ms % 1000) * 1000000 };
            nanosleep(&ts, NULL);
        }
    }
    o.iters = it;
    check(cuCtxSynchronize(), "cuCtxSynchronize");
}

/* Sums every allocation on the device and checks it against the host. */
static uint64_t verify(struct job *j)
{
    uint64_t got[MAX_ALLOCS], total = 0;
    check(cuMemsetD32(j->sums, 0, 2 * o.allocs), "cuMemsetD32");
    for (uint64_t a = 0; a < o.allocs; a++)
        check(fck_sum32(j->streams[a % o.streams], j->ptr[a], j->n, j->sums + 8 * a), "fc_sum32");
    check(cuCtxSynchronize(), "cuCtxSynchronize");
    check(cuMemcpyDtoH(got, j->sums, 8 * o.allocs), "sum-copy");
    for (uint64_t a = 0; a < o.allocs; a++) {
        uint32_t add = 0;
        for (uint64_t it = 0; it < o.iters; it++)
            add += addend(it, a);
        uint64_t want = 0;
        for (uint64_t i = 0; i < j->n; i++)
            want += (uint32_t)(pattern(a, i) + add);
        if (got[a] != want) {
            char reason[128];
            snprintf(reason, sizeof reason, "alloc%" PRIu64 ":sum=%" PRIu64 ",want=%" PRIu64, a,
                     got[a], want);
            finish_fail(reason);
        }
        total += want;
    }
    return total;
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    static struct job j;
    setup(&j);
    if (o.start_delay_ms) {
        check(cuCtxSynchronize(), "cuCtxSynchronize");
        ju_sleep_ms(o.start_delay_ms);
    }
    uint64_t t0 = ju_now_ms();
    run_iterations(&j);
    uint64_t elapsed = ju_now_ms() - t0;
    uint64_t sum = verify(&j);
    for (uint64_t it = 0; j.submit && it < o.iters; it++)
        printf("cs_job: submit iter=%" PRIu64 " ns=%" PRIu64 "\n", it, j.submit[it]);
    free(j.submit);
    if (o.json)
        printf("{\"status\":\"ok\",\"name\":\"%s\",\"pid\":%d,\"iters\":%" PRIu64
               ",\"elapsed_ms\":%" PRIu64 ",\"sum\":%" PRIu64 "}\n",
               o.name, (int)getpid(), o.iters, elapsed, sum);
    else
        printf("cs_job: ok name=%s pid=%d iters=%" PRIu64 " elapsed_ms=%" PRIu64 " sum=%" PRIu64 "\n",
               o.name, (int)getpid(), o.iters, elapsed, sum);
    return 0;
}
