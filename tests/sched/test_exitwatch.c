/* test_exitwatch.c: the watch of departed clients' processes
 * (src/sched/exitwatch.c), on real child processes. Proves: a watched
 * process's exit makes its pidfd readable and the event names its client,
 * once (a second event of the tag, and a tag never issued, name none);
 * a process alive is not reported; the table holds SD_EXITWATCH_MAX
 * watches and refuses the next with ENOSPC, and a freed slot is used
 * again under a new tag (the old one stays dead); a watch is dropped
 * unreported at its time (the deadline is the earliest); pid 0, client 0
 * and a pid that is no process are refused; fini closes every descriptor. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sched/exitwatch.h"

/* A child that lives until it is killed. */
static pid_t child(void)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        for (;;)
            pause();
    }
    return pid;
}

static void end(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/* Whether fd is readable within ms. */
static bool readable(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

static bool fd_open(int fd)
{
    return fcntl(fd, F_GETFD) != -1 || errno != EBADF;
}

static void test_exit_reported_once(void **state)
{
    (void)state;
    struct sd_exitwatch xw;
    sd_exitwatch_init(&xw);
    pid_t a = child(), b = child();
    uint64_t ta, tb;
    int fa = sd_exitwatch_add(&xw, 7, (uint32_t)a, 1000, &ta);
    int fb = sd_exitwatch_add(&xw, 8, (uint32_t)b, 1000, &tb);
    assert_true(fa >= 0 && fb >= 0);
    assert_true(ta & SD_EXITWATCH_TAG);
    assert_int_not_equal(ta, tb);
    assert_int_equal(sd_exitwatch_count(&xw), 2);
    assert_false(readable(fa, 50)); /* alive: nothing to report */
    end(a);
    assert_true(readable(fa, 2000));
    assert_false(readable(fb, 0));
    assert_int_equal(sd_exitwatch_event(&xw, ta), 7);
    assert_false(fd_open(fa));
    assert_int_equal(sd_exitwatch_event(&xw, ta), 0); /* once */
    assert_int_equal(sd_exitwatch_event(&xw, SD_EXITWATCH_TAG | 999), 0);
    assert_int_equal(sd_exitwatch_count(&xw), 1);
    end(b);
    sd_exitwatch_fini(&xw);
    assert_false(fd_open(fb));
}

static void test_table_full(void **state)
{
    (void)state;
    struct sd_exitwatch xw;
    sd_exitwatch_init(&xw);
    pid_t p = child();
    uint64_t tag[SD_EXITWATCH_MAX], t;
    int fd[SD_EXITWATCH_MAX];
    for (int i = 0; i < SD_EXITWATCH_MAX; i++) {
        fd[i] = sd_exitwatch_add(&xw, 100 + (uint64_t)i, (uint32_t)p, 1000, &tag[i]);
        assert_true(fd[i] >= 0);
    }
    errno = 0;
    assert_int_equal(sd_exitwatch_add(&xw, 999, (uint32_t)p, 1000, &t), -1);
    assert_int_equal(errno, ENOSPC);
    /* a slot freed is taken again, under a tag of its own */
    assert_int_equal(sd_exitwatch_event(&xw, tag[5]), 105);
    assert_true(sd_exitwatch_add(&xw, 999, (uint32_t)p, 1000, &t) >= 0);
    assert_int_not_equal(t, tag[5]);
    assert_int_equal(sd_exitwatch_event(&xw, tag[5]), 0);
    assert_int_equal(sd_exitwatch_count(&xw), SD_EXITWATCH_MAX);
    sd_exitwatch_fini(&xw);
    for (int i = 0; i < SD_EXITWATCH_MAX; i++)
        assert_false(fd_open(fd[i]));
    assert_int_equal(sd_exitwatch_count(&xw), 0);
    end(p);
}

static void test_expiry(void **state)
{
    (void)state;
    struct sd_exitwatch xw;
    sd_exitwatch_init(&xw);
    assert_int_equal(sd_exitwatch_deadline(&xw), 0);
    pid_t p = child();
    uint64_t t1, t2;
    int f1 = sd_exitwatch_add(&xw, 1, (uint32_t)p, 300, &t1);
    int f2 = sd_exitwatch_add(&xw, 2, (uint32_t)p, 200, &t2);
    assert_true(f1 >= 0 && f2 >= 0);
    assert_int_equal(sd_exitwatch_deadline(&xw), 200);
    sd_exitwatch_expire(&xw, 199);
    assert_int_equal(sd_exitwatch_count(&xw), 2);
    sd_exitwatch_expire(&xw, 200);
    assert_int_equal(sd_exitwatch_count(&xw), 1);
    assert_false(fd_open(f2));
    assert_true(fd_open(f1));
    assert_int_equal(sd_exitwatch_deadline(&xw), 300);
    end(p); /* dropped unreported: its exit names no client */
    sd_exitwatch_expire(&xw, 300);
    assert_false(fd_open(f1));
    assert_int_equal(sd_exitwatch_event(&xw, t1), 0);
    assert_int_equal(sd_exitwatch_deadline(&xw), 0);
    sd_exitwatch_fini(&xw);
}

static void test_refusals(void **state)
{
    (void)state;
    struct sd_exitwatch xw;
    sd_exitwatch_init(&xw);
    uint64_t t;
    pid_t p = child();
    errno = 0;
    assert_int_equal(sd_exitwatch_add(&xw, 1, 0, 100, &t), -1);
    assert_int_equal(errno, EINVAL);
    assert_int_equal(sd_exitwatch_add(&xw, 0, (uint32_t)p, 100, &t), -1);
    end(p); /* reaped: the pid names no process now */
    errno = 0;
    assert_int_equal(sd_exitwatch_add(&xw, 1, (uint32_t)p, 100, &t), -1);
    assert_int_equal(errno, ESRCH);
    assert_int_equal(sd_exitwatch_count(&xw), 0);
    sd_exitwatch_fini(&xw);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_reported_once),
        cmocka_unit_test(test_table_full),
        cmocka_unit_test(test_expiry),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
