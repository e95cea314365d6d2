#!/usr/bin/env bash
# model/check_prefetch.sh: the lease model with prefetch (PREFETCH/PREFETCHED,
# partial prefetch, eviction and swap-out of a two-segment client), safety
# and liveness (see check_safety.sh for why the checks are split in tests).
exec "$(dirname "$0")/check.sh" prefetch-exclusivity prefetch-no-data-loss \
    prefetch-no-deadlock prefetch-room prefetch-liveness prefetch-mixed-no-data-loss \
    prefetch-mixed-no-deadlock
