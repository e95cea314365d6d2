/* fc_module.c: modules, libraries, functions and the kernel catalogue.
 *
 * Any image is accepted (PTX text, a cubin, garbage): functions are found
 * by name in the catalogue below, whose kernels run on the host with these
 * exact parameters (the same as tests/kernels/fc_kernels.cu):
 *   fc_sleep (uint64_t ns)                                 occupies the device ns
 *   fc_fill32(CUdeviceptr p, uint64_t n, uint32_t v)       p[i] = v,  i < n
 *   fc_add32 (CUdeviceptr p, uint64_t n, uint32_t v)       p[i] += v, i < n
 *   fc_sum32 (CUdeviceptr p, uint64_t n, CUdeviceptr out)  *(uint64_t *)out += sum p[0..n)
 * A kernel touching memory the device cannot access (unmapped, freed, no
 * cuMemSetAccess) fails with CUDA_ERROR_ILLEGAL_ADDRESS, which the stream
 * makes sticky on its context, like a real GPU fault.
 *
 * A CUfunction and a CUkernel are the same structure, so a CUkernel can be
 * launched as a CUfunction (cuKernelGetFunction returns it unchanged).
 */
#include "fakecuda/fc_internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------ catalogue */

static uint64_t arg_u64(const unsigned char *a, size_t off)
{
    uint64_t v;
    memcpy(&v, a + off, sizeof v);
    return v;
}

static uint32_t arg_u32(const unsigned char *a, size_t off)
{
    uint32_t v;
    memcpy(&v, a + off, sizeof v);
    return v;
}

static CUresult k_sleep(const unsigned char *a)
{
    fc_sleep_ns(arg_u64(a, 0));
    return CUDA_SUCCESS;
}

/* Checks a uint32 array the device is about to touch; map read-locked. */
static CUresult array_ok_locked(uintptr_t p, uint64_t n, unsigned prot)
{
    if (p % 4)
        return CUDA_ERROR_MISALIGNED_ADDRESS;
    if (n > SIZE_MAX / 4 || !fc_map_covered_locked(p, (size_t)n * 4, prot))
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    return CUDA_SUCCESS;
}

static CUresult k_fill_add(const unsigned char *a, bool add)
{
    uint32_t *p = (uint32_t *)(uintptr_t)arg_u64(a, 0);
    uint64_t n = arg_u64(a, 8);
    uint32_t v = arg_u32(a, 16);
    fc_map_rdlock();
    CUresult r = array_ok_locked((uintptr_t)p, n, add ? FC_PROT_R | FC_PROT_W : FC_PROT_W);
    if (r == CUDA_SUCCESS) {
        if (add)
            for (uint64_t i = 0; i < n; i++)
                p[i] += v;
        else
            for (uint64_t i = 0; i < n; i++)
                p[i] = v;
    }
    fc_map_unlock();
    return r;
}

static CUresult k_fill(const unsigned char *a) { return k_fill_add(a, false); }
static CUresult k_add(const unsigned char *a) { return k_fill_add(a, true); }

static CUresult k_sum(const unsigned char *a)
{
    const uint32_t *p = (const uint32_t *)(uintptr_t)arg_u64(a, 0);
    uint64_t n = arg_u64(a, 8);
    uintptr_t out = (uintptr_t)arg_u64(a, 16);
    fc_map_rdlock();
    CUresult r = array_ok_locked((uintptr_t)p, n, FC_PROT_R);
    if (r == CUDA_SUCCESS && out % 8)
        r = CUDA_ERROR_MISALIGNED_ADDRESS;
    if (r == CUDA_SUCCESS && !fc_map_covered_locked(out, 8, FC_PROT_R | FC_PROT_W))
        r = CUDA_ERROR_ILLEGAL_ADDRESS;
    if (r == CUDA_SUCCESS) {
        uint64_t sum = 0;
        for (uint64_t i = 0; i < n; i++)
            sum += p[i];
        *(uint64_t *)out += sum;
    }
    fc_map_unlock();
    return r;
}

