/* hook_idle.c: "idle" means nothing submitted *and* nothing in flight.
 *
 * With a 100 ms idle period: a holder blocked in a synchronize on a 600 ms
 * kernel is not reported idle while the kernel runs; once the kernel is done
 * and nothing new comes, USAGE IDLE arrives no earlier than 100 ms after the
 * kernel ended and not much later; new work clears it. So also when more
 * work was queued behind the kernel while the hook waited for it. A holder that
 * submits nothing for a second because it is allocating (device memory is
 * created at 0.25 GB/s here: 64 MiB takes ~270 ms) is not idle either: on
 * the H100 a job allocating its tensors right after its grant was revoked
 * as idle, then drained seconds of work it had queued meanwhile. Nor is
 * one inside a long synchronous copy (0.25 GB/s here). Nor one whose
 * thread holds this GPU's lease and waits, in a copy to another GPU
 * (cuMemcpyPeer), for that GPU's: it asks for both at once, and keeps the
 * one it has (two GPUs, FAKECUDA_DEVICES=2).
 */
#include "hooktest.h"
#include "mock_sched.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct mock_sched *mock;

/* A fresh context holding GPU 0's lease, and a 4 KiB buffer on it. */
static CUdeviceptr holding(void)
{
    ht_context();
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 4096));
    CK(fck_fill32(0, p, 1024, 1)); /* takes the lease */
    CK(cuCtxSynchronize());
    return p;
}

