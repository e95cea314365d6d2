/* fc_api_test: API conformance of the simulated driver, asserting only
 * behaviour the real driver has too, so that the same binary can be run
 * on a GPU machine against the real libcuda.so.1 (it links libc, libdl and
 * libcuda only, and uses the PTX kernels through fckern). Assertions that
 * hold only for the simulator (poison bytes, exact accounting, its device
 * name and attributes) run only when cuDeviceGetName says
 * "cushare simulated GPU". No timing is asserted beyond ordering with
 * generous sleeps.
 *
 *   fc_api_test [-v]        exit status 0 when every check passed
 */
#include "../progs/fckern.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MiB (1024ull * 1024ull)
#define MS 1000000ull

static bool fake, verbose;
static int passed, failed;
static const char *current;
static bool current_failed;
static CUcontext ctx;

static const char *errname(CUresult r)
{
    const char *s = NULL;
    cuGetErrorName(r, &s);
    return s ? s : "?";
}

/* A failed check reports and abandons the current test. */
#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            printf("  FAIL %s: %s:%d: %s\n", current, __FILE__, __LINE__, #cond); \
            current_failed = true;                                             \
            return;                                                            \
        }                                                                      \
    } while (0)
#define CKR(call, want)                                                        \
    do {                                                                       \
        CUresult r_ = (call);                                                  \
        if (r_ != (want)) {                                                    \
            printf("  FAIL %s: %s:%d: %s = %s, expected %s\n", current, __FILE__, \
                   __LINE__, #call, errname(r_), errname(want));               \
            current_failed = true;                                             \
            return;                                                            \
        }                                                                      \
    } while (0)
#define CK(call) CKR(call, CUDA_SUCCESS)

static void sleep_ms(unsigned ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

static uint32_t get32(CUdeviceptr p)
{
    uint32_t v = 0;
    cuMemcpyDtoH(&v, p, 4);
    return v;
}

static void *libcuda_sym(const char *name)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *p = h ? dlsym(h, name) : NULL;
    if (h)
        dlclose(h);
    return p;
}

/* ------------------------------------------------------------------ tests */

static void t_init_and_device(void)
{
    int v = 0, n = 0, val;
    CUdevice d;
    char name[256];
    CK(cuDriverGetVersion(&v));
    CHECK(v >= 12000);
    CK(cuDeviceGetCount(&n));
    CHECK(n >= 1);
    CKR(cuDeviceGet(&d, n), CUDA_ERROR_INVALID_DEVICE);
    CK(cuDeviceGet(&d, 0));
    CK(cuDeviceGetName(name, sizeof name, d));
    CHECK(name[0] != 0);
    CK(cuDeviceGetAttribute(&val, CU_DEVICE_ATTRIBUTE_WARP_SIZE, d));
    CHECK(val == 32);
    CK(cuDeviceGetAttribute(&val, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, d));
    CHECK(val == 1);
    CK(cuDeviceGetAttribute(&val, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d));
    CHECK(val == 1);
    CK(cuDeviceGetAttribute(&val, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, d));
    CHECK(val == 1024);
    CK(cuDeviceGetAttribute(&val, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d));
    CHECK(val >= 8);
    CKR(cuDeviceGetAttribute(&val, CU_DEVICE_ATTRIBUTE_MAX, d), CUDA_ERROR_INVALID_VALUE);
    CUuuid u1, u2;
    CK(cuDeviceGetUuid(&u1, d));
    CK(cuDeviceGetUuid(&u2, d));
    CHECK(memcmp(u1.bytes, u2.bytes, 16) == 0);
    char bus[64];
    CUdevice back;
    CK(cuDeviceGetPCIBusId(bus, sizeof bus, d));
    CK(cuDeviceGetByPCIBusId(&back, bus));
    CHECK(back == d);
    if (fake) {
        CHECK(v == 13000);
        CK(cuDeviceGetAttribute(&val, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, d));
        CHECK(val == 132);
        CK(cuDeviceGetAttribute(&val, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d));
        CHECK(val == 9);
    }
}

static void t_errors(void)
{
    const char *s;
    CK(cuGetErrorName(CUDA_ERROR_INVALID_VALUE, &s));
    CHECK(strcmp(s, "CUDA_ERROR_INVALID_VALUE") == 0);
    CK(cuGetErrorName(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, &s));
    CHECK(strcmp(s, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED") == 0);
    CK(cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &s));
    CHECK(strcmp(s, "invalid argument") == 0);
    CK(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
    CHECK(strcmp(s, "out of memory") == 0);
    CKR(cuGetErrorName((CUresult)987654, &s), CUDA_ERROR_INVALID_VALUE);
}

static void t_contexts(void)
{
    CUcontext c, cur, popped;
    CK(cuCtxCreate(&c, NULL, 0, 0));
    CK(cuCtxGetCurrent(&cur));
    CHECK(cur == c);
    CUdevice d;
    CK(cuCtxGetDevice(&d));
    CHECK(d == 0);
    CK(cuCtxPopCurrent(&popped));
    CHECK(popped == c);
    CK(cuCtxGetCurrent(&cur));
    CHECK(cur == ctx);
    CK(cuCtxPushCurrent(c));
    CK(cuCtxDestroy(c));
    CK(cuCtxGetCurrent(&cur));
    CHECK(cur == ctx);
    CK(cuCtxSetCurrent(NULL));
    CKR(cuCtxPopCurrent(&popped), CUDA_ERROR_INVALID_CONTEXT);
    CUdeviceptr p;
    CKR(cuMemAlloc(&p, 64), CUDA_ERROR_INVALID_CONTEXT);
    CK(cuCtxSetCurrent(ctx));
    CUcontext again;
    CK(cuDevicePrimaryCtxRetain(&again, 0));
    CHECK(again == ctx);
    CK(cuDevicePrimaryCtxRelease(0));
}

static void t_memory(void)
{
    size_t f0, t0, f1, t1, total;
    CK(cuDeviceTotalMem(&total, 0));
    CK(cuMemGetInfo(&f0, &t0));
    CHECK(t0 == total && f0 <= t0);
    CUdeviceptr p, q, base;
    CK(cuMemAlloc(&p, 64 * MiB));
    CK(cuMemGetInfo(&f1, &t1));
    CHECK(f0 - f1 >= 64 * MiB && f0 - f1 <= 96 * MiB);
    if (fake) {
        CHECK(f0 - f1 == 64 * MiB);
        unsigned char b[64];
        CK(cuMemcpyDtoH(b, p + 4096, sizeof b));
        CHECK(b[0] == 0xFB && b[63] == 0xFB);       /* the poison */
    }
    size_t sz;
    CK(cuMemGetAddressRange(&base, &sz, p + 12345));
    CHECK(base == p && sz == 64 * MiB);
    CKR(cuMemAlloc(&q, 0), CUDA_ERROR_INVALID_VALUE);
    CKR(cuMemAlloc(&q, total + MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuMemFree(p));
    CKR(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);
    size_t pitch;
    CK(cuMemAllocPitch(&q, &pitch, 1000, 8, 4));
    CHECK(pitch >= 1000);
    CK(cuMemFree(q));
}

static void t_pointer_attributes(void)
{
    CUdeviceptr d, m;
    void *h;
    unsigned type = 0;
    CUcontext c = NULL;
    CUdeviceptr start = 0;
    size_t size = 0;
    int managed = -1;
    CK(cuMemAlloc(&d, 3 * 4096));
    CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d));
    CHECK(type == CU_MEMORYTYPE_DEVICE);
    CK(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, d + 5));
    CHECK(c == ctx);
    CK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, d + 5000));
    CHECK(start == d);
    CK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, d + 5000));
    CHECK(size == 3 * 4096);
    CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, d));
    CHECK(managed == 0);
    CK(cuMemAllocHost(&h, 4096));
    CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)h));
    CHECK(type == CU_MEMORYTYPE_HOST);
    CUdeviceptr hd;
    CK(cuMemHostGetDevicePointer(&hd, h, 0));
    CHECK(hd == (CUdeviceptr)h);
    CK(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL));
    CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m));
    CHECK(managed == 1);
    CK(cuMemFree(m));
    CK(cuMemFreeHost(h));
    CK(cuMemFree(d));
}

