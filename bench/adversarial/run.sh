#!/usr/bin/env bash
# bench/adversarial/run.sh [REPS]: issue 17's measurement, on the simulated
# GPU (no GPU needed). For each attack of tests/e2e/adv_*.sh, the honest
# jobs' makespan without the attacker and with it, in the same run, REPS
# times (default 3) each, alternating; then a table:
#
#   attack  median without (ms)  median with (ms)  ratio  spread without/with
#
# spread = (max - min) / median. Honest jobs: JOBS (2) cs_jobs, normal,
# weight 1, ITERS (200) iterations of a 5 ms kernel each, synchronized
# every iteration (~2 s of GPU work together), started together; their
# results are checked (a wrong sum stops the run). The makespan is from
# their launch to the last one's end. With an attacker, the attacker starts
# first (and is ready: registered, table filled, connections open) and
# lasts ATK_S (30 s) at most; jobs not done after LIMIT_S (90 s) are killed
# and the run counts as LIMIT_S ("timeouts" in the table), as does a run
# where a job could not start at all. A wrong result stops the bench.
#
# Attacks (ADV_BENCH_ATTACKS to choose, space-separated):
#   hold        asks high, holds the GPU, never answers REVOKE
#   hold-weight asks normal with weight 1000000, same
#   burst-short high by the operator's grant, 1 ms every 300 ms
#   burst-long  high by the operator's grant, 295 ms every 300 ms
#   silent      1 GiB resident and swappable, never answers EVICT (jobs of
#               300 MiB each, so that the GPU's 1 GiB is oversubscribed)
#   attach      64 random GPU UUIDs over 4 connections, on a fresh daemon
#   flood       1040 connections that never say HELLO
# ADV_SILENT_CONF: extra daemon config lines ('|'-separated) for silent, e.g.
# "answer_timeout_ms = 1000".
# Needs root (the attacker runs as another uid, created when missing).
# Build first: make (the optimized tree; CUSHARE_BUILD picks another).
# Usage: bench/adversarial/run.sh 3 | tee bench/results/adversarial-run.txt
set -eu
E2E_TMP_TAG=advbench
source "$(cd "$(dirname "$0")" && pwd)/../../tests/e2e/adv_lib.sh"
unset FAKECUDA_TRACE # nothing reads it here

REPS=${1:-3}
JOBS=${ADV_BENCH_JOBS:-2}
ITERS=${ADV_BENCH_ITERS:-200}
ATK_S=${ADV_BENCH_ATK_S:-30}
LIMIT_S=${ADV_BENCH_LIMIT_S:-90}
ATTACKS=${ADV_BENCH_ATTACKS:-hold hold-weight burst-short burst-long silent attach flood}
[ "$(id -u)" -eq 0 ] || { echo "bench/adversarial: needs root to create users" >&2; exit 1; }
adv_attacker_uid other >&2
adv_gpu >&2

# Per attack: the attacker's arguments, the line that says it is ready,
# extra daemon config ('|'-separated), the jobs' memory.
declare -A ARGS=(
    [hold]="hold --priority high --weight 1"
    [hold-weight]="hold --priority normal --weight 1000000"
    [burst-short]="burst --priority high --period-ms 300 --hold-ms 1"
    [burst-long]="burst --priority high --period-ms 300 --hold-ms 295"
    [silent]="silent --resident 1G"
    [attach]="attach --count 64 --conns 4"
    [flood]="flood --conns 1040 --reopen-ms 200")
declare -A READY=([silent]='^cs_attack: usage' [attach]='^cs_attack: attached count='
                  [flood]='^cs_attack: flooded')
declare -A CONF=([burst-short]="new:[uid.$ADV_USER]|new:max_priority = high"
                 [burst-long]="new:[uid.$ADV_USER]|new:max_priority = high"
                 [silent]="mem_reserve_mb = 0|client_reserve_mb = 8${ADV_SILENT_CONF:+|$ADV_SILENT_CONF}")
declare -A MB=([silent]=300)

