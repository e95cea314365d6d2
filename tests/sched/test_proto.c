/* test_proto.c: the wire codec (src/common/proto.c).
 *
 * Every message type round-trips (struct -> record -> struct -> record,
 * byte-exact), and every validation rule is broken once on purpose: short
 * record, bad magic, version, unknown type, wrong length both ways, each
 * kind of out-of-range field, unterminated / non-printable / padded-with-
 * garbage strings, non-zero padding. The socket helpers are checked over a
 * socketpair, including an oversized record and EOF. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/proto.h"

static const uint16_t all_types[] = {
    CS_MSG_HELLO,      CS_MSG_ATTACH,     CS_MSG_ACQUIRE,    CS_MSG_RELEASE,
    CS_MSG_USAGE,      CS_MSG_EVICTED,    CS_MSG_ROOM,       CS_MSG_WELCOME,
    CS_MSG_GRANT,      CS_MSG_REVOKE,     CS_MSG_EVICT,      CS_MSG_ROOM_REPLY,
    CS_MSG_ERROR,      CS_MSG_CTL_STATUS, CS_MSG_CTL_SET,    CS_MSG_CTL_DRAIN,
    CS_MSG_CTL_GPU,    CS_MSG_CTL_CLIENT, CS_MSG_CTL_DONE,   CS_MSG_CTL_DAEMON,
    CS_MSG_RESTORED,   CS_MSG_PREFETCH,   CS_MSG_PREFETCHED, CS_MSG_CTL_GPU_MEM,
    CS_MSG_CTL_CLIENT_MEM, CS_MSG_TIMESLICE, CS_MSG_TSG_STATE, CS_MSG_CTL_CLIENT_TSG,
    CS_MSG_LC_MODE,    CS_MSG_LC_BURST,   CS_MSG_CTL_CLIENT_LC, CS_MSG_PINNED,
    CS_MSG_TERMS,
    CS_MSG_CTL_ENDPOINT, CS_MSG_CTL_EP_IDENTITY,
    CS_MSG_CTL_LIMITS, CS_MSG_CTL_VIEW,
    CS_MSG_BORROW,     CS_MSG_LEND,       CS_MSG_RETURN,
    CS_MSG_LABELS,     CS_MSG_CTL_CLIENT_LABELS,
};
#define NTYPES (sizeof all_types / sizeof all_types[0])

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A message of each type with every field set to a valid, non-zero value
 * where the range allows, so a field dropped by the codec shows up. */
