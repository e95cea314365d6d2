/* test_pinner.c: the pool's pinning thread (src/sched/pinner.c) against the
 * simulated driver (found through LD_LIBRARY_PATH, as tests/run-suite.sh
 * sets it). Proves: a piece is pinned off the caller's thread, announced on
 * the eventfd, taken once (a descriptor this process can import, of the
 * size asked for, HOST_NUMA on node 0); one request at a time; a slow pin
 * (FAKECUDA_PIN_GBPS) arrives after its time, not never; a driver failure
 * gives ok=false and leaks no descriptor; a missing driver is refused with
 * the reason; stop waits for the pin in flight and releases a result left
 * untaken; RLIMIT_NOFILE is raised to its hard limit.
 *
 * The simulated driver reads FAKECUDA_FAIL when it is loaded (the first
 * sd_pinner_start that finds it) and counts calls per process, so
 * test_driver_failure must be the first test that pins (cmocka runs them
 * in order). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cuda.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "sched/pinner.h"

#define MIB (1024ull * 1024ull)
#define PIECE (4 * MIB)
/* FAKECUDA_PIN_GBPS: 0.1 GB/s, one byte per 10 ns: 42 ms for a piece. */
#define PIN_GBPS "0.1"
#define PIN_NS(bytes) ((bytes) * 10ull - 1000ull) /* at least, less rounding */

static char err[512];

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static struct sd_pinner *start(void)
{
    struct sd_pinner *pn = NULL;
    if (sd_pinner_start(&pn, NULL, err, sizeof err) != 0)
        fail_msg("sd_pinner_start: %s", err);
    return pn;
}

/* Waits (at most 30 s) for the result and takes it. */
static struct sd_pinned wait_take(struct sd_pinner *pn)
{
    struct pollfd p = {.fd = sd_pinner_fd(pn), .events = POLLIN};
    assert_int_equal(poll(&p, 1, 30000), 1);
    struct sd_pinned r;
    assert_true(sd_pinner_take(pn, &r));
    return r;
}

static void test_bogus_library(void **state)
{
    (void)state;
    struct sd_pinner *pn = NULL;
    assert_int_equal(sd_pinner_start(&pn, "libcuda-absent.so.1", err, sizeof err), -1);
    assert_null(pn);
    if (!strstr(err, "no CUDA driver (libcuda-absent.so.1)"))
        fail_msg("'%s'", err);
    /* A library, but not a driver. */
    assert_int_equal(sd_pinner_start(&pn, "libm.so.6", err, sizeof err), -1);
    if (!strstr(err, "entry points missing"))
        fail_msg("'%s'", err);
}

/* FAKECUDA_FAIL (main): the first cuMemCreate and the first export fail. */
static void test_driver_failure(void **state)
{
    (void)state;
    struct sd_pinner *pn = start();
    int fds = open_fds();
    assert_int_equal(sd_pinner_request(pn, PIECE), 0);
    struct sd_pinned r = wait_take(pn);
    assert_false(r.ok);
    assert_int_equal(r.cu_err, CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(r.fd, -1);
    assert_int_equal(r.size, PIECE);
    /* Made, then not exported: the allocation is released with it. */
    assert_int_equal(sd_pinner_request(pn, PIECE), 0);
    r = wait_take(pn);
    assert_false(r.ok);
    assert_int_equal(r.cu_err, CUDA_ERROR_UNKNOWN);
    assert_int_equal(r.fd, -1);
    assert_int_equal(open_fds(), fds);
    /* The driver works again. */
    assert_int_equal(sd_pinner_request(pn, PIECE), 0);
    r = wait_take(pn);
    assert_true(r.ok);
    sd_pinner_release(pn, r.fd, r.handle);
    assert_int_equal(open_fds(), fds);
    sd_pinner_stop(pn);
}

/* The simulated driver, for this process's own use of a piece. */
struct imp_api {
    CUresult (*import)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
    CUresult (*props)(CUmemAllocationProp *, CUmemGenericAllocationHandle);
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*free_va)(CUdeviceptr, size_t);
    CUresult (*release)(CUmemGenericAllocationHandle);
};

static void imp_resolve(struct imp_api *a)
{
    void *dl = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    assert_non_null(dl);
    *(void **)&a->import = dlsym(dl, "cuMemImportFromShareableHandle");
    *(void **)&a->props = dlsym(dl, "cuMemGetAllocationPropertiesFromHandle");
    *(void **)&a->reserve = dlsym(dl, "cuMemAddressReserve");
    *(void **)&a->map = dlsym(dl, "cuMemMap");
    *(void **)&a->unmap = dlsym(dl, "cuMemUnmap");
    *(void **)&a->free_va = dlsym(dl, "cuMemAddressFree");
    *(void **)&a->release = dlsym(dl, "cuMemRelease");
    assert_true(a->import && a->props && a->reserve && a->map && a->unmap && a->free_va &&
                a->release);
}

/* What a client does with a lent descriptor: import it and map it whole
 * (the driver maps an allocation whole only, so this checks its size). */
