/* seg.h: swappable device memory, backed by VMM at a fixed virtual address.
 *
 * Every plain device allocation (cuMemAlloc, cuMemAllocPitch) lives in a
 * segment: a virtual range reserved once (cuMemAddressReserve) whose
 * physical memory can come and go (cuMemCreate + cuMemMap on the way in,
 * cuMemUnmap + cuMemRelease on the way out) while every pointer into it
 * stays valid. Allocations of 2 MiB or more get a segment of their own,
 * rounded up to the 2 MiB granularity (the real driver rounds them the same
 * way); smaller ones share 2 MiB chunk segments in 512-byte units, so a
 * program making many small allocations wastes no more than cuMemAlloc does.
 *
 * A segment is RESIDENT (mapped), SWAPPED (its bytes are in host backing),
 * or RESERVED (allocated while the job did not hold the GPU: no memory yet;
 * fresh device memory has no defined contents, so it needs no copy). While
 * a job's gate is open all its segments are RESIDENT (swap.c keeps that
 * invariant).
 *
 * Locking: each device's segment list is guarded by its seg mutex; the
 * address index (for pointer queries) by its own mutex, taken inside it.
 * Order: segs.mu, then a device's lease mu (never the reverse).
 */
#ifndef CS_HOOK_SEG_H
#define CS_HOOK_SEG_H

#include "hook/device.h"

#define CS_CHUNK_SIZE (2ull << 20)
#define CS_UNIT 512ull
#define CS_CHUNK_UNITS ((unsigned)(CS_CHUNK_SIZE / CS_UNIT))

enum cs_seg_state {
    CS_SEG_RESERVED = 0,
    CS_SEG_RESIDENT = 1,
    CS_SEG_SWAPPED = 2,
};

/* Pinned host memory holding a swapped-out segment's bytes, addressed by
 * `va` in either form:
 *   - cuMemCreate(HOST) memory in pieces of `piece` bytes, mapped one after
 *     another into a range reserved for the whole segment (the cheapest to
 *     pin). Pieces, because the driver holds a lock that every process's
 *     device allocations need for as long as one cuMemCreate pins: a 10 GiB
 *     backing in one piece stalled another job's allocation for seconds on
 *     an H100, in 64 MiB pieces for milliseconds
 *     (bench/results/oversubscription.md, cs_pincontend).
 *   - one cuMemHostAlloc block (piece == 0), the fallback.
 * A backing is pinned a prefix at a time and usable once complete
 * (pinned == size). */
struct cs_backing {
    CUdeviceptr va;
    uint64_t size;                   /* bytes at va (the segment's), 0 = none */
    uint64_t pinned;                 /* the prefix pinned so far */
    uint64_t piece;                  /* VMM piece size; 0 = cuMemHostAlloc */
};

struct cs_seg {
    struct cs_seg *next;             /* the device's list */
    CUdeviceptr va;                  /* reserved base, fixed for life */
    uint64_t size;                   /* multiple of the granularity */
    int dev;
    uint8_t state;                   /* enum cs_seg_state */
    bool chunk;                      /* shared by small allocations */
    CUmemGenericAllocationHandle h;  /* the physical memory when RESIDENT */
    struct cs_backing backing;       /* pinned host copy, kept across swaps */
    uint64_t last_grant;             /* lease count when last made resident */
    bool shareable;                  /* its memory can be exported (POSIX fd) */
    bool exported;                   /* by CUDA IPC: never leaves the GPU (ipc.h) */
    uint64_t ipc_key;                /* the export, when exported */
    struct cs_vmm *vmm;              /* the application's cuMemCreate memory (vmm.h), or NULL */
    /* chunk segments only */
    uint32_t used_units;
    uint64_t bits[CS_CHUNK_UNITS / 64];
};

/* Per-device segment state. The three byte counters are written under mu
 * but read without it: the client I/O thread reports them and must never
 * wait for mu (an allocation holding mu may be waiting for that thread to
 * deliver the scheduler's answer to a ROOM request). */