static void busy_holder_is_not_idle(void **state)
{
    (void)state;
    CUdeviceptr p = holding();
    struct cs_msg m;
    while (mock_wait(mock, CS_MSG_USAGE, 0, NULL, NULL)) /* forget what came before */
        ;
    const uint64_t kernel_ns = 600000000ull;
    uint64_t t0 = ht_now_ns();
    CK(fck_sleep(0, kernel_ns));
    CK(cuCtxSynchronize());
    uint64_t t_end = ht_now_ns();
    /* While the kernel ran, no USAGE said idle: none came before the
     * kernel could have ended (t0 + 600 ms). One that came after may be
     * here already, if this thread woke from the synchronize an idle
     * period late (a loaded machine, under TSan): it is the report the
     * checks below read, not a failure. */
    bool idle = false;
    uint64_t at = 0;
    while (!idle && mock_wait(mock, CS_MSG_USAGE, 0, &m, &at)) {
        idle = m.u.usage.flags & CS_USAGE_IDLE;
        if (idle && at < t0 + kernel_ns)
            fail_msg("reported idle %.0f ms into a 600 ms kernel", (double)(at - t0) / 1e6);
    }
    /* After it, idle comes one idle period after the GPU finished. */
    while (!idle && mock_wait(mock, CS_MSG_USAGE, 2000, &m, &at))
        idle = m.u.usage.flags & CS_USAGE_IDLE;
    assert_true(idle);
    double after_ms = (double)(int64_t)(at - t_end) / 1e6, since_ms = (double)(at - t0) / 1e6;
    print_message("idle reported %.1f ms after the kernel ended, %.1f ms after its launch "
                  "(idle period 100 ms)\n", after_ms, since_ms);
    /* The lower bound counts from the launch: the kernel cannot end before
     * t0 + 600 ms, while t_end is stamped when this thread wakes from the
     * synchronize, which under TSan on a loaded machine came 5.5 ms after
     * the hook saw the GPU finish (idle "94.5 ms after"). 5 ms of slack for
     * the hook's own clock. */
    assert_true(since_ms >= 695.0);
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

/* Work queued while the hook's idle probe waits for a kernel: the probe
 * was asked about the work before it, and returns as the GPU finishes
 * both. The GPU was busy until then, so idle comes an idle period later,
 * not at the next probe (which finds the GPU done at once: before
 * 2026-12-02 that confirmed idle a tick after the last kernel ended). */
static void work_queued_during_probe(void **state)
{
    (void)state;
    CUdeviceptr p = holding();
    struct cs_msg m;
    while (mock_wait(mock, CS_MSG_USAGE, 0, NULL, NULL))
        ;
    const uint64_t kernel_ns = 600000000ull;
    uint64_t t0 = ht_now_ns();
    CK(fck_sleep(0, kernel_ns));
    ht_sleep_ms(300); /* an idle period without a submission: the probe waits */
    CK(fck_fill32(0, p, 1024, 3)); /* behind the kernel: ends after t0 + 600 ms */
    CK(cuCtxSynchronize());
    uint64_t t_end = ht_now_ns();
    bool idle = false;
    uint64_t at = 0;
    while (!idle && mock_wait(mock, CS_MSG_USAGE, 2000, &m, &at))
        idle = m.u.usage.flags & CS_USAGE_IDLE;
    assert_true(idle);
    double since_ms = (double)(at - t0) / 1e6;
    double after_ms = (double)(int64_t)(at - t_end) / 1e6;
    print_message("idle reported %.1f ms after the launch of a 600 ms kernel with work queued "
                  "behind it, %.1f ms after the synchronize returned (idle period 100 ms)\n",
                  since_ms, after_ms);
    /* The fill cannot end before t0 + 600 ms; 5 ms of slack as above. */
    if (since_ms < 695.0)
        fail_msg("idle %.1f ms after the launch: less than an idle period after the GPU's "
                 "last work", since_ms);
    assert_true(after_ms <= 250.0);
    CK(cuMemFree(p));
}

static void allocating_holder_is_not_idle(void **state)
{
    (void)state;
    ht_context();
    CUdeviceptr p[4];
    CK(cuMemAlloc(&p[0], 4096));
    CK(fck_fill32(0, p[0], 1024, 1)); /* takes the lease */
    CK(cuCtxSynchronize());
    struct cs_msg m;
    while (mock_wait(mock, CS_MSG_USAGE, 0, NULL, NULL))
        ;
    uint64_t t0 = ht_now_ns();
    for (int i = 1; i < 4; i++)
        CK(cuMemAlloc(&p[i], 64u << 20));
    uint64_t t_end = ht_now_ns();
    print_message("three 64 MiB allocations took %.0f ms (idle period 100 ms)\n",
                  (double)(t_end - t0) / 1e6);
    assert_true(t_end - t0 >= 300000000ull); /* the premise: longer than the period */
    uint64_t at;
    while (mock_wait(mock, CS_MSG_USAGE, 0, &m, &at))
        if ((m.u.usage.flags & CS_USAGE_IDLE) && at < t_end)
            fail_msg("reported idle %.0f ms into allocations lasting %.0f ms",
                     (double)(at - t0) / 1e6, (double)(t_end - t0) / 1e6);
    /* Nothing more: idle comes one period after the last allocation. */
    bool idle = false;
    while (!idle && mock_wait(mock, CS_MSG_USAGE, 2000, &m, &at))
        idle = m.u.usage.flags & CS_USAGE_IDLE;
    assert_true(idle);
    assert_true(at - t_end >= 95000000ull);
    for (int i = 0; i < 4; i++)
        CK(cuMemFree(p[i]));
}

/* A synchronous copy of 96 MiB at 0.25 GB/s (~400 ms) submits nothing new
 * while it runs, and its holder is not idle meanwhile. */
static void copying_holder_is_not_idle(void **state)
{
    (void)state;
    ht_context();
    enum { BYTES = 96u << 20 };
    CUdeviceptr p;
    CK(cuMemAlloc(&p, BYTES));
    /* The host buffer is filled before the lease is taken: filling 96 MiB
     * after it (over 100 ms under ASan) left the holder idle for an idle
     * period before the copy, and that (true) IDLE arrived just as the
     * copy began. */
    void *h = malloc(BYTES);
    assert_non_null(h);
    memset(h, 7, BYTES);
    CK(fck_fill32(0, p, 1024, 1)); /* takes the lease */
    CK(cuCtxSynchronize());
    struct cs_msg m;
    while (mock_wait(mock, CS_MSG_USAGE, 0, NULL, NULL))
        ;
    uint64_t t0 = ht_now_ns();
    CK(cuMemcpyHtoD(p, h, BYTES));
    uint64_t t_end = ht_now_ns();
    print_message("a %u MiB synchronous copy took %.0f ms (idle period 100 ms)\n", BYTES >> 20,
                  (double)(t_end - t0) / 1e6);
    assert_true(t_end - t0 >= 300000000ull); /* the premise */
    uint64_t at;
    while (mock_wait(mock, CS_MSG_USAGE, 0, &m, &at))
        if ((m.u.usage.flags & CS_USAGE_IDLE) && at < t_end)
            fail_msg("reported idle %.0f ms into a copy lasting %.0f ms", (double)(at - t0) / 1e6,
                     (double)(t_end - t0) / 1e6);
    free(h);
    CK(cuMemFree(p));
}

struct peer_copy {
    CUdeviceptr dst, src;
    CUcontext dctx, sctx;
    size_t bytes;
    CUresult r;
};

static void *run_peer_copy(void *arg)
{
    struct peer_copy *c = arg;
    c->r = cuMemcpyPeer(c->dst, c->dctx, c->src, c->sctx, c->bytes);
    return NULL;
}

/* Every ACQUIRE within timeout_ms, by slot (nothing is granted meanwhile). */
static void acquires(bool *asked, int timeout_ms)
{
    struct cs_msg m;
    while (!(asked[0] && asked[1]) && mock_wait(mock, CS_MSG_ACQUIRE, timeout_ms, &m, NULL))
        if (m.u.acquire.slot < 2)
            asked[m.u.acquire.slot] = true;
}

/* The copy waits for both leases (hooks_peer.c). Taken back as idle while
 * its thread waited for the other, the lease it held was gone when the
 * other came: two jobs copying between two busy GPUs in opposite orders
 * took turns holding one GPU each (tests/e2e/e2e_multigpu.sh). */
static void peer_waiter_is_not_idle(void **state)
{
    (void)state;
    enum { N = 1024 };
    ht_context();
    struct peer_copy c = {.bytes = N * 4};
    CK(cuCtxGetCurrent(&c.sctx));
    CK(cuMemAlloc(&c.src, c.bytes));
    CK(fck_fill32(0, c.src, N, 0x5eed)); /* takes GPU 0's lease */
    CK(cuDevicePrimaryCtxRetain(&c.dctx, 1));
    CK(cuCtxSetCurrent(c.dctx));
    CK(cuMemAlloc(&c.dst, c.bytes));
    CK(cuMemsetD32(c.dst, 0, N)); /* and GPU 1's */
    CK(cuCtxSynchronize());
    mock_set_auto_grant(mock, false);
    struct cs_msg_release rel;
    assert_true(mock_revoke_wait(mock, 0, 0, &rel));
    assert_true(mock_revoke_wait(mock, 1, 0, &rel));
    struct cs_msg m;
    while (mock_wait(mock, CS_MSG_ACQUIRE, 0, NULL, NULL) || mock_wait(mock, CS_MSG_USAGE, 0, NULL, NULL))
        ;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, run_peer_copy, &c), 0);
    /* Both leases asked for before either is granted. */
    bool asked[2] = {false, false};
    acquires(asked, 2000);
    if (!asked[0] || !asked[1])
        fail_msg("the copy asked for GPU 0: %d, GPU 1: %d (both wanted at once)", asked[0],
                 asked[1]);
    /* GPU 0 granted, GPU 1 not: the copy holds GPU 0 without using it for
     * four idle periods, and GPU 0 is not reported idle. */
    assert_true(mock_grant(mock, 0, 901));
    ht_sleep_ms(400);
    uint64_t at;
    while (mock_wait(mock, CS_MSG_USAGE, 0, &m, &at))
        if (m.u.usage.slot == 0 && (m.u.usage.flags & CS_USAGE_IDLE))
            fail_msg("GPU 0 reported idle while the copy waited for GPU 1's lease");
    assert_true(mock_grant(mock, 1, 902));
    assert_int_equal(pthread_join(th, NULL), 0);
    CK(c.r);
    uint32_t got[N];
    CK(cuMemcpyDtoH(got, c.dst, c.bytes));
    for (int i = 0; i < N; i++)
        assert_int_equal(got[i], 0x5eed);
    mock_set_auto_grant(mock, true);
    ht_context();
}

