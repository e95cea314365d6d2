/* hook_idle.c: "idle" means nothing submitted *and* nothing in flight.
 *
 * With a 100 ms idle period: a holder blocked in a synchronize on a 600 ms
 * kernel is not reported idle while the kernel runs; once the kernel is done
 * and nothing new comes, USAGE IDLE arrives no earlier than 100 ms after the
 * kernel ended and not much later; new work clears it.
 */
#include "hooktest.h"
#include "mock_sched.h"

#include <stdio.h>

static struct mock_sched *mock;

static void busy_holder_is_not_idle(void **state)
{
    (void)state;
    ht_context();
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 4096));
    CK(fck_fill32(0, p, 1024, 1)); /* takes the lease */
    CK(cuCtxSynchronize());
    struct cs_msg m;
    while (mock_wait(mock, CS_MSG_USAGE, 0, NULL, NULL)) /* forget what came before */
        ;
    uint64_t t0 = ht_now_ns();
    CK(fck_sleep(0, 600000000ull));
    CK(cuCtxSynchronize());
    uint64_t t_end = ht_now_ns();
    /* While the kernel ran, no USAGE said idle. */
    uint64_t at;
    while (mock_wait(mock, CS_MSG_USAGE, 0, &m, &at))
        if (m.u.usage.flags & CS_USAGE_IDLE)
            fail_msg("reported idle %.0f ms into a 600 ms kernel", (double)(at - t0) / 1e6);
    /* After it, idle comes one idle period after the GPU finished. */
    bool idle = false;
    while (!idle && mock_wait(mock, CS_MSG_USAGE, 2000, &m, &at))
        idle = m.u.usage.flags & CS_USAGE_IDLE;
    assert_true(idle);
    double after_ms = (double)(at - t_end) / 1e6;
    print_message("idle reported %.1f ms after the kernel ended (idle period 100 ms)\n",
                  after_ms);
    assert_true(after_ms >= 95.0);
    assert_true(after_ms <= 250.0);
    /* Work again: the flag clears. */
    CK(fck_fill32(0, p, 1024, 2));
    CK(cuCtxSynchronize());
    bool busy = false;
    while (!busy && mock_wait(mock, CS_MSG_USAGE, 2000, &m, NULL))
        busy = !(m.u.usage.flags & CS_USAGE_IDLE);
    assert_true(busy);
    CK(cuMemFree(p));
}

int main(int argc, char **argv)
{
    static char env_sock[4200];
    snprintf(env_sock, sizeof env_sock, "CUSHARE_SOCKET=%s", ht_path("idle.sock"));
    const char *const env[] = {env_sock, NULL};
    hooktest_preload(argc, argv, env);
    mock = mock_start(ht_path("idle.sock"), 100);
    assert_non_null(mock);
    mock_set_auto_grant(mock, true);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(busy_holder_is_not_idle),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mock_stop(mock);
    return rc;
}
