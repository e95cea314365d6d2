#!/usr/bin/env bash
# bench/lc/torch.sh [BUILD]: a latency-critical (LC) PyTorch job, ResNet-50
# batch-1 inference requests at a fixed rate (bench/gpu/workloads/
# infer_resnet.py), beside a best-effort (BE) training job (ResNet-50 or
# GPT-2: train_resnet.py / train_gpt.py) on one GPU, side by side in one run:
#
#   lc-solo     the LC job alone
#   be-solo     the BE job alone
#   native      both, no cushare
#   sched-gate  both under cushare (LD_PRELOAD=libcushare.so, CUSHARE_SOCKET
#               at a cushared in shared mode; LC with CUSHARE_PRIORITY=high,
#               BE with low), daemon config lc_mechanism = gate and
#               be_timeslice_us = 0: no channel-group timeslices, the BE
#               job's submissions are gated while the LC job has work
#   sched-gate-wN  sched-gate with lc_window_us = N (not in the default list)
#   sched-default  both under cushare with the daemon's configuration left at
#               its defaults (issue 21; not in the default list)
#   sched-tsg   the same with lc_mechanism = tsg and be_timeslice_us = 1: the
#               BE job's channel groups get a 1 µs timeslice beside the LC job
#
# Every job warms up first, then waits for a common start time (--start-at),
# so both jobs of a case measure the same LCT_SECONDS window. Each case runs
# LCT_REPS times, interleaved (rep 1 of every case, then rep 2...); then a
# markdown table of medians over the repetitions:
#
#   | case | LC p50 ms | LC p99 ms | LC p99 − solo p99 ms | BE imgs/s (or steps/s) | BE / solo
#   | BE / (solo × (1 − LC busy)) | LC busy | LC p99 from schedule ms | runs | notes |
#
# LC latency is a request's time from its start to torch.cuda.synchronize()
# returning; "from schedule" counts from the request's scheduled send time.
# LC busy is the LC job's busy_frac in that case (sum of its latencies over
# the window). The goals (issue 7): LC p99 − solo p99 ≤ 0.25 ms, and
# BE / (solo × (1 − LC busy)) ≥ 0.90; a `goal CASE: ...` line after the table
# says met or missed for every case with both jobs. `notes` holds late starts
# and what the BE job's hook said about its channel groups.
#
# Every run's stdout/stderr (CASE.REP.lc, .lc.err, .be, .be.err, .rc), the
# daemon's config and log (CASE.REP.conf, .daemon) stay in LCT_LOGDIR. A job
# without a result, with ok=false, or that exits non-zero, and a daemon that
# does not come up, is a FAIL line (stderr and stdout) and exit status 1.
#
# Builds nothing: run it from a built tree (make; then `bench/lc/torch.sh
# build`) on a machine with PyTorch, torchvision (and transformers for GPT-2).
# Takes about LCT_REPS * 5 * (LCT_SECONDS + LCT_LEAD_S + ~2 s of exit):
# 3 * 5 * (20 + 10 + 2) s = 480 s, about 8 minutes with the defaults (a
# minute more with LCT_BE=gpt). Knobs (environment): LCT_SECONDS (20),
# LCT_REPS (3), LCT_RATE (LC requests per second, 50), LCT_BE (resnet|gpt,
# resnet), LCT_CASES (all five, space-separated), LCT_LOGDIR (a new
# directory under /tmp), LCT_LEAD_S (start-up allowance before the common
# start time: 10 s, 14 with gpt; a job that warms up later starts late and
# says so in `notes`), LCT_PYTHON (python3), LCT_DAEMON_LOG_LEVEL (info;
# debug logs, and `notes` counts, each LC-mode change the daemon sends),
# LCT_PRIME (0; 1 runs each workload briefly once first, natively, so that
# a fresh machine's slow first start of PyTorch comes before the runs:
# without it the first runs are the solo cases, whose windows need no
# common start), LCT_LC_GRAPH (0; 1 has the LC job replay its forward pass
# as a CUDA graph: infer_resnet.py --graph).
set -uo pipefail
case ${1:-} in
-h | --help) sed -n '2,/^set /{/^set /d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;;
-*) echo "bench/lc/torch.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
esac
B=${1:-${CUSHARE_BUILD:-build}}
S=${LCT_SECONDS:-20}
REPS=${LCT_REPS:-3}
RATE=${LCT_RATE:-50}
BE=${LCT_BE:-resnet}
PY=${LCT_PYTHON:-python3}
PRIME=${LCT_PRIME:-0}
DLOG=${LCT_DAEMON_LOG_LEVEL:-info}
CASES=${LCT_CASES:-lc-solo be-solo native sched-gate sched-tsg}
W=$(cd "$(dirname "$0")/../gpu/workloads" && pwd)
case $BE in
resnet) BE_PY=$W/train_resnet.py BE_KEY=imgs_per_s BE_UNIT=imgs/s LEAD=${LCT_LEAD_S:-10}
        BE_DESC="ResNet-50 training, batch 64, bf16 autocast" ;;
