/* fc_ctx.c: contexts, the thread's current-context stack, and primary
 * contexts.
 *
 * A context costs FC_CTX_COST of device memory while it exists (charged to
 * the process's slot). Destroying a context (or resetting/releasing the
 * primary one to zero) drains and destroys its streams, then frees what it
 * owns: allocations, host allocations, modules, captures.
 *
 * A primary context's structure is allocated once per device and never
 * freed, so its CUcontext value is the same across retain/release cycles,
 * like the real driver's; it is a valid handle only while active.
 */
#include "fakecuda/fc_internal.h"

#include <stdlib.h>
#include <string.h>

#define FC_CTX_STACK 64

/* Per-thread current-context stack (owned by the thread). */
static __thread struct fc_ctx *tls_stack[FC_CTX_STACK];
static __thread int tls_depth;

/* Context ids: never reused within a process (atomic counter). */
static atomic_uint next_ctx_id = 1;

uint64_t fc_ctx_owner(const struct fc_ctx *c)
{
    return ((uint64_t)(uint32_t)fc_proc.pid << 32) | c->id;
}

bool fc_ctx_valid(const struct fc_ctx *c)
{
    return fc_handle_is(c, FC_H_CTX);
}

static void ctx_reset_fields(struct fc_ctx *c, unsigned flags)
{
    c->id = atomic_fetch_add(&next_ctx_id, 1);
    c->flags = flags;
    atomic_store(&c->sticky, CUDA_SUCCESS);
    c->legacy = NULL;
    c->cache_config = CU_FUNC_CACHE_PREFER_NONE;
    memset(c->limits, 0, sizeof c->limits);
    c->limits[CU_LIMIT_STACK_SIZE] = 1024;
    c->limits[CU_LIMIT_PRINTF_FIFO_SIZE] = 1 << 20;
    c->limits[CU_LIMIT_MALLOC_HEAP_SIZE] = 8 << 20;
    c->limits[CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH] = 2;
    c->limits[CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT] = 2048;
    c->limits[CU_LIMIT_MAX_L2_FETCH_GRANULARITY] = 32;
    c->peers = 0;
}

static struct fc_ctx *ctx_alloc(int dev, bool primary)
{
    struct fc_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->dev = dev;
    c->primary = primary;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->idle, NULL);
    FC_LIST_INIT(&c->streams);
    return c;
}

static void ctx_free(struct fc_ctx *c)
{
    pthread_cond_destroy(&c->idle);
    pthread_mutex_destroy(&c->lock);
    free(c);
}

