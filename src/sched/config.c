/* config.c: see config.h. */
#include "sched/config.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/util.h"

enum knob_kind {
    K_U32, K_U32_AUTO, K_BOOL, K_DOUBLE, K_MODE, K_LEVEL, K_LCMECH, K_ADDR, K_PATH, K_PRIO, K_SIZE, K_GPUS
};

struct knob {
    const char *name;
    uint8_t kind;
    bool runtime; /* may change while the daemon runs */
    size_t off;
    double lo, hi; /* numeric range, inclusive */
};

#define KNOB(n, k, rt, lo, hi) {#n, k, rt, offsetof(struct sd_config, n), lo, hi}

/* Ranges are wide on purpose (tests use millisecond quanta) but exclude the
 * values that would break the daemon: a zero quantum or timeout would make
 * the policy spin. 3600000 ms is the protocol's limit for idle_ms. */
static const struct knob knobs[] = {
    KNOB(mode, K_MODE, true, 0, 0),
    KNOB(quantum_floor_ms, K_U32, true, 1, 3600000),
    KNOB(quantum_cap_ms, K_U32, true, 1, 3600000),
    KNOB(idle_release_ms, K_U32, true, 1, 3600000),
    KNOB(idle_report_ms, K_U32, true, 1, 3600000),
    KNOB(revoke_timeout_ms, K_U32, true, 1, 3600000),
    KNOB(reconnect_grace_ms, K_U32, true, 0, 3600000),
    KNOB(force_release, K_BOOL, true, 0, 0),
    KNOB(mem_reserve_mb, K_U32, true, 0, 16u * 1024 * 1024),
    KNOB(client_reserve_mb, K_U32_AUTO, true, 0, 1024u * 1024),
    KNOB(pin_budget_mb, K_U32, true, 0, 1024u * 1024 * 1024),
    KNOB(pool, K_BOOL, false, 0, 0),
    KNOB(pool_max_mb, K_U32, true, 0, 1024u * 1024 * 1024),
    KNOB(pool_min_mb, K_U32, true, 0, 1024u * 1024 * 1024),
    KNOB(pool_piece_mb, K_U32, false, 2, 1024),
    KNOB(pool_linger_ms, K_U32, true, 0, 86400000),
    KNOB(pool_pace_pct, K_U32, true, 1, 100),
    KNOB(prepare_holder_lead_ms, K_U32, true, 0, 3600000),
    KNOB(pool_share_tenants, K_BOOL, true, 0, 0),
    KNOB(swap_in_turns, K_BOOL, true, 0, 0),
    KNOB(host_reserve_mb, K_U32, true, 0, 1024u * 1024 * 1024),
    KNOB(switch_cost_target, K_DOUBLE, true, 0.001, 1.0),
    KNOB(log_level, K_LEVEL, true, 0, 0),
    KNOB(max_clients, K_U32, true, 1, 65536),
    KNOB(mem_sample_ms, K_U32, false, 0, 3600000),
    KNOB(be_timeslice_us, K_U32, true, 0, CS_TIMESLICE_MAX_US),
    KNOB(lc_mechanism, K_LCMECH, true, 0, 0),
    KNOB(lc_window_us, K_U32, true, 1, CS_LC_PARAM_MAX_US),
    KNOB(lc_linger_us, K_U32, true, 1, CS_LC_PARAM_MAX_US),
    KNOB(metrics, K_ADDR, false, 0, 0),
    KNOB(state_file, K_PATH, false, 0, 0),
    KNOB(default_max_priority, K_PRIO, false, 0, 0),
    KNOB(default_max_weight, K_U32, false, 1, CS_WEIGHT_MAX),
    KNOB(default_mem_limit, K_SIZE, false, 0, 0),
    KNOB(endpoint_dir, K_PATH, false, 0, 0),
    KNOB(max_endpoints, K_U32, true, 1, 65536),
    KNOB(endpoint_max_conns, K_U32, true, 1, 65536),
    KNOB(endpoint_idle_ttl_s, K_U32, true, 0, 315360000),
    KNOB(class_share_max_pct, K_U32, true, 1, 100),
    KNOB(class_share_window_ms, K_U32, true, 10, 3600000),
    KNOB(answer_timeout_ms, K_U32, true, 1, 3600000),
    KNOB(gpus, K_GPUS, false, 0, 0),
    KNOB(max_conns_per_uid, K_U32, true, 1, 65536),
    KNOB(hello_timeout_ms, K_U32, true, 1, 3600000),
};

