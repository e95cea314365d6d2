/*
 * lease.pml: Promela model of cushare's lease/revoke protocol on one GPU in
 * exclusive, shared and mixed mode (issue 24; -DMODE picks the mode, one
 * protocol description for all three). Checked by model/check.sh with Spin.
 * docs/model.md says what is modelled, what is abstracted away and how a
 * change to the protocol must change this file.
 *
 * Code this stands for (read it before changing anything here):
 *   daemon   src/sched/policy.c  grant(), revoke(), take_back(), end_lease(),
 *                                check_revoke_timeouts(), sd_unresponsive(),
 *                                trim_holders(), restore_check(), waiter_before(),
 *                                fits(), sd_may_corun(), make_room(),
 *                                victims_needed(), revoke_reason_for(),
 *                                gpu_decide(), sd_policy_attach(),
 *                                sd_policy_acquire(), sd_policy_release(),
 *                                sd_policy_client_remove(), sd_policy_restore()
 *            src/sched/share.c   class share turns (denied_now, sd_share_target)
 *            src/sched/mem.c     sd_mem_shortfall() (REVOKE evict_bytes),
 *                                (PF) sd_mem_on_usage(), usage_ends_restore()
 *            src/sched/room.c    ROOM -> EVICT (victims, last_resort())
 *            src/sched/server.c  EOF -> sd_policy_client_remove()
 *            src/sched/state.c   state file: holders (+ revoke reason), read at start
 *   client   src/hook/lease.c    on_grant(), on_revoke(), on_disconnect(),
 *                                attach_msg_locked(), after_attach_sent_locked(),
 *                                cs_lease_wait_open(), cs_lease_released_locked()
 *            src/hook/jobs.c     job_grant(), granted(), grant_stale(), job_revoke()
 *            src/hook/swap.c     cs_swap_restore() (restore, then the gate opens)
 *            src/hook/gate.c     the gate word (one atomic), cs_gate_slow()
 *
 * Build switches (-D on the spin command line):
 *   MODE=0|1|2 the daemon's `mode` (src/sched/config.c): 0 exclusive (the
 *              default of the model), 1 shared, 2 mixed (the daemon's default)
 *   C0, C1, C2 the class of client 0, 1, 2 (0 high, 1 normal, 2 low as
 *              CS_PRIO_*; default high, normal, normal)
 *   N=2|3      clients
 *   CAP=k      device memory in units (each client has one 1-unit segment,
 *              its footprint)
 *   MAXKILL, MAXSTOP, MAXRESTART, MAXSLOW   fault budgets (kill -9, a
 *              process that stops answering for good, daemon restart, a
 *              drain longer than revoke_timeout_ms)
 *   STOPPABLE  the client that may stop; HBOUND the high client's wait bound
 *   CODE_AS_IS the code exactly as it is today, with the two defects this
 *              model found (docs/model.md, "Findings"):
 *     AS_IS_STALE_GRANT     src/hook/jobs.c granted() opens the gate for a
 *                           grant whose connection is gone or whose REVOKE is
 *                           queued (grant_stale() is checked only on failure)
 *     AS_IS_UNRESP_TAKEBACK src/sched/policy.c revoke() takes the lease of an
 *                           unresponsive client back before it read the REVOKE
 *   AS_IS_ROOM_UNRESP       src/sched/room.c never asks an unresponsive client
 *                           to move its memory (finding 4; not part of
 *                           CODE_AS_IS, which is the code of the first model)
 *   AS_IS_PF_UNREPORTED     (with PF) finding 5: a member that has sent no
 *                           USAGE since it attached counts as having no
 *                           memory (grant(): not restoring; plan_prefetch())
 *   AS_IS_PF_UNRESP_HOLDER  (with PF) finding 7: prefetches planned while an
 *                           unresponsive member holds the GPU
 *   AS_IS_USAGE_RESTORE     (with PF) finding 6: a USAGE showing a holder's
 *                           memory all resident ends its restore
 *                           (m->restoring), also one sent before an older
 *                           revoke's swap-out finished; the model before the
 *                           fix, state for state
 *              Without them the model checks the code (fixed 2026-11-28 and,
 *              finding 4, with the mixed-mode model; 5, 7 and 6 in part with PF).
 *   HELLO_RESTORED=0  (with PF) the clients' HELLO lacks CS_HELLO_RESTORED
 *              (a hook older than the fix of finding 6): the daemon learns
 *              m->reports_restore from a member's first RESTORED, and forgets
 *              it with the member (a reconnect, a daemon restart). Default 1:
 *              every modelled client is the hook, which says it
 *   NO_PFROOM  (with PF) leaves the PFROOM assertion out (p-restart did
 *              until finding 6 was fixed; -DAS_IS_USAGE_RESTORE and
 *              -DAS_IS_GRANT_RESTORING fail it)
 *   AS_IS_GRANT_RESTORING  (with PF) finding 6's second path: grant()
 *              computes m->restoring from the resident estimate alone, also
 *              for a member that reports its restores (the code before
 *              policy.c grant() made such a member restoring until that
 *              lease's RESTORED; p-restart fails PFROOM with it)
 *   AS_IS_RELEASE_FIRST  the hook before finding 8's fix: a revoked client
 *              whose threads still wait sends RELEASE, then ACQUIRE (now
 *              ACQUIRE first: src/hook/jobs.c, cs_lease_ask_again_locked())
 *   AS_IS_PREV_ONLY  the daemon before it: a RELEASE of neither the current
 *              nor the previous lease was a protocol error (with the hook's
 *              new order, a RELEASE can come after a lease granted on its
 *              ACQUIRE was taken back)
 *   BREAK_*    the deliberate bugs of docs/model.md's failure table
 *   NGPU=2     two GPUs: lease2.pml, a model of its own (a client on both
 *              GPUs, coupled gates, per-GPU daemon state), included below
 *              instead of everything else in this file; NGPU=1 (the
 *              default) is this model, state for state
 *   PF         prefetch (src/sched/mem.c sd_mem_plan()/plan_prefetch(),
 *              sd_policy_prefetched(); src/hook/lease.c on_prefetch(),
 *              src/hook/jobs.c job_prefetch(), src/hook/swap.c
 *              cs_swap_prefetch()) with the daemon's memory estimate
 *              (m->resident, m->restoring) and one client (BIG, default 1)
 *              of two 1-unit segments, so that prefetches, evictions and
 *              swap-outs can be partial. Without PF the model is the one of
 *              the runs before it, state for state.
 */

#ifndef NGPU
#define NGPU 1
#endif
#if NGPU > 1
/* two GPUs: a model of its own (lease2.pml), the one-GPU policy composed */
#include "lease2.pml"
#else
#ifdef CODE_AS_IS
#define AS_IS_STALE_GRANT
#define AS_IS_UNRESP_TAKEBACK
#endif
#ifndef N
#define N 2
#endif
#ifndef CAP
#define CAP 1
#endif
#ifndef MAXKILL
#define MAXKILL 1
#endif
#ifndef MAXSLOW
#define MAXSLOW 1       /* drains longer than revoke_timeout_ms (timing fault) */
#endif
#ifndef MAXSTOP
#define MAXSTOP 0
#endif
#ifndef MAXRESTART
#define MAXRESTART 1
#endif
#ifndef STOPPABLE
#define STOPPABLE 1     /* the client that may stop answering */
#endif
#ifndef HBOUND
/* 3 since finding 8's fix: a revoked holder that wants the GPU again sends
 * ACQUIRE, then RELEASE, two messages (two daemon steps) where it sent one
 * before the high client's grant (2 with AS_IS_RELEASE_FIRST) */
#define HBOUND 3
#endif

/* the daemon's mode (src/sched/config.c, CS_MODE_*) */
#define M_EXCL   0
#define M_SHARED 1
#define M_MIXED  2
#ifndef MODE
#define MODE M_EXCL
#endif
/* classes, as CS_PRIO_* (src/common/util.h): 0 high, 1 normal, 2 low */
#ifndef C0
#define C0 0
#endif
#ifndef C1
#define C1 1
#endif
#ifndef C2
#define C2 1
#endif

#define NONE 255
#define LMOD 4          /* lease ids are counted modulo 4 per client; a REVOKE
                         * carries lease + LMOD when it asks for a swap-out */

mtype = { ACQUIRE, RELEASE, ATT_IDLE, ATT_WAIT, ATT_HELD,   /* client -> daemon */
          GRANT, REVOKE, EVICT,                             /* daemon -> client */
          JGRANT, JREVOKE, JEVICT,                          /* worker jobs      */
          PREFETCHED, PREFETCH, JPREFETCH };                /* PF: prefetch     */

/* ---- connections: ordered within one, independent across ------------- */
chan c2d[N] = [4] of { mtype, byte };       /* type, lease id   */
chan d2c[N] = [4] of { mtype, byte };
chan wq[N]  = [4] of { mtype, byte, bit };  /* job, lease id, connection generation */

/* ---- client side (src/hook) ------------------------------------------ */
#define C_IDLE     0
#define C_WAITING  1
#define C_HELD     2
#define C_REVOKING 3
bool alive[N];      /* process exists (kill -9 clears it) */
bool stopped[N];    /* process stopped for good: never answers again */
bool gate[N];       /* d->gate.open */
byte cst[N];        /* d->lease.state */
byte clid[N];       /* d->lease.id */
bool want[N];       /* application threads wait at the gate (lease.waiters > 0) */
bool conn[N];       /* connection up */
bit  cgen[N];       /* cs_client_generation(), low bit */
bool acq_sent[N];   /* d->lease.acquire_sent */
byte wph[N];        /* phase of the worker's current job */
bool wbusy[N];      /* the worker runs the job at the head of wq[i] */
#define RUN(i) (alive[i] && !stopped[i])
bool eof[N];        /* the daemon will read EOF after what is queued */

/* memory: one segment per client */
#define DEV  0
#define HOST 1
bit  auth[N];       /* where the authoritative copy is */
bool dv[N];         /* device copy mapped and holding the data */
bool hv[N];         /* host backing holds the data */
#ifdef PF
#ifndef BIG
#define BIG 1       /* the client with two segments (footprint 2 units) */
#endif
/* the big client's second segment ("seg b"; the arrays above are seg a) */
bit  auth2;
bool dv2;
bool hv2;
#define FP(i)   ((i) == BIG -> 2 : 1)                   /* m->footprint, units */
#define RES(i)  (dv[i] + ((i) == BIG -> dv2 : 0))        /* resident units (truth) */
#define SWA(i)  (auth[i] == HOST)                        /* seg a swapped */
#define SWB(i)  ((i) == BIG && auth2 == HOST)            /* seg b swapped */
#define ONB(i)  ((i) == BIG && auth2 == DEV)             /* seg b on the device */
#else
#define FP(i)   1
#endif

