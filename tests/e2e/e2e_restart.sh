#!/usr/bin/env bash
# e2e_restart.sh: issue 4 acceptance, daemon killed and restarted mid-run.
#
# Three jobs share the GPU (exclusive, 100 ms slices). Once all three have
# run, cushared is killed with SIGKILL (socket file, lock and state file
# left behind as after a crash) and started again 300 ms later on the same
# socket and state file. Then:
#  - `cusharectl status` of the new daemon lists the three jobs again
#    (re-registered: same pids, names, weights);
#  - every job finishes with correct results, and ran all of its kernels;
#  - the kernel trace shows no overlap between processes at any time,
#    before, during and after the outage (the holder keeps the GPU while
#    the daemon is away; the others wait). As in e2e_exclusive.sh the jobs
#    run with FAKECUDA_CONCURRENT=1, so only cushare keeps them apart.
# The hard case is made to happen every time: the job that held the GPU at
# the crash (read from the state file the daemon leaves, see
# src/sched/state.c, and the old daemon's log) is stopped (SIGSTOP) across
# the restart, so the two waiters re-register first. The new daemon must
# not grant the GPU to either of them while the holder, still running
# with its gate open as far as it knows, has not come back: the status
# shows the GPU restoring with no holder, and after SIGCONT the holder
# re-registers, claims its lease, and scheduling resumes.
source "$(dirname "$0")/lib.sh"
export FAKECUDA_CONCURRENT=1

ITERS=120
KERNELS=$((ITERS * 2 + 1))
# A long reconnect grace, so that the stopped holder is back well within
# it (after the grace the daemon would rightly stop waiting for it).
conf=("mode = exclusive" "quantum_floor_ms = 100" "quantum_cap_ms = 100"
      "reconnect_grace_ms = 10000")
start_daemon "${conf[@]}"
for i in 1 2 3; do
    launch "r$i" normal "$i" --mem-mb 2 --iters $ITERS --kernel-ns 5000000 --sync-every 2 \
        --seed $((10 + i))
done
for i in 1 2 3; do wait_trace "${JOB_PID[r$i]}"; done
status "$T/before" || fail "status before the restart"
cat "$T/before"
epoch1=$(sed -n 's/.*"epoch": \([0-9]*\).*/\1/p' "$T/before.json")

old_daemon=$DAEMON_PID
kill_daemon
echo "cushared (pid $old_daemon) killed"
# Who held the GPU: `gpu <uuid> <index> <mem> <holder client id>[:<revoke reason>]...`.
[ -f "$T/cushared.state" ] || fail "the daemon left no state file"
ids=$(sed -n 's/^gpu [^ ]* [0-9]* [0-9]*//p' "$T/cushared.state" | sed 's/:[0-9]*//g')
holders=()
for id in $ids; do
    p=$(sed -n "s/.* client $id: pid \([0-9]*\) .*/\1/p" "$T/cushared.log")
    [ -n "$p" ] || fail "state file names client $id, which the log does not know"
    holders+=("$p")
done
[ ${#holders[@]} -eq 1 ] ||
    fail "the state file names ${#holders[@]} holders of an exclusive GPU: $(cat "$T/cushared.state")"
holder=${holders[0]}
others=()
for i in 1 2 3; do
    [ "${JOB_PID[r$i]}" = "$holder" ] || others+=("${JOB_PID[r$i]}")
done
echo "holder at the crash: pid $holder; waiters: ${others[*]}"
kill -STOP "$holder" 2>/dev/null ||
    fail "the holder (pid $holder) died with the daemon: $(cat "$T"/r?.out)"
mv "$T/cushared.log" "$T/cushared.log.1"
sleep 0.3
for i in 1 2 3; do
    kill -0 "${JOB_PID[r$i]}" 2>/dev/null ||
        fail "job r$i died with the daemon: $(cat "$T/r$i.out" "$T/r$i.err")"
done
start_daemon "${conf[@]}"
echo "cushared restarted (pid $DAEMON_PID)"

# The waiters come back (the hook retries with a backoff of 50 ms doubling
# up to 2 s: within about half a second after a 300 ms outage) ...
back=0
for _ in $(seq 300); do
    if status "$T/mid"; then
        n=0
        for p in "${others[@]}"; do
            if [ -n "$(client_line "$T/mid" "$p")" ]; then n=$((n + 1)); fi
        done
        if [ $n -eq 2 ]; then
            back=1
            break
        fi
    fi
    sleep 0.01
done
[ $back -eq 1 ] || fail "the waiters did not re-register with the new daemon: $(cat "$T/mid")"
# ... and must be kept waiting while the holder is away: give the daemon
# 200 ms to get it wrong.
sleep 0.2
status "$T/mid" || fail "status while the holder is stopped"
cat "$T/mid"
g=$(grep '^gpu ' "$T/mid")
[ "$(field "$g" holders)" = 0 ] && [ "$(field "$g" restoring)" = 1 ] ||
    fail "the new daemon granted the GPU while the previous holder (pid $holder) was away: $g"
kill -CONT "$holder"

back=0
for _ in $(seq 300); do
    if status "$T/after"; then
        n=0
        for i in 1 2 3; do
            if [ -n "$(client_line "$T/after" "${JOB_PID[r$i]}")" ]; then n=$((n + 1)); fi
        done
        if [ $n -eq 3 ]; then
            back=1
            break
        fi
    fi
    sleep 0.01
done
[ $back -eq 1 ] || fail "the jobs did not all re-register with the new daemon: $(cat "$T/after")"
cat "$T/after"
epoch2=$(sed -n 's/.*"epoch": \([0-9]*\).*/\1/p' "$T/after.json")
[ "$epoch1" != "$epoch2" ] || fail "status after the restart shows the old daemon's epoch"
for i in 1 2 3; do
    c=$(client_line "$T/after" "${JOB_PID[r$i]}")
    [ "$(field "$c" name)" = "r$i" ] && [ "$(field "$c" weight)" = "$i" ] ||
        fail "r$i re-registered with other settings: $c"
done
[ "$(field "$(grep '^gpu ' "$T/after")" holders)" -le 1 ] || fail "two holders after the restart"

for i in 1 2 3; do finish "r$i" 60; done
stop_daemon

"$TC" "$T/trace" overlap || fail "kernels of different processes overlap across the restart"
"$TC" "$T/trace" summary | tee "$T/summary"
for i in 1 2 3; do
    s=$(grep "^pid=${JOB_PID[r$i]} " "$T/summary")
    [ "$(field "$s" kernels)" -eq $KERNELS ] ||
        fail "r$i ran $(field "$s" kernels) kernels, want $KERNELS"
done
# The new daemon resumed because the holder came back, not because the
# grace ran out.
grep -q "every previous holder is back" "$T/cushared.log" ||
    fail "the restarted daemon did not see the previous holder come back"
echo "e2e_restart: ok"
