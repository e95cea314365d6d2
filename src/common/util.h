/* util.h: small helpers shared by the hook, the daemon and the tools:
 * sizes, clocks, GPU UUID text, priority names. Pure libc. */
#ifndef CS_UTIL_H
#define CS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define CS_UUID_LEN 16
/* "GPU-" + 36 characters of UUID text + NUL */
#define CS_UUID_STR_LEN 41

/* Priority classes: lower value wins. HIGH is the latency-critical class. */
enum cs_priority {
    CS_PRIO_HIGH = 0,
    CS_PRIO_NORMAL = 1,
    CS_PRIO_LOW = 2,
    CS_PRIO_COUNT = 3,
};

static inline uint64_t cs_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Parses a byte size: a decimal number (fraction allowed) with an optional
 * suffix K, M, G, T (powers of 1024; "KiB", "MB", "GiB"... accepted, case
 * insensitive) or none (bytes). Returns 0 and sets *out, or -1 when the
 * text is malformed, negative, or larger than 2^62. */
int cs_parse_size(const char *s, uint64_t *out);

/* From /proc/meminfo (one read(2) into a stack buffer, no allocation):
 * MemTotal and MemAvailable in bytes; 0 when unknown (no /proc). */
uint64_t cs_host_mem_total(void);
uint64_t cs_host_mem_available(void);

/* Formats a byte count as "1.50 GiB" into buf. Returns buf. */
char *cs_format_size(uint64_t bytes, char *buf, size_t len);

/* Parses an unsigned decimal integer within [lo, hi]. Returns 0 or -1. */
int cs_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", the nvidia-smi form. */
void cs_uuid_format(const unsigned char uuid[CS_UUID_LEN], char out[CS_UUID_STR_LEN]);
/* Accepts the form above with or without the "GPU-" prefix. Returns 0/-1. */
int cs_uuid_parse(const char *s, unsigned char uuid[CS_UUID_LEN]);

/* "high" | "normal" | "low" (also "lc"/"be"/"0".."2"). Returns -1 if unknown. */
int cs_priority_parse(const char *s);
const char *cs_priority_name(int prio);

/* Copies src into dst[cap] always NUL-terminating; returns dst. */
char *cs_strlcpy(char *dst, const char *src, size_t cap);

/* Sleeps for *pause_ms after growing it (25, 50, 100 ... 400 ms; start at
 * 0): the pause between asks for something that may free up in a moment,
 * such as room on a GPU. */
void cs_backoff_sleep(uint32_t *pause_ms);

/* Makes room for element n of the array *arr (capacity *cap, in elements
 * of elem bytes), doubling it (first 64) when full. False when out of
 * memory, the array untouched. */
bool cs_grow_array(void **arr, size_t *cap, size_t n, size_t elem);

#endif
