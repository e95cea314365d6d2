/* fc_util.c: logging, clocks, environment parsing and process liveness for
 * the simulated driver. No state of its own. */
#include "fakecuda/fc_internal.h"
#include "fakecuda/fc_unsupported.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

/* One write(2) per message so that lines of concurrent threads and
 * processes never interleave. */
void fc_log(const char *fmt, ...)
{
    char buf[512];
    int n = snprintf(buf, sizeof buf, "fakecuda: ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof buf - 2)
        len = sizeof buf - 2;
    buf[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w;
}

void fc_unsupported_log(const char *name)
{
    fc_log("%s is not supported by the simulated driver", name);
}

uint64_t fc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Absolute deadlines do not drift when the thread is woken early. */
/* A sleeping thread wakes up to ~60 us late (the kernel's default timer
 * slack), which would make every short simulated kernel or copy last 60 us.
 * So: sleep until shortly before the deadline, then spin the rest. */
#define FC_SPIN_NS 100000ull

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void fc_sleep_until(uint64_t deadline_ns)
{
    uint64_t now = fc_now_ns();
    if (deadline_ns > now + FC_SPIN_NS) {
        uint64_t wake = deadline_ns - FC_SPIN_NS;
        struct timespec ts = {
            .tv_sec = (time_t)(wake / 1000000000ull),
            .tv_nsec = (long)(wake % 1000000000ull),
        };
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
            ;
    }
    while (fc_now_ns() < deadline_ns)
        cpu_relax();
}

void fc_sleep_ns(uint64_t ns)
{
    fc_sleep_until(fc_now_ns() + ns);
}

uint64_t fc_env_u64(const char *name, uint64_t def, uint64_t lo, uint64_t hi)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || s[0] == '-' || v < lo || v > hi) {
        fc_log("%s=\"%s\" is not a number in [%llu, %llu]; using %llu", name, s,
               (unsigned long long)lo, (unsigned long long)hi,
               (unsigned long long)def);
        return def;
    }
    return v;
}

double fc_env_double(const char *name, double def, double lo, double hi)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < lo || v > hi) {
        fc_log("%s=\"%s\" is not a number in [%g, %g]; using %g", name, s, lo,
               hi, def);
        return def;
    }
    return v;
}

/* /proc/<pid>/stat: "pid (comm) S ppid ... starttime(22) ...". comm may
 * contain spaces and parentheses, so parsing starts after the last ')'. */
uint64_t fc_proc_start(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ')
        return 0;
    char state = p[2];
    if (state == 'Z' || state == 'X' || state == 'x')
        return 0;              /* exited: its memory is as good as freed */
    /* Field 3 is the state; skip to field 22. */
    p += 2;
    for (int field = 3; field < 22; field++) {
        p = strchr(p, ' ');
        if (!p)
            return 0;
        p++;
    }
    return strtoull(p, NULL, 10);
}

bool fc_proc_alive(pid_t pid, uint64_t start)
{
    if (pid <= 0)
        return false;
    if (kill(pid, 0) != 0 && errno == ESRCH)
        return false;
    return fc_proc_start(pid) == start;
}

size_t fc_page_round(size_t n)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    return (n + pg - 1) & ~(pg - 1);
}

/* fc_fill_fd's source: FC_POISON, written once (pthread_once) and only read
 * after. A buffer of the process's own: a malloc'd one is fresh pages each
 * time under AddressSanitizer (its allocator maps large blocks), whose
 * first touch cost more than the writes. */
static unsigned char fill_buf[64 << 10];
static pthread_once_t fill_once = PTHREAD_ONCE_INIT;

static void fill_init(void)
{
    memset(fill_buf, FC_POISON, sizeof fill_buf);
}

int fc_fill_fd(int fd, size_t size)
{
    pthread_once(&fill_once, fill_init);
    size_t off = 0;
    while (off < size) {
        size_t n = size - off < sizeof fill_buf ? size - off : sizeof fill_buf;
        ssize_t w = pwrite(fd, fill_buf, n, (off_t)off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            if (w == 0)
                errno = ENOSPC;
            return -1;
        }
        off += (size_t)w;
    }
    return 0;
}

void *fc_map_anon(size_t len, bool populate)
{
    const size_t huge = (size_t)2 << 20;
    if (len < huge) {
        int fl = MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : MAP_NORESERVE);
        return mmap(NULL, len, PROT_READ | PROT_WRITE, fl, -1, 0);
    }
    /* Over-map by a huge page less one page and trim both ends, so that the
     * mapping starts on a 2 MiB boundary (the kernel aligns only lengths
     * that are whole huge pages). */
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), span = len + huge - pg;
    if (span < len)
        return MAP_FAILED;
    /* Pinned memory is committed (no MAP_NORESERVE), as MAP_POPULATE's
     * was: what the host cannot hold fails here, not at first touch. */
    char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | (populate ? 0 : MAP_NORESERVE), -1, 0);
    if (raw == MAP_FAILED)
        return MAP_FAILED;
    char *p = (char *)(((uintptr_t)raw + huge - 1) & ~(uintptr_t)(huge - 1));
    if (p > raw)
        munmap(raw, (size_t)(p - raw));
    if (raw + span > p + len)
        munmap(p + len, (size_t)(raw + span - (p + len)));
    (void)madvise(p, len, MADV_HUGEPAGE);
#ifdef MADV_POPULATE_WRITE
    /* Pinned memory is resident: allocate its pages now (after the advice,
     * so that they are huge). Before Linux 5.14 this fails and the pages
     * come at first touch. */
    if (populate)
        (void)madvise(p, len, MADV_POPULATE_WRITE);
#endif
    return p;
}
