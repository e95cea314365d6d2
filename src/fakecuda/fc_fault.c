/* fc_fault.c: the fault switch (FAKECUDA_FAIL) and call counting
 * (FAKECUDA_FAIL_COUNT), for sweeping a program's error paths the way
 * SQLite's tests sweep theirs: fail the 1st, 2nd, ... Nth call of a driver
 * entry point in turn and check that every run ends well.
 *
 *   FAKECUDA_FAIL=SPEC[,SPEC...]   SPEC = symbol:countdown[:repeat[:error]]
 *
 * The countdown-th call (per process, from its load; a forked child goes
 * on counting from its parent's numbers) of the entry point exported as
 * `symbol` fails, and so do the repeat-1 calls after it (repeat 0: every
 * call from the countdown-th on). A failed call does nothing but return
 * `error` (a CUresult name or number; by default OUT_OF_MEMORY for the
 * entry points that allocate, UNKNOWN for the others). Each failure is
 * logged on stderr and, with FAKECUDA_FAIL_LOG=path, appended to that file,
 * so a sweep can tell whether its countdown was reached.
 *
 * FAKECUDA_FAIL_COUNT=path appends "symbol calls" for every entry point of
 * the list that was called, at exit: the numbers a sweep iterates over.
 *
 * The environment is read once, at load, and strictly: a malformed spec or
 * a symbol the switch cannot fail aborts the process with a message (a
 * typo must never pass for a sweep that found nothing). Lengths are
 * bounded and numbers checked for overflow: the variables may be hostile.
 *
 * State: `on`, `specs`, `nspecs`, `log_path`, `count_path` and `load_pid`
 * are written by the constructor before any other code of the library can
 * run and are read-only afterwards; `calls` is atomic.
 */
#include "fakecuda/fc_internal.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FAULT_ENV_MAX 4096     /* characters of FAKECUDA_FAIL */
#define FAULT_MAX_SPECS 32
#define FAULT_NUM_MAX 1000000000000000ull /* countdown and repeat: 10^15 */
#define FAULT_PATH_MAX 1024

static const struct {
    const char *name;
    bool allocating;           /* may run out of memory: fails with OUT_OF_MEMORY */
} syms[FC_FAULT_NSYMS] = {
#define FC_FAULT_ROW_(sym, alloc) [FC_FAULT_##sym] = {#sym, alloc},
    FC_FAULT_SYMBOLS(FC_FAULT_ROW_)
#undef FC_FAULT_ROW_
};

struct spec {
    enum fc_fault_sym sym;
    uint64_t first;            /* the countdown: first call that fails */
    uint64_t repeat;           /* consecutive failing calls; 0 = all from first */
    CUresult err;
};

bool fc_fault_on;
static struct spec specs[FAULT_MAX_SPECS];
static int nspecs;
static char log_path[FAULT_PATH_MAX];
static char count_path[FAULT_PATH_MAX];
static pid_t load_pid;
static _Atomic uint64_t calls[FC_FAULT_NSYMS];

/* ---- parsing ------------------------------------------------------------- */

/* A bad setting: said on stderr (naming the offending text, `at`, cut to
 * 64 characters), then the process aborts. */
static __attribute__((noreturn)) void refuse(const char *var, const char *why, const char *at,
                                             size_t len)
{
    if (at)
        fc_log("%s: %s at '%.*s'; refusing to run", var, why, (int)(len > 64 ? 64 : len), at);
    else
        fc_log("%s: %s; refusing to run", var, why);
    abort();
}

/* The entry point named by [s, s+len), or -1. */
static int sym_lookup(const char *s, size_t len)
{
    for (int i = 0; i < FC_FAULT_NSYMS; i++)
        if (strlen(syms[i].name) == len && memcmp(syms[i].name, s, len) == 0)
            return i;
    return -1;
}

/* Decimal digits only, at most FAULT_NUM_MAX. */
static bool parse_num(const char *s, size_t len, uint64_t *out)
{
    if (len == 0 || len > 16)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0'); /* 16 digits cannot overflow */
    }
    if (v > FAULT_NUM_MAX)
        return false;
    *out = v;
    return true;
}

/* A CUresult other than success, by name or number. */
static bool parse_error(const char *s, size_t len, CUresult *out)
{
    uint64_t v;
    if (parse_num(s, len, &v)) {
        if (v == 0 || v > 1000000 || !fc_error_name((CUresult)v))
            return false;
        *out = (CUresult)v;
        return true;
    }
    return fc_error_by_name(s, len, out) && *out != CUDA_SUCCESS;
}

/* Splits [s, s+len) at ':' into at most 4 fields; the count, or -1. */
static int split_fields(const char *s, size_t len, const char *f[4], size_t flen[4])
{
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != ':')
            continue;
        if (n == 4)
            return -1;
        f[n] = s + start;
        flen[n++] = i - start;
        start = i + 1;
    }
    return n;
}

