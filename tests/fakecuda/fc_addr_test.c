/* fc_addr_test: the simulated driver checks addresses in calls that submit
 * no work as the real one does, for four kinds of address (measured on an
 * H100 by bench/gpu/addr_probe.c; docs/fakecuda.md):
 *   DEV   cuMemAlloc memory
 *   NONE  a reserved VMM range with nothing mapped
 *   HOST  HOST-located cuMemCreate memory mapped with device access
 *   VDEV  DEVICE-located cuMemCreate memory mapped likewise
 * Graph nodes (creation, parameters, instantiated graphs, updates), stream
 * capture, texture objects, pointer calls. And explicit graphs run: their
 * dependencies respected, updated parameters used on relaunch, whatever is
 * mapped at launch written; HOST-located memory is the same bytes through
 * every mapping, for copies and kernels, and is not charged. */
#include "fc_testutil.h"

#include <stdlib.h>
#include <string.h>

#define G (2 * MiB)
#define SZ G
#define WORDS (SZ / 4)

enum kind { DEV, NONE, HOST, VDEV, NKINDS };
static const char *const kname[NKINDS] = { "dev", "none", "host", "vdev" };

/* The addresses of one test: x[kind], and `good`, cuMemAlloc memory. */
struct kinds {
    CUdeviceptr x[NKINDS], good;
    CUmemGenericAllocationHandle hh, dh;
};

