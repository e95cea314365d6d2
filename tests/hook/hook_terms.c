/* hook_terms.c: TERMS, what the node granted this job.
 *
 * The job asks for high, weight 1000000 and no memory limit; the scripted
 * scheduler answers its HELLO (which announces CS_HELLO_TERMS first) with
 * TERMS granting normal, weight 1 and 64 MiB, as cushared does for a uid
 * that no [uid.*] section names. The hook must log one warning with the
 * scheduler's text, enforce the 64 MiB as the job's quota
 * (CUDA_ERROR_OUT_OF_MEMORY beyond it) and show it in cuMemGetInfo,
 * cuDeviceTotalMem and cushare_get_stats; a reconnect with the same terms
 * does not warn again.
 */
#include "hooktest.h"
#include "mock_sched.h"

#include <stdio.h>
#include <string.h>

#define GRANTED (64 * MiB)
#define WHY "uid 4242 may claim at most normal, weight 1, memory 64.00 MiB (default grant)"

static struct mock_sched *mock;

/* The first gated call on a device connects to the scheduler. */
static void connect_now(void)
{
    ht_context();
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 1 * MiB));
    CK(fck_fill32(0, p, 1024, 1));
    CK(cuCtxSynchronize());
    CK(cuMemFree(p));
}

static void warns_once_with_the_schedulers_text(void **state)
{
    (void)state;
    int n = ht_count_log_lines(connect_now,
                               "cushared: running at priority normal, weight 1, memory limit "
                               "64.00 MiB instead of high/1000000/no limit: " WHY "\n");
    assert_int_equal(n, 1);
    struct cs_msg h;
    assert_true(mock_wait(mock, CS_MSG_HELLO, 0, &h, NULL));
    assert_true(h.u.hello.flags & CS_HELLO_TERMS);
    assert_int_equal(h.u.hello.priority, CS_PRIO_HIGH); /* it asks; the node decides */
    assert_int_equal(h.u.hello.mem_limit, 0);
}

static CUresult over_result;

static void allocate_over_the_grant(void)
{
    CUdeviceptr p = 0;
    over_result = cuMemAlloc(&p, 32 * MiB);
}

static void granted_limit_is_the_quota(void **state)
{
    (void)state;
    assert_int_equal(ht_stats(0).mem_limit, GRANTED);
    CUdeviceptr a;
    CK(cuMemAlloc(&a, 48 * MiB));
    size_t f, t;
    CK(cuMemGetInfo(&f, &t));
    assert_int_equal(t, GRANTED);
    assert_int_equal(f, GRANTED - 48 * MiB);
    size_t total;
    CK(cuDeviceTotalMem(&total, 0));
    assert_int_equal(total, GRANTED);
    int lines = ht_count_log_lines(allocate_over_the_grant, "the scheduler's grant");
    assert_int_equal(over_result, CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(lines, 1);
    CUdeviceptr b;
    CK(cuMemAlloc(&b, 16 * MiB)); /* what fits still fits */
    CK(cuMemFree(b));
    CK(cuMemFree(a));
}

static int attaches_before;

/* Until the new connection's ATTACH: the handshake, TERMS included, is done. */
static void wait_for_reconnect(void)
{
    for (int i = 0; i < 1000 && mock_count(mock, CS_MSG_ATTACH) == attaches_before; i++)
        ht_sleep_ms(10);
}

static void reconnect_does_not_warn_again(void **state)
{
    (void)state;
    int hellos = mock_count(mock, CS_MSG_HELLO);
    attaches_before = mock_count(mock, CS_MSG_ATTACH);
    mock_drop(mock);
    int n = ht_count_log_lines(wait_for_reconnect, "cushared: running at");
    assert_true(mock_count(mock, CS_MSG_ATTACH) > attaches_before);
    assert_true(mock_count(mock, CS_MSG_HELLO) > hellos);
    assert_int_equal(n, 0);
    assert_int_equal(ht_stats(0).mem_limit, GRANTED);
}

int main(int argc, char **argv)
{
    static char env_sock[4200];
    snprintf(env_sock, sizeof env_sock, "CUSHARE_SOCKET=%s", ht_path("terms.sock"));
    const char *const env[] = {env_sock, "CUSHARE_PRIORITY=high", "CUSHARE_WEIGHT=1000000",
                               "CUSHARE_MEM_LIMIT=0", NULL};
    hooktest_preload(argc, argv, env);
    mock = mock_start(ht_path("terms.sock"), 60000);
    assert_non_null(mock);
    mock_set_auto_grant(mock, true);
    struct cs_msg_terms t = {.priority = CS_PRIO_NORMAL, .weight = 1, .mem_limit = GRANTED};
    t.flags = CS_TERMS_CUT_PRIORITY | CS_TERMS_CUT_WEIGHT | CS_TERMS_CUT_MEM;
    snprintf(t.text, sizeof t.text, "%s", WHY);
    mock_set_terms(mock, &t);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(warns_once_with_the_schedulers_text),
        cmocka_unit_test(granted_limit_is_the_quota),
        cmocka_unit_test(reconnect_does_not_warn_again),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mock_stop(mock);
    return rc;
}
