/* fc_exec_test: contexts, streams (FIFO, legacy and per-thread default
 * stream semantics), events, host functions, stream memory operations,
 * stream capture and graphs, modules/libraries and launches, and the
 * kernel catalogue of the simulated driver. Threading-heavy: also run
 * under ThreadSanitizer. */
#include "fc_testutil.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MS 1000000ull

static CUdeviceptr dev_alloc(size_t n)
{
    CUdeviceptr p;
    CK(cuMemAlloc(&p, n));
    return p;
}

/* ------------------------------------------------------------- contexts */

static void test_ctx_stack(void **state)
{
    CUcontext prim = fct_ctx(), a, b, cur, popped;
    CK(cuCtxCreate(&a, NULL, CU_CTX_SCHED_SPIN, 0));        /* pushed */
    CK(cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, a);
    CUresult (*create_v3)(CUcontext *, CUexecAffinityParam *, int, unsigned, CUdevice) =
        fct_proc("cuCtxCreate", 11040, 0);
    CK(create_v3(&b, NULL, 0, 0, 0));
    CK(cuCtxPopCurrent(&popped));
    assert_ptr_equal(popped, b);
    CK(cuCtxPopCurrent(&popped));
    assert_ptr_equal(popped, a);
    CK(cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, prim);
    CK(cuCtxPushCurrent(a));
    unsigned flags, ver;
    CK(cuCtxGetFlags(&flags));
    assert_int_equal(flags, CU_CTX_SCHED_SPIN);
    CK(cuCtxSetFlags(CU_CTX_SCHED_YIELD));
    CK(cuCtxGetFlags(&flags));
    assert_int_equal(flags, CU_CTX_SCHED_YIELD);
    CK(cuCtxGetApiVersion(NULL, &ver));
    assert_true(ver >= 3020);
    unsigned long long ida, idb;
    CK(cuCtxGetId(a, &ida));
    CK(cuCtxGetId(b, &idb));
    assert_true(ida != idb);
    CUdevice d = -1;
    CK(cuCtxGetDevice(&d));
    assert_int_equal(d, 0);
    int least, greatest;
    CK(cuCtxGetStreamPriorityRange(&least, &greatest));
    assert_true(greatest < least);
    size_t lim;
    CK(cuCtxSetLimit(CU_LIMIT_MALLOC_HEAP_SIZE, 64 * MiB));
    CK(cuCtxGetLimit(&lim, CU_LIMIT_MALLOC_HEAP_SIZE));
    assert_int_equal(lim, 64 * MiB);
    CKR(cuCtxGetLimit(&lim, CU_LIMIT_MAX), CUDA_ERROR_INVALID_VALUE);
    CK(cuCtxDestroy(a));                                     /* pops it */
    CK(cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, prim);
    CKR(cuCtxPushCurrent(a), CUDA_ERROR_INVALID_CONTEXT);    /* destroyed */
    CKR(cuCtxDestroy(prim), CUDA_ERROR_INVALID_CONTEXT);     /* primary */
    CK(cuCtxDestroy(b));
    CK(cuCtxSetCurrent(NULL));
    CKR(cuCtxPopCurrent(&popped), CUDA_ERROR_INVALID_CONTEXT);
    CKR(cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    CK(cuCtxSetCurrent(prim));
}

static void test_primary(void **state)
{
    CUcontext p1 = fct_ctx(), p2;
    CK(cuDevicePrimaryCtxRetain(&p2, 0));
    assert_ptr_equal(p1, p2);
    unsigned flags;
    int active;
    CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    assert_int_equal(active, 1);
    CK(cuDevicePrimaryCtxRelease(0));
    CK(cuDevicePrimaryCtxRelease(0));
    CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    assert_int_equal(active, 0);
    CKR(cuCtxSetCurrent(p1), CUDA_ERROR_INVALID_CONTEXT);    /* inactive */
    CKR(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
    CK(cuDevicePrimaryCtxSetFlags(0, CU_CTX_SCHED_BLOCKING_SYNC));
    CK(cuDevicePrimaryCtxRetain(&p2, 0));
    assert_ptr_equal(p1, p2);                                /* same handle */
    CK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    assert_int_equal(flags, CU_CTX_SCHED_BLOCKING_SYNC);
    CK(cuDevicePrimaryCtxSetFlags(0, 0));
    CK(cuCtxSetCurrent(p2));
}

/* ----------------------------------------------------- kernels, modules */

static void test_kernel_catalogue(void **state)
{
    CUdeviceptr p = dev_alloc(4096 * 4), out = dev_alloc(8);
    CK(fck_fill32(NULL, p, 4096, 3));
    CK(fck_add32(NULL, p, 4000, 4));                  /* only the first 4000 */
    CK(cuMemsetD32(out, 0, 2));
    CK(fck_sum32(NULL, p, 4096, out));
    CK(fck_sum32(NULL, p, 10, out));                  /* accumulates */
    CK(cuCtxSynchronize());
    assert_int_equal(fct_get32(p + 4 * 3999), 7);
    assert_int_equal(fct_get32(p + 4 * 4000), 3);
    assert_int_equal(fct_get64(out), 4000 * 7 + 96 * 3 + 10 * 7);
    /* fc_sleep occupies the device for its time. */
    CUstream s;
    CK(cuStreamCreate(&s, 0));
    uint64_t t0 = fct_now_ns();
    CK(fck_sleep(s, 100 * MS));
    CKR(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    CK(cuStreamSynchronize(s));
    assert_true(fct_ms_since(t0) >= 100.0);
    CK(cuStreamQuery(s));
    CK(cuStreamDestroy(s));
    CK(cuMemFree(p));
    CK(cuMemFree(out));
}

static void test_modules(void **state)
{
    CUmodule m;
    CUfunction f;
    CK(cuModuleLoadData(&m, "any image at all"));
    CK(cuModuleGetFunction(&f, m, "fc_add32"));
    CKR(cuModuleGetFunction(&f, m, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
    const char *name;
    CK(cuFuncGetName(&name, f));
    assert_string_equal(name, "fc_add32");
    int v;
    CK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f));
    assert_int_equal(v, 1024);
    CK(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 100000));
    CK(cuFuncGetAttribute(&v, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f));
    assert_int_equal(v, 100000);
    CKR(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_NUM_REGS, 1), CUDA_ERROR_INVALID_VALUE);
    size_t off, size;
    CK(cuFuncGetParamInfo(f, 2, &off, &size));
    assert_int_equal(off, 16);
    assert_int_equal(size, 4);
    CK(cuModuleUnload(m));
    CKR(cuFuncGetName(&name, f), CUDA_ERROR_INVALID_HANDLE);   /* gone with it */
    CKR(cuModuleGetFunction(&f, m, "fc_add32"), CUDA_ERROR_INVALID_HANDLE);
    CKR(cuModuleLoad(&m, "/nonexistent/fc.ptx"), CUDA_ERROR_FILE_NOT_FOUND);
    CKR(cuModuleLoadData(&m, NULL), CUDA_ERROR_INVALID_VALUE);
}

/* A CUkernel of a library launches as a CUfunction. */
static void test_library(void **state)
{
    CUlibrary lib;
    CUkernel k;
    CUfunction f;
    CK(cuLibraryLoadData(&lib, fck_ptx, NULL, NULL, 0, NULL, NULL, 0));
    CK(cuLibraryGetKernel(&k, lib, "fc_fill32"));
    CK(cuKernelGetFunction(&f, k));
    CUdeviceptr p = dev_alloc(64);
    uint64_t n = 16;
    uint32_t v = 0x77;
    void *params[] = { &p, &n, &v };
    CK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
    CK(cuCtxSynchronize());
    assert_int_equal(fct_get32(p + 60), 0x77);
    v = 0x78;
    CK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
    CK(cuCtxSynchronize());
    assert_int_equal(fct_get32(p), 0x78);
    CKR(cuLibraryGetKernel(&k, lib, "nope"), CUDA_ERROR_NOT_FOUND);
    CK(cuLibraryUnload(lib));
    CK(cuMemFree(p));
}

static void test_launch_forms(void **state)
{
    CUdeviceptr p = dev_alloc(1024);
    CUfunction fill = fct_kernels.fill32;
    /* Parameters packed in a buffer with natural alignment: 20 bytes, no
     * trailing padding; more than the kernel takes is refused (the real
     * driver's LAUNCH_OUT_OF_RESOURCES), less is taken as is. */
    struct {
        CUdeviceptr p;
        uint64_t n;
        uint32_t v;
        uint32_t pad;
    } buf = { p, 256, 0x1234, 0 };
    size_t size = 20;
    void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                      CU_LAUNCH_PARAM_END };
    CK(cuLaunchKernel(fill, 2, 1, 1, 128, 1, 1, 0, NULL, NULL, extra));
    CK(cuCtxSynchronize());
    assert_int_equal(fct_get32(p + 1020), 0x1234);
    size = 24;
    CKR(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra), CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
    size = 16;                                    /* v missing: fills with 0 */
    CK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra));
    CK(cuCtxSynchronize());
    assert_int_equal(fct_get32(p + 1020), 0);
    uint64_t n = 256;
    uint32_t v = 5;
    void *params[] = { &p, &n, &v };
    CKR(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, params, extra), CUDA_ERROR_INVALID_VALUE);
    CKR(cuLaunchKernel(fill, 0, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
    CKR(cuLaunchKernel(fill, 1, 1, 1, 2048, 1, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
    CKR(cuLaunchKernel((CUfunction)&n, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_HANDLE);
    CKR(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, (CUstream)&n, params, NULL), CUDA_ERROR_INVALID_HANDLE);
    /* cuLaunchKernelEx and the cooperative form. */
    CUlaunchConfig cfg = { .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                           .blockDimX = 64, .blockDimY = 1, .blockDimZ = 1 };
    CK(cuLaunchKernelEx(&cfg, fill, params, NULL));
    CK(cuCtxSynchronize());
    assert_int_equal(fct_get32(p), 5);
    v = 6;
    CK(cuLaunchCooperativeKernel(fill, 1, 1, 1, 64, 1, 1, 0, NULL, params));
    CK(cuCtxSynchronize());
    assert_int_equal(fct_get32(p), 6);
    CK(cuMemFree(p));
}

/* --------------------------------------------------------------- streams */

/* Within a stream, work runs in submission order: 200 interleaved fills
 * and adds only give fill(last) + add(last) in FIFO order. */
static void test_stream_fifo(void **state)
{
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr p = dev_alloc(256);
    CK(fck_sleep(s, 20 * MS));                  /* let the queue build up */
    for (uint32_t i = 1; i <= 100; i++) {
        CK(fck_fill32(s, p, 64, i * 1000));
        CK(fck_add32(s, p, 64, i));
    }
    CK(cuStreamSynchronize(s));
    assert_int_equal(fct_get32(p + 100), 100 * 1000 + 100);
    CK(cuMemFree(p));
    CK(cuStreamDestroy(s));
}

/* The legacy NULL stream waits for earlier work of blocking streams, and
 * blocking streams wait for earlier legacy work; non-blocking streams are
 * exempt. */
static void test_legacy_stream(void **state)
{
    CUstream blk, nb;
    CK(cuStreamCreate(&blk, CU_STREAM_DEFAULT));
    CK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
    CUdeviceptr p = dev_alloc(64);
    /* blocking -> legacy */
    CK(fck_sleep(blk, 80 * MS));
    CK(fck_fill32(blk, p, 16, 1));
    CK(fck_add32(NULL, p, 16, 1));
    CK(cuStreamSynchronize(NULL));
    assert_int_equal(fct_get32(p), 2);
    /* legacy -> blocking */
    CK(fck_sleep(NULL, 80 * MS));
    CK(fck_fill32(NULL, p, 16, 10));
    CK(fck_add32(blk, p, 16, 1));
    CK(cuStreamSynchronize(blk));
    assert_int_equal(fct_get32(p), 11);
    /* non-blocking: the legacy stream does not wait for it */
    CK(fck_sleep(nb, 400 * MS));
    CK(fck_fill32(NULL, p, 16, 20));
    CK(cuStreamSynchronize(NULL));
    assert_int_equal(fct_get32(p), 20);
    CKR(cuStreamQuery(nb), CUDA_ERROR_NOT_READY);
    CK(cuStreamSynchronize(nb));
    /* CU_STREAM_LEGACY is the same stream as NULL. */
    CK(fck_sleep(blk, 80 * MS));
    CK(fck_fill32(blk, p, 16, 30));
    CK(fck_add32(CU_STREAM_LEGACY, p, 16, 1));
    CK(cuStreamSynchronize(CU_STREAM_LEGACY));
    assert_int_equal(fct_get32(p), 31);
    CK(cuMemFree(p));
    CK(cuStreamDestroy(blk));
    CK(cuStreamDestroy(nb));
}

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);
typedef CUresult (*sync_fn)(CUstream);

struct pt_arg {
    CUcontext ctx;
    CUdeviceptr p;
    uint64_t sleep_ns;
    double ms;
};

/* A thread's per-thread default stream: the _ptsz forms with stream 0. */
static void *pt_thread(void *arg)
{
    struct pt_arg *a = arg;
    launch_fn launch = fct_proc("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    sync_fn sync = fct_proc("cuStreamSynchronize", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    CK(cuCtxSetCurrent(a->ctx));
    uint64_t t0 = fct_now_ns();
    uint64_t n = 16;
    uint32_t v = 1;
    void *sp[] = { &a->sleep_ns };
    void *fp[] = { &a->p, &n, &v };
    if (a->sleep_ns)
        CK(launch(fct_kernels.sleep, 1, 1, 1, 1, 1, 1, 0, NULL, sp, NULL));
    CK(launch(fct_kernels.fill32, 1, 1, 1, 16, 1, 1, 0, NULL, fp, NULL));
    CK(sync(NULL));
    a->ms = fct_ms_since(t0);
    return NULL;
}

/* Per-thread default streams of two threads are independent of each
 * other, but wait for the legacy stream (they are blocking streams). */
static void test_per_thread_stream(void **state)
{
    struct pt_arg slow = { fct_ctx(), dev_alloc(64), 300 * MS, 0 };
    struct pt_arg fast = { fct_ctx(), dev_alloc(64), 0, 0 };
    pthread_t a, b;
    pthread_create(&a, NULL, pt_thread, &slow);
    fct_sleep_ms(20);
    pthread_create(&b, NULL, pt_thread, &fast);
    pthread_join(b, NULL);
    pthread_join(a, NULL);
    assert_true(fast.ms < 200);
    assert_true(slow.ms >= 300);
    /* legacy -> per-thread */
    fast.sleep_ns = 0;
    CK(fck_sleep(NULL, 150 * MS));
    pthread_create(&b, NULL, pt_thread, &fast);
    pthread_join(b, NULL);
    assert_true(fast.ms >= 100);
    /* CU_STREAM_PER_THREAD works with the plain entry points too. */
    CK(fck_fill32(CU_STREAM_PER_THREAD, fast.p, 16, 44));
    CK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    assert_int_equal(fct_get32(fast.p), 44);
    CK(cuMemFree(slow.p));
    CK(cuMemFree(fast.p));
}

static void test_stream_properties(void **state)
{
    CUstream s;
    CK(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, -3));
    int prio;
    unsigned flags;
    unsigned long long id1, id2;
    CUcontext c;
    CUdevice d;
    CK(cuStreamGetPriority(s, &prio));
    assert_int_equal(prio, -3);
    CK(cuStreamGetFlags(s, &flags));
    assert_int_equal(flags, CU_STREAM_NON_BLOCKING);
    CK(cuStreamGetCtx(s, &c));
    assert_ptr_equal(c, fct_ctx());
    CK(cuStreamGetCtx(NULL, &c));
    assert_ptr_equal(c, fct_ctx());
    CK(cuStreamGetDevice(s, &d));
    assert_int_equal(d, 0);
    CK(cuStreamGetId(s, &id1));
    CK(cuStreamGetId(NULL, &id2));
    assert_true(id1 != id2);
    CKR(cuStreamCreate(&s, 4), CUDA_ERROR_INVALID_VALUE);
    CK(cuStreamDestroy(s));
    CKR(cuStreamDestroy(s), CUDA_ERROR_INVALID_HANDLE);
    CKR(cuStreamDestroy(NULL), CUDA_ERROR_INVALID_HANDLE);
    CKR(cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
}

/* Destroying a stream lets its queued work finish. */
static void test_stream_destroy_pending(void **state)
{
    CUstream s;
    CUevent e;
    CK(cuStreamCreate(&s, 0));
    CK(cuEventCreate(&e, 0));
    CUdeviceptr p = dev_alloc(64);
    CK(fck_sleep(s, 50 * MS));
    CK(fck_fill32(s, p, 16, 8));
    CK(cuEventRecord(e, s));
    CK(cuStreamDestroy(s));
    CK(cuEventSynchronize(e));
    assert_int_equal(fct_get32(p), 8);
    CK(cuEventDestroy(e));
    CK(cuMemFree(p));
}

/* ---------------------------------------------------------------- events */

static void test_events(void **state)
{
    CUstream a, b;
    CUevent e1, e2, nt;
    CK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&e1, CU_EVENT_DEFAULT));
    CK(cuEventCreate(&e2, CU_EVENT_BLOCKING_SYNC));
    CK(cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING));
    float ms;
    CK(cuEventQuery(e1));                                    /* never recorded */
    CKR(cuEventElapsedTime(&ms, e1, e2), CUDA_ERROR_INVALID_HANDLE);
    CUdeviceptr p = dev_alloc(64);
    /* Cross-stream ordering through an event. */
    CK(cuEventRecord(e1, a));
    CK(fck_sleep(a, 100 * MS));
    CK(fck_fill32(a, p, 16, 1));
    CK(cuEventRecord(e2, a));
    CK(cuStreamWaitEvent(b, e2, 0));
    CK(fck_add32(b, p, 16, 1));
    CKR(cuEventQuery(e2), CUDA_ERROR_NOT_READY);
    CKR(cuEventElapsedTime(&ms, e1, e2), CUDA_ERROR_NOT_READY);
    CK(cuStreamSynchronize(b));
    assert_int_equal(fct_get32(p), 2);
    CK(cuEventSynchronize(e2));
    CK(cuEventElapsedTime(&ms, e1, e2));
    assert_true(ms >= 100.0f);
    /* A wait binds to the record made before it, not to later ones. */
    CK(fck_sleep(a, 300 * MS));
    CK(cuEventRecord(e2, a));
    CK(cuStreamWaitEvent(b, e2, 0));      /* must wait for the sleep */
    CK(cuEventRecord(e2, b));             /* re-recorded meanwhile */
    uint64_t t0 = fct_now_ns();
    CK(cuStreamSynchronize(b));
    assert_true(fct_ms_since(t0) >= 200);
    CK(cuEventRecord(nt, a));
    CK(cuEventSynchronize(nt));
    CKR(cuEventElapsedTime(&ms, e1, nt), CUDA_ERROR_INVALID_HANDLE);
    CKR(cuEventCreate(&nt, 0x40), CUDA_ERROR_INVALID_VALUE);
    CK(cuEventDestroy(e1));
    CK(cuEventDestroy(e2));
    CKR(cuEventQuery(e2), CUDA_ERROR_INVALID_HANDLE);
    CK(cuEventDestroy(nt));
    CK(cuStreamDestroy(a));
    CK(cuStreamDestroy(b));
    CK(cuMemFree(p));
}

