/* config.h: cushared's knobs: defaults, validation, the INI file and the
 * run-time `cusharectl set KEY=VALUE` path.
 *
 * Every knob is described once in a table (config.c) with its name, type,
 * range and whether it may change while the daemon runs; the INI loader and
 * `set` both go through sd_config_set, so a knob has one name, one parser
 * and one error message wherever it is given. docs/configuration.md is the
 * prose version of that table.
 *
 * Per-client overrides (`client.<pid or name>.weight`, `.priority`) live in a
 * separate small table: they are matched against clients as they register
 * and applied to the ones already registered by the server.
 */
#ifndef SD_CONFIG_H
#define SD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/proto.h"
#include "sched/access.h"
#include "sched/node.h"

#define SD_ADDR_LEN 128
#define SD_PATH_LEN 256
#define SD_MAX_OVERRIDES 256
/* client_reserve_mb = auto: each client's reserve is measured (mem.c). */
#define SD_RESERVE_AUTO UINT32_MAX

struct sd_config {
    uint32_t mode;               /* enum cs_mode */
    uint32_t quantum_floor_ms;
    uint32_t quantum_cap_ms;
    uint32_t idle_release_ms;
    /* How long without work before a holder says it is idle (WELCOME
     * carries the smaller of this and idle_release_ms). On an
     * oversubscribed GPU a holder whose waiter's memory is in goes at its
     * report (policy.c idle_grace_ns); idle_release_ms, the soonest a
     * report came before, held it 200 ms longer. */
    uint32_t idle_report_ms;
    uint32_t revoke_timeout_ms;
    uint32_t reconnect_grace_ms;
    bool force_release;
    uint32_t mem_reserve_mb;
    uint32_t client_reserve_mb;  /* per attached client: context, libraries;
                                    SD_RESERVE_AUTO: measured (mem.c) */
    uint32_t mem_sample_ms;      /* the driver's per-process figures read every
                                    (meter.c); 0: never */
    uint32_t pin_budget_mb;      /* host memory the clients' pin-ahead may bring the
                                    node's pinned swap backing to; 0 = from the
                                    RAM and the GPUs' memory (sd_config_pin_budget) */
    /* issue 20: the node's pool of pinned host memory (pool.c, pinner.c) */
    bool pool;                   /* lend swap backing from a pool the daemon pins */
    uint32_t pool_max_mb;        /* never more pinned; 0 = the pin budget */
    uint32_t pool_min_mb;        /* pinned at start and kept */
    uint32_t pool_piece_mb;      /* the big piece (even; 2 MiB pieces make tails) */
    uint32_t pool_linger_ms;     /* a free piece beyond the need is released after this */
    uint32_t pool_pace_pct;      /* growth nobody waits for pins at most this share of the time */
    uint32_t prepare_holder_lead_ms; /* a holder is lent its revoke's backing this long
                                        before its slice ends; 0 = at once (mem.c) */
    bool pool_share_tenants;     /* lend a piece a live process of another tenant
                                    gave back (it may still hold an import) */
    bool swap_in_turns;          /* moves for the next holder leave what they would
                                    pin to its ROOMs (takeback.c sd_takeback_paced) */
    uint32_t host_reserve_mb;    /* pinning leaves the host this much available;
                                    0 = 10% of RAM, at least 4 GiB, at most half */
    double switch_cost_target;
    uint32_t log_level;          /* enum cs_log_level */
    uint32_t max_clients;
    uint32_t be_timeslice_us;    /* lower-class holders beside a high one; 0 = off */
    uint32_t lc_mechanism;       /* enum sd_lc_mechanism */
    uint32_t lc_window_us;       /* a gated BE job's work in flight (LC_MODE BOUNDED) */
    uint32_t lc_linger_us;       /* an LC job keeps its lease this long after its
                                    work is done (LC_MODE RELEASE_IDLE) */
    char metrics[SD_ADDR_LEN];   /* HOST:PORT, "" = off */
    char state_file[SD_PATH_LEN];/* "" = next to the socket, "none" = off */
    /* what a peer no [uid.*]/[gid.*] section names may claim (access.h);
     * start-up only: a grant is made once, at accept */
    uint32_t default_max_priority; /* enum cs_priority */
    uint32_t default_max_weight;
    uint64_t default_mem_limit;    /* bytes per GPU, 0 = none */
    struct sd_access access;       /* [uid.*] and [gid.*] sections */
    /* Endpoints (endpoint.c): sockets made for one allocation each. */
    char endpoint_dir[SD_PATH_LEN]; /* "" = <socket dir>/endpoints, "none" = off */
    uint32_t max_endpoints;
    uint32_t endpoint_max_conns;  /* per endpoint, unless its request says otherwise */
    uint32_t endpoint_idle_ttl_s; /* removed after this long unused; 0 = never */
    /* issue 17: no tenant takes a GPU hostage (docs/priority.md) */
    uint32_t class_share_max_pct;   /* share of a window better classes may take while a
                                       lower class waits; 100 = strict priority */
    uint32_t class_share_window_ms; /* the sliding window of that cap */
    uint32_t answer_timeout_ms;     /* EVICT, PREFETCH, EVICT PREPARE unanswered this long
                                       (plus their bytes at SD_ANSWER_MIN_BPS): the client
                                       is marked unresponsive */
    char gpus[SD_GPUS_LEN];      /* the node's GPUs: "auto" or a list (node.h) */
    uint32_t max_conns_per_uid;  /* open connections per peer uid (owner, root exempt) */
    uint32_t hello_timeout_ms;   /* a connection must say HELLO within this */
};

