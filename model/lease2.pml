/*
 * lease2.pml: the lease protocol on TWO GPUs (issue 24: "1-2 GPUs"), included
 * by lease.pml with -DNGPU=2. Exclusive mode, two clients of one class:
 * what is new with two GPUs is not the policy of one GPU (lease.pml checks
 * it) but its composition: one process on both GPUs (one connection, one
 * I/O thread, one worker and one gate per device, a call coupled across
 * both gates after peer access), the daemon's per-GPU state (one member
 * per (client, GPU), each GPU decided on its own), a client marked
 * unresponsive on every GPU at once, a kill or restart that ends or
 * re-attaches both members. docs/model.md ("Two GPUs") says what is
 * modelled and what is abstracted.
 *
 * Code this stands for:
 *   hook    src/hook/gate.c     enter_coupled() (every coupled gate open at
 *                               once, waited for with none of them passed),
 *                               pair_all() (both leases wanted for the wait),
 *                               cs_gate_couple() (peer access: bit set once)
 *           src/hook/hooks_peer.c cuCtxEnablePeerAccess -> cs_gate_couple
 *           src/hook/lease.c    on_grant()/on_revoke() per slot (one I/O
 *                               thread for every device), attach_msg_locked()
 *                               per device on a reconnect, request_locked()
 *           src/hook/worker.c   one worker thread per device (worker_main)
 *           src/hook/jobs.c     job_revoke(): cs_dev_wait_inside_zero(),
 *                               drain, swap out, RELEASE; job_grant()/granted()
 *   daemon  src/sched/policy.c  struct sd_gpu (members of one GPU), c->slot[]
 *                               (slot -> member), gpu_schedule() per GPU,
 *                               sd_policy_client_remove() (every slot, each
 *                               GPU decided), sd_unresponsive() (per client:
 *                               every slot's REVOKING member taken back when
 *                               read, want_at() for each of its GPUs),
 *                               sd_policy_restore() (per GPU expect lists)
 *           src/sched/room.c    ROOM -> EVICT among the members of one GPU
 *
 * Build switches (with -DNGPU=2):
 *   BBOTH      client B is on both GPUs too, its thread coupled the other way
 *              (B's device 0 is GPU 1: CUDA_VISIBLE_DEVICES=1,0; its work on
 *              GPU 1 reaches GPU 0's memory), so that each client may hold
 *              one GPU and wait for the other. Without it B is on GPU 1 only.
 *   NOCOUPLE   A's two devices are not coupled: one thread on each
 *   CAP0, CAP1 memory of GPU 0 / GPU 1 in units (each member has one unit)
 *   MAXKILL, MAXSTOP, MAXRESTART, MAXSLOW, STOPPABLE: as in lease.pml
 *   BREAK_*    the deliberate bugs of docs/model.md's failure table:
 *     BREAK_GRANT_BUSY      a GPU granted while its holder is still REVOKING
 *     BREAK_SLOT_AS_GPU     the daemon takes a slot for the GPU's index
 *     BREAK_NO_COUPLE       peer access does not couple the gates
 *     BREAK_HOLD_WAIT       enter_coupled() waits inside its own open gate
 *     BREAK_REMOVE_ONE_GPU  client_remove() decides one GPU only
 *   AS_IS_RELEASE_FIRST  the hook before finding 8's fix: a revoked device
 *              whose threads still wait sends RELEASE, then ACQUIRE (now
 *              ACQUIRE first, jobs.c cs_lease_ask_again_locked(), so that
 *              the member waits in the decision the RELEASE makes)
 *   AS_IS_PREV_ONLY  the daemon before that fix: a RELEASE of neither the
 *              current nor the previous lease was a protocol error
 *   NO_GANG_END, NO_GANG_ALIGN  without gang_slice_end() / gang_align()
 *   QOK_DAEMON  a waiter that came after a slice ended is served by a daemon
 *              step (the model before): weak fairness is per process, so
 *              the daemon busy elsewhere could pass it over for ever
 *   NO_DRAIN_T  without the timing assumption "a drain is shorter than a
 *              quantum" (DRAIN_T below)
 *   GANG_EQUAL_Q, NO_GANG_TIMED  a stronger (equal quanta) and no timing
 *              assumption for gang_align() (SLEND_T below)
 *   AS_IS_NO_GANG  the policy before gang_waiter()/gang_align() (finding 8:
 *              each GPU decides with no regard to the client's other GPU;
 *              no slice state or slice timers (proctype clock), slices end
 *              only in the QUANTUM decision: the model as it was)
 */

#ifndef MAXKILL
#define MAXKILL 1
#endif
#ifndef MAXSLOW
#define MAXSLOW 1
#endif
#ifndef MAXSTOP
#define MAXSTOP 0
#endif
#ifndef MAXRESTART
#define MAXRESTART 1
#endif
#ifndef STOPPABLE
#define STOPPABLE 1
#endif
#ifndef CAP0
#define CAP0 1
#endif
#ifndef CAP1
#define CAP1 1
#endif
#define CAPG(g) ((g) == 0 -> CAP0 : CAP1)

#define NONE 255
#define LMOD 4          /* lease ids modulo 4 per member; + LMOD: swap out */

mtype = { ACQUIRE, RELEASE, ATT_IDLE, ATT_WAIT, ATT_HELD,   /* client -> daemon */
          GRANT, REVOKE, EVICT,                             /* daemon -> client */
          JGRANT, JREVOKE, JEVICT };                        /* worker jobs      */

/* clients 0 (A, on both GPUs) and 1 (B); member (c, g) = 2c + g, on the
 * hook's side the device of client c that is GPU g, on the daemon's side
 * c->slot[] of the member of GPU g. Slots are the process's device
 * ordinals: A's slot s is GPU s, B's slot s is GPU 1 - s. */
#define MB(c, g) ((c) * 2 + (g))
#define CL(m) ((m) / 2)
#define GP(m) ((m) % 2)
#define OTHER(m) (MB(1 - CL(m), GP(m)))     /* the other client's member of m's GPU */
#define SLOTOF(c, g) ((c) ^ (g))
#define GPUOF(c, s) ((c) ^ (s))
#ifdef BBOTH
#define ON(m) 1
#else
#define ON(m) ((m) != MB(1, 0))             /* B is not on GPU 0 */
#endif