static const char *const mode_names[] = {"exclusive", "shared", "mixed"};
static const char *const level_names[] = {"error", "warn", "info", "debug"};
static const char *const lcmech_names[] = {"auto", "tsg", "gate", "off"};
static const char *const prio_names[] = {"high", "normal", "low"}; /* enum cs_priority */

/* The names a K_MODE/K_LEVEL/K_LCMECH knob takes, in value order. */
static const char *const *names_of(uint8_t kind, size_t *n)
{
    switch (kind) {
    case K_MODE:
        *n = sizeof mode_names / sizeof mode_names[0];
        return mode_names;
    case K_LEVEL:
        *n = 4;
        return level_names;
    case K_PRIO:
        *n = 3;
        return prio_names;
    default:
        *n = 4;
        return lcmech_names;
    }
}

uint32_t sd_config_idle_report(const struct sd_config *c)
{
    return c->idle_report_ms < c->idle_release_ms ? c->idle_report_ms : c->idle_release_ms;
}

void sd_config_defaults(struct sd_config *c)
{
    memset(c, 0, sizeof *c);
    c->mode = CS_MODE_MIXED; /* issue 21: LC beside BE by default (bench/results/priority.md) */
    /* issue 21, H200: two ResNet-50 / GPT-2 jobs lose ~2 % at 50-100 ms
     * against 1 s (bench/results/priority.md); an oversubscribed GPU's
     * quantum still grows with its switch cost (policy.c quantum_for). */
    c->quantum_floor_ms = 100;
    c->quantum_cap_ms = 30000;
    c->idle_release_ms = 250;
    /* An oversubscribed GPU's jobs wait seconds for each other; a job that
     * ended its work held it for the whole 250 ms before saying so, three
     * times in a run of 4 x 45 GB on the H200 (bench/results/
     * oversubscription.md). 50 ms: the hook's tick is then 5 ms. */
    c->idle_report_ms = 50;
    c->revoke_timeout_ms = 10000;
    c->reconnect_grace_ms = 1500;
    c->force_release = true;
    c->mem_reserve_mb = 512;
    /* Measured per client from the driver's own figures (meter.c); a number
     * overrides. */
    c->client_reserve_mb = SD_RESERVE_AUTO;
    c->mem_sample_ms = 1000;
    c->switch_cost_target = 0.05;
    c->log_level = CS_LOG_INFO;
    c->max_clients = 1024;
    c->be_timeslice_us = 1; /* the H100 measurement: LC p99 2.48 -> 0.43 ms (docs/tsg.md) */
    c->lc_mechanism = SD_LC_AUTO;
    c->lc_window_us = 1000; /* issue 7: a gated BE job drains in about 1 ms */
    c->lc_linger_us = 300;  /* longer than the CPU gaps inside one inference request */
    c->default_max_priority = CS_PRIO_NORMAL; /* issue 17: a tenant cannot claim high */
    c->default_max_weight = 1;
    c->default_mem_limit = 0;
    c->max_endpoints = 256;
    c->endpoint_max_conns = 16;
    c->endpoint_idle_ttl_s = 86400; /* a plugin that died before REMOVE leaks for a day */
    c->class_share_max_pct = 90; /* a waiting lower class gets 10% of every 2 s */
    c->class_share_window_ms = 2000;
    c->answer_timeout_ms = 10000; /* what ROOM and grants waited for an EVICT before */
    c->pool = true;
    c->pool_piece_mb = 64;      /* the hook's CUSHARE_PIN_PIECE: pinning's driver lock (mem.c) */
    c->pool_linger_ms = 120000; /* a node between two oversubscribed runs keeps it */
    c->pool_pace_pct = 50;      /* growth nobody waits for: half the time (configuration.md) */
    c->swap_in_turns = true;    /* issue 20: a switch the pool cannot back at once */
    cs_strlcpy(c->gpus, "auto", sizeof c->gpus);
    c->max_conns_per_uid = 32; /* a job needs one; a user's tools a few more */
    c->hello_timeout_ms = 2000; /* the hook says HELLO at once after connecting */
}

