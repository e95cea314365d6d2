/* gen_seeds.c: writes the fuzzers' seed corpora, built from the codec
 * itself so that they stay valid when a message changes.
 *
 *   gen_seeds proto DIR     one valid record of every type
 *   gen_seeds dispatch DIR  a few scripts for fuzz_dispatch (its format:
 *                           see run_op there): a lease cycle with a
 *                           revoke, a control session, a restart claim */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/proto.h"

static const uint16_t all[] = {
    CS_MSG_HELLO,      CS_MSG_ATTACH,  CS_MSG_ACQUIRE,  CS_MSG_RELEASE,    CS_MSG_USAGE,
    CS_MSG_EVICTED,    CS_MSG_ROOM,    CS_MSG_WELCOME,  CS_MSG_GRANT,      CS_MSG_REVOKE,
    CS_MSG_EVICT,      CS_MSG_ROOM_REPLY, CS_MSG_ERROR, CS_MSG_CTL_STATUS, CS_MSG_CTL_SET,
    CS_MSG_CTL_DRAIN,  CS_MSG_CTL_GPU, CS_MSG_CTL_CLIENT, CS_MSG_CTL_DONE, CS_MSG_CTL_DAEMON,
    CS_MSG_RESTORED,   CS_MSG_PREFETCH, CS_MSG_PREFETCHED, CS_MSG_CTL_GPU_MEM,
    CS_MSG_CTL_CLIENT_MEM, CS_MSG_TIMESLICE, CS_MSG_TSG_STATE, CS_MSG_CTL_CLIENT_TSG,
    CS_MSG_LC_MODE, CS_MSG_LC_BURST, CS_MSG_CTL_CLIENT_LC, CS_MSG_PINNED, CS_MSG_TERMS,
    CS_MSG_CTL_ENDPOINT, CS_MSG_CTL_LIMITS, CS_MSG_CTL_VIEW, CS_MSG_LABELS,
    CS_MSG_CTL_CLIENT_LABELS, CS_MSG_CTL_EP_IDENTITY,
};

/* The smallest valid message of a type (fields with a lower bound at it). */
static void minimal(uint16_t type, struct cs_msg *m)
{
    memset(m, 0, sizeof *m);
    m->type = type;
    m->u.hello.weight = 1; /* harmless for other types: overwritten below */
    switch (type) {
    case CS_MSG_HELLO:
        m->u.hello.weight = 1;
        m->u.hello.proto_min = 1;
        strcpy(m->u.hello.name, "seed");
        break;
    case CS_MSG_TERMS:
        memset(&m->u, 0, sizeof m->u);
        m->u.terms.weight = 1;
        break;
    case CS_MSG_WELCOME:
        memset(&m->u, 0, sizeof m->u);
        m->u.welcome.client_id = 1;
        m->u.welcome.idle_ms = 250;
        break;
    case CS_MSG_RELEASE:
        memset(&m->u, 0, sizeof m->u);
        m->u.release.reason = CS_RELEASE_REVOKED;
        m->u.release.lease_id = 1;
        break;
    case CS_MSG_REVOKE:
        memset(&m->u, 0, sizeof m->u);
        m->u.revoke.reason = CS_REVOKE_QUANTUM;
        break;
    case CS_MSG_ROOM:
    case CS_MSG_EVICT:
        memset(&m->u, 0, sizeof m->u);
        m->u.room.bytes = 4096;
        break;
    case CS_MSG_PREFETCH:
        memset(&m->u, 0, sizeof m->u);
        m->u.prefetch.bytes = 4096;
        break;
    case CS_MSG_CTL_CLIENT:
        memset(&m->u, 0, sizeof m->u);
        m->u.ctl_client.weight = 1;
        break;
    case CS_MSG_CTL_SET:
        memset(&m->u, 0, sizeof m->u);
        strcpy(m->u.ctl_set.key, "mode");
        strcpy(m->u.ctl_set.value, "shared");
        break;
    case CS_MSG_CTL_DRAIN:
        memset(&m->u, 0, sizeof m->u);
        m->u.ctl_drain.on = 1;
        strcpy(m->u.ctl_drain.gpu, "0");
        break;
    case CS_MSG_CTL_ENDPOINT:
        memset(&m->u, 0, sizeof m->u);
        m->u.ctl_endpoint.op = CS_EP_CREATE;
        m->u.ctl_endpoint.max_priority = CS_PRIO_NORMAL;
        m->u.ctl_endpoint.max_weight = 1;
        strcpy(m->u.ctl_endpoint.id, "seed");
        break;
    case CS_MSG_CTL_EP_IDENTITY:
        memset(&m->u, 0, sizeof m->u);
        strcpy(m->u.ctl_ep_identity.id, "seed");
        strcpy(m->u.ctl_ep_identity.pod, "pod-0");
        strcpy(m->u.ctl_ep_identity.ns, "ns");
        break;
    default:
        memset(&m->u, 0, sizeof m->u);
        break;
    }
}

