/* fc_procaddr.c: cuGetProcAddress (the 11.3 form) and cuGetProcAddress_v2
 * (the 12.0 form with a query result).
 *
 * The table is generated from the real driver's versioned entry-point
 * table (src/common/cuda_api_table.h, derived from cudaTypedefs.h): one
 * row per (api name, exported symbol, CUDA version that introduced it,
 * variant). For (name, cudaVersion, flags) the answer is the symbol of the
 * newest row with version <= cudaVersion. With
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, an api that has
 * per-thread (_ptds/_ptsz) rows is answered from those rows only, an api
 * without any from its legacy rows. CU_GET_PROC_ADDRESS_DEFAULT means
 * legacy here (as for a program not built for per-thread streams).
 *
 * Results, as measured on the real driver (580, CUDA 13.0, H100):
 *  - found: CUDA_SUCCESS, *pfn set, status SUCCESS;
 *  - unknown name (versioned names such as "cuMemAlloc_v2" included), or no
 *    row old enough: CUDA_SUCCESS, *pfn NULL, status SYMBOL_NOT_FOUND or
 *    VERSION_NOT_SUFFICIENT (e.g. cuLaunchKernel at 6050 with the
 *    per-thread flag: its _ptsz form is from 7000);
 *  - cudaVersion above the driver's (13000): CUDA_ERROR_INVALID_VALUE;
 *  - the 11.3 form (cuGetProcAddress, 4 arguments) reports the two
 *    not-found cases as CUDA_ERROR_NOT_FOUND instead.
 *
 * The addresses are this library's own symbols, taken at link time; the
 * library is linked with -Bsymbolic so they stay ours even when an
 * interposer (LD_PRELOAD) exports the same names.
 */
#include "fakecuda/fc_internal.h"

#include <string.h>

enum { V_NONE, V_PTDS, V_PTSZ };

struct row {
    const char *api;
    void *fn;
    int version;
    int variant;
};

static const struct row rows[] = {
#define CS_API(api, symbol, version, variant) { #api, (void *)&symbol, version, V_##variant },
#define CS_API_SYMBOL(symbol)
#include "common/cuda_api_table.h"
#undef CS_API
#undef CS_API_SYMBOL
};

/* *pfn and *status per the rules above; returns whether it was found. */
static bool lookup(const char *name, int version, cuuint64_t flags, void **pfn,
                   CUdriverProcAddressQueryResult *status)
{
    bool pt = flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    bool known = false, has_pt = false;
    const struct row *best = NULL, *best_pt = NULL;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct row *r = &rows[i];
        if (strcmp(r->api, name) != 0)
            continue;
        known = true;
        has_pt |= r->variant != V_NONE;
        if (r->version > version)
            continue;
        const struct row **slot = r->variant == V_NONE ? &best : &best_pt;
        if (!*slot || r->version > (*slot)->version)
            *slot = r;
    }
    const struct row *hit = pt && has_pt ? best_pt : best;
    *pfn = hit ? hit->fn : NULL;
    if (status)
        *status = hit ? CU_GET_PROC_ADDRESS_SUCCESS
                  : known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                          : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return hit != NULL;
}

#define FC_PROC_FLAGS (CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)

static CUresult check_args(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    if (!symbol || !pfn || (flags & ~(cuuint64_t)FC_PROC_FLAGS))
        return CUDA_ERROR_INVALID_VALUE;
    if (version > FC_DRIVER_VERSION) {
        *pfn = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                     CUdriverProcAddressQueryResult *symbolStatus)
{
    CUresult r = check_args(symbol, pfn, cudaVersion, flags);
    if (r != CUDA_SUCCESS)
        return r;
    lookup(symbol, cudaVersion, flags, pfn, symbolStatus);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    CUresult r = check_args(symbol, pfn, cudaVersion, flags);
    if (r != CUDA_SUCCESS)
        return r;
    return lookup(symbol, cudaVersion, flags, pfn, NULL) ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}
