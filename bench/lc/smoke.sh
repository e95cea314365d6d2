#!/bin/sh
# bench/lc/smoke.sh: bench/lc/run.sh, briefly, on the simulated driver (the
# suite puts it first in LD_LIBRARY_PATH): every case runs, both roles print
# their line, and the table has a row per case with numbers in it. What the
# numbers are is the GPU run's business (bench/lc/run.sh on an H100).
# Half a second per run and half a second of start-up allowance (a start
# after the common time only says so): the ten cases took 23 s of make test
# at 1 s each on a 2-core VM.
set -eu
B=${CUSHARE_BUILD:-build}
T=${TEST_TMP:-/tmp}
LC_SECONDS=0.5 LC_REPS=1 LC_LEAD_S=0.5 BE_MB=16 BE_KERNEL_US=500 LC_CLIENT_RESERVE_MB=8 bench/lc/run.sh "$B" >"$T/table"
cat "$T/table"
rows=$(grep -cE '^\| (lc-solo|be-solo|native|hook|tsg-1|tsg-200|sched-notsg|sched-gate|sched-gate-hint|sched-tsg) \|' "$T/table")
[ "$rows" -eq 10 ] || { echo "expected 10 rows, got $rows"; exit 1; }
# LC p99 for every case with an LC job, BE throughput for every case with a BE job.
awk -F'|' '$2 ~ /lc-solo|native|hook|tsg|sched/ && $4 !~ /[0-9]/ { print "no LC p99 in:" $0; bad = 1 }
           $2 ~ /be-solo|native|hook|tsg|sched/ && $7 !~ /[0-9]/ { print "no BE throughput in:" $0; bad = 1 }
           END { exit bad }' "$T/table"
echo "lc smoke: ok"
