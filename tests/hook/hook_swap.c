/* hook_swap.c: the lease gate and the swap engine, driven by a scripted
 * scheduler (mock_sched) on the simulated GPU.
 *
 * Proves: memory allocated before the first grant is only reserved, and
 * the ACQUIRE follows a USAGE that shows it; a
 * revoke with evict_bytes moves the job's memory to the host (the device's
 * free memory grows by as much) and the next grant brings it back intact
 * at the same addresses; partial eviction moves only what was asked; EVICT
 * while idle and PREPARE work; pointer queries answer while swapped out;
 * an allocation that cannot get room fails with OUT_OF_MEMORY after asking
 * the scheduler; work recorded by stream capture needs no lease; a grant
 * revoked during its restore never opens the gate; a revoked job whose
 * threads still wait asks again before it gives the lease back. An
 * allocation made of parts (CUSHARE_SEG_PART, 64 MiB here: hooktest.c) is
 * one allocation to the program (its range, its free) but moves a part at
 * a time, and a full GPU is asked room once for the rest of it, not per
 * part; one that cannot be placed leaves no part behind. CUDA IPC of
 * swappable memory: hook_ipc.c.
 */
#include "hooktest.h"
#include "mock_sched.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static struct mock_sched *mock;

/* Real free memory of the simulated device (no CUSHARE_MEM_LIMIT here, so
 * cuMemGetInfo is the driver's view). */
/* The device's real free memory (all processes): the hook shows this
 * scheduled job the GPU as if alone, so ask for the driver's view. */
static size_t device_free(void)
{
    struct cushare_stats s = ht_stats(0);
    assert_true(s.device_total > 0);
    return (size_t)s.device_free;
}

static int setup(void **state)
{
    (void)state;
    ht_context();
    return 0;
}

static CUdeviceptr a, b;
#define A_BYTES (64 * MiB)
#define B_BYTES (32 * MiB)

static void allocation_before_grant_is_reserved(void **state)
{
    (void)state;
    size_t f0 = device_free();
    CK(cuMemAlloc(&a, A_BYTES));
    CK(cuMemAlloc(&b, B_BYTES));
    struct cushare_stats s = ht_stats(0);
    assert_int_equal(s.state, CUSHARE_LEASE_IDLE);
    assert_int_equal(s.mem_reserved, A_BYTES + B_BYTES);
    /* Scheduled and swappable: the job sees the GPU as if alone (the
     * driver's own view would also subtract the context's 8 MiB). */
    size_t vf, vt, total;
    CK(cuMemGetInfo(&vf, &vt));
    CK(cuDeviceTotalMem(&total, 0));
    assert_int_equal(vt, total);
    assert_int_equal(vf, total - (A_BYTES + B_BYTES));
    assert_int_equal(s.mem_resident, 0);
    assert_int_equal(device_free(), f0);
    /* The first kernel asks for the lease; the grant places the memory. */
    CK(fck_fill32(0, a, A_BYTES / 4, 3));
    CK(fck_fill32(0, b, B_BYTES / 4, 5));
    CK(cuCtxSynchronize());
    /* The ACQUIRE came after a USAGE that showed the footprint it asks
     * with (report.c, cs_report_usage_locked), not a tick later: the
     * daemon weighs a new waiter by it (policy.c, expected_overflow). */
    assert_true(mock_wait(mock, CS_MSG_ACQUIRE, 2000, NULL, NULL));
    int acq = mock_last_pos(mock, CS_MSG_ACQUIRE);
    uint64_t shown = 0;
    struct cs_msg u;
    while (mock_wait(mock, CS_MSG_USAGE, 0, &u, NULL) && mock_last_pos(mock, CS_MSG_USAGE) < acq)
        shown = u.u.usage.footprint;
    assert_true(shown >= A_BYTES + B_BYTES);
    s = ht_stats(0);
    assert_int_equal(s.state, CUSHARE_LEASE_HELD);
    assert_int_equal(s.mem_reserved, 0);
    assert_true(s.mem_resident >= A_BYTES + B_BYTES);
    assert_true(f0 - device_free() >= A_BYTES + B_BYTES);
    assert_int_equal(ht_device_sum(a, A_BYTES / 4), 3ull * (A_BYTES / 4));
}

