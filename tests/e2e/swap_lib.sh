# shellcheck shell=bash
# tests/e2e/swap_lib.sh: sourced by the swap end-to-end tests (swap_*.sh).
#
# A test runs a real cushared on a private socket and real cs_job processes
# under the real libcushare.so on a simulated GPU whose memory they do not
# fit in together, so the daemon swaps them. The simulated GPU:
# FAKECUDA_MEM_MB=256, copies at FAKECUDA_PCIE_GBPS=4 per direction (a
# process may ask for less), 8 MiB per context (client_reserve_mb = 8).
# Every process a test starts is killed on exit, whatever happens.
#
# Environment (tests/run-suite.sh sets it): CUSHARE_BUILD, CUSHARE_SAN,
# SAN_RUNTIME, FAKECUDA_SHM, TEST_TMP. By hand:
#   CUSHARE_BUILD=build-mem tests/e2e/swap_jobs.sh
E2E_TMP_TAG=swap
E2E_LOG_EXTS='err out'
E2E_LOG_LINES=8
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
export FAKECUDA_MEM_MB=256
export FAKECUDA_PCIE_GBPS=4
unset FAKECUDA_TRACE
PROBE=$B/tests/e2e/swap_probe
JOB=$B/bin/cs_job
require "$B/bin/cushared" "$CTL" "$JOB" "$HOOK" "$PROBE"

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# The daemon's knobs for every swap test. mem_reserve_mb = 0: nothing but
# the jobs uses the simulated GPU; client_reserve_mb = 8: the simulator's
# context. The quantum follows the measured switch overhead (5% of a slice)
# between 200 ms and 10 s. Debug logging: the tests wait for its lines.
write_conf() {
    cat >"$T/cushared.conf" <<EOF
[cushared]
mode = exclusive
mem_reserve_mb = 0
client_reserve_mb = 8
quantum_floor_ms = 200
quantum_cap_ms = 10000
switch_cost_target = 0.05
idle_release_ms = 500
revoke_timeout_ms = 10000
reconnect_grace_ms = 3000
log_level = debug
EOF
}

# start_pool_daemon: cushared on $T/cushared.conf, its pool (pool_min_mb)
# warmed with nobody connected (pinning at 2 GB/s), waited for. Not through
# start_daemon: its status polls are events of their own.
start_pool_daemon() {
    FAKECUDA_PIN_GBPS=2 "$B/bin/cushared" --socket "$SOCK" --config "$T/cushared.conf" \
        --state "$T/cushared.state" 2>>"$T/cushared.log" &
    DAEMON_PID=$!
    wait_log "pinned pool: [0-9.]+ MiB pinned, its target" >/dev/null
}

# pool_all_back WHAT: fails unless every piece of the pool is back (none
# lent) within 10 s; WHAT names what ended, for the message.
pool_all_back() {
    local lent i
    lent=$(pool_metric cushare_pool_lent_bytes)
    for i in $(seq 100); do
        [ "$lent" = 0 ] && return 0
        sleep 0.1
        lent=$(pool_metric cushare_pool_lent_bytes)
    done
    [ "$lent" = 0 ] || fail "$lent bytes of the pool still lent after $1"
}

start_daemon() {
    [ -f "$T/cushared.conf" ] || write_conf
    "$B/bin/cushared" --socket "$SOCK" --config "$T/cushared.conf" \
        --state "$T/cushared.state" 2>>"$T/cushared.log" &
    DAEMON_PID=$!
    local i
    for i in $(seq 200); do
        "$CTL" --socket "$SOCK" status >/dev/null 2>&1 && return 0
        sleep 0.025
    done
    fail "cushared did not answer on $SOCK"
}

stop_daemon() {
    [ -n "$DAEMON_PID" ] || return 0
    kill "$DAEMON_PID" 2>/dev/null || true
    wait "$DAEMON_PID" 2>/dev/null || true
    DAEMON_PID=
}

# job NAME SEED [cs_job options...]: a cs_job under the hook in the
# background, output in $T/NAME.out and .err; its pid in JOB_PID. Synced
# every iteration (as a framework syncs every step), so a revoke waits for
# one iteration, not for seconds of queued work.
JOB_PID=
job() {
    local name=$1 seed=$2
    shift 2
    CUSHARE_NAME=$name LD_PRELOAD="$PRELOAD" "$JOB" --name "$name" --seed "$seed" \
        --sync-every 1 "$@" >"$T/$name.out" 2>"$T/$name.err" &
    JOB_PID=$!
    JOB_PIDS+=("$JOB_PID")
}

