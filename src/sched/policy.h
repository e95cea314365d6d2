/* policy.h: the scheduling policy of cushared, free of sockets and clocks.
 *
 * One scheduling domain per GPU (struct sd_gpu, keyed by UUID, created at
 * the first ATTACH). A client (struct sd_client, one per registered
 * process) has a member (struct sd_member) in the domain of each GPU it
 * attached. Every entry point takes the current time as an argument and
 * reports its decisions through struct sd_policy_ops (grant, revoke), so the
 * whole policy runs in unit tests on simulated time, and the server is a thin
 * layer that turns messages into calls and callbacks into messages.
 *
 * Decision rule, per GPU, evaluated after every event that can change it:
 *   1. The best waiter is the one of the highest priority class, then the
 *      least weighted virtual time (vtime), then the longest waiting.
 *   2. It is granted if it fits beside the current holders: in exclusive
 *      mode only when there are none; in shared mode when the memory
 *      footprints (from USAGE) of the holders and its own fit in the GPU's
 *      memory minus mem_reserve_mb. Repeat with the next waiter.
 *   3. When it does not fit, holders are revoked to make room, but only
 *      those that policy lets go now: idle ones (REVOKE IDLE; on an
 *      oversubscribed GPU only once idle for as long as a switch costs, see
 *      idle_grace_ns), lower classes (PREEMPT), and same-class ones past
 *      their quantum (QUANTUM); and only
 *      when revoking them is enough. Otherwise the earliest quantum end is
 *      the GPU's next deadline. Nobody waiting means nobody is revoked.
 *   4. The class share cap (share.c): a lower class kept from the GPU by
 *      better ones beyond class_share_max_pct of a window gets a turn first
 *      (better holders revoked with QUANTUM, not preempted during it).
 *   5. A client that misses an answer deadline (REVOKE, EVICT, PREFETCH,
 *      PREPARE) or whose process is stopped while one is out is marked
 *      unresponsive once: demoted, asked nothing more, its leases taken
 *      back with their REVOKE; nobody waits for it again.
 * vtime advances by held time / weight when a lease ends; a client that
 * starts waiting is placed at max(its vtime, the class's minimum vtime over
 * active members), so a newcomer neither starves nor monopolizes and a
 * client cannot bank time by going idle. The quantum is the smoothed switch
 * overhead (REVOKE->GRANT minus the outgoing job's drain, plus the incoming
 * job's restore) divided by switch_cost_target, within floor..cap.
 *
 * Memory (mem.c): each GPU has a capacity (total_mem - mem_reserve_mb -
 * client_reserve_mb per attached client) and each member's resident,
 * swapped, unswappable and footprint bytes (USAGE, adjusted by EVICTED,
 * RELEASE, RESTORED and PREFETCHED until the next USAGE). Room is made
 * before a grant: the next holder's footprint must fit beside what the
 * others keep resident; third parties are evicted while the holder still
 * runs, the outgoing holder through REVOKE.evict_bytes, and the next holder
 * prefetches what fits before its slice starts. See mem.c.
 *
 * Channel-group timeslices (tslice.c, issue 7): in shared mode, a holder of
 * a lower class than a high-class (latency-critical) holder of the same GPU
 * is told to shorten its compute channel groups' timeslice to
 * be_timeslice_us (TIMESLICE), and told 0 (the driver's defaults) once no
 * high-class holder remains, when it becomes high itself, or when the knob
 * or the mode turns it off. Evaluated after every decision, sent on change.
 *
 * Ownership: the policy owns every sd_gpu, sd_client and sd_member; the
 * server owns connections and keeps a pointer to its client. The structs are
 * public for read access (status, metrics); only the policy mutates them:
 * policy.c and its parts sharing policy_int.h (room.c, depart.c, mem.c, share.c,
 * lcgate.c, tslice.c). The one exception is sd_client.owner, which the
 * server sets (dispatch.c) and the policy never reads.
 * Callbacks run inside policy calls and must not call back into the policy
 * (the server defers closing a connection whose send failed).
 */
#ifndef SD_POLICY_H
#define SD_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/proto.h"
#include "sched/config.h"
#include "sched/hist.h"

#define SD_MAX_GPUS 64
#define SD_OVH_SAMPLES 5 /* overhead samples a member's median is taken over */
#define SD_OVH_GUESS_MAX (2ull << 30) /* reserve guessed for a client not measured yet */
#define SD_RESTORE_MAX_IDS 64 /* holders of one GPU remembered across a restart */
#define SD_VT_SCALE 1000u     /* vtime unit: ns * SD_VT_SCALE / weight */
#define SD_SHARE_BUCKETS 16   /* the class share window, in this many steps */

