/* dp_ids.h: the device IDs a resource advertises. A slots resource has
 * `slots` IDs per GPU, "GPU-<uuid>::<k>"; a memory resource one per `unit`
 * bytes of GPU memory, "GPU-<uuid>::m<k>". The kubelet treats each ID as a
 * device; the GPU is always recoverable from the ID, so nothing about an
 * allocation has to be remembered (the plugin can restart at any time). */
#ifndef DP_IDS_H
#define DP_IDS_H

#include "k8s/dp.h"

/* IDs per GPU at most for memory resources (the kubelet lists each one). */
#define DP_MEM_IDS_MAX 4096u

unsigned dp_ids_per_gpu(const struct dp_resource *r, const struct dp_gpu *g);
/* Writes the k-th ID of g into out[DP_ID_MAX + 1]; -1 if it would not fit. */
int dp_id_make(char *out, const struct dp_resource *r, const struct dp_gpu *g, unsigned k);
/* The GPU index of id (and its k), or -1 when id is not one of ours. */
int dp_id_parse(const struct dp_resource *r, const struct dp_node *n, const char *id, unsigned *k);

#endif
