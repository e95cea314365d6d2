/* fc_mem_test: allocations, capacity accounting, poison, host memory,
 * pools, pointer attributes, copies and memsets of the simulated driver
 * (one process; the cross-process side is fc_mp_test).
 * Runs with FAKECUDA_MEM_MB=256. */
#include "fc_testutil.h"

#include <stdlib.h>
#include <string.h>

#define TOTAL (256 * MiB)

static size_t free_now(void)
{
    size_t f, t;
    CK(cuMemGetInfo(&f, &t));
    assert_int_equal(t, TOTAL);
    return f;
}

/* cuMemGetInfo: total is the device, free drops by exactly what is
 * allocated (page-rounded) and by 8 MiB per context. */
static void test_accounting(void **state)
{
    assert_int_equal(free_now(), TOTAL - 8 * MiB);     /* the primary context */
    CUdeviceptr a, b;
    CK(cuMemAlloc(&a, 10 * MiB));
    assert_int_equal(free_now(), TOTAL - 18 * MiB);
    CK(cuMemAlloc(&b, 100));                           /* one page */
    assert_int_equal(free_now(), TOTAL - 18 * MiB - 4096);
    CUcontext c2;
    CK(cuCtxCreate(&c2, NULL, 0, 0));
    assert_int_equal(free_now(), TOTAL - 26 * MiB - 4096);
    CK(cuCtxDestroy(c2));
    CK(cuMemFree(b));
    CK(cuMemFree(a));
    assert_int_equal(free_now(), TOTAL - 8 * MiB);
}

