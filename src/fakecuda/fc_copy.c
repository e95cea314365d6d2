/* fc_copy.c: the memcpy and memset families.
 *
 * Every copy becomes one strided 3-D fc_copy (1-D and 2-D are special
 * cases), validated against the address map when submitted (an unmapped
 * or inaccessible device range is CUDA_ERROR_INVALID_VALUE; a memset that
 * a capturing stream records is not, like on the real driver) and again
 * when it runs (a range unmapped in between is a device fault: sticky
 * CUDA_ERROR_ILLEGAL_ADDRESS). Graph nodes (fc_gparams.c) use the same
 * conversions and checks. The synchronous forms run on the legacy
 * stream (_ptds: the per-thread stream) and wait.
 *
 * Timing: each device has one copy engine per direction, shared by every
 * process on the FAKECUDA_SHM (fc_engine.c). A host<->device copy takes the
 * engine of its direction, does the memcpy, sleeps until
 * start + bytes / FAKECUDA_PCIE_GBPS, and releases it: H2D and D2H overlap,
 * two copies in the same direction queue FIFO. Device-to-device and
 * host-to-host copies and memsets are plain memcpy/memset (fast).
 */
#include "fakecuda/fc_internal.h"

#include <string.h>

static bool dst_dev(int dir) { return dir == FC_H2D || dir == FC_D2D; }
static bool src_dev(int dir) { return dir == FC_D2H || dir == FC_D2D; }

static size_t span(size_t pitch, size_t slice, const struct fc_copy *cp)
{
    return (cp->depth - 1) * slice + (cp->height - 1) * pitch + cp->width;
}

static size_t copy_bytes(const struct fc_copy *cp)
{
    return cp->width * cp->height * cp->depth;
}

/* Under the map's read lock: may the device touch both sides? */
static bool sides_ok_locked(const struct fc_copy *cp)
{
    if (copy_bytes(cp) == 0)
        return true;
    bool dd = dst_dev(cp->dir) || fc_map_in_vas_locked(cp->dst);
    bool sd = src_dev(cp->dir) || fc_map_in_vas_locked(cp->src);
    if (dd && !fc_map_covered_locked(cp->dst, span(cp->dpitch, cp->dslice, cp), FC_PROT_W))
        return false;
    if (sd && !fc_map_covered_locked(cp->src, span(cp->spitch, cp->sslice, cp), FC_PROT_R))
        return false;
    return true;
}

/* One row: memcpy unless the two sides overlap (only a device-to-device
 * copy within one allocation can). Under AddressSanitizer memmove is a
 * byte loop (its interceptor's internal_memmove) and memcpy the C
 * library's: the swap tests' copies, hundreds of MiB, took a fifth of the
 * fault sweep's time in memmove. */
static void copy_row(char *dst, const char *src, size_t n)
{
    uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
    if (d + n <= s || s + n <= d)
        memcpy(dst, src, n);
    else
        memmove(dst, src, n);
}

static void do_copy(const struct fc_copy *cp)
{
    for (size_t z = 0; z < cp->depth; z++)
        for (size_t y = 0; y < cp->height; y++)
            copy_row((char *)cp->dst + z * cp->dslice + y * cp->dpitch,
                     (const char *)cp->src + z * cp->sslice + y * cp->spitch, cp->width);
}

CUresult fc_copy_run(struct fc_ctx *c, const struct fc_copy *cp)
{
    int eng = cp->dir == FC_H2D ? FC_ENG_H2D : cp->dir == FC_D2H ? FC_ENG_D2H : -1;
    struct fc_hold h;
    uint64_t t0 = 0;
    if (eng >= 0) {
        fc_engine_acquire(c->dev, eng, 0, &h);
        t0 = fc_now_ns();
    }
    fc_map_rdlock();
    bool ok = sides_ok_locked(cp);
    if (ok)
        do_copy(cp);
    fc_map_unlock();
    if (eng >= 0) {
        fc_sleep_until(t0 + (uint64_t)((double)copy_bytes(cp) / fc_proc.cfg.bytes_per_ns));
        fc_engine_release(&h, NULL);
    }
    return ok ? CUDA_SUCCESS : CUDA_ERROR_ILLEGAL_ADDRESS;
}

bool fc_copy_dst_dev(int dir) { return dst_dev(dir); }
bool fc_copy_src_dev(int dir) { return src_dev(dir); }