struct sd_gpu;
struct sd_client;

/* Who a client is: HELLO plus SO_PEERCRED. */
struct sd_client_info {
    uint32_t pid;
    uint32_t uid;
    uint32_t priority; /* enum cs_priority, after overrides */
    uint32_t weight;   /* 1 .. CS_WEIGHT_MAX, after overrides */
    uint64_t mem_limit;
    bool reconnect;    /* HELLO carried CS_HELLO_RECONNECT */
    bool tsg;          /* HELLO carried CS_HELLO_TSG: it may be sent TIMESLICE */
    bool lc;           /* HELLO carried CS_HELLO_LC: it may be sent LC_MODE */
    bool pin;          /* HELLO carried CS_HELLO_PIN: it reports PINNED */
    bool restored;     /* HELLO carried CS_HELLO_RESTORED: it sends RESTORED for every grant */
    bool giveback;     /* HELLO carried CS_HELLO_GIVEBACK: it may be sent EVICT GIVEBACK */
    uint64_t tenant;   /* whose pieces of the pinned pool it may be lent (lender.c);
                          0 = its own alone */
    uint64_t prev_id;  /* its client id under the previous daemon */
    uint32_t idle_ms;  /* the idle period its WELCOME gave (0: idle_release_ms) */
    char name[CS_NAME_LEN];
    char pod[CS_NAME_LEN];
    char ns[CS_NAME_LEN];
    char container[CS_NAME_LEN]; /* LABELS, where believed as pod and ns are; "" otherwise */
};

struct sd_member_stats {
    uint64_t gpu_ns;      /* time held, closed leases */
    uint64_t wait_ns;     /* time waiting, closed waits */
    uint64_t slices;      /* grants */
    uint64_t preemptions; /* REVOKE PREEMPT received */
    uint64_t revokes;     /* every REVOKE received */
    uint64_t forced;      /* leases taken back after revoke_timeout_ms */
    uint64_t swap_ns;     /* swap-out time reported in RELEASE and EVICTED */
    uint64_t drain_ns;    /* drain time reported in RELEASE */
    uint64_t swap_out_bytes; /* moved to the host: RELEASE + EVICTED */
    uint64_t swap_in_bytes;  /* copied back: RESTORED + PREFETCHED */
    uint64_t swap_in_ns;     /* restore time: RESTORED + PREFETCHED */
    uint64_t evictions;   /* EVICTs received (PREPARE not counted) */
    uint64_t prefetches;  /* PREFETCHes received */
    uint64_t prepares;    /* EVICT PREPAREs received */
    uint64_t rooms;       /* ROOMs answered 0 (room made) */
    uint64_t rooms_refused; /* ROOMs answered CUDA_ERROR_OUT_OF_MEMORY */
    struct sd_hist lease_latency; /* ACQUIRE -> GRANT */
    uint64_t lc_preempted; /* revoked because a latency-critical job had work (lcgate.c) */
    uint64_t bursts;       /* LC_BURSTs it reported */
    struct sd_hist burst_wait; /* LC_BURST.wait_ns: blocked at the gate for the lease */
    struct sd_hist burst_busy; /* LC_BURST.busy_ns: gate open -> burst finished */
};

