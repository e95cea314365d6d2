/* dp_config.c: flags, environment and resource specs of the device plugin. */
#include <ctype.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/util.h"
#include "k8s/dp_config.h"

#define DP_SLOTS_MAX 1024u
#define DP_WEIGHT_MAX 1000000u
#define DP_PODRES_DEFAULT "/var/lib/kubelet/pod-resources/kubelet.sock"
#define DP_PODRES_TIMEOUT_MAX 3600u

static int fail(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return -1;
}

void dp_config_defaults(struct dp_config *c)
{
    memset(c, 0, sizeof *c);
    cs_strlcpy(c->plugin_dir, "/var/lib/kubelet/device-plugins", sizeof c->plugin_dir);
    cs_strlcpy(c->kubelet_sock, "kubelet.sock", sizeof c->kubelet_sock);
    cs_strlcpy(c->nvml_lib, "libnvidia-ml.so.1", sizeof c->nvml_lib);
    cs_strlcpy(c->sysfs, "/sys", sizeof c->sysfs);
    cs_strlcpy(c->lib, "/var/lib/cushare/lib/libcushare.so", sizeof c->lib);
    cs_strlcpy(c->lib_container, "/usr/local/lib/cushare/libcushare.so", sizeof c->lib_container);
    cs_strlcpy(c->daemon_socket, "/run/cushare/cushared.sock", sizeof c->daemon_socket);
    cs_strlcpy(c->preload_file, "/var/lib/cushare/ld.so.preload", sizeof c->preload_file);
    c->inject = DP_INJECT_ENV;
    c->placement = DP_PLACE_SPREAD;
    c->require_daemon = true;
    c->prestart = true;
    c->endpoints = true;
    cs_strlcpy(c->pod_resources, DP_PODRES_DEFAULT, sizeof c->pod_resources);
    c->pod_resources_timeout_s = 60;
    c->slots = 4;
    c->unit = 1ull << 30;
    c->health_ms = 5000;
    c->log_level = CS_LOG_INFO;
}

const char *dp_inject_name(enum dp_inject i)
{
    return i == DP_INJECT_ENV ? "env" : i == DP_INJECT_PRELOAD ? "preload" : "none";
}

const char *dp_placement_name(enum dp_placement p)
{
    return p == DP_PLACE_SPREAD ? "spread" : "pack";
}

/* ---- scalar parsers ----------------------------------------------------------- */

static int parse_bool(const char *v, bool *out)
{
    if (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
        !strcasecmp(v, "on")) {
        *out = true;
        return 0;
    }
    if (!strcasecmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") ||
        !strcasecmp(v, "off")) {
        *out = false;
        return 0;
    }
    return -1;
}

static int parse_inject(const char *v, enum dp_inject *out)
{
    if (!strcmp(v, "env"))
        *out = DP_INJECT_ENV;
    else if (!strcmp(v, "preload") || !strcmp(v, "ld.so.preload"))
        *out = DP_INJECT_PRELOAD;
    else if (!strcmp(v, "none"))
        *out = DP_INJECT_NONE;
    else
        return -1;
    return 0;
}

static int parse_placement(const char *v, enum dp_placement *out)
{
    if (!strcmp(v, "spread"))
        *out = DP_PLACE_SPREAD;
    else if (!strcmp(v, "pack"))
        *out = DP_PLACE_PACK;
    else
        return -1;
    return 0;
}

static int set_path(char *dst, size_t cap, const char *v, bool absolute)
{
    if (!*v || strlen(v) >= cap || (absolute && v[0] != '/'))
        return -1;
    cs_strlcpy(dst, v, cap);
    return 0;
}

/* ---- resource specs ------------------------------------------------------------ */

/* A DNS-1123 label or subdomain part: what the kubelet accepts on either side
 * of the '/' of an extended resource name. */
static bool dns_ok(const char *s, size_t n, bool dots)
{
    if (n == 0 || n > 63 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (!(islower(ch) || isdigit(ch) || ch == '-' || (dots && ch == '.')))
            return false;
    }
    return true;
}

