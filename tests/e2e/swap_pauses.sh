#!/usr/bin/env bash
# swap_pauses.sh: on an oversubscribed GPU, a job that pauses on the host for
# less time than a switch costs keeps its lease (the ski-rental rule of the
# daemon's idle revokes, policy.c idle_grace_ns).
#
# Three jobs of 150 MiB on the 256 MiB simulated GPU (only one fits with
# another's memory gone), copying at 0.25 GB/s, so a switch moves ~150 MiB
# each way and costs ~0.4-0.6 s. Each iteration is 150 ms of kernels followed by
# a 200 ms host pause with the GPU idle (--gap-ms), and the daemon's idle
# period is 50 ms: every pause makes a job report itself idle while the
# others wait. Revoking it for that would cost a switch per pause (18 in
# all, 6 iterations each); the daemon instead waits for a switch's worth of
# idleness, and the pauses end first. (Measured on a 2-core VM, 2026-12-02:
# 0 idle revokes, 4 grants, makespan 11.6-11.9 s; with the rule taken out
# of policy.c idle_grace_ns, 20 idle revokes, 22 grants and 23 s. At 12
# iterations it was 36 idle revokes against 0, and 19 s of make test.)
#
#  - every checksum is right;
#  - at most 4 idle revokes (REVOKE reason 3) in the whole run: the first
#    pause or two, before any switch has been measured and the predicted
#    cost alone (15 ms at 10 GB/s) is below the idle period, may still go;
#  - the daemon did switch the jobs (the premise: they do not fit together).
source "$(dirname "$0")/swap_lib.sh"

ARGS=(--mem-mb 150 --allocs 15 --iters 6 --kernel-ns 10000000 --gap-ms 200)
write_conf
sed -i 's/^idle_release_ms = .*/idle_release_ms = 50/' "$T/cushared.conf"
start_daemon
free0=$(free_mem)
from=$(log_lines)
t0=$(now_ms)

pids=()
for s in 1 2 3; do
    FAKECUDA_PCIE_GBPS=0.25 job "p$s" "$s" "${ARGS[@]}"
    pids+=("$JOB_PID")
done
for s in 1 2 3; do
    job_ok "p$s" "${pids[$((s - 1))]}"
done
makespan=$(($(now_ms) - t0))

after=$(awk -v s="$from" 'NR > s' "$T/cushared.log")
idle=$(grep -c 'revoke lease .*, reason 3$' <<<"$after" || true)
grants=$(grep -c 'grant lease ' <<<"$after" || true)
overhead=$(grep -o 'smoothed [0-9.]* ms' <<<"$after" | tail -n 1)
echo "3 jobs pausing 200 ms per iteration: makespan $makespan ms, $grants grants, $idle idle revokes, switch overhead $overhead"
[ "$grants" -ge 3 ] || fail "only $grants grants: the jobs were never switched"
[ "$idle" -le 4 ] || fail "$idle idle revokes: jobs were switched out at their pauses"
stop_daemon
expect_free "$free0"
echo "swap_pauses: ok"
