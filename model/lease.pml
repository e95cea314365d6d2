/*
 * lease.pml: Promela model of cushare's lease/revoke protocol on one GPU in
 * EXCLUSIVE mode (issue 24, first part). Checked by model/check.sh with Spin.
 * docs/model.md says what is modelled, what is abstracted away and how a
 * change to the protocol must change this file.
 *
 * Code this stands for (read it before changing anything here):
 *   daemon   src/sched/policy.c  grant(), revoke(), take_back(), end_lease(),
 *                                check_revoke_timeouts(), sd_unresponsive(),
 *                                trim_holders(), restore_check(), waiter_before(),
 *                                sd_policy_attach(), sd_policy_acquire(),
 *                                sd_policy_release(), sd_policy_client_remove(),
 *                                sd_policy_restore()
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
 *   N=2|3      clients (client 0 is class high, the others normal)
 *   CAP=k      device memory in units (each client has one 1-unit segment)
 *   MAXKILL, MAXSTOP, MAXRESTART   fault budgets (kill -9, a process that
 *              stops answering for good, daemon restart)
 *   CODE_AS_IS the code exactly as it is today, with the two defects this
 *              model found (docs/model.md, "Findings"):
 *     AS_IS_STALE_GRANT     src/hook/jobs.c granted() opens the gate for a
 *                           grant whose connection is gone or whose REVOKE is
 *                           queued (grant_stale() is checked only on failure)
 *     AS_IS_UNRESP_TAKEBACK src/sched/policy.c revoke() takes the lease of an
 *                           unresponsive client back before it read the REVOKE
 *              Without them the model checks the code (both fixed 2026-11-28).
 *   BREAK_*    the deliberate bugs of docs/model.md's failure table
 */

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
#define HBOUND 2
#endif

#define NONE 255
#define LMOD 4          /* lease ids are counted modulo 4 per client */

mtype = { ACQUIRE, RELEASE, ATT_IDLE, ATT_WAIT, ATT_HELD,   /* client -> daemon */
          GRANT, REVOKE, EVICT,                             /* daemon -> client */
          JGRANT, JREVOKE, JEVICT };                                /* worker jobs      */

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
byte share = NONE;       /* class share turn: the lower-class waiter owed one */
bool evsent[N];     /* an EVICT is outstanding for this client */
bool opened[N];     /* ghost: the gate opened under the daemon's current lease */
byte newest = NONE;      /* the holder that got its lease last (holder_before) */
/* restart / state file (src/sched/state.c, sd_policy_restore) */
bool restoring;
byte rec = NONE;         /* recorded holder (state file) */
bool recrev;             /* it was being revoked */
byte restarts, kills, stops;
byte hwait;              /* daemon steps while the high client waits */

#define prio(i) ((i) == 0 -> 0 : 1)

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
#define RESIDENT (dv[0] + dv[1] + (N > 2 -> dv[N-1] : 0))
#define FITS(i)  (dv[i] || RESIDENT < CAP)
/* someone holds or is being revoked (is_holder) */
#define BUSY (ds[0] >= D_HELD || ds[1] >= D_HELD || (N > 2 -> ds[N-1] >= D_HELD : 0))

/* policy.c end_lease(): lease over; waiting again if it asked meanwhile */
inline end_lease(i) {
    dprev[i] = dlid[i];
    ds[i] = (dwant[i] -> D_WAITING : D_IDLE);
    dwant[i] = 0;
    if :: share == i -> share = NONE :: else -> skip fi
}

/* policy.c revoke(): REVOKE (the client swaps out when memory is short),
 * and for an unresponsive client (force_release) the lease ends at once:
 * take_back() */
inline revoke(i) {
    ds[i] = D_REVOKING;
    dsend(i, REVOKE, dlid[i]);
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
    if :: i == 0 -> hwait = 0 :: else -> skip fi;
    dsend(i, GRANT, dlid[i])
}

/* policy.c gpu_decide(): trim_holders(), restore_check(), preemption,
 * grant. waiter_before(): class, then resumed, then vtime (abstracted: the
 * one granted last goes last), then lowest id. */
