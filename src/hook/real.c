/* real.c: finding the real driver and filling cs_real (hook.h).
 *
 * The map from the driver's entry points to our wrappers is pmap.c's.
 */
#include "hook/hook.h"
#include "hook/config.h"
#include "common/log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct cs_real cs_real;
__thread int cs_tls_depth __attribute__((tls_model("initial-exec")));

/* 0 = not loaded, 1 = loaded, -1 = no driver. Written once under real_once. */
_Atomic int cs_real_state;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;

static CUresult cs_missing_symbol(void)
{
    return CUDA_ERROR_NOT_SUPPORTED;
}

bool cs_real_is_missing(const void *p)
{
    return p == (const void *)cs_missing_symbol;
}

static void *resolve(void *h, const char *name)
{
    void *p = cs_real_dlsym(h, name);
    return p ? p : (void *)cs_missing_symbol;
}

/* Whether h is libcushare.so rather than a driver: its cuInit is our own
 * (this very object: dladdr), or it exports the client API (a copy of the
 * library elsewhere). Either way every "real" call would be a wrapper
 * calling itself until the stack overflows. A driver's handle sees only
 * its own dependencies, never the preloaded hook. */
static bool is_cushare(void *h)
{
    Dl_info self, got;
    void *p = cs_real_dlsym(h, "cuInit");
    if (p && dladdr((void *)&cs_real_init, &self) && dladdr(p, &got) &&
        self.dli_fbase == got.dli_fbase)
        return true;
    return cs_real_dlsym(h, "cushare_version") != NULL;
}

/* The driver: CUSHARE_REAL_LIBCUDA, else libcuda.so.1; a path that leads
 * back to this library falls back to libcuda.so.1 with one error, and if
 * even that is us there is no driver (cuInit: CUDA_ERROR_NOT_INITIALIZED).
 * The handle is not closed: it is this library, or a copy whose
 * constructor has run. */
static void *open_driver(const char **path)
{
    const char *dflt = "libcuda.so.1";
    *path = cs_cfg.real_libcuda[0] ? cs_cfg.real_libcuda : dflt;
    void *h = dlopen(*path, RTLD_NOW | RTLD_LOCAL);
    if (h && is_cushare(h) && *path != dflt) {
        cs_error("CUSHARE_REAL_LIBCUDA=%s is libcushare.so, not the CUDA driver: using %s",
                 *path, dflt);
        *path = dflt;
        h = dlopen(*path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!h) {
        cs_error("cannot load the CUDA driver %s: %s", *path, dlerror());
        return NULL;
    }
    if (is_cushare(h)) {
        cs_error("the CUDA driver %s resolves to libcushare.so itself: no driver to forward to",
                 *path);
        return NULL;
    }
    return h;
}

static void real_load(void)
{
    cs_dlsym_init();
    const char *path;
    void *h = open_driver(&path);
    if (!h) {
        atomic_store_explicit(&cs_real_state, -1, memory_order_release);
        return;
    }
#define CS_HOOK(sym) cs_real.sym = (__typeof__(cs_real.sym))resolve(h, #sym);
#define CS_REAL(sym) cs_real.sym = (__typeof__(cs_real.sym))resolve(h, #sym);
#include "hook/hook_symbols.h"
#include "hook/real_extra.h"
#undef CS_HOOK
#undef CS_REAL
    atomic_store_explicit(&cs_real_state, 1, memory_order_release);
    cs_debug("real driver %s loaded", path);
}

int cs_real_init(void)
{
    if (cs_likely(atomic_load_explicit(&cs_real_state, memory_order_acquire) == 1))
        return 0;
    pthread_once(&real_once, real_load);
    return atomic_load_explicit(&cs_real_state, memory_order_acquire) == 1 ? 0 : -1;
}
