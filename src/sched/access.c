/* access.c: what a peer of the main socket may claim (see access.h).
 *
 * The table comes from the configuration's [uid.<who>] and [gid.<who>]
 * sections; names are resolved once, at load, so that a grant never waits
 * for NSS. A grant is made once per connection, at accept, from the peer's
 * SO_PEERCRED uid and its groups at connect time, and never from anything
 * the peer says. */
#include "sched/access.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/util.h"
#include "sched/config.h"
#include "sched/policy.h"

/* ---- the table ------------------------------------------------------------------ */

/* A section's <who>: a number, or a user/group name looked up now. */
static int resolve_who(uint32_t kind, const char *who, uint32_t *id, char *err, size_t errlen)
{
    const char *what = kind == SD_ACCESS_UID ? "uid" : "gid";
    if (who[0] && strspn(who, "0123456789") == strlen(who)) {
        uint64_t v;
        /* (uid_t)-1 means "no change" to the kernel: never a real id. */
        if (cs_parse_u64(who, 0, UINT32_MAX - 1u, &v) < 0) {
            snprintf(err, errlen, "[%s.%s]: not a valid %s", what, who, what);
            return -1;
        }
        *id = (uint32_t)v;
        return 0;
    }
    if (kind == SD_ACCESS_UID) {
        const struct passwd *pw = getpwnam(who);
        if (pw) {
            *id = (uint32_t)pw->pw_uid;
            return 0;
        }
    } else {
        const struct group *gr = getgrnam(who);
        if (gr) {
            *id = (uint32_t)gr->gr_gid;
            return 0;
        }
    }
    snprintf(err, errlen, "[%s.%s]: no %s named '%s' on this node", what, who,
             kind == SD_ACCESS_UID ? "user" : "group", who);
    return -1;
}

static const struct sd_access_rule *find_rule(const struct sd_access *a, uint32_t kind,
                                              uint32_t id)
{
    for (size_t i = 0; i < a->n; i++)
        if (a->v[i].kind == kind && a->v[i].id == id)
            return &a->v[i];
    return NULL;
}

static int set_key(struct sd_access_rule *r, const char *section, const char *key,
                   const char *value, char *err, size_t errlen)
{
    uint64_t v;
    if (strcmp(key, "max_priority") == 0) {
        int p = cs_priority_parse(value);
        if (p < 0) {
            snprintf(err, errlen, "[%s] max_priority: '%s' is not one of high, normal, low",
                     section, value);
            return -1;
        }
        r->has_priority = true;
        r->max_priority = (uint32_t)p;
    } else if (strcmp(key, "max_weight") == 0) {
        if (cs_parse_u64(value, 1, CS_WEIGHT_MAX, &v) < 0) {
            snprintf(err, errlen, "[%s] max_weight: '%s' is not an integer in 1..%u", section,
                     value, CS_WEIGHT_MAX);
            return -1;
        }
        r->has_weight = true;
        r->max_weight = (uint32_t)v;
    } else if (strcmp(key, "mem_limit") == 0) {
        if (cs_parse_size(value, &v) < 0) {
            snprintf(err, errlen, "[%s] mem_limit: '%s' is not a size (e.g. 20G; 0 = none)",
                     section, value);
            return -1;
        }
        r->has_mem = true;
        r->mem_limit = v;
    } else {
        snprintf(err, errlen, "[%s]: unknown key '%s' (max_priority, max_weight or mem_limit)",
                 section, key);
        return -1;
    }
    return 0;
}

int sd_access_parse(struct sd_access *a, const char *section, const char *key,
                    const char *value, char *err, size_t errlen)
{
    uint32_t kind;
    if (strncmp(section, "uid.", 4) == 0)
        kind = SD_ACCESS_UID;
    else if (strncmp(section, "gid.", 4) == 0)
        kind = SD_ACCESS_GID;
    else
        return 1;
    uint32_t id;
    if (resolve_who(kind, section + 4, &id, err, errlen) < 0)
        return -1;
    struct sd_access_rule *r = (struct sd_access_rule *)find_rule(a, kind, id);
    if (!r) {
        if (a->n == SD_ACCESS_MAX) {
            snprintf(err, errlen, "too many [uid.*] and [gid.*] sections (max %d)",
                     SD_ACCESS_MAX);
            return -1;
        }
        r = &a->v[a->n];
        memset(r, 0, sizeof *r);
        r->kind = kind;
        r->id = id;
    }
    if (set_key(r, section, key, value, err, errlen) < 0)
        return -1;
    if (r == &a->v[a->n])
        a->n++; /* a new section counts once it has a valid key */
    return 0;
}

/* ---- grants --------------------------------------------------------------------- */

/* A rule's limits with the keys it leaves out taken from the defaults. */
static void rule_limits(const struct sd_config *cfg, const struct sd_access_rule *r,
                        struct sd_grant *g)
{
    g->max_priority = r->has_priority ? r->max_priority : cfg->default_max_priority;
    g->max_weight = r->has_weight ? r->max_weight : cfg->default_max_weight;
    g->mem_limit = r->has_mem ? r->mem_limit : cfg->default_mem_limit;
}

/* best := the better of best and x, field by field (0 memory = none = most). */
static void merge_best(struct sd_grant *best, const struct sd_grant *x)
{
    if (x->max_priority < best->max_priority)
        best->max_priority = x->max_priority;
    if (x->max_weight > best->max_weight)
        best->max_weight = x->max_weight;
    if (best->mem_limit && (!x->mem_limit || x->mem_limit > best->mem_limit))
        best->mem_limit = x->mem_limit;
}

static bool seen_before(const uint32_t *gids, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (gids[j] == gids[i])
            return true;
    return false;
}

