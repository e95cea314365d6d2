/* hook_fork.c: fork() under the hook.
 *
 * The child of a process that used the GPU starts with a clean slate: no
 * inherited lease, counters or connection (the parent's state belongs to
 * the parent), and it can use CUDA itself afresh, attaching its own device
 * state lazily. The parent is not disturbed. Forks race with the hook's
 * own threads here on purpose (a thread keeps submitting work).
 */
#include "hooktest.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

static _Atomic int stop;
static CUcontext ctx;

static void *busy(void *arg)
{
    (void)arg;
    CK(cuCtxSetCurrent(ctx));
    while (!atomic_load(&stop))
        CK(fck_sleep(0, 1000));
    CK(cuCtxSynchronize());
    return NULL;
}

/* Runs in the child: must exit 0. */
static int child(void)
{
    struct cushare_stats s = ht_stats(0);
    if (s.state != CUSHARE_LEASE_UNUSED || s.submissions != 0 || s.mem_used != 0)
        return 10;
    CUcontext c;
    CUdeviceptr p;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&c, 0) || cuCtxSetCurrent(c))
        return 11;
    struct fck k;
    if (fck_load(&k) || cuMemAlloc(&p, 4096) || fck_fill32(0, p, 1024, 9) || cuCtxSynchronize())
        return 12;
    uint32_t v = 0;
    if (cuMemcpyDtoH(&v, p + 4092, 4) || v != 9)
        return 13;
    s = ht_stats(0);
    if (s.state != CUSHARE_LEASE_UNMANAGED || s.submissions < 2 || s.mem_used != 4096)
        return 14;
    return 0;
}

static void child_starts_clean_and_works(void **state)
{
    (void)state;
    ht_context();
    CK(cuCtxGetCurrent(&ctx));
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 1 << 20));
    pthread_t t;
    pthread_create(&t, NULL, busy, NULL);
    ht_sleep_ms(20);
    unsigned long long before = ht_submissions();
    for (int i = 0; i < 3; i++) {
        pid_t pid = fork();
        if (pid == 0)
            _exit(child());
        int st = 0;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
    }
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    struct cushare_stats s = ht_stats(0);
    assert_true(s.submissions > before);
    assert_int_equal(s.mem_used, 1 << 20);
    CK(cuMemFree(p));
}

int main(int argc, char **argv)
{
    hooktest_preload(argc, argv, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(child_starts_clean_and_works),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
