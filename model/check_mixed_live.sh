#!/usr/bin/env bash
# model/check_mixed_live.sh: the lease model in mixed and shared mode,
# liveness (check_mixed.sh has the safety runs).
exec "$(dirname "$0")/check.sh" mixed-liveness mixed-silent-client-no-block