/* ---- connections: one per process, both slots' messages in order ------- */
chan c2d[2] = [4] of { mtype, byte, byte };   /* type, slot, lease id */
chan d2c[2] = [4] of { mtype, byte, byte };
chan wq[4]  = [4] of { mtype, byte, bit };    /* per device: job, lease, generation */

/* ---- hook ---------------------------------------------------------------- */
#define C_IDLE     0
#define C_WAITING  1
#define C_HELD     2
#define C_REVOKING 3
bool alive[2];
bool stopped[2];
bool conn[2];
bit  cgen[2];
bool eof[2];
#define RUN(c) (alive[c] && !stopped[c])
/* per device (member index) */
bool gate[4];
byte cst[4];
byte clid[4];
bool acq_sent[4];
byte want[4];       /* lease.waiters + lease.pairs: threads that want the lease */
byte inside[4];     /* threads inside the gate (gate.subm's INSIDE count) */
bool touch[4];      /* ghost: a call runs on this device's memory without
                     * having passed its gate (BREAK_NO_COUPLE) */
byte wph[4];
bool wbusy[4];
/* memory: one 1-unit segment per device */
#define DEV  0
#define HOST 1
bit  auth[4];
bool dv[4];
bool hv[4];
#define RESIDENT(g) (dv[MB(0, g)] + dv[MB(1, g)])
#define FITS(m) (dv[m] || RESIDENT(GP(m)) < CAPG(GP(m)))

/* application threads: t0 A's (device 0, coupled to device 1; with
 * NOCOUPLE device 0 alone), t1 B's (GPU 1; with BBOTH coupled to GPU 0),
 * t2 (NOCOUPLE) A's thread on device 1 */
#ifdef NOCOUPLE
#define NT 3
#else
#define NT 2
#endif
#define TDEV(t) ((t) == 0 -> MB(0, 0) : ((t) == 1 -> MB(1, 1) : MB(0, 1)))
#ifdef BBOTH
#define TCPL1 MB(1, 0)
#else
#define TCPL1 NONE
#endif
#ifdef NOCOUPLE
#define TCPL(t) ((t) == 1 -> TCPL1 : NONE)
#else
#define TCPL(t) ((t) == 0 -> MB(0, 1) : ((t) == 1 -> TCPL1 : NONE))
#endif
#define T_IDLE 0
#define T_WAIT 1    /* in cs_gate_slow/enter_coupled, waiting (none passed) */
#define T_IN   2    /* inside its gates: its call and the work it queues run */
#define T_HALF 3    /* BREAK_HOLD_WAIT: inside its own gate, waiting for the other */
byte aph[NT];

/* ---- daemon --------------------------------------------------------------- */
#define D_NONE     0
#define D_IDLE     1
#define D_WAITING  2
#define D_HELD     3
#define D_REVOKING 4
byte ds[4];
byte dlid[4];
byte dprev[4];
bool dwant[4];
bool resumed[4];
bool evsent[4];
bool opened[4];     /* ghost: the gate opened under the daemon's current lease */
bool unresp[2];     /* c->unresponsive: per client, every slot */
byte lastgrant[2] = NONE;   /* per GPU: vtime abstracted, the last granted goes last */
byte newest[2] = NONE;      /* per GPU: the holder granted last (trim_holders) */
bool restoring[2];          /* per GPU: g->restoring */
bool recd[4];
bool recrv[4];
#ifndef AS_IS_NO_GANG
/* the slice of holder m is still running (policy.c slice_running(): HELD,
 * now < slice_ns + quantum); untimed: set by the grant (hold_from), cleared
 * by the slice-end event (the timer at slice_ns + quantum), which may come
 * at any moment after the holder's gate opened (the QUANTUM_OK assumption) */
bool sl[4];
/* ghost: m's slice was restarted by gang_align() at the grant of its
 * client's member of the other GPU, whose lease still runs (SLEND_T
 * below); alc: m's lease was restarted once (quantum_cap_ms, GANG_ALIGN) */
bool al[4];
bool alc[4];
/* ghost: when m was granted, a member of the other GPU was draining
 * (REVOKING); cleared when a lease of the other GPU ends (DRAIN_T) */
bool dr[4];
#endif
byte restarts, kills, stops, slows;
#define HOLD(m) (ds[m] >= D_HELD)
#define NHOLD(g) (HOLD(MB(0, g)) + HOLD(MB(1, g)))
#define NHELD(g) ((ds[MB(0, g)] == D_HELD) + (ds[MB(1, g)] == D_HELD))
#ifdef BREAK_GRANT_BUSY
#define ALONE(g) (NHELD(g) == 0)    /* a REVOKING holder not counted */
#else
#define ALONE(g) (NHOLD(g) == 0)
#endif

/* (a send's arguments are copied first: Spin's parser takes a
 * parenthesised argument for the ch!t(a, b) form) */
byte mslot, mlease;
inline dsend(c, t, s, l) {
    if
    :: alive[c] && conn[c] && !stopped[c] ->
       assert(nfull(d2c[c])); mslot = s; mlease = l; d2c[c]!t, mslot, mlease; mslot = 0; mlease = 0
    :: else -> skip
    fi
}
inline csend(c, t, s, l) {
    if
    :: conn[c] -> assert(nfull(c2d[c])); mslot = s; mlease = l; c2d[c]!t, mslot, mlease; mslot = 0; mlease = 0
    :: else -> skip
    fi
}

/* The slot the daemon writes in a message to member m's client, and the
 * GPU it finds a message's member on (c->slot[s]->gpu). BREAK_SLOT_AS_GPU:
 * the slot taken for the GPU's index (B's device 0 is GPU 1). */
#ifdef BREAK_SLOT_AS_GPU
#define DSLOT(m) (GP(m))
#define DGPU(c, s) (s)
#else
#define DSLOT(m) (SLOTOF(CL(m), GP(m)))
#define DGPU(c, s) (GPUOF(c, s))
#endif

/* One client on both GPUs (policy.c gang_waiter(), gang_align();
 * docs/model.md finding 8). SLRUN(o): slice_running(): o HELD in a slice
 * still running and not waiting for room (room_active: the ROOM the
 * model's EVICT is out for). PEER(m): m's client's member of the other
 * GPU. GANG(m): gang_holds_elsewhere(). */
