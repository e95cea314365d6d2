#!/usr/bin/env bash
# e2e_weights.sh: issue 4 acceptance, weighted fair share.
#
# Three busy jobs of one class with weights 1, 2 and 4 share the GPU in
# exclusive mode. Over the window where all three are running (from the
# last one's first kernel to the first one's last kernel), each one's share
# of the kernel time in the trace must be within +-0.05 (absolute) of 1/7,
# 2/7 and 4/7. `cusharectl status` of the live run must show the weights.
#
# Why the shape of the run:
#  - a 50..100 ms quantum: about a hundred slices in the run, so the shares
#    are made of many decisions and one slice more or less (at most ~1.5%
#    of the window) cannot move them much;
#  - jobs of many short kernels (2 ms fc_sleep + fc_add32 on 1 MiB),
#    synchronized every 2 iterations as frameworks synchronize every step,
#    so a revoked holder drains in ~5 ms and the slices are what the
#    policy decides, not what the jobs had queued;
#  - work in proportion to the weights (N, 2N, 4N iterations), so at the
#    expected shares the three would end together and the window spans
#    nearly the whole run (~6 s here); with wrong shares one ends early and
#    the window, measured while all three compete, still shows them.
source "$(dirname "$0")/lib.sh"

N=${E2E_WEIGHTS_N:-380}
TOL=0.05
start_daemon "mode = exclusive" "quantum_floor_ms = 50" "quantum_cap_ms = 100"
for w in 1 2 4; do
    launch "w$w" normal "$w" --mem-mb 1 --iters $((N * w)) --kernel-ns 2000000 --sync-every 2 \
        --seed "$w"
done

# Live status: the weights the jobs asked for (CUSHARE_WEIGHT) reached the
# daemon, and the three compete in one class.
snap=$T/status
seen=0
for _ in $(seq 300); do
    if status "$snap" && [ "$(grep -c '^client ' "$snap")" -eq 3 ]; then
        seen=1
        break
    fi
    sleep 0.01
done
[ $seen -eq 1 ] || fail "cusharectl status never listed the 3 clients"
cat "$snap"
for w in 1 2 4; do
    c=$(client_line "$snap" "${JOB_PID[w$w]}")
    [ -n "$c" ] || fail "status does not list w$w"
    [ "$(field "$c" weight)" = "$w" ] || fail "weight of w$w: $c"
    [ "$(field "$c" priority)" = normal ] || fail "priority of w$w: $c"
done

for w in 1 2 4; do finish "w$w" 120; done
stop_daemon

"$TC" "$T/trace" overlap >/dev/null || fail "kernels of different processes overlap"
"$TC" "$T/trace" summary
"$TC" "$T/trace" shares "${JOB_PID[w1]}" "${JOB_PID[w2]}" "${JOB_PID[w4]}" | tee "$T/shares" ||
    fail "no window where all three jobs ran"
win=$(sed -n 's/^window_ns=\([0-9]*\).*/\1/p' "$T/shares")
# A window much shorter than the run would mean the jobs hardly competed.
[ "$win" -ge 2000000000 ] || fail "the three jobs competed for only $(ms "$win") ms (want >= 2000)"
for w in 1 2 4; do
    s=$(grep "^pid=${JOB_PID[w$w]} " "$T/shares")
    share=$(field "$s" share)
    awk -v s="$share" -v w="$w" -v tol="$TOL" 'BEGIN {
            want = w / 7; d = s - want; if (d < 0) d = -d
            printf "weight %d: share %.4f, want %.4f +- %.2f (off by %.4f)\n", w, s, want, tol, d
            exit d <= tol ? 0 : 1 }' ||
        fail "weight $w: GPU share $share is not within $TOL of $w/7 over a $(ms "$win") ms window"
done
echo "e2e_weights: ok"
