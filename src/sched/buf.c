/* buf.c: see buf.h. */
#include "sched/buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static bool reserve(struct sd_buf *b, size_t more)
{
    if (b->oom)
        return false;
    if (b->len + more + 1 <= b->cap)
        return true;
    size_t nc = b->cap ? b->cap : 4096;
    while (nc < b->len + more + 1)
        nc *= 2;
    char *np = realloc(b->p, nc);
    if (!np) {
        b->oom = true;
        return false;
    }
    b->p = np;
    b->cap = nc;
    return true;
}

void sd_buf_printf(struct sd_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void sd_buf_label(struct sd_buf *b, const char *s)
{
    for (; *s; s++) {
        if (!reserve(b, 2))
            return;
        if (*s == '\\' || *s == '"')
            b->p[b->len++] = '\\';
        if (*s == '\n') {
            b->p[b->len++] = '\\';
            b->p[b->len++] = 'n';
            continue;
        }
        b->p[b->len++] = *s;
    }
    if (b->p)
        b->p[b->len] = '\0';
}

void sd_buf_free(struct sd_buf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
    b->oom = false;
}
