/* ctl_print.h: renderings of a status reply: the human table (status and
 * top) and the machine-readable JSON (status --json). */
#ifndef CTL_PRINT_H
#define CTL_PRINT_H

#include <stdio.h>

#include "tools/ctl_client.h"

/* prev: the previous snapshot for per-interval GPU% (top), or NULL. */
void ctl_print_table(FILE *f, const struct ctl_status *st, const struct ctl_status *prev);
void ctl_print_json(FILE *f, const struct ctl_status *st);

const char *ctl_state_name(uint32_t state);
const char *ctl_mode_name(uint32_t mode);

#endif