static int res_name(struct dp_resource *r, const char *name, size_t n, char *err, size_t cap)
{
    char full[sizeof r->name];
    if (memchr(name, '/', n))
        snprintf(full, sizeof full, "%.*s", (int)n, name);
    else
        snprintf(full, sizeof full, "%s/%.*s", DP_DOMAIN, (int)n, name);
    const char *slash = strchr(full, '/');
    if (!slash || !dns_ok(full, (size_t)(slash - full), true) ||
        !dns_ok(slash + 1, strlen(slash + 1), true))
        return fail(err, cap, "resource name '%.*s' is not DOMAIN/NAME of lower-case DNS labels",
                    (int)n, name);
    cs_strlcpy(r->name, full, sizeof r->name);
    /* The socket file: our domain is implied, any other one is kept. */
    const char *base = strncmp(full, DP_DOMAIN "/", strlen(DP_DOMAIN) + 1)
                           ? full : full + strlen(DP_DOMAIN) + 1;
    snprintf(r->endpoint, sizeof r->endpoint, "cushare-%s.sock", base);
    for (char *p = r->endpoint; *p; p++)
        if (*p == '/')
            *p = '_';
    return 0;
}

static int res_kv(struct dp_resource *r, const char *k, const char *v, char *err, size_t cap)
{
    uint64_t x;
    if (!strcmp(k, "kind")) {
        if (strcmp(v, "slots") && strcmp(v, "memory"))
            return fail(err, cap, "%s: kind must be slots or memory", r->name);
        r->kind = strcmp(v, "slots") ? DP_KIND_MEMORY : DP_KIND_SLOTS;
    } else if (!strcmp(k, "slots")) {
        if (cs_parse_u64(v, 1, DP_SLOTS_MAX, &x) < 0)
            return fail(err, cap, "%s: slots must be 1..%u", r->name, DP_SLOTS_MAX);
        r->slots = (unsigned)x;
    } else if (!strcmp(k, "unit")) {
        if (cs_parse_size(v, &x) < 0 || x < (1u << 20))
            return fail(err, cap, "%s: unit must be a size of at least 1M", r->name);
        r->unit = x;
    } else if (!strcmp(k, "priority")) {
        if ((r->priority = cs_priority_parse(v)) < 0)
            return fail(err, cap, "%s: priority must be high, normal or low", r->name);
    } else if (!strcmp(k, "weight")) {
        if (cs_parse_u64(v, 1, DP_WEIGHT_MAX, &x) < 0)
            return fail(err, cap, "%s: weight must be 1..%u", r->name, DP_WEIGHT_MAX);
        r->weight = (unsigned)x;
    } else if (!strcmp(k, "mem-limit") || !strcmp(k, "mem_limit")) {
        if (cs_parse_size(v, &x) < 0 || x == 0)
            return fail(err, cap, "%s: mem-limit must be a size such as 12G", r->name);
        r->mem_limit = x;
    } else {
        return fail(err, cap, "%s: unknown key '%s' (kind, slots, unit, priority, weight, "
                              "mem-limit)", r->name, k);
    }
    return 0;
}

static int res_opts(struct dp_resource *r, const char *opts, char *err, size_t cap)
{
    char buf[512];
    if (strlen(opts) >= sizeof buf)
        return fail(err, cap, "%s: options too long", r->name);
    cs_strlcpy(buf, opts, sizeof buf);
    char *save = NULL;
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (!eq)
            return fail(err, cap, "%s: '%s' is not key=value", r->name, kv);
        *eq = 0;
        if (res_kv(r, kv, eq + 1, err, cap) < 0)
            return -1;
    }
    bool mem = r->kind == DP_KIND_MEMORY;
    if (mem && (r->slots || r->priority >= 0 || r->weight || r->mem_limit))
        return fail(err, cap, "%s: a memory resource takes only unit=SIZE", r->name);
    if (!mem && r->unit)
        return fail(err, cap, "%s: unit= needs kind=memory", r->name);
    return 0;
}

int dp_config_add_resource(struct dp_config *c, const char *spec, char *err, size_t cap)
{
    if (c->nres == DP_MAX_RES)
        return fail(err, cap, "at most %d resources", DP_MAX_RES);
    struct dp_resource *r = &c->res[c->nres];
    memset(r, 0, sizeof *r);
    r->priority = -1;
    const char *colon = strchr(spec, ':');
    size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
    if (res_name(r, spec, n, err, cap) < 0)
        return -1;
    if (colon && res_opts(r, colon + 1, err, cap) < 0)
        return -1;
    c->nres++;
    return 0;
}

