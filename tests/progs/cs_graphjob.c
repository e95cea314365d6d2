/* cs_graphjob: a driver-API job that builds CUDA graphs explicitly, for the
 * simulated GPU (tests/e2e/swap_graphs.sh) and a real one (bench/gpu/run.sh)
 * alike: calls that take addresses without running work, made while the
 * job's memory is off the GPU under cushare (issue 19).
 *
 *   cs_graphjob [--mb M] [--n N] [--iters I] [--seed S] [--kernel-ns NS]
 *               [--early-graphs G] [--swapped-graphs W] [--wait-s T]
 *               [--device D] [--name NAME]
 *
 * Allocates M MiB in N allocations (every fourth one 512 KiB, the rest
 * large and equal) and fills each with a pattern derived from S (below).
 * Each iteration `it` works on allocation a = it % N: it builds a graph
 * explicitly (an fc_sleep of NS if asked, then a memset of the scratch
 * buffer, a memcpy of a's first 64 KiB into the scratch, fc_add32 on all
 * of a after the copy, fc_sum32 of the scratch into an accumulator after
 * the copy), instantiates it, updates the instantiated memset's value and
 * kernel's addend (cuGraphExec*NodeSetParams), launches it; creates and
 * destroys a texture object on a; captures a copy of a's first 64 KiB and
 * its fc_sum32 by stream capture, instantiates and launches that; and
 * synchronizes. At the end every allocation's sum and the accumulator are
 * checked against the host's computation. Prints one JSON line:
 *   {"ok": true, "status": "ok", "name": .., "pid": .., "iters": ..,
 *    "graphs": .., "graphs_reserved": .., "graphs_swapped": ..,
 *    "graphs_off_gpu": .., "watch_builds": .., "elapsed_ms": .., "sum": ..}
 * or {"ok": false, "status": "fail", .., "reason": "CALL:ERROR"} with exit
 * status 1 (any CUresult error names the call).
 *
 * graphs_reserved / graphs_swapped / graphs_off_gpu count the graph builds
 * that began while some of the job's memory was allocated but not yet
 * placed / swapped out / either, as cushare's client API (cushare.h) says;
 * without cushare they are 0. Two options make such builds certain:
 *   --early-graphs G    builds the graphs of the first G iterations after
 *                       allocating and before any other GPU call: under
 *                       cushare the memory is not placed before the first
 *                       grant, which only GPU work asks for
 *   --swapped-graphs W  a second thread watches the job's memory and,
 *                       whenever some of it is swapped out while the job
 *                       waits for the GPU, builds, launches and checks a
 *                       graph of its own (memset, memcpy from a reference
 *                       buffer, fc_add32, fc_sum32 into its accumulator);
 *                       the job iterates past I until W such builds were
 *                       made, failing after T seconds (--wait-s, 120)
 *
 * The pattern: element i of allocation a is base(a, i mod 2^18) plus a
 * constant of its 1 MiB block (0 for the first), both below 2^24, so that
 * filling takes one 1 MiB upload, device copies and one fc_add32 per block,
 * and the host computes every sum in O(2^18) per allocation (addends stay
 * below 2^10 and iterations below 2^20: no element ever wraps).
 */
#include "fckern.h"
#include "jobutil.h"
#include "cushare.h"

#include <dlfcn.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_ALLOCS 4096
#define MAX_EARLY 64
#define MAX_ITERS (1u << 20)
#define BLOCK (1ull << 18)       /* elements of a pattern block (1 MiB) */
#define CHECK_N (16384ull)       /* elements copied and summed per graph (64 KiB) */
#define SMALL_BYTES (512ull << 10)
#define TEX_BYTES (1ull << 20)

struct opts {
    uint64_t mb, n, iters, seed, kernel_ns, early, swapped, wait_s;
    int device;
    const char *name;
};

static struct opts o = {.mb = 64, .n = 8, .iters = 10, .seed = 1, .wait_s = 120, .name = "graphjob"};

/* ---- results ------------------------------------------------------------- */

static void finish_fail(const char *reason)
{
    printf("{\"ok\": false, \"status\": \"fail\", \"name\": \"%s\", \"pid\": %d, "
           "\"reason\": \"%s\"}\n",
           o.name, (int)getpid(), reason);
    fflush(stdout);
    exit(1);
}

