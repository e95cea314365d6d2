/* hist.h: fixed-bucket latency histograms (lease latency, switch latency).
 *
 * The bounds are the same for every histogram so that the metrics page and
 * `cusharectl` can render any of them without knowing which it is, and so
 * that adding a sample is a short loop over a constant table: no allocation.
 * Buckets hold counts for (bound[i-1], bound[i]]; the last one is +Inf.
 */
#ifndef SD_HIST_H
#define SD_HIST_H

#include <stddef.h>
#include <stdint.h>

#define SD_HIST_BOUNDS 14
#define SD_HIST_BUCKETS (SD_HIST_BOUNDS + 1)

struct sd_hist {
    uint64_t count;
    uint64_t sum_ns;
    uint64_t bucket[SD_HIST_BUCKETS];
};

/* Upper bound of bucket i in nanoseconds (i < SD_HIST_BOUNDS). */
uint64_t sd_hist_bound_ns(size_t i);

void sd_hist_add(struct sd_hist *h, uint64_t ns);

/* The smallest bucket bound below which at least q (0..1) of the samples
 * lie; UINT64_MAX when it is the +Inf bucket, 0 when empty. */
uint64_t sd_hist_quantile_ns(const struct sd_hist *h, double q);

#endif
