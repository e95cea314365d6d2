/* vmm.c: the application's own VMM memory, made swappable (vmm.h). */
#include "hook/vmm.h"
#include "common/log.h"
#include "common/util.h"

#include <stdlib.h>
#include <string.h>

/* One cuMemSetAccess call as it applied to one mapping (clipped to it). */
struct access {
    CUdeviceptr va;
    uint64_t size;
    uint32_t n;
    CUmemAccessDesc desc[CS_MAX_DEVICES];
};

/* One cuMemMap of the handle by the application. */
struct mapping {
    CUdeviceptr va;
    uint64_t size, offset;
    struct cs_vmm *x;
    struct access *acc;   /* in call order; a call for the same range replaces */
    uint32_t nacc, capacc;
};

struct cs_vmm {
    uint64_t id;
    CUmemAllocationProp prop;
    uint64_t gran;        /* the driver's granularity for prop */
    struct cs_seg *seg;
    uint32_t hrefs;       /* cuMemCreate + retains - releases */
    /* The application's live mappings of it. Changed under segs.mu and
     * vmm_mu, so the swap engine reads them under segs.mu alone. */
    struct mapping **ml;
    size_t nmaps, capml;
};

/* Guarded by vmm_mu (see vmm.h). objs: by id, ascending (ids only grow);
 * maps: every mapping, by address. */
static pthread_mutex_t vmm_mu = PTHREAD_MUTEX_INITIALIZER;
static struct cs_vmm **objs;
static size_t n_objs, cap_objs;
static struct mapping **maps;
static size_t n_maps, cap_maps;
static uint64_t next_id = 1;

/* ---- tables (vmm_mu held) -------------------------------------------------- */

