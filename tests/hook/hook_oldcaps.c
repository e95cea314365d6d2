/* hook_oldcaps.c: a daemon older than the hook.
 *
 * Every decoder rejects a capability bit it does not know, so a daemon that
 * predates CS_HELLO_PIN (and CS_HELLO_TERMS, which came later) refuses the
 * hook's first two HELLOs. The hook must say HELLO again with fewer
 * capabilities, work as before (grant, revoke with a swap-out, restore),
 * never send that daemon PINNED, which it could not decode, and expect no
 * TERMS from it (no quota of the daemon's). An older daemon still does the
 * rest of the protocol. The hook first says HELLO with CS_HELLO_GIVEBACK
 * and CS_HELLO_RESTORED, the newest bits, then RESTORED alone, and with a
 * container name to send (CUSHARE_CONTAINER) CS_HELLO_LABELS with each,
 * then LABELS alone; refused, it goes down its usual order and never sends
 * LABELS.
 */
#include "hooktest.h"
#include "mock_sched.h"

#include <stdio.h>

static struct mock_sched *mock;

static void falls_back_and_never_sends_pinned(void **state)
{
    (void)state;
    ht_context();
    CUdeviceptr a;
    CK(cuMemAlloc(&a, 32 * MiB));
    CK(fck_fill32(0, a, 8 * MiB, 5)); /* takes the lease */
    CK(cuCtxSynchronize());
    struct cs_msg_release r;
    assert_true(mock_revoke_wait(mock, 0, CS_ALL_BYTES, &r));
    assert_true(r.swapped_bytes >= 32 * MiB);
    assert_true(ht_stats(0).mem_pinned >= 32 * MiB); /* there is something to report */
    assert_int_equal(ht_device_sum(a, 8 * MiB), 5ull * 8 * MiB); /* granted again */
    /* Seven HELLOs: GIVEBACK|RESTORED|LABELS|POOL|PIN|TERMS,
     * RESTORED|LABELS|POOL|PIN|TERMS, LABELS|POOL|PIN|TERMS,
     * POOL|PIN|TERMS, PIN|TERMS and PIN refused, then one without either. */
    struct cs_msg m;
    assert_true(mock_wait(mock, CS_MSG_HELLO, 0, &m, NULL));
    assert_true(m.u.hello.flags & CS_HELLO_GIVEBACK);
    assert_true(m.u.hello.flags & CS_HELLO_RESTORED);
    assert_true(m.u.hello.flags & CS_HELLO_LABELS);
    assert_true(m.u.hello.flags & CS_HELLO_POOL);
    assert_true(mock_wait(mock, CS_MSG_HELLO, 0, &m, NULL));
    assert_false(m.u.hello.flags & CS_HELLO_GIVEBACK);
    assert_true(m.u.hello.flags & CS_HELLO_RESTORED);
    assert_true(m.u.hello.flags & CS_HELLO_LABELS);
    assert_true(m.u.hello.flags & CS_HELLO_POOL);
    assert_true(mock_wait(mock, CS_MSG_HELLO, 0, &m, NULL));
    assert_false(m.u.hello.flags & CS_HELLO_RESTORED);
    assert_true(m.u.hello.flags & CS_HELLO_LABELS);
    assert_true(m.u.hello.flags & CS_HELLO_POOL);
    assert_true(mock_wait(mock, CS_MSG_HELLO, 0, &m, NULL));
    assert_false(m.u.hello.flags & CS_HELLO_LABELS);
    assert_true(m.u.hello.flags & CS_HELLO_POOL);
    assert_true(m.u.hello.flags & CS_HELLO_TERMS);
    assert_true(mock_wait(mock, CS_MSG_HELLO, 0, &m, NULL));
    assert_false(m.u.hello.flags & CS_HELLO_POOL);
    assert_true(m.u.hello.flags & CS_HELLO_PIN);
    assert_true(m.u.hello.flags & CS_HELLO_TERMS);
    assert_true(mock_wait(mock, CS_MSG_HELLO, 0, &m, NULL));
    assert_true(m.u.hello.flags & CS_HELLO_PIN);
    assert_false(m.u.hello.flags & CS_HELLO_TERMS);
    assert_true(mock_wait(mock, CS_MSG_HELLO, 0, &m, NULL));
    assert_false(m.u.hello.flags & (CS_HELLO_PIN | CS_HELLO_TERMS));
    assert_true(m.u.hello.flags & CS_HELLO_LC);
    assert_int_equal(ht_stats(0).mem_limit, 0); /* no TERMS, no quota */
    /* A few report periods: USAGE keeps coming, PINNED never. */
    ht_sleep_ms(500);
    assert_true(mock_count(mock, CS_MSG_USAGE) > 0);
    assert_int_equal(mock_count(mock, CS_MSG_PINNED), 0);
    assert_int_equal(mock_count(mock, CS_MSG_LABELS), 0);
    CK(cuMemFree(a));
}

int main(int argc, char **argv)
{
    static char env_sock[4200];
    snprintf(env_sock, sizeof env_sock, "CUSHARE_SOCKET=%s", ht_path("oldcaps.sock"));
    const char *const env[] = {env_sock, "CUSHARE_CONTAINER=trainer", NULL};
    hooktest_preload(argc, argv, env);
    mock = mock_start(ht_path("oldcaps.sock"), 200);
    assert_non_null(mock);
    mock_refuse_caps(mock, CS_HELLO_PIN | CS_HELLO_TERMS | CS_HELLO_LABELS | CS_HELLO_RESTORED |
                               CS_HELLO_GIVEBACK);
    mock_set_auto_grant(mock, true);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(falls_back_and_never_sends_pinned),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mock_stop(mock);
    return rc;
}
