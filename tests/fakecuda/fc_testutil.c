/* fc_testutil.c: see fc_testutil.h. */
#include "fc_testutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct fck fct_kernels;
static CUcontext ctx;

void fct_check(CUresult got, CUresult want, const char *what, const char *file, int line)
{
    if (got == want)
        return;
    const char *g = NULL, *w = NULL;
    cuGetErrorName(got, &g);
    cuGetErrorName(want, &w);
    fail_msg("%s:%d: %s returned %s (%d), expected %s (%d)", file, line, what,
             g ? g : "?", (int)got, w ? w : "?", (int)want);
}

uint64_t fct_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double fct_ms_since(uint64_t t0)
{
    return (double)(fct_now_ns() - t0) / 1e6;
}

void fct_sleep_ms(unsigned ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

CUcontext fct_ctx(void)
{
    return ctx;
}

int fct_setup(void **state)
{
    CK(cuInit(0));
    CK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CK(cuCtxSetCurrent(ctx));
    CK(fck_load(&fct_kernels));
    return 0;
}

int fct_teardown(void **state)
{
    CK(cuDevicePrimaryCtxReset(0));
    /* Nothing of the test may remain charged: a fresh context sees only
     * its own cost (the tests run one process per device). */
    CUcontext c;
    size_t f, t;
    CK(cuDevicePrimaryCtxRetain(&c, 0));
    CK(cuCtxSetCurrent(c));
    CK(cuMemGetInfo(&f, &t));
    CK(cuDevicePrimaryCtxRelease(0));
    CK(cuCtxSetCurrent(NULL));
    if (t - f != 8 * MiB)
        fail_msg("%zu bytes still charged after the test", (size_t)(t - f - 8 * MiB));
    return 0;
}

uint32_t fct_get32(CUdeviceptr p)
{
    uint32_t v;
    CK(cuMemcpyDtoH(&v, p, sizeof v));
    return v;
}

uint64_t fct_get64(CUdeviceptr p)
{
    uint64_t v;
    CK(cuMemcpyDtoH(&v, p, sizeof v));
    return v;
}

bool fct_all_bytes(CUdeviceptr p, size_t n, unsigned char b)
{
    unsigned char *h = malloc(n);
    assert_non_null(h);
    CK(cuMemcpyDtoH(h, p, n));
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++)
        ok = h[i] == b;
    free(h);
    return ok;
}

void *fct_proc(const char *name, int version, cuuint64_t flags)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    CK(cuGetProcAddress(name, &fn, version, flags, &st));
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_non_null(fn);
    return fn;
}

/* ---- helper processes: the parent's side ---------------------------------- */

struct fct_child fct_spawn(const char *const *args, const char *const *env, int errfd)
{
    int in[2], out[2];
    assert_int_equal(pipe(in), 0);
    assert_int_equal(pipe(out), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 3);
        if (errfd >= 0)
            dup2(errfd, 2);
        for (int fd = 4; fd < 64; fd++)
            close(fd);
        for (; env && *env; env++) {
            if (strchr(*env, '='))
                putenv((char *)*env);
            else
                unsetenv(*env);
        }
        const char *argv[16] = { program_invocation_short_name, "--child" };
        int n = 2;
        for (; *args && n < 15; args++)
            argv[n++] = *args;
        argv[n] = NULL;
        execv("/proc/self/exe", (char **)argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    return (struct fct_child){ pid, in[1], out[0] };
}

void fct_child_line(struct fct_child *c, char *buf, size_t cap)
{
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t r = read(c->from, buf + n, 1);
        if (r <= 0)
            fail_msg("child %d closed its report pipe", (int)c->pid);
        if (buf[n] == '\n')
            break;
        n++;
    }
    buf[n] = 0;
}

void fct_child_expect(struct fct_child *c, const char *want)
{
    char buf[256];
    fct_child_line(c, buf, sizeof buf);
    if (strncmp(buf, want, strlen(want)) != 0)
        fail_msg("child %d said '%s', expected '%s'", (int)c->pid, buf, want);
}

void fct_child_say(struct fct_child *c, char what)
{
    assert_int_equal(write(c->to, &what, 1), 1);
}

int fct_child_reap(struct fct_child *c)
{
    close(c->to);
    close(c->from);
    int st;
    while (waitpid(c->pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* ---- helper processes: the child's side ----------------------------------- */

static FILE *rep;                     /* fd 3 in a child */

bool fct_is_child(int argc, char **argv)
{
    return argc >= 3 && strcmp(argv[1], "--child") == 0;
}

int fct_child_main(int argc, char **argv, const struct fct_role *roles, size_t nroles)
{
    rep = fdopen(3, "w");
    if (!rep)
        return 99;
    for (size_t i = 0; i < nroles; i++)
        if (strcmp(argv[2], roles[i].name) == 0 && argc - 3 >= roles[i].nargs)
            return roles[i].fn(argv + 3);
    return 98;
}

void fct_say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(rep, fmt, ap);
    va_end(ap);
    fputc('\n', rep);
    fflush(rep);
}

char fct_order(void)
{
    char c = 0;
    return read(0, &c, 1) == 1 ? c : 0;
}

void fct_child_check(CUresult got, const char *what)
{
    if (got == CUDA_SUCCESS)
        return;
    fprintf(rep, "error %s = %d\n", what, (int)got);
    fflush(rep);
    _exit(10);
}

void fct_child_init(void)
{
    CUcontext c;
    CCK(cuInit(0));
    CCK(cuDevicePrimaryCtxRetain(&c, 0));
    CCK(cuCtxSetCurrent(c));
    CCK(fck_load(&fct_kernels));
}