static size_t obj_lower_bound(uint64_t id)
{
    size_t lo = 0, hi = n_objs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (objs[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static struct cs_vmm *obj_find_locked(CUmemGenericAllocationHandle vh)
{
    if (!cs_vmm_is_virtual(vh))
        return NULL;
    uint64_t id = vh & ~CS_VMM_TAG_MASK;
    size_t i = obj_lower_bound(id);
    return i < n_objs && objs[i]->id == id ? objs[i] : NULL;
}

static void obj_remove_locked(struct cs_vmm *x)
{
    size_t i = obj_lower_bound(x->id);
    if (i < n_objs && objs[i] == x) {
        memmove(&objs[i], &objs[i + 1], (n_objs - i - 1) * sizeof *objs);
        n_objs--;
    }
}

/* First mapping ending after va. */
static size_t map_lower_bound(CUdeviceptr va)
{
    size_t lo = 0, hi = n_maps;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (maps[mid]->va + maps[mid]->size <= va)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static struct mapping *map_at_locked(CUdeviceptr ptr)
{
    size_t i = map_lower_bound(ptr);
    return i < n_maps && maps[i]->va <= ptr ? maps[i] : NULL;
}

static bool overlaps_locked(CUdeviceptr va, uint64_t size)
{
    size_t i = map_lower_bound(va);
    return i < n_maps && maps[i]->va < va + size;
}

static bool map_insert_locked(struct mapping *m)
{
    if (!cs_grow_array((void **)&maps, &cap_maps, n_maps, sizeof *maps))
        return false;
    size_t i = map_lower_bound(m->va);
    memmove(&maps[i + 1], &maps[i], (n_maps - i) * sizeof *maps);
    maps[i] = m;
    n_maps++;
    return true;
}

static void map_remove_locked(struct mapping *m)
{
    size_t i = map_lower_bound(m->va);
    if (i < n_maps && maps[i] == m) {
        memmove(&maps[i], &maps[i + 1], (n_maps - i - 1) * sizeof *maps);
        n_maps--;
    }
}

/* ---- the lock dance ------------------------------------------------------------
 * A call names a handle or an address; the segment lock of the memory's
 * device comes first, so look the device up, take its lock, then look
 * again (the object may have gone meanwhile). */

int cs_vmm_device(CUmemGenericAllocationHandle vh)
{
    pthread_mutex_lock(&vmm_mu);
    struct cs_vmm *x = obj_find_locked(vh);
    int dev = x && x->seg ? x->seg->dev : -1;
    pthread_mutex_unlock(&vmm_mu);
    return dev;
}

/* Locks segs.mu of the handle's device and vmm_mu; NULL (nothing locked)
 * if vh is not a live virtual handle. */
static struct cs_vmm *lock_handle(CUmemGenericAllocationHandle vh, struct cs_segs **sp)
{
    int dev = cs_vmm_device(vh);
    if (dev < 0)
        return NULL;
    struct cs_segs *s = &cs_segs[dev];
    pthread_mutex_lock(&s->mu);
    pthread_mutex_lock(&vmm_mu);
    struct cs_vmm *x = obj_find_locked(vh);
    if (!x || !x->seg || x->seg->dev != dev || x->hrefs == 0) {
        pthread_mutex_unlock(&vmm_mu);
        pthread_mutex_unlock(&s->mu);
        return NULL;
    }
    *sp = s;
    return x;
}

static void unlock_both(struct cs_segs *s)
{
    pthread_mutex_unlock(&vmm_mu);
    pthread_mutex_unlock(&s->mu);
}

static CUmemGenericAllocationHandle handle_of(const struct cs_vmm *x)
{
    return CS_VMM_TAG | x->id;
}

/* Frees x and its segment once neither a handle nor a mapping holds it. */
static void maybe_destroy_locked(struct cs_segs *s, struct cs_vmm *x)
{
    if (x->hrefs > 0 || x->nmaps > 0)
        return;
    obj_remove_locked(x);
    /* A piece being pinned into its backing lands first. The wait releases
     * segs.mu only; nothing else can reach x without vmm_mu, held here. */
    bool held = s->pinning == x->seg;
    if (held)
        cs_seg_hold_pinner_locked(s);
    cs_seg_destroy_locked(s, x->seg);
    if (held)
        cs_seg_release_pinner_locked(s);
    free(x->ml);
    free(x);
}

/* ---- placing the memory (the swap engine, segs.mu held) -------------------- */

static CUresult replay_access(const struct mapping *m)
{
    for (uint32_t i = 0; i < m->nacc; i++) {
        CUresult r = cs_real.cuMemSetAccess(m->acc[i].va, m->acc[i].size, m->acc[i].desc,
                                            m->acc[i].n);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}

/* The segment kind (seg.h): the application's properties. */
static CUresult vmm_create_locked(struct cs_seg *g, CUmemGenericAllocationHandle *h)
{
    struct cs_vmm *x = g->owner;
    return cs_real.cuMemCreate(h, g->size, &x->prop, 0);
}

/* Shows g at the shadow range (the swap engine's copies), for its device. */
static CUresult map_shadow(struct cs_seg *g)
{
    CUresult r = cs_seg_map_range_locked(g, g->va, g->size, 0);
    if (r != CUDA_SUCCESS)
        return r;
    CUmemAccessDesc a;
    memset(&a, 0, sizeof a);
    a.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    a.location.id = g->dev;
    a.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    r = cs_real.cuMemSetAccess(g->va, g->size, &a, 1);
    if (r != CUDA_SUCCESS)
        cs_seg_unmap_range_locked(g, g->va, g->size, 0);
    return r;
}

static CUresult map_one(const struct cs_seg *g, const struct mapping *m)
{
    return cs_seg_map_range_locked(g, m->va, m->size, m->offset);
}

static CUresult unmap_one(const struct cs_seg *g, const struct mapping *m)
{
    return cs_seg_unmap_range_locked(g, m->va, m->size, m->offset);
}

/* Shows g at the first n of x's mappings with their access; *done: how
 * many were mapped (also on failure). */
static CUresult map_app(struct cs_seg *g, struct cs_vmm *x, size_t n, size_t *done)
{
    CUresult r = CUDA_SUCCESS;
    *done = 0;
    for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
        struct mapping *m = x->ml[i];
        r = map_one(g, m);
        if (r == CUDA_SUCCESS) {
            *done = i + 1;
            r = replay_access(m);
        }
    }
    return r;
}

/* The segment kind (seg.h): shows what g->at names at the shadow range and
 * at every mapping of the application's, as it made them. */
static CUresult vmm_map_locked(struct cs_seg *g)
{
    struct cs_vmm *x = g->owner;
    CUresult r = map_shadow(g);
    if (r != CUDA_SUCCESS)
        return r;
    size_t done;
    r = map_app(g, x, x->nmaps, &done);
    if (r != CUDA_SUCCESS) {
        for (size_t i = 0; i < done; i++)
            unmap_one(g, x->ml[i]);
        cs_seg_unmap_range_locked(g, g->va, g->size, 0);
    }
    return r;
}

/* Unmaps every place, the application's mappings first; a refusal maps
 * back what was undone (seg.h). */
static CUresult vmm_unmap_locked(struct cs_seg *g)
{
    struct cs_vmm *x = g->owner;
    CUresult r = CUDA_SUCCESS;
    size_t undone = 0;
    while (undone < x->nmaps && (r = unmap_one(g, x->ml[undone])) == CUDA_SUCCESS)
        undone++;
    if (undone == x->nmaps && (r = cs_seg_unmap_range_locked(g, g->va, g->size, 0)) ==
                                  CUDA_SUCCESS)
        return CUDA_SUCCESS;
    size_t done;
    if (map_app(g, x, undone, &done) != CUDA_SUCCESS)
        cs_error("GPU %d: the driver refused to unmap memory and then to map it back: %zu of "
                 "its %zu mappings are gone", g->dev, undone - done, x->nmaps);
    return r;
}

static const struct cs_seg_kind vmm_kind = {vmm_create_locked, vmm_map_locked, vmm_unmap_locked};

/* ---- the application's calls ------------------------------------------------- */

/* Properties the driver has accepted or refused, with their granularity,
 * found by creating one granule: memory made while the job does not hold
 * the GPU is created only at the grant, and a property the driver refuses
 * (PyTorch asks for FABRIC handles first and falls back on NOT_PERMITTED)
 * must be refused at cuMemCreate, not at every restore after. Guarded by
 * vmm_mu. */
#define PROBES 16
static struct probe {
    CUmemAllocationProp prop;
    CUresult r;
    size_t gran;
} probes[PROBES];
static unsigned n_probes;

/* The driver's verdict on prop and its granularity (*gran, on success). */
static CUresult check_prop(const CUmemAllocationProp *prop, size_t *gran)
{
    pthread_mutex_lock(&vmm_mu);
    for (unsigned i = 0; i < n_probes; i++) {
        if (memcmp(&probes[i].prop, prop, sizeof *prop) == 0) {
            CUresult r = probes[i].r;
            *gran = probes[i].gran;
            pthread_mutex_unlock(&vmm_mu);
            return r;
        }
    }
    pthread_mutex_unlock(&vmm_mu);
    CUresult r = cs_real.cuMemGetAllocationGranularity(gran, prop,
                                                       CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != CUDA_SUCCESS)
        return r;
    CUmemGenericAllocationHandle h;
    r = cs_real.cuMemCreate(&h, *gran, prop, 0);
    if (r == CUDA_SUCCESS)
        cs_real.cuMemRelease(h);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) { /* cannot tell on a full GPU: the real create will */
        cs_debug("GPU %d: no room to try these VMM properties: the allocation will tell",
                 prop->location.id);
        return CUDA_SUCCESS;
    }
    pthread_mutex_lock(&vmm_mu);
    if (n_probes < PROBES)
        probes[n_probes++] = (struct probe){*prop, r, *gran};
    pthread_mutex_unlock(&vmm_mu);
    return r;
}

CUresult cs_vmm_create(struct cs_dev *d, CUmemGenericAllocationHandle *out, size_t size,
                       const CUmemAllocationProp *prop)
{
    size_t gran = 0;
    CUresult r = check_prop(prop, &gran);
    if (r != CUDA_SUCCESS)
        return r;
    if (size == 0 || gran == 0 || size % gran)
        return CUDA_ERROR_INVALID_VALUE;
    struct cs_vmm *x = calloc(1, sizeof *x);
    if (!x)
        return CUDA_ERROR_OUT_OF_MEMORY;
    x->prop = *prop;
    x->gran = gran;
    x->hrefs = 1;
    /* In the table before its segment exists (seg NULL: not found by
     * lookups), so that no failure after the segment needs undoing here. */
    pthread_mutex_lock(&vmm_mu);
    bool ok = cs_grow_array((void **)&objs, &cap_objs, n_objs, sizeof *objs);
    if (ok) {
        x->id = next_id++;
        objs[n_objs++] = x; /* ids ascend: the end is its place */
    }
    pthread_mutex_unlock(&vmm_mu);
    if (!ok) {
        free(x);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct cs_seg *g = NULL;
    r = cs_seg_create_kind(d, size, &vmm_kind, x, &g);
    pthread_mutex_lock(&vmm_mu);
    if (r == CUDA_SUCCESS)
        x->seg = g;
    else
        obj_remove_locked(x);
    pthread_mutex_unlock(&vmm_mu);
    if (r != CUDA_SUCCESS) {
        free(x);
        return r;
    }
    *out = handle_of(x);
    return CUDA_SUCCESS;
}

CUresult cs_vmm_release(CUmemGenericAllocationHandle vh, uint64_t *size)
{
    struct cs_segs *s;
    struct cs_vmm *x = lock_handle(vh, &s);
    if (!x)
        return CUDA_ERROR_INVALID_VALUE;
    *size = x->seg->size;
    x->hrefs--;
    maybe_destroy_locked(s, x); /* or at its last unmap */
    unlock_both(s);
    return CUDA_SUCCESS;
}

static bool aligned(uint64_t v, uint64_t gran)
{
    return v % gran == 0;
}

CUresult cs_vmm_map(CUdeviceptr va, size_t size, size_t offset, CUmemGenericAllocationHandle vh)
{
    struct cs_segs *s;
    struct cs_vmm *x = lock_handle(vh, &s);
    if (!x)
        return CUDA_ERROR_INVALID_VALUE;
    struct cs_seg *g = x->seg;
    CUresult r = CUDA_SUCCESS;
    struct mapping *m = NULL;
    if (size == 0 || offset > g->size || size > g->size - offset || !aligned(va, x->gran) ||
        !aligned(size, x->gran) || !aligned(offset, x->gran) || overlaps_locked(va, size))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (!(m = calloc(1, sizeof *m)) ||
             !cs_grow_array((void **)&x->ml, &x->capml, x->nmaps, sizeof *x->ml))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        *m = (struct mapping){.va = va, .size = size, .offset = offset, .x = x};
        /* Mapped now to whatever the memory's addresses show (the GPU,
         * or host memory while it is not there); the application's
         * cuMemSetAccess follows. */
        r = map_one(g, m);
        if (r == CUDA_SUCCESS && !map_insert_locked(m)) {
            unmap_one(g, m);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (r == CUDA_SUCCESS)
            x->ml[x->nmaps++] = m;
    }
    if (r != CUDA_SUCCESS)
        free(m);
    unlock_both(s);
    return r;
}

/* Locks the segs.mu of the mapping at exactly mva, and vmm_mu; the mapping
 * or NULL (then only vmm_mu is held). Called with vmm_mu held. */
static struct mapping *relock_mapping(CUdeviceptr mva, struct cs_segs **sp)
{
    struct mapping *m = map_at_locked(mva);
    if (!m || m->va != mva)
        return NULL;
    struct cs_segs *s = &cs_segs[m->x->seg->dev];
    pthread_mutex_unlock(&vmm_mu);
    pthread_mutex_lock(&s->mu);
    pthread_mutex_lock(&vmm_mu);
    m = map_at_locked(mva);
    if (!m || m->va != mva || &cs_segs[m->x->seg->dev] != s) {
        pthread_mutex_unlock(&s->mu);
        return NULL;
    }
    *sp = s;
    return m;
}

/* The driver's unmap of m (nothing when nothing is shown there). */
static CUresult unmap_app_locked(const struct mapping *m)
{
    return unmap_one(m->x->seg, m);
}

/* Forgets m (unmapped already, or its range being freed). */
static void drop_mapping_locked(struct cs_segs *s, struct mapping *m)
{
    struct cs_vmm *x = m->x;
    map_remove_locked(m);
    for (size_t i = 0; i < x->nmaps; i++) {
        if (x->ml[i] == m) {
            x->ml[i] = x->ml[--x->nmaps];
            break;
        }
    }
    free(m->acc);
    free(m);
    maybe_destroy_locked(s, x);
}

/* The next of our mappings overlapping [cur, end), or NULL (vmm_mu held). */
static struct mapping *next_in_range(CUdeviceptr cur, CUdeviceptr end)
{
    size_t i = map_lower_bound(cur);
    return i < n_maps && maps[i]->va < end ? maps[i] : NULL;
}

static void keep_first_error(CUresult *r, CUresult e)
{
    if (*r == CUDA_SUCCESS)
        *r = e;
}

void cs_vmm_forget_range(CUdeviceptr va, size_t size)
{
    CUdeviceptr end = va + size;
    pthread_mutex_lock(&vmm_mu);
    for (struct mapping *m; (m = next_in_range(va, end));) {
        struct cs_segs *s;
        CUdeviceptr mva = m->va;
        if ((m = relock_mapping(mva, &s))) { /* else another thread dropped it */
            unmap_app_locked(m); /* refused: the driver's free of the range says so */
            drop_mapping_locked(s, m);
            pthread_mutex_unlock(&s->mu);
        }
    }
    pthread_mutex_unlock(&vmm_mu);
}

bool cs_vmm_unmap(CUdeviceptr va, size_t size, CUresult *r)
{
    CUdeviceptr end = va + size, cur = va;
    pthread_mutex_lock(&vmm_mu);
    if (!next_in_range(va, end)) {
        pthread_mutex_unlock(&vmm_mu);
        return false;
    }
    *r = CUDA_SUCCESS;
    while (cur < end) {
        struct mapping *m = next_in_range(cur, end);
        CUdeviceptr gap_end = m ? (m->va > cur ? m->va : cur) : end;
        if (gap_end > cur) { /* someone else's mapping: the driver's */
            pthread_mutex_unlock(&vmm_mu);
            keep_first_error(r, cs_real.cuMemUnmap(cur, gap_end - cur));
            pthread_mutex_lock(&vmm_mu);
            cur = gap_end;
            continue;
        }
        if (m->va < va || m->va + m->size > end) { /* a mapping is unmapped whole */
            keep_first_error(r, CUDA_ERROR_INVALID_VALUE);
            cur = m->va + m->size;
            continue;
        }
        CUdeviceptr next = m->va + m->size;
        struct cs_segs *s;
        if ((m = relock_mapping(m->va, &s))) {
            /* Refused: the mapping stays, known to both, and the caller
             * hears why (it used to be forgotten while still mapped). */
            CUresult e = unmap_app_locked(m);
            if (e == CUDA_SUCCESS)
                drop_mapping_locked(s, m);
            keep_first_error(r, e);
            pthread_mutex_unlock(&s->mu);
        }
        cur = next;
    }
    pthread_mutex_unlock(&vmm_mu);
    return true;
}

/* Records one access call on m, clipped to [a, b): replaces an earlier
 * call for the same range (a program re-granting access does not grow
 * the list). */
static CUresult record_access(struct mapping *m, CUdeviceptr a, CUdeviceptr b,
                              const CUmemAccessDesc *desc, size_t count)
{
    struct access *slot = NULL;
    for (uint32_t i = 0; i < m->nacc && !slot; i++)
        if (m->acc[i].va == a && m->acc[i].size == b - a)
            slot = &m->acc[i];
    if (!slot) {
        size_t cap = m->capacc;
        if (!cs_grow_array((void **)&m->acc, &cap, m->nacc, sizeof *m->acc))
            return CUDA_ERROR_OUT_OF_MEMORY;
        m->capacc = (uint32_t)cap;
        slot = &m->acc[m->nacc++];
    }
    slot->va = a;
    slot->size = b - a;
    slot->n = (uint32_t)count;
    memcpy(slot->desc, desc, count * sizeof *desc);
    return CUDA_SUCCESS;
}

bool cs_vmm_set_access(CUdeviceptr va, size_t size, const CUmemAccessDesc *desc, size_t count,
                       CUresult *r)
{
    CUdeviceptr end = va + size, cur = va;
    pthread_mutex_lock(&vmm_mu);
    if (!next_in_range(va, end)) {
        pthread_mutex_unlock(&vmm_mu);
        return false;
    }
    *r = CUDA_SUCCESS;
    if (!desc || count == 0 || count > CS_MAX_DEVICES) {
        pthread_mutex_unlock(&vmm_mu);
        *r = CUDA_ERROR_INVALID_VALUE;
        return true;
    }
    while (cur < end) {
        struct mapping *m = next_in_range(cur, end);
        CUdeviceptr gap_end = m ? (m->va > cur ? m->va : cur) : end;
        if (gap_end > cur) {
            pthread_mutex_unlock(&vmm_mu);
            keep_first_error(r, cs_real.cuMemSetAccess(cur, gap_end - cur, desc, count));
            pthread_mutex_lock(&vmm_mu);
            cur = gap_end;
            continue;
        }
        CUdeviceptr b = m->va + m->size < end ? m->va + m->size : end;
        struct cs_segs *s;
        if ((m = relock_mapping(m->va, &s))) {
            /* Applied now when mapped (the driver checks it), recorded
             * either way for the next placement. */
            CUresult e = m->x->seg->at != CS_AT_NONE
                             ? cs_real.cuMemSetAccess(cur, b - cur, desc, count)
                             : CUDA_SUCCESS;
            if (e == CUDA_SUCCESS)
                e = record_access(m, cur, b, desc, count);
            keep_first_error(r, e);
            pthread_mutex_unlock(&s->mu);
        }
        cur = b;
    }
    pthread_mutex_unlock(&vmm_mu);
    return true;
}

/* Locks the segs.mu and vmm_mu of the mapping containing ptr when its
 * memory is not on the GPU; NULL (nothing locked) otherwise. */
static struct mapping *lock_absent(CUdeviceptr ptr, struct cs_segs **sp)
{
    pthread_mutex_lock(&vmm_mu);
    struct mapping *m = map_at_locked(ptr);
    if (m && (m = relock_mapping(m->va, sp)) && m->x->seg->state != CS_SEG_RESIDENT)
        return m;
    if (m)
        pthread_mutex_unlock(&(*sp)->mu);
    pthread_mutex_unlock(&vmm_mu);
    return NULL;
}

bool cs_vmm_get_access(unsigned long long *flags, const CUmemLocation *loc, CUdeviceptr va,
                       CUresult *r)
{
    if (!flags || !loc)
        return false;
    struct cs_segs *s;
    struct mapping *m = lock_absent(va, &s);
    if (!m)
        return false; /* placed (the driver knows) or not ours */
    unsigned long long f = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    for (uint32_t i = 0; i < m->nacc; i++) {
        const struct access *a = &m->acc[i];
        if (va < a->va || va >= a->va + a->size)
            continue;
        for (uint32_t k = 0; k < a->n; k++)
            if (a->desc[k].location.type == loc->type && a->desc[k].location.id == loc->id)
                f = a->desc[k].flags;
    }
    unlock_both(s);
    *flags = f;
    *r = CUDA_SUCCESS;
    return true;
}

bool cs_vmm_absent_mapping(CUdeviceptr ptr, CUdeviceptr *base, uint64_t *size, int *dev)
{
    struct cs_segs *s;
    struct mapping *m = lock_absent(ptr, &s);
    if (!m)
        return false;
    *base = m->va;
    *size = m->size;
    *dev = m->x->seg->dev;
    unlock_both(s);
    return true;
}

bool cs_vmm_retain(CUmemGenericAllocationHandle *out, CUdeviceptr addr)
{
    pthread_mutex_lock(&vmm_mu);
    struct mapping *m = map_at_locked(addr);
    struct cs_segs *s;
    if (!m || !(m = relock_mapping(m->va, &s))) {
        pthread_mutex_unlock(&vmm_mu);
        return false;
    }
    m->x->hrefs++;
    *out = handle_of(m->x);
    unlock_both(s);
    return true;
}

CUresult cs_vmm_props(CUmemAllocationProp *prop, CUmemGenericAllocationHandle vh)
{
    pthread_mutex_lock(&vmm_mu);
    struct cs_vmm *x = obj_find_locked(vh);
    bool ok = x && x->seg && x->hrefs > 0;
    if (ok)
        *prop = x->prop;
    pthread_mutex_unlock(&vmm_mu);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cs_vmm_pin_real(CUmemGenericAllocationHandle vh, CUmemGenericAllocationHandle *real)
{
    struct cs_segs *s;
    struct cs_vmm *x = lock_handle(vh, &s);
    if (!x)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_ERROR_ILLEGAL_STATE;
    if (x->seg->state == CS_SEG_RESIDENT) {
        cs_seg_mark_exported_locked(s, x->seg);
        *real = x->seg->h;
        r = CUDA_SUCCESS;
    }
    unlock_both(s);
    return r;
}

CUresult cs_vmm_export(void *shareable, CUmemGenericAllocationHandle vh,
                       CUmemAllocationHandleType type, unsigned long long flags)
{
    struct cs_segs *s;
    struct cs_vmm *x = lock_handle(vh, &s);
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    if (x) {
        r = x->seg->state == CS_SEG_RESIDENT
                ? cs_real.cuMemExportToShareableHandle(shareable, x->seg->h, type, flags)
                : CUDA_ERROR_ILLEGAL_STATE;
        if (r == CUDA_SUCCESS)
            cs_seg_mark_exported_locked(s, x->seg);
        unlock_both(s);
    }
    return r;
}

void cs_vmm_reset_after_fork(void)
{
    /* Device memory does not survive fork: the parent's objects are left
     * to the parent (leaked here, as seg.c leaks its segments). */
    pthread_mutex_init(&vmm_mu, NULL);
    objs = NULL;
    n_objs = cap_objs = 0;
    maps = NULL;
    n_maps = cap_maps = 0;
    n_probes = 0;
}
