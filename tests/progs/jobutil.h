/* jobutil.h: what the driver-API test jobs (cs_job, cs_graphjob) share
 * besides the kernels (fckern.h): their pattern's mixing function, clocks
 * and option parsing.
 */
#ifndef JOBUTIL_H
#define JOBUTIL_H

#include <stdint.h>

/* A 64-to-32-bit mix (murmur3's finalizer): the jobs' seeded patterns, the
 * same on every machine. */
uint32_t ju_mix32(uint64_t x);

/* CLOCK_MONOTONIC, the clock of FAKECUDA_TRACE. */
uint64_t ju_now_ns(void);
uint64_t ju_now_ms(void);
void ju_sleep_ms(uint64_t ms);

/* s as a non-negative decimal integer; otherwise says what `prog`'s
 * option `opt` needs and exits with status 2 (a usage error). */
uint64_t ju_parse_u64(const char *prog, const char *s, const char *opt);

#endif
