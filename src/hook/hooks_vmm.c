/* hooks_vmm.c: the VMM calls that take a handle or a mapped range, made to
 * understand cushare's virtual handles (vmm.h). A real handle or a range
 * with none of our mappings goes to the driver untouched. */
#include "hook/hook.h"
#include "hook/gate.h"
#include "hook/vmm.h"

#include <stdlib.h>
#include <string.h>

CS_EXPORT CUresult CUDAAPI cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                                    CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!cs_vmm_is_virtual(handle))
        return cs_real.cuMemMap(ptr, size, offset, handle, flags);
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    cs_nest_enter();
    CUresult r = cs_vmm_map(ptr, size, offset, handle);
    cs_nest_exit();
    return r;
}

CS_EXPORT CUresult CUDAAPI cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r;
    cs_nest_enter();
    bool ours = cs_vmm_unmap(ptr, size, &r);
    cs_nest_exit();
    return ours ? r : cs_real.cuMemUnmap(ptr, size);
}

CS_EXPORT CUresult CUDAAPI cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    cs_nest_enter();
    cs_vmm_forget_range(ptr, size);
    cs_nest_exit();
    return cs_real.cuMemAddressFree(ptr, size);
}

CS_EXPORT CUresult CUDAAPI cuMemSetAccess(CUdeviceptr ptr, size_t size,
                                          const CUmemAccessDesc *desc, size_t count)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r;
    cs_nest_enter();
    bool ours = cs_vmm_set_access(ptr, size, desc, count, &r);
    cs_nest_exit();
    return ours ? r : cs_real.cuMemSetAccess(ptr, size, desc, count);
}

CS_EXPORT CUresult CUDAAPI cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location,
                                          CUdeviceptr ptr)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r;
    bool ours = cs_vmm_get_access(flags, location, ptr, &r);
    return ours ? r : cs_real.cuMemGetAccess(flags, location, ptr);
}

CS_EXPORT CUresult CUDAAPI cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle,
                                                       void *addr)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (handle && cs_vmm_retain(handle, (CUdeviceptr)(uintptr_t)addr))
        return CUDA_SUCCESS;
    return cs_real.cuMemRetainAllocationHandle(handle, addr);
}

CS_EXPORT CUresult CUDAAPI cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                                  CUmemGenericAllocationHandle handle)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!cs_vmm_is_virtual(handle))
        return cs_real.cuMemGetAllocationPropertiesFromHandle(prop, handle);
    return prop ? cs_vmm_props(prop, handle) : CUDA_ERROR_INVALID_VALUE;
}

CS_EXPORT CUresult CUDAAPI cuMemExportToShareableHandle(void *shareableHandle,
                                                        CUmemGenericAllocationHandle handle,
                                                        CUmemAllocationHandleType handleType,
                                                        unsigned long long flags)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!cs_vmm_is_virtual(handle))
        return cs_real.cuMemExportToShareableHandle(shareableHandle, handle, handleType, flags);
    int dev = cs_vmm_device(handle);
    if (!shareableHandle || dev < 0)
        return CUDA_ERROR_INVALID_VALUE;
    /* On the GPU for the export, and from then on: the importer maps the
     * physical memory, which therefore must never move. */
    struct cs_ticket ta, tb;
    cs_gate_enter2(&ta, &tb, cs_dev_get(dev), NULL, 0, 0);
    CUresult r = cs_vmm_export(shareableHandle, handle, handleType, flags);
    cs_gate_exit2(&ta, &tb);
    return r;
}

/* Sparse arrays bound to our memory: translated, and the memory marked
 * unswappable (the array keeps the binding where the hook cannot follow).
 * Gated like any stream work, so the memory is on the GPU here. */
static CUresult map_array(CUresult (*real)(CUarrayMapInfo *, unsigned int, CUstream),
                          CUarrayMapInfo *list, unsigned int count, CUstream s, int per_thread)
{
    struct cs_ticket t;
    CUresult r = cs_gate_enter(&t, s, per_thread);
    if (r != CUDA_SUCCESS)
        return r;
    bool any = false;
    for (unsigned i = 0; list && i < count && !any; i++)
        any = list[i].memHandleType == CU_MEM_HANDLE_TYPE_GENERIC &&
              cs_vmm_is_virtual(list[i].memHandle.memHandle);
    CUarrayMapInfo *copy = NULL;
    if (any && !(copy = malloc((size_t)count * sizeof *copy)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (copy) {
        memcpy(copy, list, (size_t)count * sizeof *copy);
        for (unsigned i = 0; i < count && r == CUDA_SUCCESS; i++)
            if (copy[i].memHandleType == CU_MEM_HANDLE_TYPE_GENERIC &&
                cs_vmm_is_virtual(copy[i].memHandle.memHandle))
                r = cs_vmm_pin_real(copy[i].memHandle.memHandle, &copy[i].memHandle.memHandle);
    }
    if (r == CUDA_SUCCESS)
        r = real(copy ? copy : list, count, s);
    free(copy);
    cs_gate_exit(&t);
    return r;
}

CS_EXPORT CUresult CUDAAPI cuMemMapArrayAsync(CUarrayMapInfo *mapInfoList, unsigned int count,
                                              CUstream hStream)
{
    return map_array(cs_real.cuMemMapArrayAsync, mapInfoList, count, hStream, 0);
}

CS_EXPORT CUresult CUDAAPI cuMemMapArrayAsync_ptsz(CUarrayMapInfo *mapInfoList, unsigned int count,
                                                   CUstream hStream)
{
    return map_array(cs_real.cuMemMapArrayAsync_ptsz, mapInfoList, count, hStream, 1);
}
