/* state.c: the lease holders, written for the next daemon.
 *
 * Clients whose gate is open keep running while the daemon is away (that is
 * the point: a restart harms nobody). A new daemon must therefore not grant
 * a GPU until it knows who still holds it. Clients re-register and claim
 * their leases (ATTACH with CS_ATTACH_HELD), but a waiter may come back
 * before the holder does; this small file tells the new daemon whom to
 * expect, so it can resume as soon as every previous holder is back (or has
 * come back without the lease) instead of always waiting reconnect_grace_ms.
 *
 * Text, one GPU per line, rewritten whole (mkstemp file + fsync + rename) after
 * an event that changed the holders:
 *
 *     cushared-state 1
 *     next_id <first client id the next daemon may hand out>
 *     gpu <GPU-uuid> <index> <mem_total> [<holder>...]
 *
 * A holder is its client id, followed by ":<REVOKE reason>" when it was
 * being revoked: the next daemon revokes it again as soon as it claims its
 * lease, rather than give it a new slice (issue 17). A plain id is the
 * format of earlier daemons, which a new daemon reads as it always did.
 *
 * A missing file means no daemon ran (or the machine rebooted): nobody can
 * hold a lease, no grace. A file that cannot be parsed means the past is
 * unknown: every GPU waits the whole grace.
 */
#include "sched/server.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fsafe.h"
#include "common/util.h"
#include "sched/buf.h"

/* "<id>" or "<id>:<reason>" into the next holder of g. */
static int parse_holder(char *tok, struct sd_restore_gpu *g)
{
    uint64_t id, reason = 0;
    char *colon = strchr(tok, ':');
    if (colon) {
        *colon = '\0';
        if (cs_parse_u64(colon + 1, 1, CS_REVOKE_REASON_MAX, &reason) < 0)
            return -1;
    }
    if (cs_parse_u64(tok, 1, UINT64_MAX, &id) < 0)
        return -1;
    g->holders[g->nholders] = id;
    g->revoking[g->nholders] = (uint32_t)reason;
    return 0;
}

static int parse_gpu(char *line, struct sd_restore_gpu *g)
{
    char *save = NULL;
    char *tok = strtok_r(line, " \t\n", &save);
    uint64_t v;
    if (!tok || cs_uuid_parse(tok, g->uuid) < 0)
        return -1;
    tok = strtok_r(NULL, " \t\n", &save);
    if (!tok || cs_parse_u64(tok, 0, UINT32_MAX, &v) < 0)
        return -1;
    g->index = (uint32_t)v;
    tok = strtok_r(NULL, " \t\n", &save);
    if (!tok || cs_parse_u64(tok, 0, 1ull << 62, &g->mem_total) < 0)
        return -1;
    g->nholders = 0;
    while ((tok = strtok_r(NULL, " \t\n", &save))) {
        if (g->nholders == SD_RESTORE_MAX_IDS || parse_holder(tok, g) < 0)
            return -1;
        g->nholders++;
    }
    return 0;
}

static int parse_line(char *line, struct sd_restore *r)
{
    uint64_t v;
    if (strncmp(line, "next_id ", 8) == 0) {
        line[strcspn(line, "\n")] = '\0';
        if (cs_parse_u64(line + 8, 1, UINT64_MAX, &v) < 0)
            return -1;
        r->next_client_id = v;
        return 0;
    }
    if (strncmp(line, "gpu ", 4) == 0) {
        if (r->ngpu == SD_MAX_GPUS || parse_gpu(line + 4, &r->gpu[r->ngpu]) < 0)
            return -1;
        r->ngpu++;
        return 0;
    }
    return -1;
}

int sd_state_load(const char *path, struct sd_restore *r)
{
    memset(r, 0, sizeof *r);
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? 1 : (r->unknown = true, -1);
    char line[4096];
    int rc = 0;
    if (!fgets(line, sizeof line, f) || strcmp(line, "cushared-state 1\n") != 0)
        rc = -1;
    while (rc == 0 && fgets(line, sizeof line, f))
        if (!strchr(line, '\n') || parse_line(line, r) < 0)
            rc = -1;
    fclose(f);
    if (rc < 0) {
        memset(r, 0, sizeof *r);
        r->unknown = true;
    }
    return rc;
}

static void append_holder(struct sd_buf *b, uint64_t id, uint32_t revoke_reason)
{
    if (revoke_reason)
        sd_buf_printf(b, " %" PRIu64 ":%u", id, revoke_reason);
    else
        sd_buf_printf(b, " %" PRIu64, id);
}

static void append_gpu(struct sd_buf *b, const struct sd_gpu *g)
{
    char uuid[CS_UUID_STR_LEN];
    cs_uuid_format(g->uuid, uuid);
    sd_buf_printf(b, "gpu %s %u %" PRIu64, uuid, g->index, g->mem_total);
    size_t n = 0;
    for (size_t i = 0; i < g->n && n < SD_RESTORE_MAX_IDS; i++) {
        const struct sd_member *m = g->m[i];
        if (m->state == CS_STATE_HELD || m->state == CS_STATE_REVOKING) {
            append_holder(b, m->client->id,
                          m->state == CS_STATE_REVOKING ? m->revoke_reason : 0);
            n++;
        }
    }
    /* Holders of the previous daemon not seen yet are still expected by the
     * next one, should this one die during its grace. */
    for (size_t i = 0; g->restoring && i < g->nexpect && n < SD_RESTORE_MAX_IDS; i++, n++)
        append_holder(b, g->expect[i], g->expect_revoke[i]);
    sd_buf_printf(b, "\n");
}

int sd_state_save(const char *path, const struct sd_policy *p)
{
    struct sd_buf b = {0};
    sd_buf_printf(&b, "cushared-state 1\nnext_id %" PRIu64 "\n", p->next_client_id);
    for (size_t i = 0; i < p->ngpu; i++)
        append_gpu(&b, p->gpu[i]);
    if (b.oom) {
        sd_buf_free(&b);
        errno = ENOMEM;
        return -1;
    }
    /* A fresh mkstemp name in the file's own directory (checked at start),
     * renamed over it: no predictable temporary name to plant a link at. */
    char dir[SD_PATH_LEN + 8];
    const char *name = cs_fs_split(path, dir, sizeof dir);
    int rc = name ? cs_fs_write_atomic(dir, name, b.p, b.len) : (errno = ENAMETOOLONG, -1);
    int e = errno;
    sd_buf_free(&b);
    errno = e;
    return rc;
}
