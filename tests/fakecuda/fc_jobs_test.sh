#!/usr/bin/env bash
# fc_jobs_test.sh: cs_job on the simulated driver, end to end.
#  - two jobs at once both finish with the right sums, and the kernel trace
#    shows their kernels never overlapping, interleaved rather than one
#    job's after the other's;
#  - cs_job is deterministic (same options, same sum; another seed, another);
#  - the variants (streams, allocations, copies, gaps, JSON) work;
#  - several devices (--devices, --peer-mb) and their usage errors;
#  - a job asking for more than the device has fails cleanly;
#  - a job SIGKILLed mid-run gives back its memory and the engine: a job
#    needing both runs right after.
set -euo pipefail
B=${CUSHARE_BUILD:-build}
JOB=$B/bin/cs_job
T=${TEST_TMP:-$(mktemp -d)}
export FAKECUDA_MEM_MB=256
fail() { echo "FAIL: $*" >&2; exit 1; }
sum_of() { sed -n 's/.* sum=\([0-9]*\).*/\1/p' <<<"$1"; }

# --- two jobs at once ----------------------------------------------------------
trace=$T/trace
FAKECUDA_TRACE=$trace $JOB --mem-mb 4 --iters 30 --kernel-ns 2000000 --name a >"$T/a" &
pa=$!
FAKECUDA_TRACE=$trace $JOB --mem-mb 4 --iters 30 --kernel-ns 2000000 --name b >"$T/b" &
pb=$!
wait $pa || fail "job a: $(cat "$T/a")"
wait $pb || fail "job b: $(cat "$T/b")"
a=$(cat "$T/a") b=$(cat "$T/b")
grep -q '^cs_job: ok name=a ' <<<"$a" || fail "job a: $a"
grep -q '^cs_job: ok name=b ' <<<"$b" || fail "job b: $b"
[ "$(sum_of "$a")" = "$(sum_of "$b")" ] || fail "same options, different sums: $a / $b"
# Each job: 30 sleeps + 30 adds + 1 sum on one stream, so no two kernels of
# the trace may overlap at all.
[ "$(wc -l <"$trace")" -eq 122 ] || fail "trace has $(wc -l <"$trace") lines, want 122"
sort -k5,5n "$trace" | awk '
    { if ($5 < maxend) { print "overlap: " $0 " starts before " maxend; bad = 1 }
      if ($6 > maxend) maxend = $6
      if ($2 != last) switches++; last = $2 }
    END { if (switches < 20) { print "only " switches " switches between jobs"; bad = 1 }
          exit bad }' || fail "kernel trace check"

# --- determinism and variants --------------------------------------------------
s1=$($JOB --mem-mb 2 --iters 3 --seed 7) || fail "$s1"
s2=$($JOB --mem-mb 2 --iters 3 --seed 7) || fail "$s2"
s3=$($JOB --mem-mb 2 --iters 3 --seed 8) || fail "$s3"
[ "$(sum_of "$s1")" = "$(sum_of "$s2")" ] || fail "not deterministic: $s1 / $s2"
[ "$(sum_of "$s1")" != "$(sum_of "$s3")" ] || fail "the seed changes nothing: $s1 / $s3"
v=$($JOB --mem-mb 6 --allocs 5 --streams 3 --copy-mb 2 --gap-ms 3 --iters 4 --json --name v) || fail "$v"
grep -q '^{"status":"ok","name":"v","pid":[0-9]*,"iters":4,' <<<"$v" || fail "json: $v"

# --- several devices -----------------------------------------------------------
# Two simulated devices, in a shared object of their own (the first process
# on a name sets its device count). Each device of --devices gets a
# context, memory and work; cs_job checks every allocation and every
# --peer-mb mirror of the first device's allocation 0 (FAIL otherwise). A
# list of one is --device, with the single-device output.
mg=(env "FAKECUDA_SHM=${FAKECUDA_SHM:-fc-jobs}-mg" FAKECUDA_DEVICES=2)
d=$("${mg[@]}" "$JOB" --devices 0,1 --mem-mb 4 --allocs 2 --streams 2 --copy-mb 1 --iters 5 \
    --kernel-ns 100000 --peer-mb 2) || fail "two devices: $d"
grep -q '^cs_job: ok name=job .* sum=[0-9]* devices=0,1$' <<<"$d" || fail "two devices: $d"
d=$("${mg[@]}" "$JOB" --devices 1,0 --mem-mb 2 --iters 3 --peer-mb 1 --json) || fail "json: $d"
grep -q '"sum":[0-9]*,"devices":\[1,0\]}$' <<<"$d" || fail "two devices, json: $d"
d1=$("${mg[@]}" "$JOB" --device 1 --mem-mb 2 --iters 3) || fail "--device 1: $d1"
d2=$("${mg[@]}" "$JOB" --devices 1 --mem-mb 2 --iters 3) || fail "--devices 1: $d2"
[ "$(sum_of "$d1")" = "$(sum_of "$d2")" ] || fail "--devices 1 is not --device 1: $d1 / $d2"
grep -q 'devices=' <<<"$d2" && fail "one device, yet devices= in: $d2"
for bad in "--device 0 --devices 0,1" "--devices 0 --peer-mb 1" "--devices 0,0" "--devices 0," \
           "--devices 0,1 --mem-mb 2 --allocs 2 --peer-mb 2"; do
    rc=0
    # shellcheck disable=SC2086 # the options are split on purpose
    "${mg[@]}" "$JOB" $bad >/dev/null 2>&1 || rc=$?
    [ $rc -eq 2 ] || fail "$bad: exit $rc, want 2 (usage)"
done
rm -f "/dev/shm/fakecuda-${FAKECUDA_SHM:-fc-jobs}-mg"

# --- over capacity -------------------------------------------------------------
if o=$($JOB --mem-mb 300 --iters 1); then fail "300 MiB on a 256 MiB device: $o"; fi
grep -q 'FAIL .*reason=cuMemAlloc:CUDA_ERROR_OUT_OF_MEMORY' <<<"$o" || fail "over capacity: $o"
if $JOB --iters x 2>/dev/null; then fail "a bad option was accepted"; fi

# --- SIGKILL mid-run -----------------------------------------------------------
# On a 64 MiB device: the victim's 40 MiB plus its context leave too little
# for the next job's 40 MiB until the victim's slot is reclaimed.
export FAKECUDA_SHM=${FAKECUDA_SHM:-fc-jobs}-kill FAKECUDA_MEM_MB=64
ktrace=$T/ktrace
FAKECUDA_TRACE=$ktrace $JOB --mem-mb 40 --iters 100000 --kernel-ns 20000000 --name victim >/dev/null &
victim=$!
for _ in $(seq 500); do [ -s "$ktrace" ] && break; sleep 0.02; done
[ -s "$ktrace" ] || fail "the victim never ran a kernel"
kill -9 $victim
wait $victim 2>/dev/null || true
r=$($JOB --mem-mb 40 --iters 2 --kernel-ns 1000000 --name after) || fail "after the kill: $r"
rm -f "/dev/shm/fakecuda-$FAKECUDA_SHM"
echo "fc_jobs_test: ok"
