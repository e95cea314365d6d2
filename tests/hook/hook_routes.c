/* hook_routes.c: every way a program reaches the driver lands on the hook.
 *
 * Three routes: direct linking (the preloaded definition wins), dlsym on the
 * libcuda handle (the dlsym override), and cuGetProcAddress with the
 * version and flags a caller asks for. For every symbol the hook defines,
 * routes 2 and 3 must hand back exactly that symbol's wrapper (checked with
 * dladdr); for unhooked names, the driver's own function. Then one call of
 * each work-submitting family through each route must pass the gate exactly
 * once (the gate's call counter, read through cushare_get_stats).
 */
#include "hooktest.h"

#include <dlfcn.h>
#include <string.h>

/* Per-thread-stream symbols: cuda.h declares them only for programs built
 * with CUDA_API_PER_THREAD_DEFAULT_STREAM; a test that calls both forms
 * declares these itself. */
CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                     unsigned int gz, unsigned int bx, unsigned int by,
                                     unsigned int bz, unsigned int shmem, CUstream s,
                                     void **params, void **extra);
CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n);
CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n,
                                           CUstream s);
typedef CUresult(CUDAAPI *gpa_v1_fn)(const char *, void **, int, cuuint64_t);

static void *libcuda;

static const char *const hooked[] = {
#define CS_HOOK(s) #s,
#include "hook/hook_symbols.h"
#undef CS_HOOK
};

struct api_row {
    const char *api, *sym;
    int version;
    int variant; /* 0 none, 1 ptds, 2 ptsz */
};
#define V_NONE 0
#define V_PTDS 1
#define V_PTSZ 2
static const struct api_row rows[] = {
#define CS_API(api, sym, ver, var) {#api, #sym, ver, V_##var},
#define CS_API_SYMBOL(s)
#include "common/cuda_api_table.h"
#undef CS_API
#undef CS_API_SYMBOL
};

static bool is_hooked(const char *sym)
{
    for (size_t i = 0; i < sizeof hooked / sizeof hooked[0]; i++)
        if (!strcmp(hooked[i], sym))
            return true;
    return false;
}

/* Asserts that fn is `sym` as defined by libcushare.so (want_hook) or by
 * the driver. */
static void assert_symbol(void *fn, const char *sym, bool want_hook, const char *route)
{
    Dl_info info;
    if (!fn || !dladdr(fn, &info) || !info.dli_sname)
        fail_msg("%s: %s resolved to %p, which dladdr does not know", route, sym, fn);
    bool in_hook = strstr(info.dli_fname, "libcushare.so") != NULL;
    if (in_hook != want_hook || strcmp(info.dli_sname, sym) != 0)
        fail_msg("%s: %s resolved to %s in %s, expected %s in %s", route, sym, info.dli_sname,
                 info.dli_fname, sym, want_hook ? "libcushare.so" : "the driver");
}

static int setup(void **state)
{
    (void)state;
    ht_context();
    libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(libcuda);
    return 0;
}

/* ---- pointer identity --------------------------------------------------- */

static void dlsym_returns_every_wrapper(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof hooked / sizeof hooked[0]; i++)
        assert_symbol(dlsym(libcuda, hooked[i]), hooked[i], true, "dlsym");
    /* Also through RTLD_DEFAULT, and an unhooked name stays the driver's. */
    assert_symbol(dlsym(RTLD_DEFAULT, "cuLaunchKernel"), "cuLaunchKernel", true, "RTLD_DEFAULT");
    assert_symbol(dlsym(libcuda, "cuCtxGetCurrent"), "cuCtxGetCurrent", false, "dlsym");
    assert_null(dlsym(libcuda, "cuNoSuchFunction"));
}

static void direct_linking_reaches_wrappers(void **state)
{
    (void)state;
    assert_symbol((void *)&cuLaunchKernel, "cuLaunchKernel", true, "direct");
    assert_symbol((void *)&cuMemAlloc_v2, "cuMemAlloc_v2", true, "direct");
    assert_symbol((void *)&cuMemcpyHtoDAsync_v2_ptsz, "cuMemcpyHtoDAsync_v2_ptsz", true, "direct");
    assert_symbol((void *)&cuGetProcAddress_v2, "cuGetProcAddress_v2", true, "direct");
    assert_symbol((void *)&cuCtxSynchronize, "cuCtxSynchronize", false, "direct");
}

