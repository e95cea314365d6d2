/* buf.h: a growable text buffer for the metrics page and state file.
 * A failed allocation sets oom and turns later appends into no-ops, so the
 * callers format a whole page and check once at the end. */
#ifndef SD_BUF_H
#define SD_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct sd_buf {
    char *p;
    size_t len, cap;
    bool oom;
};

void sd_buf_printf(struct sd_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s with the escapes Prometheus label values need (\\, \", \n). */
void sd_buf_label(struct sd_buf *b, const char *s);
void sd_buf_free(struct sd_buf *b);

#endif
