/* pmap.c: see pmap.h. */
#include "hook/pmap.h"

#include <pthread.h>
#include <stdint.h>

/* Open-addressing hash map, real pointer -> wrapper, filled once under
 * build_once and read-only afterwards. Sized for a load factor under 1/4. */
#define PMAP_SIZE 1024u
static struct {
    void *real;
    void *hook;
} pmap[PMAP_SIZE];

/* Written once by the constructor, before any thread of ours exists. */
static const struct cs_pmap_entry *_Atomic table;
static _Atomic size_t table_len;
static pthread_once_t build_once = PTHREAD_ONCE_INIT;

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

/* Entries the installed driver lacks point at real.c's stand-in: those
 * have nothing to map. */
static void build(void)
{
    const struct cs_pmap_entry *t = atomic_load(&table);
    size_t n = atomic_load(&table_len);
    for (size_t i = 0; i < n; i++) {
        void *p = *(void **)((char *)&cs_real + t[i].real_off);
        if (p && !cs_real_is_missing(p))
            pmap_put(p, t[i].hook);
    }
}

void cs_pmap_set_table(const struct cs_pmap_entry *t, size_t n)
{
    atomic_store(&table_len, n);
    atomic_store(&table, t);
}

void *cs_real_map(void *p)
{
    if (!p || !cs_real_ready() || !atomic_load_explicit(&table, memory_order_acquire))
        return p;
    pthread_once(&build_once, build);
    for (unsigned i = pmap_slot(p);; i = (i + 1) & (PMAP_SIZE - 1)) {
        if (pmap[i].real == p)
            return pmap[i].hook;
        if (!pmap[i].real)
            return p;
    }
}