/* The symbol cuGetProcAddress must return for (api, version, flags): the
 * newest row at or below the version, a per-thread row preferred when the
 * flags ask for the per-thread default stream. */
static const char *expected(const char *api, int version, bool per_thread)
{
    const struct api_row *best = NULL, *best_pt = NULL;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct api_row *r = &rows[i];
        if (strcmp(r->api, api) || r->version > version)
            continue;
        if (r->variant == V_NONE && (!best || r->version >= best->version))
            best = r;
        if (r->variant != V_NONE && (!best_pt || r->version >= best_pt->version))
            best_pt = r;
    }
    if (per_thread && best_pt && (!best || best_pt->version >= best->version))
        return best_pt->sym;
    return best ? best->sym : NULL;
}

static void proc_address_maps_every_version(void **state)
{
    (void)state;
    /* The simulator resolves from the same table as this test, so there
     * every row must match exactly. A real driver has its own table, which
     * disagrees with cudaTypedefs.h's version numbers for a few entry points;
     * there, what matters is that whatever it returns comes back as the
     * wrapper of that same symbol (dladdr names it), for nearly every row. */
    char name[128] = "";
    CK(cuDeviceGetName(name, sizeof name, 0));
    bool simulated = strcmp(name, "cushare simulated GPU") == 0;
    int checked = 0, differ = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct api_row *r = &rows[i];
        bool pt = r->variant != V_NONE;
        const char *want = expected(r->api, r->version, pt);
        if (!want)
            continue;
        void *fn = NULL;
        CUdriverProcAddressQueryResult st;
        cuuint64_t flags = pt ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM
                              : CU_GET_PROC_ADDRESS_LEGACY_STREAM;
        CK(cuGetProcAddress_v2(r->api, &fn, r->version, flags, &st));
        Dl_info info;
        bool same = st == CU_GET_PROC_ADDRESS_SUCCESS && fn && dladdr(fn, &info) &&
                    info.dli_sname && !strcmp(info.dli_sname, want);
        if (!same && !simulated) {
            if (differ++ < 20)
                print_message("driver: %s v%d%s -> %s (status %d), headers say %s\n", r->api,
                              r->version, pt ? " per-thread" : "",
                              st == CU_GET_PROC_ADDRESS_SUCCESS && fn && dladdr(fn, &info)
                                  ? info.dli_sname
                                  : "nothing",
                              (int)st, want);
            if (st == CU_GET_PROC_ADDRESS_SUCCESS && fn && dladdr(fn, &info) && info.dli_sname)
                assert_symbol(fn, info.dli_sname, is_hooked(info.dli_sname), r->api);
            continue;
        }
        assert_int_equal(st, CU_GET_PROC_ADDRESS_SUCCESS);
        assert_symbol(fn, want, is_hooked(want), r->api);
        checked++;
    }
    print_message("%d rows as the headers say, %d where the driver differs\n", checked, differ);
    assert_true(checked > 500);
    assert_true(differ * 20 <= checked);
}