/* ---------------------------------------- host functions, memory ops */

struct host_arg {
    uint32_t *pinned;
    uint32_t seen;
    int calls;
    CUresult status;
};

static void CUDA_CB host_fn(void *arg)
{
    struct host_arg *h = arg;
    h->seen = h->pinned[0];
    h->calls++;
}

static void CUDA_CB stream_cb(CUstream s, CUresult status, void *arg)
{
    struct host_arg *h = arg;
    h->status = status;
    h->calls++;
}

static void test_host_functions(void **state)
{
    CUstream s;
    CK(cuStreamCreate(&s, 0));
    uint32_t *pinned;
    CK(cuMemAllocHost((void **)&pinned, 4096));
    pinned[0] = 0;
    struct host_arg h = { pinned, 0, 0, CUDA_ERROR_UNKNOWN };
    CK(fck_sleep(s, 30 * MS));
    CK(fck_fill32(s, (CUdeviceptr)pinned, 16, 99));
    CK(cuLaunchHostFunc(s, host_fn, &h));      /* runs after the fill */
    CK(cuStreamAddCallback(s, stream_cb, &h, 0));
    CK(cuStreamSynchronize(s));
    assert_int_equal(h.seen, 99);
    assert_int_equal(h.calls, 2);
    assert_int_equal(h.status, CUDA_SUCCESS);
    CKR(cuLaunchHostFunc(s, NULL, &h), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemFreeHost(pinned));
    CK(cuStreamDestroy(s));
}

