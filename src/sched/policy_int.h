/* policy_int.h: what policy.c shares with the other parts of the policy
 * (room.c, depart.c, mem.c, share.c, lcgate.c, tslice.c), and nobody else. */
#ifndef SD_POLICY_INT_H
#define SD_POLICY_INT_H

#include "sched/policy.h"

#define SD_MS 1000000ull
/* Memory differences below this are noise (one VMM granule): no eviction
 * or prefetch is started for less. */
#define SD_MEM_SLACK (2ull << 20)

/* Asks for a decision on g at t (the earliest wins). */
void sd_gpu_want_at(struct sd_gpu *g, uint64_t t);
/* Re-evaluates g after memory changed. */
void sd_gpu_reschedule(struct sd_policy *p, struct sd_gpu *g, uint64_t now);
/* The same for every GPU: something node-wide (host pinning) came free. */
void sd_node_reschedule(struct sd_policy *p, uint64_t now);

bool sd_is_holder(const struct sd_member *m);
/* Whether m has shown its working set: it holds or has held the GPU (or
 * held it before a daemon restart). */
bool sd_has_run(const struct sd_member *m);
/* Whether a and b are one tenant's: one client, or clients of one nonzero
 * tenant (sd_client_info.tenant: 0 is a client's own alone). */
bool sd_same_tenant(const struct sd_member *a, const struct sd_member *b);
/* Whether w may run beside the current holders (always when there are
 * none; in shared mode, when the footprints fit). */
/* Whether the mode lets holders run together at all (shared, mixed). */
static inline bool sd_mode_coruns(const struct sd_config *c)
{
    return c->mode != CS_MODE_EXCLUSIVE;
}

/* Whether a and b may hold one GPU together, memory aside: any two in
 * shared mode; in mixed mode a high member and a lower-class one (the
 * latency-critical job beside best-effort work), never two of one side;
 * none in exclusive mode. */
bool sd_may_corun(const struct sd_policy *p, const struct sd_member *a, const struct sd_member *b);

/* Every holder of g (leaving ones included) may run beside w. */
bool sd_corun_with_holders(const struct sd_policy *p, const struct sd_gpu *g,
                           const struct sd_member *w);
bool sd_fits_beside_holders(const struct sd_policy *p, const struct sd_gpu *g,
                            const struct sd_member *w);
/* The waiter policy grants next on g, NULL if none. */
struct sd_member *sd_best_waiter(const struct sd_gpu *g);
/* The waiter g's next switch is for (mem.c): one owed a share turn
 * (share.c) first, else sd_best_waiter; NULL while g drains. */
struct sd_member *sd_next_holder(const struct sd_gpu *g);

/* room.c, called by policy.c */
/* Answers the ROOMs whose time is up; sets g's deadline for the others. */
void sd_room_check(struct sd_policy *p, struct sd_gpu *g, uint64_t now);
/* m is going away: answer for it and forget it on both sides. */
void sd_room_forget(struct sd_policy *p, struct sd_member *m);

/* depart.c, called by room.c and policy.c: memory on its way out */
/* How long a ROOM waits for a victim whose process is exiting to be gone,
 * rather than moving others' memory: its driver shuts down only in the
 * process's last moments (on the H200 a PyTorch job's exit took 0.2-0.45 s
 * from there, 45 GB included), and asking the others instead copies out
 * memory that must come back, 0.3 s for 16 GB each way. */
#define SD_EXIT_WAIT_NS (1000 * 1000000ull)
/* Departed clients' memory on g still counted as the driver's at now. */
uint64_t sd_gpu_departed_bytes(const struct sd_gpu *g, uint64_t now);
/* Whether uid's processes outlived the wait their exit was given within
 * the last minute (then they are not waited for). */
bool sd_depart_distrusted(const struct sd_policy *p, uint32_t uid, uint64_t now);
void sd_depart_distrust(struct sd_policy *p, uint32_t uid, uint64_t now);
/* An EVICT found v's driver shut down (CUDA_ERROR_DEINITIALIZED, whether
 * for a ROOM or planned): its process is exiting. The first such answer
 * starts the one wait it is given (SD_EXIT_WAIT_NS, none for a distrusted
 * uid); other statuses change nothing. */