byte bw, bh, k;
inline schedule() {
    /* trim_holders (exclusive): more than one HELD (claims after a
     * restart): revoke the worse (lower class, then the later holder) */
    bh = NONE;
    k = 0;
    do
    :: k < N ->
       if
       :: ds[k] == D_HELD && bh == NONE -> bh = k
       :: ds[k] == D_HELD && bh != NONE ->
          if
          :: prio(k) > prio(bh) || (prio(k) == prio(bh) && k == newest) -> revoke(k)
          :: else -> revoke(bh); bh = k
          fi
       :: else -> skip
       fi;
       k++
    :: else -> break
    od;
    if
    :: restoring -> skip
    :: else ->
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
       fi;
       if
       :: bw == NONE -> skip
#ifdef BREAK_GRANT_BUSY
       :: bw != NONE && (!BUSY || (bh == NONE)) -> grant(bw)   /* REVOKING not counted */
#else
       :: bw != NONE && !BUSY -> grant(bw)
#endif
#ifndef BREAK_NO_PREEMPT
       :: bw != NONE && BUSY && bh != NONE && prio(bw) < prio(bh) && share != bh ->
          revoke(bh);       /* REVOKE PREEMPT (not during the holder's share turn) */
          if                /* taken back at once: the loop in gpu_decide() grants */
          :: !BUSY -> grant(bw)
          :: else -> skip
          fi
#endif
       :: else -> skip
       fi
    fi;
    bw = NONE; bh = NONE; k = 0     /* scratch: not part of the state */
}

/* ---- properties as invariants ------------------------------------------ */

/* 1. exclusivity: at most one running process has its gate open.
 *    src/hook/gate.c cs_gate_slow() lets work through only while d->gate.open;
 *    src/sched/policy.c gpu_decide()/grant() grants only when no member is a
 *    holder (is_holder: HELD or REVOKING). A stopped process submits nothing. */
#define OPEN(i) (alive[i] && !stopped[i] && gate[i])
#define EXCL (OPEN(0) + OPEN(1) + (N > 2 -> OPEN(N-1) : 0) <= 1)

/* 2. no data loss: the authoritative copy of every live client's segment
 *    holds the data, and a running process's gate is open only while the
 *    authoritative copy is on the device (its kernels write there).
 *    src/hook/swap.c swap_out/swap_in, src/hook/jobs.c job_grant()/granted(),
 *    job_revoke(); capacity: the driver refuses a map beyond CAP (model: the
 *    restore waits, src/hook/jobs.c job_grant retry loop). */
#define SEGOK(i) (!alive[i] || ((auth[i] == DEV -> dv[i] : hv[i]) && \
                                (OPEN(i) -> (auth[i] == DEV && dv[i]) : 1)))
#define NOLOSS (SEGOK(0) && SEGOK(1) && (N > 2 -> SEGOK(N-1) : 1) && RESIDENT <= CAP)

/* 3b. a high client's wait: at most HBOUND daemon steps while it waits
 *     (src/sched/policy.c waiter_before(): class first; gpu_decide(): a
 *     higher class waiting gets the holder REVOKE PREEMPT at once). Not
 *     counted: the steps of other processes (the holder's drain), and a
 *     lower class's share turn (class_share_max_pct). */

#if defined(PROP_EXCL)
#define INV EXCL
#elif defined(PROP_NOLOSS)
#define INV NOLOSS
#elif defined(PROP_HBOUND)
#define INV (hwait <= HBOUND)
#else
#define INV (EXCL && NOLOSS && hwait <= HBOUND)
#endif
#ifndef NOMON
active proctype monitor()
{
end: atomic { !INV -> assert(INV) }
}
#endif

/* ---- daemon (src/sched) ------------------------------------------------- */