/* ---- daemon side (src/sched) ----------------------------------------- */
#define D_NONE     0    /* no member (not connected / removed) */
#define D_IDLE     1
#define D_WAITING  2
#define D_HELD     3
#define D_REVOKING 4
byte ds[N];         /* member state */
byte dlid[N];       /* m->lease_id (valid while HELD/REVOKING) */
byte dprev[N];      /* m->prev_lease_id, NONE if none */
bool dwant[N];      /* m->want: ACQUIRE while being revoked */
bool unresp[N];     /* c->unresponsive */
bool resumed[N];    /* m->resumed: recorded holder back WAITING */
byte lastgrant = NONE;   /* vtime abstraction: the last one granted goes last */
byte share = NONE;       /* share.c: the lower-class client owed a share turn (waiting:
                          * share_pending) or in it (holding: share_holder) */
bool evsent[N];     /* an EVICT is outstanding for this client */
bool opened[N];     /* ghost: the gate opened under the daemon's current lease */
byte newest = NONE;      /* the holder that got its lease last (holder_before) */
/* restart / state file (src/sched/state.c, sd_policy_restore) */
bool restoring;
bool recd[N];            /* a holder the state file names, not back yet (g->expect) */
bool recrv[N];           /* ... and it was being revoked (g->expect_revoke) */
byte restarts, kills, stops, slows;
#ifdef PF
/* the daemon's memory estimate and prefetch bookkeeping (src/sched/mem.c,
 * policy.h struct sd_member), in units */
byte dres[N];       /* m->resident: what USAGE, RELEASE, EVICTED and PREFETCHED said */
bool drest[N];      /* m->restoring: a holder whose grant is still restoring */
bool pfo[N];        /* m->prefetch_id != 0: a PREFETCH is outstanding */
byte pfb[N];        /* m->prefetch_bytes: its budget */
byte pfbase[N];     /* m->prefetch_base: resident when it was sent */
bool pfst[N];       /* m->prefetch_stuck: the last one stopped short */
bool pfnf[N];       /* m->prefetch_epoch == g->freed_epoch: nothing freed since
                     * that PREFETCH was sent (freed_epoch as a bit per member) */
byte evamt[N];      /* m->evict_bytes of an outstanding EVICT (evsent) */
byte evseen[N];     /* m->evict_seen: the part of it a USAGE already showed gone */
byte pfh[N];        /* ghost: the holders (bit k) whose lease was current when
                     * this member's PREFETCH was sent (PFROOM) */
bool drep[N];       /* a USAGE came since it attached: until then the daemon
                     * knows neither its resident memory nor its footprint */
#define DFP(i) (drep[i] -> FP(i) : 0)      /* m->footprint */
#ifndef AS_IS_USAGE_RESTORE
bool dlr[N];        /* m->lease_restored: the RESTORED of its current lease came */
#define DLR_CLEAR(i) dlr[i] = 0
#ifndef HELLO_RESTORED
#define HELLO_RESTORED 1
#endif
#if HELLO_RESTORED
/* m->reports_restore from the HELLO at attach (CS_HELLO_RESTORED,
 * sd_policy_attach()): every modelled client is the hook, which sends
 * RESTORED for every grant whose gate it opens, and says so, also to a
 * restarted daemon */
#define DRR(i) 1
#define DRR_CLEAR(i) skip
#define DRR_SEEN(i) skip
#else
/* a hook without CS_HELLO_RESTORED: m->reports_restore learnt from the
 * member's first RESTORED (sd_policy_restored()), lost with the member */
bool drr[N];
#define DRR(i) drr[i]
#define DRR_CLEAR(i) drr[i] = 0
#define DRR_SEEN(i) drr[i] = 1
#endif
#else
#define DRR(i) 1            /* (the grant rule only) */
#define DLR_CLEAR(i) skip
#define DRR_CLEAR(i) skip
#define DRR_SEEN(i) skip
#endif
#endif
byte hwait;              /* daemon steps while the high client waits */
/* counted only where the monitor reads it (a safety run, client 0 high):
 * elsewhere it would only multiply the states */
#if defined(NOMON) || C0 != 0 || defined(PF)
/* (PF: the wait bound is not a prefetch property, and USAGE/PREFETCHED
 * would be daemon steps of their own) */
#define HWAIT_STEP skip
#define HWAIT_RESET skip
#else
#define HWAIT_STEP if :: ds[0] == D_WAITING && share == NONE -> hwait++ :: else -> skip fi
#define HWAIT_RESET hwait = 0
#endif

#define prio(i) ((i) == 0 -> C0 : ((i) == 1 -> C1 : C2))
#define HIGHC(i) (prio(i) == 0)

/* sd_may_corun() (src/sched/policy.c): whether a and b may hold the GPU
 * together, memory aside: never in exclusive mode, always in shared mode,
 * in mixed mode a high member and a lower-class one (one holder per class
 * side: two high, or a normal and a low, never hold together). */
#if MODE == M_SHARED
#define MAYCORUN(a, b) 1
#elif MODE == M_MIXED
#ifdef BREAK_MIXED_CLASS
#define MAYCORUN(a, b) (prio(a) != prio(b))     /* by class, not by class side */
#else
#define MAYCORUN(a, b) (HIGHC(a) != HIGHC(b))
#endif
#else
#define MAYCORUN(a, b) 0
#endif

/* sd_mode_coruns() (src/sched/policy_int.h): the mode lets holders run
 * together at all (fits(), victims_needed(), trim_holders()) */
#ifdef BREAK_CORUNS_SHARED_ONLY
#define CORUNS (MODE == M_SHARED)   /* mixed mode forgotten: it acts as exclusive */
#else
#define CORUNS (MODE != M_EXCL)
#endif

/* ---- helpers ----------------------------------------------------------- */
/* sends never overflow between correct peers (the real daemon drops a
 * client whose queue passes 256 KiB); to a dead, stopped or disconnected
 * peer the message is lost */
inline dsend(i, t, l) {
    if
    :: alive[i] && conn[i] && !stopped[i] -> assert(nfull(d2c[i])); d2c[i]!t, l
    :: else -> skip
    fi
}
inline csend(i, t, l) {
    if
    :: conn[i] -> assert(nfull(c2d[i])); c2d[i]!t, l
    :: else -> skip
    fi
}
#ifdef PF
#define RESIDENT (dv[0] + dv[1] + (N > 2 -> dv[N-1] : 0) + dv2)
#else
#define RESIDENT (dv[0] + dv[1] + (N > 2 -> dv[N-1] : 0))
#endif
#define FITS(i)  (dv[i] || RESIDENT < CAP)
/* holders: HELD or REVOKING (is_holder); HELD alone (holding) */
#define HOLD(i) (ds[i] >= D_HELD)
#define NHOLD (HOLD(0) + HOLD(1) + (N > 2 -> HOLD(N-1) : 0))
#define NHELD ((ds[0] == D_HELD) + (ds[1] == D_HELD) + (N > 2 -> ds[N-1] == D_HELD : 0))
#define BUSY (NHOLD > 0)
/* holders_footprint() (HELD and REVOKING) and holding_footprint() (HELD),
 * in units: the counts above when every footprint is one unit */
#ifdef PF
#define HOLDFP (HOLD(0) * FP(0) + HOLD(1) * FP(1) + (N > 2 -> HOLD(N-1) * FP(N-1) : 0))
#define HELDFP ((ds[0] == D_HELD) * FP(0) + (ds[1] == D_HELD) * FP(1) + \
                (N > 2 -> (ds[N-1] == D_HELD) * FP(N-1) : 0))
#else
#define HOLDFP NHOLD
#define HELDFP NHELD
#endif

/* policy.c fits(): w may be granted now. Alone on the GPU always (even if
 * too big); else only in a mode that co-runs, beside holders that may all
 * run with it (leaving ones included: their work still runs), and if the
 * holders' footprints (holders_footprint(): HELD and REVOKING) plus w's fit
 * in the capacity. Footprints are one unit each. */
#define CORUN1(k, w) ((k) == (w) || !HOLD(k) || MAYCORUN(k, w))
#define CORUN_ALL(w) (CORUN1(0, w) && CORUN1(1, w) && (N < 3 || CORUN1(N-1, w)))
#ifdef BREAK_GRANT_BUSY
#define ALONE (NHELD == 0)      /* REVOKING not counted as a holder */
#else
#define ALONE (NHOLD == 0)
#endif
#ifdef BREAK_FIT_HELD_ONLY
#define HFP HELDFP              /* holding_footprint() for holders_footprint() */
#else
#define HFP HOLDFP
#endif
#define FITSD(w) (ALONE || (CORUNS && CORUN_ALL(w) && HFP + FP(w) <= CAP))

#ifdef PF
#if N > 2
#define PFH_END(i) pfh[0] = pfh[0] & ~(1 << (i)); pfh[1] = pfh[1] & ~(1 << (i)); pfh[N-1] = pfh[N-1] & ~(1 << (i))
#else
#define PFH_END(i) pfh[0] = pfh[0] & ~(1 << (i)); pfh[1] = pfh[1] & ~(1 << (i))
#endif
#else
#define PFH_END(i) skip
#endif
/* policy.c end_lease(): lease over; waiting again if it asked meanwhile */
inline end_lease(i) {
    dprev[i] = dlid[i];
    ds[i] = (dwant[i] -> D_WAITING : D_IDLE);
    PFH_END(i);
    dwant[i] = 0;
    if :: share == i -> share = NONE :: else -> skip fi
}

/* policy.c revoke(): REVOKE, with evict_bytes (ev: swap out after the
 * drain, sent as lease + LMOD), and for an unresponsive client
 * (force_release) the lease ends at once: take_back() */
inline revoke(i, ev) {
    ds[i] = D_REVOKING;
    dsend(i, REVOKE, dlid[i] + LMOD * ev);
#ifdef AS_IS_UNRESP_TAKEBACK
    /* policy.c revoke(): "Told, in case it still listens; never waited for
     * again": the lease ends before the REVOKE is even read */
    if :: unresp[i] -> end_lease(i) :: else -> skip fi
#else
    /* the code (policy.c take_back_when_read): an unresponsive client's
     * lease is taken back only when its process is stopped or its REVOKE
     * was read (ops.delivered), as on_rto */
    if :: unresp[i] && (stopped[i] || empty(d2c[i])) -> end_lease(i) :: else -> skip fi
#endif
}

/* policy.c grant(): the state file is written first (modelled as always in
 * sync with ds[]), then GRANT */
