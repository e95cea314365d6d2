/* fc_testutil.c: see fc_testutil.h. */
#include "fc_testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct fck fct_kernels;
static CUcontext ctx;

void fct_check(CUresult got, CUresult want, const char *what, const char *file, int line)
{
    if (got == want)
        return;
    const char *g = NULL, *w = NULL;
    cuGetErrorName(got, &g);
    cuGetErrorName(want, &w);
    fail_msg("%s:%d: %s returned %s (%d), expected %s (%d)", file, line, what,
             g ? g : "?", (int)got, w ? w : "?", (int)want);
}

uint64_t fct_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double fct_ms_since(uint64_t t0)
{
    return (double)(fct_now_ns() - t0) / 1e6;
}

void fct_sleep_ms(unsigned ms)
{
    struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0)
        ;
}

CUcontext fct_ctx(void)
{
    return ctx;
}

int fct_setup(void **state)
{
    CK(cuInit(0));
    CK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CK(cuCtxSetCurrent(ctx));
    CK(fck_load(&fct_kernels));
    return 0;
}

int fct_teardown(void **state)
{
    CK(cuDevicePrimaryCtxReset(0));
    /* Nothing of the test may remain charged: a fresh context sees only
     * its own cost (the tests run one process per device). */
    CUcontext c;
    size_t f, t;
    CK(cuDevicePrimaryCtxRetain(&c, 0));
    CK(cuCtxSetCurrent(c));
    CK(cuMemGetInfo(&f, &t));
    CK(cuDevicePrimaryCtxRelease(0));
    CK(cuCtxSetCurrent(NULL));
    if (t - f != 8 * MiB)
        fail_msg("%zu bytes still charged after the test", (size_t)(t - f - 8 * MiB));
    return 0;
}

uint32_t fct_get32(CUdeviceptr p)
{
    uint32_t v;
    CK(cuMemcpyDtoH(&v, p, sizeof v));
    return v;
}

uint64_t fct_get64(CUdeviceptr p)
{
    uint64_t v;
    CK(cuMemcpyDtoH(&v, p, sizeof v));
    return v;
}

bool fct_all_bytes(CUdeviceptr p, size_t n, unsigned char b)
{
    unsigned char *h = malloc(n);
    assert_non_null(h);
    CK(cuMemcpyDtoH(h, p, n));
    bool ok = true;
    for (size_t i = 0; i < n && ok; i++)
        ok = h[i] == b;
    free(h);
    return ok;
}

void *fct_proc(const char *name, int version, cuuint64_t flags)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult st;
    CK(cuGetProcAddress(name, &fn, version, flags, &st));
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_non_null(fn);
    return fn;
}
