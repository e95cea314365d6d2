/* dp_arena.h: a bump allocator. A reply (a protobuf-c message tree of many
 * small structs and strings) is built in one arena, packed, and freed at
 * once: no per-field ownership to track. */
#ifndef DP_ARENA_H
#define DP_ARENA_H

#include <stddef.h>

struct dp_arena_chunk;
struct dp_arena {
    struct dp_arena_chunk *head;
};

#define DP_ARENA_INIT {NULL}

/* Zeroed memory; aborts when out of memory (see dp_xmalloc). */
void *dp_arena_alloc(struct dp_arena *a, size_t n);
char *dp_arena_strdup(struct dp_arena *a, const char *s);
char *dp_arena_printf(struct dp_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Grows *arr (of pointers) by one slot and returns it: the protobuf-c
 * "repeated" idiom of size_t n_x + T **x. */
void **dp_arena_push(struct dp_arena *a, void ***arr, size_t *n);
void dp_arena_free(struct dp_arena *a);

#endif
