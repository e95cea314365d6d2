/* nvml.c: see nvml.h. */
#include "common/nvml.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"

struct cs_nvml cs_nvml;

/* Names tried in order, newest first. */
struct nv_sym {
    const char *names[4];
    void **slot;
    bool required;
};

#define SLOT(f) ((void **)(void *)&cs_nvml.f)
static const struct nv_sym nv_syms[] = {
    {{"nvmlInit_v2", "nvmlInit"}, SLOT(init), true},
    {{"nvmlShutdown"}, SLOT(shutdown), true},
    {{"nvmlErrorString"}, SLOT(error_string), false},
    {{"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}, SLOT(count), true},
    {{"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"}, SLOT(by_index), true},
    {{"nvmlDeviceGetHandleByUUID_v2", "nvmlDeviceGetHandleByUUID"}, SLOT(by_uuid), false},
    {{"nvmlDeviceGetUUID"}, SLOT(uuid), true},
    {{"nvmlDeviceGetName"}, SLOT(name), false},
    {{"nvmlDeviceGetMemoryInfo"}, SLOT(memory), true},
    {{"nvmlDeviceGetMinorNumber"}, SLOT(minor), false},
    {{"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2"}, SLOT(pci), false},
    {{"nvmlSystemGetDriverVersion"}, SLOT(driver_version), false},
    {{"nvmlEventSetCreate"}, SLOT(ev_create), false},
    {{"nvmlDeviceRegisterEvents"}, SLOT(ev_register), false},
    {{"nvmlDeviceGetSupportedEventTypes"}, SLOT(ev_supported), false},
    {{"nvmlEventSetWait_v2", "nvmlEventSetWait"}, SLOT(ev_wait), false},
    {{"nvmlEventSetFree"}, SLOT(ev_free), false},
    {{"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
      "nvmlDeviceGetComputeRunningProcesses"},
     SLOT(procs),
     false},
};
#define NSYMS (sizeof nv_syms / sizeof nv_syms[0])
/* Which name each entry resolved to (NULL: none). */
static const char *nv_found[NSYMS];

const char *cs_nvml_err(cs_nvml_ret r)
{
    static __thread char buf[32];
    if (cs_nvml.error_string)
        return cs_nvml.error_string(r);
    snprintf(buf, sizeof buf, "NVML error %d", r);
    return buf;
}

static int resolve(char *err, size_t cap)
{
    for (size_t i = 0; i < NSYMS; i++) {
        *nv_syms[i].slot = NULL;
        nv_found[i] = NULL;
        for (const char *const *n = nv_syms[i].names; *n && !*nv_syms[i].slot; n++)
            if ((*nv_syms[i].slot = dlsym(cs_nvml.dl, *n)))
                nv_found[i] = *n;
        if (!*nv_syms[i].slot && nv_syms[i].required) {
            snprintf(err, cap, "NVML has no %s: the library is not NVML or is too old",
                     nv_syms[i].names[0]);
            return -1;
        }
        if (nv_found[i] && nv_found[i] != nv_syms[i].names[0])
            cs_info("NVML: %s not found, using %s", nv_syms[i].names[0], nv_found[i]);
    }
    return 0;
}

const char *cs_nvml_resolved(const char *base)
{
    for (size_t i = 0; i < NSYMS; i++)
        for (const char *const *n = nv_syms[i].names; *n; n++)
            if (!strcmp(*n, base))
                return nv_found[i];
    return NULL;
}

int cs_nvml_open(const char *lib, char *err, size_t cap)
{
    dlerror();
    cs_nvml.dl = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!cs_nvml.dl) {
        snprintf(err, cap, "NVML not found: dlopen(%s): %s. Is the NVIDIA driver installed "
                 "and its library visible here (in Kubernetes: the NVIDIA container runtime, "
                 "or the driver's library directory mounted and on LD_LIBRARY_PATH)?",
                 lib, dlerror());
        return -1;
    }
    if (resolve(err, cap) < 0)
        goto fail;
    cs_nvml_ret r = cs_nvml.init();
    if (r != CS_NVML_SUCCESS) {
        snprintf(err, cap, "nvmlInit failed: %s (is the NVIDIA kernel driver loaded?)",
                 cs_nvml_err(r));
        goto fail;
    }
    char ver[96] = "unknown";
    if (cs_nvml.driver_version)
        cs_nvml.driver_version(ver, sizeof ver);
    cs_info("NVML loaded from %s, driver %s", lib, ver);
    return 0;
fail:
    dlclose(cs_nvml.dl);
    memset(&cs_nvml, 0, sizeof cs_nvml);
    return -1;
}

int cs_nvml_describe(unsigned idx, cs_nvml_device *h, char *uuid, size_t ucap,
                     uint64_t *mem_total, char *err, size_t cap)
{
    char u[CS_NVML_UUID_LEN] = "";
    cs_nvml_memory mem = {0, 0, 0};
    cs_nvml_ret r = cs_nvml.by_index(idx, h);
    if (r == CS_NVML_SUCCESS)
        r = cs_nvml.uuid(*h, u, sizeof u);
    if (r == CS_NVML_SUCCESS)
        r = cs_nvml.memory(*h, &mem);
    if (r != CS_NVML_SUCCESS) {
        snprintf(err, cap, "GPU %u: %s", idx, cs_nvml_err(r));
        return -1;
    }
    cs_strlcpy(uuid, u, ucap);
    *mem_total = mem.total;
    return 0;
}

/* The two layouts the calls fill: v1 (pid, used) and v2/v3 (pid, used,
 * gpuInstanceId, computeInstanceId). */
struct nv_proc_v1 {
    unsigned int pid;
    unsigned long long used;
};
struct nv_proc_v2 {
    unsigned int pid;
    unsigned long long used;
    unsigned int gi, ci;
};
#define NV_PROCS_MAX 256

cs_nvml_ret cs_nvml_procs(cs_nvml_device h, cs_nvml_proc *out, unsigned cap, unsigned *n)
{
    *n = 0;
    if (!cs_nvml.procs)
        return CS_NVML_ERROR_NOT_SUPPORTED;
    const char *name = cs_nvml_resolved("nvmlDeviceGetComputeRunningProcesses_v3");
    bool v1 = name && strcmp(name, "nvmlDeviceGetComputeRunningProcesses") == 0;
    /* Room for the v2 layout, the larger: a list longer than this answers
     * INSUFFICIENT_SIZE and is read no further (a node of 256 processes on
     * one GPU is far past what cushare plans for anyway). */
    struct nv_proc_v2 buf[NV_PROCS_MAX];
    unsigned int k = NV_PROCS_MAX;
    cs_nvml_ret r = cs_nvml.procs(h, &k, buf);
    if (r != CS_NVML_SUCCESS)
        return r;
    if (k > NV_PROCS_MAX)
        k = NV_PROCS_MAX;
    for (unsigned i = 0; i < k && *n < cap; i++) {
        unsigned long long used = v1 ? ((struct nv_proc_v1 *)(void *)buf)[i].used : buf[i].used;
        unsigned int pid = v1 ? ((struct nv_proc_v1 *)(void *)buf)[i].pid : buf[i].pid;
        out[(*n)++] = (cs_nvml_proc){pid, used == ~0ull ? UINT64_MAX : (uint64_t)used};
    }
    return CS_NVML_SUCCESS;
}

void cs_nvml_close(void)
{
    if (!cs_nvml.dl)
        return;
    cs_nvml.shutdown();
    dlclose(cs_nvml.dl);
    memset(&cs_nvml, 0, sizeof cs_nvml);
}
