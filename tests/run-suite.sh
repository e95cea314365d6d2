#!/usr/bin/env bash
# tests/run-suite.sh TEST...: runs each test program or script of one build
# tree, one at a time (SUITE_JOBS: that many at once), each with its own
# simulated-GPU namespace and a time limit; prints a line per test as it
# ends, the log of every failure, and a summary.
# The summary line says how long the suite took (wall clock).
# Exits non-zero if any test failed. A test that exits 77 was skipped (it
# lacks an optional tool, e.g. Prometheus): SKIP with its last line, the
# reason, which does not fail the suite.
#
# Environment passed to each test:
#   CUSHARE_BUILD  the build tree (build, build/asan, build/tsan)
#   CUSHARE_SAN    "", asan or tsan
#   SAN_RUNTIME    the sanitizer runtime to LD_PRELOAD ahead of instrumented
#                  shared objects in uninstrumented programs
#   FAKECUDA_SHM   a name unique to the test, so tests never share a GPU
#   TEST_TMP       a fresh scratch directory, removed after a pass
# SUITE_PART (early or late: which rows of tests/registry these are) only
# names the suite in its summary line.
set -u
BUILD=${CUSHARE_BUILD:-build}
LOGDIR=$BUILD/test-logs
mkdir -p "$LOGDIR"
LIMIT=${TEST_TIME_LIMIT:-300}
pass=0 fail=0 skip=0 failed=()
export LD_LIBRARY_PATH=$BUILD/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export CUSHARE_BUILD=$BUILD CUSHARE_SAN=${CUSHARE_SAN:-} SAN_RUNTIME=${SAN_RUNTIME:-}
# Sanitizer reports fail the test that triggers them.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:detect_odr_violation=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:second_deadlock_stack=1}

# log_of TEST: where TEST's output goes.
log_of() { echo "$LOGDIR/$(echo "$1" | sed 's|^build/||; s|[/ ]|_|g').log"; }

# run_test I TEST: runs TEST (the I-th) with its own simulated GPU and
# scratch directory; leaves "rc ms tmp" in $RES/I.
run_test() {
    local i=$1 t=$2 log tmp start rc
    log=$(log_of "$t")
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/cushare-test.XXXXXX")
    start=$(date +%s%N)
    FAKECUDA_SHM="cs-test-$$-$i" TEST_TMP=$tmp \
        timeout --kill-after=10 "$LIMIT" $t >"$log" 2>&1
    rc=$?
    echo "$rc $((($(date +%s%N) - start) / 1000000)) $tmp" >"$RES/$i"
    rm -f "/dev/shm/fakecuda-cs-test-$$-$i" 2>/dev/null
}

# report I TEST: its line (and a failure's log) from $RES/I; counts it.
report() {
    local i=$1 t=$2 log rc ms tmp secs why
    log=$(log_of "$t")
    read -r rc ms tmp <"$RES/$i"
    secs=$(printf "%d.%02d" $((ms / 1000)) $((ms % 1000 / 10)))
    if [ "$rc" -eq 0 ]; then
        printf '  PASS  %-52s %6ss\n' "$t" "$secs"
        pass=$((pass + 1))
        rm -rf "$tmp"
    elif [ "$rc" -eq 77 ]; then
        printf '  SKIP  %-52s %6ss  (%s)\n' "$t" "$secs" "$(tail -n 1 "$log")"
        skip=$((skip + 1))
        rm -rf "$tmp"
    else
        [ "$rc" -eq 124 ] && why="timed out after ${LIMIT}s" || why="exit $rc"
        printf '  FAIL  %-52s %6ss  (%s)\n' "$t" "$secs" "$why"
        echo "------ last lines of $log ------"
        tail -n 60 "$log"
        echo "------"
        fail=$((fail + 1))
        failed+=("$t")
    fi
}

# SUITE_JOBS tests at a time (default 1: one at a time, for the timing
# bounds); each line is printed as its test ends.
JOBS=${SUITE_JOBS:-1}
case $JOBS in '' | *[!0-9]* | 0) echo "SUITE_JOBS must be a positive number: $JOBS"; exit 2 ;; esac
RES=$(mktemp -d "${TMPDIR:-/tmp}/cushare-suite.XXXXXX")
trap 'rm -rf "$RES"' EXIT
declare -A running=() # pid -> "I TEST"
i=0
finish_one() {
    local pid
    wait -n -p pid
    # shellcheck disable=SC2086
    report ${running[$pid]}
    unset "running[$pid]"
}
for t in "$@"; do
    while [ ${#running[@]} -ge "$JOBS" ]; do finish_one; done
    run_test "$i" "$t" &
    running[$!]="$i $t"
    i=$((i + 1))
done
while [ ${#running[@]} -gt 0 ]; do finish_one; done
skipped=; [ $skip -eq 0 ] || skipped=", $skip skipped"
echo "suite ${CUSHARE_SAN:-optimized}${SUITE_PART:+, $SUITE_PART rows} ($BUILD): $pass passed, $fail failed$skipped in ${SECONDS}s"
[ $fail -eq 0 ] || { printf '  failed: %s\n' "${failed[@]}"; exit 1; }
