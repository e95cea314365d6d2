/* fc_testutil.h: helpers shared by the simulator's cmocka tests. */
#ifndef FC_TESTUTIL_H
#define FC_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <cuda.h>

#include "../progs/fckern.h"

/* Asserts a CUresult, printing its name on failure. */
#define CK(call) fct_check((call), CUDA_SUCCESS, #call, __FILE__, __LINE__)
#define CKR(call, want) fct_check((call), (want), #call, __FILE__, __LINE__)
void fct_check(CUresult got, CUresult want, const char *what, const char *file, int line);

#define MiB (1024ull * 1024ull)

uint64_t fct_now_ns(void);
double fct_ms_since(uint64_t t0_ns);
void fct_sleep_ms(unsigned ms);

/* Per-test fixture: the primary context of device 0, current, with the
 * kernels loaded (fct_kernels). Teardown resets the primary context and
 * checks that nothing of the test is still charged to the device. */
extern struct fck fct_kernels;
int fct_setup(void **state);
int fct_teardown(void **state);
CUcontext fct_ctx(void);

/* Host copies of device memory. */
uint32_t fct_get32(CUdeviceptr p);
uint64_t fct_get64(CUdeviceptr p);
/* True when every byte of [p, p+n) equals b. */
bool fct_all_bytes(CUdeviceptr p, size_t n, unsigned char b);

/* A driver entry point by name through cuGetProcAddress (e.g. the _ptsz
 * forms a program built for per-thread streams would get). */
void *fct_proc(const char *name, int version, cuuint64_t flags);

#endif