CUresult fc_copy_check(const struct fc_copy *cp)
{
    if (copy_bytes(cp) && (!cp->dst || !cp->src))
        return CUDA_ERROR_INVALID_VALUE;
    fc_map_rdlock();
    bool ok = sides_ok_locked(cp);
    fc_map_unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Submits cp in context c: refused while c has a sticky error; the default
 * streams are c's. */
static CUresult copy_submit_in(struct fc_ctx *c, const struct fc_copy *cp, CUstream hs, bool pt,
                               bool sync)
{
    CUresult r = (CUresult)atomic_load(&c->sticky);
    if (r == CUDA_SUCCESS)
        r = fc_copy_check(cp);
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_stream *s;
    r = fc_stream_resolve_in(c, hs, pt, &s);
    if (r != CUDA_SUCCESS || copy_bytes(cp) == 0)
        return r;
    struct fc_op *op = fc_op_new(FC_OP_COPY);
    if (op)
        op->u.copy = *cp;
    return sync ? fc_submit_sync(s, op) : fc_submit(s, op, NULL);
}

/* In the current context. */
static CUresult copy_submit(const struct fc_copy *cp, CUstream hs, bool pt, bool sync)
{
    struct fc_ctx *c;
    CUresult r = fc_ctx_current(&c);
    return r == CUDA_SUCCESS ? copy_submit_in(c, cp, hs, pt, sync) : r;
}

static CUresult copy1d(uintptr_t dst, uintptr_t src, size_t n, int dir, CUstream hs, bool pt, bool sync)
{
    struct fc_copy cp = { .dst = dst, .src = src, .width = n, .height = 1, .depth = 1, .dir = dir };
    return copy_submit(&cp, hs, pt, sync);
}

/* Unified addressing: the address map says which side is the device's. */
static int infer_dir(uintptr_t dst, uintptr_t src)
{
    bool d = fc_map_is_device(dst), s = fc_map_is_device(src);
    return d ? (s ? FC_D2D : FC_H2D) : (s ? FC_D2H : FC_H2H);
}

static CUresult copy_unified(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream hs, bool pt, bool sync)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    return copy1d(dst, src, n, infer_dir(dst, src), hs, pt, sync);
}

CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy_unified(dst, src, n, NULL, false, true); }
CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy_unified(dst, src, n, NULL, true, true); }
CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    FC_FAULT(cuMemcpyAsync);
    return copy_unified(dst, src, n, s, false, false);
}
CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { return copy_unified(dst, src, n, s, true, false); }

CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n)
{
    FC_FAULT(cuMemcpyHtoD_v2);
    return copy1d(dst, (uintptr_t)src, n, FC_H2D, NULL, false, true);
}
CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n) { return copy1d(dst, (uintptr_t)src, n, FC_H2D, NULL, true, true); }
CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) { return copy1d(dst, (uintptr_t)src, n, FC_H2D, s, false, false); }
CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream s) { return copy1d(dst, (uintptr_t)src, n, FC_H2D, s, true, false); }

CUresult CUDAAPI cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n)
{
    FC_FAULT(cuMemcpyDtoH_v2);
    return copy1d((uintptr_t)dst, src, n, FC_D2H, NULL, false, true);
}
CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n) { return copy1d((uintptr_t)dst, src, n, FC_D2H, NULL, true, true); }
CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s) { return copy1d((uintptr_t)dst, src, n, FC_D2H, s, false, false); }
CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream s) { return copy1d((uintptr_t)dst, src, n, FC_D2H, s, true, false); }

CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy1d(dst, src, n, FC_D2D, NULL, false, true); }
CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) { return copy1d(dst, src, n, FC_D2D, NULL, true, true); }
CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { return copy1d(dst, src, n, FC_D2D, s, false, false); }
CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) { return copy1d(dst, src, n, FC_D2D, s, true, false); }

/* A peer copy names both its contexts, so it needs no current one (a
 * thread that only copies between two GPUs may have none). Without a
 * stream it runs on the source context's default stream; a sticky error
 * of either context refuses it. */
