/* hook_hostguard.c: swap-out never pins the host's last memory.
 *
 * Pinned memory is not reclaimable; on the H100, pinning swap backing for
 * 4 x 30 GB of working sets on a 125 GiB host got a job OOM-killed. With
 * CUSHARE_HOST_RESERVE just under the host's RAM (the most it accepts), no
 * backing may be pinned at all: a revoke that asks for everything to be swapped out must
 * release with nothing moved, the memory still resident and intact (the
 * all-or-nothing rule per segment), nothing pinned, and the job must go on
 * using it. A reserve of 0 turns the guard off: the same revoke moves it
 * all (so the test can fail).
 */
#include "hooktest.h"
#include "mock_sched.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static struct mock_sched *mock;
static CUdeviceptr a;
#define A_BYTES (64 * MiB)

static struct cs_msg_release revoke_all(void)
{
    struct cs_msg_release r;
    assert_true(mock_revoke_wait(mock, 0, CS_ALL_BYTES, &r));
    return r;
}

static void guard_keeps_memory_resident(void **state)
{
    (void)state;
    ht_context();
    CK(cuMemAlloc(&a, A_BYTES));
    CK(fck_fill32(0, a, A_BYTES / 4, 9));
    CK(cuCtxSynchronize());
    struct cs_msg_release rel = revoke_all();
    struct cushare_stats s = ht_stats(0);
    if (strcmp(getenv("CUSHARE_HOST_RESERVE"), "0") == 0) {
        /* Guard off: everything moves, as in hook_swap. */
        assert_true(rel.swapped_bytes >= A_BYTES);
        assert_true(s.mem_pinned >= A_BYTES);
    } else {
        assert_int_equal(rel.swapped_bytes, 0);
        assert_int_equal(s.mem_swapped, 0);
        assert_true(s.mem_resident >= A_BYTES);
        assert_int_equal(s.mem_pinned, 0);
    }
    /* Either way the job goes on with its data. */
    assert_int_equal(ht_device_sum(a, A_BYTES / 4), 9ull * (A_BYTES / 4));
    CK(cuMemFree(a));
}

static unsigned long long mem_total_kib(void)
{
    unsigned long long kib = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "MemTotal: %llu kB", &kib), 1);
    fclose(f);
    return kib;
}

int main(int argc, char **argv)
{
    /* First with the guard off, in a child; then with a reserve no host
     * has available, here. */
    if (!getenv("HT_RESERVE")) {
        pid_t pid = fork();
        if (pid == 0) {
            setenv("HT_RESERVE", "0", 1);
            execv("/proc/self/exe", argv);
            _exit(127);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st)) {
            fprintf(stderr, "hook_hostguard: the run with the guard off failed\n");
            return 1;
        }
        /* All of MemTotal but 1 MiB: no host ever has that available. */
        char total[64];
        snprintf(total, sizeof total, "%lluK", (unsigned long long)(mem_total_kib() - 1024));
        setenv("HT_RESERVE", total, 1);
    }
    const char *reserve = getenv("HT_RESERVE");
    static char env_sock[4200], env_res[64];
    snprintf(env_sock, sizeof env_sock, "CUSHARE_SOCKET=%s", ht_path("mock.sock"));
    snprintf(env_res, sizeof env_res, "CUSHARE_HOST_RESERVE=%s", reserve);
    const char *const env[] = {env_sock, env_res, NULL};
    hooktest_preload(argc, argv, env);
    mock = mock_start(ht_path("mock.sock"), 60000);
    assert_non_null(mock);
    mock_set_auto_grant(mock, true);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(guard_keeps_memory_resident),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mock_stop(mock);
    return rc;
}