void sd_depart_mark_exiting(struct sd_policy *p, struct sd_member *v, int32_t status,
                            uint64_t now);
/* Whether m's ROOM may wait for v's process to be gone. */
bool sd_depart_exit_awaited(const struct sd_member *v, const struct sd_member *m, uint64_t now);
/* Removes g's departed entry i and returns it (gone at now: its process
 * exited, its memory is free: g's freed_epoch moves, and the time since
 * its client left is a sample of p->exit_ewma_ns). */
struct sd_departed sd_depart_take(struct sd_policy *p, struct sd_gpu *g, size_t i, bool gone,
                                  uint64_t now);

/* mem.c */
/* a + b, saturating. */
uint64_t sd_add_sat(uint64_t a, uint64_t b);
/* prev smoothed with sample, weight 1/4 (policy.c); sample when prev is 0. */
uint64_t sd_ewma(uint64_t prev, uint64_t sample);
/* Resident bytes that could move: resident - unswappable; none of an
 * unresponsive client's (it would not move them). */
uint64_t sd_mem_movable(const struct sd_member *m);
/* Resident bytes that can never move: unswappable, or all of an
 * unresponsive client's. */
uint64_t sd_mem_fixed(const struct sd_member *m);
/* Eviction order, furthest from running first: idle before waiting, lower
 * class before higher, larger vtime before smaller. */
bool sd_mem_evict_before(const struct sd_member *a, const struct sd_member *b);
/* The footprint m is planned at: what it has allocated, or, waiting for
 * its first lease or in its first SD_GROW_NS of it, the footprint it is
 * expected to grow to (the largest of a member that has run, when m holds
 * at least 1/SD_GROW_LIKE of it). */
#define SD_GROW_LIKE 4
#define SD_GROW_NS (5000 * 1000000ull)
uint64_t sd_mem_expected(const struct sd_gpu *g, const struct sd_member *m);
/* Bytes that must leave the GPU, beyond what is already on its way out, so
 * that w's whole expected footprint (sd_mem_expected) fits beside what the
 * others keep resident. 0 when the capacity is unknown or it already fits. */
uint64_t sd_mem_shortfall(const struct sd_policy *p, const struct sd_gpu *g,
                          const struct sd_member *w);
/* The same for what w has allocated now, without its expected growth: what
 * a revoked holder moves out after its drain (policy.c make_room); the
 * growth goes to third parties, which move while the holder drains. */
uint64_t sd_mem_shortfall_allocated(const struct sd_policy *p, const struct sd_gpu *g,
                                    const struct sd_member *w);
/* Whether w may be granted now as far as memory goes: true when its
 * footprint fits beside the others' resident memory, or when nothing more
 * can be moved (ROOM is then the safety net), or after revoke_timeout_ms of
 * waiting. Otherwise it evicts third parties for w and sets a deadline. */
bool sd_mem_grant_ready(struct sd_policy *p, struct sd_gpu *g, struct sd_member *w,
                        uint64_t now);
/* After every decision on g: third-party evictions and a prefetch for the
 * next holder while the current one runs, and host-backing preparation on
 * an oversubscribed GPU. */
void sd_mem_plan(struct sd_policy *p, struct sd_gpu *g, uint64_t now);
/* Memory bookkeeping for the messages policy.c handles. */
void sd_mem_on_usage(const struct sd_policy *p, struct sd_member *m, const struct cs_msg_usage *u,
                     uint64_t now);
/* held: the RELEASE ends m's current lease. */
void sd_mem_on_release(struct sd_gpu *g, struct sd_member *m, const struct cs_msg_release *r,
                       bool held);
/* An EVICTED for m's outstanding PREPARE: handled, returns 1; else 0. */
int sd_mem_evicted_prepare(struct sd_member *m, const struct cs_msg_evicted *e);
/* An EVICTED for m's outstanding EVICT: memory and counters; returns the
 * bytes moved. */
