#!/usr/bin/env bash
# scripts/demo.sh [BUILD]: the daemon and two jobs sharing one GPU (`make demo`).
#
# Two driver-API jobs (cs_job) whose memory does not fit on the GPU together
# run at once under cushared: job "alpha" with weight 1, job "beta" with
# weight 3. While they run, the scheduler's view is printed every second;
# at the end each job's result, the GPU time each got and what was swapped.
# Uses the real GPU when an NVIDIA driver is present, else the simulated GPU
# (build/fakecuda/libcuda.so.1), and says which.
set -euo pipefail
B=${1:-build}
cd "$(dirname "$0")/.."
dir=$B/demo
rm -rf "$dir"
mkdir -p "$dir"
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    [ -n "${DPID:-}" ] && kill "$DPID" 2>/dev/null || true
    rm -f "/dev/shm/fakecuda-demo-$$"
}
trap cleanup EXIT

if [ -e /dev/nvidiactl ] && command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    gpu_mb=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits | head -1)
    echo "Using the real GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), ${gpu_mb} MiB"
    mem=$((gpu_mb * 55 / 100))
    kernel_ns=20000000
    reserve="client_reserve_mb = 512"   # what a real context costs
else
    export LD_LIBRARY_PATH=$PWD/$B/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export FAKECUDA_SHM=demo-$$ FAKECUDA_MEM_MB=512 FAKECUDA_PCIE_GBPS=2
    export FAKECUDA_TRACE=$PWD/$dir/trace.txt
    gpu_mb=512
    echo "No NVIDIA GPU found: using the simulated GPU ($B/fakecuda/libcuda.so.1:" \
         "${FAKECUDA_MEM_MB} MiB, ${FAKECUDA_PCIE_GBPS} GB/s copies, kernels run on the CPU)"
    mem=$((gpu_mb * 55 / 100))
    kernel_ns=20000000
    # The simulated GPU is small: the default 512 MiB reserve would be all
    # of it and turn the daemon's memory planning off. Its contexts cost 8 MiB.
    reserve="mem_reserve_mb = 16
client_reserve_mb = 8"
fi
echo "Two jobs of ${mem} MiB each on a ${gpu_mb} MiB GPU: they do not fit together, so"
echo "cushared gives the GPU to one at a time and the loser's memory is swapped to host memory."
echo

cat >"$dir/cushared.conf" <<EOF
[cushared]
quantum_floor_ms = 200
quantum_cap_ms = 1000
$reserve
EOF
"$B/bin/cushared" --socket "$dir/cushared.sock" --config "$dir/cushared.conf" \
    --log-level info 2>"$dir/cushared.log" &
DPID=$!
for _ in $(seq 100); do [ -S "$dir/cushared.sock" ] && break; sleep 0.05; done

job() { # NAME WEIGHT SEED
    CUSHARE_LOG_LEVEL=info "$B/bin/cushare-run" --socket "$dir/cushared.sock" --name "$1" \
        --weight "$2" -- \
        "$B/bin/cs_job" --mem-mb "$mem" --iters 40 --kernel-ns "$kernel_ns" --sync-every 1 \
        --seed "$3" --name "$1" >"$dir/$1.out" 2>"$dir/$1.err"
}
job alpha 1 1 &
pids+=($!)
job beta 3 2 &
pids+=($!)

for i in 1 2 3; do
    sleep 1
    echo "---- cusharectl status (t = ${i} s) ----"
    "$B/bin/cusharectl" --socket "$dir/cushared.sock" status || true
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
pids=()
echo
echo "---- results ----"
cat "$dir/alpha.out" "$dir/beta.out"
if [ -n "${FAKECUDA_TRACE:-}" ] && [ -s "$FAKECUDA_TRACE" ]; then
    echo
    echo "---- GPU time per job, from the simulated GPU's kernel trace ----"
    for n in alpha beta; do
        pid=$(sed -n 's/.*pid=\([0-9]*\).*/\1/p' "$dir/$n.out")
        awk -v p="$pid" -v n="$n" '$2 == p {t += $6 - $5; k++}
            END {printf "%-6s %6.2f s of GPU time in %d kernels\n", n, t / 1e9, k}' "$FAKECUDA_TRACE"
    done
fi
echo
echo "---- what each job saw (libcushare.so's summary at exit) ----"
grep -h "summary" "$dir/alpha.err" "$dir/beta.err" || true
[ $rc -eq 0 ] && echo && echo "demo: both jobs finished with correct results (logs in $dir/)"
exit $rc
