/* fc_vmm_test: the virtual memory management API of the simulated driver:
 * reservations, physical allocations and their accounting, mapping, access,
 * a stable VA across unmap/remap with contents restored only by an
 * explicit copy, poison after release, and device faults (never crashes)
 * on unmapped memory, shareable (POSIX descriptor) handles, exportable
 * host memory at HOST_NUMA only. Runs with
 * FAKECUDA_MEM_MB=256. */
#include "fc_testutil.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define G (2 * MiB)

static const CUmemAllocationProp dev_prop = {
    .type = CU_MEM_ALLOCATION_TYPE_PINNED,
    .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 },
};

static size_t free_now(void)
{
    size_t f, t;
    CK(cuMemGetInfo(&f, &t));
    return f;
}

static void set_rw(CUdeviceptr p, size_t n)
{
    CUmemAccessDesc a = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 },
                          .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CK(cuMemSetAccess(p, n, &a, 1));
}

static void fill_pattern(uint32_t *h, size_t words, uint32_t seed)
{
    for (size_t i = 0; i < words; i++)
        h[i] = seed * 2654435761u + (uint32_t)i;
}

static void test_granularity(void **state)
{
    size_t g = 0;
    CK(cuMemGetAllocationGranularity(&g, &dev_prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    assert_int_equal(g, G);
    CK(cuMemGetAllocationGranularity(&g, &dev_prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    assert_int_equal(g, G);
    CKR(cuMemGetAllocationGranularity(&g, &dev_prop, 7), CUDA_ERROR_INVALID_VALUE);
    CUmemAllocationProp bad = dev_prop;
    bad.location.id = 5;
    CKR(cuMemGetAllocationGranularity(&g, &bad, 0), CUDA_ERROR_INVALID_DEVICE);
}

static void test_reserve(void **state)
{
    CUdeviceptr p, q, r;
    CKR(cuMemAddressReserve(&p, G + 1, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    CKR(cuMemAddressReserve(&p, G, 3 * G, 0, 0), CUDA_ERROR_INVALID_VALUE);   /* not 2^n */
    CK(cuMemAddressReserve(&p, 4 * G, 64 * MiB, 0, 0));
    assert_int_equal(p % (64 * MiB), 0);
    /* The address hint is honoured when the range is free... */
    CK(cuMemAddressFree(p, 4 * G));
    CK(cuMemAddressReserve(&q, 4 * G, 0, p, 0));
    assert_int_equal(q, p);
    /* ...and ignored when it is not. */
    CK(cuMemAddressReserve(&r, 2 * G, 0, q, 0));
    assert_true(r + 2 * G <= q || r >= q + 4 * G);
    CKR(cuMemAddressFree(q, 2 * G), CUDA_ERROR_INVALID_VALUE);   /* wrong size */
    CK(cuMemAddressFree(q, 4 * G));
    CK(cuMemAddressFree(r, 2 * G));
    CKR(cuMemAddressFree(r, 2 * G), CUDA_ERROR_INVALID_VALUE);
}

/* DEVICE memory is charged, HOST memory is not. */
static void test_create_accounting(void **state)
{
    size_t before = free_now();
    CUmemGenericAllocationHandle h, hh;
    CK(cuMemCreate(&h, 16 * G, &dev_prop, 0));
    assert_int_equal(free_now(), before - 32 * MiB);
    CUmemAllocationProp hp = dev_prop;
    hp.location.type = CU_MEM_LOCATION_TYPE_HOST;
    hp.location.id = 0;
    CK(cuMemCreate(&hh, 8 * G, &hp, 0));
    assert_int_equal(free_now(), before - 32 * MiB);
    CUmemAllocationProp got;
    CK(cuMemGetAllocationPropertiesFromHandle(&got, hh));
    assert_int_equal(got.location.type, CU_MEM_LOCATION_TYPE_HOST);
    CK(cuMemRelease(hh));
    CK(cuMemRelease(h));
    assert_int_equal(free_now(), before);
    CKR(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    CKR(cuMemCreate(&h, G + 4096, &dev_prop, 0), CUDA_ERROR_INVALID_VALUE);
    CKR(cuMemCreate(&h, 256 * MiB, &dev_prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    CUmemAllocationProp fd = dev_prop;
    fd.requestedHandleTypes = CU_MEM_HANDLE_TYPE_WIN32;
    CKR(cuMemCreate(&h, G, &fd, 0), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(free_now(), before);
}

/* The location an (imported) handle reports. */
static void check_location(CUmemGenericAllocationHandle h, CUmemLocationType type, int id)
{
    CUmemAllocationProp got;
    CK(cuMemGetAllocationPropertiesFromHandle(&got, h));
    assert_int_equal(got.location.type, type);
    assert_int_equal(got.location.id, id);
}

/* Maps h at *a and imp at *b (fresh, 2 G each, read-write) and checks that
 * a memset through a shows through b: the same memory. */
static void map_same_memory(CUmemGenericAllocationHandle h, CUmemGenericAllocationHandle imp,
                            CUdeviceptr *a, CUdeviceptr *b, uint32_t v)
{
    CK(cuMemAddressReserve(a, 2 * G, 0, 0, 0));
    CK(cuMemAddressReserve(b, 2 * G, 0, 0, 0));
    CK(cuMemMap(*a, 2 * G, 0, h, 0));
    CK(cuMemMap(*b, 2 * G, 0, imp, 0));
    set_rw(*a, 2 * G);
    set_rw(*b, 2 * G);
    CK(cuMemsetD32(*a, v, 2 * G / 4));
    CK(cuCtxSynchronize());
    assert_int_equal(fct_get32(*b + 2 * G - 4), v);
}

/* An allocation created with the POSIX descriptor type exports a
 * descriptor; importing it maps the same memory (charged once, to the
 * creator) and keeps it alive after the creator releases it. Plain
 * allocations and foreign descriptors are refused. */
static void test_shareable_fd(void **state)
{
    size_t before = free_now();
    CUmemAllocationProp sp = dev_prop;
    sp.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CUmemGenericAllocationHandle h, plain, imp;
    CK(cuMemCreate(&h, 2 * G, &sp, 0));
    CK(cuMemCreate(&plain, G, &dev_prop, 0));
    int fd = -1, other = -1;
    CKR(cuMemExportToShareableHandle(&other, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
        CUDA_ERROR_INVALID_VALUE);
    CKR(cuMemExportToShareableHandle(&other, h, CU_MEM_HANDLE_TYPE_FABRIC, 0),
        CUDA_ERROR_NOT_SUPPORTED);
    CK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    assert_true(fd >= 0);
    CK(cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)fd,
                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    close(fd);                                          /* the caller's to close */
    assert_int_equal(free_now(), before - 3 * G);      /* not charged twice */
    check_location(imp, CU_MEM_LOCATION_TYPE_DEVICE, 0);
    CUdeviceptr a, b;
    map_same_memory(h, imp, &a, &b, 1234);
    CK(cuMemUnmap(a, 2 * G));
    CK(cuMemRelease(h));
    CK(cuMemRelease(plain));
    assert_int_equal(free_now(), before);
    assert_int_equal(fct_get32(b + 8), 1234);          /* the importer keeps it */
    CK(cuMemUnmap(b, 2 * G));
    CK(cuMemRelease(imp));
    int null_fd = open("/dev/null", O_RDONLY);
    assert_true(null_fd >= 0);
    CKR(cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)null_fd,
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
        CUDA_ERROR_INVALID_VALUE);
    close(null_fd);
    CKR(cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)-1,
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
        CUDA_ERROR_INVALID_VALUE);
    CK(cuMemAddressFree(a, 2 * G));
    CK(cuMemAddressFree(b, 2 * G));
}

/* Exportable host memory is NUMA-placed, as on the H100 (driver 580): a
 * HOST location with the descriptor handle type is refused, HOST_NUMA (any
 * node) is made, uncharged, exported and imported as HOST_NUMA on that
 * node, the same bytes through both handles. */
static void test_host_numa_shareable(void **state)
{
    size_t before = free_now();
    CUmemAllocationProp hp = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                               .location = { CU_MEM_LOCATION_TYPE_HOST, 0 },
                               .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR };
    CUmemGenericAllocationHandle h, imp;
    CKR(cuMemCreate(&h, G, &hp, 0), CUDA_ERROR_INVALID_VALUE);
    hp.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA;
    hp.location.id = 1;
    CK(cuMemCreate(&h, 2 * G, &hp, 0));
    assert_int_equal(free_now(), before);
    int fd = -1;
    CK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CK(cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)fd,
                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    close(fd);
    check_location(imp, CU_MEM_LOCATION_TYPE_HOST_NUMA, 1);
    CUdeviceptr a, b;
    map_same_memory(h, imp, &a, &b, 4321);
    CK(cuMemUnmap(a, 2 * G));
    CK(cuMemUnmap(b, 2 * G));
    CK(cuMemRelease(h));
    CK(cuMemRelease(imp));
    CK(cuMemAddressFree(a, 2 * G));
    CK(cuMemAddressFree(b, 2 * G));
    assert_int_equal(free_now(), before);
}

/* Mapped memory needs cuMemSetAccess before the device may touch it; a
 * fresh DEVICE allocation holds the poison. */
static void test_map_and_access(void **state)
{
    CUdeviceptr va;
    CUmemGenericAllocationHandle h;
    CK(cuMemAddressReserve(&va, 4 * G, 0, 0, 0));
    CK(cuMemCreate(&h, 2 * G, &dev_prop, 0));
    CK(cuMemMap(va, 2 * G, 0, h, 0));
    uint32_t word = 1;
    CKR(cuMemcpyHtoD(va, &word, 4), CUDA_ERROR_INVALID_VALUE);   /* no access yet */
    set_rw(va, 2 * G);
    unsigned long long flags = 0;
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
    CK(cuMemGetAccess(&flags, &loc, va + 100));
    assert_int_equal(flags, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    assert_true(fct_all_bytes(va, 2 * G, 0xFB));
    CK(cuMemcpyHtoD(va, &word, 4));
    assert_int_equal(fct_get32(va), 1);
    unsigned type;
    CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va));
    assert_int_equal(type, CU_MEMORYTYPE_DEVICE);
    CK(cuMemUnmap(va, 2 * G));
    CK(cuMemRelease(h));
    CK(cuMemAddressFree(va, 4 * G));
}

/* The swap pattern: the reservation keeps its address across
 * unmap/release/create/map; the new memory shows the poison (never the old
 * data) until an explicit copy restores it. Unmapping without releasing
 * and mapping the same handle again keeps the contents. */
static void test_va_stable_remap(void **state)
{
    enum { WORDS = (int)(2 * G / 4) };
    uint32_t *pat = malloc(2 * G), *back = malloc(2 * G);
    assert_non_null(pat);
    assert_non_null(back);
    fill_pattern(pat, WORDS, 42);
    CUdeviceptr va;
    CUmemGenericAllocationHandle a, b;
    CK(cuMemAddressReserve(&va, 2 * G, 0, 0, 0));
    CK(cuMemCreate(&a, 2 * G, &dev_prop, 0));
    CK(cuMemMap(va, 2 * G, 0, a, 0));
    set_rw(va, 2 * G);
    CK(cuMemcpyHtoD(va, pat, 2 * G));
    CK(fck_add32(NULL, va, WORDS, 1));                 /* the job's work */
    CK(cuCtxSynchronize());
    CK(cuMemcpyDtoH(back, va, 2 * G));                 /* swap out */
    assert_int_equal(back[7], pat[7] + 1);

    /* Same handle, unmapped and mapped again: contents kept. */
    CK(cuMemUnmap(va, 2 * G));
    CK(cuMemMap(va, 2 * G, 0, a, 0));
    set_rw(va, 2 * G);
    assert_int_equal(fct_get32(va + 28), pat[7] + 1);

    /* Released and recreated at the same VA: poison, not the old data. */
    CK(cuMemUnmap(va, 2 * G));
    CK(cuMemRelease(a));
    CK(cuMemCreate(&b, 2 * G, &dev_prop, 0));
    CK(cuMemMap(va, 2 * G, 0, b, 0));
    set_rw(va, 2 * G);
    assert_true(fct_all_bytes(va, 2 * G, 0xFB));
    CK(cuMemcpyHtoD(va, back, 2 * G));                 /* swap in */
    CK(fck_add32(NULL, va, WORDS, 1));
    CK(cuCtxSynchronize());
    assert_int_equal(fct_get32(va + 4 * (WORDS - 1)), pat[WORDS - 1] + 2);
    CK(cuMemUnmap(va, 2 * G));
    CK(cuMemRelease(b));
    CK(cuMemAddressFree(va, 2 * G));
    free(pat);
    free(back);
}

/* A handle released while mapped keeps the memory (and its charge) alive
 * until the last unmap; cuMemRetainAllocationHandle finds it again. */
static void test_release_while_mapped(void **state)
{
    size_t before = free_now();
    CUdeviceptr va;
    CUmemGenericAllocationHandle h, again;
    CK(cuMemAddressReserve(&va, G, 0, 0, 0));
    CK(cuMemCreate(&h, G, &dev_prop, 0));
    CK(cuMemMap(va, G, 0, h, 0));
    set_rw(va, G);
    CK(cuMemsetD32(va, 77, G / 4));
    CK(cuMemRelease(h));
    assert_int_equal(free_now(), before - G);
    assert_int_equal(fct_get32(va + 64), 77);
    CUmemAllocationProp prop;
    CKR(cuMemGetAllocationPropertiesFromHandle(&prop, h), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemRetainAllocationHandle(&again, (void *)(va + 4096)));
    assert_int_equal(again, h);
    CK(cuMemUnmap(va, G));
    assert_int_equal(free_now(), before - G);          /* the retained handle */
    CK(cuMemRelease(again));
    assert_int_equal(free_now(), before);
    int stack;
    CKR(cuMemRetainAllocationHandle(&again, &stack), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemAddressFree(va, G));
}

static void test_map_errors(void **state)
{
    CUdeviceptr va;
    CUmemGenericAllocationHandle h;
    CK(cuMemAddressReserve(&va, 4 * G, 0, 0, 0));
    CK(cuMemCreate(&h, 2 * G, &dev_prop, 0));
    CKR(cuMemMap(va + 4096, G, 0, h, 0), CUDA_ERROR_INVALID_VALUE);    /* misaligned */
    CKR(cuMemMap(va, 3 * G, 0, h, 0), CUDA_ERROR_INVALID_VALUE);       /* bigger than h */
    CKR(cuMemMap(va + 3 * G, 2 * G, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* past the reservation */
    CKR(cuMemMap(va, G, 0, h + 999, 0), CUDA_ERROR_INVALID_VALUE);     /* no such handle */
    CKR(cuMemMap(va, G, 0, h, 0), CUDA_ERROR_NOT_SUPPORTED);           /* part of h */
    CKR(cuMemMap(va, G, G, h, 0), CUDA_ERROR_NOT_SUPPORTED);           /* part, at an offset */
    CK(cuMemMap(va, 2 * G, 0, h, 0));
    CKR(cuMemMap(va + G, 2 * G, 0, h, 0), CUDA_ERROR_INVALID_VALUE);   /* overlaps */
    CKR(cuMemUnmap(va, G), CUDA_ERROR_INVALID_VALUE);                  /* part of a mapping */
    CKR(cuMemUnmap(va + 2 * G, G), CUDA_ERROR_INVALID_VALUE);          /* nothing there */
    CKR(cuMemAddressFree(va, 4 * G), CUDA_ERROR_INVALID_VALUE);        /* still mapped */
    CKR(cuMemSetAccess(va, 4 * G, NULL, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemUnmap(va, 2 * G));
    CK(cuMemRelease(h));
    CKR(cuMemMap(va, 2 * G, 0, h, 0), CUDA_ERROR_INVALID_VALUE);       /* released */
    CK(cuMemAddressFree(va, 4 * G));
}

/* Adjacent mappings form one range for copies and kernels; an allocation
 * may be mapped at several places at once, but only whole (the real
 * driver refuses part of one: CUDA_ERROR_NOT_SUPPORTED, measured on an
 * H100). */
static void test_adjacent_and_offset(void **state)
{
    CUdeviceptr va;
    CUmemGenericAllocationHandle a, b;
    CK(cuMemAddressReserve(&va, 4 * G, 0, 0, 0));
    CK(cuMemCreate(&a, G, &dev_prop, 0));
    CK(cuMemCreate(&b, G, &dev_prop, 0));
    CK(cuMemMap(va, G, 0, a, 0));
    CK(cuMemMap(va + G, G, 0, b, 0));
    set_rw(va, 2 * G);
    CK(fck_fill32(NULL, va, 2 * G / 4, 9));
    CK(cuCtxSynchronize());
    assert_int_equal(fct_get32(va + G - 4), 9);
    assert_int_equal(fct_get32(va + G), 9);
    /* b again, elsewhere: the same memory. */
    CK(cuMemMap(va + 2 * G, G, 0, b, 0));
    set_rw(va + 2 * G, G);
    assert_int_equal(fct_get32(va + 2 * G + 4), 9);
    CK(fck_fill32(NULL, va + 2 * G, 1, 5));
    CK(cuCtxSynchronize());
    assert_int_equal(fct_get32(va + G), 5);
    CUmemGenericAllocationHandle c;
    CK(cuMemCreate(&c, 2 * G, &dev_prop, 0));
    CKR(cuMemMap(va + 3 * G, G, 0, c, 0), CUDA_ERROR_NOT_SUPPORTED);  /* half of c */
    CK(cuMemRelease(c));
    CK(cuMemUnmap(va, 3 * G));                         /* three mappings at once */
    CK(cuMemRelease(a));
    CK(cuMemRelease(b));
    CK(cuMemAddressFree(va, 4 * G));
}

/* Touching an unmapped range: copies and memsets are invalid arguments;
 * a kernel is a device fault, sticky on its context like a real GPU's,
 * until the context is reset. Never a crash. */
static void test_unmapped_access(void **state)
{
    CUdeviceptr va, p;
    CUmemGenericAllocationHandle h;
    uint32_t word = 5;
    CK(cuMemAddressReserve(&va, 2 * G, 0, 0, 0));
    CKR(cuMemcpyHtoD(va, &word, 4), CUDA_ERROR_INVALID_VALUE);
    CKR(cuMemcpyDtoH(&word, va, 4), CUDA_ERROR_INVALID_VALUE);
    CKR(cuMemsetD32(va, 0, 4), CUDA_ERROR_INVALID_VALUE);
    CKR(cuMemcpy(va, (CUdeviceptr)&word, 4), CUDA_ERROR_INVALID_VALUE);
    /* Half mapped: a kernel over the whole range faults. */
    CK(cuMemCreate(&h, G, &dev_prop, 0));
    CK(cuMemMap(va, G, 0, h, 0));
    set_rw(va, G);
    CK(fck_fill32(NULL, va, G / 4, 1));                /* fine */
    CK(cuCtxSynchronize());
    CK(fck_fill32(NULL, va, 2 * G / 4, 1));            /* launch succeeds... */
    CKR(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS); /* ...the kernel faults */
    CKR(cuMemAlloc(&p, 16), CUDA_ERROR_ILLEGAL_ADDRESS); /* sticky */
    CKR(fck_fill32(NULL, va, 1, 1), CUDA_ERROR_ILLEGAL_ADDRESS);
    /* Another context is not affected. */
    CUcontext other;
    CK(cuCtxCreate(&other, NULL, 0, 0));
    CK(cuMemAlloc(&p, 16));
    CK(cuMemFree(p));
    CK(cuCtxDestroy(other));
    CK(cuMemUnmap(va, G));
    CK(cuMemRelease(h));
    CK(cuMemAddressFree(va, 2 * G));
    /* Reset makes the primary context usable again. */
    CK(cuDevicePrimaryCtxReset(0));
    CUcontext c;
    CK(cuDevicePrimaryCtxRetain(&c, 0));
    CK(cuCtxSetCurrent(c));
    CK(cuMemAlloc(&p, 16));
    CK(cuMemFree(p));
    /* A freed allocation and pageable host memory fault too. */
    struct fck k;
    CK(fck_load(&k));
    CK(cuMemAlloc(&p, 4096));
    CK(cuMemFree(p));
    CK(fck_fill32(NULL, p, 16, 1));
    CKR(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    CK(cuDevicePrimaryCtxReset(0));
    CK(cuDevicePrimaryCtxRetain(&c, 0));
    CK(cuCtxSetCurrent(c));
    CK(fck_load(&k));
    static uint32_t pageable[16];
    CK(fck_fill32(NULL, (CUdeviceptr)pageable, 16, 1));
    CKR(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    assert_int_equal(pageable[0], 0);
    CK(cuDevicePrimaryCtxRelease(0));
}

/* Read-only access: kernels may read, not write. */
static void test_read_only_access(void **state)
{
    CUdeviceptr va, out;
    CUmemGenericAllocationHandle h;
    CK(cuMemAddressReserve(&va, G, 0, 0, 0));
    CK(cuMemCreate(&h, G, &dev_prop, 0));
    CK(cuMemMap(va, G, 0, h, 0));
    set_rw(va, G);
    CK(cuMemsetD32(va, 2, 16));
    CUmemAccessDesc ro = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 },
                           .flags = CU_MEM_ACCESS_FLAGS_PROT_READ };
    CK(cuMemSetAccess(va, G, &ro, 1));
    CK(cuMemAlloc(&out, 8));
    CK(cuMemsetD32(out, 0, 2));
    CK(fck_sum32(NULL, va, 16, out));
    CK(cuCtxSynchronize());
    assert_int_equal(fct_get64(out), 32);
    CK(fck_fill32(NULL, va, 16, 1));
    CKR(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    CK(cuMemUnmap(va, G));
    CK(cuMemRelease(h));
    CK(cuMemAddressFree(va, G));
}

int main(void)
{
    setenv("FAKECUDA_MEM_MB", "256", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_granularity, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_reserve, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_create_accounting, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_shareable_fd, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_host_numa_shareable, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_map_and_access, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_va_stable_remap, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_release_while_mapped, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_map_errors, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_adjacent_and_offset, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_unmapped_access, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_read_only_access, fct_setup, fct_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
