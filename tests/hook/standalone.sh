#!/bin/sh
# No scheduler: a job runs unmanaged, correctly, with exactly one warning,
# and never exits because the daemon is missing. With
# CUSHARE_REQUIRE_DAEMON=1 it waits instead (checked with a time limit).
set -eu
B=${CUSHARE_BUILD:-build}
T=${TEST_TMP:-/tmp}
hook=$B/lib/libcushare.so
pre="${SAN_RUNTIME:+$SAN_RUNTIME }$hook"
export CUSHARE_SOCKET=$T/nobody-listens.sock
LD_PRELOAD="$pre" "$B/bin/cs_job" --mem-mb 8 --iters 5 --kernel-ns 100000 >"$T/out" 2>"$T/err"
cat "$T/out" "$T/err"
grep -q '^cs_job: ok' "$T/out"
n=$(grep -c 'no scheduler' "$T/err" || true)
[ "$n" -eq 1 ] || { echo "expected one 'no scheduler' warning, got $n"; exit 1; }
# Required daemon: the job must still be waiting after 2 s (not failed, not done).
set +e
CUSHARE_REQUIRE_DAEMON=1 LD_PRELOAD="$pre" timeout 2 "$B/bin/cs_job" --mem-mb 8 --iters 1 \
    >"$T/out2" 2>"$T/err2"
rc=$?
set -e
cat "$T/err2"
[ $rc -eq 124 ] || { echo "with CUSHARE_REQUIRE_DAEMON the job should wait (rc=$rc)"; exit 1; }
grep -q 'waiting for it' "$T/err2"
echo "standalone: ok"
