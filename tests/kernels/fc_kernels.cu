// fc_kernels.cu: the simulated driver's kernel catalogue as real CUDA, so
// that driver-API programs written against the simulator (tests/progs,
// fc_api_test) run unchanged on a GPU. Same names (extern "C") and exact
// parameters as src/fakecuda/fc_module.c:
//   fc_sleep (uint64_t ns)                                 occupies the GPU for ns
//   fc_fill32(CUdeviceptr p, uint64_t n, uint32_t v)       p[i] = v
//   fc_add32 (CUdeviceptr p, uint64_t n, uint32_t v)       p[i] += v
//   fc_sum32 (CUdeviceptr p, uint64_t n, CUdeviceptr out)  *(uint64_t *)out += sum p[0..n)
// Grid-stride loops: any launch shape covers all n elements.
//
// fc_kernels.ptx is generated from this file and committed:
//   nvcc -ptx -arch=compute_80 -o fc_kernels.ptx fc_kernels.cu
// (compute_80 PTX is JIT-compiled by the driver of any Ampere or newer GPU).
#include <stdint.h>

static __device__ __forceinline__ uint64_t globaltimer()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void fc_sleep(uint64_t ns)
{
    uint64_t start = globaltimer();
    while (globaltimer() - start < ns)
        ;
}

extern "C" __global__ void fc_fill32(uint32_t *p, uint64_t n, uint32_t v)
{
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] = v;
}

extern "C" __global__ void fc_add32(uint32_t *p, uint64_t n, uint32_t v)
{
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        p[i] += v;
}

extern "C" __global__ void fc_sum32(const uint32_t *p, uint64_t n, unsigned long long *out)
{
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
    unsigned long long sum = 0;
    for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        sum += p[i];
    if (sum)
        atomicAdd(out, sum);
}