/* "a;b c" -> resources a, b and c: the environment form of --resource. */
static int add_resource_list(struct dp_config *c, const char *list, char *err, size_t cap)
{
    char buf[2048];
    if (strlen(list) >= sizeof buf)
        return fail(err, cap, "CUSHARE_DP_RESOURCES is too long");
    cs_strlcpy(buf, list, sizeof buf);
    char *save = NULL;
    for (char *s = strtok_r(buf, "; \t\n", &save); s; s = strtok_r(NULL, "; \t\n", &save))
        if (dp_config_add_resource(c, s, err, cap) < 0)
            return -1;
    return 0;
}

/* ---- one setting, from a flag or a variable ----------------------------------- */

enum opt_id {
    O_PLUGIN_DIR = 256, O_KUBELET_SOCK, O_RESOURCE, O_SLOTS, O_UNIT, O_NVML, O_SYSFS, O_LIB,
    O_LIB_CONTAINER, O_INSTALL_LIB, O_SOCKET, O_INJECT, O_PRELOAD_FILE, O_PLACEMENT,
    O_REQUIRE_DAEMON, O_PRESTART, O_DEVICE_NODES, O_HEALTH, O_LOG_LEVEL, O_PRINT, O_HELP,
    O_ENDPOINTS, O_POD_RESOURCES, O_POD_RESOURCES_TIMEOUT,
};

struct opt_desc {
    const char *flag;
    const char *env;
    enum opt_id id;
    int has_arg;
};

static const struct opt_desc opts[] = {
    {"plugin-dir", "CUSHARE_DP_PLUGIN_DIR", O_PLUGIN_DIR, 1},
    {"kubelet-socket", "CUSHARE_DP_KUBELET_SOCKET", O_KUBELET_SOCK, 1},
    {"resource", "CUSHARE_DP_RESOURCES", O_RESOURCE, 1},
    {"slots", "CUSHARE_DP_SLOTS", O_SLOTS, 1},
    {"memory-unit", "CUSHARE_DP_MEMORY_UNIT", O_UNIT, 1},
    {"nvml", "CUSHARE_DP_NVML", O_NVML, 1},
    {"sysfs", "CUSHARE_DP_SYSFS", O_SYSFS, 1},
    {"lib", "CUSHARE_DP_LIB", O_LIB, 1},
    {"container-lib", "CUSHARE_DP_CONTAINER_LIB", O_LIB_CONTAINER, 1},
    {"install-lib", "CUSHARE_DP_INSTALL_LIB", O_INSTALL_LIB, 1},
    {"socket", "CUSHARE_SOCKET", O_SOCKET, 1},
    {"inject", "CUSHARE_DP_INJECT", O_INJECT, 1},
    {"preload-file", "CUSHARE_DP_PRELOAD_FILE", O_PRELOAD_FILE, 1},
    {"placement", "CUSHARE_DP_PLACEMENT", O_PLACEMENT, 1},
    {"require-daemon", "CUSHARE_DP_REQUIRE_DAEMON", O_REQUIRE_DAEMON, 1},
    {"prestart", "CUSHARE_DP_PRESTART", O_PRESTART, 1},
    {"device-nodes", "CUSHARE_DP_DEVICE_NODES", O_DEVICE_NODES, 1},
    {"endpoints", "CUSHARE_DP_ENDPOINTS", O_ENDPOINTS, 1},
    {"pod-resources", "CUSHARE_DP_POD_RESOURCES", O_POD_RESOURCES, 1},
    {"pod-resources-timeout", "CUSHARE_DP_POD_RESOURCES_TIMEOUT", O_POD_RESOURCES_TIMEOUT, 1},
    {"health-interval", "CUSHARE_DP_HEALTH_INTERVAL_MS", O_HEALTH, 1},
    {"log-level", "CUSHARE_DP_LOG_LEVEL", O_LOG_LEVEL, 1},
    {"print-config", NULL, O_PRINT, 0},
    {"help", NULL, O_HELP, 0},
};
#define NOPTS (sizeof opts / sizeof opts[0])

