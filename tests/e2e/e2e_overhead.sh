#!/usr/bin/env bash
# e2e_overhead.sh: issue 21, the memory model reserves what the driver
# really charges each client's process beyond its allocations (context,
# modules, library workspaces), measured by the daemon through NVML
# (meter.c, sd_policy_measured) instead of a fixed client_reserve_mb.
#
# The daemon runs with the simulated NVML (tests/k8s/fake_nvml.c), whose
# compute-process list the test writes while the job runs ("proc" lines of
# FAKE_NVML_STATE), sampled every 100 ms:
#   1. no figure for the job yet: nothing reserved, capacity = the card;
#   2. the driver charges the job's process its resident memory + 300 MiB:
#      the job's overhead is exactly that, and the capacity leaves room for
#      it twice (the job's and the next process's), in status and metrics;
#   3. a process the daemon does not know (another tenant's): no change;
#   4. a figure below what the job reports resident (a driver that lags):
#      overhead 0, never negative, and the capacity is the card's again;
#   5. client_reserve_mb = 100 overrides the measurement; auto restores it;
#   6. a daemon without NVML: the meter is off, said once, nothing reserved.
source "$(dirname "$0")/lib.sh"
NVML_DIR=$B/tests/k8s/nvml
require "$NVML_DIR/libnvidia-ml.so.1"
MIB=1048576
TOTAL=$((16384 * MIB))
export FAKECUDA_MEM_MB=16384

# The simulated GPU's UUID, for the simulated NVML to list the same card.
start_daemon
status "$T/st0"
UUID=$(sed -n 's/.*"uuid": *"\(GPU-[0-9a-f-]*\)".*/\1/p' "$T/st0.json" | head -n 1)
[ -n "$UUID" ] || fail "no GPU UUID in status: $(cat "$T/st0.json")"
stop_daemon

NVSTATE=$T/nvml.state
: >"$NVSTATE"
export FAKE_NVML_UUIDS=$UUID FAKE_NVML_MEM_MB=16384 FAKE_NVML_STATE=$NVSTATE
OLD_LD=$LD_LIBRARY_PATH
export LD_LIBRARY_PATH=$NVML_DIR:$LD_LIBRARY_PATH
start_daemon "mem_sample_ms = 100" "mem_reserve_mb = 0" "metrics = 127.0.0.1:0"
export LD_LIBRARY_PATH=$OLD_LD
MPORT=$(sed -n 's/.*"metrics_port": *\([0-9]*\).*/\1/p' <("$CTL" --socket "$SOCK" status --json) | head -n 1)
[ "${MPORT:-0}" -gt 0 ] || fail "no metrics port in the status"
# metrics: the daemon's page (bash's /dev/tcp: no HTTP client needed).
metrics() {
    exec 3<>"/dev/tcp/127.0.0.1/$MPORT" || fail "cannot reach the metrics endpoint on $MPORT"
    printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
    cat <&3
    exec 3>&-
}
grep -q "client memory overhead: measured from the driver's per-process figures every 100 ms" \
    "$T/cushared.log" || fail "the meter did not start: $(grep overhead "$T/cushared.log")"

# 64 MiB: under ThreadSanitizer filling 512 MiB took longer than wait_trace's 10 s.
launch job normal 1 --mem-mb 64 --iters 100000 --kernel-ns 1000000 --sync-every 1 --seed 5
JOBPID=${JOB_PID[job]}
wait_trace "$JOBPID" 60

gpu_field() { field "$(grep '^gpu ' "$T/stw")" "$1"; }
job_field() { field "$(client_line "$T/stw" "$JOBPID")" "$1"; }
# wait_for DESC TEST: polls status (5 s at most) until the shell test holds.
wait_for() {
    local _
    for _ in $(seq 100); do
        status "$T/stw"
        eval "$2" && return 0
        sleep 0.05
    done
    fail "$1: $(grep -E '^(gpu|client) ' "$T/stw")"
}

