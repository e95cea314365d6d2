/* overhead.c: see overhead.h. */
#include "sched/overhead.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "sched/meter.h"
#include "sched/server.h"

void sd_overhead_init(struct sd_server *s)
{
    s->meter = NULL;
    s->meter_sample = NULL;
    if (s->cfg.mem_sample_ms == 0) {
        cs_info("client memory overhead: not measured (mem_sample_ms = 0)");
        return;
    }
    char err[512];
    if (sd_meter_start(&s->meter, NULL, s->cfg.mem_sample_ms, err, sizeof err) < 0) {
        cs_info("client memory overhead: not measured: %s; the memory model reserves "
                "client_reserve_mb per client (0 when auto)", err);
        return;
    }
    s->meter_sample = malloc(sizeof *s->meter_sample);
    if (!s->meter_sample ||
        sd_server_add_listener(s, sd_meter_fd(s->meter), SD_TAG_METER) < 0) {
        cs_warn("client memory overhead: not measured: %s",
                s->meter_sample ? strerror(errno) : "out of memory");
        sd_overhead_fini(s);
        return;
    }
    cs_info("client memory overhead: measured from the driver's per-process figures "
            "every %u ms", s->cfg.mem_sample_ms);
}

/* The driver's figure for pid in one GPU's sample, UINT64_MAX if absent. */
static uint64_t used_of(const struct sd_meter_gpu *mg, uint32_t pid)
{
    for (uint32_t j = 0; j < mg->n; j++)
        if (mg->pid[j] == pid)
            return mg->used[j];
    return UINT64_MAX;
}

/* One GPU's sample: every member whose process the driver lists. */
static void feed_gpu(struct sd_server *s, const struct sd_meter_gpu *mg, uint64_t now)
{
    struct sd_gpu *g = sd_policy_gpu_by_uuid(&s->policy, mg->uuid);
    if (!g || !mg->ok || g->n == 0)
        return;
    struct sd_measured *x = malloc(g->n * sizeof *x);
    if (!x)
        return; /* the next sample comes within a second */
    size_t n = 0;
    for (size_t i = 0; i < g->n; i++) {
        const struct sd_conn *c = g->m[i]->client->owner;
        uint64_t used = c ? used_of(mg, c->pid) : UINT64_MAX;
        if (used != UINT64_MAX)
            x[n++] = (struct sd_measured){g->m[i], c->pid, used};
    }
    if (n)
        sd_policy_measured(&s->policy, g, x, n, now);
    free(x);
}

void sd_overhead_event(struct sd_server *s, uint64_t now)
{
    if (!s->meter || !sd_meter_take(s->meter, s->meter_sample))
        return;
    for (uint32_t i = 0; i < s->meter_sample->ngpu; i++)
        feed_gpu(s, &s->meter_sample->gpu[i], now);
}

void sd_overhead_fini(struct sd_server *s)
{
    sd_meter_stop(s->meter);
    s->meter = NULL;
    free(s->meter_sample);
    s->meter_sample = NULL;
}