/* What keeps a latency-critical (high) holder's kernels from waiting behind
 * a lower-class one in shared mode (docs/priority.md). */
enum sd_lc_mechanism {
    SD_LC_AUTO = 0, /* channel-group timeslices where the BE client has them, else gating */
    SD_LC_TSG = 1,  /* timeslices only (be_timeslice_us); nothing where unavailable */
    SD_LC_GATE = 2, /* gating only: BE submissions held while the LC job has work */
    SD_LC_OFF = 3,  /* neither: co-run as the hardware decides */
};

enum sd_ovr_field { SD_OVR_WEIGHT, SD_OVR_PRIORITY };

/* One `client.<who>.<field>=value`. who is a pid (all digits) or a name. */
struct sd_override {
    char who[CS_NAME_LEN];
    bool has_weight, has_priority;
    uint32_t weight;
    uint32_t priority;
};

struct sd_overrides {
    size_t n;
    struct sd_override v[SD_MAX_OVERRIDES];
};

void sd_config_defaults(struct sd_config *c);

/* The idle period a client is told in WELCOME: the smaller of
 * idle_report_ms and idle_release_ms. */
uint32_t sd_config_idle_report(const struct sd_config *c);

/* What pinning must leave the host of `ram` bytes: host_reserve_mb, else
 * 10% of the RAM, at least 4 GiB, at most half (the hook's
 * CUSHARE_HOST_RESERVE default). */
uint64_t sd_config_host_reserve(const struct sd_config *c, uint64_t ram);

/* The node's pin budget (what the clients' pin-ahead and the pool may bring
 * its pinned swap backing to): pin_budget_mb; left at 0, half the RAM,
 * raised to gpu_bytes (the GPUs' memory less mem_reserve_mb) as far as
 * three quarters of the RAM and the host reserve allow, and to pool_max_mb.
 * UINT64_MAX when the RAM is not known (ram 0). */
uint64_t sd_config_pin_budget(const struct sd_config *c, uint64_t ram, uint64_t gpu_bytes);

/* Sets one global knob from text. runtime: refuse knobs that only take
 * effect at start-up. Returns 0, or -1 with a reason in err. Does not check
 * cross-knob rules (see sd_config_check). */
int sd_config_set(struct sd_config *c, const char *key, const char *value, bool runtime,
                  char *err, size_t errlen);

/* Rules between knobs (quantum_floor_ms <= quantum_cap_ms). 0 or -1. */
int sd_config_check(const struct sd_config *c, char *err, size_t errlen);

/* Parses "client.<who>.<field>" and its value into *o (merged with what
 * *o already says about who). Returns 0, 1 if key is not a client key (so
 * the caller tries the global knobs), or -1 with a reason. */
int sd_override_parse(const char *key, const char *value, struct sd_override *o,
                      char *err, size_t errlen);

/* Adds or merges o into the table. Returns 0 or -1 (table full). */
int sd_overrides_put(struct sd_overrides *t, const struct sd_override *o);

/* The entry for a client: by pid first, then by name. NULL if none. */
const struct sd_override *sd_overrides_find(const struct sd_overrides *t, uint32_t pid,
                                            const char *name);

/* The override's who is this pid (not a name that looks like one). */
bool sd_override_is_pid(const char *who, uint32_t pid);

/* Loads an INI file over *c and *ov: global knobs at the top or under
 * [cushared], per-client ones under [client.<who>], grants under
 * [uid.<who>] and [gid.<who>] (into c->access). `gpus` may be given on
 * several lines (the key repeated, or indented continuation lines): the
 * file's lines add up to one list (libinih reads at most 200 characters a
 * line). Returns 0, or -1 with "FILE:LINE: reason" in err. */
int sd_config_load(struct sd_config *c, struct sd_overrides *ov, const char *path, char *err,
                   size_t errlen);

/* Writes "key=value" for every knob to buf (one per line); for docs, tests
 * and `cushared --print-config`. Returns the length written. */
size_t sd_config_dump(const struct sd_config *c, char *buf, size_t cap);

/* Host and port of a "HOST:PORT" text (port 0 = any free port). 0 or -1. */
int sd_parse_hostport(const char *s, char *host, size_t hostcap, uint16_t *port);

#endif