static int set_bool(bool *dst, const char *name, const char *v, char *err, size_t cap)
{
    if (parse_bool(v, dst) < 0)
        return fail(err, cap, "%s: '%s' is not on or off", name, v);
    return 0;
}

static int set_path_opt(char *dst, size_t dcap, const char *name, const char *v, bool abs,
                        char *err, size_t cap)
{
    if (set_path(dst, dcap, v, abs) < 0)
        return fail(err, cap, "%s: '%s' is not %sa path shorter than %zu bytes", name, v,
                    abs ? "an absolute " : "", dcap);
    return 0;
}

static int set_number(struct dp_config *c, enum opt_id id, const char *name, const char *v,
                      char *err, size_t cap)
{
    uint64_t x;
    switch (id) {
    case O_SLOTS:
        if (cs_parse_u64(v, 1, DP_SLOTS_MAX, &x) < 0)
            return fail(err, cap, "%s: '%s' is not 1..%u", name, v, DP_SLOTS_MAX);
        c->slots = (unsigned)x;
        return 0;
    case O_UNIT:
        if (cs_parse_size(v, &x) < 0 || x < (1u << 20))
            return fail(err, cap, "%s: '%s' is not a size of at least 1M", name, v);
        c->unit = x;
        return 0;
    case O_HEALTH:
        if (cs_parse_u64(v, 10, 3600000, &x) < 0)
            return fail(err, cap, "%s: '%s' is not 10..3600000 ms", name, v);
        c->health_ms = (unsigned)x;
        return 0;
    case O_POD_RESOURCES_TIMEOUT:
        if (cs_parse_u64(v, 1, DP_PODRES_TIMEOUT_MAX, &x) < 0)
            return fail(err, cap, "%s: '%s' is not 1..%u s", name, v, DP_PODRES_TIMEOUT_MAX);
        c->pod_resources_timeout_s = (unsigned)x;
        return 0;
    default:
        if ((c->log_level = cs_log_parse_level(v)) < 0)
            return fail(err, cap, "%s: '%s' is not error|warn|info|debug", name, v);
        return 0;
    }
}

static int set_enum(struct dp_config *c, enum opt_id id, const char *name, const char *v,
                    char *err, size_t cap)
{
    if (id == O_INJECT && parse_inject(v, &c->inject) < 0)
        return fail(err, cap, "%s: '%s' is not env, preload or none", name, v);
    if (id == O_PLACEMENT && parse_placement(v, &c->placement) < 0)
        return fail(err, cap, "%s: '%s' is not spread or pack", name, v);
    return 0;
}

static int set_opt(struct dp_config *c, enum opt_id id, const char *name, const char *v,
                   char *err, size_t cap)
{
    switch (id) {
    case O_PLUGIN_DIR: return set_path_opt(c->plugin_dir, sizeof c->plugin_dir, name, v, true, err, cap);
    case O_KUBELET_SOCK:
        if (strchr(v, '/'))
            return fail(err, cap, "%s: '%s' must be a file name", name, v);
        return set_path_opt(c->kubelet_sock, sizeof c->kubelet_sock, name, v, false, err, cap);
    case O_NVML: return set_path_opt(c->nvml_lib, sizeof c->nvml_lib, name, v, false, err, cap);
    case O_SYSFS: return set_path_opt(c->sysfs, sizeof c->sysfs, name, v, true, err, cap);
    case O_LIB: return set_path_opt(c->lib, sizeof c->lib, name, v, true, err, cap);
    case O_LIB_CONTAINER:
        return set_path_opt(c->lib_container, sizeof c->lib_container, name, v, true, err, cap);
    case O_INSTALL_LIB:
        return set_path_opt(c->install_lib, sizeof c->install_lib, name, v, true, err, cap);
    case O_SOCKET:
        return set_path_opt(c->daemon_socket, sizeof c->daemon_socket, name, v, true, err, cap);
    case O_PRELOAD_FILE:
        return set_path_opt(c->preload_file, sizeof c->preload_file, name, v, true, err, cap);
    case O_INJECT:
    case O_PLACEMENT: return set_enum(c, id, name, v, err, cap);
    case O_REQUIRE_DAEMON: return set_bool(&c->require_daemon, name, v, err, cap);
    case O_PRESTART: return set_bool(&c->prestart, name, v, err, cap);
    case O_DEVICE_NODES: return set_bool(&c->device_nodes, name, v, err, cap);
    case O_ENDPOINTS: return set_bool(&c->endpoints, name, v, err, cap);
    case O_POD_RESOURCES:
        if (!strcmp(v, "off") || !strcmp(v, "none")) {
            c->pod_resources[0] = '\0';
            return 0;
        }
        return set_path_opt(c->pod_resources, sizeof c->pod_resources, name, v, true, err, cap);
    case O_RESOURCE: return add_resource_list(c, v, err, cap);
    default: return set_number(c, id, name, v, err, cap);
    }
}

