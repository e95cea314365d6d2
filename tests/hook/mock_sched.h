/* mock_sched.h: a scripted stand-in for cushared, for the hook's tests.
 *
 * It listens on a unix socket, accepts one client (the process under test,
 * which is also the process running the mock: the hook connects to it from
 * its own I/O thread), answers HELLO with WELCOME (and TERMS when asked
 * for), and otherwise does only
 * what the test tells it: send GRANT/REVOKE/EVICT, wait for a message of
 * a given type. A background thread reads the client's messages into a
 * queue; every message is also logged with its arrival time.
 */
#ifndef CS_TEST_MOCK_SCHED_H
#define CS_TEST_MOCK_SCHED_H

#include "common/proto.h"

#include <stdbool.h>
#include <stdint.h>

struct mock_sched;

/* Starts listening on path with the given idle period in WELCOME. */
struct mock_sched *mock_start(const char *path, uint32_t idle_ms);
void mock_stop(struct mock_sched *m);

/* Sends a message to the connected client; false if none. */
bool mock_send(struct mock_sched *m, const struct cs_msg *msg);
bool mock_grant(struct mock_sched *m, uint32_t slot, uint64_t lease_id);
bool mock_revoke(struct mock_sched *m, uint32_t slot, uint64_t lease_id, uint64_t evict);
/* Revokes the current lease of slot (there must be one) with evict bytes
 * to swap out, waits up to 10 s for its RELEASE and returns it in *out.
 * False if there was no lease, the send failed or no RELEASE came. */
bool mock_revoke_wait(struct mock_sched *m, uint32_t slot, uint64_t evict,
                      struct cs_msg_release *out);
/* For a hook test's main: re-executes the program under the hook
 * (hooktest_preload) pointed at a scripted scheduler on $TEST_TMP/mock.sock,
 * started here, which grants the lease whenever asked. Defined in
 * hooktest.c. */
struct mock_sched *ht_mock_preload(int argc, char **argv);

/* Revokes device 0's lease with evict_bytes = evict, waits for RELEASE and
 * asserts (cmocka) that the job is then idle; the RELEASE. Defined in
 * hooktest.c (the hook tests' helpers), not linked into the benchmarks. */
struct cs_msg_release mock_take_back(struct mock_sched *m, uint64_t evict);

bool mock_evict(struct mock_sched *m, uint32_t slot, uint64_t request_id, uint64_t bytes,
                uint32_t flags);

bool mock_prefetch(struct mock_sched *m, uint32_t slot, uint64_t request_id, uint64_t bytes);

/* Waits up to timeout_ms for the next message of `type` (earlier messages
 * of other types are skipped and kept in the log). True if one came; *out
 * and *at_ns (CLOCK_MONOTONIC) are filled when not NULL. */
bool mock_wait(struct mock_sched *m, uint16_t type, int timeout_ms, struct cs_msg *out,
               uint64_t *at_ns);

/* Where in the order of arrival (0, 1, ...) the message the last
 * successful mock_wait for `type` returned came; -1 if none. Compares the
 * order of messages of different types, which arrival times may not (two
 * messages can arrive within one clock tick). */
int mock_last_pos(struct mock_sched *m, uint16_t type);
/* Number of messages of `type` received so far. */
int mock_count(struct mock_sched *m, uint16_t type);

/* Answer ROOM requests automatically with this status (default 0). */
void mock_set_room_status(struct mock_sched *m, int32_t status);

/* Called on each ROOM before it is answered (then with room status). */
void mock_set_room_hook(struct mock_sched *m, void (*fn)(const struct cs_msg_room *, void *),
                        void *arg);

/* Behave like an older daemon that does not know these HELLO capability
 * bits: a HELLO carrying any of them is answered with ERROR. Set before the
 * client connects. */
void mock_refuse_caps(struct mock_sched *m, uint32_t caps);

/* Closes the client's connection (a daemon that went away): the hook
 * reconnects, and the mock accepts it again. */
void mock_drop(struct mock_sched *m);

/* Answer a HELLO with CS_HELLO_TERMS with these TERMS after WELCOME
 * (default: what the HELLO asked, nothing cut). Set before the client
 * connects. */
void mock_set_terms(struct mock_sched *m, const struct cs_msg_terms *t);
/* Refuse the next n HELLOs as cushared refuses a process (a cap, a GPU it
 * does not know): ERROR with this code (not EPROTO) and text. */
void mock_refuse_hellos(struct mock_sched *m, int n, uint32_t code, const char *text);

/* Grant every ACQUIRE at once (lease ids 1, 2, ...). */
void mock_set_auto_grant(struct mock_sched *m, bool on);
/* The lease id last granted on a slot (0 if none). */
uint64_t mock_lease(struct mock_sched *m, uint32_t slot);

#endif
