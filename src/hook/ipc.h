/* ipc.h: CUDA IPC for swappable memory.
 *
 * A legacy IPC handle (cuIpcGetMemHandle) can only name memory the driver
 * allocated with cuMemAlloc, and every swappable allocation is VMM memory
 * (seg.h). So cushare exports such memory itself:
 *
 *   exporter  cuIpcGetMemHandle on one of our allocations waits for the
 *             lease (the memory must be on the GPU), marks the allocation's
 *             segment unswappable for the rest of its life (the importer
 *             maps the physical memory, which must then never move), and
 *             exports a POSIX file descriptor for it (one per part, for
 *             an allocation made of parts: seg.h). The 64-byte handle
 *             names the exporting process, a random key for the export,
 *             the allocation's offset in its segment and the parts' size.
 *             A thread of the
 *             exporter serves descriptors for keys on an abstract Unix
 *             socket named after the process, to processes of the same
 *             user only (SO_PEERCRED).
 *   importer  cuIpcOpenMemHandle with such a handle fetches the descriptor
 *             of each part (SCM_RIGHTS, one request each), imports them,
 *             maps them side by side at a fresh range with access for the
 *             current device, and returns the
 *             allocation's address in it. Opening the same export again
 *             counts a reference, as the driver does; cuIpcCloseMemHandle
 *             unmaps at the last one.
 *
 * Handles the driver made itself (CUSHARE_SWAP=off, pool memory) pass
 * through untouched both ways. Both ends must run under cushare, and share
 * a network namespace (abstract sockets live there): a pod's containers
 * do, as do the processes torch.multiprocessing starts.
 *
 * Locking (locks.h): exp_mu guards the export table and is taken inside a device's
 * segs.mu (registering an export), never around it; imp_mu guards the
 * import table and is held across an import's request, so never while
 * exp_mu is wanted by the same thread.
 */
#ifndef CS_HOOK_IPC_H
#define CS_HOOK_IPC_H

#include "hook/hook.h"

#include <stdbool.h>
#include <stdint.h>

/* cuIpcGetMemHandle for dptr inside one of our allocations (base, size and
 * device as cs_seg_lookup found them). The caller is inside the device's
 * gate: the memory is on the GPU, and no revoke can move it meanwhile. */
CUresult cs_ipc_export(CUipcMemHandle *out, CUdeviceptr dptr, CUdeviceptr base, int dev);

/* Registers the exported descriptors of an allocation of `size` bytes made
 * of n parts of `part` bytes (the last one the rest; n = 1, part = size for
 * one segment), in address order (ownership passes to ipc.c); returns its
 * key, or 0 if out of memory (the descriptors are then closed). Called
 * under the segment's segs.mu. */
uint64_t cs_ipc_register(const int *fds, size_t n, uint64_t part, uint64_t size);
/* The segment is gone: its descriptor is closed, later requests refused. */
void cs_ipc_unregister(uint64_t key);

/* True if h was made by cs_ipc_export (in any process). */
bool cs_ipc_is_ours(const CUipcMemHandle *h);
CUresult cs_ipc_open(CUdeviceptr *out, const CUipcMemHandle *h, unsigned int flags);
/* cuIpcCloseMemHandle: false if ptr was not opened by cs_ipc_open. */
bool cs_ipc_close(CUdeviceptr ptr, CUresult *r);

void cs_ipc_reset_after_fork(void);

#endif
