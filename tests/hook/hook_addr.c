/* hook_addr.c: calls that check an address while the memory behind it is
 * not on the GPU (issue 19), driven by a scripted scheduler (mock_sched)
 * that grants only when the test says so.
 *
 * Memory off the GPU stays mapped at its addresses (src/hook/seg.h, enum
 * cs_seg_at): a segment allocated before the first grant shows the
 * device's placeholder, a swapped-out one its host backing. Proves, for
 * large (own segment) and small (2 MiB chunk) allocations alike:
 *   a. allocated before the first grant: graph memset and kernel nodes,
 *      instantiation, pointer queries, address ranges and texture objects
 *      all succeed without the GPU; a memcpy node, and a memset node made
 *      through cuGraphAddNode (class `placed`: they record where memory
 *      is), made from another thread wait for the grant and succeed after
 *      it; the graphs then run with the right data;
 *   b. swapped out: the same, plus updates of an instantiated graph's
 *      memset and kernel nodes; reading the memory through the driver
 *      itself, bypassing the gate, gives the bytes written before the
 *      swap (the address shows the backing); after the next grants the
 *      graphs run, their data right and the pattern intact;
 *   c. freeing memory while swapped and while reserved leaves nothing
 *      mapped at its addresses, its backing goes, the device's free memory
 *      is what it was, and new allocations work.
 */
#include "hooktest.h"
#include "mock_sched.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct mock_sched *mock;
static CUcontext ctx;

#define BIG_BYTES (6 * MiB)        /* a segment of its own (3 granules) */
#define SMALL_BYTES (64 * 1024ull) /* in a 2 MiB chunk */
#define CHUNK_BYTES (2 * MiB)

static CUdeviceptr big, small, small2;

/* The simulated GPU's free memory as the driver sees it (all processes). */
static uint64_t device_free(void)
{
    struct cushare_stats s = ht_stats(0);
    assert_true(s.device_total > 0);
    return s.device_free;
}

static bool simulated(void)
{
    char name[128] = "";
    CK(cuDeviceGetName(name, sizeof name, 0));
    return strstr(name, "simulated") != NULL;
}

static int setup(void **state)
{
    (void)state;
    ht_context();
    CK(cuCtxGetCurrent(&ctx));
    return 0;
}

/* ---- graph nodes ------------------------------------------------------- */


static CUgraphNode memset_node(CUgraph g, const CUgraphNode *dep, CUdeviceptr p, uint64_t n,
                               unsigned v)
{
    CUDA_MEMSET_NODE_PARAMS m = fck_memset32_params(p, n, v);
    CUgraphNode node;
    CK(cuGraphAddMemsetNode(&node, g, dep, dep ? 1 : 0, &m, ctx));
    return node;
}

/* A memset node's parameters for the generic cuGraphAddNode. */
static CUgraphNodeParams memset_node_params(CUdeviceptr p, uint64_t n, unsigned v)
{
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEMSET;
    np.memset.dst = p;
    np.memset.value = v;
    np.memset.elementSize = 4;
    np.memset.width = n;
    np.memset.height = 1;
    np.memset.ctx = ctx;
    return np;
}

static CUgraphNode add32_node(CUgraph g, const CUgraphNode *dep, CUdeviceptr p, uint64_t n,
                              uint32_t v)
{
    void *params[] = {&p, &n, &v};
    CUDA_KERNEL_NODE_PARAMS kp = fck_node_params(ht_kernels.add32, n, params);
    CUgraphNode node;
    CK(cuGraphAddKernelNode(&node, g, dep, dep ? 1 : 0, &kp));
    return node;
}


/* A node made by another thread that records where memory is (class
 * `placed`: a memcpy node, or any node through cuGraphAddNode): it must
 * wait until the job's memory is on the GPU. */
struct placed_call {
    CUgraph g;
    bool generic;         /* cuGraphAddNode(np), else cuGraphAddMemcpyNode(copy) */
    CUgraphNodeParams np;
    CUDA_MEMCPY3D copy;
    CUgraphNode node;
    CUresult r;
    uint64_t done_ns;     /* when the call returned */
};