/* Charges the context's cost and makes it a valid handle. */
static CUresult ctx_activate(struct fc_ctx *c, unsigned flags)
{
    ctx_reset_fields(c, flags);
    CUresult r = fc_shm_charge(c->dev, FC_CTX_COST);
    if (r != CUDA_SUCCESS)
        return r;
    if (fc_handle_add(c, FC_H_CTX) != 0) {
        fc_shm_uncharge(c->dev, FC_CTX_COST);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

/* Invalidates the handle, drains and destroys every stream (their workers
 * finish the queued work first), then frees what the context owns. */
static void ctx_teardown(struct fc_ctx *c)
{
    fc_handle_del(c);
    pthread_mutex_lock(&c->lock);
    for (struct fc_list *n = c->streams.next; n != &c->streams; n = n->next)
        fc_stream_destroy(FC_CONTAINER(n, struct fc_stream, node));
    while (!fc_list_empty(&c->streams))
        pthread_cond_wait(&c->idle, &c->lock);
    c->legacy = NULL;
    pthread_mutex_unlock(&c->lock);
    fc_capture_forget_ctx(c);
    fc_mem_free_ctx(c);
    fc_module_free_ctx(c);
    fc_texture_free_ctx(c);
    fc_shm_uncharge(c->dev, FC_CTX_COST);
}

/* Removes every occurrence of c from the calling thread's stack. */
static void tls_forget(const struct fc_ctx *c)
{
    int j = 0;
    for (int i = 0; i < tls_depth; i++)
        if (tls_stack[i] != c)
            tls_stack[j++] = tls_stack[i];
    tls_depth = j;
}

CUresult fc_ctx_current(struct fc_ctx **out)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (tls_depth == 0 || !fc_ctx_valid(tls_stack[tls_depth - 1]))
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = tls_stack[tls_depth - 1];
    return CUDA_SUCCESS;
}

CUresult fc_ctx_enter(struct fc_ctx **out)
{
    CUresult r = fc_ctx_current(out);
    if (r == CUDA_SUCCESS)
        r = (CUresult)atomic_load(&(*out)->sticky);
    return r;
}

/* Waits for everything queued so far on every stream of c. */
CUresult fc_ctx_sync(struct fc_ctx *c)
{
    pthread_mutex_lock(&c->lock);
    size_t n = 0, cap = 8;
    struct fc_stream **v = malloc(cap * sizeof *v);
    uint64_t *seq = malloc(cap * sizeof *seq);
    for (struct fc_list *l = c->streams.next; v && seq && l != &c->streams; l = l->next) {
        if (n == cap) {
            cap *= 2;
            struct fc_stream **nv = realloc(v, cap * sizeof *v);
            uint64_t *ns = realloc(seq, cap * sizeof *seq);
            if (nv)
                v = nv;
            if (ns)
                seq = ns;
            if (!nv || !ns)
                break;
        }
        struct fc_stream *s = FC_CONTAINER(l, struct fc_stream, node);
        fc_stream_ref(s);
        pthread_mutex_lock(&s->lock);
        seq[n] = s->enqueued;
        pthread_mutex_unlock(&s->lock);
        v[n++] = s;
    }
    pthread_mutex_unlock(&c->lock);
    for (size_t i = 0; i < n; i++) {
        fc_stream_wait(v[i], seq[i]);
        fc_stream_unref(v[i]);
    }
    free(v);
    free(seq);
    return (CUresult)atomic_load(&c->sticky);
}

/* ------------------------------------------------------ explicit contexts */

#define FC_CTX_FLAGS_OK 0xffu

static CUresult ctx_create(CUcontext *pctx, unsigned flags, CUdevice dev)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (flags & ~FC_CTX_FLAGS_OK)
        return CUDA_ERROR_INVALID_VALUE;
    if (tls_depth == FC_CTX_STACK)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c = ctx_alloc(dev, false);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r = ctx_activate(c, flags);
    if (r != CUDA_SUCCESS) {
        ctx_free(c);
        return r;
    }
    tls_stack[tls_depth++] = c;
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return ctx_create(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return ctx_create(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray,
                                int numParams, unsigned int flags, CUdevice dev)
{
    if (numParams < 0 || (numParams > 0 && !paramsArray))
        return CUDA_ERROR_INVALID_VALUE;
    return ctx_create(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                unsigned int flags, CUdevice dev)
{
    if (ctxCreateParams && (ctxCreateParams->numExecAffinityParams > 0
                            || ctxCreateParams->cigParams))
        return CUDA_ERROR_NOT_SUPPORTED;
    return ctx_create(pctx, flags, dev);
}

CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_ctx *c = (struct fc_ctx *)ctx;
    if (!fc_ctx_valid(c) || c->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    ctx_teardown(c);
    tls_forget(c);
    ctx_free(c);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxDestroy(CUcontext ctx)
{
    return cuCtxDestroy_v2(ctx);
}

/* ------------------------------------------------------ the current stack */

static CUresult ctx_push(CUcontext ctx)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_ctx_valid((struct fc_ctx *)ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (tls_depth == FC_CTX_STACK)
        return CUDA_ERROR_INVALID_VALUE;
    tls_stack[tls_depth++] = (struct fc_ctx *)ctx;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx)
{
    FC_FAULT(cuCtxPushCurrent_v2);
    return ctx_push(ctx);
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx)
{
    FC_FAULT(cuCtxPushCurrent);
    return ctx_push(ctx);
}

static CUresult ctx_pop(CUcontext *pctx)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (tls_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    struct fc_ctx *c = tls_stack[--tls_depth];
    if (pctx)
        *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
    FC_FAULT(cuCtxPopCurrent_v2);
    return ctx_pop(pctx);
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pctx)
{
    FC_FAULT(cuCtxPopCurrent);
    return ctx_pop(pctx);
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    *pctx = tls_depth ? (CUcontext)tls_stack[tls_depth - 1] : NULL;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
    FC_FAULT(cuCtxSetCurrent);
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!ctx) {
        if (tls_depth)
            tls_depth--;
        return CUDA_SUCCESS;
    }
    if (!fc_ctx_valid((struct fc_ctx *)ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (tls_depth == 0)
        tls_depth = 1;
    tls_stack[tls_depth - 1] = (struct fc_ctx *)ctx;
    return CUDA_SUCCESS;
}

/* ctx NULL: the current context. */
static CUresult ctx_or_current(CUcontext ctx, struct fc_ctx **out)
{
    if (!ctx)
        return fc_ctx_current(out);
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_ctx_valid((struct fc_ctx *)ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    *out = (struct fc_ctx *)ctx;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
    FC_FAULT(cuCtxGetDevice);
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c;
    CUresult r = fc_ctx_current(&c);
    if (r == CUDA_SUCCESS)
        *device = c->dev;
    return r;
}

CUresult CUDAAPI cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c;
    CUresult r = ctx_or_current(ctx, &c);
    if (r == CUDA_SUCCESS)
        *device = c->dev;
    return r;
}

/* Peer access is bookkeeping here: every device's memory is reachable
 * from every context anyway (docs/fakecuda.md, Not simulated). What is
 * modelled is the driver's answers: FAKECUDA_PEER=1 lets distinct devices
 * access each other, once per (context, peer device). */
static CUresult peer_target(CUcontext peer, struct fc_ctx **cur, uint32_t *bit)
{
    CUresult r = fc_ctx_current(cur);
    if (r != CUDA_SUCCESS)
        return r;
    if (!peer || !fc_ctx_valid((struct fc_ctx *)peer))
        return CUDA_ERROR_INVALID_CONTEXT;
    int dev = ((struct fc_ctx *)peer)->dev;
    if (dev == (*cur)->dev)
        return CUDA_ERROR_INVALID_DEVICE;
    *bit = 1u << dev;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags)
{
    FC_FAULT(cuCtxEnablePeerAccess);
    struct fc_ctx *c;
    uint32_t bit;
    CUresult r = peer_target(peer, &c, &bit);
    if (r != CUDA_SUCCESS)
        return r;
    if (flags)
        return CUDA_ERROR_INVALID_VALUE;
    if (!fc_proc.peer)
        return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    pthread_mutex_lock(&c->lock);
    bool had = c->peers & bit;
    c->peers |= bit;
    pthread_mutex_unlock(&c->lock);
    return had ? CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED : CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peer)
{
    FC_FAULT(cuCtxDisablePeerAccess);
    struct fc_ctx *c;
    uint32_t bit;
    CUresult r = peer_target(peer, &c, &bit);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&c->lock);
    bool had = c->peers & bit;
    c->peers &= ~bit;
    pthread_mutex_unlock(&c->lock);
    return had ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
}

static CUresult ctx_synchronize(CUcontext ctx)
{
    struct fc_ctx *c;
    CUresult r = ctx_or_current(ctx, &c);
    if (r != CUDA_SUCCESS)
        return r;
    r = fc_capture_check_unsafe();
    if (r != CUDA_SUCCESS)
        return r;
    return fc_ctx_sync(c);
}

CUresult CUDAAPI cuCtxSynchronize(void)
{
    FC_FAULT(cuCtxSynchronize);
    return ctx_synchronize(NULL);
}

CUresult CUDAAPI cuCtxSynchronize_v2(CUcontext ctx)
{
    return ctx_synchronize(ctx);
}

CUresult CUDAAPI cuCtxGetApiVersion(CUcontext ctx, unsigned int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c;
    CUresult r = ctx_or_current(ctx, &c);
    if (r == CUDA_SUCCESS)
        *version = 3020;
    return r;
}

CUresult CUDAAPI cuCtxGetFlags(unsigned int *flags)
{
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c;
    CUresult r = fc_ctx_current(&c);
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&c->lock);
        *flags = c->flags;
        pthread_mutex_unlock(&c->lock);
    }
    return r;
}

CUresult CUDAAPI cuCtxSetFlags(unsigned int flags)
{
    struct fc_ctx *c;
    CUresult r = fc_ctx_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (flags & ~FC_CTX_FLAGS_OK)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&c->lock);
    c->flags = flags;
    pthread_mutex_unlock(&c->lock);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
    if (!ctxId)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c;
    CUresult r = ctx_or_current(ctx, &c);
    if (r == CUDA_SUCCESS)
        *ctxId = c->id;
    return r;
}

CUresult CUDAAPI cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority)
{
    struct fc_ctx *c;
    CUresult r = fc_ctx_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (leastPriority)
        *leastPriority = 0;
    if (greatestPriority)
        *greatestPriority = -5;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetLimit(size_t *pvalue, CUlimit limit)
{
    if (!pvalue || (int)limit < 0 || limit >= CU_LIMIT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c;
    CUresult r = fc_ctx_current(&c);
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&c->lock);
        *pvalue = c->limits[limit];
        pthread_mutex_unlock(&c->lock);
    }
    return r;
}

CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value)
{
    if ((int)limit < 0 || limit >= CU_LIMIT_MAX)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c;
    CUresult r = fc_ctx_current(&c);
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&c->lock);
        c->limits[limit] = value;
        pthread_mutex_unlock(&c->lock);
    }
    return r;
}

CUresult CUDAAPI cuCtxGetCacheConfig(CUfunc_cache *pconfig)
{
    if (!pconfig)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c;
    CUresult r = fc_ctx_current(&c);
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&c->lock);
        *pconfig = (CUfunc_cache)c->cache_config;
        pthread_mutex_unlock(&c->lock);
    }
    return r;
}

CUresult CUDAAPI cuCtxSetCacheConfig(CUfunc_cache config)
{
    if ((int)config < 0 || config > CU_FUNC_CACHE_PREFER_EQUAL)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c;
    CUresult r = fc_ctx_current(&c);
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&c->lock);
        c->cache_config = (int)config;
        pthread_mutex_unlock(&c->lock);
    }
    return r;
}

CUresult CUDAAPI cuCtxGetSharedMemConfig(CUsharedconfig *pConfig)
{
    if (!pConfig)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c;
    CUresult r = fc_ctx_current(&c);
    if (r == CUDA_SUCCESS)
        *pConfig = CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE;
    return r;
}

