/* mem.c: see mem.h.
 *
 * The record table is an open-addressing hash map with tombstones, grown
 * by doubling, under one mutex: allocation and free are not hot paths (the
 * frameworks cache their memory), and a plain lock keeps it obviously
 * correct. The quota itself is an atomic per device, so checking it never
 * waits for the table.
 */
#include "hook/mem.h"
#include "hook/config.h"
#include "hook/seg.h"
#include "common/log.h"
#include "common/util.h"

#include <stdlib.h>
#include <string.h>

struct rec {
    uintptr_t key;
    uint64_t bytes;
    CUcontext ctx;
    int16_t dev;
    uint8_t ns;    /* 0 = empty, enum cs_mem_ns, or TOMB */
};
#define TOMB 0xffu

static pthread_mutex_t tab_mu = PTHREAD_MUTEX_INITIALIZER;
/* Bytes per device that the swap engine cannot move (everything recorded
 * outside segments) are kept in cs_dev.mem.unswappable: written under
 * tab_mu with the records they sum; read without it by the client I/O
 * thread, which must never wait for a lock an allocating thread may hold
 * (see seg.h), and by seg.c's fit check. */

static void count_locked(const struct rec *r, int sign)
{
    if (r->ns == CS_MEM_SEG || r->ns == CS_MEM_VMM || r->dev < 0 || r->dev >= CS_MAX_DEVICES)
        return;
    if (sign > 0)
        atomic_fetch_add_explicit(&cs_devs[r->dev].mem.unswappable, r->bytes, memory_order_relaxed);
    else
        atomic_fetch_sub_explicit(&cs_devs[r->dev].mem.unswappable, r->bytes, memory_order_relaxed);
}
/* The scheduler's granted limit (TERMS): written by the thread that does
 * the handshake, read by allocating threads; one value for every GPU. */
static _Atomic uint64_t granted;

uint64_t cs_mem_limit(void)
{
    uint64_t g = atomic_load_explicit(&granted, memory_order_relaxed);
    uint64_t own = cs_cfg.mem_limit;
    return g && (!own || g < own) ? g : own;
}

void cs_mem_set_granted(uint64_t bytes)
{
    atomic_store_explicit(&granted, bytes, memory_order_relaxed);
}

static struct rec *tab;   /* guarded by tab_mu */
static size_t tab_cap;    /* power of two */
static size_t tab_used;   /* live + tombstones */

