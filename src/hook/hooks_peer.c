/* hooks_peer.c: copies between two devices wait for both leases; so does
 * all work of a device with peer access to another. */
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

/* Peer access lets work of the current context's device reach the peer
 * context's memory by its addresses. cushare's memory of a device whose
 * lease is away is not on that GPU, so from here on this device's work also
 * waits for the peer device's lease (cs_gate_couple; struct cs_dev_gate
 * says what went wrong without it). One direction: the peer's own work
 * couples only when it enables access back, as frameworks do for copies in
 * both directions. */
CS_EXPORT CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    if (cs_unlikely(!cs_real_ready()) && cs_hook_init_slow() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = cs_real.cuCtxEnablePeerAccess(peerContext, Flags);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
        return r;
    cs_nest_enter(); /* context lookups below may call the driver */
    CUcontext cur = NULL;
    if (cs_real.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur)
        cs_gate_couple(cs_dev_of_ctx(cur), cs_dev_of_ctx(peerContext));
    cs_nest_exit();
    return r;
}