static void *add_placed_node(void *arg)
{
    struct placed_call *c = arg;
    c->r = cuCtxSetCurrent(ctx);
    if (c->r == CUDA_SUCCESS && c->generic)
        c->r = cuGraphAddNode(&c->node, c->g, NULL, NULL, 0, &c->np);
    else if (c->r == CUDA_SUCCESS)
        c->r = cuGraphAddMemcpyNode(&c->node, c->g, NULL, 0, &c->copy, ctx);
    c->done_ns = ht_now_ns();
    return NULL;
}

/* Makes c's node in a new graph from another thread while the job does
 * not hold the GPU: the call asks for the GPU (ACQUIRE) and returns only
 * after the grant, with success. Returns the graph. */
static CUgraph placed_waits_for_grant(struct placed_call *c, uint64_t lease)
{
    assert_int_not_equal(ht_stats(0).state, CUSHARE_LEASE_HELD);
    while (mock_wait(mock, CS_MSG_ACQUIRE, 0, NULL, NULL)) /* skip earlier ones */
        ;
    CK(cuGraphCreate(&c->g, 0));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, add_placed_node, c), 0);
    /* Until the call has asked for the GPU it cannot have been granted:
     * the grant goes out only after its ACQUIRE arrived. */
    bool asked = mock_wait(mock, CS_MSG_ACQUIRE, 10000, NULL, NULL);
    uint64_t granted_ns = ht_now_ns();
    assert_true(mock_grant(mock, 0, lease));
    pthread_join(t, NULL);
    assert_true(asked);
    CK(c->r);
    assert_true(c->done_ns > granted_ns); /* it did not return before the grant */
    assert_int_equal(ht_stats(0).state, CUSHARE_LEASE_HELD);
    return c->g;
}

static CUgraph memcpy_node_waits(CUdeviceptr dst, CUdeviceptr src, size_t bytes, uint64_t lease)
{
    struct placed_call c = {.copy = fck_copy_params(dst, src, bytes)};
    return placed_waits_for_grant(&c, lease);
}

static CUgraph generic_memset_node_waits(CUdeviceptr p, uint64_t n, unsigned v, uint64_t lease)
{
    struct placed_call c = {.generic = true, .np = memset_node_params(p, n, v)};
    return placed_waits_for_grant(&c, lease);
}

/* Launches g's instantiation and waits for it. */
static void run_graph(CUgraph g)
{
    CUgraphExec ge;
    CK(cuGraphInstantiate(&ge, g, 0));
    CK(cuGraphLaunch(ge, 0));
    CK(cuCtxSynchronize());
    CK(cuGraphExecDestroy(ge));
    CK(cuGraphDestroy(g));
}

/* ---- what a program sees of an address ----------------------------------- */

static void queries_answer(CUdeviceptr base, size_t bytes)
{
    CUdeviceptr start = 0, rbase = 0;
    size_t size = 0, rsize = 0;
    int ord = -1;
    unsigned type = 0;
    CK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, base + 12));
    CK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, base + 12));
    CK(cuPointerGetAttribute(&ord, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, base));
    CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, base));
    assert_int_equal(start, base);
    assert_int_equal(size, bytes);
    assert_int_equal(ord, 0);
    assert_int_equal(type, CU_MEMORYTYPE_DEVICE);
    CK(cuMemGetAddressRange(&rbase, &rsize, base + 12));
    assert_int_equal(rbase, base);
    assert_int_equal(rsize, bytes);
}

static void texture_on(CUdeviceptr p, size_t bytes)
{
    CUDA_RESOURCE_DESC rd;
    memset(&rd, 0, sizeof rd);
    rd.resType = CU_RESOURCE_TYPE_LINEAR;
    rd.res.linear.devPtr = p;
    rd.res.linear.format = CU_AD_FORMAT_UNSIGNED_INT32;
    rd.res.linear.numChannels = 1;
    rd.res.linear.sizeInBytes = bytes;
    CUDA_TEXTURE_DESC td;
    memset(&td, 0, sizeof td);
    CUtexObject tex = 0;
    CK(cuTexObjectCreate(&tex, &rd, &td, NULL));
    assert_true(tex != 0);
    CK(cuTexObjectDestroy(tex));
}

