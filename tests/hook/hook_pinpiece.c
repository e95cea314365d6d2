/* hook_pinpiece.c: swap backing is pinned in pieces (CUSHARE_PIN_PIECE), and
 * pinning ahead gives way to what cannot wait.
 *
 * On a simulated host that pins at 50 MB/s (a 4 MiB piece takes ~84 ms):
 *   - a 42 MiB segment (ten pieces and a short one) swaps out and back with
 *     its data, and its backing is counted to the byte;
 *   - an eviction arriving while the pinner is part-way through a segment
 *     finishes that backing itself (the pinner stops between pieces)
 *     instead of pinning a second copy, and the data survives;
 *   - the pinner starts no piece while an application thread is inside a
 *     device allocation (on a real driver that cuMemCreate would wait for
 *     the lock each piece holds);
 *   - freeing a segment the pinner is working on waits for the piece in
 *     flight, then frees everything;
 *   - a partial eviction moves the segments that are enough, not the
 *     largest one.
 */
#include "hooktest.h"
#include "mock_sched.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

static struct mock_sched *mock;
static uint64_t next_request = 100;

#define PIECE (4 * MiB)

static void revoke(uint64_t evict)
{
    struct cs_msg_release r;
    assert_true(mock_revoke_wait(mock, 0, evict, &r));
}

/* Waits (up to 5 s) until at least `want` bytes are pinned. */
static void pinned_at_least(uint64_t want)
{
    for (int i = 0; i < 500 && ht_stats(0).mem_pinned < want; i++)
        ht_sleep_ms(10);
    assert_true(ht_stats(0).mem_pinned >= want);
}

/* Waits for the EVICTED answers to two requests, in either order. */
static void two_evicted(uint64_t id1, struct cs_msg_evicted *e1, uint64_t id2,
                        struct cs_msg_evicted *e2)
{
    bool got1 = false, got2 = false;
    struct cs_msg m;
    while ((!got1 || !got2) && mock_wait(mock, CS_MSG_EVICTED, 10000, &m, NULL)) {
        if (m.u.evicted.request_id == id1) {
            *e1 = m.u.evicted;
            got1 = true;
        } else if (m.u.evicted.request_id == id2) {
            *e2 = m.u.evicted;
            got2 = true;
        }
    }
    assert_true(got1 && got2);
}

static struct cs_msg_evicted evicted(uint64_t id)
{
    struct cs_msg m;
    while (mock_wait(mock, CS_MSG_EVICTED, 10000, &m, NULL))
        if (m.u.evicted.request_id == id)
            return m.u.evicted;
    fail_msg("no EVICTED for request %llu", (unsigned long long)id);
    return m.u.evicted;
}

/* A resident segment of `bytes` filled with v, the lease then given back
 * without moving anything (resident, gate closed: what PREPARE works on). */
static CUdeviceptr resident_idle(uint64_t bytes, uint32_t v)
{
    CUdeviceptr p;
    CK(cuMemAlloc(&p, bytes));
    CK(fck_fill32(0, p, bytes / 4, v));
    CK(cuCtxSynchronize());
    revoke(0);
    assert_int_equal(ht_stats(0).mem_pinned, 0);
    return p;
}

static void pieces_round_trip(void **state)
{
    (void)state;
    ht_context();
    CUdeviceptr p;
    CK(cuMemAlloc(&p, 42 * MiB));
    CK(fck_fill32(0, p, 42 * MiB / 4, 21));
    CK(cuCtxSynchronize());
    struct cs_msg_release r;
    assert_true(mock_revoke_wait(mock, 0, CS_ALL_BYTES, &r));
    assert_int_equal(r.swapped_bytes, 42 * MiB);
    assert_int_equal(ht_stats(0).mem_pinned, 42 * MiB); /* 10 pieces and a 2 MiB one */
    assert_int_equal(ht_device_sum(p, 42 * MiB / 4), 21ull * (42 * MiB / 4));
    CK(cuMemFree(p));
    assert_int_equal(ht_stats(0).mem_pinned, 0);
}

static void eviction_finishes_what_the_pinner_started(void **state)
{
    (void)state;
    const uint64_t size = 40 * MiB; /* 10 pieces: ~840 ms of pinning */
    CUdeviceptr p = resident_idle(size, 5);
    uint64_t prep = next_request++, ev = next_request++;
    assert_true(mock_evict(mock, 0, prep, CS_ALL_BYTES, CS_EVICT_PREPARE));
    pinned_at_least(PIECE); /* the pinner is under way */
    assert_true(mock_evict(mock, 0, ev, CS_ALL_BYTES, 0));
    struct cs_msg_evicted e_prep = {0}, e_ev = {0};
    two_evicted(prep, &e_prep, ev, &e_ev);
    assert_int_equal(e_ev.status, 0);
    assert_int_equal(e_ev.bytes, size);
    /* The pinner stopped between pieces and the eviction pinned the rest:
     * one backing, never a second copy of the segment. */
    assert_true(e_prep.bytes >= PIECE && e_prep.bytes < size);
    assert_int_equal(e_prep.bytes % PIECE, 0);
    assert_int_equal(ht_stats(0).mem_pinned, size);
    assert_int_equal(ht_device_sum(p, size / 4), 5ull * (size / 4));
    CK(cuMemFree(p));
    assert_int_equal(ht_stats(0).mem_pinned, 0);
}

struct creator {
    CUdeviceptr p;
    CUmemGenericAllocationHandle h;
    CUresult r;
    uint64_t pinned_before, pinned_after; /* around the cuMemCreate */
    uint64_t ns;
};

/* The application's own device allocation, made holding the GPU (a kernel
 * first takes the lease): 128 MiB at the simulated FAKECUDA_MEMCREATE_GBPS
 * takes about a second. The pinned bytes are read on this thread just
 * before and just after it. */