#define PEER(m) (MB(CL(m), 1 - GP(m)))
#ifdef AS_IS_NO_GANG
#define SLSET(m)
#define SLCLR(m)
#define DRCLR(m)
#define GANG(m) 0
#define GANG_ALIGN(m)
#else
/* (each written after a statement, its ';' first: nothing at all with
 * AS_IS_NO_GANG, whose state graph is the old model's) */
#ifdef NO_DRAIN_T
#define DRSET(m)
#else
#define DRSET(m) ; dr[m] = (ds[MB(0, 1 - GP(m))] == D_REVOKING || ds[MB(1, 1 - GP(m))] == D_REVOKING)
#endif
#define SLSET(m) ; sl[m] = 1; al[m] = 0; alc[m] = 0 DRSET(m)
/* a lease of m's GPU ends: a drain the other GPU's slices started beside
 * is over (with two members of one GPU revoked at once, after a restart's
 * claims, at the first one's end: the assumption is then weaker) */
#ifdef NO_DRAIN_T
#define DRCLR(m)
#else
#define DRCLR(m) ; dr[MB(0, 1 - GP(m))] = 0; dr[MB(1, 1 - GP(m))] = 0
#endif
#define SLCLR(m) ; sl[m] = 0; al[m] = 0; alc[m] = 0; al[PEER(m)] = 0
#define SLRUN(o) (ds[o] == D_HELD && sl[o] && !evsent[OTHER(o)])
#define GANG(m) (SLRUN(PEER(m)))
/* m's client waits for its member of the other GPU: WAITING, or being
 * revoked there and asking again (m->want, the hook's ACQUIRE before its
 * RELEASE) */
#define WAITS(m) (ds[m] == D_WAITING || (ds[m] == D_REVOKING && dwant[m]))
/* granting waiter m would cross: m's client waits for the other GPU, held
 * by the client of this GPU's other waiter */
#define CROSSES(m) (WAITS(PEER(m)) && ds[PEER(OTHER(m))] == D_HELD)
/* gang_align(): the client's running slice on the other GPU starts again
 * with this grant, if its lease is younger than quantum_cap_ms. Untimed,
 * a slice that runs on stays running (sl); what the restart guarantees in
 * time is al (SLEND_T). The cap bounds how often one lease is restarted:
 * modelled as once (alc), the least of any bound (each restart lasts a
 * quantum, so a lease of cap/quantum restarts is as finite as one). */
#ifdef NO_GANG_ALIGN
#define GANG_ALIGN(m)
#else
#define GANG_ALIGN(m) ; if :: SLRUN(PEER(m)) && !alc[PEER(m)] -> al[PEER(m)] = 1; alc[PEER(m)] = 1 \
    :: else -> skip fi
#endif
#endif

inline end_lease(m) {
    dprev[m] = dlid[m] SLCLR(m) DRCLR(m);
    ds[m] = (dwant[m] -> D_WAITING : D_IDLE);
    dwant[m] = 0
}
/* revoke(): REVOKE with evict_bytes; an unresponsive client's lease is
 * taken back when it read the REVOKE or is stopped (take_back_when_read) */
inline revoke(m, ev) {
    ds[m] = D_REVOKING SLCLR(m);
    dsend(CL(m), REVOKE, DSLOT(m), dlid[m] + LMOD * ev);
    if :: unresp[CL(m)] && (stopped[CL(m)] || empty(d2c[CL(m)])) -> end_lease(m) :: else -> skip fi
}
inline grant(m) {
    dlid[m] = (dlid[m] + 1) % LMOD;
    ds[m] = D_HELD; resumed[m] = 0; opened[m] = 0;
    lastgrant[GP(m)] = CL(m); newest[GP(m)] = CL(m) SLSET(m) GANG_ALIGN(m);
    dsend(CL(m), GRANT, DSLOT(m), dlid[m])
}

byte bw, k, w, qexp = NONE, sg;
#ifdef GANG_EQUAL_Q
byte jw;
#endif

/* gpu_decide() of GPU g, exclusive mode, one class: trim_holders() (two
 * HELD after a restart's claims: the newest goes, evict_bytes 0); nothing
 * during the grace; the best waiter (resumed first, then vtime: not the
 * one granted last); granted if no member holds; else the holder is
 * revoked at the end of its slice (qexp) with evict_bytes =
 * sd_mem_shortfall(): what does not fit beside the others' memory
 * (a holder its footprint, an unresponsive client 0, a third party what
 * is resident unless an EVICT is out). */
#define RESA(o) (unresp[CL(o)] -> 0 : (HOLD(o) -> 1 : dv[o] && !evsent[o]))
inline schedule(g) {
    if
    :: NHELD(g) == 2 -> revoke(MB(newest[g], g), 0)
    :: else -> skip
    fi;
    if
    :: restoring[g] -> skip
    :: else ->
       bw = NONE;
       if
       :: ds[MB(0, g)] == D_WAITING && ds[MB(1, g)] == D_WAITING ->
          bw = (resumed[MB(1, g)] && !resumed[MB(0, g)] -> MB(1, g) :
                (resumed[MB(0, g)] && !resumed[MB(1, g)] -> MB(0, g) :
                 (lastgrant[g] == 0 -> MB(1, g) : MB(0, g))))
          /* gang_waiter(): the chosen one is passed over for the other if
           * granting it would cross the two clients: its client waits for
           * the other GPU, which the other waiter's client holds (HELD) */
#ifndef AS_IS_NO_GANG
          ;
          if
          :: !resumed[bw] && CROSSES(bw) -> bw = OTHER(bw)
          :: else -> skip
          fi
#endif
       :: ds[MB(0, g)] == D_WAITING && ds[MB(1, g)] != D_WAITING -> bw = MB(0, g)
       :: ds[MB(0, g)] != D_WAITING && ds[MB(1, g)] == D_WAITING -> bw = MB(1, g)
       :: else -> skip
       fi;
       if
       :: bw == NONE -> skip
       :: bw != NONE && ALONE(g) -> grant(bw)
       :: bw != NONE && !ALONE(g) ->
          w = OTHER(bw);
          if
          :: ds[w] == D_HELD && w == qexp ->
             k = (1 + RESA(w) > CAPG(g) && !unresp[CL(w)]);
             revoke(w, k);
             if :: ALONE(g) -> grant(bw) :: else -> skip fi
          :: else -> skip
          fi
       fi
    fi;
    bw = NONE; w = 0; k = 0
}
/* the decisions an event asks for: sg bit g = GPU g (gpu_schedule() of
 * that GPU; sd_node_reschedule() both) */
