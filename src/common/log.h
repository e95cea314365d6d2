/* log.h: leveled logging to stderr for every cushare component.
 *
 * The level is set once at start-up (cs_log_init) and read with a relaxed
 * atomic load afterwards, so a disabled message costs one load and a branch.
 * Messages are written with one write(2) each so that lines from several
 * threads or processes sharing a terminal never interleave mid-line. Never
 * call these on the launch hot path of the hook.
 */
#ifndef CS_LOG_H
#define CS_LOG_H

#include <stdarg.h>

enum cs_log_level {
    CS_LOG_ERROR = 0,
    CS_LOG_WARN = 1,
    CS_LOG_INFO = 2,
    CS_LOG_DEBUG = 3,
};

/* who: prefix printed on each line, e.g. "cushared". The string must outlive
 * every later log call (a literal). */
void cs_log_init(const char *who, enum cs_log_level level);
void cs_log_set_level(enum cs_log_level level);
enum cs_log_level cs_log_get_level(void);

/* Parses "error|warn|info|debug" or "0".."3". Returns -1 when unknown. */
int cs_log_parse_level(const char *s);

void cs_log(enum cs_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void cs_vlog(enum cs_log_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

#define cs_error(...) cs_log(CS_LOG_ERROR, __VA_ARGS__)
#define cs_warn(...) cs_log(CS_LOG_WARN, __VA_ARGS__)
#define cs_info(...) cs_log(CS_LOG_INFO, __VA_ARGS__)
#define cs_debug(...)                                                          \
    do {                                                                       \
        if (cs_log_get_level() >= CS_LOG_DEBUG)                                \
            cs_log(CS_LOG_DEBUG, __VA_ARGS__);                                 \
    } while (0)

#endif
