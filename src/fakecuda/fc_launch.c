/* fc_launch.c: kernel launches, their execution on the device's engine,
 * and the kernel trace.
 *
 * Parameters are copied at launch, from kernelParams (one pointer per
 * parameter) or from `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER/SIZE, the
 * parameters packed with natural alignment, no trailing padding: fc_fill32
 * takes 20 bytes). Grid and block dimensions are
 * validated like the real driver's but otherwise ignored.
 *
 * Execution holds the device's kernel engine (fc_engine.c) for the whole
 * kernel, so kernels of different contexts, in any processes, never
 * overlap in time on one device (unless FAKECUDA_CONCURRENT=1 in this
 * process: its kernels then skip the engine and may overlap anyone's, as
 * under MPS, which lets a test see whether a scheduler above the driver
 * keeps processes apart); each executed kernel appends one line to
 * FAKECUDA_TRACE:
 *   <device> <pid> <context id> <kernel name> <start ns> <end ns>
 * (CLOCK_MONOTONIC; one write(2) per line, O_APPEND, so lines of several
 * processes never interleave).
 */
#include "fakecuda/fc_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void fc_trace_kernel(int dev, const struct fc_ctx *c, const char *name, uint64_t start, uint64_t end)
{
    if (fc_proc.trace_fd < 0)
        return;
    char line[160];
    int n = snprintf(line, sizeof line, "%d %d %u %s %llu %llu\n", dev, (int)fc_proc.pid,
                     c->id, name, (unsigned long long)start, (unsigned long long)end);
    if (n > 0 && (size_t)n < sizeof line) {
        ssize_t w = write(fc_proc.trace_fd, line, (size_t)n);
        (void)w;
    }
}

/* The kernel leaves the context's backlog before the engine is released,
 * so that the release sees whether the context has more kernels queued
 * (which keeps its time slice, fc_engine.c). */
CUresult fc_kernel_run(struct fc_ctx *c, const struct fc_op *op)
{
    const struct fc_kdesc *k = op->u.kernel.k;
    struct fc_hold h;
    bool engine = !fc_proc.cfg.concurrent;
    if (engine)
        fc_engine_acquire(c->dev, FC_ENG_KERNEL, fc_ctx_owner(c), &h);
    uint64_t t0 = fc_now_ns();
    CUresult r = k->run(op->u.kernel.args);
    uint64_t t1 = fc_now_ns();
    atomic_fetch_sub(&c->kernels_pending, 1);
    if (engine)
        fc_engine_release(&h, &c->kernels_pending);
    fc_trace_kernel(c->dev, c, k->name, t0, t1);
    return r;
}

/* Copies the kernel's parameters into args. */
static CUresult pack_args(const struct fc_kdesc *k, void **params, void **extra, unsigned char *args)
{
    if (params && extra)
        return CUDA_ERROR_INVALID_VALUE;
    if (params) {
        for (int i = 0; i < k->nparams; i++) {
            if (!params[i])
                return CUDA_ERROR_INVALID_VALUE;
            memcpy(args + k->poff[i], params[i], k->psize[i]);
        }
        return CUDA_SUCCESS;
    }
    if (!extra)
        return CUDA_ERROR_INVALID_VALUE;
    const void *buf = NULL;
    const size_t *size = NULL;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            buf = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
            size = extra[i + 1];
        else
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (!buf || !size)
        return CUDA_ERROR_INVALID_VALUE;
    /* The real driver refuses a buffer larger than the kernel's parameter
     * space and takes a shorter one as is (measured on an H100). */
    if (*size > k->argbytes)
        return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    memset(args, 0, k->argbytes);
    memcpy(args, buf, *size);
    return CUDA_SUCCESS;
}

