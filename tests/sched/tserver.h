/* tests/sched/tserver.h: for unit tests that drive the daemon's connection
 * layer directly (test_server, test_access): one client record handed to
 * sd_conn_input, as the event loop would, and the server settled after it;
 * a server on a node of one GPU whose clock stands still (test_access,
 * test_metrics). Include after cmocka.h. */
#ifndef CS_TESTS_TSERVER_H
#define CS_TESTS_TSERVER_H

#include "common/proto.h"
#include "sched/server.h"

static inline void ts_say(struct sd_server *srv, struct sd_conn *c, const struct cs_msg *m)
{
    uint8_t rec[CS_MSG_MAX];
    int n = cs_msg_encode(m, rec, sizeof rec);
    assert_true(n > 0);
    sd_conn_input(srv, c, rec, (size_t)n);
    sd_server_settle(srv);
}

/* A clock that stands still at 1 s, for tests in which no time passes. */
static inline uint64_t ts_still_clock(void *ctx)
{
    (void)ctx;
    return 1000000000ull;
}

/* The node: one GPU, 17 00 .. 00, 1 GiB (the daemon refuses any other). */
static inline const struct sd_node *ts_node_17(void)
{
    static struct sd_node node = {.n = 1, .source = "test"};
    node.gpu[0].uuid[0] = 0x17;
    node.gpu[0].mem_total = 1ull << 30;
    return &node;
}

/* The server on that node and clock, without a listening socket, owned by
 * owner (connections are adopted with made-up credentials: sd_conn_adopt);
 * ov may be NULL. */
static inline void ts_start(struct sd_server *srv, const struct sd_config *cfg,
                            const struct sd_overrides *ov, uint32_t owner)
{
    struct sd_server_opts o = {.clock = ts_still_clock, .lease_base = 1, .node = ts_node_17()};
    assert_int_equal(sd_server_init(srv, cfg, ov, &o), 0);
    srv->owner_uid = owner; /* grants are made with it at adopt */
}

#endif
