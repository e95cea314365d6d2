/* addr_probe.c: what the real driver does with an address in calls that
 * submit no work, for three kinds of address:
 *   dev    device memory from cuMemAlloc (the native case)
 *   none   a reserved VMM range with nothing mapped (cushare's swapped or
 *          not-yet-placed memory before issue 19)
 *   vdev   a reserved VMM range with DEVICE-located cuMemCreate memory
 *          (cushare's resident memory)
 *   host   a reserved VMM range with HOST-located cuMemCreate memory mapped
 *          and device access granted (cushare's memory while not on the GPU)
 * plus: a graph and a texture object made on host-mapped memory keep
 * working after the range is remapped to device memory (what a swap-in
 * does), and device work on host-mapped memory reads the right data.
 *
 * Ground truth for the simulated driver (src/fakecuda) and for the
 * address column of docs/coverage.md. GPU only, no cushare involved:
 *   gcc -O2 -I$CUDA/include bench/gpu/addr_probe.c -o addr_probe -lcuda
 * Prints one line per call and kind: `call kind result`.
 */
#include "cuprobe.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SZ (4ull << 20)

static CUdevice dev;
static CUcontext ctx;
static CUstream st;
static int failures;

static const char *ename(CUresult r)
{
    const char *n = "?";
    cuGetErrorName(r, &n);
    return n;
}

static void say(const char *call, const char *kind, CUresult r)
{
    printf("%-34s %-5s %s\n", call, kind, ename(r));
}

static void expect(const char *what, int ok)
{
    printf("%-40s %s\n", what, ok ? "ok" : "FAILED");
    failures += !ok;
}

static CUmemGenericAllocationHandle create(int host, size_t sz)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = host ? CU_MEM_LOCATION_TYPE_HOST : CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = host ? 0 : (int)dev;
    CUmemGenericAllocationHandle h;
    CK(cuMemCreate(&h, sz, &p, 0));
    return h;
}

static void map_to(CUdeviceptr va, size_t sz, CUmemGenericAllocationHandle h)
{
    CK(cuMemMap(va, sz, 0, h, 0));
    CUmemAccessDesc a;
    memset(&a, 0, sizeof a);
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = (int)dev;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CK(cuMemSetAccess(va, sz, &a, 1));
}

static CUDA_MEMCPY3D copy_params(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = src;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = dst;
    c.WidthInBytes = n;
    c.Height = 1;
    c.Depth = 1;
    return c;
}

static CUDA_MEMSET_NODE_PARAMS set_params(CUdeviceptr dst, size_t n, unsigned v)
{
    CUDA_MEMSET_NODE_PARAMS m;
    memset(&m, 0, sizeof m);
    m.dst = dst;
    m.value = v;
    m.elementSize = 1;
    m.width = n;
    m.height = 1;
    return m;
}

/* Every non-work call, on address x of the given kind; `good` is device
 * memory of SZ bytes. */
