/* fuzz_dispatch.c: libFuzzer target for everything behind the decoder.
 *
 * The input is a script of operations on a daemon that has no listening
 * socket but is otherwise the real one (server, dispatch, control, policy,
 * metrics rendering): up to four connections, each a socketpair whose
 * daemon end is adopted with made-up credentials (one of them the owner),
 * fed raw records or records built from the input with a valid header, plus
 * disconnects, simulated time passing, knob changes and status/metrics
 * renderings. After every operation the policy's invariants are checked;
 * a violation, a crash or a sanitizer report is a finding.
 *
 * Script format, repeated: op byte, then operands (see run_op). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/proto.h"
#include "sched/buf.h"
#include "sched/metrics.h"
#include "sched/server.h"

#define NCONN 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct script {
    const uint8_t *p;
    size_t n;
};

static bool take(struct script *s, void *out, size_t len)
{
    if (s->n < len)
        return false;
    memcpy(out, s->p, len);
    s->p += len;
    s->n -= len;
    return true;
}

static uint64_t fake_now;

static uint64_t fake_clock(void *ctx)
{
    (void)ctx;
    return fake_now;
}

struct rig {
    struct sd_server srv;
    int peer[NCONN];     /* our end of each connection, -1 if none */
    int server_fd[NCONN];
};

static struct sd_conn *conn(struct rig *r, int k)
{
    struct sd_conn *c = r->server_fd[k] >= 0 ? sd_server_conn_by_fd(&r->srv, r->server_fd[k])
                                             : NULL;
    if (c && !c->dead)
        return c;
    if (r->peer[k] >= 0)
        close(r->peer[k]);
    r->peer[k] = r->server_fd[k] = -1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
        return NULL;
    /* Connection 0 is the daemon's owner; the others are other users. */
    uint32_t uid = k == 0 ? r->srv.owner_uid : 60000u + (uint32_t)k;
    c = sd_conn_adopt(&r->srv, sv[0], 1000u + (uint32_t)k, uid, uid);
    if (!c) {
        close(sv[1]);
        return NULL;
    }
    r->peer[k] = sv[1];
    r->server_fd[k] = sv[0];
    return c;
}

static void drain_peer(struct rig *r, int k)
{
    uint8_t buf[CS_MSG_MAX + 1];
    while (r->peer[k] >= 0 && recv(r->peer[k], buf, sizeof buf, MSG_DONTWAIT) > 0) {
    }
}

static const uint16_t types[] = {
    CS_MSG_HELLO, CS_MSG_ATTACH,     CS_MSG_ACQUIRE, CS_MSG_RELEASE,  CS_MSG_USAGE,
    CS_MSG_EVICTED, CS_MSG_ROOM,     CS_MSG_CTL_STATUS, CS_MSG_CTL_SET, CS_MSG_CTL_DRAIN,
    CS_MSG_GRANT, CS_MSG_RESTORED,   CS_MSG_PREFETCHED, CS_MSG_TSG_STATE,
    CS_MSG_LC_BURST, CS_MSG_PINNED,
};

/* A record of a chosen type with a valid header and length; the body comes
 * from the script (zero-padded when it runs out), so the decoder still
 * judges every field. */
static size_t build(struct script *s, uint8_t *rec)
{
    uint8_t sel = 0;
    take(s, &sel, 1);
    uint16_t type = types[sel % (sizeof types / sizeof types[0])];
    size_t len = cs_msg_size(type);
    memset(rec, 0, len);
    uint32_t magic = CS_PROTO_MAGIC;
    for (int i = 0; i < 4; i++)
        rec[i] = (uint8_t)(magic >> (8 * i));
    rec[4] = CS_PROTO_VERSION;
    rec[6] = (uint8_t)type;
    size_t body = len - CS_HDR_SIZE;
    size_t have = s->n < body ? s->n : body;
    take(s, rec + CS_HDR_SIZE, have);
    return len;
}

static void check_invariants(struct rig *r)
{
    const struct sd_policy *p = &r->srv.policy;
    size_t nclients = 0;
    for (const struct sd_client *c = p->clients; c; c = c->next) {
        nclients++;
        for (int s = 0; s < CS_MAX_DEVICES; s++)
            if (c->slot[s] && (c->slot[s]->client != c || c->slot[s]->slot != (uint32_t)s))
                __builtin_trap();
    }
    if (nclients != p->nclients)
        __builtin_trap();
    for (size_t i = 0; i < p->ngpu; i++) {
        const struct sd_gpu *g = p->gpu[i];
        uint32_t holding = sd_gpu_count(g, CS_STATE_HELD);
        /* Exclusive mode: never two holders whose gates are open (the
         * daemon only ever grants one; adopted claims are trimmed). */
        if (r->srv.cfg.mode == CS_MODE_EXCLUSIVE && holding > 1)
            __builtin_trap();
        if (g->draining && !g->restoring && sd_gpu_count(g, CS_STATE_HELD) > 0)
            __builtin_trap(); /* drained: every holder has been revoked */
        for (size_t j = 0; j < g->n; j++)
            if (g->m[j]->gpu != g || g->m[j]->client->slot[g->m[j]->slot] != g->m[j])
                __builtin_trap();
    }
}

