/* hook_peer.c: one process on two GPUs, with and without peer access,
 * driven by a scripted scheduler (mock_sched) on two simulated devices that
 * can access each other (FAKECUDA_DEVICES=2, FAKECUDA_PEER=1).
 *
 * Proves: without peer access the two GPUs' leases are independent (work
 * on GPU 0 runs while GPU 1's lease is away); once GPU 0's context enabled
 * peer access to GPU 1, work submitted on GPU 0 waits for GPU 1's lease
 * too, so that a kernel on GPU 0 writing GPU 1's memory finds it placed on
 * GPU 1, not the placeholder that stands at its addresses while GPU 1's
 * lease is away (found on two H200s: a cuda:0 -> cuda:1 copy into memory
 * allocated before GPU 1's first grant was lost); and a revoke of GPU 1
 * waits for GPU 0's queued work that may reach it. The last two fail
 * without the coupling (gate.c) and the drain of reaching devices
 * (device.c) respectively.
 */
#include "hooktest.h"
#include "mock_sched.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

static struct mock_sched *mock;
static CUcontext ctx[2];
static struct fck kern[2];

#define N_WORDS ((16 * MiB) / 4)

static void use(int dev)
{
    CK(cuCtxSetCurrent(ctx[dev]));
    fck_use(&kern[dev]);
}

static int setup(void **state)
{
    (void)state;
    CK(cuInit(0));
    for (int d = 0; d < 2; d++) {
        CK(cuDevicePrimaryCtxRetain(&ctx[d], d));
        CK(cuCtxSetCurrent(ctx[d]));
        CK(fck_load(&kern[d]));
    }
    return 0;
}

/* A kernel on GPU 0 filling P with V, from another thread; sets done. */
struct fill {
    CUdeviceptr p;
    uint32_t v;
    atomic_bool done;
    CUresult r;
};

static void *fill_on_gpu0(void *arg)
{
    struct fill *f = arg;
    CUresult r = cuCtxSetCurrent(ctx[0]);
    fck_use(&kern[0]);
    if (r == CUDA_SUCCESS)
        r = fck_fill32(0, f->p, N_WORDS, f->v);
    if (r == CUDA_SUCCESS)
        r = cuCtxSynchronize();
    f->r = r;
    atomic_store(&f->done, true);
    return NULL;
}

/* GPU 1's lease withheld; memory allocated on it only reserved. */
static CUdeviceptr reserve_on_gpu1(void)
{
    mock_set_auto_grant(mock, false);
    use(1);
    CUdeviceptr p;
    CK(cuMemAlloc(&p, N_WORDS * 4));
    struct cushare_stats s = ht_stats(1);
    assert_int_not_equal(s.state, CUSHARE_LEASE_HELD);
    assert_int_equal(s.mem_reserved, N_WORDS * 4);
    return p;
}

static void gpus_are_independent_without_peer_access(void **state)
{
    (void)state;
    use(0);
    CUdeviceptr a;
    CK(cuMemAlloc(&a, N_WORDS * 4));
    CK(fck_fill32(0, a, N_WORDS, 1)); /* GPU 0 granted (auto) */
    CK(cuCtxSynchronize());
    CUdeviceptr b = reserve_on_gpu1();
    /* GPU 0's own work does not wait for GPU 1. */
    struct fill f = {.p = a, .v = 2};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fill_on_gpu0, &f), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    CK(f.r);
    assert_int_not_equal(ht_stats(1).state, CUSHARE_LEASE_HELD);
    use(0);
    assert_int_equal(ht_device_sum(a, N_WORDS), 2ull * N_WORDS);
    mock_set_auto_grant(mock, true);
    use(1);
    CK(cuMemFree(b));
    use(0);
    CK(cuMemFree(a));
}

static void peer_work_waits_for_the_peer_lease(void **state)
{
    (void)state;
    use(0);
    CK(cuCtxEnablePeerAccess(ctx[1], 0));
    CKR(cuCtxEnablePeerAccess(ctx[1], 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
    CUdeviceptr b = reserve_on_gpu1();
    struct fill f = {.p = b, .v = 7};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fill_on_gpu0, &f), 0);
    /* It must wait for GPU 1: asked for, not granted. Without the coupling
     * the kernel runs at once into the placeholder. */
    ht_sleep_ms(300);
    assert_false(atomic_load(&f.done));
    assert_int_equal(ht_stats(1).state, CUSHARE_LEASE_WAITING);
    assert_true(mock_grant(mock, 1, mock_lease(mock, 1) + 1000));
    assert_int_equal(pthread_join(t, NULL), 0);
    CK(f.r);
    assert_int_equal(ht_stats(1).state, CUSHARE_LEASE_HELD);
    use(1);
    assert_int_equal(ht_device_sum(b, N_WORDS), 7ull * N_WORDS);
    mock_set_auto_grant(mock, true);
    CK(cuMemFree(b));
}

/* A revoke of GPU 1 drains the work queued on GPU 0 that may reach GPU 1's
 * memory (GPU 0 has peer access to it) before it RELEASEs: the swap-out
 * that may follow must not move memory a kernel on another GPU's stream
 * is still writing. Without it the RELEASE comes while GPU 0 still runs
 * the 300 ms kernel. */
static void revoke_drains_the_work_that_reaches_it(void **state)
{
    (void)state;
    use(1);
    CUdeviceptr b;
    CK(cuMemAlloc(&b, N_WORDS * 4));
    use(0);
    CK(fck_fill32(0, b, N_WORDS, 1)); /* both GPUs held (coupled) */
    CK(cuCtxSynchronize());
    assert_int_equal(ht_stats(1).state, CUSHARE_LEASE_HELD);
    CK(fck_sleep(0, 300000000ull));
    CK(fck_fill32(0, b, N_WORDS, 9));
    struct cs_msg_release rel;
    assert_true(mock_revoke_wait(mock, 1, CS_ALL_BYTES, &rel));
    CK(cuStreamQuery(0)); /* done, not CUDA_ERROR_NOT_READY */
    assert_true(rel.swapped_bytes >= N_WORDS * 4);
    use(1);
    assert_int_equal(ht_device_sum(b, N_WORDS), 9ull * N_WORDS);
    CK(cuMemFree(b));
}

int main(int argc, char **argv)
{
    setenv("FAKECUDA_DEVICES", "2", 1);
    setenv("FAKECUDA_PEER", "1", 1);
    mock = ht_mock_preload(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gpus_are_independent_without_peer_access),
        cmocka_unit_test(peer_work_waits_for_the_peer_lease),
        cmocka_unit_test(revoke_drains_the_work_that_reaches_it),
    };
    int rc = cmocka_run_group_tests(tests, setup, NULL);
    mock_stop(mock);
    return rc;
}
