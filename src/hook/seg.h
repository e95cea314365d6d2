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
 * One larger than CUSHARE_SEG_PART (2 GiB) is made of parts of that size,
 * each a segment, so that an eviction moves about what it is asked for.
 *
 * A segment is RESIDENT (mapped), SWAPPED (its bytes are in host backing),
 * or RESERVED (allocated while the job did not hold the GPU: no device
 * memory yet; fresh device memory has no defined contents, so it needs no
 * copy). While a job's gate is open all its segments are RESIDENT (swap.c
 * keeps that invariant). Whatever the state, the segment's addresses stay
 * mapped (enum cs_seg_at below).
 *
 * What this module does not know is asked through callbacks: whether the
 * job may use the GPU now and how to ask the scheduler for room (struct
 * cs_seg_ops, registered by the lease at init), how to place memory that
 * is the application's own VMM allocation (struct cs_seg_kind, vmm.c), and
 * who to tell when an exported segment goes (cs_seg_export's caller, ipc.c).
 *
 * Locking (locks.h): each device's segment list is guarded by its segs.mu;
 * the address index (for pointer queries) by its own mutex, taken inside it.
 */
#ifndef CS_HOOK_SEG_H
#define CS_HOOK_SEG_H

#include "hook/backing.h"
#include "hook/device.h"

#define CS_CHUNK_SIZE (2ull << 20)
#define CS_UNIT 512ull
#define CS_CHUNK_UNITS ((unsigned)(CS_CHUNK_SIZE / CS_UNIT))

enum cs_seg_state {
    CS_SEG_RESERVED = 0,
    CS_SEG_RESIDENT = 1,
    CS_SEG_SWAPPED = 2,
};

struct cs_seg;

/* What a segment's addresses show (cs_seg.at). Memory not on the GPU
 * stays mapped at its addresses to host memory, so that every address the
 * program holds is valid for the driver at every moment (calls that take
 * an address without running work check it: graph nodes, pointer
 * queries; bench/gpu/addr_probe.c): a SWAPPED segment shows its backing
 * (the same pinned pieces, mapped twice), a RESERVED one the device's
 * placeholder (two pinned allocations, 64 MiB and 2 MiB, mapped again and
 * again: memory that has no contents yet needs no bytes of its own). NONE only where the driver
 * gives no host-located VMM memory (cuMemHostAlloc backing) or the host
 * has none to spare. */
enum cs_seg_at {
    CS_AT_NONE = 0,
    CS_AT_DEVICE = 1,       /* g->h, on the GPU */
    CS_AT_BACKING = 2,      /* g->backing's pieces */
    CS_AT_PLACEHOLDER = 3,  /* the device's placeholder */
};

/* How a segment's memory is made and where it shows (segs.mu held). Plain
 * memory shows at its own range; vmm.c's segments hold the application's
 * own cuMemCreate memory and show at its range and at every place the
 * application mapped it. */
struct cs_seg_kind {
    /* Creates device memory for g. */
    CUresult (*create_locked)(struct cs_seg *g, CUmemGenericAllocationHandle *h);
    /* Maps what g->at names (cs_seg_map_range_locked) at every place g
     * shows, with its access. On failure nothing of it stays mapped. */
    CUresult (*map_locked)(struct cs_seg *g);
    /* Unmaps every place. On a refusal, maps back what was unmapped and
     * returns the error: g still shows what it did. */
    CUresult (*unmap_locked)(struct cs_seg *g);
};

struct cs_seg {
    struct cs_seg *next;             /* the device's list */
    CUdeviceptr va;                  /* reserved base, fixed for life */
    uint64_t size;                   /* multiple of the granularity */
    int dev;
    uint8_t state;                   /* enum cs_seg_state */
    uint8_t at;                      /* enum cs_seg_at */
    bool chunk;                      /* shared by small allocations */
    CUmemGenericAllocationHandle h;  /* device memory: held while at DEVICE (RESIDENT,
                                        or placed for a restore still to copy) */
    struct cs_backing backing;       /* pinned host copy, kept across swaps */
    bool shareable;                  /* its memory can be exported (POSIX fd) */
    bool exported;                   /* by CUDA IPC: never leaves the GPU (ipc.h) */
    bool copied;                     /* swap.c: copied back by the restore under way */
    bool unshown;                    /* evicted, its backing not yet shown (s->unshown) */
    uint64_t ipc_key;                /* the export, when exported */
    void (*unexport)(uint64_t key);  /* told when an exported segment goes */
    /* The allocation g belongs to: its base and bytes. A large plain
     * allocation is made of parts (seg.c, "parts"), each a segment with
     * its own device memory and backing, side by side in one address
     * reservation, which only the part at the base frees. g's own range
     * for any other segment. */
    CUdeviceptr whole;
    uint64_t whole_size;
    const struct cs_seg_kind *kind;  /* never NULL (plain memory: seg.c's) */
    void *owner;                     /* the kind's object (vmm.c's struct cs_vmm) */
    /* chunk segments only */
    uint32_t used_units;
    uint64_t bits[CS_CHUNK_UNITS / 64];
};

/* Per-device segment state. The byte counters are written under mu but
 * read without it: the client I/O thread reports them and must never wait
 * for mu (an allocation holding mu may be waiting for that thread to
 * deliver the scheduler's answer to a ROOM request). */
struct cs_segs {
    pthread_mutex_t mu;
    struct cs_seg *head;
    _Atomic uint64_t resident;  /* bytes of RESIDENT segments */
    _Atomic uint64_t swapped;   /* bytes of SWAPPED segments */
    _Atomic uint64_t reserved;  /* bytes of RESERVED segments */
    _Atomic uint64_t backing;   /* pinned host bytes held (written under mu) */
    _Atomic uint64_t exported;  /* bytes of exported (unswappable) segments */
    uint64_t swap_out_bytes, swap_in_bytes;  /* totals (swap.c, under mu) */
    uint64_t swap_out_ns, swap_in_ns;
    uint64_t swap_outs, swap_ins;            /* operations */
    /* The pinner (swap.c's cs_swap_prepare) pins one piece at a time with
     * mu released; `pinning` names the segment meanwhile (written under
     * mu). Whatever must not race it (a swap-out, a trim, freeing the
     * segment) raises pin_holdoff and waits on pin_cv until `pinning` is
     * NULL; no piece starts while pin_holdoff is non-zero. */
    struct cs_seg *pinning;
    uint32_t pin_holdoff;
    pthread_cond_t pin_cv;
    /* The placeholder RESERVED segments show (cs_seg_at), made on first
     * need; ph_refused once the driver or the host said no. */
    CUmemGenericAllocationHandle ph, ph_small;
    bool ph_refused;
    /* Evicted segments whose backing is still to be shown (written under
     * mu, read without it as a hint); while non-zero the device counts as
     * one move under way in the remap word. */
    _Atomic uint32_t unshown;
    /* Threads of the swap engine waiting for mu (swap.c): the shower
     * (cs_swap_show) stops between segments while one waits, since a
     * mutex is not fair and a restore must not wait for every segment. */
    _Atomic uint32_t wanted;
    CUcontext pctx;         /* retained primary context for swap work */
    CUstream stream;        /* the swap stream, in pctx */
    bool ready;             /* pctx and stream exist */
};

extern struct cs_segs cs_segs[CS_MAX_DEVICES];

/* ---- what the layers above tell this one ------------------------------- */

struct cs_seg_ops {
    /* May the job use device memory right now (lease held, or no
     * scheduler)? Only then is a new segment placed at once. segs.mu held:
     * may take the device's mu (lock order, locks.h). */
    bool (*may_place)(struct cs_dev *d);
    /* Asks the scheduler for `bytes` of room on d and waits for the answer:
     * 0 when room was made, -1 refused (asked again, with a growing pause,
     * for up to 5 s), -2 when there is no scheduler to ask. segs.mu held:
     * the thread that delivers the answer never takes it. */
    int (*make_room)(struct cs_dev *d, uint64_t bytes);
};
/* Registered once at init, before any allocation; until then every segment
 * is placed at once and no room is asked for. */
void cs_seg_set_ops(const struct cs_seg_ops *ops);

/* ---- allocations --------------------------------------------------------- */

/* Allocates bytes on device d. Placed at once when the job may use the
 * GPU now, else left RESERVED. Returns CUDA_SUCCESS with *out set, or an
 * error (no memory for it even after asking the scheduler for room).
 * Caller has charged the quota. */
CUresult cs_seg_alloc(struct cs_dev *d, uint64_t bytes, CUdeviceptr *out);

/* Frees an allocation made by cs_seg_alloc. Returns false if ptr is not
 * one of ours. The bytes it occupied are returned in *bytes. */
bool cs_seg_free(CUdeviceptr ptr, uint64_t *bytes, int *dev);

/* A segment of another kind (vmm.c) for `size` bytes, owned by `owner`:
 * placed at once when the job may use the GPU, else RESERVED. Not in the
 * address index (the application never sees its range). */
CUresult cs_seg_create_kind(struct cs_dev *d, uint64_t size, const struct cs_seg_kind *kind,
                            void *owner, struct cs_seg **out);
/* Destroys a segment (unmapping, backing and all); segs.mu held. The
 * pinner must not be pinning it (cs_seg_hold_pinner_locked). */
void cs_seg_destroy_locked(struct cs_segs *s, struct cs_seg *g);
/* Marks g exported (never swapped again), counting it; segs.mu held. */
void cs_seg_mark_exported_locked(struct cs_segs *s, struct cs_seg *g);

/* ---- CUDA IPC export ------------------------------------------------------ */

/* Exports the allocation holding ptr (its segment, or every part of one
 * made of parts): from now until it is freed it stays on the GPU (swap and
 * pin-ahead pass it over, its bytes are reported unswappable) and no new
 * small allocation joins it. The first export creates a POSIX descriptor
 * for each part's memory and hands them, in address order, to reg (under
 * segs.mu; it owns them from then on), with the parts' size (the last one
 * may be smaller) and the allocation's, and reg returns its key (0:
 * failed, the descriptors are then closed by reg); unreg(key) is called
 * when the allocation is freed. Later exports reuse the key. The memory
 * must be resident (the caller is inside the device's gate). */
typedef uint64_t (*cs_seg_reg_fn)(const int *fds, size_t n, uint64_t part, uint64_t size);
struct cs_seg_export {
    uint64_t key;      /* reg's name for the descriptors */
    CUdeviceptr va;    /* the allocation's segment, or its parts */
    uint64_t size;
    uint64_t part;     /* each part's bytes (size, for one segment) */
};
CUresult cs_seg_export(CUdeviceptr ptr, cs_seg_reg_fn reg, void (*unreg)(uint64_t key),
                       struct cs_seg_export *out);
/* Bytes of dev's segments that are exported (resident, unswappable). */
uint64_t cs_seg_exported(int dev);
/* True if dev's segments are created exportable. */
bool cs_seg_shareable(int dev);

/* ---- queries ---------------------------------------------------------------- */

/* Looks up the allocation containing ptr: its base, size and device.
 * False if ptr is not inside one of our allocations. */
bool cs_seg_lookup(CUdeviceptr ptr, CUdeviceptr *base, uint64_t *size, int *dev);

/* Memory counters for USAGE and the stats API. */
void cs_seg_counts(int dev, uint64_t *resident, uint64_t *swapped, uint64_t *reserved);
/* Pinned host backing held for dev's segments (without the lock). */
uint64_t cs_seg_backing(int dev);

/* What the swap engine did for dev, copied under segs.mu; with try, false
 * (nothing copied) when the lock is busy (the exit summary must not wait). */
struct cs_seg_stats {
    uint64_t backing;
    uint64_t swap_out_bytes, swap_out_ns, swap_outs;
    uint64_t swap_in_bytes, swap_in_ns, swap_ins;
};
bool cs_seg_stats(int dev, struct cs_seg_stats *out, bool try);

/* ---- for the swap engine (swap.c), segs.mu held ------------------------------ */

/* The device's retained primary context and swap stream, made on first
 * use. False if the driver refuses. */
bool cs_segs_ready_locked(struct cs_segs *s, int dev);

/* Places g on the GPU: creates its device memory (with ask_room, a GPU
 * that is full asks the scheduler for room, cs_seg_ops.make_room, and
 * tries again, for up to 5 s of refusals; without, the first
 * OUT_OF_MEMORY is the answer) and shows it at g's addresses instead of
 * what they showed. Already placed: nothing to do. The contents are the
 * caller's (swap.c copies the backing in). */
CUresult cs_seg_place_locked(struct cs_dev *d, struct cs_seg *g, bool ask_room);
/* Takes g off the GPU once its bytes are safe in its backing: its device
 * memory is unmapped and freed at once (the next job is waiting for the
 * room), and its backing is shown at its addresses later, off the
 * critical path (cs_seg_show_next_locked): mapping host memory for the
 * device costs ~12 ms/GiB on an H100 against ~0.05 for device memory
 * (bench/swap/cs_remapbench.c), a third of the copy's time. Until then the
 * segment counts as being moved (cs_seg_remap_seq). When the driver
 * refuses the unmap, g keeps its memory, still shown (g->at stays
 * DEVICE), and the error is returned: a segment marked absent over a live
 * mapping could never be placed again. */
CUresult cs_seg_evict_locked(struct cs_segs *s, struct cs_seg *g);
/* Shows the backing of one evicted segment still waiting for it; false
 * when none waits. */
bool cs_seg_show_next_locked(struct cs_segs *s);
/* Segments of dev waiting for their backing to be shown (without the
 * lock: a hint for whether to queue the work). */
uint32_t cs_seg_unshown(int dev);
/* Maps what g->at names at [va, va + size), g's bytes from off: for the
 * kinds' map_locked, and vmm.c's new mappings of a segment. */
CUresult cs_seg_map_range_locked(const struct cs_seg *g, CUdeviceptr va, uint64_t size,
                                 uint64_t off);
/* Unmaps what cs_seg_map_range_locked mapped with the same arguments. */
CUresult cs_seg_unmap_range_locked(const struct cs_seg *g, CUdeviceptr va, uint64_t size,
                                   uint64_t off);
/* Moves g to state st, keeping the byte counters. */
void cs_seg_set_state_locked(struct cs_segs *s, struct cs_seg *g, enum cs_seg_state st);

/* The pinner's hold-off (see cs_segs.pinning): keeps the pinner from
 * starting a piece, and waits (releasing mu) for the one in flight to land.
 * Every hold is released. */
void cs_seg_hold_pinner_locked(struct cs_segs *s);
void cs_seg_release_pinner_locked(struct cs_segs *s);
/* The pinner's side: waits while held off, then names the next resident,
 * swappable segment whose backing is incomplete as being pinned (NULL:
 * none left). */
struct cs_seg *cs_seg_claim_unbacked_locked(struct cs_segs *s);
/* The claimed piece landed (or did not): `pinned_before` was the backing's
 * pinned prefix when claimed. Counts the new bytes, releases the claim. */
void cs_seg_unclaim_locked(struct cs_segs *s, struct cs_seg *g, uint64_t pinned_before);

/* ---- the moment between two mappings ------------------------------------
 * Moving a segment (show_locked) unmaps its addresses before mapping them
 * again: the driver has no atomic remap. A call that checks an address in
 * that moment fails where it would pass a moment later. The remap word
 * counts the moves under way and the moves begun, so a call that failed
 * can tell whether a move overlapped it and try again once the moves
 * ended: one load on the way in, nothing more unless the call failed (the
 * generated wrappers of address class `mapping`, api_addresses.txt). */
static inline uint32_t cs_seg_remap_seq(void)
{
    extern _Atomic uint32_t cs_seg_remaps;
    return atomic_load_explicit(&cs_seg_remaps, memory_order_acquire);
}
/* After a failed call begun at *seq: true (with *seq updated, once every
 * move under way ended) when a move overlapped the call; false when none
 * did (the failure is the call's own). */
bool cs_seg_remapped_since(uint32_t *seq);

void cs_seg_reset_after_fork(void);

#endif
