/* hooktest.h: helpers for the interposer's tests.
 *
 * Each test program runs itself under libcushare.so: hooktest_preload()
 * re-executes the program with LD_PRELOAD set (the sanitizer runtime first
 * in sanitizer builds) unless the hook is already loaded, so the tests run
 * the same from the suite and by hand. By default there is no scheduler
 * (CUSHARE_SOCKET points at a path nobody listens on); tests that want one
 * start tests/hook/mock_sched or a real cushared and set the variable first.
 */
#ifndef CS_TEST_HOOKTEST_H
#define CS_TEST_HOOKTEST_H

#include <cuda.h>

#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "cushare.h"
#include "../progs/fckern.h"

#define MiB (1024ull * 1024ull)

/* Re-executes the program under the hook if needed; call first in main.
 * `extra_env`: NULL-terminated "NAME=value" strings set before re-exec. */
void hooktest_preload(int argc, char **argv, const char *const *extra_env);

#define CK(call) ht_check((call), CUDA_SUCCESS, #call, __FILE__, __LINE__)
#define CKR(call, want) ht_check((call), (want), #call, __FILE__, __LINE__)
void ht_check(CUresult got, CUresult want, const char *what, const char *file, int line);

/* cushare_get_stats for device 0, asserting it works. */
struct cushare_stats ht_stats(int device);
unsigned long long ht_submissions(void);

/* The primary context of device 0, current, with the kernels loaded. */
extern struct fck ht_kernels;
void ht_context(void);

/* VMM properties of plain device memory on device 0. */
CUmemAllocationProp ht_dev_prop(void);

/* Fills n uint32 at p with v through the kernel, sums them on the device. */
uint64_t ht_device_sum(CUdeviceptr p, uint64_t n);

uint64_t ht_now_ns(void);
void ht_sleep_ms(unsigned ms);

/* Runs fn with stderr captured (then passed on); returns how many times `needle` occurs in
 * what it logged (the first 8 KiB). */
int ht_count_log_lines(void (*fn)(void), const char *needle);

/* The driver's own entry point `name` (its exported symbol name, e.g.
 * "cuMemcpyDtoH_v2"), bypassing the hook: for reading what an address
 * shows without passing the gate. Asserts it is not the hook's wrapper. */
void *ht_unhooked(const char *name);

/* A scratch path under $TEST_TMP (or /tmp). */
const char *ht_path(const char *name);

#endif