static void seterr(char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t len, const char *fmt, ...)
{
    if (!err || !len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

static const struct knob *knob_find(const char *name)
{
    for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++)
        if (strcmp(knobs[i].name, name) == 0)
            return &knobs[i];
    return NULL;
}

static int parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return 0;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return 0;
        }
    }
    return -1;
}

static int parse_double(const char *s, double *out)
{
    if (!*s || isspace((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || *end != '\0' || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int sd_parse_hostport(const char *s, char *host, size_t hostcap, uint16_t *port)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s)
        return -1;
    size_t hl = (size_t)(colon - s);
    const char *h = s;
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') { /* [::1]:9400 */
        h++;
        hl -= 2;
    }
    if (hl == 0 || hl >= hostcap)
        return -1;
    uint64_t p;
    if (cs_parse_u64(colon + 1, 0, 65535, &p) < 0)
        return -1;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (uint16_t)p;
    return 0;
}

static int set_u32(const struct knob *k, uint8_t *field, const char *value, char *err,
                   size_t errlen)
{
    uint64_t v;
    if (cs_parse_u64(value, (uint64_t)k->lo, (uint64_t)k->hi, &v) < 0) {
        seterr(err, errlen, "%s: '%s' is not an integer in %.0f..%.0f", k->name, value, k->lo,
               k->hi);
        return -1;
    }
    uint32_t v32 = (uint32_t)v;
    memcpy(field, &v32, sizeof v32);
    return 0;
}

static int set_name(const struct knob *k, uint32_t *field, const char *value, char *err,
                    size_t errlen)
{
    size_t n;
    const char *const *names = names_of(k->kind, &n);
    for (size_t i = 0; i < n; i++) {
        if (strcasecmp(value, names[i]) == 0) {
            *field = (uint32_t)i;
            return 0;
        }
    }
    if (k->kind == K_LEVEL) {
        int l = cs_log_parse_level(value);
        if (l >= 0) {
            *field = (uint32_t)l;
            return 0;
        }
    }
    char list[64] = "";
    for (size_t i = 0, used = 0; i < n && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                 names[i]);
    seterr(err, errlen, "%s: '%s' is not one of %s", k->name, value, list);
    return -1;
}

static int set_text(const struct knob *k, char *field, size_t cap, const char *value, char *err,
                    size_t errlen)
{
    if (strlen(value) >= cap) {
        seterr(err, errlen, "%s: value longer than %zu characters", k->name, cap - 1);
        return -1;
    }
    if (k->kind == K_ADDR && value[0]) {
        char host[SD_ADDR_LEN];
        uint16_t port;
        if (sd_parse_hostport(value, host, sizeof host, &port) < 0) {
            seterr(err, errlen, "%s: '%s' is not HOST:PORT", k->name, value);
            return -1;
        }
    }
    if (k->kind == K_GPUS) {
        struct sd_node node;
        char why[200];
        if (sd_node_parse(value, &node, why, sizeof why) < 0) {
            seterr(err, errlen, "%s: %s", k->name, why);
            return -1;
        }
    }
    if (k->kind == K_PATH && value[0] && strcmp(value, "none") != 0 && value[0] != '/') {
        seterr(err, errlen, "%s: '%s' is not an absolute path (or none)", k->name, value);
        return -1;
    }
    memcpy(field, value, strlen(value) + 1);
    return 0;
}

int sd_config_set(struct sd_config *c, const char *key, const char *value, bool runtime,
                  char *err, size_t errlen)
{
    const struct knob *k = knob_find(key);
    if (!k) {
        seterr(err, errlen, "unknown key '%s'", key);
        return -1;
    }
    if (runtime && !k->runtime) {
        seterr(err, errlen, "%s can only be set at start-up (config file or option)", key);
        return -1;
    }
    uint8_t *field = (uint8_t *)c + k->off;
    switch (k->kind) {
    case K_U32_AUTO:
        if (strcasecmp(value, "auto") == 0) {
            uint32_t a = SD_RESERVE_AUTO;
            memcpy(field, &a, sizeof a);
            return 0;
        }
        return set_u32(k, field, value, err, errlen);
    case K_U32:
        return set_u32(k, field, value, err, errlen);
    case K_BOOL: {
        bool b;
        if (parse_bool(value, &b) < 0) {
            seterr(err, errlen, "%s: '%s' is not a boolean (true/false)", key, value);
            return -1;
        }
        memcpy(field, &b, sizeof b);
        return 0;
    }
    case K_DOUBLE: {
        double d;
        if (parse_double(value, &d) < 0 || d < k->lo || d > k->hi) {
            seterr(err, errlen, "%s: '%s' is not a number in %g..%g", key, value, k->lo, k->hi);
            return -1;
        }
        memcpy(field, &d, sizeof d);
        return 0;
    }
    case K_MODE:
    case K_LEVEL:
    case K_LCMECH:
    case K_PRIO:
        return set_name(k, (uint32_t *)(void *)field, value, err, errlen);
    case K_ADDR:
        return set_text(k, (char *)field, SD_ADDR_LEN, value, err, errlen);
    case K_PATH:
        return set_text(k, (char *)field, SD_PATH_LEN, value, err, errlen);
    case K_SIZE: {
        uint64_t v;
        if (cs_parse_size(value, &v) < 0) {
            seterr(err, errlen, "%s: '%s' is not a size (e.g. 20G; 0 = none)", key, value);
            return -1;
        }
        memcpy(field, &v, sizeof v);
        return 0;
    }
    case K_GPUS:
        return set_text(k, (char *)field, SD_GPUS_LEN, value, err, errlen);
    }
    seterr(err, errlen, "internal: bad knob kind");
    return -1;
}

uint64_t sd_config_host_reserve(const struct sd_config *c, uint64_t ram)
{
    if (c->host_reserve_mb)
        return (uint64_t)c->host_reserve_mb << 20;
    uint64_t r = ram / 10;
    if (r < (4ull << 30))
        r = 4ull << 30;
    return r > ram / 2 ? ram / 2 : r;
}

/* Half the RAM alone was too little where a GPU's memory is most of the
 * RAM's half: 4 x 30 GB jobs on 80 GB beside 125 GiB of RAM keep 43-53 GB
 * swapped out while the holder's next eviction is pinned ahead, and a pool
 * held to 62.9 GiB missed 770-3174 pieces a run (swap-out 23-27 GB/s a move;
 * 80 GiB allowed: 665 missed, 51.7 GB/s; H200 shown as an H100,
 * 2026-12-02). One GPU's worth of memory out at once is what a whole switch
 * moves. What swapping keeps out must be in the host's RAM either way,
 * pinned or not; the three quarters and the reserve leave the host's own
 * memory reclaimable, and the pool pins nothing until a GPU nears
 * oversubscription (mem.c sd_policy_pool_want). */
uint64_t sd_config_pin_budget(const struct sd_config *c, uint64_t ram, uint64_t gpu_bytes)
{
    if (c->pin_budget_mb)
        return (uint64_t)c->pin_budget_mb << 20;
    if (!ram)
        return UINT64_MAX;
    uint64_t b = ram / 2, room = ram / 4 * 3, reserve = sd_config_host_reserve(c, ram);
    if (room > ram - reserve)
        room = ram - reserve;
    if (gpu_bytes > room)
        gpu_bytes = room;
    if (gpu_bytes > b)
        b = gpu_bytes;
    uint64_t pool = (uint64_t)c->pool_max_mb << 20;
    return pool > b ? pool : b;
}

int sd_config_check(const struct sd_config *c, char *err, size_t errlen)
{
    if (c->pool_piece_mb % 2) {
        seterr(err, errlen, "pool_piece_mb (%u) is not a multiple of 2 (MiB)", c->pool_piece_mb);
        return -1;
    }
    /* The pool grows to what pin-ahead would have the clients hold, which
     * the pin budget bounds (mem.c pin_budget): a larger pool_max_mb would
     * never be reached, and says two things at once. */
    if (c->pin_budget_mb && c->pool_max_mb > c->pin_budget_mb) {
        seterr(err, errlen,
               "pool_max_mb (%u) is above pin_budget_mb (%u): the pool pins within the pin "
               "budget; raise pin_budget_mb or leave it 0 (then pool_max_mb is the budget)",
               c->pool_max_mb, c->pin_budget_mb);
        return -1;
    }
    if (c->quantum_floor_ms > c->quantum_cap_ms) {
        seterr(err, errlen, "quantum_floor_ms (%u) is above quantum_cap_ms (%u)",
               c->quantum_floor_ms, c->quantum_cap_ms);
        return -1;
    }
    return 0;
}

/* ---- per-client overrides ------------------------------------------------ */

static bool name_ok(const char *s, size_t len)
{
    if (len == 0 || len >= CS_NAME_LEN)
        return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] < 0x21 || s[i] > 0x7e)
            return false;
    return true;
}

