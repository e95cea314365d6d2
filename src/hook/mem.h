/* mem.h: device memory tracking and the per-GPU quota.
 *
 * Every device allocation the application makes through a tracked entry
 * point is recorded (pointer, handle or array -> size, device), so that the
 * scheduler knows each job's footprint, CUSHARE_MEM_LIMIT can be enforced
 * with a clear error, and cuMemGetInfo/cuDeviceTotalMem can show the job its
 * quota instead of the whole card.
 */
#ifndef CS_HOOK_MEM_H
#define CS_HOOK_MEM_H

#include "hook/device.h"

/* What a recorded key is: pointers and handles live in one table. */
enum cs_mem_ns {
    CS_MEM_PTR = 1,    /* a device pointer (cuMemAlloc*, managed, async) */
    CS_MEM_HANDLE = 2, /* a cuMemCreate handle */
    CS_MEM_ARRAY = 3,  /* a CUarray / CUmipmappedArray */
    CS_MEM_SEG = 4,    /* a pointer into a swappable segment (seg.h) */
    CS_MEM_VMM = 5,    /* a virtual cuMemCreate handle, swappable (vmm.h) */
};

/* The job's per-GPU quota: the smaller of CUSHARE_MEM_LIMIT and the
 * limit the scheduler granted (TERMS), 0 = none. Read on allocation paths
 * and by cuMemGetInfo/cuDeviceTotalMem, never on the launch path. */
uint64_t cs_mem_limit(void);
/* The scheduler's granted limit (0 = none), set on each handshake: from
 * TERMS, or 0 on a connection to a daemon that sends none. Any thread. */
void cs_mem_set_granted(uint64_t bytes);

/* Charges bytes to d's quota. CUDA_SUCCESS, or CUDA_ERROR_OUT_OF_MEMORY
 * with one log line saying which limit was hit. */
CUresult cs_mem_charge(struct cs_dev *d, uint64_t bytes, const char *what);
void cs_mem_uncharge(struct cs_dev *d, uint64_t bytes);

/* Records an allocation already charged to device ordinal dev. ctx is the
 * context that owns it (NULL for cuMemCreate handles, which outlive
 * contexts): destroying that context frees it with everything else. */
void cs_mem_record(enum cs_mem_ns ns, uintptr_t key, uint64_t bytes, int dev, CUcontext ctx);
/* Removes a record: its size and device, or false if it was never
 * recorded (allocated before tracking, or not a device allocation). */
bool cs_mem_forget(enum cs_mem_ns ns, uintptr_t key, uint64_t *bytes, int *dev);
/* Looks a record up without removing it; ctx may be NULL. */
bool cs_mem_find(enum cs_mem_ns ns, uintptr_t key, uint64_t *bytes, int *dev);
bool cs_mem_find_ctx(enum cs_mem_ns ns, uintptr_t key, uint64_t *bytes, int *dev,
                     CUcontext *ctx);

/* Frees a recorded allocation's charge (record + quota) in one step. */
void cs_mem_release(enum cs_mem_ns ns, uintptr_t key);

/* The driver freed everything a context owned (destroy, primary reset). */
void cs_mem_release_ctx(CUcontext ctx);

/* The quota view of free/total for device d. */
void cs_mem_view(struct cs_dev *d, size_t *free_bytes, size_t *total_bytes);

void cs_mem_fill_usage(struct cs_dev *d, struct cs_msg_usage *u);

void cs_mem_reset_after_fork(void);

#endif