# Diagnostics of a job that does not finish: the daemon's view and the
# threads of every job still alive.
dump_stuck() {
    echo "------ status ------"
    "$CTL" --socket "$SOCK" status 2>&1 || true
    local p t
    for p in "${JOB_PIDS[@]}"; do
        [ -d "/proc/$p" ] || continue
        echo "------ pid $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | cut -c1-80) ------"
        for t in /proc/"$p"/task/*; do
            echo "  $(cat "$t/comm" 2>/dev/null) $(cat "$t/wchan" 2>/dev/null) $(sed -n 's/^State:\t//p' "$t/status" 2>/dev/null)"
        done
        if command -v gdb >/dev/null 2>&1; then
            timeout 20 gdb -p "$p" -batch -ex "thread apply all bt 8" 2>/dev/null | grep -E '^(Thread|#)' | head -n 60
        fi
    done
}

# job_ok NAME PID [REGEX]: waits for it (up to 90 s) and requires a right
# checksum: its output has a line matching REGEX (by default cs_job's ok
# line).
job_ok() {
    local name=$1 pid=$2 want=${3:-"^cs_job: ok name=$1 "} i
    for i in $(seq 9000); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.01
    done
    if kill -0 "$pid" 2>/dev/null; then
        dump_stuck >&2
        fail "job $name (pid $pid) did not finish within 90 s"
    fi
    wait "$pid" || fail "job $name exited with $?: $(cat "$T/$name.out" "$T/$name.err" | tail -n 3)"
    grep -q "$want" "$T/$name.out" || fail "job $name: $(cat "$T/$name.out")"
}

# The simulated GPU's free memory as a process without the hook sees it
# (its own context included: compare values measured the same way).
free_mem() {
    "$PROBE" free | sed -n 's/^free=\([0-9]*\) .*/\1/p'
}

# Waits (up to 10 s) until no process but the probe holds simulated device
# memory, then requires the free memory to equal $1.
expect_free() {
    local want=$1 got i
    for i in $(seq 100); do
        got=$(free_mem)
        [ "$got" = "$want" ] && return 0
        sleep 0.1
    done
    fail "device memory leaked: free $got bytes, $want at the start"
}

# wait_log PATTERN [SINCE_LINE]: waits (up to 20 s) for a daemon log line
# matching the extended regex after line SINCE_LINE; prints its number.
wait_log() {
    local pat=$1 since=${2:-0} i n
    for i in $(seq 2000); do
        n=$(awk -v s="$since" -v p="$pat" 'NR > s && $0 ~ p { print NR; exit }' "$T/cushared.log")
        if [ -n "$n" ]; then
            echo "$n"
            return 0
        fi
        sleep 0.01
    done
    fail "no daemon log line matching '$pat' within 20 s"
}

log_lines() { wc -l <"$T/cushared.log"; }

status_json() { "$CTL" --socket "$SOCK" status --json; }

# client_json NAME: job NAME's line of the status JSON (empty if none).
client_json() { status_json | grep "\"name\": \"$1\""; }

# wait_footprint NAME PID BYTES: waits until the daemon knows job NAME (pid
# PID) has at least BYTES of memory (its USAGE), failing if the job ends
# first or after 1000 looks (10 s of pauses, and a status read each). Where
# a test needs a job set up before the next step: on a 2-core VM whose
# first writes of fresh pages cost 1.3 ms/MiB (2026-12-01), a fixed pause
# was not enough for a 150 MiB job.
wait_footprint() {
    local name=$1 pid=$2 bytes=$3 fp i
    for i in $(seq 1000); do
        fp=$(client_json "$name" | grep -o '"mem_footprint_bytes": [0-9]*' | sed 's/.*: //')
        [ "${fp:-0}" -ge "$bytes" ] && return 0
        kill -0 "$pid" 2>/dev/null || fail "job $name ended before its footprint reached $bytes bytes"
        sleep 0.01
    done
    fail "job $name's footprint stayed at ${fp:-?} bytes, not $bytes"
}

# wait_idle NAME PID: waits until the daemon has job NAME (pid PID) as idle
# (its hook's idle report: nothing submitted for idle_report_ms), failing
# if the job ends first or after 1000 looks. A job that allocated its
# memory may still be filling it (slowly where fresh pages are slow to
# write), and a job still at work wants the GPU back.
wait_idle() {
    local name=$1 pid=$2 i
    for i in $(seq 1000); do
        client_json "$name" | grep -q '"idle": true' && return 0
        kill -0 "$pid" 2>/dev/null || fail "job $name ended before it was idle"
        sleep 0.01
    done
    fail "job $name was never idle"
}

# json_num FILE KEY: the first number after "KEY": in FILE (GPU-level keys
# come before the clients' in the status JSON).
json_num() {
    grep -o "\"$2\": [0-9.]*" "$1" | head -n 1 | sed 's/.*: //'
}

# pool_metric NAME: the value of the series NAME (its first, with labels or
# without) on the daemon's metrics page ("missing" when absent), read with
# bash's /dev/tcp: no HTTP client needed. The daemon needs `metrics =`.
pool_metric() {
    local port page
    port=$(json_num <(status_json) metrics_port)
    [ "${port:-0}" -gt 0 ] || fail "no metrics port in the status"
    exec 3<>"/dev/tcp/127.0.0.1/$port" || fail "cannot reach the metrics endpoint on $port"
    printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
    page=$(cat <&3)
    exec 3>&-
    echo "$page" | awk -v n="$1" '($1 == n || index($1, n "{") == 1) { print $2; f = 1; exit }
        END { if (!f) print "missing" }'
}

# wait_pool_zero NAME SECONDS WHAT: waits until the pool's series NAME reads
# 0, looking every 20 ms; fails with "<value> WHAT" after SECONDS.
wait_pool_zero() {
    local i v
    for i in $(seq $(($2 * 50))); do
        v=$(pool_metric "$1")
        [ "$v" = 0 ] && return 0
        sleep 0.02
    done
    fail "$v $3"
}
