#!/usr/bin/env bash
# model/check.sh [PROPERTY...]: check the Promela model of the lease
# protocol (lease.pml) with Spin, exhaustively (the named properties, or
# all). Prints "PASS <property>" / "FAIL <property>" per
# property and, last, "N passed, M failed"; exits non-zero if any failed or
# if spin/gcc are missing. Works from any cwd; writes only under a mktemp dir.
# docs/model.md explains the properties and the configurations.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
LIMIT="${CHECK_LIMIT_S:-110}"     # seconds per verification run

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
cp "$here/lease.pml" "$work/"
cd "$work"

# run_one TAG "SPIN_DEFINES" "GCC_FLAGS" "PAN_FLAGS": 0 if the run finished
# with "errors: 0" and none of the failure texts; its output in TAG.out
run_one() {
    local tag="$1" defs="$2" cflags="$3" pflags="$4" d="$work/$1"
    mkdir -p "$d"
    cp "$work/lease.pml" "$d/"
    (
        cd "$d"
        # shellcheck disable=SC2086
        nice -n 19 spin $defs -a lease.pml >spin.out 2>&1 || { cat spin.out; exit 1; }
        # shellcheck disable=SC2086
        nice -n 19 gcc -O2 $cflags -o pan pan.c >gcc.out 2>&1 || { cat gcc.out; exit 1; }
        # shellcheck disable=SC2086
        nice -n 19 timeout "$LIMIT" ./pan $pflags 2>&1 || true
    ) >"$work/$tag.out" 2>&1
    local out="$work/$tag.out"
    if grep -qE "assertion violated|pan:[0-9]+: |acceptance cycle \(|invalid end state \(|max search depth too small|Search not completed|error: " "$out"; then
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
# timing-sensitive runs beside them.
JOBS="${MODEL_JOBS:-$(nproc 2>/dev/null || echo 1)}"
[ "$JOBS" -gt 4 ] && JOBS=4
PROPS=()            # property names, in order
declare -A SPECS=() # property -> its runs, "TAG|DEFINES|GCC|PAN" separated by newlines
# prop NAME "TAG|DEFINES|GCC|PAN" ...: the property passes if every run does
prop() {
    local name="$1"
    shift
    [ "$ONLY" = "  " ] || [[ "$ONLY" == *" $name "* ]] || return 0
    PROPS+=("$name")
    SPECS[$name]=$(printf '%s\n' "$@")
}

# Runs every declared run, JOBS at a time; each leaves TAG.rc (0 passed).
run_all() {
    local name spec tag defs cflags pflags
    for name in "${PROPS[@]}"; do
        while IFS= read -r spec; do
            [ -n "$spec" ] || continue
            while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
            IFS='|' read -r tag defs cflags pflags <<<"$spec"
            (
                rc=0
                run_one "$tag" "$defs" "$cflags" "$pflags" || rc=1
                echo "$rc $(date +%s)" >"$work/$tag.rc"
            ) &
        done <<<"${SPECS[$name]}"
    done
    wait
}

# PASS/FAIL per property from its runs' results, with what failed.
report() {
    local name spec tag defs cflags pflags ok rc t
    for name in "${PROPS[@]}"; do
        ok=1
        while IFS= read -r spec; do
            [ -n "$spec" ] || continue
            IFS='|' read -r tag defs cflags pflags <<<"$spec"
            read -r rc t <"$work/$tag.rc" || rc=1
            if [ "$rc" != 0 ]; then
                ok=0
                echo "  $name: run $tag ($defs) failed:" >&2
                grep -E "pan:[0-9]+: |assertion violated|errors:|max search depth|not completed|error: " \
                    "$work/$tag.out" | head -5 | sed 's/^/    /' >&2 || true
            fi
        done <<<"${SPECS[$name]}"
        if [ "$ok" = 1 ]; then
            echo "PASS $name"
            pass=$((pass + 1))
        else
            echo "FAIL $name"
            fail=$((fail + 1))
        fi
    done
}

SAFE="-DSAFETY -DNOCLAIM -DCOLLAPSE"
LIVE="-DNFAIR=4 -DCOLLAPSE"
# liveness runs leave the invariants to the safety runs
LN="-DNOMON"
PM="-m300000"
# fault budgets: one kill -9, one daemon restart, one client that stops answering
F="-DMAXKILL=1 -DMAXRESTART=1 -DMAXSTOP=1"
start=$(date +%s)

# 1. exclusivity: memory short (CAP=1: swaps on every switch) and memory ample (CAP=2)
prop exclusivity \
    "excl1|-DPROP_EXCL -DCAP=1 $F|$SAFE|$PM" \
    "excl2|-DPROP_EXCL -DCAP=2 $F|$SAFE|$PM"
# 2. no data loss (one authoritative copy that holds the data; gate open only
#    over resident, authoritative memory; resident <= CAP)
prop no-data-loss \
    "loss1|-DPROP_NOLOSS -DCAP=1 $F|$SAFE|$PM" \
    "loss2|-DPROP_NOLOSS -DCAP=2 $F|$SAFE|$PM"
# 3a. no deadlock: no invalid end state, no protocol error between correct peers
prop no-deadlock \
    "dead1|-DNOMON -DCAP=1 $F|$SAFE|$PM" \
    "dead2|-DNOMON -DCAP=2 $F|$SAFE|$PM"
# 3b. a high client waits at most HBOUND (2) daemon steps
prop high-wait-bound \
    "hb1|-DPROP_HBOUND -DCAP=1 $F|$SAFE|$PM" \
    "hb2|-DPROP_HBOUND -DCAP=2 $F|$SAFE|$PM"
# 3c. under weak fairness every client that keeps wanting the GPU gets it
#     (kill -9 of the other client, a daemon restart; memory short)
prop liveness-high \
    "live0|$LN -DCAP=1 -DMAXKILL=1 -DMAXRESTART=1|$LIVE|-a -f -N live0 $PM"
prop liveness-normal \
    "live1|$LN -DCAP=1 -DMAXKILL=1 -DMAXRESTART=1|$LIVE|-a -f -N live1 $PM"
# 4. a client that never answers (stopped for good) does not keep the other
#    from the GPU: revoke_timeout + force_release (memory must fit without it)
prop silent-client-no-block \
    "silent0|$LN -DCAP=2 $F -DSTOPPABLE=1|$LIVE|-a -f -N live0 $PM" \
    "silent1|$LN -DCAP=2 $F -DSTOPPABLE=0|$LIVE|-a -f -N live1 $PM"

run_all
report
end=$(date +%s)
echo "total $((end - start)) s ($JOBS runs at a time)"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