static void sample(uint16_t type, struct cs_msg *m)
{
    memset(m, 0, sizeof *m);
    m->type = type;
    switch (type) {
    case CS_MSG_HELLO:
        m->u.hello = (struct cs_msg_hello){CS_HELLO_RECONNECT, CS_PRIO_LOW, 7, 1, 1ull << 33,
                                           42, "trainer", "pod-1", "ns-a"};
        break;
    case CS_MSG_WELCOME:
        m->u.welcome = (struct cs_msg_welcome){9, 0x1234567890ull, 250, 0};
        break;
    case CS_MSG_ATTACH:
        m->u.attach = (struct cs_msg_attach){3, CS_ATTACH_HELD, {1, 2, 3, 4, 5, 6, 7, 8, 9,
                                             10, 11, 12, 13, 14, 15, 16}, 80ull << 30, 77};
        break;
    case CS_MSG_ACQUIRE:
        m->u.acquire = (struct cs_msg_acquire){15, 0};
        break;
    case CS_MSG_RELEASE:
        m->u.release = (struct cs_msg_release){2, CS_RELEASE_DETACH, 5, 6, 7, 8};
        break;
    case CS_MSG_USAGE:
        m->u.usage = (struct cs_msg_usage){1, CS_USAGE_IDLE, 10, 20, 5, 40, 1000};
        break;
    case CS_MSG_EVICTED:
        m->u.evicted = (struct cs_msg_evicted){4, -2, 11, 1 << 20, 999};
        break;
    case CS_MSG_ROOM:
        m->u.room = (struct cs_msg_room){5, 0, 12, 4096};
        break;
    case CS_MSG_GRANT:
        m->u.grant = (struct cs_msg_grant){6, 1000, 0xdeadbeefcafeull};
        break;
    case CS_MSG_REVOKE:
        m->u.revoke = (struct cs_msg_revoke){7, CS_REVOKE_MEMORY, 3, CS_ALL_BYTES};
        break;
    case CS_MSG_EVICT:
        m->u.evict = (struct cs_msg_evict){8, 0, 13, CS_ALL_BYTES};
        break;
    case CS_MSG_ROOM_REPLY:
        m->u.room_reply = (struct cs_msg_room_reply){9, 2, 14};
        break;
    case CS_MSG_ERROR:
        m->u.error.code = EPROTO;
        strcpy(m->u.error.text, "protocol error: test");
        break;
    case CS_MSG_CTL_STATUS:
        break;
    case CS_MSG_CTL_SET:
        m->u.ctl_set.flags = CS_CTL_SET_MORE;
        strcpy(m->u.ctl_set.key, "quantum_floor_ms");
        strcpy(m->u.ctl_set.value, "2000");
        break;
    case CS_MSG_CTL_DRAIN:
        m->u.ctl_drain.on = 1;
        strcpy(m->u.ctl_drain.gpu, "GPU-01020304-0506-0708-090a-0b0c0d0e0f10");
        break;
    case CS_MSG_CTL_DAEMON:
        m->u.ctl_daemon = (struct cs_msg_ctl_daemon){
            100, 1000, 55, 66, CS_MODE_SHARED, 9400, 3, 5, 50, 2, 1,
            1000, 30000, 250, 10000, 1500, 1, 512ull << 20, 50000, 0};
        break;
    case CS_MSG_CTL_GPU: {
        struct cs_msg_ctl_gpu *g = &m->u.ctl_gpu;
        g->index = 2;
        g->mode = CS_MODE_SHARED;
        g->uuid[0] = 0xab;
        g->clients = 3;
        g->draining = 1;
        g->holders = 1;
        g->waiters = 2;
        g->restoring = 1;
        g->quantum_ms = 4000;
        g->mem_total = 80ull << 30;
        g->mem_reserve = 512ull << 20;
        g->mem_resident = 1 << 30;
        g->switches = 17;
        g->idle_ns = 18;
        g->busy_ns = 19;
        g->switch_ns = 20;
        g->revoke_timeouts = 21;
        g->forced_releases = 22;
        break;
    }
    case CS_MSG_CTL_CLIENT: {
        struct cs_msg_ctl_client *c = &m->u.ctl_client;
        c->client_id = 1;
        c->pid = 2;
        c->uid = 3;
        c->gpu_index = 4;
        c->priority = CS_PRIO_HIGH;
        c->weight = 5;
        c->state = CS_STATE_REVOKING;
        c->idle = 1;
        c->flags = CS_CTL_CLIENT_UNRESPONSIVE | CS_CTL_CLIENT_DEMOTED;
        c->gpu_ns = 6;
        c->wait_ns = 7;
        c->slices = 8;
        c->preemptions = 9;
        c->revokes = 10;
        c->forced = 11;
        c->resident = 12;
        c->swapped = 13;
        c->unswappable = 14;
        c->footprint = 15;
        c->swap_ns = 16;
        c->mem_limit = 17;
        c->vtime = 18;
        strcpy(c->name, "job");
        strcpy(c->pod, "pod");
        strcpy(c->ns, "ns");
        break;
    }
    case CS_MSG_RESTORED:
        m->u.restored = (struct cs_msg_restored){7, -2, 0x1234, 3 << 20, 4567};
        break;
    case CS_MSG_PREFETCH:
        m->u.prefetch = (struct cs_msg_prefetch){8, 0, 99, 1 << 20};
        break;
    case CS_MSG_PREFETCHED:
        m->u.prefetched = (struct cs_msg_prefetched){9, 2, 99, 5 << 20, 777};
        break;
    case CS_MSG_CTL_GPU_MEM:
        m->u.ctl_gpu_mem = (struct cs_msg_ctl_gpu_mem){2,  0,  1ull << 30, 8 << 20, 3ull << 30,
                                                       4,  5,  6,          7,       8,
                                                       9,  10, 11,         12,      13,
                                                       14, 15};
        break;
    case CS_MSG_CTL_CLIENT_MEM:
        m->u.ctl_client_mem = (struct cs_msg_ctl_client_mem){1, 2, 0, 3, 4,  5,  6,
                                                             7, 8, 9, 10, 11, 12};
        break;
    case CS_MSG_TIMESLICE:
        m->u.timeslice = (struct cs_msg_timeslice){3, 0, 200};
        break;
    case CS_MSG_TSG_STATE:
        m->u.tsg_state = (struct cs_msg_tsg_state){CS_TSG_MECH_ACTIVE, -ERANGE, 1, 200, 2, 0, ""};
        strcpy(m->u.tsg_state.reason, "why not");
        break;
    case CS_MSG_CTL_CLIENT_TSG:
        m->u.ctl_client_tsg = (struct cs_msg_ctl_client_tsg){
            5, 1, 1, CS_TSG_MECH_UNAVAILABLE, -EIO, 1, 2, 3, 4, 0, ""};
        strcpy(m->u.ctl_client_tsg.reason, "driver 999");
        break;
    case CS_MSG_LC_MODE:
        m->u.lc_mode = (struct cs_msg_lc_mode){2, CS_LC_BOUNDED, 1000, 0};
        break;
    case CS_MSG_LC_BURST:
        m->u.lc_burst = (struct cs_msg_lc_burst){1, 0, 77, 120000, 450000};
        break;
    case CS_MSG_PINNED:
        m->u.pinned = (struct cs_msg_pinned){1, 0, 3ull << 30};
        break;
    case CS_MSG_TERMS:
        m->u.terms = (struct cs_msg_terms){CS_PRIO_NORMAL, 3, 20ull << 30,
                                           CS_TERMS_CUT_PRIORITY | CS_TERMS_CUT_MEM, 0, ""};
        strcpy(m->u.terms.text, "uid 1000 may claim at most normal (default grant)");
        break;
    case CS_MSG_CTL_CLIENT_LC:
        m->u.ctl_client_lc = (struct cs_msg_ctl_client_lc){
            9, 0, CS_LC_MECH_GATE, CS_LC_BOUNDED, 1000, 42, 3, 250000, 500000, 1000000, 2500000};
        break;
    case CS_MSG_CTL_ENDPOINT: {
        struct cs_msg_ctl_endpoint *e = &m->u.ctl_endpoint;
        *e = (struct cs_msg_ctl_endpoint){
            CS_EP_CREATE, CS_PRIO_NORMAL, 4, 3, 8ull << 30, 2, 0, {{0}}, "", "", ""};
        memset(e->gpus[0], 0xa1, CS_UUID_LEN);
        memset(e->gpus[1], 0xb2, CS_UUID_LEN);
        strcpy(e->id, "dp-0123456789abcdef");
        strcpy(e->pod, "trainer-0");
        strcpy(e->ns, "team-a");
        break;
    }
    case CS_MSG_CTL_EP_IDENTITY:
        strcpy(m->u.ctl_ep_identity.id, "dp-0123456789abcdef");
        strcpy(m->u.ctl_ep_identity.pod, "trainer-0");
        strcpy(m->u.ctl_ep_identity.ns, "team-a");
        strcpy(m->u.ctl_ep_identity.container, "main");
        break;
    case CS_MSG_BORROW:
        m->u.borrow = (struct cs_msg_borrow){2, CS_PIECE_SMALL, 99, CS_LEND_MAX, 0};
        break;
    case CS_MSG_LEND:
        m->u.lend = (struct cs_msg_lend){99, 64ull << 20, 3, 0, {7, 8, 4000000000u}};
        break;
    case CS_MSG_RETURN:
        m->u.ret = (struct cs_msg_return){2, 0, {8, 7}};
        break;
    case CS_MSG_CTL_LIMITS:
        m->u.ctl_limits = (struct cs_msg_ctl_limits){32, 2000, 16, 8, 1, 2, 3, 4, 5};
        break;
    case CS_MSG_CTL_VIEW:
        m->u.ctl_view = (struct cs_msg_ctl_view){4242, CS_CTL_VIEW_ENDPOINT, 20ull << 30};
        break;
    case CS_MSG_LABELS:
        strcpy(m->u.labels.container, "trainer");
        break;
    case CS_MSG_CTL_CLIENT_LABELS:
        m->u.ctl_client_labels.client_id = 7;
        m->u.ctl_client_labels.gpu_index = 1;
        strcpy(m->u.ctl_client_labels.container, "sidecar");
        break;
    case CS_MSG_CTL_DONE:
        m->u.ctl_done.status = -EPERM;
        strcpy(m->u.ctl_done.text, "permission denied");
        break;
    default:
        fail_msg("no sample for type %u", type);
    }
}

