/* dp_endpoint.h: one cushared endpoint per container of a slots resource.
 *
 * Allocate asks the daemon (CTL_ENDPOINT on its control socket) for an
 * endpoint bound to the allocation: the resource's class and weight as caps,
 * its memory limit, the allocated GPUs. The container gets only that
 * endpoint's directory, so whatever it runs as, it cannot claim more, nor
 * reach the daemon's control. The endpoint's id comes from the resource and
 * the sorted device IDs: a retried Allocate of the same IDs gets the same
 * endpoint. The kubelet gives a device ID to a new container only after the
 * old one is gone, so an endpoint that held any of the IDs before is removed
 * first; the table of which ID went to which endpoint is in memory only (a
 * restarted plugin leaves the old endpoints to the daemon's idle GC). */
#ifndef DP_ENDPOINT_H
#define DP_ENDPOINT_H

#include <stdbool.h>
#include <stddef.h>

#include "k8s/dp.h"

#define DP_EP_ID_LEN 20          /* "dp-" + 16 hex + NUL */
#define DP_EP_TIMEOUT_MS 5000    /* per reply of the daemon: Allocate must not hang */

struct dp_ep_entry {
    char res[128];               /* the resource's name */
    char dev[DP_ID_MAX + 1];     /* a device ID of it */
    char ep[DP_EP_ID_LEN];       /* the endpoint it went to */
};

struct dp_eps {
    struct dp_ep_entry *v;
    size_t n, cap;
};

/* "dp-<16 hex>": a hash of the resource name and the sorted IDs. */
void dp_ep_id(const char *res, char *const *ids, size_t nids, char out[DP_EP_ID_LEN]);

/* The endpoint of this allocation (gpus[i]: GPU i of the node is in it),
 * made by the daemon after removing those that held any of the IDs. 0 with
 * its directory (the host path to mount) in dir, or -1 with a message. */
int dp_ep_acquire(struct dp_eps *t, const struct dp_config *c, const struct dp_resource *r,
                  const struct dp_node *n, const bool *gpus, char *const *ids, size_t nids,
                  char *dir, size_t dcap, char *err, size_t ecap);

/* Whether every one of ids (of resource res) went to endpoint ep and none
 * has gone elsewhere since: what a late answer about ep is checked against. */
bool dp_ep_holds(const struct dp_eps *t, const char *res, const char *ep, char *const *ids,
                 size_t nids);

void dp_eps_free(struct dp_eps *t);

#endif