static void test_alloc_errors(void **state)
{
    CUdeviceptr p, q;
    CKR(cuMemAlloc(&p, 0), CUDA_ERROR_INVALID_VALUE);
    CKR(cuMemAlloc(NULL, 16), CUDA_ERROR_INVALID_VALUE);
    CKR(cuMemAlloc(&p, TOTAL), CUDA_ERROR_OUT_OF_MEMORY);
    CK(cuMemAlloc(&p, 200 * MiB));
    CKR(cuMemAlloc(&q, 100 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    CKR(cuMemFree(p + 16), CUDA_ERROR_INVALID_VALUE);   /* interior pointer */
    CK(cuMemFree(p));
    CKR(cuMemFree(p), CUDA_ERROR_INVALID_VALUE);        /* double free */
    CK(cuMemFree(0));
    CUcontext c;
    CK(cuCtxPopCurrent(&c));
    CKR(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
    size_t f, t;
    CKR(cuMemGetInfo(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
    CK(cuCtxPushCurrent(c));
}

/* Fresh device memory reads as the poison byte, also where a freed
 * allocation held data a moment ago. */
static void test_poison(void **state)
{
    CUdeviceptr p, q;
    CK(cuMemAlloc(&p, 1 * MiB));
    assert_true(fct_all_bytes(p, 1 * MiB, 0xFB));
    CK(cuMemsetD8(p, 0x11, 1 * MiB));
    CK(cuMemFree(p));
    CK(cuMemAlloc(&q, 1 * MiB));
    assert_true(fct_all_bytes(q, 1 * MiB, 0xFB));
    CK(cuMemFree(q));
}

static void test_pitch(void **state)
{
    CUdeviceptr p;
    size_t pitch;
    CK(cuMemAllocPitch(&p, &pitch, 1000, 10, 4));
    assert_true(pitch >= 1000 && pitch % 512 == 0);
    size_t base_size;
    CUdeviceptr base;
    CK(cuMemGetAddressRange(&base, &base_size, p + pitch));
    assert_int_equal(base, p);
    assert_int_equal(base_size, pitch * 10);
    CK(cuMemFree(p));
    CKR(cuMemAllocPitch(&p, &pitch, 1000, 10, 3), CUDA_ERROR_INVALID_VALUE);
    CKR(cuMemAllocPitch(&p, &pitch, 0, 10, 4), CUDA_ERROR_INVALID_VALUE);
}

/* Managed memory: host and device share it; not charged until touched on
 * a real GPU, never here. */
static void test_managed(void **state)
{
    CUdeviceptr m;
    size_t before = free_now();
    CK(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL));
    assert_int_equal(free_now(), before);
    uint32_t *h = (uint32_t *)m;
    for (int i = 0; i < 1024; i++)
        h[i] = (uint32_t)i;
    CK(fck_add32(NULL, m, 1024, 5));
    CK(cuCtxSynchronize());
    assert_int_equal(h[100], 105);
    int managed = 0;
    CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m));
    assert_int_equal(managed, 1);
    CK(cuMemFree(m));
    CKR(cuMemAllocManaged(&m, 4096, 7), CUDA_ERROR_INVALID_VALUE);
}

/* Pinned host memory is device-accessible at the same address. */
static void test_host_alloc(void **state)
{
    void *h;
    size_t before = free_now();
    CK(cuMemHostAlloc(&h, 1 << 20, CU_MEMHOSTALLOC_DEVICEMAP));
    assert_int_equal(free_now(), before);
    CUdeviceptr d;
    CK(cuMemHostGetDevicePointer(&d, h, 0));
    assert_int_equal(d, (CUdeviceptr)h);
    CK(fck_fill32(NULL, d, 256, 0xabcd));
    CK(cuCtxSynchronize());
    assert_int_equal(((uint32_t *)h)[255], 0xabcd);
    unsigned flags;
    CK(cuMemHostGetFlags(&flags, h));
    assert_true(flags & CU_MEMHOSTALLOC_DEVICEMAP);
    CKR(cuMemHostGetDevicePointer(&d, h, 1), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemFreeHost(h));
    CKR(cuMemFreeHost(h), CUDA_ERROR_INVALID_VALUE);
    void *h2;
    CK(cuMemAllocHost(&h2, 100));
    CK(cuMemFreeHost(h2));
    CKR(cuMemHostAlloc(&h2, 100, 0x100), CUDA_ERROR_INVALID_VALUE);
}

static void test_host_register(void **state)
{
    size_t n = 1 << 16;
    uint32_t *buf = aligned_alloc(4096, n);
    assert_non_null(buf);
    memset(buf, 0, n);
    CK(cuMemHostRegister(buf, n, CU_MEMHOSTREGISTER_DEVICEMAP));
    CKR(cuMemHostRegister(buf + 16, 64, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    CUdeviceptr d;
    CK(cuMemHostGetDevicePointer(&d, buf + 4, 0));
    assert_int_equal(d, (CUdeviceptr)(buf + 4));
    CK(fck_fill32(NULL, (CUdeviceptr)buf, n / 4, 7));
    CK(cuCtxSynchronize());
    assert_int_equal(buf[n / 4 - 1], 7);
    unsigned mt = 0;
    CK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)buf));
    assert_int_equal(mt, CU_MEMORYTYPE_HOST);
    CK(cuMemHostUnregister(buf));
    CKR(cuMemHostUnregister(buf), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    CKR(cuMemHostGetDevicePointer(&d, buf, 0), CUDA_ERROR_INVALID_VALUE);
    free(buf);
}

static void test_pointer_attributes(void **state)
{
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 3 * 4096));
    CUcontext c = NULL;
    unsigned type = 0;
    int ord = -1, managed = -1, mapped = 0;
    CUdeviceptr start = 0, dp = 0;
    size_t size = 0;
    void *hp;
    CK(cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, p + 10));
    assert_ptr_equal(c, fct_ctx());
    CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p));
    assert_int_equal(type, CU_MEMORYTYPE_DEVICE);
    CK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
    assert_int_equal(ord, 0);
    CK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p + 5000));
    assert_int_equal(start, p);
    CK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p + 5000));
    assert_int_equal(size, 3 * 4096);
    CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p));
    assert_int_equal(managed, 0);
    CK(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, p));
    assert_int_equal(mapped, 1);
    CK(cuPointerGetAttribute(&dp, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p + 8));
    assert_int_equal(dp, p + 8);
    CKR(cuPointerGetAttribute(&hp, CU_POINTER_ATTRIBUTE_HOST_POINTER, p), CUDA_ERROR_INVALID_VALUE);

    /* Several at once; an unknown pointer is not an error there. */
    CUpointer_attribute attrs[] = { CU_POINTER_ATTRIBUTE_CONTEXT, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL };
    void *data[] = { &c, &type, &ord };
    CK(cuPointerGetAttributes(3, attrs, data, p));
    assert_ptr_equal(c, fct_ctx());
    assert_int_equal(type, CU_MEMORYTYPE_DEVICE);
    int stack_var;
    CK(cuPointerGetAttributes(3, attrs, data, (CUdeviceptr)&stack_var));
    assert_null(c);
    assert_int_equal(type, 0);
    CKR(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)&stack_var),
        CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr base;
    CKR(cuMemGetAddressRange(&base, &size, (CUdeviceptr)&stack_var), CUDA_ERROR_NOT_FOUND);
    CK(cuMemFree(p));
    CKR(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p), CUDA_ERROR_INVALID_VALUE);
}