static void write_file(const char *dir, const char *name, const uint8_t *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        perror(path);
        exit(1);
    }
    fclose(f);
}

/* ---- dispatch scripts ---------------------------------------------------------------- */

/* Index of a type in fuzz_dispatch.c's table. */
static uint8_t sel(uint16_t type)
{
    static const uint16_t types[] = {
        CS_MSG_HELLO,   CS_MSG_ATTACH, CS_MSG_ACQUIRE,    CS_MSG_RELEASE, CS_MSG_USAGE,
        CS_MSG_EVICTED, CS_MSG_ROOM,   CS_MSG_CTL_STATUS, CS_MSG_CTL_SET, CS_MSG_CTL_DRAIN,
        CS_MSG_GRANT,   CS_MSG_RESTORED, CS_MSG_PREFETCHED, CS_MSG_TSG_STATE,
        CS_MSG_LC_BURST, CS_MSG_PINNED,
    };
    for (uint8_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (types[i] == type)
            return i;
    exit(2);
}

struct script {
    uint8_t b[8192];
    size_t n;
};

static void put(struct script *s, const void *p, size_t n)
{
    memcpy(s->b + s->n, p, n);
    s->n += n;
}

static void msg(struct script *s, uint8_t k, const struct cs_msg *m)
{
    uint8_t rec[CS_MSG_MAX];
    int n = cs_msg_encode(m, rec, sizeof rec);
    uint8_t head[3] = {1, k, sel(m->type)};
    put(s, head, 3);
    put(s, rec + CS_HDR_SIZE, (size_t)n - CS_HDR_SIZE);
}

static void op(struct script *s, uint8_t o, uint8_t k, uint16_t arg)
{
    uint8_t b[4] = {o, k, (uint8_t)arg, (uint8_t)(arg >> 8)};
    put(s, b, o == 4 ? 4 : 2);
}

static void hello(struct script *s, uint8_t k, uint32_t prio, uint32_t flags)
{
    struct cs_msg m = {.type = CS_MSG_HELLO};
    m.u.hello.flags = flags;
    m.u.hello.priority = prio;
    m.u.hello.weight = 1 + k;
    m.u.hello.proto_min = 1;
    m.u.hello.prev_client_id = 1;
    snprintf(m.u.hello.name, sizeof m.u.hello.name, "c%u", k);
    msg(s, k, &m);
}

static void attach(struct script *s, uint8_t k, uint32_t flags, uint64_t lease)
{
    struct cs_msg m = {.type = CS_MSG_ATTACH};
    m.u.attach.flags = flags;
    m.u.attach.total_mem = 1ull << 34;
    m.u.attach.lease_id = lease;
    msg(s, k, &m);
}

static void simple(struct script *s, uint8_t k, uint16_t type, uint64_t lease)
{
    struct cs_msg m;
    minimal(type, &m);
    if (type == CS_MSG_RELEASE)
        m.u.release.lease_id = lease;
    if (type == CS_MSG_USAGE) {
        m.u.usage.flags = CS_USAGE_IDLE;
        m.u.usage.footprint = 1 << 30;
    }
    msg(s, k, &m);
}

static void gen_dispatch(const char *dir)
{
    static struct script s;
    /* a lease cycle: grant, quantum revoke, release, idle revoke, EOF */
    s.n = 0;
    uint8_t start = 0;
    put(&s, &start, 1);
    hello(&s, 0, CS_PRIO_NORMAL, 0);
    hello(&s, 1, CS_PRIO_NORMAL, 0);
    attach(&s, 0, 0, 0);
    attach(&s, 1, 0, 0);
    simple(&s, 0, CS_MSG_ACQUIRE, 0);
    simple(&s, 1, CS_MSG_ACQUIRE, 0);
    op(&s, 4, 0, 20);
    simple(&s, 0, CS_MSG_RELEASE, 1);
    simple(&s, 1, CS_MSG_USAGE, 0);
    simple(&s, 0, CS_MSG_ACQUIRE, 0);
    op(&s, 4, 0, 100);
    op(&s, 3, 1, 0);
    op(&s, 5, 0, 0);
    op(&s, 6, 0, 0);
    write_file(dir, "lease-cycle", s.b, s.n);

    /* a control session: status, set, drain; from the owner and not */
    s.n = 0;
    put(&s, &start, 1);
    hello(&s, 0, CS_PRIO_HIGH, 0);
    attach(&s, 0, CS_ATTACH_WAITING, 0);
    hello(&s, 2, CS_PRIO_NORMAL, CS_HELLO_CONTROL);
    hello(&s, 3, CS_PRIO_NORMAL, CS_HELLO_CONTROL);
    simple(&s, 2, CS_MSG_CTL_STATUS, 0);
    simple(&s, 2, CS_MSG_CTL_SET, 0);
    simple(&s, 3, CS_MSG_CTL_DRAIN, 0);
    op(&s, 6, 2, 0);
    op(&s, 7, 0, 0);
    write_file(dir, "control", s.b, s.n);

    /* oversubscribed memory: three clients whose footprints do not fit
     * together; evictions, prefetches and restores answered (request ids
     * come from the daemon, so the fuzzer has to find them) */
    s.n = 0;
    put(&s, &start, 1);
    for (uint8_t k = 0; k < 3; k++) {
        hello(&s, k, CS_PRIO_NORMAL, 0);
        attach(&s, k, 0, 0);
        struct cs_msg u = {.type = CS_MSG_USAGE};
        u.u.usage.resident = k == 0 ? 6ull << 30 : 0;
        u.u.usage.swapped = k == 0 ? 0 : 6ull << 30;
        u.u.usage.footprint = 6ull << 30;
        msg(&s, k, &u);
        simple(&s, k, CS_MSG_ACQUIRE, 0);
    }
    for (uint8_t k = 0; k < 3; k++) {
        struct cs_msg r = {.type = CS_MSG_RESTORED};
        r.u.restored.lease_id = 1 + k;
        r.u.restored.bytes = 1ull << 30;
        r.u.restored.ns = 5000000;
        msg(&s, k, &r);
        struct cs_msg p = {.type = CS_MSG_PREFETCHED};
        p.u.prefetched.request_id = 1 + k;
        p.u.prefetched.bytes = 1ull << 29;
        msg(&s, k, &p);
        struct cs_msg e = {.type = CS_MSG_EVICTED};
        e.u.evicted.request_id = 1 + k;
        e.u.evicted.bytes = 1ull << 30;
        msg(&s, k, &e);
        op(&s, 4, 0, 1500);
        simple(&s, k, CS_MSG_RELEASE, 1 + k);
    }
    op(&s, 6, 0, 0);
    write_file(dir, "memory", s.b, s.n);

    /* a restart: two clients claim the GPU the state file names */
    s.n = 0;
    uint8_t restart = 1 | (1 << 2);
    put(&s, &restart, 1);
    hello(&s, 0, CS_PRIO_NORMAL, CS_HELLO_RECONNECT);
    hello(&s, 1, CS_PRIO_LOW, CS_HELLO_RECONNECT);
    attach(&s, 1, CS_ATTACH_WAITING, 0);
    attach(&s, 0, CS_ATTACH_HELD, 77);
    op(&s, 4, 0, 30);
    simple(&s, 0, CS_MSG_RELEASE, 77);
    write_file(dir, "restart", s.b, s.n);

    /* shared mode, a latency-critical holder beside a best-effort one that
     * speaks the timeslice records: TIMESLICE out, TSG_STATE back, a
     * status with CTL_CLIENT_TSG, then the LC job leaves */
    s.n = 0;
    put(&s, &start, 1);
    op(&s, 7, 0, 0);
    hello(&s, 0, CS_PRIO_HIGH, CS_HELLO_TSG);
    hello(&s, 1, CS_PRIO_LOW, CS_HELLO_TSG);
    for (uint8_t k = 0; k < 2; k++) {
        attach(&s, k, 0, 0);
        simple(&s, k, CS_MSG_ACQUIRE, 0);
    }
    struct cs_msg t = {.type = CS_MSG_TSG_STATE};
    t.u.tsg_state.state = CS_TSG_MECH_UNAVAILABLE;
    t.u.tsg_state.status = -95;
    t.u.tsg_state.requested_us = 1;
    strcpy(t.u.tsg_state.reason, "seed");
    msg(&s, 1, &t);
    hello(&s, 2, CS_PRIO_NORMAL, CS_HELLO_CONTROL | CS_HELLO_TSG);
    simple(&s, 2, CS_MSG_CTL_STATUS, 0);
    op(&s, 6, 0, 0);
    op(&s, 3, 0, 0);
    op(&s, 5, 1, 0);
    write_file(dir, "timeslice", s.b, s.n);

    /* a client that reports its pinned backing, then one that may not */
    s.n = 0;
    put(&s, &start, 1);
    hello(&s, 0, CS_PRIO_NORMAL, CS_HELLO_TSG | CS_HELLO_LC | CS_HELLO_PIN);
    hello(&s, 1, CS_PRIO_NORMAL, 0);
    for (uint8_t k = 0; k < 2; k++)
        attach(&s, k, 0, 0);
    struct cs_msg pm = {.type = CS_MSG_PINNED};
    pm.u.pinned.bytes = 1u << 30;
    msg(&s, 0, &pm);
    msg(&s, 1, &pm);
    write_file(dir, "pinned", s.b, s.n);

    /* another uid asks high with TERMS (granted normal, weight 1), the
     * owner asks high without; both want the GPU, then status */
    s.n = 0;
    put(&s, &start, 1);
    hello(&s, 1, CS_PRIO_HIGH, CS_HELLO_TSG | CS_HELLO_LC | CS_HELLO_PIN | CS_HELLO_TERMS);
    hello(&s, 0, CS_PRIO_HIGH, 0);
    for (uint8_t k = 0; k < 2; k++) {
        attach(&s, k, 0, 0);
        simple(&s, k, CS_MSG_ACQUIRE, 0);
    }
    hello(&s, 2, CS_PRIO_NORMAL, CS_HELLO_CONTROL | CS_HELLO_TERMS);
    simple(&s, 2, CS_MSG_CTL_STATUS, 0);
    write_file(dir, "terms", s.b, s.n);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: gen_seeds proto|dispatch DIR\n");
        return 2;
    }
    if (strcmp(argv[1], "dispatch") == 0) {
        gen_dispatch(argv[2]);
        return 0;
    }
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        struct cs_msg m;
        minimal(all[i], &m);
        uint8_t rec[CS_MSG_MAX];
        int n = cs_msg_encode(&m, rec, sizeof rec);
        struct cs_msg back;
        const char *why = "?";
        if (n < 0 || cs_msg_decode(rec, (size_t)n, &back, &why) < 0) {
            fprintf(stderr, "gen_seeds: %s does not round-trip: %s\n", cs_msg_name(all[i]), why);
            return 1;
        }
        write_file(argv[2], cs_msg_name(all[i]), rec, (size_t)n);
    }
    return 0;
}
