/* seg.c: segments, the chunk sub-allocator and the address index (seg.h). */
#include "hook/seg.h"
#include "hook/config.h"
#include "common/log.h"
#include "common/util.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct cs_segs cs_segs[CS_MAX_DEVICES];

/* ---- the layers above ----------------------------------------------------
 * Written once by the constructor (cs_seg_set_ops), before any allocation;
 * read-only afterwards. */
static const struct cs_seg_ops *seg_ops;

void cs_seg_set_ops(const struct cs_seg_ops *ops)
{
    seg_ops = ops;
}

/* ---- address index: every segment by base address ----------------------
 * A sorted array searched by bisection; pointer queries and frees use it.
 * Guarded by idx_mu (taken inside a device's segs.mu, never around it). */
static pthread_mutex_t idx_mu = PTHREAD_MUTEX_INITIALIZER;
static struct cs_seg **idx;
static size_t idx_len, idx_cap;

static size_t idx_lower_bound(CUdeviceptr va)
{
    size_t lo = 0, hi = idx_len;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (idx[mid]->va < va)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static bool idx_insert(struct cs_seg *g)
{
    pthread_mutex_lock(&idx_mu);
    if (idx_len == idx_cap) {
        size_t ncap = idx_cap ? idx_cap * 2 : 256;
        struct cs_seg **n = realloc(idx, ncap * sizeof *n);
        if (!n) {
            pthread_mutex_unlock(&idx_mu);
            return false;
        }
        idx = n;
        idx_cap = ncap;
    }
    size_t i = idx_lower_bound(g->va);
    memmove(&idx[i + 1], &idx[i], (idx_len - i) * sizeof *idx);
    idx[i] = g;
    idx_len++;
    pthread_mutex_unlock(&idx_mu);
    return true;
}

static void idx_remove(struct cs_seg *g)
{
    pthread_mutex_lock(&idx_mu);
    size_t i = idx_lower_bound(g->va);
    if (i < idx_len && idx[i] == g) {
        memmove(&idx[i], &idx[i + 1], (idx_len - i - 1) * sizeof *idx);
        idx_len--;
    }
    pthread_mutex_unlock(&idx_mu);
}

/* The segment containing ptr, or NULL. Caller holds idx_mu. */
static struct cs_seg *idx_find_locked(CUdeviceptr ptr)
{
    size_t i = idx_lower_bound(ptr + 1);
    if (i == 0)
        return NULL;
    struct cs_seg *g = idx[i - 1];
    return ptr >= g->va && ptr < g->va + g->size ? g : NULL;
}

static struct cs_seg *idx_find(CUdeviceptr ptr)
{
    pthread_mutex_lock(&idx_mu);
    struct cs_seg *g = idx_find_locked(ptr);
    pthread_mutex_unlock(&idx_mu);
    return g;
}

/* Locks the segs.mu of the device whose segment holds ptr and finds the
 * segment again under it (*g NULL if it went meanwhile). Returns that
 * device's ordinal, or -1, with nothing locked, if ptr is in no segment. */
static int lock_dev_of(CUdeviceptr ptr, struct cs_seg **g)
{
    pthread_mutex_lock(&idx_mu);
    struct cs_seg *found = idx_find_locked(ptr);
    int d = found ? found->dev : -1; /* read under idx_mu: it may go */
    pthread_mutex_unlock(&idx_mu);
    if (d < 0)
        return -1;
    pthread_mutex_lock(&cs_segs[d].mu);
    *g = idx_find(ptr);
    return d;
}

/* ---- bitmaps --------------------------------------------------------------
 * bits: unit in use; starts: an allocation begins at this unit. */

static inline bool bit_get(const uint64_t *b, unsigned i)
{
    return (b[i / 64] >> (i % 64)) & 1;
}

static inline void bit_put(uint64_t *b, unsigned i, bool v)
{
    if (v)
        b[i / 64] |= 1ull << (i % 64);
    else
        b[i / 64] &= ~(1ull << (i % 64));
}

struct chunk_meta {
    uint64_t starts[CS_CHUNK_UNITS / 64];
};

/* The start bitmap lives right after the segment (allocated together). */
static inline uint64_t *chunk_starts(struct cs_seg *g)
{
    return ((struct chunk_meta *)(g + 1))->starts;
}

/* First run of n free units, or -1. */
static int chunk_find(const struct cs_seg *g, unsigned n)
{
    if (CS_CHUNK_UNITS - g->used_units < n)
        return -1;
    unsigned run = 0;
    for (unsigned i = 0; i < CS_CHUNK_UNITS; i++) {
        if (g->bits[i / 64] == ~0ull && i % 64 == 0) {
            run = 0;
            i += 63;
            continue;
        }
        run = bit_get(g->bits, i) ? 0 : run + 1;
        if (run == n)
            return (int)(i + 1 - n);
    }
    return -1;
}

static void chunk_mark(struct cs_seg *g, unsigned first, unsigned n, bool used)
{
    for (unsigned i = first; i < first + n; i++)
        bit_put(g->bits, i, used);
    bit_put(chunk_starts(g), first, used);
    g->used_units = used ? g->used_units + n : g->used_units - n;
}

/* ---- physical memory ----------------------------------------------------- */

/* Devices that may access memory of `dev` (itself and its peers), computed
 * once per device. Guarded by the owning device's segs.mu. */
static int peer_list[CS_MAX_DEVICES][CS_MAX_DEVICES];
static int peer_count[CS_MAX_DEVICES];

static void peers_locked(int dev)
{
    if (peer_count[dev])
        return;
    int n = 0, count = 0;
    peer_list[dev][n++] = dev;
    if (cs_real.cuDeviceGetCount(&count) == CUDA_SUCCESS) {
        for (int o = 0; o < count && o < CS_MAX_DEVICES; o++) {
            int can = 0;
            if (o != dev && cs_real.cuDeviceCanAccessPeer(&can, o, dev) == CUDA_SUCCESS && can)
                peer_list[dev][n++] = o;
        }
    }
    peer_count[dev] = n;
}

/* Whether dev's memory is created exportable (a POSIX descriptor, for CUDA
 * IPC, ipc.h): 0 = not known yet, 1 = yes, -1 = the device or driver
 * cannot. Asking costs nothing measurable at creation. Each entry is
 * written under its device's segs.mu and read without it (stats). */
static _Atomic int8_t shareable[CS_MAX_DEVICES];

static bool shareable_locked(int dev)
{
    if (atomic_load_explicit(&shareable[dev], memory_order_relaxed) == 0) {
        CUdevice d;
        int ok = 0;
        if (cs_real.cuDeviceGet(&d, dev) != CUDA_SUCCESS ||
            cs_real.cuDeviceGetAttribute(
                &ok, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, d) !=
                CUDA_SUCCESS)
            ok = 0;
        atomic_store_explicit(&shareable[dev], (int8_t)(ok ? 1 : -1), memory_order_relaxed);
    }
    return atomic_load_explicit(&shareable[dev], memory_order_relaxed) > 0;
}

bool cs_seg_shareable(int dev)
{
    return dev >= 0 && dev < CS_MAX_DEVICES &&
           atomic_load_explicit(&shareable[dev], memory_order_relaxed) > 0;
}

/* cuMemCreate for g, exportable when the device allows. A driver that says
 * it can but refuses is believed the second time: plain memory from then on. */
static CUresult plain_create_locked(struct cs_seg *g, CUmemGenericAllocationHandle *h)
{
    CUmemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p.location.id = g->dev;
    g->shareable = shareable_locked(g->dev);
    if (g->shareable) {
        p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
        CUresult r = cs_real.cuMemCreate(h, g->size, &p, 0);
        if (r != CUDA_ERROR_NOT_SUPPORTED && r != CUDA_ERROR_INVALID_VALUE)
            return r;
        cs_debug("GPU %d: exportable memory refused (error %d): CUDA IPC of swappable memory "
                 "is off", g->dev, (int)r);
        atomic_store_explicit(&shareable[g->dev], (int8_t)-1, memory_order_relaxed);
        g->shareable = false;
        p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
    }
    return cs_real.cuMemCreate(h, g->size, &p, 0);
}

/* Plain memory is reached by its device and the device's peers, wherever
 * it is (host memory too: a kernel that ran on it would read the bytes). */
static CUresult plain_access_locked(const struct cs_seg *g)
{
    peers_locked(g->dev);
    CUmemAccessDesc acc[CS_MAX_DEVICES];
    for (int i = 0; i < peer_count[g->dev]; i++) {
        memset(&acc[i], 0, sizeof acc[i]);
        acc[i].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        acc[i].location.id = peer_list[g->dev][i];
        acc[i].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    return cs_real.cuMemSetAccess(g->va, g->size, acc, (size_t)peer_count[g->dev]);
}

static CUresult plain_map_locked(struct cs_seg *g)
{
    CUresult r = cs_seg_map_range_locked(g, g->va, g->size, 0);
    if (r != CUDA_SUCCESS)
        return r;
    r = plain_access_locked(g);
    if (r != CUDA_SUCCESS)
        cs_seg_unmap_range_locked(g, g->va, g->size, 0);
    return r;
}

static CUresult plain_unmap_locked(struct cs_seg *g)
{
    CUresult r = cs_seg_unmap_range_locked(g, g->va, g->size, 0);
    if (r != CUDA_SUCCESS) /* mapped back by the tiling: its access too */
        plain_access_locked(g);
    return r;
}

static const struct cs_seg_kind plain_kind = {plain_create_locked, plain_map_locked,
                                              plain_unmap_locked};

/* ---- what a segment's addresses show ------------------------------------ */

/* One pinned allocation per device mapped at every 64 MiB tile of every
 * RESERVED segment (as many mappings as a backing has pieces), and one of
 * 2 MiB for the rest: the driver maps an allocation only whole. */
#define PLACEHOLDER_SIZE (64ull << 20)

/* Both placeholder allocations, or neither (*ph, *small stay 0). */
static CUresult create_placeholder(CUmemGenericAllocationHandle *ph,
                                   CUmemGenericAllocationHandle *small)
{
    CUresult r = cs_backing_create_host(PLACEHOLDER_SIZE, ph);
    if (r != CUDA_SUCCESS)
        return r;
    r = cs_backing_create_host(CS_CHUNK_SIZE, small);
    if (r != CUDA_SUCCESS) {
        cs_real.cuMemRelease(*ph);
        *ph = 0;
    }
    return r;
}

static bool placeholder_locked(struct cs_segs *s)
{
    if (s->ph)
        return true;
    if (s->ph_refused || !cs_cfg.host_backing_vmm)
        return false;
    /* Not in s->backing: it holds no one's bytes, and the pin budget
     * (CUSHARE_PIN_KEEP) is for backing that may be dropped. */
    CUresult r = create_placeholder(&s->ph, &s->ph_small);
    if (r == CUDA_SUCCESS)
        return true;
    /* The driver's no is for good; the host's (out of memory) is asked
     * again at the next allocation. Said once either way. */
    s->ph_refused = r != CUDA_ERROR_OUT_OF_MEMORY;
    static _Atomic bool warned;
    if (!atomic_exchange(&warned, true))
        cs_info("no host memory for the placeholder of unplaced memory (error %d): memory "
                "allocated while the job waits for the GPU stays unmapped until placed", (int)r);
    return false;
}

static bool tiling_of(const struct cs_seg *g, struct cs_tiling *t)
{
    if (g->at == CS_AT_BACKING)
        return cs_backing_tiling(&g->backing, t);
    const struct cs_segs *s = &cs_segs[g->dev];
    *t = (struct cs_tiling){.one = s->ph, .small = s->ph_small, .tile = PLACEHOLDER_SIZE,
                            .small_size = CS_CHUNK_SIZE};
    return t->one != 0;
}

CUresult cs_seg_map_range_locked(const struct cs_seg *g, CUdeviceptr va, uint64_t size,
                                 uint64_t off)
{
    struct cs_tiling t;
    if (g->at == CS_AT_NONE)
        return CUDA_SUCCESS;
    if (g->at == CS_AT_DEVICE)
        return cs_real.cuMemMap(va, size, off, g->h, 0);
    return tiling_of(g, &t) ? cs_tiling_map(&t, va, size, off) : CUDA_ERROR_INVALID_VALUE;
}

CUresult cs_seg_unmap_range_locked(const struct cs_seg *g, CUdeviceptr va, uint64_t size,
                                   uint64_t off)
{
    struct cs_tiling t;
    if (g->at == CS_AT_NONE)
        return CUDA_SUCCESS;
    if (g->at == CS_AT_DEVICE)
        return cs_real.cuMemUnmap(va, size);
    return tiling_of(g, &t) ? cs_tiling_unmap(&t, va, size, off) : CUDA_ERROR_INVALID_VALUE;
}

/* Host memory could not be shown at g's addresses: said once per process
 * (a swap-out of many segments would say it for each), then at debug. */
static void host_view_failed(const struct cs_seg *g, CUresult r)
{
    static _Atomic bool warned;
    bool first = !atomic_exchange(&warned, true);
    cs_log(first ? CS_LOG_WARN : CS_LOG_DEBUG,
           "GPU %d: host memory could not be mapped at 0x%llx (error %d): memory there stays "
           "unmapped while off the GPU, and calls that check its addresses fail until it is "
           "placed", g->dev, (unsigned long long)g->va, (int)r);
}

/* Moves under way (low 8 bits: at most one per device at a time, each
 * under its segs.mu) and moves begun (the rest), one word so that a
 * reader sees both at once (seg.h). */
_Atomic uint32_t cs_seg_remaps;
#define REMAP_ACTIVE 0xffu
#define REMAP_BEGUN (1u << 8)

static void remap_begin(void)
{
    atomic_fetch_add_explicit(&cs_seg_remaps, REMAP_BEGUN + 1, memory_order_acq_rel);
}

static void remap_end(void)
{
    atomic_fetch_sub_explicit(&cs_seg_remaps, 1, memory_order_acq_rel);
}

bool cs_seg_remapped_since(uint32_t *seq)
{
    struct timespec us = {0, 20000};
    uint32_t now = atomic_load_explicit(&cs_seg_remaps, memory_order_acquire);
    bool overlapped = (*seq & REMAP_ACTIVE) || (now & REMAP_ACTIVE) ||
                      (now & ~REMAP_ACTIVE) != (*seq & ~REMAP_ACTIVE);
    if (!overlapped)
        return false;
    /* A move takes milliseconds; showing a whole swapped-out job's backing
     * up to ~0.4 s per 30 GiB. Never more than 2 s: a move that never ends
     * (its job could not be queued) must not hang the caller, which then
     * gets the driver's answer. */
    uint64_t deadline = cs_now_ns() + 2000000000ull;
    while ((now = atomic_load_explicit(&cs_seg_remaps, memory_order_acquire)) & REMAP_ACTIVE) {
        if (cs_now_ns() > deadline)
            return false;
        nanosleep(&us, NULL);
    }
    *seq = now;
    return true;
}

/* A move's new mapping was refused: g shows what it did before, when the
 * driver lets it map that back. */
static void map_back_locked(struct cs_seg *g, enum cs_seg_at from)
{
    g->at = (uint8_t)from;
    if (from != CS_AT_NONE && g->kind->map_locked(g) != CUDA_SUCCESS) {
        g->at = CS_AT_NONE;
        cs_warn("GPU %d: the driver refused to map memory at 0x%llx back: it is unmapped until "
                "its next placement", g->dev, (unsigned long long)g->va);
    }
}

/* Shows `to` at g's addresses instead of what they show now. On failure g
 * shows what it did before, when the driver lets it map that back. */
static CUresult show_locked(struct cs_seg *g, enum cs_seg_at to)
{
    enum cs_seg_at from = (enum cs_seg_at)g->at;
    if (from == to)
        return CUDA_SUCCESS;
    /* Only a move from a mapping opens a moment in which a valid address
     * is not: from NONE (a new segment, or one already counted as unshown)
     * nothing that passed can fail, so the allocation path pays nothing. */
    bool moving = from != CS_AT_NONE;
    if (moving)
        remap_begin();
    CUresult r = moving ? g->kind->unmap_locked(g) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS) {
        g->at = (uint8_t)to;
        if (to != CS_AT_NONE && (r = g->kind->map_locked(g)) != CUDA_SUCCESS)
            map_back_locked(g, from);
    }
    if (moving)
        remap_end();
    return r;
}

/* g waits (or no longer waits) for its backing to be shown; the device's
 * first such segment opens a move in the remap word, its last closes it. */
static void set_unshown_locked(struct cs_segs *s, struct cs_seg *g, bool on)
{
    if (g->unshown == on)
        return;
    g->unshown = on;
    if (on && atomic_fetch_add_explicit(&s->unshown, 1, memory_order_relaxed) == 0)
        remap_begin();
    else if (!on && atomic_fetch_sub_explicit(&s->unshown, 1, memory_order_relaxed) == 1)
        remap_end();
}

CUresult cs_seg_evict_locked(struct cs_segs *s, struct cs_seg *g)
{
    struct cs_tiling t;
    bool showable = cs_backing_tiling(&g->backing, &t);
    if (showable) /* counted before the unmap: a call failing meanwhile can tell */
        set_unshown_locked(s, g, true);
    CUresult r = show_locked(g, CS_AT_NONE);
    if (r != CUDA_SUCCESS) {
        set_unshown_locked(s, g, false);
        return r;
    }
    if (g->h)
        cs_real.cuMemRelease(g->h);
    g->h = 0;
    return CUDA_SUCCESS;
}

bool cs_seg_show_next_locked(struct cs_segs *s)
{
    struct cs_seg *g = s->head;
    while (g && !g->unshown)
        g = g->next;
    if (!g)
        return false;
    CUresult r = show_locked(g, CS_AT_BACKING);
    if (r != CUDA_SUCCESS)
        host_view_failed(g, r);
    set_unshown_locked(s, g, false);
    return true;
}

uint32_t cs_seg_unshown(int dev)
{
    return atomic_load_explicit(&cs_segs[dev].unshown, memory_order_relaxed);
}

/* Takes g's addresses down for good (its range is being freed). */
static void unshow_locked(struct cs_seg *g)
{
    show_locked(g, CS_AT_NONE); /* refused: the range's free says so to nobody */
    if (g->h)
        cs_real.cuMemRelease(g->h);
    g->h = 0;
}

/* ---- segment life -------------------------------------------------------- */

/* The byte counters, and the device's count of bytes not on the GPU
 * (cs_dev.mem.absent: the gate reads it for stream capture). */
static void account(struct cs_segs *s, const struct cs_seg *g, int sign)
{
    _Atomic uint64_t *c = g->state == CS_SEG_RESIDENT  ? &s->resident
                          : g->state == CS_SEG_SWAPPED ? &s->swapped
                                                       : &s->reserved;
    _Atomic uint64_t *absent =
        g->state == CS_SEG_RESIDENT ? NULL : &cs_devs[g->dev].mem.absent;
    if (sign > 0) {
        atomic_fetch_add_explicit(c, g->size, memory_order_relaxed);
        if (absent)
            atomic_fetch_add_explicit(absent, g->size, memory_order_relaxed);
    } else {
        atomic_fetch_sub_explicit(c, g->size, memory_order_relaxed);
        if (absent)
            atomic_fetch_sub_explicit(absent, g->size, memory_order_relaxed);
    }
}

void cs_seg_set_state_locked(struct cs_segs *s, struct cs_seg *g, enum cs_seg_state st)
{
    account(s, g, -1);
    g->state = (uint8_t)st;
    account(s, g, +1);
}

/* May the job use device memory right now? Only then is a new segment
 * placed at once; otherwise it waits for the next grant. */
static bool may_place(struct cs_dev *d)
{
    return !seg_ops || seg_ops->may_place(d);
}

/* Room can be short for a moment that no eviction helps with: a job that
 * is exiting holds its memory until the driver tears its context down, and
 * cannot swap it out meanwhile. So a refused ROOM is asked again, with a
 * growing pause, for up to 5 s before the allocation fails. */
#define ROOM_PATIENCE_NS 5000000000ull

/* Creates g's device memory into g->h; while the GPU is full, asks the
 * scheduler for `room` bytes (none: the first OUT_OF_MEMORY is the answer). */
static CUresult create_locked(struct cs_dev *d, struct cs_seg *g, uint64_t room)
{
    CUresult r = g->kind->create_locked(g, &g->h);
    if (!room)
        return r;
    bool asked = false;
    uint64_t t0 = cs_now_ns();
    for (uint32_t pause_ms = 0; r == CUDA_ERROR_OUT_OF_MEMORY;) {
        if (asked && cs_now_ns() - t0 > ROOM_PATIENCE_NS)
            break;
        int got = seg_ops ? seg_ops->make_room(d, room) : -2;
        if (got == -2)
            break;
        if (got != 0)
            cs_backoff_sleep(&pause_ms);
        asked = true;
        r = g->kind->create_locked(g, &g->h);
    }
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        char b[32];
        cs_warn("GPU %d is full: %s could not be placed%s", d->ordinal,
                cs_format_size(g->size, b, sizeof b),
                asked ? " (the scheduler could not make room)" : " (no scheduler to make room)");
    }
    return r;
}