static size_t encode(const struct cs_msg *m, uint8_t *buf)
{
    int n = cs_msg_encode(m, buf, CS_MSG_MAX);
    assert_true(n > 0);
    return (size_t)n;
}

static void expect_reject(const uint8_t *buf, size_t len, const char *want)
{
    struct cs_msg m;
    const char *why = NULL;
    assert_int_equal(cs_msg_decode(buf, len, &m, &why), -1);
    assert_non_null(why);
    if (want && strcmp(why, want) != 0)
        fail_msg("rejected for '%s', expected '%s'", why, want);
}

/* ---- round trips ------------------------------------------------------------------ */

static void test_round_trip_every_type(void **state)
{
    (void)state;
    for (size_t i = 0; i < NTYPES; i++) {
        struct cs_msg a, b;
        uint8_t w1[CS_MSG_MAX], w2[CS_MSG_MAX];
        sample(all_types[i], &a);
        size_t n = encode(&a, w1);
        assert_int_equal(n, cs_msg_size(all_types[i]));
        assert_true(n <= CS_MSG_MAX);
        const char *why = NULL;
        if (cs_msg_decode(w1, n, &b, &why) < 0)
            fail_msg("%s: %s", cs_msg_name(all_types[i]), why);
        assert_int_equal(b.type, a.type);
        assert_memory_equal(&a.u, &b.u, sizeof a.u);
        assert_int_equal(encode(&b, w2), n);
        assert_memory_equal(w1, w2, n);
        assert_string_not_equal(cs_msg_name(all_types[i]), "UNKNOWN");
    }
}