static void proc_address_versions_and_errors(void **state)
{
    (void)state;
    void *fn;
    CUdriverProcAddressQueryResult st;
    CK(cuGetProcAddress_v2("cuMemAlloc", &fn, 2000, 0, &st));
    assert_symbol(fn, "cuMemAlloc", true, "v2000");
    CK(cuGetProcAddress_v2("cuMemAlloc", &fn, 13000, 0, &st));
    assert_symbol(fn, "cuMemAlloc_v2", true, "v13000");
    CK(cuGetProcAddress_v2("cuLaunchKernel", &fn, 13000,
                           CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    assert_symbol(fn, "cuLaunchKernel_ptsz", true, "ptsz");
    CK(cuGetProcAddress_v2("cuMemcpyHtoD", &fn, 13000,
                           CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
    assert_symbol(fn, "cuMemcpyHtoD_v2_ptds", true, "ptds");
    CK(cuGetProcAddress_v2("cuGetProcAddress", &fn, 13000, 0, &st));
    assert_symbol(fn, "cuGetProcAddress_v2", true, "self");
    CK(cuGetProcAddress_v2("cuCtxGetCurrent", &fn, 13000, 0, &st));
    assert_symbol(fn, "cuCtxGetCurrent", false, "passthrough");
    /* The old four-argument form goes through its own hook. */
    gpa_v1_fn gpa1 = (gpa_v1_fn)dlsym(libcuda, "cuGetProcAddress");
    assert_symbol((void *)gpa1, "cuGetProcAddress", true, "dlsym");
    CK(gpa1("cuLaunchKernelEx", &fn, 12000, 0));
    assert_symbol(fn, "cuLaunchKernelEx", true, "v1 form");
    /* Misses are the driver's answer, untouched: the _v2 form succeeds with
     * a NULL pointer and the reason in the status (as the H100's driver
     * does), the four-argument form fails. */
    fn = (void *)1;
    CK(cuGetProcAddress_v2("cuNoSuchFunction", &fn, 13000, 0, &st));
    assert_null(fn);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    fn = (void *)1;
    CK(cuGetProcAddress_v2("cuLaunchKernelEx", &fn, 11000, 0, &st));
    assert_null(fn);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    CKR(gpa1("cuNoSuchFunction", &fn, 13000, 0), CUDA_ERROR_NOT_FOUND);
}

/* ---- one call per family per route passes the gate exactly once ---------- */

enum route { DIRECT, DLSYM, PROCADDR };
static const char *const route_name[] = {"direct", "dlsym", "cuGetProcAddress"};

static void *via(enum route r, const char *api, const char *sym, void *direct, bool per_thread)
{
    if (r == DIRECT)
        return direct;
    if (r == DLSYM)
        return dlsym(libcuda, sym);
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    CK(cuGetProcAddress_v2(api, &fn, 13000,
                           per_thread ? CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM : 0, &st));
    return fn;
}

#define ONE_CALL(r, call)                                                      \
    do {                                                                       \
        unsigned long long before_ = ht_submissions();                         \
        CK(call);                                                              \
        unsigned long long after_ = ht_submissions();                          \
        if (after_ - before_ != 1)                                             \
            fail_msg("%s via %s passed the gate %llu times", #call, route_name[r], \
                     after_ - before_);                                        \
    } while (0)

static void launches(void **state)
{
    (void)state;
    uint64_t ns = 1000;
    void *params[] = {&ns};
    for (int r = DIRECT; r <= PROCADDR; r++) {
        __typeof__(cuLaunchKernel) *lk = via(r, "cuLaunchKernel", "cuLaunchKernel",
                                             (void *)&cuLaunchKernel, false);
        ONE_CALL(r, lk(ht_kernels.sleep, 1, 1, 1, 1, 1, 1, 0, 0, params, NULL));
        __typeof__(cuLaunchKernel_ptsz) *lkp = via(r, "cuLaunchKernel", "cuLaunchKernel_ptsz",
                                                   (void *)&cuLaunchKernel_ptsz, true);
        ONE_CALL(r, lkp(ht_kernels.sleep, 1, 1, 1, 1, 1, 1, 0, 0, params, NULL));
        CUlaunchConfig cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
        __typeof__(cuLaunchKernelEx) *lke = via(r, "cuLaunchKernelEx", "cuLaunchKernelEx",
                                                (void *)&cuLaunchKernelEx, false);
        ONE_CALL(r, lke(&cfg, ht_kernels.sleep, params, NULL));
        __typeof__(cuLaunchCooperativeKernel) *lc =
            via(r, "cuLaunchCooperativeKernel", "cuLaunchCooperativeKernel",
                (void *)&cuLaunchCooperativeKernel, false);
        ONE_CALL(r, lc(ht_kernels.sleep, 1, 1, 1, 1, 1, 1, 0, 0, params));
    }
    CK(cuCtxSynchronize());
}

static void copies_and_sets(void **state)
{
    (void)state;
    CUdeviceptr a, b;
    uint32_t host[256] = {0};
    CK(cuMemAlloc(&a, sizeof host));
    CK(cuMemAlloc(&b, sizeof host));
    for (int r = DIRECT; r <= PROCADDR; r++) {
        __typeof__(cuMemcpyHtoD_v2) *h2d =
            via(r, "cuMemcpyHtoD", "cuMemcpyHtoD_v2", (void *)&cuMemcpyHtoD_v2, false);
        ONE_CALL(r, h2d(a, host, sizeof host));
        __typeof__(cuMemcpyHtoD_v2_ptds) *h2dp = via(r, "cuMemcpyHtoD", "cuMemcpyHtoD_v2_ptds",
                                                     (void *)&cuMemcpyHtoD_v2_ptds, true);
        ONE_CALL(r, h2dp(a, host, sizeof host));
        __typeof__(cuMemcpyDtoH_v2) *d2h =
            via(r, "cuMemcpyDtoH", "cuMemcpyDtoH_v2", (void *)&cuMemcpyDtoH_v2, false);
        ONE_CALL(r, d2h(host, a, sizeof host));
        __typeof__(cuMemcpyDtoD_v2) *d2d =
            via(r, "cuMemcpyDtoD", "cuMemcpyDtoD_v2", (void *)&cuMemcpyDtoD_v2, false);
        ONE_CALL(r, d2d(b, a, sizeof host));
        __typeof__(cuMemcpy) *cp = via(r, "cuMemcpy", "cuMemcpy", (void *)&cuMemcpy, false);
        ONE_CALL(r, cp(b, a, sizeof host));
        __typeof__(cuMemcpyAsync) *cpa =
            via(r, "cuMemcpyAsync", "cuMemcpyAsync", (void *)&cuMemcpyAsync, false);
        ONE_CALL(r, cpa(b, a, sizeof host, 0));
        __typeof__(cuMemcpyHtoDAsync_v2) *h2da = via(r, "cuMemcpyHtoDAsync", "cuMemcpyHtoDAsync_v2",
                                                     (void *)&cuMemcpyHtoDAsync_v2, false);
        ONE_CALL(r, h2da(a, host, sizeof host, 0));
        __typeof__(cuMemsetD8_v2) *m8 =
            via(r, "cuMemsetD8", "cuMemsetD8_v2", (void *)&cuMemsetD8_v2, false);
        ONE_CALL(r, m8(a, 1, sizeof host));
        __typeof__(cuMemsetD32_v2) *m32 =
            via(r, "cuMemsetD32", "cuMemsetD32_v2", (void *)&cuMemsetD32_v2, false);
        ONE_CALL(r, m32(a, 7, 256));
        __typeof__(cuMemsetD16Async) *m16a =
            via(r, "cuMemsetD16Async", "cuMemsetD16Async", (void *)&cuMemsetD16Async, false);
        ONE_CALL(r, m16a(a, 3, 512, 0));
        __typeof__(cuMemsetD2D8_v2) *m2d =
            via(r, "cuMemsetD2D8", "cuMemsetD2D8_v2", (void *)&cuMemsetD2D8_v2, false);
        ONE_CALL(r, m2d(a, 64, 0, 64, 16));
        CUDA_MEMCPY2D c2;
        memset(&c2, 0, sizeof c2);
        c2.srcMemoryType = CU_MEMORYTYPE_DEVICE;
        c2.srcDevice = a;
        c2.srcPitch = 64;
        c2.dstMemoryType = CU_MEMORYTYPE_DEVICE;
        c2.dstDevice = b;
        c2.dstPitch = 64;
        c2.WidthInBytes = 64;
        c2.Height = 16;
        __typeof__(cuMemcpy2D_v2) *cp2 =
            via(r, "cuMemcpy2D", "cuMemcpy2D_v2", (void *)&cuMemcpy2D_v2, false);
        ONE_CALL(r, cp2(&c2));
        CUcontext ctx;
        CK(cuCtxGetCurrent(&ctx));
        __typeof__(cuMemcpyPeer) *peer =
            via(r, "cuMemcpyPeer", "cuMemcpyPeer", (void *)&cuMemcpyPeer, false);
        ONE_CALL(r, peer(b, ctx, a, ctx, sizeof host));
    }
    CK(cuCtxSynchronize());
    CK(cuMemFree(a));
    CK(cuMemFree(b));
}

static void host_fn(void *arg)
{
    (*(int *)arg)++;
}

static void host_cb(CUstream s, CUresult st, void *arg)
{
    (void)s;
    (void)st;
    (*(int *)arg)++;
}

static void stream_work(void **state)
{
    (void)state;
    int calls = 0;
    CUdeviceptr flag;
    CK(cuMemAlloc(&flag, 8));
    for (int r = DIRECT; r <= PROCADDR; r++) {
        __typeof__(cuLaunchHostFunc) *hf =
            via(r, "cuLaunchHostFunc", "cuLaunchHostFunc", (void *)&cuLaunchHostFunc, false);
        ONE_CALL(r, hf(0, host_fn, &calls));
        __typeof__(cuStreamAddCallback) *cb = via(r, "cuStreamAddCallback", "cuStreamAddCallback",
                                                  (void *)&cuStreamAddCallback, false);
        ONE_CALL(r, cb(0, host_cb, &calls, 0));
        __typeof__(cuStreamWriteValue32_v2) *wv =
            via(r, "cuStreamWriteValue32", "cuStreamWriteValue32_v2",
                (void *)&cuStreamWriteValue32_v2, false);
        ONE_CALL(r, wv(0, flag, 5, 0));
        __typeof__(cuStreamWaitValue32_v2) *wt =
            via(r, "cuStreamWaitValue32", "cuStreamWaitValue32_v2",
                (void *)&cuStreamWaitValue32_v2, false);
        ONE_CALL(r, wt(0, flag, 5, CU_STREAM_WAIT_VALUE_EQ));
    }
    CK(cuCtxSynchronize());
    assert_int_equal(calls, 6);
    CK(cuMemFree(flag));
}

static void graphs(void **state)
{
    (void)state;
    CUstream s;
    CUgraph g;
    CUgraphExec ge;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(fck_sleep(s, 1000));
    CK(cuStreamEndCapture(s, &g));
    CK(cuGraphInstantiateWithFlags(&ge, g, 0));
    for (int r = DIRECT; r <= PROCADDR; r++) {
        __typeof__(cuGraphUpload) *up =
            via(r, "cuGraphUpload", "cuGraphUpload", (void *)&cuGraphUpload, false);
        ONE_CALL(r, up(ge, s));
        __typeof__(cuGraphLaunch) *gl =
            via(r, "cuGraphLaunch", "cuGraphLaunch", (void *)&cuGraphLaunch, false);
        ONE_CALL(r, gl(ge, s));
    }
    CK(cuStreamSynchronize(s));
    CK(cuGraphExecDestroy(ge));
    CK(cuGraphDestroy(g));
    CK(cuStreamDestroy(s));
}

/* Calls that do not put work on the GPU must not pass the gate as work; a
 * `placed` one (api_classes.txt) waits for the memory at most, and reaches
 * the driver uncounted too. */
static void queries_are_not_gated(void **state)
{
    (void)state;
    unsigned long long before = ht_submissions();
    CUcontext c;
    CUdevice d;
    size_t f, t;
    CK(cuCtxGetCurrent(&c));
    CK(cuCtxGetDevice(&d));
    CK(cuMemGetInfo(&f, &t));
    CK(cuCtxSynchronize());
    CUevent e;
    CK(cuEventCreate(&e, 0));
    CK(cuEventRecord(e, 0));
    CK(cuEventSynchronize(e));
    CK(cuEventDestroy(e));
    CUgraph g;
    CUgraphNode n;
    CUdeviceptr a, b;
    CK(cuMemAlloc(&a, 4096));
    CK(cuMemAlloc(&b, 4096));
    CUDA_MEMCPY3D cp = fck_copy_params(b, a, 4096);
    CK(cuGraphCreate(&g, 0));
    CK(cuGraphAddMemcpyNode(&n, g, NULL, 0, &cp, c));
    CK(cuGraphDestroy(g));
    CK(cuMemFree(a));
    CK(cuMemFree(b));
    assert_int_equal(ht_submissions(), before);
}

int main(int argc, char **argv)
{
    hooktest_preload(argc, argv, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dlsym_returns_every_wrapper),
        cmocka_unit_test(direct_linking_reaches_wrappers),
        cmocka_unit_test(proc_address_maps_every_version),
        cmocka_unit_test(proc_address_versions_and_errors),
        cmocka_unit_test(launches),
        cmocka_unit_test(copies_and_sets),
        cmocka_unit_test(stream_work),
        cmocka_unit_test(graphs),
        cmocka_unit_test(queries_are_not_gated),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