static void probe(const char *kind, CUdeviceptr x, CUdeviceptr good)
{
    CUgraph g;
    CUgraphNode n;
    CK(cuGraphCreate(&g, 0));
    CUDA_MEMCPY3D c = copy_params(x, good, SZ);
    say("cuGraphAddMemcpyNode(dst)", kind, cuGraphAddMemcpyNode(&n, g, NULL, 0, &c, ctx));
    c = copy_params(good, x, SZ);
    say("cuGraphAddMemcpyNode(src)", kind, cuGraphAddMemcpyNode(&n, g, NULL, 0, &c, ctx));
    CUDA_MEMSET_NODE_PARAMS m = set_params(x, SZ, 7);
    say("cuGraphAddMemsetNode", kind, cuGraphAddMemsetNode(&n, g, NULL, 0, &m, ctx));
    CUgraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEMCPY;
    np.memcpy.copyCtx = ctx;
    np.memcpy.copyParams = copy_params(x, good, SZ);
    say("cuGraphAddNode(memcpy)", kind, cuGraphAddNode(&n, g, NULL, NULL, 0, &np));
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEMSET;
    np.memset.ctx = ctx;
    np.memset.dst = x;
    np.memset.elementSize = 1;
    np.memset.width = SZ;
    np.memset.height = 1;
    say("cuGraphAddNode(memset)", kind, cuGraphAddNode(&n, g, NULL, NULL, 0, &np));

    /* node-parameter updates: on the graph, then on an instantiated one */
    CUgraphNode cn, sn;
    c = copy_params(good + SZ / 2, good, SZ / 2);
    CK(cuGraphAddMemcpyNode(&cn, g, NULL, 0, &c, ctx));
    m = set_params(good, SZ, 1);
    CK(cuGraphAddMemsetNode(&sn, g, NULL, 0, &m, ctx));
    CUgraphExec ex;
    CK(cuGraphInstantiate(&ex, g, 0));
    c = copy_params(x, good, SZ);
    say("cuGraphMemcpyNodeSetParams", kind, cuGraphMemcpyNodeSetParams(cn, &c));
    say("cuGraphExecMemcpyNodeSetParams", kind, cuGraphExecMemcpyNodeSetParams(ex, cn, &c, ctx));
    m = set_params(x, SZ, 3);
    say("cuGraphMemsetNodeSetParams", kind, cuGraphMemsetNodeSetParams(sn, &m));
    say("cuGraphExecMemsetNodeSetParams", kind, cuGraphExecMemsetNodeSetParams(ex, sn, &m, ctx));
    memset(&np, 0, sizeof np);
    np.type = CU_GRAPH_NODE_TYPE_MEMCPY;
    np.memcpy.copyCtx = ctx;
    np.memcpy.copyParams = copy_params(x, good, SZ);
    say("cuGraphExecNodeSetParams(memcpy)", kind, cuGraphExecNodeSetParams(ex, cn, &np));
    say("cuGraphNodeSetParams(memcpy)", kind, cuGraphNodeSetParams(cn, &np));
    CUgraphExecUpdateResultInfo ui;
    say("cuGraphExecUpdate", kind, cuGraphExecUpdate(ex, g, &ui));
    cuGraphExecDestroy(ex);
    cuGraphDestroy(g);
    /* a graph whose memcpy node was made on x, instantiated */
    CK(cuGraphCreate(&g, 0));
    c = copy_params(x, good, SZ / 2);
    say("cuGraphAddMemcpyNode(dst,again)", kind, cuGraphAddMemcpyNode(&cn, g, NULL, 0, &c, ctx));
    CUresult ri = cuGraphInstantiate(&ex, g, 0);
    say("cuGraphInstantiate(memcpy on x)", kind, ri);
    if (ri == CUDA_SUCCESS) {
        c = copy_params(x + SZ / 2, good, SZ / 2);
        say("cuGraphExecMemcpyNodeSetParams(x->x)", kind, cuGraphExecMemcpyNodeSetParams(ex, cn, &c, ctx));
        c = copy_params(good + SZ / 2, good, SZ / 2);
        say("cuGraphExecMemcpyNodeSetParams(x->dev)", kind, cuGraphExecMemcpyNodeSetParams(ex, cn, &c, ctx));
        cuGraphExecDestroy(ex);
    }
    cuGraphDestroy(g);

    /* stream capture records copies and memsets */
    CK(cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_RELAXED));
    CUresult rc = cuMemcpyDtoDAsync(x, good, SZ, st);
    CUresult rm = cuMemsetD8Async(x, 5, SZ, st);
    CUgraph cg = NULL;
    CUresult re = cuStreamEndCapture(st, &cg);
    say("capture:cuMemcpyDtoDAsync", kind, rc);
    say("capture:cuMemsetD8Async", kind, rm);
    say("capture:cuStreamEndCapture", kind, re);
    if (cg)
        cuGraphDestroy(cg);

    /* texture object on linear memory */
    CUDA_RESOURCE_DESC rd;
    memset(&rd, 0, sizeof rd);
    rd.resType = CU_RESOURCE_TYPE_LINEAR;
    rd.res.linear.devPtr = x;
    rd.res.linear.format = CU_AD_FORMAT_UNSIGNED_INT32;
    rd.res.linear.numChannels = 1;
    rd.res.linear.sizeInBytes = SZ;
    CUDA_TEXTURE_DESC td;
    memset(&td, 0, sizeof td);
    CUtexObject tex = 0;
    CUresult rt = cuTexObjectCreate(&tex, &rd, &td, NULL);
    say("cuTexObjectCreate(linear)", kind, rt);
    if (rt == CUDA_SUCCESS)
        cuTexObjectDestroy(tex);
    memset(&rd, 0, sizeof rd);
    rd.resType = CU_RESOURCE_TYPE_PITCH2D;
    rd.res.pitch2D.devPtr = x;
    rd.res.pitch2D.format = CU_AD_FORMAT_UNSIGNED_INT32;
    rd.res.pitch2D.numChannels = 1;
    rd.res.pitch2D.width = 256;
    rd.res.pitch2D.height = 256;
    rd.res.pitch2D.pitchInBytes = 1024;
    rt = cuTexObjectCreate(&tex, &rd, &td, NULL);
    say("cuTexObjectCreate(pitch2d)", kind, rt);
    if (rt == CUDA_SUCCESS)
        cuTexObjectDestroy(tex);

    /* advice, range and pointer attributes */
    CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, (int)dev};
    say("cuMemAdvise_v2(READ_MOSTLY)", kind, cuMemAdvise_v2(x, SZ, CU_MEM_ADVISE_SET_READ_MOSTLY, loc));
    int rm_attr = 0;
    say("cuMemRangeGetAttribute", kind,
        cuMemRangeGetAttribute(&rm_attr, sizeof rm_attr, CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY, x, SZ));
    unsigned one = 1;
    say("cuPointerSetAttribute(SYNC_MEMOPS)", kind,
        cuPointerSetAttribute(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, x));
    unsigned mt = 0;
    CUresult rp = cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, x);
    printf("%-34s %-5s %s type=%u\n", "cuPointerGetAttribute(MEMTYPE)", kind, ename(rp), mt);
    CUdeviceptr base = 0;
    size_t bsz = 0;
    say("cuMemGetAddressRange", kind, cuMemGetAddressRange(&base, &bsz, x));
    CUipcMemHandle ih;
    say("cuIpcGetMemHandle", kind, cuIpcGetMemHandle(&ih, x));
    CUmemGenericAllocationHandle rh;
    CUresult rr = cuMemRetainAllocationHandle(&rh, (void *)x);
    say("cuMemRetainAllocationHandle", kind, rr);
    if (rr == CUDA_SUCCESS)
        cuMemRelease(rh);
    CUmemLocation l2 = {CU_MEM_LOCATION_TYPE_DEVICE, (int)dev};
    unsigned long long fl = 0;
    say("cuMemGetAccess", kind, cuMemGetAccess(&fl, &l2, x));
    say("cuMemPrefetchAsync_v2 (work)", kind, cuMemPrefetchAsync_v2(x, SZ, loc, 0, st));
    cuStreamSynchronize(st);
}

