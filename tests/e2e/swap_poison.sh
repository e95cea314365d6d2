#!/usr/bin/env bash
# swap_poison.sh: a missing restore would be caught.
#
# The simulated driver fills fresh device memory with the poison byte 0xFB,
# also memory created again at an address whose old memory was released
# (tests/fakecuda/fc_vmm_test.c, test_va_stable_remap, checks this for the
# driver itself). So data that came back from a swap without its copy would
# read 0xFB, not the job's pattern.
#
#  1. without the hook: swap_probe vmm-poison writes a pattern into VMM
#     memory, releases it, maps new memory at the same address and finds
#     0xFB everywhere and none of the pattern (what a missing restore looks
#     like);
#  2. under cushared and the hook: swap_probe poison fills 120 MiB with a
#     pattern and, 3 times, waits until a competing job (cs_job, 150 MiB of
#     a 256 MiB GPU) has pushed its memory out, then reads every byte back
#     (a restore) and finds the pattern intact, while a fresh allocation
#     made right then reads 0xFB everywhere (the jobs' checksums after
#     swapping are swap_jobs.sh's and swap_kill.sh's);
#  3. no device memory is left behind.
source "$(dirname "$0")/swap_lib.sh"

out=$("$PROBE" vmm-poison --mem-mb 16) || fail "vmm-poison: $out"
echo "$out"

# Short slices: the probe's cycles wait for the competitor's.
write_conf
sed -i 's/^quantum_cap_ms = .*/quantum_cap_ms = 600/' "$T/cushared.conf"
start_daemon
free0=$(free_mem)
# The probe first, so that it holds memory when the competitor comes.
CUSHARE_NAME=probe LD_PRELOAD="$PRELOAD" "$PROBE" poison --mem-mb 120 --allocs 8 --cycles 3 \
    --timeout-ms 30000 >"$T/probe.out" 2>"$T/probe.err" &
probe=$!
JOB_PIDS+=("$probe")
# Up to 30 s: an early row (tests/registry), it may run at nice 19 beside
# the optimized suite under AddressSanitizer.
for _ in $(seq 1500); do
    grep -q "filled" "$T/probe.out" && break
    sleep 0.02
done
grep -q "filled" "$T/probe.out" || fail "the probe did not start: $(cat "$T/probe.out" "$T/probe.err")"
job rival 9 --mem-mb 150 --allocs 15 --iters 100000 --kernel-ns 5000000
rival=$JOB_PID
wait "$probe" || fail "probe: $(cat "$T/probe.out")"
grep -q "^swap_probe: ok poison cycles=3 " "$T/probe.out" || fail "probe: $(cat "$T/probe.out")"
cat "$T/probe.out"
# The probe's memory really went out and came back every cycle: 130 MiB
# (8 x 16 MiB and a chunk) beside the rival's 152 MiB in 232 MiB leaves
# 50 MiB to move each time, 4 of its segments.
outs=$(sed -n 's/.* swap_outs=\([0-9]*\) .*/\1/p' "$T/probe.out")
bytes=$(sed -n 's/.* swapped_out_bytes=\([0-9]*\).*/\1/p' "$T/probe.out")
[ "$outs" -ge 3 ] || fail "the probe was swapped out only $outs times"
[ "$bytes" -ge $((3 * 48 << 20)) ] || fail "the probe swapped out only $bytes bytes in 3 cycles"
kill -9 "$rival"
wait "$rival" 2>/dev/null || true
stop_daemon
expect_free "$free0"

echo "swap_poison: ok"
