/* nvml.h: NVML (libnvidia-ml.so.1) loaded at run time, for the device plugin
 * and the daemon alike.
 *
 * The library comes with the driver, not with us: it is dlopen()ed so that
 * a program starts (and says clearly why NVML cannot be used) on a node
 * without it. Every entry point is resolved by trying its versioned names
 * newest first (nvmlInit_v2, then nvmlInit; nvmlDeviceGetHandleByUUID_v2,
 * then nvmlDeviceGetHandleByUUID, ...), so an older or newer driver that
 * lacks one version costs nothing; only the few without which nothing works
 * are required. The few types used are declared here (their layouts are
 * part of NVML's stable ABI), so neither the build nor the node needs
 * nvml.h. One loaded library per process (cs_nvml). */
#ifndef CS_NVML_H
#define CS_NVML_H

#include <stddef.h>
#include <stdint.h>

typedef int cs_nvml_ret;
typedef struct cs_nvml_device_st *cs_nvml_device;
typedef struct cs_nvml_evset_st *cs_nvml_evset;
typedef struct {
    unsigned long long total, free, used;
} cs_nvml_memory;
/* nvmlPciInfo_t as filled by nvmlDeviceGetPciInfo_v2 and _v3 (the v1 call
 * had another layout and is not used). */
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} cs_nvml_pci;
/* nvmlEventData_t of nvmlEventSetWait_v2; the v1 call fills a prefix. */
typedef struct {
    cs_nvml_device device;
    unsigned long long eventType, eventData;
    unsigned int gpuInstanceId, computeInstanceId;
} cs_nvml_event;

/* One process of a GPU's compute list: nvmlProcessInfo_v1_t's fields. */
typedef struct {
    uint32_t pid;
    uint64_t used; /* bytes the driver charges it on that GPU */
} cs_nvml_proc;

#define CS_NVML_SUCCESS 0
#define CS_NVML_ERROR_NOT_SUPPORTED 3
#define CS_NVML_ERROR_GPU_IS_LOST 15
#define CS_NVML_EVENT_XID_CRITICAL 0x8ull
#define CS_NVML_UUID_LEN 96

/* The entry points; optional ones are NULL when the library lacks them. */
struct cs_nvml {
    void *dl;
    cs_nvml_ret (*init)(void);
    cs_nvml_ret (*shutdown)(void);
    const char *(*error_string)(cs_nvml_ret);
    cs_nvml_ret (*count)(unsigned int *);
    cs_nvml_ret (*by_index)(unsigned int, cs_nvml_device *);
    cs_nvml_ret (*by_uuid)(const char *, cs_nvml_device *);
    cs_nvml_ret (*uuid)(cs_nvml_device, char *, unsigned int);
    cs_nvml_ret (*name)(cs_nvml_device, char *, unsigned int);
    cs_nvml_ret (*memory)(cs_nvml_device, cs_nvml_memory *);
    cs_nvml_ret (*minor)(cs_nvml_device, unsigned int *);
    cs_nvml_ret (*pci)(cs_nvml_device, cs_nvml_pci *);
    cs_nvml_ret (*driver_version)(char *, unsigned int);
    cs_nvml_ret (*ev_create)(cs_nvml_evset *);
    cs_nvml_ret (*ev_register)(cs_nvml_device, unsigned long long, cs_nvml_evset);
    cs_nvml_ret (*ev_supported)(cs_nvml_device, unsigned long long *);
    cs_nvml_ret (*ev_wait)(cs_nvml_evset, cs_nvml_event *, unsigned int);
    cs_nvml_ret (*ev_free)(cs_nvml_evset);
    /* nvmlDeviceGetComputeRunningProcesses_v3/_v2 (nvmlProcessInfo_t: pid,
     * used, two instance ids) or the v1 call (pid, used): cs_nvml_procs. */
    cs_nvml_ret (*procs)(cs_nvml_device, unsigned int *, void *);
};
extern struct cs_nvml cs_nvml;

/* dlopen + resolve + nvmlInit. 0, or -1 with the reason in err. */
int cs_nvml_open(const char *lib, char *err, size_t cap);
/* GPU idx: its handle, UUID text ("GPU-...") and memory size. 0, or -1
 * with the reason in err. */
int cs_nvml_describe(unsigned idx, cs_nvml_device *h, char *uuid, size_t ucap,
                     uint64_t *mem_total, char *err, size_t cap);
/* The compute processes on h and the memory the driver charges each, into
 * out (at most cap; more are left out). *n: how many were filled. 0, or
 * the NVML error (NOT_SUPPORTED when the library lacks the call). A used
 * figure NVML does not know (NVML_VALUE_NOT_AVAILABLE) is UINT64_MAX. */
cs_nvml_ret cs_nvml_procs(cs_nvml_device h, cs_nvml_proc *out, unsigned cap, unsigned *n);
/* NVML's text for a return code. */
const char *cs_nvml_err(cs_nvml_ret r);
/* Which name an entry point resolved to (NULL: none), by its newest name. */
const char *cs_nvml_resolved(const char *base);
/* nvmlShutdown + dlclose; no-op when not open. */
void cs_nvml_close(void);

#endif
