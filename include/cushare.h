/* cushare.h: the small client API of libcushare.so.
 *
 * A program running under cushare (LD_PRELOAD=libcushare.so, or through
 * cushare-run) may ask the interposer how it is being scheduled. Programs
 * that must also run without cushare should look the functions up with
 * dlsym(RTLD_DEFAULT, "cushare_get_stats") rather than link against them.
 */
#ifndef CUSHARE_H
#define CUSHARE_H

#ifdef __cplusplus
extern "C" {
#endif

#define CUSHARE_API_VERSION 1

/* The lease of one GPU as this process sees it. */
enum cushare_lease_state {
    CUSHARE_LEASE_UNUSED = 0,    /* the process has not used this GPU */
    CUSHARE_LEASE_UNMANAGED = 1, /* no scheduler: the GPU is used freely */
    CUSHARE_LEASE_IDLE = 2,      /* scheduled; not holding the GPU */
    CUSHARE_LEASE_WAITING = 3,   /* scheduled; waiting for the GPU */
    CUSHARE_LEASE_HELD = 4,      /* scheduled; holding the GPU */
    CUSHARE_LEASE_REVOKING = 5,  /* scheduled; finishing work to hand it over */
};

struct cushare_stats {
    unsigned int size;                /* set by the caller: sizeof(struct cushare_stats) */
    int device;                       /* CUDA device ordinal */
    int state;                        /* enum cushare_lease_state */
    int reserved;
    unsigned long long lease_id;
    unsigned long long submissions;   /* calls that put work on the GPU */
    unsigned long long grants;        /* leases received */
    unsigned long long revokes;       /* leases given back on request */
    unsigned long long wait_ns;       /* time threads spent waiting for the lease */
    unsigned long long drain_ns;      /* time spent finishing work after revokes */
    unsigned long long mem_used;      /* device memory allocated now, bytes */
    unsigned long long mem_peak;
    unsigned long long mem_limit;     /* 0 = no limit */
    unsigned long long allocs;        /* allocations counted */
    unsigned long long ooms;          /* allocations refused by the limit */
    /* swappable memory (plain allocations, VMM-backed) */
    unsigned long long mem_resident;  /* on the GPU now */
    unsigned long long mem_swapped;   /* held in host memory now */
    unsigned long long mem_reserved;  /* allocated, not placed yet */
    unsigned long long mem_pinned;    /* host backing held (pinned) */
    unsigned long long swap_out_bytes, swap_out_ns, swap_outs;
    unsigned long long swap_in_bytes, swap_in_ns, swap_ins;
    /* The driver's own view of the device (all processes), when the calling
     * thread's current context is on this device; else 0. cuMemGetInfo
     * under cushare shows the job's view instead. */
    unsigned long long device_free, device_total;
    /* Device memory that never leaves the GPU: allocations cushare cannot
     * move (pools, the app's own cuMemCreate) and swappable memory exported
     * by CUDA IPC (part of mem_resident). */
    unsigned long long mem_unswappable;
    /* Application threads that wait for this GPU's lease now (blocked at
     * its gate, alone or waiting for it with another GPU's). */
    unsigned long long threads_waiting;
};

/* Fills *out for the given device ordinal. Set out->size to the size of the
 * struct you were built with: fields are only ever added at the end, so an
 * older caller gets the fields it knows, and out->size comes back as the
 * number of bytes filled. Returns 0, or -1 if the device is out of range or
 * out->size is smaller than the first version of the struct (through ooms). */
int cushare_get_stats(int device, struct cushare_stats *out);

/* Early-switch hints (docs/priority.md). */
enum cushare_hint {
    CUSHARE_HINT_WORK_SOON = 1, /* latency-critical work comes in about expected_us */
};

/* Tells cushare that this process will submit work to GPU `device` in about
 * expected_us microseconds (at most 1 s). Only a latency-critical job that
 * is being gated beside best-effort work acts on it: it asks for the GPU
 * now, so that the best-effort job's drain overlaps the request's own
 * preparation, and keeps the GPU until expected_us from now plus the usual
 * linger. Elsewhere (timeslices in use, no scheduler, exclusive mode)
 * it does nothing. Never blocks; costs one message at most. Returns 0, or
 * -1 for a bad device or hint. */
int cushare_hint(int device, int hint, unsigned expected_us);

/* The library's version, e.g. "0.1.0". */
const char *cushare_version(void);

#ifdef __cplusplus
}
#endif

#endif
