/* api.c: include/cushare.h, the client API. */
#include "cushare.h"
#include "hook/config.h"
#include "hook/device.h"
#include "hook/lease.h"
#include "hook/mem.h"
#include "hook/seg.h"

#include <stddef.h>
#include <string.h>

#define CUSHARE_VERSION_STRING "0.1.0"

/* The enums must agree: the public one is a stable copy of the internal. */
_Static_assert(CUSHARE_LEASE_HELD == (int)CS_LEASE_HELD, "lease state numbering");
_Static_assert(CUSHARE_LEASE_REVOKING == (int)CS_LEASE_REVOKING, "lease state numbering");

/* The struct only ever grows at its end: a caller built against an older,
 * shorter version gets the fields it knows (out->size says how many bytes),
 * a newer library never writes past them. */
#define STATS_MIN_SIZE offsetof(struct cushare_stats, ooms) + sizeof(unsigned long long)

static void fill_stats(int device, struct cushare_stats *out);

CS_EXPORT int cushare_get_stats(int device, struct cushare_stats *out)
{
    if (!out || out->size < STATS_MIN_SIZE || device < 0 || device >= CS_MAX_DEVICES)
        return -1;
    struct cushare_stats full;
    fill_stats(device, &full);
    size_t n = out->size < sizeof full ? out->size : sizeof full;
    memcpy(out, &full, n);
    out->size = (unsigned)n;
    return 0;
}

static void fill_stats(int device, struct cushare_stats *out)
{
    struct cs_dev *d = &cs_devs[device];
    memset(out, 0, sizeof *out);
    out->size = sizeof *out;
    out->device = device;
    pthread_mutex_lock(&d->mu);
    out->state = (int)d->lease.state;
    out->lease_id = d->lease.id;
    out->grants = d->stats.grants;
    out->revokes = d->stats.revokes;
    out->wait_ns = d->stats.wait_ns;
    out->drain_ns = d->stats.drain_ns;
    out->threads_waiting = (unsigned long long)(d->lease.waiters + d->lease.pairs);
    pthread_mutex_unlock(&d->mu);
    out->submissions = atomic_load(&d->gate.subm) >> 32;
    out->mem_used = atomic_load(&d->mem.used);
    out->mem_peak = atomic_load(&d->mem.peak);
    out->mem_limit = cs_mem_limit(); /* CUSHARE_MEM_LIMIT or the scheduler's grant */
    out->allocs = atomic_load(&d->mem.allocs);
    out->ooms = atomic_load(&d->mem.ooms);
    uint64_t res, swp, rsv;
    cs_seg_counts(device, &res, &swp, &rsv);
    out->mem_resident = res;
    out->mem_swapped = swp;
    out->mem_reserved = rsv;
    struct cs_msg_usage u;
    cs_mem_fill_usage(d, &u); /* what the scheduler is told, derived once */
    out->mem_unswappable = u.unswappable;
    struct cs_seg_stats st;
    cs_seg_stats(device, &st, false);
    out->mem_pinned = st.backing;
    out->swap_out_bytes = st.swap_out_bytes;
    out->swap_out_ns = st.swap_out_ns;
    out->swap_outs = st.swap_outs;
    out->swap_in_bytes = st.swap_in_bytes;
    out->swap_in_ns = st.swap_in_ns;
    out->swap_ins = st.swap_ins;
    CUcontext c = NULL;
    CUdevice cur;
    size_t f, t;
    if (cs_real_ready() && cs_real.cuCtxGetCurrent(&c) == CUDA_SUCCESS && c &&
        cs_real.cuCtxGetDevice(&cur) == CUDA_SUCCESS && cur == device &&
        cs_real.cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS) {
        out->device_free = f;
        out->device_total = t;
    }
}

CS_EXPORT int cushare_hint(int device, int hint, unsigned expected_us)
{
    if (device < 0 || device >= CS_MAX_DEVICES || hint != CUSHARE_HINT_WORK_SOON)
        return -1;
    cs_lease_hint(&cs_devs[device], expected_us > 1000000u ? 1000000u : expected_us);
    return 0;
}

CS_EXPORT const char *cushare_version(void)
{
    return CUSHARE_VERSION_STRING;
}