/* One client on one GPU. */
struct sd_member {
    struct sd_client *client;
    struct sd_gpu *gpu;
    uint32_t slot;
    uint32_t state;       /* enum cs_lease_state */
    bool want;            /* ACQUIRE arrived while REVOKING: wait again after */
    bool idle;            /* last USAGE said idle */
    uint64_t idle_ns;     /* ...since (when that USAGE came) */
    bool timeout_reported;
    bool takeback_due;    /* unresponsive, REVOKING: take the lease back once
                             the REVOKE was read (ops.delivered), the process
                             is stopped, or revoke_timeout_ms passed */
    uint32_t revoke_reason;
    uint64_t lease_id;    /* current lease (HELD, REVOKING) */
    uint64_t prev_lease_id; /* last ended lease: a late RELEASE for it is fine */
    bool had_lease;         /* prev_lease_id is meaningful */
    uint64_t grow_until;    /* in its first lease, until then planned at the footprint
                               it is expected to grow to (mem.c sd_mem_expected); 0 = not */
    uint64_t vtime;
    uint64_t wait_since;  /* WAITING since */
    uint64_t idle_since;  /* IDLE since, 0 = never active */
    uint64_t grant_ns;    /* HELD since (lease start) */
    uint64_t slice_ns;    /* current slice since (a lease may span slices); in the
                             future while its grant restores (policy.c,
                             slice_after_restore) */
    uint64_t vt_ns;       /* vtime charged up to here */
    uint64_t revoke_ns;   /* REVOKE sent at */
    /* memory, from USAGE (and adjusted by EVICTED, RELEASE, RESTORED and
     * PREFETCHED until the next USAGE) */
    uint64_t resident, swapped, unswappable, footprint, submissions;
    /* memory planning (mem.c) */
    uint64_t evict_bytes;     /* asked of it and not answered yet: the EVICT's
                                 bytes, or REVOKE.evict_bytes while REVOKING */
    uint64_t evict_seen;      /* part of it a USAGE already showed gone */
    bool evict_stuck;         /* its last eviction moved less than asked: no
                                 planned EVICT until its memory changes */
    bool no_swap;             /* it answered CUDA_ERROR_NOT_SUPPORTED: its
                                 swapping is off, ask it nothing more */
    uint64_t prefetch_base;   /* resident when the PREFETCH was sent */
    bool restoring;           /* granted, its memory not all back yet (until
                                 RESTORED, or a USAGE showing it resident) */
    bool reports_restore;     /* it sends RESTORED: said in its HELLO
                                 (CS_HELLO_RESTORED) or seen once */
    bool usage_seen;          /* a USAGE came since it attached: until then its
                                 resident and footprint read 0, unknown */
    uint64_t attach_ns;       /* ATTACH at (how long its first USAGE is
                                 waited for: mem.c FIRST_USAGE_NS) */
    bool resumed;             /* held the GPU before a daemon restart and came
                                 back without the lease: granted first */
    bool restore_blocked;     /* asked for ROOM without holding or prefetching:
                                 restoring for a grant that is no longer
                                 current, its worker blocked until it fits;
                                 never a victim, granted first */
    bool lease_restored;      /* RESTORED came for the current lease */
    uint64_t prefetch_id;     /* outstanding PREFETCH, 0 = none */
    bool prefetch_stuck;      /* the last prefetch stopped short: no other one
                                 until memory is freed (g->freed_epoch moves) */
    uint64_t prefetch_epoch;
    uint64_t prep_id;         /* outstanding EVICT PREPARE, 0 = none */
    uint64_t prep_ns;         /* last PREPARE sent at (rate limit) */
    uint64_t prep_asked;      /* movable bytes the outstanding PREPARE covers */
    uint64_t prep_covered;    /* movable bytes known to have host backing */
    uint64_t prep_due;        /* pool bytes spoken for its outstanding PREPARE:
                                 lowered as it borrows (sd_policy_lent) */
    bool prep_more;           /* its last PREPARE was pinned in full: the next
                                 chunk goes without the rate limit */
    bool prep_off;            /* missed a PREPARE's deadline: asked no more
                                 (it pins when it swaps; mem.c) */
    uint64_t gb_id;           /* outstanding EVICT GIVEBACK (takeback.c), 0 = none */
    uint64_t gb_ns;           /* sent at */
    uint64_t gb_asked;        /* bytes it asked back */
    struct sd_member *gb_for; /* whose move they are for (cleared when that
                                 member goes: sd_takeback_forget) */
    bool gb_off;              /* missed a GIVEBACK's deadline, or answered one
                                 with an error (its driver shut down): asked
                                 no more */
    bool gb_dry;              /* gave back less than asked: no lent pieces left
                                 behind its resident memory; not asked again
                                 until a PREPARE lends it more or its PINNED
                                 rises */
    uint64_t paced_said;      /* what a move of it last left to the next
                                 holder's ROOMs, as logged (takeback.c:
                                 said once per amount, not per plan) */
    uint64_t gb_short;        /* its move's backing nobody could be asked for
                                 yet: asked as members finish (takeback.c) */
    uint64_t move_due;        /* pool bytes spoken for its move (EVICT, revoke's
                                 swap-out): the pool's free pieces counted for
                                 it and the GIVEBACKs asked for it; lowered as
                                 it borrows (sd_policy_lent) */
    bool pinned_known;        /* a PINNED came: pinned is the client's word */
    uint64_t pinned;          /* host bytes pinned as swap backing (PINNED) */
    /* what the driver charges its process beyond its allocations (contexts,
     * modules, library workspaces): the median of its last SD_OVH_SAMPLES
     * samples (sd_policy_measured), its reserve in the memory model */
    uint64_t ovh_ring[SD_OVH_SAMPLES];
    uint32_t ovh_n, ovh_at;
    uint64_t overhead;
    bool overhead_known;
    /* a ROOM this member asked for, being made (room.c) */
    bool room_active;
    uint32_t room_wait;       /* EVICTs outstanding on its behalf */
    uint64_t room_id;         /* the client's request id */
    uint64_t room_freed;      /* bytes the victims reported moved */
    bool room_copies;         /* it moves others' memory rather than wait for a departed
                                 client's exit (copy_beats_exits): its EVICTs are timed
                                 as copies beside an exit */
    uint64_t room_deadline;
    uint64_t room_since;      /* when it asked: a holder's slice is paused meanwhile */
    uint64_t room_bytes;      /* asked for by its last ROOM: counted as resident from the
                                 ask until its next USAGE, so that the room made is not
                                 handed to someone else's prefetch before the allocation
                                 that needed it is placed */
    /* channel-group timeslice (tslice.c) */
    uint32_t ts_sent;         /* last TIMESLICE sent, µs; 0 = defaults (or none sent) */
    uint64_t ts_msgs;         /* TIMESLICEs sent */
    /* latency-critical gating (lcgate.c) */
    uint32_t lc_mode_sent;    /* last LC_MODE sent (enum cs_lc_mode), NONE at start */
    uint32_t lc_param_sent;
    uint32_t lc_mech;         /* enum cs_lc_mech as of the last decision on its GPU */
    /* an EVICT sent to this member */
    uint64_t evict_id;        /* 0 = none outstanding */
    uint64_t evict_waited;    /* the evict_id a grant already waited out (mem.c): no later
                                 grant waits for that request again */
    struct sd_member *evict_for; /* whose ROOM it serves, NULL once answered */
    bool evict_beside_exit;   /* that ROOM chose it over a departed client's exit */
    bool exiting;             /* an EVICT found its driver shut down: its process
                                 is exiting, its memory goes with it (depart.c) */
    uint64_t exit_asked;      /* what that EVICT asked, for a ROOM waiting for the exit */
    uint64_t exit_until;      /* how long that ROOM waits for it */
    /* answer deadlines (policy.c, issue 17): when each request went out */
    uint64_t evict_ns;
    uint64_t prefetch_ns;
    uint64_t prefetch_bytes;  /* asked by the outstanding PREFETCH */
    struct sd_member_stats st;
};

