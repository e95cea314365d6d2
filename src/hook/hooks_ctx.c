/* hooks_ctx.c: context lifetime and cuGetProcAddress.
 *
 * Contexts are registered lazily, the first time one is current during a
 * hooked call (device.c). These hooks catch the other end: when a context
 * goes away the device forgets it (no drain of a dead context) and the
 * memory it owned stops counting against the quota.
 */
#include "hook/hook.h"
#include "hook/hooks_ctx.h"
#include "hook/device.h"
#include "hook/gate.h"
#include "hook/pmap.h"
#include "hook/client.h"
#include "hook/config.h"
#include "hook/mem.h"
#include "common/log.h"
#include "common/util.h"


#include <pthread.h>

/* Each device's primary context handle, as last returned by the driver.
 * Guarded by primary_mu. */
static pthread_mutex_t primary_mu = PTHREAD_MUTEX_INITIALIZER;
static CUcontext primary[CS_MAX_DEVICES];

static void context_gone(CUcontext ctx)
{
    if (!ctx)
        return;
    cs_ctx_forget(ctx);
    cs_mem_release_ctx(ctx);
}

/* Callers have loaded the driver (they pass one of its entry points). */
static CUresult ctx_destroy(CUresult (*real)(CUcontext), CUcontext ctx)
{
    cs_nest_enter();
    CUresult r = real(ctx);
    cs_nest_exit();
    if (r == CUDA_SUCCESS)
        context_gone(ctx);
    return r;
}

CS_EXPORT CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    return ctx_destroy(cs_real.cuCtxDestroy_v2, ctx);
}

CS_EXPORT CUresult CUDAAPI cuCtxDestroy(CUcontext ctx)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    return ctx_destroy(cs_real.cuCtxDestroy, ctx);
}

/* A context costs device memory (about 500 MiB on an H100) the hook cannot
 * see in advance. When the driver cannot create one because other jobs'
 * memory fills the GPU, ask the scheduler to move idle jobs' memory out
 * (ROOM, CS_ROOM_CONTEXT) and try again, instead of failing the start.
 * A refusal can be momentary: every other job may be holding the GPU or
 * moving memory for someone else just then (seen on an H100 with four
 * GPT-2 jobs starting at once). So a refused ROOM is asked again with a
 * growing pause, for up to 5 s, as an allocation's is (seg.c). */
#define CS_CONTEXT_ROOM (1ull << 30)
#define CONTEXT_ROOM_PATIENCE_NS 5000000000ull

static bool room_for_context(CUdevice dev)
{
    if (cs_cfg.disabled || dev < 0 || dev >= CS_MAX_DEVICES)
        return false;
    struct cs_dev *d = cs_dev_get((int)dev); /* attaches: no context needed */
    if (!d || !cs_client_is_connected())
        return false;
    cs_info("GPU %d is full: asking the scheduler for room for a new context", (int)dev);
    uint64_t t0 = cs_now_ns();
    for (uint32_t pause_ms = 0;; cs_backoff_sleep(&pause_ms)) {
        if (cs_client_request_room_flags((int)dev, CS_CONTEXT_ROOM, CS_ROOM_CONTEXT) == 0)
            return true;
        if (!cs_client_is_connected() || cs_now_ns() - t0 > CONTEXT_ROOM_PATIENCE_NS)
            return false;
    }
}

CS_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = cs_real.cuDevicePrimaryCtxRetain(pctx, dev);
    for (int i = 0; r == CUDA_ERROR_OUT_OF_MEMORY && i < 3 && room_for_context(dev); i++)
        r = cs_real.cuDevicePrimaryCtxRetain(pctx, dev);
    if (r == CUDA_SUCCESS && pctx && dev >= 0 && dev < CS_MAX_DEVICES) {
        pthread_mutex_lock(&primary_mu);
        primary[dev] = *pctx;
        pthread_mutex_unlock(&primary_mu);
        cs_ctx_note(*pctx, (int)dev);
    }
    return r;
}

/* Contexts are registered for draining as soon as they exist: the gate's
 * fast path may not ask the driver which context is current (device.h). */
#define CTX_CREATE_WRAPPER(sym, params, pctx, dev, args)                       \
    CS_EXPORT CUresult CUDAAPI sym params                                      \
    {                                                                          \
        if (cs_real_init() < 0)                                                \
            return CUDA_ERROR_NOT_INITIALIZED;                                 \
        CUresult r = cs_real.sym args;                                         \
        for (int i_ = 0; r == CUDA_ERROR_OUT_OF_MEMORY && i_ < 3 && room_for_context(dev); i_++) \
            r = cs_real.sym args;                                              \
        if (r == CUDA_SUCCESS && (pctx))                                       \
            cs_ctx_note(*(pctx), (int)(dev));                                  \
        return r;                                                              \
    }

CTX_CREATE_WRAPPER(cuCtxCreate, (CUcontext *pctx, unsigned int flags, CUdevice dev), pctx, dev,
                   (pctx, flags, dev))
CTX_CREATE_WRAPPER(cuCtxCreate_v2, (CUcontext *pctx, unsigned int flags, CUdevice dev), pctx,
                   dev, (pctx, flags, dev))
CTX_CREATE_WRAPPER(cuCtxCreate_v3,
                   (CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                    unsigned int flags, CUdevice dev),
                   pctx, dev, (pctx, paramsArray, numParams, flags, dev))
CTX_CREATE_WRAPPER(cuCtxCreate_v4,
                   (CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                    CUdevice dev),
                   pctx, dev, (pctx, ctxCreateParams, flags, dev))

/* After a release or a reset, the primary context is gone if the driver
 * says it is no longer active. */
static void primary_maybe_gone(CUdevice dev)
{
    if (dev < 0 || dev >= CS_MAX_DEVICES)
        return;
    unsigned int flags = 0;
    int active = 1;
    if (cs_real.cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || active)
        return;
    pthread_mutex_lock(&primary_mu);
    CUcontext ctx = primary[dev];
    primary[dev] = NULL;
    pthread_mutex_unlock(&primary_mu);
    context_gone(ctx);
}

static CUresult primary_release(CUresult (*real)(CUdevice), CUdevice dev)
{
    cs_nest_enter();
    CUresult r = real(dev);
    cs_nest_exit();
    if (r == CUDA_SUCCESS)
        primary_maybe_gone(dev);
    return r;
}

CS_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    return primary_release(cs_real.cuDevicePrimaryCtxRelease_v2, dev);
}

CS_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    return primary_release(cs_real.cuDevicePrimaryCtxRelease, dev);
}

CS_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    return primary_release(cs_real.cuDevicePrimaryCtxReset_v2, dev);
}

CS_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    return primary_release(cs_real.cuDevicePrimaryCtxReset, dev);
}

/* The real driver resolves (name, version, flags) to an entry point; we
 * hand back the wrapper of exactly that entry point, or the driver's own
 * pointer when we do not wrap it (real.c). */
CS_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                               cuuint64_t flags,
                                               CUdriverProcAddressQueryResult *symbolStatus)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = cs_real.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (r == CUDA_SUCCESS && pfn && *pfn)
        *pfn = cs_real_map(*pfn);
    return r;
}

CS_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                            cuuint64_t flags)
{
    if (cs_real_init() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult r = cs_real.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
    if (r == CUDA_SUCCESS && pfn && *pfn)
        *pfn = cs_real_map(*pfn);
    return r;
}

void cs_ctx_hooks_reset_after_fork(void)
{
    pthread_mutex_init(&primary_mu, NULL);
    for (int i = 0; i < CS_MAX_DEVICES; i++)
        primary[i] = NULL;
}