int dp_config_env(struct dp_config *c, char *err, size_t cap)
{
    for (size_t i = 0; i < NOPTS; i++) {
        const char *v = opts[i].env ? getenv(opts[i].env) : NULL;
        if (v && *v && set_opt(c, opts[i].id, opts[i].env, v, err, cap) < 0)
            return -1;
    }
    return 0;
}

int dp_config_args(struct dp_config *c, int argc, char **argv, enum dp_action *act, char *err,
                   size_t cap)
{
    struct option lo[NOPTS + 1];
    for (size_t i = 0; i < NOPTS; i++)
        lo[i] = (struct option){opts[i].flag, opts[i].has_arg ? required_argument : no_argument,
                                NULL, (int)opts[i].id};
    lo[NOPTS] = (struct option){NULL, 0, NULL, 0};
    *act = DP_ACT_RUN;
    bool flag_res = false;
    optind = 0; /* glibc: a full reset, for callers that parse more than once */
    opterr = 0;
    int ch;
    while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
        if (ch == 'h' || ch == O_HELP) {
            *act = DP_ACT_HELP;
            return 0;
        }
        if (ch == O_PRINT) {
            *act = DP_ACT_PRINT;
            continue;
        }
        if (ch == '?' || ch == ':')
            return fail(err, cap, "unknown option or missing value: %s", argv[optind - 1]);
        /* Resources given as flags replace those of CUSHARE_DP_RESOURCES. */
        if (ch == O_RESOURCE && !flag_res) {
            c->nres = 0;
            flag_res = true;
        }
        const char *name = lo[0].name;
        for (size_t i = 0; i < NOPTS; i++)
            if ((int)opts[i].id == ch)
                name = opts[i].flag;
        if (set_opt(c, (enum opt_id)ch, name, optarg, err, cap) < 0)
            return -1;
    }
    if (optind < argc)
        return fail(err, cap, "unexpected argument: %s", argv[optind]);
    return 0;
}

/* ---- cross checks ---------------------------------------------------------------- */

static int check_sock_len(const char *dir, const char *name, char *err, size_t cap)
{
    if (strlen(dir) + 1 + strlen(name) > DP_SOCK_PATH_MAX)
        return fail(err, cap, "socket path %s/%s is longer than %d bytes", dir, name,
                    DP_SOCK_PATH_MAX);
    return 0;
}

static int check_resources(struct dp_config *c, char *err, size_t cap)
{
    bool memory = false, limit = false;
    for (size_t i = 0; i < c->nres; i++) {
        struct dp_resource *r = &c->res[i];
        if (r->kind == DP_KIND_SLOTS && !r->slots)
            r->slots = c->slots;
        if (r->kind == DP_KIND_MEMORY && !r->unit)
            r->unit = c->unit;
        memory |= r->kind == DP_KIND_MEMORY;
        limit |= r->mem_limit != 0;
        for (size_t j = 0; j < i; j++)
            if (!strcmp(c->res[j].name, r->name))
                return fail(err, cap, "resource %s given twice", r->name);
        if (check_sock_len(c->plugin_dir, r->endpoint, err, cap) < 0)
            return -1;
    }
    /* Both would set CUSHARE_MEM_LIMIT from two Allocate answers, and which
     * one the runtime keeps is not defined: refuse the combination. */
    if (memory && limit)
        return fail(err, cap, "a memory resource and a resource with mem-limit cannot be "
                              "combined (both set CUSHARE_MEM_LIMIT)");
    return 0;
}