struct sd_client {
    uint64_t id;
    struct sd_client_info info;
    struct sd_member *slot[CS_MAX_DEVICES];
    /* its last TSG_STATE (the mechanism is process-wide, not per GPU) */
    bool tsg_reported;
    bool tsg_warned; /* its UNAVAILABLE was logged (once per client: tslice.c) */
    struct cs_msg_tsg_state tsg;
    /* A deadline it missed (or its process was seen stopped while the
     * daemon waited for it): asked nothing more, its leases taken back at
     * once, for the rest of its connection (policy.c). */
    bool unresponsive;
    bool demoted;             /* ...and its class and weight lowered to low, 1 */
    uint32_t stop_seen;       /* consecutive probes that found its process stopped */
    uint64_t stop_probe_ns;   /* next probe, 0 = none yet */
    void *owner;          /* the server's connection; opaque to the policy */
    struct sd_client *next, *prev;
};

struct sd_gpu_stats {
    uint64_t switches;       /* the lease changed hands while someone waited */
    uint64_t evictions;      /* EVICTs sent (ROOM and planned; PREPARE not counted) */
    uint64_t prefetches;     /* PREFETCHes sent */
    uint64_t prefetch_bytes; /* bytes PREFETCHED reported copied back */
    uint64_t prepares;       /* EVICT PREPAREs sent */
    uint64_t givebacks;      /* EVICT GIVEBACKs sent (takeback.c) */
    uint64_t given_back;     /* bytes of pool pieces they gave back */
    uint64_t room_made;      /* ROOMs answered 0 */
    uint64_t room_refused;   /* ROOMs answered CUDA_ERROR_OUT_OF_MEMORY */
    uint64_t room_waits;     /* grants held back until evictions made room */
    uint64_t swap_out_bytes;
    uint64_t swap_in_bytes;
    struct sd_hist swap_out; /* RELEASE.swap_ns and EVICTED.ns that moved bytes */
    struct sd_hist swap_in;  /* RESTORED.ns and PREFETCHED.ns that moved bytes */
    uint64_t idle_ns;        /* closed intervals with no holder */
    uint64_t busy_ns;        /* closed intervals with a holder */
    uint64_t revoke_timeouts;
    uint64_t forced_releases;
    uint64_t share_turns;    /* turns given to a lower class under class_share_max_pct */
    uint64_t unresponsive;   /* clients of it marked unresponsive */
    uint64_t demotions;      /* ...of them, demoted to low, weight 1 (the others were already) */
    struct sd_hist switch_latency; /* REVOKE -> next GRANT */
    struct sd_hist switch_cost;    /* switch overhead samples (the quantum's basis) */
};