CUresult CUDAAPI cuCtxSetSharedMemConfig(CUsharedconfig config)
{
    struct fc_ctx *c;
    return fc_ctx_current(&c);
}

CUresult CUDAAPI cuCtxResetPersistingL2Cache(void)
{
    struct fc_ctx *c;
    return fc_ctx_current(&c);
}

/* ------------------------------------------------------ primary contexts */

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    FC_FAULT(cuDevicePrimaryCtxRetain);
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_proc.lock);
    struct fc_ctx *c = fc_proc.primary[dev];
    if (!c)
        c = fc_proc.primary[dev] = ctx_alloc(dev, true);
    if (!c)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else if (fc_proc.primary_refs[dev] == 0)
        r = ctx_activate(c, fc_proc.primary_flags[dev]);
    if (r == CUDA_SUCCESS) {
        fc_proc.primary_refs[dev]++;
        *pctx = (CUcontext)c;
    }
    pthread_mutex_unlock(&fc_proc.lock);
    return r;
}

static CUresult primary_release(CUdevice dev, bool reset)
{
    CUresult r = fc_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_proc.lock);
    if (fc_proc.primary_refs[dev] == 0) {
        r = reset ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    } else if (reset || --fc_proc.primary_refs[dev] == 0) {
        fc_proc.primary_refs[dev] = 0;
        ctx_teardown(fc_proc.primary[dev]);
        tls_forget(fc_proc.primary[dev]);
    }
    pthread_mutex_unlock(&fc_proc.lock);
    return r;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    return primary_release(dev, false);
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return primary_release(dev, false);
}

CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    return primary_release(dev, true);
}

CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice dev)
{
    return primary_release(dev, true);
}

CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&fc_proc.lock);
    *flags = fc_proc.primary_flags[dev];
    *active = fc_proc.primary_refs[dev] > 0;
    pthread_mutex_unlock(&fc_proc.lock);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    CUresult r = fc_check_device(dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (flags & ~FC_CTX_FLAGS_OK)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&fc_proc.lock);
    fc_proc.primary_flags[dev] = flags;
    struct fc_ctx *c = fc_proc.primary[dev];
    if (c && fc_proc.primary_refs[dev] > 0) {
        pthread_mutex_lock(&c->lock);
        c->flags = flags;
        pthread_mutex_unlock(&c->lock);
    }
    pthread_mutex_unlock(&fc_proc.lock);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

/* Forked child: the thread's stack held the parent's contexts; the
 * primary context structures are abandoned with the rest (kept reachable). */
static struct fc_ctx *forsaken[FC_MAX_DEVICES];
void fc_ctx_atfork_child(void)
{
    tls_depth = 0;
    for (int d = 0; d < FC_MAX_DEVICES; d++) {
        if (fc_proc.primary[d])
            forsaken[d] = fc_proc.primary[d];
        fc_proc.primary[d] = NULL;
        fc_proc.primary_refs[d] = 0;
    }
}