static CUresult place_locked(struct cs_dev *d, struct cs_seg *g, uint64_t room)
{
    if (g->at == CS_AT_DEVICE)
        return CUDA_SUCCESS;
    if (!g->h) { /* else made already, and a mapping of it refused */
        CUresult r = create_locked(d, g, room);
        if (r != CUDA_SUCCESS) {
            g->h = 0;
            return r;
        }
    }
    CUresult r = show_locked(g, CS_AT_DEVICE);
    if (r != CUDA_SUCCESS) {
        cs_real.cuMemRelease(g->h);
        g->h = 0;
    } else { /* placed before its backing was shown: nothing left to show */
        set_unshown_locked(&cs_segs[d->ordinal], g, false);
    }
    return r;
}

CUresult cs_seg_place_locked(struct cs_dev *d, struct cs_seg *g, bool ask_room)
{
    return place_locked(d, g, ask_room ? g->size : 0);
}

/* An allocation that is only reserved (the job does not hold the GPU) is
 * still refused if the job's memory could never be resident at once on
 * this device: on a bare GPU it would fail with OUT_OF_MEMORY right away,
 * and a grant could never restore it. */
static bool fits_device_locked(struct cs_dev *d, struct cs_segs *s, uint64_t size)
{
    uint64_t total = d->total_mem;
    uint64_t mine = atomic_load(&s->resident) + atomic_load(&s->swapped) +
                    atomic_load(&s->reserved) + atomic_load(&d->mem.unswappable);
    if (!total || mine + size <= total)
        return true;
    char a[32], t[32], m[32];
    cs_error("out of memory on GPU %d: %s more would make this job's memory (%s) larger than "
             "the GPU (%s)", d->ordinal, cs_format_size(size, a, sizeof a),
             cs_format_size(mine, m, sizeof m), cs_format_size(total, t, sizeof t));
    return false;
}

