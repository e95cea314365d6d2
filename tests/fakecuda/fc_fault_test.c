/* fc_fault_test: the fault switch (FAKECUDA_FAIL) and call counting
 * (FAKECUDA_FAIL_COUNT) of the simulated driver.
 *
 * The switch reads its environment once, at load, so every case runs in a
 * helper process started with its own environment. Proves: a malformed or
 * hostile setting aborts the process with a message naming it; the Nth
 * call fails, and R calls from it (0: all), with the default or the named
 * error, and nothing else happens in a failed call; each exported name
 * counts its own calls (cuCtxPushCurrent and _v2), including calls through
 * cuGetProcAddress; every firing is logged on stderr and in
 * FAKECUDA_FAIL_LOG; the counts at exit are exact with threads racing; the
 * graph node and texture entry points are switched too.
 */
#include "fc_testutil.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helper processes ------------------------------------------------------ */

/* Nothing: a bad setting aborts before main. */
static int role_noop(char **args)
{
    (void)args;
    fct_say("ran");
    return 0;
}

/* Six allocations and three copies, each result reported; a failed call
 * must leave its output alone and charge nothing. */
static int role_calls(char **args)
{
    (void)args;
    fct_child_init();
    size_t free0, free1, total;
    CCK(cuMemGetInfo(&free0, &total));
    CUdeviceptr p[6];
    int r[6];
    for (int i = 0; i < 6; i++) {
        p[i] = 0x5a5a;
        r[i] = (int)cuMemAlloc(&p[i], 1 << 20);
    }
    CCK(cuMemGetInfo(&free1, &total));
    int good = 0, untouched = 0;
    for (int i = 0; i < 6; i++) {
        good += r[i] == CUDA_SUCCESS;
        untouched += r[i] != CUDA_SUCCESS && p[i] == 0x5a5a;
    }
    unsigned v = 7;
    int c[3];
    for (int i = 0; i < 3; i++)
        c[i] = (int)cuMemcpyHtoD(p[0], &v, sizeof v);
    fct_say("alloc %d %d %d %d %d %d untouched %d charged %d copy %d %d %d", r[0], r[1], r[2],
            r[3], r[4], r[5], untouched, (int)((free0 - free1) / (1 << 20)) == good, c[0], c[1],
            c[2]);
    for (int i = 0; i < 6; i++)
        if (r[i] == CUDA_SUCCESS)
            CCK(cuMemFree(p[i]));
    return 0;
}

/* The v1 and v2 names of one entry point, and a pointer from
 * cuGetProcAddress. */
static int role_names(char **args)
{
    (void)args;
    fct_child_init();
    CUcontext ctx, out;
    CCK(cuCtxGetCurrent(&ctx));
    int v2 = (int)cuCtxPushCurrent_v2(ctx);
    if (v2 == CUDA_SUCCESS)
        CCK(cuCtxPopCurrent_v2(&out));
    /* cuda.h maps the v1 names to _v2: a program built against an old
     * header, or a lookup by name, reaches them. */
    CUresult (*push_v1)(CUcontext) = (CUresult(*)(CUcontext))dlsym(RTLD_DEFAULT, "cuCtxPushCurrent");
    if (!push_v1)
        return 21;
    int v1 = (int)push_v1(ctx);
    if (v1 == CUDA_SUCCESS)
        CCK(cuCtxPopCurrent_v2(&out));
    CUresult (*get)(CUdevice *, int) = NULL;
    CUdriverProcAddressQueryResult st;
    CCK(cuGetProcAddress("cuDeviceGet", (void **)&get, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
    CUdevice d;
    int direct = (int)cuDeviceGet(&d, 0);
    int via = (int)get(&d, 0);
    fct_say("push v2 %d v1 %d get %d %d", v2, v1, direct, via);
    return 0;
}

/* Entry points added with the explicit graph API and texture objects:
 * two memcpy nodes, one texture object. */
static int role_graph(char **args)
{
    (void)args;
    fct_child_init();
    CUdeviceptr p;
    CCK(cuMemAlloc(&p, 1 << 20));
    CUgraph g;
    CCK(cuGraphCreate(&g, 0));
    CUDA_MEMCPY3D c = { .srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = p,
                        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = p + 512,
                        .WidthInBytes = 512, .Height = 1, .Depth = 1 };
    CUgraphNode n;
    int a = (int)cuGraphAddMemcpyNode(&n, g, NULL, 0, &c, NULL);
    int b = (int)cuGraphAddMemcpyNode(&n, g, NULL, 0, &c, NULL);
    size_t count = 0;
    CCK(cuGraphGetNodes(g, NULL, &count));
    CUDA_RESOURCE_DESC rd = { .resType = CU_RESOURCE_TYPE_LINEAR };
    rd.res.linear.devPtr = p;
    rd.res.linear.format = CU_AD_FORMAT_FLOAT;
    rd.res.linear.numChannels = 1;
    rd.res.linear.sizeInBytes = 1 << 20;
    CUDA_TEXTURE_DESC td = { .filterMode = CU_TR_FILTER_MODE_POINT };
    CUtexObject t;
    int x = (int)cuTexObjectCreate(&t, &rd, &td, NULL);
    fct_say("add %d %d nodes %zu tex %d", a, b, count, x);
    CCK(cuGraphDestroy(g));
    return 0;
}

#define THREADS 4
#define PER_THREAD 1000

static void *count_calls(void *arg)
{
    int *failed = arg, n;
    for (int i = 0; i < PER_THREAD; i++)
        *failed += cuDeviceGetCount(&n) != CUDA_SUCCESS;
    return NULL;
}

/* Threads racing through one entry point. */
static int role_threads(char **args)
{
    (void)args;
    CCK(cuInit(0));
    pthread_t t[THREADS];
    int failed[THREADS] = {0};
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, count_calls, &failed[i]) != 0)
            return 20;
    int sum = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        sum += failed[i];
    }
    fct_say("failed %d", sum);
    return 0;
}