static void swap_out_and_back_keeps_data(void **state)
{
    (void)state;
    CK(fck_add32(0, a, A_BYTES / 4, 4)); /* 7 everywhere */
    CK(cuCtxSynchronize());
    size_t f0 = device_free();
    struct cs_msg_release rel = mock_take_back(mock, CS_ALL_BYTES);
    assert_true(rel.swapped_bytes >= A_BYTES + B_BYTES);
    struct cushare_stats s = ht_stats(0);
    assert_int_equal(s.mem_swapped, rel.swapped_bytes);
    assert_int_equal(s.mem_resident, 0);
    assert_true(device_free() - f0 >= A_BYTES + B_BYTES);
    /* Using it again restores everything, same addresses, same bytes. */
    assert_int_equal(ht_device_sum(a, A_BYTES / 4), 7ull * (A_BYTES / 4));
    assert_int_equal(ht_device_sum(b, B_BYTES / 4), 5ull * (B_BYTES / 4));
    s = ht_stats(0);
    assert_int_equal(s.mem_swapped, 0);
    assert_true(s.swap_in_bytes >= A_BYTES + B_BYTES);
    assert_true(s.mem_pinned >= A_BYTES + B_BYTES); /* kept for next time */
}

static void partial_eviction_moves_only_what_was_asked(void **state)
{
    (void)state;
    struct cs_msg_release rel = mock_take_back(mock, A_BYTES);
    /* The largest segment goes first and is enough on its own. */
    assert_int_equal(rel.swapped_bytes, A_BYTES);
    assert_int_equal(ht_stats(0).mem_swapped, A_BYTES);
    assert_int_equal(ht_device_sum(b, B_BYTES / 4), 5ull * (B_BYTES / 4));
    assert_int_equal(ht_device_sum(a, A_BYTES / 4), 7ull * (A_BYTES / 4));
}

static void evict_while_idle_and_prepare(void **state)
{
    (void)state;
    mock_take_back(mock, 0);
    assert_int_equal(ht_stats(0).mem_swapped, 0);
    struct cs_msg m;
    assert_true(mock_evict(mock, 0, 77, CS_ALL_BYTES, CS_EVICT_PREPARE));
    assert_true(mock_wait(mock, CS_MSG_EVICTED, 10000, &m, NULL));
    assert_int_equal(m.u.evicted.request_id, 77);
    assert_int_equal(m.u.evicted.status, 0);
    assert_int_equal(ht_stats(0).mem_swapped, 0); /* pinned, not moved */
    assert_true(mock_evict(mock, 0, 78, CS_ALL_BYTES, 0));
    assert_true(mock_wait(mock, CS_MSG_EVICTED, 10000, &m, NULL));
    assert_int_equal(m.u.evicted.request_id, 78);
    assert_int_equal(m.u.evicted.status, 0);
    assert_true(m.u.evicted.bytes >= A_BYTES + B_BYTES);
    assert_true(ht_stats(0).mem_swapped >= A_BYTES + B_BYTES);

    /* Pointer queries still answer while nothing is mapped. */
    CUdeviceptr small;
    CK(cuMemAlloc(&small, 1000));
    CUdeviceptr base = 0;
    size_t size = 0;
    int ord = -1;
    CK(cuPointerGetAttribute(&base, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, small + 10));
    CK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, small + 10));
    CK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, small));
    assert_int_equal(base, small);
    assert_int_equal(size, 1000);
    assert_int_equal(ord, 0);
    CK(cuMemFree(small));

    assert_int_equal(ht_device_sum(a, A_BYTES / 4), 7ull * (A_BYTES / 4));
    assert_int_equal(ht_device_sum(b, B_BYTES / 4), 5ull * (B_BYTES / 4));
}

/* PREFETCH restores with the gate closed; the grant that follows has
 * nothing left to copy, and RESTORED reports what each grant cost. */
static void prefetch_restores_with_gate_closed(void **state)
{
    (void)state;
    mock_take_back(mock, CS_ALL_BYTES);
    assert_true(ht_stats(0).mem_swapped >= A_BYTES + B_BYTES);
    struct cs_msg m;
    assert_true(mock_prefetch(mock, 0, 91, CS_ALL_BYTES >> 2));
    assert_true(mock_wait(mock, CS_MSG_PREFETCHED, 10000, &m, NULL));
    assert_int_equal(m.u.prefetched.request_id, 91);
    assert_int_equal(m.u.prefetched.status, 0);
    assert_true(m.u.prefetched.bytes >= A_BYTES + B_BYTES);
    struct cushare_stats s = ht_stats(0);
    assert_int_equal(s.mem_swapped, 0);
    assert_int_equal(s.state, CUSHARE_LEASE_IDLE);
    while (mock_wait(mock, CS_MSG_RESTORED, 0, NULL, NULL)) /* skip earlier grants' */
        ;
    assert_int_equal(ht_device_sum(a, A_BYTES / 4), 7ull * (A_BYTES / 4));
    assert_true(mock_wait(mock, CS_MSG_RESTORED, 10000, &m, NULL));
    assert_int_equal(m.u.restored.lease_id, mock_lease(mock, 0));
    assert_int_equal(m.u.restored.status, 0);
    assert_int_equal(m.u.restored.bytes, 0); /* the prefetch already did it */
}

