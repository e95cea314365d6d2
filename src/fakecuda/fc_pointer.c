/* fc_pointer.c: what the driver says about an address without submitting
 * work: pointer attributes, legacy IPC handles, managed-memory hints.
 *
 * Answers follow the real driver for each kind of address (measured on an
 * H100, bench/gpu/addr_probe.c): memory of cuMemAlloc, a reserved VMM
 * range with nothing mapped, and host- or device-located cuMemCreate
 * memory mapped into one. VMM memory reads as HOST or DEVICE memory by
 * its location, takes no SYNC_MEMOPS flag (NOT_SUPPORTED) and has no
 * legacy IPC handle; an unmapped address is INVALID_VALUE throughout.
 */
#include "fakecuda/fc_internal.h"

#include <string.h>

static unsigned memory_type(const struct fc_range *r)
{
    return r->dev_loc ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
}

/* Writes one attribute of a known range. Booleans are 4-byte ints, as the
 * real driver writes them. */
static CUresult attr_of(const struct fc_range *r, CUpointer_attribute a, void *data, CUdeviceptr ptr)
{
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = (CUcontext)r->ctx;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = memory_type(r);
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (r->dev_loc && r->kind != FC_R_MANAGED)
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
        *(int *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = 1;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = r->start;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(int *)data = r->kind == FC_R_MANAGED;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = r->dev;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(int *)data = r->kind == FC_R_DEVICE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
        *(int *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = r->start;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = r->size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
        *(unsigned long long *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        *(unsigned *)data = (r->prot & FC_PROT_W) ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE
                            : (r->prot & FC_PROT_R) ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READ
                                                    : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *(CUmemoryPool *)data = r->kind == FC_R_DEVICE ? (CUmemoryPool)r->obj : NULL;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_range rg;
    if (!fc_map_find(ptr, &rg))
        return CUDA_ERROR_INVALID_VALUE;
    return attr_of(&rg, attribute, data, ptr);
}

/* Unknown pointers are not an error here: attributes read as "nothing". */
static void attr_unknown(CUpointer_attribute a, void *data)
{
    switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *(void **)data = NULL;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(unsigned long long *)data = 0;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = -2;
        break;
    default:
        *(unsigned *)data = 0;
    }
}

CUresult CUDAAPI cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                        void **data, CUdeviceptr ptr)
{
    if (!attributes || !data)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_range rg;
    bool known = fc_map_find(ptr, &rg);
    for (unsigned i = 0; i < numAttributes; i++) {
        if (!data[i])
            continue;
        if (!known || attr_of(&rg, attributes[i], data[i], ptr) != CUDA_SUCCESS)
            attr_unknown(attributes[i], data[i]);
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuPointerSetAttribute(const void *value, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (attribute != CU_POINTER_ATTRIBUTE_SYNC_MEMOPS || !value)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_range rg;
    if (!fc_map_find(ptr, &rg))
        return CUDA_ERROR_INVALID_VALUE;
    /* Measured: VMM mappings take no per-pointer flags, wherever they are. */
    return rg.kind == FC_R_VMM ? CUDA_ERROR_NOT_SUPPORTED : CUDA_SUCCESS;
}

/* ------------------------------------------------------------ legacy IPC */

/* What a handle names: the exporter and its allocation. Opening one
 * (cuIpcOpenMemHandle) is not simulated: device memory is private to its
 * process here (fc_mem.c). */
struct ipc_name {
    char magic[8];
    int32_t pid;
    int32_t dev;
    uint64_t start;                  /* the exporter's start time (pid reuse) */
    uint64_t base, size;
};
_Static_assert(sizeof(struct ipc_name) <= sizeof(CUipcMemHandle), "an IPC handle is 64 bytes");

CUresult CUDAAPI cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    FC_FAULT(cuIpcGetMemHandle);
    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_range rg;
    if (!fc_map_find(dptr, &rg) || rg.kind != FC_R_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;   /* VMM, host, managed or nothing */
    struct ipc_name w = {
        .magic = "fcIPCm1", .pid = (int32_t)fc_proc.pid, .dev = rg.dev,
        .start = fc_proc.start, .base = rg.start, .size = rg.size,
    };
    memset(pHandle, 0, sizeof *pHandle);
    memcpy(pHandle->reserved, &w, sizeof w);
    return CUDA_SUCCESS;
}

/* -------------------------------------------------- managed-memory hints */

/* The managed allocation holding all of [p, p+n)? */
static bool managed_span(CUdeviceptr p, size_t n)
{
    struct fc_range rg;
    return n && fc_map_find(p, &rg) && rg.kind == FC_R_MANAGED && n <= rg.end - p;
}

/* The real driver refuses any address but managed memory's with
 * INVALID_VALUE (measured); on managed memory these calls answer as the
 * simulator always has, NOT_SUPPORTED said once (migration is not
 * simulated, docs/fakecuda.md). args_ok: the call's other arguments. */
static CUresult managed_only(CUdeviceptr p, size_t n, bool args_ok, const char *name,
                             atomic_flag *said)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!args_ok || !managed_span(p, n))
        return CUDA_ERROR_INVALID_VALUE;
    if (!atomic_flag_test_and_set(said))
        fc_unsupported_log(name);
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* The body of each entry point: its fault switch first, then the rule. */
#define MANAGED_ONLY(sym, p, n, args_ok)                                       \
    do {                                                                       \
        FC_FAULT(sym);                                                         \
        static atomic_flag said_ = ATOMIC_FLAG_INIT;                           \
        return managed_only((p), (n), (args_ok), #sym, &said_);                \
    } while (0)

CUresult CUDAAPI cuMemAdvise(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUdevice device)
{
    MANAGED_ONLY(cuMemAdvise, devPtr, count, true);
}

CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr devPtr, size_t count, CUmem_advise advice, CUmemLocation location)
{
    MANAGED_ONLY(cuMemAdvise_v2, devPtr, count, true);
}

CUresult CUDAAPI cuMemRangeGetAttribute(void *data, size_t dataSize, CUmem_range_attribute attribute,
                                        CUdeviceptr devPtr, size_t count)
{
    MANAGED_ONLY(cuMemRangeGetAttribute, devPtr, count, data && dataSize);
}

CUresult CUDAAPI cuMemRangeGetAttributes(void **data, size_t *dataSizes, CUmem_range_attribute *attributes,
                                         size_t numAttributes, CUdeviceptr devPtr, size_t count)
{
    MANAGED_ONLY(cuMemRangeGetAttributes, devPtr, count, data && dataSizes && attributes && numAttributes);
}

CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
    MANAGED_ONLY(cuMemPrefetchAsync, devPtr, count, true);
}

CUresult CUDAAPI cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice, CUstream hStream)
{
    MANAGED_ONLY(cuMemPrefetchAsync_ptsz, devPtr, count, true);
}

CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                       unsigned int flags, CUstream hStream)
{
    MANAGED_ONLY(cuMemPrefetchAsync_v2, devPtr, count, true);
}

CUresult CUDAAPI cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                            unsigned int flags, CUstream hStream)
{
    MANAGED_ONLY(cuMemPrefetchAsync_v2_ptsz, devPtr, count, true);
}