/* A stream waits on a value the host writes; a stream writes a value. */
static void test_stream_memops(void **state)
{
    CUstream s;
    CK(cuStreamCreate(&s, 0));
    uint32_t *flag;
    CK(cuMemAllocHost((void **)&flag, 4096));
    __atomic_store_n(&flag[0], 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&flag[1], 0, __ATOMIC_SEQ_CST);
    CK(cuStreamWaitValue32(s, (CUdeviceptr)flag, 5, CU_STREAM_WAIT_VALUE_GEQ));
    CK(cuStreamWriteValue32(s, (CUdeviceptr)&flag[1], 7, 0));
    fct_sleep_ms(50);
    CKR(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    assert_int_equal(__atomic_load_n(&flag[1], __ATOMIC_SEQ_CST), 0);
    __atomic_store_n(&flag[0], 5, __ATOMIC_SEQ_CST);
    CK(cuStreamSynchronize(s));
    assert_int_equal(__atomic_load_n(&flag[1], __ATOMIC_SEQ_CST), 7);
    uint64_t *f64 = (uint64_t *)&flag[2];
    CK(cuStreamWriteValue64(s, (CUdeviceptr)f64, 1ull << 40, 0));
    CK(cuStreamWaitValue64(s, (CUdeviceptr)f64, 1ull << 40, CU_STREAM_WAIT_VALUE_EQ));
    CK(cuStreamSynchronize(s));
    int stack;
    CKR(cuStreamWriteValue32(s, (CUdeviceptr)&stack, 1, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemFreeHost(flag));
    CK(cuStreamDestroy(s));
}

/* ------------------------------------------------------- capture, graphs */

static void test_capture_graph(void **state)
{
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr p = dev_alloc(64);
    CK(cuMemsetD32(p, 1, 16));
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureStatus st;
    cuuint64_t id = 0;
    CK(cuStreamIsCapturing(s, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CK(cuStreamGetCaptureInfo(s, &st, &id, NULL, NULL, NULL, NULL));
    assert_true(id != 0);
    CK(fck_add32(s, p, 16, 10));
    CK(cuMemsetD32Async(p + 4, 100, 1, s));
    CK(fck_add32(s, p, 16, 1));
    CUgraph g;
    CK(cuStreamEndCapture(s, &g));
    CK(cuStreamIsCapturing(s, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CK(cuCtxSynchronize());
    assert_int_equal(fct_get32(p), 1);                 /* nothing ran */
    size_t nodes = 0;
    CK(cuGraphGetNodes(g, NULL, &nodes));
    assert_int_equal(nodes, 3);
    CUgraphExec x;
    CK(cuGraphInstantiate(&x, g, 0));
    CK(cuGraphUpload(x, s));
    CK(cuGraphLaunch(x, s));
    CK(cuStreamSynchronize(s));
    assert_int_equal(fct_get32(p), 12);
    assert_int_equal(fct_get32(p + 4), 101);
    CK(cuGraphLaunch(x, s));                           /* replays */
    CK(cuStreamSynchronize(s));
    assert_int_equal(fct_get32(p), 23);
    CUDA_GRAPH_INSTANTIATE_PARAMS ip = { .flags = 0 };
    CUgraphExec x2;
    CK(cuGraphInstantiateWithParams(&x2, g, &ip));
    assert_int_equal(ip.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
    CK(cuGraphLaunch(x2, NULL));
    CK(cuCtxSynchronize());
    assert_int_equal(fct_get32(p), 34);
    CK(cuGraphExecDestroy(x2));
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    /* Synchronizing a capturing stream is illegal and invalidates it. */
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CK(fck_add32(s, p, 16, 1));
    CKR(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK(cuStreamIsCapturing(s, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    CKR(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    assert_null(g);
    CKR(cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
    CKR(cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CK(cuMemFree(p));
    CK(cuStreamDestroy(s));
}

/* Fork/join across streams inside one capture; legacy-stream work while a
 * blocking stream captures is the implicit-dependency error. */
static void test_capture_fork_join(void **state)
{
    CUstream s1, s2;
    CUevent fork_ev, join_ev;
    CK(cuStreamCreate(&s1, CU_STREAM_DEFAULT));
    CK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&fork_ev, CU_EVENT_DISABLE_TIMING));
    CK(cuEventCreate(&join_ev, CU_EVENT_DISABLE_TIMING));
    CUdeviceptr p = dev_alloc(64), q = dev_alloc(64);
    CUgraph g2;
    CK(cuMemsetD32(p, 0, 16));
    CK(cuMemsetD32(q, 0, 16));
    CK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(fck_add32(s1, p, 16, 1));
    CK(cuEventRecord(fork_ev, s1));
    CK(cuStreamWaitEvent(s2, fork_ev, 0));             /* s2 joins */
    CUstreamCaptureStatus st;
    CK(cuStreamIsCapturing(s2, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CK(fck_add32(s2, q, 16, 2));
    CK(cuEventRecord(join_ev, s2));
    CK(cuStreamWaitEvent(s1, join_ev, 0));
    CUgraph g;
    CK(cuStreamEndCapture(s1, &g));
    CK(cuStreamIsCapturing(s2, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
    CUgraphExec x;
    CK(cuGraphInstantiate(&x, g, 0));
    CK(cuGraphLaunch(x, s1));
    CK(cuGraphLaunch(x, s1));
    CK(cuStreamSynchronize(s1));
    assert_int_equal(fct_get32(p), 2);
    assert_int_equal(fct_get32(q), 4);
    /* Querying an event of a live capture: CAPTURED_EVENT, and the capture
     * is over. */
    CK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuEventRecord(fork_ev, s1));
    CKR(cuEventQuery(fork_ev), CUDA_ERROR_CAPTURED_EVENT);
    CKR(cuEventSynchronize(fork_ev), CUDA_ERROR_CAPTURED_EVENT);
    CKR(cuStreamEndCapture(s1, &g2), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuEventQuery(fork_ev));                         /* captured, never recorded */
    /* Implicit dependency of the legacy stream on a capture. */
    CK(cuStreamBeginCapture(s1, CU_STREAM_CAPTURE_MODE_RELAXED));
    CKR(fck_add32(NULL, p, 16, 1), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    CKR(cuStreamIsCapturing(NULL, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    CKR(cuStreamEndCapture(s1, &g2), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    CK(cuEventDestroy(fork_ev));
    CK(cuEventDestroy(join_ev));
    CK(cuStreamDestroy(s1));
    CK(cuStreamDestroy(s2));
    CK(cuMemFree(p));
    CK(cuMemFree(q));
}

struct cap_arg {
    CUcontext ctx;
    CUstreamCaptureMode mode;
    CUresult alloc_result;
};

static void *alloc_thread(void *arg)
{
    struct cap_arg *a = arg;
    CK(cuCtxSetCurrent(a->ctx));
    CUstreamCaptureMode m = a->mode;
    CK(cuThreadExchangeStreamCaptureMode(&m));
    CUdeviceptr p;
    a->alloc_result = cuMemAlloc(&p, 64);
    if (a->alloc_result == CUDA_SUCCESS)
        CK(cuMemFree(p));
    return NULL;
}

/* Capture modes: a potentially unsafe call from another thread in global
 * mode fails and invalidates a global capture; a relaxed thread may. */
static void test_capture_modes(void **state)
{
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUgraph g;
    pthread_t t;
    struct cap_arg a = { fct_ctx(), CU_STREAM_CAPTURE_MODE_GLOBAL, CUDA_SUCCESS };

    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    pthread_create(&t, NULL, alloc_thread, &a);
    pthread_join(t, NULL);
    assert_int_equal(a.alloc_result, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CKR(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    a.mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    pthread_create(&t, NULL, alloc_thread, &a);
    pthread_join(t, NULL);
    assert_int_equal(a.alloc_result, CUDA_SUCCESS);
    CK(cuStreamEndCapture(s, &g));
    CK(cuGraphDestroy(g));

    /* Thread-local captures do not bother other threads... */
    a.mode = CU_STREAM_CAPTURE_MODE_GLOBAL;
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    pthread_create(&t, NULL, alloc_thread, &a);
    pthread_join(t, NULL);
    assert_int_equal(a.alloc_result, CUDA_SUCCESS);
    /* ...but the capturing thread itself may not allocate. */
    CUdeviceptr p;
    CKR(cuMemAlloc(&p, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CKR(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CKR(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

    /* Relaxed capture: anything goes. */
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CK(cuMemAlloc(&p, 64));
    CK(cuMemFree(p));
    CK(cuStreamEndCapture(s, &g));
    CK(cuGraphDestroy(g));
    CUstreamCaptureMode m = 9;
    CKR(cuThreadExchangeStreamCaptureMode(&m), CUDA_ERROR_INVALID_VALUE);
    CK(cuStreamDestroy(s));
}

/* --------------------------------------------------------------- threads */

struct stress_arg {
    CUcontext ctx;
    int id;
    uint64_t sum;
};

/* Many threads, each with its own stream, events and allocations, some
 * sharing a context: results must be exact (and TSan quiet). */
static void *stress_thread(void *arg)
{
    struct stress_arg *a = arg;
    CK(cuCtxSetCurrent(a->ctx));
    CUstream s;
    CUevent e;
    CK(cuStreamCreate(&s, a->id % 2 ? CU_STREAM_NON_BLOCKING : 0));
    CK(cuEventCreate(&e, 0));
    CUdeviceptr p, out;
    CK(cuMemAlloc(&p, 1024 * 4));
    CK(cuMemAlloc(&out, 8));
    CK(fck_fill32(s, p, 1024, 0));
    for (int i = 0; i < 50; i++) {
        CK(fck_add32(s, p, 1024, (uint32_t)a->id));
        if (i % 10 == 0) {
            CK(cuEventRecord(e, s));
            CK(cuEventSynchronize(e));
        }
    }
    CK(cuMemsetD32Async(out, 0, 2, s));
    CK(fck_sum32(s, p, 1024, out));
    CK(cuStreamSynchronize(s));
    CK(cuMemcpyDtoH(&a->sum, out, 8));
    CK(cuMemFree(p));
    CK(cuMemFree(out));
    CK(cuEventDestroy(e));
    CK(cuStreamDestroy(s));
    return NULL;
}

static void test_threads(void **state)
{
    enum { N = 6 };
    CUcontext other;
    CK(cuCtxCreate(&other, NULL, 0, 0));
    CK(fck_load(&(struct fck){ 0 }));          /* module in the other context */
    CK(cuCtxSetCurrent(fct_ctx()));
    fck_use(&fct_kernels);
    pthread_t t[N];
    struct stress_arg a[N];
    for (int i = 0; i < N; i++) {
        a[i] = (struct stress_arg){ i < 4 ? fct_ctx() : other, i + 1, 0 };
        pthread_create(&t[i], NULL, stress_thread, &a[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(a[i].sum, 1024ull * 50 * (uint64_t)(i + 1));
    }
    CK(cuCtxDestroy(other));
}

int main(void)
{
    setenv("FAKECUDA_MEM_MB", "512", 1);
#define T(f) cmocka_unit_test_setup_teardown(f, fct_setup, fct_teardown)
    const struct CMUnitTest tests[] = {
        T(test_ctx_stack),        T(test_primary),          T(test_kernel_catalogue),
        T(test_modules),          T(test_library),          T(test_launch_forms),
        T(test_stream_fifo),      T(test_legacy_stream),    T(test_per_thread_stream),
        T(test_stream_properties), T(test_stream_destroy_pending), T(test_events),
        T(test_host_functions),   T(test_stream_memops),    T(test_capture_graph),
        T(test_capture_fork_join), T(test_capture_modes),   T(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
