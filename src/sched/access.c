/* access.c: what a client may claim (see access.h). */
#include "sched/access.h"

#include <string.h>

bool sd_grant_allows_gpu(const struct sd_grant *g, const uint8_t uuid[CS_UUID_LEN])
{
    if (g->ngpus == 0)
        return true; /* any GPU of the node */
    for (uint32_t i = 0; i < g->ngpus && i < CS_MAX_DEVICES; i++)
        if (memcmp(g->gpus[i], uuid, CS_UUID_LEN) == 0)
            return true;
    return false;
}