static void test_sizes_are_fixed(void **state)
{
    (void)state;
    /* Spot checks against docs/protocol.md. */
    assert_int_equal(cs_msg_size(CS_MSG_HELLO), 8 + 16 + 16 + 3 * CS_NAME_LEN);
    assert_int_equal(cs_msg_size(CS_MSG_ACQUIRE), 16);
    assert_int_equal(cs_msg_size(CS_MSG_GRANT), 24);
    assert_int_equal(cs_msg_size(CS_MSG_REVOKE), 32);
    assert_int_equal(cs_msg_size(CS_MSG_CTL_STATUS), 16);
    assert_int_equal(cs_msg_size(CS_MSG_RESTORED), 40);
    assert_int_equal(cs_msg_size(CS_MSG_PREFETCH), 32);
    assert_int_equal(cs_msg_size(CS_MSG_PREFETCHED), 40);
    assert_int_equal(cs_msg_size(CS_MSG_CTL_GPU_MEM), 136);
    assert_int_equal(cs_msg_size(CS_MSG_CTL_CLIENT_MEM), 104);
    assert_int_equal(cs_msg_size(CS_MSG_TIMESLICE), 24);
    assert_int_equal(cs_msg_size(CS_MSG_TSG_STATE), 40 + CS_TEXT_LEN);
    assert_int_equal(cs_msg_size(CS_MSG_CTL_CLIENT_TSG), 64 + CS_TEXT_LEN);
    assert_int_equal(cs_msg_size(CS_MSG_LC_MODE), 24);
    assert_int_equal(cs_msg_size(CS_MSG_LC_BURST), 40);
    assert_int_equal(cs_msg_size(CS_MSG_PINNED), 24);
    assert_int_equal(cs_msg_size(CS_MSG_BORROW), 32);
    assert_int_equal(cs_msg_size(CS_MSG_LEND), 32 + 4 * CS_LEND_MAX);
    assert_int_equal(cs_msg_size(CS_MSG_RETURN), 16 + 4 * CS_LEND_MAX);
    assert_int_equal(cs_msg_size(CS_MSG_TERMS), 32 + CS_TEXT_LEN);
    assert_int_equal(cs_msg_size(CS_MSG_CTL_CLIENT_LC), 80);
    assert_int_equal(cs_msg_size(CS_MSG_CTL_LIMITS), 64);
    assert_int_equal(cs_msg_size(CS_MSG_CTL_VIEW), 24);
    assert_int_equal(cs_msg_size(CS_MSG_LABELS), 16 + CS_NAME_LEN);
    assert_int_equal(cs_msg_size(CS_MSG_CTL_CLIENT_LABELS), 24 + CS_NAME_LEN);
    assert_int_equal(cs_msg_size(CS_MSG_CTL_SET), 16 + CS_KEY_LEN + CS_VALUE_LEN);
    assert_int_equal(cs_msg_size(CS_MSG_CTL_ENDPOINT), 488);
    assert_int_equal(cs_msg_size(CS_MSG_CTL_EP_IDENTITY), 16 + 4 * CS_NAME_LEN);
    assert_int_equal(cs_msg_size(0), 0);
    assert_int_equal(cs_msg_size(200), 0);
    assert_string_equal(cs_msg_name(200), "UNKNOWN");
}

static void test_encode_refuses(void **state)
{
    (void)state;
    struct cs_msg m;
    uint8_t buf[CS_MSG_MAX];
    memset(&m, 0, sizeof m);
    m.type = 99 + 50;
    assert_int_equal(cs_msg_encode(&m, buf, sizeof buf), -1);
    sample(CS_MSG_HELLO, &m);
    assert_int_equal(cs_msg_encode(&m, buf, 20), -1);
    /* An overlong string is cut, never unterminated on the wire. */
    sample(CS_MSG_HELLO, &m);
    memset(m.u.hello.name, 'x', sizeof m.u.hello.name); /* no NUL at all */
    size_t n = encode(&m, buf);
    struct cs_msg d;
    assert_int_equal(cs_msg_decode(buf, n, &d, NULL), 0);
    assert_int_equal(strlen(d.u.hello.name), CS_NAME_LEN - 1);
}

/* ---- header rules -------------------------------------------------------------------- */

static void test_reject_header(void **state)
{
    (void)state;
    struct cs_msg m;
    uint8_t buf[CS_MSG_MAX + 8];
    sample(CS_MSG_ACQUIRE, &m);
    size_t n = encode(&m, buf);
    expect_reject(buf, 0, "record shorter than the header");
    expect_reject(buf, 7, "record shorter than the header");
    uint8_t b2[CS_MSG_MAX];
    memcpy(b2, buf, n);
    b2[0] ^= 1;
    expect_reject(b2, n, "bad magic");
    memcpy(b2, buf, n);
    b2[4] = CS_PROTO_VERSION + 1;
    expect_reject(b2, n, "unsupported protocol version");
    memcpy(b2, buf, n);
    b2[4] = 0;
    expect_reject(b2, n, "unsupported protocol version");
    memcpy(b2, buf, n);
    b2[6] = 50; /* between the client and daemon ranges */
    expect_reject(b2, n, "unknown message type");
    b2[6] = 0;
    expect_reject(b2, n, "unknown message type");
    b2[6] = (uint8_t)CS_MSG_ACQUIRE;
    b2[7] = 1; /* type 0x103 */
    expect_reject(b2, n, "unknown message type");
    expect_reject(buf, n - 1, "wrong record length for its type");
    buf[n] = 0;
    expect_reject(buf, n + 1, "wrong record length for its type");
    expect_reject(buf, 8, "wrong record length for its type");
}

/* ---- field rules ------------------------------------------------------------------------ */

/* Encodes a sample of type, applies edit at offset, expects rejection. */
static void reject_u32(uint16_t type, size_t off, uint32_t v, const char *why)
{
    struct cs_msg m;
    uint8_t buf[CS_MSG_MAX];
    sample(type, &m);
    size_t n = encode(&m, buf);
    put32(buf + off, v);
    expect_reject(buf, n, why);
}

static void reject_u64(uint16_t type, size_t off, uint64_t v, const char *why)
{
    struct cs_msg m;
    uint8_t buf[CS_MSG_MAX];
    sample(type, &m);
    size_t n = encode(&m, buf);
    put64(buf + off, v);
    expect_reject(buf, n, why);
}

static void accept_u32(uint16_t type, size_t off, uint32_t v)
{
    struct cs_msg m;
    uint8_t buf[CS_MSG_MAX];
    sample(type, &m);
    size_t n = encode(&m, buf);
    put32(buf + off, v);
    assert_int_equal(cs_msg_decode(buf, n, &m, NULL), 0);
}

#define RANGE "field out of range"