static void *create_device_memory(void *arg)
{
    struct creator *c = arg;
    ht_context();
    if (fck_fill32(0, c->p, 1, 9) != CUDA_SUCCESS || cuCtxSynchronize() != CUDA_SUCCESS) {
        c->r = CUDA_ERROR_UNKNOWN;
        return NULL;
    }
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    c->pinned_before = ht_stats(0).mem_pinned;
    uint64_t t0 = ht_now_ns();
    c->r = cuMemCreate(&c->h, 128 * MiB, &prop, 0);
    c->ns = ht_now_ns() - t0;
    c->pinned_after = ht_stats(0).mem_pinned;
    return NULL;
}

static void pinner_gives_way_to_the_apps_allocation(void **state)
{
    (void)state;
    const uint64_t size = 64 * MiB; /* 16 pieces: ~1.3 s of pinning */
    CUdeviceptr p = resident_idle(size, 9);
    uint64_t prep = next_request++;
    assert_true(mock_evict(mock, 0, prep, CS_ALL_BYTES, CS_EVICT_PREPARE));
    pinned_at_least(PIECE); /* under way */
    struct creator c = {p, 0, CUDA_ERROR_UNKNOWN, 0, 0, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, create_device_memory, &c), 0);
    pthread_join(t, NULL);
    CK(c.r);
    /* During the app's second-long cuMemCreate, pinning on would have done
     * a dozen more pieces; giving way, at most the one in flight (and one
     * started as the app thread entered). */
    assert_true(c.ns > 500000000ull); /* the premise: a slow allocation */
    assert_true(c.pinned_after <= c.pinned_before + 2 * PIECE);
    /* The new memory is swappable too (vmm.h): the PREPARE, asked for all
     * there is, backs it as well. */
    struct cs_msg_evicted e = evicted(prep);
    assert_int_equal(e.status, 0);
    assert_int_equal(e.bytes, size + 128 * MiB);
    assert_int_equal(ht_stats(0).mem_pinned, size + 128 * MiB);
    CK(cuMemRelease(c.h));
    CK(cuMemFree(p));
    assert_int_equal(ht_stats(0).mem_pinned, 0);
}

static void free_while_pinning(void **state)
{
    (void)state;
    const uint64_t size = 40 * MiB;
    struct cushare_stats s0 = ht_stats(0);
    CUdeviceptr p = resident_idle(size, 3);
    uint64_t prep = next_request++;
    assert_true(mock_evict(mock, 0, prep, CS_ALL_BYTES, CS_EVICT_PREPARE));
    pinned_at_least(PIECE);
    CK(cuMemFree(p)); /* waits for the piece in flight */
    struct cs_msg_evicted e = evicted(prep);
    assert_true(e.bytes >= PIECE && e.bytes < size);
    struct cushare_stats s = ht_stats(0);
    assert_int_equal(s.mem_pinned, 0);
    assert_int_equal(s.mem_resident, s0.mem_resident);
    assert_int_equal(s.device_free, s0.device_free);
}

/* A partial eviction moves what is enough, not the largest segment: with
 * every backing pinned, the smallest segment that covers the request, else
 * the largest and then the smallest that covers the rest. */
static void eviction_picks_what_is_enough(void **state)
{
    (void)state;
    const uint64_t sizes[3] = {64 * MiB, 8 * MiB, 16 * MiB};
    CUdeviceptr p[3];
    for (int k = 0; k < 3; k++) {
        CK(cuMemAlloc(&p[k], sizes[k]));
        CK(fck_fill32(0, p[k], sizes[k] / 4, 30 + (uint32_t)k));
    }
    CK(cuCtxSynchronize());
    revoke(CS_ALL_BYTES); /* pins every backing */
    assert_int_equal(ht_device_sum(p[0], sizes[0] / 4), 30ull * (sizes[0] / 4));
    CK(cuCtxSynchronize());
    revoke(0);
    uint64_t id = next_request++;
    assert_true(mock_evict(mock, 0, id, 10 * MiB, 0));
    struct cs_msg_evicted e = evicted(id);
    assert_int_equal(e.status, 0);
    assert_int_equal(e.bytes, 16 * MiB);
    assert_int_equal(ht_device_sum(p[2], sizes[2] / 4), 32ull * (sizes[2] / 4));
    CK(cuCtxSynchronize());
    revoke(0);
    id = next_request++;
    assert_true(mock_evict(mock, 0, id, 70 * MiB, 0));
    e = evicted(id);
    assert_int_equal(e.bytes, 64 * MiB + 8 * MiB);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(ht_device_sum(p[k], sizes[k] / 4), (30ull + k) * (sizes[k] / 4));
        CK(cuMemFree(p[k]));
    }
}

int main(int argc, char **argv)
{
    static char env_sock[4200];
    snprintf(env_sock, sizeof env_sock, "CUSHARE_SOCKET=%s", ht_path("pinpiece.sock"));
    const char *const env[] = {env_sock, "CUSHARE_PIN_PIECE=4M", "FAKECUDA_PIN_GBPS=0.05",
                               "FAKECUDA_MEMCREATE_GBPS=0.128", NULL};
    hooktest_preload(argc, argv, env);
    mock = mock_start(ht_path("pinpiece.sock"), 60000);
    assert_non_null(mock);
    mock_set_auto_grant(mock, true);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pieces_round_trip),
        cmocka_unit_test(eviction_finishes_what_the_pinner_started),
        cmocka_unit_test(pinner_gives_way_to_the_apps_allocation),
        cmocka_unit_test(free_while_pinning),
        cmocka_unit_test(eviction_picks_what_is_enough),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    mock_stop(mock);
    return rc;
}