/* one message from connection i (server.c dispatch -> policy.c) */
inline on_msg(i) {
    c2d[i]?m, l;
    if
    :: ds[0] == D_WAITING && share == NONE -> hwait++
    :: else -> skip
    fi;
    if
    :: m == ATT_IDLE || m == ATT_WAIT || m == ATT_HELD ->
       /* sd_policy_attach(): restore_resolve(), adopt a HELD claim */
       ds[i] = D_IDLE; dwant[i] = 0; unresp[i] = 0; dprev[i] = NONE;
       t = 0;
       if
       :: restoring && rec == i -> t = 1; restoring = 0   /* nexpect -> 0 */
       :: else -> skip
       fi;
       resumed[i] = (t && !recrev && m != ATT_HELD);
       if
       :: m == ATT_HELD ->
          dlid[i] = l; ds[i] = D_HELD; newest = i; opened[i] = 1;
          if :: t && recrev -> revoke(i) :: else -> skip fi
       :: m == ATT_WAIT -> ds[i] = D_WAITING
       :: else -> skip
       fi
    :: m == ACQUIRE ->                                    /* sd_policy_acquire() */
       if
       :: ds[i] == D_IDLE -> ds[i] = D_WAITING
       :: ds[i] == D_REVOKING -> dwant[i] = 1
       :: else -> skip
       fi
    :: m == RELEASE ->                                    /* sd_policy_release() */
       if
       :: (ds[i] == D_HELD || ds[i] == D_REVOKING) && l == dlid[i] -> end_lease(i)
       :: else ->
          /* accepted and ignored only for the previous lease; anything else
           * is a protocol error that closes the connection: must not happen */
#ifdef BREAK_RELEASE_STRICT
          assert(false)       /* the crossing RELEASE is refused too */
#elif !defined(LENIENT_RELEASE)
          assert(dprev[i] == l)
#else
          skip
#endif
       fi
    fi;
    schedule();
    m = 0; l = 0; t = 0
}

/* EOF after everything the dead client sent: sd_policy_client_remove()
 * ends its lease at once and grants the next waiter */
inline on_eof(i) {
    eof[i] = 0;
    if :: ds[0] == D_WAITING && share == NONE -> hwait++ :: else -> skip fi;
    ds[i] = D_NONE; dwant[i] = 0;
    if :: share == i -> share = NONE :: else -> skip fi;
    if :: restoring && rec == i -> restoring = 0 :: else -> skip fi;
    schedule()
}

/* the quantum, a nondeterministic timeout: slice over while someone waits
 * -> REVOKE QUANTUM; if only a lower class waits behind a high holder, it
 * is that class's share turn (class_share_max_pct) */
inline on_quantum(i) {
    if
#ifndef BREAK_NO_SHARE
    :: ds[0] != D_WAITING && i == 0 ->
       share = (ds[1] == D_WAITING -> 1 : N - 1)
#endif
    :: else -> skip
    fi;
    if :: ds[0] == D_WAITING && share == NONE -> hwait++ :: else -> skip fi;
    revoke(i);
    schedule()
}
/* Timing assumption: the slice (>= quantum_floor_ms, sized against the
 * measured switch cost) does not end before the holder's restore is done
 * and its gate opened (opened[], a ghost variable). */
#ifdef BREAK_NO_SHARE
#define SHARE_OK(i) (i != 0)    /* a high holder is revoked only for its own class */
#else
#define SHARE_OK(i) 1
#endif
#define QUANTUM_OK(i) (!restoring && ds[i] == D_HELD && (opened[i] || !alive[i] || stopped[i]) && \
    (ds[0] == D_WAITING || (SHARE_OK(i) && (ds[1] == D_WAITING || (N > 2 -> ds[N-1] == D_WAITING : 0)))))

/* revoke_timeout_ms: check_revoke_timeouts() -> sd_unresponsive() ->
 * take_back() (force_release, the default). Timing assumption: the
 * timeout (10 s) is far longer than an I/O thread takes to read a REVOKE,
 * so it fires once the REVOKE was read, or for a stopped process
 * (check_stopped() marks it at once). */
#define RTO_OK(i) (ds[i] == D_REVOKING && (!unresp[i] || !AS_IS_UNRESP) && (empty(d2c[i]) || stopped[i]))
#ifdef AS_IS_UNRESP_TAKEBACK
#define AS_IS_UNRESP 1
#else
#define AS_IS_UNRESP 0
#endif
inline on_rto(i) {
    if :: ds[0] == D_WAITING && share == NONE -> hwait++ :: else -> skip fi;
    unresp[i] = 1;
#ifndef BREAK_NO_FORCE
    end_lease(i);       /* take_back() */
#endif
    schedule()
}

#define ROOM_OK(h, v) (ds[h] == D_HELD && wbusy[h] && wph[h] == 0 && auth[h] == HOST && \
    !FITS(h) && wq[h]?[JGRANT, dlid[h], cgen[h]] && \
    ds[v] >= D_IDLE && ds[v] <= D_WAITING && dv[v] && !unresp[v] && !evsent[v])