/* Whether the driver itself finds memory mapped at p. */
static bool mapped_at(CUdeviceptr p)
{
    CUresult (*range)(CUdeviceptr *, size_t *, CUdeviceptr);
    *(void **)&range = ht_unhooked("cuMemGetAddressRange_v2");
    CUdeviceptr b = 0;
    size_t s = 0;
    return range(&b, &s, p) == CUDA_SUCCESS;
}

/* Reads device memory through the driver itself: no gate, no lease, no
 * restore; it answers only where the address shows memory. A swapped-out
 * segment's backing may be shown a moment after the swap-out (off its
 * critical path, seg.h): waited for, 10 s at most. */
static CUresult unhooked_read(void *dst, CUdeviceptr src, size_t bytes)
{
    for (int i = 0; i < 10000 && !mapped_at(src); i++)
        ht_sleep_ms(1);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t);
    *(void **)&dtoh = ht_unhooked("cuMemcpyDtoH_v2");
    return dtoh(dst, src, bytes);
}

static void nothing_mapped_at(CUdeviceptr p)
{
    assert_false(mapped_at(p));
}

static void fill_pattern(uint32_t *h, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++)
        h[i] = (uint32_t)(i * 2654435761u) ^ seed;
}

/* The bytes at p, read (through the hook) after the GPU came back. */
static void expect_bytes(CUdeviceptr p, const void *want, size_t bytes)
{
    void *got = malloc(bytes);
    assert_non_null(got);
    CK(cuMemcpyDtoH(got, p, bytes));
    assert_memory_equal(got, want, bytes);
    free(got);
}

/* ---- a. allocated before the first grant ---------------------------------- */

static void graphs_before_the_first_grant(void **state)
{
    (void)state;
    CK(cuMemAlloc(&big, BIG_BYTES));
    CK(cuMemAlloc(&small, SMALL_BYTES));
    CK(cuMemAlloc(&small2, SMALL_BYTES));
    struct cushare_stats s = ht_stats(0);
    assert_int_equal(s.state, CUSHARE_LEASE_IDLE);
    assert_int_equal(s.mem_reserved, BIG_BYTES + CHUNK_BYTES);
    assert_int_equal(s.mem_resident, 0);
    int acquires = mock_count(mock, CS_MSG_ACQUIRE);

    CUgraph g;
    CUgraphExec ge;
    CK(cuGraphCreate(&g, 0));
    CUgraphNode n = memset_node(g, NULL, big, BIG_BYTES / 4, 3);
    add32_node(g, &n, big, BIG_BYTES / 4, 4);
    n = memset_node(g, NULL, small, SMALL_BYTES / 4, 5);
    add32_node(g, &n, small, SMALL_BYTES / 4, 6);
    CK(cuGraphInstantiate(&ge, g, 0));
    queries_answer(big, BIG_BYTES);
    queries_answer(small, SMALL_BYTES);
    texture_on(big, BIG_BYTES);
    texture_on(small, SMALL_BYTES);
    /* None of it needed the GPU, nor placed the memory. */
    s = ht_stats(0);
    assert_int_equal(mock_count(mock, CS_MSG_ACQUIRE), acquires);
    assert_int_equal(s.state, CUSHARE_LEASE_IDLE);
    assert_int_equal(s.mem_reserved, BIG_BYTES + CHUNK_BYTES);

    CUgraph g2 = memcpy_node_waits(small2, small, SMALL_BYTES, 1000);
    assert_int_equal(ht_stats(0).mem_reserved, 0);
    CK(cuGraphLaunch(ge, 0));
    run_graph(g2); /* after ge: copies small's 11s */
    assert_int_equal(ht_device_sum(big, BIG_BYTES / 4), 7ull * (BIG_BYTES / 4));
    assert_int_equal(ht_device_sum(small, SMALL_BYTES / 4), 11ull * (SMALL_BYTES / 4));
    assert_int_equal(ht_device_sum(small2, SMALL_BYTES / 4), 11ull * (SMALL_BYTES / 4));
    CK(cuGraphExecDestroy(ge));
    CK(cuGraphDestroy(g));

    /* Any node through cuGraphAddNode waits too: given back (the memory
     * stays), then a new segment allocated before the next grant. */
    mock_take_back(mock, 0);
    CUdeviceptr late;
    CK(cuMemAlloc(&late, BIG_BYTES));
    assert_int_equal(ht_stats(0).mem_reserved, BIG_BYTES);
    run_graph(generic_memset_node_waits(late, BIG_BYTES / 4, 12, 1001));
    assert_int_equal(ht_device_sum(late, BIG_BYTES / 4), 12ull * (BIG_BYTES / 4));
    CK(cuMemFree(late));
}

