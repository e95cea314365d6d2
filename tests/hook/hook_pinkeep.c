/* hook_pinkeep.c: CUSHARE_PIN_KEEP bounds the pinned host memory a job keeps
 * for memory that is back on the GPU.
 *
 * With CUSHARE_PIN_KEEP=40M, a job of 64 + 32 MiB swapped out and restored
 * keeps backing for the 32 MiB segment only (the largest goes first), the
 * next swap-out pins again what it needs, and the data survives both. The
 * scheduler hears of what is pinned (PINNED: its pin-ahead budget counts the
 * kept backing it could not otherwise see).
 */
#include "hooktest.h"
#include "mock_sched.h"

#include <stdio.h>

static struct mock_sched *mock;

static void revoke_all(void)
{
    struct cs_msg_release r;
    assert_true(mock_revoke_wait(mock, 0, CS_ALL_BYTES, &r));
    assert_true(r.swapped_bytes >= 96 * MiB);
}

/* Waits (up to 2 s) for a PINNED report of exactly `want` bytes. */
static bool pinned_reported(uint64_t want)
{
    struct cs_msg m;
    while (mock_wait(mock, CS_MSG_PINNED, 2000, &m, NULL)) {
        assert_int_equal(m.u.pinned.slot, 0);
        if (m.u.pinned.bytes == want)
            return true;
    }
    return false;
}

static void backing_trimmed_after_restore(void **state)
{
    (void)state;
    ht_context();
    CUdeviceptr a, b;
    CK(cuMemAlloc(&a, 64 * MiB));
    CK(cuMemAlloc(&b, 32 * MiB));
    CK(fck_fill32(0, a, 16 * MiB, 11));
    CK(fck_fill32(0, b, 8 * MiB, 13));
    CK(cuCtxSynchronize());
    for (int round = 0; round < 2; round++) {
        revoke_all();
        assert_true(ht_stats(0).mem_pinned >= 96 * MiB); /* all of it while swapped */
        assert_int_equal(ht_device_sum(a, 16 * MiB), 11ull * 16 * MiB);
        /* The trim runs right after the gate opens, on the worker. */
        for (int i = 0; i < 200 && ht_stats(0).mem_pinned > 40 * MiB; i++)
            ht_sleep_ms(10);
        assert_int_equal(ht_stats(0).mem_pinned, 32 * MiB);
        assert_true(pinned_reported(32 * MiB));
    }
    assert_int_equal(ht_device_sum(b, 8 * MiB), 13ull * 8 * MiB);
    CK(cuMemFree(a));
    CK(cuMemFree(b));
    assert_int_equal(ht_stats(0).mem_pinned, 0);
    assert_true(pinned_reported(0));
}

int main(int argc, char **argv)
{
    static char env_sock[4200];
    snprintf(env_sock, sizeof env_sock, "CUSHARE_SOCKET=%s", ht_path("pinkeep.sock"));
    const char *const env[] = {env_sock, "CUSHARE_PIN_KEEP=40M", NULL};
    hooktest_preload(argc, argv, env);
    mock = mock_start(ht_path("pinkeep.sock"), 60000);
    assert_non_null(mock);
    mock_set_auto_grant(mock, true);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(backing_trimmed_after_restore),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mock_stop(mock);
    return rc;
}
