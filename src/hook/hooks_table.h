/* hooks_table.h: the wrappers' table for pmap.c (see hooks_table.c). */
#ifndef CS_HOOK_HOOKS_TABLE_H
#define CS_HOOK_HOOKS_TABLE_H

#include "hook/pmap.h"

/* Hands the table to pmap.c; the constructor's (init.c). */
void cs_hooks_table_register(void);

#endif
