/* access.h: what a client may claim, decided by the node, never by the client.
 *
 * Every connection carries a grant (struct sd_grant), fixed when it is
 * accepted: from the listening socket it arrived on (an endpoint made for one
 * Kubernetes allocation, endpoint.c) or, on the main socket, from the
 * [uid.<who>] / [gid.<who>] sections of the configuration matched against the
 * peer's SO_PEERCRED credentials (defaults: default_max_priority = normal,
 * default_max_weight = 1; the daemon's owner and root are not limited unless a
 * section names them). A HELLO may ask for less than its grant, never more:
 * sd_grant_apply() clamps what the client asked, and TERMS tells a client
 * that understands it what it got and why.
 */
#ifndef SD_ACCESS_H
#define SD_ACCESS_H

#include <stdbool.h>
#include <stdint.h>

#include "common/proto.h"

/* sd_grant_apply's result bits: what the grant reduced. */
#define SD_GRANT_CUT_PRIORITY 0x1u
#define SD_GRANT_CUT_WEIGHT 0x2u
#define SD_GRANT_CUT_MEM 0x4u

struct sd_grant {
    uint32_t max_priority;  /* best class it may claim (enum cs_priority: lower is better) */
    uint32_t max_weight;    /* 1 .. CS_WEIGHT_MAX */
    uint64_t mem_limit;     /* per-GPU bytes, 0 = none */
    uint32_t max_conns;     /* endpoint: its connection cap; 0 = the daemon's default */
    uint32_t ngpus;         /* 0 = any GPU of the node */
    uint8_t gpus[CS_MAX_DEVICES][CS_UUID_LEN];
    bool identity;          /* pod and ns below come from the allocation */
    char pod[CS_NAME_LEN];
    char ns[CS_NAME_LEN];
    char source[CS_NAME_LEN]; /* for logs and status: "owner", "uid 1000", "gid 100",
                                 "default", "endpoint <id>" */
};

/* Whether a connection with grant g may ATTACH the GPU uuid: its list, or
 * any GPU when the list is empty. */
bool sd_grant_allows_gpu(const struct sd_grant *g, const uint8_t uuid[CS_UUID_LEN]);

#endif
