/* view.h: the job's view of the node, read from cushared on request.
 *
 * What NVML answers for (hooks: nvml.c) must describe the job, not the
 * process that asks: nvidia-smi in a pod is a process of its own, with no
 * CUDA context and no connection to the daemon, yet it must show the
 * pod's quota and what the pod's processes hold. So the question goes to
 * the daemon, over a short connection of its own (HELLO with
 * CS_HELLO_CONTROL | CS_HELLO_VIEW, one CTL_STATUS): the daemon answers
 * with the GPUs of the connection's grant and the clients it may see
 * (docs/protocol.md, view connections). Knows nothing of devices or
 * leases: it stands on the configuration and the protocol codec alone.
 */
#ifndef CS_HOOK_VIEW_H
#define CS_HOOK_VIEW_H

#include "common/proto.h"

#include <stdbool.h>
#include <stdint.h>

#define CS_VIEW_PROCS 256 /* clients shown per view (more are left out) */

struct cs_view_gpu {
    unsigned char uuid[CS_UUID_LEN];
    uint32_t index;
    uint64_t total;          /* the GPU's memory as the daemon knows it */
};

struct cs_view_proc {
    uint32_t pid;            /* in the daemon's pid namespace */
    uint32_t gpu_index;
    uint64_t resident, swapped;
};

struct cs_view {
    uint32_t self_pid;       /* the asker, as the daemon sees it */
    uint32_t flags;          /* CS_CTL_VIEW_* */
    uint64_t mem_limit;      /* the connection's granted per-GPU limit, 0 = none */
    unsigned ngpu, nproc;
    bool truncated;          /* more clients than CS_VIEW_PROCS */
    struct cs_view_gpu gpu[CS_MAX_DEVICES];
    struct cs_view_proc proc[CS_VIEW_PROCS];
};

/* Asks the daemon at cs_cfg.socket (checked as the client checks it) for
 * the view, waiting at most timeout_ms in all. 0, or -1: no daemon, an
 * untrusted socket, one that refuses views (older), or no answer in time.
 * Any thread; no lock held, nothing shared touched. */
int cs_view_fetch(struct cs_view *v, int timeout_ms);

/* The view's GPU with this UUID, or NULL (not in the connection's grant). */
const struct cs_view_gpu *cs_view_find_gpu(const struct cs_view *v,
                                           const unsigned char uuid[CS_UUID_LEN]);

#endif
