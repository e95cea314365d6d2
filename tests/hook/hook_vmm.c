/* hook_vmm.c: the application's own VMM memory (cuMemCreate + cuMemMap) is
 * swappable (src/hook/vmm.c), driven by a scripted scheduler on the
 * simulated GPU.
 *
 * Proves: a handle mapped twice keeps both mappings and the access granted
 * on them across a full swap-out and back, with its data; while swapped out
 * the application's ranges answer access and pointer queries as when
 * mapped, and unmapping one works; memory created while the job does not
 * hold the GPU is placed at the grant; retained handles, properties and
 * the release-while-mapped rule behave as the driver's; exported memory
 * stays on the GPU; bad calls fail as the driver's would.
 */
#include "hooktest.h"
#include "mock_sched.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static struct mock_sched *mock;

#define H_BYTES (8 * MiB)

static void set_rw(CUdeviceptr p, size_t n)
{
    CUmemAccessDesc a;
    memset(&a, 0, sizeof a);
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = 0;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CK(cuMemSetAccess(p, n, &a, 1));
}

static unsigned long long access_of(CUdeviceptr p)
{
    CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    unsigned long long f = 99;
    CK(cuMemGetAccess(&f, &loc, p));
    return f;
}

static int setup(void **state)
{
    (void)state;
    ht_context();
    return 0;
}

static CUdeviceptr range;              /* 32 MiB reserved by the "application" */
static CUmemGenericAllocationHandle h; /* mapped at range and range + 8 MiB */