/* ---- b. swapped out --------------------------------------------------------- */

/* Swaps all of the job's memory out (given back with everything evicted). */
static uint64_t swap_all_out(void)
{
    mock_take_back(mock, CS_ALL_BYTES);
    struct cushare_stats s = ht_stats(0);
    assert_true(s.mem_swapped >= BIG_BYTES + CHUNK_BYTES);
    assert_int_equal(s.mem_resident, 0);
    return s.mem_swapped;
}

static void graphs_while_swapped_out(void **state)
{
    (void)state;
    /* Holding the GPU since case a (else it failed, and nothing here
     * would be granted). */
    assert_int_equal(ht_stats(0).state, CUSHARE_LEASE_HELD);
    /* A pattern in big's first half and in small; the graphs work on
     * big's second half and on small2. */
    size_t half = BIG_BYTES / 2;
    uint32_t *pat = malloc(half), *pat_s = malloc(SMALL_BYTES), *seen = malloc(half);
    assert_true(pat && pat_s && seen);
    fill_pattern(pat, half / 4, 0x5bd1e995u);
    fill_pattern(pat_s, SMALL_BYTES / 4, 0x2545f491u);
    CK(cuMemcpyHtoD(big, pat, half));
    CK(cuMemcpyHtoD(small, pat_s, SMALL_BYTES));
    CK(cuCtxSynchronize());
    uint64_t swapped = swap_all_out();
    int acquires = mock_count(mock, CS_MSG_ACQUIRE);

    CUgraph g;
    CUgraphExec ge;
    CK(cuGraphCreate(&g, 0));
    CUgraphNode set = memset_node(g, NULL, big + half, half / 4, 8);
    CUgraphNode add = add32_node(g, &set, big + half, half / 4, 1);
    CUgraphNode n = memset_node(g, NULL, small2, SMALL_BYTES / 4, 2);
    add32_node(g, &n, small2, SMALL_BYTES / 4, 3);
    CK(cuGraphInstantiate(&ge, g, 0));
    /* Updates of the instantiated graph: 9 and +2 instead of 8 and +1. */
    CUDA_MEMSET_NODE_PARAMS m = fck_memset32_params(big + half, half / 4, 9);
    CK(cuGraphExecMemsetNodeSetParams(ge, set, &m, ctx));
    CUdeviceptr p = big + half;
    uint64_t cnt = half / 4;
    uint32_t two = 2;
    void *params[] = {&p, &cnt, &two};
    CUDA_KERNEL_NODE_PARAMS kp = fck_node_params(ht_kernels.add32, cnt, params);
    CK(cuGraphExecKernelNodeSetParams(ge, add, &kp));
    queries_answer(big, BIG_BYTES);
    queries_answer(small, SMALL_BYTES);
    queries_answer(small2, SMALL_BYTES);
    texture_on(big, BIG_BYTES);
    texture_on(small2, SMALL_BYTES);

    /* The addresses show the backing: the driver itself reads the bytes. */
    CK(unhooked_read(seen, big, half));
    assert_memory_equal(seen, pat, half);
    CK(unhooked_read(seen, small, SMALL_BYTES));
    assert_memory_equal(seen, pat_s, SMALL_BYTES);
    struct cushare_stats s = ht_stats(0);
    assert_int_equal(mock_count(mock, CS_MSG_ACQUIRE), acquires);
    assert_int_equal(s.state, CUSHARE_LEASE_IDLE);
    assert_int_equal(s.mem_swapped, swapped);

    /* cuGraphAddNode waits for the memory, then everything runs. */
    CUgraph g3 = generic_memset_node_waits(small2 + SMALL_BYTES / 2, SMALL_BYTES / 8, 7, 1002);
    assert_int_equal(ht_stats(0).mem_swapped, 0);
    CK(cuGraphLaunch(ge, 0));
    run_graph(g3); /* after ge: small2's second half 7s, its first 5s */
    assert_int_equal(ht_device_sum(big + half, half / 4), 11ull * (half / 4));
    assert_int_equal(ht_device_sum(small2, SMALL_BYTES / 4), 6ull * (SMALL_BYTES / 4));
    CK(cuGraphExecDestroy(ge));
    CK(cuGraphDestroy(g));

    /* Out again: a memcpy node waits for it. */
    swap_all_out();
    run_graph(memcpy_node_waits(small2, small, SMALL_BYTES, 1003));
    expect_bytes(big, pat, half);
    assert_int_equal(ht_device_sum(big + half, half / 4), 11ull * (half / 4));
    expect_bytes(small, pat_s, SMALL_BYTES);
    expect_bytes(small2, pat_s, SMALL_BYTES);
    free(pat);
    free(pat_s);
    free(seen);
}

