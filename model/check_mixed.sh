#!/usr/bin/env bash
# model/check_mixed.sh: the lease model in mixed mode (the daemon's default)
# and shared mode, safety and liveness (see check_safety.sh for why the
# checks are split in three tests).
exec "$(dirname "$0")/check.sh" mixed-exclusivity memory-fits mixed-no-data-loss \
    mixed-no-deadlock mixed-high-wait-bound mixed-liveness mixed-silent-client-no-block
