/* hook_tsg_preload.c: the exported ioctl under LD_PRELOAD.
 *
 * libcushare.so defines ioctl@@GLIBC_2.2.5 (GLIBC_2.17 on AArch64), the
 * version libcuda's reference asks for, so the driver's RM calls reach
 * hooks_ioctl.c. Every ioctl of the process goes through it: results and
 * errno must be exactly glibc's. The same checks run again in a child with
 * CUSHARE_TSG=off, where the wrapper is a pure pass-through. (The RM side is
 * unit-tested in hook_tsg.c; the simulated driver makes no ioctl.)
 */
#include "hooktest.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#if defined(__x86_64__)
#define IOCTL_VERSION "GLIBC_2.2.5"
#else
#define IOCTL_VERSION "GLIBC_2.17"
#endif

extern char **environ;

static void ioctl_is_ours(void **state)
{
    (void)state;
    /* Exported under the version libcuda's reference names. */
    const char *build = getenv("CUSHARE_BUILD");
    char path[4096];
    snprintf(path, sizeof path, "%s/lib/libcushare.so", build ? build : "build");
    void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(h);
    void *ours = dlvsym(h, "ioctl", IOCTL_VERSION);
    assert_non_null(ours);
    Dl_info info;
    assert_true(dladdr(ours, &info) != 0);
    assert_non_null(strstr(info.dli_fname, "libcushare"));
    dlclose(h);
    /* And it is what a versioned reference binds to: first in the search
     * order, unless a sanitizer runtime (preloaded ahead of the hook)
     * intercepts ioctl itself, and forwards to the next one: ours. */
    const char *san = getenv("CUSHARE_SAN");
    if (!san || !*san) {
        assert_ptr_equal(dlvsym(RTLD_DEFAULT, "ioctl", IOCTL_VERSION), ours);
        assert_ptr_equal(dlsym(RTLD_DEFAULT, "ioctl"), ours);
    }
}

static void plain_ioctls_pass_through(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(write(p[1], "hello", 5), 5);
    int n = -1;
    assert_int_equal(ioctl(p[0], FIONREAD, &n), 0);
    assert_int_equal(n, 5);
    close(p[0]);
    close(p[1]);

    int fd = open("/dev/null", O_RDWR);
    assert_true(fd >= 0);
    struct termios t;
    errno = 0;
    assert_int_equal(ioctl(fd, TCGETS, &t), -1);
    assert_int_equal(errno, ENOTTY);
    /* An RM_ALLOC / RM_CONTROL request on a device that is not NVIDIA's:
     * forwarded as it is, answered by that device. */
    unsigned char buf[64] = {0};
    buf[12] = 0x6c;
    buf[13] = 0xa0; /* hClass = 0xa06c */
    errno = 0;
    assert_int_equal(ioctl(fd, 0xc030462bul, buf), -1);
    assert_int_equal(errno, ENOTTY);
    errno = 0;
    assert_int_equal(ioctl(fd, 0xc020462aul, buf), -1);
    assert_int_equal(errno, ENOTTY);
    errno = 0;
    assert_int_equal(ioctl(-1, FIONREAD, &n), -1);
    assert_int_equal(errno, EBADF);
    close(fd);
}

/* An ioctl from a signal handler while the thread is in one. */
static volatile sig_atomic_t handled;
static void on_alarm(int sig)
{
    (void)sig;
    int n;
    int saved = errno;
    if (ioctl(0, FIONREAD, &n) == 0 || errno == ENOTTY || errno == EINVAL || errno == EBADF)
        handled++;
    errno = saved;
}

static void signal_handler_ioctl(void **state)
{
    (void)state;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    int p[2];
    assert_int_equal(pipe(p), 0);
    ualarm(1000, 1000);
    uint64_t end = ht_now_ns() + 200000000ull;
    int n;
    while (ht_now_ns() < end && handled < 20)
        assert_int_equal(ioctl(p[0], FIONREAD, &n), 0);
    ualarm(0, 0);
    signal(SIGALRM, SIG_DFL);
    assert_true(handled > 0);
    close(p[0]);
    close(p[1]);
}

static void cuda_still_works(void **state)
{
    (void)state;
    ht_context();
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 1 << 20));
    CK(fck_fill32(0, p, 1024, 7));
    assert_int_equal(ht_device_sum(p, 1024), 7 * 1024ull);
    CK(cuMemFree(p));
}

int main(int argc, char **argv)
{
    hooktest_preload(argc, argv, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ioctl_is_ours),
        cmocka_unit_test(plain_ioctls_pass_through),
        cmocka_unit_test(signal_handler_ioctl),
        cmocka_unit_test(cuda_still_works),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (rc || getenv("HOOK_TSG_OFF_CHILD"))
        return rc;
    /* Again with the mechanism off. */
    setenv("CUSHARE_TSG", "off", 1);
    setenv("HOOK_TSG_OFF_CHILD", "1", 1);
    pid_t pid;
    if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, environ) != 0)
        return 2;
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return 3;
    printf("with CUSHARE_TSG=off: exit %d\n", WEXITSTATUS(st));
    return WEXITSTATUS(st);
}
