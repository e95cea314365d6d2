#!/usr/bin/env bash
# model/check.sh [PROPERTY...]: check the Promela model of the lease
# protocol (lease.pml) with Spin, exhaustively (the named properties, or
# all). Prints "PASS <property>" / "FAIL <property>" per
# property and, last, "N passed, M failed"; exits non-zero if any failed or
# if spin/gcc are missing. Works from any cwd; writes only under a mktemp dir.
# docs/model.md explains the properties and the configurations.
# Environment: MODEL_JOBS (runs at a time), CHECK_LIMIT_S (CPU seconds per run),
# MODEL_DEFINES (added to every run's spin defines, e.g. a BREAK_* switch of
# docs/model.md's failure table), MODEL_RECHECK=1 (search even when
# model/verified records this very check as passed), MODEL_RECORD=FILE
# (on a full pass, append the check's line for model/verified to FILE:
# `make model-verify`).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LIMIT="${CHECK_LIMIT_S:-110}"     # CPU seconds per verification run

if ! command -v spin >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        apt-get install -y spin >/dev/null 2>&1 ||
            { apt-get update >/dev/null 2>&1 && apt-get install -y spin >/dev/null 2>&1; } || true
    fi
fi
if ! command -v spin >/dev/null 2>&1; then
    echo "spin is not installed: apt-get install -y spin"
    echo "0 passed, 1 failed"
    exit 1
fi
if ! command -v gcc >/dev/null 2>&1; then
    echo "gcc is not installed: apt-get install -y gcc"
    echo "0 passed, 1 failed"
    exit 1
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/cushare-model.XXXXXX")"
trap 'rm -rf "$work"' EXIT
cp "$here/lease.pml" "$here/lease2.pml" "$work/"
cd "$work"

# run_one TAG "SPIN_DEFINES" "GCC_FLAGS" "PAN_FLAGS": 0 if the run finished
# with "errors: 0" and none of the failure texts; its output in TAG.out
run_one() {
    local tag="$1" defs="$2" cflags="$3" pflags="$4" d="$work/$1"
    mkdir -p "$d"
    cp "$work/lease.pml" "$work/lease2.pml" "$d/"
    (
        cd "$d"
        # shellcheck disable=SC2086
        nice -n 19 spin $defs ${MODEL_DEFINES:-} -a lease.pml >spin.out 2>&1 || { cat spin.out; exit 1; }
        # shellcheck disable=SC2086
        # MEMLIM (MiB): a search that grows past it stops and fails rather
        # than take the machine's RAM (the largest run needs ~1.3 GiB).
        nice -n 19 gcc -O2 -DMEMLIM="${MODEL_MEMLIM_MB:-4096}" $cflags -o pan pan.c >gcc.out 2>&1 || { cat gcc.out; exit 1; }
        # The limit is CPU seconds (SIGXCPU ends pan), not wall time: a
        # search on a busy machine waits for a core without failing.
        # shellcheck disable=SC2086
        (ulimit -t "$LIMIT" && exec nice -n 19 ./pan $pflags) 2>&1 || echo "error: pan ended (status $?; a CPU limit of ${LIMIT} s?)"
    ) >"$work/$tag.out" 2>&1
    local out="$work/$tag.out"
    if grep -qE "assertion violated|pan:[0-9]+: |acceptance cycle \(|invalid end state \(|max search depth too small|Search not completed|MEMLIM|out of memory|error: " "$out"; then
        return 1
    fi
    grep -q "errors: 0" "$out"
}

