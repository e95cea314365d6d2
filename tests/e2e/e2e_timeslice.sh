#!/usr/bin/env bash
# e2e_timeslice.sh: issue 7, the scheduler side of channel-group timeslices.
#
# Shared mode: a best-effort job (priority low) holds the GPU; a
# latency-critical job (high) comes and is granted beside it (both fit).
# The daemon must send the BE job TIMESLICE 1 us (be_timeslice_us, the
# default), the BE job's hook must receive it, hand it to its channel-group
# mechanism and report back (TSG_STATE), and `cusharectl status --json`
# must show both: the daemon's request (timeslice_us) and the hook's report
# (tsg_mechanism, tsg_requested_us). When the LC job leaves, the BE job
# must be told 0 and report 0 again.
#
# On the simulated driver no NVIDIA channel group ever appears, so once a
# job has submitted work its mechanism turns `unavailable` (with a reason)
# and the request is refused (-ENOTSUP, -95); a second BE job runs with
# CUSHARE_TSG=off and must report `off`, refused the same way. The daemon
# runs with lc_mechanism = tsg, so that it keeps both BE jobs beside the LC
# job (auto would gate them: e2e_lcgate.sh). No timing is asserted: the
# GPU-side effect is measured on an H100 (docs/tsg.md).
source "$(dirname "$0")/lib.sh"

start_daemon "mode = shared" "idle_release_ms = 1000" "lc_mechanism = tsg"

launch be low 1 --mem-mb 1 --iters 600 --kernel-ns 10000000 --sync-every 1 --seed 1
CUSHARE_TSG=off launch be2 low 1 --mem-mb 1 --iters 600 --kernel-ns 10000000 --sync-every 1 \
    --seed 2
wait_trace "${JOB_PID[be]}"
wait_trace "${JOB_PID[be2]}"
bepid=${JOB_PID[be]} be2pid=${JOB_PID[be2]}

# wait_client PID WHAT KEY=VALUE...: until the status line of PID has every
# KEY=VALUE (10 s at most).
wait_client() {
    local pid=$1 what=$2 line= _ kv ok
    shift 2
    for _ in $(seq 200); do
        if status "$T/st"; then
            line=$(client_line "$T/st" "$pid")
            ok=1
            for kv in "$@"; do
                [ -n "$line" ] && [ "$(field "$line" "${kv%%=*}")" = "${kv#*=}" ] || ok=0
            done
            [ $ok -eq 1 ] && return 0
        fi
        sleep 0.05
    done
    fail "$what: want $*, status says: ${line:-no such client}"
}

# Alone on the GPU (with another BE job): nothing asked, reported as it is.
wait_client "$bepid" "BE alone" timeslice_us=0 tsg=unavailable tsg_requested_us=0 tsg_status=0
wait_client "$be2pid" "BE (CUSHARE_TSG=off) alone" timeslice_us=0 tsg=off tsg_requested_us=0

launch lc high 1 --mem-mb 1 --iters 100 --kernel-ns 10000000 --sync-every 1 --seed 3
lcpid=${JOB_PID[lc]}
wait_trace "$lcpid"
wait_client "$lcpid" "LC holder" state=holding timeslice_us=0 tsg_requested_us=0
wait_client "$bepid" "BE beside the LC job" state=holding timeslice_us=1 tsg=unavailable \
    tsg_requested_us=1 tsg_applied_us=0 tsg_status=-95
wait_client "$be2pid" "BE (CUSHARE_TSG=off) beside the LC job" timeslice_us=1 tsg=off \
    tsg_requested_us=1 tsg_applied_us=0 tsg_status=-95
grep -q '"tsg_reason": "disabled by CUSHARE_TSG=off' "$T/st.json" ||
    fail "no reason for the mechanism that is off: $(cat "$T/st.json")"
grep -q '"tsg_reason": "work was submitted but no compute channel group was seen' "$T/st.json" ||
    fail "no reason for the mechanism that is unavailable: $(cat "$T/st.json")"
"$CTL" --socket "$SOCK" status >"$T/table" || fail "cusharectl status failed"
grep -q "timeslice: asked 1 us; mechanism unavailable" "$T/table" ||
    fail "the status table does not show the timeslice: $(cat "$T/table")"
echo "beside the LC job: $(client_line "$T/st" "$bepid")"

finish lc 60
wait_client "$bepid" "BE after the LC job left" timeslice_us=0 tsg_requested_us=0 \
    tsg_applied_us=0
wait_client "$be2pid" "BE (CUSHARE_TSG=off) after the LC job left" timeslice_us=0 \
    tsg_requested_us=0
echo "after the LC job: $(client_line "$T/st" "$bepid")"

kill -9 "$bepid" "$be2pid"
wait "$bepid" "$be2pid" 2>/dev/null || true
status "$T/st" || fail "status after the jobs"
[ "$(field "$(grep '^daemon ' "$T/st")" protocol_errors)" = 0 ] ||
    fail "protocol errors: $(grep '^daemon ' "$T/st")"
stop_daemon
echo "PASS: $TEST_NAME"