int sd_override_parse(const char *key, const char *value, struct sd_override *o, char *err,
                      size_t errlen)
{
    if (strncmp(key, "client.", 7) != 0)
        return 1;
    const char *who = key + 7;
    const char *dot = strrchr(who, '.');
    if (!dot || !name_ok(who, (size_t)(dot - who))) {
        seterr(err, errlen, "'%s': expected client.<pid or name>.weight|priority", key);
        return -1;
    }
    size_t wl = (size_t)(dot - who);
    if (o->who[0] && (strlen(o->who) != wl || strncmp(o->who, who, wl) != 0)) {
        seterr(err, errlen, "internal: override for another client");
        return -1;
    }
    memcpy(o->who, who, wl);
    o->who[wl] = '\0';
    const char *field = dot + 1;
    if (strcmp(field, "weight") == 0) {
        uint64_t w;
        if (cs_parse_u64(value, 1, CS_WEIGHT_MAX, &w) < 0) {
            seterr(err, errlen, "%s: '%s' is not an integer in 1..%u", key, value,
                   CS_WEIGHT_MAX);
            return -1;
        }
        o->has_weight = true;
        o->weight = (uint32_t)w;
        return 0;
    }
    if (strcmp(field, "priority") == 0) {
        int p = cs_priority_parse(value);
        if (p < 0) {
            seterr(err, errlen, "%s: '%s' is not one of high, normal, low", key, value);
            return -1;
        }
        o->has_priority = true;
        o->priority = (uint32_t)p;
        return 0;
    }
    seterr(err, errlen, "'%s': unknown client setting '%s' (weight or priority)", key, field);
    return -1;
}