inline grant(i) {
    dlid[i] = (dlid[i] + 1) % LMOD;
    ds[i] = D_HELD; resumed[i] = 0; newest = i; opened[i] = 0;
    lastgrant = i;
#ifdef PF
#ifdef AS_IS_PF_UNREPORTED
    drest[i] = (DFP(i) > dres[i]);  /* m->restoring: footprint > resident */
#else
    /* m->restoring also while its memory is unknown (no USAGE since it
     * attached: footprint and resident read 0): finding 5 */
#ifndef AS_IS_GRANT_RESTORING
    /* policy.c grant(): a client that reports its restores restores from
     * every grant until that lease's RESTORED (its resident estimate may
     * predate an older revoke's swap-out: finding 6's second path) */
    drest[i] = (DRR(i) || !drep[i] || DFP(i) > dres[i]);
#else
    drest[i] = (!drep[i] || DFP(i) > dres[i]);
#endif
#endif
    DLR_CLEAR(i);           /* m->lease_restored = false */
#endif
    if :: i == 0 -> HWAIT_RESET :: else -> skip fi;
    dsend(i, GRANT, dlid[i])
}

/* scratch of the decisions below (reset after each: not part of the state) */
byte bw, bh, k, nv, must, mall, tk, need, vc, vp, qexp = NONE;

/* trim_holders(): more HELD holders than the mode allows (claims after a
 * restart): while two or more hold and some two may not run together (in
 * exclusive mode: any two), or their footprints pass the capacity, revoke
 * the worst (holder_before: lower class, then the later holder) with
 * evict_bytes 0 (REVOKE PREEMPT / MEMORY) */
#define HELDPAIR_BAD(a, b) (ds[a] == D_HELD && ds[b] == D_HELD && !MAYCORUN(a, b))
#define HELD_CONFLICT (HELDPAIR_BAD(0, 1) || (N > 2 -> (HELDPAIR_BAD(0, N-1) || HELDPAIR_BAD(1, N-1)) : 0))
inline trim_holders() {
    do
    :: true ->
       bh = NONE; k = 0;
       do
       :: k < N ->
          if
          :: ds[k] == D_HELD &&
             (bh == NONE || prio(k) > prio(bh) || (prio(k) == prio(bh) && k == newest)) -> bh = k
          :: else -> skip
          fi;
          k++
       :: else -> break
       od;
       if
       :: NHELD < 2 -> break
       :: NHELD >= 2 && (!CORUNS || HELD_CONFLICT || HELDFP > CAP) -> revoke(bh, 0)
       :: else -> break
       fi
    od
}

/* waiter_before(): class, then resumed, then vtime (abstracted: the one
 * granted last goes last), then lowest id; sd_share_target() first: a
 * lower-class waiter owed a share turn */
inline best_waiter() {
    bw = NONE; k = 0;
    do
    :: k < N ->
       if
       :: ds[k] == D_WAITING &&
          (bw == NONE || prio(k) < prio(bw) ||
           (prio(k) == prio(bw) &&
            ((resumed[k] && !resumed[bw]) ||
             (resumed[k] == resumed[bw] && bw == lastgrant)))) -> bw = k
       :: else -> skip
       fi;
       k++
    :: else -> break
    od;
    if
    :: share != NONE && ds[share] == D_WAITING -> bw = share   /* sd_share_target */
    :: else -> skip
    fi
}

/* revoke_reason_for(h, w) != 0: a lower class at once (REVOKE PREEMPT),
 * not during its class's share turn (sd_share_protected; the turn ends
 * with its quantum, qexp); a better class only for w's share turn
 * (sd_share_owed, REVOKE QUANTUM); the same class at the end of its slice
 * (the quantum event sets qexp) */
#ifdef BREAK_NO_PREEMPT
#define PREEMPT_OK(h, w) ((h) == qexp)   /* a higher class waits for the quantum */
#define NOPREEMPT 1
#else
#define PREEMPT_OK(h, w) (share != (h) || (h) == qexp)
#define NOPREEMPT 0
#endif
#define REASON(h, w) (ds[h] == D_HELD && \
    (prio(h) > prio(w) -> PREEMPT_OK(h, w) : (prio(h) < prio(w) -> share == (w) : (h) == qexp)))
/* mem.c sd_mem_shortfall(): w's footprint plus what every other member
 * keeps resident (res_after: a holder its footprint, an unresponsive one 0,
 * a third party its resident memory unless an EVICT is out) above CAP */
#ifdef PF
/* res_now(): an unresponsive member 0, a holder or one with a prefetch
 * outstanding its footprint, else its reported resident memory (dres);
 * res_after(): less an EVICT's bytes still out (pending_out) */
#if defined(BREAK_PF_RESTORING)
/* a holder counted at what it reported, not its whole footprint */
#define RESNOW(o) (unresp[o] -> 0 : (pfo[o] -> DFP(o) : dres[o]))
#else
#define RESNOW(o) (unresp[o] -> 0 : (HOLD(o) || pfo[o] -> DFP(o) : dres[o]))
#endif
#define RESA(o, w) ((o) == (w) -> 0 : \
    (evsent[o] && !HOLD(o) -> (RESNOW(o) > evamt[o] -> RESNOW(o) - evamt[o] : 0) : RESNOW(o)))
#define SHORT(w) (DFP(w) + RESA(0, w) + RESA(1, w) + (N > 2 -> RESA(N-1, w) : 0))
#define USED (RESNOW(0) + RESNOW(1) + (N > 2 -> RESNOW(N-1) : 0))
#else
#define RESA(o, w) ((o) == (w) || unresp[o] -> 0 : (HOLD(o) -> 1 : dv[o] && !evsent[o]))
#define SHORT(w) (1 + RESA(0, w) + RESA(1, w) + (N > 2 -> RESA(N-1, w) : 0))
#endif

/* make_room(w), w does not fit: victims_needed() picks, among the HELD
 * holders with a reason, all of them or none in exclusive mode (w needs
 * the GPU to itself); else every one that may not run beside w (if one of
 * those has no reason, none: w waits for it), then enough of the others,
 * in sort_victims() order, for w's footprint (the holders' footprints less
 * the leaving ones'). Each is revoked, in that order, with evict_bytes for
 * what is still short for w (partial eviction: a unit here). */
/* sort_victims() order: the lower class first, then the longest holding
 * (for two holders of one class: the one that is not `newest`); idleness
 * is not modelled. vc: class, vp: 0 the older holders, 1 the newest */
#define VICTIM_LOOP(body) \
    vc = 3; \
    do \
    :: vc > 0 -> vc--; vp = 0; \
       do \
       :: vp < 2 -> k = 0; \
          do \
          :: k < N -> \
             if \
             :: prio(k) == vc && (vp == 1) == (k == newest) -> body \
             :: else -> skip \
             fi; \
             k++ \
          :: else -> break \
          od; \
          vp++ \
       :: else -> break \
       od \
    :: else -> break \
    od
/* one victim k of make_room(), REVOKE with evict_bytes = min(need,
 * sd_mem_movable()): partial for the big client */
inline revoke_victim() {
#ifdef PF
    if
    :: need > 0 && !unresp[k] && need >= dres[k] -> need = need - dres[k]; revoke(k, dres[k])
    :: need > 0 && !unresp[k] && need < dres[k] -> revoke(k, need); need = 0
    :: else -> revoke(k, 0)
    fi
#else
    if
    :: need > 0 && !unresp[k] -> need--; revoke(k, 1)
    :: else -> revoke(k, 0)
    fi
#endif
}
inline make_room(w) {
    nv = 0; must = 0; mall = 0; tk = 0; k = 0; vp = 0;
    do
    :: k < N ->
       if
       :: ds[k] == D_HELD ->
          if :: !MAYCORUN(k, w) -> mall++ :: else -> skip fi;
          if
          :: REASON(k, w) ->
             nv++;
             if :: !MAYCORUN(k, w) -> must++; vp = vp + FP(k); tk = tk | (1 << k) :: else -> skip fi
          :: else -> skip
          fi
       :: else -> skip
       fi;
       k++
    :: else -> break
    od;
    if
    :: !CORUNS -> tk = (nv == NHELD -> tk | 7 : 0)
    :: CORUNS && must < mall -> tk = 0
    :: else ->
       /* memory: excess = holders + w - CAP - the leaving ones = HELD + w - CAP
        * (footprints in units; vp: what the incompatible ones free) */
       need = HELDFP + FP(w);
       need = (need > CAP -> need - CAP : 0);
#ifdef BREAK_VICTIMS_MEMORY_ONLY
       /* take < must forgotten: taken only while freed < excess */
       if :: need == 0 -> tk = 0 :: else -> skip fi;
#endif
       need = (need > vp -> need - vp : 0);   /* the incompatible ones free that much */
       VICTIM_LOOP(
          if
          :: need > 0 && REASON(k, w) && MAYCORUN(k, w) && !(tk & (1 << k)) ->
             tk = tk | (1 << k); need = (need > FP(k) -> need - FP(k) : 0)
          :: else -> skip
          fi);
       if :: need > 0 -> tk = 0 :: else -> skip fi
    fi;
    /* revoke them, each with the swap-out still short for w */
    need = SHORT(w);
    need = (need > CAP -> need - CAP : 0);
    VICTIM_LOOP(
       if
       :: (tk & (1 << k)) && REASON(k, w) -> revoke_victim()
       :: else -> skip
       fi)
}

/* policy.c gpu_decide(): trim_holders(), restore_check(), then while there
 * is a waiter: grant it if it fits (fits()), else make_room() and grant if
 * a lease was taken back at once, else stop */
inline schedule() {
    trim_holders();
    if
    :: restoring -> skip
    :: else ->
       do
       :: true ->
          best_waiter();
          if
          :: bw == NONE -> break
          :: bw != NONE && FITSD(bw) -> grant(bw)
          :: bw != NONE && !FITSD(bw) ->
             make_room(bw);
             if
             :: FITSD(bw) -> grant(bw)     /* taken back at once */
             :: else -> break
             fi
          fi
       od
    fi;
    bw = NONE; bh = NONE; k = 0; nv = 0; must = 0; mall = 0; tk = 0; need = 0; vc = 0; vp = 0
}

#ifdef PF
/* g->freed_epoch++ (mem.c moved_out() with bytes moved, sd_mem_on_usage()
 * with less resident, policy.c sd_policy_client_remove() of a member with
 * memory): a stuck prefetch may be tried again */
inline freed() {
    pfnf[0] = 0; pfnf[1] = 0;
#if N > 2
    pfnf[N-1] = 0;
#endif
}

