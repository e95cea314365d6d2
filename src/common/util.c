/* util.c: see util.h. */
#include "common/util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <unistd.h>

/* The digits of a size, read by hand rather than with strtod, which also
 * takes hexadecimal ("0x10"), exponents ("1e3"), "inf" and "nan", and reads
 * the decimal point of the process's locale (the hook parses inside
 * applications that may have set one). Returns the text after the number,
 * or NULL when there is no digit; *whole is the integer part (NULL too
 * past 2^62), *frac the fraction, in [0, 1). */
static const char *size_digits(const char *s, uint64_t *whole, double *frac)
{
    uint64_t w = 0;
    double f = 0, scale = 1;
    int nd = 0;
    for (; *s >= '0' && *s <= '9'; s++, nd++) {
        uint64_t d = (uint64_t)(*s - '0');
        if (w > ((1ull << 62) - d) / 10) /* w * 10 + d past 2^62 */
            return NULL;
        w = w * 10 + d;
    }
    if (*s == '.') {
        for (s++; *s >= '0' && *s <= '9'; s++, nd++) {
            if (scale < 1e17) { /* digits past a double's precision add nothing */
                scale *= 10;
                f += (*s - '0') / scale;
            }
        }
    }
    if (!nd)
        return NULL;
    *whole = w;
    *frac = f;
    return s;
}

int cs_parse_size(const char *s, uint64_t *out)
{
    if (!s)
        return -1;
    while (isspace((unsigned char)*s))
        s++;
    uint64_t whole;
    double frac;
    const char *end = size_digits(s, &whole, &frac);
    if (!end)
        return -1;
    while (isspace((unsigned char)*end))
        end++;
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'B': case 'b': end++; break;
    case 'K': case 'k': shift = 10; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'G': case 'g': shift = 30; end++; break;
    case 'T': case 't': shift = 40; end++; break;
    default: return -1;
    }
    if (shift) {
        /* Optional "i", then optional "B": K, KB, KiB all mean 1024. */
        if (*end == 'i' || *end == 'I')
            end++;
        if (*end == 'b' || *end == 'B')
            end++;
    }
    while (isspace((unsigned char)*end))
        end++;
    if (*end != '\0')
        return -1;
    /* Whole units exactly; a fraction of the unit rounds down to a byte. */
    if (whole > (1ull << 62) >> shift)
        return -1;
    uint64_t bytes = whole << shift;
    bytes += (uint64_t)(frac * (double)(1ull << shift));
    if (bytes > (1ull << 62))
        return -1;
    *out = bytes;
    return 0;
}

char *cs_format_size(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%llu B", (unsigned long long)bytes);
    else
        snprintf(buf, len, "%.2f %s", v, units[u]);
    return buf;
}

int cs_parse_u64(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    if (!s || !isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

void cs_uuid_format(const unsigned char u[CS_UUID_LEN], char out[CS_UUID_STR_LEN])
{
    snprintf(out, CS_UUID_STR_LEN,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
             u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
             u[14], u[15]);
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int cs_uuid_parse(const char *s, unsigned char u[CS_UUID_LEN])
{
    if (!s)
        return -1;
    if (strncasecmp(s, "GPU-", 4) == 0)
        s += 4;
    int n = 0;
    for (; *s && n < 2 * CS_UUID_LEN; s++) {
        if (*s == '-')
            continue;
        int h = hexval((unsigned char)*s);
        if (h < 0)
            return -1;
        if (n % 2 == 0)
            u[n / 2] = (unsigned char)(h << 4);
        else
            u[n / 2] |= (unsigned char)h;
        n++;
    }
    return (n == 2 * CS_UUID_LEN && *s == '\0') ? 0 : -1;
}

int cs_priority_parse(const char *s)
{
    if (!s)
        return -1;
    if (!strcasecmp(s, "high") || !strcasecmp(s, "lc") || !strcmp(s, "0"))
        return CS_PRIO_HIGH;
    if (!strcasecmp(s, "normal") || !strcmp(s, "1"))
        return CS_PRIO_NORMAL;
    if (!strcasecmp(s, "low") || !strcasecmp(s, "be") || !strcmp(s, "2"))
        return CS_PRIO_LOW;
    return -1;
}

const char *cs_priority_name(int prio)
{
    switch (prio) {
    case CS_PRIO_HIGH: return "high";
    case CS_PRIO_NORMAL: return "normal";
    case CS_PRIO_LOW: return "low";
    default: return "?";
    }
}

char *cs_strlcpy(char *dst, const char *src, size_t cap)
{
    if (cap == 0)
        return dst;
    size_t n = src ? strnlen(src, cap - 1) : 0;
    if (n)
        memcpy(dst, src, n);
    dst[n] = '\0';
    return dst;
}

/* The value of "KEY:   N kB" in /proc/meminfo, in bytes; 0 if absent. */
static uint64_t meminfo(const char *key)
{
    char buf[4096];
    int fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    size_t klen = strlen(key);
    for (const char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, key, klen) == 0 && p[klen] == ':') {
            unsigned long long kb = strtoull(p + klen + 1, NULL, 10);
            return (uint64_t)kb * 1024u;
        }
    }
    return 0;
}

uint64_t cs_host_mem_total(void)
{
    return meminfo("MemTotal");
}

uint64_t cs_host_mem_available(void)
{
    return meminfo("MemAvailable");
}

bool cs_grow_array(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return true;
    size_t ncap = *cap ? *cap * 2 : 64;
    if (ncap > SIZE_MAX / elem)
        return false;
    void *p = realloc(*arr, ncap * elem);
    if (!p)
        return false;
    *arr = p;
    *cap = ncap;
    return true;
}

void cs_backoff_sleep(uint32_t *pause_ms)
{
    *pause_ms = *pause_ms ? (*pause_ms < 400 ? *pause_ms * 2 : 400) : 25;
    struct timespec ts = {0, (long)*pause_ms * 1000000L};
    nanosleep(&ts, NULL);
}