struct cs_segs {
    pthread_mutex_t mu;
    struct cs_seg *head;
    _Atomic uint64_t resident;  /* bytes of RESIDENT segments */
    _Atomic uint64_t swapped;   /* bytes of SWAPPED segments */
    _Atomic uint64_t reserved;  /* bytes of RESERVED segments */
    _Atomic uint64_t backing;   /* pinned host bytes held (written under mu) */
    _Atomic uint64_t exported;  /* bytes of exported (unswappable) segments */
    uint64_t swap_out_bytes, swap_in_bytes;  /* totals */
    uint64_t swap_out_ns, swap_in_ns;
    uint64_t swap_outs, swap_ins;            /* operations */
    /* The pinner (cs_backing_prepare) pins one piece at a time with mu
     * released; `pinning` names the segment meanwhile (written under mu).
     * Whatever must not race it (a swap-out, a trim, freeing the segment)
     * raises pin_holdoff and waits on pin_cv until `pinning` is NULL; no
     * piece starts while pin_holdoff is non-zero (backing.h). */
    struct cs_seg *pinning;
    uint32_t pin_holdoff;
    pthread_cond_t pin_cv;
    CUcontext pctx;         /* retained primary context for swap work */
    CUstream stream;        /* the swap stream, in pctx */
    bool ready;             /* pctx and stream exist */
};

extern struct cs_segs cs_segs[CS_MAX_DEVICES];

/* Allocates bytes on device d. Materializes at once when the job may use
 * the GPU now (lease held or no scheduler), else leaves it RESERVED.
 * Returns CUDA_SUCCESS with *out set, or an error (no memory for it even
 * after asking the scheduler for room). Caller has charged the quota. */
CUresult cs_seg_alloc(struct cs_dev *d, uint64_t bytes, CUdeviceptr *out);

/* Frees an allocation made by cs_seg_alloc. Returns false if ptr is not
 * one of ours. The bytes it occupied are returned in *bytes. */
bool cs_seg_free(CUdeviceptr ptr, uint64_t *bytes, int *dev);

/* A segment for the application's own VMM allocation x (vmm.h): placed at
 * once when the job may use the GPU, else RESERVED. Not in the address
 * index (the application never sees its range). */
struct cs_vmm;
CUresult cs_seg_create_vmm(struct cs_dev *d, uint64_t size, struct cs_vmm *x, struct cs_seg **out);
/* Destroys a segment (unmapping, backing and all); segs.mu held. */
void cs_seg_destroy_locked(struct cs_segs *s, struct cs_seg *g);
/* Marks g exported (never swapped again), counting it; segs.mu held. */
void cs_seg_mark_exported_locked(struct cs_segs *s, struct cs_seg *g);

/* Exports the segment holding ptr for CUDA IPC (ipc.h): from now until it
 * is freed the segment stays on the GPU (swap and pin-ahead pass it over,
 * its bytes are reported unswappable) and no new small allocation joins
 * it. The first export creates its descriptor; later ones reuse it. The
 * segment must be resident (the caller is inside the device's gate). */
struct cs_seg_export {
    uint64_t key;      /* ipc.c's name for the descriptor */
    CUdeviceptr va;    /* the segment */
    uint64_t size;
};
CUresult cs_seg_export(CUdeviceptr ptr, struct cs_seg_export *out);
/* Bytes of dev's segments that are exported (resident, unswappable). */
uint64_t cs_seg_exported(int dev);
/* True if dev's segments are created exportable. */
bool cs_seg_shareable(int dev);

/* Looks up the allocation containing ptr: its base, size and device.
 * False if ptr is not inside one of our allocations. */
bool cs_seg_lookup(CUdeviceptr ptr, CUdeviceptr *base, uint64_t *size, int *dev);

/* True if some memory of the device is not resident (capture must then
 * wait for the lease, which restores it, instead of recording blindly). */
bool cs_seg_any_absent(int dev);

/* Memory counters for USAGE and the stats API. */
void cs_seg_counts(int dev, uint64_t *resident, uint64_t *swapped, uint64_t *reserved);
/* Pinned host backing held for dev's segments (without the lock). */
uint64_t cs_seg_backing(int dev);

/* Device memory currently mapped by this process through segments, used by
 * the swap engine; the caller holds segs.mu. */
bool cs_segs_ensure_ready_locked(struct cs_segs *s, int dev);

void cs_seg_reset_after_fork(void);

#endif
