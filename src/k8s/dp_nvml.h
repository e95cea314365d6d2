/* dp_nvml.h: the node's GPUs through NVML, loaded at run time by the
 * loader the daemon shares (src/common/nvml.h: dlopen, versioned names
 * newest first, nvmlInit). */
#ifndef DP_NVML_H
#define DP_NVML_H

#include <stddef.h>

#include "k8s/dp.h"

/* dlopen + resolve + nvmlInit. 0, or -1 with the reason in err. */
int dp_nvml_open(const char *lib, char *err, size_t cap);
/* Fills node with every GPU (healthy). 0, or -1 with err (no GPU is an error). */
int dp_nvml_discover(struct dp_node *node, const char *sysfs, char *err, size_t cap);
/* One health probe of g: 0 healthy, else -1 with the reason in why. */
int dp_nvml_probe(struct dp_gpu *g, char *why, size_t cap);
/* Registers for critical Xid events where the driver supports them. */
void dp_nvml_events_init(struct dp_node *node);
/* Drains pending Xid events without blocking; marks the GPUs they hit
 * (xid_dead). Returns how many GPUs changed. */
int dp_nvml_events_poll(struct dp_node *node);
/* Which optional entry points were found (for logs and tests). */
const char *dp_nvml_resolved(const char *base);
void dp_nvml_close(void);

#endif
