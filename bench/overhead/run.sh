#!/usr/bin/env bash
# bench/overhead/run.sh [ROUNDS]: per-call cost of the driver calls the hook
# touches, natively and under libcushare.so, interleaved in one run on the
# same device (simulated or real: whatever libcuda.so.1 the loader finds).
# Prints a markdown table: medians over ROUNDS runs of the per-run medians.
# The hooked runs have no scheduler (CUSHARE_SOCKET points nowhere): the
# gate is open, which is the hot path a lease holder sees.
set -euo pipefail
B=${CUSHARE_BUILD:-build}
rounds=${1:-5}
ops=${OPS:-20000}
modes="launch launch-err memcpy memcpy-sync alloc alloc-big"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$rounds"); do
    "$B/bin/cs_overhead" --ops "$ops" $modes >"$tmp/native.$r"
    CUSHARE_SOCKET=$tmp/none.sock LD_PRELOAD="$B/lib/libcushare.so" \
        "$B/bin/cs_overhead" --ops "$ops" $modes >"$tmp/hooked.$r" 2>/dev/null
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "| call | native ns/call | hooked ns/call | added ns | hooked/native |"
echo "|---|---:|---:|---:|---:|"
for m in $modes; do
    n=$(cat "$tmp"/native.* | awk -v m="$m" '$1==m {print $2}' | median)
    h=$(cat "$tmp"/hooked.* | awk -v m="$m" '$1==m {print $2}' | median)
    awk -v m="$m" -v n="$n" -v h="$h" \
        'BEGIN {printf "| %s | %d | %d | %+d | %.3f |\n", m, n, h, h - n, n ? h / n : 0}'
done
echo
echo "($rounds rounds of $ops calls each, medians; $(date -u +%F), $(uname -m))"
