#!/usr/bin/env bash
# bench/overhead/run.sh [ROUNDS]: per-call cost of the driver calls the hook
# touches, natively and under libcushare.so, interleaved in one run on the
# same device (simulated or real: whatever libcuda.so.1 the loader finds).
# Prints a markdown table: medians over ROUNDS runs of the per-run medians.
# The hooked runs have no scheduler (CUSHARE_SOCKET points nowhere): the
# gate is open, which is the hot path a lease holder sees.
# With OLD_HOOK=path/to/another/libcushare.so (a build from before a
# change), each round also runs under that library, interleaved with the
# others, and the table gets its column and the new/old ratio: a before and
# after measured side by side.
set -euo pipefail
B=${CUSHARE_BUILD:-build}
rounds=${1:-5}
ops=${OPS:-20000}
modes="launch launch-err memcpy memcpy-sync alloc alloc-big"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq "$rounds"); do
    "$B/bin/cs_overhead" --ops "$ops" $modes >"$tmp/native.$r"
    if [ -n "${OLD_HOOK:-}" ]; then
        CUSHARE_SOCKET=$tmp/none.sock LD_PRELOAD="$OLD_HOOK" \
            "$B/bin/cs_overhead" --ops "$ops" $modes >"$tmp/old.$r" 2>/dev/null
    fi
    CUSHARE_SOCKET=$tmp/none.sock LD_PRELOAD="$B/lib/libcushare.so" \
        "$B/bin/cs_overhead" --ops "$ops" $modes >"$tmp/hooked.$r" 2>/dev/null
done
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# The spread of the per-run medians: min-max.
spread() { sort -n | awk '{a[NR]=$1} END {printf "%d-%d", a[1], a[NR]}'; }
of() { cat "$tmp"/"$1".* | awk -v m="$2" '$1==m {print $2}'; }
if [ -n "${OLD_HOOK:-}" ]; then
    echo "| call | native ns/call | old hook ns/call (spread) | new hook ns/call (spread) | new - old ns | new/old |"
    echo "|---|---:|---:|---:|---:|---:|"
else
    echo "| call | native ns/call | hooked ns/call | added ns | hooked/native |"
    echo "|---|---:|---:|---:|---:|"
fi
for m in $modes; do
    n=$(of native "$m" | median)
    h=$(of hooked "$m" | median)
    if [ -n "${OLD_HOOK:-}" ]; then
        o=$(of old "$m" | median)
        awk -v m="$m" -v n="$n" -v h="$h" -v o="$o" -v os="$(of old "$m" | spread)" \
            -v hs="$(of hooked "$m" | spread)" \
            'BEGIN {printf "| %s | %d | %d (%s) | %d (%s) | %+d | %.3f |\n", m, n, o, os, h, hs, \
                    h - o, o ? h / o : 0}'
    else
        awk -v m="$m" -v n="$n" -v h="$h" \
            'BEGIN {printf "| %s | %d | %d | %+d | %.3f |\n", m, n, h, h - n, n ? h / n : 0}'
    fi
done
echo
echo "($rounds rounds of $ops calls each, medians; $(date -u +%F), $(uname -m))"
