/* dp_config.h: the device plugin's settings. Precedence, lowest first:
 * built-in defaults, CUSHARE_DP_* environment variables, command-line flags.
 * Every parser reports what is wrong in err (one line, no newline). */
#ifndef DP_CONFIG_H
#define DP_CONFIG_H

#include <stdio.h>

#include "k8s/dp.h"

/* What main should do after dp_config_args. */
enum dp_action {
    DP_ACT_RUN,
    DP_ACT_HELP,
    DP_ACT_PRINT,
};

void dp_config_defaults(struct dp_config *c);
/* Reads the CUSHARE_DP_* variables (and CUSHARE_SOCKET). */
int dp_config_env(struct dp_config *c, char *err, size_t cap);
int dp_config_args(struct dp_config *c, int argc, char **argv, enum dp_action *act, char *err,
                   size_t cap);
/* One resource: NAME[:key=value,...], see dp_config_usage. */
int dp_config_add_resource(struct dp_config *c, const char *spec, char *err, size_t cap);
/* Fills per-resource defaults and checks the whole (socket path lengths,
 * duplicates, conflicting memory settings). */
int dp_config_finish(struct dp_config *c, char *err, size_t cap);
void dp_config_print(const struct dp_config *c, FILE *f);
void dp_config_usage(FILE *f);

const char *dp_inject_name(enum dp_inject i);
const char *dp_placement_name(enum dp_placement p);

#endif
