#!/usr/bin/env bash
# swap_hostreserve.sh: issue 17 (item 6): CUSHARE_HOST_RESERVE=99999T with two
# jobs that do not fit on the GPU together left one waiting forever beside a
# free GPU. Two causes, two checks:
#
#  - 99999T (more than the host's RAM) is refused when the hook reads it, with
#    a warning naming it, and the default is used: both jobs finish;
#  - a reserve the hook accepts but no host can honour (MemTotal less 1 MiB)
#    refuses every pin, so no swap-out moves anything and every eviction
#    answers at once with nothing moved. A grant whose restore then found no
#    room was revoked before its gate opened, and the job's next ACQUIRE was
#    never sent (the hook still counted the one the grant had answered): the
#    job waited forever. Both jobs must finish, correctly, nothing swapped.
#
# The pair that cannot pin runs first, on a fresh daemon: that is where the
# lost ACQUIRE showed (3 runs of 3; after another pair had run, it did not).
# No timing bound: without swap the jobs take turns however the room allows.
source "$(dirname "$0")/swap_lib.sh"

ARGS=(--mem-mb 150 --allocs 15 --iters 6 --kernel-ns 10000000)
write_conf
# The jobs' own pinning is what is refused here: no pool lends them backing
# (pieces of the node's pool are pinned already; swap_pool.sh has its reserve).
echo "pool = false" >>"$T/cushared.conf"
start_daemon

pair() { # TAG RESERVE: two 150 MiB jobs on the 240 MiB the GPU has for jobs
    local a b
    export CUSHARE_HOST_RESERVE=$2
    job "$1a" 1 "${ARGS[@]}"
    a=$JOB_PID
    job "$1b" 2 "${ARGS[@]}"
    b=$JOB_PID
    unset CUSHARE_HOST_RESERVE
    job_ok "$1a" "$a"
    job_ok "$1b" "$b"
}

kib=$(awk '/^MemTotal:/ { print $2 }' /proc/meminfo)
pair nopin "$((kib - 1024))K"
status_json >"$T/after.json"
grep -q "not pinning" "$T/nopina.err" "$T/nopinb.err" || fail "no job was refused a pin"
out=$(json_num "$T/after.json" swap_out_bytes) # a fresh daemon: all of it this pair's
[ "$out" = 0 ] || fail "${out:-?} bytes were swapped out with every pin refused"

pair absurd 99999T
for j in absurda absurdb; do
    grep -q "CUSHARE_HOST_RESERVE=99999T is not less than this host's memory" "$T/$j.err" ||
        fail "job $j: no warning about CUSHARE_HOST_RESERVE=99999T"
done
echo "swap_hostreserve: ok"