static void t_host_register(void)
{
    size_t n = 1 << 16;
    void *buf = aligned_alloc(4096, n);
    CHECK(buf != NULL);
    CK(cuMemHostRegister(buf, n, 0));
    CKR(cuMemHostRegister(buf, n, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CK(cuMemHostUnregister(buf));
    CKR(cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    free(buf);
}

static void t_copies(void)
{
    enum { N = 1 << 16 };
    static uint8_t a[N], b[N];
    for (int i = 0; i < N; i++)
        a[i] = (uint8_t)(i * 13 + 1);
    CUdeviceptr x, y;
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&x, N));
    CK(cuMemAlloc(&y, N));
    CK(cuMemcpyHtoD(x, a, N));
    CK(cuMemcpyDtoD(y, x, N));
    memset(b, 0, N);
    CK(cuMemcpyDtoH(b, y, N));
    CHECK(memcmp(a, b, N) == 0);
    CK(cuMemcpy((CUdeviceptr)b, x + 1, 100));            /* unified addressing */
    CHECK(memcmp(a + 1, b, 100) == 0);
    CK(cuMemsetD8Async(x, 0x3c, N, s));
    CK(cuMemsetD16Async(x + 2, 0x1234, 1, s));
    CK(cuMemsetD32Async(x + 8, 0xdeadbeef, 2, s));
    CK(cuMemcpyDtoHAsync(b, x, 16, s));
    CK(cuStreamSynchronize(s));
    CHECK(b[0] == 0x3c && b[2] == 0x34 && b[3] == 0x12 && b[4] == 0x3c);
    CHECK(b[8] == 0xef && b[15] == 0xde);
    /* A 2-D copy: 8 rows of 32 bytes out of a 256-byte pitch. */
    CUDA_MEMCPY2D c2 = {
        .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = a, .srcPitch = 256,
        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = y, .dstPitch = 32,
        .WidthInBytes = 32, .Height = 8,
    };
    CK(cuMemcpy2D(&c2));
    CK(cuMemcpyDtoH(b, y, 256));
    CHECK(memcmp(b + 32 * 7, a + 256 * 7, 32) == 0);
    /* A 3-D copy back. */
    CUDA_MEMCPY3D c3 = {
        .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = y, .srcPitch = 32, .srcHeight = 4,
        .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = b, .dstPitch = 64, .dstHeight = 4,
        .WidthInBytes = 32, .Height = 4, .Depth = 2,
    };
    memset(b, 0, N);
    CK(cuMemcpy3D(&c3));
    CHECK(memcmp(b + 64 * 4 + 64 * 3, a + 256 * 7, 32) == 0);
    CK(cuMemFree(x));
    CK(cuMemFree(y));
    CK(cuStreamDestroy(s));
}

static void t_kernels(void)
{
    CUdeviceptr p, out;
    CK(cuMemAlloc(&p, 1 << 20));
    CK(cuMemAlloc(&out, 8));
    uint64_t n = (1 << 20) / 4;
    CK(fck_fill32(NULL, p, n, 2));
    CK(fck_add32(NULL, p, n / 2, 3));
    CK(cuMemsetD32(out, 0, 2));
    CK(fck_sum32(NULL, p, n, out));
    CK(cuCtxSynchronize());
    uint64_t sum = 0;
    CK(cuMemcpyDtoH(&sum, out, 8));
    CHECK(sum == (n / 2) * 5 + (n / 2) * 2);
    CK(fck_sleep(NULL, 1 * MS));
    CK(cuCtxSynchronize());
    CK(cuMemFree(p));
    CK(cuMemFree(out));
}

static void t_launch_forms(void)
{
    CUmodule m;
    CUfunction f;
    CK(cuModuleLoadData(&m, fck_ptx));
    CKR(cuModuleGetFunction(&f, m, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
    CK(cuModuleGetFunction(&f, m, "fc_fill32"));
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 4096));
    struct {
        CUdeviceptr p;
        uint64_t n;
        uint32_t v;
        uint32_t pad;
    } args = { p, 1024, 0xabc, 0 };
    size_t size = 20;                       /* the kernel's parameter space */
    void *extra[] = { CU_LAUNCH_PARAM_BUFFER_POINTER, &args, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                      CU_LAUNCH_PARAM_END };
    CK(cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, NULL, NULL, extra));
    CK(cuCtxSynchronize());
    CHECK(get32(p + 4092) == 0xabc);
    size = sizeof args;                     /* 24: more than the kernel takes */
    CKR(cuLaunchKernel(f, 4, 1, 1, 256, 1, 1, 0, NULL, NULL, extra), CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
    uint64_t n = 1024;
    uint32_t v = 7;
    void *params[] = { &p, &n, &v };
    CKR(cuLaunchKernel(f, 0, 1, 1, 256, 1, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
    CKR(cuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, NULL, params, NULL), CUDA_ERROR_INVALID_VALUE);
    CUlaunchConfig cfg = { .gridDimX = 4, .gridDimY = 1, .gridDimZ = 1,
                           .blockDimX = 256, .blockDimY = 1, .blockDimZ = 1 };
    CK(cuLaunchKernelEx(&cfg, f, params, NULL));
    CK(cuCtxSynchronize());
    CHECK(get32(p) == 7);
    /* A library's CUkernel launches in place of a CUfunction. */
    CUlibrary lib;
    CUkernel k;
    CK(cuLibraryLoadData(&lib, fck_ptx, NULL, NULL, 0, NULL, NULL, 0));
    CK(cuLibraryGetKernel(&k, lib, "fc_add32"));
    v = 1;
    CK(cuLaunchKernel((CUfunction)k, 4, 1, 1, 256, 1, 1, 0, NULL, params, NULL));
    CK(cuCtxSynchronize());
    CHECK(get32(p + 100) == 8);
    CK(cuLibraryUnload(lib));
    CK(cuModuleUnload(m));
    CK(cuMemFree(p));
}

/* Stream ordering: FIFO, the legacy stream's implicit waits, and the
 * non-blocking exemption (a 500 ms sleep against a tiny kernel). */
static void t_streams(void)
{
    CUstream blk, nb;
    CK(cuStreamCreate(&blk, CU_STREAM_DEFAULT));
    CK(cuStreamCreate(&nb, CU_STREAM_NON_BLOCKING));
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 256));
    for (uint32_t i = 1; i <= 50; i++) {
        CK(fck_fill32(nb, p, 64, i * 100));
        CK(fck_add32(nb, p, 64, i));
    }
    CK(cuStreamSynchronize(nb));
    CHECK(get32(p) == 5050);
    CK(fck_sleep(blk, 50 * MS));
    CK(fck_fill32(blk, p, 64, 1));
    CK(fck_add32(NULL, p, 64, 1));                  /* waits for blk */
    CK(cuStreamSynchronize(NULL));
    CHECK(get32(p) == 2);
    CK(fck_sleep(NULL, 50 * MS));
    CK(fck_fill32(NULL, p, 64, 10));
    CK(fck_add32(blk, p, 64, 1));                   /* waits for legacy */
    CK(cuStreamSynchronize(blk));
    CHECK(get32(p) == 11);
    CK(fck_sleep(nb, 500 * MS));
    CK(fck_fill32(NULL, p, 64, 20));
    CK(cuStreamSynchronize(NULL));                  /* does not wait for nb */
    CKR(cuStreamQuery(nb), CUDA_ERROR_NOT_READY);
    CK(cuStreamSynchronize(nb));
    CK(cuStreamDestroy(blk));
    CK(cuStreamDestroy(nb));
    CK(cuMemFree(p));
}