/* Departed clients' memory tracked per GPU; more at once is planned as
 * free at their disconnect, as it was before there was tracking. */
#define SD_DEPARTED_MAX 8

struct sd_gpu {
    uint8_t uuid[CS_UUID_LEN];
    uint32_t index;
    uint64_t mem_total;       /* largest total_mem any ATTACH reported */
    struct sd_member **m;     /* members, in attach order */
    size_t n, cap;
    bool draining;
    /* restart: holders the previous daemon recorded and not yet seen again */
    bool restoring;
    bool restore_all;         /* previous state unknown: wait the whole grace */
    uint64_t restore_deadline;
    uint64_t expect[SD_RESTORE_MAX_IDS];
    uint32_t expect_revoke[SD_RESTORE_MAX_IDS]; /* REVOKE reason it was given, 0 = none */
    size_t nexpect;
    uint64_t waited_since;    /* someone has waited for it since, 0 = nobody: an idle
                               * holder is charged from then (policy.c charged_ns) */
    uint64_t switch_ewma_ns;  /* smoothed switch overhead, 0 = none yet */
    uint64_t revoke_mark_ns;  /* first REVOKE since the last grant */
    uint64_t sw_drain_ns;     /* drain the RELEASEs of this handover reported */
    bool sw_waited_out;       /* this handover waited out a deadline: not a sample */
    /* a switch sample waiting for the new holder's RESTORED */
    uint64_t sw_lease;        /* the granted lease, 0 = none pending */
    uint64_t sw_sample_ns;    /* REVOKE->GRANT minus drain */
    uint64_t sw_prev_ewma;    /* switch_ewma_ns before the sample */
    uint64_t sw_sample_lease; /* the lease the last sample belongs to (kept after the
                                 RESTORED: room waited for in that lease adds to it) */
    /* memory planning (mem.c) */
    uint64_t freed_epoch;     /* moves whenever memory was freed on the GPU */
    /* memory of clients gone whose processes are still exiting: the
     * driver's until they are (depart.c, sd_policy_client_departing) */
    struct sd_departed {
        uint64_t client;      /* its sd_client id */
        uint32_t uid;         /* its uid (depart.c's distrust) */
        uint64_t bytes;       /* what it had resident */
        uint64_t until;       /* counted so at most until then */
        uint64_t left;        /* when its client left */
        struct sd_member *room_for; /* the ROOM waiting for it, NULL = none */
        uint64_t asked;       /* what that ROOM counts on it for */
    } dep[SD_DEPARTED_MAX];
    size_t ndep;
    uint64_t room_wait_since; /* the best waiter's grant held back for room since */
    uint64_t evict_bps;       /* smoothed rate of its EVICTs of SD_RATE_MIN_BYTES or
                                 more, timed here (sent to answered), at most
                                 SD_RATE_MAX_BPS; 0 = none yet (room.c) */
    uint64_t exit_copy_bps;   /* the same, of those a ROOM chose over a departed
                                 client's exit (room.c copy_beats_exits); 0 = none yet */
    uint64_t overhead_seen;   /* largest overhead of the members measured (the
                                 last one while none is): the reserve of members
                                 not measured yet and of the next process */
    bool handover;            /* a lease ended while someone waited */
    uint64_t min_vtime[CS_PRIO_COUNT];
    bool busy;                /* accounting: a holder exists */
    uint64_t acct_ns;         /* start of the current busy/idle interval */
    uint64_t deadline;        /* next time this GPU needs a decision, 0 = none */
    /* class share cap (share.c): a turn owed to a starved lower class */
    struct sd_member *share_pending; /* its waiter, granted next */
    struct sd_member *share_holder;  /* holding its turn, not preempted until share_until */
    uint64_t share_until;
    uint64_t share_mark_ns;   /* the window is accounted up to here */
    uint64_t share_bw;        /* bucket width the window was kept in, ns */
    bool share_denied[CS_PRIO_COUNT]; /* the class was denied since share_mark_ns */
    uint64_t share_k[SD_SHARE_BUCKETS + 1]; /* which bucket each slot holds */
    uint64_t share_ns[CS_PRIO_COUNT][SD_SHARE_BUCKETS + 1]; /* denied time per bucket */
    struct sd_gpu_stats st;
};

