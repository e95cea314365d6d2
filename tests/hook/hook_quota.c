/* hook_quota.c: CUSHARE_MEM_LIMIT, the quota view and allocation tracking.
 *
 * Runs with CUSHARE_MEM_LIMIT=64M against a simulated GPU of 1024 MiB and
 * no scheduler: allocations within the limit succeed, one beyond it fails
 * with CUDA_ERROR_OUT_OF_MEMORY and one log line, cuMemGetInfo and
 * cuDeviceTotalMem report the quota, frees and destroyed contexts give the
 * quota back, and NULL arguments get the driver's own answer.
 */
#include "hooktest.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CS_TEST_BAD_DEVICE 99

#define LIMIT (64 * MiB)

static int setup(void **state)
{
    (void)state;
    ht_context();
    return 0;
}

static CUdeviceptr big;
static CUresult over_result;

static void allocate_over_quota(void)
{
    CUdeviceptr p = 0;
    over_result = cuMemAlloc(&p, 32 * MiB);
}

static void limit_enforced_with_one_log_line(void **state)
{
    (void)state;
    struct cushare_stats s0 = ht_stats(0);
    assert_int_equal(s0.mem_limit, LIMIT);
    CK(cuMemAlloc(&big, 48 * MiB));
    int lines = ht_count_log_lines(allocate_over_quota, "out of memory on GPU 0");
    assert_int_equal(over_result, CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(lines, 1);
    assert_int_equal(ht_stats(0).ooms, s0.ooms + 1);
    /* What fits still fits. */
    CUdeviceptr small;
    CK(cuMemAlloc(&small, 8 * MiB));
    CK(cuMemFree(small));
}

static void meminfo_shows_the_quota(void **state)
{
    (void)state;
    size_t f, t;
    CK(cuMemGetInfo(&f, &t));
    assert_int_equal(t, LIMIT);
    assert_int_equal(f, LIMIT - 48 * MiB);
    size_t total;
    CK(cuDeviceTotalMem(&total, 0));
    assert_int_equal(total, LIMIT);
    CK(cuMemFree(big));
    CK(cuMemGetInfo(&f, &t));
    assert_int_equal(f, LIMIT);
    assert_int_equal(ht_stats(0).mem_used, 0);
}

/* The driver's own answers to NULL arguments, from a child process that
 * runs without the hook (the simulated and the real driver differ here). */
static int native_null_answers(CUresult out[4])
{
    CUcontext c;
    size_t f;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c))
        return 1;
    out[0] = cuMemGetInfo(NULL, NULL);
    out[1] = cuMemGetInfo(&f, NULL);
    out[2] = cuDeviceTotalMem(NULL, 0);
    out[3] = cuMemAlloc(NULL, 4096);
    return 0;
}

