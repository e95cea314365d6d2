#!/usr/bin/env bash
# swap_graphs.sh: issue 19's acceptance on the simulated GPU: jobs that
# build CUDA graphs explicitly (cs_graphjob: memset, memcpy and kernel
# nodes, node updates of the instantiated graph, a texture object and a
# stream capture per iteration) while their memory is off the GPU, two at
# once under cushared with swap on, each using ~60% of the GPU's memory
# (150 MiB of FAKECUDA_MEM_MB=256, 8 allocations, two of them 512 KiB).
#
#  - both jobs' results are right (every allocation's sum, every graph's
#    copy summed on the device);
#  - each built graphs while its memory was allocated but not yet placed
#    (--early-graphs: its first graphs are built after allocating, before
#    its first GPU call, so before its first grant);
#  - each built graphs while its memory was swapped out and its main
#    thread waited for the GPU (--swapped-graphs: a second thread builds
#    one whenever it sees that, and the job iterates until it has). Certain
#    with two jobs: each keeps asking for the GPU until then, so each
#    slice of one ends with a revoke that evicts it for the other, which
#    needs the room (150 + 150 MiB do not fit in 256);
#  - memory really moved both ways, and none is left behind.
#
# Under a sanitizer the jobs iterate less: the point there is the memory
# checking of the same paths.
source "$(dirname "$0")/swap_lib.sh"
GJOB=$B/bin/cs_graphjob
require "$GJOB"

ITERS=24
[ -n "$SAN" ] && ITERS=8
ARGS=(--mb 150 --n 8 --iters "$ITERS" --early-graphs 2 --swapped-graphs 1 --wait-s 60)

# Short slices: each job needs only a few switches.
write_conf
sed -i 's/^quantum_cap_ms = .*/quantum_cap_ms = 500/' "$T/cushared.conf"
start_daemon
free0=$(free_mem)

# gjob NAME SEED: cs_graphjob under the hook in the background (JOB_PID).
gjob() {
    local name=$1 seed=$2
    CUSHARE_NAME=$name LD_PRELOAD="$PRELOAD" "$GJOB" --name "$name" --seed "$seed" "${ARGS[@]}" \
        >"$T/$name.out" 2>"$T/$name.err" &
    JOB_PID=$!
    JOB_PIDS+=("$JOB_PID")
}

status_json >"$T/before.json"
gjob g1 1
p1=$JOB_PID
gjob g2 2
p2=$JOB_PID
job_ok g1 "$p1" '^{"ok": true'
job_ok g2 "$p2" '^{"ok": true'
status_json >"$T/after.json"

for j in g1 g2; do
    echo "$j: $(cat "$T/$j.out")"
    res=$(json_num "$T/$j.out" graphs_reserved)
    swp=$(json_num "$T/$j.out" graphs_swapped)
    wat=$(json_num "$T/$j.out" watch_builds)
    [ "$res" -ge 1 ] || fail "$j built no graph before its memory was placed"
    [ "$swp" -ge 1 ] && [ "$wat" -ge 1 ] || fail "$j built no graph while swapped out"
done

delta() { # KEY: the GPU counter's growth during the run
    echo $(($(json_num "$T/after.json" "$1") - $(json_num "$T/before.json" "$1")))
}
out=$(($(delta swap_out_bytes) >> 20))
in=$(($(delta swap_in_bytes) >> 20))
echo "swapped out $out MiB, in $in MiB, $(delta switches) switches"
[ "$out" -ge 52 ] || fail "only $out MiB swapped out"
[ "$in" -ge 52 ] || fail "only $in MiB swapped in"
[ "$(json_num "$T/after.json" room_refused)" -eq 0 ] || fail "a ROOM was refused"
expect_free "$free0"
echo "swap_graphs: ok"
