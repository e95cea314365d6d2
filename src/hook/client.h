/* client.h: the connection to cushared.
 *
 * One SOCK_SEQPACKET connection per process, owned by a background I/O
 * thread that reads daemon messages, runs the lease timers and reconnects
 * with backoff when the daemon goes away. Other threads only send, through
 * cs_client_send, and only once a (re)connection has finished its handshake.
 */
#ifndef CS_HOOK_CLIENT_H
#define CS_HOOK_CLIENT_H

#include "common/proto.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the layer above (the lease) does with the connection's events, all
 * on the I/O thread. */
struct cs_client_ops {
    /* A connection finished HELLO: each device's ATTACH goes out on fd,
     * before the connection is shared with other threads. */
    void (*handshake)(int fd);
    /* ...and is shared now: catch up what raced with it. */
    void (*connected)(void);
    /* The connection is gone (outstanding ROOM requests are answered -1). */
    void (*disconnected)(void);
    /* A daemon message for the lease (GRANT, REVOKE, EVICT, PREFETCH,
     * TIMESLICE, LC_MODE); false if it is none of those (a protocol error:
     * the connection is closed). */
    bool (*message)(const struct cs_msg *m);
    /* Timers, every tick_interval_ms(), connected or not. */
    void (*tick)(uint64_t now_ns);
    uint32_t (*tick_interval_ms)(void);
};
/* Registered once by the constructor, before the client starts. */
void cs_client_set_ops(const struct cs_client_ops *ops);

/* Starts the client once per process: the first call tries to connect
 * synchronously (so the first device knows whether it is managed) and
 * starts the I/O thread. No-op when CUSHARE_DISABLE is set. */
void cs_client_start(void);

/* Sends on the shared connection. 0, or -1 when not connected. */
int cs_client_send(const struct cs_msg *m);
/* The same for a message only a daemon that took capability CAP (a
 * CS_HELLO_* bit) understands: dropped (-1) on a connection without it. */
int cs_client_send_cap(uint32_t cap, const struct cs_msg *m);

bool cs_client_is_connected(void);
/* Bumped by each successful connection (a RELEASE is only meaningful on
 * the connection its REVOKE came from). */
uint64_t cs_client_generation(void);
/* CLOCK_MONOTONIC ns when the connection was lost, 0 when connected or
 * never connected. */
uint64_t cs_client_lost_ns(void);
/* True while the daemon's last answer was a refusal of this process (a cap,
 * a GPU it does not know; not a protocol error); why gets its text. */
bool cs_client_refused(char *why, size_t cap);
/* The daemon's idle period (WELCOME), 0 before the first connection. */
uint32_t cs_client_idle_ms(void);

/* Asks the scheduler to make `bytes` of room on GPU `slot` for this process
 * (other jobs' memory is swapped out) and waits for the answer. 0 when room
 * was made; -1 without a scheduler, on refusal, or after 60 s. */
int cs_client_request_room(int slot, uint64_t bytes);
/* The same with ROOM flags (CS_ROOM_CONTEXT). */
int cs_client_request_room_flags(int slot, uint64_t bytes, uint32_t flags);

/* Borrows up to n (<= CS_LEND_MAX) pieces of kind (enum cs_piece_kind) of
 * the node's pinned pool for swap backing of GPU slot, waiting for the
 * answer (2 s at most): their descriptors (the caller's to close), ids,
 * size and the connection generation. 0 without a scheduler that lends
 * (CS_HELLO_POOL), when it has none, or on timeout. */
uint32_t cs_client_borrow(int slot, uint32_t kind, uint32_t n, int *fds, uint32_t *ids,
                          uint64_t *size, uint64_t *gen);
/* Gives pieces back (RETURN) if gen is still the connection's generation;
 * pieces of an earlier connection are this process's own. */
void cs_client_give_back(const uint32_t *ids, uint32_t n, uint64_t gen);

void cs_client_reset_after_fork(void);

#endif
