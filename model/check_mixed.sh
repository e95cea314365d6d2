#!/usr/bin/env bash
# model/check_mixed.sh: the lease model in mixed mode (the daemon's default)
# and shared mode, safety (see check_safety.sh for why the checks are split
# in several tests; the liveness runs are check_mixed_live.sh: together they
# took 203 s in make test after finding 8's fix, too near the runner's
# 300 s limit).
exec "$(dirname "$0")/check.sh" mixed-exclusivity memory-fits mixed-no-data-loss \
    mixed-no-deadlock mixed-high-wait-bound
