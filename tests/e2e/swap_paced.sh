#!/usr/bin/env bash
# swap_paced.sh: issue 20: a switch the node's pool is too small for, moved
# in turns (src/sched/takeback.c sd_takeback_paced, hook/swap.c
# cs_swap_lend_back_locked), through the real daemon, hook and pool.
#
# Two jobs of 160 MiB on the 256 MiB simulated GPU (240 MiB beside their
# contexts), switching every 300-1000 ms, and a pool of 96 MiB in 16 MiB
# pieces pinned by the daemon at start: about 80 MiB of the pair is always
# out, and each switch moves about as much out and in again, so the pool
# cannot back both moves at once (the H200's 4 x 45 GB with 8 s slices:
# 56 GiB out, 32 GiB moving, a 62.9 GiB pool). The jobs pin twenty times
# slower than the daemon (FAKECUDA_PIN_GBPS=0.1: 160 ms a piece).
#
#  - both results are right;
#  - the daemon left part of a move to the next holder's ROOMs (its log
#    says so), and a holder gave the pool back the pieces behind its
#    restored memory before asking for room (its hook's log);
#  - every piece is back in the pool at the end, the device memory is free.
# How much the jobs still pinned themselves is printed, not asserted: the
# first switches come before the pool's pieces have moved into place, and
# the simulator's timing moves that figure (the GPU runs measure what
# pacing saves: bench/results/oversubscription.md).
source "$(dirname "$0")/swap_lib.sh"

ITERS=16
[ -n "$SAN" ] && ITERS=10
ARGS=(--mem-mb 160 --allocs 10 --iters "$ITERS" --kernel-ns 10000000)
export CUSHARE_LOG_LEVEL=debug # the hook's line, and the exit summaries

write_conf
printf '%s\n' "pool_min_mb = 96" "pool_max_mb = 104" "pool_piece_mb = 16" \
    "metrics = 127.0.0.1:0" >>"$T/cushared.conf"
sed -i -e 's/^quantum_floor_ms = .*/quantum_floor_ms = 300/' \
    -e 's/^quantum_cap_ms = .*/quantum_cap_ms = 1000/' "$T/cushared.conf"
start_pool_daemon
free0=$(free_mem)
export FAKECUDA_PIN_GBPS=0.1
job pa 1 "${ARGS[@]}"
a=$JOB_PID
job pb 2 "${ARGS[@]}"
b=$JOB_PID
job_ok pa "$a"
job_ok pb "$b"

paced=$(grep -c "wait for the pieces the next holder's restore gives back" "$T/cushared.log" || true)
lent_back=$(cat "$T/pa.err" "$T/pb.err" |
    grep -c "gave the pool back [0-9]* bytes of pieces behind resident memory" || true)
for j in pa pb; do
    line=$(grep "swap backing:" "$T/$j.err") || fail "job $j: no swap backing summary"
    echo "$j: $line"
done
echo "moves paced: $paced; pieces given back before a ROOM: $lent_back times"
[ "$paced" -gt 0 ] || fail "no move was left to the next holder's ROOMs"
[ "$lent_back" -gt 0 ] || fail "no holder gave its pieces back before asking for room"
pool_all_back "both jobs exited"
stop_daemon
expect_free "$free0"
echo "swap_paced: ok"