inline decide() {
    if :: sg & 1 -> schedule(0) :: else -> skip fi;
    if :: sg & 2 -> schedule(1) :: else -> skip fi;
    sg = 0
}

/* ---- properties ------------------------------------------------------------ */
/* 1g. per-GPU exclusivity: on each GPU at most one running process has its
 *     gate open (gate.c, policy.c fits(): alone only; one member per
 *     (client, GPU), each GPU decided on its own). */
#define OPEN(m) (RUN(CL(m)) && gate[m])
#define EXCL ((OPEN(MB(0, 0)) + OPEN(MB(1, 0)) <= 1) && (OPEN(MB(0, 1)) + OPEN(MB(1, 1)) <= 1))
/* 2g. no data loss on each GPU: a live client's authoritative copy holds
 *     its data; its gate is open, or a call of it runs (inside the gate, or
 *     on the memory without passing the gate), only over resident,
 *     authoritative memory; resident <= each GPU's capacity
 *     (swap.c, jobs.c; gate.c enter_coupled: a coupled call passes the
 *     other device's gate too, so a revoke of that device waits for it,
 *     cs_dev_wait_inside_zero(), before its memory moves) */
#define SEGOK(m) (!alive[CL(m)] || ((auth[m] == DEV -> dv[m] : hv[m]) && \
    ((OPEN(m) || inside[m] > 0 || touch[m]) -> (auth[m] == DEV && dv[m]) : 1)))
#define NOLOSS (SEGOK(0) && SEGOK(1) && SEGOK(2) && SEGOK(3) && \
                RESIDENT(0) <= CAP0 && RESIDENT(1) <= CAP1)
/* 3g. no deadlock: when nothing can move any more, no running thread waits
 *     at a gate (in particular no cross-GPU hold-and-wait: A holding GPU 0
 *     waiting for GPU 1 while B holds GPU 1 waiting for GPU 0 is broken by
 *     the slices, and a revoke's drain never waits for a thread that waits
 *     for another gate), unless its memory cannot fit beside a stopped
 *     client's (lease.pml's limit) */
#define TSTUCK(t) (RUN(CL(TDEV(t))) && aph[t] != T_IDLE && aph[t] != T_IN)
#define SILENTMEM ((stopped[0] && (dv[0] || dv[1])) || (stopped[1] && (dv[2] || dv[3])))
#if NT > 2
#define DEADOK ((!TSTUCK(0) && !TSTUCK(1) && !TSTUCK(2)) || SILENTMEM)
#else
#define DEADOK ((!TSTUCK(0) && !TSTUCK(1)) || SILENTMEM)
#endif

#ifndef NOMON
active proctype monitor()
{
end:
    do
    :: atomic { !EXCL -> assert(EXCL) }
    :: atomic { !NOLOSS -> assert(NOLOSS) }
    :: atomic { timeout && !DEADOK -> assert(DEADOK) }
    od
}
#endif

/* ---- daemon ---------------------------------------------------------------- */
/* one message of client c (dispatch: slot -> member -> its GPU) */
inline on_msg(c) {
    c2d[c]?t, s, l;
    k = MB(c, DGPU(c, s));
    sg = 1 << GP(k);
    if
    :: t == ATT_IDLE || t == ATT_WAIT || t == ATT_HELD ->
       /* sd_policy_attach(): restore_resolve() against this GPU's list */
       ds[k] = D_IDLE; dwant[k] = 0; dprev[k] = NONE;
       w = 0;
       if
       :: restoring[GP(k)] && recd[k] ->
          w = 1; recd[k] = 0;
          restoring[GP(k)] = (recd[MB(0, GP(k))] || recd[MB(1, GP(k))])
       :: else -> skip
       fi;
       resumed[k] = (w && !recrv[k] && t != ATT_HELD);
       if
       :: t == ATT_HELD ->
          dlid[k] = l; ds[k] = D_HELD; newest[GP(k)] = c; opened[k] = 1 SLSET(k);
          if :: w && recrv[k] -> revoke(k, 0) :: else -> skip fi
       :: t == ATT_WAIT -> ds[k] = D_WAITING
       :: else -> skip
       fi;
       recrv[k] = 0
    :: t == ACQUIRE ->
       if
       :: ds[k] == D_IDLE -> ds[k] = D_WAITING
       :: ds[k] == D_REVOKING -> dwant[k] = 1
       :: else -> skip
       fi
    :: t == RELEASE ->
       if
       :: HOLD(k) && l == dlid[k] -> end_lease(k)
       :: else ->
          /* an earlier lease's: ignored (sd_policy_release(): one ended
           * already, the previous or, the hook asking again before it
           * releases, one before a lease granted and taken back between
           * its ACQUIRE and its RELEASE). AS_IS_PREV_ONLY: the code before,
           * which refused all but the previous (g-safe2 fails it) */
#ifdef AS_IS_PREV_ONLY
          assert(dprev[k] == l)
#else
          skip
#endif
       fi
    fi;
    t = 0; s = 0; l = 0; w = 0
}
/* EOF: sd_policy_client_remove() ends every slot's lease and decides each
 * of its GPUs (gpu_schedule() in the loop over the slots) */
inline on_eof(c) {
    eof[c] = 0;
    ds[MB(c, 0)] = D_NONE; dwant[MB(c, 0)] = 0 SLCLR(MB(c, 0)) DRCLR(MB(c, 0));
    ds[MB(c, 1)] = D_NONE; dwant[MB(c, 1)] = 0 SLCLR(MB(c, 1)) DRCLR(MB(c, 1));
#ifdef BREAK_REMOVE_ONE_GPU
    sg = 1 << GPUOF(c, 0)       /* only the first slot's GPU decided */
#else
    sg = 3
#endif
}
/* the quantum of holder m's GPU: its slice is over while the other member
 * of its GPU waits. Timing assumption (lease.pml QUANTUM_OK): not before
 * its restore is done and its gate opened. */
