/* pmap.h: the map from the real driver's entry points to our wrappers.
 *
 * The CUDA runtime and most frameworks never call a driver symbol by name:
 * they ask cuGetProcAddress (or dlsym on the libcuda handle) for a pointer.
 * Rather than re-implementing the driver's (name, version, flags) -> symbol
 * rules, the hook lets the real driver answer and then swaps the *pointer*
 * it returned for the wrapper of exactly that symbol. The requested version,
 * the per-thread-stream variants and anything we do not wrap then come out
 * right by construction.
 *
 * The wrappers live in the top layer and this map in a low one, so the
 * table of (entry in struct cs_real, wrapper) pairs is handed down once by
 * the constructor (init.c, from hooks_table.c) and the map is built from it
 * and the loaded cs_real at the first lookup.
 */
#ifndef CS_HOOK_PMAP_H
#define CS_HOOK_PMAP_H

#include "hook/hook.h"

struct cs_pmap_entry {
    size_t real_off; /* offsetof(struct cs_real, sym) */
    void *hook;      /* &sym: our wrapper */
};

/* The constructor's one call: the table (static storage) and its length. */
void cs_pmap_set_table(const struct cs_pmap_entry *table, size_t n);

/* If p is a real driver entry point that we wrap, the wrapper; else p
 * (also before the driver is loaded or the table is set). */
void *cs_real_map(void *p);

#endif