static void test_reject_out_of_range(void **state)
{
    (void)state;
    /* HELLO: flags 8, priority 12, weight 16, proto_min 20, mem_limit 24 */
    reject_u32(CS_MSG_HELLO, 8, 0x1000, RANGE); /* past CS_HELLO_GIVEBACK, the highest bit */
    accept_u32(CS_MSG_HELLO, 8, CS_HELLO_POOL | CS_HELLO_RESTORED | CS_HELLO_GIVEBACK);
    accept_u32(CS_MSG_HELLO, 8, CS_HELLO_CONTROL | CS_HELLO_VIEW);
    /* CTL_VIEW: pid 8, flags 12, mem_limit 16 */
    reject_u32(CS_MSG_CTL_VIEW, 12, CS_CTL_VIEW_ENDPOINT << 1, RANGE);
    accept_u32(CS_MSG_CTL_VIEW, 12, CS_CTL_VIEW_ENDPOINT);
    reject_u64(CS_MSG_CTL_VIEW, 16, 1ull << 62 | 1, RANGE);
    accept_u32(CS_MSG_HELLO, 8, CS_HELLO_TSG | CS_HELLO_LC | CS_HELLO_PIN | CS_HELLO_TERMS | CS_HELLO_POOL);
    accept_u32(CS_MSG_HELLO, 8,
               CS_HELLO_TSG | CS_HELLO_LC | CS_HELLO_PIN | CS_HELLO_TERMS | CS_HELLO_POOL |
                   CS_HELLO_LABELS);
    accept_u32(CS_MSG_HELLO, 8, CS_HELLO_CONTROL | CS_HELLO_LIMITS | CS_HELLO_LABELS);
    /* LABELS: flags 8, pad 12 */
    reject_u32(CS_MSG_LABELS, 8, 1, RANGE);
    reject_u32(CS_MSG_LABELS, 12, 1, "non-zero padding");
    reject_u32(CS_MSG_CTL_EP_IDENTITY, 8, 1, RANGE);
    reject_u32(CS_MSG_CTL_EP_IDENTITY, 12, 1, "non-zero padding");
    accept_u32(CS_MSG_HELLO, 8, CS_HELLO_CONTROL | CS_HELLO_LIMITS);
    accept_u32(CS_MSG_HELLO, 8, CS_HELLO_TSG);
    accept_u32(CS_MSG_HELLO, 8, CS_HELLO_TSG | CS_HELLO_LC);
    accept_u32(CS_MSG_HELLO, 8, CS_HELLO_TSG | CS_HELLO_LC | CS_HELLO_PIN);
    accept_u32(CS_MSG_HELLO, 8, CS_HELLO_TSG | CS_HELLO_LC | CS_HELLO_PIN | CS_HELLO_TERMS);
    /* TERMS: priority 8, weight 12, mem_limit 16, flags 24, pad 28 */
    reject_u32(CS_MSG_TERMS, 8, CS_PRIO_COUNT, RANGE);
    reject_u32(CS_MSG_TERMS, 12, 0, RANGE);
    reject_u32(CS_MSG_TERMS, 12, CS_WEIGHT_MAX + 1, RANGE);
    accept_u32(CS_MSG_TERMS, 12, CS_WEIGHT_MAX);
    reject_u64(CS_MSG_TERMS, 16, 1ull << 62 | 1, RANGE);
    reject_u32(CS_MSG_TERMS, 24, 0x8, RANGE);
    accept_u32(CS_MSG_TERMS, 24, 0x7);
    reject_u32(CS_MSG_TERMS, 28, 1, "non-zero padding");
    /* PINNED: flags 12, bytes 16 */
    reject_u32(CS_MSG_PINNED, 12, 1, RANGE);
    reject_u64(CS_MSG_PINNED, 16, 1ull << 62 | 1, RANGE);
    /* LC_MODE: slot 8, mode 12, param_us 16, flags 20; LC_BURST: flags 12 */
    reject_u32(CS_MSG_LC_MODE, 8, CS_MAX_DEVICES, RANGE);
    reject_u32(CS_MSG_LC_MODE, 12, CS_LC_MODE_MAX + 1, RANGE);
    accept_u32(CS_MSG_LC_MODE, 12, CS_LC_MODE_MAX);
    reject_u32(CS_MSG_LC_MODE, 16, CS_LC_PARAM_MAX_US + 1, RANGE);
    reject_u32(CS_MSG_LC_MODE, 20, 1, RANGE);
    reject_u32(CS_MSG_LC_BURST, 12, 1, RANGE);
    /* TIMESLICE: flags 12, timeslice_us 16; TSG_STATE: state 8, requested_us 16 */
    reject_u32(CS_MSG_TIMESLICE, 12, 1, RANGE);
    reject_u64(CS_MSG_TIMESLICE, 16, CS_TIMESLICE_MAX_US + 1, RANGE);
    accept_u32(CS_MSG_TIMESLICE, 16, CS_TIMESLICE_MAX_US);
    reject_u32(CS_MSG_TSG_STATE, 8, CS_TSG_MECH_MAX + 1, RANGE);
    reject_u64(CS_MSG_TSG_STATE, 16, CS_TIMESLICE_MAX_US + 1, RANGE);
    reject_u32(CS_MSG_HELLO, 12, CS_PRIO_COUNT, RANGE);
    accept_u32(CS_MSG_HELLO, 12, CS_PRIO_COUNT - 1);
    reject_u32(CS_MSG_HELLO, 16, 0, RANGE);
    reject_u32(CS_MSG_HELLO, 16, CS_WEIGHT_MAX + 1, RANGE);
    accept_u32(CS_MSG_HELLO, 16, CS_WEIGHT_MAX);
    reject_u32(CS_MSG_HELLO, 20, 0, RANGE);
    reject_u32(CS_MSG_HELLO, 20, CS_PROTO_VERSION + 1, RANGE);
    reject_u64(CS_MSG_HELLO, 24, (1ull << 62) + 1, RANGE);
    /* slots: 0..CS_MAX_DEVICES-1 in every lease message */
    reject_u32(CS_MSG_ATTACH, 8, CS_MAX_DEVICES, RANGE);
    reject_u32(CS_MSG_ACQUIRE, 8, CS_MAX_DEVICES, RANGE);
    reject_u32(CS_MSG_RELEASE, 8, 0xffffffffu, RANGE);
    reject_u32(CS_MSG_USAGE, 8, 16, RANGE);
    reject_u32(CS_MSG_GRANT, 8, 16, RANGE);
    accept_u32(CS_MSG_ACQUIRE, 8, CS_MAX_DEVICES - 1);
    /* flags with unknown bits, reserved fields */
    reject_u32(CS_MSG_ATTACH, 12, 0x4, RANGE);
    reject_u32(CS_MSG_ACQUIRE, 12, 1, RANGE);
    reject_u32(CS_MSG_USAGE, 12, 2, RANGE);
    reject_u32(CS_MSG_ROOM, 12, 2, RANGE); /* flags: only CS_ROOM_CONTEXT */
    reject_u32(CS_MSG_CTL_STATUS, 8, 1, RANGE);
    reject_u32(CS_MSG_CTL_SET, 8, 2, RANGE);
    reject_u32(CS_MSG_CTL_DRAIN, 8, 2, RANGE);
    /* enums */
    reject_u32(CS_MSG_RELEASE, 12, 0, RANGE);
    reject_u32(CS_MSG_RELEASE, 12, CS_RELEASE_REASON_MAX + 1, RANGE);
    reject_u32(CS_MSG_REVOKE, 12, 0, RANGE);
    reject_u32(CS_MSG_REVOKE, 12, CS_REVOKE_REASON_MAX + 1, RANGE);
    /* sizes: at most 2^62; ROOM and EVICT ask for at least one byte */
    reject_u64(CS_MSG_ATTACH, 32, (1ull << 62) + 1, RANGE);
    reject_u64(CS_MSG_USAGE, 16, UINT64_MAX, RANGE);
    reject_u64(CS_MSG_ROOM, 24, 0, RANGE);
    reject_u64(CS_MSG_EVICT, 24, 0, RANGE);
    /* EVICT: flags 12, PREPARE and GIVEBACK the only bits */
    reject_u32(CS_MSG_EVICT, 12, CS_EVICT_GIVEBACK << 1, RANGE);
    accept_u32(CS_MSG_EVICT, 12, CS_EVICT_GIVEBACK);
    /* WELCOME: client_id >= 1, idle_ms 1..3600000 */
    reject_u64(CS_MSG_WELCOME, 8, 0, RANGE);
    reject_u32(CS_MSG_WELCOME, 24, 0, RANGE);
    reject_u32(CS_MSG_WELCOME, 24, 3600001, RANGE);
    /* control replies */
    reject_u32(CS_MSG_CTL_GPU, 12, CS_MODE_MAX + 1, RANGE);
    reject_u32(CS_MSG_CTL_CLIENT, 28, CS_PRIO_COUNT, RANGE);    /* priority */
    reject_u32(CS_MSG_CTL_CLIENT, 32, 0, RANGE);                /* weight */
    reject_u32(CS_MSG_CTL_CLIENT, 36, CS_STATE_MAX + 1, RANGE); /* state */
    reject_u32(CS_MSG_CTL_CLIENT, 44, CS_CTL_CLIENT_FLAGS + 1, RANGE); /* flags */
    reject_u32(CS_MSG_CTL_DAEMON, 32, CS_MODE_MAX + 1, RANGE);
    reject_u32(CS_MSG_CTL_DAEMON, 36, 65536, RANGE);            /* port */
    /* CTL_ENDPOINT: op 8, max_priority 12, max_weight 16, max_conns 20,
     * mem_limit 24, ngpus 32 */
    reject_u32(CS_MSG_CTL_ENDPOINT, 8, 0, RANGE);
    reject_u32(CS_MSG_CTL_ENDPOINT, 8, CS_EP_OP_MAX + 1, RANGE);
    accept_u32(CS_MSG_CTL_ENDPOINT, 8, CS_EP_REMOVE);
    reject_u32(CS_MSG_CTL_ENDPOINT, 12, CS_PRIO_COUNT, RANGE);
    reject_u32(CS_MSG_CTL_ENDPOINT, 16, 0, RANGE);
    reject_u32(CS_MSG_CTL_ENDPOINT, 16, CS_WEIGHT_MAX + 1, RANGE);
    accept_u32(CS_MSG_CTL_ENDPOINT, 16, CS_WEIGHT_MAX);
    reject_u32(CS_MSG_CTL_ENDPOINT, 20, 65537, RANGE);
    reject_u64(CS_MSG_CTL_ENDPOINT, 24, (1ull << 62) + 1, RANGE);
    reject_u32(CS_MSG_CTL_ENDPOINT, 32, CS_MAX_DEVICES + 1, RANGE);
    accept_u32(CS_MSG_CTL_ENDPOINT, 32, CS_MAX_DEVICES);
}

