/* cs_job: a driver-API GPU job for tests, the demo and GPU runs (simulated
 * or real driver alike).
 *
 *   cs_job [--mem-mb M] [--allocs K] [--iters N] [--kernel-ns NS] [--seed S]
 *          [--streams K] [--copy-mb M] [--gap-ms G] [--sync-every N]
 *          [--start-delay-ms D] [--submit-ns] [--until-file F] [--alloc-each]
 *          [--device D | --devices LIST] [--peer-mb M] [--name NAME] [--json]
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
 * Several GPUs (--devices 0,1: comma-separated ordinals, at most 8, each
 * once; --device D is the list of one, and giving both is a usage error):
 * a primary context per device, M MiB in K allocations on each, and each
 * iteration submits its work (kernels, --copy-mb copies) on every device in
 * list order, making that device's context current; synchronizations are
 * made on every device. Allocation a of the k-th device of the list has the
 * pattern and addends of allocation k*K+a (the first device's are those of
 * a single-device run), so that no device's data can pass for another's.
 * The sum is over every device, every allocation is checked, and the
 * result line ends with devices=LIST (JSON: "devices":[..]); a FAIL reason
 * names the device (dev1:alloc0:...).
 *   --peer-mb M        (two devices or more) a mirror buffer of M MiB on
 *                      each device after the first; each iteration, right
 *                      after its fc_add32s on the first device, a
 *                      cuMemcpyPeerAsync on that device's first stream (so
 *                      ordered after the add) copies the first M MiB of its
 *                      allocation 0 into every mirror. At the end each
 *                      mirror is read back and compared, element by
 *                      element, with what allocation 0 holds by then
 *                      (computed on the host): a mismatch is a FAIL
 *                      (reason dev1:mirror:...). M MiB must fit in an
 *                      allocation.
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
 *   --alloc-each       make each allocation just before its pattern is
 *                      written, as a framework creates and fills its tensors
 *                      one by one: the job's footprint grows while it holds
 *                      the GPU (its first copy, a gated call, follows its
 *                      first allocation); by default every allocation is
 *                      made before the first copy
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
#define MAX_DEVICES 8
#define STAGE_BYTES (16u << 20)

struct opts {
    uint64_t mem_mb, allocs, iters, kernel_ns, seed, streams, copy_mb, gap_ms;
    uint64_t sync_every, start_delay_ms, peer_mb;
    int devices[MAX_DEVICES], ndev;
    bool device_set, devices_set;
    const char *name, *until_file;
    bool json, submit_ns, alloc_each;
};

static struct opts o = {
    .mem_mb = 64, .allocs = 1, .iters = 10, .seed = 1, .streams = 1, .name = "job", .ndev = 1,
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

/* Initial value of element i of allocation a (k*K+a for the k-th device). */
static uint32_t pattern(uint64_t a, uint64_t i)
{
    return ju_mix32(o.seed * 0x9e3779b97f4a7c15ull + a * 0x100000001b3ull + i);
}

/* Value added to allocation a in iteration it. */
static uint32_t addend(uint64_t it, uint64_t a)
{
    return ju_mix32(o.seed ^ (it << 20) ^ (a << 8) ^ 0xadd) | 1;
}

/* What every iteration so far added to allocation a. */
static uint32_t added(uint64_t a)
{
    uint32_t add = 0;
    for (uint64_t it = 0; it < o.iters; it++)
        add += addend(it, a);
    return add;
}

static uint64_t parse_u64(const char *s, const char *opt)
{
    return ju_parse_u64("cs_job", s, opt);
}

static void usage(void)
{
    fprintf(stderr, "usage: cs_job [--mem-mb M] [--allocs K] [--iters N] [--kernel-ns NS] "
                    "[--seed S] [--streams K] [--copy-mb M] [--gap-ms G] [--sync-every N] "
                    "[--start-delay-ms D] [--submit-ns] [--until-file F] [--alloc-each] "
                    "[--device D | --devices LIST] [--peer-mb M] [--name NAME] [--json]\n");
    exit(2);
}

/* --devices LIST: comma-separated ordinals, each once (an empty item, as
 * in "0,", is refused like any other malformed number). */
static void parse_devices(char *list)
{
    o.ndev = 0;
    for (char *t = list, *comma; t; t = comma ? comma + 1 : NULL) {
        comma = strchr(t, ',');
        if (comma)
            *comma = 0;
        if (o.ndev == MAX_DEVICES)
            usage();
        int d = (int)parse_u64(t, "--devices");
        for (int k = 0; k < o.ndev; k++)
            if (o.devices[k] == d)
                usage();
        o.devices[o.ndev++] = d;
    }
}

