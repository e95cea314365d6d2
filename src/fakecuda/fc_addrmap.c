/* fc_addrmap.c: the process's address map: device allocations, pinned and
 * registered host memory, VMM mappings (the ranges the device can touch),
 * and VMM reservations (device address space that may be unmapped).
 *
 * Device pointers are host virtual addresses, so this map is what tells a
 * device pointer from a host one (unified addressing), what a kernel or a
 * copy may touch, and what cuPointerGetAttribute reports. Two arrays
 * sorted by start address, non-overlapping within each, binary searched.
 *
 * Locking: `lock` is a writer-preferring rwlock. Lookups and every device
 * access (a kernel body, a copy's memcpy) hold it shared; insertions,
 * removals and protection changes hold it exclusive, so an unmap can never
 * pull pages out from under a running copy: the access fails validation
 * instead of faulting.
 */
#include "fakecuda/fc_internal.h"

#include <stdlib.h>
#include <string.h>

struct rvec {
    struct fc_range *v;
    size_t n, cap;
};

/* Owned by this file; guarded by lock. */
static pthread_rwlock_t lock;
static pthread_once_t lock_once = PTHREAD_ONCE_INIT;
static struct rvec ranges;           /* accessible memory */
static struct rvec resv;             /* reservations (start, end only) */

static void lock_init(void)
{
    pthread_rwlockattr_t a;
    pthread_rwlockattr_init(&a);
    pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&lock, &a);
    pthread_rwlockattr_destroy(&a);
}

static void rd(void)
{
    pthread_once(&lock_once, lock_init);
    pthread_rwlock_rdlock(&lock);
}

static void wr(void)
{
    pthread_once(&lock_once, lock_init);
    pthread_rwlock_wrlock(&lock);
}

void fc_map_rdlock(void) { rd(); }
void fc_map_unlock(void) { pthread_rwlock_unlock(&lock); }