struct host_arg {
    volatile uint32_t *pinned;
    uint32_t seen;
};

static void CUDA_CB host_fn(void *arg)
{
    struct host_arg *h = arg;
    h->seen = h->pinned[0];
}

static void t_events_and_host_functions(void)
{
    CUstream a, b;
    CUevent e1, e2, nt;
    float ms;
    CK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CK(cuEventCreate(&e1, 0));
    CK(cuEventCreate(&e2, 0));
    CK(cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING));
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 64));
    CK(cuEventRecord(e1, a));
    CK(fck_sleep(a, 50 * MS));
    CK(fck_fill32(a, p, 16, 1));
    CK(cuEventRecord(e2, a));
    CK(cuStreamWaitEvent(b, e2, 0));
    CK(fck_add32(b, p, 16, 1));
    CK(cuStreamSynchronize(b));
    CHECK(get32(p) == 2);
    CK(cuEventSynchronize(e2));
    CK(cuEventQuery(e2));
    CK(cuEventElapsedTime(&ms, e1, e2));
    CHECK(ms > 0);
    CK(cuEventRecord(nt, a));
    CK(cuEventSynchronize(nt));
    CKR(cuEventElapsedTime(&ms, e1, nt), CUDA_ERROR_INVALID_HANDLE);
    uint32_t *pinned;
    CK(cuMemAllocHost((void **)&pinned, 4096));
    pinned[0] = 0;
    struct host_arg h = { pinned, 0 };
    CK(fck_fill32(a, (CUdeviceptr)pinned, 16, 42));
    CK(cuLaunchHostFunc(a, host_fn, &h));
    CK(cuStreamSynchronize(a));
    CHECK(h.seen == 42);
    CK(cuMemFreeHost(pinned));
    CK(cuEventDestroy(e1));
    CK(cuEventDestroy(e2));
    CK(cuEventDestroy(nt));
    CK(cuStreamDestroy(a));
    CK(cuStreamDestroy(b));
    CK(cuMemFree(p));
}