/* ---- c. freeing memory that is not on the GPU ----------------------------------- */

/* The device's free memory is what it was. The real driver may keep a
 * granule of its own for the graphs and textures made meanwhile. */
static void free_memory_back(uint64_t before)
{
    uint64_t now = device_free();
    if (simulated())
        assert_int_equal(now, before);
    else
        assert_true(now + CHUNK_BYTES >= before);
}

static void freeing_off_the_gpu_leaves_nothing_mapped(void **state)
{
    (void)state;
    CK(cuMemFree(big));
    CK(cuMemFree(small));
    CK(cuMemFree(small2));
    struct cushare_stats s = ht_stats(0);
    assert_int_equal(s.state, CUSHARE_LEASE_HELD);
    assert_int_equal(s.mem_used, 0);
    uint64_t free0 = device_free();
    int acquires = mock_count(mock, CS_MSG_ACQUIRE);

    /* Swapped out, then freed. */
    CUdeviceptr x, y;
    CK(cuMemAlloc(&x, BIG_BYTES));
    CK(cuMemAlloc(&y, SMALL_BYTES));
    CK(fck_fill32(0, x, BIG_BYTES / 4, 1));
    CK(fck_fill32(0, y, SMALL_BYTES / 4, 1));
    CK(cuCtxSynchronize());
    mock_take_back(mock, CS_ALL_BYTES);
    s = ht_stats(0);
    assert_int_equal(s.mem_swapped, BIG_BYTES + CHUNK_BYTES);
    assert_true(s.mem_pinned >= BIG_BYTES + CHUNK_BYTES);
    CK(cuMemFree(x));
    CK(cuMemFree(y)); /* the chunk's last allocation: the chunk goes */
    s = ht_stats(0);
    assert_int_equal(s.mem_swapped, 0);
    assert_int_equal(s.mem_used, 0);
    assert_int_equal(s.mem_pinned, 0); /* the backing went with the memory */
    nothing_mapped_at(x);
    nothing_mapped_at(y);

    /* Allocated before the next grant (showing the placeholder), then freed. */
    CK(cuMemAlloc(&x, BIG_BYTES));
    CK(cuMemAlloc(&y, SMALL_BYTES));
    s = ht_stats(0);
    assert_int_equal(s.mem_reserved, BIG_BYTES + CHUNK_BYTES);
    assert_true(mapped_at(x) && mapped_at(y)); /* the placeholder */
    CK(cuMemFree(x));
    CK(cuMemFree(y));
    s = ht_stats(0);
    assert_int_equal(s.mem_reserved, 0);
    assert_int_equal(s.mem_used, 0);
    nothing_mapped_at(x);
    nothing_mapped_at(y);
    assert_int_equal(mock_count(mock, CS_MSG_ACQUIRE), acquires); /* none of it needed the GPU */
    assert_int_equal(s.state, CUSHARE_LEASE_IDLE);
    free_memory_back(free0);

    /* New allocations work, placed at the next grant. */
    mock_set_auto_grant(mock, true);
    CK(cuMemAlloc(&x, BIG_BYTES));
    CK(cuMemAlloc(&y, SMALL_BYTES));
    CK(fck_fill32(0, x, BIG_BYTES / 4, 2));
    CK(fck_fill32(0, y, SMALL_BYTES / 4, 3));
    assert_int_equal(ht_device_sum(x, BIG_BYTES / 4), 2ull * (BIG_BYTES / 4));
    assert_int_equal(ht_device_sum(y, SMALL_BYTES / 4), 3ull * (SMALL_BYTES / 4));
    CK(cuMemFree(x));
    CK(cuMemFree(y));
    assert_int_equal(ht_stats(0).mem_used, 0);
    free_memory_back(free0);
}

