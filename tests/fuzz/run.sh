#!/bin/sh
# tests/fuzz/run.sh short|long: runs both libFuzzer targets.
#
#   short  ~12 s each, part of the optimized tree's test suite
#   long   FUZZ_SECONDS each (default 600), for `make fuzz-long`; prints
#          libFuzzer's final statistics for tests/fuzz/README.md
#
# The corpus of each target lives in $CUSHARE_BUILD/fuzz/corpus-<target> and
# grows from run to run; it is seeded from gen_seeds (valid records and
# scripts built from the codec itself). Crashes are written to
# $CUSHARE_BUILD/fuzz/findings/ and fail the run.
set -eu
mode=${1:-short}
build=${CUSHARE_BUILD:-build}
dir=$build/fuzz
case $mode in
    short) secs=${FUZZ_SECONDS:-12} ;;
    long) secs=${FUZZ_SECONDS:-600} ;;
    *) echo "usage: $0 short|long" >&2; exit 2 ;;
esac
for t in proto dispatch; do
    [ -x "$dir/fuzz_$t" ] || { echo "$dir/fuzz_$t not built (make fuzz)" >&2; exit 1; }
done
mkdir -p "$dir/findings"
status=0
for t in proto dispatch; do
    seeds=$dir/seeds-$t corpus=$dir/corpus-$t
    rm -rf "$seeds"
    mkdir -p "$seeds" "$corpus"
    "$dir/gen_seeds" "$t" "$seeds"
    echo "fuzz_$t: $secs s"
    # The targets log at error level only, so stderr stays open for the
    # sanitizers' reports.
    if ! "$dir/fuzz_$t" -max_total_time="$secs" -timeout=10 -max_len=4096 \
            -print_final_stats=1 \
            -artifact_prefix="$dir/findings/$t-" "$corpus" "$seeds" 2>"$dir/fuzz_$t.log"; then
        status=1
        tail -n 40 "$dir/fuzz_$t.log"
    fi
    grep -E '^(#[0-9]+.*DONE|stat::)' "$dir/fuzz_$t.log" || true
done
exit $status