uint64_t sd_mem_on_evicted(struct sd_member *m, const struct cs_msg_evicted *e);
/* Sends an EVICT of `bytes` to v (which must not hold the GPU) on behalf
 * of asker's ROOM, or of the planner (asker NULL). */
void sd_mem_send_evict(struct sd_policy *p, struct sd_member *v, uint64_t bytes,
                       struct sd_member *asker, uint64_t now);
/* The slowest rate an honest client moves memory at (pinning included): a
 * request's deadline grows by its bytes at this rate. */
#define SD_ANSWER_MIN_BPS 500000000ull
/* When a request of `bytes` sent at `sent` is overdue (answer_timeout_ms
 * plus the bytes at SD_ANSWER_MIN_BPS). */
uint64_t sd_answer_deadline(const struct sd_policy *p, uint64_t sent, uint64_t bytes);
/* Marks unresponsive the clients whose EVICT, PREFETCH or EVICT PREPARE on
 * g is overdue; sets g's deadline for the others. */
void sd_mem_check_answers(struct sd_policy *p, struct sd_gpu *g, uint64_t now);
/* m will not answer: its outstanding requests are dropped (a ROOM waiting
 * for its EVICT is answered) and an outstanding prefetch counts as done. */
void sd_mem_forget_requests(struct sd_policy *p, struct sd_member *m, uint64_t now);

/* What m has pinned for its resident memory: what a PREPARE covered, or
 * what it reports pinned beyond its swapped bytes, if more. */
uint64_t sd_mem_backing_covered(const struct sd_member *m);
/* What moving `bytes` out of m (at most what it can move) needs beyond
 * that: backing it would borrow or pin. */
uint64_t sd_mem_backing_lack(const struct sd_member *m, uint64_t bytes);
/* Whether what m has pinned is known: it said so (PINNED), or it reports
 * what it pins (CS_HELLO_PIN) and has not yet, so it has pinned nothing
 * (it reports changes only). An older client's is not. */
bool sd_mem_pins_known(const struct sd_member *m);

/* takeback.c, called by mem.c, policy.c and room.c */
/* v is asked to move `bytes` out (an EVICT, a revoke's swap-out): what its
 * backing lacks is counted against the pool, and what the pool cannot lend
 * is asked back of members that are not moving (EVICT GIVEBACK). */
void sd_takeback_for(struct sd_policy *p, struct sd_member *v, uint64_t bytes, uint64_t now);
/* An EVICTED for m's outstanding GIVEBACK: handled, returns 1; else 0. */
int sd_takeback_answered(struct sd_policy *p, struct sd_member *m, const struct cs_msg_evicted *e,
                         uint64_t now);
/* Forgets g's GIVEBACKs past their deadline (their members are asked no
 * more); sets g's deadline for the others. Then asks, node-wide, for what
 * moves still lack (members that were busy when they were ordered). */
void sd_takeback_check(struct sd_policy *p, struct sd_gpu *g, uint64_t now);
/* m goes, or is unresponsive: its GIVEBACK is forgotten (what it was asked
 * is its mover's to ask of others), and no GIVEBACK is for m any more. */
void sd_takeback_forget(struct sd_policy *p, struct sd_member *m);
/* What the pool can lend that no outstanding move or PREPARE counts on:
 * the lender's free bytes less every such request's due. */
uint64_t sd_takeback_lendable(const struct sd_policy *p);

/* Moves paced by the backing at hand (issue 20). The next holder's
 * restore gives the pool back its pieces as it goes (its hook returns
 * them before each ROOM: hook/swap.c cs_swap_lend_back_locked; a client
 * with CS_HELLO_GIVEBACK), so the
 * part of a move for it that would pin backing of its own (beyond v's own
 * and the pool's lendable bytes) is left to
 * its ROOMs, up to *returns bytes in all (what its restore still brings
 * back, lowered by what this defers). Returns what v is asked to move
 * now: all of `amount` where the pool does not lend, v does not report
 * what it pins (an older client), or nothing is left of *returns. */
uint64_t sd_takeback_paced(const struct sd_policy *p, struct sd_member *v, uint64_t amount,
                           uint64_t *returns);