int sd_overrides_put(struct sd_overrides *t, const struct sd_override *o)
{
    for (size_t i = 0; i < t->n; i++) {
        struct sd_override *e = &t->v[i];
        if (strcmp(e->who, o->who) != 0)
            continue;
        if (o->has_weight) {
            e->has_weight = true;
            e->weight = o->weight;
        }
        if (o->has_priority) {
            e->has_priority = true;
            e->priority = o->priority;
        }
        return 0;
    }
    if (t->n == SD_MAX_OVERRIDES)
        return -1;
    t->v[t->n++] = *o;
    return 0;
}

const struct sd_override *sd_overrides_find(const struct sd_overrides *t, uint32_t pid,
                                            const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (sd_override_is_pid(t->v[i].who, pid))
            return &t->v[i];
    if (!name || !name[0])
        return NULL;
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->v[i].who, name) == 0)
            return &t->v[i];
    return NULL;
}

bool sd_override_is_pid(const char *who, uint32_t pid)
{
    char pidtxt[16];
    snprintf(pidtxt, sizeof pidtxt, "%u", pid);
    return strcmp(who, pidtxt) == 0;
}

/* ---- INI file ------------------------------------------------------------ */

struct load_ctx {
    struct sd_config *c;
    struct sd_overrides *ov;
    char err[256];
    int failed;
    bool gpus_seen; /* later `gpus` lines add to the list */
};

/* `gpus` in the file: each line adds to what earlier lines listed. */
static int set_gpus_line(struct load_ctx *l, const char *value)
{
    if (!l->gpus_seen) {
        l->gpus_seen = true;
        return sd_config_set(l->c, "gpus", value, false, l->err, sizeof l->err);
    }
    char joined[SD_GPUS_LEN + 8];
    int n = snprintf(joined, sizeof joined, "%s,%s", l->c->gpus, value);
    if (n < 0 || (size_t)n >= SD_GPUS_LEN) {
        seterr(l->err, sizeof l->err, "gpus: value longer than %d characters", SD_GPUS_LEN - 1);
        return -1;
    }
    return sd_config_set(l->c, "gpus", joined, false, l->err, sizeof l->err);
}

