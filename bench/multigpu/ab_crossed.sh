#!/usr/bin/env bash
# bench/multigpu/ab_crossed.sh BUILD... : crossed_pair.sh once per build
# dir, REPS (default 3) rounds alternating the builds, one line per run.
# Each build dir needs bin/, lib/, fakecuda/ and tests/e2e/{trace_check,
# e2e_util} (make build-tests; for an old tree, copy those two from a new
# one). Example, old = a git worktree at the commit before a change:
#   bench/multigpu/ab_crossed.sh build /work/wt-old/build
set -eu
cd "$(dirname "$0")/../.."
for r in $(seq "${REPS:-3}"); do
    for b in "$@"; do
        CUSHARE_BUILD=$b tests/run-suite.sh bench/multigpu/crossed_pair.sh >/dev/null 2>&1 || true
        echo "round $r $b: $(grep '^crossed_pair:' "$b/test-logs/bench_multigpu_crossed_pair.sh.log" || echo failed)"
    done
done
