/* real.c: finding the real driver, and the map from its entry points to ours.
 *
 * The CUDA runtime and most frameworks never call a driver symbol by name:
 * they ask cuGetProcAddress (or dlsym on the libcuda handle) for a pointer.
 * Rather than re-implementing the driver's (name, version, flags) -> symbol
 * rules, the hook lets the real driver answer and then swaps the *pointer*
 * it returned for the wrapper of exactly that symbol. The requested version,
 * the per-thread-stream variants and anything we do not wrap then come out
 * right by construction. This file builds that pointer map once.
 */
#include "hook/hook.h"
#include "hook/config.h"
#include "common/log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct cs_real cs_real;

/* 0 = not loaded, 1 = loaded, -1 = no driver. Written once under real_once. */
_Atomic int cs_real_state;
static pthread_once_t real_once = PTHREAD_ONCE_INIT;

/* Open-addressing hash map, real pointer -> wrapper, filled under real_once
 * and read-only afterwards. Sized for a load factor under 1/4. */
#define PMAP_SIZE 1024u
struct pmap_entry {
    void *real;
    void *hook;
};
static struct pmap_entry pmap[PMAP_SIZE];

static CUresult cs_missing_symbol(void)
{
    return CUDA_ERROR_NOT_SUPPORTED;
}

static unsigned pmap_slot(const void *p)
{
    uintptr_t x = (uintptr_t)p;
    x ^= x >> 17;
    x *= 0x9E3779B97F4A7C15ull;
    return (unsigned)(x >> 40) & (PMAP_SIZE - 1);
}

static void pmap_put(void *real, void *hook)
{
    unsigned i = pmap_slot(real);
    while (pmap[i].real && pmap[i].real != real)
        i = (i + 1) & (PMAP_SIZE - 1);
    pmap[i].real = real;
    pmap[i].hook = hook;
}

void *cs_real_map(void *p)
{
    if (!p || atomic_load_explicit(&cs_real_state, memory_order_acquire) != 1)
        return p;
    for (unsigned i = pmap_slot(p);; i = (i + 1) & (PMAP_SIZE - 1)) {
        if (pmap[i].real == p)
            return pmap[i].hook;
        if (!pmap[i].real)
            return p;
    }
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
    /* A wrapper's own address is taken inside this library, so with
     * -Bsymbolic-functions it is always our definition. */
#define CS_HOOK(sym)                                                           \
    do {                                                                       \
        void *p_ = cs_real_dlsym(h, #sym);                                     \
        cs_real.sym = p_ ? (__typeof__(cs_real.sym))p_                         \
                         : (__typeof__(cs_real.sym))(void *)cs_missing_symbol; \
        if (p_)                                                                \
            pmap_put(p_, (void *)&sym);                                        \
    } while (0);
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