int dp_config_finish(struct dp_config *c, char *err, size_t cap)
{
    if (c->nres == 0 && dp_config_add_resource(c, "gpu", err, cap) < 0)
        return -1;
    bool slots = false;
    for (size_t i = 0; i < c->nres; i++)
        slots |= c->res[i].kind == DP_KIND_SLOTS;
    if (!slots)
        return fail(err, cap, "at least one resource must be of kind slots (the GPU itself)");
    if (check_resources(c, err, cap) < 0)
        return -1;
    if (check_sock_len(c->plugin_dir, c->kubelet_sock, err, cap) < 0)
        return -1;
    if (strlen(c->pod_resources) > DP_SOCK_PATH_MAX)
        return fail(err, cap, "pod-resources socket %s is longer than %d bytes",
                    c->pod_resources, DP_SOCK_PATH_MAX);
    if (strlen(c->daemon_socket) > DP_SOCK_PATH_MAX)
        return fail(err, cap, "daemon socket %s is longer than %d bytes", c->daemon_socket,
                    DP_SOCK_PATH_MAX);
    if (!strcmp(c->daemon_socket, "/") || !strrchr(c->daemon_socket, '/')[1])
        return fail(err, cap, "daemon socket %s is not a file path", c->daemon_socket);
    return 0;
}

/* ---- printing ---------------------------------------------------------------------- */

static void print_resource(const struct dp_resource *r, FILE *f)
{
    char sz[32];
    fprintf(f, "resource        %s  endpoint=%s kind=%s", r->name, r->endpoint,
            r->kind == DP_KIND_SLOTS ? "slots" : "memory");
    if (r->kind == DP_KIND_SLOTS)
        fprintf(f, " slots=%u", r->slots);
    else
        fprintf(f, " unit=%s", cs_format_size(r->unit, sz, sizeof sz));
    if (r->priority >= 0)
        fprintf(f, " priority=%s", cs_priority_name(r->priority));
    if (r->weight)
        fprintf(f, " weight=%u", r->weight);
    if (r->mem_limit)
        fprintf(f, " mem-limit=%s", cs_format_size(r->mem_limit, sz, sizeof sz));
    fputc('\n', f);
}

void dp_config_print(const struct dp_config *c, FILE *f)
{
    fprintf(f, "plugin-dir      %s\nkubelet-socket  %s\nnvml            %s\n", c->plugin_dir,
            c->kubelet_sock, c->nvml_lib);
    fprintf(f, "lib             %s\ncontainer-lib   %s\ninstall-lib     %s\n", c->lib,
            c->lib_container, *c->install_lib ? c->install_lib : "(none)");
    fprintf(f, "socket          %s\ninject          %s\npreload-file    %s\n", c->daemon_socket,
            dp_inject_name(c->inject), c->preload_file);
    fprintf(f, "placement       %s\nrequire-daemon  %s\nprestart        %s\n",
            dp_placement_name(c->placement), c->require_daemon ? "on" : "off",
            c->prestart ? "on" : "off");
    fprintf(f, "endpoints       %s\n", c->endpoints ? "on" : "off");
    fprintf(f, "pod-resources   %s\npod-resources-timeout %u\n",
            c->pod_resources[0] ? c->pod_resources : "off", c->pod_resources_timeout_s);
    fprintf(f, "device-nodes    %s\nhealth-interval %u\nlog-level       %s\n",
            c->device_nodes ? "on" : "off", c->health_ms,
            (const char *[]){"error", "warn", "info", "debug"}[c->log_level]);
    for (size_t i = 0; i < c->nres; i++)
        print_resource(&c->res[i], f);
}

