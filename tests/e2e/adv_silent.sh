#!/usr/bin/env bash
# adv_silent.sh: issue 17, attack 2: a tenant that reports memory it will
# not give back. cs_attack silent says HELLO, ATTACHes the GPU and reports
# USAGE: 1 GiB resident, all of it swappable, then never answers EVICT
# (PREPARE included) or PREFETCH. Two honest busy jobs (normal, weight 1,
# 300 MiB each, swap on) share the simulated GPU (1 GiB): together with
# the attacker's claim they do not fit, so every switch between them asks
# the attacker for room.
#  (b) the honest jobs are never stalled longer than one quantum plus one
#      revoke timeout plus the margin, and the silent client is waited for
#      once at most (no second stall over half a revoke timeout: after its
#      first missed deadline its memory is counted as resident and it is
#      never asked again);
#  (a) both honest jobs end with correct results.
# Today's daemon waits revoke_timeout_ms for the outstanding eviction at
# every switch (the issue: 17.5 s became 122 s, the GPU idle 84%).
# The attacker's uid does not matter here: without root it runs as the
# test's own uid.
source "$(dirname "$0")/adv_lib.sh"

SILENT_S=${ADV_SILENT_S:-6}
export FAKECUDA_MEM_MB=1024
ADV_JOB_MB=300
adv_attacker_uid any
adv_gpu
adv_start_daemon "mem_reserve_mb = 0" "client_reserve_mb = 8"
adv_honest h1 h2

adv_attack atk silent --resident 1G --seconds "$SILENT_S"
adv_wait_line atk '^cs_attack: usage' >/dev/null
from=$(now_ns)
adv_wait_attack atk $((SILENT_S + 10))
to=$(now_ns)
echo "attacker: $(grep -c -- '-ignored' "$T/atk.out") requests ignored"
adv_gaps "$from" "$to" h1 h2
adv_check_stall "silent holder of 1 GiB ($SILENT_S s)"
adv_check_once "silent holder"
adv_status "$T/status"
grep '^gpu ' "$T/status"
adv_finish h1 h2
stop_daemon
adv_end
