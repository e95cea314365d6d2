/* fc_mem.c: device allocations, host (pinned/registered) memory, memory
 * pools and stream-ordered allocation (pointer attributes: fc_pointer.c).
 *
 * Device memory is host memory (an anonymous mapping per allocation), so a
 * device pointer is a host virtual address and kernels and copies run on
 * the host. Every allocation is charged to the device's shared capacity
 * (fc_shm.c), page-rounded. Fresh device memory is filled with FC_POISON
 * (0xFB): on a real GPU it holds garbage, and a fixed poison makes a
 * missing restore detectable by tests.
 *
 * Managed memory is not charged (the real driver only charges it when
 * pages migrate). Host memory is never charged. Stream-ordered
 * allocations (cuMemAllocAsync) are made at once and charged at once;
 * their free happens when the stream reaches it.
 */
#include "fakecuda/fc_internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---------------------------------------------------------- memory pools */

struct fc_pool {
    int dev;
    bool is_default;
    /* Attributes; guarded by pool_lock. */
    uint64_t release_threshold;
    int reuse_flags[3];
    uint64_t used, used_high;
};

/* Default pools exist per device for the process's life; user pools come
 * and go. pool_lock guards the attributes, counters and cur_pool. */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fc_pool default_pool[FC_MAX_DEVICES];
static struct fc_pool *cur_pool[FC_MAX_DEVICES];

static struct fc_pool *pool_default(int dev)
{
    pthread_mutex_lock(&pool_lock);
    struct fc_pool *p = &default_pool[dev];
    if (!p->is_default) {
        p->dev = dev;
        p->is_default = true;
        p->reuse_flags[0] = p->reuse_flags[1] = p->reuse_flags[2] = 1;
        fc_handle_add(p, FC_H_POOL);
    }
    pthread_mutex_unlock(&pool_lock);
    return p;
}

static struct fc_pool *pool_current(int dev)
{
    struct fc_pool *d = pool_default(dev);
    pthread_mutex_lock(&pool_lock);
    struct fc_pool *p = cur_pool[dev] ? cur_pool[dev] : d;
    pthread_mutex_unlock(&pool_lock);
    return p;
}

static void pool_account(struct fc_pool *p, int64_t delta)
{
    if (!p)
        return;
    pthread_mutex_lock(&pool_lock);
    p->used += (uint64_t)delta;
    if (p->used > p->used_high)
        p->used_high = p->used;
    pthread_mutex_unlock(&pool_lock);
}

/* ---------------------------------------------------------- allocations */

/* Maps, poisons, charges and registers one device-side allocation. */
static CUresult dev_alloc(struct fc_ctx *c, size_t size, int kind, struct fc_pool *pool,
                          CUdeviceptr *out)
{
    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    size_t len = fc_page_round(size);
    if (len < size)
        return CUDA_ERROR_OUT_OF_MEMORY;
    bool charged = kind == FC_R_DEVICE;
    if (charged && fc_shm_charge(c->dev, len) != CUDA_SUCCESS)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = fc_map_anon(len, false);
    if (p == MAP_FAILED) {
        if (charged)
            fc_shm_uncharge(c->dev, len);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    memset(p, FC_POISON, len);
    struct fc_range r = {
        .start = (uintptr_t)p, .end = (uintptr_t)p + len, .kind = kind,
        .dev = c->dev, .prot = FC_PROT_R | FC_PROT_W, .dev_loc = true,
        .ctx = c, .obj = pool, .size = size,
    };
    CUresult rc = fc_map_insert(&r);
    if (rc != CUDA_SUCCESS) {
        munmap(p, len);
        if (charged)
            fc_shm_uncharge(c->dev, len);
        return rc;
    }
    pool_account(pool, (int64_t)len);
    if (charged)
        fc_create_delay(len);
    *out = (CUdeviceptr)p;
    return CUDA_SUCCESS;
}

static void release_range(const struct fc_range *r)
{
    size_t len = r->end - r->start;
    munmap((void *)r->start, len);
    if (r->kind == FC_R_DEVICE) {
        fc_shm_uncharge(r->dev, len);
        pool_account(r->obj, -(int64_t)len);
    }
}

CUresult fc_mem_free_addr(uintptr_t p, bool sync)
{
    struct fc_range r;
    if (!fc_map_find(p, &r) || r.start != p
        || (r.kind != FC_R_DEVICE && r.kind != FC_R_MANAGED))
        return CUDA_ERROR_INVALID_VALUE;
    /* Like cudaFree, wait for the context's queued work, which may still
     * use the memory (the real free is synchronizing). */
    if (sync && r.ctx && fc_ctx_valid(r.ctx))
        fc_ctx_sync(r.ctx);
    if (!fc_map_remove(p, r.kind, &r))
        return CUDA_ERROR_INVALID_VALUE;
    release_range(&r);
    return CUDA_SUCCESS;
}

/* A context going away frees its allocations and host allocations;
 * registrations are the application's memory and are only forgotten. */
void fc_mem_free_ctx(struct fc_ctx *c)
{
    struct fc_range *v;
    size_t n = fc_map_collect_ctx(c, &v);
    for (size_t i = 0; i < n; i++) {
        struct fc_range r;
        if (!fc_map_remove(v[i].start, v[i].kind, &r))
            continue;
        if (r.kind != FC_R_HOSTREG)
            release_range(&r);
    }
    free(v);
}

static CUresult alloc_entry(CUdeviceptr *dptr, size_t size, int kind)
{
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c;
    CUresult r = fc_ctx_enter(&c);
    if (r == CUDA_SUCCESS)
        r = fc_capture_check_unsafe();
    if (r == CUDA_SUCCESS)
        r = dev_alloc(c, size, kind, NULL, dptr);
    return r;
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    FC_FAULT(cuMemAlloc_v2);
    return alloc_entry(dptr, bytesize, FC_R_DEVICE);
}

CUresult CUDAAPI cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                    size_t Height, unsigned int ElementSizeBytes)
{
    FC_FAULT(cuMemAllocPitch_v2);
    if (!dptr || !pPitch || WidthInBytes == 0 || Height == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16)
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = (WidthInBytes + FC_PITCH_ALIGN - 1) / FC_PITCH_ALIGN * FC_PITCH_ALIGN;
    if (Height > SIZE_MAX / pitch)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = alloc_entry(dptr, pitch * Height, FC_R_DEVICE);
    if (r == CUDA_SUCCESS)
        *pPitch = pitch;
    return r;
}

CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    FC_FAULT(cuMemAllocManaged);
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_entry(dptr, bytesize, FC_R_MANAGED);
}

CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    FC_FAULT(cuMemFree_v2);
    struct fc_ctx *c;
    CUresult r = fc_ctx_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (dptr == 0)
        return CUDA_SUCCESS;
    r = fc_capture_check_unsafe();
    if (r != CUDA_SUCCESS)
        return r;
    return fc_mem_free_addr(dptr, true);
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t *free_b, size_t *total_b)
{
    if (!free_b || !total_b)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c;
    CUresult r = fc_ctx_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    uint64_t f, t;
    fc_shm_meminfo(c->dev, &f, &t);
    *free_b = f;
    *total_b = t;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_range rg;
    if (!fc_map_find(dptr, &rg) || rg.kind == FC_R_HOSTREG)
        return CUDA_ERROR_NOT_FOUND;
    if (pbase)
        *pbase = rg.start;
    if (psize)
        *psize = rg.size;
    return CUDA_SUCCESS;
}

/* ----------------------------------------------------------- host memory */

#define FC_HOSTALLOC_FLAGS (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)
#define FC_HOSTREG_FLAGS (CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | \
                          CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY)

static CUresult host_alloc(void **pp, size_t bytesize, unsigned int Flags)
{
    if (!pp || bytesize == 0 || (Flags & ~(unsigned)FC_HOSTALLOC_FLAGS))
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c;
    CUresult r = fc_ctx_enter(&c);
    if (r == CUDA_SUCCESS)
        r = fc_capture_check_unsafe();
    if (r != CUDA_SUCCESS)
        return r;
    /* Pinned memory is resident: populate it now, so that copies into it
     * do not pay page faults inside their simulated time. */
    size_t len = fc_page_round(bytesize);
    void *p = fc_map_anon(len, true);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct fc_range rg = {
        .start = (uintptr_t)p, .end = (uintptr_t)p + len, .kind = FC_R_HOST,
        .dev = c->dev, .prot = FC_PROT_R | FC_PROT_W, .ctx = c, .size = bytesize,
        .flags = Flags,
    };
    r = fc_map_insert(&rg);
    if (r != CUDA_SUCCESS) {
        munmap(p, len);
        return r;
    }
    fc_pin_delay(len);
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    FC_FAULT(cuMemHostAlloc);
    return host_alloc(pp, bytesize, Flags);
}

CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    FC_FAULT(cuMemAllocHost_v2);
    return host_alloc(pp, bytesize, 0);
}

CUresult CUDAAPI cuMemFreeHost(void *p)
{
    FC_FAULT(cuMemFreeHost);
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_range rg;
    if (!p || !fc_map_remove((uintptr_t)p, FC_R_HOST, &rg))
        return CUDA_ERROR_INVALID_VALUE;
    release_range(&rg);
    return CUDA_SUCCESS;
}

