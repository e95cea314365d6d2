#!/usr/bin/env bash
# model/check_liveness.sh: the lease model's liveness properties, under weak
# fairness (see check_safety.sh for why they are split).
exec "$(dirname "$0")/check.sh" liveness-high liveness-normal silent-client-no-block