static const struct fc_kdesc catalogue[] = {
    { "fc_sleep", 8, 1, { 8 }, { 0 }, k_sleep },
    { "fc_fill32", 20, 3, { 8, 8, 4 }, { 0, 8, 16 }, k_fill },
    { "fc_add32", 20, 3, { 8, 8, 4 }, { 0, 8, 16 }, k_add },
    { "fc_sum32", 24, 3, { 8, 8, 8 }, { 0, 8, 16 }, k_sum },
};
#define NKERNELS (sizeof catalogue / sizeof catalogue[0])

/* ---------------------------------------------------- functions, modules */

struct fc_func {
    const struct fc_kdesc *k;
    void *owner;                     /* its module or library */
    /* Attributes set by cuFuncSetAttribute; guarded by mod_lock. */
    int max_dyn_shmem;
    int carveout;
};

struct fc_module {
    struct fc_list node;             /* in `modules`; keeps f[0] off offset 0 */
    struct fc_ctx *ctx;
    struct fc_func f[NKERNELS];
};

struct fc_library {
    /* Handles are keyed by address: the library's must differ from its
     * first kernel's, hence a field ahead of k[]. */
    unsigned nkernels;
    struct fc_func k[NKERNELS];
};

/* Every loaded module, for unloading with its context; guarded by
 * mod_lock, which also guards the functions' attributes. */
static pthread_mutex_t mod_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fc_list modules = { &modules, &modules };

static void funcs_init(struct fc_func *f, void *owner, enum fc_htype type)
{
    for (size_t i = 0; i < NKERNELS; i++) {
        f[i].k = &catalogue[i];
        f[i].owner = owner;
        f[i].max_dyn_shmem = 48 << 10;
        f[i].carveout = -1;
        fc_handle_add(&f[i], type);
    }
}

static void funcs_forget(struct fc_func *f)
{
    for (size_t i = 0; i < NKERNELS; i++)
        fc_handle_del(&f[i]);
}

const struct fc_kdesc *fc_func_kdesc(CUfunction h)
{
    enum fc_htype t = fc_handle_type(h);
    return t == FC_H_FUNC || t == FC_H_KERNEL ? ((struct fc_func *)h)->k : NULL;
}

static CUresult module_load(CUmodule *pmod, const void *image)
{
    if (!pmod || !image)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c;
    CUresult r = fc_ctx_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_module *m = calloc(1, sizeof *m);
    if (!m || fc_handle_add(m, FC_H_MODULE) != 0) {
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->ctx = c;
    funcs_init(m->f, m, FC_H_FUNC);
    pthread_mutex_lock(&mod_lock);
    fc_list_add(&modules, &m->node);
    pthread_mutex_unlock(&mod_lock);
    *pmod = (CUmodule)m;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
    return module_load(module, image);
}

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
                                    CUjit_option *options, void **optionValues)
{
    return module_load(module, image);
}

CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
    return module_load(module, fatCubin);
}

CUresult CUDAAPI cuModuleLoad(CUmodule *module, const char *fname)
{
    if (!fname)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (access(fname, R_OK) != 0)
        return CUDA_ERROR_FILE_NOT_FOUND;
    return module_load(module, fname);
}

static void module_free(struct fc_module *m)
{
    fc_handle_del(m);
    funcs_forget(m->f);
    fc_list_del(&m->node);
    free(m);
}

CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_handle_is(hmod, FC_H_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&mod_lock);
    module_free((struct fc_module *)hmod);
    pthread_mutex_unlock(&mod_lock);
    return CUDA_SUCCESS;
}

void fc_module_free_ctx(struct fc_ctx *c)
{
    pthread_mutex_lock(&mod_lock);
    for (struct fc_list *l = modules.next; l != &modules;) {
        struct fc_module *m = FC_CONTAINER(l, struct fc_module, node);
        l = l->next;
        if (m->ctx == c)
            module_free(m);
    }
    pthread_mutex_unlock(&mod_lock);
}