/* sd_mem_plan() after every decision (gpu_schedule()): nothing during a
 * restart's grace (g->restoring); w = the share turn's waiter, else
 * sd_best_waiter(); nothing while a holder still restores (m->restoring:
 * "a client's prefetch takes whatever the driver has free ... the two would
 * race for the same bytes"); in a mode that co-runs, nothing while w waits
 * for holders that stay (no holder leaving and w does not fit beside
 * them); while a holder runs, evict_third_parties() for w's shortfall;
 * then plan_prefetch(w). */
#define RESTORING_H(k) (HOLD(k) && drest[k])
/* plan_prefetch(): no prefetch while a member's memory is unknown (no USAGE
 * since it attached), finding 5 */
#define KNOWN(k) (ds[k] == D_NONE || unresp[k] || drep[k])
#ifdef AS_IS_PF_UNREPORTED
#define ALLKNOWN 1
#else
#define ALLKNOWN (KNOWN(0) && KNOWN(1) && (N < 3 || KNOWN(N-1)))
#endif
/* ... nor while an unresponsive member holds the GPU: its memory and the
 * room its restore asks for are not planned around (res_now() 0), so a
 * prefetch would be budgeted into that room, its ROOM would evict the
 * prefetched memory, which frees it for the next prefetch (finding 7) */
#define UH(k) (HOLD(k) && unresp[k])
#ifdef AS_IS_PF_UNRESP_HOLDER
#define NOUNRESPH 1
#else
#define NOUNRESPH (!UH(0) && !UH(1) && (N < 3 || !UH(N-1)))
#endif
#ifdef BREAK_PF_RESTORING
/* the planner neither waits for a holder's restore nor counts the memory
 * the restore brings back (RESNOW above): the two guards of mem.c against
 * the room/prefetch race, both gone */
#define HREST 0
#else
#define HREST (RESTORING_H(0) || RESTORING_H(1) || (N > 2 -> RESTORING_H(N-1) : 0))
#endif
#define LEAVING (ds[0] == D_REVOKING || ds[1] == D_REVOKING || (N > 2 -> ds[N-1] == D_REVOKING : 0))
/* plannable(): a third party that may be asked to move memory out now */
#define PLANV(v, w) ((v) != (w) && ds[v] >= D_IDLE && ds[v] <= D_WAITING && !evsent[v] && \
                     !pfo[v] && !unresp[v] && dres[v] > 0)
/* sd_mem_plan(): w waits for holders that stay (shared or mixed mode, w
 * does not fit beside them, none leaving)... */
#define WAITSTAY(w) (CORUNS && !LEAVING && !FITSD(w))
/* ...but in mixed mode beside a holder of its own class side, whose slice
 * ends for it, w's memory is prefetched ahead into what is free, less
 * KEEP (1/16 of the GPU: 0 units at the model's capacities); no third
 * party is evicted for it */
#define SAMESIDE(w) (WAITSTAY(w) && BUSY && !CORUN_ALL(w))
#define KEEP(w) (SAMESIDE(w) -> CAP / 16 : 0)
inline mem_plan() {
    best_waiter();
    if
    :: restoring || bw == NONE || HREST -> skip
    :: !(restoring || bw == NONE || HREST) && WAITSTAY(bw) && !SAMESIDE(bw) -> skip
    :: else ->
#if N > 2
       /* evict_third_parties(): while a holder runs, furthest from running
        * first (idle before waiting, lower class first; then the higher
        * index, for vtime), each for what is still short */
       if
       :: BUSY && !SAMESIDE(bw) ->
          need = SHORT(bw);
          need = (need > CAP -> need - CAP : 0);
          vp = 0;
          do
          :: vp < 2 ->
             vc = 3;
             do
             :: vc > 0 -> vc--; k = N;
                do
                :: k > 0 -> k--;
                   if
                   :: need > 0 && PLANV(k, bw) && prio(k) == vc && (ds[k] == D_IDLE) == (vp == 0) ->
                      evsent[k] = 1;
                      evamt[k] = (dres[k] < need -> dres[k] : need);
                      need = need - evamt[k];
                      dsend(k, EVICT, evamt[k])
                   :: else -> skip
                   fi
                :: else -> break
                od
             :: else -> break
             od;
             vp++
          :: else -> break
          od
       :: else -> skip
       fi;
#endif
       /* plan_prefetch(w): not an unresponsive one, not while one is out, not
        * again after one stopped short until memory is freed; need = what is
        * not resident; free_now = capacity less res_now() of every member
        * (a holder and an outstanding prefetch count their footprint);
        * nothing if nothing is free (PREFETCH_MIN is far below a unit); the
        * "free_now < need/4 while evictions are in flight" wait is never
        * met with need <= 2 units */
       if
       :: !unresp[bw] && !pfo[bw] && !(pfst[bw] && pfnf[bw]) && dres[bw] < DFP(bw) &&
          USED + KEEP(bw) < CAP && ALLKNOWN && NOUNRESPH ->
          need = DFP(bw) - dres[bw];
          pfb[bw] = (CAP - USED - KEEP(bw) < need -> CAP - USED - KEEP(bw) : need);
          pfo[bw] = 1;
          pfh[bw] = HOLD(0) + 2 * HOLD(1) + (N > 2 -> 4 * HOLD(N-1) : 0);
          pfbase[bw] = dres[bw];
          pfnf[bw] = 1; pfst[bw] = 0;
          dsend(bw, PREFETCH, pfb[bw])
       :: else -> skip
       fi
    fi;
    bw = NONE; k = 0; need = 0; vc = 0; vp = 0
}
#define PLAN mem_plan()
#else
#define PLAN skip
#endif

/* ---- properties as invariants ------------------------------------------ */

/* 1. exclusivity: at most one running process has its gate open.
 *    src/hook/gate.c cs_gate_slow() lets work through only while d->gate.open;
 *    src/sched/policy.c gpu_decide()/grant() grants only when no member is a
 *    holder (is_holder: HELD or REVOKING). A stopped process submits nothing. */
#define OPEN(i) (alive[i] && !stopped[i] && gate[i])
#define NOPEN (OPEN(0) + OPEN(1) + (N > 2 -> OPEN(N-1) : 0))
#if MODE == M_EXCL
#define EXCL (OPEN(0) + OPEN(1) + (N > 2 -> OPEN(N-1) : 0) <= 1)
#else
/*    Mixed mode: at most one per class side ("two jobs of one side never
 *    hold together", docs/configuration.md `mode`); shared mode has no
 *    exclusivity, only memory (1b). The specification, not the daemon's
 *    MAYCORUN (which a BREAK_ switch may change). */
#if MODE == M_MIXED
#define SPECCO(a, b) (HIGHC(a) != HIGHC(b))
#else
#define SPECCO(a, b) 1
#endif
#define PAIROK(a, b) (!(OPEN(a) && OPEN(b)) || SPECCO(a, b))
#define EXCL (PAIROK(0, 1) && (N > 2 -> (PAIROK(0, N-1) && PAIROK(1, N-1)) : 1))
#endif

/* 1b. memory: the holders the daemon runs together fit in the capacity
 *    (src/sched/policy.c fits(): holders_footprint(), HELD and REVOKING,
 *    plus the waiter's footprint <= capacity; alone always; trim_holders()
 *    revokes when they no longer do), and so do the open gates (each open
 *    gate's memory is resident: NOLOSS). Footprints are one unit. */
#ifdef PF
#define OPENFP (OPEN(0) * FP(0) + OPEN(1) * FP(1) + (N > 2 -> OPEN(N-1) * FP(N-1) : 0))
#define MEMFIT ((NHOLD <= 1 || HOLDFP <= CAP) && (NOPEN <= 1 || OPENFP <= CAP))
#else
#define MEMFIT ((NHOLD <= 1 || NHOLD <= CAP) && NOPEN <= CAP)
#endif

/* 2. no data loss: the authoritative copy of every live client's segment
 *    holds the data, and a running process's gate is open only while the
 *    authoritative copy is on the device (its kernels write there).
 *    src/hook/swap.c swap_out/swap_in, src/hook/jobs.c job_grant()/granted(),
 *    job_revoke(); capacity: the driver refuses a map beyond CAP (model: the
 *    restore waits, src/hook/jobs.c job_grant retry loop). */
#define SEGOK(i) (!alive[i] || ((auth[i] == DEV -> dv[i] : hv[i]) && \
                                (OPEN(i) -> (auth[i] == DEV && dv[i]) : 1)))
#ifdef PF
/* the big client's second segment likewise */
#define SEGOKB (!alive[BIG] || ((auth2 == DEV -> dv2 : hv2) && (OPEN(BIG) -> (auth2 == DEV && dv2) : 1)))
#define NOLOSS (SEGOK(0) && SEGOK(1) && (N > 2 -> SEGOK(N-1) : 1) && SEGOKB && RESIDENT <= CAP)
#else
#define NOLOSS (SEGOK(0) && SEGOK(1) && (N > 2 -> SEGOK(N-1) : 1) && RESIDENT <= CAP)
#endif

#ifdef PF
/* 5. prefetch takes no room a holder's restore needs (PFROOM, asserted
 *    where a prefetch places a segment, src/hook/swap.c swap_in_locked()
 *    with prefetch): after the placement, the free memory still covers
 *    what every other holder whose gate has not opened under its lease
 *    (its grant still restoring) is missing. src/sched/mem.c
 *    sd_mem_plan() sends no PREFETCH while a holder is restoring
 *    (m->restoring), and plan_prefetch() budgets a prefetch with what
 *    res_now() leaves free, a holder counted at its footprint: "room made
 *    and taken back by a prefetch" (issue 24) is this failing. */
#define HNEED1(k, i) ((k) != (i) && ds[k] == D_HELD && RUN(k) && !opened[k] && !unresp[k] && \
                      (pfh[i] & (1 << (k))) -> FP(k) - RES(k) : 0)
#define HNEED(i) (HNEED1(0, i) + HNEED1(1, i) + (N > 2 -> HNEED1(N-1, i) : 0))
/*    Excepted: an unresponsive member, holder or not. Its memory is not
 *    planned around by design (res_now() 0: its report may be a lie), so
 *    a prefetch may be budgeted into its memory or its restore's room; a
 *    restore then asks ROOM, which moves what is in the way (the
 *    unresponsive one's as the last resort, finding 4). */
#define UNRESPMEM ((unresp[0] && RES(0)) || (unresp[1] && RES(1)) || (N > 2 -> (unresp[N-1] && RES(N-1)) : 0))
#define PFROOM(i) (UNRESPMEM || RESIDENT + 1 + HNEED(i) <= CAP)
#if (!defined(ONEPROP) || defined(PROP_PFROOM)) && !defined(NO_PFROOM)
#define PFCHECK(i) assert(PFROOM(i))
#else
#define PFCHECK(i) skip
#endif
#endif

