/* tests/sched/tserver.h: for unit tests that drive the daemon's connection
 * layer directly (test_server, test_access): one client record handed to
 * sd_conn_input, as the event loop would, and the server settled after it.
 * Include after cmocka.h. */
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

#endif