static const struct fct_role roles[] = {
    {"noop", 0, role_noop},
    {"calls", 0, role_calls},
    {"names", 0, role_names},
    {"threads", 0, role_threads},
    {"graph", 0, role_graph},
};

/* ---- the parent's side ------------------------------------------------------- */

struct run {
    int status;                       /* fct_child_reap's */
    char line[256];                   /* its first report, "" if none */
    char err[8192];                   /* its stderr */
};

/* Runs role with env; collects its report, stderr and exit. Stderr is
 * drained to its end first (the child may log more than a pipe holds);
 * past the buffer it is read and dropped. */
static void run_child(const char *role, const char *const *env, struct run *out)
{
    int e[2];
    assert_int_equal(pipe(e), 0);
    struct fct_child c = fct_spawn((const char *[]){role, NULL}, env, e[1]);
    close(e[1]);
    size_t got = 0;
    char drop[4096];
    for (ssize_t k = 1; k > 0;) {
        bool room = got < sizeof out->err - 1;
        k = read(e[0], room ? out->err + got : drop,
                 room ? sizeof out->err - 1 - got : sizeof drop);
        if (k > 0 && room)
            got += (size_t)k;
    }
    out->err[got] = 0;
    close(e[0]);
    size_t n = 0;
    char ch;
    while (n + 1 < sizeof out->line && read(c.from, &ch, 1) == 1 && ch != '\n')
        out->line[n++] = ch;
    out->line[n] = 0;
    out->status = fct_child_reap(&c);
}