static CUmemGenericAllocationHandle create(bool host, size_t size)
{
    CUmemAllocationProp p = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = { host ? CU_MEM_LOCATION_TYPE_HOST
                                                 : CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
    CUmemGenericAllocationHandle h;
    CK(cuMemCreate(&h, size, &p, 0));
    return h;
}

static void map_rw(CUdeviceptr va, size_t size, size_t offset, CUmemGenericAllocationHandle h)
{
    CK(cuMemMap(va, size, offset, h, 0));
    CUmemAccessDesc a = { .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 },
                          .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CK(cuMemSetAccess(va, size, &a, 1));
}

static void kinds_make(struct kinds *k)
{
    CK(cuMemAlloc(&k->good, SZ));
    CK(cuMemAlloc(&k->x[DEV], SZ));
    for (int i = NONE; i < NKINDS; i++)
        CK(cuMemAddressReserve(&k->x[i], SZ, 0, 0, 0));
    k->hh = create(true, SZ);
    k->dh = create(false, SZ);
    map_rw(k->x[HOST], SZ, 0, k->hh);
    map_rw(k->x[VDEV], SZ, 0, k->dh);
}

/* cuMemAlloc memory goes with the context (teardown resets it). */
static void kinds_free(struct kinds *k)
{
    CK(cuCtxSynchronize());
    CK(cuMemUnmap(k->x[HOST], SZ));
    CK(cuMemUnmap(k->x[VDEV], SZ));
    CK(cuMemRelease(k->hh));
    CK(cuMemRelease(k->dh));
    for (int i = NONE; i < NKINDS; i++)
        CK(cuMemAddressFree(k->x[i], SZ));
}

/* What the real driver answers when only a mapping is needed. */
static CUresult mapped(int kind)
{
    return kind == NONE ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}

static CUDA_MEMCPY3D copy_params(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return fck_copy_params(dst, src, n);
}

static CUDA_MEMSET_NODE_PARAMS set_params(CUdeviceptr dst, size_t words, unsigned v)
{
    CUDA_MEMSET_NODE_PARAMS m = { .dst = dst, .value = v, .elementSize = 4, .width = words,
                                  .height = 1 };
    return m;
}

/* A kernel node's parameters for fc_fill32/fc_add32(p, n, v); the
 * argument storage is the caller's. */
struct kargs {
    CUdeviceptr p;
    uint64_t n;
    uint32_t v;
    void *ptrs[3];
};

static CUDA_KERNEL_NODE_PARAMS kernel_params(CUfunction f, struct kargs *a, CUdeviceptr p,
                                             uint64_t n, uint32_t v)
{
    a->p = p;
    a->n = n;
    a->v = v;
    a->ptrs[0] = &a->p;
    a->ptrs[1] = &a->n;
    a->ptrs[2] = &a->v;
    CUDA_KERNEL_NODE_PARAMS k = { .func = f, .gridDimX = 64, .gridDimY = 1, .gridDimZ = 1,
                                  .blockDimX = 256, .blockDimY = 1, .blockDimZ = 1,
                                  .kernelParams = a->ptrs };
    return k;
}

static bool all_words(CUdeviceptr p, size_t words, uint32_t v)
{
    uint32_t *h = malloc(words * 4);
    assert_non_null(h);
    CK(cuMemcpyDtoH(h, p, words * 4));
    bool ok = true;
    for (size_t i = 0; i < words; i++)
        ok &= h[i] == v;
    free(h);
    return ok;
}

static void launch_sync(CUgraphExec x)
{
    CK(cuGraphLaunch(x, NULL));
    CK(cuCtxSynchronize());
}

/* ------------------------------------------------------- node creation */

/* Memcpy and memset nodes, on the graph: a mapped address of any kind is
 * accepted, an unmapped one refused, at creation and when set. */
static void test_node_addresses(void **state)
{
    struct kinds k;
    kinds_make(&k);
    for (int i = 0; i < NKINDS; i++) {
        CUdeviceptr x = k.x[i];
        CUgraph g;
        CUgraphNode n, cn, sn;
        CK(cuGraphCreate(&g, 0));
        CUDA_MEMCPY3D c = copy_params(x, k.good, SZ);
        CKR(cuGraphAddMemcpyNode(&n, g, NULL, 0, &c, fct_ctx()), mapped(i));
        c = copy_params(k.good, x, SZ);
        CKR(cuGraphAddMemcpyNode(&n, g, NULL, 0, &c, fct_ctx()), mapped(i));
        CUDA_MEMSET_NODE_PARAMS m = set_params(x, WORDS, 7);
        CKR(cuGraphAddMemsetNode(&n, g, NULL, 0, &m, fct_ctx()), mapped(i));
        CUgraphNodeParams np;
        memset(&np, 0, sizeof np);
        np.type = CU_GRAPH_NODE_TYPE_MEMCPY;
        np.memcpy.copyCtx = fct_ctx();
        np.memcpy.copyParams = copy_params(x, k.good, SZ);
        CKR(cuGraphAddNode(&n, g, NULL, NULL, 0, &np), mapped(i));
        memset(&np, 0, sizeof np);
        np.type = CU_GRAPH_NODE_TYPE_MEMSET;
        np.memset = (CUDA_MEMSET_NODE_PARAMS_v2){ .dst = x, .elementSize = 1, .width = SZ,
                                                   .height = 1, .ctx = fct_ctx() };
        CKR(cuGraphAddNode(&n, g, NULL, NULL, 0, &np), mapped(i));
        size_t count = 0;
        CK(cuGraphGetNodes(g, NULL, &count));
        assert_int_equal(count, i == NONE ? 0 : 5);    /* a refused node is not added */
        /* Setting parameters on existing nodes. */
        c = copy_params(k.good + SZ / 2, k.good, SZ / 2);
        CK(cuGraphAddMemcpyNode(&cn, g, NULL, 0, &c, fct_ctx()));
        m = set_params(k.good, WORDS, 1);
        CK(cuGraphAddMemsetNode(&sn, g, NULL, 0, &m, fct_ctx()));
        c = copy_params(x, k.good, SZ);
        CKR(cuGraphMemcpyNodeSetParams(cn, &c), mapped(i));
        m = set_params(x, WORDS, 3);
        CKR(cuGraphMemsetNodeSetParams(sn, &m), mapped(i));
        memset(&np, 0, sizeof np);
        np.type = CU_GRAPH_NODE_TYPE_MEMCPY;
        np.memcpy.copyCtx = fct_ctx();
        np.memcpy.copyParams = copy_params(k.good, x, SZ);
        CKR(cuGraphNodeSetParams(cn, &np), mapped(i));
        CUDA_MEMCPY3D got;
        CK(cuGraphMemcpyNodeGetParams(cn, &got));
        assert_int_equal(got.srcDevice, i == NONE ? k.good : x);   /* a refused set changes nothing */
        CK(cuGraphDestroy(g));
    }
    kinds_free(&k);
}

/* On an instantiated graph: a memcpy operand must be of the kind the node
 * had when it was created or set (the exec's copy of it): here cuMemAlloc
 * memory, so HOST and VDEV are refused too; memsets need a mapping only.
 * cuGraphExecUpdate from a graph whose node now names another kind fails
 * (PARAMETERS_CHANGED) and changes nothing. */
static void test_exec_addresses(void **state)
{
    struct kinds k;
    kinds_make(&k);
    for (int i = 0; i < NKINDS; i++) {
        CUdeviceptr x = k.x[i];
        CUgraph g;
        CUgraphNode cn, sn;
        CUgraphExec ex;
        CK(cuGraphCreate(&g, 0));
        CUDA_MEMCPY3D c = copy_params(k.good + SZ / 2, k.good, SZ / 2);
        CK(cuGraphAddMemcpyNode(&cn, g, NULL, 0, &c, fct_ctx()));
        CUDA_MEMSET_NODE_PARAMS m = set_params(k.good, WORDS, 1);
        CK(cuGraphAddMemsetNode(&sn, g, NULL, 0, &m, fct_ctx()));
        CK(cuGraphInstantiate(&ex, g, 0));
        c = copy_params(x, k.good, SZ);
        CKR(cuGraphExecMemcpyNodeSetParams(ex, cn, &c, fct_ctx()),
            i == DEV ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
        m = set_params(x, WORDS, 3);
        CKR(cuGraphExecMemsetNodeSetParams(ex, sn, &m, fct_ctx()), mapped(i));
        CUgraphNodeParams np;
        memset(&np, 0, sizeof np);
        np.type = CU_GRAPH_NODE_TYPE_MEMCPY;
        np.memcpy.copyCtx = fct_ctx();
        np.memcpy.copyParams = copy_params(x, k.good, SZ);
        CKR(cuGraphExecNodeSetParams(ex, cn, &np), i == DEV ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
        CKR(cuGraphNodeSetParams(cn, &np), mapped(i));
        CUgraphExecUpdateResultInfo ui;
        bool differs = i == HOST || i == VDEV;
        CKR(cuGraphExecUpdate(ex, g, &ui),
            differs ? CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE : CUDA_SUCCESS);
        assert_int_equal(ui.result, differs ? CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED
                                            : CU_GRAPH_EXEC_UPDATE_SUCCESS);
        assert_ptr_equal(ui.errorNode, differs ? cn : NULL);
        CK(cuGraphExecDestroy(ex));
        CK(cuGraphDestroy(g));
        /* A node made on x: x again is fine, cuMemAlloc memory is not,
         * unless x is cuMemAlloc memory itself. */
        CK(cuGraphCreate(&g, 0));
        c = copy_params(x, k.good, SZ / 2);
        CKR(cuGraphAddMemcpyNode(&cn, g, NULL, 0, &c, fct_ctx()), mapped(i));
        CK(cuGraphInstantiate(&ex, g, 0));
        c = copy_params(x + SZ / 2, k.good, SZ / 2);
        CKR(cuGraphExecMemcpyNodeSetParams(ex, cn, &c, fct_ctx()), mapped(i));
        c = copy_params(k.good + SZ / 2, k.good, SZ / 2);
        CKR(cuGraphExecMemcpyNodeSetParams(ex, cn, &c, fct_ctx()),
            i == DEV ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
        CK(cuGraphExecDestroy(ex));
        CK(cuGraphDestroy(g));
    }
    kinds_free(&k);
}

/* The kind is fixed when the node is created or set, not at
 * instantiation (the probe's "update:" lines): one range remapped between
 * host- and device-located memory. */
static void test_kind_fixed_at_creation(void **state)
{
    struct kinds k;
    kinds_make(&k);
    CUdeviceptr va = k.x[HOST], good = k.good;
    CUgraph g;
    CUgraphNode n;
    CUgraphExec ex;
    CUgraphExecUpdateResultInfo ui;
    CK(cuGraphCreate(&g, 0));
    CUDA_MEMCPY3D c = copy_params(va, good, SZ / 2);
    CK(cuGraphAddMemcpyNode(&n, g, NULL, 0, &c, fct_ctx()));     /* va on host now */
    CK(cuMemUnmap(va, SZ));
    map_rw(va, SZ, 0, k.dh);
    CK(cuGraphInstantiate(&ex, g, 0));
    c = copy_params(va + SZ / 2, good, SZ / 2);
    CKR(cuGraphExecMemcpyNodeSetParams(ex, n, &c, fct_ctx()), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphExecUpdate(ex, g, &ui));
    CK(cuGraphExecDestroy(ex));
    CK(cuGraphMemcpyNodeSetParams(n, &c));                         /* re-set on device memory */
    CK(cuGraphInstantiate(&ex, g, 0));
    CK(cuMemUnmap(va, SZ));
    map_rw(va, SZ, 0, k.hh);
    c = copy_params(va, good, SZ / 2);
    CKR(cuGraphExecMemcpyNodeSetParams(ex, n, &c, fct_ctx()), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphExecUpdate(ex, g, &ui));
    CK(cuGraphExecDestroy(ex));
    CK(cuGraphInstantiate(&ex, g, 0));                             /* instantiated on host */
    CK(cuMemUnmap(va, SZ));
    map_rw(va, SZ, 0, k.dh);
    c = copy_params(va + SZ / 2, good, SZ / 2);
    CK(cuGraphExecMemcpyNodeSetParams(ex, n, &c, fct_ctx()));
    CK(cuGraphExecDestroy(ex));
    CK(cuGraphDestroy(g));
    CK(cuMemUnmap(va, SZ));
    map_rw(va, SZ, 0, k.hh);
    kinds_free(&k);
}

/* Capture: a copy on an unmapped address fails at the call, a memset is
 * recorded unchecked (its launch then faults, sticky like any fault). A
 * captured copy is a memcpy node with the kinds it had when captured. */
static void test_capture_addresses(void **state)
{
    struct kinds k;
    kinds_make(&k);
    CUstream s;
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < NKINDS; i++) {
        if (i == NONE)
            continue;
        CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
        CK(cuMemcpyDtoDAsync(k.x[i], k.good, SZ, s));
        CK(cuMemsetD8Async(k.x[i], 5, SZ, s));
        CUgraph g;
        CK(cuStreamEndCapture(s, &g));
        CUgraphNode nodes[2];
        size_t count = 2;
        CK(cuGraphGetNodes(g, nodes, &count));
        assert_int_equal(count, 2);
        CUgraphNodeType t;
        CK(cuGraphNodeGetType(nodes[0], &t));
        assert_int_equal(t, CU_GRAPH_NODE_TYPE_MEMCPY);
        CK(cuGraphNodeGetType(nodes[1], &t));
        assert_int_equal(t, CU_GRAPH_NODE_TYPE_MEMSET);
        CUDA_MEMCPY3D c;
        CK(cuGraphMemcpyNodeGetParams(nodes[0], &c));
        assert_int_equal(c.dstDevice, k.x[i]);
        assert_int_equal(c.WidthInBytes, SZ);
        CUDA_MEMSET_NODE_PARAMS m;
        CK(cuGraphMemsetNodeGetParams(nodes[1], &m));
        assert_int_equal(m.dst, k.x[i]);
        assert_int_equal(m.value, 5);
        CUgraphExec ex;
        CK(cuGraphInstantiate(&ex, g, 0));
        c = copy_params(k.good + SZ / 2, k.good, SZ / 2);
        CKR(cuGraphExecMemcpyNodeSetParams(ex, nodes[0], &c, fct_ctx()),
            i == DEV ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
        CK(cuGraphExecDestroy(ex));
        CK(cuGraphDestroy(g));
    }
    kinds_free(&k);
    /* Nothing mapped (a fresh reservation): last, as it faults the context. */
    CUdeviceptr none;
    CK(cuMemAddressReserve(&none, SZ, 0, 0, 0));
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CKR(cuMemcpyDtoDAsync(none, k.good, SZ, s), CUDA_ERROR_INVALID_VALUE);
    CK(cuMemsetD8Async(none, 5, SZ, s));
    CUgraph g;
    CK(cuStreamEndCapture(s, &g));
    size_t count = 0;
    CK(cuGraphGetNodes(g, NULL, &count));
    assert_int_equal(count, 1);
    CUgraphExec ex;
    CK(cuGraphInstantiate(&ex, g, 0));
    CK(cuGraphLaunch(ex, s));
    CKR(cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
    CK(cuGraphExecDestroy(ex));
    CK(cuGraphDestroy(g));
    CK(cuStreamDestroy(s));
    CK(cuMemAddressFree(none, SZ));
}

/* ------------------------------------------------------------ textures */

static CUDA_RESOURCE_DESC linear_res(CUdeviceptr p, CUarray_format f, unsigned ch, size_t size)
{
    CUDA_RESOURCE_DESC r;
    memset(&r, 0, sizeof r);
    r.resType = CU_RESOURCE_TYPE_LINEAR;
    r.res.linear.devPtr = p;
    r.res.linear.format = f;
    r.res.linear.numChannels = ch;
    r.res.linear.sizeInBytes = size;
    return r;
}

static CUDA_RESOURCE_DESC pitch_res(CUdeviceptr p, unsigned ch, size_t w, size_t h, size_t pitch)
{
    CUDA_RESOURCE_DESC r;
    memset(&r, 0, sizeof r);
    r.resType = CU_RESOURCE_TYPE_PITCH2D;
    r.res.pitch2D.devPtr = p;
    r.res.pitch2D.format = CU_AD_FORMAT_UNSIGNED_INT32;
    r.res.pitch2D.numChannels = ch;
    r.res.pitch2D.width = w;
    r.res.pitch2D.height = h;
    r.res.pitch2D.pitchInBytes = pitch;
    return r;
}

/* The device address of a linear resource is never checked; the
 * descriptors are. */
static void test_texture_objects(void **state)
{
    struct kinds k;
    kinds_make(&k);
    CUDA_TEXTURE_DESC td;
    memset(&td, 0, sizeof td);
    CUtexObject t;
    for (int i = 0; i < NKINDS; i++) {
        CUDA_RESOURCE_DESC rd = linear_res(k.x[i], CU_AD_FORMAT_UNSIGNED_INT32, 1, SZ);
        CK(cuTexObjectCreate(&t, &rd, &td, NULL));
        CK(cuTexObjectDestroy(t));
        rd = pitch_res(k.x[i], 1, 256, 256, 1024);
        CK(cuTexObjectCreate(&t, &rd, &td, NULL));
        CK(cuTexObjectDestroy(t));
    }
    CKR(cuTexObjectDestroy(t), CUDA_ERROR_INVALID_VALUE);
    CUDA_RESOURCE_DESC bad[] = {
        linear_res(k.good, CU_AD_FORMAT_FLOAT, 3, SZ),       /* 3 channels */
        linear_res(k.good, CU_AD_FORMAT_FLOAT, 1, 0),        /* no size */
        linear_res(k.good, (CUarray_format)0x77, 1, SZ),     /* no such format */
        pitch_res(k.good, 2, 256, 256, 2047),                /* pitch < 256 x 8 */
        pitch_res(k.good, 1, 0, 256, 1024),
        pitch_res(k.good, 1, 256, 0, 1024),
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CKR(cuTexObjectCreate(&t, &bad[i], &td, NULL), CUDA_ERROR_INVALID_VALUE);
    CUDA_RESOURCE_DESC rd = linear_res(k.good, CU_AD_FORMAT_NV12, 1, SZ);
    CKR(cuTexObjectCreate(&t, &rd, &td, NULL), CUDA_ERROR_NOT_SUPPORTED);
    rd = pitch_res(k.good, 2, 256, 256, 2048);
    rd.flags = 1;
    CKR(cuTexObjectCreate(&t, &rd, &td, NULL), CUDA_ERROR_INVALID_VALUE);
    rd.flags = 0;
    CUDA_RESOURCE_VIEW_DESC view;
    memset(&view, 0, sizeof view);
    CKR(cuTexObjectCreate(&t, &rd, &td, &view), CUDA_ERROR_INVALID_VALUE);
    td.addressMode[1] = (CUaddress_mode)9;
    CKR(cuTexObjectCreate(&t, &rd, &td, NULL), CUDA_ERROR_INVALID_VALUE);
    td.addressMode[1] = CU_TR_ADDRESS_MODE_CLAMP;
    td.filterMode = CU_TR_FILTER_MODE_LINEAR;
    CK(cuTexObjectCreate(&t, &rd, &td, NULL));
    CUDA_RESOURCE_DESC back;
    CUDA_TEXTURE_DESC tback;
    CK(cuTexObjectGetResourceDesc(&back, t));
    assert_memory_equal(&back, &rd, sizeof rd);
    CK(cuTexObjectGetTextureDesc(&tback, t));
    assert_memory_equal(&tback, &td, sizeof td);
    CK(cuTexObjectDestroy(t));
    CKR(cuTexObjectGetResourceDesc(&back, t), CUDA_ERROR_INVALID_VALUE);
    /* Arrays are not simulated: no resource can name one, so no surface. */
    memset(&rd, 0, sizeof rd);
    rd.resType = CU_RESOURCE_TYPE_ARRAY;
    CKR(cuTexObjectCreate(&t, &rd, &td, NULL), CUDA_ERROR_INVALID_VALUE);
    rd.res.array.hArray = (CUarray)&rd;
    CKR(cuTexObjectCreate(&t, &rd, &td, NULL), CUDA_ERROR_INVALID_HANDLE);
    CUsurfObject sf;
    CKR(cuSurfObjectCreate(&sf, &rd), CUDA_ERROR_INVALID_HANDLE);
    rd = linear_res(k.good, CU_AD_FORMAT_FLOAT, 1, SZ);
    CKR(cuSurfObjectCreate(&sf, &rd), CUDA_ERROR_INVALID_VALUE);  /* arrays only */
    CKR(cuSurfObjectDestroy(1), CUDA_ERROR_INVALID_VALUE);
    kinds_free(&k);
}

/* Texture objects belong to their context. */
static void test_texture_goes_with_context(void **state)
{
    CUdeviceptr p;
    CK(cuMemAlloc(&p, SZ));
    CUDA_RESOURCE_DESC rd = linear_res(p, CU_AD_FORMAT_UNSIGNED_INT8, 4, SZ);
    CUDA_TEXTURE_DESC td;
    memset(&td, 0, sizeof td);
    CUtexObject t;
    CK(cuTexObjectCreate(&t, &rd, &td, NULL));
    CK(cuDevicePrimaryCtxReset(0));
    CKR(cuTexObjectDestroy(t), CUDA_ERROR_INVALID_VALUE);
    CKR(cuTexObjectCreate(&t, &rd, &td, NULL), CUDA_ERROR_INVALID_CONTEXT);
}

/* -------------------------------------------------------------- pointers */

static void test_pointer_calls(void **state)
{
    struct kinds k;
    kinds_make(&k);
    static const CUresult sync_memops[NKINDS] = {
        CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_NOT_SUPPORTED
    };
    static const unsigned memtype[NKINDS] = { CU_MEMORYTYPE_DEVICE, 0, CU_MEMORYTYPE_HOST,
                                              CU_MEMORYTYPE_DEVICE };
    CUmemLocation loc = { CU_MEM_LOCATION_TYPE_DEVICE, 0 };
    for (int i = 0; i < NKINDS; i++) {
        CUdeviceptr x = k.x[i];
        print_message("kind %s\n", kname[i]);
        unsigned one = 1, type = 0;
        CKR(cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, x), sync_memops[i]);
        CKR(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, x + 64), mapped(i));
        assert_int_equal(type, memtype[i]);
        CUdeviceptr base = 0;
        size_t size = 0;
        CKR(cuMemGetAddressRange(&base, &size, x + 64),
            i == NONE ? CUDA_ERROR_NOT_FOUND : CUDA_SUCCESS);
        assert_int_equal(base, i == NONE ? 0 : x);
        assert_int_equal(size, i == NONE ? 0 : SZ);
        CUmemGenericAllocationHandle h = 0;
        CKR(cuMemRetainAllocationHandle(&h, (void *)x),
            i == HOST || i == VDEV ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
        if (i == HOST || i == VDEV) {
            assert_int_equal(h, i == HOST ? k.hh : k.dh);
            CK(cuMemRelease(h));
        }
        unsigned long long flags = 0;
        CKR(cuMemGetAccess(&flags, &loc, x), mapped(i));
        assert_int_equal(flags, i == NONE ? 0 : CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
        CUipcMemHandle ih;
        CKR(cuIpcGetMemHandle(&ih, x), i == DEV ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
        CKR(cuMemAdvise(x, SZ, CU_MEM_ADVISE_SET_READ_MOSTLY, loc), CUDA_ERROR_INVALID_VALUE);
        int rm = 0;
        CKR(cuMemRangeGetAttribute(&rm, sizeof rm, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, x, SZ),
            CUDA_ERROR_INVALID_VALUE);
        CKR(cuMemPrefetchAsync(x, SZ, loc, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    }
    /* Managed memory answers as before: hints are not simulated. */
    CUdeviceptr m;
    CK(cuMemAllocManaged(&m, SZ, CU_MEM_ATTACH_GLOBAL));
    CKR(cuMemAdvise(m, SZ, CU_MEM_ADVISE_SET_READ_MOSTLY, loc), CUDA_ERROR_NOT_SUPPORTED);
    CKR(cuMemAdvise(m, SZ + 1, CU_MEM_ADVISE_SET_READ_MOSTLY, loc), CUDA_ERROR_INVALID_VALUE);
    CKR(cuMemPrefetchAsync(m, SZ, loc, 0, NULL), CUDA_ERROR_NOT_SUPPORTED);
    CK(cuMemFree(m));
    kinds_free(&k);
}

/* -------------------------------------------------- explicit graphs run */

/* memset -> fill32 -> add32 -> memcpy, plus an empty node after the
 * memset, created in the reverse order and wired afterwards, so only the
 * dependencies make the result right. Returns the nodes. */
struct chain {
    CUgraph g;
    CUgraphNode set, fill, add, copy, empty;
    struct kargs fa, aa;
};

static void chain_build(struct chain *c, CUdeviceptr p, CUdeviceptr q)
{
    CK(cuGraphCreate(&c->g, 0));
    CUDA_MEMCPY3D cp = copy_params(q, p, SZ);
    CK(cuGraphAddMemcpyNode(&c->copy, c->g, NULL, 0, &cp, fct_ctx()));
    CUDA_KERNEL_NODE_PARAMS kp = kernel_params(fct_kernels.add32, &c->aa, p, WORDS, 3);
    CK(cuGraphAddKernelNode(&c->add, c->g, NULL, 0, &kp));
    kp = kernel_params(fct_kernels.fill32, &c->fa, p, WORDS, 7);
    CK(cuGraphAddKernelNode(&c->fill, c->g, NULL, 0, &kp));
    CUDA_MEMSET_NODE_PARAMS m = set_params(p, WORDS, 1);
    CK(cuGraphAddMemsetNode(&c->set, c->g, NULL, 0, &m, fct_ctx()));
    CK(cuGraphAddEmptyNode(&c->empty, c->g, &c->set, 1));
    CUgraphNode from[] = { c->empty, c->fill, c->add }, to[] = { c->fill, c->add, c->copy };
    CK(cuGraphAddDependencies(c->g, from, to, NULL, 3));
}

static void test_explicit_graph(void **state)
{
    CUdeviceptr p, q;
    CK(cuMemAlloc(&p, SZ));
    CK(cuMemAlloc(&q, SZ));
    CK(cuMemsetD32(q, 0, WORDS));
    struct chain c;
    chain_build(&c, p, q);
    size_t count = 0;
    CK(cuGraphGetNodes(c.g, NULL, &count));
    assert_int_equal(count, 5);
    CUgraphNodeType t;
    CK(cuGraphNodeGetType(c.empty, &t));
    assert_int_equal(t, CU_GRAPH_NODE_TYPE_EMPTY);
    CK(cuGraphNodeGetType(c.add, &t));
    assert_int_equal(t, CU_GRAPH_NODE_TYPE_KERNEL);
    CUDA_KERNEL_NODE_PARAMS kp;
    CK(cuGraphKernelNodeGetParams(c.add, &kp));
    assert_ptr_equal(kp.func, fct_kernels.add32);
    assert_int_equal(*(uint32_t *)kp.kernelParams[2], 3);         /* the node's own copy */
    CUDA_MEMSET_NODE_PARAMS m;
    CK(cuGraphMemsetNodeGetParams(c.set, &m));
    assert_int_equal(m.dst, p);
    CKR(cuGraphMemsetNodeGetParams(c.add, &m), CUDA_ERROR_INVALID_VALUE);  /* wrong type */
    /* The CUDA 10 forms take the shorter parameter structure. */
    CUresult (*get_v1)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS_v1 *) =
        fct_proc("cuGraphKernelNodeGetParams", 11000, 0);
    CUresult (*set_v1)(CUgraphNode, const CUDA_KERNEL_NODE_PARAMS_v1 *) =
        fct_proc("cuGraphKernelNodeSetParams", 11000, 0);
    assert_non_null(get_v1);
    assert_non_null(set_v1);
    CUDA_KERNEL_NODE_PARAMS_v1 k1;
    CK(get_v1(c.fill, &k1));
    assert_ptr_equal(k1.func, fct_kernels.fill32);
    assert_int_equal(k1.gridDimX, 64);
    CK(set_v1(c.fill, &k1));
    k1.blockDimX = 2048;                                           /* > 1024 threads */
    CKR(set_v1(c.fill, &k1), CUDA_ERROR_INVALID_VALUE);
    CUgraphExec ex;
    CK(cuGraphInstantiate(&ex, c.g, 0));
    launch_sync(ex);
    assert_true(all_words(q, WORDS, 10));
    launch_sync(ex);                                               /* replays */
    assert_true(all_words(q, WORDS, 10));
    CK(cuGraphExecDestroy(ex));
    /* Edges: no duplicate, no self edge, no node of another graph; a cycle
     * fails instantiation. */
    CKR(cuGraphAddDependencies(c.g, &c.fill, &c.add, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    CKR(cuGraphAddDependencies(c.g, &c.add, &c.add, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    CUgraph other;
    CUgraphNode stranger;
    CK(cuGraphCreate(&other, 0));
    CK(cuGraphAddEmptyNode(&stranger, other, NULL, 0));
    CKR(cuGraphAddDependencies(c.g, &stranger, &c.add, NULL, 1), CUDA_ERROR_INVALID_VALUE);
    CKR(cuGraphAddEmptyNode(&stranger, other, &c.add, 1), CUDA_ERROR_INVALID_VALUE);
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_HOST;
    CKR(cuGraphAddNode(&stranger, other, NULL, NULL, 0, &np), CUDA_ERROR_NOT_SUPPORTED);
    CK(cuGraphDestroy(other));
    CK(cuGraphAddDependencies(c.g, &c.copy, &c.set, NULL, 1));
    CKR(cuGraphInstantiate(&ex, c.g, 0), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphDestroy(c.g));
    CK(cuMemFree(p));
    CK(cuMemFree(q));
}

/* Parameters changed on the instantiated graph, then from an updated
 * graph, are what the relaunch uses; updates across a topology or a node
 * type change fail and change nothing. */
static void test_exec_update_relaunch(void **state)
{
    CUdeviceptr p, q, q2;
    CK(cuMemAlloc(&p, SZ));
    CK(cuMemAlloc(&q, SZ));
    CK(cuMemAlloc(&q2, SZ));
    CK(cuMemsetD32(q2, 0, WORDS));
    struct chain c;
    chain_build(&c, p, q);
    CUgraphExec ex;
    CK(cuGraphInstantiate(&ex, c.g, 0));
    launch_sync(ex);
    assert_true(all_words(q, WORDS, 10));
    /* Exec-only changes: fill 20, add 5 (the v2 form), copy into q2. */
    struct kargs a1, a2;
    CUDA_KERNEL_NODE_PARAMS kp = kernel_params(fct_kernels.fill32, &a1, p, WORDS, 20);
    CK(cuGraphExecKernelNodeSetParams(ex, c.fill, &kp));
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_KERNEL;
    kp = kernel_params(fct_kernels.add32, &a2, p, WORDS, 5);
    memcpy(&np.kernel, &kp, sizeof kp);
    CK(cuGraphExecNodeSetParams(ex, c.add, &np));
    a2.v = 99;                                   /* copied at the call, not read later */
    CUDA_MEMCPY3D cp = copy_params(q2, p, SZ);
    CK(cuGraphExecMemcpyNodeSetParams(ex, c.copy, &cp, fct_ctx()));
    CUDA_MEMSET_NODE_PARAMS m = set_params(p, WORDS, 0);
    CK(cuGraphExecMemsetNodeSetParams(ex, c.set, &m, fct_ctx()));
    CKR(cuGraphExecMemsetNodeSetParams(ex, c.add, &m, fct_ctx()), CUDA_ERROR_INVALID_VALUE);
    launch_sync(ex);
    assert_true(all_words(q2, WORDS, 25));
    assert_true(all_words(q, WORDS, 10));                          /* untouched */
    /* The graph itself was not changed: an update brings its parameters
     * back (add 3 into q), then a changed graph node's. */
    CUgraphExecUpdateResultInfo ui;
    CK(cuGraphExecUpdate(ex, c.g, &ui));
    assert_int_equal(ui.result, CU_GRAPH_EXEC_UPDATE_SUCCESS);
    CK(cuMemsetD32(q, 0, WORDS));
    launch_sync(ex);
    assert_true(all_words(q, WORDS, 10));
    struct kargs a3;
    kp = kernel_params(fct_kernels.add32, &a3, p, WORDS, 100);
    CK(cuGraphKernelNodeSetParams(c.add, &kp));
    CK(cuGraphExecUpdate(ex, c.g, &ui));
    launch_sync(ex);
    assert_true(all_words(q, WORDS, 107));
    /* A different topology or node type: refused, the exec unchanged. */
    CUgraph g2;
    CUgraphNode e2;
    CK(cuGraphCreate(&g2, 0));
    CK(cuGraphAddEmptyNode(&e2, g2, NULL, 0));
    CKR(cuGraphExecUpdate(ex, g2, &ui), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    assert_int_equal(ui.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    assert_null(ui.errorNode);
    CK(cuGraphDestroy(g2));
    CK(cuGraphCreate(&g2, 0));                  /* the chain with a kernel for the memset */
    struct kargs a4;
    kp = kernel_params(fct_kernels.fill32, &a4, p, WORDS, 1);
    CUgraphNode k0, k1, k2, k3;
    CK(cuGraphAddKernelNode(&k0, g2, NULL, 0, &kp));
    CK(cuGraphAddEmptyNode(&e2, g2, &k0, 1));
    CK(cuGraphAddKernelNode(&k1, g2, &e2, 1, &kp));
    CK(cuGraphAddKernelNode(&k2, g2, &k1, 1, &kp));
    cp = copy_params(q, p, SZ);
    CK(cuGraphAddMemcpyNode(&k3, g2, &k2, 1, &cp, fct_ctx()));
    CKR(cuGraphExecUpdate(ex, g2, &ui), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    assert_int_equal(ui.result, CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED);
    assert_ptr_equal(ui.errorNode, k0);
    CKR(cuGraphExecKernelNodeSetParams(ex, k1, &kp), CUDA_ERROR_INVALID_VALUE);  /* not ex's */
    CK(cuGraphDestroy(g2));
    CK(cuMemsetD32(q, 0, WORDS));
    launch_sync(ex);
    assert_true(all_words(q, WORDS, 107));
    CK(cuGraphExecDestroy(ex));
    CKR(cuGraphExecMemsetNodeSetParams(ex, c.set, &m, fct_ctx()), CUDA_ERROR_INVALID_VALUE);
    CK(cuGraphDestroy(c.g));
    CK(cuMemFree(p));
    CK(cuMemFree(q));
    CK(cuMemFree(q2));
}

/* ------------------------------------------------ remapping, host memory */

/* Graphs run on whatever is mapped when they are launched: a memset or
 * memcpy node made while the range held host-located memory writes the
 * device-located memory mapped there since, and the other way round (the
 * probe's remap_check). */
static void test_remap_between_launches(void **state)
{
    struct kinds k;
    kinds_make(&k);
    CUdeviceptr va = k.x[HOST];
    CUgraph g;
    CUgraphNode n;
    CUgraphExec ex;
    CK(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS m = set_params(va, WORDS, 0x5a5a5a5a);
    CK(cuGraphAddMemsetNode(&n, g, NULL, 0, &m, fct_ctx()));
    CK(cuGraphInstantiate(&ex, g, 0));
    CK(cuMemUnmap(va, SZ));
    map_rw(va, SZ, 0, k.dh);
    CK(cuMemsetD32(va, 0, WORDS));
    launch_sync(ex);
    assert_true(all_words(va, WORDS, 0x5a5a5a5a));
    CK(cuMemUnmap(va, SZ));
    map_rw(va, SZ, 0, k.hh);
    m = set_params(va, WORDS, 0x33);
    CK(cuGraphExecMemsetNodeSetParams(ex, n, &m, fct_ctx()));
    launch_sync(ex);
    assert_true(all_words(va, WORDS, 0x33));
    CK(cuGraphExecDestroy(ex));
    CK(cuGraphDestroy(g));
    /* memcpy: made on host, run on device; made on device, run on host. */
    CK(cuMemsetD32(k.good, 0x77, WORDS));
    CK(cuGraphCreate(&g, 0));
    CUDA_MEMCPY3D c = copy_params(va, k.good, SZ);
    CK(cuGraphAddMemcpyNode(&n, g, NULL, 0, &c, fct_ctx()));
    CUgraphExec on_host, on_dev;
    CK(cuGraphInstantiate(&on_host, g, 0));
    CK(cuMemUnmap(va, SZ));
    map_rw(va, SZ, 0, k.dh);
    CK(cuGraphInstantiate(&on_dev, g, 0));
    CK(cuMemsetD32(va, 0, WORDS));
    launch_sync(on_host);
    assert_true(all_words(va, WORDS, 0x77));
    CK(cuMemUnmap(va, SZ));
    map_rw(va, SZ, 0, k.hh);
    CK(cuMemsetD32(va, 0, WORDS));
    launch_sync(on_dev);
    assert_true(all_words(va, WORDS, 0x77));
    /* Nothing mapped at launch: a device fault, not a crash. */
    CK(cuMemUnmap(va, SZ));
    CK(cuGraphLaunch(on_dev, NULL));
    CKR(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    CK(cuGraphExecDestroy(on_host));
    CK(cuGraphExecDestroy(on_dev));
    CK(cuGraphDestroy(g));
    CK(cuMemRelease(k.hh));
    CK(cuMemUnmap(k.x[VDEV], SZ));
    CK(cuMemRelease(k.dh));
    for (int i = NONE; i < NKINDS; i++)
        CK(cuMemAddressFree(k.x[i], SZ));
}

/* One HOST-located allocation mapped at two addresses, one of them
 * partially at an offset: copies, memsets and kernels through either see
 * the same bytes; it is not charged to the device. */
static void test_host_memory_mappings(void **state)
{
    size_t f0, f1, t;
    CK(cuMemGetInfo(&f0, &t));
    CUmemGenericAllocationHandle h = create(true, 2 * G);
    CUdeviceptr a, b, out;
    CK(cuMemAddressReserve(&a, 2 * G, 0, 0, 0));
    CK(cuMemAddressReserve(&b, 2 * G, 0, 0, 0));
    map_rw(a, 2 * G, 0, h);
    map_rw(b, 2 * G, 0, h);                             /* a second mapping (whole) */
    CK(cuMemGetInfo(&f1, &t));
    assert_int_equal(f1, f0);
    uint32_t *pat = malloc(G);
    assert_non_null(pat);
    for (size_t i = 0; i < G / 4; i++)
        pat[i] = (uint32_t)(i * 7 + 1);
    CK(cuMemcpyHtoD(a + G, pat, G));
    uint32_t w;
    CK(cuMemcpyDtoH(&w, b + G + 4 * 1000, 4));
    assert_int_equal(w, 7 * 1000 + 1);
    CK(cuMemAlloc(&out, 8));
    CK(cuMemsetD32(out, 0, 2));
    CK(fck_sum32(NULL, b + G, 4, out));                     /* 1 + 8 + 15 + 22 */
    CK(cuCtxSynchronize());
    assert_int_equal(fct_get64(out), 46);
    CK(fck_add32(NULL, b + G, G / 4, 1));
    CK(cuMemsetD32(a, 9, G / 4));
    CK(cuCtxSynchronize());
    assert_int_equal(fct_get32(a + G + 8), 7 * 2 + 2);
    assert_int_equal(fct_get32(a + 8), 9);
    CK(cuMemcpyDtoD(out, a + G + 4, 4));               /* device copy from host memory */
    assert_int_equal(fct_get32(out), 7 + 2);
    CK(cuMemcpy(out, b + G + 12, 4));                       /* unified: found as device memory */
    assert_int_equal(fct_get32(out), 7 * 3 + 2);
    CK(cuMemUnmap(a, 2 * G));
    CK(cuMemUnmap(b, 2 * G));
    CK(cuMemRelease(h));
    CK(cuMemAddressFree(a, 2 * G));
    CK(cuMemAddressFree(b, 2 * G));
    CK(cuMemFree(out));
    free(pat);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_node_addresses, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_exec_addresses, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_kind_fixed_at_creation, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_capture_addresses, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_texture_objects, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_texture_goes_with_context, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_pointer_calls, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_explicit_graph, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_exec_update_relaunch, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_remap_between_launches, fct_setup, fct_teardown),
        cmocka_unit_test_setup_teardown(test_host_memory_mappings, fct_setup, fct_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
