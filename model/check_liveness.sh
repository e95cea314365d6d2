#!/usr/bin/env bash
# model/check_liveness.sh: the lease model's liveness properties in
# exclusive mode, under weak fairness (see check_safety.sh for the split).
exec "$(dirname "$0")/check.sh" liveness-high liveness-normal silent-client-no-block