struct sd_policy_ops {
    /* m now holds m->lease_id: send GRANT. */
    void (*grant)(void *ctx, struct sd_member *m, uint32_t quantum_ms);
    /* m must give m->lease_id back: send REVOKE. */
    void (*revoke)(void *ctx, struct sd_member *m, uint32_t reason, uint64_t evict_bytes);
    /* The set of holders changed (persist it for a restart). May be NULL. */
    void (*holders_changed)(void *ctx);
    /* m, which does not hold the GPU, should swap out `bytes`: send EVICT. */
    void (*evict)(void *ctx, struct sd_member *m, uint64_t request_id, uint64_t bytes);
    /* Answer m's ROOM: 0, or CUDA_ERROR_OUT_OF_MEMORY. */
    void (*room_reply)(void *ctx, struct sd_member *m, uint64_t request_id, int32_t status);
    /* m should pin host backing for `bytes` ahead of need: send EVICT with
     * CS_EVICT_PREPARE. May be NULL (then nothing is prepared). */
    void (*prepare)(void *ctx, struct sd_member *m, uint64_t request_id, uint64_t bytes);
    /* m, the next holder, should restore its memory now with its gate
     * closed: send PREFETCH. May be NULL (then nothing is prefetched). */
    void (*prefetch)(void *ctx, struct sd_member *m, uint64_t request_id, uint64_t bytes);
    /* m (a client with CS_HELLO_TSG) should give its compute channel groups
     * a timeslice of `us` µs, 0 = the defaults: send TIMESLICE. May be NULL
     * (then nothing is sent and m->ts_sent stays 0). */
    void (*timeslice)(void *ctx, struct sd_member *m, uint32_t us);
    /* m (a client with CS_HELLO_LC) should behave as `mode` (enum
     * cs_lc_mode) on its GPU: send LC_MODE. May be NULL. */
    void (*lc_mode)(void *ctx, struct sd_member *m, uint32_t mode, uint32_t param_us);
    /* Whether m's process is stopped (SIGSTOP, a debugger): asked while the
     * daemon waits for an answer from it. May be NULL (never stopped). */
    bool (*stopped)(void *ctx, const struct sd_member *m);
    /* Whether m's client has read everything sent to it (its REVOKE
     * included): nothing queued here, nothing unread in its socket. The
     * hook closes its gate as it reads a REVOKE, so a lease taken back
     * without waiting for the answer may end only once this holds. May be
     * NULL (taken as read). */
    bool (*delivered)(void *ctx, const struct sd_member *m);
    /* m (a client with CS_HELLO_GIVEBACK) should give the node's pool back
     * about `bytes` of the pieces that back its resident memory: send EVICT
     * with CS_EVICT_GIVEBACK. May be NULL (nothing is taken back). */
    void (*giveback)(void *ctx, struct sd_member *m, uint64_t request_id, uint64_t bytes);
};

/* What the previous daemon recorded: its state file (state.c, read by
 * sd_state_load in server.h). */
struct sd_restore_gpu {
    uint8_t uuid[CS_UUID_LEN];
    uint32_t index;
    uint64_t mem_total;
    size_t nholders;
    uint64_t holders[SD_RESTORE_MAX_IDS];
    uint32_t revoking[SD_RESTORE_MAX_IDS]; /* the REVOKE reason it was given, 0 = holding */
};

struct sd_restore {
    bool unknown;             /* a state file exists but cannot be read */
    uint64_t next_client_id;
    size_t ngpu;
    struct sd_restore_gpu gpu[SD_MAX_GPUS];
};

/* uids whose "my process is exiting" was not borne out, remembered at once. */
#define SD_DISTRUST_MAX 16

struct sd_policy {
    const struct sd_config *cfg; /* owned by the server; read at each decision */
    /* uids whose process outlived the wait its exit was given (depart.c):
     * not waited for again until `until` */
    struct sd_distrust {
        uint32_t uid;
        uint64_t until;
    } distrust[SD_DISTRUST_MAX];
    /* smoothed time from a client's leaving to its process's exit, over
     * the departed clients whose exit was seen; 0 = none yet (depart.c) */
    uint64_t exit_ewma_ns;
    struct sd_policy_ops ops;
    void *ctx;
    struct sd_gpu *gpu[SD_MAX_GPUS];
    size_t ngpu;
    struct sd_client *clients;   /* doubly linked, newest first */
    size_t nclients;
    uint64_t next_client_id;
    uint64_t next_lease_id;
    uint64_t next_evict_id;
    uint64_t start_ns;
    bool past_unknown;           /* see sd_restore.unknown */
    /* The node's pool lends swap backing (lender.c sets it once its pinner
     * runs): pin-ahead is then a cheap borrow, asked from nine tenths of a
     * GPU's capacity on (mem.c: plan_prepare). */
    bool pool_lends;
    uint64_t pool_free;          /* what it can lend now (sd_policy_pool_changed) */
};

