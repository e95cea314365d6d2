/* hooks_ptr.c: pointer queries and CUDA IPC on swappable memory.
 *
 * Allocations placed in segments differ from the driver's own in two ways
 * a program can see: a small allocation shares a 2 MiB mapping with others,
 * and while the job is swapped out its range is not mapped at all. These
 * hooks answer pointer queries about our allocations as the driver would
 * for a plain cuMemAlloc allocation: its own base and size, its context and
 * device, whether or not it is resident right now. Every other pointer goes
 * to the driver untouched.
 *
 * The CUDA IPC entry points live here too (cuIpcGetMemHandle,
 * cuIpcOpenMemHandle and _v2, cuIpcCloseMemHandle): like the queries, they
 * tell our allocations from the driver's. Ours are exported, opened and
 * closed by ipc.c; a pointer or handle the driver made goes to the driver.
 */
#include "hook/hook.h"
#include "hook/config.h"
#include "hook/gate.h"
#include "hook/ipc.h"
#include "hook/mem.h"
#include "hook/seg.h"
#include "hook/vmm.h"
#include "common/log.h"

#include <stdbool.h>
#include <string.h>

struct ours {
    bool app_vmm;        /* the application's own mapping (vmm.h), swapped out */
    CUdeviceptr base;    /* the allocation */
    uint64_t bytes;      /* as requested */
    int dev;
    CUcontext ctx;
    CUdeviceptr map_base;/* the segment: mapping base and size */
    uint64_t map_size;
};

/* The application's own VMM mapping while its memory is swapped out: the
 * driver would see an unmapped range; answer as it did while mapped. */
static bool find_absent_vmm(CUdeviceptr ptr, struct ours *o)
{
    uint64_t size;
    if (!cs_vmm_absent_mapping(ptr, &o->base, &size, &o->dev))
        return false;
    o->app_vmm = true;
    o->bytes = size;
    o->ctx = NULL; /* VMM memory belongs to no context */
    o->map_base = o->base;
    o->map_size = size;
    return true;
}

static bool find_ours(CUdeviceptr ptr, struct ours *o)
{
    if (!cs_cfg.swap || !cs_real_ready())
        return false;
    memset(o, 0, sizeof *o);
    uint64_t placed;
    if (!cs_seg_lookup(ptr, &o->base, &placed, &o->dev))
        return find_absent_vmm(ptr, o);
    int dev;
    if (!cs_mem_find_ctx(CS_MEM_SEG, (uintptr_t)o->base, &o->bytes, &dev, &o->ctx))
        return false;
    if (ptr >= o->base + o->bytes)
        return false; /* in the allocation's rounding, not in the allocation */
    o->map_base = o->base;
    o->map_size = placed;
    return true;
}

static void put_bool(void *data, bool v)
{
    *(unsigned char *)data = v ? 1 : 0;
}

/* The answer for one attribute of one of our pointers. */
static CUresult answer(void *data, CUpointer_attribute a, CUdeviceptr ptr, const struct ours *o)
{
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = o->ctx;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = CU_MEMORYTYPE_DEVICE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = o->dev;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        *(unsigned long long *)data = (unsigned long long)o->base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = o->base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = (size_t)o->bytes;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        *(CUdeviceptr *)data = o->map_base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        *(size_t *)data = (size_t)o->map_size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        put_bool(data, true); /* to the program it always is */
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        put_bool(data, !o->app_vmm && cs_seg_shareable(o->dev)); /* cushare exports it (ipc.c) */
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        put_bool(data, false);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        *(unsigned long long *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        *(unsigned int *)data = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *(CUmemoryPool *)data = NULL;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE; /* host pointer, P2P tokens: as for device memory */
    }
}

CS_EXPORT CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute,
                                                 CUdeviceptr ptr)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    struct ours o;
    if (!data || !find_ours(ptr, &o))
        return cs_real.cuPointerGetAttribute(data, attribute, ptr);
    return answer(data, attribute, ptr, &o);
}