/* ---- d. a call made while a segment moves ---------------------------------- */

#define D_BYTES (64 * MiB)

/* Giving the device access to host memory takes time (9.5 ms/GiB on an
 * H100; FAKECUDA_HOSTMAP_GBPS=0.1 here: 0.67 s for D_BYTES), and until it
 * is done the address is not valid for the driver. A swap-out leaves
 * that to the pinner, after its RELEASE: a call that checks the address
 * meanwhile fails in the driver, and the hook's wrapper (class retried)
 * makes it again once the move is over. Simulated GPU only: on a real
 * one the moment is too short to be sure of reaching it. */
static void call_during_a_move_waits_for_it(void **state)
{
    (void)state;
    if (!simulated())
        skip();
    CUdeviceptr z;
    CK(cuMemAlloc(&z, D_BYTES));
    CK(fck_fill32(0, z, D_BYTES / 4, 4));
    CK(cuCtxSynchronize());
    assert_int_equal(ht_stats(0).state, CUSHARE_LEASE_HELD);
    /* Only the RELEASE is waited for: asking the hook for its statistics
     * would wait for the move (they are read under the segment lock). */
    struct cs_msg_release rel;
    assert_true(mock_revoke_wait(mock, 0, CS_ALL_BYTES, &rel));
    assert_true(rel.swapped_bytes >= D_BYTES);
    CUgraph g;
    CK(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS m = {.dst = z, .value = 1, .elementSize = 4, .width = D_BYTES / 4,
                                 .height = 1};
    CUresult (*add)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                    const CUDA_MEMSET_NODE_PARAMS *, CUcontext);
    *(void **)&add = ht_unhooked("cuGraphAddMemsetNode");
    CUgraphNode n;
    /* The driver itself: the backing is not shown yet. */
    assert_int_equal(add(&n, g, NULL, 0, &m, ctx), CUDA_ERROR_INVALID_VALUE);
    /* Through the hook: waits for the move, then passes. */
    CK(cuGraphAddMemsetNode(&n, g, NULL, 0, &m, ctx));
    /* It returned after the move: the driver itself now agrees. */
    CK(add(&n, g, NULL, 0, &m, ctx));
    CK(cuGraphDestroy(g));
    assert_true(ht_stats(0).mem_swapped >= D_BYTES);
    CK(cuMemFree(z));
}

int main(int argc, char **argv)
{
    /* Read by the simulated driver at cuInit, in the re-executed test. */
    setenv("FAKECUDA_HOSTMAP_GBPS", "0.1", 0);
    mock = ht_mock_preload(argc, argv);
    mock_set_auto_grant(mock, false); /* the test grants, when it says so */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(graphs_before_the_first_grant),
        cmocka_unit_test(graphs_while_swapped_out),
        cmocka_unit_test(freeing_off_the_gpu_leaves_nothing_mapped),
        cmocka_unit_test(call_during_a_move_waits_for_it),
    };
    int rc = cmocka_run_group_tests(tests, setup, NULL);
    mock_stop(mock);
    return rc;
}