/* Return codes of the message entry points. */
#define SD_OK 0
#define SD_EPROTO (-1)  /* the message was out of place: close the connection */
#define SD_ELIMIT (-2)  /* a cap was hit: refuse, close with an ERROR */

void sd_policy_init(struct sd_policy *p, const struct sd_config *cfg,
                    const struct sd_policy_ops *ops, void *ctx, uint64_t lease_base,
                    uint64_t now);
void sd_policy_fini(struct sd_policy *p);

/* Seeds the domains from the previous daemon's state, before any client. */
void sd_policy_restore(struct sd_policy *p, const struct sd_restore *r, uint64_t now);

struct sd_client *sd_policy_client_add(struct sd_policy *p, const struct sd_client_info *info,
                                       uint64_t now);
/* Disconnect: every lease the client held ends now and the next waiters are
 * granted before this returns. Frees c. */
void sd_policy_client_remove(struct sd_policy *p, struct sd_client *c, uint64_t now);
/* Before sd_policy_client_remove, when c's process is still alive and its
 * exit will be reported (sd_policy_process_gone): its GPU memory stays the
 * driver's until then (0.1-0.4 s after the disconnect on an H200), and is
 * counted so, for a second at most: not prefetched into, and a ROOM waits
 * for it rather than copying out others' memory. */
void sd_policy_client_departing(struct sd_policy *p, struct sd_client *c, uint64_t now);
/* How long a departed client's memory is counted as the driver's at most:
 * its process normally exits within 0.4 s of its disconnect. */
#define SD_DEPART_WAIT_NS (1000 * 1000000ull)
/* The process of the departed client `client` (its id) has exited. */
void sd_policy_process_gone(struct sd_policy *p, uint64_t client, uint64_t now);
void sd_policy_client_update(struct sd_policy *p, struct sd_client *c, uint32_t priority,
                             uint32_t weight, uint64_t now);

/* Messages from a client. SD_OK, or SD_EPROTO/SD_ELIMIT with *why set. */
int sd_policy_attach(struct sd_policy *p, struct sd_client *c, const struct cs_msg_attach *a,
                     uint64_t now, const char **why);
int sd_policy_acquire(struct sd_policy *p, struct sd_client *c, uint32_t slot, uint64_t now,
                      const char **why);
int sd_policy_release(struct sd_policy *p, struct sd_client *c, const struct cs_msg_release *r,
                      uint64_t now, const char **why);
int sd_policy_usage(struct sd_policy *p, struct sd_client *c, const struct cs_msg_usage *u,
                    uint64_t now, const char **why);
/* ROOM and EVICTED (room.c): the answer to a ROOM comes through
 * ops.room_reply, at once or when the EVICTs it caused are answered. */
int sd_policy_room(struct sd_policy *p, struct sd_client *c, const struct cs_msg_room *r,
                   uint64_t now, const char **why);
int sd_policy_evicted(struct sd_policy *p, struct sd_client *c, const struct cs_msg_evicted *e,
                      uint64_t now, const char **why);
/* RESTORED and PREFETCHED (mem.c): reports; a report matching nothing
 * outstanding (it crossed a reconnect or a revoke) is ignored. */
int sd_policy_restored(struct sd_policy *p, struct sd_client *c, const struct cs_msg_restored *r,
                       uint64_t now, const char **why);
int sd_policy_prefetched(struct sd_policy *p, struct sd_client *c,
                         const struct cs_msg_prefetched *r, uint64_t now, const char **why);

/* TSG_STATE (tslice.c): kept for status and metrics, and the client's GPUs
 * rescheduled (whether it is gated beside a latency-critical job depends on
 * it, lcgate.c). SD_EPROTO from a client that did not announce CS_HELLO_TSG. */
int sd_policy_tsg_state(struct sd_policy *p, struct sd_client *c,
                        const struct cs_msg_tsg_state *t, uint64_t now, const char **why);

/* PINNED (mem.c): the member's pinned host backing, for the node's pin-ahead
 * budget. SD_EPROTO from a client that did not announce CS_HELLO_PIN or for
 * a slot not attached. */
/* Bytes the node's pinned pool should hold now (mem.c; 0 far from
 * oversubscription). */
