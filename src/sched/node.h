/* node.h: the node's GPUs, as the node says, never as a client says.
 *
 * Known once, at start: from the `gpus` setting when it lists them (for
 * nodes where discovery is impossible), else discovered: NVML first
 * (libnvidia-ml.so.1, the loader the device plugin uses, src/common/nvml.h),
 * then the driver (libcuda.so.1: cuInit(0), cuDeviceGetCount, cuDeviceGet,
 * cuDeviceGetUuid(_v2), cuDeviceTotalMem_v2; no context is created). The
 * policy's scheduling domains are made for these GPUs only, in this order,
 * with this memory size: a client's ATTACH names one of them or is refused,
 * so no client can fill the GPU table or state a GPU's size. No GPU found
 * is not an error (a node may get its GPUs later): every ATTACH is then
 * refused, with the reason.
 */
#ifndef SD_NODE_H
#define SD_NODE_H

#include <stddef.h>
#include <stdint.h>

#include "common/util.h"

#define SD_NODE_MAX_GPUS 64 /* = SD_MAX_GPUS, the policy's table */
#define SD_GPUS_LEN 4096    /* the `gpus` text: 64 x "GPU-<uuid>:<size>," */

struct sd_node_gpu {
    uint8_t uuid[CS_UUID_LEN];
    uint64_t mem_total; /* bytes; 0 = unknown (a listed GPU without a size) */
};

struct sd_node {
    size_t n;
    struct sd_node_gpu gpu[SD_NODE_MAX_GPUS]; /* index order */
    const char *source; /* "config", "NVML", "driver" or "none" (a literal) */
};

/* Where discovery looks; NULL members take the defaults
 * (libnvidia-ml.so.1, libcuda.so.1). Tests point them elsewhere. */
struct sd_node_libs {
    const char *nvml;
    const char *cuda;
};

/* Parses the `gpus` setting: "auto" (returns 1, *out empty), or a
 * comma-separated list of UUIDs ("GPU-" optional), each optionally
 * ":SIZE" (e.g. GPU-...:80G); blanks around items are ignored. Returns 0
 * with *out filled (source "config"), or -1 with the reason in err (a bad
 * UUID or size, a duplicate, an empty list, more than SD_NODE_MAX_GPUS). */
int sd_node_parse(const char *spec, struct sd_node *out, char *err, size_t cap);

/* Discovery as described above; never fails (no GPU: n = 0, source "none"),
 * says at info level why a source gave nothing. */
void sd_node_discover(struct sd_node *out, const struct sd_node_libs *libs);

/* The `gpus` setting applied: the list, or discovery with the default
 * libraries. Logs the GPUs (index, UUID, memory), or a warning when there
 * are none. 0, or -1 with err for a bad setting. */
int sd_node_init(struct sd_node *out, const char *spec, char *err, size_t cap);

/* The GPU's index on the node, or -1 when it is not one of the node's. */
int sd_node_find(const struct sd_node *n, const uint8_t uuid[CS_UUID_LEN]);

void sd_node_log(const struct sd_node *n);

#endif
