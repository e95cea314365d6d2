/* config.c: see config.h. Every bad value is reported once, clearly, and
 * replaced by its default: a typo in a pod spec must not kill the job. */
#include "hook/config.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct cs_config cs_cfg;

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return (v && *v) ? v : NULL;
}

/* A size setting that may also say `whole` (0), rounded up to the 2 MiB
 * granularity every segment has; a size beyond any machine's (2^48)
 * counts as whole, so that the rounding cannot overflow. dflt_text names
 * the default in the warning. */
static uint64_t env_size_or_whole(const char *name, uint64_t dflt, const char *dflt_text)
{
    const char *v = env(name);
    uint64_t x = dflt;
    if (v && !strcasecmp(v, "whole")) {
        x = 0;
    } else if (v && cs_parse_size(v, &x) < 0) {
        cs_warn("%s=%s is not a size such as %s (or whole); using %s", name, v, dflt_text,
                dflt_text);
        x = dflt;
    }
    if (x > (1ull << 48))
        x = 0;
    return (x + (2ull << 20) - 1) / (2ull << 20) * (2ull << 20);
}

static void load_log_level(void)
{
    const char *v = env("CUSHARE_LOG_LEVEL");
    int level = CS_LOG_WARN;
    if (v) {
        level = cs_log_parse_level(v);
        if (level < 0) {
            cs_log_init("cushare", CS_LOG_WARN);
            cs_warn("CUSHARE_LOG_LEVEL=%s is not error|warn|info|debug; using warn", v);
            level = CS_LOG_WARN;
        }
    }
    cs_log_init("cushare", (enum cs_log_level)level);
}

static void load_priority(void)
{
    const char *v = env("CUSHARE_PRIORITY");
    cs_cfg.priority = CS_PRIO_NORMAL;
    if (v) {
        int p = cs_priority_parse(v);
        if (p < 0)
            cs_warn("CUSHARE_PRIORITY=%s is not high|normal|low; using normal", v);
        else
            cs_cfg.priority = p;
    }
}

static void load_weight(void)
{
    const char *v = env("CUSHARE_WEIGHT");
    uint64_t w = 1;
    cs_cfg.weight = 1;
    if (v) {
        if (cs_parse_u64(v, 1, CS_WEIGHT_MAX, &w) < 0)
            cs_warn("CUSHARE_WEIGHT=%s is not an integer in 1..%u; using 1", v, CS_WEIGHT_MAX);
        else
            cs_cfg.weight = (uint32_t)w;
    }
}

static void load_mem_limit(void)
{
    const char *v = env("CUSHARE_MEM_LIMIT");
    cs_cfg.mem_limit = 0;
    if (v && cs_parse_size(v, &cs_cfg.mem_limit) < 0) {
        cs_warn("CUSHARE_MEM_LIMIT=%s is not a size such as 12G or 1536M; no limit", v);
        cs_cfg.mem_limit = 0;
    }
}

/* The protocol carries printable ASCII only. */
static void printable(char *s)
{
    for (; *s; s++)
        if (*s < 0x20 || *s > 0x7e)
            *s = '?';
}

static void load_names(void)
{
    extern char *program_invocation_short_name;
    const char *v = env("CUSHARE_NAME");
    cs_strlcpy(cs_cfg.name, v ? v : program_invocation_short_name, sizeof cs_cfg.name);
    /* Kubernetes: the downward API conventionally exports these; HOSTNAME is
     * the pod name in every pod. */
    v = env("POD_NAME");
    if (!v && env("KUBERNETES_SERVICE_HOST"))
        v = env("HOSTNAME");
    cs_strlcpy(cs_cfg.pod, v ? v : "", sizeof cs_cfg.pod);
    v = env("POD_NAMESPACE");
    cs_strlcpy(cs_cfg.ns, v ? v : "", sizeof cs_cfg.ns);
    /* The downward API cannot give a container its own name: the pod spec
     * sets it per container (docs/kubernetes.md). */
    v = env("CUSHARE_CONTAINER");
    if (!v)
        v = env("CONTAINER_NAME");
    cs_strlcpy(cs_cfg.container, v ? v : "", sizeof cs_cfg.container);
    printable(cs_cfg.name);
    printable(cs_cfg.pod);
    printable(cs_cfg.ns);
    printable(cs_cfg.container);
}

/* Pinned memory is not reclaimable: pinning the last of the host's RAM
 * gets processes OOM-killed (a job was, on the H100, with 4 x 30 GB of
 * working sets on a 125 GiB host). Default: 10% of RAM, at least 4 GiB,
 * at most half of it. A reserve of all the RAM or more would refuse every
 * pin: nothing could be swapped out, so no eviction could make room for
 * another job (two oversubscribing jobs with 99999T: one waited forever
 * beside a free GPU). Refused, with the default used instead. */
static void load_host_reserve(void)
{
    uint64_t total = cs_host_mem_total();
    uint64_t dflt = total / 10 > (4ull << 30) ? total / 10 : (4ull << 30);
    if (total && dflt > total / 2)
        dflt = total / 2;
    cs_cfg.host_reserve = dflt;
    const char *v = env("CUSHARE_HOST_RESERVE");
    uint64_t r;
    char d[32], t[32];
    cs_format_size(dflt, d, sizeof d);
    if (!v)
        return;
    if (cs_parse_size(v, &r) < 0)
        cs_warn("CUSHARE_HOST_RESERVE=%s is not a size such as 8G; using %s", v, d);
    else if (total && r >= total)
        cs_warn("CUSHARE_HOST_RESERVE=%s is not less than this host's memory (%s): no swap "
                "backing could ever be pinned; using %s", v, cs_format_size(total, t, sizeof t), d);
    else
        cs_cfg.host_reserve = r;
}