/* tslice.c, called by policy.c */
/* After every decision on g: TIMESLICE to each member whose desired
 * timeslice changed. */
void sd_ts_plan(struct sd_policy *p, struct sd_gpu *g);
/* The same for one member (m about to be granted: its TIMESLICE goes out
 * before the GRANT, so its first kernel runs with the short slice). */
void sd_ts_update(struct sd_policy *p, struct sd_member *m);

/* lcgate.c, called by policy.c */
/* m, of a lower class than high, must be gated while a high member has
 * work on its GPU (shared mode; lc_mechanism, its timeslice mechanism). */
bool sd_lc_gated(const struct sd_policy *p, const struct sd_member *m);
/* A high member of g wants or holds the GPU (shared mode). */
bool sd_lc_active(const struct sd_policy *p, const struct sd_gpu *g);
/* Revokes the gated holders of g while a high member has work. */
void sd_lc_decide(struct sd_policy *p, struct sd_gpu *g, uint64_t now);
/* sd_best_waiter, passing over gated waiters while a high member has work. */
struct sd_member *sd_lc_best_waiter(const struct sd_policy *p, const struct sd_gpu *g);
/* After every decision on g: LC_MODE to each member whose mode changed. */
void sd_lc_plan(struct sd_policy *p, struct sd_gpu *g);

/* policy.c, called by lcgate.c */
/* Revokes m because a high member has work: not a switch (the high member
 * runs beside the drain), counted in lc_preempted. */
void sd_lc_revoke(struct sd_policy *p, struct sd_member *m, uint64_t now);
/* Waiter order (class, vtime, waiting time, age). */
bool sd_waiter_before(const struct sd_member *a, const struct sd_member *b);

/* share.c, called by policy.c (the class share cap) */
/* Accounts the time since the last decision (call first in a decision). */
void sd_share_account(struct sd_policy *p, struct sd_gpu *g, uint64_t now);
/* Records who is denied now (call last in a decision). */
void sd_share_update(struct sd_gpu *g);
/* The waiter owed a turn, granted before anyone else; NULL if none. Sets
 * g's deadline for the end of a turn or the next look at the window. */
struct sd_member *sd_share_target(struct sd_policy *p, struct sd_gpu *g, uint64_t now);
/* m was granted: its turn starts if it was owed one. */
void sd_share_granted(const struct sd_policy *p, struct sd_gpu *g, struct sd_member *m,
                      uint64_t now);
/* h holds its turn: no better class preempts it. */
bool sd_share_protected(const struct sd_gpu *g, const struct sd_member *h, uint64_t now);
/* w is owed a turn: better-class holders go for it (REVOKE QUANTUM). */
bool sd_share_owed(const struct sd_gpu *g, const struct sd_member *w);
/* m is going away. */
void sd_share_forget(struct sd_gpu *g, const struct sd_member *m);

/* policy.c, called by room.c and mem.c */
/* c did not answer `what` in time (or its process is stopped): marked
 * unresponsive and demoted, its requests forgotten, its leases taken back.
 * Once per client; its GPUs are rescheduled at `now` (deadline). */
void sd_unresponsive(struct sd_policy *p, struct sd_client *c, const char *what, uint64_t now);

/* room.c, called by policy.c: v will not answer its EVICT; the ROOM it
 * served is answered when it was the last one awaited. */
void sd_room_victim_lost(struct sd_policy *p, struct sd_member *v, uint64_t now);

/* policy.c, called by mem.c: the new holder's RESTORED completes the
 * switch overhead sample of its grant (drain excluded, restore added). */
void sd_switch_restored(struct sd_gpu *g, uint64_t lease_id, uint64_t ns);
/* m's gate opened (its lease's RESTORED): its slice starts now at the latest. */
void sd_slice_gate_opened(struct sd_member *m, uint64_t now);
/* The holder m waited ns for room in the lease a switch put it in (room.c). */
void sd_switch_room_waited(struct sd_gpu *g, const struct sd_member *m, uint64_t ns);

#endif