#define QUANTUM_OK(m) (!restoring[GP(m)] && ds[m] == D_HELD && (opened[m] || !RUN(CL(m))) && \
                       ds[OTHER(m)] == D_WAITING && SLOVER(m))
#ifdef AS_IS_NO_GANG
#define SLOVER(m) 1
#else
/* the slice end (the timer at slice_ns + quantum): not before the holder's
 * gate opened (as QUANTUM_OK); the GPU decides (a holder with a waiter is
 * revoked). QUANTUM_OK then stands for a later decision, a waiter that
 * came after the slice ended. */
#define SLOVER(m) (!sl[m])
#define SLEND_OK(m) (sl[m] && ds[m] == D_HELD && !restoring[GP(m)] && (opened[m] || !RUN(CL(m))) && SLEND_T(m))
/* The timing gang_align() guarantees (SLEND_T): a slice restarted at the
 * grant of the client's other member p lasts a quantum from that grant,
 * longer than p's GRANT takes to reach the hook and p's restore: it does
 * not end before p's gate opened (or p's lease ended, or the client is
 * gone); nor does p's own slice end before the gate of the restarted one
 * opened (p's slice lasts a quantum from p's grant, later than the other
 * grant, whose restore takes less than a quantum). -DNO_GANG_TIMED: none
 * (the restart then has no effect in an untimed model: the slice may end
 * at any moment after the grant).
 * -DGANG_EQUAL_Q: both GPUs' quanta equal, so the restarted slice ends
 * with p's: not alone, and p's slice end ends it too (SLWITH; the GPUs
 * then decide one after the other); a far larger state graph. */
#ifdef NO_GANG_TIMED
#define SLEND_T(m) 1
#elif defined(GANG_EQUAL_Q)
#define SLEND_T(m) ((!al[m] || ds[PEER(m)] != D_HELD || !RUN(CL(m))) && DRAIN_T(m))
#else
#define SLEND_T(m) ((!(al[m] || al[PEER(m)]) || opened[PEER(m)] || ds[PEER(m)] != D_HELD || \
                     !RUN(CL(m))) && DRAIN_T(m))
#endif
/* DRAIN_T: a drain is shorter than a quantum: a slice that started while
 * the other GPU's holder was draining (revoked: its work finishing, the
 * REVOKE's evict_bytes going out) does not end before that drain did, i.e.
 * before that lease ended. The quantum is at least quantum_floor_ms (100)
 * and grows with the predicted switch cost on an oversubscribed GPU
 * (policy.c), while a drain is a job's queued work and its swap-out; a
 * drain longer than that is the slow-drain fault (MAXSLOW, the revoke
 * timeout), which the runs that check liveness with clients crossed over
 * both GPUs leave out. Without it (-DNO_DRAIN_T) the untimed model lets a
 * whole slice pass within one drain (docs/model.md finding 8). */
#ifdef NO_DRAIN_T
#define DRAIN_T(m) 1
#else
#define DRAIN_T(m) (!dr[m])
#endif
#if !defined(GANG_EQUAL_Q) || defined(NO_GANG_TIMED)
#define SLWITH(i) skip
#define SLWITHEND(i) skip
#else
#define SLWITH(i) jw = (al[PEER(i)] && sl[PEER(i)] -> PEER(i) : NONE)
#define SLWITHEND(i) \
        if \
        :: jw != NONE && sl[jw] && ds[jw] == D_HELD -> \
           sl[jw] = 0; al[jw] = 0; qexp = jw; sg = 1 << GP(jw); decide(); qexp = NONE \
        :: else -> skip \
        fi; jw = 0
#endif
#endif
/* revoke_timeout_ms: as lease.pml RTO_OK (after the REVOKE was read, or for
 * a stopped process; a live client's drain only as the MAXSLOW fault) */
#define RTO_OK(m) (ds[m] == D_REVOKING && \
    (stopped[CL(m)] || (empty(d2c[CL(m)]) && (unresp[CL(m)] || slows < MAXSLOW))))
/* check_revoke_timeouts() -> sd_unresponsive(): the client, on every slot:
 * each REVOKING member's lease taken back once the client read everything
 * sent to it (or is stopped), want_at() for each of its GPUs */
inline on_rto(m) {
    if :: !unresp[CL(m)] && !stopped[CL(m)] -> slows++ :: else -> skip fi;
    unresp[CL(m)] = 1;
    end_lease(m);
    if
    :: ds[MB(CL(m), 1 - GP(m))] == D_REVOKING && (stopped[CL(m)] || empty(d2c[CL(m)])) ->
       end_lease(MB(CL(m), 1 - GP(m)))
    :: else -> skip
    fi;
    sg = 3
}
/* ROOM: holder h's restore does not fit; v, the other member of its GPU,
 * neither holds nor has an EVICT out and has memory there: EVICT */
#define ROOM_OK(h) (ds[h] == D_HELD && wbusy[h] && wph[h] == 0 && auth[h] == HOST && !FITS(h) && \
    wq[h]?[JGRANT, eval(dlid[h]), eval(cgen[CL(h)])] && \
    ds[OTHER(h)] >= D_IDLE && ds[OTHER(h)] <= D_WAITING && dv[OTHER(h)] && !evsent[OTHER(h)])
#define GONE(x) (!recd[x] || ((!alive[CL(x)] || stopped[CL(x)]) && empty(c2d[CL(x)])))
#define GRACE_OK(g) (restoring[g] && GONE(MB(0, g)) && GONE(MB(1, g)))