/* Stream-ordered allocation: charged at once, returned when the stream
 * reaches the free; pools count what they hand out. */
static void test_async_alloc(void **state)
{
    CUstream s;
    CK(cuStreamCreate(&s, 0));
    size_t before = free_now();
    CUdeviceptr p;
    CK(cuMemAllocAsync(&p, 2 * MiB, s));
    assert_int_equal(free_now(), before - 2 * MiB);
    CUmemoryPool pool, pool2;
    CK(cuDeviceGetDefaultMemPool(&pool, 0));
    CK(cuDeviceGetMemPool(&pool2, 0));
    assert_ptr_equal(pool, pool2);
    cuuint64_t used = 0;
    CK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
    assert_int_equal(used, 2 * MiB);
    CK(fck_sleep(s, 50000000));
    CK(fck_fill32(s, p, 1024, 3));
    CK(cuMemFreeAsync(p, s));
    assert_int_equal(free_now(), before - 2 * MiB);     /* not yet reached */
    CK(cuStreamSynchronize(s));
    assert_int_equal(free_now(), before);
    CK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
    assert_int_equal(used, 0);
    cuuint64_t thr = 1 << 30, back = 0;
    CK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr));
    CK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &back));
    assert_int_equal(back, thr);
    CK(cuMemAllocFromPoolAsync(&p, 4096, pool, s));
    CK(cuMemFreeAsync(p, s));
    CKR(cuMemFreeAsync(p + 1, s), CUDA_ERROR_INVALID_VALUE);
    CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                             .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
    CUmemoryPool mine;
    CK(cuMemPoolCreate(&mine, &props));
    CK(cuMemAllocFromPoolAsync(&p, 8192, mine, s));
    CK(cuMemFreeAsync(p, s));
    CK(cuStreamSynchronize(s));
    CK(cuMemPoolDestroy(mine));
    CKR(cuMemPoolDestroy(pool), CUDA_ERROR_INVALID_VALUE);   /* the default */
    CK(cuStreamDestroy(s));
}

/* A context's allocations go with it. */
static void test_ctx_destroy_frees(void **state)
{
    size_t before = free_now();
    CUcontext c2;
    CUdeviceptr p;
    void *h;
    CK(cuCtxCreate(&c2, NULL, 0, 0));
    CK(cuMemAlloc(&p, 20 * MiB));
    CK(cuMemAllocHost(&h, 4096));
    CK(cuCtxDestroy(c2));
    CK(cuCtxSetCurrent(fct_ctx()));
    assert_int_equal(free_now(), before);
    unsigned type;
    CKR(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p), CUDA_ERROR_INVALID_VALUE);
}

