/* hooks_dlsym.c: the dlsym override.
 *
 * Programs that dlopen the driver (the CUDA runtime, ctypes, CuPy, Numba,
 * JAX) look its symbols up with dlsym on the libcuda handle, which bypasses
 * LD_PRELOAD. We therefore export dlsym itself, under both versions glibc
 * has used on this architecture, let glibc answer, and swap a real driver
 * entry point for its wrapper (cs_real_map, pmap.c), and NVML's memory and
 * process calls for theirs (cs_nvml_map, nvml.c). Everything else is
 * glibc's answer untouched.
 *
 * RTLD_NEXT is special: glibc resolves it relative to the *calling* object,
 * found from the return address. Forwarding it with a tail call keeps the
 * application's return address in place, so its meaning is unchanged
 * (tests/hook checks this with two libraries defining the same symbol).
 */
#include "hook/hook.h"
#include "hook/nvml.h"
#include "hook/pmap.h"

#include <dlfcn.h>

/* Sanitizer runtimes look their real functions up with dlsym while they
 * initialize, before their shadow memory exists: the override (and what it
 * calls on that path) must not be instrumented. */
#define CS_NO_SANITIZE                                                         \
    __attribute__((no_sanitize_address, no_sanitize_thread, no_sanitize_undefined))

CS_NO_SANITIZE static inline void *map_driver_symbol(void *p, const char *name)
{
    if (p && name && name[0] == 'c' && name[1] == 'u' && cs_real_init() == 0)
        return cs_real_map(p);
    if (p && name && name[0] == 'n' && name[1] == 'v' && name[2] == 'm' && name[3] == 'l')
        return cs_nvml_map(name, p); /* NVML's memory and process calls (nvml.c) */
    return p;
}

CS_EXPORT void *cs_dlsym_new(void *handle, const char *name);
CS_EXPORT void *cs_dlsym_old(void *handle, const char *name);

CS_NO_SANITIZE void *cs_dlsym_new(void *handle, const char *name)
{
    cs_dlsym_init();
    if (handle == RTLD_NEXT)
        return cs_real_dlsym(handle, name); /* tail call: see above */
    return map_driver_symbol(cs_real_dlsym(handle, name), name);
}

CS_NO_SANITIZE void *cs_dlsym_old(void *handle, const char *name)
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
