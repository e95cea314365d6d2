/* fckern.h: the fc_* test kernels for driver-API programs, on the simulated
 * driver or a real GPU alike.
 *
 * fck_load() loads tests/kernels/fc_kernels.ptx (embedded in the program)
 * into the current context with cuModuleLoadData and returns the four
 * functions; the launch helpers then use the set most recently loaded or
 * selected with fck_use() (one set per context; switching is not
 * thread-safe, which is all the tests need). Each helper launches one
 * kernel on `stream` with a grid-stride shape and returns the launch's
 * CUresult.
 */
#ifndef FCKERN_H
#define FCKERN_H

#include <cuda.h>
#include <stdint.h>

struct fck {
    CUmodule mod;
    CUfunction sleep, fill32, add32, sum32;
};

/* The PTX text, NUL-terminated (fc_kernels_blob.S). */
extern const char fck_ptx[];

CUresult fck_load(struct fck *k);
CUresult fck_unload(struct fck *k);
void fck_use(const struct fck *k);

CUresult fck_sleep(CUstream stream, uint64_t ns);
CUresult fck_fill32(CUstream stream, CUdeviceptr p, uint64_t n, uint32_t v);
CUresult fck_add32(CUstream stream, CUdeviceptr p, uint64_t n, uint32_t v);
CUresult fck_sum32(CUstream stream, CUdeviceptr p, uint64_t n, CUdeviceptr out);

/* The helpers' launch shape for kernel f over n elements, as the
 * parameters of a graph kernel node (cuGraphAddKernelNode and the node
 * SetParams calls): params as cuLaunchKernel takes them, read when the
 * node is made or set. */
CUDA_KERNEL_NODE_PARAMS fck_node_params(CUfunction f, uint64_t n, void **params);

/* The other nodes the graph tests build: n uint32 at p set to v (memset
 * node), and bytes copied from device memory src to dst (memcpy node). */
CUDA_MEMSET_NODE_PARAMS fck_memset32_params(CUdeviceptr p, uint64_t n, uint32_t v);
CUDA_MEMCPY3D fck_copy_params(CUdeviceptr dst, CUdeviceptr src, uint64_t bytes);

#endif