/* 3b. a high client's wait: at most HBOUND daemon steps while it waits
 *     (src/sched/policy.c waiter_before(): class first; gpu_decide(): a
 *     higher class waiting gets the holder REVOKE PREEMPT at once). Not
 *     counted: the steps of other processes (the holder's drain), and a
 *     lower class's share turn (class_share_max_pct). */

/* 3a. no deadlock: when nothing can move any more (Spin's timeout: every
 *     fault budget spent), every live, running client that wants the GPU
 *     has its gate open; excepted: one whose memory cannot fit beside a
 *     stopped client's (its memory stays where it is, take_back(): the
 *     design's limit, docs/model.md) */
#define STUCK(i) (RUN(i) && want[i] && !gate[i])
#ifdef PF
#define SILENTMEM ((stopped[0] && RES(0)) || (stopped[1] && RES(1)) || (N > 2 -> (stopped[N-1] && RES(N-1)) : 0))
#else
#define SILENTMEM ((stopped[0] && dv[0]) || (stopped[1] && dv[1]) || (N > 2 -> (stopped[N-1] && dv[N-1]) : 0))
#endif
#define DEADOK ((!STUCK(0) && !STUCK(1) && (N < 3 || !STUCK(N-1))) || SILENTMEM)

/* The monitor: one assertion per property, so that Spin's line names the
 * one that failed (model/check.sh checks them all in one search per
 * configuration; -DPROP_* checks one). */
#if defined(PROP_EXCL) || defined(PROP_NOLOSS) || defined(PROP_MEM) || defined(PROP_HBOUND) || defined(PROP_DEAD) || defined(PROP_PFROOM)
#define ONEPROP 1
#endif
#ifndef NOMON
active proctype monitor()
{
end:
    do
#if !defined(ONEPROP) || defined(PROP_EXCL)
    :: atomic { !EXCL -> assert(EXCL) }
#endif
#if !defined(ONEPROP) || defined(PROP_NOLOSS)
    :: atomic { !NOLOSS -> assert(NOLOSS) }
#endif
#if !defined(ONEPROP) || defined(PROP_MEM)
    :: atomic { !MEMFIT -> assert(MEMFIT) }
#endif
#if (!defined(ONEPROP) || defined(PROP_HBOUND)) && C0 == 0 && !defined(PF)
    :: atomic { hwait > HBOUND -> assert(hwait <= HBOUND) }   /* client 0 is high */
#endif
#if !defined(ONEPROP) || defined(PROP_DEAD)
    :: atomic { timeout && !DEADOK -> assert(DEADOK) }
#endif
    od
}
#endif

/* ---- daemon (src/sched) ------------------------------------------------- */

/* one message from connection i (server.c dispatch -> policy.c) */
inline on_msg(i) {
    c2d[i]?m, l;
    HWAIT_STEP;
    if
    :: m == ATT_IDLE || m == ATT_WAIT || m == ATT_HELD ->
       /* sd_policy_attach(): restore_resolve(), adopt a HELD claim */
       ds[i] = D_IDLE; dwant[i] = 0; unresp[i] = 0; dprev[i] = NONE;
#ifdef PF
       /* a new member: resident 0 until its first USAGE */
       dres[i] = 0; drest[i] = 0; pfo[i] = 0; pfst[i] = 0; pfnf[i] = 0; drep[i] = 0;
       DLR_CLEAR(i); DRR_CLEAR(i);     /* a new member (reports_restore: DRR) */
#endif
       t = 0;
       if
       :: restoring && recd[i] ->          /* restore_resolve(): nexpect-- */
          t = 1; recd[i] = 0;
          restoring = (recd[0] || recd[1] || (N > 2 -> recd[N-1] : 0))
       :: else -> skip
       fi;
       resumed[i] = (t && !recrv[i] && m != ATT_HELD);
       if
       :: m == ATT_HELD ->
          dlid[i] = l; ds[i] = D_HELD; newest = i; opened[i] = 1;
          /* its slice was over: revoked again, evict_bytes 0 */
          if :: t && recrv[i] -> revoke(i, 0) :: else -> skip fi
       :: m == ATT_WAIT -> ds[i] = D_WAITING
       :: else -> skip
       fi;
       recrv[i] = 0
    :: m == ACQUIRE ->                                    /* sd_policy_acquire() */
       if
       :: ds[i] == D_IDLE -> ds[i] = D_WAITING
       :: ds[i] == D_REVOKING -> dwant[i] = 1
       :: else -> skip
       fi
    :: m == RELEASE ->                                    /* sd_policy_release() */
#ifdef PF
       /* RELEASE.swapped_bytes (t units) beside the lease id */
       t = l / LMOD; l = l % LMOD;
#endif
       if
       :: (ds[i] == D_HELD || ds[i] == D_REVOKING) && l == dlid[i] ->
#ifdef PF
          /* sd_mem_on_release(held): its footprint less what it swapped out */
          dres[i] = (DFP(i) > t -> DFP(i) - t : 0); drest[i] = 0;
          if :: t > 0 -> freed() :: else -> skip fi;
#endif
          end_lease(i)
       :: else ->
#ifdef PF
          /* sd_mem_on_release(not held): the swap still happened (moved_out) */
          dres[i] = (dres[i] > t -> dres[i] - t : 0);
          if :: t > 0 -> freed() :: else -> skip fi;
#endif
          /* accepted and ignored for a lease that ended already (lease ids
           * only grow, so any other than the current one): the previous
           * one's, or, the hook asking again before it releases
           * (cs_lease_ask_again_locked()), one before it, when the lease
           * granted on that ACQUIRE was taken back before this RELEASE was
           * read. AS_IS_PREV_ONLY: the code before, which accepted the
           * previous lease's only and closed the connection otherwise. */
#ifdef BREAK_RELEASE_STRICT
          assert(false)       /* the crossing RELEASE is refused too */
#elif defined(AS_IS_PREV_ONLY)
          assert(dprev[i] == l)
#else
          skip
#endif
       fi
#ifdef PF
    /* sd_policy_prefetched(): one that matches no outstanding PREFETCH
     * (it crossed a reconnect) is ignored. Status 0 (l < LMOD): resident =
     * footprint; else what was resident when it was sent plus what moved,
     * and the prefetch is stuck (not repeated until memory is freed). */
    :: m == PREFETCHED ->
       if
       :: pfo[i] ->
          pfo[i] = 0;
          if
          :: l < LMOD -> if :: DFP(i) > dres[i] -> dres[i] = DFP(i) :: else -> skip fi
          :: else ->
             t = pfbase[i] + l % LMOD;
             if :: t > DFP(i) -> t = DFP(i) :: else -> skip fi;
             if :: t > dres[i] -> dres[i] = t :: else -> skip fi;
             pfst[i] = 1
          fi
       :: else -> skip
       fi
#endif
    fi;
    m = 0; l = 0; t = 0
}

/* EOF after everything the dead client sent: sd_policy_client_remove()
 * ends its lease at once and grants the next waiter */
inline on_eof(i) {
    eof[i] = 0;
    HWAIT_STEP;
    ds[i] = D_NONE; dwant[i] = 0;
#ifdef PF
    if :: dres[i] > 0 -> freed() :: else -> skip fi;
    dres[i] = 0; drest[i] = 0; pfo[i] = 0; pfst[i] = 0; pfnf[i] = 0; drep[i] = 0;
    DLR_CLEAR(i); DRR_CLEAR(i);
    PFH_END(i);
#endif
    if :: share == i -> share = NONE :: else -> skip fi    /* sd_share_forget */
}

/* the quantum, a nondeterministic timeout: time passes until holder i's
 * slice is over while a waiter j does not fit beside it (one that fits is
 * granted at once). gpu_decide() -> make_room(): revoke_reason_for() is
 * QUANTUM for the same class (qexp = i); a lower class kept from the GPU
 * (share.c denied_now(): it waits, none of its class holds, a better class
 * does) is owed its share turn (sd_share_target(), class_share_max_pct):
 * the better holder i goes; if i is a lower class in its share turn and a
 * better one waits, the turn is over (qexp). Enabled only when the code
 * would act on it: a no-op event would be a stutter that weak fairness
 * (per process) lets the daemon repeat for ever. */
#define DENIED(j) (!(HOLD(0) && prio(0) == prio(j)) && !(HOLD(1) && prio(1) == prio(j)) && \
                   (N < 3 || !(HOLD(N-1) && prio(N-1) == prio(j))))
#ifdef BREAK_NO_SHARE
#define SHAREQ(i, j) 0          /* no class-share turn: a better holder stays */
#else
#define SHAREQ(i, j) (prio(j) > prio(i) && share == NONE && DENIED(j))
#endif
#define QR(i, j) ((j) != (i) && ds[j] == D_WAITING && \
    (prio(j) == prio(i) || (prio(j) < prio(i) && (share == (i) || NOPREEMPT)) || SHAREQ(i, j)))
inline on_quantum(i) {
    /* the share turn: the best waiter of a lower class that is denied */
    bw = NONE; k = 0;
    do
    :: k < N ->
       if
       :: QR(i, k) && SHAREQ(i, k) &&
          (bw == NONE || prio(k) < prio(bw) ||
           (prio(k) == prio(bw) && ((resumed[k] && !resumed[bw]) ||
                                    (resumed[k] == resumed[bw] && bw == lastgrant)))) -> bw = k
       :: else -> skip
       fi;
       k++
    :: else -> break
    od;
    if :: bw != NONE -> share = bw :: else -> skip fi;
    bw = NONE; k = 0;
    HWAIT_STEP;
    qexp = i            /* for the decision that follows; reset after it */
}
/* Timing assumption: the slice (>= quantum_floor_ms, sized against the
 * measured switch cost) does not end before the holder's restore is done
 * and its gate opened (opened[], a ghost variable). */
#define QUANTUM_OK(i) (!restoring && ds[i] == D_HELD && (opened[i] || !alive[i] || stopped[i]) && \
    (QR(i, 0) || QR(i, 1) || (N > 2 -> QR(i, N-1) : 0)))

#ifdef PF
/* sd_unresponsive() -> sd_mem_forget_requests(): an outstanding prefetch
 * counts as done (resident += its budget, up to the footprint) */
inline forget(i) {
    if
    :: pfo[i] && dres[i] < DFP(i) -> dres[i] = (dres[i] + pfb[i] > DFP(i) -> DFP(i) : dres[i] + pfb[i])
    :: else -> skip
    fi;
    pfo[i] = 0
}
#define FORGET(i) forget(i)
#else
#define FORGET(i) skip
#endif