# 1. Nothing measured yet.
wait_for "the daemon never learned the job's memory" '[ "$(job_field resident)" -ge $((64 * MIB)) ]'
RES=$(job_field resident)
[ "$(gpu_field client_reserve)" = 0 ] || fail "reserve before any figure: $(gpu_field client_reserve)"
[ "$(gpu_field capacity)" = "$TOTAL" ] || fail "capacity before any figure: $(gpu_field capacity)"

# 2. The driver charges the job 300 MiB more than its allocations.
USED_MIB=$(((RES + MIB - 1) / MIB + 300))
OVH=$((USED_MIB * MIB - RES))
echo "proc 0:$JOBPID:$USED_MIB" >"$NVSTATE"
wait_for "the job's overhead was not measured as $OVH" '[ "$(job_field overhead)" = "$OVH" ]'
wait_for "the capacity does not leave room for two overheads" \
    '[ "$(gpu_field capacity)" = $((TOTAL - 2 * OVH)) ]'
[ "$(gpu_field client_reserve)" = "$OVH" ] || fail "reserve $(gpu_field client_reserve), want $OVH"
[ "$(job_field resident)" = "$RES" ] || fail "the job's memory changed: test void"
metrics | tr -d '\r' >"$T/metrics"
grep -q "^cushare_client_memory_overhead_bytes{.*} $OVH\$" "$T/metrics" ||
    fail "metrics lack the overhead: $(grep overhead "$T/metrics")"
grep -q "^cushare_gpu_memory_client_reserve_bytes{.*} $OVH\$" "$T/metrics" ||
    fail "metrics lack the reserve: $(grep client_reserve "$T/metrics")"
echo "measured: overhead $OVH bytes, capacity $(gpu_field capacity)"

# 3. Another tenant's process changes nothing.
printf 'proc 0:%s:%s\nproc 0:4242:9000\n' "$JOBPID" "$USED_MIB" >"$NVSTATE"
sleep 0.5
status "$T/stw"
[ "$(gpu_field capacity)" = $((TOTAL - 2 * OVH)) ] || fail "a foreign process moved the capacity"

# 4. Below the job's own memory: 0, not negative.
echo "proc 0:$JOBPID:1" >"$NVSTATE"
wait_for "the overhead did not go to 0" '[ "$(job_field overhead)" = 0 ]'
wait_for "the capacity did not come back" '[ "$(gpu_field capacity)" = "$TOTAL" ]'

# 5. A number overrides; auto measures again.
echo "proc 0:$JOBPID:$USED_MIB" >"$NVSTATE"
wait_for "the overhead was not measured again" '[ "$(job_field overhead)" = "$OVH" ]'
"$CTL" --socket "$SOCK" set client_reserve_mb=100 >/dev/null || fail "set client_reserve_mb=100"
status "$T/stw"
[ "$(gpu_field capacity)" = $((TOTAL - 200 * MIB)) ] || fail "override: capacity $(gpu_field capacity)"
[ "$(gpu_field client_reserve)" = $((100 * MIB)) ] || fail "override: $(gpu_field client_reserve)"
"$CTL" --socket "$SOCK" set client_reserve_mb=auto >/dev/null || fail "set client_reserve_mb=auto"
status "$T/stw"
[ "$(gpu_field capacity)" = $((TOTAL - 2 * OVH)) ] || fail "auto again: capacity $(gpu_field capacity)"
kill "$JOBPID"
wait "$JOBPID" 2>/dev/null || true
stop_daemon

# 6. No NVML: the meter is off, said once, nothing reserved.
: >"$T/cushared.log"
start_daemon "mem_sample_ms = 100" "mem_reserve_mb = 0"
grep -q "client memory overhead: not measured: NVML not found" "$T/cushared.log" ||
    fail "no word of the meter being off: $(grep overhead "$T/cushared.log")"
stop_daemon
echo "PASS: $TEST_NAME"