/* What the options must satisfy together. */
static bool consistent(void)
{
    if (o.allocs < 1 || o.allocs > MAX_ALLOCS || o.streams < 1 || o.streams > MAX_STREAMS
        || o.mem_mb < 1 || (o.mem_mb << 20) / o.allocs < 4 || (o.until_file && o.submit_ns)
        || (o.device_set && o.devices_set))
        return false;
    /* The mirrors copy from one allocation: they must fit in it. */
    uint64_t alloc_bytes = (o.mem_mb << 20) / o.allocs / 4 * 4;
    return o.peer_mb == 0 || (o.ndev >= 2 && o.peer_mb <= alloc_bytes >> 20);
}

static void parse(int argc, char **argv)
{
    static const struct option lo[] = {
        { "mem-mb", 1, 0, 'm' }, { "allocs", 1, 0, 'a' }, { "iters", 1, 0, 'i' },
        { "kernel-ns", 1, 0, 'k' }, { "seed", 1, 0, 's' }, { "streams", 1, 0, 't' },
        { "copy-mb", 1, 0, 'c' }, { "gap-ms", 1, 0, 'g' }, { "device", 1, 0, 'd' },
        { "name", 1, 0, 'n' }, { "json", 0, 0, 'j' }, { "sync-every", 1, 0, 'y' },
        { "start-delay-ms", 1, 0, 'D' }, { "submit-ns", 0, 0, 'S' },
        { "until-file", 1, 0, 'u' }, { "devices", 1, 0, 'L' }, { "peer-mb", 1, 0, 'P' },
        { "alloc-each", 0, 0, 'A' }, { "help", 0, 0, 'h' }, { 0, 0, 0, 0 },
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
        case 'd':
            o.devices[0] = (int)parse_u64(optarg, "--device");
            o.device_set = true;
            break;
        case 'n': o.name = optarg; break;
        case 'j': o.json = true; break;
        case 'y': o.sync_every = parse_u64(optarg, "--sync-every"); break;
        case 'D': o.start_delay_ms = parse_u64(optarg, "--start-delay-ms"); break;
        case 'S': o.submit_ns = true; break;
        case 'u': o.until_file = optarg; break;
        case 'L':
            parse_devices(optarg);
            o.devices_set = true;
            break;
        case 'P': o.peer_mb = parse_u64(optarg, "--peer-mb"); break;
        case 'A': o.alloc_each = true; break;
        default: usage();
        }
    }
    if (optind != argc || !consistent())
        usage();
}

/* One device of the list. */
struct gpu {
    CUcontext ctx;
    struct fck k;                    /* the kernels, loaded in ctx */
    CUstream streams[MAX_STREAMS];
    CUdeviceptr ptr[MAX_ALLOCS];
    CUdeviceptr sums;                /* one uint64 per allocation */
    void *copy_host;
    CUdeviceptr copy_dev;
    CUdeviceptr mirror;              /* --peer-mb, on every device but the first */
};

struct job {
    struct gpu gpu[MAX_DEVICES];
    uint64_t n;                      /* uint32 elements per allocation */
    void *stage;                     /* pinned staging buffer */
    size_t copy_bytes, peer_bytes;
    uint64_t *submit;                /* --submit-ns: per iteration */
};

/* Makes the k-th device's context current and its kernels the helpers'.
 * A single-device job never switches, and makes no call for it. */
static void use_gpu(struct job *j, int k)
{
    if (o.ndev == 1)
        return;
    check(cuCtxSetCurrent(j->gpu[k].ctx), "cuCtxSetCurrent");
    fck_use(&j->gpu[k].k);
}

/* Allocation a of the k-th device, as pattern() and addend() number it. */
static uint64_t alloc_id(int k, uint64_t a)
{
    return (uint64_t)k * o.allocs + a;
}

/* Writes the pattern of every allocation of the k-th device through the
 * staging buffer (--alloc-each: allocating each first). */
static void fill_patterns(struct job *j, int k)
{
    uint64_t per_chunk = STAGE_BYTES / 4;
    uint32_t *h = j->stage;
    for (uint64_t a = 0; a < o.allocs; a++) {
        if (o.alloc_each)
            check(cuMemAlloc(&j->gpu[k].ptr[a], j->n * 4), "cuMemAlloc");
        for (uint64_t i0 = 0; i0 < j->n; i0 += per_chunk) {
            uint64_t cnt = j->n - i0 < per_chunk ? j->n - i0 : per_chunk;
            for (uint64_t i = 0; i < cnt; i++)
                h[i] = pattern(alloc_id(k, a), i0 + i);
            check(cuMemcpyHtoD(j->gpu[k].ptr[a] + i0 * 4, h, cnt * 4), "init-copy");
        }
    }
}

/* The k-th device: its context made current, its kernels, streams and
 * memory (the staging buffer once, with the first device's). */