/* revoke_timeout_ms: check_revoke_timeouts() -> sd_unresponsive() ->
 * take_back() (force_release, the default). Timing assumption: the
 * timeout (10 s) is far longer than an I/O thread takes to read a REVOKE,
 * so it fires once the REVOKE was read, or for a stopped process
 * (check_stopped() marks it at once). */
#define RTO_OK(i) (ds[i] == D_REVOKING && (!unresp[i] || !AS_IS_UNRESP) && \
    (stopped[i] || (empty(d2c[i]) && (unresp[i] || slows < MAXSLOW))))
#ifdef AS_IS_UNRESP_TAKEBACK
#define AS_IS_UNRESP 1
#else
#define AS_IS_UNRESP 0
#endif
inline on_rto(i) {
    HWAIT_STEP;
    if :: !unresp[i] && !stopped[i] -> slows++ :: else -> skip fi;
    unresp[i] = 1;
    FORGET(i);
#ifndef BREAK_NO_FORCE
    end_lease(i)        /* take_back() */
#else
    skip
#endif
}

#ifdef PF
/* check_stopped(): a stopped process with a request out (here its PREFETCH)
 * is marked unresponsive */
#define ATO_OK(i) (pfo[i] && stopped[i] && !unresp[i])
/* USAGE (src/sched/mem.c sd_mem_on_usage()), read when the hook's report
 * tick sends it: resident as it is (a drop frees memory: freed_epoch);
 * m->restoring for a holder not all resident, cleared once it is, but
 * (usage_ends_restore(), the fix of finding 6) for a holder that reports
 * its restores (m->reports_restore) only once its current lease's RESTORED
 * came (m->lease_restored): a USAGE may have been sent before an older
 * revoke's swap-out finished, which the grant's restore then brings back.
 * The code's bound, the restore's answer deadline from the grant (for a
 * client that says RESTORED and never sends it), is not modelled: every
 * modelled client sends RESTORED when its gate opens (its restore ends
 * within the deadline: a timing assumption), and a grant whose gate does
 * not open ends otherwise (RELEASE, take_back(), EOF). Enabled only when
 * it changes something (an idle report is a stutter). The value
 * is the one at reading: a USAGE overtaken by another report of the same
 * connection cannot happen (one ordered connection); across connections
 * each is read as it is. */
#ifdef AS_IS_USAGE_RESTORE
#define USAGE_ENDS(i) 1
#else
#define USAGE_ENDS(i) (!HOLD(i) || !DRR(i) || dlr[i])
#endif
#define USAGE_OK(i) (ds[i] != D_NONE && RUN(i) && conn[i] && \
    (!drep[i] || dres[i] != RES(i) || (RES(i) >= FP(i) && drest[i] && USAGE_ENDS(i)) || \
     (RES(i) < FP(i) && ds[i] == D_HELD && !drest[i])))
inline on_usage(i) {
    if
    :: RES(i) < dres[i] ->
       freed();
       /* part of an EVICT under way (m->evict_bytes: evict_seen) */
       if :: evsent[i] && !HOLD(i) -> evseen[i] = evseen[i] + dres[i] - RES(i) :: else -> skip fi
    :: else -> skip
    fi;
    dres[i] = RES(i); drep[i] = 1;
    if
    :: RES(i) >= FP(i) && USAGE_ENDS(i) -> drest[i] = 0
    :: RES(i) < FP(i) && ds[i] == D_HELD -> drest[i] = 1
    :: else -> skip
    fi
}
#endif

/* ROOM (src/sched/room.c sd_policy_room): the holder h's restore does not
 * fit; a victim v neither holds nor has an EVICT out and has memory on the
 * device; an unresponsive one only as the last resort (last_resort(): no
 * responsive victim left). AS_IS_ROOM_UNRESP: the code before finding 4,
 * which never asked an unresponsive client. */
#ifdef PF
/* may_evict(): sd_mem_movable() > 0, i.e. the resident memory the daemon
 * knows of (last_resort(): v->resident likewise) */
#define ROOMV(h, v) ((v) != (h) && ds[v] >= D_IDLE && ds[v] <= D_WAITING && dres[v] > 0 && !evsent[v])
#else
#define ROOMV(h, v) ((v) != (h) && ds[v] >= D_IDLE && ds[v] <= D_WAITING && dv[v] && !evsent[v])
#endif
#ifdef AS_IS_ROOM_UNRESP
#define LASTRESORT(h, v) 0
#else
#define LASTRESORT(h, v) (N < 3 || !(ROOMV(h, 0) && !unresp[0]) && !(ROOMV(h, 1) && !unresp[1]) && \
                          !(ROOMV(h, N-1) && !unresp[N-1]))
#endif
#ifdef PF
#define GFAIL(h) ((SWB(h) && RESIDENT >= CAP) || (!SWB(h) && SWA(h) && !FITS(h)))
#define ROOMH(h) ; l = h
#else
#define GFAIL(h) (auth[h] == HOST && !FITS(h))
#define ROOMH(h)
#endif
#define ROOM_OK(h, v) (ds[h] == D_HELD && wbusy[h] && wph[h] == 0 && GFAIL(h) && \
    wq[h]?[JGRANT, eval(dlid[h]), eval(cgen[h])] && \
    ROOMV(h, v) && (!unresp[v] || LASTRESORT(h, v)))
/* reconnect_grace_ms over (restore_check()): every recorded holder not
 * back yet is no longer expected. Timing assumption: a live, running
 * recorded holder reconnects within the grace (1.5 s), and what a recorded
 * holder sent before it died or stopped (its ATTACH) is read before the
 * grace ends (the daemon reads a socket within microseconds) */
#define GONE(x) (!recd[x] || ((!alive[x] || stopped[x]) && empty(c2d[x])))
#define GRACE_OK (restoring && GONE(0) && GONE(1) && (N < 3 || GONE(N-1)))
inline grace_over() {
    restoring = 0;
    k = 0;
    do :: k < N -> recd[k] = 0; recrv[k] = 0; k++ :: else -> break od;
    k = 0
}

inline on_room(v) {
    evsent[v] = 1;
#ifdef PF
    /* ask(): min(movable, need), need = max(ROOM.bytes (one unit, the
     * segment), sd_mem_shortfall(asker l)) */
    t = SHORT(l);
    t = (t > CAP + 1 -> t - CAP : 1);
    evamt[v] = (dres[v] < t -> dres[v] : t);
    dsend(v, EVICT, evamt[v]);
    t = 0; l = 0
#else
    dsend(v, EVICT, 0)
#endif
}

/* The daemon: one event at a time, each followed by the GPU's decision
 * (gpu_schedule(): policy.c calls it after any event that touches the GPU;
 * idempotent). The daemon is single-threaded: every event is one atomic
 * step. Its server loop (src/sched/server.c, epoll) serves every readable
 * connection. With three clients a connection is read by a process of its
 * own, dconn(i): weak fairness (per process) then means no connection is
 * left unread for ever while the others keep the daemon busy, which one
 * process for all of them allows (the model found exactly that: client
 * 0's ATTACH never read while clients 1 and 2 took turns). With two, one
 * client alone makes no endless stream of events (it holds, or is granted
 * at once): the daemon process reads both connections, which is cheaper
 * (fewer processes for the fairness algorithm) and equivalent. */
#if N > 2
proctype dconn(byte i)
{
    byte t, l;
    mtype m;
end:
    do
    :: atomic {
        if
        :: nempty(c2d[i]) -> on_msg(i)
        /* EOF after everything the client sent (server.c) */
        :: eof[i] && empty(c2d[i]) -> on_eof(i)
        fi;
        schedule();
        PLAN
       }
    od
}
#endif

/* The daemon process: with two clients both connections (above); the
 * timers (gpu_decide() at a deadline): quantum, revoke timeout, the
 * reconnect grace; and ROOM, which a holder's worker sends while its
 * restore does not fit (modelled from the daemon's side, see ROOM_OK). One
 * atomic step whose first statement is the disjunction of the guards, so
 * that the decision exists once in the generated verifier. */
#define E_QUANTUM 3
#define E_RTO 4
#define E_ROOM 5
#define E_GRACE 6
#define E_USAGE 7
#define E_ATO 8
#define E_MSG 1
#define E_EOF 2
active proctype daemon()
{
    byte i, e, t, l;
    mtype m;
end:
    do
    :: atomic {
        if
#if N < 3
        :: nempty(c2d[0]) -> e = E_MSG; i = 0
        :: nempty(c2d[1]) -> e = E_MSG; i = 1
        :: eof[0] && empty(c2d[0]) -> e = E_EOF; i = 0
        :: eof[1] && empty(c2d[1]) -> e = E_EOF; i = 1
#endif
        :: QUANTUM_OK(0) -> e = E_QUANTUM; i = 0
        :: QUANTUM_OK(1) -> e = E_QUANTUM; i = 1
#if N > 2
        :: QUANTUM_OK(2) -> e = E_QUANTUM; i = 2
#endif
        :: RTO_OK(0) -> e = E_RTO; i = 0
        :: RTO_OK(1) -> e = E_RTO; i = 1
#if N > 2
        :: RTO_OK(2) -> e = E_RTO; i = 2
#endif
        /* ROOM: a holder's restore does not fit (src/hook/jobs.c job_grant
         * -> cs_client_request_room; src/sched/room.c): EVICT a victim */
#ifndef BREAK_NO_ROOM
        :: ROOM_OK(0, 1) -> e = E_ROOM; i = 1 ROOMH(0)
        :: ROOM_OK(1, 0) -> e = E_ROOM; i = 0 ROOMH(1)
#if N > 2
        :: ROOM_OK(0, 2) -> e = E_ROOM; i = 2 ROOMH(0)
        :: ROOM_OK(1, 2) -> e = E_ROOM; i = 2 ROOMH(1)
        :: ROOM_OK(2, 0) -> e = E_ROOM; i = 0 ROOMH(2)
        :: ROOM_OK(2, 1) -> e = E_ROOM; i = 1 ROOMH(2)
#endif
#endif
#ifdef PF
        /* USAGE (the hook's report tick), and a stopped client's prefetch
         * answer deadline (check_stopped) */
        :: USAGE_OK(0) -> e = E_USAGE; i = 0
        :: USAGE_OK(1) -> e = E_USAGE; i = 1
#if N > 2
        :: USAGE_OK(2) -> e = E_USAGE; i = 2
#endif
        :: ATO_OK(0) -> e = E_ATO; i = 0
        :: ATO_OK(1) -> e = E_ATO; i = 1
#if N > 2
        :: ATO_OK(2) -> e = E_ATO; i = 2
#endif
#endif
        /* reconnect_grace_ms over (restore_check(), GRACE_OK) */
        :: GRACE_OK -> e = E_GRACE
        fi;
        if
#if N < 3
        :: e == E_MSG -> on_msg(i)
        :: e == E_EOF -> on_eof(i)
#endif
        :: e == E_QUANTUM -> on_quantum(i)
        :: e == E_RTO -> on_rto(i)
        :: e == E_ROOM -> on_room(i)
        :: e == E_GRACE -> grace_over()
#ifdef PF
        :: e == E_USAGE -> on_usage(i)
        :: e == E_ATO -> unresp[i] = 1; forget(i)
#endif
        fi;
        /* sd_policy_room() decides nothing (the EVICTED does, later) */
        if :: e != E_ROOM -> schedule(); PLAN :: else -> skip fi;
        qexp = NONE; e = 0; i = 0
       }
    od
}