static char *slurp(const char *path)
{
    static char buf[8192];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static const char *tmp_path(const char *name)
{
    static char buf[4][512];
    static int next;
    const char *dir = getenv("TEST_TMP");
    char *b = buf[next++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", dir && *dir ? dir : "/tmp", name);
    return b;
}

/* Every one of these aborts the process at load, naming the variable. */
static void test_bad_settings_abort(void **state)
{
    (void)state;
    static char long_spec[5000], many[40 * 18];
    memset(long_spec, 'x', sizeof long_spec - 1);
    many[0] = 0;
    for (int i = 0; i < 33; i++)
        strcat(many, i ? ",cuMemFree_v2:1" : "cuMemFree_v2:1");
    static char long_env[5100], many_env[sizeof many + 20];
    snprintf(long_env, sizeof long_env, "FAKECUDA_FAIL=%s", long_spec);
    snprintf(many_env, sizeof many_env, "FAKECUDA_FAIL=%s", many);
    const char *bad[] = {
        "FAKECUDA_FAIL=",
        "FAKECUDA_FAIL=cuMemAlloc_v2",
        "FAKECUDA_FAIL=cuMemAlloc_v2:",
        "FAKECUDA_FAIL=cuMemAlloc_v2:0",
        "FAKECUDA_FAIL=cuMemAlloc_v2:-1",
        "FAKECUDA_FAIL=cuMemAlloc_v2:+1",
        "FAKECUDA_FAIL=cuMemAlloc_v2:1x",
        "FAKECUDA_FAIL=cuMemAlloc_v2: 1",
        "FAKECUDA_FAIL=cuMemAlloc_v2:99999999999999999999",
        "FAKECUDA_FAIL=cuMemAlloc_v2:1000000000000001",
        "FAKECUDA_FAIL=cuMemAlloc_v2:1:18446744073709551617",
        "FAKECUDA_FAIL=cuMemAlloc_v2:1:",
        "FAKECUDA_FAIL=cuMemAlloc_v2:1:1:",
        "FAKECUDA_FAIL=cuMemAlloc_v2:1:1:2:3",
        "FAKECUDA_FAIL=cuMemAlloc_v2:1:1:CUDA_SUCCESS",
        "FAKECUDA_FAIL=cuMemAlloc_v2:1:1:0",
        "FAKECUDA_FAIL=cuMemAlloc_v2:1:1:123456",
        "FAKECUDA_FAIL=cuMemAlloc_v2:1:1:CUDA_ERROR_NOPE",
        "FAKECUDA_FAIL=cuMemAlloc_v2:1:1:cuda_error_unknown",
        "FAKECUDA_FAIL=cuLaunchKernel:1",          /* exported, not in the list */
        "FAKECUDA_FAIL=cuMemAlloc:1",              /* the v1 name is another symbol */
        "FAKECUDA_FAIL=cuNoSuchThing:1",
        "FAKECUDA_FAIL= cuMemAlloc_v2:1",
        "FAKECUDA_FAIL=cuMemAlloc_v2:1,",
        "FAKECUDA_FAIL=,cuMemAlloc_v2:1",
        "FAKECUDA_FAIL=cuMemAlloc_v2:1,,cuMemFree_v2:1",
        long_env,
        many_env,
        "FAKECUDA_FAIL_LOG=",
        "FAKECUDA_FAIL_COUNT=",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct run r;
        run_child("noop", (const char *[]){bad[i], NULL}, &r);
        const char *var = strncmp(bad[i], "FAKECUDA_FAIL_LOG", 17) == 0     ? "FAKECUDA_FAIL_LOG"
                          : strncmp(bad[i], "FAKECUDA_FAIL_COUNT", 19) == 0 ? "FAKECUDA_FAIL_COUNT"
                                                                            : "FAKECUDA_FAIL:";
        if (r.status != 128 + SIGABRT || !strstr(r.err, var) || !strstr(r.err, "refusing"))
            fail_msg("%.80s: status %d, stderr '%s'", bad[i], r.status, r.err);
        assert_string_equal(r.line, "");
    }
    /* The limits themselves are accepted. */
    struct run r;
    run_child("noop", (const char *[]){"FAKECUDA_FAIL=cuMemAlloc_v2:1000000000000000:0:999", NULL},
              &r);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.line, "ran");
}

static void test_countdown_repeat_and_log(void **state)
{
    (void)state;
    const char *log = tmp_path("fail.log"), *count = tmp_path("count");
    unlink(log);
    unlink(count);
    char log_env[600], count_env[600];
    snprintf(log_env, sizeof log_env, "FAKECUDA_FAIL_LOG=%s", log);
    snprintf(count_env, sizeof count_env, "FAKECUDA_FAIL_COUNT=%s", count);
    struct run r;
    run_child("calls",
              (const char *[]){"FAKECUDA_FAIL=cuMemAlloc_v2:3:2,cuMemcpyHtoD_v2:2:0:1", log_env,
                               count_env, NULL},
              &r);
    assert_int_equal(r.status, 0);
    /* Calls 3 and 4 fail with the allocating default; nothing was written
     * or charged for them. Copies fail from the 2nd on with error 1. */
    assert_string_equal(r.line, "alloc 0 0 2 2 0 0 untouched 2 charged 1 copy 0 1 1");
    const char *want[] = {
        "fakecuda: FAKECUDA_FAIL: cuMemAlloc_v2 call 3 failed with CUDA_ERROR_OUT_OF_MEMORY\n",
        "fakecuda: FAKECUDA_FAIL: cuMemAlloc_v2 call 4 failed with CUDA_ERROR_OUT_OF_MEMORY\n",
        "fakecuda: FAKECUDA_FAIL: cuMemcpyHtoD_v2 call 2 failed with CUDA_ERROR_INVALID_VALUE\n",
        "fakecuda: FAKECUDA_FAIL: cuMemcpyHtoD_v2 call 3 failed with CUDA_ERROR_INVALID_VALUE\n",
    };
    char expect[1024] = "";
    for (size_t i = 0; i < 4; i++) {
        strcat(expect, want[i]);
        assert_non_null(strstr(r.err, want[i]));
    }
    char *got = slurp(log);
    assert_non_null(got);
    assert_string_equal(got, expect);
    got = slurp(count);
    assert_non_null(got);
    assert_non_null(strstr(got, "\ncuMemAlloc_v2 6\n"));
    assert_non_null(strstr(got, "\ncuMemcpyHtoD_v2 3\n"));
    assert_non_null(strstr(got, "cuInit 1\n"));
    assert_null(strstr(got, "cuMemcpyDtoH_v2")); /* never called: not listed */
}

static void test_each_name_counts_its_own_calls(void **state)
{
    (void)state;
    struct run r;
    /* The first call of the v1 name and the 2nd of cuDeviceGet (made
     * through the cuGetProcAddress pointer after one direct call; the
     * child's setup makes none). */
    run_child("names",
              (const char *[]){"FAKECUDA_FAIL=cuCtxPushCurrent:1,cuDeviceGet:2:1:CUDA_ERROR_UNKNOWN",
                               NULL},
              &r);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.line, "push v2 0 v1 999 get 0 999");
    assert_non_null(strstr(r.err, "cuCtxPushCurrent call 1 failed with CUDA_ERROR_UNKNOWN"));
    run_child("names", (const char *[]){"FAKECUDA_FAIL=cuCtxPushCurrent_v2:1", NULL}, &r);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.line, "push v2 999 v1 0 get 0 0");
}