static CUresult host_register(void *p, size_t bytesize, unsigned int Flags)
{
    if (!p || bytesize == 0 || (Flags & ~(unsigned)FC_HOSTREG_FLAGS))
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c;
    CUresult r = fc_ctx_enter(&c);
    if (r == CUDA_SUCCESS)
        r = fc_capture_check_unsafe();
    if (r != CUDA_SUCCESS)
        return r;
    if ((uintptr_t)p + bytesize < (uintptr_t)p)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_range rg = {
        .start = (uintptr_t)p, .end = (uintptr_t)p + bytesize, .kind = FC_R_HOSTREG,
        .dev = c->dev, .ctx = c, .size = bytesize, .flags = Flags,
        .prot = (Flags & CU_MEMHOSTREGISTER_READ_ONLY) ? FC_PROT_R : FC_PROT_R | FC_PROT_W,
    };
    r = fc_map_insert(&rg);
    if (r == CUDA_SUCCESS)
        fc_pin_delay(bytesize);
    return r == CUDA_ERROR_INVALID_VALUE ? CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED : r;
}

CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    FC_FAULT(cuMemHostRegister_v2);
    return host_register(p, bytesize, Flags);
}

CUresult CUDAAPI cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    FC_FAULT(cuMemHostRegister);
    return host_register(p, bytesize, Flags);
}

CUresult CUDAAPI cuMemHostUnregister(void *p)
{
    FC_FAULT(cuMemHostUnregister);
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!p)
        return CUDA_ERROR_INVALID_VALUE;
    return fc_map_remove((uintptr_t)p, FC_R_HOSTREG, NULL)
               ? CUDA_SUCCESS
               : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

static bool host_range(const void *p, struct fc_range *rg)
{
    return p && fc_map_find((uintptr_t)p, rg)
           && (rg->kind == FC_R_HOST || rg->kind == FC_R_HOSTREG);
}

CUresult CUDAAPI cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    if (!pdptr || Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_range rg;
    if (!host_range(p, &rg))
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)p;           /* unified addressing */
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    if (!pFlags)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_range rg;
    if (!host_range(p, &rg))
        return CUDA_ERROR_INVALID_VALUE;
    *pFlags = rg.flags | CU_MEMHOSTALLOC_DEVICEMAP;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ pools, async */

static CUresult pool_get(CUmemoryPool h, struct fc_pool **out)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_handle_is(h, FC_H_POOL))
        return CUDA_ERROR_INVALID_VALUE;
    *out = (struct fc_pool *)h;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_check_device(dev);
    if (r == CUDA_SUCCESS)
        *pool_out = (CUmemoryPool)pool_default(dev);
    return r;
}

CUresult CUDAAPI cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_check_device(dev);
    if (r == CUDA_SUCCESS)
        *pool = (CUmemoryPool)pool_current(dev);
    return r;
}

CUresult CUDAAPI cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    CUresult r = fc_check_device(dev);
    struct fc_pool *p;
    if (r == CUDA_SUCCESS)
        r = pool_get(pool, &p);
    if (r != CUDA_SUCCESS)
        return r;
    if (p->dev != dev)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&pool_lock);
    cur_pool[dev] = p;
    pthread_mutex_unlock(&pool_lock);
    return CUDA_SUCCESS;
}

