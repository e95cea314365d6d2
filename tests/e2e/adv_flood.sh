#!/usr/bin/env bash
# adv_flood.sh: issue 17, attack 4: a tenant that exhausts the daemon's
# connections. As another uid, cs_attack flood opens 1040 connections that
# never say HELLO and keeps them open (those the daemon closes are opened
# again every 200 ms). One honest busy job runs throughout; a new one
# starts during the flood.
#  (c) the owner's `cusharectl status` answers during the flood; the new
#      job runs managed (status shows it with slices); the flood's
#      connections beyond its uid's cap (max_conns_per_uid, default 32)
#      are refused with an ERROR whose text starts with "refused:" (at
#      least 1040 - 32 of them, and no other ERROR text);
#  (b) the running honest job is not stalled beyond the bound;
#  (a) both honest jobs end with correct results.
# Today's daemon accepts everyone up to max_clients + 16 connections and
# closes the rest without a word: the owner's status is refused too.
source "$(dirname "$0")/adv_lib.sh"

FLOOD_S=${ADV_FLOOD_S:-8}
CONNS=1040
PER_UID=32  # max_conns_per_uid's default (contract)
adv_attacker_uid other
adv_gpu
adv_start_daemon
adv_honest h1

adv_attack atk flood --conns "$CONNS" --reopen-ms 200 --seconds "$FLOOD_S"
from=$(now_ns)
adv_wait_line atk '^cs_attack: flooded' 20
adv_check "the owner's cusharectl status answers during the flood" \
    status "$T/status1"
[ -s "$T/status1.err" ] && cat "$T/status1.err"

launch n1 normal 1 --mem-mb 8 --iters 100 --kernel-ns 5000000 --sync-every 1 --seed 9
adv_check_managed n1 "during the flood"

adv_wait_attack atk $((FLOOD_S + 20))
to=$(now_ns)
done_line=$(grep '^cs_attack: done' "$T/atk.out")
grep -m3 '^cs_attack: refused' "$T/atk.out" || true
r=$(field "$done_line" refused) other=$(field "$done_line" refused_other)
adv_check "the flood's connections beyond the cap are refused with \"refused: ...\": $r (want >= $((CONNS - PER_UID)))" \
    test "$r" -ge $((CONNS - PER_UID))
adv_check "no refusal without the \"refused:\" prefix: $other" test "$other" -eq 0
adv_gaps "$from" "$to" h1
adv_check_stall "connection flood"
adv_finish_within n1 20
adv_finish h1
stop_daemon
adv_end