active proctype daemon()
{
    mtype t;
    byte i, s, l;
end:
    do
    :: atomic { nempty(c2d[0]) -> on_msg(0); decide() }
    :: atomic { nempty(c2d[1]) -> on_msg(1); decide() }
    :: atomic { eof[0] && empty(c2d[0]) -> on_eof(0); decide() }
    :: atomic { eof[1] && empty(c2d[1]) -> on_eof(1); decide() }
#if defined(AS_IS_NO_GANG) || defined(QOK_DAEMON)
    :: atomic {
        if
        :: QUANTUM_OK(0) -> i = 0
        :: QUANTUM_OK(1) -> i = 1
        :: QUANTUM_OK(2) -> i = 2
        :: QUANTUM_OK(3) -> i = 3
        fi;
        qexp = i; sg = 1 << GP(i); decide(); qexp = NONE; i = 0 }
#endif
    :: atomic {
        if
        :: RTO_OK(0) -> i = 0
        :: RTO_OK(1) -> i = 1
        :: RTO_OK(2) -> i = 2
        :: RTO_OK(3) -> i = 3
        fi;
        on_rto(i); decide(); i = 0 }
    :: atomic {
        if
        :: ROOM_OK(0) -> i = 0
        :: ROOM_OK(1) -> i = 1
        :: ROOM_OK(2) -> i = 2
        :: ROOM_OK(3) -> i = 3
        fi;
        i = OTHER(i); evsent[i] = 1; dsend(CL(i), EVICT, DSLOT(i), 0); i = 0 }
    :: atomic {
        if
        :: GRACE_OK(0) -> i = 0
        :: GRACE_OK(1) -> i = 1
        fi;
        restoring[i] = 0; recd[MB(0, i)] = 0; recd[MB(1, i)] = 0;
        recrv[MB(0, i)] = 0; recrv[MB(1, i)] = 0;
        sg = 1 << i; decide(); i = 0 }
    od
}

#ifndef AS_IS_NO_GANG
/* the slice timer of member m (the daemon's want_at(slice_ns + quantum)):
 * a process of its own, so that weak fairness makes each slice end that
 * stays possible happen (a quantum is finite), not just some daemon step */
proctype clock(byte m)
{
end:
    do
    :: atomic { SLEND_OK(m) ->
                sl[m] = 0; SLWITH(m);
                qexp = m; sg = 1 << GP(m); decide(); qexp = NONE;
                SLWITHEND(m);
                /* gang_slice_end(): revoked, m's client's slice on the
                 * other GPU ends with it (that GPU decides now) */
                if
#ifndef NO_GANG_END
                :: ds[m] != D_HELD && ds[PEER(m)] == D_HELD && sl[PEER(m)] ->
                   sl[PEER(m)] = 0;
                   qexp = PEER(m); sg = 1 << GP(PEER(m)); decide(); qexp = NONE
#endif
                :: else -> skip
                fi }
    /* a waiter that came after the slice ended: the decision its ACQUIRE
     * makes (gpu_schedule(): now is past slice_ns + quantum). Here, not a
     * daemon step: weak fairness is per process, and the daemon busy with
     * the other GPU's messages could pass it over for ever (a model
     * artefact, found as a cycle with this GPU's slice over and its waiter
     * never served) */
#ifndef QOK_DAEMON
    :: atomic { QUANTUM_OK(m) ->
                qexp = m; sg = 1 << GP(m); decide(); qexp = NONE }
#endif
    od
}
#endif

/* ---- client c: one I/O thread, one worker per device, application threads -- */
#define GRANTQ(m, l) (wq[m]??[JGRANT, eval(l), 0] || wq[m]??[JGRANT, eval(l), 1])
#define REVQ(m, l) (wq[m]??[JREVOKE, eval(l), 0] || wq[m]??[JREVOKE, eval(l), 1] || \
                    wq[m]??[JREVOKE, eval(l + LMOD), 0] || wq[m]??[JREVOKE, eval(l + LMOD), 1])
#define ATT(m) if \
        :: cst[m] == C_HELD -> mslot = SLOTOF(CL(m), GP(m)); c2d[CL(m)]!ATT_HELD, mslot, clid[m]; mslot = 0 \
        :: cst[m] != C_HELD && (cst[m] == C_WAITING || want[m]) -> \
           mslot = SLOTOF(CL(m), GP(m)); c2d[CL(m)]!ATT_WAIT, mslot, 0; mslot = 0; \
           if :: cst[m] == C_IDLE -> cst[m] = C_WAITING :: else -> skip fi; \
           acq_sent[m] = 1 \
        :: else -> mslot = SLOTOF(CL(m), GP(m)); c2d[CL(m)]!ATT_IDLE, mslot, 0; mslot = 0 \
        fi

proctype io(byte c)
{
    mtype t;
    byte s, l, m;
end:
    do
    /* one I/O thread reads every slot's messages (lease.c dev_of_slot) */
    :: atomic {
        /* (the code drops a job beyond CS_JOBQ; the model's queues are
         * shorter, and only an unresponsive client granted and taken back
         * again and again fills one: the thread then waits, as lease.pml's) */
        RUN(c) && conn[c] && nempty(d2c[c]) && nfull(wq[MB(c, 0)]) && nfull(wq[MB(c, 1)]) ->
        d2c[c]?t, s, l;
        m = MB(c, GPUOF(c, s));
        if
        :: t == GRANT -> wq[m]!JGRANT, l, cgen[c]
        :: t == EVICT -> wq[m]!JEVICT, 0, cgen[c]
        :: t == REVOKE ->                     /* on_revoke(): this device's gate only */
           if
           :: cst[m] == C_HELD && clid[m] == l % LMOD ->
              cst[m] = C_REVOKING; gate[m] = 0;
              wq[m]!JREVOKE, l, cgen[c]
           :: cst[m] != C_HELD || clid[m] != l % LMOD ->
              if
              :: GRANTQ(m, l % LMOD) -> wq[m]!JREVOKE, l, cgen[c]
              :: else -> skip
              fi
           fi
        fi;
        t = 0; s = 0; l = 0; m = 0
       }
    /* reconnect: an ATTACH per device (handshake()), gates as they are */
    :: atomic {
        RUN(c) && !conn[c] ->
        conn[c] = 1; cgen[c] = 1 - cgen[c];
        acq_sent[MB(c, 0)] = 0; acq_sent[MB(c, 1)] = 0;
        if :: c == 0 || ON(MB(1, 0)) -> ATT(MB(c, 0)) :: else -> skip fi;
        ATT(MB(c, 1))
       }
    od
}

