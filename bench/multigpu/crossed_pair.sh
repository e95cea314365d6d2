#!/usr/bin/env bash
# bench/multigpu/crossed_pair.sh: two jobs coupled crossed over two
# simulated GPUs (the lease model's finding 8), with the daemon's default
# configuration: M (cs_job --devices 0,1) and N (--devices 1,0), each
# copying into a mirror on its other GPU every iteration (--peer-mb: peer
# access couples its gates, so each runs only while it holds both leases),
# ITERS iterations of a 20 ms kernel per GPU. Prints each job's wall time
# from their common start and how often each was granted each GPU.
#
# Run through the suite runner (it sets up the simulated GPUs and a private
# daemon socket), once per build to compare (bench/multigpu/ab_crossed.sh):
#   CUSHARE_BUILD=build tests/run-suite.sh bench/multigpu/crossed_pair.sh
# A timing benchmark, not a test: not in tests/registry.
source "$(dirname "$0")/../../tests/e2e/lib.sh"
export FAKECUDA_DEVICES=2 FAKECUDA_CONCURRENT=1
ITERS=${ITERS:-60}
double=(--peer-mb 1 --mem-mb 2 --iters "$ITERS" --kernel-ns 20000000 --sync-every 1)
grants() { grep -c "debug: gpu $2: grant lease [0-9]* to $1 (pid " "$T/cushared.log" || true; }
start_daemon
t0=$(date +%s.%N)
launch M normal 1 --devices 0,1 "${double[@]}" --seed 3
launch N normal 1 --devices 1,0 "${double[@]}" --seed 4
finish M 300
tm=$(date +%s.%N)
finish N 300
tn=$(date +%s.%N)
for j in M N; do
    grep -q "^cs_job: ok name=$j .* devices=" "$T/$j.out" || fail "$j: $(cat "$T/$j.out")"
done
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
echo "crossed_pair: M $(secs "$t0" "$tm") s, N $(secs "$t0" "$tn") s," \
    "grants M $(grants M 0)/$(grants M 1), N $(grants N 0)/$(grants N 1) (GPU 0/1)"
stop_daemon
echo "PASS: $TEST_NAME"