/* The voluntary context switches of this process's cushare-io thread
 * (client.c), which wakes once per tick (report.c); -1 if not found. */
static long io_wakeups(void)
{
    DIR *dir = opendir("/proc/self/task");
    long n = -1;
    struct dirent *e;
    while (dir && n < 0 && (e = readdir(dir)) != NULL) {
        char path[300], line[128] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        bool io = fgets(line, sizeof line, f) && strcmp(line, "cushare-io\n") == 0;
        fclose(f);
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        if (!io || !(f = fopen(path, "r")))
            continue;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "voluntary_ctxt_switches: %ld", &n) == 1)
                break;
        fclose(f);
    }
    if (dir)
        closedir(dir);
    return n;
}

/* A process that neither holds nor waits for a lease ticks every 30 ms,
 * not every tenth of its idle period (10 ms here; 5 ms at the default
 * 50): a job waiting in a notebook between cells would otherwise wake 200
 * times a second. Counted, not timed: a loaded machine only wakes it less.
 * 1 s at 30 ms is ~33 wakeups, at 10 ms ~100. */
static void process_without_lease_ticks_slowly(void **state)
{
    (void)state;
    CUdeviceptr p = holding();
    struct cs_msg_release rel;
    assert_true(mock_revoke_wait(mock, 0, 0, &rel));
    ht_sleep_ms(100);
    long before = io_wakeups();
    assert_true(before >= 0);
    ht_sleep_ms(1000);
    long woke = io_wakeups() - before;
    print_message("cushare-io woke %ld times in 1 s without a lease\n", woke);
    assert_true(woke < 60);
    CK(cuMemFree(p));
}

int main(int argc, char **argv)
{
    static char env_sock[4200];
    snprintf(env_sock, sizeof env_sock, "CUSHARE_SOCKET=%s", ht_path("idle.sock"));
    const char *const env[] = {env_sock, "FAKECUDA_MEMCREATE_GBPS=0.25", "FAKECUDA_PCIE_GBPS=0.25",
                               "FAKECUDA_DEVICES=2", NULL};
    hooktest_preload(argc, argv, env);
    mock = mock_start(ht_path("idle.sock"), 100);
    assert_non_null(mock);
    mock_set_auto_grant(mock, true);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(process_without_lease_ticks_slowly),
        cmocka_unit_test(busy_holder_is_not_idle),
        cmocka_unit_test(work_queued_during_probe),
        cmocka_unit_test(allocating_holder_is_not_idle),
        cmocka_unit_test(copying_holder_is_not_idle),
        cmocka_unit_test(peer_waiter_is_not_idle),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mock_stop(mock);
    return rc;
}