/* Capture records work without running it: no lease needed. Launching the
 * graph is real work and waits for one. */
static void capture_needs_no_lease(void **state)
{
    (void)state;
    mock_take_back(mock, 0);
    int acquires = mock_count(mock, CS_MSG_ACQUIRE);
    mock_set_auto_grant(mock, false);
    CUstream s;
    CUgraph g;
    CUgraphExec ge;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(fck_add32(s, a, A_BYTES / 4, 1));
    CK(cuStreamEndCapture(s, &g));
    CK(cuGraphInstantiateWithFlags(&ge, g, 0));
    assert_int_equal(mock_count(mock, CS_MSG_ACQUIRE), acquires);
    assert_int_equal(ht_stats(0).state, CUSHARE_LEASE_IDLE);
    mock_set_auto_grant(mock, true);
    CK(cuGraphLaunch(ge, s));
    CK(cuStreamSynchronize(s));
    assert_int_equal(mock_count(mock, CS_MSG_ACQUIRE), acquires + 1);
    assert_int_equal(ht_device_sum(a, A_BYTES / 4), 8ull * (A_BYTES / 4));
    CK(cuGraphExecDestroy(ge));
    CK(cuGraphDestroy(g));
    CK(cuStreamDestroy(s));
}

/* A grant revoked while its memory is still coming back (the REVOKE queued
 * behind the restore) never opens the gate: after its revoke timeout the
 * scheduler may have given the GPU to another job already, whose work this
 * job's would then run beside. The REVOKE is answered with RELEASE, no
 * RESTORED, no grant counted; the next grant opens the gate as usual.
 * Found by the lease model (docs/model.md); without the check in
 * granted() the gate opened (grants + 1, a RESTORED). The restore of the
 * 96 MiB swapped out here takes ~10 ms on the simulated PCIe; the REVOKE
 * follows the GRANT within microseconds. */
static void revoked_grant_does_not_open_the_gate(void **state)
{
    (void)state;
    mock_take_back(mock, CS_ALL_BYTES);
    mock_set_auto_grant(mock, false);
    unsigned long long grants = ht_stats(0).grants;
    int restored = mock_count(mock, CS_MSG_RESTORED);
    uint64_t lease = mock_lease(mock, 0) + 1000;
    assert_true(mock_grant(mock, 0, lease));
    assert_true(mock_revoke(mock, 0, lease, 0));
    struct cs_msg m;
    assert_true(mock_wait(mock, CS_MSG_RELEASE, 10000, &m, NULL));
    assert_int_equal(m.u.release.lease_id, lease);
    assert_int_equal(ht_stats(0).grants, grants);
    assert_int_equal(mock_count(mock, CS_MSG_RESTORED), restored);
    assert_int_equal(ht_stats(0).state, CUSHARE_LEASE_IDLE);
    mock_set_auto_grant(mock, true);
    CK(fck_add32(0, a, A_BYTES / 4, 1));
    CK(cuCtxSynchronize());
    assert_int_equal(ht_stats(0).grants, grants + 1);
    assert_int_equal(ht_device_sum(a, A_BYTES / 4), 9ull * (A_BYTES / 4));
}

/* Not holding the GPU, an allocation is only reserved, but one that could
 * never be resident together with the job's other memory is refused at
 * once, as a bare GPU would refuse it. */
static void reservation_beyond_the_device_fails(void **state)
{
    (void)state;
    mock_take_back(mock, 0);
    size_t total;
    CK(cuDeviceTotalMem(&total, 0));
    int rooms = mock_count(mock, CS_MSG_ROOM);
    CUdeviceptr p;
    CKR(cuMemAlloc(&p, total), CUDA_ERROR_OUT_OF_MEMORY); /* plus A and B: too much */
    assert_int_equal(mock_count(mock, CS_MSG_ROOM), rooms);
    CK(cuMemAlloc(&p, total / 4)); /* this fits beside them */
    assert_int_equal(ht_stats(0).state, CUSHARE_LEASE_IDLE);
    CK(cuMemFree(p));
}

