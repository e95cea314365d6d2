#!/usr/bin/env bash
# bench/lc/run.sh [BUILD]: latency of a latency-critical (LC) job beside a
# busy best-effort (BE) job on one GPU, side by side in one run:
#
#   lc-solo    the LC job alone
#   be-solo    the BE job alone
#   native     both, no cushare
#   hook       both, the BE job under libcushare.so with CUSHARE_TSG=off
#              (what the interposer costs without channel-group control)
#   tsg-1      both, the BE job under libcushare.so, CUSHARE_TSG_TIMESLICE_US=1
#   tsg-200    the same with 200 µs
#   sched-*    both under cushare with cushared in shared mode, LC at
#              --priority high, BE at low: sched-tsg with be_timeslice_us=1
#              and lc_mechanism=tsg (the daemon tells the BE job to shorten
#              its channel groups while the LC job holds the GPU),
#              sched-notsg with be_timeslice_us=0 and lc_mechanism=off (plain
#              co-location under the daemon), sched-gate with 0 and
#              lc_mechanism=gate (no timeslices: the BE job's submissions
#              are gated while the LC job has work), sched-gate-hint the
#              same with the LC job calling cushare_hint(WORK_SOON)
#              LC_HINT_US (1000) before each launch; sched-excl and
#              sched-mixed: the daemon's default configuration but for the
#              mode, exclusive or mixed (issue 21: the LC job beside the BE
#              job when both fit, gated or time-sliced); sched-default: the
#              daemon's configuration left entirely at its defaults (mixed,
#              client_reserve_mb measured); sched-ts-N: the defaults but for
#              be_timeslice_us = N (not in the default list)
#
# each repeated REPS times (interleaved: rep 1 of every case, then rep 2...),
# then a markdown table of medians over the repetitions: LC p50/p99/max,
# LC p99 against solo, BE throughput against solo, and what the BE process's
# hook said about its channel groups. Outside the sched-* cases the LC job
# is never under the hook and no daemon runs: the hook runs unmanaged when
# nobody answers on CUSHARE_SOCKET (pointed at an empty directory here).
#
# Builds nothing: run it from a built tree (make; then `bench/lc/run.sh
# build`). Takes about REPS * 9 * (SECONDS + LEAD + 1) s: under 4 minutes
# with the defaults. Knobs (environment): LC_SECONDS (5), LC_REPS (3),
# LC_KERNEL_US (200), LC_PERIOD_US (5000), BE_KERNEL_US (1000), BE_MB (1024),
# BE_DEPTH (4: kernels the BE job keeps queued), LC_HOOK_LOG_LEVEL and
# LC_DAEMON_LOG_LEVEL (info), LC_LOGDIR (keep every run's logs there),
# LC_LEAD_S (2: start-up allowance before the common start time),
# LC_CASES (all nine, space-separated).
set -euo pipefail
B=${1:-${CUSHARE_BUILD:-build}}
S=${LC_SECONDS:-5}
REPS=${LC_REPS:-3}
K=${LC_KERNEL_US:-200}
P=${LC_PERIOD_US:-5000}
BEK=${BE_KERNEL_US:-1000}
BEMB=${BE_MB:-1024}
BED=${BE_DEPTH:-4}
LEAD=${LC_LEAD_S:-2}
HINT=${LC_HINT_US:-1000}
CASES=${LC_CASES:-lc-solo be-solo native hook tsg-1 tsg-200 sched-notsg sched-gate sched-gate-hint sched-tsg}
bench=$B/bin/cs_lcbench
hook=$B/lib/libcushare.so
pre="${SAN_RUNTIME:+$SAN_RUNTIME }$hook"
for f in "$bench" "$hook"; do
    [ -e "$f" ] || { echo "bench/lc/run.sh: $f is missing: build first (make BUILD=$B)" >&2; exit 1; }
done
tmp=$(mktemp -d)
# LC_LOGDIR: keep every run's output and daemon log there.
trap '[ -n "${LC_LOGDIR:-}" ] && mkdir -p "$LC_LOGDIR" && cp -r "$tmp"/. "$LC_LOGDIR"/; rm -rf "$tmp"' EXIT
HLOG=${LC_HOOK_LOG_LEVEL:-info}
export CUSHARE_SOCKET=$tmp/no-daemon.sock

start_time() { awk -v t="$(date +%s.%N)" -v l="$LEAD" 'BEGIN { printf "%.3f", t + l }'; }
lc() { "$bench" --role lc --seconds "$S" --kernel-us "$K" --period-us "$P" --start-at "$@"; }
be() { "$bench" --role be --seconds "$S" --kernel-us "$BEK" --be-mb "$BEMB" --be-depth "$BED" --start-at "$1"; }

