#!/usr/bin/env bash
# swap_start.sh: issue 20: two jobs that each fit the GPU alone but not
# together, the second arriving while the first runs, each allocating
# tensor by tensor (--alloc-each) as a framework does. The second waits at
# its first copy with a third of its memory; all of it would still fit
# beside the first. The daemon expects a job that has not run yet to grow
# like the largest one that has (policy.c, expected_overflow), so the first
# keeps the GPU for the quantum of that overflow and runs its job, rather
# than being revoked at the floor and having its memory moved out by the
# second's growth and back at the end (on the H200: held / work 1.086
# against 1.033; bench/results/oversubscription.md, 2026-11-30). The hook
# reports the waiter's footprint with its ACQUIRE (report.c,
# cs_report_usage_locked): the first USAGE tick after the allocation would
# come after the decision.
#
# 150 MiB each on the 256 MiB simulated GPU (232 MiB beside two contexts),
# in 3 allocations; switch_cost_target 0.001 makes the quantum of the
# expected ~70 MiB overflow (7 ms at the predicted 10 GB/s) ~7 s, beyond
# the first job's work even under a sanitizer, against a 100 ms floor.
#
#  - both checksums are right;
#  - while the second waited, the daemon's quantum was above 1 s (it
#    expected the growth: without it, 100 ms);
#  - no lease was revoked for its quantum (REVOKE reason 1): the first job
#    held the GPU until its work was done;
#  - the second was granted once, after the first.
source "$(dirname "$0")/swap_lib.sh"

ITERS=10
[ -n "$SAN" ] && ITERS=6
ARGS=(--mem-mb 150 --allocs 3 --alloc-each --iters "$ITERS" --kernel-ns 10000000)
write_conf
sed -i -e 's/^quantum_floor_ms = .*/quantum_floor_ms = 100/' \
    -e 's/^quantum_cap_ms = .*/quantum_cap_ms = 30000/' \
    -e 's/^switch_cost_target = .*/switch_cost_target = 0.001/' "$T/cushared.conf"
start_daemon
free0=$(free_mem)
from=$(log_lines)

job first 1 "${ARGS[@]}"
first=$JOB_PID
n=$(wait_log "grant lease .* to first " "$from") || fail "the first job was never granted"
# The second comes once the daemon knows the first's whole memory (its
# three allocations and their copies; then it computes): the expected
# growth is the largest footprint of a job that has run. A fixed pause was
# not enough on a 2-core VM whose first writes of fresh pages cost
# 1.3 ms/MiB (2026-12-01): the first had reported two allocations of three,
# the second was expected to grow to 100 MiB, which fit, and the quantum
# stayed at the floor.
wait_footprint first "$first" $((150 << 20))
job second 2 "${ARGS[@]}"
second=$JOB_PID
q=
for i in $(seq 500); do
    st=$(status_json)
    if grep '"name": "second"' <<<"$st" | grep -q '"state": "waiting"'; then
        q=$(json_num <(echo "$st") quantum_ms)
        break
    fi
    kill -0 "$first" 2>/dev/null || break
    sleep 0.01
done
job_ok first "$first"
job_ok second "$second"

after=$(awk -v s="$from" 'NR > s' "$T/cushared.log")
quantum_revokes=$(grep -c 'revoke lease .*, reason 1$' <<<"$after" || true)
second_grants=$(grep -c 'grant lease .* to second ' <<<"$after" || true)
echo "second waited at a quantum of ${q:-?} ms; $quantum_revokes quantum revokes;" \
    "second granted $second_grants time(s)"
[ -n "$q" ] || fail "the second job was never seen waiting while the first ran"
[ "${q%.*}" -gt 1000 ] || fail "quantum ${q} ms while a new waiter of a third of the first's size waited"
[ "$quantum_revokes" -eq 0 ] || fail "$quantum_revokes leases revoked for their quantum"
[ "$second_grants" -eq 1 ] || fail "the second job was granted $second_grants times"
stop_daemon
expect_free "$free0"
echo "swap_start: ok"