static void setup_gpu(struct job *j, int k)
{
    struct gpu *g = &j->gpu[k];
    CUdevice dev;
    check(cuDeviceGet(&dev, o.devices[k]), "cuDeviceGet");
    check(cuDevicePrimaryCtxRetain(&g->ctx, dev), "cuDevicePrimaryCtxRetain");
    check(cuCtxSetCurrent(g->ctx), "cuCtxSetCurrent");
    check(fck_load(&g->k), "load-kernels");
    for (uint64_t s = 0; s < o.streams; s++)
        check(cuStreamCreate(&g->streams[s], CU_STREAM_DEFAULT), "cuStreamCreate");
    for (uint64_t a = 0; !o.alloc_each && a < o.allocs; a++)
        check(cuMemAlloc(&g->ptr[a], j->n * 4), "cuMemAlloc");
    check(cuMemAlloc(&g->sums, 8 * o.allocs), "cuMemAlloc");
    if (k == 0)
        check(cuMemAllocHost(&j->stage, STAGE_BYTES), "cuMemAllocHost");
    if (o.copy_mb) {
        check(cuMemAllocHost(&g->copy_host, j->copy_bytes), "cuMemAllocHost");
        check(cuMemAlloc(&g->copy_dev, j->copy_bytes), "cuMemAlloc");
        memset(g->copy_host, 0x5a, j->copy_bytes);
    }
    if (k > 0 && j->peer_bytes)
        check(cuMemAlloc(&g->mirror, j->peer_bytes), "cuMemAlloc");
}

static void setup(struct job *j)
{
    check(cuInit(0), "cuInit");
    j->n = ((o.mem_mb << 20) / o.allocs) / 4;
    j->copy_bytes = o.copy_mb << 20;
    j->peer_bytes = o.peer_mb << 20;
    for (int k = 0; k < o.ndev; k++)
        setup_gpu(j, k);
    for (int k = 0; k < o.ndev; k++) {
        use_gpu(j, k);
        fill_patterns(j, k);
    }
    if (o.submit_ns) {
        j->submit = calloc(o.iters ? o.iters : 1, sizeof *j->submit);
        if (!j->submit)
            finish_fail("out-of-host-memory");
    }
}

/* cuCtxSynchronize on every device (the current one alone for one). */
static void sync_all(struct job *j)
{
    for (int k = 0; k < o.ndev; k++) {
        use_gpu(j, k);
        check(cuCtxSynchronize(), "cuCtxSynchronize");
    }
}

/* --peer-mb: the first device's allocation 0 into every mirror, on the
 * first device's first stream, behind this iteration's fc_add32 there. */
static void copy_to_mirrors(struct job *j)
{
    struct gpu *src = &j->gpu[0];
    for (int k = 1; k < o.ndev && j->peer_bytes; k++)
        check(cuMemcpyPeerAsync(j->gpu[k].mirror, j->gpu[k].ctx, src->ptr[0], src->ctx,
                                j->peer_bytes, src->streams[0]),
              "cuMemcpyPeerAsync");
}

/* One iteration's GPU work on the k-th device (its context current). */
static void submit_gpu(struct job *j, int k, uint64_t it)
{
    struct gpu *g = &j->gpu[k];
    for (uint64_t a = 0; a < o.allocs; a++) {
        CUstream s = g->streams[a % o.streams];
        if (o.kernel_ns)
            check(fck_sleep(s, o.kernel_ns), "fc_sleep");
        check(fck_add32(s, g->ptr[a], j->n, addend(it, alloc_id(k, a))), "fc_add32");
    }
    if (k == 0)
        copy_to_mirrors(j);
    if (o.copy_mb) {
        check(cuMemcpyHtoDAsync(g->copy_dev, g->copy_host, j->copy_bytes, g->streams[0]), "copy-h2d");
        check(cuMemcpyDtoHAsync(g->copy_host, g->copy_dev, j->copy_bytes, g->streams[0]), "copy-d2h");
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
        for (int k = 0; k < o.ndev; k++) {
            use_gpu(j, k);
            submit_gpu(j, k, it);
        }
        if (o.gap_ms || (o.sync_every && (it + 1) % o.sync_every == 0))
            sync_all(j);
        if (o.gap_ms) {
            struct timespec ts = { (time_t)(o.gap_ms / 1000), (long)(o.gap_ms % 1000) * 1000000 };
            nanosleep(&ts, NULL);
        }
    }
    o.iters = it;
    sync_all(j);
}

/* A FAIL reason about allocation a of the k-th device: "alloc3:..." for a
 * single device, as always; "dev1:alloc3:..." with several. */
