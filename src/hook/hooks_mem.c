/* hooks_mem.c: the tracked allocation entry points and the quota view.
 *
 * Pattern: find the device, charge the quota (fails cleanly with
 * CUDA_ERROR_OUT_OF_MEMORY), call the driver, record the result, or give
 * the charge back if the driver failed. Frees do the reverse. Each runs
 * inside cs_nest_enter/exit so that driver calls it causes are never gated.
 */
#include "hook/hook.h"
#include "hook/gate.h"
#include "hook/config.h"
#include "hook/mem.h"
#include "hook/seg.h"
#include "hook/vmm.h"

#include <limits.h>

/* The device of the current context, with the driver loaded. */
static struct cs_dev *current_dev(CUresult *err)
{
    *err = CUDA_SUCCESS;
    if (cs_unlikely(!cs_real_ready()) && cs_hook_init_slow() < 0) {
        *err = CUDA_ERROR_NOT_INITIALIZED;
        return NULL;
    }
    return cs_dev_current_exact(); /* allocations record their context */
}

static struct cs_dev *dev_by_ordinal(int ordinal, CUresult *err)
{
    *err = CUDA_SUCCESS;
    if (cs_unlikely(!cs_real_ready()) && cs_hook_init_slow() < 0) {
        *err = CUDA_ERROR_NOT_INITIALIZED;
        return NULL;
    }
    return cs_dev_get(ordinal);
}

/* ---- swappable allocations (seg.h) --------------------------------------- */

/* cuMemAlloc through a segment: charge, place, record. */
static CUresult seg_alloc(struct cs_dev *d, uint64_t bytes, CUdeviceptr *out, const char *what)
{
    if (bytes == 0)
        return CUDA_ERROR_INVALID_VALUE; /* as the driver answers */
    CUresult r = cs_mem_charge(d, bytes, what);
    if (r != CUDA_SUCCESS)
        return r;
    cs_dev_host_begin(d);
    cs_nest_enter();
    r = cs_seg_alloc(d, bytes, out);
    cs_nest_exit();
    cs_dev_host_end(d);
    if (r == CUDA_SUCCESS)
        cs_mem_record(CS_MEM_SEG, (uintptr_t)*out, bytes, d->ordinal, cs_tls.ctx);
    else
        cs_mem_uncharge(d, bytes);
    return r;
}

/* cuMemFree of a segment allocation. Like the driver's free it first waits
 * for the device's work (cudaFree synchronizes), so memory is never reused
 * under a kernel still reading it. Returns false if ptr is not ours. */
static bool seg_free(CUdeviceptr ptr, CUresult *r)
{
    uint64_t bytes;
    int dev;
    if (!cs_mem_find(CS_MEM_SEG, (uintptr_t)ptr, &bytes, &dev))
        return false;
    struct cs_dev *d = dev >= 0 && dev < CS_MAX_DEVICES ? &cs_devs[dev] : NULL;
    if (d)
        cs_dev_host_begin(d);
    cs_nest_enter();
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    cs_real.cuThreadExchangeStreamCaptureMode(&mode);
    cs_real.cuCtxSynchronize();
    cs_real.cuThreadExchangeStreamCaptureMode(&mode);
    uint64_t placed;
    int pdev;
    bool ok = cs_seg_free(ptr, &placed, &pdev);
    cs_nest_exit();
    if (d)
        cs_dev_host_end(d);
    if (ok)
        cs_mem_release(CS_MEM_SEG, (uintptr_t)ptr);
    *r = ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    return true;
}

/* ---- linear allocations: charge first (the size is known) ------------- */

#define ALLOC_BODY(what, bytes, call, ptrexpr)                                 \
    CUresult err_;                                                             \
    struct cs_dev *d_ = current_dev(&err_);                                    \
    if (err_)                                                                  \
        return err_;                                                           \
    if (d_ && (err_ = cs_mem_charge(d_, (bytes), what)) != CUDA_SUCCESS)       \
        return err_;                                                           \
    if (d_)                                                                    \
        cs_dev_host_begin(d_);                                                 \
    cs_nest_enter();                                                           \
    CUresult r_ = call;                                                        \
    cs_nest_exit();                                                            \
    if (d_) {                                                                  \
        cs_dev_host_end(d_);                                                   \
        if (r_ == CUDA_SUCCESS)                                                \
            cs_mem_record(CS_MEM_PTR, (uintptr_t)(ptrexpr), (bytes), d_->ordinal, cs_tls.ctx); \
        else                                                                   \
            cs_mem_uncharge(d_, (bytes));                                      \
    }                                                                          \
    return r_;