inline on_room(v) {
    evsent[v] = 1;
    dsend(v, EVICT, 0)
}

active proctype daemon()
{
    byte i, t, l;
    mtype m;
end:
    do
    :: atomic { nempty(c2d[0]) -> on_msg(0) }
    :: atomic { nempty(c2d[1]) -> on_msg(1) }
#if N > 2
    :: atomic { nempty(c2d[2]) -> on_msg(2) }
#endif
    :: atomic { eof[0] && empty(c2d[0]) -> on_eof(0) }
    :: atomic { eof[1] && empty(c2d[1]) -> on_eof(1) }
#if N > 2
    :: atomic { eof[2] && empty(c2d[2]) -> on_eof(2) }
#endif
    :: atomic { QUANTUM_OK(0) -> on_quantum(0) }
    :: atomic { QUANTUM_OK(1) -> on_quantum(1) }
#if N > 2
    :: atomic { QUANTUM_OK(2) -> on_quantum(2) }
#endif
    :: atomic { RTO_OK(0) -> on_rto(0) }
    :: atomic { RTO_OK(1) -> on_rto(1) }
#if N > 2
    :: atomic { RTO_OK(2) -> on_rto(2) }
#endif
    /* ROOM: a holder's restore does not fit (src/hook/jobs.c job_grant ->
     * cs_client_request_room; src/sched/room.c, make_room()): EVICT the
     * resident memory of a client that neither holds nor is unresponsive */
#ifndef BREAK_NO_ROOM
    :: atomic { ROOM_OK(0, 1) -> on_room(1) }
    :: atomic { ROOM_OK(1, 0) -> on_room(0) }
#if N > 2
    :: atomic { ROOM_OK(0, 2) -> on_room(2) }
    :: atomic { ROOM_OK(1, 2) -> on_room(2) }
    :: atomic { ROOM_OK(2, 0) -> on_room(0) }
    :: atomic { ROOM_OK(2, 1) -> on_room(1) }
#endif
#endif
    /* reconnect_grace_ms over (restore_check()). Timing assumption: a live,
     * running recorded holder reconnects within the grace (1.5 s) */
    :: atomic { restoring && (!alive[rec] || stopped[rec]) -> restoring = 0; schedule() }
    od
}

/* ---- client i: I/O thread, worker, application, as separate processes so
 * that weak fairness treats them as the threads they are ---------------- */