static CUresult find_func(struct fc_func *set, const char *name, struct fc_func **out)
{
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < NKERNELS; i++) {
        if (strcmp(set[i].k->name, name) == 0) {
            *out = &set[i];
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_NOT_FOUND;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    if (!hfunc)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_handle_is(hmod, FC_H_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    struct fc_func *f;
    r = find_func(((struct fc_module *)hmod)->f, name, &f);
    if (r == CUDA_SUCCESS)
        *hfunc = (CUfunction)f;
    return r;
}

CUresult CUDAAPI cuModuleGetFunctionCount(unsigned int *count, CUmodule mod)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_handle_is(mod, FC_H_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    *count = NKERNELS;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleEnumerateFunctions(CUfunction *functions, unsigned int numFunctions, CUmodule mod)
{
    if (!functions)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_handle_is(mod, FC_H_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    for (unsigned i = 0; i < numFunctions && i < NKERNELS; i++)
        functions[i] = (CUfunction) & ((struct fc_module *)mod)->f[i];
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule hmod, const char *name)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_handle_is(hmod, FC_H_MODULE))
        return CUDA_ERROR_INVALID_HANDLE;
    return name ? CUDA_ERROR_NOT_FOUND : CUDA_ERROR_INVALID_VALUE;   /* no globals */
}

CUresult CUDAAPI cuModuleGetLoadingMode(CUmoduleLoadingMode *mode)
{
    if (!mode)
        return CUDA_ERROR_INVALID_VALUE;
    *mode = CU_MODULE_EAGER_LOADING;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ libraries */

static CUresult library_load(CUlibrary *plib, const void *code)
{
    if (!plib || !code)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    struct fc_library *l = calloc(1, sizeof *l);
    if (!l || fc_handle_add(l, FC_H_LIBRARY) != 0) {
        free(l);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    l->nkernels = NKERNELS;
    funcs_init(l->k, l, FC_H_KERNEL);
    *plib = (CUlibrary)l;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                                   void **jitOptionsValues, unsigned int numJitOptions,
                                   CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                   unsigned int numLibraryOptions)
{
    return library_load(library, code);
}

CUresult CUDAAPI cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                                       void **jitOptionsValues, unsigned int numJitOptions,
                                       CUlibraryOption *libraryOptions, void **libraryOptionValues,
                                       unsigned int numLibraryOptions)
{
    if (!fileName)
        return CUDA_ERROR_INVALID_VALUE;
    if (access(fileName, R_OK) != 0)
        return CUDA_ERROR_FILE_NOT_FOUND;
    return library_load(library, fileName);
}

CUresult CUDAAPI cuLibraryUnload(CUlibrary library)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_handle_is(library, FC_H_LIBRARY))
        return CUDA_ERROR_INVALID_HANDLE;
    struct fc_library *l = (struct fc_library *)library;
    fc_handle_del(l);
    funcs_forget(l->k);
    free(l);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    if (!pKernel)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_handle_is(library, FC_H_LIBRARY))
        return CUDA_ERROR_INVALID_HANDLE;
    struct fc_func *f;
    r = find_func(((struct fc_library *)library)->k, name, &f);
    if (r == CUDA_SUCCESS)
        *pKernel = (CUkernel)f;
    return r;
}