static CUresult copy_peer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                          size_t n, CUstream hs, bool pt, bool sync)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_ctx *dc = (struct fc_ctx *)dctx, *sc = (struct fc_ctx *)sctx;
    if (!fc_ctx_valid(dc) || !fc_ctx_valid(sc))
        return CUDA_ERROR_INVALID_CONTEXT;
    r = (CUresult)atomic_load(&dc->sticky);
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_copy cp = { .dst = dst, .src = src, .width = n, .height = 1, .depth = 1, .dir = FC_D2D };
    return copy_submit_in(sc, &cp, hs, pt, sync);
}

CUresult CUDAAPI cuMemcpyPeer(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n)
{
    return copy_peer(dst, dctx, src, sctx, n, NULL, false, true);
}

CUresult CUDAAPI cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n)
{
    return copy_peer(dst, dctx, src, sctx, n, NULL, true, true);
}

CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n, CUstream s)
{
    return copy_peer(dst, dctx, src, sctx, n, s, false, false);
}

CUresult CUDAAPI cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx, size_t n, CUstream s)
{
    return copy_peer(dst, dctx, src, sctx, n, s, true, false);
}

/* ------------------------------------------------------------- 2-D, 3-D */

/* One side of a 2-D/3-D copy: its address and whether it is the
 * device's. Arrays are not simulated. */
static CUresult side(CUmemorytype t, const void *host, CUdeviceptr dev, uintptr_t *addr, bool *is_dev)
{
    switch (t) {
    case CU_MEMORYTYPE_HOST:
        *addr = (uintptr_t)host;
        *is_dev = false;
        return CUDA_SUCCESS;
    case CU_MEMORYTYPE_DEVICE:
        *addr = dev;
        *is_dev = true;
        return CUDA_SUCCESS;
    case CU_MEMORYTYPE_UNIFIED:
        *addr = dev;
        *is_dev = fc_map_is_device(dev);
        return CUDA_SUCCESS;
    case CU_MEMORYTYPE_ARRAY:
        return CUDA_ERROR_NOT_SUPPORTED;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static int dir_of(bool dst_is_dev, bool src_is_dev)
{
    return dst_is_dev ? (src_is_dev ? FC_D2D : FC_H2D) : (src_is_dev ? FC_D2H : FC_H2H);
}

static CUresult copy2d(const CUDA_MEMCPY2D *p, CUstream hs, bool pt, bool sync)
{
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    uintptr_t src, dst;
    bool sd, dd;
    r = side(p->srcMemoryType, p->srcHost, p->srcDevice, &src, &sd);
    if (r == CUDA_SUCCESS)
        r = side(p->dstMemoryType, p->dstHost, p->dstDevice, &dst, &dd);
    if (r != CUDA_SUCCESS)
        return r;
    size_t spitch = p->srcPitch ? p->srcPitch : p->WidthInBytes;
    size_t dpitch = p->dstPitch ? p->dstPitch : p->WidthInBytes;
    if (p->Height > 1 && (spitch < p->WidthInBytes || dpitch < p->WidthInBytes))
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_copy cp = {
        .src = src + p->srcY * spitch + p->srcXInBytes,
        .dst = dst + p->dstY * dpitch + p->dstXInBytes,
        .spitch = spitch, .dpitch = dpitch,
        .width = p->WidthInBytes, .height = p->Height, .depth = 1,
        .dir = dir_of(dd, sd),
    };
    return copy_submit(&cp, hs, pt, sync);
}

CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D *p) { return copy2d(p, NULL, false, true); }
CUresult CUDAAPI cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *p) { return copy2d(p, NULL, true, true); }
CUresult CUDAAPI cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *p) { return copy2d(p, NULL, false, true); }
CUresult CUDAAPI cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *p) { return copy2d(p, NULL, true, true); }
CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream s) { return copy2d(p, s, false, false); }
CUresult CUDAAPI cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *p, CUstream s) { return copy2d(p, s, true, false); }

