/* dp_arena.c: chunks of at least 8 KiB, each allocation 16-byte aligned. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "k8s/dp.h"
#include "k8s/dp_arena.h"

#define CHUNK_MIN 8192

struct dp_arena_chunk {
    struct dp_arena_chunk *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *dp_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        cs_error("out of memory (%zu bytes)", n);
        abort();
    }
    return p;
}

void *dp_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        cs_error("out of memory (%zu x %zu bytes)", n, size);
        abort();
    }
    return p;
}

char *dp_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(dp_xmalloc(n), s, n);
}

void *dp_arena_alloc(struct dp_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    struct dp_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > CHUNK_MIN ? n : CHUNK_MIN;
        c = dp_xmalloc(sizeof *c + cap);
        c->used = 0;
        c->cap = cap;
        c->next = a->head;
        a->head = c;
    }
    void *p = c->data + c->used;
    c->used += n;
    return memset(p, 0, n);
}

char *dp_arena_strdup(struct dp_arena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(dp_arena_alloc(a, n), s, n);
}

char *dp_arena_printf(struct dp_arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = dp_arena_alloc(a, (size_t)(n < 0 ? 0 : n) + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

/* Doubles at powers of two; the old array stays in the arena (freed with it). */
void **dp_arena_push(struct dp_arena *a, void ***arr, size_t *n)
{
    if ((*n & (*n - 1)) == 0) {
        size_t cap = *n ? *n * 2 : 1;
        void **grown = dp_arena_alloc(a, cap * sizeof *grown);
        if (*n)
            memcpy(grown, *arr, *n * sizeof *grown);
        *arr = grown;
    }
    return &(*arr)[(*n)++];
}

void dp_arena_free(struct dp_arena *a)
{
    while (a->head) {
        struct dp_arena_chunk *c = a->head;
        a->head = c->next;
        free(c);
    }
}