/* The failing call's name is the checked expression up to its '('. */
static void check(CUresult r, const char *expr)
{
    if (r == CUDA_SUCCESS)
        return;
    const char *err = NULL;
    cuGetErrorName(r, &err);
    char reason[160];
    snprintf(reason, sizeof reason, "%.*s:%s", (int)strcspn(expr, "("), expr, err ? err : "unknown");
    finish_fail(reason);
}
#define CK(call) check((call), #call)

/* ---- the pattern -------------------------------------------------------------- */

static uint32_t base(uint64_t a, uint64_t j)
{
    return ju_mix32(o.seed * 0x9e3779b97f4a7c15ull + a * 0x100000001b3ull + j) & 0xffffff;
}

static uint32_t block_const(uint64_t a, uint64_t b)
{
    return b ? ju_mix32(o.seed ^ (a << 40) ^ (b * 0x2545f4914f6cdd1dull)) & 0xffffff : 0;
}

static uint32_t addend(uint64_t it)
{
    return (ju_mix32(o.seed ^ (it << 20) ^ 0xadd) & 0x3ff) | 1;
}

static uint32_t set_value(uint64_t it)
{
    return ju_mix32(o.seed ^ (it << 24) ^ 0x5e7) & 0xffffff;
}

/* Sum of base(a, j) for j < len (len <= BLOCK). */
static uint64_t base_sum(uint64_t a, uint64_t len)
{
    uint64_t s = 0;
    for (uint64_t j = 0; j < len; j++)
        s += base(a, j);
    return s;
}

/* ---- the job ---------------------------------------------------------------------- */

struct job {
    CUcontext ctx;
    CUstream st;
    struct fck k;
    CUdeviceptr ptr[MAX_ALLOCS];
    uint64_t elems[MAX_ALLOCS];  /* uint32 elements of each allocation */
    uint64_t filled[MAX_ALLOCS]; /* sum of its pattern */
    uint64_t head[MAX_ALLOCS];   /* sum of its first CHECK_N elements' pattern */
    uint64_t added[MAX_ALLOCS];  /* added to each element so far (< 2^30) */
    CUdeviceptr scratch;         /* 2 x CHECK_N: the graphs' memset and copy */
    CUdeviceptr cap;             /* CHECK_N: the captured copy */
    CUdeviceptr accs;            /* two uint64: the iterations', the watcher's */
    CUdeviceptr sums;            /* one uint64 per allocation */
    uint64_t want_acc;           /* what accs[0] must hold */
    uint32_t *stage;             /* pinned, BLOCK elements */
    CUgraph early_g[MAX_EARLY];
    CUgraphExec early_x[MAX_EARLY];
    CUgraphNode early_set[MAX_EARLY], early_add[MAX_EARLY];
    /* graph builds (count_build): both threads count */
    _Atomic uint64_t graphs, graphs_reserved, graphs_swapped, graphs_off;
};

static int (*get_stats)(int, struct cushare_stats *);

/* Where the job's memory is, as cushare says (all 0 without it). */
static struct cushare_stats stats_now(void)
{
    struct cushare_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    if (get_stats && get_stats(o.device, &s) != 0)
        memset(&s, 0, sizeof s);
    return s;
}

/* Counts a graph build that begins now. */
static void count_build(struct job *j)
{
    struct cushare_stats s = stats_now();
    j->graphs++;
    j->graphs_reserved += s.mem_reserved != 0;
    j->graphs_swapped += s.mem_swapped != 0;
    j->graphs_off += s.mem_reserved != 0 || s.mem_swapped != 0;
}

/* ---- graph nodes ---------------------------------------------------------------- */



static CUgraphNode kernel_node(CUgraph g, CUgraphNode dep, CUfunction f, uint64_t n,
                               void **params)
{
    CUDA_KERNEL_NODE_PARAMS kp = fck_node_params(f, n, params);
    CUgraphNode node;
    CK(cuGraphAddKernelNode(&node, g, &dep, 1, &kp));
    return node;
}

static CUgraphNode add32_node(struct job *j, CUgraph g, CUgraphNode dep, CUdeviceptr p,
                              uint64_t n, uint32_t v)
{
    void *params[] = {&p, &n, &v};
    return kernel_node(g, dep, j->k.add32, n, params);
}