pass=0
fail=0
ONLY=" $* " # properties named on the command line; none: all of them
# Verification runs are independent and CPU-bound: up to MODEL_JOBS of them
# (default: the machine's cores, at most 4) run at once, each under the same
# per-run limit; the rest of make test waits for this test, so nothing
# timing-sensitive runs beside them (not even at SCHED_IDLE priority: two
# searches beside the suites slowed the tests 1.4-1.8x on CI's 2 cores and
# failed their timing bounds).
JOBS="${MODEL_JOBS:-$(nproc 2>/dev/null || echo 1)}"
[ "$JOBS" -gt 4 ] && JOBS=4
declare -A RUNS=()  # run tag -> "DEFINES|GCC|PAN"
PROPS=()            # property names, in order
declare -A SPECS=() # property -> its run tags, separated by spaces
declare -A COST=()  # run tag -> its seconds on CI (two at a time), to start longest first
# run TAG "DEFINES|GCC|PAN" SECONDS: one search; a safety search checks every
# invariant of the model at once (one assertion each: Spin's line names the
# one that failed), so several properties share it and it runs once.
# SECONDS is what it took in `make test` (CI's 2 cores, two at a time): the
# runs start longest first, so that no long search starts last beside an
# idle core (in declaration order each script lost 10-17 s that way).
run() {
    RUNS[$1]="$2"
    COST[$1]="${3:-0}"
}
# prop NAME TAG...: the property passes if every one of its runs does
prop() {
    local name="$1"
    shift
    [ "$ONLY" = "  " ] || [[ "$ONLY" == *" $name "* ]] || return 0
    PROPS+=("$name")
    SPECS[$name]="$*"
}

# Runs every run of the selected properties once, JOBS at a time, longest
# first (COST); each leaves TAG.rc (0 passed).
run_all() {
    local name tag defs cflags pflags
    declare -A seen=()
    local order=()
    for name in "${PROPS[@]}"; do
        for tag in ${SPECS[$name]}; do
            [ -z "${seen[$tag]:-}" ] || continue
            seen[$tag]=1
            order+=("${COST[$tag]} $tag")
        done
    done
    for tag in $(printf '%s\n' "${order[@]}" | sort -k1,1nr -s | cut -d' ' -f2); do
        while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
        IFS='|' read -r defs cflags pflags <<<"${RUNS[$tag]}"
        (
            rc=0
            t0=$(date +%s)
            run_one "$tag" "$defs" "$cflags" "$pflags" || rc=1
            echo "$rc $(($(date +%s) - t0))" >"$work/$tag.rc"
        ) &
    done
    wait
}

# PASS/FAIL per property from its runs' results, with what failed and each
# run's time (on stderr: make test keeps it in the test's log).
report() {
    local name tag defs cflags pflags ok rc t
    for name in "${PROPS[@]}"; do
        ok=1
        for tag in ${SPECS[$name]}; do
            IFS='|' read -r defs cflags pflags <<<"${RUNS[$tag]}"
            read -r rc t <"$work/$tag.rc" || rc=1
            if [ "$rc" != 0 ]; then
                ok=0
                echo "  $name: run $tag ($defs) failed:" >&2
                grep -E "pan:[0-9]+: |assertion violated|errors:|max search depth|not completed|error: " \
                    "$work/$tag.out" | head -5 |
                    sed -E 's/^(.{160}).*(\(at depth [0-9]+\))$/\1 ... \2/; s/^/    /' >&2 || true
            fi
        done
        if [ "$ok" = 1 ]; then
            echo "PASS $name"
            pass=$((pass + 1))
        else
            echo "FAIL $name"
            fail=$((fail + 1))
        fi
    done
    for tag in "${!RUNS[@]}"; do
        [ -f "$work/$tag.rc" ] || continue
        read -r rc t <"$work/$tag.rc" || true
        printf '  run %-12s %4s s  %s\n' "$tag" "$t" \
            "$(grep -oE '[0-9]+ states, stored' "$work/$tag.out" | head -1)" >&2
    done
}

# No -DCOLLAPSE: it saved a third of the memory (x-safe1 1.0 GiB instead of
# 1.3) and cost 22% of the time of a safety search, 34% of a liveness one.
SAFE="-DSAFETY -DNOCLAIM"
LIVE="-DNFAIR=4"
LIVE3="-DNFAIR=5" # three clients: more processes for the fairness algorithm
# liveness runs leave the invariants to the safety runs
LN="-DNOMON"
PM="-m300000"
# fault budgets: one kill -9, one daemon restart, one client that stops
# answering (and, the model's default, one drain longer than the revoke
# timeout: MAXSLOW=1)
F="-DMAXKILL=1 -DMAXRESTART=1 -DMAXSTOP=1"
KR="-DMAXKILL=1 -DMAXRESTART=1"
NOF="-DMAXKILL=0 -DMAXRESTART=0"
# classes (C0, C1, C2; 0 high, 1 normal, 2 low; default high, normal, normal)
NL="-DC0=1 -DC1=2"
NN="-DC0=1 -DC1=1"
start=$(date +%s)

