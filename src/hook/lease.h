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
 * Transitions run under the device's mu (struct cs_dev_lease), from three
 * kinds of thread: the application's (requesting), the client I/O thread
 * (daemon messages and timers, through the client ops registered by
 * cs_lease_init) and the device's worker (jobs.c and burst.c end revokes,
 * grants and bursts with the _locked transitions).
 */
#ifndef CS_HOOK_LEASE_H
#define CS_HOOK_LEASE_H

#include "hook/device.h"

/* Registers the lease with the layers below: the device table's attach,
 * seg.c's placement and room questions, the client's daemon messages
 * (GRANT, REVOKE, EVICT, PREFETCH, TIMESLICE, LC_MODE), the handshake and
 * the timers (reports while connected, the lost-daemon deadline while
 * not). Once, from the constructor. */
void cs_lease_init(void);

/* Application thread, gate closed: request the lease if needed and block
 * until the gate opens. */
void cs_lease_wait_open(struct cs_dev *d);
/* Application thread, around a wait for two gates at once (gate.c's
 * cs_gate_enter2): while it lasts the lease is asked for (now, and again
 * whenever it goes back) and, while held, is not idle. */
void cs_lease_pair_begin(struct cs_dev *d);
void cs_lease_pair_end(struct cs_dev *d);
/* cushare_hint(WORK_SOON): in RELEASE_IDLE mode, ask for the lease now and
 * keep it until expected_us after the grant (plus the linger). */
void cs_lease_hint(struct cs_dev *d, uint32_t expected_us);

/* ---- for the device's worker (jobs.c, burst.c); d->mu held ------------------ */

/* The gate word: open (or bounded, in LC_MODE BOUNDED) waking the waiters;
 * closed (seq_cst: the worker then waits for the inside count, gate.h). */
void cs_lease_open_gate_locked(struct cs_dev *d);
void cs_lease_close_gate_locked(struct cs_dev *d);
/* A grant's memory is restored: HELD under lease_id, gate open. */
void cs_lease_hold_locked(struct cs_dev *d, uint64_t lease_id);
/* A revoked lease is about to go back (just before its RELEASE, on the
 * connection the REVOKE came on): if threads still want the device, ask
 * for it again now. The daemon reads an ACQUIRE while it revokes as "wait
 * again after my RELEASE" (protocol.md), so the device waits in the very
 * decision the RELEASE makes. */
void cs_lease_ask_again_locked(struct cs_dev *d);
/* The lease went back to the daemon (RELEASE sent or the connection gone):
 * IDLE, or WAITING again (ACQUIRE, unless already asked) if threads wait. */
void cs_lease_released_locked(struct cs_dev *d);

#endif
