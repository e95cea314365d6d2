/* dp_build.h: the replies of the DevicePlugin service, built from the
 * settings and the GPUs alone (pure functions, unit-tested without gRPC).
 * Everything returned lives in the arena. */
#ifndef DP_BUILD_H
#define DP_BUILD_H

#include "k8s/api.pb-c.h"
#include "k8s/dp.h"
#include "k8s/dp_arena.h"

/* Every ID of r on every GPU, with its GPU's health and NUMA node. */
V1beta1__ListAndWatchResponse *dp_build_list(struct dp_arena *a, const struct dp_resource *r,
                                             const struct dp_node *n);

enum dp_alloc_err {
    DP_ALLOC_OK = 0,
    DP_ALLOC_UNKNOWN = -1,   /* an ID that is not ours: INVALID_ARGUMENT */
    DP_ALLOC_UNHEALTHY = -2, /* an ID on an unhealthy GPU: FAILED_PRECONDITION */
};

/* Which GPUs the IDs name: gpus[i] set for each GPU i of the node. */
enum dp_alloc_err dp_build_resolve(const struct dp_resource *r, const struct dp_node *n,
                                   char *const *ids, size_t nids, bool *gpus, char *err,
                                   size_t cap);

/* What one container needs to use the devices ids of resource r. ep_dir:
 * the host directory of its daemon endpoint, mounted where the daemon's
 * socket directory would be; NULL mounts the daemon's own (endpoints off). */
enum dp_alloc_err dp_build_alloc(struct dp_arena *a, const struct dp_config *c,
                                 const struct dp_resource *r, const struct dp_node *n,
                                 char *const *ids, size_t nids, const char *ep_dir,
                                 V1beta1__ContainerAllocateResponse **out, char *err, size_t cap);

/* A preferred choice of req->allocation_size IDs among the available ones,
 * the must-include ones first (see dp_build.c for the policy). */
V1beta1__ContainerPreferredAllocationResponse *dp_build_prefer(
    struct dp_arena *a, const struct dp_config *c, const struct dp_resource *r,
    const struct dp_node *n, const V1beta1__ContainerPreferredAllocationRequest *req);

/* "12G", "1536M" or a byte count: the shortest exact form cs_parse_size reads. */
char *dp_size_text(struct dp_arena *a, uint64_t bytes);

#endif
