/* fc_handle.c: the registry of live opaque handles (contexts, streams,
 * events, modules, functions, libraries, kernels, graphs, pools).
 *
 * CUDA handles are pointers to the simulator's objects. Looking an argument
 * up here before dereferencing it turns a stale or bogus handle into
 * CUDA_ERROR_INVALID_HANDLE (or INVALID_CONTEXT...) instead of a crash or a
 * use-after-free. An open-addressing hash set keyed by pointer, with
 * tombstones, guarded by `lock`.
 */
#include "fakecuda/fc_internal.h"

#include <stdlib.h>

struct slot {
    const void *p;                   /* NULL: empty; TOMB: deleted */
    int type;
};

#define TOMB ((const void *)1)

/* The table: owned by this file, every access under lock. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot *tab;
static size_t cap, used;             /* used counts live + tombstones */

static size_t hash(const void *p)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x;
}

static struct slot *find(const void *p)
{
    if (!cap)
        return NULL;
    for (size_t i = hash(p) & (cap - 1);; i = (i + 1) & (cap - 1)) {
        if (tab[i].p == p)
            return &tab[i];
        if (tab[i].p == NULL)
            return NULL;
    }
}

static int grow(void)
{
    size_t ncap = cap ? cap * 2 : 256;
    struct slot *nt = calloc(ncap, sizeof *nt);
    if (!nt)
        return -1;
    size_t live = 0;
    for (size_t i = 0; i < cap; i++) {
        if (tab[i].p == NULL || tab[i].p == TOMB)
            continue;
        size_t j = hash(tab[i].p) & (ncap - 1);
        while (nt[j].p)
            j = (j + 1) & (ncap - 1);
        nt[j] = tab[i];
        live++;
    }
    free(tab);
    tab = nt;
    cap = ncap;
    used = live;
    return 0;
}

int fc_handle_add(const void *p, enum fc_htype type)
{
    int rc = 0;
    pthread_mutex_lock(&lock);
    if ((used + 1) * 2 > cap && grow() != 0) {
        rc = -1;
    } else {
        size_t i = hash(p) & (cap - 1);
        while (tab[i].p && tab[i].p != TOMB && tab[i].p != p)
            i = (i + 1) & (cap - 1);
        if (tab[i].p == NULL)
            used++;
        tab[i].p = p;
        tab[i].type = (int)type;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

void fc_handle_del(const void *p)
{
    pthread_mutex_lock(&lock);
    struct slot *s = find(p);
    if (s) {
        s->p = TOMB;
        s->type = FC_H_NONE;
    }
    pthread_mutex_unlock(&lock);
}

enum fc_htype fc_handle_type(const void *p)
{
    if (!p || p == TOMB)
        return FC_H_NONE;
    pthread_mutex_lock(&lock);
    struct slot *s = find(p);
    enum fc_htype t = s ? (enum fc_htype)s->type : FC_H_NONE;
    pthread_mutex_unlock(&lock);
    return t;
}

/* In a forked child every inherited handle is void: start an empty table
 * (the old one stays reachable through `forsaken`, so leak checkers do not
 * report the parent's objects). */
static struct slot *forsaken;
void fc_handle_atfork_child(void)
{
    pthread_mutex_init(&lock, NULL);
    forsaken = tab;
    tab = NULL;
    cap = used = 0;
}