# run_once ATTACK 0|1: one run, without or with the attacker; the makespan
# in ms in RUN_MS ("T" appended on a timeout). Not in a $(...): the exit
# trap that kills what a run started is the main shell's.
run_once() {
    local a=$1 with=$2 conf=() args t0 j left timeout=
    IFS='|' read -ra conf <<<"${CONF[$a]:-}"
    rm -f "$T/pub/cushared.state" "$T/cushared.log"
    adv_start_daemon "${conf[@]}"
    if [ "$with" = 1 ]; then
        read -ra args <<<"${ARGS[$a]}"
        adv_attack atk "${args[@]}" --seconds "$ATK_S"
        adv_wait_line atk "${READY[$a]:-^cs_attack: attached}" 20 >/dev/null
    fi
    t0=$(now_ns)
    for j in $(seq "$JOBS"); do
        launch "b$j" normal 1 --mem-mb "${MB[$a]:-8}" --iters "$ITERS" --kernel-ns 5000000 \
            --sync-every 1 --seed "$j"
    done
    for _ in $(seq $((LIMIT_S * 20))); do
        left=0
        for j in $(seq "$JOBS"); do kill -0 "${JOB_PID[b$j]}" 2>/dev/null && left=1; done
        [ $left = 0 ] && break
        sleep 0.05
    done
    local t1
    t1=$(now_ns)
    for j in $(seq "$JOBS"); do
        if kill -0 "${JOB_PID[b$j]}" 2>/dev/null; then
            timeout=T
            kill -9 "${JOB_PID[b$j]}"
            wait "${JOB_PID[b$j]}" 2>/dev/null || true
        elif grep -q '^cs_job: FAIL' "$T/b$j.out"; then
            finish "b$j" # wrong results: stops the run with the job's output
        elif ! grep -q "^cs_job: ok name=b$j " "$T/b$j.out"; then
            timeout=T # it never ran (refused by the daemon, say): as a timeout
            echo "job b$j did not run: $(tail -n 2 "$T/b$j.out" "$T/b$j.err")" >&2
        else
            finish "b$j"
        fi
    done
    if [ "$with" = 1 ]; then
        kill -9 "${ATK_PID[atk]}" 2>/dev/null || true
        wait "${ATK_PID[atk]}" 2>/dev/null || true
    fi
    kill_daemon
    RUN_MS="$(((t1 - t0) / 1000000))$timeout"
}

# stats V...: "median spread_pct timeouts" of makespans (a "T" suffix marks
# a timeout, counted at its value).
stats() {
    local to
    to=$(printf '%s\n' "$@" | grep -c 'T$' || true)
    printf '%s\n' "$@" | tr -d T | sort -n | awk -v to="$to" '{ v[NR] = $1 }
        END { m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
              printf "%.0f %.1f %d\n", m, m ? 100 * (v[NR] - v[1]) / m : 0, to }'
}

rows=()
for a in $ATTACKS; do
    [ -n "${ARGS[$a]:-}" ] || fail "unknown attack $a"
    without=() with=()
    for r in $(seq "$REPS"); do
        run_once "$a" 0
        without+=("$RUN_MS")
        run_once "$a" 1
        with+=("$RUN_MS")
        echo "$a run $r: without ${without[-1]} ms, with ${with[-1]} ms" >&2
    done
    read -r m0 s0 t0 <<<"$(stats "${without[@]}")"
    read -r m1 s1 t1 <<<"$(stats "${with[@]}")"
    rows+=("$(printf '%-12s %10s %10s %7s %8s%% %7s%% %s' "$a" "$m0" "$m1" \
        "$(awk -v a="$m1" -v b="$m0" 'BEGIN { printf "%.2f", b ? a / b : 0 }')" "$s0" "$s1" \
        "$([ $((t0 + t1)) -gt 0 ] && echo "timeouts: $t0 without, $t1 with (counted as ${LIMIT_S} s)")")")
done

echo "adversarial makespans: $JOBS honest jobs x $ITERS x 5 ms, $REPS runs each, simulated GPU," \
    "build $B${SAN:+ ($SAN)}, $(nproc) cores, $(date -u +%Y-%m-%dT%H:%MZ)"
printf '%-12s %10s %10s %7s %9s %8s\n' attack without_ms with_ms ratio spread_wo spread_w
printf '%s\n' "${rows[@]}"