static void test_memsets(void **state)
{
    CUdeviceptr p;
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&p, 4096));
    uint8_t h[4096];
    CK(cuMemsetD8(p, 0x5a, 4096));
    CK(cuMemcpyDtoH(h, p, 4096));
    assert_int_equal(h[4095], 0x5a);
    CK(cuMemsetD16(p + 2, 0xbeef, 3));
    CK(cuMemcpyDtoH(h, p, 16));
    assert_int_equal(h[1], 0x5a);
    assert_int_equal(h[2] | h[3] << 8, 0xbeef);
    assert_int_equal(h[6] | h[7] << 8, 0xbeef);
    assert_int_equal(h[8], 0x5a);
    CK(cuMemsetD32Async(p, 0x01020304, 1024, s));
    CK(cuStreamSynchronize(s));
    assert_int_equal(fct_get32(p + 4092), 0x01020304);
    CKR(cuMemsetD16(p + 1, 0, 4), CUDA_ERROR_INVALID_VALUE);   /* misaligned */
    CKR(cuMemsetD32(p + 2, 0, 4), CUDA_ERROR_INVALID_VALUE);
    CKR(cuMemsetD8(p, 0, 4097), CUDA_ERROR_INVALID_VALUE);     /* past the end */
    /* 2-D: 3 rows of 8 bytes in a 64-byte pitch; the gaps stay. */
    CK(cuMemsetD8(p, 0, 4096));
    CK(cuMemsetD2D32(p, 64, 0xffffffff, 2, 3));
    CK(cuMemsetD2D8Async(p + 1024, 64, 9, 8, 3, s));
    CK(cuMemsetD2D16(p + 2048, 64, 0x0101, 4, 3));
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH(h, p, 4096));
    assert_int_equal(h[128 + 7], 0xff);
    assert_int_equal(h[128 + 8], 0);
    assert_int_equal(h[1024 + 64 * 2 + 7], 9);
    assert_int_equal(h[1024 + 64 * 2 + 8], 0);
    assert_int_equal(h[2048 + 64 + 7], 1);
    assert_int_equal(h[2048 + 64 + 8], 0);
    CK(cuMemFree(p));
    CK(cuStreamDestroy(s));
}

