/* meter.h: the driver's own figure of what each process holds on each GPU
 * (issue 21), read through NVML by a thread of its own.
 *
 * A client's USAGE tells what its allocations hold. The driver charges a
 * process more: its CUDA context (524 MiB on an H100 with CUDA 13, driver
 * 580), the modules its libraries load, cuBLAS and cuDNN workspaces made
 * before the hook saw them. The memory model must leave room for that or
 * clients run into ROOM and OUT_OF_MEMORY; a fixed client_reserve_mb is
 * either wrong for the GPU or wasted. NVML's compute-process list gives the
 * driver's figure per pid (nvmlDeviceGetComputeRunningProcesses); the
 * daemon knows each client's pid from SO_PEERCRED (in the host's pid
 * namespace under Kubernetes: hostPID), so it measures each client's
 * overhead itself instead of taking anyone's word for it (mem.c,
 * sd_policy_measured).
 *
 * NVML calls can block (a GPU in trouble answers after seconds), so they
 * run on this thread, never on the loop: it samples every GPU every
 * interval, posts the sample in a slot and makes an eventfd readable; the
 * loop takes it (sd_meter_take) when the descriptor fires.
 *
 * Threads and ownership:
 *   - the process-wide cs_nvml library (common/nvml.c) is opened by
 *     sd_meter_start and, from then until sd_meter_stop closes it, called
 *     by the meter's thread only (node.c's discovery has closed it before);
 *   - mu (struct sd_meter) guards the slot (the posted sample and whether
 *     it waits), the eventfd's count and the stop flag; held for a copy of
 *     the sample and one eventfd write or read, never across an NVML call;
 *   - the GPU handles, their UUIDs and the interval are written before the
 *     thread exists and only read afterwards.
 */
#ifndef SD_METER_H
#define SD_METER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/proto.h"
#include "sched/node.h"

#define SD_METER_PROCS 64 /* processes read per GPU; more are left out */

struct sd_meter; /* one per daemon */

/* One GPU's compute processes as the driver counts them. */
struct sd_meter_gpu {
    uint8_t uuid[CS_UUID_LEN];
    bool ok;           /* the list was read (else: err) */
    int err;           /* NVML's return code when !ok */
    uint32_t n;
    uint32_t pid[SD_METER_PROCS];
    uint64_t used[SD_METER_PROCS]; /* bytes; UINT64_MAX: NVML does not know */
};

struct sd_meter_sample {
    uint32_t ngpu;
    struct sd_meter_gpu gpu[SD_NODE_MAX_GPUS];
};

/* Opens NVML (nvml_lib, NULL for "libnvidia-ml.so.1"), finds its GPUs and
 * checks that it has the process-list call, then starts the thread, which
 * samples every interval_ms. 0, or -1 with the reason in err (no NVML, no
 * GPU, no process list): the daemon then plans with client_reserve_mb
 * alone. Signals are blocked in the thread. */
int sd_meter_start(struct sd_meter **out, const char *nvml_lib, uint32_t interval_ms, char *err,
                   size_t cap);

/* Readable (EPOLLIN) while a sample waits to be taken. */
int sd_meter_fd(const struct sd_meter *m);

/* The waiting sample into *out: true, or false when none waits. */
bool sd_meter_take(struct sd_meter *m, struct sd_meter_sample *out);

/* Stops and joins the thread, closes NVML and frees m (NULL: no-op). */
void sd_meter_stop(struct sd_meter *m);

#endif