# run_case CASE REP: leaves $tmp/CASE.REP.lc, .be, .be.err as applicable.
run_case() {
    local c=$1 r=$2 o=$tmp/$1.$2 at
    at=$(start_time)
    case $c in
    lc-solo) lc "$at" >"$o.lc" ;;
    be-solo) be "$at" >"$o.be" 2>"$o.be.err" ;;
    native)
        be "$at" >"$o.be" 2>"$o.be.err" &
        lc "$at" >"$o.lc"
        wait ;;
    hook | tsg-*)
        local tsg=on us=
        case $c in hook) tsg=off ;; tsg-*) us=${c#tsg-} ;; esac
        CUSHARE_TSG=$tsg CUSHARE_TSG_TIMESLICE_US=$us CUSHARE_LOG_LEVEL=info LD_PRELOAD="$pre" \
            be "$at" >"$o.be" 2>"$o.be.err" &
        lc "$at" >"$o.lc"
        wait ;;
    sched-*)
        local us=1 mech="" mode=shared d=$tmp/d.$c.$r dpid bpid i hint=()
        case $c in
        sched-excl) us="" mode=exclusive ;;
        sched-mixed) us="" mode=mixed ;;
        sched-default) us="" mode="" ;;
        sched-ts-[0-9]*) us=${c#sched-ts-} mode="" ;;
        sched-notsg) us=0 mech=off ;;
        sched-gate) us=0 mech=gate ;;
        sched-gate-hint) us=0 mech=gate hint=(--hint-us "$HINT") ;;
        sched-tsg) mech=tsg ;;
        *) echo "bench/lc/run.sh: unknown case $c" >&2; exit 2 ;;
        esac
        mkdir -p "$d"
        { printf '[cushared]\n'
          # sched-default: nothing but the daemon's defaults (issue 21).
          [ -z "$mode" ] || printf 'mode = %s\nclient_reserve_mb = %s\n' "$mode" "${LC_CLIENT_RESERVE_MB:-512}"
          [ -z "$us" ] || printf 'be_timeslice_us = %s\n' "$us"
          [ -z "$mech" ] || printf 'lc_mechanism = %s\n' "$mech"; } >"$d/conf"
        "$B/bin/cushared" --socket "$d/s.sock" --config "$d/conf" \
            --log-level "${LC_DAEMON_LOG_LEVEL:-info}" 2>"$o.daemon" &
        dpid=$!
        for i in $(seq 100); do [ -S "$d/s.sock" ] && break; sleep 0.05; done
        CUSHARE_SOCKET=$d/s.sock CUSHARE_PRIORITY=low CUSHARE_NAME=be CUSHARE_LOG_LEVEL=$HLOG \
            LD_PRELOAD="$pre" be "$at" >"$o.be" 2>"$o.be.err" &
        bpid=$!
        CUSHARE_SOCKET=$d/s.sock CUSHARE_PRIORITY=high CUSHARE_NAME=lc CUSHARE_LOG_LEVEL=$HLOG \
            LD_PRELOAD="$pre" \
            lc "$at" "${hint[@]}" >"$o.lc" 2>"$o.lc.err"
        wait "$bpid" || true
        kill "$dpid" 2>/dev/null || true
        wait "$dpid" 2>/dev/null || true ;;
    *) echo "bench/lc/run.sh: unknown case $c" >&2; exit 2 ;;
    esac
}

t0=$(date +%s)
for r in $(seq "$REPS"); do
    for c in $CASES; do
        run_case "$c" "$r"
    done
done
elapsed=$(($(date +%s) - t0))

# field FILE-GLOB KEY: the KEY= values of every matching line, one a line.
field() { { cat $1 2>/dev/null || true; } | tr ' ' '\n' | sed -n "s/^$2=//p"; }
median() { sort -g | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)]; else print "" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b != "" && b > 0) printf "%.2f", a / b; else printf "-" }'; }

solo_p99=$(field "$tmp/lc-solo.*.lc" p99_us | median)
solo_be=$(field "$tmp/be-solo.*.be" melem_per_s | median)
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || true)
echo "LC: a ${K} µs kernel every ${P} µs, launch to completion; BE: back-to-back ~${BEK} µs"
echo "fc_add32 kernels over ${BEMB} MiB, 4 in flight. ${S} s per run, medians of ${REPS} runs."
echo "Device: ${gpu:-unknown (no nvidia-smi)}; $(date -u +%F); ${elapsed} s in all."
echo
echo "| case | LC p50 µs | LC p99 µs | LC max µs | LC p99 / solo | BE Melem/s | BE / solo | BE channel groups |"
echo "|---|---:|---:|---:|---:|---:|---:|---|"
for c in $CASES; do
    p50=$(field "$tmp/$c.*.lc" p50_us | median)
    p99=$(field "$tmp/$c.*.lc" p99_us | median)
    mx=$(field "$tmp/$c.*.lc" max_us | median)
    bt=$(field "$tmp/$c.*.be" melem_per_s | median)
    note=-
    if ls "$tmp/$c".*.be.err >/dev/null 2>&1; then
        note=$({ cat "$tmp/$c".*.be.err | grep -oE 'compute timeslice set to [0-9]+ us|timeslice control is unavailable: [^;]*|timeslice control ready[^)]*\)' || true; } |
               sort | uniq -c | awk '{ n = $1; $1 = ""; printf "%s%s (%dx)", s, substr($0, 2), n; s = "; " }')
        [ -n "$note" ] || note=-
    fi
    printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$c" "${p50:--}" "${p99:--}" "${mx:--}" \
        "$(ratio "$p99" "$solo_p99")" "${bt:--}" "$(ratio "$bt" "$solo_be")" "$note"
done