static CUresult device_location(const CUmemLocation *loc, CUmemAllocationType type, int *dev)
{
    if (!loc)
        return CUDA_ERROR_INVALID_VALUE;
    if (loc->type != CU_MEM_LOCATION_TYPE_DEVICE || type != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_NOT_SUPPORTED;
    *dev = loc->id;
    return fc_check_device(loc->id);
}

CUresult CUDAAPI cuMemGetDefaultMemPool(CUmemoryPool *pool_out, CUmemLocation *location,
                                        CUmemAllocationType type)
{
    int dev;
    CUresult r = device_location(location, type, &dev);
    return r == CUDA_SUCCESS ? cuDeviceGetDefaultMemPool(pool_out, dev) : r;
}

CUresult CUDAAPI cuMemGetMemPool(CUmemoryPool *pool, CUmemLocation *location, CUmemAllocationType type)
{
    int dev;
    CUresult r = device_location(location, type, &dev);
    return r == CUDA_SUCCESS ? cuDeviceGetMemPool(pool, dev) : r;
}

CUresult CUDAAPI cuMemSetMemPool(CUmemLocation *location, CUmemAllocationType type, CUmemoryPool pool)
{
    int dev;
    CUresult r = device_location(location, type, &dev);
    return r == CUDA_SUCCESS ? cuDeviceSetMemPool(dev, pool) : r;
}

CUresult CUDAAPI cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    if (!pool || !poolProps)
        return CUDA_ERROR_INVALID_VALUE;
    int dev;
    CUresult r = device_location(&poolProps->location, poolProps->allocType, &dev);
    if (r != CUDA_SUCCESS)
        return r;
    if (poolProps->handleTypes != CU_MEM_HANDLE_TYPE_NONE)
        return CUDA_ERROR_NOT_SUPPORTED;
    struct fc_pool *p = calloc(1, sizeof *p);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    p->dev = dev;
    p->reuse_flags[0] = p->reuse_flags[1] = p->reuse_flags[2] = 1;
    if (fc_handle_add(p, FC_H_POOL) != 0) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pool = (CUmemoryPool)p;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemPoolDestroy(CUmemoryPool pool)
{
    struct fc_pool *p;
    CUresult r = pool_get(pool, &p);
    if (r != CUDA_SUCCESS)
        return r;
    if (p->is_default)
        return CUDA_ERROR_INVALID_VALUE;
    fc_handle_del(p);
    pthread_mutex_lock(&pool_lock);
    if (cur_pool[p->dev] == p)
        cur_pool[p->dev] = NULL;
    bool idle = p->used == 0;
    pthread_mutex_unlock(&pool_lock);
    /* Allocations still out point at the pool for their accounting: the
     * structure is then kept (leaked) rather than left dangling. */
    if (idle)
        free(p);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    struct fc_pool *p;
    return pool_get(pool, &p);
}

CUresult CUDAAPI cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    struct fc_pool *p;
    CUresult r = pool_get(pool, &p);
    if (r != CUDA_SUCCESS)
        return r;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_lock);
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        p->reuse_flags[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES] = *(int *)value;
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        p->release_threshold = *(cuuint64_t *)value;
        break;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
        p->used_high = p->used;            /* only resetting is allowed */
        break;
    default:
        r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&pool_lock);
    return r;
}

CUresult CUDAAPI cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    struct fc_pool *p;
    CUresult r = pool_get(pool, &p);
    if (r != CUDA_SUCCESS)
        return r;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&pool_lock);
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        *(int *)value = p->reuse_flags[attr - CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES];
        break;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        *(cuuint64_t *)value = p->release_threshold;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
        *(cuuint64_t *)value = p->used;
        break;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
        *(cuuint64_t *)value = p->used_high;
        break;
    default:
        r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&pool_lock);
    return r;
}

/* Stream-ordered allocation is not captured (no memory nodes). */
static CUresult refuse_capture(struct fc_stream *s)
{
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&s->ctx->lock);
    if (s->cap) {
        fc_capture_invalidate(s->cap);
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    pthread_mutex_unlock(&s->ctx->lock);
    return r;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool hpool, CUstream hs, bool pt)
{
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_stream *s;
    CUresult r = fc_stream_resolve(hs, pt, &s);
    if (r == CUDA_SUCCESS)
        r = (CUresult)atomic_load(&s->ctx->sticky);
    if (r == CUDA_SUCCESS)
        r = refuse_capture(s);
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_pool *pool;
    if (hpool) {
        r = pool_get(hpool, &pool);
        if (r != CUDA_SUCCESS)
            return r;
        if (pool->dev != s->ctx->dev)
            return CUDA_ERROR_INVALID_VALUE;
    } else {
        pool = pool_current(s->ctx->dev);
    }
    return dev_alloc(s->ctx, size, FC_R_DEVICE, pool, dptr);
}

CUresult CUDAAPI cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) { return alloc_async(dptr, bytesize, NULL, hStream, false); }
CUresult CUDAAPI cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) { return alloc_async(dptr, bytesize, NULL, hStream, true); }

CUresult CUDAAPI cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, pool, hStream, false);
}

CUresult CUDAAPI cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    if (!pool)
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_async(dptr, bytesize, pool, hStream, true);
}

static CUresult free_async(CUdeviceptr dptr, CUstream hs, bool pt)
{
    struct fc_stream *s;
    CUresult r = fc_stream_resolve(hs, pt, &s);
    if (r == CUDA_SUCCESS)
        r = refuse_capture(s);
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_range rg;
    if (!fc_map_find(dptr, &rg) || rg.start != dptr || rg.kind != FC_R_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_op *op = fc_op_new(FC_OP_FREE);
    if (op)
        op->u.free.addr = dptr;
    return fc_submit(s, op, NULL);
}

CUresult CUDAAPI cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) { return free_async(dptr, hStream, false); }
CUresult CUDAAPI cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) { return free_async(dptr, hStream, true); }

/* Forked child: the default pools' handles are re-registered on demand. */
void fc_mem_atfork_child(void)
{
    pthread_mutex_init(&pool_lock, NULL);
    memset(default_pool, 0, sizeof default_pool);
    memset(cur_pool, 0, sizeof cur_pool);
}