static size_t slot_of(uintptr_t key, unsigned ns, size_t cap)
{
    uint64_t x = (uint64_t)key ^ ((uint64_t)ns << 61);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

/* Rehashes into a table twice as large, or the same size when most of the
 * used slots are tombstones (many alloc/free cycles). */
static bool grow_locked(void)
{
    size_t live = 0;
    for (size_t i = 0; i < tab_cap; i++)
        live += tab[i].ns != 0 && tab[i].ns != TOMB;
    size_t ncap = tab_cap == 0 ? 1024 : (live * 4 > tab_cap ? tab_cap * 2 : tab_cap);
    struct rec *n = calloc(ncap, sizeof *n);
    if (!n)
        return false;
    for (size_t i = 0; i < tab_cap; i++) {
        if (tab[i].ns == 0 || tab[i].ns == TOMB)
            continue;
        size_t j = slot_of(tab[i].key, tab[i].ns, ncap);
        while (n[j].ns)
            j = (j + 1) & (ncap - 1);
        n[j] = tab[i];
    }
    free(tab);
    tab = n;
    tab_cap = ncap;
    tab_used = live;
    return true;
}

static struct rec *find_locked(unsigned ns, uintptr_t key)
{
    if (!tab_cap)
        return NULL;
    for (size_t i = slot_of(key, ns, tab_cap);; i = (i + 1) & (tab_cap - 1)) {
        if (tab[i].ns == 0)
            return NULL;
        if (tab[i].ns == ns && tab[i].key == key)
            return &tab[i];
    }
}

void cs_mem_record(enum cs_mem_ns ns, uintptr_t key, uint64_t bytes, int dev, CUcontext ctx)
{
    pthread_mutex_lock(&tab_mu);
    struct rec *r = find_locked(ns, key);
    if (r)
        count_locked(r, -1);
    if (!r) {
        if ((tab_used + 1) * 2 > tab_cap && !grow_locked()) {
            pthread_mutex_unlock(&tab_mu);
            cs_error("out of host memory for the allocation table: %llu bytes on GPU %d "
                     "are not tracked", (unsigned long long)bytes, dev);
            return;
        }
        size_t i = slot_of(key, ns, tab_cap);
        while (tab[i].ns != 0 && tab[i].ns != TOMB)
            i = (i + 1) & (tab_cap - 1);
        if (tab[i].ns == 0)
            tab_used++;
        r = &tab[i];
    }
    r->key = key;
    r->ns = (uint8_t)ns;
    r->bytes = bytes;
    r->dev = (int16_t)dev;
    r->ctx = ctx;
    count_locked(r, +1);
    pthread_mutex_unlock(&tab_mu);
}

bool cs_mem_find_ctx(enum cs_mem_ns ns, uintptr_t key, uint64_t *bytes, int *dev,
                     CUcontext *ctx)
{
    pthread_mutex_lock(&tab_mu);
    struct rec *r = find_locked(ns, key);
    if (r) {
        *bytes = r->bytes;
        *dev = r->dev;
        if (ctx)
            *ctx = r->ctx;
    }
    pthread_mutex_unlock(&tab_mu);
    return r != NULL;
}

bool cs_mem_find(enum cs_mem_ns ns, uintptr_t key, uint64_t *bytes, int *dev)
{
    return cs_mem_find_ctx(ns, key, bytes, dev, NULL);
}

bool cs_mem_forget(enum cs_mem_ns ns, uintptr_t key, uint64_t *bytes, int *dev)
{
    pthread_mutex_lock(&tab_mu);
    struct rec *r = find_locked(ns, key);
    if (r) {
        *bytes = r->bytes;
        *dev = r->dev;
        count_locked(r, -1);
        r->ns = TOMB;
    }
    pthread_mutex_unlock(&tab_mu);
    return r != NULL;
}

CUresult cs_mem_charge(struct cs_dev *d, uint64_t bytes, const char *what)
{
    uint64_t limit = cs_mem_limit();
    uint64_t cur = atomic_load_explicit(&d->mem.used, memory_order_relaxed);
    for (;;) {
        uint64_t next = cur + bytes;
        if (limit && (next > limit || next < cur)) {
            char a[32], l[32], u[32];
            cs_error("out of memory on GPU %d: %s of %s would exceed this job's limit of %s "
                     "(%s in use); %s",
                     d->ordinal, what, cs_format_size(bytes, a, sizeof a),
                     cs_format_size(limit, l, sizeof l), cs_format_size(cur, u, sizeof u),
                     limit == cs_cfg.mem_limit ? "raise CUSHARE_MEM_LIMIT / --mem-limit"
                                               : "the scheduler's grant for this user");
            atomic_fetch_add_explicit(&d->mem.ooms, 1, memory_order_relaxed);
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (atomic_compare_exchange_weak_explicit(&d->mem.used, &cur, next, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            uint64_t peak = atomic_load_explicit(&d->mem.peak, memory_order_relaxed);
            while (next > peak &&
                   !atomic_compare_exchange_weak_explicit(&d->mem.peak, &peak, next,
                                                          memory_order_relaxed,
                                                          memory_order_relaxed))
                ;
            atomic_fetch_add_explicit(&d->mem.allocs, 1, memory_order_relaxed);
            return CUDA_SUCCESS;
        }
    }
}

void cs_mem_uncharge(struct cs_dev *d, uint64_t bytes)
{
    uint64_t cur = atomic_load_explicit(&d->mem.used, memory_order_relaxed);
    uint64_t next;
    do
        next = cur >= bytes ? cur - bytes : 0;
    while (!atomic_compare_exchange_weak_explicit(&d->mem.used, &cur, next, memory_order_relaxed,
                                                  memory_order_relaxed));
}

void cs_mem_release(enum cs_mem_ns ns, uintptr_t key)
{
    uint64_t bytes;
    int dev;
    if (cs_mem_forget(ns, key, &bytes, &dev) && dev >= 0 && dev < CS_MAX_DEVICES)
        cs_mem_uncharge(&cs_devs[dev], bytes);
}

void cs_mem_release_ctx(CUcontext ctx)
{
    if (!ctx)
        return;
    /* Segment memory is ours (VMM), not the context's: free it as the
     * driver would have, after dropping tab_mu (lock order, locks.h). */
    size_t nseg = 0, cap = 0;
    CUdeviceptr *segs = NULL;
    pthread_mutex_lock(&tab_mu);
    for (size_t i = 0; i < tab_cap; i++) {
        struct rec *r = &tab[i];
        if (r->ns == 0 || r->ns == TOMB || r->ctx != ctx)
            continue;
        if (r->dev >= 0 && r->dev < CS_MAX_DEVICES)
            cs_mem_uncharge(&cs_devs[r->dev], r->bytes);
        count_locked(r, -1);
        if (r->ns == CS_MEM_SEG) {
            if (nseg == cap) {
                size_t ncap = cap ? cap * 2 : 64;
                CUdeviceptr *n = realloc(segs, ncap * sizeof *n);
                if (n) {
                    segs = n;
                    cap = ncap;
                }
            }
            if (nseg < cap)
                segs[nseg++] = (CUdeviceptr)r->key;
        }
        r->ns = TOMB;
    }
    pthread_mutex_unlock(&tab_mu);
    for (size_t i = 0; i < nseg; i++) {
        uint64_t b;
        int dv;
        cs_seg_free(segs[i], &b, &dv);
    }
    free(segs);
}

/* What the job sees. With a scheduler and swapping, the GPU is the job's
 * as if alone: its quota (or the whole device) minus what it allocated,
 * because the scheduler makes room for it by moving other jobs out (a
 * framework that sizes itself from free memory, like JAX's 75%
 * preallocation, must not shrink because a neighbour is resident). Without
 * them, the quota is an upper bound on what the driver says is free. */
void cs_mem_view(struct cs_dev *d, size_t *free_bytes, size_t *total_bytes)
{
    uint64_t limit = cs_mem_limit();
    pthread_mutex_lock(&d->mu);
    bool alone = cs_cfg.swap && d->lease.state != CS_LEASE_UNMANAGED && d->lease.state != CS_LEASE_DETACHED;
    pthread_mutex_unlock(&d->mu);
    if (!limit && !alone)
        return;
    uint64_t total = limit && *total_bytes > limit ? limit : *total_bytes;
    uint64_t used = atomic_load_explicit(&d->mem.used, memory_order_relaxed);
    uint64_t fr = total > used ? total - used : 0;
    if (!alone && fr > *free_bytes)
        fr = *free_bytes; /* other jobs may leave less than the quota */
    *total_bytes = (size_t)total;
    *free_bytes = (size_t)fr;
}

void cs_mem_fill_usage(struct cs_dev *d, struct cs_msg_usage *u)
{
    uint64_t res, swp, rsv;
    cs_seg_counts(d->ordinal, &res, &swp, &rsv);
    uint64_t fixed = atomic_load_explicit(&d->mem.unswappable, memory_order_relaxed);
    u->resident = res + fixed;
    u->swapped = swp;
    u->unswappable = fixed + cs_seg_exported(d->ordinal); /* exported: resident, pinned there */
    u->footprint = res + swp + rsv + fixed;
    u->submissions = atomic_load_explicit(&d->gate.subm, memory_order_relaxed) >> 32;
}

void cs_mem_reset_after_fork(void)
{
    /* The child inherits no device memory (CUDA allocations do not survive
     * fork), so it starts with an empty table. */
    pthread_mutex_init(&tab_mu, NULL);
    free(tab);
    tab = NULL;
    tab_cap = 0;
    tab_used = 0;
}