static int ini_entry(void *user, const char *section, const char *name, const char *value)
{
    struct load_ctx *l = user;
    if (l->failed)
        return 1; /* keep only the first error; inih reports its line */
    char key[CS_KEY_LEN + CS_NAME_LEN + 16];
    int rc;
    if ((!section[0] || strcmp(section, "cushared") == 0) && strcmp(name, "gpus") == 0) {
        rc = set_gpus_line(l, value);
    } else if (!section[0] || strcmp(section, "cushared") == 0) {
        rc = sd_config_set(l->c, name, value, false, l->err, sizeof l->err);
    } else if (strncmp(section, "client.", 7) == 0) {
        snprintf(key, sizeof key, "%s.%s", section, name);
        struct sd_override o;
        memset(&o, 0, sizeof o);
        rc = sd_override_parse(key, value, &o, l->err, sizeof l->err);
        if (rc == 0 && sd_overrides_put(l->ov, &o) < 0) {
            seterr(l->err, sizeof l->err, "too many [client.*] sections (max %d)",
                   SD_MAX_OVERRIDES);
            rc = -1;
        }
    } else if ((rc = sd_access_parse(&l->c->access, section, name, value, l->err,
                                     sizeof l->err)) == 1) {
        seterr(l->err, sizeof l->err,
               "unknown section [%s] (use [cushared], [client.<pid or name>], "
               "[uid.<uid or user>] or [gid.<gid or group>])", section);
        rc = -1;
    }
    if (rc != 0) {
        l->failed = 1;
        return 0;
    }
    return 1;
}

int sd_config_load(struct sd_config *c, struct sd_overrides *ov, const char *path, char *err,
                   size_t errlen)
{
    struct load_ctx l = {.c = c, .ov = ov};
    int rc = ini_parse(path, ini_entry, &l);
    if (rc < 0) {
        seterr(err, errlen, "%s: cannot read: %s", path, rc == -1 ? strerror(errno) : "no memory");
        return -1;
    }
    if (rc > 0) {
        seterr(err, errlen, "%s:%d: %s", path, rc, l.failed ? l.err : "syntax error");
        return -1;
    }
    char why[200];
    if (sd_config_check(c, why, sizeof why) < 0) {
        seterr(err, errlen, "%s: %s", path, why);
        return -1;
    }
    return 0;
}

size_t sd_config_dump(const struct sd_config *c, char *buf, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < sizeof knobs / sizeof knobs[0] && n < cap; i++) {
        const struct knob *k = &knobs[i];
        const uint8_t *f = (const uint8_t *)c + k->off;
        uint32_t u;
        bool b;
        double d;
        int w = 0;
        switch (k->kind) {
        case K_U32:
        case K_U32_AUTO:
            memcpy(&u, f, sizeof u);
            if (k->kind == K_U32_AUTO && u == SD_RESERVE_AUTO)
                w = snprintf(buf + n, cap - n, "%s=auto\n", k->name);
            else
                w = snprintf(buf + n, cap - n, "%s=%u\n", k->name, u);
            break;
        case K_BOOL:
            memcpy(&b, f, sizeof b);
            w = snprintf(buf + n, cap - n, "%s=%s\n", k->name, b ? "true" : "false");
            break;
        case K_DOUBLE:
            memcpy(&d, f, sizeof d);
            w = snprintf(buf + n, cap - n, "%s=%g\n", k->name, d);
            break;
        case K_MODE:
        case K_LEVEL:
        case K_LCMECH:
        case K_PRIO: {
            size_t nn;
            const char *const *names = names_of(k->kind, &nn);
            memcpy(&u, f, sizeof u);
            w = snprintf(buf + n, cap - n, "%s=%s\n", k->name, names[u % nn]);
            break;
        }
        case K_ADDR:
        case K_PATH:
        case K_GPUS:
            w = snprintf(buf + n, cap - n, "%s=%s\n", k->name, (const char *)f);
            break;
        case K_SIZE: {
            uint64_t v;
            memcpy(&v, f, sizeof v);
            w = snprintf(buf + n, cap - n, "%s=%llu\n", k->name, (unsigned long long)v);
            break;
        }
        }
        if (w < 0)
            break;
        n += (size_t)w;
    }
    return n < cap ? n : cap - 1;
}