static CUgraphNode sum32_node(struct job *j, CUgraph g, CUgraphNode dep, CUdeviceptr p,
                              uint64_t n, CUdeviceptr out)
{
    void *params[] = {&p, &n, &out};
    return kernel_node(g, dep, j->k.sum32, n, params);
}

/* The copy-check graph both threads build: [sleep] -> memset dst[0..2K) to
 * v -> copy src[0..K) to dst[K..2K) -> (fc_add32 of add_n elements at
 * add_p by add_v, fc_sum32 of dst into out). Returns the memset and add
 * nodes. */
struct check_graph {
    CUdeviceptr dst, src, add_p, out;
    uint64_t add_n;
    uint32_t v, add_v;
};

static CUgraph build_graph(struct job *j, const struct check_graph *c, CUgraphNode *set,
                           CUgraphNode *add)
{
    CUgraph g;
    CUgraphNode prev = NULL, n;
    CK(cuGraphCreate(&g, 0));
    if (o.kernel_ns) {
        uint64_t ns = o.kernel_ns;
        void *params[] = {&ns};
        CUDA_KERNEL_NODE_PARAMS kp = fck_node_params(j->k.sleep, 0, params);
        CK(cuGraphAddKernelNode(&prev, g, NULL, 0, &kp));
    }
    CUDA_MEMSET_NODE_PARAMS m = fck_memset32_params(c->dst, 2 * CHECK_N, c->v);
    CK(cuGraphAddMemsetNode(set, g, prev ? &prev : NULL, prev ? 1 : 0, &m, j->ctx));
    CUDA_MEMCPY3D cp = fck_copy_params(c->dst + CHECK_N * 4, c->src, CHECK_N * 4);
    CK(cuGraphAddMemcpyNode(&n, g, set, 1, &cp, j->ctx));
    *add = add32_node(j, g, n, c->add_p, c->add_n, c->add_v);
    sum32_node(j, g, n, c->dst, 2 * CHECK_N, c->out);
    return g;
}

/* The iteration's graph, built with a memset value and addend that the
 * update before its launch replaces. */
static void build_iteration(struct job *j, uint64_t it, CUgraph *g, CUgraphExec *x,
                            CUgraphNode *set, CUgraphNode *add)
{
    uint64_t a = it % o.n;
    struct check_graph c = {.dst = j->scratch, .src = j->ptr[a], .add_p = j->ptr[a],
                            .out = j->accs, .add_n = j->elems[a], .v = 0, .add_v = 0};
    count_build(j);
    *g = build_graph(j, &c, set, add);
    CK(cuGraphInstantiate(x, *g, 0));
}

/* ---- setup --------------------------------------------------------------------------- */

static uint64_t alloc_bytes(uint64_t a)
{
    uint64_t nsmall = o.n / 4, nlarge = o.n - nsmall;
    if (a % 4 == 3)
        return SMALL_BYTES;
    return ((o.mb << 20) - nsmall * SMALL_BYTES) / nlarge / (64 << 10) * (64 << 10);
}

static void open_device(struct job *j)
{
    CUdevice dev;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, o.device));
    CK(cuDevicePrimaryCtxRetain(&j->ctx, dev));
    CK(cuCtxSetCurrent(j->ctx));
    CK(fck_load(&j->k));
    CK(cuStreamCreate(&j->st, CU_STREAM_NON_BLOCKING));
    *(void **)&get_stats = dlsym(RTLD_DEFAULT, "cushare_get_stats");
}

static void allocate(struct job *j)
{
    for (uint64_t a = 0; a < o.n; a++) {
        j->elems[a] = alloc_bytes(a) / 4;
        CK(cuMemAlloc(&j->ptr[a], alloc_bytes(a)));
    }
    CK(cuMemAlloc(&j->scratch, 2 * CHECK_N * 4));
    CK(cuMemAlloc(&j->cap, CHECK_N * 4));
    CK(cuMemAlloc(&j->accs, 2 * sizeof(uint64_t)));
    CK(cuMemAlloc(&j->sums, o.n * sizeof(uint64_t)));
    CK(cuMemAllocHost((void **)&j->stage, BLOCK * 4));
}

/* Allocation a's pattern: its first block uploaded, doubled by device
 * copies, each further block raised by its constant. Records its sums. */
