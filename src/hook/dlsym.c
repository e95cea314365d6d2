/* dlsym.c: the dlsym override.
 *
 * Programs that dlopen the driver (the CUDA runtime, ctypes, CuPy, Numba,
 * JAX) look its symbols up with dlsym on the libcuda handle, which bypasses
 * LD_PRELOAD. We therefore export dlsym itself, under both versions glibc
 * has used on this architecture, let glibc answer, and swap a real driver
 * entry point for its wrapper (cs_real_map). Everything else, including
 * every name that does not start with "cu", is glibc's answer untouched.
 *
 * RTLD_NEXT is special: glibc resolves it relative to the *calling* object,
 * found from the return address. Forwarding it with a tail call keeps the
 * application's return address in place, so its meaning is unchanged
 * (tests/hook checks this with two libraries defining the same symbol).
 */
#include "hook/hook.h"

#include <dlfcn.h>
#include <pthread.h>

void *(*cs_real_dlsym)(void *, const char *);
static pthread_once_t dlsym_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__)
#define CS_DLSYM_OLD "GLIBC_2.2.5"
#elif defined(__aarch64__)
#define CS_DLSYM_OLD "GLIBC_2.17"
#else
#error "libcushare.so supports x86-64 and AArch64"
#endif

static void dlsym_load(void)
{
    void *p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!p)
        p = dlvsym(RTLD_NEXT, "dlsym", CS_DLSYM_OLD);
    cs_real_dlsym = (void *(*)(void *, const char *))p;
}

void cs_dlsym_init(void)
{
    pthread_once(&dlsym_once, dlsym_load);
}

static inline void *map_driver_symbol(void *p, const char *name)
{
    if (p && name && name[0] == 'c' && name[1] == 'u' && cs_real_init() == 0)
        return cs_real_map(p);
    return p;
}

CS_EXPORT void *cs_dlsym_new(void *handle, const char *name);
CS_EXPORT void *cs_dlsym_old(void *handle, const char *name);

void *cs_dlsym_new(void *handle, const char *name)
{
    cs_dlsym_init();
    if (handle == RTLD_NEXT)
        return cs_real_dlsym(handle, name); /* tail call: see above */
    return map_driver_symbol(cs_real_dlsym(handle, name), name);
}

void *cs_dlsym_old(void *handle, const char *name)
{
    cs_dlsym_init();
    if (handle == RTLD_NEXT)
        return cs_real_dlsym(handle, name);
    return map_driver_symbol(cs_real_dlsym(handle, name), name);
}

__asm__(".symver cs_dlsym_new, dlsym@@GLIBC_2.34");
#if defined(__x86_64__)
__asm__(".symver cs_dlsym_old, dlsym@GLIBC_2.2.5");
#else
__asm__(".symver cs_dlsym_old, dlsym@GLIBC_2.17");
#endif