static bool env_flag(const char *name)
{
    const char *v = env(name);
    return v && (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
                 !strcasecmp(v, "on"));
}

void cs_config_load(void)
{
    memset(&cs_cfg, 0, sizeof cs_cfg);
    load_log_level();
    load_priority();
    load_weight();
    load_mem_limit();
    load_names();

    const char *v = env("CUSHARE_SOCKET");
    if (v && strlen(v) >= sizeof cs_cfg.socket) {
        cs_warn("CUSHARE_SOCKET is longer than a unix socket path may be; using the default");
        v = NULL;
    }
    if (v)
        cs_strlcpy(cs_cfg.socket, v, sizeof cs_cfg.socket);
    else
        cs_default_socket_path(cs_cfg.socket, sizeof cs_cfg.socket);

    v = env("CUSHARE_REAL_LIBCUDA");
    cs_strlcpy(cs_cfg.real_libcuda, v ? v : "", sizeof cs_cfg.real_libcuda);

    cs_cfg.require_daemon = env_flag("CUSHARE_REQUIRE_DAEMON");
    cs_cfg.disabled = env_flag("CUSHARE_DISABLE");
    v = env("CUSHARE_SWAP");
    cs_cfg.swap = !v || env_flag("CUSHARE_SWAP");
    if (v && !cs_cfg.swap && strcmp(v, "0") && strcasecmp(v, "off") && strcasecmp(v, "false") &&
        strcasecmp(v, "no"))
        cs_warn("CUSHARE_SWAP=%s is not on|off; using off", v);

    v = env("CUSHARE_POOL");
    cs_cfg.pool = !v || env_flag("CUSHARE_POOL");
    if (v && !cs_cfg.pool && strcmp(v, "0") && strcasecmp(v, "off") && strcasecmp(v, "false") &&
        strcasecmp(v, "no"))
        cs_warn("CUSHARE_POOL=%s is not on|off; using off", v);

    v = env("CUSHARE_PIN_KEEP");
    cs_cfg.pin_keep = UINT64_MAX;
    if (v && strcasecmp(v, "all") && cs_parse_size(v, &cs_cfg.pin_keep) < 0) {
        cs_warn("CUSHARE_PIN_KEEP=%s is not a size such as 20G (or all); keeping all", v);
        cs_cfg.pin_keep = UINT64_MAX;
    }

    load_host_reserve();

    /* One cuMemCreate(HOST) holds a driver lock that device allocations
     * in every process wait for: 64 MiB pieces pin as fast as one 8 GiB
     * block (5.0 vs 4.5 GB/s on an H100) and keep the wait at ~10 ms. */
    cs_cfg.pin_piece = env_size_or_whole("CUSHARE_PIN_PIECE", 64ull << 20, "64M");

    /* Large allocations are split in parts so that the scheduler's ROOM
     * and partial evictions move about what is asked for: whole, a 4 GB
     * growth evicted another job's whole 15 GB tensor (0.3 s on an H200,
     * and as much again to bring it back). */
    cs_cfg.seg_part = env_size_or_whole("CUSHARE_SEG_PART", 2ull << 30, "2G");

    v = env("CUSHARE_HOST_BACKING");
    cs_cfg.host_backing_vmm = true;
    if (v && !strcasecmp(v, "hostalloc"))
        cs_cfg.host_backing_vmm = false;
    else if (v && strcasecmp(v, "vmm"))
        cs_warn("CUSHARE_HOST_BACKING=%s is not vmm|hostalloc; using vmm", v);

    v = env("CUSHARE_TSG");
    cs_cfg.tsg_mode = CS_TSG_MODE_ON;
    if (v && !strcasecmp(v, "force"))
        cs_cfg.tsg_mode = CS_TSG_MODE_FORCE;
    else if (v && (!strcmp(v, "0") || !strcasecmp(v, "off") || !strcasecmp(v, "false") ||
                   !strcasecmp(v, "no")))
        cs_cfg.tsg_mode = CS_TSG_MODE_OFF;
    else if (v && !env_flag("CUSHARE_TSG"))
        cs_warn("CUSHARE_TSG=%s is not on|off|force; using on", v);
    if (cs_cfg.disabled)
        cs_cfg.tsg_mode = CS_TSG_MODE_OFF;

    /* Up to 1 s (CS_TSG_MAX_US); 0 = the driver's default. The RM rounds
     * down to what the hardware supports and refuses less than its minimum. */
    v = env("CUSHARE_TSG_TIMESLICE_US");
    cs_cfg.tsg_timeslice_us = 0;
    if (v && cs_parse_u64(v, 0, 1000000, &cs_cfg.tsg_timeslice_us) < 0) {
        cs_warn("CUSHARE_TSG_TIMESLICE_US=%s is not a number of microseconds in 0..1000000; "
                "leaving the driver's timeslice", v);
        cs_cfg.tsg_timeslice_us = 0;
    }

    uint64_t ms = 30000;
    v = env("CUSHARE_DAEMON_WAIT_MS");
    if (v && cs_parse_u64(v, 0, 86400000, &ms) < 0) {
        cs_warn("CUSHARE_DAEMON_WAIT_MS=%s is not a number of milliseconds; using 30000", v);
        ms = 30000;
    }
    cs_cfg.daemon_wait_ms = (uint32_t)ms;
}
