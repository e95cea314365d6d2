/* hook_gate_stress.c: no GPU work ever runs outside the lease.
 *
 * Four application threads submit kernels and copies as fast as they can
 * while a scripted scheduler grants and revokes the lease every few
 * milliseconds, swapping the job's memory out on every other revoke. The
 * simulated driver traces every kernel's execution interval; afterwards each
 * one must lie inside a lease window [time GRANT was sent, time RELEASE
 * arrived], and the data the threads added must all be there. Under
 * ThreadSanitizer (the tsan tree) this is also the hook's race detector.
 */
#include "hooktest.h"
#include "mock_sched.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 4
#define ROUNDS 40
#define N (256 * 1024) /* uint32 per thread buffer */

static struct mock_sched *mock;
static _Atomic int stop;
static CUcontext ctx;
static CUdeviceptr bufs[THREADS];
static _Atomic unsigned long adds[THREADS];

struct window {
    uint64_t from, to;
};
static struct window win[ROUNDS + 1];

static void *app_thread(void *arg)
{
    int id = (int)(intptr_t)arg;
    CK(cuCtxSetCurrent(ctx)); /* the kernel set was chosen by the main thread */
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    uint32_t host[64] = {0};
    for (unsigned i = 0; !atomic_load(&stop); i++) {
        CK(fck_sleep(s, 20000));
        CK(fck_add32(s, bufs[id], N, 1));
        atomic_fetch_add(&adds[id], 1);
        CK(cuMemcpyHtoDAsync(bufs[id] + 4 * N, host, sizeof host, s));
        if (i % 8 == 7)
            CK(cuStreamSynchronize(s));
    }
    CK(cuStreamSynchronize(s));
    CK(cuStreamDestroy(s));
    return NULL;
}

/* The scheduler's side, on its own thread (cmocka asserts belong to the
 * main thread, so failures are reported through sched_error). Grants and
 * revokes ROUNDS times, then leaves a last, open-ended lease. */
static const char *sched_error;
static int nwin;

static bool expect(bool ok, const char *what)
{
    if (!ok && !sched_error)
        sched_error = what;
    return ok;
}

static void *schedule(void *arg)
{
    (void)arg;
    struct cs_msg m;
    for (int i = 0; i < ROUNDS; i++) {
        if (!expect(mock_wait(mock, CS_MSG_ACQUIRE, 10000, NULL, NULL), "no ACQUIRE"))
            break;
        win[i].from = ht_now_ns();
        mock_grant(mock, 0, (uint64_t)i + 1);
        ht_sleep_ms(2 + (unsigned)(i % 5) * 3);
        mock_revoke(mock, 0, (uint64_t)i + 1, i % 2 ? CS_ALL_BYTES : 0);
        if (!expect(mock_wait(mock, CS_MSG_RELEASE, 10000, &m, &win[i].to), "no RELEASE") ||
            !expect(m.u.release.lease_id == (uint64_t)i + 1, "RELEASE of the wrong lease"))
            break;
        nwin = i + 1;
    }
    atomic_store(&stop, 1);
    if (expect(mock_wait(mock, CS_MSG_ACQUIRE, 10000, NULL, NULL), "no final ACQUIRE")) {
        win[nwin].from = ht_now_ns();
        win[nwin].to = UINT64_MAX;
        mock_grant(mock, 0, ROUNDS + 1);
        nwin++;
    }
    return NULL;
}

static void no_kernel_outside_a_lease(void **state)
{
    (void)state;
    ht_context();
    CK(cuCtxGetCurrent(&ctx));
    pthread_t sched;
    pthread_create(&sched, NULL, schedule, NULL);
    for (int t = 0; t < THREADS; t++) {
        CK(cuMemAlloc(&bufs[t], 4 * N + 256));
        CK(cuMemsetD32(bufs[t], 0, N));
    }
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, app_thread, (void *)(intptr_t)t);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    pthread_join(sched, NULL);
    if (sched_error)
        fail_msg("scheduler side: %s", sched_error);
    CK(cuCtxSynchronize());

    /* Every thread's additions are all there, across all the swaps. */
    for (int t = 0; t < THREADS; t++)
        assert_int_equal(ht_device_sum(bufs[t], N), (uint64_t)atomic_load(&adds[t]) * N);

    /* Only the simulated driver traces kernels; on a real GPU the data and
     * the swap counts above are what this test can check. */
    char dev_name[128] = "";
    CK(cuDeviceGetName(dev_name, sizeof dev_name, 0));
    if (strcmp(dev_name, "cushare simulated GPU") != 0) {
        print_message("real GPU (%s): kernel trace check skipped\n", dev_name);
        assert_true(ht_stats(0).swap_outs >= ROUNDS / 2);
        return;
    }
    FILE *f = fopen(ht_path("trace.txt"), "r");
    assert_non_null(f);
    char line[512];
    int kernels = 0, outside = 0;
    while (fgets(line, sizeof line, f)) {
        int dev, pid;
        char ctxs[64], name[64];
        uint64_t t0, t1;
        if (sscanf(line, "%d %d %63s %63s %" SCNu64 " %" SCNu64, &dev, &pid, ctxs, name, &t0,
                   &t1) != 6 || pid != getpid())
            continue;
        kernels++;
        bool inside = false;
        for (int w = 0; w < nwin && !inside; w++)
            inside = t0 >= win[w].from && t1 <= win[w].to;
        if (!inside && outside++ < 5)
            print_error("kernel %s ran [%" PRIu64 ", %" PRIu64 "] outside every lease\n", name,
                        t0, t1);
    }
    fclose(f);
    print_message("%d kernels traced, %d windows\n", kernels, nwin);
    assert_true(kernels > 200);
    assert_int_equal(outside, 0);
    assert_true(ht_stats(0).swap_outs >= ROUNDS / 2);
}

int main(int argc, char **argv)
{
    static char env_sock[4200], env_trace[4200];
    snprintf(env_sock, sizeof env_sock, "CUSHARE_SOCKET=%s", ht_path("stress.sock"));
    snprintf(env_trace, sizeof env_trace, "FAKECUDA_TRACE=%s", ht_path("trace.txt"));
    const char *const env[] = {env_sock, env_trace, NULL};
    if (!getenv("FAKECUDA_TRACE"))
        unlink(ht_path("trace.txt"));
    hooktest_preload(argc, argv, env);
    mock = mock_start(ht_path("stress.sock"), 60000);
    assert_non_null(mock);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_kernel_outside_a_lease),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mock_stop(mock);
    return rc;
}