static void parse_spec(const char *s, size_t len, struct spec *out)
{
    const char *var = "FAKECUDA_FAIL";
    const char *f[4];
    size_t fl[4];
    int n = split_fields(s, len, f, fl);
    if (n < 2)
        refuse(var, "a spec is symbol:countdown[:repeat[:error]]", s, len);
    int sym = sym_lookup(f[0], fl[0]);
    if (sym < 0)
        refuse(var, "not an entry point the switch can fail (see docs/fakecuda.md)", f[0], fl[0]);
    out->sym = (enum fc_fault_sym)sym;
    if (!parse_num(f[1], fl[1], &out->first) || out->first == 0)
        refuse(var, "the countdown must be a number from 1", f[1], fl[1]);
    out->repeat = 1;
    if (n >= 3 && !parse_num(f[2], fl[2], &out->repeat))
        refuse(var, "the repeat must be a number (0: every call from the countdown on)", f[2],
               fl[2]);
    out->err = syms[sym].allocating ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_UNKNOWN;
    if (n == 4 && !parse_error(f[3], fl[3], &out->err))
        refuse(var, "not a CUresult name or number other than success", f[3], fl[3]);
}

static void parse_specs(const char *v)
{
    size_t len = strnlen(v, FAULT_ENV_MAX + 1);
    if (len == 0 || len > FAULT_ENV_MAX)
        refuse("FAKECUDA_FAIL", "empty or longer than 4096 characters", NULL, 0);
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && v[i] != ',')
            continue;
        if (nspecs == FAULT_MAX_SPECS)
            refuse("FAKECUDA_FAIL", "more than 32 specs", v + start, len - start);
        parse_spec(v + start, i - start, &specs[nspecs++]);
        start = i + 1;
    }
}

static void read_path(const char *var, char *dst)
{
    const char *v = getenv(var);
    if (!v)
        return;
    size_t len = strnlen(v, FAULT_PATH_MAX);
    if (len == 0 || len >= FAULT_PATH_MAX)
        refuse(var, "empty or longer than a path may be here", NULL, 0);
    memcpy(dst, v, len + 1);
}

__attribute__((constructor)) static void fault_init(void)
{
    const char *v = getenv("FAKECUDA_FAIL");
    if (v)
        parse_specs(v);
    read_path("FAKECUDA_FAIL_LOG", log_path);
    read_path("FAKECUDA_FAIL_COUNT", count_path);
    load_pid = getpid();
    fc_fault_on = nspecs > 0 || count_path[0];
}

/* ---- the switch ---------------------------------------------------------- */

static void append_line(const char *path, const char *line, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        fc_log("cannot open %s to append to it", path);
        return;
    }
    ssize_t w = write(fd, line, len); /* one write: lines never interleave */
    (void)w;
    close(fd);
}

static void report(enum fc_fault_sym s, uint64_t n, CUresult err)
{
    const char *name = fc_error_name(err);
    char line[160];
    int len = name ? snprintf(line, sizeof line, "FAKECUDA_FAIL: %s call %llu failed with %s\n",
                              syms[s].name, (unsigned long long)n, name)
                   : snprintf(line, sizeof line, "FAKECUDA_FAIL: %s call %llu failed with %d\n",
                              syms[s].name, (unsigned long long)n, (int)err);
    if (len <= 0 || (size_t)len >= sizeof line)
        return;
    fc_log("%.*s", len - 1, line);
    if (log_path[0]) {
        char full[180];
        int flen = snprintf(full, sizeof full, "fakecuda: %s", line);
        if (flen > 0 && (size_t)flen < sizeof full)
            append_line(log_path, full, (size_t)flen);
    }
}

CUresult fc_fault_call(enum fc_fault_sym s)
{
    uint64_t n = atomic_fetch_add_explicit(&calls[s], 1, memory_order_relaxed) + 1;
    for (int i = 0; i < nspecs; i++) {
        const struct spec *p = &specs[i];
        if (p->sym != s || n < p->first || (p->repeat && n - p->first >= p->repeat))
            continue;
        report(s, n, p->err);
        return p->err;
    }
    return CUDA_SUCCESS;
}

__attribute__((destructor)) static void fault_dump_counts(void)
{
    if (!count_path[0] || getpid() != load_pid)
        return; /* a forked child's exit does not speak for the process */
    char buf[FC_FAULT_NSYMS * 64];
    size_t len = 0;
    for (int i = 0; i < FC_FAULT_NSYMS; i++) {
        uint64_t n = atomic_load_explicit(&calls[i], memory_order_relaxed);
        if (n == 0)
            continue;
        int w = snprintf(buf + len, sizeof buf - len, "%s %llu\n", syms[i].name,
                         (unsigned long long)n);
        if (w <= 0 || (size_t)w >= sizeof buf - len)
            break;
        len += (size_t)w;
    }
    if (len)
        append_line(count_path, buf, len);
}
