#!/usr/bin/env bash
# model/check_safety.sh: the lease model's safety properties (make test runs
# them as one test, the liveness ones as another: each stays under the test
# runner's 300 s limit on 2 cores).
exec "$(dirname "$0")/check.sh" exclusivity no-data-loss no-deadlock high-wait-bound