/* The best of the peer's [gid.*] sections; false if none matches. */
static bool resolve_groups(const struct sd_config *cfg, const uint32_t *gids, size_t ngids,
                           struct sd_grant *g)
{
    size_t used = 0, matched = 0;
    for (size_t i = 0; i < ngids; i++) {
        const struct sd_access_rule *r = find_rule(&cfg->access, SD_ACCESS_GID, gids[i]);
        if (!r || seen_before(gids, i))
            continue;
        struct sd_grant x;
        rule_limits(cfg, r, &x);
        if (matched++ == 0)
            rule_limits(cfg, r, g);
        else
            merge_best(g, &x);
        if (used < sizeof g->source) {
            int w = snprintf(g->source + used, sizeof g->source - used, "%s%u",
                             matched == 1 ? "gid " : ",", gids[i]);
            used += w > 0 ? (size_t)w : 0;
        }
    }
    return matched > 0;
}

void sd_access_resolve(const struct sd_config *cfg, uint32_t owner_uid, uint32_t uid,
                       const uint32_t *gids, size_t ngids, struct sd_grant *g)
{
    memset(g, 0, sizeof *g);
    const struct sd_access_rule *r = find_rule(&cfg->access, SD_ACCESS_UID, uid);
    if (r) {
        rule_limits(cfg, r, g);
        snprintf(g->source, sizeof g->source, "uid %u", uid);
        return;
    }
    if (resolve_groups(cfg, gids, ngids, g))
        return;
    if (uid == owner_uid || uid == 0) {
        g->max_priority = CS_PRIO_HIGH;
        g->max_weight = CS_WEIGHT_MAX;
        g->mem_limit = 0;
        cs_strlcpy(g->source, uid == owner_uid ? "owner" : "root", sizeof g->source);
        return;
    }
    g->max_priority = cfg->default_max_priority;
    g->max_weight = cfg->default_max_weight;
    g->mem_limit = cfg->default_mem_limit;
    cs_strlcpy(g->source, "default", sizeof g->source);
}

void sd_access_grant_peer(const struct sd_config *cfg, uint32_t owner_uid, int fd, uint32_t uid,
                          uint32_t gid, struct sd_grant *g)
{
    /* The primary gid first, then the supplementary groups. A peer in more
     * groups than the buffer holds gets them from the heap (ERANGE says how
     * many); if even that fails, the primary gid alone decides. */
    uint32_t stack[1 + SD_ACCESS_GROUPS];
    uint32_t *gids = stack;
    size_t n = 1;
    stack[0] = gid;
    socklen_t len = (socklen_t)(SD_ACCESS_GROUPS * sizeof(gid_t));
    _Static_assert(sizeof(gid_t) == sizeof(uint32_t), "SO_PEERGROUPS gives 32-bit gids");
    if (fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, stack + 1, &len) == 0) {
        n += len / sizeof(gid_t);
    } else if (fd >= 0 && errno == ERANGE && (gids = malloc(sizeof *gids + len))) {
        gids[0] = gid;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, gids + 1, &len) == 0)
            n += len / sizeof(gid_t);
    }
    if (!gids)
        gids = stack;
    sd_access_resolve(cfg, owner_uid, uid, gids, n, g);
    if (gids != stack)
        free(gids);
}

uint32_t sd_grant_clamp(const struct sd_grant *g, uint32_t *priority, uint32_t *weight)
{
    /* A grant from elsewhere (an endpoint) is trusted only as far as the
     * policy's own ranges: never weight 0, never a class beyond low. */
    uint32_t pmax = g->max_priority < CS_PRIO_COUNT ? g->max_priority : CS_PRIO_LOW;
    uint32_t wmax = g->max_weight ? g->max_weight : 1;
    uint32_t cut = 0;
    if (*priority < pmax) {
        *priority = pmax;
        cut |= SD_GRANT_CUT_PRIORITY;
    }
    if (*weight > wmax) {
        *weight = wmax;
        cut |= SD_GRANT_CUT_WEIGHT;
    }
    return cut;
}

uint32_t sd_grant_apply(const struct sd_grant *g, struct sd_client_info *info)
{
    uint32_t cut = sd_grant_clamp(g, &info->priority, &info->weight);
    if (g->mem_limit && (!info->mem_limit || info->mem_limit > g->mem_limit)) {
        info->mem_limit = g->mem_limit;
        cut |= SD_GRANT_CUT_MEM;
    }
    return cut;
}

bool sd_grant_trusted(const struct sd_grant *g)
{
    return strcmp(g->source, "owner") == 0 || strcmp(g->source, "root") == 0;
}

void sd_grant_describe(const struct sd_grant *g, uint32_t uid, char *buf, size_t cap)
{
    char mem[48] = "";
    if (g->mem_limit) {
        char sz[32];
        snprintf(mem, sizeof mem, ", memory %s", cs_format_size(g->mem_limit, sz, sizeof sz));
    }
    snprintf(buf, cap, "uid %u may claim at most %s, weight %u%s (%s grant)", uid,
             cs_priority_name((int)(g->max_priority < CS_PRIO_COUNT ? g->max_priority
                                                                     : CS_PRIO_LOW)),
             g->max_weight ? g->max_weight : 1, mem, g->source);
}

bool sd_grant_allows_gpu(const struct sd_grant *g, const uint8_t uuid[CS_UUID_LEN])
{
    if (g->ngpus == 0)
        return true; /* any GPU of the node */
    for (uint32_t i = 0; i < g->ngpus && i < CS_MAX_DEVICES; i++)
        if (memcmp(g->gpus[i], uuid, CS_UUID_LEN) == 0)
            return true;
    return false;
}