static void fill(struct job *j, uint64_t a)
{
    uint64_t n = j->elems[a], first = n < BLOCK ? n : BLOCK;
    for (uint64_t i = 0; i < first; i++)
        j->stage[i] = base(a, i);
    CK(cuMemcpyHtoDAsync(j->ptr[a], j->stage, first * 4, j->st));
    for (uint64_t done = first; done < n;) {
        uint64_t cnt = done < n - done ? done : n - done;
        CK(cuMemcpyDtoDAsync(j->ptr[a] + done * 4, j->ptr[a], cnt * 4, j->st));
        done += cnt;
    }
    uint64_t whole = base_sum(a, first), sum = 0;
    for (uint64_t b = 0; b * BLOCK < n; b++) {
        uint64_t len = n - b * BLOCK < BLOCK ? n - b * BLOCK : BLOCK;
        if (b)
            CK(fck_add32(j->st, j->ptr[a] + b * BLOCK * 4, len, block_const(a, b)));
        sum += (len == BLOCK ? whole : base_sum(a, len)) + len * block_const(a, b);
    }
    j->filled[a] = sum;
    j->head[a] = base_sum(a, CHECK_N);
    CK(cuStreamSynchronize(j->st)); /* the stage is reused */
}

/* ---- iterations -------------------------------------------------------------------------- */

static void texture(struct job *j, uint64_t a)
{
    CUDA_RESOURCE_DESC rd;
    memset(&rd, 0, sizeof rd);
    rd.resType = CU_RESOURCE_TYPE_LINEAR;
    rd.res.linear.devPtr = j->ptr[a];
    rd.res.linear.format = CU_AD_FORMAT_UNSIGNED_INT32;
    rd.res.linear.numChannels = 1;
    rd.res.linear.sizeInBytes = j->elems[a] * 4 < TEX_BYTES ? j->elems[a] * 4 : TEX_BYTES;
    CUDA_TEXTURE_DESC td;
    memset(&td, 0, sizeof td);
    CUtexObject tex;
    CK(cuTexObjectCreate(&tex, &rd, &td, NULL));
    CK(cuTexObjectDestroy(tex));
}

/* Captures a copy of a's first CHECK_N elements and their sum into the
 * accumulator; instantiates and launches it. */
