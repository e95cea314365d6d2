/* vmm.h: the application's own VMM memory (cuMemCreate + cuMemMap), made
 * swappable.
 *
 * Swapping releases physical memory and creates it anew, so the driver's
 * handle for it changes; the application must keep one that stays valid.
 * cuMemCreate of device memory therefore returns a *virtual* handle
 * (CS_VMM_TAG | id) for a segment (seg.h) of kind VMM, and every call that
 * takes a handle translates it. The segment's own range (its "shadow", a
 * virtual range the hook reserves for the allocation's size) is where the
 * swap engine copies from and to; the application's mappings of the
 * handle (cuMemMap: address, size, offset) and the access it granted on
 * them (cuMemSetAccess, in call order) are recorded and replayed each time
 * the memory is placed again. While the memory is swapped out the
 * application's ranges are unmapped, as plain segments are; access and
 * pointer queries on them are answered from the records.
 *
 * Memory the application exports (cuMemExportToShareableHandle) or binds to
 * a sparse array (cuMemMapArrayAsync) is marked unswappable, like CUDA IPC
 * exports (ipc.h): another owner then maps the physical memory. Host
 * memory (location HOST*) and everything with CUSHARE_SWAP=off pass through.
 *
 * Locking: vmm_mu guards the id and address tables and each object's
 * mapping list; it is taken inside a device's segs.mu, never around it. An
 * object's mappings change only with both held, so the swap engine (which
 * holds segs.mu) reads them safely.
 */
#ifndef CS_HOOK_VMM_H
#define CS_HOOK_VMM_H

#include "hook/seg.h"

#define CS_VMM_TAG 0xC5A5000000000000ull
#define CS_VMM_TAG_MASK 0xFFFF000000000000ull

static inline bool cs_vmm_is_virtual(CUmemGenericAllocationHandle h)
{
    return (h & CS_VMM_TAG_MASK) == CS_VMM_TAG;
}

/* cuMemCreate of device memory on d (quota already charged). */
CUresult cs_vmm_create(struct cs_dev *d, CUmemGenericAllocationHandle *out, size_t size,
                       const CUmemAllocationProp *prop);
/* cuMemRelease of a virtual handle; *size = its bytes (to uncharge). */
CUresult cs_vmm_release(CUmemGenericAllocationHandle vh, uint64_t *size);
CUresult cs_vmm_map(CUdeviceptr va, size_t size, size_t offset, CUmemGenericAllocationHandle vh);
/* These return false when [va, va+size) holds none of our mappings (the
 * caller passes the call to the driver). */
bool cs_vmm_unmap(CUdeviceptr va, size_t size, CUresult *r);
bool cs_vmm_set_access(CUdeviceptr va, size_t size, const CUmemAccessDesc *desc, size_t count,
                       CUresult *r);
bool cs_vmm_get_access(unsigned long long *flags, const CUmemLocation *loc, CUdeviceptr va,
                       CUresult *r);
/* cuMemAddressFree of a range that still holds our mappings: they are
 * dropped (unmapped if placed) so that no restore maps into freed space. */
void cs_vmm_forget_range(CUdeviceptr va, size_t size);
bool cs_vmm_retain(CUmemGenericAllocationHandle *out, CUdeviceptr addr);
CUresult cs_vmm_props(CUmemAllocationProp *prop, CUmemGenericAllocationHandle vh);
CUresult cs_vmm_export(void *shareable, CUmemGenericAllocationHandle vh,
                       CUmemAllocationHandleType type, unsigned long long flags);
/* The driver's handle for vh, marking the memory unswappable (it is about
 * to be bound where the hook cannot follow). The caller is inside the
 * device's gate, so the memory is resident. */
CUresult cs_vmm_pin_real(CUmemGenericAllocationHandle vh, CUmemGenericAllocationHandle *real);

/* A pointer in one of the application's mappings while its memory is not
 * on the GPU: the mapping's range and device. False if resident or not ours. */
bool cs_vmm_absent_mapping(CUdeviceptr ptr, CUdeviceptr *base, uint64_t *size, int *dev);

/* The swap engine's hooks (seg.c), segs.mu held. */
CUresult cs_vmm_map_locked(struct cs_seg *g);
CUresult cs_vmm_unmap_locked(struct cs_seg *g); /* as cs_seg_unmap_locked */

void cs_vmm_reset_after_fork(void);

#endif
