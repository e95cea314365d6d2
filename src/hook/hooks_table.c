/* hooks_table.c: every wrapper, by its entry in struct cs_real.
 *
 * The one place that takes the wrappers' addresses: the constructor hands
 * this table to pmap.c, which maps the driver's pointers to them. A
 * wrapper's address is taken inside this library, so with
 * -Bsymbolic-functions it is always our own definition.
 */
#include "hook/hooks_table.h"

#include <stddef.h>

static const struct cs_pmap_entry table[] = {
#define CS_HOOK(sym) {offsetof(struct cs_real, sym), (void *)&sym},
#define CS_REAL(sym)
#include "hook/hook_symbols.h"
#undef CS_HOOK
#undef CS_REAL
};

void cs_hooks_table_register(void)
{
    cs_pmap_set_table(table, sizeof table / sizeof table[0]);
}