static void import_check(int fd, uint64_t size)
{
    struct imp_api cu;
    imp_resolve(&cu);
    CUmemGenericAllocationHandle h;
    assert_int_equal(cu.import(&h, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                     CUDA_SUCCESS);
    CUmemAllocationProp p;
    assert_int_equal(cu.props(&p, h), CUDA_SUCCESS);
    assert_int_equal(p.location.type, CU_MEM_LOCATION_TYPE_HOST_NUMA);
    assert_int_equal(p.location.id, 0); /* CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID */
    CUdeviceptr va;
    assert_int_equal(cu.reserve(&va, size + 2 * MIB, 0, 0, 0), CUDA_SUCCESS);
    assert_int_equal(cu.map(va, size - 2 * MIB, 0, h, 0), CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(cu.map(va, size + 2 * MIB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cu.map(va, size, 0, h, 0), CUDA_SUCCESS);
    assert_int_equal(cu.unmap(va, size), CUDA_SUCCESS);
    assert_int_equal(cu.free_va(va, size + 2 * MIB), CUDA_SUCCESS);
    assert_int_equal(cu.release(h), CUDA_SUCCESS);
}

static void test_pin_and_take(void **state)
{
    (void)state;
    struct sd_pinner *pn = start();
    int fds = open_fds();
    assert_int_equal(sd_pinner_granularity(pn), 2 * MIB);
    assert_int_equal(sd_pinner_request(pn, 0), -1);
    assert_int_equal(sd_pinner_request(pn, 3 * MIB), -1);
    struct sd_pinned r;
    assert_false(sd_pinner_take(pn, &r)); /* nothing asked */
    assert_int_equal(sd_pinner_request(pn, PIECE), 0);
    assert_int_equal(sd_pinner_request(pn, PIECE), -1); /* one at a time */
    r = wait_take(pn);
    assert_true(r.ok);
    assert_int_equal(r.cu_err, 0);
    assert_int_equal(r.size, PIECE);
    assert_true(r.fd >= 0);
    assert_true(fcntl(r.fd, F_GETFD) & FD_CLOEXEC);
    assert_int_not_equal(r.handle, 0);
    /* Taken once; the descriptor reads empty again. */
    struct sd_pinned again;
    assert_false(sd_pinner_take(pn, &again));
    struct pollfd p = {.fd = sd_pinner_fd(pn), .events = POLLIN};
    assert_int_equal(poll(&p, 1, 0), 0);
    import_check(r.fd, PIECE);
    /* The next request is taken now that the result is. */
    assert_int_equal(sd_pinner_request(pn, 2 * PIECE), 0);
    struct sd_pinned r2 = wait_take(pn);
    assert_true(r2.ok);
    assert_int_equal(r2.size, 2 * PIECE);
    assert_int_not_equal(r2.handle, r.handle);
    import_check(r2.fd, 2 * PIECE);
    sd_pinner_release(pn, r.fd, r.handle);
    sd_pinner_release(pn, r2.fd, r2.handle);
    assert_int_equal(open_fds(), fds);
    sd_pinner_stop(pn);
}

/* FAKECUDA_PIN_GBPS makes the pin take its time, on the pinner's thread:
 * the result comes after it, with the time measured. */
static void test_slow_pin(void **state)
{
    (void)state;
    struct sd_pinner *pn = start();
    uint64_t t0 = cs_now_ns();
    assert_int_equal(sd_pinner_request(pn, 4 * PIECE), 0);
    struct sd_pinned r = wait_take(pn);
    uint64_t waited = cs_now_ns() - t0;
    assert_true(r.ok);
    assert_true(r.ns >= PIN_NS(4 * PIECE));
    assert_true(waited >= PIN_NS(4 * PIECE));
    sd_pinner_release(pn, r.fd, r.handle);
    sd_pinner_stop(pn);
}

/* Stop while a pin is in flight: it returns after the pin, and the piece
 * nobody took is released (every descriptor of the pinner is closed). */
static void test_stop_in_flight(void **state)
{
    (void)state;
    int fds = open_fds();
    struct sd_pinner *pn = start();
    uint64_t t0 = cs_now_ns();
    assert_int_equal(sd_pinner_request(pn, 4 * PIECE), 0);
    sd_pinner_stop(pn);
    assert_true(cs_now_ns() - t0 >= PIN_NS(4 * PIECE));
    assert_int_equal(open_fds(), fds);
}

static void test_raise_nofile(void **state)
{
    (void)state;
    uint32_t lim = 0;
    assert_int_equal(sd_pinner_raise_nofile(&lim), 0);
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    assert_true(rl.rlim_cur == rl.rlim_max);
    assert_int_equal(lim, rl.rlim_cur > UINT32_MAX ? UINT32_MAX : rl.rlim_cur);
}

int main(void)
{
    cs_log_init("test_pinner", CS_LOG_ERROR);
    /* Read by the simulated driver in this process: FAKECUDA_FAIL when it
     * is loaded, the rest at its cuInit. */
    setenv("FAKECUDA_PIN_GBPS", PIN_GBPS, 1);
    setenv("FAKECUDA_FAIL", "cuMemCreate:1,cuMemExportToShareableHandle:1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bogus_library),  cmocka_unit_test(test_driver_failure),
        cmocka_unit_test(test_pin_and_take),   cmocka_unit_test(test_slow_pin),
        cmocka_unit_test(test_stop_in_flight), cmocka_unit_test(test_raise_nofile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
