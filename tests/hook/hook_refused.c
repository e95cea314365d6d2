/* hook_refused.c: cushared refuses this process for a while (here: its
 * uid has too many connections open), with CUSHARE_REQUIRE_DAEMON=1.
 *
 * The hook must say why, once, as the daemon put it ("cushared refused
 * this process: ..."), never claim that there is no scheduler, keep its
 * capabilities (a refusal is not an older daemon: no HELLO with fewer
 * bits), knock again only after a growing pause (1 s, then 2 s: not the
 * thousands of connections a second of a client that retries at once),
 * and run managed as soon as it is accepted.
 */
#include "hooktest.h"
#include "mock_sched.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define REASON "refused: uid 1000 has 32 connections open (max_conns_per_uid)"

static struct mock_sched *mock;
static int saved_stderr = -1;

/* What the hook logged so far (its stderr goes to a file, see main). */
static void hook_log(char *out, size_t cap)
{
    int fd = open(ht_path("hook.err"), O_RDONLY);
    assert_true(fd >= 0);
    ssize_t n = read(fd, out, cap - 1);
    close(fd);
    out[n > 0 ? n : 0] = '\0';
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static void refused_then_accepted(void **state)
{
    (void)state;
    ht_context();
    CUdeviceptr a;
    CK(cuMemAlloc(&a, 8 * MiB));
    CK(fck_fill32(0, a, 2 * MiB, 7)); /* waits: refused twice, then granted */
    CK(cuCtxSynchronize());
    assert_int_equal(ht_device_sum(a, 2 * MiB), 7ull * 2 * MiB);
    assert_true(mock_lease(mock, 0) != 0); /* it ran under a lease */
    /* Three HELLOs in all, every one with the full capabilities, the
     * second at least 1 s after the first and the third 2 s after that. */
    struct cs_msg m;
    uint64_t at[3];
    for (int i = 0; i < 3; i++) {
        assert_true(mock_wait(mock, CS_MSG_HELLO, 0, &m, &at[i]));
        assert_int_equal(m.u.hello.flags & (CS_HELLO_TSG | CS_HELLO_LC | CS_HELLO_PIN),
                         CS_HELLO_TSG | CS_HELLO_LC | CS_HELLO_PIN);
    }
    assert_true(at[1] - at[0] >= 1000000000ull);
    assert_true(at[2] - at[1] >= 2000000000ull);
    assert_int_equal(mock_count(mock, CS_MSG_HELLO), 3);
    static char log[65536];
    hook_log(log, sizeof log);
    if (saved_stderr >= 0)
        dup2(saved_stderr, 2);
    printf("---- the hook's log ----\n%s----\n", log);
    assert_int_equal(count(log, "cushared refused this process: " REASON), 1);
    assert_int_equal(count(log, "refused by cushared at"), 1);
    assert_int_equal(count(log, "no scheduler"), 0);
    CK(cuMemFree(a));
}

int main(int argc, char **argv)
{
    static char env_sock[4200];
    snprintf(env_sock, sizeof env_sock, "CUSHARE_SOCKET=%s", ht_path("refused.sock"));
    const char *const env[] = {env_sock, "CUSHARE_REQUIRE_DAEMON=1", NULL};
    hooktest_preload(argc, argv, env);
    /* The hook logs to stderr; the test reads it back. */
    saved_stderr = dup(2);
    int fd = open(ht_path("hook.err"), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    assert_true(fd >= 0 && saved_stderr >= 0);
    dup2(fd, 2);
    close(fd);
    mock = mock_start(ht_path("refused.sock"), 60000);
    assert_non_null(mock);
    mock_refuse_hellos(mock, 2, EBUSY, REASON);
    mock_set_auto_grant(mock, true);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(refused_then_accepted),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mock_stop(mock);
    return rc;
}
