# shellcheck shell=bash
# tests/e2e/lib.sh: sourced by the end-to-end scheduler tests (bash).
#
# A test starts a real cushared on a private socket, real cs_job processes
# under the real libcushare.so (through cushare-run in the optimized tree;
# with the same environment set directly under a sanitizer, whose runtime
# must come first in LD_PRELOAD), and reads the kernel trace of the
# simulated GPU (FAKECUDA_TRACE, CLOCK_MONOTONIC) as the ground truth of who
# ran when. Every process a test starts is killed on exit, whatever happens.
#
# Environment (tests/run-suite.sh sets it): CUSHARE_BUILD, CUSHARE_SAN,
# SAN_RUNTIME, FAKECUDA_SHM, TEST_TMP, LD_LIBRARY_PATH=$CUSHARE_BUILD/fakecuda.
# Run one by hand:
#   make BUILD=build check   (all), or
#   CUSHARE_BUILD=build LD_LIBRARY_PATH=build/fakecuda tests/e2e/e2e_kill.sh
E2E_TMP_TAG=e2e
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
export FAKECUDA_TRACE=$T/trace
TC=$B/tests/e2e/trace_check
EU=$B/tests/e2e/e2e_util
require "$B/bin/cushared" "$CTL" "$B/bin/cushare-run" "$B/bin/cs_job" "$HOOK" "$TC" "$EU"
declare -A JOB_PID=()

now_ns() { "$EU" now; }
ms() { awk -v n="$1" 'BEGIN { printf "%.1f", n / 1e6 }'; }  # ns -> "12.3" (ms)

# start_daemon [CONFIG-LINES...]: cushared on $SOCK with a [cushared] config
# made of the given lines; waits until it answers.
start_daemon() {
    {
        echo "[cushared]"
        for l in "$@"; do echo "$l"; done
    } >"$T/cushared.conf"
    "$B/bin/cushared" --socket "$SOCK" --config "$T/cushared.conf" --log-level debug \
        2>>"$T/cushared.log" &
    DAEMON_PID=$!
    local _
    for _ in $(seq 200); do
        "$CTL" --socket "$SOCK" status >/dev/null 2>&1 && return 0
        kill -0 "$DAEMON_PID" 2>/dev/null || fail "cushared exited at start"
        sleep 0.025
    done
    fail "cushared does not answer on $SOCK after 5 s"
}

# kill_daemon: SIGKILL, no chance to clean up (socket, lock and state file
# stay behind as after a crash).
kill_daemon() {
    kill -9 "$DAEMON_PID"
    wait "$DAEMON_PID" 2>/dev/null || true
    DAEMON_PID=
}

stop_daemon() {
    kill -TERM "$DAEMON_PID"
    wait "$DAEMON_PID" || fail "cushared did not exit cleanly on SIGTERM"
    DAEMON_PID=
}

# launch NAME PRIORITY WEIGHT CS_JOB-ARGS...: a cs_job named NAME under the
# hook, in the background; its pid in JOB_PID[NAME]. Outputs: $T/NAME.out,
# $T/NAME.err. Extra environment (FAKECUDA_CONCURRENT) passes through.
launch() {
    local name=$1 prio=$2 weight=$3
    shift 3
    if [ -z "$SAN" ]; then
        "$B/bin/cushare-run" --socket "$SOCK" --priority "$prio" --weight "$weight" \
            --name "$name" -- "$B/bin/cs_job" --name "$name" "$@" \
            >"$T/$name.out" 2>"$T/$name.err" &
    else
        # cushare-run would put the hook ahead of the sanitizer runtime.
        env LD_PRELOAD="$PRELOAD" CUSHARE_PRIORITY="$prio" CUSHARE_WEIGHT="$weight" \
            CUSHARE_NAME="$name" "$B/bin/cs_job" --name "$name" "$@" \
            >"$T/$name.out" 2>"$T/$name.err" &
    fi
    JOB_PID[$name]=$!
    JOB_PIDS+=($!)
}

# finish NAME [TIMEOUT_S]: waits for the job; it must exit 0 and print
# `cs_job: ok name=NAME`.
finish() {
    local name=$1 limit=${2:-60} pid=${JOB_PID[$1]} _
    for _ in $(seq $((limit * 20))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    kill -0 "$pid" 2>/dev/null && fail "job $name (pid $pid) still running after ${limit} s"
    local rc=0
    wait "$pid" || rc=$?
    grep -q "^cs_job: ok name=$name " "$T/$name.out" ||
        fail "job $name (pid $pid) exit $rc: $(cat "$T/$name.out" "$T/$name.err")"
    [ $rc -eq 0 ] || fail "job $name (pid $pid) printed ok but exit $rc"
}

# wait_trace PID [TIMEOUT_S]: until PID has a kernel in the trace.
wait_trace() {
    local _
    for _ in $(seq $((${2:-10} * 100))); do
        [ -f "$T/trace" ] && grep -q "^[0-9]* $1 " "$T/trace" && return 0
        sleep 0.01
    done
    fail "pid $1 ran no kernel within ${2:-10} s"
}

# status FILE: `cusharectl status --json` into FILE.json and its key=value
# form (e2e_util status) into FILE; non-zero if the daemon does not answer.
status() {
    "$CTL" --socket "$SOCK" status --json >"$1.json" 2>"$1.err" || return 1
    "$EU" status "$1.json" >"$1" || fail "status JSON unreadable: $(cat "$1.json")"
}

# field LINE KEY: the value of KEY=... in a key=value line.
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" $1"; }

# client_line FILE PID: the status line of the client with that pid.
client_line() { grep "^client .* pid=$2 " "$1" || true; }