# ---- exclusive mode (MODE=0), high + normal: model/check_safety.sh, check_liveness.sh
# Every invariant, with memory short (CAP=1: swaps on every switch) and
# memory ample (CAP=2), the high client's wait bound 2.
run x-safe1 "-DCAP=1 $F|$SAFE|$PM" 26
run x-safe2 "-DCAP=2 $F|$SAFE|$PM" 13
# 1. exclusivity: at most one running process has its gate open
prop exclusivity x-safe1 x-safe2
# 2. no data loss (one authoritative copy that holds the data; gate open only
#    over resident, authoritative memory; resident <= CAP)
prop no-data-loss x-safe1 x-safe2
# 3a. no deadlock: no protocol error between correct peers; when nothing can
#     move, nobody waits at a closed gate (DEADOK)
prop no-deadlock x-safe1 x-safe2
# 3b. a high client waits at most HBOUND (3) daemon steps (the revoked
#     holder's ACQUIRE and RELEASE are two; 2 before finding 8's fix)
prop high-wait-bound x-safe1 x-safe2
# 3c. under weak fairness every client that keeps wanting the GPU gets it
#     (kill -9 of the other client, a daemon restart; memory short)
run x-live0 "$LN -DCAP=1 $KR|$LIVE|-a -f -N live0 $PM" 47
run x-live1 "$LN -DCAP=1 $KR|$LIVE|-a -f -N live1 $PM" 60
prop liveness-high x-live0
prop liveness-normal x-live1
# 4. a client that never answers (stopped for good) does not keep the other
#    from the GPU: revoke_timeout + force_release (memory must fit without it)
run x-silent0 "$LN -DCAP=2 $F -DSTOPPABLE=1|$LIVE|-a -f -N live0 $PM" 56
run x-silent1 "$LN -DCAP=2 $F -DSTOPPABLE=0|$LIVE|-a -f -N live1 $PM" 66
prop silent-client-no-block x-silent0 x-silent1

# ---- mixed (MODE=2, the daemon's default) and shared (MODE=1) mode:
# model/check_mixed.sh. With two clients a pair either co-runs (sides
# differ, memory fits) or is exclusive mode (same side, or memory short:
# the same state graph as x-safe1/x-safe2); three clients (H, N, N) mix
# both: the high job beside whichever normal one holds.
run m-side "-DMODE=2 $NL -DCAP=2 $F|$SAFE|$PM" 13            # normal + low: one side
run m-corun "-DMODE=2 -DCAP=2 -DHBOUND=1 $F|$SAFE|$PM" 8    # high + normal side by side
run m-three "-DMODE=2 -DN=3 -DCAP=2 -DHBOUND=0 -DMAXKILL=1 -DMAXRESTART=0|$SAFE|$PM" 25
run s-three "-DMODE=1 -DN=3 -DCAP=2 -DHBOUND=2 -DMAXKILL=1 -DMAXSTOP=1 -DMAXRESTART=0|$SAFE|$PM" 22
# 1m. mixed mode: at most one running process per class side has its gate open
prop mixed-exclusivity m-side m-three
# 1b. shared/mixed: the holders' footprints fit in the capacity, so do the
#     open gates' (each resident, NOLOSS), resident <= CAP
prop memory-fits m-corun m-three s-three
# 2, 3a in mixed and shared mode (kill -9 of another client, a restart)
prop mixed-no-data-loss m-side m-corun m-three s-three
prop mixed-no-deadlock m-side m-corun m-three s-three
# 3b. the high client's wait in mixed mode: 1 step when the memory fits (a
#     restart's grace), 0 with three clients (granted in the step that reads
#     its request); when it does not fit, exclusive mode's 2 (the same state
#     graph as x-safe1). Shared mode, three clients: 1 (the two normal ones
#     may fill the GPU: one is preempted). Each bound less one fails.
prop mixed-high-wait-bound m-corun m-three s-three
# 3c. liveness in every class arrangement the policy promises it for
#     (class_share_max_pct < 100): normal + low on one side (share turns),
#     two of one class (vtime), high beside two normal (mixed, shared)
run m-live-low "$LN -DMODE=2 $NL -DCAP=2 $KR|$LIVE|-a -f -N live1 $PM" 22
run m-live-same "$LN -DMODE=2 $NN -DCAP=1 $KR|$LIVE|-a -f -N live1 $PM" 45
run m-live-three "$LN -DMODE=2 -DN=3 -DCAP=2 $NOF|$LIVE3|-a -f -N livel $PM" 47
run s-live-three "$LN -DMODE=1 -DN=3 -DCAP=2 $NOF|$LIVE3|-a -f -N livel $PM" 15
prop mixed-liveness m-live-low m-live-same m-live-three s-live-three
# 4m. a silent normal client beside a high one (mixed, memory that fits
#     without it): the other normal one, on its side, is not kept from the
#     GPU (the high one fits beside it whatever it does)
run m-silent "$LN -DMODE=2 -DN=3 -DCAP=3 $NOF -DMAXSTOP=1 -DSTOPPABLE=1|$LIVE3|-a -f -N livel $PM" 35
prop mixed-silent-client-no-block m-silent