static void created_memory_is_mapped_as_asked(void **state)
{
    (void)state;
    CUmemAllocationProp p = ht_dev_prop();
    CK(cuMemAddressReserve(&range, 4 * H_BYTES, 0, 0, 0));
    CK(cuMemCreate(&h, H_BYTES, &p, 0));
    CK(cuMemMap(range, H_BYTES, 0, h, 0));
    CK(cuMemMap(range + H_BYTES, H_BYTES, 0, h, 0)); /* the same memory twice */
    set_rw(range, 2 * H_BYTES);
    CK(fck_fill32(0, range, H_BYTES / 4, 6));
    CK(cuCtxSynchronize());
    assert_int_equal(ht_device_sum(range + H_BYTES, H_BYTES / 4), 6ull * (H_BYTES / 4));
    struct cushare_stats s = ht_stats(0);
    assert_true(s.mem_resident >= H_BYTES);
    assert_int_equal(s.mem_unswappable, 0);
    CUmemAllocationProp got;
    CK(cuMemGetAllocationPropertiesFromHandle(&got, h));
    assert_int_equal(got.location.id, 0);
    assert_int_equal(got.type, CU_MEM_ALLOCATION_TYPE_PINNED);
    CUmemGenericAllocationHandle again;
    CK(cuMemRetainAllocationHandle(&again, (void *)(range + H_BYTES + 4096)));
    assert_true(again == h);
    CK(cuMemRelease(again)); /* the retained reference; h stays */
    assert_int_equal(access_of(range + 100), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
}

static void swap_out_and_back_keeps_mappings_access_and_data(void **state)
{
    (void)state;
    size_t f0, t;
    struct cushare_stats before = ht_stats(0);
    (void)before;
    CK(cuMemGetInfo(&f0, &t));
    struct cs_msg_release rel = mock_take_back(mock, CS_ALL_BYTES);
    assert_true(rel.swapped_bytes >= H_BYTES);
    struct cushare_stats s = ht_stats(0);
    assert_int_equal(s.mem_resident, 0);
    assert_true(s.mem_swapped >= H_BYTES);
    /* Swapped out: the ranges answer as mapped. */
    assert_int_equal(access_of(range + H_BYTES + 8), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CUdeviceptr base = 0;
    size_t size = 0;
    CK(cuMemGetAddressRange(&base, &size, range + H_BYTES + 123));
    assert_true(base == range + H_BYTES);
    assert_int_equal(size, H_BYTES);
    /* Used again: both mappings back, with their access and the bytes. */
    CK(fck_add32(0, range + H_BYTES, H_BYTES / 4, 1));
    CK(cuCtxSynchronize());
    assert_int_equal(ht_device_sum(range, H_BYTES / 4), 7ull * (H_BYTES / 4));
    assert_int_equal(ht_stats(0).mem_swapped, 0);
    assert_true(ht_stats(0).swap_in_bytes >= H_BYTES);
}

static void access_is_replayed_per_range(void **state)
{
    (void)state;
    /* Two more handles side by side, with access granted on the first only
     * (the real driver maps whole allocations only: offset 0, full size). */
    CUmemAllocationProp p = ht_dev_prop();
    CUmemGenericAllocationHandle h2, h2b;
    CK(cuMemCreate(&h2, H_BYTES, &p, 0));
    CK(cuMemCreate(&h2b, H_BYTES, &p, 0));
    CUdeviceptr at = range + 2 * H_BYTES;
    CK(cuMemMap(at, H_BYTES, 0, h2, 0));
    CK(cuMemMap(at + H_BYTES, H_BYTES, 0, h2b, 0));
    set_rw(at, H_BYTES);
    CK(fck_fill32(0, at, H_BYTES / 4, 2));
    CK(cuCtxSynchronize());
    assert_int_equal(access_of(at + H_BYTES), CU_MEM_ACCESS_FLAGS_PROT_NONE);
    mock_take_back(mock, CS_ALL_BYTES);
    assert_int_equal(access_of(at), CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    assert_int_equal(access_of(at + H_BYTES), CU_MEM_ACCESS_FLAGS_PROT_NONE);
    assert_int_equal(ht_device_sum(at, H_BYTES / 4), 2ull * (H_BYTES / 4));
    assert_int_equal(access_of(at + H_BYTES), CU_MEM_ACCESS_FLAGS_PROT_NONE); /* the driver's */
    /* Unmapped while swapped out, then released: gone. */
    mock_take_back(mock, CS_ALL_BYTES);
    uint64_t used = ht_stats(0).mem_used;
    CK(cuMemUnmap(at, 2 * H_BYTES)); /* both mappings in one call */
    CK(cuMemRelease(h2));
    CK(cuMemRelease(h2b));
    assert_int_equal(ht_stats(0).mem_used, used - 2 * H_BYTES);
    assert_int_equal(ht_device_sum(range, H_BYTES / 4), 7ull * (H_BYTES / 4));
}

static void created_while_not_holding_is_placed_at_the_grant(void **state)
{
    (void)state;
    mock_take_back(mock, CS_ALL_BYTES);
    CUmemAllocationProp p = ht_dev_prop();
    CUmemGenericAllocationHandle h3;
    CK(cuMemCreate(&h3, H_BYTES, &p, 0));
    CUdeviceptr at = range + 3 * H_BYTES;
    CK(cuMemMap(at, H_BYTES, 0, h3, 0));
    set_rw(at, H_BYTES);
    struct cushare_stats s = ht_stats(0);
    assert_int_equal(s.state, CUSHARE_LEASE_IDLE);
    assert_true(s.mem_reserved >= H_BYTES);
    CK(fck_fill32(0, at, H_BYTES / 4, 9)); /* asks for the lease */
    CK(cuCtxSynchronize());
    assert_int_equal(ht_device_sum(at, H_BYTES / 4), 9ull * (H_BYTES / 4));
    assert_int_equal(ht_stats(0).mem_reserved, 0);
    /* Released while mapped: the memory lives until the unmap. */
    CK(cuMemRelease(h3));
    assert_int_equal(ht_device_sum(at, H_BYTES / 4), 9ull * (H_BYTES / 4));
    CKR(cuMemRelease(h3), CUDA_ERROR_INVALID_VALUE);
    CUmemAllocationProp got;
    CKR(cuMemGetAllocationPropertiesFromHandle(&got, h3), CUDA_ERROR_INVALID_VALUE);
    uint64_t res = ht_stats(0).mem_resident;
    CK(cuMemUnmap(at, H_BYTES));
    assert_int_equal(ht_stats(0).mem_resident, res - H_BYTES);
}

static void exported_memory_stays_on_the_gpu(void **state)
{
    (void)state;
    CUmemAllocationProp p = ht_dev_prop();
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CUmemGenericAllocationHandle he;
    CK(cuMemCreate(&he, H_BYTES, &p, 0));
    CUdeviceptr at = range + 3 * H_BYTES;
    CK(cuMemMap(at, H_BYTES, 0, he, 0));
    set_rw(at, H_BYTES);
    CK(fck_fill32(0, at, H_BYTES / 4, 4));
    CK(cuCtxSynchronize());
    int fd = -1;
    CK(cuMemExportToShareableHandle(&fd, he, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    assert_true(fd >= 0);
    assert_int_equal(ht_stats(0).mem_unswappable, H_BYTES);
    mock_take_back(mock, CS_ALL_BYTES);
    assert_int_equal(ht_stats(0).mem_resident, H_BYTES); /* only the exported memory */
    /* What an importer would map is the very memory the job uses. */
    CUmemGenericAllocationHandle imp;
    CK(cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)fd,
                                      CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    close(fd);
    CUdeviceptr other;
    CK(cuMemAddressReserve(&other, H_BYTES, 0, 0, 0));
    CK(cuMemMap(other, H_BYTES, 0, imp, 0));
    set_rw(other, H_BYTES);
    assert_int_equal(ht_device_sum(other, H_BYTES / 4), 4ull * (H_BYTES / 4));
    CK(cuMemUnmap(other, H_BYTES));
    CK(cuMemRelease(imp));
    CK(cuMemAddressFree(other, H_BYTES));
    CK(cuMemUnmap(at, H_BYTES));
    CK(cuMemRelease(he));
    assert_int_equal(ht_stats(0).mem_unswappable, 0);
}

static void bad_calls_fail_as_the_driver_would(void **state)
{
    (void)state;
    CUmemAllocationProp p = ht_dev_prop();
    CUmemGenericAllocationHandle hb;
    CKR(cuMemCreate(&hb, H_BYTES + 4096, &p, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemCreate(&hb, H_BYTES, &p, 0));
    CUdeviceptr at = range + 3 * H_BYTES;
    CKR(cuMemMap(range, H_BYTES, 0, hb, 0), CUDA_ERROR_INVALID_VALUE);  /* overlaps h */
    CKR(cuMemMap(at, H_BYTES, 4096, hb, 0), CUDA_ERROR_INVALID_VALUE);  /* offset */
    CKR(cuMemMap(at, 2 * H_BYTES, 0, hb, 0), CUDA_ERROR_INVALID_VALUE); /* too long */
    CKR(cuMemMap(at, H_BYTES, 0, hb, 1), CUDA_ERROR_INVALID_VALUE);     /* flags */
    CK(cuMemMap(at, H_BYTES, 0, hb, 0));
    CKR(cuMemUnmap(at, H_BYTES / 2), CUDA_ERROR_INVALID_VALUE); /* part of a mapping */
    CKR(cuMemSetAccess(at, H_BYTES / 2, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemUnmap(at, H_BYTES));
    CK(cuMemRelease(hb));
    CKR(cuMemRelease(hb), CUDA_ERROR_INVALID_VALUE);
    CKR(cuMemMap(at, H_BYTES, 0, hb, 0), CUDA_ERROR_INVALID_VALUE); /* released */
}

/* Memory made while the job does not hold the GPU is created only at the
 * grant; properties the driver refuses must be refused at cuMemCreate
 * (PyTorch tries FABRIC handles and falls back on the refusal), or every
 * restore would fail. */
static void refused_properties_are_refused_at_create(void **state)
{
    (void)state;
    mock_take_back(mock, CS_ALL_BYTES);
    CUmemAllocationProp p = ht_dev_prop();
    p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
    CUmemGenericAllocationHandle hf;
    CUresult r = cuMemCreate(&hf, H_BYTES, &p, 0);
    assert_int_not_equal(r, CUDA_SUCCESS);
    assert_int_equal(ht_stats(0).state, CUSHARE_LEASE_IDLE);
    assert_int_equal(cuMemCreate(&hf, H_BYTES, &p, 0), r); /* the same answer, remembered */
}

/* A range freed with our mapping still in it (while swapped out): the
 * mapping is dropped, and the next grant restores the rest. */
static void freed_range_drops_its_mappings(void **state)
{
    (void)state;
    CUmemAllocationProp p = ht_dev_prop();
    CUmemGenericAllocationHandle hr;
    CK(cuMemCreate(&hr, H_BYTES, &p, 0));
    CUdeviceptr other;
    CK(cuMemAddressReserve(&other, H_BYTES, 0, 0, 0));
    CK(cuMemMap(other, H_BYTES, 0, hr, 0));
    set_rw(other, H_BYTES);
    CK(fck_fill32(0, other, H_BYTES / 4, 1)); /* takes the lease: placed */
    CK(cuCtxSynchronize());
    mock_take_back(mock, CS_ALL_BYTES);
    CK(cuMemAddressFree(other, H_BYTES));
    CK(cuMemRelease(hr)); /* no mapping holds it now: gone */
    assert_int_equal(ht_device_sum(range, H_BYTES / 4), 7ull * (H_BYTES / 4));
}

static void everything_is_given_back(void **state)
{
    (void)state;
    CK(cuMemUnmap(range, 2 * H_BYTES));
    CK(cuMemRelease(h));
    CK(cuMemAddressFree(range, 4 * H_BYTES));
    struct cushare_stats s = ht_stats(0);
    assert_int_equal(s.mem_used, 0);
    assert_int_equal(s.mem_resident + s.mem_swapped + s.mem_reserved, 0);
}

int main(int argc, char **argv)
{
    mock = ht_mock_preload(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(created_memory_is_mapped_as_asked),
        cmocka_unit_test(swap_out_and_back_keeps_mappings_access_and_data),
        cmocka_unit_test(access_is_replayed_per_range),
        cmocka_unit_test(created_while_not_holding_is_placed_at_the_grant),
        cmocka_unit_test(exported_memory_stays_on_the_gpu),
        cmocka_unit_test(bad_calls_fail_as_the_driver_would),
        cmocka_unit_test(refused_properties_are_refused_at_create),
        cmocka_unit_test(freed_range_drops_its_mappings),
        cmocka_unit_test(everything_is_given_back),
    };
    int rc = cmocka_run_group_tests(tests, setup, NULL);
    mock_stop(mock);
    return rc;
}
