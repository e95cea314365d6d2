#!/usr/bin/env bash
# e2e_lcgate.sh: issue 7, gating when channel-group timeslices are not
# available: a latency-critical (LC) job's kernels start within the
# bounded drain of a busy best-effort (BE) job, and the BE job progresses
# whenever the LC job is idle.
#
# The simulated GPU time-slices contexts like a real one
# (FAKECUDA_TIMESLICE_US, docs/fakecuda.md), with a 30 ms slice so that the
# difference is far larger than any scheduling noise of a loaded CI machine:
#
#   native  the BE job (1 ms kernels, 32 queued) and the LC job (a 0.2 ms
#           kernel every 10 ms) with no cushare: the LC job waits for the
#           rest of the BE slice, about 10 ms on average (each LC kernel
#           ends the LC slice, the BE job starts a new 30 ms one);
#   gated   both under cushared in shared mode, lc_mechanism = gate, LC at
#           priority high, BE low: the BE job is revoked while the LC job
#           has work and keeps at most lc_window_us (1 ms) queued, so the
#           LC kernel waits for one BE kernel and a round trip.
#   mixed   the same in mixed mode (issue 21: exclusive within a class
#           side, a high job beside a lower-class one): the same protection.
#   default the daemon's configuration left at its defaults (issue 21: mixed
#           mode, lc_mechanism auto, which gates here: the simulated GPU's
#           channel groups cannot be time-sliced): the same protection.
#
# Asserted: the native mean LC latency is >= 5 ms (the simulator and the
# BE job do what the test needs: without that the comparison proves
# nothing), the gated mean is below 40% of it (about 10% expected: a round
# trip and one BE kernel), and the gated BE job keeps at least
# 40% of its native throughput (the LC job leaves the GPU idle ~95% of the
# time; losing more would mean the BE job is not given the GPU back). The
# daemon's status must show the mechanism in use for each job, the BE job
# preempted for the LC job and LC bursts reported. The mechanism is checked
# on every try; the two timing bounds must hold together in one of up to
# three tries of each mode (protected(), below, says why).
#
# The BE job's kernels are fc_sleep (--be-kernel sleep), counted in kernels
# per second: an fc_add32 computes on a host CPU, so it took a whole core
# of a 2-core CI machine, and when the VM's host stole CPU time (29% steal
# seen) the daemon's and the hooks' round trips waited behind it: LC means
# of 3.5-5.9 ms and BE at 35-45% of native in about one run of three (the
# CI failure of stop 35). With sleep kernels, 12 runs with a busy core
# beside them kept LC means at 1.2-1.5 ms (native 10.3) and BE at 0.80-0.87
# of native; with both cores busy (two busy loops), LC 1.7-2.2 ms and BE
# 0.57-0.67 of native (3 runs): hence 40% with margin. The simulated engine
# never preempts inside a kernel, so GPU time the BE job loses still shows
# as kernels lost.
source "$(dirname "$0")/lib.sh"
LCB=$B/bin/cs_lcbench
require "$LCB"
export FAKECUDA_TIMESLICE_US=30000
# Measured windows of 2 s (200 LC periods): 3 s took 19 s of make test per
# tree for the four pairs.
SECS=2

LEAD=1.5 # start-up allowance before the common start time
start_at() { awk -v t="$(date +%s.%N)" -v l="$LEAD" 'BEGIN { printf "%.3f", t + l }'; }
val() { tr ' ' '\n' <"$1" | sed -n "s/^$2=//p"; }

# run_pair native|gated: both jobs, same start time; gated: under the hook
# (PRELOAD holds the sanitizer runtime too: one word per env assignment).
run_pair() {
    local tag=$1 at be_env=() lc_env=()
    if [ "$tag" != native ]; then
        be_env=(LD_PRELOAD="$PRELOAD" CUSHARE_SOCKET="$SOCK" CUSHARE_PRIORITY=low CUSHARE_NAME=be)
        lc_env=(LD_PRELOAD="$PRELOAD" CUSHARE_SOCKET="$SOCK" CUSHARE_PRIORITY=high CUSHARE_NAME=lc)
    fi
    at=$(start_at)
    env "${be_env[@]}" "$LCB" --role be --seconds "$SECS" --kernel-us 1000 --be-mb 8 \
        --be-depth 32 --be-kernel sleep --start-at "$at" >"$T/$tag.be" 2>"$T/$tag.be.err" &
    local bpid=$!
    JOB_PIDS+=($bpid)
    env "${lc_env[@]}" "$LCB" --role lc --seconds "$SECS" --kernel-us 200 --period-us 10000 \
        --start-at "$at" >"$T/$tag.lc" 2>"$T/$tag.lc.err" &
    local lpid=$!
    JOB_PIDS+=($lpid)
    if [ "$tag" != native ]; then
        sleep "$(awk -v l="$LEAD" -v s="$SECS" 'BEGIN { print l + s / 2 }')" # mid-window
        status "$T/st" || fail "status while gated"
        "$CTL" --socket "$SOCK" status >"$T/table" || fail "cusharectl status failed"
    fi
    wait "$lpid" || fail "$tag LC job failed: $(cat "$T/$tag.lc" "$T/$tag.lc.err")"
    wait "$bpid" || fail "$tag BE job failed: $(cat "$T/$tag.be" "$T/$tag.be.err")"
}