CS_EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    if (!dptr)
        return cs_real_init() < 0 ? CUDA_ERROR_NOT_INITIALIZED : cs_real.cuMemAlloc_v2(dptr, bytesize);
    if (cs_cfg.swap) {
        CUresult err;
        struct cs_dev *d = current_dev(&err);
        if (err)
            return err;
        if (d)
            return seg_alloc(d, bytesize, dptr, "an allocation");
    }
    ALLOC_BODY("an allocation", bytesize, cs_real.cuMemAlloc_v2(dptr, bytesize), *dptr)
}

CS_EXPORT CUresult CUDAAPI cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    if (!dptr)
        return cs_real_init() < 0 ? CUDA_ERROR_NOT_INITIALIZED : cs_real.cuMemAlloc(dptr, bytesize);
    ALLOC_BODY("an allocation", bytesize, cs_real.cuMemAlloc(dptr, bytesize), *dptr)
}

CS_EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    if (!dptr)
        return cs_real_init() < 0 ? CUDA_ERROR_NOT_INITIALIZED
                                  : cs_real.cuMemAllocManaged(dptr, bytesize, flags);
    ALLOC_BODY("a managed allocation", bytesize, cs_real.cuMemAllocManaged(dptr, bytesize, flags),
               *dptr)
}

CS_EXPORT CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    if (!dptr)
        return cs_real_init() < 0 ? CUDA_ERROR_NOT_INITIALIZED
                                  : cs_real.cuMemAllocAsync(dptr, bytesize, hStream);
    ALLOC_BODY("an async allocation", bytesize, cs_real.cuMemAllocAsync(dptr, bytesize, hStream),
               *dptr)
}

CS_EXPORT CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    if (!dptr)
        return cs_real_init() < 0 ? CUDA_ERROR_NOT_INITIALIZED
                                  : cs_real.cuMemAllocAsync_ptsz(dptr, bytesize, hStream);
    ALLOC_BODY("an async allocation", bytesize,
               cs_real.cuMemAllocAsync_ptsz(dptr, bytesize, hStream), *dptr)
}

CS_EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
                                                   CUmemoryPool pool, CUstream hStream)
{
    if (!dptr)
        return cs_real_init() < 0 ? CUDA_ERROR_NOT_INITIALIZED
                                  : cs_real.cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream);
    ALLOC_BODY("a pool allocation", bytesize,
               cs_real.cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream), *dptr)
}

CS_EXPORT CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                        CUmemoryPool pool, CUstream hStream)
{
    if (!dptr)
        return cs_real_init() < 0
                   ? CUDA_ERROR_NOT_INITIALIZED
                   : cs_real.cuMemAllocFromPoolAsync_ptsz(dptr, bytesize, pool, hStream);
    ALLOC_BODY("a pool allocation", bytesize,
               cs_real.cuMemAllocFromPoolAsync_ptsz(dptr, bytesize, pool, hStream), *dptr)
}

/* ---- pitched allocations: the pitch is only known afterwards ---------- */

#define PITCH_BODY(call, dptr, pitch, height)                                  \
    CUresult err_;                                                             \
    struct cs_dev *d_ = current_dev(&err_);                                    \
    if (err_)                                                                  \
        return err_;                                                           \
    cs_nest_enter();                                                           \
    CUresult r_ = call;                                                        \
    cs_nest_exit();                                                            \
    if (r_ != CUDA_SUCCESS || !d_)                                             \
        return r_;                                                             \
    uint64_t bytes_ = (uint64_t)*(pitch) * (height);                           \
    if ((err_ = cs_mem_charge(d_, bytes_, "a pitched allocation")) != CUDA_SUCCESS) { \
        cs_nest_enter();                                                       \
        cs_real.cuMemFree_v2((CUdeviceptr)*(dptr));                            \
        cs_nest_exit();                                                        \
        *(dptr) = 0;                                                           \
        return err_;                                                           \
    }                                                                          \
    cs_mem_record(CS_MEM_PTR, (uintptr_t)*(dptr), bytes_, d_->ordinal, cs_tls.ctx);        \
    return r_;