static uint64_t first_room_bytes;

static void note_room(const struct cs_msg_room *r, void *arg)
{
    (void)arg;
    if (!first_room_bytes)
        first_room_bytes = r->bytes;
}

static void no_room_means_out_of_memory(void **state)
{
    (void)state;
    CK(fck_add32(0, a, 1, 0)); /* holding the GPU again: allocations are placed */
    CK(cuCtxSynchronize());
    assert_int_equal(ht_stats(0).state, CUSHARE_LEASE_HELD);
    mock_set_room_status(mock, CUDA_ERROR_OUT_OF_MEMORY);
    int rooms = mock_count(mock, CS_MSG_ROOM);
    CUdeviceptr huge;
    /* Twice the device's memory cannot be placed, whatever the device. */
    size_t total;
    CK(cuDeviceTotalMem(&total, 0));
    mock_set_room_hook(mock, note_room, NULL);
    CKR(cuMemAlloc(&huge, 2 * total), CUDA_ERROR_OUT_OF_MEMORY);
    mock_set_room_hook(mock, NULL, NULL);
    assert_true(mock_count(mock, CS_MSG_ROOM) > rooms);
    /* Made of 64 MiB parts, placed until the GPU was full: the room asked
     * for is the rest of the allocation (more than the GPU), not a part's;
     * and the parts placed are gone again. */
    assert_true(first_room_bytes >= total);
    assert_int_equal(ht_stats(0).mem_used, A_BYTES + B_BYTES);
    mock_set_room_status(mock, 0);
    CK(cuMemFree(a));
    CK(cuMemFree(b));
    struct cushare_stats s = ht_stats(0);
    assert_int_equal(s.mem_used, 0);
    assert_int_equal(s.mem_pinned, 0); /* backing goes with the memory */
}

/* ---- asking again before the RELEASE ---------------------------------------- */

static sem_t drain_hold; /* posted by the test: the drain may finish */

static void CUDA_CB hold_the_drain(void *arg)
{
    (void)arg;
    while (sem_wait(&drain_hold) != 0)
        ;
}

struct launcher {
    CUcontext ctx;
    CUresult r;
};

/* An application thread that needs the GPU while its lease is revoked. */
static void *launch_during_revoke(void *arg)
{
    struct launcher *l = arg;
    l->r = cuCtxSetCurrent(l->ctx);
    if (l->r == CUDA_SUCCESS)
        l->r = fck_sleep(0, 1000);
    if (l->r == CUDA_SUCCESS)
        l->r = cuStreamSynchronize(0);
    return NULL;
}

/* Polls ht_stats(0) up to 10 s until field `what` has the value; true if so. */
#define WAIT_STAT(what, value)                                                                 \
    ({                                                                                         \
        bool ok_ = false;                                                                      \
        for (int i_ = 0; i_ < 10000 && !ok_; i_++) {                                           \
            ok_ = ht_stats(0).what == (value);                                                 \
            if (!ok_)                                                                          \
                usleep(1000);                                                                  \
        }                                                                                      \
        ok_;                                                                                   \
    })

/* A job revoked while one of its threads waits for the GPU sends ACQUIRE
 * before its RELEASE: the daemon (an ACQUIRE while it revokes means "wait
 * again after my RELEASE") then has it waiting in the very decision the
 * RELEASE makes. Asked after the RELEASE, the GPU went to the only other
 * waiter, and two clients coupled crossed over two GPUs got one GPU each
 * by turns for ever (the lease model's finding 8, docs/model.md). The
 * drain is held (a host function on the job's stream) until the thread is
 * seen waiting at the gate, so the order does not depend on timing. */
