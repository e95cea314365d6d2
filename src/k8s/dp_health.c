/* dp_health.c: GPU health for ListAndWatch. A GPU is unhealthy while NVML
 * cannot find it or reports it lost, and for good after a critical Xid
 * (as NVIDIA's plugin does: such a GPU needs a reset, which restarts us). */
#include "common/log.h"
#include "k8s/dp_nvml.h"
#include "k8s/dp_plugin.h"

bool dp_health_run(struct dp_node *node)
{
    bool changed = dp_nvml_events_poll(node) > 0;
    for (size_t i = 0; i < node->ngpus; i++) {
        struct dp_gpu *g = &node->gpu[i];
        char why[256];
        bool ok = dp_nvml_probe(g, why, sizeof why) == 0;
        if (ok == g->healthy)
            continue;
        if (ok)
            cs_info("GPU %s is healthy again", g->uuid);
        else
            cs_error("GPU %s is unhealthy: %s", g->uuid, why);
        g->healthy = ok;
        changed = true;
    }
    return changed;
}