CUresult fc_copy_from3d(const CUDA_MEMCPY3D *p, struct fc_copy *out)
{
    if (!p || p->reserved0 || p->reserved1 || p->srcLOD || p->dstLOD)
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t src, dst;
    bool sd, dd;
    CUresult r = side(p->srcMemoryType, p->srcHost, p->srcDevice, &src, &sd);
    if (r == CUDA_SUCCESS)
        r = side(p->dstMemoryType, p->dstHost, p->dstDevice, &dst, &dd);
    if (r != CUDA_SUCCESS)
        return r;
    size_t spitch = p->srcPitch ? p->srcPitch : p->WidthInBytes;
    size_t dpitch = p->dstPitch ? p->dstPitch : p->WidthInBytes;
    size_t sh = p->srcHeight ? p->srcHeight : p->Height;
    size_t dh = p->dstHeight ? p->dstHeight : p->Height;
    if ((p->Height > 1 || p->Depth > 1) && (spitch < p->WidthInBytes || dpitch < p->WidthInBytes))
        return CUDA_ERROR_INVALID_VALUE;
    if (p->Depth > 1 && (sh < p->Height || dh < p->Height))
        return CUDA_ERROR_INVALID_VALUE;
    *out = (struct fc_copy){
        .src = src + (p->srcZ * sh + p->srcY) * spitch + p->srcXInBytes,
        .dst = dst + (p->dstZ * dh + p->dstY) * dpitch + p->dstXInBytes,
        .spitch = spitch, .dpitch = dpitch, .sslice = spitch * sh, .dslice = dpitch * dh,
        .width = p->WidthInBytes, .height = p->Height, .depth = p->Depth,
        .dir = dir_of(dd, sd),
    };
    return CUDA_SUCCESS;
}

static CUresult copy3d(const CUDA_MEMCPY3D *p, CUstream hs, bool pt, bool sync)
{
    CUresult r = fc_ready();
    struct fc_copy cp;
    if (r == CUDA_SUCCESS)
        r = fc_copy_from3d(p, &cp);
    return r == CUDA_SUCCESS ? copy_submit(&cp, hs, pt, sync) : r;
}

CUresult CUDAAPI cuMemcpy3D_v2(const CUDA_MEMCPY3D *p) { return copy3d(p, NULL, false, true); }
CUresult CUDAAPI cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *p) { return copy3d(p, NULL, true, true); }
CUresult CUDAAPI cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *p, CUstream s) { return copy3d(p, s, false, false); }
CUresult CUDAAPI cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *p, CUstream s) { return copy3d(p, s, true, false); }

/* --------------------------------------------------------------- memsets */

CUresult fc_memset_run(const struct fc_memset *ms)
{
    size_t rowbytes = ms->width * ms->esize;
    size_t total = (ms->height - 1) * ms->pitch + rowbytes;
    fc_map_rdlock();
    bool ok = fc_map_covered_locked(ms->dst, total, FC_PROT_W);
    for (size_t y = 0; ok && y < ms->height; y++) {
        char *row = (char *)ms->dst + y * ms->pitch;
        if (ms->esize == 1) {
            memset(row, (int)(ms->value & 0xff), rowbytes);
        } else if (ms->esize == 2) {
            uint16_t v = (uint16_t)ms->value;
            for (size_t i = 0; i < ms->width; i++)
                memcpy(row + 2 * i, &v, 2);
        } else {
            uint32_t v = ms->value;
            for (size_t i = 0; i < ms->width; i++)
                memcpy(row + 4 * i, &v, 4);
        }
    }
    fc_map_unlock();
    return ok ? CUDA_SUCCESS : CUDA_ERROR_ILLEGAL_ADDRESS;
}

CUresult fc_memset_make(uintptr_t dst, size_t pitch, uint32_t value, unsigned esize,
                        size_t width, size_t height, struct fc_memset *out)
{
    if (height == 1)
        pitch = width * esize;
    if (dst % esize || pitch % esize || pitch < width * esize)
        return CUDA_ERROR_INVALID_VALUE;
    *out = (struct fc_memset){ .dst = dst, .pitch = pitch, .width = width, .height = height,
                               .esize = esize, .value = value };
    return CUDA_SUCCESS;
}

bool fc_memset_covered(const struct fc_memset *ms)
{
    return fc_map_covered(ms->dst, (ms->height - 1) * ms->pitch + ms->width * ms->esize, FC_PROT_W);
}

/* During capture the real driver records a memset without looking at its
 * address (measured: an unmapped one is CUDA_SUCCESS, the launch faults),
 * while a copy is checked at the call like outside capture. */
