#!/usr/bin/env bash
# adv_pool.sh: issue 20: a tenant that borrows the node's pinned pool to
# hoard it. cs_attack borrow asks for pieces 32 at a time, never gives one
# back and stays connected. The pool holds 1 GiB (pool_min_mb, pool_max_mb), the
# simulated GPU has 256 MiB:
#  (a) the hoarder gets at most its GPU's memory in lent pieces (no job has
#      more than that to swap out), then empty answers;
#  (b) meanwhile a second borrower still gets pieces from what is left;
#  (c) when the hoarder's process exits, its pieces are back in the pool.
source "$(dirname "$0")/adv_lib.sh"

# pool_log REGEX: waits (up to 20 s) for a daemon log line matching REGEX.
pool_log() {
    local _
    for _ in $(seq 1000); do
        grep -qE "$1" "$T/cushared.log" 2>/dev/null && return 0
        sleep 0.02
    done
    fail "no daemon log line like '$1': $(grep 'pinned pool' "$T/cushared.log")"
}

export FAKECUDA_MEM_MB=256
adv_attacker_uid any
adv_gpu
adv_start_daemon "pool_min_mb = 1024" "pool_max_mb = 1024" "pool_piece_mb = 16"
pool_log "pinned pool: 1.00 GiB pinned, its target"

adv_attack hoard borrow --seconds 8
line=$(adv_wait_line hoard '^cs_attack: hoarded ' 10)
echo "hoarder: $line"
lent=$(field "$line" lent_bytes)
[ "${lent:-0}" -gt 0 ] || fail "the hoarder was lent nothing: $line"
[ "$lent" -le "$ADV_TOTAL" ] || fail "the hoarder holds $lent bytes, more than its GPU's $ADV_TOTAL"

adv_attack second borrow --seconds 1
line=$(adv_wait_line second '^cs_attack: hoarded ' 10)
echo "second borrower: $line"
[ "$(field "$line" lent_bytes)" -gt 0 ] || fail "the second borrower was lent nothing: $line"

adv_wait_attack hoard 20 >/dev/null
pool_log "pinned pool: pid ${ATK_PID[hoard]} exited holding [0-9.]+ [KMG]iB of pieces: back in the pool"
adv_wait_attack second 20 >/dev/null
stop_daemon
adv_end