CUresult CUDAAPI cuLibraryGetKernelCount(unsigned int *count, CUlibrary lib)
{
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_handle_is(lib, FC_H_LIBRARY))
        return CUDA_ERROR_INVALID_HANDLE;
    *count = NKERNELS;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLibraryEnumerateKernels(CUkernel *kernels, unsigned int numKernels, CUlibrary lib)
{
    if (!kernels)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_handle_is(lib, FC_H_LIBRARY))
        return CUDA_ERROR_INVALID_HANDLE;
    for (unsigned i = 0; i < numKernels && i < NKERNELS; i++)
        kernels[i] = (CUkernel) & ((struct fc_library *)lib)->k[i];
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    if (!pFunc)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_ctx *c;
    CUresult r = fc_ctx_current(&c);
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_handle_is(kernel, FC_H_KERNEL))
        return CUDA_ERROR_INVALID_HANDLE;
    *pFunc = (CUfunction)kernel;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuKernelGetLibrary(CUlibrary *pLib, CUkernel kernel)
{
    if (!pLib)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_handle_is(kernel, FC_H_KERNEL))
        return CUDA_ERROR_INVALID_HANDLE;
    *pLib = (CUlibrary)((struct fc_func *)kernel)->owner;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------ attributes */

static CUresult func_get(const void *h, struct fc_func **out)
{
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_func_kdesc((CUfunction)h))
        return CUDA_ERROR_INVALID_HANDLE;
    *out = (struct fc_func *)h;
    return CUDA_SUCCESS;
}

static CUresult func_attr(struct fc_func *f, CUfunction_attribute a, int *v)
{
    pthread_mutex_lock(&mod_lock);
    int dyn = f->max_dyn_shmem, carve = f->carveout;
    pthread_mutex_unlock(&mod_lock);
    switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *v = 1024; break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: *v = 0; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *v = 16; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: *v = 80; break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *v = 90; break;
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA: *v = 0; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *v = dyn; break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT: *v = carve; break;
    default:
        if ((int)a < 0 || a >= CU_FUNC_ATTRIBUTE_MAX)
            return CUDA_ERROR_INVALID_VALUE;
        *v = 0;                      /* cluster attributes: none */
    }
    return CUDA_SUCCESS;
}

static CUresult func_set_attr(struct fc_func *f, CUfunction_attribute a, int v)
{
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&mod_lock);
    switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
        if (v < 0 || v > 232448)
            r = CUDA_ERROR_INVALID_VALUE;
        else
            f->max_dyn_shmem = v;
        break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
        if (v < -1 || v > 100)
            r = CUDA_ERROR_INVALID_VALUE;
        else
            f->carveout = v;
        break;
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
    case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
    case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
    case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
        break;
    default:
        r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&mod_lock);
    return r;
}

CUresult CUDAAPI cuFuncGetAttribute(int *pi, CUfunction_attribute attrib, CUfunction hfunc)
{
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_func *f;
    CUresult r = func_get(hfunc, &f);
    return r == CUDA_SUCCESS ? func_attr(f, attrib, pi) : r;
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction hfunc, CUfunction_attribute attrib, int value)
{
    struct fc_func *f;
    CUresult r = func_get(hfunc, &f);
    return r == CUDA_SUCCESS ? func_set_attr(f, attrib, value) : r;
}

CUresult CUDAAPI cuKernelGetAttribute(int *pi, CUfunction_attribute attrib, CUkernel kernel, CUdevice dev)
{
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_check_device(dev);
    struct fc_func *f;
    if (r == CUDA_SUCCESS)
        r = func_get(kernel, &f);
    return r == CUDA_SUCCESS ? func_attr(f, attrib, pi) : r;
}

CUresult CUDAAPI cuKernelSetAttribute(CUfunction_attribute attrib, int val, CUkernel kernel, CUdevice dev)
{
    CUresult r = fc_check_device(dev);
    struct fc_func *f;
    if (r == CUDA_SUCCESS)
        r = func_get(kernel, &f);
    return r == CUDA_SUCCESS ? func_set_attr(f, attrib, val) : r;
}

CUresult CUDAAPI cuFuncSetCacheConfig(CUfunction hfunc, CUfunc_cache config)
{
    struct fc_func *f;
    return func_get(hfunc, &f);
}

