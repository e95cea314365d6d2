#!/usr/bin/env bash
# adv_linger.sh: a job whose process outlives its connection. Every job's
# exit looks so to the daemon (on an H200 the socket closed 0.1-0.4 s
# before the process and its GPU memory were gone), and a tenant can make
# it last. The memory of a client that leaves while its process lives on
# stays counted as in use until the process exits, for a second at most
# (src/sched/room.c "departed"):
#  (a) a process that exits 300 ms after leaving (watched through the pool:
#      it borrowed): its memory is counted until then, and freed when the
#      daemon hears of the exit;
#  (c) the same for a client that never borrowed (src/sched/exitwatch.c
#      watches it);
#  (b) one that lives on 4 s: after a second its memory is no longer
#      counted, and the daemon goes on serving (a third client registers
#      and is answered meanwhile). Last: its uid is not waited for again
#      for a minute (room.c distrust()).
source "$(dirname "$0")/adv_lib.sh"

# dlog REGEX [TIMEOUT_S]: waits for a daemon log line matching REGEX.
dlog() {
    local _
    for _ in $(seq $((${2:-10} * 50))); do
        grep -qE "$1" "$T/cushared.log" 2>/dev/null && return 0
        sleep 0.02
    done
    fail "no daemon log line like '$1'"
}

# ms_of REGEX: the time of day (ms) of the daemon's first line matching REGEX.
ms_of() {
    grep -m1 -E "$1" "$T/cushared.log" | awk '{split($1, a, ":"); printf "%d", (a[1] * 3600 + a[2] * 60 + a[3]) * 1000}'
}

export FAKECUDA_MEM_MB=256
adv_attacker_uid any
adv_gpu
adv_start_daemon "pool_min_mb = 64" "pool_max_mb = 64" "pool_piece_mb = 16"
dlog "pinned pool: on, up to 64.00 MiB"

# counted_until_exit CASE NAME BYTES LEFT_RE [OPTION...]: a client of BYTES
# resident that lives on 300 ms after leaving (its `left` line matching
# LEFT_RE) is counted in use until its process exits, and freed then.
counted_until_exit() {
    local case=$1 name=$2 bytes=$3 left_re=$4 line id held
    shift 4
    adv_attack "$name" linger "$@" --resident "$bytes" --hold-ms 300 --seconds 10
    line=$(adv_wait_line "$name" '^cs_attack: welcome ' 10)
    id=$(field "$line" client_id)
    adv_wait_line "$name" "^cs_attack: left $left_re" 10 >/dev/null
    dlog "client $id \(pid [0-9]+\) left with $bytes bytes resident: in use until its process exits"
    adv_wait_attack "$name" 10 >/dev/null
    dlog "client $id's process exited: its $bytes bytes are free"
    held=$(($(ms_of "client $id's process exited") - $(ms_of "client $id \(pid")))
    echo "($case) counted in use for $held ms after the client left (its process lived on 300 ms)"
    [ "$held" -ge 250 ] || fail "($case) its memory was counted only $held ms, less than its process lived"
    ! grep -q "client $id's process still there" "$T/cushared.log" ||
        fail "($case) taken for a process that stayed"
}

# (a) a borrower; (c) a client that never borrowed
counted_until_exit a quick 67108864 '.* pieces=[1-9]'
counted_until_exit c plain 50331648 '.* pieces=0' --no-borrow

# (b)
adv_attack slow linger --resident 32M --hold-ms 4000 --seconds 10
line=$(adv_wait_line slow '^cs_attack: welcome ' 10)
id=$(field "$line" client_id)
adv_wait_line slow '^cs_attack: left ' 10 >/dev/null
dlog "client $id \(pid [0-9]+\) left with 33554432 bytes resident"
adv_attack third silent --resident 16M --seconds 2
adv_wait_line third '^cs_attack: usage ' 5 >/dev/null
dlog "client $id's process still there 1000 ms after it left; its 33554432 bytes no longer counted" 5
late=$(($(ms_of "client $id's process still there") - $(ms_of "client $id \(pid")))
echo "(b) no longer counted $late ms after it left"
[ "$late" -ge 950 ] && [ "$late" -le 2500 ] || fail "(b) no longer counted after $late ms, not about 1000"
grep -q "client $id's process exited: its" "$T/cushared.log" && fail "(b) freed twice"
adv_wait_attack third 10 >/dev/null
adv_wait_attack slow 10 >/dev/null
stop_daemon
adv_end
