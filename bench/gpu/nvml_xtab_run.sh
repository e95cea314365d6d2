#!/usr/bin/env bash
# bench/gpu/nvml_xtab_run.sh: what nvidia-smi reads through NVML's private
# export table (issue 22; bench/results/nvml.md). On a GPU machine, from the
# repository root, with PyTorch installed: builds bench/gpu/nvml_xtab.c,
# starts three PyTorch processes holding 256/512/768 MiB, and runs
# nvidia-smi under the probe: the tables asked for; each entry called, its
# arguments and what they point to (entry 212's records in full, 64 KiB);
# nvidia-smi with the table refused. Logs under $OUT (default /tmp/xtab).
set -u
OUT=${OUT:-/tmp/xtab}
mkdir -p "$OUT"
python3 bench/gpu/nvml_xtab_gen.py >/tmp/xtab_tramp.inc
gcc -O1 -shared -fPIC -I/tmp bench/gpu/nvml_xtab.c -o /tmp/xtab.so -ldl || exit 1
for g in 1 2 3; do
    python3 -c "import torch,time; x=torch.ones($g<<26,device='cuda'); torch.cuda.synchronize(); print('ready',flush=True); time.sleep(120)" >/tmp/xtab-h$g.out 2>&1 &
done
for _ in $(seq 60); do
    grep -q ready /tmp/xtab-h1.out && grep -q ready /tmp/xtab-h2.out && grep -q ready /tmp/xtab-h3.out && break
    sleep 1
done
pgrep -f 'import torch,time' | while read -r p; do printf 'holder pid %d = 0x%x\n' "$p" "$p"; done
q="--query-compute-apps=pid,used_memory --format=csv"
smi() { env LD_PRELOAD=/tmp/xtab.so "$@" nvidia-smi; }
XTAB_BIG=212 XTAB_MAX_LINES=20000 XTAB_MODE=trace smi $q >"$OUT/trace_query.txt" 2>&1
XTAB_BIG=212 XTAB_MAX_LINES=40000 XTAB_MODE=trace smi >"$OUT/trace_default.txt" 2>&1
XTAB_MODE=trace XTAB_MAX_LINES=40000 LD_PRELOAD=/tmp/xtab.so nvidia-smi -q -d PIDS >"$OUT/trace_pids.txt" 2>&1
XTAB_MODE=deny=0 smi >"$OUT/deny0.txt" 2>&1
echo "== tables"; grep -h 'table 0 uuid' "$OUT"/trace_*.txt | sed 's/.*table 0/table 0/; s/table 0x[0-9a-f]*/table/' | sort | uniq -c
echo "== entries called (default view)"; grep -oE 't0 e[0-9]+ \(' "$OUT/trace_default.txt" | sort | uniq -c
echo "== with the table refused"; head -3 "$OUT/deny0.txt"
pkill -f 'import torch,time'
