/* mguard.c: see mguard.h. */
#include "sched/mguard.h"

#include <string.h>

static bool live(const struct sd_mguard_slot *s)
{
    return s->used && !s->evicted;
}

static size_t count_addr(const struct sd_mguard *g, const uint8_t addr[16])
{
    size_t n = 0;
    for (size_t i = 0; i < SD_MGUARD_SLOTS; i++)
        n += live(&g->slot[i]) && memcmp(g->slot[i].addr, addr, 16) == 0;
    return n;
}

/* The live connection to give up, other than skip: idle before busy, then
 * the oldest; only those of addr unless addr is NULL. */
static int pick_victim(const struct sd_mguard *g, const uint8_t *addr, int skip)
{
    int best = -1;
    for (int i = 0; i < SD_MGUARD_SLOTS; i++) {
        const struct sd_mguard_slot *s = &g->slot[i];
        if (i == skip || !live(s) || (addr && memcmp(s->addr, addr, 16) != 0))
            continue;
        const struct sd_mguard_slot *b = best < 0 ? NULL : &g->slot[best];
        if (!b || s->busy < b->busy || (s->busy == b->busy && s->since < b->since))
            best = i;
    }
    return best;
}

int sd_mguard_open(struct sd_mguard *g, const uint8_t addr[16], int fd, int *victim)
{
    *victim = -1;
    int n = -1;
    for (int i = 0; i < SD_MGUARD_SLOTS && n < 0; i++)
        if (!g->slot[i].used)
            n = i;
    if (n < 0)
        return -1;
    struct sd_mguard_slot *s = &g->slot[n];
    *s = (struct sd_mguard_slot){.since = ++g->seq, .fd = fd, .used = true};
    memcpy(s->addr, addr, 16);
    g->live++;
    g->opened_total++;
    /* One in, at most one out: both caps held before, so they hold after. */
    if (count_addr(g, addr) > SD_MGUARD_PER_ADDR)
        *victim = pick_victim(g, addr, n);
    else if (g->live > SD_MGUARD_MAX)
        *victim = pick_victim(g, NULL, n);
    if (*victim >= 0) {
        g->slot[*victim].evicted = true;
        g->live--;
        g->evicted_total++;
    }
    return n;
}

void sd_mguard_busy(struct sd_mguard *g, int slot)
{
    if (slot >= 0 && slot < SD_MGUARD_SLOTS)
        g->slot[slot].busy = true;
}

void sd_mguard_idle(struct sd_mguard *g, int slot)
{
    if (slot >= 0 && slot < SD_MGUARD_SLOTS) {
        g->slot[slot].busy = false;
        g->slot[slot].since = ++g->seq; /* a kept-alive scraper is young again */
    }
}

void sd_mguard_close(struct sd_mguard *g, int slot)
{
    if (slot < 0 || slot >= SD_MGUARD_SLOTS || !g->slot[slot].used)
        return;
    if (!g->slot[slot].evicted)
        g->live--;
    g->slot[slot].used = false;
}
