#!/usr/bin/env bash
# bench/gpu/exitprobe/probe.sh: where a PyTorch job's end goes, under the
# hook and a daemon. probe.py runs a workload and stamps the time at its last
# line and at Python's atexit; exitprobe.so, registered then, stamps C's
# exit() (its atexit handler runs first there) and its destructor; the hook's
# debug log has the idle report, the daemon's the disconnect. GBS: the
# working sets to run (default 45 45 45 4). Needs bin/ and lib/ of a build
# ($CUSHARE_BUILD, default build) and gcc; writes under $OUT.
set -u
cd "$(dirname "$0")/../../.."
B=${CUSHARE_BUILD:-build}
GL=$PWD/$B/gpu-libs
OUT=${OUT:-/tmp/exitprobe}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export EXITPROBE_SO=$OUT/exitprobe.so
gcc -O2 -Wall -shared -fPIC -o "$EXITPROBE_SO" bench/gpu/exitprobe/exitprobe.c || exit 1
d=$(mktemp -d)
printf '[cushared]\n' >"$d/c.conf"
LD_LIBRARY_PATH=$GL "$B/bin/cushared" --socket "$d/s" --config "$d/c.conf" --log-level debug \
    2>>"$OUT/cushared.log" &
dpid=$!
for _ in $(seq 100); do [ -S "$d/s" ] && break; sleep 0.05; done
for gb in ${GBS:-45 45 45 4}; do
    LD_LIBRARY_PATH=$GL CUSHARE_LOG_LEVEL=debug "$B/bin/cushare-run" --socket "$d/s" \
        --name "p$gb" -- python3 bench/gpu/exitprobe/probe.py bench/gpu/workloads/pytorch_add.py \
        --gb "$gb" --iters 100 >"$OUT/p$gb.log" 2>&1
    echo "== $gb GB"
    grep -E 'PROBE|GPU 0: idle|summary' "$OUT/p$gb.log" | cut -c1-120
    grep disconnected "$OUT/cushared.log" | tail -1 | cut -c1-60
done
kill "$dpid"
wait "$dpid" 2>/dev/null
rm -rf "$d"
