#!/usr/bin/env bash
# swap_takeback.sh: issue 20: the pool's pieces taken back from pin-ahead
# for the swap-outs of a switch (src/sched/takeback.c), through the real
# daemon, hook and pool.
#
# Three jobs of 80 MiB on the 256 MiB simulated GPU (264 MiB with their
# contexts) switching every 300 ms, and a pool of 64 MiB in 16 MiB pieces,
# pinned by the daemon at start; the jobs pin ten times slower than the
# daemon (FAKECUDA_PIN_GBPS=0.2: 80 ms a piece). Pin-ahead lends the pool to the jobs furthest from
# running at each switch; the order moves as the holder runs, and a later
# switch's mover then lacks backing while another job's resident memory
# holds the pool's pieces. The daemon asks that job for them (EVICT
# GIVEBACK); it frees the backing of its resident memory and RETURNs the
# pieces, which the mover borrows.
#
#  - every job's result is right;
#  - GIVEBACKs were sent, every one answered, and pieces given back; the
#    GPU's metrics (cushare_gpu_givebacks_total, _given_back_bytes_total)
#    count the same;
#  - every piece is back in the pool at the end (none lent), and the
#    device memory is all free.
# How much the movers still pin themselves is printed, not asserted: a
# mover pins a piece while the pieces asked back for it are on their way,
# and the simulated driver's timing makes that count vary (2-32 MiB a job
# with or without takeback here); what takeback saves is measured on the
# GPU (bench/results/oversubscription.md: a 12-26 GiB swap-out pinning its
# own at 2-3 GB/s).
source "$(dirname "$0")/swap_lib.sh"

ITERS=20
[ -n "$SAN" ] && ITERS=14
ARGS=(--mem-mb 80 --allocs 5 --iters "$ITERS" --kernel-ns 10000000)
export CUSHARE_LOG_LEVEL=info # the jobs' exit summaries

write_conf
# swap_in_turns off: what the moves lack is asked back rather than left to
# the next holder's ROOMs (swap_paced.sh covers that).
printf '%s\n' "pool_min_mb = 64" "pool_max_mb = 72" "pool_piece_mb = 16" \
    "metrics = 127.0.0.1:0" "swap_in_turns = false" >>"$T/cushared.conf"
sed -i -e 's/^quantum_floor_ms = .*/quantum_floor_ms = 300/' \
    -e 's/^quantum_cap_ms = .*/quantum_cap_ms = 300/' "$T/cushared.conf"
start_pool_daemon
free0=$(free_mem)
export FAKECUDA_PIN_GBPS=0.2
from=$(log_lines)
job ja 1 "${ARGS[@]}"
a=$JOB_PID
job jb 2 "${ARGS[@]}"
b=$JOB_PID
job jc 3 "${ARGS[@]}"
c=$JOB_PID
job_ok ja "$a"
job_ok jb "$b"
job_ok jc "$c"

after=$(awk -v s="$from" 'NR > s' "$T/cushared.log")
asked=$(grep -c 'give back [0-9]* bytes of pool pieces' <<<"$after" || true)
given=$(grep -o 'gave back [0-9]* bytes of pool pieces' <<<"$after" | awk '{ s += $3 } END { print s + 0 }')
answered=$(grep -c 'gave back [0-9]* bytes of pool pieces' <<<"$after" || true)
own=0
for j in ja jb jc; do
    line=$(grep "swap backing:" "$T/$j.err") || fail "job $j: no swap backing summary"
    echo "$j: $line"
    mib=$(sed -n 's/.*pinned here \([0-9.]*\) \([KMG]\)iB.*/\1 \2/p' <<<"$line" |
        awk '{ m = $1; if ($2 == "K") m /= 1024; if ($2 == "G") m *= 1024; printf "%d", m }')
    [ "${mib:-0}" -gt "$own" ] && own=${mib:-0}
done
echo "$asked GIVEBACKs ($answered answered), $((given >> 20)) MiB given back;" \
    "the most a job pinned itself: $own MiB"
[ "$asked" -gt 0 ] || fail "no GIVEBACK was sent"
[ "$answered" -eq "$asked" ] || fail "$asked GIVEBACKs sent, $answered answered"
[ "$given" -gt 0 ] || fail "no pool pieces were given back"
[ "$(pool_metric cushare_gpu_givebacks_total)" = "$asked" ] ||
    fail "cushare_gpu_givebacks_total $(pool_metric cushare_gpu_givebacks_total), $asked sent"
[ "$(pool_metric cushare_gpu_given_back_bytes_total)" = "$given" ] ||
    fail "cushare_gpu_given_back_bytes_total $(pool_metric cushare_gpu_given_back_bytes_total), $given given back"
pool_all_back "every job exited"
stop_daemon
expect_free "$free0"
echo "swap_takeback: ok"
