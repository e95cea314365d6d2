/* fckern.c: see fckern.h. */
#include "fckern.h"

#include <stddef.h>
#include <string.h>

/* The set the helpers launch; set by fck_load/fck_use (see fckern.h). */
static const struct fck *cur;

CUresult fck_load(struct fck *k)
{
    CUresult r = cuModuleLoadData(&k->mod, fck_ptx);
    if (r != CUDA_SUCCESS)
        return r;
    struct {
        CUfunction *f;
        const char *name;
    } fns[] = {
        { &k->sleep, "fc_sleep" },
        { &k->fill32, "fc_fill32" },
        { &k->add32, "fc_add32" },
        { &k->sum32, "fc_sum32" },
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        r = cuModuleGetFunction(fns[i].f, k->mod, fns[i].name);
        if (r != CUDA_SUCCESS) {
            cuModuleUnload(k->mod);
            return r;
        }
    }
    cur = k;
    return CUDA_SUCCESS;
}

CUresult fck_unload(struct fck *k)
{
    if (cur == k)
        cur = NULL;
    return cuModuleUnload(k->mod);
}

void fck_use(const struct fck *k)
{
    cur = k;
}

/* 256 threads per block, at most 1024 blocks: grid-stride kernels cover
 * any n with that. */
CUDA_KERNEL_NODE_PARAMS fck_node_params(CUfunction f, uint64_t n, void **params)
{
    uint64_t blocks = (n + 255) / 256;
    if (blocks == 0)
        blocks = 1;
    if (blocks > 1024)
        blocks = 1024;
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof kp);
    kp.func = f;
    kp.gridDimX = (unsigned)blocks;
    kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = n ? 256 : 1;
    kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = params;
    return kp;
}

CUDA_MEMSET_NODE_PARAMS fck_memset32_params(CUdeviceptr p, uint64_t n, uint32_t v)
{
    CUDA_MEMSET_NODE_PARAMS m;
    memset(&m, 0, sizeof m);
    m.dst = p;
    m.value = v;
    m.elementSize = 4;
    m.width = n;
    m.height = 1;
    return m;
}

CUDA_MEMCPY3D fck_copy_params(CUdeviceptr dst, CUdeviceptr src, uint64_t bytes)
{
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = src;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = dst;
    c.WidthInBytes = bytes;
    c.Height = 1;
    c.Depth = 1;
    return c;
}

static CUresult launch(CUfunction f, CUstream s, uint64_t n, void **params)
{
    CUDA_KERNEL_NODE_PARAMS kp = fck_node_params(f, n, params);
    return cuLaunchKernel(f, kp.gridDimX, 1, 1, kp.blockDimX, 1, 1, 0, s, params, NULL);
}

CUresult fck_sleep(CUstream stream, uint64_t ns)
{
    void *params[] = { &ns };
    return cur ? launch(cur->sleep, stream, 0, params) : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult fck_fill32(CUstream stream, CUdeviceptr p, uint64_t n, uint32_t v)
{
    void *params[] = { &p, &n, &v };
    return cur ? launch(cur->fill32, stream, n, params) : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult fck_add32(CUstream stream, CUdeviceptr p, uint64_t n, uint32_t v)
{
    void *params[] = { &p, &n, &v };
    return cur ? launch(cur->add32, stream, n, params) : CUDA_ERROR_NOT_INITIALIZED;
}

CUresult fck_sum32(CUstream stream, CUdeviceptr p, uint64_t n, CUdeviceptr out)
{
    void *params[] = { &p, &n, &out };
    return cur ? launch(cur->sum32, stream, n, params) : CUDA_ERROR_NOT_INITIALIZED;
}