static void t_stream_memops(void)
{
    int ok = 0;
    CK(cuDeviceGetAttribute(&ok, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, 0));
    if (!ok)
        return;                                 /* not on this machine */
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    uint32_t *flag;
    CK(cuMemHostAlloc((void **)&flag, 4096, CU_MEMHOSTALLOC_DEVICEMAP));
    __atomic_store_n(&flag[0], 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&flag[1], 0, __ATOMIC_SEQ_CST);
    CK(cuStreamWaitValue32(s, (CUdeviceptr)flag, 1, CU_STREAM_WAIT_VALUE_GEQ));
    CK(cuStreamWriteValue32(s, (CUdeviceptr)&flag[1], 9, 0));
    sleep_ms(50);
    CKR(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    __atomic_store_n(&flag[0], 1, __ATOMIC_SEQ_CST);
    CK(cuStreamSynchronize(s));
    CHECK(__atomic_load_n(&flag[1], __ATOMIC_SEQ_CST) == 9);
    CK(cuMemFreeHost(flag));
    CK(cuStreamDestroy(s));
}

struct alloc_arg {
    CUresult r;
};

static void *alloc_thread(void *arg)
{
    struct alloc_arg *a = arg;
    CUdeviceptr p;
    cuCtxSetCurrent(ctx);
    a->r = cuMemAlloc(&p, 4096);
    if (a->r == CUDA_SUCCESS)
        cuMemFree(p);
    return NULL;
}

static void t_capture(void)
{
    CUstream s, blk;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&blk, CU_STREAM_DEFAULT));
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 64));
    CK(cuMemsetD32(p, 5, 16));
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureStatus st;
    CK(cuStreamIsCapturing(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CK(fck_add32(s, p, 16, 1));
    CUgraph g;
    CK(cuStreamEndCapture(s, &g));
    CK(cuCtxSynchronize());
    CHECK(get32(p) == 5);                           /* captured, not run */
    CUgraphExec x;
    CK(cuGraphInstantiate(&x, g, 0));
    CK(cuGraphLaunch(x, s));
    CK(cuGraphLaunch(x, s));
    CK(cuStreamSynchronize(s));
    CHECK(get32(p) == 7);
    CK(cuGraphExecDestroy(x));
    CK(cuGraphDestroy(g));
    /* Asking the host about an event recorded in a live capture, or
     * synchronizing a capturing stream, invalidates the capture. */
    CUevent ev;
    CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuEventRecord(ev, s));
    CKR(cuEventQuery(ev), CUDA_ERROR_CAPTURED_EVENT);
    CKR(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuEventDestroy(ev));
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CKR(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CKR(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* Global mode: another thread's cuMemAlloc is prohibited. */
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    struct alloc_arg a = { CUDA_SUCCESS };
    pthread_t t;
    pthread_create(&t, NULL, alloc_thread, &a);
    pthread_join(t, NULL);
    CHECK(a.r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    CKR(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* Relaxed mode: it is allowed. */
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    pthread_create(&t, NULL, alloc_thread, &a);
    pthread_join(t, NULL);
    CHECK(a.r == CUDA_SUCCESS);
    CK(cuStreamEndCapture(s, &g));
    CK(cuGraphDestroy(g));
    /* Legacy-stream work while a blocking stream captures. */
    CK(cuStreamBeginCapture(blk, CU_STREAM_CAPTURE_MODE_RELAXED));
    CKR(fck_add32(NULL, p, 16, 1), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    CKR(cuStreamEndCapture(blk, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    CK(cuStreamDestroy(s));
    CK(cuStreamDestroy(blk));
    CK(cuMemFree(p));
}

static void t_vmm(void)
{
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
    size_t g = 0;
    CK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CHECK(g >= 2 * MiB && (g & (g - 1)) == 0);
    if (fake)
        CHECK(g == 2 * MiB);
    CUmemGenericAllocationHandle h1, h2, h3;
    CKR(cuMemCreate(&h1, g + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr va;
    CK(cuMemAddressReserve(&va, 2 * g, 0, 0, 0));
    CK(cuMemCreate(&h1, g, &prop, 0));
    CK(cuMemMap(va, g, 0, h1, 0));
    CUmemAccessDesc acc = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 },
                            .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CK(cuMemSetAccess(va, g, &acc, 1));
    uint32_t *pat = malloc(g), *back = malloc(g);
    CHECK(pat && back);
    for (size_t i = 0; i < g / 4; i++)
        pat[i] = (uint32_t)(i * 2654435761u);
    CK(cuMemcpyHtoD(va, pat, g));
    /* From pageable memory the copy returns once the source is staged, its
     * DMA possibly still in flight: unmapping then lost the data on an H200
     * once (2026-11-30), and the DMA's fault poisoned the context. */
    CK(cuCtxSynchronize());
    /* Unmapping without releasing and mapping again keeps the data. */
    CK(cuMemUnmap(va, g));
    CK(cuMemMap(va, g, 0, h1, 0));
    CK(cuMemSetAccess(va, g, &acc, 1));
    CHECK(get32(va + 400) == pat[100]);
    /* Released while mapped: still usable; the address finds the handle. */
    CK(cuMemRelease(h1));
    CHECK(get32(va + 400) == pat[100]);
    CK(cuMemRetainAllocationHandle(&h2, (void *)va));
    CK(cuMemUnmap(va, g));
    CK(cuMemRelease(h2));
    /* Touching the now unmapped range fails (and does not crash). */
    uint32_t w = 1;
    CUresult r = cuMemcpyHtoD(va, &w, 4);
    CHECK(r != CUDA_SUCCESS);
    if (fake)
        CHECK(r == CUDA_ERROR_INVALID_VALUE);
    /* New memory at the same address; an explicit copy restores it. */
    CK(cuMemCreate(&h3, g, &prop, 0));
    CK(cuMemMap(va, g, 0, h3, 0));
    CK(cuMemSetAccess(va, g, &acc, 1));
    if (fake)
        CHECK(get32(va + 400) == 0xFBFBFBFB);
    CK(cuMemcpyHtoD(va, pat, g));
    CK(fck_add32(NULL, va, g / 4, 1));
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH(back, va, g));
    CHECK(back[12345] == pat[12345] + 1);
    CK(cuMemUnmap(va, g));
    CK(cuMemRelease(h3));
    CK(cuMemAddressFree(va, 2 * g));
    free(pat);
    free(back);
}

static void expect_proc(const char *api, int ver, cuuint64_t flags, const char *symbol, bool *ok)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    CUresult r = cuGetProcAddress(api, &fn, ver, flags, &st);
    void *want = libcuda_sym(symbol);
    if (r != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS || !want || fn != want) {
        printf("  FAIL %s: cuGetProcAddress(%s, %d, %llu) = %s %p, dlsym(%s) = %p\n", current,
               api, ver, (unsigned long long)flags, errname(r), fn, symbol, want);
        *ok = false;
    }
}

static void t_get_proc_address(void)
{
    const cuuint64_t PT = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    bool ok = true;
    expect_proc("cuMemAlloc", 13000, 0, "cuMemAlloc_v2", &ok);
    expect_proc("cuMemFree", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuMemFree_v2", &ok);
    expect_proc("cuCtxCreate", 12000, 0, "cuCtxCreate_v3", &ok);
    expect_proc("cuMemcpyHtoD", 13000, PT, "cuMemcpyHtoD_v2_ptds", &ok);
    expect_proc("cuMemcpyHtoD", 13000, 0, "cuMemcpyHtoD_v2", &ok);
    expect_proc("cuLaunchKernel", 12000, PT, "cuLaunchKernel_ptsz", &ok);
    expect_proc("cuLaunchKernel", 12000, 0, "cuLaunchKernel", &ok);
    expect_proc("cuStreamBeginCapture", 12000, PT, "cuStreamBeginCapture_v2_ptsz", &ok);
    expect_proc("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2", &ok);
    expect_proc("cuMemAlloc", 3000, 0, "cuMemAlloc", &ok);          /* v1 */
    expect_proc("cuCtxSynchronize", 12080, 0, "cuCtxSynchronize", &ok);
    CHECK(ok);
    /* Not found: success, a NULL pointer and the reason. */
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult st;
    CK(cuGetProcAddress("cuNoSuchEntryPoint", &fn, 13000, 0, &st));
    CHECK(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && fn == NULL);
    CK(cuGetProcAddress("cuMemAlloc_v2", &fn, 13000, 0, &st));
    CHECK(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && fn == NULL);
    fn = (void *)1;
    CK(cuGetProcAddress("cuLaunchKernelEx", &fn, 11000, 0, &st));
    CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT && fn == NULL);
    fn = (void *)1;
    CK(cuGetProcAddress("cuLaunchKernel", &fn, 6050, PT, &st));   /* no _ptsz yet */
    CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT && fn == NULL);
    CKR(cuGetProcAddress("cuMemAlloc", &fn, 13000, 4, &st), CUDA_ERROR_INVALID_VALUE);
    int drv = 0;
    CK(cuDriverGetVersion(&drv));
    CKR(cuGetProcAddress("cuMemAlloc", &fn, drv + 10, 0, &st), CUDA_ERROR_INVALID_VALUE);
    /* The 11.3 form reports not-found as an error. */
    CUresult (*v1)(const char *, void **, int, cuuint64_t) = libcuda_sym("cuGetProcAddress");
    CHECK(v1 != NULL);
    CKR(v1("cuNoSuchEntryPoint", &fn, 13000, 0), CUDA_ERROR_NOT_FOUND);
    CKR(v1("cuLaunchKernelEx", &fn, 11000, 0), CUDA_ERROR_NOT_FOUND);
}

/* Last: a kernel touching unmapped memory is a device fault, sticky on
 * the context (the real driver may keep the whole process from further
 * CUDA work afterwards, so nothing runs after this). */
static void t_device_fault(void)
{
    CUdeviceptr va;
    size_t g = 2 * MiB;
    CK(cuMemAddressReserve(&va, g, 0, 0, 0));
    CK(fck_fill32(NULL, va, g / 4, 1));
    CKR(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    CUdeviceptr p;
    CKR(cuMemAlloc(&p, 64), CUDA_ERROR_ILLEGAL_ADDRESS);
}

/* ------------------------------------------------------------------- main */

static void run(const char *name, void (*fn)(void))
{
    current = name;
    current_failed = false;
    fn();
    if (current_failed) {
        failed++;
    } else {
        passed++;
        if (verbose)
            printf("  ok   %s\n", name);
    }
}

int main(int argc, char **argv)
{
    verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    CUresult r = cuInit(0);
    CUdevice d;
    char name[256] = "";
    static struct fck k;
    if (r == CUDA_SUCCESS)
        r = cuDeviceGet(&d, 0);
    if (r == CUDA_SUCCESS)
        r = cuDeviceGetName(name, sizeof name, d);
    if (r == CUDA_SUCCESS)
        r = cuDevicePrimaryCtxRetain(&ctx, d);
    if (r == CUDA_SUCCESS)
        r = cuCtxSetCurrent(ctx);
    if (r == CUDA_SUCCESS)
        r = fck_load(&k);
    if (r != CUDA_SUCCESS) {
        printf("fc_api_test: setup failed: %s\n", errname(r));
        return 1;
    }
    fake = strcmp(name, "cushare simulated GPU") == 0;
    int ver = 0;
    cuDriverGetVersion(&ver);
    printf("fc_api_test: %s, driver API %d%s\n", name, ver, fake ? " (simulated)" : "");
    run("init_and_device", t_init_and_device);
    run("errors", t_errors);
    run("contexts", t_contexts);
    run("memory", t_memory);
    run("pointer_attributes", t_pointer_attributes);
    run("host_register", t_host_register);
    run("copies", t_copies);
    run("kernels", t_kernels);
    run("launch_forms", t_launch_forms);
    run("streams", t_streams);
    run("events_and_host_functions", t_events_and_host_functions);
    run("stream_memops", t_stream_memops);
    run("capture", t_capture);
    run("vmm", t_vmm);
    run("get_proc_address", t_get_proc_address);
    run("device_fault", t_device_fault);
    printf("fc_api_test: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