/* one device's worker (worker_main; its own thread per device) */
proctype worker(byte m)
{
    mtype j;
    byte l;
    bit g;
end:
    do
    :: atomic { RUN(CL(m)) && !wbusy[m] && nempty(wq[m]) -> wq[m]?<j, l, g>; wbusy[m] = 1; wph[m] = 0 }
    /* job_grant(): restore (retried while it does not fit), then granted() */
    :: atomic { RUN(CL(m)) && wbusy[m] && j == JGRANT && wph[m] == 0 && auth[m] == HOST && FITS(m) ->
                dv[m] = 1; wph[m] = 1 }
    :: atomic { RUN(CL(m)) && wbusy[m] && j == JGRANT && wph[m] == 0 && auth[m] == HOST && !FITS(m) &&
                (g != cgen[CL(m)] || REVQ(m, l)) ->
                wq[m]?_, _, _; wbusy[m] = 0; j = 0; l = 0; g = 0 }
    :: atomic { RUN(CL(m)) && wbusy[m] && j == JGRANT && wph[m] == 1 ->
                auth[m] = DEV; hv[m] = 0; wph[m] = 2 }
    :: atomic { RUN(CL(m)) && wbusy[m] && j == JGRANT && wph[m] == 0 && auth[m] == DEV -> wph[m] = 2 }
    :: atomic { RUN(CL(m)) && wbusy[m] && j == JGRANT && wph[m] == 2 ->
                if
                :: g == cgen[CL(m)] && !REVQ(m, l) ->
                   cst[m] = C_HELD; clid[m] = l; gate[m] = 1; opened[m] = 1
                :: else -> skip
                fi;
                wq[m]?_, _, _; wbusy[m] = 0; j = 0; l = 0; g = 0 }
    /* job_evict(): refused while the gate is open */
    :: atomic { RUN(CL(m)) && wbusy[m] && j == JEVICT && wph[m] == 0 ->
                if
                :: !gate[m] && inside[m] == 0 && auth[m] == DEV -> hv[m] = 1; wph[m] = 1
                :: else -> wph[m] = 2
                fi }
    :: atomic { RUN(CL(m)) && wbusy[m] && j == JEVICT && wph[m] == 1 ->
                auth[m] = HOST; dv[m] = 0; wph[m] = 2 }
    :: atomic { RUN(CL(m)) && wbusy[m] && j == JEVICT && wph[m] == 2 ->
                evsent[m] = 0;
                wq[m]?_, _, _; wbusy[m] = 0; j = 0; l = 0; g = 0 }
    /* job_revoke(): close (if the I/O thread did not), wait until no thread
     * is inside this device's gate (cs_dev_wait_inside_zero: a coupled call
     * from the other device counts here too), drain, swap out what the
     * REVOKE asks, RELEASE */
    :: atomic { RUN(CL(m)) && wbusy[m] && j == JREVOKE && wph[m] == 0 ->
                if
                :: cst[m] == C_HELD && clid[m] == l % LMOD -> cst[m] = C_REVOKING; gate[m] = 0
                :: else -> skip
                fi;
                wph[m] = 5 }
    :: atomic { RUN(CL(m)) && wbusy[m] && j == JREVOKE && wph[m] == 5 && inside[m] == 0 ->
                wph[m] = (l >= LMOD && auth[m] == DEV -> 1 : 3) }
    :: atomic { RUN(CL(m)) && wbusy[m] && j == JREVOKE && wph[m] == 1 -> hv[m] = 1; wph[m] = 2 }
    :: atomic { RUN(CL(m)) && wbusy[m] && j == JREVOKE && wph[m] == 2 ->
                auth[m] = HOST; dv[m] = 0; wph[m] = 3 }
    :: atomic { RUN(CL(m)) && wbusy[m] && j == JREVOKE && wph[m] == 3 ->
                if
                :: g == cgen[CL(m)] && conn[CL(m)] ->
#ifdef AS_IS_RELEASE_FIRST
                   csend(CL(m), RELEASE, SLOTOF(CL(m), GP(m)), l % LMOD); acq_sent[m] = 0
#else
                   /* cs_lease_ask_again_locked(): ACQUIRE first if wanted */
                   acq_sent[m] = 0;
                   if
                   :: want[m] > 0 -> csend(CL(m), ACQUIRE, SLOTOF(CL(m), GP(m)), 0); acq_sent[m] = 1
                   :: else -> skip
                   fi;
                   csend(CL(m), RELEASE, SLOTOF(CL(m), GP(m)), l % LMOD)
#endif
                :: else -> skip
                fi;
                cst[m] = C_IDLE;
                if
                :: want[m] > 0 -> cst[m] = C_WAITING;
                   if
                   :: conn[CL(m)] && !acq_sent[m] ->
                      csend(CL(m), ACQUIRE, SLOTOF(CL(m), GP(m)), 0); acq_sent[m] = 1
                   :: else -> skip
                   fi
                :: else -> skip
                fi;
                wq[m]?_, _, _; wbusy[m] = 0; j = 0; l = 0; g = 0 }
    od
}

/* request_locked(): a wanted lease whose gate is closed is asked for, once */
inline request(m) {
    if
    :: !gate[m] && (cst[m] == C_IDLE || (cst[m] == C_WAITING && !acq_sent[m] && conn[CL(m)])) ->
       cst[m] = C_WAITING;
       if
       :: conn[CL(m)] -> csend(CL(m), ACQUIRE, SLOTOF(CL(m), GP(m)), 0); acq_sent[m] = 1
       :: else -> skip
       fi
    :: else -> skip
    fi
}
#define NEEDREQ(m) (!gate[m] && want[m] > 0 && \
                    (cst[m] == C_IDLE || (cst[m] == C_WAITING && !acq_sent[m] && conn[CL(m)])))

/* application thread t on device d, coupled to device o (NONE: not
 * coupled). enter_coupled(): every gate open at once, else none passed
 * (leave_all) and the closed one waited for, both leases wanted for the
 * whole wait (pair_all: want on both, each requested). */
