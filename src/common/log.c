/* log.c: see log.h. */
#include "common/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* Written once by cs_log_init before threads exist, read by every thread. */
static const char *log_who = "cushare";
/* Any thread may change the level at run time (cusharectl set log_level). */
static _Atomic int log_level = CS_LOG_WARN;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void cs_log_init(const char *who, enum cs_log_level level)
{
    if (who)
        log_who = who;
    cs_log_set_level(level);
}

void cs_log_set_level(enum cs_log_level level)
{
    if (level < CS_LOG_ERROR)
        level = CS_LOG_ERROR;
    if (level > CS_LOG_DEBUG)
        level = CS_LOG_DEBUG;
    atomic_store_explicit(&log_level, (int)level, memory_order_relaxed);
}

enum cs_log_level cs_log_get_level(void)
{
    return (enum cs_log_level)atomic_load_explicit(&log_level, memory_order_relaxed);
}

int cs_log_parse_level(const char *s)
{
    if (!s || !*s)
        return -1;
    for (int i = 0; i < 4; i++)
        if (strcasecmp(s, level_names[i]) == 0)
            return i;
    if (strcasecmp(s, "warning") == 0)
        return CS_LOG_WARN;
    if (s[0] >= '0' && s[0] <= '3' && s[1] == '\0')
        return s[0] - '0';
    return -1;
}

void cs_vlog(enum cs_log_level level, const char *fmt, va_list ap)
{
    if ((int)level > atomic_load_explicit(&log_level, memory_order_relaxed))
        return;
    int saved_errno = errno;
    char line[1024];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%02d:%02d:%02d.%03ld %s[%d] %s: ", tm.tm_hour,
                     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, log_who, (int)getpid(),
                     level_names[level]);
    if (n < 0)
        n = 0;
    if ((size_t)n < sizeof line) {
        int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
        if (m > 0)
            n += m;
    }
    if ((size_t)n >= sizeof line - 1)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, (size_t)n);
    (void)w;
    errno = saved_errno;
}

void cs_log(enum cs_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cs_vlog(level, fmt, ap);
    va_end(ap);
}
