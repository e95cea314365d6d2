/* hook.h: what every part of libcushare.so shares.
 *
 * libcushare.so is injected into arbitrary CUDA programs (LD_PRELOAD or
 * /etc/ld.so.preload). It therefore depends on libc, libdl and libpthread
 * only, exports nothing but the driver entry points it wraps, dlsym, ioctl
 * (hooks_ioctl.c) and the small client API of include/cushare.h (the version
 * script of the architecture, src/hook/cushare-<arch>.map), and keeps every
 * cost off the launch hot path: no allocation, lock, log or system call
 * there.
 *
 * cuda.h is included with __CUDA_API_VERSION_INTERNAL, as the driver itself
 * is built, so that each versioned symbol (cuMemAlloc and cuMemAlloc_v2,
 * cuLaunchKernel and cuLaunchKernel_ptsz) is declared under its own name and
 * can be defined separately.
 */
#ifndef CS_HOOK_H
#define CS_HOOK_H

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CS_EXPORT __attribute__((visibility("default")))
#define cs_likely(x) __builtin_expect(!!(x), 1)
#define cs_unlikely(x) __builtin_expect(!!(x), 0)

/* The real driver's entry points: every symbol we wrap (hook_symbols.h) plus
 * those the hook itself calls (real_extra.h). Filled once by cs_real_init;
 * read-only afterwards, so any thread may call through it without a lock.
 * An entry the installed driver lacks points at a function that returns
 * CUDA_ERROR_NOT_SUPPORTED. */
struct cs_real {
#define CS_HOOK(sym) __typeof__(sym) *sym;
#define CS_REAL(sym) __typeof__(sym) *sym;
#include "hook/hook_symbols.h"
#include "hook/real_extra.h"
#undef CS_HOOK
#undef CS_REAL
};
extern struct cs_real cs_real;

/* Loads the real driver and builds the real-pointer -> hook map. Idempotent
 * and thread-safe (pthread_once); returns 0, or -1 if no driver could be
 * loaded (then every hook answers CUDA_ERROR_NOT_INITIALIZED). */
int cs_real_init(void);

/* 1 once cs_real is filled (release-stored by cs_real_init). */
extern _Atomic int cs_real_state;
static inline bool cs_real_ready(void)
{
    return atomic_load_explicit(&cs_real_state, memory_order_acquire) == 1;
}

/* True if p is the stand-in of an entry point the installed driver lacks. */
bool cs_real_is_missing(const void *p);

/* The real dlsym (glibc's), for the library's own lookups. */
extern void *(*cs_real_dlsym)(void *, const char *);
void cs_dlsym_init(void);

/* Calls into the driver that the hook makes for itself (draining, swapping)
 * must never be gated: a per-thread depth counter makes the gate pass every
 * call made while a hook is already running on this thread (defined in
 * real.c, the base every layer stands on). */
extern __thread int cs_tls_depth __attribute__((tls_model("initial-exec")));

#endif
