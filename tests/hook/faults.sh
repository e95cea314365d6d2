#!/usr/bin/env bash
# tests/hook/faults.sh: the fault sweep of the hook's swap and VMM paths
# (issue 18), SQLite style. Each scenario of hook_faults (swap, vmm,
# grant-retry) first runs clean while the simulated driver counts its calls
# (FAKECUDA_FAIL_COUNT); then it runs once for every countdown N of every
# driver call the hook's segment, swap, backing, VMM and lease code makes
# (FAKECUDA_FAIL=sym:N), once more with a non-OOM error for the allocating
# calls, with a few calls failing for good from some point (sym:N:0), and
# with the restore failing three times in a row (grant-retry).
#
# Every run must end with every byte read back as written (exit 0) or with
# a clean error (exit 3: the application saw the failure, said which, freed
# everything); a hang (FAULTS_RUN_LIMIT s), a crash, wrong data (1), hook
# counters left over (4) or any other exit fails the sweep, and so does a
# sanitizer report (under ASan, LeakSanitizer's too: no leak on an error
# path). A failure the application does not see must be reported by the
# hook: a run that passes although a call that changes what the hook does
# failed (a copy, a synchronize, creating, mapping or reserving memory,
# pinning, the swap stream) must show it in the hook's debug log (a
# swap-out or restore that stopped, a room request, a placement given up,
# a pin refused, a non-zero status). Calls whose failure the hook ignores
# by design (unmapping and releasing on the way out, popping a context,
# the drain's synchronize) or answers with a safe default (device queries)
# must only not break anything.
#
# A restore that can never succeed is waited for by design (lease.c: the
# gate must not open over memory that is not there; an error is logged
# every 5 s), so the "fails for good" runs are those where the failure
# leaves the application able to finish: every swap copy failing (nothing
# moves), every reservation or pin failing.
#
# Finally it checks that the three error paths no other test reaches ran:
# a failed swap-out copy (swap.c), seg_new_locked's failure exits (seg.c:
# the reservation and the placement) and the restore's retry after a
# non-OOM failure (lease.c). Prints one summary line.
set -u
BUILD=${CUSHARE_BUILD:-build}
BIN=$BUILD/tests/hook/hook_faults
LIMIT=${FAULTS_RUN_LIMIT:-30}
JOBS=${FAULTS_JOBS:-2}
SHM=${FAKECUDA_SHM:-faults-$$}
OWN_TMP=
if [ -z "${TEST_TMP:-}" ]; then
    TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/cushare-faults.XXXXXX")
    OWN_TMP=$TEST_TMP
fi
WORK=$TEST_TMP/faults
rm -rf "$WORK"
mkdir -p "$WORK"
export LD_LIBRARY_PATH=$BUILD/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CUSHARE_BUILD=$BUILD CUSHARE_LOG_LEVEL=debug
unset FAKECUDA_FAIL FAKECUDA_FAIL_LOG FAKECUDA_FAIL_COUNT FAULTS_EXPECT_RETRY

SCENARIOS="swap vmm grant-retry"
# The driver calls of src/hook/{seg,swap,backing,vmm,ipc,lease}.c (and the
# application's own VMM calls, which vmm.c turns into them), swept at every
# countdown a scenario reaches.
SWEEP="cuMemCreate cuMemRelease cuMemMap cuMemUnmap cuMemSetAccess cuMemAddressReserve
       cuMemAddressFree cuMemGetAllocationGranularity cuMemHostAlloc cuMemFreeHost
       cuMemcpyAsync cuStreamSynchronize cuStreamCreate cuDevicePrimaryCtxRetain
       cuCtxPushCurrent_v2 cuCtxPopCurrent_v2 cuCtxSynchronize cuThreadExchangeStreamCaptureMode
       cuDeviceGet cuDeviceGetCount cuDeviceGetAttribute cuDeviceCanAccessPeer
       cuDeviceGetUuid_v2 cuDeviceTotalMem_v2 cuCtxGetDevice"