static void null_arguments_are_the_drivers(void **state)
{
    (void)state;
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 3);
        unsetenv("LD_PRELOAD");
        execl("/proc/self/exe", "hook_quota", "--native-null", (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    CUresult want[4];
    assert_int_equal(read(pfd[0], want, sizeof want), (ssize_t)sizeof want);
    close(pfd[0]);
    int st;
    waitpid(pid, &st, 0);
    /* Whatever the driver says about NULL, the hook says the same (and
     * does not crash). */
    size_t f;
    CKR(cuMemGetInfo(NULL, NULL), want[0]);
    CKR(cuMemGetInfo(&f, NULL), want[1]);
    CKR(cuDeviceTotalMem(NULL, 0), want[2]);
    CKR(cuMemAlloc(NULL, 4096), want[3]);
}

/* An older caller's shorter stats struct is filled up to its size only. */
static void stats_struct_grows_compatibly(void **state)
{
    (void)state;
    int (*get)(int, struct cushare_stats *);
    *(void **)&get = dlsym(RTLD_DEFAULT, "cushare_get_stats");
    assert_non_null(get);
    struct cushare_stats s;
    memset(&s, 0xAB, sizeof s);
    unsigned v1 = (unsigned)(offsetof(struct cushare_stats, ooms) + sizeof s.ooms);
    s.size = v1;
    assert_int_equal(get(0, &s), 0);
    assert_int_equal(s.size, v1);
    assert_int_equal(s.mem_limit, LIMIT);
    assert_int_equal(s.mem_resident, 0xABABABABABABABABull); /* not written */
    s.size = v1 - 8;
    assert_int_equal(get(0, &s), -1);
    assert_int_equal(get(CS_TEST_BAD_DEVICE, NULL), -1);
}

static void every_allocation_kind_is_counted(void **state)
{
    (void)state;
    uint64_t used0 = ht_stats(0).mem_used;
    CUdeviceptr pitched, managed, async;
    size_t pitch;
    CK(cuMemAllocPitch(&pitched, &pitch, 1000, 100, 4));
    assert_true(pitch >= 1000);
    assert_int_equal(ht_stats(0).mem_used, used0 + (uint64_t)pitch * 100);
    CK(cuMemAllocManaged(&managed, 1 * MiB, CU_MEM_ATTACH_GLOBAL));
    CK(cuMemAllocAsync(&async, 2 * MiB, 0));
    CK(cuStreamSynchronize(0));
    assert_int_equal(ht_stats(0).mem_used, used0 + (uint64_t)pitch * 100 + 3 * MiB);

    CUmemAllocationProp prop = ht_dev_prop();
    CUmemGenericAllocationHandle h;
    CK(cuMemCreate(&h, 4 * MiB, &prop, 0));
    assert_int_equal(ht_stats(0).mem_used, used0 + (uint64_t)pitch * 100 + 7 * MiB);
    /* Over the limit through cuMemCreate too. */
    CUmemGenericAllocationHandle h2;
    CKR(cuMemCreate(&h2, 64 * MiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);

    CK(cuMemRelease(h));
    CK(cuMemFreeAsync(async, 0));
    CK(cuStreamSynchronize(0));
    CK(cuMemFree(managed));
    CK(cuMemFree(pitched));
    assert_int_equal(ht_stats(0).mem_used, used0);
}

/* Destroying a context frees what it owned; the quota follows. */
static void destroyed_context_gives_memory_back(void **state)
{
    (void)state;
    CUcontext mine, prev;
    CK(cuCtxGetCurrent(&prev));
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    CUctxCreateParams params;
    memset(&params, 0, sizeof params);
    CK(cuCtxCreate(&mine, &params, 0, dev));
    uint64_t used0 = ht_stats(0).mem_used;
    CUdeviceptr a, b;
    CK(cuMemAlloc(&a, 4 * MiB));
    CK(cuMemAlloc(&b, 4096));
    assert_int_equal(ht_stats(0).mem_used, used0 + 4 * MiB + 4096);
    CK(cuCtxDestroy(mine));
    assert_int_equal(ht_stats(0).mem_used, used0);
    CK(cuCtxSetCurrent(prev));
}

/* Small allocations share chunks and still round-trip data correctly. */
static void small_allocations_hold_their_data(void **state)
{
    (void)state;
    enum { N = 300 };
    CUdeviceptr p[N];
    for (int i = 0; i < N; i++) {
        CK(cuMemAlloc(&p[i], 100 + (size_t)i * 37));
        uint32_t v = 0x1000u + (uint32_t)i;
        CK(fck_fill32(0, p[i], (100 + (uint64_t)i * 37) / 4, v));
    }
    for (int i = 0; i < N; i++) {
        uint32_t v;
        CK(cuMemcpyDtoH(&v, p[i] + ((100 + (size_t)i * 37) / 4 - 1) * 4, 4));
        assert_int_equal(v, 0x1000u + (uint32_t)i);
        /* The driver's own view: the block's own base and size. */
        CUdeviceptr base;
        size_t size;
        CK(cuMemGetAddressRange(&base, &size, p[i] + 8));
        assert_int_equal(base, p[i]);
        assert_int_equal(size, 100 + (size_t)i * 37);
    }
    for (int i = 0; i < N; i += 2)
        CK(cuMemFree(p[i]));
    for (int i = 1; i < N; i += 2)
        CK(cuMemFree(p[i]));
    CKR(cuMemFree(p[1] + 4), CUDA_ERROR_INVALID_VALUE);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--native-null")) {
        /* The child above: no hook in LD_PRELOAD (it was cleared). */
        CUresult r[4];
        if (native_null_answers(r))
            return 1;
        return write(3, r, sizeof r) == (ssize_t)sizeof r ? 0 : 1;
    }
    static const char *const env[] = {"CUSHARE_MEM_LIMIT=64M", NULL};
    hooktest_preload(argc, argv, env);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(limit_enforced_with_one_log_line),
        cmocka_unit_test(meminfo_shows_the_quota),
        cmocka_unit_test(null_arguments_are_the_drivers),
        cmocka_unit_test(stats_struct_grows_compatibly),
        cmocka_unit_test(every_allocation_kind_is_counted),
        cmocka_unit_test(destroyed_context_gives_memory_back),
        cmocka_unit_test(small_allocations_hold_their_data),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