static CUresult check_dims(const unsigned g[3], const unsigned b[3], unsigned shmem)
{
    if (!g[0] || !g[1] || !g[2] || !b[0] || !b[1] || !b[2])
        return CUDA_ERROR_INVALID_VALUE;
    if (g[1] > 65535 || g[2] > 65535 || g[0] > 2147483647u)
        return CUDA_ERROR_INVALID_VALUE;
    if (b[0] > 1024 || b[1] > 1024 || b[2] > 64 || (uint64_t)b[0] * b[1] * b[2] > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    if (shmem > 232448)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult fc_kernel_prepare(CUfunction f, const unsigned g[3], const unsigned b[3], unsigned shmem,
                           void **params, void **extra, struct fc_op *op)
{
    const struct fc_kdesc *k = fc_func_kdesc(f);
    if (!k)
        return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = check_dims(g, b, shmem);
    if (r != CUDA_SUCCESS)
        return r;
    op->kind = FC_OP_KERNEL;
    op->u.kernel.k = k;
    op->u.kernel.f = f;
    memcpy(op->u.kernel.grid, g, sizeof op->u.kernel.grid);
    memcpy(op->u.kernel.block, b, sizeof op->u.kernel.block);
    op->u.kernel.shmem = shmem;
    return pack_args(k, params, extra, op->u.kernel.args);
}

static CUresult launch(CUfunction f, const unsigned g[3], const unsigned b[3], unsigned shmem,
                       CUstream hs, bool pt, void **params, void **extra)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_func_kdesc(f))
        return CUDA_ERROR_INVALID_HANDLE;
    r = check_dims(g, b, shmem);
    struct fc_ctx *c;
    if (r == CUDA_SUCCESS)
        r = fc_ctx_enter(&c);
    struct fc_stream *s;
    if (r == CUDA_SUCCESS)
        r = fc_stream_resolve(hs, pt, &s);
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_op *op = fc_op_new(FC_OP_KERNEL);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r = fc_kernel_prepare(f, g, b, shmem, params, extra, op);
    if (r != CUDA_SUCCESS) {
        free(op);
        return r;
    }
    return fc_submit(s, op, NULL);
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                unsigned int bx, unsigned int by, unsigned int bz,
                                unsigned int sharedMemBytes, CUstream hStream,
                                void **kernelParams, void **extra)
{
    unsigned g[3] = { gx, gy, gz }, b[3] = { bx, by, bz };
    return launch(f, g, b, sharedMemBytes, hStream, false, kernelParams, extra);
}

CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                     unsigned int bx, unsigned int by, unsigned int bz,
                                     unsigned int sharedMemBytes, CUstream hStream,
                                     void **kernelParams, void **extra)
{
    unsigned g[3] = { gx, gy, gz }, b[3] = { bx, by, bz };
    return launch(f, g, b, sharedMemBytes, hStream, true, kernelParams, extra);
}

static CUresult launch_ex(const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra, bool pt)
{
    if (!cfg || (cfg->numAttrs && !cfg->attrs))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned g[3] = { cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ };
    unsigned b[3] = { cfg->blockDimX, cfg->blockDimY, cfg->blockDimZ };
    return launch(f, g, b, cfg->sharedMemBytes, cfg->hStream, pt, params, extra);
}

CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    return launch_ex(config, f, kernelParams, extra, false);
}

CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra)
{
    return launch_ex(config, f, kernelParams, extra, true);
}

CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                           unsigned int bx, unsigned int by, unsigned int bz,
                                           unsigned int sharedMemBytes, CUstream hStream, void **kernelParams)
{
    unsigned g[3] = { gx, gy, gz }, b[3] = { bx, by, bz };
    return launch(f, g, b, sharedMemBytes, hStream, false, kernelParams, NULL);
}

CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                                unsigned int bx, unsigned int by, unsigned int bz,
                                                unsigned int sharedMemBytes, CUstream hStream, void **kernelParams)
{
    unsigned g[3] = { gx, gy, gz }, b[3] = { bx, by, bz };
    return launch(f, g, b, sharedMemBytes, hStream, true, kernelParams, NULL);
}