# Allocating calls: swept once more with a non-OOM error.
NON_OOM="cuMemCreate cuMemAddressReserve cuMemHostAlloc"
# Calls whose failure changes what the hook does: one the application does
# not see must be in the hook's log.
MUST_REPORT="cuMemcpyAsync cuStreamSynchronize cuMemCreate cuMemMap cuMemSetAccess
             cuMemAddressReserve cuMemHostAlloc cuStreamCreate cuDevicePrimaryCtxRetain"
REPORTED='swap-out stopped|no swap stream yet|no room to try these VMM properties|restoring device memory stopped|prefetch stopped|could not be placed|not pinning|room for [0-9]+ bytes|\(status -?[1-9][0-9]*\)|refuses host-located|keeps failing|still waiting for room|stays unmapped'
SAN_REPORT='ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:'

in_list() { # WORD LIST: whether WORD is one of LIST's words
    local w
    # shellcheck disable=SC2086 # the list is split into its words
    for w in $2; do [ "$w" = "$1" ] && return 0; done
    return 1
}

# The hook's settings of each scenario, as hook_faults sets them when it
# re-executes itself under the hook: each run starts preloaded instead (one
# process start, not two; hook_faults refuses other settings).
# (LD_PRELOAD's list separated by a colon: settings are split into words.)
PRELOAD="${SAN_RUNTIME:+$SAN_RUNTIME:}$BUILD/lib/libcushare.so"
settings() { # SCENARIO DIR
    local backing=CUSHARE_PIN_PIECE=2M
    [ "$1" = grant-retry ] && backing=CUSHARE_HOST_BACKING=hostalloc
    echo "LD_PRELOAD=$PRELOAD CUSHARE_SOCKET=$2/mock.sock $backing CUSHARE_SEG_PART=2M" \
        "CUSHARE_HOST_RESERVE=64M"
}

# run ID SCENARIO SPEC [NAME=VALUE...]: one run in $WORK/ID; writes its
# exit status to $WORK/ID/rc.
run() {
    local id=$1 sc=$2 spec=$3 dir=$WORK/$1
    shift 3
    mkdir -p "$dir"
    # shellcheck disable=SC2046 # settings are NAME=VALUE words
    timeout --kill-after=5 "$LIMIT" env FAKECUDA_SHM="$SHM-$id" TEST_TMP="$dir" \
        ${spec:+FAKECUDA_FAIL=$spec} FAKECUDA_FAIL_LOG="$dir/fired" "$@" \
        $(settings "$sc" "$dir") "$BIN" "$sc" >"$dir/log" 2>&1
    echo $? >"$dir/rc"
    echo "$sc $spec $*" >"$dir/what"
    rm -f "/dev/shm/fakecuda-$SHM-$id"
}

# ---- counting runs ------------------------------------------------------------
declare -A COUNT
for sc in $SCENARIOS; do
    run "count-$sc" "$sc" "" FAKECUDA_FAIL_COUNT="$WORK/count-$sc.txt"
    if [ "$(cat "$WORK/count-$sc/rc")" != 0 ]; then
        echo "faults: $sc fails without any fault:"
        tail -n 30 "$WORK/count-$sc/log"
        exit 1
    fi
    while read -r sym n; do COUNT[$sc.$sym]=$n; done <"$WORK/count-$sc.txt"
done

# ---- the runs --------------------------------------------------------------------
LIST=$WORK/list
: >"$LIST"
for sc in $SCENARIOS; do
    for sym in $SWEEP; do
        n=${COUNT[$sc.$sym]:-0}
        for ((i = 1; i <= n; i++)); do
            echo "$sc $sym:$i" >>"$LIST"
            in_list "$sym" "$NON_OOM" && echo "$sc $sym:$i:1:CUDA_ERROR_UNKNOWN" >>"$LIST"
        done
    done
    # Failing for good from the first call: nothing moves, or nothing can
    # be allocated; either way the application finishes.
    echo "$sc cuMemcpyAsync:1:0" >>"$LIST"
    echo "$sc cuMemAddressReserve:1:0" >>"$LIST"