gpt) BE_PY=$W/train_gpt.py BE_KEY=steps_per_s BE_UNIT=steps/s LEAD=${LCT_LEAD_S:-14}
     BE_DESC="GPT-2-small training, batch 16 x 512 tokens, bf16 autocast" ;;
*) echo "bench/lc/torch.sh: LCT_BE=$BE is not resnet|gpt" >&2; exit 2 ;;
esac
for c in $CASES; do
    case $c in lc-solo | be-solo | native | sched-gate | sched-gate-w[0-9]* | sched-tsg | sched-default) ;;
    *) echo "bench/lc/torch.sh: unknown case $c" >&2; exit 2 ;;
    esac
done
hook=$B/lib/libcushare.so
for f in "$B/bin/cushared" "$hook"; do
    [ -e "$f" ] || { echo "bench/lc/torch.sh: $f is missing: build first (make BUILD=$B)" >&2; exit 1; }
done
hook=$(cd "$B/lib" && pwd)/libcushare.so
pre="${SAN_RUNTIME:+$SAN_RUNTIME }$hook"
LOGDIR=${LCT_LOGDIR:-$(mktemp -d /tmp/lctorch.XXXXXX)}
mkdir -p "$LOGDIR"
LOGDIR=$(cd "$LOGDIR" && pwd)
# A job may take this long in all (start-up, the window, exit) before it is killed.
LIMIT=$((${S%.*} + ${LEAD%.*} + 90))

DPID='' BPID='' SOCKDIR=''
cleanup() {
    [ -n "$BPID" ] && kill "$BPID" 2>/dev/null
    [ -n "$DPID" ] && kill "$DPID" 2>/dev/null
    [ -n "$SOCKDIR" ] && rm -rf "$SOCKDIR"
    return 0
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_time() { awk -v t="$(date +%s.%N)" -v l="$LEAD" 'BEGIN { printf "%.3f", t + l }'; }
# job ROLE OUT [VAR=VALUE...] -- ARGS...: the LC (ROLE lc) or BE (be) workload
# with ARGS, the variables set for it alone; stdout in OUT.ROLE, stderr in
# OUT.ROLE.err, exit status in OUT.ROLE.rc.
job() {
    local role=$1 o=$2 envs=() py rc
    shift 2
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    if [ "$role" = lc ]; then py=$W/infer_resnet.py; else py=$BE_PY; fi
    # env sets LD_PRELOAD for the workload only, not for timeout.
    timeout -k 10 "$LIMIT" env ${envs[@]+"${envs[@]}"} "$PY" "$py" "$@" >"$o.$role" 2>"$o.$role.err"
    rc=$?
    echo "$rc" >"$o.$role.rc"
    return "$rc"
}
LC_GRAPH=()
[ "${LCT_LC_GRAPH:-0}" = 1 ] && LC_GRAPH=(--graph)
lc() { local o=$1 at=$2; shift 2; job lc "$o" "$@" -- --seconds "$S" --rate "$RATE" --start-at "$at" ${LC_GRAPH[@]+"${LC_GRAPH[@]}"}; }
be() { local o=$1 at=$2; shift 2; job be "$o" "$@" -- --seconds "$S" --start-at "$at"; }

fail() { echo "FAIL $*" | tee -a "$LOGDIR/failures" >&2; }

# run_case CASE REP: leaves $LOGDIR/CASE.REP.lc, .be (and .err, .rc) as applicable.
run_case() {
    local c=$1 r=$2 o=$LOGDIR/$1.$2 at
    rm -f "$o".* # an earlier run's files in a reused LCT_LOGDIR
    case $c in
    lc-solo) lc "$o" "$(start_time)" ;;
    be-solo) be "$o" "$(start_time)" ;;
    native)
        at=$(start_time)
        be "$o" "$at" &
        BPID=$!
        lc "$o" "$at"
        wait "$BPID"
        BPID='' ;;
    sched-*)
        local mech=${c#sched-} us=0 sock win=
        case $mech in gate-w*) win=${mech#gate-w}; mech=gate ;; esac # sched-gate-wN: lc_window_us N
        [ "$mech" = tsg ] && us=1
        if [ "$mech" = default ]; then
            printf '[cushared]\n' >"$o.conf" # nothing but the daemon's defaults (issue 21)
        else
            { printf '[cushared]\nmode = shared\nlc_mechanism = %s\nbe_timeslice_us = %s\nclient_reserve_mb = 512\n' \
                  "$mech" "$us"
              [ -z "$win" ] || printf 'lc_window_us = %s\n' "$win"; } >"$o.conf"
        fi
        SOCKDIR=$(mktemp -d /tmp/lct.XXXXXX) # short: a socket path has a length limit
        sock=$SOCKDIR/s.sock
        "$B/bin/cushared" --socket "$sock" --config "$o.conf" --log-level "$DLOG" 2>"$o.daemon" &
        DPID=$!
        for _ in $(seq 100); do
            [ -S "$sock" ] && break
            kill -0 "$DPID" 2>/dev/null || break
            sleep 0.05
        done
        if [ -S "$sock" ]; then
            local hookenv=(CUSHARE_SOCKET="$sock" CUSHARE_LOG_LEVEL=info LD_PRELOAD="$pre")
            at=$(start_time)
            be "$o" "$at" "${hookenv[@]}" CUSHARE_PRIORITY=low CUSHARE_NAME=be &
            BPID=$!
            lc "$o" "$at" "${hookenv[@]}" CUSHARE_PRIORITY=high CUSHARE_NAME=lc
            wait "$BPID"
            BPID=''
            kill -0 "$DPID" 2>/dev/null || fail "$c rep $r: cushared exited during the run (see $o.daemon)"
        else
            fail "$c rep $r: cushared did not come up with $o.conf: $(tail -3 "$o.daemon" | tr '\n' ' ')"
        fi
        kill "$DPID" 2>/dev/null
        wait "$DPID" 2>/dev/null
        DPID=''
        rm -rf "$SOCKDIR"
        SOCKDIR='' ;;
    esac
}

