/* reallib_probe.c: cuInit (looked up at run time, as the CUDA runtime
 * does: the hook does not wrap it) and cuDeviceTotalMem_v2 (wrapped: it
 * loads the real driver), their results printed. Linked against
 * libcuda.so.1 for cuDeviceTotalMem_v2 alone, so that reallib.sh can run
 * it with libcuda.so.1 resolving to libcushare.so itself. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>

int main(void)
{
    CUresult (*init)(unsigned int);
    *(void **)&init = dlsym(RTLD_DEFAULT, "cuInit");
    CUresult r = init ? init(0) : CUDA_ERROR_NOT_FOUND;
    size_t bytes = 0;
    CUresult m = cuDeviceTotalMem_v2(&bytes, 0);
    printf("cuInit=%d totalmem=%d bytes=%zu\n", (int)r, (int)m, bytes);
    return 0;
}
