#!/usr/bin/env bash
# e2e_node.sh: issue 17, the daemon knows the node's GPUs.
#
# 1. A daemon whose node has another GPU than the simulated one (gpus = a
#    list): a real job under the hook is refused at its ATTACH, says so with
#    the daemon's reason (not "no scheduler"), runs unmanaged to a correct
#    result, and does not knock again at once: over 2.5 s of its run the
#    daemon sees at most 3 more connections (it was ~6500 a second). The
#    daemon's GPU table stays the node's one GPU.
# 2. gpus = auto: the daemon finds the simulated GPU through the driver
#    (no NVML here), and a job attached to it runs managed (granted).
source "$(dirname "$0")/lib.sh"

connections_total() {
    status "$T/$1" || fail "cushared does not answer"
    sed -n 's/.*"connections_total": *\([0-9]*\).*/\1/p' "$T/$1.json"
}

OTHER=GPU-00000000-1111-2222-3333-444444444444
start_daemon "gpus = $OTHER:1G"
launch stranger normal 1 --mem-mb 1 --iters 400 --kernel-ns 10000000 --sync-every 1 --seed 3
wait_trace "${JOB_PID[stranger]}"
c0=$(connections_total st0)
sleep 2.5
c1=$(connections_total st1)
kill -0 "${JOB_PID[stranger]}" 2>/dev/null || fail "the job ended before the 2.5 s were over"
# The two status calls are connections too.
extra=$((c1 - c0 - 1))
echo "connections while the refused job ran 2.5 s: $extra"
[ "$extra" -le 3 ] || fail "the refused job connected $extra times in 2.5 s"
finish stranger 60
grep -q "cushared refused this process: refused: GPU GPU-[0-9a-f-]* is not a GPU of this node" \
    "$T/stranger.err" || fail "the job did not report the refusal: $(cat "$T/stranger.err")"
[ "$(grep -c "cushared refused this process" "$T/stranger.err")" -eq 1 ] ||
    fail "the refusal was logged more than once: $(cat "$T/stranger.err")"
grep -q "no scheduler" "$T/stranger.err" && fail "the job claims there is no scheduler"
[ "$(grep -c '^gpu ' "$T/st1")" -eq 1 ] || fail "the GPU table changed: $(cat "$T/st1")"
grep -q "$OTHER" "$T/st1.json" || fail "status does not show the node's GPU"
stop_daemon

start_daemon
grep -q "1 GPU(s) of this node, from driver" "$T/cushared.log" ||
    fail "the simulated GPU was not discovered: $(cat "$T/cushared.log")"
launch member normal 1 --mem-mb 1 --iters 20 --kernel-ns 1000000 --sync-every 1 --seed 4
finish member 60
grep -q "refused" "$T/member.err" && fail "the discovered GPU was refused: $(cat "$T/member.err")"
grep -Eq "grant|GRANT" "$T/cushared.log" || fail "the job was never granted the GPU"
stop_daemon
echo "e2e_node: ok"