proctype app(byte t; byte d; byte o)
{
end:
    do
    :: atomic { RUN(CL(d)) && aph[t] == T_IDLE ->
                aph[t] = T_WAIT; want[d]++; request(d);
                if :: o != NONE -> want[o]++; request(o) :: else -> skip fi }
    /* the ACQUIRE a reconnect or a release left to send (request_locked) */
    :: atomic { RUN(CL(d)) && aph[t] == T_WAIT && (NEEDREQ(d) || (o != NONE && NEEDREQ(o))) ->
                request(d); if :: o != NONE -> request(o) :: else -> skip fi }
#ifdef BREAK_NO_COUPLE
    /* peer access does not couple: the call passes its own gate only, and
     * its work reaches o's memory anyway */
    :: atomic { RUN(CL(d)) && aph[t] == T_WAIT && gate[d] ->
                inside[d]++; want[d]--; aph[t] = T_IN;
                if :: o != NONE -> want[o]--; touch[o] = 1 :: else -> skip fi }
#else
    :: atomic { RUN(CL(d)) && aph[t] == T_WAIT && gate[d] && (o == NONE || gate[o]) ->
                inside[d]++; want[d]--; aph[t] = T_IN;
                if :: o != NONE -> inside[o]++; want[o]-- :: else -> skip fi }
#endif
#ifdef BREAK_HOLD_WAIT
    /* waits for the closed coupled gate while inside its own open one */
    :: atomic { RUN(CL(d)) && aph[t] == T_WAIT && o != NONE && gate[d] && !gate[o] ->
                inside[d]++; aph[t] = T_HALF }
    :: atomic { RUN(CL(d)) && aph[t] == T_HALF && gate[o] ->
                want[d]--; inside[o]++; want[o]--; aph[t] = T_IN }
#endif
    /* the call returns: leaves its gates (cs_gate_exit, exit_coupled) */
    :: atomic { RUN(CL(d)) && aph[t] == T_IN ->
                inside[d]--; aph[t] = T_IDLE;
                if :: o != NONE && !touch[o] -> inside[o]-- :: else -> skip fi;
                if :: o != NONE -> touch[o] = 0 :: else -> skip fi }
    od
}

/* ---- faults ---------------------------------------------------------------- */
inline killdev(m) {
    gate[m] = 0; dv[m] = 0; hv[m] = 0; want[m] = 0; inside[m] = 0; touch[m] = 0;
    do :: wq[m]?_, _, _ :: empty(wq[m]) -> break od;
    wbusy[m] = 0; wph[m] = 0
}
inline kill(c) {
    kills++;
    alive[c] = 0;
    killdev(MB(c, 0)); killdev(MB(c, 1));
    if :: conn[c] -> eof[c] = 1; conn[c] = 0 :: else -> skip fi;
    do :: d2c[c]?_, _, _ :: empty(d2c[c]) -> break od
}
inline forget(m) {
    recd[m] = HOLD(m); recrv[m] = (ds[m] == D_REVOKING);
    ds[m] = D_NONE; dwant[m] = 0; resumed[m] = 0; evsent[m] = 0 SLCLR(m)
}
active proctype faults()
{
    byte i;
end:
    do
    :: atomic { kills < MAXKILL -> kills = MAXKILL }
    :: atomic { restarts < MAXRESTART -> restarts = MAXRESTART }
    :: atomic { stops < MAXSTOP -> stops = MAXSTOP }
    :: atomic { slows < MAXSLOW -> slows = MAXSLOW }
    /* daemon restart: every connection closes; the state file names each
     * GPU's holders (state.c, one list per GPU) */
    :: atomic {
        restarts < MAXRESTART ->
        restarts++;
        forget(0); forget(1); forget(2); forget(3);
        i = 0;
        do
        :: i < 2 ->     /* i: client i's connection, and GPU i's state */
           unresp[i] = 0; conn[i] = 0; eof[i] = 0;
           do :: c2d[i]?_, _, _ :: empty(c2d[i]) -> break od;
           do :: d2c[i]?_, _, _ :: empty(d2c[i]) -> break od;
           restoring[i] = (recd[MB(0, i)] || recd[MB(1, i)]);
           lastgrant[i] = NONE;
           i++
        :: else -> break
        od;
        i = 0
       }
    :: atomic { kills < MAXKILL && alive[0] -> kill(0) }
    :: atomic { kills < MAXKILL && alive[1] -> kill(1) }
    :: atomic { stops < MAXSTOP && alive[STOPPABLE] && !stopped[STOPPABLE] ->
                stops++; stopped[STOPPABLE] = 1 }
    od
}

init {
    atomic {
        alive[0] = 1; alive[1] = 1;
        auth[0] = HOST; hv[0] = 1; dprev[0] = NONE;
        auth[1] = HOST; hv[1] = 1; dprev[1] = NONE;
        auth[2] = HOST; hv[2] = 1; dprev[2] = NONE;
        auth[3] = HOST; hv[3] = 1; dprev[3] = NONE;
        run io(0); run io(1);
        run worker(MB(0, 0)); run worker(MB(0, 1)); run worker(MB(1, 1));
#ifdef BBOTH
        run worker(MB(1, 0));
#endif
#ifndef AS_IS_NO_GANG
        run clock(MB(0, 0)); run clock(MB(0, 1)); run clock(MB(1, 1));
#ifdef BBOTH
        run clock(MB(1, 0));
#endif
#endif
        run app(0, TDEV(0), TCPL(0));
        run app(1, TDEV(1), TCPL(1));
#if NT > 2
        run app(2, TDEV(2), TCPL(2));
#endif
    }
}

/* ---- liveness (without -DSAFETY, with -a -f) ------------------------------
 * every running thread that waits at its gates gets them all open at once
 * (then its call passes): A's coupled thread (both GPUs) and B's. */
#ifdef NOCOUPLE
#define GATESA gate[0]                  /* A's thread on device 0 alone */
#else
#define GATESA (gate[0] && gate[1])     /* A's thread: both devices */
#endif
#ifdef BBOTH
#define GATESB (gate[3] && gate[2])     /* B's thread: GPU 1, coupled to GPU 0 */
#else
#define GATESB gate[3]
#endif
#define LIVEA (!RUN(0) || aph[0] == T_IDLE || aph[0] == T_IN || GATESA)
#define LIVEB (!RUN(1) || aph[1] == T_IDLE || aph[1] == T_IN || GATESB)
ltl liveab { ([] <> LIVEA) && ([] <> LIVEB) }
/* every revoke is answered (its RELEASE read, or the lease taken back), on
 * each GPU: a revoke's drain never waits for a thread that waits for
 * another GPU's gate (gate.c enter_coupled(): "whichever is closed is
 * waited for with none of them held") */
#define REVDONE(m) ((ds[m] == D_REVOKING) -> <> (ds[m] != D_REVOKING))
ltl rev { [] (REVDONE(0) && REVDONE(1) && REVDONE(2) && REVDONE(3)) }