: >"$LOGDIR/failures"
t0=$(date +%s)
if [ "$PRIME" != 0 ]; then
    # The first start of torch/torchvision on a fresh machine fills caches: not in a measurement.
    job lc "$LOGDIR/prime" -- --requests 5 --warmup 2 ||
        echo "bench/lc/torch.sh: priming the LC job failed (see $LOGDIR/prime.lc.err)" >&2
    job be "$LOGDIR/prime" -- --steps 2 --warmup 1 ||
        echo "bench/lc/torch.sh: priming the BE job failed (see $LOGDIR/prime.be.err)" >&2
fi
for r in $(seq "$REPS"); do
    for c in $CASES; do
        echo "bench/lc/torch.sh: rep $r/$REPS $c" >&2
        run_case "$c" "$r"
    done
done
elapsed=$(($(date +%s) - t0))

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
intro="LC: ResNet-50 batch-1 inference (fp32, channels_last$([ "${LCT_LC_GRAPH:-0}" = 1 ] && echo ", replayed as a CUDA graph")), $RATE requests/s at fixed deadlines;
latency from a request's start to torch.cuda.synchronize() returning. BE: $BE_DESC ($BE_UNIT over the window).
sched-gate: cushared shared mode, lc_mechanism = gate, be_timeslice_us = 0; sched-tsg: lc_mechanism = tsg,
be_timeslice_us = 1; LC at CUSHARE_PRIORITY=high, BE at low. $S s per run, medians of $REPS run(s) (interleaved).
Device: ${gpu:-unknown (no nvidia-smi)}; $(date -u +%F); $elapsed s in all. Logs: $LOGDIR"
# The table (a quoted here-document: nothing in it is the shell's).
LCT_INTRO=$intro python3 - "$LOGDIR" "$REPS" "$BE_KEY" "$BE_UNIT" "$CASES" <<'EOF'
import glob, json, os, re, sys
from collections import Counter

logdir, reps, be_key, be_unit = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
cases = sys.argv[5].split()
print(os.environ["LCT_INTRO"])
print()

fails = [l.rstrip("\n") for l in open(os.path.join(logdir, "failures")) if l.strip()]
told = len(fails)  # those were on stderr already
ROLES = {"lc-solo": ["lc"], "be-solo": ["be"]}