/* A segment made while the job may not use the GPU shows the placeholder
 * (no bytes of its own to pin: it has no contents yet); where there is
 * none, it stays unmapped until its first placement, as it always was. */
static void show_reserved_locked(struct cs_segs *s, struct cs_seg *g)
{
    CUresult r;
    if (placeholder_locked(s) && (r = show_locked(g, CS_AT_PLACEHOLDER)) != CUDA_SUCCESS)
        host_view_failed(g, r);
}

/* A segment at [va, va + size), which the caller reserved: placed at once
 * when the job may use the GPU (a full GPU asks the scheduler for `room`
 * bytes), else RESERVED. On failure nothing of it is left but the range. */
static CUresult seg_at_locked(struct cs_dev *d, struct cs_segs *s, CUdeviceptr va, uint64_t size,
                              bool chunk, const struct cs_seg_kind *kind, void *owner,
                              uint64_t room, struct cs_seg **out)
{
    size_t extra = chunk ? sizeof(struct chunk_meta) : 0;
    struct cs_seg *g = calloc(1, sizeof *g + extra);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    g->va = g->whole = va;
    g->size = g->whole_size = size;
    g->dev = d->ordinal;
    g->chunk = chunk;
    g->kind = kind ? kind : &plain_kind; /* plain memory is in the address index */
    g->owner = owner;
    g->state = CS_SEG_RESERVED;
    if (may_place(d)) {
        CUresult r = place_locked(d, g, room);
        if (r != CUDA_SUCCESS) {
            free(g);
            return r;
        }
        g->state = CS_SEG_RESIDENT;
    } else {
        show_reserved_locked(s, g);
    }
    if (!kind && !idx_insert(g)) {
        unshow_locked(g);
        free(g);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    account(s, g, +1);
    g->next = s->head;
    s->head = g;
    *out = g;
    return CUDA_SUCCESS;
}

/* Reserves `size` bytes of addresses, refused (OUT_OF_MEMORY) when the job
 * may not place memory now and this much more could never be resident. */
static CUresult reserve_locked(struct cs_dev *d, struct cs_segs *s, uint64_t size,
                               CUdeviceptr *va)
{
    CUresult r = cs_real.cuMemAddressReserve(va, size, CS_CHUNK_SIZE, 0, 0);
    if (r != CUDA_SUCCESS)
        return r;
    if (!may_place(d) && !fits_device_locked(d, s, size)) {
        cs_real.cuMemAddressFree(*va, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

static CUresult seg_new_locked(struct cs_dev *d, struct cs_segs *s, uint64_t size, bool chunk,
                               const struct cs_seg_kind *kind, void *owner, struct cs_seg **out)
{
    CUdeviceptr va;
    CUresult r = reserve_locked(d, s, size, &va);
    if (r != CUDA_SUCCESS)
        return r;
    r = seg_at_locked(d, s, va, size, chunk, kind, owner, size, out);
    if (r != CUDA_SUCCESS)
        cs_real.cuMemAddressFree(va, size);
    return r;
}

void cs_seg_destroy_locked(struct cs_segs *s, struct cs_seg *g)
{
    for (struct cs_seg **pp = &s->head; *pp; pp = &(*pp)->next) {
        if (*pp == g) {
            *pp = g->next;
            break;
        }
    }
    idx_remove(g);
    account(s, g, -1);
    if (g->exported) {
        if (g->ipc_key && g->unexport && g->va == g->whole) /* one export per allocation */
            g->unexport(g->ipc_key);
        atomic_fetch_sub_explicit(&s->exported, g->size, memory_order_relaxed);
    }
    set_unshown_locked(s, g, false);
    unshow_locked(g);
    if (g->va == g->whole && g->size == g->whole_size) /* else a part: parts_free_locked */
        cs_real.cuMemAddressFree(g->va, g->size);
    cs_backing_drop(&g->backing, &s->backing);
    free(g);
}

/* ---- parts ------------------------------------------------------------------
 * An allocation larger than cs_cfg.seg_part (CUSHARE_SEG_PART, 2 GiB) is
 * made of parts of that size, the last one the rest: each a segment with
 * its own device memory and backing, side by side in one address
 * reservation, each in the index (a pointer finds its part, and the part
 * the allocation, by `whole`). Why: a swap-out is whole segments, and the
 * scheduler asks for what it needs; a ROOM for a job's 4 GB growth
 * evicted another job's whole 15 GB tensor (0.3 s on an H200, and as long
 * again to bring it back), where 4 GB take 80 ms. The cost: one device
 * allocation, mapping and backing per part, not per allocation (22 for a
 * 45 GB job at 2 GiB). A full GPU is asked for room once, for the rest of
 * the allocation, not per part. Only the part at the base frees the
 * addresses, once every part is gone. */

/* Destroys the parts of the allocation at base that lie in its first
 * `len` bytes. */
static void parts_destroy_locked(struct cs_segs *s, CUdeviceptr base, uint64_t len)
{
    for (uint64_t off = 0; off < len;) {
        struct cs_seg *g = idx_find(base + off);
        if (!g || g->whole != base)
            break; /* (the parts tile the range: cannot happen) */
        off += g->size;
        cs_seg_destroy_locked(s, g);
    }
}

static CUresult alloc_parts_locked(struct cs_dev *d, struct cs_segs *s, uint64_t size,
                                   CUdeviceptr *out)
{
    CUdeviceptr va;
    CUresult r = reserve_locked(d, s, size, &va);
    if (r != CUDA_SUCCESS)
        return r;
    uint64_t off = 0;
    while (off < size) {
        uint64_t n = size - off < cs_cfg.seg_part ? size - off : cs_cfg.seg_part;
        struct cs_seg *g;
        r = seg_at_locked(d, s, va + off, n, false, NULL, NULL, size - off, &g);
        if (r != CUDA_SUCCESS)
            break;
        g->whole = va;
        g->whole_size = size;
        off += n;
    }
    if (r != CUDA_SUCCESS) {
        parts_destroy_locked(s, va, off);
        cs_real.cuMemAddressFree(va, size);
        return r;
    }
    *out = va;
    return CUDA_SUCCESS;
}

static uint64_t round_up(uint64_t x, uint64_t a)
{
    return (x + a - 1) / a * a;
}

static CUresult alloc_small_locked(struct cs_dev *d, struct cs_segs *s, uint64_t bytes,
                                   CUdeviceptr *out)
{
    unsigned n = (unsigned)(round_up(bytes ? bytes : 1, CS_UNIT) / CS_UNIT);
    struct cs_seg *g = NULL;
    int at = -1;
    for (struct cs_seg *c = s->head; c; c = c->next) {
        if (c->chunk && !c->exported && (at = chunk_find(c, n)) >= 0) {
            g = c;
            break;
        }
    }
    if (!g) {
        CUresult r = seg_new_locked(d, s, CS_CHUNK_SIZE, true, NULL, NULL, &g);
        if (r != CUDA_SUCCESS)
            return r;
        at = 0;
    }
    chunk_mark(g, (unsigned)at, n, true);
    *out = g->va + (CUdeviceptr)at * CS_UNIT;
    return CUDA_SUCCESS;
}

CUresult cs_seg_alloc(struct cs_dev *d, uint64_t bytes, CUdeviceptr *out)
{
    struct cs_segs *s = &cs_segs[d->ordinal];
    pthread_mutex_lock(&s->mu);
    CUresult r;
    if (bytes < CS_CHUNK_SIZE) {
        r = alloc_small_locked(d, s, bytes, out);
    } else if (cs_cfg.seg_part && bytes > cs_cfg.seg_part) {
        r = alloc_parts_locked(d, s, round_up(bytes, CS_CHUNK_SIZE), out);
    } else {
        struct cs_seg *g;
        r = seg_new_locked(d, s, round_up(bytes, CS_CHUNK_SIZE), false, NULL, NULL, &g);
        if (r == CUDA_SUCCESS)
            *out = g->va;
    }
    pthread_mutex_unlock(&s->mu);
    return r;
}

CUresult cs_seg_create_kind(struct cs_dev *d, uint64_t size, const struct cs_seg_kind *kind,
                            void *owner, struct cs_seg **out)
{
    struct cs_segs *s = &cs_segs[d->ordinal];
    pthread_mutex_lock(&s->mu);
    CUresult r = seg_new_locked(d, s, size, false, kind, owner, out);
    pthread_mutex_unlock(&s->mu);
    return r;
}

bool cs_seg_free(CUdeviceptr ptr, uint64_t *bytes, int *dev)
{
    struct cs_seg *g;
    int d = lock_dev_of(ptr, &g);
    if (d < 0)
        return false;
    struct cs_segs *s = &cs_segs[d];
    /* A piece being pinned into this segment's backing (or into one of
     * its allocation's parts) lands first (the wait releases the lock:
     * look it up once more). */
    bool held = g && s->pinning && s->pinning->whole == g->whole;
    if (held) {
        cs_seg_hold_pinner_locked(s);
        g = idx_find(ptr);
    }
    bool ok = false;
    if (g && g->dev == d) {
        if (!g->chunk && ptr == g->whole && g->size != g->whole_size) {
            *bytes = g->whole_size;
            parts_destroy_locked(s, g->whole, g->whole_size);
            cs_real.cuMemAddressFree(ptr, *bytes);
            ok = true;
        } else if (!g->chunk && ptr == g->va && g->whole == g->va) {
            *bytes = g->size;
            cs_seg_destroy_locked(s, g);
            ok = true;
        } else if (g->chunk) {
            unsigned first = (unsigned)((ptr - g->va) / CS_UNIT);
            if ((ptr - g->va) % CS_UNIT == 0 && bit_get(chunk_starts(g), first)) {
                unsigned n = 1;
                while (first + n < CS_CHUNK_UNITS && bit_get(g->bits, first + n) &&
                       !bit_get(chunk_starts(g), first + n))
                    n++;
                chunk_mark(g, first, n, false);
                *bytes = (uint64_t)n * CS_UNIT;
                if (g->used_units == 0)
                    cs_seg_destroy_locked(s, g);
                ok = true;
            }
        }
    }
    if (held)
        cs_seg_release_pinner_locked(s);
    pthread_mutex_unlock(&s->mu);
    *dev = d;
    return ok;
}

void cs_seg_mark_exported_locked(struct cs_segs *s, struct cs_seg *g)
{
    if (g->exported)
        return;
    g->exported = true;
    atomic_fetch_add_explicit(&s->exported, g->size, memory_order_relaxed);
    /* It will never be swapped out: its host backing is dead weight (one
     * being pinned right now is left to finish, and kept until the free). */
    if (s->pinning != g)
        cs_backing_drop(&g->backing, &s->backing);
}

/* The parts of g's allocation, in address order (g alone for a segment
 * of its own), into *out (malloc'd); their count, 0 when out of memory. */
static size_t parts_of(const struct cs_seg *g, struct cs_seg ***out)
{
    size_t n = 0, cap = (size_t)((g->whole_size + g->size - 1) / g->size) + 1;
    struct cs_seg **v = malloc(cap * sizeof *v);
    if (!v)
        return 0;
    if (g->whole == g->va && g->whole_size == g->size) {
        v[n++] = (struct cs_seg *)g;
    } else {
        for (uint64_t off = 0; off < g->whole_size && n < cap;) {
            struct cs_seg *p = idx_find(g->whole + off);
            if (!p || p->whole != g->whole)
                break;
            v[n++] = p;
            off += p->size;
        }
    }
    *out = v;
    return n;
}

/* Each part's POSIX descriptor into fds[]; on failure none is left open. */
static CUresult export_fds(struct cs_seg **v, size_t n, int *fds)
{
    for (size_t i = 0; i < n; i++) {
        CUresult r = v[i]->state != CS_SEG_RESIDENT ? CUDA_ERROR_ILLEGAL_STATE
                     : !v[i]->shareable             ? CUDA_ERROR_NOT_SUPPORTED
                                                    : CUDA_SUCCESS;
        if (r == CUDA_SUCCESS)
            r = cs_real.cuMemExportToShareableHandle(&fds[i], v[i]->h,
                                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
        if (r != CUDA_SUCCESS) {
            while (i > 0)
                close(fds[--i]);
            return r; /* not resident: the caller's gate keeps it so */
        }
        fcntl(fds[i], F_SETFD, FD_CLOEXEC); /* never leaked into a program the job runs */
    }
    return CUDA_SUCCESS;
}

/* Under s->mu: makes g's allocation exported, every part of it (see seg.h). */
static CUresult export_locked(struct cs_segs *s, struct cs_seg *g, cs_seg_reg_fn reg,
                              void (*unreg)(uint64_t key))
{
    if (g->exported)
        return CUDA_SUCCESS;
    struct cs_seg **v = NULL;
    size_t n = parts_of(g, &v);
    int *fds = n ? malloc(n * sizeof *fds) : NULL;
    CUresult r = !fds                                  ? CUDA_ERROR_OUT_OF_MEMORY
                 : v[n - 1]->va + v[n - 1]->size - g->whole != g->whole_size
                     ? CUDA_ERROR_ILLEGAL_STATE /* (the parts tile it: cannot happen) */
                     : export_fds(v, n, fds);
    uint64_t key = r == CUDA_SUCCESS ? reg(fds, n, v[0]->size, g->whole_size) : 0;
    if (r == CUDA_SUCCESS && !key)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; r == CUDA_SUCCESS && i < n; i++) {
        v[i]->ipc_key = key;
        v[i]->unexport = unreg;
        cs_seg_mark_exported_locked(s, v[i]);
    }
    if (r == CUDA_SUCCESS) {
        char b[32];
        cs_info("GPU %d: %s at 0x%llx exported by CUDA IPC: it stays on the GPU (unswappable) "
                "until freed", g->dev, cs_format_size(g->whole_size, b, sizeof b),
                (unsigned long long)g->whole);
    }
    free(fds);
    free(v);
    return r;
}

CUresult cs_seg_export(CUdeviceptr ptr, cs_seg_reg_fn reg, void (*unreg)(uint64_t key),
                       struct cs_seg_export *out)
{
    struct cs_seg *g;
    int d = lock_dev_of(ptr, &g);
    if (d < 0)
        return CUDA_ERROR_INVALID_VALUE;
    struct cs_segs *s = &cs_segs[d];
    CUresult r = g && g->dev == d ? export_locked(s, g, reg, unreg) : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) {
        struct cs_seg *first = g->whole == g->va ? g : idx_find(g->whole);
        out->key = g->ipc_key;
        out->va = g->whole;
        out->size = g->whole_size;
        out->part = first ? first->size : g->size;
    }
    pthread_mutex_unlock(&s->mu);
    return r;
}

uint64_t cs_seg_exported(int dev)
{
    return atomic_load_explicit(&cs_segs[dev].exported, memory_order_relaxed);
}

bool cs_seg_lookup(CUdeviceptr ptr, CUdeviceptr *base, uint64_t *size, int *dev)
{
    bool ok = false;
    pthread_mutex_lock(&idx_mu);
    struct cs_seg *g = idx_find_locked(ptr);
    if (g && !g->chunk) {
        *base = g->whole;
        *size = g->whole_size;
        *dev = g->dev;
        ok = true;
    } else if (g) {
        unsigned u = (unsigned)((ptr - g->va) / CS_UNIT);
        if (bit_get(g->bits, u)) {
            unsigned first = u;
            while (first > 0 && !bit_get(chunk_starts(g), first))
                first--;
            unsigned n = 1;
            while (first + n < CS_CHUNK_UNITS && bit_get(g->bits, first + n) &&
                   !bit_get(chunk_starts(g), first + n))
                n++;
            *base = g->va + (CUdeviceptr)first * CS_UNIT;
            *size = (uint64_t)n * CS_UNIT;
            *dev = g->dev;
            ok = true;
        }
    }
    pthread_mutex_unlock(&idx_mu);
    return ok;
}

void cs_seg_counts(int dev, uint64_t *resident, uint64_t *swapped, uint64_t *reserved)
{
    struct cs_segs *s = &cs_segs[dev];
    *resident = atomic_load_explicit(&s->resident, memory_order_relaxed);
    *swapped = atomic_load_explicit(&s->swapped, memory_order_relaxed);
    *reserved = atomic_load_explicit(&s->reserved, memory_order_relaxed);
}

uint64_t cs_seg_backing(int dev)
{
    return atomic_load_explicit(&cs_segs[dev].backing, memory_order_relaxed);
}

bool cs_seg_stats(int dev, struct cs_seg_stats *out, bool try)
{
    struct cs_segs *s = &cs_segs[dev];
    if (try ? pthread_mutex_trylock(&s->mu) != 0 : pthread_mutex_lock(&s->mu) != 0)
        return false;
    out->backing = atomic_load_explicit(&s->backing, memory_order_relaxed);
    out->swap_out_bytes = s->swap_out_bytes;
    out->swap_out_ns = s->swap_out_ns;
    out->swap_outs = s->swap_outs;
    out->swap_in_bytes = s->swap_in_bytes;
    out->swap_in_ns = s->swap_in_ns;
    out->swap_ins = s->swap_ins;
    pthread_mutex_unlock(&s->mu);
    return true;
}

/* ---- the swap engine's context and stream ------------------------------------ */

/* Why the swap context or stream is not there yet, at debug level: the
 * callers retry (a grant every 100 ms) and report only a status. */
static bool not_ready(int dev, const char *step, CUresult r)
{
    cs_debug("GPU %d: no swap stream yet: %s failed (error %d)", dev, step, (int)r);
    return false;
}

bool cs_segs_ready_locked(struct cs_segs *s, int dev)
{
    if (s->ready)
        return true;
    CUdevice d;
    CUresult r = cs_real.cuDeviceGet(&d, dev);
    if (r != CUDA_SUCCESS)
        return not_ready(dev, "cuDeviceGet", r);
    /* Retained once: a retry after a later step failed must not retain
     * the primary context again (each retain is one more reference). */
    if (!s->pctx && (r = cs_real.cuDevicePrimaryCtxRetain(&s->pctx, d)) != CUDA_SUCCESS) {
        s->pctx = NULL;
        return not_ready(dev, "cuDevicePrimaryCtxRetain", r);
    }
    if ((r = cs_real.cuCtxPushCurrent_v2(s->pctx)) != CUDA_SUCCESS)
        return not_ready(dev, "cuCtxPushCurrent", r);
    r = cs_real.cuStreamCreate(&s->stream, CU_STREAM_NON_BLOCKING);
    CUcontext popped;
    cs_real.cuCtxPopCurrent_v2(&popped);
    if (r != CUDA_SUCCESS)
        return not_ready(dev, "cuStreamCreate", r);
    s->ready = true;
    return true;
}

/* ---- the pinner's hold-off ----------------------------------------------------- */

void cs_seg_hold_pinner_locked(struct cs_segs *s)
{
    s->pin_holdoff++;
    while (s->pinning)
        pthread_cond_wait(&s->pin_cv, &s->mu);
}

void cs_seg_release_pinner_locked(struct cs_segs *s)
{
    if (--s->pin_holdoff == 0)
        pthread_cond_broadcast(&s->pin_cv);
}

struct cs_seg *cs_seg_claim_unbacked_locked(struct cs_segs *s)
{
    while (s->pin_holdoff)
        pthread_cond_wait(&s->pin_cv, &s->mu);
    struct cs_seg *g = NULL;
    for (struct cs_seg *c = s->head; c && !g; c = c->next)
        if (c->state == CS_SEG_RESIDENT && !c->exported && !cs_backing_complete(&c->backing))
            g = c;
    s->pinning = g;
    return g;
}

void cs_seg_unclaim_locked(struct cs_segs *s, struct cs_seg *g, uint64_t pinned_before)
{
    atomic_fetch_add_explicit(&s->backing, g->backing.pinned - pinned_before,
                              memory_order_relaxed);
    s->pinning = NULL;
    pthread_cond_broadcast(&s->pin_cv);
}

void cs_seg_reset_after_fork(void)
{
    /* Device memory does not survive fork: the child starts empty. The
     * parent's segment objects are leaked in the child on purpose (freeing
     * them would touch driver state the child does not own). */
    pthread_mutex_init(&idx_mu, NULL);
    idx = NULL;
    idx_len = idx_cap = 0;
    atomic_store(&cs_seg_remaps, 0); /* no move of the parent's goes on here */
    for (int i = 0; i < CS_MAX_DEVICES; i++) {
        memset(&cs_segs[i], 0, sizeof cs_segs[i]);
        pthread_mutex_init(&cs_segs[i].mu, NULL);
        pthread_cond_init(&cs_segs[i].pin_cv, NULL);
        peer_count[i] = 0;
        atomic_store(&shareable[i], 0);
    }
}
