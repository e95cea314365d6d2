#!/usr/bin/env bash
# model/check_multigpu.sh: the lease model on two GPUs (-DNGPU=2,
# lease2.pml): per-GPU exclusivity and no data loss, no cross-GPU
# hold-and-wait, liveness of a client on both GPUs, revokes answered (see
# check_safety.sh for why the checks are split in tests).
exec "$(dirname "$0")/check.sh" multigpu-exclusivity multigpu-no-data-loss \
    multigpu-no-deadlock multigpu-liveness multigpu-revoke-completes