static void test_copies(void **state)
{
    enum { N = 4096 };
    static uint8_t src[N], dst[N];
    for (int i = 0; i < N; i++)
        src[i] = (uint8_t)(i * 7);
    CUdeviceptr a, b;
    CUstream s;
    CK(cuStreamCreate(&s, 0));
    CK(cuMemAlloc(&a, N));
    CK(cuMemAlloc(&b, N));
    CK(cuMemcpyHtoD(a, src, N));
    CK(cuMemcpyDtoD(b, a, N));
    memset(dst, 0, N);
    CK(cuMemcpyDtoH(dst, b, N));
    assert_memory_equal(src, dst, N);
    /* Unified addressing: the direction comes from the address map. */
    CK(cuMemcpy(a, (CUdeviceptr)src + 1, N - 1));
    CK(cuMemcpy((CUdeviceptr)dst, a, N - 1));
    assert_memory_equal(src + 1, dst, N - 1);
    CK(cuMemcpy((CUdeviceptr)dst, (CUdeviceptr)src, N));           /* host to host */
    assert_memory_equal(src, dst, N);
    /* Async forms. */
    memset(dst, 0, N);
    CK(cuMemcpyHtoDAsync(a, src, N, s));
    CK(cuMemcpyDtoDAsync(b, a, N, s));
    CK(cuMemcpyDtoHAsync(dst, b, N, s));
    CK(cuMemcpyAsync((CUdeviceptr)dst + 8, a + 8, 8, s));
    CK(cuStreamSynchronize(s));
    assert_memory_equal(src, dst, N);
    /* Peer copies between two contexts of the device. */
    CK(cuMemcpyPeer(b, fct_ctx(), a, fct_ctx(), N));
    CKR(cuMemcpyPeer(b, (CUcontext)dst, a, fct_ctx(), N), CUDA_ERROR_INVALID_CONTEXT);
    /* They name their contexts: no current one is needed (the default
     * stream is the source context's). */
    CK(cuMemsetD8(b, 0, N));
    CK(cuCtxSetCurrent(NULL));
    CK(cuMemcpyPeer(b, fct_ctx(), a, fct_ctx(), N));
    CK(cuMemcpyPeerAsync(b, fct_ctx(), a, fct_ctx(), N, 0));
    CK(cuCtxSetCurrent(fct_ctx()));
    CK(cuCtxSynchronize());
    memset(dst, 0, N);
    CK(cuMemcpyDtoH(dst, b, N));
    assert_memory_equal(src, dst, N);
    /* The per-thread-default-stream form through cuGetProcAddress. */
    CUresult (*htod_ptds)(CUdeviceptr, const void *, size_t) =
        fct_proc("cuMemcpyHtoD", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    CK(htod_ptds(a, src + 100, 16));
    assert_int_equal(fct_get32(a), *(uint32_t *)(src + 100));
    /* Bad ranges are invalid arguments, not crashes. */
    CKR(cuMemcpyHtoD(a + N - 8, src, 16), CUDA_ERROR_INVALID_VALUE);
    CKR(cuMemcpyDtoH(dst, a + 1, N), CUDA_ERROR_INVALID_VALUE);
    CKR(cuMemcpyHtoD(a, NULL, 16), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemcpyHtoD(a, NULL, 0));
    CK(cuMemFree(b));
    CKR(cuMemcpyDtoD(b, a, 16), CUDA_ERROR_INVALID_VALUE);          /* freed */
    CK(cuMemFree(a));
    CK(cuStreamDestroy(s));
}

static void test_copy_2d_3d(void **state)
{
    enum { W = 48, H = 5, D = 3 };
    static uint8_t host[D][H][64], back[D][H][64];
    for (int z = 0; z < D; z++)
        for (int y = 0; y < H; y++)
            for (int x = 0; x < 64; x++)
                host[z][y][x] = (uint8_t)(z * 100 + y * 10 + x);
    CUdeviceptr d;
    size_t pitch;
    CK(cuMemAllocPitch(&d, &pitch, W, H * D, 4));
    /* 2-D: host rows of 64 bytes into a pitched allocation, then back. */
    CUDA_MEMCPY2D c2 = {
        .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = host, .srcPitch = 64, .srcXInBytes = 4,
        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = d, .dstPitch = pitch,
        .WidthInBytes = W - 4, .Height = H,
    };
    CK(cuMemcpy2D(&c2));
    CUDA_MEMCPY2D r2 = {
        .srcMemoryType = CU_MEMORYTYPE_UNIFIED, .srcDevice = d, .srcPitch = pitch,
        .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = back, .dstPitch = 64,
        .WidthInBytes = W - 4, .Height = H,
    };
    memset(back, 0, sizeof back);
    CK(cuMemcpy2DAsync(&r2, NULL));
    CK(cuCtxSynchronize());
    for (int y = 0; y < H; y++)
        assert_memory_equal(back[0][y], &host[0][y][4], W - 4);
    /* 3-D: the whole box, through the device and back. */
    CUDA_MEMCPY3D c3 = {
        .srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = host, .srcPitch = 64, .srcHeight = H,
        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = d, .dstPitch = pitch, .dstHeight = H,
        .WidthInBytes = W, .Height = H, .Depth = D,
    };
    CK(cuMemcpy3D(&c3));
    CUDA_MEMCPY3D r3 = {
        .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = d, .srcPitch = pitch, .srcHeight = H,
        .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = back, .dstPitch = 64, .dstHeight = H,
        .WidthInBytes = W, .Height = H, .Depth = D,
    };
    memset(back, 0, sizeof back);
    CK(cuMemcpy3D(&r3));
    for (int z = 0; z < D; z++)
        for (int y = 0; y < H; y++)
            assert_memory_equal(back[z][y], host[z][y], W);
    /* Arrays are not simulated; a pitch below the width is invalid. */
    c2.dstMemoryType = CU_MEMORYTYPE_ARRAY;
    CKR(cuMemcpy2D(&c2), CUDA_ERROR_NOT_SUPPORTED);
    c2.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c2.dstPitch = 8;
    CKR(cuMemcpy2D(&c2), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemFree(d));
}

int main(void)
{
    setenv("FAKECUDA_MEM_MB", "256", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_accounting, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_alloc_errors, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_poison, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_pitch, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_managed, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_host_alloc, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_host_register, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_pointer_attributes, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_async_alloc, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_ctx_destroy_frees, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_memsets, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_copies, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_copy_2d_3d, fct_setup, fct_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