/* Pitched memory through a segment: rows padded to 512 bytes, the pitch
 * alignment the driver itself uses on recent GPUs. */
static CUresult seg_alloc_pitch(struct cs_dev *d, CUdeviceptr *dptr, size_t *pitch, size_t width,
                                size_t height, unsigned elem)
{
    if (elem != 4 && elem != 8 && elem != 16)
        return CUDA_ERROR_INVALID_VALUE;
    if (width == 0 || height == 0)
        return CUDA_ERROR_INVALID_VALUE;
    size_t p = (width + 511) / 512 * 512;
    CUresult r = seg_alloc(d, (uint64_t)p * height, dptr, "a pitched allocation");
    if (r == CUDA_SUCCESS)
        *pitch = p;
    return r;
}

CS_EXPORT CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                              size_t Height, unsigned int ElementSizeBytes)
{
    if (!dptr || !pPitch)
        return cs_real_init() < 0 ? CUDA_ERROR_NOT_INITIALIZED
                                  : cs_real.cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height,
                                                               ElementSizeBytes);
    if (cs_cfg.swap) {
        CUresult err;
        struct cs_dev *d = current_dev(&err);
        if (err)
            return err;
        if (d)
            return seg_alloc_pitch(d, dptr, pPitch, WidthInBytes, Height, ElementSizeBytes);
    }
    PITCH_BODY(cs_real.cuMemAllocPitch_v2(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes),
               dptr, pPitch, Height)
}

CS_EXPORT CUresult CUDAAPI cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
                                           unsigned int WidthInBytes, unsigned int Height,
                                           unsigned int ElementSizeBytes)
{
    if (!dptr || !pPitch)
        return cs_real_init() < 0 ? CUDA_ERROR_NOT_INITIALIZED
                                  : cs_real.cuMemAllocPitch(dptr, pPitch, WidthInBytes, Height,
                                                            ElementSizeBytes);
    PITCH_BODY(cs_real.cuMemAllocPitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes), dptr,
               pPitch, Height)
}

/* ---- frees ------------------------------------------------------------- */

#define FREE_BODY(call, ns, key)                                               \
    if (cs_real_init() < 0)                                                    \
        return CUDA_ERROR_NOT_INITIALIZED;                                     \
    cs_nest_enter();                                                           \
    CUresult r_ = call;                                                        \
    cs_nest_exit();                                                            \
    if (r_ == CUDA_SUCCESS)                                                    \
        cs_mem_release(ns, (uintptr_t)(key));                                  \
    return r_;

CS_EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    CUresult r;
    if (cs_real_ready() && seg_free(dptr, &r))
        return r;
    FREE_BODY(cs_real.cuMemFree_v2(dptr), CS_MEM_PTR, dptr)
}

CS_EXPORT CUresult CUDAAPI cuMemFree(CUdeviceptr_v1 dptr)
{
    FREE_BODY(cs_real.cuMemFree(dptr), CS_MEM_PTR, dptr)
}

/* A stream-ordered free gives the quota back when it is enqueued: the pool
 * may keep the memory cached, but it is the job's to reuse. */
CS_EXPORT CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    FREE_BODY(cs_real.cuMemFreeAsync(dptr, hStream), CS_MEM_PTR, dptr)
}

CS_EXPORT CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    FREE_BODY(cs_real.cuMemFreeAsync_ptsz(dptr, hStream), CS_MEM_PTR, dptr)
}

/* ---- the application's own VMM allocations ---------------------------- */

/* Device memory the application creates is swappable like cuMemAlloc's:
 * it gets a virtual handle (vmm.h). Host memory, and all of it with
 * CUSHARE_SWAP=off, goes to the driver and is counted as unswappable. */
