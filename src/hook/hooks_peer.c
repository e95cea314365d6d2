/* hooks_peer.c: copies between two devices wait for both leases. */
#include "hook/hook.h"
#include "hook/gate.h"

static CUresult peer_enter(struct cs_ticket *ta, struct cs_ticket *tb, CUcontext dst,
                           CUcontext src, CUstream s, int per_thread)
{
    if (cs_unlikely(!cs_real_ready()) && cs_hook_init_slow() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    cs_nest_enter(); /* context lookups below may call the driver */
    struct cs_dev *a = cs_dev_of_ctx(dst);
    struct cs_dev *b = cs_dev_of_ctx(src);
    cs_nest_exit();
    return cs_gate_enter2(ta, tb, a, b, s, per_thread);
}

#define PEER_WRAPPER(sym, params, dst, src, stream, pt, args)                  \
    CS_EXPORT CUresult CUDAAPI sym params                                      \
    {                                                                          \
        struct cs_ticket ta, tb;                                               \
        CUresult r = peer_enter(&ta, &tb, dst, src, stream, pt);               \
        if (r != CUDA_SUCCESS)                                                 \
            return r;                                                          \
        r = cs_real.sym args;                                                  \
        cs_gate_exit2(&ta, &tb);                                               \
        return r;                                                              \
    }

PEER_WRAPPER(cuMemcpyPeer,
             (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
              CUcontext srcContext, size_t ByteCount),
             dstContext, srcContext, (CUstream)0, 0,
             (dstDevice, dstContext, srcDevice, srcContext, ByteCount))
PEER_WRAPPER(cuMemcpyPeer_ptds,
             (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
              CUcontext srcContext, size_t ByteCount),
             dstContext, srcContext, (CUstream)0, 1,
             (dstDevice, dstContext, srcDevice, srcContext, ByteCount))
PEER_WRAPPER(cuMemcpyPeerAsync,
             (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
              CUcontext srcContext, size_t ByteCount, CUstream hStream),
             dstContext, srcContext, hStream, 0,
             (dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream))
PEER_WRAPPER(cuMemcpyPeerAsync_ptsz,
             (CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
              CUcontext srcContext, size_t ByteCount, CUstream hStream),
             dstContext, srcContext, hStream, 1,
             (dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream))
PEER_WRAPPER(cuMemcpy3DPeer, (const CUDA_MEMCPY3D_PEER *pCopy),
             pCopy ? pCopy->dstContext : NULL, pCopy ? pCopy->srcContext : NULL, (CUstream)0, 0,
             (pCopy))
PEER_WRAPPER(cuMemcpy3DPeer_ptds, (const CUDA_MEMCPY3D_PEER *pCopy),
             pCopy ? pCopy->dstContext : NULL, pCopy ? pCopy->srcContext : NULL, (CUstream)0, 1,
             (pCopy))
PEER_WRAPPER(cuMemcpy3DPeerAsync, (const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream),
             pCopy ? pCopy->dstContext : NULL, pCopy ? pCopy->srcContext : NULL, hStream, 0,
             (pCopy, hStream))
PEER_WRAPPER(cuMemcpy3DPeerAsync_ptsz, (const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream),
             pCopy ? pCopy->dstContext : NULL, pCopy ? pCopy->srcContext : NULL, hStream, 1,
             (pCopy, hStream))