void dp_config_usage(FILE *f)
{
    fputs(
        "usage: cushare-device-plugin [options]\n"
        "Advertises shares of this node's GPUs to the kubelet (device plugin API v1beta1)\n"
        "and runs the containers that get one under libcushare.so. Each option has an\n"
        "environment variable (in brackets); a flag wins over its variable.\n"
        "\n"
        "  --resource SPEC       a resource to advertise, repeatable [CUSHARE_DP_RESOURCES,\n"
        "                        ';'-separated]. SPEC = NAME[:key=value,...]; NAME without\n"
        "                        a domain gets " DP_DOMAIN "/. Keys: kind=slots|memory,\n"
        "                        slots=N (IDs per GPU), priority=high|normal|low, weight=N,\n"
        "                        mem-limit=SIZE (set in the container), unit=SIZE (memory:\n"
        "                        bytes per ID). Default: gpu\n"
        "  --slots N             IDs per GPU of slots resources without slots= (4)\n"
        "                        [CUSHARE_DP_SLOTS]\n"
        "  --memory-unit SIZE    bytes per ID of memory resources without unit= (1G)\n"
        "                        [CUSHARE_DP_MEMORY_UNIT]\n"
        "  --plugin-dir DIR      the kubelet's device-plugins directory\n"
        "                        (/var/lib/kubelet/device-plugins) [CUSHARE_DP_PLUGIN_DIR]\n"
        "  --kubelet-socket NAME its registration socket in DIR (kubelet.sock)\n"
        "                        [CUSHARE_DP_KUBELET_SOCKET]\n"
        "  --nvml LIB            NVML to dlopen (libnvidia-ml.so.1) [CUSHARE_DP_NVML]\n"
        "  --lib PATH            libcushare.so on the host (/var/lib/cushare/lib/libcushare.so)\n"
        "                        [CUSHARE_DP_LIB]\n"
        "  --container-lib PATH  where containers see it (/usr/local/lib/cushare/libcushare.so)\n"
        "                        [CUSHARE_DP_CONTAINER_LIB]\n"
        "  --install-lib SRC     copy SRC to --lib at start (atomically) [CUSHARE_DP_INSTALL_LIB]\n"
        "  --socket PATH         cushared's socket (/run/cushare/cushared.sock); containers\n"
        "                        see their endpoint's socket at this path [CUSHARE_SOCKET]\n"
        "  --endpoints B         each container of a slots resource gets its own cushared\n"
        "                        endpoint, which caps what it may claim, instead of the\n"
        "                        daemon's socket (on; off is not safe with untrusted pods)\n"
        "                        [CUSHARE_DP_ENDPOINTS]\n"
        "  --pod-resources PATH  the kubelet's pod-resources socket, asked which pod holds\n"
        "                        each endpoint, which cushared then shows (pod, namespace\n"
        "                        and container labels); off: endpoints name no pod\n"
        "                        (" DP_PODRES_DEFAULT ")\n"
        "                        [CUSHARE_DP_POD_RESOURCES]\n"
        "  --pod-resources-timeout S  how long after Allocate to look for the pod (60)\n"
        "                        [CUSHARE_DP_POD_RESOURCES_TIMEOUT]\n"
        "  --inject MODE         env: LD_PRELOAD; preload: mount a file at /etc/ld.so.preload;\n"
        "                        none: mount the library only (env) [CUSHARE_DP_INJECT]\n"
        "  --preload-file PATH   host file written for --inject preload\n"
        "                        (/var/lib/cushare/ld.so.preload) [CUSHARE_DP_PRELOAD_FILE]\n"
        "  --placement P         spread|pack: GetPreferredAllocation's choice of GPU (spread)\n"
        "                        [CUSHARE_DP_PLACEMENT]\n"
        "  --require-daemon B    containers wait for cushared (CUSHARE_REQUIRE_DAEMON=1) (on)\n"
        "                        [CUSHARE_DP_REQUIRE_DAEMON]\n"
        "  --prestart B          PreStartContainer refuses an unhealthy GPU or, with\n"
        "                        --require-daemon, a daemon that does not answer (on)\n"
        "                        [CUSHARE_DP_PRESTART]\n"
        "  --device-nodes B      add /dev/nvidia* device specs to Allocate (off)\n"
        "                        [CUSHARE_DP_DEVICE_NODES]\n"
        "  --health-interval MS  GPU health check period (5000) [CUSHARE_DP_HEALTH_INTERVAL_MS]\n"
        "  --sysfs DIR           sysfs root for NUMA nodes (/sys) [CUSHARE_DP_SYSFS]\n"
        "  --log-level L         error|warn|info|debug (info) [CUSHARE_DP_LOG_LEVEL]\n"
        "  --print-config        print the effective settings and exit\n"
        "  -h, --help            this text\n"
        "Exit status: 0 after SIGTERM/SIGINT, 1 a start-up error (no NVML, no GPU, bad\n"
        "settings), 2 a usage error.\n",
        f);
}