static CUresult memset_submit(CUdeviceptr dst, size_t pitch, uint32_t value, unsigned esize,
                              size_t width, size_t height, CUstream hs, bool pt, bool sync)
{
    struct fc_ctx *c;
    CUresult r = fc_ctx_enter(&c);
    struct fc_memset ms;
    if (r == CUDA_SUCCESS)
        r = fc_memset_make(dst, pitch, value, esize, width, height, &ms);
    if (r != CUDA_SUCCESS || width == 0 || height == 0)
        return r;
    struct fc_stream *s;
    r = fc_stream_resolve(hs, pt, &s);
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_stream_capturing(s) && !fc_memset_covered(&ms))
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_op *op = fc_op_new(FC_OP_MEMSET);
    if (op)
        op->u.set = ms;
    return sync ? fc_submit_sync(s, op) : fc_submit(s, op, NULL);
}

#define FC_MEMSET1D(name, type, esize, pt, sync)                               \
    CUresult CUDAAPI name(CUdeviceptr dst, type v, size_t n)                   \
    {                                                                          \
        return memset_submit(dst, 0, v, esize, n, 1, NULL, pt, sync);          \
    }
#define FC_MEMSET1D_ASYNC(name, type, esize, pt)                               \
    CUresult CUDAAPI name(CUdeviceptr dst, type v, size_t n, CUstream s)       \
    {                                                                          \
        return memset_submit(dst, 0, v, esize, n, 1, s, pt, false);            \
    }
#define FC_MEMSET2D(name, type, esize, pt)                                     \
    CUresult CUDAAPI name(CUdeviceptr dst, size_t pitch, type v, size_t w,     \
                          size_t h)                                            \
    {                                                                          \
        return memset_submit(dst, pitch, v, esize, w, h, NULL, pt, true);      \
    }
#define FC_MEMSET2D_ASYNC(name, type, esize, pt)                               \
    CUresult CUDAAPI name(CUdeviceptr dst, size_t pitch, type v, size_t w,     \
                          size_t h, CUstream s)                                \
    {                                                                          \
        return memset_submit(dst, pitch, v, esize, w, h, s, pt, false);        \
    }

FC_MEMSET1D(cuMemsetD8_v2, unsigned char, 1, false, true)
FC_MEMSET1D(cuMemsetD8_v2_ptds, unsigned char, 1, true, true)
FC_MEMSET1D(cuMemsetD16_v2, unsigned short, 2, false, true)
FC_MEMSET1D(cuMemsetD16_v2_ptds, unsigned short, 2, true, true)
FC_MEMSET1D(cuMemsetD32_v2, unsigned int, 4, false, true)
FC_MEMSET1D(cuMemsetD32_v2_ptds, unsigned int, 4, true, true)
FC_MEMSET1D_ASYNC(cuMemsetD8Async, unsigned char, 1, false)
FC_MEMSET1D_ASYNC(cuMemsetD8Async_ptsz, unsigned char, 1, true)
FC_MEMSET1D_ASYNC(cuMemsetD16Async, unsigned short, 2, false)
FC_MEMSET1D_ASYNC(cuMemsetD16Async_ptsz, unsigned short, 2, true)
FC_MEMSET1D_ASYNC(cuMemsetD32Async, unsigned int, 4, false)
FC_MEMSET1D_ASYNC(cuMemsetD32Async_ptsz, unsigned int, 4, true)
FC_MEMSET2D(cuMemsetD2D8_v2, unsigned char, 1, false)
FC_MEMSET2D(cuMemsetD2D8_v2_ptds, unsigned char, 1, true)
FC_MEMSET2D(cuMemsetD2D16_v2, unsigned short, 2, false)
FC_MEMSET2D(cuMemsetD2D16_v2_ptds, unsigned short, 2, true)
FC_MEMSET2D(cuMemsetD2D32_v2, unsigned int, 4, false)
FC_MEMSET2D(cuMemsetD2D32_v2_ptds, unsigned int, 4, true)
FC_MEMSET2D_ASYNC(cuMemsetD2D8Async, unsigned char, 1, false)
FC_MEMSET2D_ASYNC(cuMemsetD2D8Async_ptsz, unsigned char, 1, true)
FC_MEMSET2D_ASYNC(cuMemsetD2D16Async, unsigned short, 2, false)
FC_MEMSET2D_ASYNC(cuMemsetD2D16Async_ptsz, unsigned short, 2, true)
FC_MEMSET2D_ASYNC(cuMemsetD2D32Async, unsigned int, 4, false)
FC_MEMSET2D_ASYNC(cuMemsetD2D32Async_ptsz, unsigned int, 4, true)
