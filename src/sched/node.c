/* node.c: see node.h. */
#include "sched/node.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/nvml.h"

/* ---- the `gpus` setting --------------------------------------------------- */

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* Adds a GPU unless it is already there or the table is full. */
static int node_add(struct sd_node *n, const uint8_t *uuid, uint64_t mem, char *err, size_t cap)
{
    char txt[CS_UUID_STR_LEN];
    cs_uuid_format(uuid, txt);
    if (sd_node_find(n, uuid) >= 0) {
        snprintf(err, cap, "%s is listed twice", txt);
        return -1;
    }
    if (n->n == SD_NODE_MAX_GPUS) {
        snprintf(err, cap, "more than %d GPUs", SD_NODE_MAX_GPUS);
        return -1;
    }
    memcpy(n->gpu[n->n].uuid, uuid, CS_UUID_LEN);
    n->gpu[n->n].mem_total = mem;
    n->n++;
    return 0;
}

static int parse_item(char *item, struct sd_node *out, char *err, size_t cap)
{
    char *colon = strchr(item, ':');
    uint64_t mem = 0;
    if (colon) {
        *colon = '\0';
        char *size = trim(colon + 1);
        if (cs_parse_size(size, &mem) < 0 || mem == 0) {
            snprintf(err, cap, "'%s' is not a memory size (e.g. 80G)", size);
            return -1;
        }
    }
    uint8_t uuid[CS_UUID_LEN];
    item = trim(item);
    if (cs_uuid_parse(item, uuid) < 0) {
        snprintf(err, cap, "'%s' is not a GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)",
                 item);
        return -1;
    }
    return node_add(out, uuid, mem, err, cap);
}

int sd_node_parse(const char *spec, struct sd_node *out, char *err, size_t cap)
{
    memset(out, 0, sizeof *out);
    out->source = "none";
    char buf[SD_GPUS_LEN];
    if (strlen(spec) >= sizeof buf) {
        snprintf(err, cap, "longer than %d characters", SD_GPUS_LEN - 1);
        return -1;
    }
    cs_strlcpy(buf, spec, sizeof buf);
    char *s = trim(buf);
    if (strcasecmp(s, "auto") == 0)
        return 1;
    char *save = NULL;
    /* Empty items are skipped: a list split over lines may end one with a
     * comma. */
    for (char *item = strtok_r(s, ",", &save); item; item = strtok_r(NULL, ",", &save))
        if (*trim(item) && parse_item(item, out, err, cap) < 0)
            return -1;
    if (out->n == 0) {
        snprintf(err, cap, "no GPU listed (use auto to discover them)");
        return -1;
    }
    out->source = "config";
    return 0;
}

/* ---- discovery --------------------------------------------------------------- */

static bool from_nvml(struct sd_node *out, const char *lib)
{
    char err[512];
    if (cs_nvml_open(lib, err, sizeof err) < 0) {
        cs_info("GPU discovery: %s", err);
        return false;
    }
    unsigned count = 0;
    cs_nvml_ret r = cs_nvml.count(&count);
    if (r != CS_NVML_SUCCESS)
        cs_warn("GPU discovery: nvmlDeviceGetCount: %s", cs_nvml_err(r));
    for (unsigned i = 0; r == CS_NVML_SUCCESS && i < count; i++) {
        cs_nvml_device h;
        char txt[CS_NVML_UUID_LEN] = "?";
        uint64_t mem = 0;
        uint8_t uuid[CS_UUID_LEN];
        err[0] = '\0';
        if (cs_nvml_describe(i, &h, txt, sizeof txt, &mem, err, sizeof err) < 0 ||
            cs_uuid_parse(txt, uuid) < 0 || node_add(out, uuid, mem, err, sizeof err) < 0) {
            if (err[0] == '\0')
                snprintf(err, sizeof err, "not a GPU UUID");
            cs_warn("GPU discovery: NVML GPU %u (%s) left out: %s", i, txt, err);
        }
    }
    cs_nvml_close();
    if (out->n)
        out->source = "NVML";
    return out->n > 0;
}

/* The driver API's few types, so that the daemon needs no cuda.h. */
typedef int (*cu_init_fn)(unsigned);
typedef int (*cu_count_fn)(int *);
typedef int (*cu_get_fn)(int *, int);
typedef int (*cu_uuid_fn)(uint8_t *, int);
typedef int (*cu_mem_fn)(size_t *, int);