run_pair native
nat_lc=$(val "$T/native.lc" mean_us)
nat_be=$(val "$T/native.be" kernels_per_s)
echo "native: LC mean ${nat_lc} us, BE ${nat_be} kernels/s"
# Without that delay the comparison proves nothing.
[ "$SAN" = tsan ] || awk -v n="$nat_lc" 'BEGIN { exit !(n >= 5000) }' ||
    fail "native LC mean ${nat_lc} us: the simulated timeslice did not delay it (test void)"

# timing_ok TAG LC BE: 0 if the LC mean is within the bounded drain and the
# BE job kept its share; otherwise 1, with why on stdout.
timing_ok() {
    awk -v g="$2" -v n="$nat_lc" 'BEGIN { exit !(g < 0.4 * n) }' ||
        { echo "$1 LC mean $2 us: not within the bounded drain (native ${nat_lc} us)"; return 1; }
    awk -v g="$3" -v n="$nat_be" 'BEGIN { exit !(g >= 0.4 * n) }' ||
        { echo "$1 BE $3 kernels/s is below 40% of native ${nat_be}: it starves"; return 1; }
}

# protected TAG MODE: the pair under cushared in MODE with gating (MODE
# default: no setting at all, mixed expected); the mechanism checked on
# every try, the timing bounds (outside TSan) on at least one of three:
# on CI's 2-core VM a stretch of steal time once slowed every wakeup of a
# try (native BE 804-814 kernels/s instead of 920-950, gated LC mean
# 4.4-5.0 ms, p50 3.3 ms, with drains still 0.6 ms at p50: 2 of 26 suite
# runs). A broken gate misses the bound on every try (LC ~10 ms).
protected() {
    local tag=$1 mode=$2 try why
    [ "$mode" = default ] && mode=mixed
    for try in 1 2 3; do
        protected_try "$tag" "$2"
        [ "$SAN" = tsan ] && { echo "(ThreadSanitizer: timing bounds not checked, only the mechanism)"; return 0; }
        why=$(timing_ok "$tag" "$lc" "$be") && return 0
        echo "$tag ($mode) try $try: $why"
    done
    fail "$why (3 tries)"
}

# protected_try TAG MODE: one run of the pair; the mechanism asserted; sets
# lc, be (the LC mean latency, the BE throughput), lc_line, be_line.
protected_try() {
    local tag=$1
    if [ "$2" = default ]; then
        start_daemon
        set -- "$1" mixed
    else
        start_daemon "mode = $2" "lc_mechanism = gate" "idle_release_ms = 1000"
    fi
    run_pair "$tag"
    lc=$(val "$T/$tag.lc" mean_us)
    be=$(val "$T/$tag.be" kernels_per_s)
    echo "$tag ($2): LC mean ${lc} us, BE ${be} kernels/s"
    be_line=$(grep "^client .* name=be " "$T/st" || true)
    lc_line=$(grep "^client .* name=lc " "$T/st" || true)
    echo "status: $be_line"
    echo "status: $lc_line"
    [ "$(field "$be_line" lc)" = gate ] && [ "$(field "$be_line" lc_mode)" = bounded ] ||
        fail "$tag BE job: want lc=gate lc_mode=bounded: $be_line"
    [ "$(field "$lc_line" lc)" = lc ] && [ "$(field "$lc_line" lc_mode)" = release-idle ] ||
        fail "$tag LC job: want lc=lc lc_mode=release-idle: $lc_line"
    [ "$(field "$be_line" lc_preempted)" -gt 0 ] || fail "$tag: BE job never gated: $be_line"
    [ "$(field "$lc_line" lc_bursts)" -gt 0 ] || fail "$tag: LC job reported no burst: $lc_line"
    grep -q "latency-critical: gate, bounded 1000 us" "$T/table" ||
        fail "the status table does not show the gating: $(cat "$T/table")"
    grep -q "mode $2" "$T/table" || fail "the status table does not say $2: $(head -3 "$T/table")"
    [ "$(field "$(grep '^daemon ' "$T/st")" protocol_errors)" = 0 ] ||
        fail "protocol errors: $(grep '^daemon ' "$T/st")"
    stop_daemon
}

protected gated shared
# mixed mode (issue 21): exclusive within a class side, a high job beside a
# lower-class one whose memory fits: the same protection as shared mode.
protected mixed mixed
# Issue 21: what a user gets without configuring anything.
protected default default
echo "PASS: $TEST_NAME"