CUresult CUDAAPI cuKernelSetCacheConfig(CUkernel kernel, CUfunc_cache config, CUdevice dev)
{
    struct fc_func *f;
    CUresult r = fc_check_device(dev);
    return r == CUDA_SUCCESS ? func_get(kernel, &f) : r;
}

CUresult CUDAAPI cuFuncSetSharedMemConfig(CUfunction hfunc, CUsharedconfig config)
{
    struct fc_func *f;
    return func_get(hfunc, &f);
}

CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction hfunc)
{
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_func *f;
    CUresult r = func_get(hfunc, &f);
    if (r == CUDA_SUCCESS)
        *name = f->k->name;
    return r;
}

CUresult CUDAAPI cuKernelGetName(const char **name, CUkernel hfunc)
{
    return cuFuncGetName(name, (CUfunction)hfunc);
}

CUresult CUDAAPI cuFuncGetModule(CUmodule *hmod, CUfunction hfunc)
{
    if (!hmod)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_ready();
    if (r != CUDA_SUCCESS)
        return r;
    if (!fc_handle_is(hfunc, FC_H_FUNC))
        return CUDA_ERROR_INVALID_HANDLE;
    *hmod = (CUmodule)((struct fc_func *)hfunc)->owner;
    return CUDA_SUCCESS;
}

static CUresult param_info(const void *h, size_t index, size_t *off, size_t *size)
{
    if (!off)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_func *f;
    CUresult r = func_get(h, &f);
    if (r != CUDA_SUCCESS)
        return r;
    if (index >= (size_t)f->k->nparams)
        return CUDA_ERROR_INVALID_VALUE;
    *off = f->k->poff[index];
    if (size)
        *size = f->k->psize[index];
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
    return param_info(func, paramIndex, paramOffset, paramSize);
}

CUresult CUDAAPI cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset, size_t *paramSize)
{
    return param_info(kernel, paramIndex, paramOffset, paramSize);
}

CUresult CUDAAPI cuFuncIsLoaded(CUfunctionLoadingState *state, CUfunction function)
{
    if (!state)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_func *f;
    CUresult r = func_get(function, &f);
    if (r == CUDA_SUCCESS)
        *state = CU_FUNCTION_LOADING_STATE_LOADED;
    return r;
}

CUresult CUDAAPI cuFuncLoad(CUfunction function)
{
    struct fc_func *f;
    return func_get(function, &f);
}

/* Occupancy: H100-like answers (2048 threads, 32 blocks per SM). */
CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction func,
                                                             int blockSize, size_t dynamicSMemSize)
{
    if (!numBlocks || blockSize <= 0 || blockSize > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_func *f;
    CUresult r = func_get(func, &f);
    if (r == CUDA_SUCCESS) {
        int n = 2048 / blockSize;
        *numBlocks = n > 32 ? 32 : n;
    }
    return r;
}

CUresult CUDAAPI cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction func,
                                                                      int blockSize, size_t dynamicSMemSize,
                                                                      unsigned int flags)
{
    return cuOccupancyMaxActiveBlocksPerMultiprocessor(numBlocks, func, blockSize, dynamicSMemSize);
}

CUresult CUDAAPI cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction func,
                                                  CUoccupancyB2DSize blockSizeToDynamicSMemSize,
                                                  size_t dynamicSMemSize, int blockSizeLimit)
{
    if (!minGridSize || !blockSize)
        return CUDA_ERROR_INVALID_VALUE;
    struct fc_func *f;
    CUresult r = func_get(func, &f);
    if (r == CUDA_SUCCESS) {
        *blockSize = blockSizeLimit > 0 && blockSizeLimit < 1024 ? blockSizeLimit : 1024;
        *minGridSize = 132 * (2048 / *blockSize);
    }
    return r;
}

/* Forked child: the parent's modules are the parent's. */
void fc_module_atfork_child(void)
{
    pthread_mutex_init(&mod_lock, NULL);
    FC_LIST_INIT(&modules);
}
