/* depart.c: GPU memory on its way out, and whose word about it is believed.
 *
 * A job's process releases its GPU memory only when it is gone, some time
 * after it stops answering for it: a victim that answers an EVICT with its
 * driver shut down (CUDA_ERROR_DEINITIALIZED: its process is exiting), and
 * a client that disconnected while its process lives on ("departed": every
 * job's exit looks so, the socket closing 0.1-0.4 s before the process on
 * an H200). This module keeps that state: which members are exiting and
 * until when they are waited for, the departed clients' memory per GPU
 * (still the driver's, so counted as in use), and the uids found out (a
 * process that outlived the wait its exit was given), which are not waited
 * for again for a minute.
 *
 * Bookkeeping only: what a ROOM does about it (waits for the memory,
 * counts it as moved, or asks others for it) is room.c's, which calls in
 * here; nothing here calls room.c. */
#include <cuda.h>

#include "common/log.h"
#include "sched/policy_int.h"

/* How long a uid whose process outlived the wait its exit was given is not
 * waited for again. An honest exit takes 0.1-0.4 s: a tenant that says its
 * process is exiting, or leaves and lives on, would otherwise hold up
 * others' ROOMs for a second with every new connection. */
#define DISTRUST_NS (60 * 1000000000ull)

bool sd_depart_distrusted(const struct sd_policy *p, uint32_t uid, uint64_t now)
{
    for (size_t i = 0; i < SD_DISTRUST_MAX; i++)
        if (p->distrust[i].uid == uid && now < p->distrust[i].until)
            return true;
    return false;
}

/* Remembers uid, in its own slot or the one that expires first. */
void sd_depart_distrust(struct sd_policy *p, uint32_t uid, uint64_t now)
{
    struct sd_distrust *d = &p->distrust[0];
    for (size_t i = 0; i < SD_DISTRUST_MAX; i++) {
        if (p->distrust[i].uid == uid) {
            d = &p->distrust[i];
            break;
        }
        if (p->distrust[i].until < d->until)
            d = &p->distrust[i];
    }
    d->uid = uid;
    d->until = now + DISTRUST_NS;
}

void sd_depart_mark_exiting(struct sd_policy *p, struct sd_member *v, int32_t status,
                            uint64_t now)
{
    if (status != CUDA_ERROR_DEINITIALIZED || v->exiting)
        return;
    v->exiting = true;
    v->exit_until = sd_depart_distrusted(p, v->client->info.uid, now) ? now
                                                                      : now + SD_EXIT_WAIT_NS;
}

bool sd_depart_exit_awaited(const struct sd_member *v, const struct sd_member *m, uint64_t now)
{
    return v != m && v->exiting && now < v->exit_until && !v->evict_for && !v->evict_id &&
           v->resident > 0;
}

/* ---- departed clients' memory ----------------------------------------------------- */

uint64_t sd_gpu_departed_bytes(const struct sd_gpu *g, uint64_t now)
{
    uint64_t b = 0;
    for (size_t i = 0; i < g->ndep; i++)
        if (now < g->dep[i].until)
            b = sd_add_sat(b, g->dep[i].bytes);
    return b;
}

void sd_policy_client_departing(struct sd_policy *p, struct sd_client *c, uint64_t now)
{
    if (sd_depart_distrusted(p, c->info.uid, now))
        return; /* planned as free at once, as without a watch */
    for (int s = 0; s < CS_MAX_DEVICES; s++) {
        struct sd_member *m = c->slot[s];
        if (!m || !m->resident || m->gpu->ndep == SD_DEPARTED_MAX)
            continue;
        struct sd_gpu *g = m->gpu;
        struct sd_departed *d = &g->dep[g->ndep++];
        *d = (struct sd_departed){.client = c->id, .uid = c->info.uid, .bytes = m->resident,
                                  .until = now + SD_DEPART_WAIT_NS, .left = now};
        cs_debug("gpu %u: client %llu (pid %u) left with %llu bytes resident: in use until "
                 "its process exits", g->index, (unsigned long long)c->id, c->info.pid,
                 (unsigned long long)m->resident);
        /* A ROOM that waits for it (its EVICT, or its exit) now waits for
         * its process: the disconnect does not free its memory. */
        if (m->evict_for) {
            d->room_for = m->evict_for;
            d->asked = m->evict_id ? m->evict_bytes : m->exit_asked;
            m->evict_for = NULL;
        }
        sd_gpu_want_at(g, d->until);
    }
}

struct sd_departed sd_depart_take(struct sd_policy *p, struct sd_gpu *g, size_t i, bool gone,
                                  uint64_t now)
{
    struct sd_departed d = g->dep[i];
    g->dep[i] = g->dep[--g->ndep];
    if (gone) {
        g->freed_epoch++;
        p->exit_ewma_ns = sd_ewma(p->exit_ewma_ns, now > d.left ? now - d.left : 1);
    }
    return d;
}