static void test_reject_padding(void **state)
{
    (void)state;
    reject_u32(CS_MSG_CTL_STATUS, 12, 1, "non-zero padding");
    reject_u32(CS_MSG_ERROR, 12, 0x100, "non-zero padding");
    reject_u32(CS_MSG_CTL_SET, 12, 1, "non-zero padding");
    reject_u32(CS_MSG_CTL_DONE, 12, 1, "non-zero padding");
    reject_u32(CS_MSG_CTL_DRAIN, 12, 0x80000000u, "non-zero padding");
    reject_u32(CS_MSG_CTL_ENDPOINT, 36, 1, "non-zero padding");
}

static void test_reject_strings(void **state)
{
    (void)state;
    struct cs_msg m;
    uint8_t buf[CS_MSG_MAX], b2[CS_MSG_MAX];
    sample(CS_MSG_HELLO, &m);
    size_t n = encode(&m, buf);
    const size_t name = 40, ns = 40 + 2 * CS_NAME_LEN;
    /* unterminated */
    memcpy(b2, buf, n);
    memset(b2 + name, 'a', CS_NAME_LEN);
    expect_reject(b2, n, "malformed string field");
    /* the last field of the record, unterminated */
    memcpy(b2, buf, n);
    memset(b2 + ns, 'b', CS_NAME_LEN);
    expect_reject(b2, n, "malformed string field");
    /* non-printable characters */
    const uint8_t bad[] = {0x01, 0x09, 0x0a, 0x1f, 0x7f, 0x80, 0xff};
    for (size_t i = 0; i < sizeof bad; i++) {
        memcpy(b2, buf, n);
        b2[name + 1] = bad[i];
        expect_reject(b2, n, "malformed string field");
    }
    /* bytes hidden after the terminator */
    memcpy(b2, buf, n);
    b2[name + CS_NAME_LEN - 1] = 'x';
    b2[name + CS_NAME_LEN - 2] = 0;
    expect_reject(b2, n, "malformed string field");
    /* an empty string and a full-length one are fine */
    memcpy(b2, buf, n);
    memset(b2 + name, 0, CS_NAME_LEN);
    assert_int_equal(cs_msg_decode(b2, n, &m, NULL), 0);
    memset(b2 + name, '~', CS_NAME_LEN - 1);
    assert_int_equal(cs_msg_decode(b2, n, &m, NULL), 0);
    assert_int_equal(strlen(m.u.hello.name), CS_NAME_LEN - 1);
    /* strings of the control messages too */
    sample(CS_MSG_CTL_SET, &m);
    n = encode(&m, buf);
    buf[16 + 3] = 0x1b; /* ESC in the key */
    expect_reject(buf, n, "malformed string field");
    /* CTL_ENDPOINT: id at 296 (after 256 bytes of GPUs), ns last at 424 */
    sample(CS_MSG_CTL_ENDPOINT, &m);
    n = encode(&m, buf);
    assert_string_equal((const char *)buf + 296, "dp-0123456789abcdef");
    memcpy(b2, buf, n);
    memset(b2 + 296, 'i', CS_NAME_LEN);
    expect_reject(b2, n, "malformed string field");
    memcpy(b2, buf, n);
    b2[424] = 0x0a;
    expect_reject(b2, n, "malformed string field");
}