# ---- prefetch (PF): model/check_prefetch.sh. Exclusive mode, high + normal,
# the normal client of two 1-unit segments (footprint 2) on CAP=2, so that
# prefetches, evictions and swap-outs can be partial; the daemon plans from
# its estimate (USAGE, RELEASE, EVICTED, RESTORED, PREFETCHED).
PFD="-DPF -DCAP=2"
# every invariant and prefetch-room, with a kill, a stop and a slow drain,
# and with a restart (finding 6, fixed: docs/model.md)
run p-safe "$PFD -DMAXKILL=1 -DMAXRESTART=0 -DMAXSTOP=1|$SAFE|$PM" 23
run p-restart "$PFD -DMAXKILL=1 -DMAXRESTART=1 -DMAXSTOP=0 -DMAXSLOW=0|$SAFE|$PM" 26
# 1p, 2p, 3ap: exclusivity, no data loss (both segments), no deadlock
prop prefetch-exclusivity p-safe p-restart
prop prefetch-no-data-loss p-safe p-restart
prop prefetch-no-deadlock p-safe p-restart
# the same in mixed mode, two clients of one class side: the next holder's
# memory is prefetched while the other holds (sd_mem_plan's same-side rule)
run p-mixed "$PFD -DMODE=2 $NN -DMAXKILL=1 -DMAXRESTART=0 -DMAXSTOP=1|$SAFE|$PM" 23
prop prefetch-mixed-no-data-loss p-mixed
prop prefetch-mixed-no-deadlock p-mixed
# 5. a prefetch never takes the room a holder's restore needs (PFROOM)
prop prefetch-room p-safe p-restart p-mixed
# 3cp. no room/prefetch ping-pong keeps the two-segment client from the GPU
run p-live1 "$LN $PFD -DMAXKILL=1 -DMAXRESTART=0|$LIVE|-a -f -N live1 $PM" 37
prop prefetch-liveness p-live1

