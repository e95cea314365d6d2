/* room.c: making room on a GPU for a client's allocation (ROOM, EVICT).
 *
 * The hook asks for room (ROOM) when the driver refuses an allocation or a
 * swap-in because other jobs' memory fills the GPU. Only jobs that do not
 * hold the GPU can move their memory out (their gates are closed, their
 * work drained), so the daemon asks them (EVICT), furthest from running
 * first: idle before waiting, lower class before higher, larger vtime
 * before smaller. The ROOM is answered when every EVICT it caused has been
 * answered (EVICTED) or after revoke_timeout_ms: 0 when anything was moved
 * (the hook retries its allocation), CUDA_ERROR_OUT_OF_MEMORY when nothing
 * could be, or when the allocation cannot fit even with the GPU to itself,
 * which is what a bare GPU would answer.
 *
 * The memory figures come from USAGE and are stale by design; EVICTED
 * adjusts the victim's until its next USAGE. Room for a job about to be
 * granted is asked of the revoked holder through REVOKE.evict_bytes instead
 * (policy.c), which needs no extra round trip. */
#include <cuda.h>
#include <stdlib.h>

#include "common/log.h"
#include "sched/policy_int.h"

static bool may_evict(const struct sd_member *v, const struct sd_member *asker)
{
    return v != asker && (v->state == CS_STATE_IDLE || v->state == CS_STATE_WAITING) &&
           !v->evict_id && v->resident > v->unswappable;
}

/* Furthest from running first. */
static bool evict_before(const struct sd_member *a, const struct sd_member *b)
{
    if (a->state != b->state)
        return a->state == CS_STATE_IDLE;
    if (a->client->info.priority != b->client->info.priority)
        return a->client->info.priority > b->client->info.priority;
    return a->vtime > b->vtime;
}

static struct sd_member *next_victim(const struct sd_gpu *g, const struct sd_member *asker)
{
    struct sd_member *best = NULL;
    for (size_t i = 0; i < g->n; i++)
        if (may_evict(g->m[i], asker) && (!best || evict_before(g->m[i], best)))
            best = g->m[i];
    return best;
}

static void answer(struct sd_policy *p, struct sd_member *m, int32_t status)
{
    m->room_active = false;
    m->room_wait = 0;
    cs_debug("gpu %u: room for pid %u: %s (%llu bytes moved)", m->gpu->index,
             m->client->info.pid, status ? "none" : "made", (unsigned long long)m->room_freed);
    p->ops.room_reply(p->ctx, m, m->room_id, status);
}

static int32_t outcome(const struct sd_member *m)
{
    return m->room_freed > 0 ? 0 : CUDA_ERROR_OUT_OF_MEMORY;
}

int sd_policy_room(struct sd_policy *p, struct sd_client *c, const struct cs_msg_room *r,
                   uint64_t now, const char **why)
{
    struct sd_member *m = r->slot < CS_MAX_DEVICES ? c->slot[r->slot] : NULL;
    if (!m) {
        *why = "slot not attached";
        return SD_EPROTO;
    }
    if (m->room_active) {
        *why = "ROOM while the previous one is unanswered";
        return SD_EPROTO;
    }
    struct sd_gpu *g = m->gpu;
    m->room_id = r->request_id;
    m->room_freed = 0;
    m->room_wait = 0;
    if (g->mem_total && m->resident + r->bytes > g->mem_total) {
        p->ops.room_reply(p->ctx, m, r->request_id, CUDA_ERROR_OUT_OF_MEMORY);
        return SD_OK; /* cannot fit even alone */
    }
    uint64_t need = r->bytes;
    struct sd_member *v;
    while (need > 0 && (v = next_victim(g, m))) {
        uint64_t movable = v->resident - v->unswappable;
        uint64_t amount = movable < need ? movable : need;
        need -= amount;
        v->evict_id = ++p->next_evict_id;
        v->evict_for = m;
        m->room_wait++;
        p->ops.evict(p->ctx, v, v->evict_id, amount);
    }
    if (m->room_wait == 0) {
        p->ops.room_reply(p->ctx, m, r->request_id, CUDA_ERROR_OUT_OF_MEMORY);
        return SD_OK;
    }
    m->room_active = true;
    m->room_deadline = now + (uint64_t)p->cfg->revoke_timeout_ms * 1000000ull;
    sd_gpu_want_at(g, m->room_deadline);
    return SD_OK;
}

int sd_policy_evicted(struct sd_policy *p, struct sd_client *c, const struct cs_msg_evicted *e,
                      uint64_t now, const char **why)
{
    struct sd_member *v = e->slot < CS_MAX_DEVICES ? c->slot[e->slot] : NULL;
    if (!v) {
        *why = "slot not attached";
        return SD_EPROTO;
    }
    /* An answer to an EVICT of an earlier connection (the hook's worker can
     * finish one after reconnecting) matches nothing here: ignored. */
    if (!v->evict_id || e->request_id != v->evict_id)
        return SD_OK;
    v->evict_id = 0;
    uint64_t moved = e->status == 0 ? e->bytes : 0;
    uint64_t off = moved < v->resident ? moved : v->resident;
    v->resident -= off;
    v->swapped += off;
    struct sd_member *asker = v->evict_for;
    v->evict_for = NULL;
    if (asker) {
        asker->room_freed += moved;
        if (--asker->room_wait == 0)
            answer(p, asker, outcome(asker));
    }
    sd_gpu_reschedule(p, v->gpu, now);
    return SD_OK;
}

void sd_room_check(struct sd_policy *p, struct sd_gpu *g, uint64_t now)
{
    for (size_t i = 0; i < g->n; i++) {
        struct sd_member *m = g->m[i];
        if (!m->room_active)
            continue;
        if (now < m->room_deadline) {
            sd_gpu_want_at(g, m->room_deadline);
            continue;
        }
        /* Victims still working on it keep their EVICT (a late EVICTED is
         * accepted) but no longer answer for this ROOM. */
        for (size_t j = 0; j < g->n; j++)
            if (g->m[j]->evict_for == m)
                g->m[j]->evict_for = NULL;
        cs_warn("gpu %u: room for pid %u not made within %u ms", g->index,
                m->client->info.pid, p->cfg->revoke_timeout_ms);
        answer(p, m, outcome(m));
    }
}

void sd_room_forget(struct sd_policy *p, struct sd_member *m)
{
    struct sd_gpu *g = m->gpu;
    for (size_t j = 0; j < g->n; j++)
        if (g->m[j]->evict_for == m)
            g->m[j]->evict_for = NULL;
    struct sd_member *asker = m->evict_for;
    m->evict_for = NULL;
    if (asker && --asker->room_wait == 0)
        answer(p, asker, outcome(asker));
}