CS_EXPORT CUresult CUDAAPI cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                       const CUmemAllocationProp *prop, unsigned long long flags)
{
    CUresult err = CUDA_SUCCESS;
    struct cs_dev *d = NULL;
    if (handle && prop && prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        d = dev_by_ordinal(prop->location.id, &err);
        if (err)
            return err;
        if (d && (err = cs_mem_charge(d, size, "a cuMemCreate allocation")) != CUDA_SUCCESS)
            return err;
    } else if (cs_real_init() < 0) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    bool virt = d && cs_cfg.swap && flags == 0;
    if (d)
        cs_dev_host_begin(d);
    cs_nest_enter();
    CUresult r = virt ? cs_vmm_create(d, handle, size, prop)
                      : cs_real.cuMemCreate(handle, size, prop, flags);
    cs_nest_exit();
    if (d) {
        cs_dev_host_end(d);
        if (r == CUDA_SUCCESS)
            cs_mem_record(virt ? CS_MEM_VMM : CS_MEM_HANDLE, (uintptr_t)*handle, size, d->ordinal,
                          NULL);
        else
            cs_mem_uncharge(d, size);
    }
    return r;
}

CS_EXPORT CUresult CUDAAPI cuMemRelease(CUmemGenericAllocationHandle handle)
{
    if (cs_real_ready() && cs_vmm_is_virtual(handle)) {
        uint64_t size;
        cs_nest_enter();
        CUresult r = cs_vmm_release(handle, &size);
        cs_nest_exit();
        /* The quota is charged once per cuMemCreate: the first release
         * (not a retained handle's) gives it back. */
        if (r == CUDA_SUCCESS)
            cs_mem_release(CS_MEM_VMM, (uintptr_t)handle);
        return r;
    }
    FREE_BODY(cs_real.cuMemRelease(handle), CS_MEM_HANDLE, handle)
}

/* ---- arrays: the size is estimated from the descriptor ----------------- */

static uint64_t format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    default:
        return 4; /* packed and block-compressed formats: a safe upper bound */
    }
}

static uint64_t array_bytes(uint64_t w, uint64_t h, uint64_t depth, CUarray_format f,
                            unsigned channels)
{
    return w * (h ? h : 1) * (depth ? depth : 1) * format_bytes(f) * (channels ? channels : 1);
}

#define ARRAY_BODY(call, handle, bytes)                                        \
    CUresult err_;                                                             \
    struct cs_dev *d_ = current_dev(&err_);                                    \
    if (err_)                                                                  \
        return err_;                                                           \
    if (d_ && (err_ = cs_mem_charge(d_, (bytes), "an array")) != CUDA_SUCCESS) \
        return err_;                                                           \
    cs_nest_enter();                                                           \
    CUresult r_ = call;                                                        \
    cs_nest_exit();                                                            \
    if (d_) {                                                                  \
        if (r_ == CUDA_SUCCESS)                                                \
            cs_mem_record(CS_MEM_ARRAY, (uintptr_t)*(handle), (bytes), d_->ordinal, cs_tls.ctx); \
        else                                                                   \
            cs_mem_uncharge(d_, (bytes));                                      \
    }                                                                          \
    return r_;

CS_EXPORT CUresult CUDAAPI cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc)
{
    if (!pHandle || !desc)
        return cs_real_init() < 0 ? CUDA_ERROR_NOT_INITIALIZED : cs_real.cuArrayCreate_v2(pHandle, desc);
    uint64_t b = array_bytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels);
    ARRAY_BODY(cs_real.cuArrayCreate_v2(pHandle, desc), pHandle, b)
}

CS_EXPORT CUresult CUDAAPI cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *desc)
{
    if (!pHandle || !desc)
        return cs_real_init() < 0 ? CUDA_ERROR_NOT_INITIALIZED : cs_real.cuArrayCreate(pHandle, desc);
    uint64_t b = array_bytes(desc->Width, desc->Height, 1, desc->Format, desc->NumChannels);
    ARRAY_BODY(cs_real.cuArrayCreate(pHandle, desc), pHandle, b)
}

