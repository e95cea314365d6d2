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
#include <stddef.h>
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
    char container[CS_NAME_LEN]; /* the allocation's container (CTL_EP_IDENTITY), "" when
                                    unknown: then LABELS' is shown where the pod is */
    char source[CS_NAME_LEN]; /* for logs and status: "owner", "uid 1000", "gid 100",
                                 "default", "endpoint <id>" */
};

/* ---- the access table: [uid.<who>] and [gid.<who>] sections ---------------------- */

#define SD_ACCESS_MAX 256   /* sections in one configuration */
#define SD_ACCESS_GROUPS 64 /* supplementary groups of a peer looked at */

enum sd_access_kind { SD_ACCESS_UID = 1, SD_ACCESS_GID = 2 };

/* One section. A key it leaves out takes the [cushared] default_* value
 * when a grant is made (so the order of sections and defaults in the file
 * does not matter). */
struct sd_access_rule {
    uint32_t kind;          /* enum sd_access_kind */
    uint32_t id;            /* uid or gid, names resolved at load */
    bool has_priority, has_weight, has_mem;
    uint32_t max_priority;
    uint32_t max_weight;
    uint64_t mem_limit;     /* 0 = none */
};

struct sd_access {
    size_t n;
    struct sd_access_rule v[SD_ACCESS_MAX];
};

struct sd_config;      /* config.h: holds the table and the default_* knobs */
struct sd_client_info; /* policy.h */

/* One key of an INI section. Returns 1 if the section is not [uid.*] or
 * [gid.*] (the caller tries others), 0, or -1 with a reason in err (an
 * unknown user or group name, a bad value, an unknown key, a full table;
 * err must have room, errlen > 0). */
int sd_access_parse(struct sd_access *a, const char *section, const char *key,
                    const char *value, char *err, size_t errlen);

/* The grant of a peer with these credentials (gids: primary first, then
 * supplementary; may repeat): its [uid.*] section; else the best of its
 * [gid.*] sections, field by field (the best class, the largest weight cap,
 * the largest memory limit, none being the largest); else, for owner_uid and
 * root, no limit; else the default_* knobs. Pure. */
void sd_access_resolve(const struct sd_config *cfg, uint32_t owner_uid, uint32_t uid,
                       const uint32_t *gids, size_t ngids, struct sd_grant *g);

/* The grant of a main-socket peer: its supplementary groups at connect time
 * come from SO_PEERGROUPS (Linux 4.13+; the primary gid alone without it). */
void sd_access_grant_peer(const struct sd_config *cfg, uint32_t owner_uid, int fd, uint32_t uid,
                          uint32_t gid, struct sd_grant *g);

/* Clamps what a client asked to its grant, in place: priority no better
 * than max_priority, weight at most max_weight, mem_limit at most the
 * grant's (0 asked = none, so it gets the grant's). Returns the
 * SD_GRANT_CUT_* bits of what was reduced. */
uint32_t sd_grant_apply(const struct sd_grant *g, struct sd_client_info *info);
/* The same for a priority and weight alone (name overrides). */
uint32_t sd_grant_clamp(const struct sd_grant *g, uint32_t *priority, uint32_t *weight);

/* HELLO's pod and namespace may be believed: the peer is the daemon's owner
 * or root under no [uid.*]/[gid.*] section (anyone else could pass for
 * another tenant). */
bool sd_grant_trusted(const struct sd_grant *g);

/* "uid 1000 may claim at most normal, weight 1 (default grant)": for logs
 * and TERMS. */
void sd_grant_describe(const struct sd_grant *g, uint32_t uid, char *buf, size_t cap);
/* Whether a connection with grant g may ATTACH the GPU uuid: its list, or
 * any GPU when the list is empty. */
bool sd_grant_allows_gpu(const struct sd_grant *g, const uint8_t uuid[CS_UUID_LEN]);

#endif