static void revoked_job_asks_again_before_release(void **state)
{
    (void)state;
    CK(fck_sleep(0, 1000)); /* the lease, held */
    CK(cuCtxSynchronize());
    assert_int_equal(ht_stats(0).state, CUSHARE_LEASE_HELD);
    mock_set_auto_grant(mock, false);
    assert_int_equal(sem_init(&drain_hold, 0, 0), 0);
    CK(cuLaunchHostFunc(0, hold_the_drain, NULL));
    uint64_t lease = mock_lease(mock, 0);
    while (mock_wait(mock, CS_MSG_ACQUIRE, 0, NULL, NULL)) /* past the earlier ones */
        ;
    assert_true(mock_revoke(mock, 0, lease, 0));
    assert_true(WAIT_STAT(state, CUSHARE_LEASE_REVOKING));
    struct launcher l = {.r = CUDA_ERROR_UNKNOWN};
    CK(cuCtxGetCurrent(&l.ctx));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, launch_during_revoke, &l), 0);
    assert_true(WAIT_STAT(threads_waiting, 1ull));
    sem_post(&drain_hold);
    struct cs_msg rel, acq;
    assert_true(mock_wait(mock, CS_MSG_RELEASE, 10000, &rel, NULL));
    assert_int_equal(rel.u.release.lease_id, lease);
    int rel_pos = mock_last_pos(mock, CS_MSG_RELEASE);
    assert_true(mock_wait(mock, CS_MSG_ACQUIRE, 10000, &acq, NULL));
    assert_int_equal(acq.u.acquire.slot, 0);
    assert_true(mock_last_pos(mock, CS_MSG_ACQUIRE) < rel_pos);
    assert_int_equal(ht_stats(0).state, CUSHARE_LEASE_WAITING);
    assert_true(mock_grant(mock, 0, lease + 1));
    assert_int_equal(pthread_join(t, NULL), 0);
    CK(l.r);
    assert_int_equal(ht_stats(0).state, CUSHARE_LEASE_HELD);
    mock_set_auto_grant(mock, true);
    sem_destroy(&drain_hold);
}

/* ---- an allocation made of parts --------------------------------------------- */

#define P_BYTES (200 * MiB) /* parts of 64, 64, 64 and 8 MiB */

static void parts_are_one_allocation_and_move_apart(void **state)
{
    (void)state;
    assert_int_equal(ht_stats(0).mem_used, 0); /* alone: the picks below are exact */
    CUdeviceptr p;
    CK(cuMemAlloc(&p, P_BYTES));
    CK(fck_fill32(0, p, P_BYTES / 4, 6));
    CK(cuCtxSynchronize());
    /* One allocation to the program, from any of its parts. */
    CUdeviceptr base;
    size_t size;
    CK(cuMemGetAddressRange(&base, &size, p + 150 * MiB));
    assert_true(base == p && size == P_BYTES);
    assert_int_not_equal(cuMemFree(p + 64 * MiB), CUDA_SUCCESS); /* a part is not an allocation */
    assert_int_equal(ht_stats(0).mem_resident, P_BYTES);
    /* 70 MiB asked: a 64 MiB part, then the 8 MiB one, not all 200. */
    struct cs_msg_release rel = mock_take_back(mock, 70 * MiB);
    assert_int_equal(rel.swapped_bytes, 72 * MiB);
    assert_int_equal(ht_stats(0).mem_swapped, 72 * MiB);
    assert_int_equal(ht_stats(0).mem_resident, P_BYTES - 72 * MiB);
    /* Back, whole and intact, at the same addresses. */
    assert_int_equal(ht_device_sum(p, P_BYTES / 4), 6ull * (P_BYTES / 4));
    /* Everything out: every part moves, and comes back. */
    CK(fck_add32(0, p, P_BYTES / 4, 1));
    CK(cuCtxSynchronize());
    rel = mock_take_back(mock, CS_ALL_BYTES);
    assert_int_equal(rel.swapped_bytes, P_BYTES);
    CK(cuMemGetAddressRange(&base, &size, p + P_BYTES - 1)); /* answered while out */
    assert_true(base == p && size == P_BYTES);
    assert_int_equal(ht_device_sum(p, P_BYTES / 4), 7ull * (P_BYTES / 4));
    CK(cuMemFree(p));
    struct cushare_stats s = ht_stats(0);
    assert_int_equal(s.mem_used, 0);
    assert_int_equal(s.mem_pinned, 0); /* every part's backing went with it */
}

int main(int argc, char **argv)
{
    mock = ht_mock_preload(argc, argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(allocation_before_grant_is_reserved),
        cmocka_unit_test(swap_out_and_back_keeps_data),
        cmocka_unit_test(partial_eviction_moves_only_what_was_asked),
        cmocka_unit_test(evict_while_idle_and_prepare),
        cmocka_unit_test(prefetch_restores_with_gate_closed),
        cmocka_unit_test(capture_needs_no_lease),
        cmocka_unit_test(revoked_grant_does_not_open_the_gate),
        cmocka_unit_test(reservation_beyond_the_device_fails),
        cmocka_unit_test(no_room_means_out_of_memory),
        cmocka_unit_test(revoked_job_asks_again_before_release),
        cmocka_unit_test(parts_are_one_allocation_and_move_apart),
    };
    int rc = cmocka_run_group_tests(tests, setup, NULL);
    mock_stop(mock);
    return rc;
}