/* ---- client i: I/O thread, worker, application, as separate processes so
 * that weak fairness treats them as the threads they are ---------------- */

/* a REVOKE job for lease l is queued (or running), with or without a
 * swap-out (lease + LMOD); a GRANT job for lease l. (In a poll a plain
 * variable matches anything: eval() makes it a value to match.) */
#ifdef PF
#define REVQ2(i, l) (wq[i]??[JREVOKE, eval(l + 2 * LMOD), 0] || wq[i]??[JREVOKE, eval(l + 2 * LMOD), 1])
#else
#define REVQ2(i, l) 0
#endif
#define REVQ(i, l) (wq[i]??[JREVOKE, eval(l), 0] || wq[i]??[JREVOKE, eval(l), 1] || \
                    wq[i]??[JREVOKE, eval(l + LMOD), 0] || wq[i]??[JREVOKE, eval(l + LMOD), 1] || REVQ2(i, l))
#define GRANTQ(i, l) (wq[i]??[JGRANT, eval(l), 0] || wq[i]??[JGRANT, eval(l), 1])

proctype io(byte i)
{
    mtype m;
    byte l;
end:
    do
    :: atomic {
        alive[i] && !stopped[i] && conn[i] && nempty(d2c[i]) && nfull(wq[i]) ->
        d2c[i]?m, l;
        if
        :: m == GRANT -> wq[i]!JGRANT, l, cgen[i]          /* on_grant() */
#ifdef PF
        :: m == EVICT -> wq[i]!JEVICT, l, cgen[i]          /* on_evict(): bytes */
        :: m == PREFETCH -> wq[i]!JPREFETCH, l, cgen[i]    /* on_prefetch(): budget */
#else
        :: m == EVICT -> wq[i]!JEVICT, 0, cgen[i]          /* on_evict() */
#endif
        :: m == REVOKE ->                                  /* on_revoke() */
           if
           :: cst[i] == C_HELD && clid[i] == l % LMOD ->
              cst[i] = C_REVOKING; gate[i] = 0;            /* stop new work now */
              wq[i]!JREVOKE, l, cgen[i]
           :: cst[i] != C_HELD || clid[i] != l % LMOD ->
              if
              :: GRANTQ(i, l % LMOD) -> wq[i]!JREVOKE, l, cgen[i]
              :: else -> skip                              /* ignoring revoke */
              fi
           fi
        fi;
        m = 0; l = 0
       }
    /* (re)connect: HELLO [RECONNECT], ATTACH (attach_msg_locked,
     * after_attach_sent_locked); the gate is left as it is (on_disconnect) */
    :: atomic {
        alive[i] && !stopped[i] && !conn[i] ->
        conn[i] = 1; cgen[i] = 1 - cgen[i]; acq_sent[i] = 0;
        if
        :: cst[i] == C_HELD -> c2d[i]!ATT_HELD, clid[i]
        :: cst[i] != C_HELD && (cst[i] == C_WAITING || want[i]) ->
           c2d[i]!ATT_WAIT, 0;
           if :: cst[i] == C_IDLE -> cst[i] = C_WAITING :: else -> skip fi;
           acq_sent[i] = 1
        :: else -> c2d[i]!ATT_IDLE, 0
        fi
       }
    od
}

proctype worker(byte i)
{
    mtype j;
    byte l;
    bit g;
#ifdef PF
    byte mv;        /* units the job moved so far (swap_out_locked / swap_in_locked res.bytes) */
#endif
end:
    do
    /* take the next job (it stays queued while it runs: the I/O thread's
     * cs_worker_grant_queued_locked() / grant_stale() see it) */
    :: atomic { RUN(i) && !wbusy[i] && nempty(wq[i]) -> wq[i]?<j, l, g>; wbusy[i] = 1; wph[i] = 0 }

    /* job_grant(): restore (retried while it does not fit), then granted() */
#ifdef PF
    /* swap_in_locked(): the big client's seg b first (one step: place,
     * copy in, switch; the gate is closed), then seg a as below */
    :: atomic { RUN(i) && wbusy[i] && j == JGRANT && wph[i] == 0 && SWB(i) && RESIDENT < CAP ->
                dv2 = 1; auth2 = DEV; hv2 = 0 }
    :: atomic { RUN(i) && wbusy[i] && j == JGRANT && wph[i] == 0 && !SWB(i) && auth[i] == HOST && FITS(i) ->
#else
    :: atomic { RUN(i) && wbusy[i] && j == JGRANT && wph[i] == 0 && auth[i] == HOST && FITS(i) ->
#endif
#ifdef BREAK_GATE_EARLY
                cst[i] = C_HELD; clid[i] = l; gate[i] = 1;     /* gate before the copy */
#endif
                dv[i] = 1; wph[i] = 1 }                        /* map + copy in */
    :: atomic { RUN(i) && wbusy[i] && j == JGRANT && wph[i] == 0 && GFAIL(i) &&
                (g != cgen[i] || REVQ(i, l)) ->               /* grant_stale() after a failure */
                wq[i]?_, _, _; wbusy[i] = 0; j = 0; l = 0; g = 0 }
    :: atomic { RUN(i) && wbusy[i] && j == JGRANT && wph[i] == 1 ->
                auth[i] = DEV; hv[i] = 0; wph[i] = 2 }          /* swap_in done */
#ifdef PF
    :: atomic { RUN(i) && wbusy[i] && j == JGRANT && wph[i] == 0 && auth[i] == DEV && !SWB(i) -> wph[i] = 2 }
#else
    :: atomic { RUN(i) && wbusy[i] && j == JGRANT && wph[i] == 0 && auth[i] == DEV -> wph[i] = 2 }
#endif
    :: atomic { RUN(i) && wbusy[i] && j == JGRANT && wph[i] == 2 ->
                /* granted(): cs_lease_hold_locked() opens the gate; RESTORED */
#ifdef AS_IS_STALE_GRANT
                cst[i] = C_HELD; clid[i] = l; gate[i] = 1; opened[i] = 1;
#else
                if
                :: g == cgen[i] && !REVQ(i, l) -> cst[i] = C_HELD; clid[i] = l; gate[i] = 1; opened[i] = 1
                :: else -> skip       /* stale: the gate stays closed */
                fi;
#endif
#ifdef PF
                /* RESTORED (sd_policy_restored(), read at once like EVICTED:
                 * the daemon reads a socket within microseconds, a slice
                 * lasts milliseconds): for the current lease, resident =
                 * footprint, no longer restoring */
                if
                :: g == cgen[i] && conn[i] && gate[i] && HOLD(i) && dlid[i] == l ->
                   if :: DFP(i) > dres[i] -> dres[i] = DFP(i) :: else -> skip fi;
                   drest[i] = 0
#ifndef AS_IS_USAGE_RESTORE
                   ; dlr[i] = 1         /* m->lease_restored */
#endif
                :: else -> skip
                fi;
#if !defined(AS_IS_USAGE_RESTORE) && !HELLO_RESTORED
                /* any RESTORED read: m->reports_restore = true */
                if :: g == cgen[i] && conn[i] && gate[i] -> DRR_SEEN(i) :: else -> skip fi;
#endif
#endif
                wq[i]?_, _, _; wbusy[i] = 0; j = 0; l = 0; g = 0 }

    /* job_evict(): refused while the gate is open (only a revoke may move
     * a running job's memory); else swap out; EVICTED (not modelled: the
     * daemon waits for nothing, the blocked restore retries) */
#ifdef PF
    /* the EVICT's bytes (l units): seg a (copy, then switch and unmap),
     * then seg b in one step; the daemon reads EVICTED at once (moved_out:
     * resident less what moved, memory freed), from this connection only
     * (an older one's answer matches no request) */
    :: atomic { RUN(i) && wbusy[i] && j == JEVICT && wph[i] == 0 ->
                if
                :: !gate[i] && auth[i] == DEV && l > 0 -> hv[i] = 1; wph[i] = 1     /* copy out */
                :: !gate[i] && !(auth[i] == DEV && l > 0) -> wph[i] = 3
                :: gate[i] -> wph[i] = 2
                fi }
    :: atomic { RUN(i) && wbusy[i] && j == JEVICT && wph[i] == 1 ->
                auth[i] = HOST; dv[i] = 0; mv = 1; wph[i] = 3 }            /* switch, unmap */
    :: atomic { RUN(i) && wbusy[i] && j == JEVICT && wph[i] == 3 ->
                if
                :: ONB(i) && mv < l -> hv2 = 1; auth2 = HOST; dv2 = 0; mv++
                :: else -> skip
                fi;
                wph[i] = 2 }
    :: atomic { RUN(i) && wbusy[i] && j == JEVICT && wph[i] == 2 ->
                evsent[i] = 0;
                if
                :: g == cgen[i] && conn[i] ->
                   /* moved_out(): what a USAGE has not shown yet comes off */
                   mv = (mv > evseen[i] -> mv - evseen[i] : 0);
                   dres[i] = (dres[i] > mv -> dres[i] - mv : 0);
                   evseen[i] = 0;
                   if :: mv > 0 -> freed() :: else -> skip fi
                :: else -> skip
                fi;
                wq[i]?_, _, _; wbusy[i] = 0; j = 0; l = 0; g = 0; mv = 0 }

    /* job_prefetch() -> cs_swap_prefetch(budget l): swapped segments, each
     * placed only if it fits (no ROOM: cs_seg_place_locked(ask_room =
     * false)) and within the budget; a placement the driver refuses stops
     * it with an error status; PREFETCHED(status, bytes) (l + LMOD when the
     * status is an error) */
    :: atomic { RUN(i) && wbusy[i] && j == JPREFETCH && wph[i] == 0 ->
                if
                :: SWB(i) && mv < l && RESIDENT < CAP -> PFCHECK(i); dv2 = 1; auth2 = DEV; hv2 = 0; mv++
                :: SWB(i) && mv < l && RESIDENT >= CAP ->
#ifdef BREAK_PF_DROP_BACKING
                   hv2 = 0;            /* the segment it could not place loses its backing */
#endif
                   wph[i] = 2
                :: !(SWB(i) && mv < l) && SWA(i) && mv < l && RESIDENT < CAP ->
                   PFCHECK(i); dv[i] = 1; auth[i] = DEV; hv[i] = 0; mv++
                :: !(SWB(i) && mv < l) && SWA(i) && mv < l && RESIDENT >= CAP ->
#ifdef BREAK_PF_DROP_BACKING
                   hv[i] = 0;
#endif
                   wph[i] = 2
                :: else -> wph[i] = 1
                fi }
    :: atomic { RUN(i) && wbusy[i] && j == JPREFETCH && wph[i] >= 1 ->
                if
                :: g == cgen[i] && conn[i] -> csend(i, PREFETCHED, mv + LMOD * (wph[i] - 1))
                :: else -> skip
                fi;
                wq[i]?_, _, _; wbusy[i] = 0; j = 0; l = 0; g = 0; mv = 0 }
#else
    :: atomic { RUN(i) && wbusy[i] && j == JEVICT && wph[i] == 0 ->
                if
                :: !gate[i] && auth[i] == DEV -> hv[i] = 1; wph[i] = 1     /* copy out */
                :: else -> wph[i] = 2
                fi }
    :: atomic { RUN(i) && wbusy[i] && j == JEVICT && wph[i] == 1 ->
                auth[i] = HOST; dv[i] = 0; wph[i] = 2 }                   /* switch, unmap */
    :: atomic { RUN(i) && wbusy[i] && j == JEVICT && wph[i] == 2 ->
                evsent[i] = 0;
                wq[i]?_, _, _; wbusy[i] = 0; j = 0; l = 0; g = 0 }
#endif

    /* job_revoke(): close, drain, swap out what the REVOKE's evict_bytes
     * asks (l >= LMOD), RELEASE, cs_lease_released_locked() */
    :: atomic { RUN(i) && wbusy[i] && j == JREVOKE && wph[i] == 0 ->
                if
                :: cst[i] == C_HELD && clid[i] == l % LMOD -> cst[i] = C_REVOKING; gate[i] = 0
                :: else -> skip
                fi;
#ifdef PF
                /* evict_bytes l / LMOD units: seg a first, else seg b */
                wph[i] = (l >= LMOD && auth[i] == DEV -> 1 : (l >= LMOD && ONB(i) -> 4 : 3)) }
#else
                wph[i] = (l >= LMOD && auth[i] == DEV -> 1 : 3) }
#endif
    :: atomic { RUN(i) && wbusy[i] && j == JREVOKE && wph[i] == 1 ->
                hv[i] = 1; wph[i] = 2                          /* copy out */
#ifdef BREAK_UNMAP_FIRST
                ; dv[i] = 0                                    /* unmapped before the switch */
#endif
              }
#ifdef PF
    :: atomic { RUN(i) && wbusy[i] && j == JREVOKE && wph[i] == 2 ->
                auth[i] = HOST; dv[i] = 0; mv = 1;             /* switch, unmap */
                wph[i] = (l >= 2 * LMOD && ONB(i) -> 4 : 3) }
    :: atomic { RUN(i) && wbusy[i] && j == JREVOKE && wph[i] == 4 ->
                hv2 = 1; auth2 = HOST; dv2 = 0; mv++; wph[i] = 3 }   /* seg b out */
#else
    :: atomic { RUN(i) && wbusy[i] && j == JREVOKE && wph[i] == 2 ->
                auth[i] = HOST; dv[i] = 0; wph[i] = 3 }        /* switch, unmap */
#endif
    :: atomic { RUN(i) && wbusy[i] && j == JREVOKE && wph[i] == 3 ->
                if
                :: g == cgen[i] && conn[i] ->
                   acq_sent[i] = 0;
#ifndef AS_IS_RELEASE_FIRST
                   /* cs_lease_ask_again_locked(): still wanted, ACQUIRE
                    * first (the daemon: want, while it revokes) */
                   if :: want[i] -> csend(i, ACQUIRE, 0); acq_sent[i] = 1 :: else -> skip fi;
#endif
#ifdef PF
                   csend(i, RELEASE, l % LMOD + LMOD * mv)
#else
                   csend(i, RELEASE, l % LMOD)
#endif
                :: else -> skip
                fi;
                cst[i] = C_IDLE;
                if
                :: want[i] -> cst[i] = C_WAITING;
                   if
                   :: conn[i] && !acq_sent[i] -> csend(i, ACQUIRE, 0); acq_sent[i] = 1
                   :: else -> skip
                   fi
                :: else -> skip
                fi;
                wq[i]?_, _, _; wbusy[i] = 0; j = 0; l = 0; g = 0
#ifdef PF
                ; mv = 0
#endif
              }
    od
}