# ---- two GPUs (NGPU=2, lease2.pml): model/check_multigpu.sh. Exclusive
# mode, two clients of one class, one 1-unit segment per (client, GPU):
# A on both GPUs, its thread on GPU 0 coupled to GPU 1 (peer access), B on
# GPU 1 (BBOTH: on both, coupled the other way: each may hold one GPU and
# wait for the other). -O0: these verifiers take 25 s to compile with -O2,
# more than their searches.
MG="-DNGPU=2"
MGS="$SAFE -O0"
MGL="$LIVE3 -O0" # the slice timers (proctype clock) are processes too
run g-safe1 "$MG -DCAP0=1 -DCAP1=1 -DMAXKILL=1 -DMAXRESTART=1 -DMAXSLOW=0|$MGS|$PM" 12
run g-safe2 "$MG -DCAP0=1 -DCAP1=2 -DMAXKILL=1 -DMAXRESTART=0 -DMAXSTOP=1 -DMAXSLOW=1|$MGS|$PM" 8
# (g-cross: 2.3 M states, a DFS 1 M steps deep since the gang rules)
run g-cross "$MG -DBBOTH -DCAP0=1 -DCAP1=1 $NOF -DMAXSLOW=0|$MGS|-m3000000" 20
# 1g. on each GPU at most one running process has its gate open
prop multigpu-exclusivity g-safe1 g-safe2 g-cross
# 2g. no data loss on each GPU; a coupled call runs only over both GPUs'
#     resident memory
prop multigpu-no-data-loss g-safe1 g-safe2 g-cross
# 3g. no deadlock, no cross-GPU hold-and-wait (DEADOK at timeout)
prop multigpu-no-deadlock g-safe1 g-safe2 g-cross
# 3cg. under weak fairness A's coupled thread gets both gates open at once,
#      and B its gate (kill -9 of either); uncoupled: A's two threads
run g-live "$LN $MG -DCAP0=1 -DCAP1=1 -DMAXKILL=1 -DMAXRESTART=0 -DMAXSLOW=0|$MGL|-a -f -N liveab $PM" 6
run g-live-nc "$LN $MG -DNOCOUPLE -DCAP0=1 -DCAP1=1 -DMAXKILL=1 -DMAXRESTART=0 -DMAXSLOW=0|$MGL|-a -f -N liveab $PM" 24
prop multigpu-liveness g-live g-live-nc
# (A and B coupled crossed, -DBBOTH, liveab: passes since finding 8's fix,
#  6.2 M states, 7.6 min of CPU at -O2 with -DCOLLAPSE: too long for this
#  script; docs/model.md "Runs (two GPUs)" has the command)
# 5g. every revoke is answered, on each GPU, with both clients coupled
#     across both GPUs (a revoke's drain waits for no other gate)
#     Here with the daemon's rules for clients on several GPUs left out
#     (-DAS_IS_NO_GANG: the property is the hook's, a drain that waits for
#     no other gate; the daemon only orders the grants): 0.35 M states,
#     33 s. With them, 4.6 M states, 3 min of CPU at -O2: by hand
#     (docs/model.md "Runs (two GPUs)").
run g-rev "$LN $MG -DBBOTH -DAS_IS_NO_GANG -DCAP0=1 -DCAP1=1 $NOF -DMAXSLOW=0|$MGL|-a -f -N rev $PM" 40
prop multigpu-revoke-completes g-rev

# ---- checks verified before (model/verified) ----
# A search's verdict is a function of its inputs alone: the model's files,
# this script (the runs' defines and flags, the limits), Spin and the C
# compiler that builds the verifier. model/verified records, per set of
# properties, the hash of all of them for a check that passed in full
# (`make model-verify` writes it). When this check's hash is there, the
# same search would give the same verdict: it is not run again (8-9 minutes
# of CI's 2 cores, a third of `make test`). Any change to the model, this
# script, Spin or gcc changes the hash, and the check runs in full;
# MODEL_DEFINES (a mutation) and MODEL_RECHECK=1 always run it.
VERIFIED="$here/verified"
check_key() {
    {
        (cd "$here" && sha256sum lease.pml lease2.pml check.sh)
        spin -V 2>&1 | head -1
        echo "gcc $(gcc -dumpfullversion 2>&1) $(gcc -dumpmachine 2>&1)"
        echo "limit=$LIMIT memlim=${MODEL_MEMLIM_MB:-4096} properties=${PROPS[*]}"
    } | sha256sum | cut -d' ' -f1
}
key=$(check_key)
if [ -z "${MODEL_DEFINES:-}" ] && [ "${MODEL_RECHECK:-0}" != 1 ] && [ -f "$VERIFIED" ] &&
    seen=$(grep -m1 "^$key " "$VERIFIED"); then
    for name in "${PROPS[@]}"; do
        echo "PASS $name"
    done
    echo "verified by Spin on $(echo "$seen" | cut -d' ' -f2) with this model, script, Spin and" \
        "gcc (model/verified, ${key:0:16}): not searched again (MODEL_RECHECK=1 searches)"
    echo "${#PROPS[@]} passed, 0 failed"
    exit 0
fi
[ -n "${MODEL_DEFINES:-}" ] || [ "${MODEL_RECHECK:-0}" = 1 ] ||
    echo "(model/verified has no line for this check, ${key:0:16}: the model, this script, Spin" \
        "or gcc changed; searching in full; \`make model-verify\` records it once all pass)" >&2

run_all
report
end=$(date +%s)
echo "total $((end - start)) s ($JOBS runs at a time)"
echo "$pass passed, $fail failed"
if [ "$fail" -eq 0 ] && [ -n "${MODEL_RECORD:-}" ] && [ -z "${MODEL_DEFINES:-}" ]; then
    echo "$key $(date -u +%Y-%m-%d) ${PROPS[*]}" >>"$MODEL_RECORD"
fi
[ "$fail" -eq 0 ]