static void fail_alloc(int k, uint64_t a, const char *what, uint64_t got, uint64_t want)
{
    char dev[24] = "", reason[160];
    if (o.ndev > 1)
        snprintf(dev, sizeof dev, "dev%d:", o.devices[k]);
    snprintf(reason, sizeof reason, "%salloc%" PRIu64 ":%s=%" PRIu64 ",want=%" PRIu64, dev, a,
             what, got, want);
    finish_fail(reason);
}

/* Sums every allocation of the k-th device (its context current) on the
 * device and checks it against the host. */
static uint64_t verify_gpu(struct job *j, int k)
{
    struct gpu *g = &j->gpu[k];
    uint64_t got[MAX_ALLOCS], total = 0;
    check(cuMemsetD32(g->sums, 0, 2 * o.allocs), "cuMemsetD32");
    for (uint64_t a = 0; a < o.allocs; a++)
        check(fck_sum32(g->streams[a % o.streams], g->ptr[a], j->n, g->sums + 8 * a), "fc_sum32");
    check(cuCtxSynchronize(), "cuCtxSynchronize");
    check(cuMemcpyDtoH(got, g->sums, 8 * o.allocs), "sum-copy");
    for (uint64_t a = 0; a < o.allocs; a++) {
        uint32_t add = added(alloc_id(k, a));
        uint64_t want = 0;
        for (uint64_t i = 0; i < j->n; i++)
            want += (uint32_t)(pattern(alloc_id(k, a), i) + add);
        if (got[a] != want)
            fail_alloc(k, a, "sum", got[a], want);
        total += want;
    }
    return total;
}

/* The k-th device's mirror (its context current) against the first
 * device's allocation 0 as the host computes it, element by element. */
static void verify_mirror(struct job *j, int k)
{
    uint64_t per_chunk = STAGE_BYTES / 4, n = j->peer_bytes / 4;
    uint32_t *h = j->stage, add = added(alloc_id(0, 0));
    for (uint64_t i0 = 0; i0 < n; i0 += per_chunk) {
        uint64_t cnt = n - i0 < per_chunk ? n - i0 : per_chunk;
        check(cuMemcpyDtoH(h, j->gpu[k].mirror + i0 * 4, cnt * 4), "mirror-copy");
        for (uint64_t i = 0; i < cnt; i++) {
            uint32_t want = pattern(alloc_id(0, 0), i0 + i) + add;
            if (h[i] == want)
                continue;
            char reason[160];
            snprintf(reason, sizeof reason, "dev%d:mirror:element%" PRIu64 "=%" PRIu32
                     ",want=%" PRIu32, o.devices[k], i0 + i, h[i], want);
            finish_fail(reason);
        }
    }
}

static uint64_t verify(struct job *j)
{
    uint64_t total = 0;
    for (int k = 0; k < o.ndev; k++) {
        use_gpu(j, k);
        total += verify_gpu(j, k);
        if (k > 0 && j->peer_bytes)
            verify_mirror(j, k);
    }
    return total;
}

/* The result line's device list, with several devices: " devices=0,1"
 * (JSON: ",\"devices\":[0,1]"); empty for one. */
static void devices_field(char *buf, size_t size)
{
    buf[0] = 0;
    if (o.ndev == 1)
        return;
    size_t at = (size_t)snprintf(buf, size, o.json ? ",\"devices\":[" : " devices=");
    for (int k = 0; k < o.ndev && at < size; k++)
        at += (size_t)snprintf(buf + at, size - at, "%s%d", k ? "," : "", o.devices[k]);
    if (o.json && at < size)
        snprintf(buf + at, size - at, "]");
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    static struct job j;
    setup(&j);
    if (o.start_delay_ms) {
        sync_all(&j);
        ju_sleep_ms(o.start_delay_ms);
    }
    uint64_t t0 = ju_now_ms();
    run_iterations(&j);
    uint64_t elapsed = ju_now_ms() - t0;
    uint64_t sum = verify(&j);
    for (uint64_t it = 0; j.submit && it < o.iters; it++)
        printf("cs_job: submit iter=%" PRIu64 " ns=%" PRIu64 "\n", it, j.submit[it]);
    free(j.submit);
    char devs[96];
    devices_field(devs, sizeof devs);
    if (o.json)
        printf("{\"status\":\"ok\",\"name\":\"%s\",\"pid\":%d,\"iters\":%" PRIu64
               ",\"elapsed_ms\":%" PRIu64 ",\"sum\":%" PRIu64 "%s}\n",
               o.name, (int)getpid(), o.iters, elapsed, sum, devs);
    else
        printf("cs_job: ok name=%s pid=%d iters=%" PRIu64 " elapsed_ms=%" PRIu64 " sum=%" PRIu64 "%s\n",
               o.name, (int)getpid(), o.iters, elapsed, sum, devs);
    return 0;
}
