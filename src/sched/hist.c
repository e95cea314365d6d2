/* hist.c: see hist.h. */
#include "sched/hist.h"

/* 100 µs .. 60 s: a lease latency is µs when the GPU is free and up to a
 * whole quantum (cap 30 s by default) when it is not; a switch is ms. */
static const uint64_t bounds_ns[SD_HIST_BOUNDS] = {
    100000ull,    500000ull,     1000000ull,    5000000ull,    10000000ull,
    50000000ull,  100000000ull,  500000000ull,  1000000000ull, 2500000000ull,
    5000000000ull, 10000000000ull, 30000000000ull, 60000000000ull,
};

uint64_t sd_hist_bound_ns(size_t i)
{
    return i < SD_HIST_BOUNDS ? bounds_ns[i] : UINT64_MAX;
}

void sd_hist_add(struct sd_hist *h, uint64_t ns)
{
    size_t i = 0;
    while (i < SD_HIST_BOUNDS && ns > bounds_ns[i])
        i++;
    h->bucket[i]++;
    h->count++;
    h->sum_ns += ns;
}

uint64_t sd_hist_quantile_ns(const struct sd_hist *h, double q)
{
    if (h->count == 0)
        return 0;
    uint64_t want = (uint64_t)(q * (double)h->count + 0.999999);
    if (want == 0)
        want = 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < SD_HIST_BUCKETS; i++) {
        seen += h->bucket[i];
        if (seen >= want)
            return sd_hist_bound_ns(i);
    }
    return UINT64_MAX;
}