static void test_decode_does_not_trust_why(void **state)
{
    (void)state;
    uint8_t buf[4] = {0};
    struct cs_msg m;
    assert_int_equal(cs_msg_decode(buf, sizeof buf, &m, NULL), -1);
}

/* ---- socket helpers ----------------------------------------------------------------------- */

static void test_send_recv(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    struct cs_msg a, b;
    sample(CS_MSG_REVOKE, &a);
    assert_int_equal(cs_send(sv[0], &a), 0);
    assert_int_equal(cs_recv(sv[1], &b, NULL), 1);
    assert_memory_equal(&a.u.revoke, &b.u.revoke, sizeof a.u.revoke);
    /* a record longer than any message */
    uint8_t big[CS_MSG_MAX + 100];
    memset(big, 0, sizeof big);
    assert_int_equal(send(sv[0], big, sizeof big, 0), (ssize_t)sizeof big);
    const char *why = NULL;
    assert_int_equal(cs_recv(sv[1], &b, &why), -EPROTO);
    assert_string_equal(why, "record longer than any message");
    /* a malformed one */
    assert_int_equal(send(sv[0], big, 16, 0), 16);
    assert_int_equal(cs_recv(sv[1], &b, &why), -EPROTO);
    assert_string_equal(why, "bad magic");
    /* unknown type cannot be sent */
    memset(&a, 0, sizeof a);
    a.type = 7777;
    assert_int_equal(cs_send(sv[0], &a), -EINVAL);
    close(sv[0]);
    assert_int_equal(cs_recv(sv[1], &b, NULL), 0);
    close(sv[1]);
}

/* A piece list has no holes and no hidden entries; a LEND names a size
 * exactly when it carries pieces, a multiple of 2 MiB. */
