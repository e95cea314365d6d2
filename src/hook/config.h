/* config.h: the hook's settings, read once from the environment when the
 * library is loaded and never again (a getenv per call is the kind of hot
 * path cost HAMi-core paid). Read-only after the constructor. */
#ifndef CS_HOOK_CONFIG_H
#define CS_HOOK_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "common/proto.h"

struct cs_config {
    char socket[108];            /* CUSHARE_SOCKET, else the default path */
    int priority;                /* CUSHARE_PRIORITY: high|normal|low */
    uint32_t weight;             /* CUSHARE_WEIGHT: 1..1000000 */
    uint64_t mem_limit;          /* CUSHARE_MEM_LIMIT per GPU, 0 = none */
    char name[CS_NAME_LEN];      /* CUSHARE_NAME, else the program name */
    char pod[CS_NAME_LEN];       /* POD_NAME / HOSTNAME in Kubernetes */
    char ns[CS_NAME_LEN];        /* POD_NAMESPACE */
    char container[CS_NAME_LEN]; /* CUSHARE_CONTAINER, else CONTAINER_NAME */
    char real_libcuda[256];      /* CUSHARE_REAL_LIBCUDA */
    bool require_daemon;         /* CUSHARE_REQUIRE_DAEMON=1: wait for it */
    uint32_t daemon_wait_ms;     /* CUSHARE_DAEMON_WAIT_MS: how long work waits
                                    for a lost daemon before running unmanaged */
    bool disabled;               /* CUSHARE_DISABLE=1: forward everything */
    bool swap;                   /* CUSHARE_SWAP (default on): VMM-backed,
                                    swappable allocations */
    uint64_t pin_keep;           /* CUSHARE_PIN_KEEP: pinned backing kept for
                                    resident memory, bytes (UINT64_MAX: all) */
    uint64_t pin_piece;          /* CUSHARE_PIN_PIECE: bytes pinned per driver
                                    call for swap backing (0: a segment's
                                    whole backing at once); default 64 MiB */
    uint64_t seg_part;           /* CUSHARE_SEG_PART: allocations larger than this
                                    are made of parts of this many bytes, each
                                    swapped on its own (0: never split);
                                    default 2 GiB, a multiple of 2 MiB */
    bool pool;                   /* CUSHARE_POOL (default on): borrow swap backing
                                    from the node's pinned pool (cushared) */
    bool host_backing_vmm;       /* CUSHARE_HOST_BACKING=vmm (default) |
                                    hostalloc: how swap backing is pinned */
    uint64_t host_reserve;       /* CUSHARE_HOST_RESERVE: host memory that pinning
                                    swap backing must leave available, bytes
                                    (default 10% of RAM, at least 4 GiB, at most half;
                                    0 = no guard; all the RAM or more: refused) */
    int tsg_mode;                /* CUSHARE_TSG: enum cs_tsg_mode (tsg.c) */
    uint64_t tsg_timeslice_us;   /* CUSHARE_TSG_TIMESLICE_US: timeslice of this
                                    process's compute channel groups, µs;
                                    0 = the driver's default */
};

/* CUSHARE_TSG: off (the ioctl wrapper is a pure pass-through), on (the
 * default: used when the driver is one whose layouts are known) or force
 * (also on an unknown driver version; the probe still checks the rest). */
enum cs_tsg_mode {
    CS_TSG_MODE_OFF = 0,
    CS_TSG_MODE_ON = 1,
    CS_TSG_MODE_FORCE = 2,
};

extern struct cs_config cs_cfg;

/* Parses the environment into cs_cfg. Called from the library constructor;
 * exposed for the unit tests, which call it again after setenv. */
void cs_config_load(void);

#endif