static void run_op(struct rig *r, struct script *s)
{
    uint8_t op = 0, k = 0;
    take(s, &op, 1);
    take(s, &k, 1);
    k %= NCONN;
    uint8_t rec[CS_MSG_MAX + 64];
    uint16_t v16 = 0;
    switch (op % 8) {
    case 0: { /* a raw record, any length */
        take(s, &v16, 2);
        size_t len = v16 % sizeof rec;
        size_t have = s->n < len ? s->n : len;
        memset(rec, 0, len);
        take(s, rec, have);
        struct sd_conn *c = conn(r, k);
        if (c)
            sd_conn_input(&r->srv, c, rec, len);
        break;
    }
    case 1:
    case 2: { /* a record with a valid header */
        size_t len = build(s, rec);
        struct sd_conn *c = conn(r, k);
        if (c)
            sd_conn_input(&r->srv, c, rec, len);
        break;
    }
    case 3: /* the peer goes away */
        if (r->server_fd[k] >= 0) {
            struct sd_conn *c = sd_server_conn_by_fd(&r->srv, r->server_fd[k]);
            if (c)
                c->dead = true;
        }
        break;
    case 4: /* time passes */
        take(s, &v16, 2);
        fake_now += (uint64_t)v16 * 1000000ull;
        sd_server_tick(&r->srv);
        break;
    case 5:
        drain_peer(r, k);
        break;
    case 6: { /* render what status and metrics would show */
        struct sd_buf b = {0};
        sd_metrics_render(&r->srv, &b);
        sd_buf_free(&b);
        struct sd_conn *c = conn(r, k);
        if (c) {
            struct cs_msg m = {.type = CS_MSG_CTL_STATUS};
            if (c->kind == SD_CONN_CONTROL)
                sd_dispatch(&r->srv, c, &m);
        }
        break;
    }
    case 7: /* an operator flips the mode */
        r->srv.cfg.mode = r->srv.cfg.mode == CS_MODE_SHARED ? CS_MODE_EXCLUSIVE : CS_MODE_SHARED;
        sd_policy_reconfigure(&r->srv.policy, fake_now);
        break;
    }
    sd_server_settle(&r->srv);
    check_invariants(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool once;
    if (!once) {
        cs_log_init("fuzz", CS_LOG_ERROR);
        once = true;
    }
    static struct rig r;
    memset(&r, 0, sizeof r);
    for (int k = 0; k < NCONN; k++)
        r.peer[k] = r.server_fd[k] = -1;
    struct sd_config cfg;
    sd_config_defaults(&cfg);
    cfg.quantum_floor_ms = 10;
    cfg.quantum_cap_ms = 100;
    cfg.revoke_timeout_ms = 50;
    cfg.reconnect_grace_ms = 20;
    cfg.max_clients = 3;
    cfg.log_level = CS_LOG_ERROR;
    fake_now = 1000000000ull;
    /* The node's GPUs: the all-zero UUID the seeds attach, and one more
     * (...01) for the fuzzer to find; any other UUID is refused. */
    static struct sd_node node = {.n = 2, .source = "fuzz"};
    node.gpu[0].mem_total = node.gpu[1].mem_total = 1ull << 34;
    node.gpu[1].uuid[CS_UUID_LEN - 1] = 1;
    struct sd_server_opts o = {.clock = fake_clock, .lease_base = 1, .node = &node};
    struct script s = {data, size};
    /* The first byte picks a restart scenario: an unknown past makes every
     * GPU wait for the grace, as after a lost state file. */
    uint8_t first = 0;
    static struct sd_restore rs;
    if (take(&s, &first, 1) && (first & 1)) {
        memset(&rs, 0, sizeof rs);
        rs.unknown = first & 2;
        rs.ngpu = 1;
        rs.gpu[0].nholders = 1;
        rs.gpu[0].holders[0] = first >> 2;
        o.restore = &rs;
    }
    if (sd_server_init(&r.srv, &cfg, NULL, &o) < 0)
        __builtin_trap();
    for (int ops = 0; s.n > 0 && ops < 256; ops++)
        run_op(&r, &s);
    sd_server_fini(&r.srv);
    for (int k = 0; k < NCONN; k++)
        if (r.peer[k] >= 0)
            close(r.peer[k]);
    return 0;
}