uint64_t sd_policy_pool_want(const struct sd_policy *p);
/* Whether a move the daemon asked for is under way on the node at now
 * (mem.c): a PREFETCH or a holder's restore, and an EVICT or a REVOKE's
 * swap-out while the pool has pieces to lend (pool_free), each until its
 * answer deadline, none of an unresponsive client. *until: the first of
 * those deadlines (when to look again). The pool pins nothing meanwhile:
 * pinning holds the driver's lock that the movers' imports and maps wait
 * for. */
bool sd_policy_moving(const struct sd_policy *p, uint64_t now, uint64_t *until);
/* The pool can lend free_bytes now (the lender says so after each change):
 * pin-ahead asks no more than that, so that a PREPARE borrows rather than
 * pins beside the pool's own pinning; more to lend plans again. */
void sd_policy_pool_changed(struct sd_policy *p, uint64_t free_bytes, uint64_t now);
/* The lender lent `bytes` of the pool to c's member in `slot` (takeback.c):
 * what its move or PREPARE counted on from the pool is that much less, so
 * that the lender's next free_bytes, which no longer holds them, and the
 * pieces still spoken for add up. A slot not attached is ignored. */
void sd_policy_lent(struct sd_policy *p, struct sd_client *c, uint32_t slot, uint64_t bytes);
int sd_policy_pinned(struct sd_policy *p, struct sd_client *c, const struct cs_msg_pinned *m,
                     uint64_t now, const char **why);

/* The driver's figure for the process of each member in x (meter.c, read
 * by the server; members of one process share its proc key): used bytes
 * minus what its members report resident is the process's overhead, the
 * first member's sample; the others get 0. used = UINT64_MAX: unknown,
 * skipped. With client_reserve_mb = auto (mem.c) the memory model reserves
 * each member's median overhead, and the largest one of the members
 * measured for members not measured yet and the next process. */
struct sd_measured {
    struct sd_member *m;
    uint32_t proc;
    uint64_t used;
};
void sd_policy_measured(struct sd_policy *p, struct sd_gpu *g, const struct sd_measured *x,
                        size_t n, uint64_t now);
/* The reserve the memory model plans for the next process on g: a
 * number client_reserve_mb, else the largest overhead measured there. */
uint64_t sd_gpu_client_reserve(const struct sd_policy *p, const struct sd_gpu *g);

/* LC_BURST (lcgate.c): into the member's burst histograms. SD_EPROTO from a
 * client that did not announce CS_HELLO_LC or for a slot not attached. */
int sd_policy_lc_burst(struct sd_policy *p, struct sd_client *c, const struct cs_msg_lc_burst *b,
                       const char **why);

/* What protects latency-critical jobs from m, or m itself, on its GPU now
 * (enum cs_lc_mech), for status and metrics. */
uint32_t sd_lc_mechanism_of(const struct sd_policy *p, const struct sd_member *m);

void sd_policy_drain(struct sd_policy *p, struct sd_gpu *g, bool on, uint64_t now);
/* Knobs changed: re-evaluate every GPU. */
void sd_policy_reconfigure(struct sd_policy *p, uint64_t now);
/* Acts on every deadline that has passed. Returns the next deadline, 0 if
 * none. */
uint64_t sd_policy_tick(struct sd_policy *p, uint64_t now);
uint64_t sd_policy_deadline(const struct sd_policy *p);

/* Lookups and read-only views. */
struct sd_gpu *sd_policy_gpu_by_uuid(const struct sd_policy *p, const uint8_t *uuid);
/* "GPU-<uuid>", a bare UUID, or a decimal index. */
struct sd_gpu *sd_policy_gpu_by_text(const struct sd_policy *p, const char *text);
uint64_t sd_gpu_quantum_ns(const struct sd_policy *p, const struct sd_gpu *g);
void sd_gpu_times(const struct sd_gpu *g, uint64_t now, uint64_t *idle_ns, uint64_t *busy_ns);
uint32_t sd_gpu_count(const struct sd_gpu *g, uint32_t state);
uint64_t sd_gpu_resident(const struct sd_gpu *g);
/* What the memory model lets clients keep resident: total_mem minus
 * mem_reserve_mb minus each attached client's reserve and the next
 * process's (sd_gpu_client_reserve); 0 = unknown (no memory planning). */
uint64_t sd_gpu_capacity(const struct sd_policy *p, const struct sd_gpu *g);
uint64_t sd_gpu_footprint(const struct sd_gpu *g);
uint64_t sd_gpu_swapped(const struct sd_gpu *g);
uint64_t sd_member_gpu_ns(const struct sd_member *m, uint64_t now);
uint64_t sd_member_wait_ns(const struct sd_member *m, uint64_t now);

#endif