static void captured_copy(struct job *j, uint64_t a)
{
    CUgraph g;
    CUgraphExec x;
    CK(cuStreamBeginCapture(j->st, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CK(cuMemcpyDtoDAsync(j->cap, j->ptr[a], CHECK_N * 4, j->st));
    CK(fck_sum32(j->st, j->cap, CHECK_N, j->accs));
    CK(cuStreamEndCapture(j->st, &g));
    CK(cuGraphInstantiate(&x, g, 0));
    CK(cuGraphLaunch(x, j->st));
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
}

static void iterate(struct job *j, uint64_t it)
{
    uint64_t a = it % o.n;
    CUgraph g;
    CUgraphExec x;
    CUgraphNode set, add;
    if (it < o.early) {
        g = j->early_g[it];
        x = j->early_x[it];
        set = j->early_set[it];
        add = j->early_add[it];
    } else {
        build_iteration(j, it, &g, &x, &set, &add);
    }
    CUDA_MEMSET_NODE_PARAMS m = fck_memset32_params(j->scratch, 2 * CHECK_N, set_value(it));
    CK(cuGraphExecMemsetNodeSetParams(x, set, &m, j->ctx));
    CUdeviceptr p = j->ptr[a];
    uint64_t n = j->elems[a];
    uint32_t v = addend(it);
    void *params[] = {&p, &n, &v};
    CUDA_KERNEL_NODE_PARAMS kp = fck_node_params(j->k.add32, n, params);
    CK(cuGraphExecKernelNodeSetParams(x, add, &kp));
    CK(cuGraphLaunch(x, j->st));
    texture(j, a);
    captured_copy(j, a);
    CK(cuStreamSynchronize(j->st));
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    /* memset K values, copy of the head before the add; the capture's
     * copy of the head after it */
    j->want_acc += CHECK_N * set_value(it) + j->head[a] + CHECK_N * j->added[a];
    j->added[a] += v;
    j->want_acc += j->head[a] + CHECK_N * j->added[a];
}

/* ---- the watcher (--swapped-graphs) ----------------------------------------------------- */

struct watch {
    struct job *j;
    CUstream st;
    CUdeviceptr buf, ref; /* its own 2K scratch; a K reference nobody writes */
    uint64_t ref_sum;
    uint64_t want, builds; /* the watcher's thread; read by main after the join */
    _Atomic bool stop;
    _Atomic uint64_t done; /* builds made, for the main loop */
};

/* Swapped out while the job waits for the GPU (its main thread is then
 * blocked in a call that needs it). */
static bool swapped_and_waiting(void)
{
    struct cushare_stats s = stats_now();
    return s.mem_swapped != 0 && s.state == CUSHARE_LEASE_WAITING;
}

static void watch_build(struct watch *w)
{
    struct job *j = w->j;
    uint32_t v = set_value(1000000 + w->builds);
    struct check_graph c = {.dst = w->buf, .src = w->ref, .add_p = w->buf, .out = j->accs + 8,
                            .add_n = 2 * CHECK_N, .v = v, .add_v = 1};
    CUgraphNode set, add;
    count_build(j);
    CUgraph g = build_graph(j, &c, &set, &add);
    CUgraphExec x;
    CK(cuGraphInstantiate(&x, g, 0));
    CK(cuGraphLaunch(x, w->st));
    CK(cuStreamSynchronize(w->st));
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    /* the sum follows the add: every element one more */
    w->want += CHECK_N * (uint64_t)v + w->ref_sum + 2 * CHECK_N;
    w->builds++;
    atomic_store(&w->done, w->builds);
}

static void *watcher(void *arg)
{
    struct watch *w = arg;
    CK(cuCtxSetCurrent(w->j->ctx));
    while (!atomic_load(&w->stop)) {
        if (swapped_and_waiting())
            watch_build(w);
        else
            ju_sleep_ms(1);
    }
    return NULL;
}

static void watch_start(struct job *j, struct watch *w, pthread_t *t)
{
    w->j = j;
    CK(cuStreamCreate(&w->st, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&w->buf, 2 * CHECK_N * 4));
    CK(cuMemAlloc(&w->ref, CHECK_N * 4));
    for (uint64_t i = 0; i < CHECK_N; i++)
        j->stage[i] = base(o.n, i); /* the pattern of an allocation past the last */
    CK(cuMemcpyHtoDAsync(w->ref, j->stage, CHECK_N * 4, j->st));
    CK(cuStreamSynchronize(j->st));
    w->ref_sum = base_sum(o.n, CHECK_N);
    if (pthread_create(t, NULL, watcher, w) != 0)
        finish_fail("pthread_create");
}

/* ---- main ---------------------------------------------------------------------------------- */

static uint64_t parse_u64(const char *s, const char *opt)
{
    return ju_parse_u64("cs_graphjob", s, opt);
}

static void usage(void)
{
    fprintf(stderr, "usage: cs_graphjob [--mb M] [--n N] [--iters I] [--seed S] [--kernel-ns NS] "
                    "[--early-graphs G] [--swapped-graphs W] [--wait-s T] [--device D] "
                    "[--name NAME]\n");
    exit(2);
}

static void parse(int argc, char **argv)
{
    static const struct option lo[] = {
        {"mb", 1, 0, 'm'}, {"n", 1, 0, 'n'}, {"iters", 1, 0, 'i'}, {"seed", 1, 0, 's'},
        {"kernel-ns", 1, 0, 'k'}, {"early-graphs", 1, 0, 'e'}, {"swapped-graphs", 1, 0, 'w'},
        {"wait-s", 1, 0, 't'}, {"device", 1, 0, 'd'}, {"name", 1, 0, 'N'}, {"help", 0, 0, 'h'},
        {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'm': o.mb = parse_u64(optarg, "--mb"); break;
        case 'n': o.n = parse_u64(optarg, "--n"); break;
        case 'i': o.iters = parse_u64(optarg, "--iters"); break;
        case 's': o.seed = parse_u64(optarg, "--seed"); break;
        case 'k': o.kernel_ns = parse_u64(optarg, "--kernel-ns"); break;
        case 'e': o.early = parse_u64(optarg, "--early-graphs"); break;
        case 'w': o.swapped = parse_u64(optarg, "--swapped-graphs"); break;
        case 't': o.wait_s = parse_u64(optarg, "--wait-s"); break;
        case 'd': o.device = (int)parse_u64(optarg, "--device"); break;
        case 'N': o.name = optarg; break;
        default: usage();
        }
    }
    /* Large allocations of at least 2 MiB (a segment of their own under
     * cushare), every one holding the checked head. */
    if (optind != argc || o.n < 1 || o.n > MAX_ALLOCS || o.early > MAX_EARLY ||
        o.early > o.iters || o.iters > MAX_ITERS || o.mb > (1ull << 30) ||
        alloc_bytes(0) < (2ull << 20))
        usage();
}

static uint64_t verify(struct job *j, const struct watch *w)
{
    uint64_t got[2], total = 0;
    for (uint64_t a = 0; a < o.n; a++)
        CK(cuMemsetD32Async(j->sums + 8 * a, 0, 2, j->st));
    for (uint64_t a = 0; a < o.n; a++)
        CK(fck_sum32(j->st, j->ptr[a], j->elems[a], j->sums + 8 * a));
    CK(cuStreamSynchronize(j->st));
    for (uint64_t a = 0; a < o.n; a++) {
        uint64_t sum, want = j->filled[a] + j->elems[a] * j->added[a];
        CK(cuMemcpyDtoH(&sum, j->sums + 8 * a, sizeof sum));
        if (sum != want) {
            char reason[128];
            snprintf(reason, sizeof reason, "alloc%" PRIu64 ":sum=%" PRIu64 ",want=%" PRIu64, a,
                     sum, want);
            finish_fail(reason);
        }
        total += want;
    }
    CK(cuMemcpyDtoH(got, j->accs, sizeof got));
    if (got[0] != j->want_acc)
        finish_fail("graph-copies:accumulator-differs");
    if (got[1] != w->want)
        finish_fail("watcher-graphs:accumulator-differs");
    return total + got[0] + got[1];
}

/* Iterates I times, and on while the watcher owes builds. */
static uint64_t run(struct job *j, struct watch *w)
{
    uint64_t it, deadline = ju_now_ms() + o.wait_s * 1000;
    for (it = 0; it < o.iters || atomic_load(&w->done) < o.swapped; it++) {
        if (it >= MAX_ITERS)
            finish_fail("too-many-iterations");
        if (it >= o.iters && ju_now_ms() > deadline)
            finish_fail("no-build-while-swapped:timeout");
        iterate(j, it);
    }
    return it;
}

int main(int argc, char **argv)
{
    parse(argc, argv);
    static struct job j;
    static struct watch w;
    open_device(&j);
    if (o.swapped && !get_stats)
        finish_fail("--swapped-graphs:not-under-cushare");
    allocate(&j);
    for (uint64_t it = 0; it < o.early; it++)
        build_iteration(&j, it, &j.early_g[it], &j.early_x[it], &j.early_set[it],
                        &j.early_add[it]);
    for (uint64_t a = 0; a < o.n; a++)
        fill(&j, a);
    CK(cuMemsetD32Async(j.accs, 0, 4, j.st));
    CK(cuStreamSynchronize(j.st));
    pthread_t t;
    if (o.swapped)
        watch_start(&j, &w, &t);
    uint64_t t0 = ju_now_ms();
    uint64_t iters = run(&j, &w);
    uint64_t elapsed = ju_now_ms() - t0;
    if (o.swapped) {
        atomic_store(&w.stop, true);
        pthread_join(t, NULL);
    }
    uint64_t sum = verify(&j, &w);
    printf("{\"ok\": true, \"status\": \"ok\", \"name\": \"%s\", \"pid\": %d, \"iters\": %" PRIu64
           ", \"graphs\": %" PRIu64 ", \"graphs_reserved\": %" PRIu64 ", \"graphs_swapped\": %" PRIu64
           ", \"graphs_off_gpu\": %" PRIu64 ", \"watch_builds\": %" PRIu64
           ", \"elapsed_ms\": %" PRIu64 ", \"sum\": %" PRIu64 "}\n",
           o.name, (int)getpid(), iters, j.graphs, j.graphs_reserved, j.graphs_swapped, j.graphs_off,
           w.builds, elapsed, sum);
    return 0;
}