/* A graph and a texture made while the range holds host memory keep
 * working once it holds device memory instead (a swap-in's remap), and
 * device work on host-mapped memory sees the right bytes. */
static void remap_check(CUdeviceptr good)
{
    CUdeviceptr va;
    CK(cuMemAddressReserve(&va, SZ, 2ull << 20, 0, 0));
    CUmemGenericAllocationHandle hh = create(1, SZ), dh = create(0, SZ);
    map_to(va, SZ, hh);
    unsigned char *buf = malloc(SZ), *back = malloc(SZ);
    for (size_t i = 0; i < SZ; i++)
        buf[i] = (unsigned char)(i * 7 + 1);
    CK(cuMemcpyHtoD(va, buf, SZ));
    CK(cuMemcpyDtoD(good, va, SZ)); /* device reads host-mapped memory */
    CK(cuMemcpyDtoH(back, good, SZ));
    expect("device copy from host-mapped range", memcmp(buf, back, SZ) == 0);

    CUgraph g;
    CUgraphNode n;
    CK(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS m = set_params(va, SZ, 0x5a);
    CK(cuGraphAddMemsetNode(&n, g, NULL, 0, &m, ctx));
    CUgraphExec ex;
    CK(cuGraphInstantiate(&ex, g, 0));
    /* remap: host copy out, unmap, device in, copy back */
    CK(cuMemcpyDtoH(back, va, SZ));
    CK(cuMemUnmap(va, SZ));
    map_to(va, SZ, dh);
    CK(cuMemcpyHtoD(va, back, SZ));
    CK(cuGraphLaunch(ex, st));
    CK(cuStreamSynchronize(st));
    CK(cuMemcpyDtoH(back, va, SZ));
    int all = 1;
    for (size_t i = 0; i < SZ; i++)
        all &= back[i] == 0x5a;
    expect("graph made on host, run on device", all);
    /* and the other way: made on device, run on host */
    CK(cuMemUnmap(va, SZ));
    map_to(va, SZ, hh);
    m = set_params(va, SZ, 0x33);
    CK(cuGraphExecMemsetNodeSetParams(ex, n, &m, ctx));
    CK(cuGraphLaunch(ex, st));
    CK(cuStreamSynchronize(st));
    CK(cuMemcpyDtoH(back, va, SZ));
    all = 1;
    for (size_t i = 0; i < SZ; i++)
        all &= back[i] == 0x33;
    expect("graph run on host-mapped range", all);
    /* a memcpy node instantiated while the range holds host memory, run
     * after it holds device memory */
    CUgraph g2;
    CUgraphNode n2;
    CK(cuGraphCreate(&g2, 0));
    CUDA_MEMCPY3D c = copy_params(va, good, SZ);
    CK(cuGraphAddMemcpyNode(&n2, g2, NULL, 0, &c, ctx));
    CUgraphExec ex2;
    CK(cuGraphInstantiate(&ex2, g2, 0));
    for (size_t i = 0; i < SZ; i++)
        buf[i] = (unsigned char)(i * 13 + 5);
    CK(cuMemcpyHtoD(good, buf, SZ));
    CK(cuMemUnmap(va, SZ));
    map_to(va, SZ, dh);
    CUgraphExec ex3; /* instantiated on device memory */
    CK(cuGraphInstantiate(&ex3, g2, 0));
    CK(cuGraphLaunch(ex2, st));
    CK(cuStreamSynchronize(st));
    CK(cuMemcpyDtoH(back, va, SZ));
    expect("memcpy graph made on host, run on device", memcmp(buf, back, SZ) == 0);
    /* and one instantiated on device memory, run on host memory */
    CK(cuMemUnmap(va, SZ));
    map_to(va, SZ, hh);
    CK(cuMemsetD8(va, 0, SZ));
    CK(cuGraphLaunch(ex3, st));
    CK(cuStreamSynchronize(st));
    CK(cuMemcpyDtoH(back, va, SZ));
    expect("memcpy graph made on device, run on host", memcmp(buf, back, SZ) == 0);
    /* when is a node's memory type fixed: node made on host memory,
     * instantiated after the remap to device memory, then updated */
    CUgraph g3;
    CUgraphNode n3;
    CUgraphExec ex4;
    CK(cuGraphCreate(&g3, 0));
    c = copy_params(va, good, SZ / 2);
    CK(cuGraphAddMemcpyNode(&n3, g3, NULL, 0, &c, ctx)); /* va on host now */
    CK(cuMemUnmap(va, SZ));
    map_to(va, SZ, dh);
    CK(cuGraphInstantiate(&ex4, g3, 0));
    c = copy_params(va + SZ / 2, good, SZ / 2);
    say("update: node@host inst@dev upd@dev", "", cuGraphExecMemcpyNodeSetParams(ex4, n3, &c, ctx));
    CUgraphExecUpdateResultInfo ui;
    say("execupdate: graph@host exec@dev", "", cuGraphExecUpdate(ex4, g3, &ui));
    cuGraphExecDestroy(ex4);
    CK(cuGraphMemcpyNodeSetParams(n3, &c)); /* re-set on device memory */
    CK(cuGraphInstantiate(&ex4, g3, 0));
    CK(cuMemUnmap(va, SZ));
    map_to(va, SZ, hh);
    c = copy_params(va, good, SZ / 2);
    say("update: node@dev inst@dev upd@host", "", cuGraphExecMemcpyNodeSetParams(ex4, n3, &c, ctx));
    say("execupdate: graph@dev exec@dev now@host", "", cuGraphExecUpdate(ex4, g3, &ui));
    cuGraphExecDestroy(ex4);
    CK(cuGraphInstantiate(&ex4, g3, 0));
    CK(cuMemUnmap(va, SZ));
    map_to(va, SZ, dh);
    c = copy_params(va + SZ / 2, good, SZ / 2);
    say("update: node@dev inst@host upd@dev", "", cuGraphExecMemcpyNodeSetParams(ex4, n3, &c, ctx));
    cuGraphExecDestroy(ex4);
    cuGraphDestroy(g3);
    cuGraphExecDestroy(ex2);
    cuGraphExecDestroy(ex3);
    cuGraphDestroy(g2);
    cuGraphExecDestroy(ex);
    cuGraphDestroy(g);
    CK(cuMemUnmap(va, SZ));
    cuMemRelease(hh);
    cuMemRelease(dh);
    cuMemAddressFree(va, SZ);
    free(buf);
    free(back);
}

int main(void)
{
    ctx = probe_primary(&dev);
    CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
    size_t gran = 0;
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_HOST;
    CK(cuMemGetAllocationGranularity(&gran, &p, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    printf("host-located granularity: %zu\n", gran);
    CUdeviceptr good, dv, none, host;
    CK(cuMemAlloc(&good, SZ));
    CK(cuMemAlloc(&dv, SZ));
    CK(cuMemAddressReserve(&none, SZ, 2ull << 20, 0, 0));
    CK(cuMemAddressReserve(&host, SZ, 2ull << 20, 0, 0));
    map_to(host, SZ, create(1, SZ));
    probe("dev", dv, good);
    probe("none", none, good);
    probe("host", host, good);
    CUdeviceptr vdev;
    CK(cuMemAddressReserve(&vdev, SZ, 2ull << 20, 0, 0));
    map_to(vdev, SZ, create(0, SZ));
    probe("vdev", vdev, good);
    remap_check(good);
    printf("failures: %d\n", failures);
    return failures != 0;
}
