#!/usr/bin/env bash
# model/check_safety.sh: the lease model's safety properties in exclusive
# mode (make test runs them as one test, the exclusive liveness ones as
# another and the mixed/shared ones as a third: each stays under the test
# runner's 300 s limit on 2 cores).
exec "$(dirname "$0")/check.sh" exclusivity no-data-loss no-deadlock high-wait-bound