def load(c, r, role):
    """The run's result (its last JSON line), or None; FAIL lines for a bad run."""
    o = os.path.join(logdir, f"{c}.{r}.{role}")
    if not os.path.exists(o):
        return None  # the case did not run (its daemon failed: already a FAIL)
    rc = open(o + ".rc").read().strip() if os.path.exists(o + ".rc") else "?"
    res = None
    for line in open(o, errors="replace"):
        if line.startswith("{"):
            try:
                res = json.loads(line)
            except ValueError:
                pass
    if res is None:
        fails.append(f"FAIL {c} rep {r} {role}: no result, exit status {rc} (see {o}.err)")
    elif not res.get("ok"):
        fails.append(f"FAIL {c} rep {r} {role}: ok=false, exit status {rc} (see {o}, {o}.err)")
    elif rc != "0":
        fails.append(f"FAIL {c} rep {r} {role}: exit status {rc} (see {o}.err)")
    return res if res is not None and res.get("ok") and rc == "0" else None


def median(v):
    v = sorted(x for x in v if x is not None)
    return v[(len(v) - 1) // 2] if v else None  # the lower middle, as bench/lc/run.sh


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


stats = {}
for c in cases:
    roles = ROLES.get(c, ["lc", "be"])
    runs = {role: [load(c, r, role) for r in range(1, reps + 1)] for role in roles}
    good = sum(all(runs[role][i] is not None for role in roles) for i in range(reps))
    lc = [x for x in runs.get("lc", []) if x]
    be = [x for x in runs.get("be", []) if x]
    notes = Counter()
    for role in roles:
        for i, x in enumerate(runs[role]):
            if x and x.get("late_s", 0) > 0.5:
                notes[f"{role} started {x['late_s']:.1f} s late (rep {i + 1})"] += 1
    for e in sorted(glob.glob(os.path.join(logdir, f"{c}.*.be.err"))):
        for m in re.findall(r"compute timeslice set to [0-9]+ us|timeslice control is unavailable: [^;\n]*"
                            r"|timeslice control ready[^)\n]*\)", open(e, errors="replace").read()):
            notes[m] += 1
    # At debug level (LCT_DAEMON_LOG_LEVEL=debug) the daemon logs each LC-mode change it sends.
    n = sum(open(d, errors="replace").read().count("LC mode ")
            for d in glob.glob(os.path.join(logdir, f"{c}.*.daemon")))
    if n:
        notes["daemon LC-mode changes"] += n
    stats[c] = dict(
        p50=median(x["p50_ms"] for x in lc), p99=median(x["p99_ms"] for x in lc),
        sp99=median(x["sched_p99_ms"] for x in lc), busy=median(x["busy_frac"] for x in lc),
        be=median(x[be_key] for x in be), has_lc="lc" in roles, has_be="be" in roles,
        runs=f"{good}/{reps} ok", notes="; ".join(f"{k} ({n}x)" for k, n in notes.items()) or "-")

solo_p99 = stats.get("lc-solo", {}).get("p99")
solo_be = stats.get("be-solo", {}).get("be")
print(f"| case | LC p50 ms | LC p99 ms | LC p99 − solo p99 ms | BE {be_unit} | BE / solo "
      f"| BE / (solo × (1 − LC busy)) | LC busy | LC p99 from schedule ms | runs | notes |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|")
goals = []
for c in cases:
    s = stats[c]
    d = s["p99"] - solo_p99 if s["p99"] is not None and solo_p99 is not None else None
    rel = s["be"] / solo_be if s["be"] is not None and solo_be else None
    goal = None
    if rel is not None and s["has_lc"] and s["busy"] is not None and s["busy"] < 1:
        goal = rel / (1 - s["busy"])
    print(f"| {c} | {fmt(s['p50'], '.3f')} | {fmt(s['p99'], '.3f')} | {fmt(d, '+.3f')} "
          f"| {fmt(s['be'], '.2f')} | {fmt(rel, '.2f')} | {fmt(goal, '.2f')} | {fmt(s['busy'], '.3f')} "
          f"| {fmt(s['sp99'], '.3f')} | {s['runs']} | {s['notes']} |")
    if s["has_lc"] and s["has_be"]:
        a = "-" if d is None else f"{d:+.3f} ms ({'met' if d <= 0.25 else 'missed'})"
        b = "-" if goal is None else f"{goal:.3f} ({'met' if goal >= 0.90 else 'missed'})"
        goals.append(f"goal {c}: LC p99 − solo p99 ≤ 0.25 ms: {a}; "
                     f"BE / (solo × (1 − LC busy)) ≥ 0.90: {b}")
if goals:
    print()
    print("\n".join(goals))
if fails:
    print()
    print("\n".join(fails))
    if fails[told:]:
        print("\n".join(fails[told:]), file=sys.stderr)
sys.exit(1 if fails else 0)
EOF
