#!/usr/bin/env bash
# adv_hold.sh: issue 17, attack 1: a tenant that asks for more than it may
# have and then holds the GPU. As another uid (cushare-adv1, no grant in
# the config), cs_attack hold says HELLO asking
#   phase A: priority high, weight 1
#   phase B: priority normal, weight 1000000
# ACQUIREs, and once granted never RELEASEs and never answers REVOKE (it
# asks again every 100 ms, so a lease taken back is wanted again at once).
# Two honest busy jobs (normal, weight 1, as the daemon's uid) run
# throughout. For each phase:
#  (c) the attacker's HELLO is clamped: status shows it at normal, weight 1
#      (taken before it ACQUIREs: it may be demoted later);
#  (b) the honest jobs are never stalled longer than one quantum plus one
#      revoke timeout plus the margin, and the silent holder is waited
#      for once at most (no second stall over half a revoke timeout);
# and (a) both honest jobs end with correct results.
# Today's daemon believes the HELLO: the attacker shows high / 1000000 and
# the honest jobs stand still for the whole hold.
source "$(dirname "$0")/adv_lib.sh"

HOLD_S=${ADV_HOLD_S:-5}
adv_attacker_uid other
adv_gpu
adv_start_daemon
adv_honest h1 h2

phase() { # NAME PRIORITY WEIGHT
    local name=$1 prio=$2 weight=$3 c from to
    rm -f "$T/go"
    # --seconds: the hold plus time for the status check before it.
    adv_attack "$name" hold --priority "$prio" --weight "$weight" --go-file "$T/go" \
        --seconds $((HOLD_S + 5))
    adv_wait_line "$name" '^cs_attack: attached' >/dev/null
    adv_client_of "${ATK_PID[$name]}" "$T/status-$name"
    c=$CLIENT
    echo "attacker $name: $c"
    [ -n "$c" ] || fail "status never listed the attacker $name"
    adv_check "$name: HELLO asking $prio/$weight is clamped to normal/1 (status: priority=$(field "$c" priority) weight=$(field "$c" weight))" \
        test "$(field "$c" priority)" = normal -a "$(field "$c" weight)" = 1
    from=$(now_ns)
    touch "$T/go"
    sleep "$HOLD_S"
    to=$(now_ns)
    kill -9 "${ATK_PID[$name]}" 2>/dev/null || true
    wait "${ATK_PID[$name]}" 2>/dev/null || true
    grep -E '^cs_attack: (grant|revoke-ignored|refused|closed)' "$T/$name.out" | head -n 5
    adv_gaps "$from" "$to" h1 h2
    adv_check_stall "$name (asked $prio/$weight, held $HOLD_S s)"
    adv_check_once "$name"
}

phase atk_high high 1
phase atk_weight normal 1000000
adv_finish h1 h2
stop_daemon
adv_end