proctype app(byte i)
{
end:
    do
    /* a thread needs the GPU: cs_lease_wait_open() */
    :: atomic { alive[i] && !stopped[i] && !want[i] && !gate[i] -> want[i] = 1 }
    :: atomic {
        alive[i] && !stopped[i] && want[i] && !gate[i] &&
        (cst[i] == C_IDLE || (cst[i] == C_WAITING && !acq_sent[i] && conn[i])) ->
        cst[i] = C_WAITING;
        if
        :: conn[i] -> csend(i, ACQUIRE, 0); acq_sent[i] = 1
        :: else -> skip
        fi
       }
    /* it got through the gate and did its work */
    :: atomic { alive[i] && !stopped[i] && want[i] && gate[i] -> want[i] = 0 }
    od
}

/* faults: kill -9 (the kernel frees its device memory, the daemon reads
 * EOF), a process that stops for good (SIGSTOP, a hung I/O thread) */
inline kill(i) {
    kills++;
    alive[i] = 0; gate[i] = 0; dv[i] = 0; hv[i] = 0; want[i] = 0;
#ifdef PF
    if :: i == BIG -> dv2 = 0; hv2 = 0 :: else -> skip fi;
#endif
    if :: conn[i] -> eof[i] = 1; conn[i] = 0 :: else -> skip fi;
    do :: d2c[i]?_, _ :: empty(d2c[i]) -> break od;
    do :: wq[i]?_, _, _ :: empty(wq[i]) -> break od;
    wbusy[i] = 0; wph[i] = 0
}
active proctype faults()
{
    byte i;
end:
    do
    /* a fault may also never come: give up the rest of a budget (under weak
     * fairness this process must move, not necessarily fault) */
    :: atomic { kills < MAXKILL -> kills = MAXKILL }
    :: atomic { restarts < MAXRESTART -> restarts = MAXRESTART }
    :: atomic { stops < MAXSTOP -> stops = MAXSTOP }
    :: atomic { slows < MAXSLOW -> slows = MAXSLOW }
    /* the daemon is killed and restarted: every connection closes; the new
     * daemon knows only the state file (state.c): every holder (several in
     * shared and mixed mode) and whether it was being revoked; lease ids go
     * on (abstraction) */
    :: atomic {
        restarts < MAXRESTART ->
        restarts++;
        HWAIT_RESET;
        i = 0;
        do
        :: i < N ->
           /* the state file: every holder, and whether it was being revoked */
           recd[i] = (ds[i] >= D_HELD); recrv[i] = (ds[i] == D_REVOKING);
#ifdef BREAK_NO_STATEFILE
           recd[i] = 0; recrv[i] = 0;  /* the holder was not written before the GRANT left */
#endif
           ds[i] = D_NONE; dwant[i] = 0; unresp[i] = 0; resumed[i] = 0;
           conn[i] = 0; eof[i] = 0; evsent[i] = 0;
#ifdef PF
           dres[i] = 0; drest[i] = 0; pfo[i] = 0; pfb[i] = 0; pfbase[i] = 0;
           pfst[i] = 0; pfnf[i] = 0; evamt[i] = 0; drep[i] = 0; evseen[i] = 0; pfh[i] = 0;
           DLR_CLEAR(i); DRR_CLEAR(i);
#endif
           do :: c2d[i]?_, _ :: empty(c2d[i]) -> break od;
           do :: d2c[i]?_, _ :: empty(d2c[i]) -> break od;
           i++
        :: else -> break
        od;
        restoring = (recd[0] || recd[1] || (N > 2 -> recd[N-1] : 0));
        share = NONE; lastgrant = NONE
       }

    :: atomic { kills < MAXKILL && alive[0] -> kill(0) }
    :: atomic { kills < MAXKILL && alive[1] -> kill(1) }
#if N > 2
    :: atomic { kills < MAXKILL && alive[2] -> kill(2) }
#endif
    :: atomic { stops < MAXSTOP && alive[STOPPABLE] && !stopped[STOPPABLE] ->
                stops++; stopped[STOPPABLE] = 1 }
    od
}

init {
    byte i;
    atomic {
        i = 0;
        do
        :: i < N ->
           alive[i] = 1; auth[i] = HOST; hv[i] = 1; dprev[i] = NONE;
#ifdef PF
           auth2 = HOST; hv2 = 1;
#endif
           run io(i); run worker(i); run app(i);
#if N > 2
           run dconn(i);
#endif
           i++
        :: else -> break
        od
    }
}

/* ---- liveness (run without -DSAFETY, with -a -f) ----------------------------
 * 3. every client that keeps wanting the GPU eventually holds it (gate open),
 *    unless it is killed or stops. policy.c: waiter_before() (class, then
 *    vtime: nobody starves in its class), class share turns for the lower
 *    class, end_lease()/gpu_decide() grant the next waiter when a lease ends;
 *    in shared and mixed mode fits() grants a waiter that fits beside the
 *    holders at once.
 * 4. with MAXSTOP=1: a client that never answers cannot keep the others
 *    waiting: check_revoke_timeouts() -> take_back() (force_release), when
 *    the others' memory fits beside its own (which stays where it is).
 * livel is the last client (client 2 with N=3). */
#define LIVE0 (!alive[0] || stopped[0] || !want[0] || gate[0])
#define LIVE1 (!alive[1] || stopped[1] || !want[1] || gate[1])
#define LIVEL (!alive[N-1] || stopped[N-1] || !want[N-1] || gate[N-1])
ltl live0 { [] <> LIVE0 }
ltl live1 { [] <> LIVE1 }
ltl livel { [] <> LIVEL }
#endif /* NGPU */