/* a REVOKE job for lease l is queued (or running) */
#define REVQ(i, l) (wq[i]??[JREVOKE, l, 0] || wq[i]??[JREVOKE, l, 1])
#define GRANTQ(i, l) (wq[i]??[JGRANT, l, 0] || wq[i]??[JGRANT, l, 1])

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
        :: m == EVICT -> wq[i]!JEVICT, 0, cgen[i]          /* on_evict() */
        :: m == REVOKE ->                                  /* on_revoke() */
           if
           :: cst[i] == C_HELD && clid[i] == l ->
              cst[i] = C_REVOKING; gate[i] = 0;            /* stop new work now */
              wq[i]!JREVOKE, l, cgen[i]
           :: cst[i] != C_HELD || clid[i] != l ->
              if
              :: GRANTQ(i, l) -> wq[i]!JREVOKE, l, cgen[i]
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
end:
    do
    /* take the next job (it stays queued while it runs: the I/O thread's
     * cs_worker_grant_queued_locked() / grant_stale() see it) */
    :: atomic { RUN(i) && !wbusy[i] && nempty(wq[i]) -> wq[i]?<j, l, g>; wbusy[i] = 1; wph[i] = 0 }

    /* job_grant(): restore (retried while it does not fit), then granted() */
    :: atomic { RUN(i) && wbusy[i] && j == JGRANT && wph[i] == 0 && auth[i] == HOST && FITS(i) ->
#ifdef BREAK_GATE_EARLY
                cst[i] = C_HELD; clid[i] = l; gate[i] = 1;     /* gate before the copy */
#endif
                dv[i] = 1; wph[i] = 1 }                        /* map + copy in */
    :: atomic { RUN(i) && wbusy[i] && j == JGRANT && wph[i] == 0 && auth[i] == HOST && !FITS(i) &&
                (g != cgen[i] || REVQ(i, l)) ->               /* grant_stale() after a failure */
                wq[i]?_, _, _; wbusy[i] = 0; j = 0; l = 0; g = 0 }
    :: atomic { RUN(i) && wbusy[i] && j == JGRANT && wph[i] == 1 ->
                auth[i] = DEV; hv[i] = 0; wph[i] = 2 }          /* swap_in done */
    :: atomic { RUN(i) && wbusy[i] && j == JGRANT && wph[i] == 0 && auth[i] == DEV -> wph[i] = 2 }
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
                wq[i]?_, _, _; wbusy[i] = 0; j = 0; l = 0; g = 0 }

    /* job_evict(): refused while the gate is open (only a revoke may move
     * a running job's memory); else swap out; EVICTED (not modelled: the
     * daemon waits for nothing, the blocked restore retries) */
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

    /* job_revoke(): close, drain, swap out when memory is short (the
     * daemon's evict_bytes), RELEASE, cs_lease_released_locked() */
    :: atomic { RUN(i) && wbusy[i] && j == JREVOKE && wph[i] == 0 ->
                if
                :: cst[i] == C_HELD && clid[i] == l -> cst[i] = C_REVOKING; gate[i] = 0
                :: else -> skip
                fi;
                wph[i] = (CAP < N && auth[i] == DEV -> 1 : 3) }
    :: atomic { RUN(i) && wbusy[i] && j == JREVOKE && wph[i] == 1 ->
                hv[i] = 1; wph[i] = 2                          /* copy out */
#ifdef BREAK_UNMAP_FIRST
                ; dv[i] = 0                                    /* unmapped before the switch */
#endif
              }
    :: atomic { RUN(i) && wbusy[i] && j == JREVOKE && wph[i] == 2 ->
                auth[i] = HOST; dv[i] = 0; wph[i] = 3 }        /* switch, unmap */
    :: atomic { RUN(i) && wbusy[i] && j == JREVOKE && wph[i] == 3 ->
                if
                :: g == cgen[i] && conn[i] -> csend(i, RELEASE, l); acq_sent[i] = 0
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
                wq[i]?_, _, _; wbusy[i] = 0; j = 0; l = 0; g = 0 }
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
    /* the daemon is killed and restarted: every connection closes; the new
     * daemon knows only the state file (state.c): the holder and whether it
     * was being revoked; lease ids go on (abstraction) */
    :: atomic {
        restarts < MAXRESTART ->
        restarts++;
        hwait = 0;
        rec = NONE; recrev = 0;
        i = 0;
        do
        :: i < N ->
           if
           :: ds[i] >= D_HELD -> rec = i; recrev = (ds[i] == D_REVOKING)
           :: else -> skip
           fi;
           ds[i] = D_NONE; dwant[i] = 0; unresp[i] = 0; resumed[i] = 0;
           conn[i] = 0; eof[i] = 0; evsent[i] = 0;
           do :: c2d[i]?_, _ :: empty(c2d[i]) -> break od;
           do :: d2c[i]?_, _ :: empty(d2c[i]) -> break od;
           i++
        :: else -> break
        od;
#ifdef BREAK_NO_STATEFILE
        rec = NONE;     /* the holder was not written before the GRANT left */
#endif
        restoring = (rec != NONE);
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
           run io(i); run worker(i); run app(i);
           i++
        :: else -> break
        od
    }
}

/* ---- liveness (run without -DSAFETY, with -a -f) ----------------------------
 * 3. every client that keeps wanting the GPU eventually holds it (gate open),
 *    unless it is killed or stops. policy.c: waiter_before() (class, then
 *    vtime: nobody starves in its class), class share turns for the lower
 *    class, end_lease()/gpu_decide() grant the next waiter when a lease ends.
 * 4. with MAXSTOP=1: a client that never answers cannot keep the others
 *    waiting: check_revoke_timeouts() -> take_back() (force_release). */
#define LIVE0 (!alive[0] || stopped[0] || !want[0] || gate[0])
#define LIVE1 (!alive[1] || stopped[1] || !want[1] || gate[1])
#define LIVEL (!alive[N-1] || stopped[N-1] || !want[N-1] || gate[N-1])
ltl live0 { [] <> LIVE0 }
ltl live1 { [] <> LIVE1 }
ltl livel { [] <> LIVEL }