done
echo "grant-retry cuMemHostAlloc:1:0" >>"$LIST"
# The restore's first copy fails three times: the application makes no
# cuMemcpyAsync itself and its first grant places reserved memory only, so
# the first half of the copies are the swap-out's.
k=$((${COUNT[grant-retry.cuMemcpyAsync]:-0} / 2 + 1))
echo "grant-retry cuMemcpyAsync:$k:3 FAULTS_EXPECT_RETRY=1" >>"$LIST"
echo "grant-retry cuMemcpyAsync:$k:3:CUDA_ERROR_LAUNCH_FAILED FAULTS_EXPECT_RETRY=1" >>"$LIST"

start=$(date +%s)
id=0
while read -r sc spec extra; do
    id=$((id + 1))
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
    # shellcheck disable=SC2086 # extra is NAME=VALUE words or nothing
    run "$id" "$sc" "$spec" $extra &
done <"$LIST"
wait
secs=$(($(date +%s) - start))

# ---- verdicts --------------------------------------------------------------------
runs=0 passed=0 clean=0 failed=0 fired=0
for ((i = 1; i <= id; i++)); do
    dir=$WORK/$i
    rc=$(cat "$dir/rc")
    sym=$(awk '{ split($2, a, ":"); print a[1] }' "$dir/what")
    runs=$((runs + 1))
    [ -s "$dir/fired" ] && fired=$((fired + 1))
    why=
    case $rc in
    0) ;;
    3) grep -q '^clean error: ' "$dir/log" || why="exit 3 without a clean error line" ;;
    1) why="wrong data" ;;
    4) why="hook counters not zero after freeing everything" ;;
    5) why="the restore was not retried" ;;
    124 | 137) why="hung (no end within ${LIMIT} s)" ;;
    *) why="exit $rc" ;;
    esac
    if [ -z "$why" ] && grep -Eq "$SAN_REPORT" "$dir/log"; then
        why="sanitizer report"
    fi
    if [ -z "$why" ] && [ "$rc" = 0 ] && [ -s "$dir/fired" ] &&
        in_list "$sym" "$MUST_REPORT" &&
        ! grep -Eq "$REPORTED" "$dir/log"; then
        why="the hook did not report the failure it absorbed"
    fi
    if [ -n "$why" ]; then
        failed=$((failed + 1))
        echo "FAIL: $(cat "$dir/what"): $why ($dir/log)"
        grep -E 'FAKECUDA_FAIL:|clean error|wrong data|counters|ERROR|error:' "$dir/log" | head -n 8
    elif [ "$rc" = 0 ]; then
        passed=$((passed + 1))
    else
        clean=$((clean + 1))
    fi
done

# ---- the paths no other test reaches ---------------------------------------------
# A run's fault log and output together: "which call failed, what the
# application saw".
reached() { # SYMBOL-REGEX LOG-REGEX: some run fired SYMBOL and logged LOG-REGEX
    local d
    for d in "$WORK"/[0-9]*; do
        grep -Eq "FAKECUDA_FAIL: ($1) call" "$d/fired" 2>/dev/null && grep -Eq "$2" "$d/log" && return 0
    done
    return 1
}
missing=
reached 'cuMemcpyAsync|cuStreamSynchronize' 'swap-out stopped after .*a copy (or unmap )?failed' ||
    missing="$missing swap.c:swap-out-copy-failed"
reached 'cuMemAddressReserve' '^clean error: cuMemAlloc' ||
    missing="$missing seg.c:seg_new_locked-reserve-failed"
reached 'cuMemCreate' '^clean error: cuMemAlloc .*: CUDA_ERROR_UNKNOWN' ||
    missing="$missing seg.c:seg_new_locked-placement-failed"
reached 'cuMemcpyAsync' 'restoring device memory stopped \(error 999\)' ||
    missing="$missing lease.c:non-OOM-restore-retry"
if [ -n "$missing" ]; then
    echo "faults: error paths not reached:$missing"
    failed=$((failed + 1))
fi

echo "faults: $runs runs in ${secs} s ($fired reached their fault): $passed correct data," \
    "$clean clean errors, $failed failed"
[ "$failed" -eq 0 ] || exit 1
[ -n "$OWN_TMP" ] && rm -rf "$OWN_TMP"
exit 0