CS_EXPORT CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes,
                                                  CUpointer_attribute *attributes, void **data,
                                                  CUdeviceptr ptr)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    struct ours o;
    if (!attributes || !data || !find_ours(ptr, &o))
        return cs_real.cuPointerGetAttributes(numAttributes, attributes, data, ptr);
    for (unsigned i = 0; i < numAttributes; i++) {
        if (!data[i])
            continue;
        /* The plural form never fails on one attribute: unknown ones read
         * as zero, like the driver's defaults for a foreign pointer. */
        if (answer(data[i], attributes[i], ptr, &o) != CUDA_SUCCESS)
            *(void **)data[i] = NULL;
    }
    return CUDA_SUCCESS;
}

/* CUDA IPC. A legacy IPC handle cannot name VMM memory, and every swappable
 * allocation is VMM (so that it can leave the GPU and come back at the same
 * address): cushare exports it itself (ipc.c) and marks it unswappable.
 * Memory the driver allocated itself (CUSHARE_SWAP=off, pools) exports and
 * opens as on a bare GPU. */
CS_EXPORT CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUdeviceptr base;
    uint64_t size;
    int dev;
    if (!pHandle || !cs_seg_lookup(dptr, &base, &size, &dev))
        return cs_real.cuIpcGetMemHandle(pHandle, dptr);
    /* The memory must be on the GPU to export it: wait for the lease like
     * any work on this device, and export inside it (no revoke can swap
     * the segment out meanwhile; afterwards it never moves). */
    struct cs_ticket ta, tb;
    cs_gate_enter2(&ta, &tb, cs_dev_get(dev), NULL, 0, 0);
    CUresult r = cs_ipc_export(pHandle, dptr, base, dev);
    cs_gate_exit2(&ta, &tb);
    static _Atomic bool warned;
    if (r != CUDA_SUCCESS && !atomic_exchange(&warned, true)) {
        const char *name = "?";
        cs_real.cuGetErrorName(r, &name);
        cs_warn("CUDA IPC cannot export memory cushare can swap (GPU %d, 0x%llx): %s (%s); run "
                "the exporting job with CUSHARE_SWAP=off (docs/compatibility.md)",
                dev, (unsigned long long)dptr,
                r == CUDA_ERROR_NOT_SUPPORTED
                    ? "this driver or GPU cannot export VMM memory as a file descriptor"
                    : "the export failed",
                name);
    }
    return r;
}

static CUresult ipc_open(CUresult (*real)(CUdeviceptr *, CUipcMemHandle, unsigned int),
                         CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!cs_ipc_is_ours(&handle))
        return real(pdptr, handle, flags);
    cs_nest_enter();
    CUresult r = cs_ipc_open(pdptr, &handle, flags);
    cs_nest_exit();
    return r;
}

CS_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                              unsigned int Flags)
{
    return ipc_open(cs_real.cuIpcOpenMemHandle, pdptr, handle, Flags);
}

CS_EXPORT CUresult CUDAAPI cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                                 unsigned int Flags)
{
    return ipc_open(cs_real.cuIpcOpenMemHandle_v2, pdptr, handle, Flags);
}

CS_EXPORT CUresult CUDAAPI cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r;
    cs_nest_enter();
    bool ours = cs_ipc_close(dptr, &r);
    cs_nest_exit();
    return ours ? r : cs_real.cuIpcCloseMemHandle(dptr);
}

CS_EXPORT CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize,
                                                   CUdeviceptr dptr)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    struct ours o;
    if (!find_ours(dptr, &o))
        return cs_real.cuMemGetAddressRange_v2(pbase, psize, dptr);
    if (pbase)
        *pbase = o.base;
    if (psize)
        *psize = (size_t)o.bytes;
    return CUDA_SUCCESS;
}

/* The 32-bit form predates 64-bit addressing: no segment can be below 4 GiB
 * of address space in a 64-bit process, so it is always the driver's. */
CS_EXPORT CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize,
                                                CUdeviceptr_v1 dptr)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    return cs_real.cuMemGetAddressRange(pbase, psize, dptr);
}
