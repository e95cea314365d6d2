# shellcheck shell=bash
# tests/e2e/common.sh: what every end-to-end test library shares (lib.sh for
# the scheduler tests, swap_lib.sh for the swap tests): the build and the
# private directory, a clean cushare environment, failure reports and the
# exit trap that kills every process a test started, whatever happens.
#
# The sourcing library sets E2E_TMP_TAG (the temporary directory's name
# when run by hand) first, and E2E_LOG_EXTS/E2E_LOG_LINES to choose what a
# failure prints of the processes' own output ($T/*.EXT, last lines). Tests append the pids they
# start to JOB_PIDS and set DAEMON_PID.
set -eu

B=${CUSHARE_BUILD:-build}
SAN=${CUSHARE_SAN:-}
TEST_NAME=$(basename "$0" .sh)
OWN_TMP=
if [ -z "${TEST_TMP:-}" ]; then
    TEST_TMP=$(mktemp -d "${TMPDIR:-/tmp}/cushare-$E2E_TMP_TAG.XXXXXX")
    OWN_TMP=$TEST_TMP # run by hand: removed after a pass, kept after a failure
fi
T=$TEST_TMP
export LD_LIBRARY_PATH=$B/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FAKECUDA_SHM=${FAKECUDA_SHM:-$E2E_TMP_TAG-$$}
# Nothing of the caller's cushare settings may leak into the jobs.
unset CUSHARE_PRIORITY CUSHARE_WEIGHT CUSHARE_NAME CUSHARE_MEM_LIMIT CUSHARE_DISABLE CUSHARE_CONTAINER \
      CUSHARE_REQUIRE_DAEMON CUSHARE_DAEMON_WAIT_MS CUSHARE_SWAP FAKECUDA_CONCURRENT LD_PRELOAD
SOCK=$T/cushared.sock
export CUSHARE_SOCKET=$SOCK
HOOK=$B/lib/libcushare.so
PRELOAD="${SAN_RUNTIME:+$SAN_RUNTIME }$HOOK"
CTL=$B/bin/cusharectl

# sleep SECONDS: the same wait without a process. The tests poll in loops
# (`sleep 0.02` between looks), and on CI's 2-core VMs a process start
# costs ~3.4 ms: in swap_pool.sh, 8% of the machine's time went to sleep
# processes and more to bash forking them (2026-12-02). bash's read times
# out on a descriptor that never has data: a pipe this shell holds both
# ends of (inherited by what it starts, which never read it).
exec {E2E_NAP_FD}<> <(:)
sleep() {
    read -r -t "$1" -u "$E2E_NAP_FD" _ || true
}

# require FILE...: the build products a test needs.
require() {
    local f
    for f in "$@"; do
        [ -e "$f" ] || { echo "$TEST_NAME: $f is missing: build with 'make BUILD=$B check'" >&2; exit 1; }
    done
}

DAEMON_PID=
JOB_PIDS=()

# Prints what helps to understand a failure: the daemon's log and the jobs'
# own output.
dump_logs() {
    local f ext
    if [ -f "$T/cushared.log" ]; then
        echo "------ cushared log (last 40 lines) ------"
        tail -n 40 "$T/cushared.log"
    fi
    for ext in ${E2E_LOG_EXTS:-err}; do
        for f in "$T"/*."$ext"; do
            [ -s "$f" ] || continue
            echo "------ $f ------"
            tail -n "${E2E_LOG_LINES:-10}" "$f"
        done
    done
}

fail() {
    echo "FAIL: $TEST_NAME: $*" >&2
    dump_logs >&2
    exit 1
}

cleanup() {
    local rc=$? p
    set +e
    for p in "${JOB_PIDS[@]}" $DAEMON_PID; do
        kill -9 "$p" 2>/dev/null
    done
    for p in "${JOB_PIDS[@]}" $DAEMON_PID; do
        wait "$p" 2>/dev/null
    done
    rm -f "/dev/shm/fakecuda-$FAKECUDA_SHM"
    if [ -n "$OWN_TMP" ]; then
        if [ $rc -eq 0 ]; then rm -rf "$OWN_TMP"; else echo "kept $OWN_TMP" >&2; fi
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