CS_EXPORT CUresult CUDAAPI cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
    if (!pHandle || !desc)
        return cs_real_init() < 0 ? CUDA_ERROR_NOT_INITIALIZED
                                  : cs_real.cuArray3DCreate_v2(pHandle, desc);
    uint64_t b = array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels);
    ARRAY_BODY(cs_real.cuArray3DCreate_v2(pHandle, desc), pHandle, b)
}

CS_EXPORT CUresult CUDAAPI cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *desc)
{
    if (!pHandle || !desc)
        return cs_real_init() < 0 ? CUDA_ERROR_NOT_INITIALIZED : cs_real.cuArray3DCreate(pHandle, desc);
    uint64_t b = array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format, desc->NumChannels);
    ARRAY_BODY(cs_real.cuArray3DCreate(pHandle, desc), pHandle, b)
}

CS_EXPORT CUresult CUDAAPI cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                                  const CUDA_ARRAY3D_DESCRIPTOR *desc,
                                                  unsigned int numMipmapLevels)
{
    if (!pHandle || !desc)
        return cs_real_init() < 0
                   ? CUDA_ERROR_NOT_INITIALIZED
                   : cs_real.cuMipmappedArrayCreate(pHandle, desc, numMipmapLevels);
    /* A full mip chain adds at most a third to the base level. */
    uint64_t base = array_bytes(desc->Width, desc->Height, desc->Depth, desc->Format,
                                desc->NumChannels);
    uint64_t b = numMipmapLevels > 1 ? base + base / 3 : base;
    ARRAY_BODY(cs_real.cuMipmappedArrayCreate(pHandle, desc, numMipmapLevels), pHandle, b)
}

CS_EXPORT CUresult CUDAAPI cuArrayDestroy(CUarray hArray)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    cs_nest_enter();
    CUresult r = cs_real.cuArrayDestroy(hArray);
    cs_nest_exit();
    if (r == CUDA_SUCCESS)
        cs_mem_release(CS_MEM_ARRAY, (uintptr_t)hArray);
    return r;
}

CS_EXPORT CUresult CUDAAPI cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    cs_nest_enter();
    CUresult r = cs_real.cuMipmappedArrayDestroy(hMipmappedArray);
    cs_nest_exit();
    if (r == CUDA_SUCCESS)
        cs_mem_release(CS_MEM_ARRAY, (uintptr_t)hMipmappedArray);
    return r;
}

/* ---- the quota view ---------------------------------------------------- */

/* NULL arguments are the driver's to judge: it sees them unchanged. */
CS_EXPORT CUresult CUDAAPI cuMemGetInfo_v2(size_t *free, size_t *total)
{
    CUresult err;
    struct cs_dev *d = current_dev(&err);
    if (err)
        return err;
    CUresult r = cs_real.cuMemGetInfo_v2(free, total);
    if (r == CUDA_SUCCESS && d && free && total)
        cs_mem_view(d, free, total);
    return r;
}

CS_EXPORT CUresult CUDAAPI cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    CUresult err;
    struct cs_dev *d = current_dev(&err);
    if (err)
        return err;
    CUresult r = cs_real.cuMemGetInfo(free, total);
    if (r == CUDA_SUCCESS && d && free && total) {
        size_t f = *free, t = *total;
        cs_mem_view(d, &f, &t);
        *free = (unsigned int)(f > UINT_MAX ? UINT_MAX : f);
        *total = (unsigned int)(t > UINT_MAX ? UINT_MAX : t);
    }
    return r;
}

CS_EXPORT CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = cs_real.cuDeviceTotalMem_v2(bytes, dev);
    uint64_t limit = cs_mem_limit();
    if (r == CUDA_SUCCESS && bytes && limit && *bytes > limit)
        *bytes = (size_t)limit;
    return r;
}

CS_EXPORT CUresult CUDAAPI cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = cs_real.cuDeviceTotalMem(bytes, dev);
    uint64_t limit = cs_mem_limit();
    if (r == CUDA_SUCCESS && bytes && limit && *bytes > limit)
        *bytes = (unsigned int)limit;
    return r;
}
