/* nvml.h: NVML's memory and process calls answered for the job (nvml.c).
 *
 * The wrappers are exported under NVML's own names (the version script's
 * nvml* pattern), for programs linked against libnvidia-ml.so.1; programs
 * that dlopen it reach them through the dlsym override (hooks_dlsym.c),
 * which hands every nvml* answer to cs_nvml_map.
 */
#ifndef CS_HOOK_NVML_H
#define CS_HOOK_NVML_H

struct nvml_memory;
struct nvml_memory_v2;
struct nvml_util_sample;

/* dlsym's answer p for name: the wrapper if nvml.c answers for that name
 * (remembering p as the library's definition), else p. Any thread. */
void *cs_nvml_map(const char *name, void *p);

/* The wrappers (NVML's prototypes, with its structures as void *). */
int nvmlDeviceGetMemoryInfo(void *dev, struct nvml_memory *m);
int nvmlDeviceGetMemoryInfo_v2(void *dev, struct nvml_memory_v2 *m);
int nvmlDeviceGetComputeRunningProcesses(void *dev, unsigned *count, void *infos);
int nvmlDeviceGetComputeRunningProcesses_v2(void *dev, unsigned *count, void *infos);
int nvmlDeviceGetComputeRunningProcesses_v3(void *dev, unsigned *count, void *infos);
int nvmlDeviceGetGraphicsRunningProcesses(void *dev, unsigned *count, void *infos);
int nvmlDeviceGetGraphicsRunningProcesses_v2(void *dev, unsigned *count, void *infos);
int nvmlDeviceGetGraphicsRunningProcesses_v3(void *dev, unsigned *count, void *infos);
int nvmlDeviceGetMPSComputeRunningProcesses(void *dev, unsigned *count, void *infos);
int nvmlDeviceGetMPSComputeRunningProcesses_v2(void *dev, unsigned *count, void *infos);
int nvmlDeviceGetMPSComputeRunningProcesses_v3(void *dev, unsigned *count, void *infos);
int nvmlDeviceGetProcessUtilization(void *dev, struct nvml_util_sample *s, unsigned *count,
                                    unsigned long long last);
int nvmlDeviceGetRunningProcessDetailList(void *dev, void *plist);
int nvmlDeviceGetProcessesUtilizationInfo(void *dev, void *info);
int nvmlDeviceGetAccountingPids(void *dev, unsigned *count, unsigned *pids);
int nvmlDeviceGetAccountingStats(void *dev, unsigned pid, void *stats);
int nvmlInternalGetExportTable(const void **table, const void *id);

#endif
