#!/usr/bin/env bash
# swap_kill.sh: killing a job mid-swap, and the daemon mid-swap.
#
# Three jobs of 150 MiB on a 256 MiB GPU, so every switch swaps. One of
# them, the victim, copies at 0.25 GB/s (FAKECUDA_PCIE_GBPS is per process)
# so that each of its swaps lasts ~300 ms, with iterations of ~50 ms, so a
# SIGKILL 100-120 ms into one lands in the copy. The daemon's debug log
# says when each swap starts.
#
#  1. the victim is killed while it swaps out after a REVOKE (the log shows
#     its REVOKE and no RELEASE before it left), then while it restores
#     after a GRANT (optimized tree only), then while it swaps out for an
#     EVICT: each time the two others finish with right checksums;
#  2. the daemon is SIGKILLed while a job swaps out after a REVOKE, and again
#     while one restores after a GRANT, and restarted at once each time: all
#     three jobs finish with right checksums;
#  3. afterwards the simulated GPU's free memory is what it was at the start.
#
# The jobs that must contend with the victim run until the test touches a
# stop file (cs_job --until-file), not for a fixed count: a fixed count
# raced with the moment awaited (a CI run once saw the other jobs finish, and
# the contention end, before the victim's second REVOKE).
source "$(dirname "$0")/swap_lib.sh"

ARGS=(--mem-mb 150 --allocs 15 --kernel-ns 2000000)
SLOW=0.25
# The contending jobs' least iterations: they run until the stop file in
# any case, and at 12 they went on for seconds after it (each of their
# slices is mostly swapping), half the test's time on a 2-core VM.
MIN_ITERS=3

# Short slices whatever the switches cost (the slow victim's make them
# expensive): the point here is many swaps, not the makespan.
write_conf
sed -i 's/^quantum_cap_ms = .*/quantum_cap_ms = 400/' "$T/cushared.conf"
start_daemon
free0=$(free_mem)
T0=$(now_ms)

slow_job() { # NAME SEED ITERS [cs_job options]
    local name=$1 seed=$2 iters=$3
    shift 3
    FAKECUDA_PCIE_GBPS=$SLOW job "$name" "$seed" "${ARGS[@]}" --iters "$iters" "$@"
}

# One phase: the victim, then (once its context exists: the GPU is going to
# be full) two normal jobs; KIND picks the moment the victim is killed.
kill_job_phase() { # KIND
    local kind=$1 from v a b n stop="$T/stop-$1"
    from=$(log_lines)
    slow_job "v$kind" 7 400
    v=$JOB_PID
    wait_log "client .*: pid $v " "$from" >/dev/null
    job "a$kind" 1 "${ARGS[@]}" --iters "$MIN_ITERS" --until-file "$stop"
    a=$JOB_PID
    job "b$kind" 2 "${ARGS[@]}" --iters "$MIN_ITERS" --until-file "$stop"
    b=$JOB_PID
    case $kind in
    revoke) # its second REVOKE (at the first, the others' memory may not be
        # known yet): drain (<= 1 copy or iteration), then ~300 ms of swap-out
        n=$(wait_log "revoke lease .*\\(pid $v\\)" "$from")
        n=$(wait_log "revoke lease .*\\(pid $v\\)" "$n")
        sleep 0.12 ;;
    grant) # its second GRANT (the first only places memory never written):
        # ~300 ms or more of restore
        n=$(wait_log "grant lease .*\\(pid $v\\)" "$from")
        n=$(wait_log "grant lease .*\\(pid $v\\)" "$n")
        sleep 0.1 ;;
    evict) # evicted as a third party while another job runs
        n=$(wait_log "evict [0-9]+ bytes of pid $v\$" "$from")
        sleep 0.1 ;;
    esac
    kill -9 "$v"
    wait "$v" 2>/dev/null || true
    # It must have died inside that swap: no answer to it in the log.
    local after
    after=$(awk -v s="$n" 'NR > s' "$T/cushared.log")
    case $kind in
    revoke) ! grep -q "(pid $v) released lease" <<<"$after" ||
                fail "the victim finished its swap-out before the kill" ;;
    grant) ! grep -q "switch overhead" <<<"$(grep -B100 "(pid $v) left" <<<"$after")" ||
               fail "the victim finished its restore before the kill" ;;
    esac
    touch "$stop"
    job_ok "a$kind" "$a"
    job_ok "b$kind" "$b"
    echo "$(($(now_ms) - T0)) ms: killed the victim during its $kind swap: the others finished correctly"
}

kill_job_phase revoke
# (Under a sanitizer everything is slower: the restore case is left to the
# optimized tree, the survivors' paths are the same.)
[ -n "$SAN" ] || kill_job_phase grant
kill_job_phase evict
expect_free "$free0"

# ---- the daemon dies mid-swap and comes back -------------------------------------
kill_daemon() { # WHAT
    kill -9 "$DAEMON_PID"
    wait "$DAEMON_PID" 2>/dev/null || true
    echo "--- daemon killed while $1 ---" >>"$T/cushared.log"
    DAEMON_PID=
    start_daemon
}
from=$(log_lines)
stop="$T/stop-daemon"
slow_job s 3 "$MIN_ITERS" --until-file "$stop"
s=$JOB_PID
wait_log "client .*: pid $s " "$from" >/dev/null
job da 4 "${ARGS[@]}" --iters "$MIN_ITERS" --until-file "$stop"
da=$JOB_PID
job db 5 "${ARGS[@]}" --iters "$MIN_ITERS" --until-file "$stop"
db=$JOB_PID
n=$(wait_log "revoke lease .*\\(pid $s\\)" "$from")
n=$(wait_log "revoke lease .*\\(pid $s\\)" "$n")
sleep 0.12
kill_daemon "pid $s swapped out"
n=$(wait_log "grant lease .*\\(pid $s\\)" "$(log_lines)")
sleep 0.1
kill_daemon "pid $s restored"
touch "$stop"
job_ok s "$s"
job_ok da "$da"
job_ok db "$db"
echo "$(($(now_ms) - T0)) ms: the daemon was killed during a swap-out and during a restore: every job finished correctly"
stop_daemon
expect_free "$free0"
echo "swap_kill: ok"
