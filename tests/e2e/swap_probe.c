/* swap_probe: driver-API helper of the swap end-to-end tests
 * (tests/e2e/swap_*.sh). Runs on the simulated driver or a real GPU.
 *
 *   swap_probe free [--device D]
 *       Prints "free=<bytes> total=<bytes>" from cuMemGetInfo, in a
 *       primary context of its own (its cost is in `free`, the same every
 *       time). Run without the hook: the simulator's free capacity, e.g.
 *       before and after a test to find leaked device memory.
 *
 *   swap_probe vmm-poison [--mem-mb M]
 *       What a missing restore would look like, without the hook: writes a
 *       pattern into VMM memory at a reserved address, unmaps and releases
 *       it, creates and maps new memory at the same address (what a swap-in
 *       does before its copy) and requires that it reads the simulator's
 *       poison 0xFB everywhere and none of the pattern. Prints
 *       "swap_probe: ok vmm-poison ...".
 *
 *   swap_probe poison [--mem-mb M] [--allocs K] [--cycles N] [--seed S]
 *                     [--timeout-ms T]
 *       Under libcushare.so, next to jobs that need the GPU's memory:
 *       fills M MiB (K allocations) with a pattern, then N times: stays off
 *       the GPU (no CUDA call) until cushare_get_stats shows that its
 *       memory was swapped out again, then checks every byte of it against
 *       the pattern (reading it back brings it in: a restore), and checks
 *       that a fresh allocation reads 0xFB everywhere (so a segment mapped
 *       back without its copy would have been caught by the pattern check).
 *       Prints "swap_probe: ok poison cycles=N swap_outs=.. swap_ins=..",
 *       or "swap_probe: FAIL ..." with exit status 1.
 */
#include "../progs/fckern.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cushare.h"

#define POISON 0xFB
#define MAX_ALLOCS 64

static struct {
    uint64_t mem_mb, allocs, cycles, seed, timeout_ms;
    int device;
} o = {.mem_mb = 32, .allocs = 4, .cycles = 3, .seed = 1, .timeout_ms = 30000};

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("swap_probe: FAIL ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    exit(1);
}

static void ck(CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS)
        return;
    const char *name = NULL;
    cuGetErrorName(r, &name);
    fail("%s: %s", what, name ? name : "?");
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint8_t pattern(uint64_t a, uint64_t i)
{
    uint64_t x = (o.seed * 0x9e3779b97f4a7c15ull) ^ (a << 40) ^ i;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    uint8_t v = (uint8_t)x;
    return v == POISON ? 0x5a : v; /* never the poison byte */
}

static void context(void)
{
    CUdevice dev;
    CUcontext ctx;
    ck(cuInit(0), "cuInit");
    ck(cuDeviceGet(&dev, o.device), "cuDeviceGet");
    ck(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
    ck(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
}

static int cmd_free(void)
{
    context();
    size_t fr = 0, tot = 0;
    ck(cuMemGetInfo(&fr, &tot), "cuMemGetInfo");
    printf("free=%zu total=%zu\n", fr, tot);
    return 0;
}

static int cmd_vmm_poison(void)
{
    context();
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE,
                                             .id = o.device}};
    size_t gran = 0;
    ck(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
       "granularity");
    size_t size = ((o.mem_mb << 20) + gran - 1) / gran * gran;
    CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUdeviceptr va;
    ck(cuMemAddressReserve(&va, size, gran, 0, 0), "cuMemAddressReserve");
    uint8_t *h = malloc(size);
    if (!h)
        fail("out of host memory");
    for (int round = 0; round < 2; round++) {
        CUmemGenericAllocationHandle mh;
        ck(cuMemCreate(&mh, size, &prop, 0), "cuMemCreate");
        ck(cuMemMap(va, size, 0, mh, 0), "cuMemMap");
        ck(cuMemSetAccess(va, size, &acc, 1), "cuMemSetAccess");
        ck(cuMemcpyDtoH(h, va, size), "read");
        for (size_t i = 0; i < size; i++)
            if (h[i] != POISON)
                fail("vmm-poison: round %d byte %zu reads 0x%02x, not the poison 0x%02x", round,
                     i, h[i], POISON);
        if (round == 0) { /* the data a swap-out would save, then release */
            for (size_t i = 0; i < size; i++)
                h[i] = pattern(0, i);
            ck(cuMemcpyHtoD(va, h, size), "write");
        }
        ck(cuMemUnmap(va, size), "cuMemUnmap");
        ck(cuMemRelease(mh), "cuMemRelease");
    }
    ck(cuMemAddressFree(va, size), "cuMemAddressFree");
    free(h);
    printf("swap_probe: ok vmm-poison bytes=%zu (memory re-created at the same address "
           "without a copy reads 0x%02x, never the old data)\n",
           size, POISON);
    return 0;
}

typedef int (*stats_fn)(int, struct cushare_stats *);

static struct cushare_stats stats(stats_fn fn)
{
    struct cushare_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    if (fn(o.device, &s) != 0)
        fail("cushare_get_stats failed");
    return s;
}

static void check_pattern(CUdeviceptr *p, uint64_t per, uint8_t *h, int cycle)
{
    for (uint64_t a = 0; a < o.allocs; a++) {
        ck(cuMemcpyDtoH(h, p[a], per), "read back");
        for (uint64_t i = 0; i < per; i++) {
            if (h[i] != pattern(a, i))
                fail("cycle %d: allocation %" PRIu64 " byte %" PRIu64 " reads 0x%02x, want "
                     "0x%02x%s",
                     cycle, a, i, h[i], pattern(a, i),
                     h[i] == POISON ? " (poison: memory came back without its data)" : "");
        }
    }
}