/* Index of the first range whose end > addr (the one that may contain it). */
static size_t lower(const struct rvec *r, uintptr_t addr)
{
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r->v[mid].end <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static const struct fc_range *containing(const struct rvec *r, uintptr_t addr)
{
    size_t i = lower(r, addr);
    return i < r->n && r->v[i].start <= addr ? &r->v[i] : NULL;
}

static CUresult vec_insert(struct rvec *r, const struct fc_range *x)
{
    size_t i = lower(r, x->start);
    if (i < r->n && r->v[i].start < x->end)
        return CUDA_ERROR_INVALID_VALUE;        /* overlaps */
    if (r->n == r->cap) {
        size_t ncap = r->cap ? r->cap * 2 : 64;
        struct fc_range *nv = realloc(r->v, ncap * sizeof *nv);
        if (!nv)
            return CUDA_ERROR_OUT_OF_MEMORY;
        r->v = nv;
        r->cap = ncap;
    }
    memmove(&r->v[i + 1], &r->v[i], (r->n - i) * sizeof *r->v);
    r->v[i] = *x;
    r->n++;
    return CUDA_SUCCESS;
}

static void vec_erase(struct rvec *r, size_t i)
{
    memmove(&r->v[i], &r->v[i + 1], (r->n - i - 1) * sizeof *r->v);
    r->n--;
}

CUresult fc_map_insert(const struct fc_range *x)
{
    wr();
    CUresult rc = vec_insert(&ranges, x);
    fc_map_unlock();
    return rc;
}

bool fc_map_remove(uintptr_t start, int kind, struct fc_range *out)
{
    bool found = false;
    wr();
    size_t i = lower(&ranges, start);
    if (i < ranges.n && ranges.v[i].start == start && ranges.v[i].kind == kind) {
        if (out)
            *out = ranges.v[i];
        vec_erase(&ranges, i);
        found = true;
    }
    fc_map_unlock();
    return found;
}

bool fc_map_find(uintptr_t addr, struct fc_range *out)
{
    rd();
    const struct fc_range *r = containing(&ranges, addr);
    if (r && out)
        *out = *r;
    fc_map_unlock();
    return r != NULL;
}

size_t fc_map_remove_span(uintptr_t p, size_t n, int kind, struct fc_range **out)
{
    *out = NULL;
    if (n == 0 || p + n < p)
        return 0;
    wr();
    size_t first = lower(&ranges, p), i = first;
    uintptr_t q = p;
    while (q < p + n && i < ranges.n && ranges.v[i].start == q
           && ranges.v[i].kind == kind && ranges.v[i].end <= p + n)
        q = ranges.v[i++].end;
    size_t cnt = i - first;
    struct fc_range *v = q == p + n ? malloc(cnt * sizeof *v) : NULL;
    if (v) {
        memcpy(v, &ranges.v[first], cnt * sizeof *v);
        memmove(&ranges.v[first], &ranges.v[i], (ranges.n - i) * sizeof *v);
        ranges.n -= cnt;
    }
    fc_map_unlock();
    *out = v;
    return v ? cnt : 0;
}

size_t fc_map_collect_ctx(struct fc_ctx *ctx, struct fc_range **out)
{
    rd();
    size_t n = 0;
    struct fc_range *v = malloc((ranges.n + 1) * sizeof *v);
    for (size_t i = 0; v && i < ranges.n; i++)
        if (ranges.v[i].ctx == ctx)
            v[n++] = ranges.v[i];
    fc_map_unlock();
    *out = v;
    return v ? n : 0;
}

bool fc_map_covered_locked(uintptr_t p, size_t n, unsigned prot)
{
    if (n == 0)
        return true;
    if (p + n < p)
        return false;
    uintptr_t end = p + n;
    size_t i = lower(&ranges, p);
    while (p < end) {
        if (i >= ranges.n)
            return false;
        const struct fc_range *r = &ranges.v[i];
        if (r->start > p || (r->prot & prot) != prot)
            return false;
        p = r->end;
        i++;
    }
    return true;
}

bool fc_map_covered(uintptr_t p, size_t n, unsigned prot)
{
    rd();
    bool ok = fc_map_covered_locked(p, n, prot);
    fc_map_unlock();
    return ok;
}

/* Which copy engine and link a copy uses follows where the memory is:
 * host-located VMM memory is host memory (over PCIe), as on the real
 * driver, even though it lies in device address space. */
bool fc_map_is_device(uintptr_t p)
{
    rd();
    const struct fc_range *r = containing(&ranges, p);
    bool dev = r ? r->dev_loc : containing(&resv, p) != NULL;
    fc_map_unlock();
    return dev;
}

/* A VMM mapping lies in a reservation, device address space, wherever its
 * memory is: a copy naming it is checked against the map when it runs
 * like a device side (never a bare memmove into a range that may be
 * unmapped by then). */
bool fc_map_in_vas_locked(uintptr_t p)
{
    const struct fc_range *r = containing(&ranges, p);
    return r ? r->dev_loc || r->kind == FC_R_VMM : containing(&resv, p) != NULL;
}

void fc_map_host_bytes(uintptr_t p, size_t n, uint64_t *host)
{
    *host = 0;
    rd();
    for (size_t i = lower(&ranges, p); i < ranges.n && ranges.v[i].start < p + n; i++)
        if (ranges.v[i].kind == FC_R_VMM && !ranges.v[i].dev_loc)
            *host += ranges.v[i].end - ranges.v[i].start;
    fc_map_unlock();
}

CUresult fc_map_set_prot(uintptr_t p, size_t n, unsigned prot)
{
    CUresult rc = CUDA_SUCCESS;
    uintptr_t end = p + n;
    wr();
    size_t first = lower(&ranges, p), i = first;
    /* Validate first: exactly covered by VMM mappings, starting at p. */
    for (uintptr_t q = p; q < end; i++) {
        if (i >= ranges.n || ranges.v[i].start != q || ranges.v[i].kind != FC_R_VMM
            || ranges.v[i].end > end) {
            rc = CUDA_ERROR_INVALID_VALUE;
            break;
        }
        q = ranges.v[i].end;
    }
    if (rc == CUDA_SUCCESS && n > 0)
        for (size_t j = first; j < i; j++)
            ranges.v[j].prot = prot;
    fc_map_unlock();
    return n == 0 ? CUDA_ERROR_INVALID_VALUE : rc;
}

CUresult fc_resv_insert(uintptr_t start, size_t size)
{
    struct fc_range x = { .start = start, .end = start + size, .dev_loc = true };
    wr();
    CUresult rc = vec_insert(&resv, &x);
    fc_map_unlock();
    return rc;
}

bool fc_resv_remove(uintptr_t start, size_t size)
{
    bool ok = false;
    wr();
    size_t i = lower(&resv, start);
    if (i < resv.n && resv.v[i].start == start && resv.v[i].end == start + size) {
        /* Refuse while mappings remain inside (cuMemAddressFree would
         * otherwise leave them dangling). */
        const struct fc_range *m = containing(&ranges, start);
        size_t j = lower(&ranges, start);
        if (!m && (j >= ranges.n || ranges.v[j].start >= start + size)) {
            vec_erase(&resv, i);
            ok = true;
        }
    }
    fc_map_unlock();
    return ok;
}

bool fc_resv_contains(uintptr_t p, size_t n)
{
    rd();
    const struct fc_range *r = containing(&resv, p);
    bool ok = r && n <= r->end - p;
    fc_map_unlock();
    return ok;
}

/* Forked child: the parent's ranges are not this process's device memory.
 * The arrays are abandoned (kept reachable) rather than freed. */
static struct rvec forsaken[2];
void fc_addrmap_reset(void)
{
    forsaken[0] = ranges;
    forsaken[1] = resv;
    memset(&ranges, 0, sizeof ranges);
    memset(&resv, 0, sizeof resv);
    lock_init();
}
