/* jobutil.c: see jobutil.h. */
#include "jobutil.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

uint32_t ju_mix32(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (uint32_t)x;
}

uint64_t ju_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t ju_now_ms(void)
{
    return ju_now_ns() / 1000000;
}

void ju_sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

uint64_t ju_parse_u64(const char *prog, const char *s, const char *opt)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || s[0] == '-') {
        fprintf(stderr, "%s: %s needs a non-negative integer, got '%s'\n", prog, opt, s);
        exit(2);
    }
    return v;
}