static void check_fresh(uint64_t per, uint8_t *h, int cycle)
{
    CUdeviceptr f;
    ck(cuMemAlloc(&f, per), "fresh cuMemAlloc");
    ck(cuMemcpyDtoH(h, f, per), "fresh read");
    for (uint64_t i = 0; i < per; i++)
        if (h[i] != POISON)
            fail("cycle %d: fresh memory byte %" PRIu64 " reads 0x%02x, not the poison 0x%02x",
                 cycle, i, h[i], POISON);
    ck(cuMemFree(f), "fresh cuMemFree");
}

static int cmd_poison(void)
{
    stats_fn get = (stats_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "cushare_get_stats");
    if (!get)
        fail("not running under libcushare.so (no cushare_get_stats)");
    if (o.allocs < 1 || o.allocs > MAX_ALLOCS)
        fail("--allocs must be 1..%d", MAX_ALLOCS);
    context();
    uint64_t per = (o.mem_mb << 20) / o.allocs;
    CUdeviceptr p[MAX_ALLOCS];
    uint8_t *h = malloc(per);
    if (!h)
        fail("out of host memory");
    for (uint64_t a = 0; a < o.allocs; a++) {
        ck(cuMemAlloc(&p[a], per), "cuMemAlloc");
        for (uint64_t i = 0; i < per; i++)
            h[i] = pattern(a, i);
        ck(cuMemcpyHtoD(p[a], h, per), "fill");
    }
    ck(cuCtxSynchronize(), "cuCtxSynchronize");
    /* The count a cycle waits to see grow is taken as soon as the pattern
     * is on the GPU (filled, or just read back), not when the cycle starts:
     * a revoke may come while check_fresh's host loop runs (its memory is
     * idle by then), and a swap-out finished before the cycle looked would
     * otherwise leave it waiting for another that nobody asks for. */
    uint64_t outs = stats(get).swap_outs;
    check_fresh(per, h, 0);
    printf("swap_probe: filled %" PRIu64 " MiB\n", o.mem_mb);
    fflush(stdout);
    for (uint64_t c = 1; c <= o.cycles; c++) {
        /* Off the GPU until the others have pushed our memory out. */
        uint64_t deadline = now_ms() + o.timeout_ms;
        for (;;) {
            struct cushare_stats s = stats(get);
            if (s.swap_outs > outs || (s.mem_swapped > 0 && s.mem_resident == 0))
                break;
            if (now_ms() > deadline)
                fail("cycle %" PRIu64 ": not swapped out within %" PRIu64 " ms (resident %llu, "
                     "swapped %llu)",
                     c, o.timeout_ms, s.mem_resident, s.mem_swapped);
            usleep(5000);
        }
        struct cushare_stats before = stats(get);
        check_pattern(p, per, h, (int)c);
        outs = stats(get).swap_outs;
        check_fresh(per, h, (int)c);
        struct cushare_stats after = stats(get);
        printf("swap_probe: cycle %" PRIu64 " ok (swapped %llu bytes before, %llu swap-ins "
               "after)\n",
               c, before.mem_swapped, after.swap_ins);
        fflush(stdout);
    }
    struct cushare_stats s = stats(get);
    for (uint64_t a = 0; a < o.allocs; a++)
        ck(cuMemFree(p[a]), "cuMemFree");
    free(h);
    printf("swap_probe: ok poison cycles=%" PRIu64 " swap_outs=%llu swap_ins=%llu "
           "swapped_out_bytes=%llu\n",
           o.cycles, s.swap_outs, s.swap_ins, s.swap_out_bytes);
    return 0;
}

static uint64_t num(const char *s, const char *opt)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || s[0] == '-') {
        fprintf(stderr, "swap_probe: %s needs a non-negative integer\n", opt);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"mem-mb", 1, 0, 'm'}, {"allocs", 1, 0, 'a'},     {"cycles", 1, 0, 'c'},
        {"seed", 1, 0, 's'},   {"timeout-ms", 1, 0, 't'}, {"device", 1, 0, 'd'},
        {0, 0, 0, 0},
    };
    if (argc < 2) {
        fprintf(stderr, "usage: swap_probe free|vmm-poison|poison [options]\n");
        return 2;
    }
    const char *cmd = argv[1];
    optind = 2;
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'm': o.mem_mb = num(optarg, "--mem-mb"); break;
        case 'a': o.allocs = num(optarg, "--allocs"); break;
        case 'c': o.cycles = num(optarg, "--cycles"); break;
        case 's': o.seed = num(optarg, "--seed"); break;
        case 't': o.timeout_ms = num(optarg, "--timeout-ms"); break;
        case 'd': o.device = (int)num(optarg, "--device"); break;
        default: return 2;
        }
    }
    if (o.mem_mb < 1) {
        fprintf(stderr, "swap_probe: --mem-mb must be at least 1\n");
        return 2;
    }
    if (strcmp(cmd, "free") == 0)
        return cmd_free();
    if (strcmp(cmd, "vmm-poison") == 0)
        return cmd_vmm_poison();
    if (strcmp(cmd, "poison") == 0)
        return cmd_poison();
    fprintf(stderr, "swap_probe: unknown command '%s'\n", cmd);
    return 2;
}