struct cu_api {
    cu_init_fn init;
    cu_count_fn count;
    cu_get_fn get;
    cu_uuid_fn uuid;
    cu_mem_fn mem;
};

static bool cu_resolve(void *dl, struct cu_api *cu)
{
    *(void **)&cu->init = dlsym(dl, "cuInit");
    *(void **)&cu->count = dlsym(dl, "cuDeviceGetCount");
    *(void **)&cu->get = dlsym(dl, "cuDeviceGet");
    *(void **)&cu->uuid = dlsym(dl, "cuDeviceGetUuid_v2");
    if (!cu->uuid)
        *(void **)&cu->uuid = dlsym(dl, "cuDeviceGetUuid");
    *(void **)&cu->mem = dlsym(dl, "cuDeviceTotalMem_v2");
    return cu->init && cu->count && cu->get && cu->uuid && cu->mem;
}

static bool from_driver(struct sd_node *out, const char *lib)
{
    /* Never dlclose()d: a driver that was initialized may have started
     * threads of its own. cuInit makes no context and takes no memory. */
    void *dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    struct cu_api cu;
    if (!dl || !cu_resolve(dl, &cu)) {
        cs_info("GPU discovery: no CUDA driver: %s", dl ? "entry points missing" : dlerror());
        return false;
    }
    int count = 0, r = cu.init(0);
    if (r == 0)
        r = cu.count(&count);
    if (r != 0) {
        cs_info("GPU discovery: the CUDA driver finds no GPU (CUresult %d)", r);
        return false;
    }
    for (int i = 0; i < count; i++) {
        int dev = -1;
        size_t mem = 0;
        uint8_t uuid[CS_UUID_LEN];
        char err[128];
        if ((r = cu.get(&dev, i)) != 0 || (r = cu.uuid(uuid, dev)) != 0 ||
            (r = cu.mem(&mem, dev)) != 0) {
            cs_warn("GPU discovery: CUDA device %d left out: CUresult %d", i, r);
            continue;
        }
        if (node_add(out, uuid, mem, err, sizeof err) < 0)
            cs_warn("GPU discovery: CUDA device %d left out: %s", i, err);
    }
    if (out->n)
        out->source = "driver";
    return out->n > 0;
}

void sd_node_discover(struct sd_node *out, const struct sd_node_libs *libs)
{
    memset(out, 0, sizeof *out);
    out->source = "none";
    const char *nvml = libs && libs->nvml ? libs->nvml : "libnvidia-ml.so.1";
    const char *cuda = libs && libs->cuda ? libs->cuda : "libcuda.so.1";
    if (!from_nvml(out, nvml)) {
        memset(out, 0, sizeof *out);
        out->source = "none";
        from_driver(out, cuda);
    }
}

int sd_node_init(struct sd_node *out, const char *spec, char *err, size_t cap)
{
    int rc = sd_node_parse(spec, out, err, cap);
    if (rc < 0)
        return -1;
    if (rc == 1)
        sd_node_discover(out, NULL);
    sd_node_log(out);
    return 0;
}

int sd_node_find(const struct sd_node *n, const uint8_t uuid[CS_UUID_LEN])
{
    for (size_t i = 0; i < n->n; i++)
        if (memcmp(n->gpu[i].uuid, uuid, CS_UUID_LEN) == 0)
            return (int)i;
    return -1;
}

void sd_node_log(const struct sd_node *n)
{
    if (n->n == 0) {
        cs_warn("no GPU found on this node (gpus = auto: neither NVML nor the CUDA driver "
                "reports one): every client's ATTACH will be refused; list them with "
                "gpus = GPU-<uuid>:<size>,... if discovery cannot work here");
        return;
    }
    cs_info("%zu GPU(s) of this node, from %s:", n->n, n->source);
    for (size_t i = 0; i < n->n; i++) {
        char txt[CS_UUID_STR_LEN], mem[32];
        cs_uuid_format(n->gpu[i].uuid, txt);
        cs_info("  GPU %zu: %s, %s", i, txt,
                n->gpu[i].mem_total ? cs_format_size(n->gpu[i].mem_total, mem, sizeof mem)
                                    : "memory size unknown (no memory planning)");
    }
}
