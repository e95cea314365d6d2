/* hooktest.c: see hooktest.h. */
#include "hooktest.h"
#include "mock_sched.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct fck ht_kernels;

void hooktest_preload(int argc, char **argv, const char *const *extra_env)
{
    (void)argc;
    if (dlsym(RTLD_DEFAULT, "cushare_get_stats"))
        return;
    const char *build = getenv("CUSHARE_BUILD");
    char hook[4096];
    snprintf(hook, sizeof hook, "%s/lib/libcushare.so", build ? build : "build");
    const char *san = getenv("SAN_RUNTIME");
    char pre[8192];
    snprintf(pre, sizeof pre, "%s%s%s", san && *san ? san : "", san && *san ? " " : "", hook);
    setenv("LD_PRELOAD", pre, 1);
    if (!getenv("CUSHARE_SOCKET"))
        setenv("CUSHARE_SOCKET", ht_path("no-daemon.sock"), 1);
    /* The host reserve's default is a tenth of the RAM (at least 4 GiB),
     * and kept backing is dropped below twice that available: a test that
     * pins would pass or fail with what else the machine holds at that
     * moment (a model checker beside the suite took 7 GiB, and hook_pinkeep
     * found its kept backing gone). The tests of the guard set their own. */
    if (!getenv("CUSHARE_HOST_RESERVE"))
        setenv("CUSHARE_HOST_RESERVE", "64M", 1);
    /* Allocations larger than 64 MiB are made of parts (seg.c), so that
     * the tests' allocations of 100 MiB and more run through them on a
     * simulated GPU of 1 GiB (the default, 2 GiB, is larger than it). */
    if (!getenv("CUSHARE_SEG_PART"))
        setenv("CUSHARE_SEG_PART", "64M", 1);
    for (const char *const *e = extra_env; e && *e; e++)
        putenv((char *)*e);
    execv("/proc/self/exe", argv);
    perror("hooktest: re-exec under the hook");
    exit(2);
}

void ht_check(CUresult got, CUresult want, const char *what, const char *file, int line)
{
    if (got == want)
        return;
    const char *g = NULL, *w = NULL;
    cuGetErrorName(got, &g);
    cuGetErrorName(want, &w);
    fail_msg("%s:%d: %s returned %s (%d), expected %s (%d)", file, line, what, g ? g : "?",
             (int)got, w ? w : "?", (int)want);
}

/* The client API is looked up at run time, as a program that must also run
 * without cushare would do (see include/cushare.h). */
struct cushare_stats ht_stats(int device)
{
    static int (*get)(int, struct cushare_stats *);
    if (!get)
        *(void **)&get = dlsym(RTLD_DEFAULT, "cushare_get_stats");
    assert_non_null(get);
    struct cushare_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    assert_int_equal(get(device, &s), 0);
    return s;
}

unsigned long long ht_submissions(void)
{
    return ht_stats(0).submissions;
}

void ht_context(void)
{
    static CUcontext ctx;
    if (!ctx) {
        CK(cuInit(0));
        CK(cuDevicePrimaryCtxRetain(&ctx, 0));
    }
    CK(cuCtxSetCurrent(ctx));
    if (!ht_kernels.mod)
        CK(fck_load(&ht_kernels));
    fck_use(&ht_kernels);
}

CUmemAllocationProp ht_dev_prop(void)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = 0;
    return p;
}

uint64_t ht_device_sum(CUdeviceptr p, uint64_t n)
{
    CUdeviceptr out;
    uint64_t zero = 0, sum = 0;
    CK(cuMemAlloc(&out, sizeof(uint64_t)));
    CK(cuMemcpyHtoD(out, &zero, sizeof zero));
    CK(fck_sum32(0, p, n, out));
    CK(cuMemcpyDtoH(&sum, out, sizeof sum));
    CK(cuMemFree(out));
    return sum;
}

uint64_t ht_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void ht_sleep_ms(unsigned ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

#if defined(__x86_64__)
#define HT_DLSYM_OLD "GLIBC_2.2.5"
#else
#define HT_DLSYM_OLD "GLIBC_2.17"
#endif

/* The hook exports dlsym and answers a driver name with its wrapper, even
 * on the libcuda handle (hooks_dlsym.c); glibc's own dlsym, found by
 * version on the libc (or, before glibc 2.34, libdl) handle, does not. */
void *ht_unhooked(const char *name)
{
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void *libdl = dlopen("libdl.so.2", RTLD_NOW | RTLD_NOLOAD);
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    assert_non_null(cuda);
    void *(*glibc_dlsym)(void *, const char *) = NULL;
    if (libc)
        *(void **)&glibc_dlsym = dlvsym(libc, "dlsym", "GLIBC_2.34");
    if (!glibc_dlsym && libdl)
        *(void **)&glibc_dlsym = dlvsym(libdl, "dlsym", HT_DLSYM_OLD);
    assert_non_null(glibc_dlsym);
    void *p = glibc_dlsym(cuda, name);
    assert_non_null(p);
    assert_true(p != dlsym(RTLD_DEFAULT, name)); /* that one is the hook's */
    void *handles[] = {libc, libdl, cuda}; /* each RTLD_NOLOAD counted a reference */
    for (size_t i = 0; i < sizeof handles / sizeof handles[0]; i++)
        if (handles[i])
            dlclose(handles[i]);
    return p;
}

const char *ht_path(const char *name)
{
    static char buf[8][4096];
    static int next;
    const char *dir = getenv("TEST_TMP");
    char *b = buf[next++ % 8];
    snprintf(b, sizeof buf[0], "%s/%s", dir && *dir ? dir : "/tmp", name);
    return b;
}

/* (declared in mock_sched.h: defined here, where cmocka and the stats are) */
struct cs_msg_release mock_take_back(struct mock_sched *m, uint64_t evict)
{
    struct cs_msg_release r;
    assert_true(mock_revoke_wait(m, 0, evict, &r));
    assert_int_equal(ht_stats(0).state, CUSHARE_LEASE_IDLE);
    return r;
}

/* (declared in mock_sched.h) */
struct mock_sched *ht_mock_preload(int argc, char **argv)
{
    static char env_sock[4200];
    snprintf(env_sock, sizeof env_sock, "CUSHARE_SOCKET=%s", ht_path("mock.sock"));
    const char *const env[] = {env_sock, NULL};
    hooktest_preload(argc, argv, env);
    struct mock_sched *m = mock_start(ht_path("mock.sock"), 60000);
    assert_non_null(m);
    mock_set_auto_grant(m, true);
    return m;
}

int ht_count_log_lines(void (*fn)(void), const char *needle)
{
    int pipefd[2];
    assert_int_equal(pipe(pipefd), 0);
    int saved = dup(2);
    dup2(pipefd[1], 2);
    fn();
    dup2(saved, 2);
    close(saved);
    close(pipefd[1]);
    char buf[8192];
    ssize_t n = read(pipefd[0], buf, sizeof buf - 1);
    close(pipefd[0]);
    buf[n > 0 ? n : 0] = '\0';
    fputs(buf, stderr); /* still in the test's log */
    int count = 0;
    for (char *p = buf; (p = strstr(p, needle)); p++)
        count++;
    return count;
}
