/* dlsym.c: glibc's own dlsym, for the library's lookups.
 *
 * The library exports dlsym (hooks_dlsym.c), so a plain dlsym call from
 * inside it would reach the override: real.c finds the driver's entry
 * points through cs_real_dlsym, the dlsym of the next object (glibc's).
 */
#include "hook/hook.h"

#include <dlfcn.h>

/* Sanitizer runtimes look their real functions up with dlsym while they
 * initialize, before their shadow memory exists: the override (and what it
 * calls on that path) must not be instrumented. */
#define CS_NO_SANITIZE                                                         \
    __attribute__((no_sanitize_address, no_sanitize_thread, no_sanitize_undefined))

/* Written by the first dlsym call (possibly several threads at once, all
 * storing the same value) and read-only afterwards. No pthread_once here:
 * ThreadSanitizer's runtime calls dlsym while initializing, before its own
 * pthread_once interceptor can work. */
void *(*cs_real_dlsym)(void *, const char *);

#if defined(__x86_64__)
#define CS_DLSYM_OLD "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define CS_DLSYM_OLD "GLIBC_2.17"
#else
#error "libcushare.so supports x86-64 and AArch64"
#endif

CS_NO_SANITIZE void cs_dlsym_init(void)
{
    if (__atomic_load_n(&cs_real_dlsym, __ATOMIC_ACQUIRE))
        return;
    void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!p)
        p = dlvsym(RTLD_NEXT, "dlsym", CS_DLSYM_OLD);
    __atomic_store_n(&cs_real_dlsym, (void *(*)(void *, const char *))p, __ATOMIC_RELEASE);
}
