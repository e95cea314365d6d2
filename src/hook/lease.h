/* lease.h: the per-device lease state machine on the client side.
 *
 *   DETACHED --first use--> IDLE (daemon) | UNMANAGED (no daemon)
 *   IDLE --work arrives, ACQUIRE--> WAITING --GRANT--> HELD (gate open)
 *   WAITING --GRANT--> (worker restores swapped memory) --> HELD
 *   HELD --REVOKE--> REVOKING (gate closed; worker drains, swaps out what
 *        was asked, RELEASE) --> IDLE, or straight back to WAITING when
 *        threads are already waiting
 *   IDLE/WAITING --EVICT--> worker swaps out (gate stays closed)
 *   IDLE/WAITING --PREFETCH--> worker swaps in (gate stays closed)
 *   daemon lost: HELD stays HELD (running jobs keep running); WAITING waits
 *        up to CUSHARE_DAEMON_WAIT_MS, then UNMANAGED; on reconnect every
 *        device re-attaches, open gates claiming their hold
 *
 * Transitions run under the device's mutex, from three kinds of thread: the
 * application's (requesting), the client I/O thread (daemon messages,
 * timers) and the device's worker (draining after a revoke).
 */
#ifndef CS_HOOK_LEASE_H
#define CS_HOOK_LEASE_H

#include "hook/device.h"

/* Attach the device on first use: learn its UUID and size, tell the daemon. */
void cs_lease_attach(struct cs_dev *d, int ordinal);

/* Application thread, gate closed: request the lease if needed and block
 * until the gate opens. */
void cs_lease_wait_open(struct cs_dev *d);

/* Client I/O thread. */
void cs_lease_on_grant(struct cs_dev *d, uint64_t lease_id);
void cs_lease_on_revoke(struct cs_dev *d, const struct cs_msg_revoke *rv);
void cs_lease_on_evict(struct cs_dev *d, const struct cs_msg_evict *ev);
void cs_lease_on_prefetch(struct cs_dev *d, const struct cs_msg_prefetch *pf);
void cs_lease_on_disconnect(struct cs_dev *d);
/* Reconnect, before the connection is shared: send ATTACH on fd. */
void cs_lease_handshake(struct cs_dev *d, int fd);
/* Reconnect, after the connection is shared: catch up what raced with it. */
void cs_lease_rescan(struct cs_dev *d);
/* Periodic: idle reports while held, the lost-daemon deadline. */
void cs_lease_tick(struct cs_dev *d, uint64_t now_ns);
/* Milliseconds until cs_lease_tick has something to do for any device. */
uint32_t cs_lease_tick_interval_ms(void);

void cs_lease_reset_after_fork(struct cs_dev *d, int ordinal);

#endif
