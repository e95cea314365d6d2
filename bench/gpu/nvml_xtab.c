/* nvml_xtab: what nvidia-smi reads through NVML's private export tables
 * (issue 22: its process table bypasses the public calls cushare answers).
 *
 * An LD_PRELOAD probe, no cushare involved. It wraps
 * nvmlInternalGetExportTable (found by the dynamic linker or by dlsym,
 * both covered), logs each table asked for (its UUID, the size word it
 * starts with) and, per XTAB_MODE:
 *   trace   hands out a copy of each table whose entries log every call
 *           (entry index, the first four arguments) and, after it, the
 *           result and the first 96 bytes behind each argument that points
 *           into mapped memory (so the layout of a process list shows);
 *   deny=K  answers the K-th distinct table (0-based) with
 *           NVML_ERROR_FUNCTION_NOT_FOUND, to see what the caller falls
 *           back to;
 *   pass    (default) logs the tables only.
 * Logs go to stderr (XTAB_MAX_LINES, default 400). Entries are forwarded
 * with six integer arguments, which covers every NVML-shaped call (handles,
 * pointers, integers). Built by hand on a GPU machine:
 *   (bench/gpu/nvml_xtab_run.sh does this and runs nvidia-smi under it)
 *   python3 bench/gpu/nvml_xtab_gen.py >/tmp/xtab_tramp.inc
 *   gcc -O1 -shared -fPIC -I/tmp bench/gpu/nvml_xtab.c -o /tmp/xtab.so -ldl
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define MAXT 2  /* tables */
#define MAXE 288 /* entries per table (driver 580: 269) */

typedef long (*fn6)(long, long, long, long, long, long);
typedef int (*xtab_fn)(const void **, const void *);

static xtab_fn real_xtab;
static fn6 real_ent[MAXT][MAXE];
static unsigned char uuids[MAXT][16];
static const void *orig_tab[MAXT];
static void *copy_tab[MAXT];
static int ntab, lines;

static void say(const char *fmt, ...)
{
    static int max = -1;
    if (max < 0) {
        const char *m = getenv("XTAB_MAX_LINES");
        max = m ? atoi(m) : 400;
    }
    if (lines++ >= max)
        return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "xtab[%d]: %s\n", (int)getpid(), buf);
}

static int mapped(long p)
{
    if (p < 4096)
        return 0;
    unsigned char v;
    uintptr_t pg = (uintptr_t)p & ~(uintptr_t)4095;
    return mincore((void *)pg, 4096, &v) == 0 && mincore((void *)(pg + 4096), 4096, &v) == 0;
}

static void dump(int t, int i, int k, long p)
{
    if (!mapped(p))
        return;
    const unsigned char *b = (const unsigned char *)p;
    char hex[3 * 96 + 1];
    for (int j = 0; j < 96; j++)
        snprintf(hex + 3 * j, 4, "%02x ", b[j]);
    say("  t%d e%d arg%d @%lx: %s", t, i, k, p, hex);
}

/* XTAB_BIG=I: entry I's third argument, 64 KiB of it, in 64-byte lines
 * with their offsets (all-zero lines left out): an array's stride shows. */
static void dump_big(int t, int i, long p)
{
    const char *big = getenv("XTAB_BIG");
    if (!big || atoi(big) != i)
        return;
    for (long off = 0; off < 65536; off += 64) {
        if (!mapped(p + off))
            return;
        const unsigned char *b = (const unsigned char *)(p + off);
        int nz = 0;
        for (int j = 0; j < 64; j++)
            nz |= b[j];
        if (!nz)
            continue;
        char hex[3 * 64 + 1];
        for (int j = 0; j < 64; j++)
            snprintf(hex + 3 * j, 4, "%02x ", b[j]);
        say("  t%d e%d big +%ld: %s", t, i, off, hex);
    }
}

static long call(int t, int i, long a, long b, long c, long d, long e, long f)
{
    say("t%d e%d (%lx %lx %lx %lx) *arg1 before: %u", t, i, a, b, c, d,
        mapped(b) ? *(const unsigned *)b : 0u);
    long r = real_ent[t][i](a, b, c, d, e, f);
    say("t%d e%d -> %ld", t, i, (long)(int)r);
    dump(t, i, 1, b);
    dump(t, i, 2, c);
    dump(t, i, 3, d);
    dump_big(t, i, c);
    return r;
}

#include "xtab_tramp.inc" /* tramp[MAXT][MAXE]: tr_T_I(...) { return call(T, I, ...); } */

static const char *mode(void)
{
    const char *m = getenv("XTAB_MODE");
    return m ? m : "pass";
}

static int table_index(const void *uuid)
{
    for (int t = 0; t < ntab; t++)
        if (memcmp(uuids[t], uuid, 16) == 0)
            return t;
    if (ntab == MAXT)
        return -1;
    memcpy(uuids[ntab], uuid, 16);
    return ntab++;
}

static int my_xtab(const void **out, const void *uuid)
{
    int t = table_index(uuid);
    const unsigned char *u = uuid;
    char us[64];
    for (int j = 0; j < 16; j++)
        snprintf(us + 2 * j, 3, "%02x", u[j]);
    const char *m = mode();
    if (t >= 0 && !strncmp(m, "deny=", 5) && atoi(m + 5) == t) {
        say("table %d uuid %s: denied", t, us);
        return 13; /* NVML_ERROR_FUNCTION_NOT_FOUND */
    }
    int r = real_xtab(out, uuid);
    uint64_t size = (r == 0 && *out) ? *(const uint64_t *)*out : 0;
    say("table %d uuid %s -> %d, table %p size word %llu (%llu entries of 8)", t, us, r,
        r == 0 ? *out : NULL, (unsigned long long)size, (unsigned long long)(size / 8));
    if (r != 0 || t < 0 || strcmp(m, "trace") != 0 || size < 16 || size > 8 * (MAXE + 1))
        return r;
    if (!copy_tab[t]) {
        orig_tab[t] = *out;
        copy_tab[t] = malloc(size);
        memcpy(copy_tab[t], *out, size);
        void **ents = (void **)copy_tab[t] + 1;
        for (uint64_t i = 0; i + 1 < size / 8 && i < MAXE; i++) {
            real_ent[t][i] = ((fn6 *)*out)[i + 1];
            if (real_ent[t][i])
                ents[i] = (void *)tramp[t][i];
        }
    }
    *out = copy_tab[t];
    return r;
}

int nvmlInternalGetExportTable(const void **out, const void *uuid)
{
    if (!real_xtab)
        real_xtab = (xtab_fn)dlsym(RTLD_NEXT, "nvmlInternalGetExportTable");
    return real_xtab ? my_xtab(out, uuid) : 999;
}

/* dlsym: programs that dlopen libnvidia-ml.so.1 find the table this way. */
typedef void *(*dlsym_fn)(void *, const char *);
void *dlsym(void *h, const char *name)
{
    static dlsym_fn real;
    if (!real)
        real = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!real)
        real = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    void *p = real(h, name);
    if (p && !strcmp(name, "nvmlInternalGetExportTable")) {
        real_xtab = (xtab_fn)p;
        return (void *)nvmlInternalGetExportTable;
    }
    return p;
}