/* The graph node and texture entry points have the switch too; creating
 * a node allocates (OUT_OF_MEMORY by default); a failed one adds none. */
static void test_graph_entry_points(void **state)
{
    (void)state;
    struct run r;
    run_child("graph",
              (const char *[]){"FAKECUDA_FAIL=cuGraphAddMemcpyNode:1,cuTexObjectCreate:1:1:"
                               "CUDA_ERROR_UNKNOWN",
                               NULL},
              &r);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.line, "add 2 0 nodes 1 tex 999");
    run_child("graph", (const char *[]){"FAKECUDA_FAIL=cuGraphAddMemcpyNode:2", NULL}, &r);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.line, "add 0 2 nodes 1 tex 0");
}

static void test_threads_count_exactly(void **state)
{
    (void)state;
    const char *count = tmp_path("count-threads");
    unlink(count);
    char count_env[600];
    snprintf(count_env, sizeof count_env, "FAKECUDA_FAIL_COUNT=%s", count);
    struct run r;
    run_child("threads",
              (const char *[]){"FAKECUDA_FAIL=cuDeviceGetCount:1001:50", count_env, NULL}, &r);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.line, "failed 50");
    char *got = slurp(count);
    assert_non_null(got);
    assert_non_null(strstr(got, "cuDeviceGetCount 4000\n"));
    /* Repeat 0: every call from the countdown on. */
    run_child("threads", (const char *[]){"FAKECUDA_FAIL=cuDeviceGetCount:3901:0", NULL}, &r);
    assert_int_equal(r.status, 0);
    assert_string_equal(r.line, "failed 100");
}

int main(int argc, char **argv)
{
    if (fct_is_child(argc, argv))
        return fct_child_main(argc, argv, roles, sizeof roles / sizeof roles[0]);
    setenv("FAKECUDA_MEM_MB", "256", 1);
    unsetenv("FAKECUDA_FAIL");
    unsetenv("FAKECUDA_FAIL_LOG");
    unsetenv("FAKECUDA_FAIL_COUNT");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_settings_abort),
        cmocka_unit_test(test_countdown_repeat_and_log),
        cmocka_unit_test(test_each_name_counts_its_own_calls),
        cmocka_unit_test(test_graph_entry_points),
        cmocka_unit_test(test_threads_count_exactly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