static void test_reject_piece_lists(void **state)
{
    (void)state;
    struct cs_msg a;
    uint8_t w[CS_MSG_MAX];
    sample(CS_MSG_LEND, &a);
    a.u.lend.ids[1] = 0;
    expect_reject(w, encode(&a, w), "piece id 0 in the list");
    sample(CS_MSG_LEND, &a);
    a.u.lend.ids[CS_LEND_MAX - 1] = 5;
    expect_reject(w, encode(&a, w), "piece id after the list's end");
    sample(CS_MSG_LEND, &a);
    a.u.lend.piece_size = 0;
    expect_reject(w, encode(&a, w), "piece size without pieces, or pieces without a size");
    sample(CS_MSG_LEND, &a);
    a.u.lend.piece_size = (64ull << 20) + 4096;
    expect_reject(w, encode(&a, w), "piece size not a multiple of 2 MiB");
    sample(CS_MSG_LEND, &a);
    a.u.lend.count = CS_LEND_MAX + 1;
    expect_reject(w, encode(&a, w), "field out of range");
    /* an empty answer is fine */
    memset(&a.u.lend, 0, sizeof a.u.lend);
    struct cs_msg b;
    assert_int_equal(cs_msg_decode(w, encode(&a, w), &b, NULL), 0);
    sample(CS_MSG_RETURN, &a);
    a.u.ret.ids[5] = 1;
    expect_reject(w, encode(&a, w), "piece id after the list's end");
    sample(CS_MSG_RETURN, &a);
    a.u.ret.count = 0;
    expect_reject(w, encode(&a, w), "field out of range");
    sample(CS_MSG_BORROW, &a);
    a.u.borrow.kind = CS_PIECE_KIND_MAX + 1;
    expect_reject(w, encode(&a, w), "field out of range");
}

static int open_fds(void)
{
    int n = 0;
    for (int fd = 0; fd < 1024; fd++)
        n += fcntl(fd, F_GETFD) >= 0;
    return n;
}

/* Descriptors travel with a record; more than the receiver takes is a
 * protocol error that leaks none. */
static void test_send_recv_fds(void **state)
{
    (void)state;
    int sv[2], p[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    assert_int_equal(pipe(p), 0);
    int before = open_fds();
    struct cs_msg a, b;
    sample(CS_MSG_LEND, &a);
    int out[3] = {p[0], p[1], p[0]}, in[CS_LEND_MAX], n = -1;
    assert_int_equal(cs_send_fds(sv[0], &a, out, 3), 0);
    assert_int_equal(cs_recv_fds(sv[1], &b, NULL, in, CS_LEND_MAX, &n), 1);
    assert_int_equal(n, 3);
    assert_memory_equal(&a.u.lend, &b.u.lend, sizeof a.u.lend);
    assert_true(fcntl(in[0], F_GETFD) & FD_CLOEXEC);
    assert_int_equal(write(in[1], "x", 1), 1); /* the pipe's write end, received */
    char c = 0;
    assert_int_equal(read(p[0], &c, 1), 1);
    assert_int_equal(c, 'x');
    for (int i = 0; i < n; i++)
        close(in[i]);
    assert_int_equal(open_fds(), before);
    /* more than the receiver takes: refused, all closed */
    assert_int_equal(cs_send_fds(sv[0], &a, out, 3), 0);
    const char *why = NULL;
    assert_int_equal(cs_recv_fds(sv[1], &b, &why, in, 2, &n), -EPROTO);
    assert_string_equal(why, "more descriptors than the record may carry");
    assert_int_equal(n, 0);
    assert_int_equal(open_fds(), before);
    /* a malformed record with descriptors: refused, closed */
    a.u.lend.ids[0] = 0;
    assert_int_equal(cs_send_fds(sv[0], &a, out, 2), 0);
    assert_int_equal(cs_recv_fds(sv[1], &b, &why, in, CS_LEND_MAX, &n), -EPROTO);
    assert_string_equal(why, "piece id 0 in the list");
    assert_int_equal(open_fds(), before);
    /* plain records still come through, without descriptors */
    sample(CS_MSG_GRANT, &a);
    assert_int_equal(cs_send_fds(sv[0], &a, NULL, 0), 0);
    assert_int_equal(cs_recv_fds(sv[1], &b, NULL, in, CS_LEND_MAX, &n), 1);
    assert_int_equal(n, 0);
    close(sv[0]);
    assert_int_equal(cs_recv_fds(sv[1], &b, NULL, in, CS_LEND_MAX, &n), 0);
    close(sv[1]);
    close(p[0]);
    close(p[1]);
}

static void test_connect_errors(void **state)
{
    (void)state;
    char longpath[200];
    memset(longpath, 'p', sizeof longpath - 1);
    longpath[sizeof longpath - 1] = 0;
    assert_int_equal(cs_connect(longpath), -ENAMETOOLONG);
    assert_true(cs_connect("/nonexistent/cushare/none.sock") < 0);
    char path[256];
    assert_int_equal(cs_default_socket_path(path, sizeof path), 0);
    assert_non_null(strstr(path, "cushared.sock"));
    assert_int_equal(cs_default_socket_path(path, 5), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_type),
        cmocka_unit_test(test_sizes_are_fixed),
        cmocka_unit_test(test_encode_refuses),
        cmocka_unit_test(test_reject_header),
        cmocka_unit_test(test_reject_out_of_range),
        cmocka_unit_test(test_reject_padding),
        cmocka_unit_test(test_reject_strings),
        cmocka_unit_test(test_decode_does_not_trust_why),
        cmocka_unit_test(test_send_recv),
        cmocka_unit_test(test_reject_piece_lists),
        cmocka_unit_test(test_send_recv_fds),
        cmocka_unit_test(test_connect_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
