# shellcheck shell=bash
# tests/e2e/adv_lib.sh: sourced by the adversarial end-to-end tests
# (issue 17, tests/e2e/adv_*.sh) and bench/adversarial/run.sh.
#
# Each test runs a real cushared (as the test's uid: root in CI), honest
# cs_job processes under the real libcushare.so (lib.sh's launch/finish:
# their sums are checked), and one attacker, cs_attack, speaking the wire
# protocol directly as ANOTHER uid (cushare-adv1, a system user created
# here when missing). Creating users and switching to them needs root: CI
# runs the suite as root. Without root, a test whose attack depends on the
# attacker's uid (clamped HELLO, per-uid limits, a grant in the config)
# prints "SKIP: needs root to create users" and passes; the others run the
# attacker as the test's own uid.
#
# The socket is where any local user reaches it, as /run/cushare is:
# $T/pub (0755) inside $T (0711: reachable, not listable); the attacker
# runs a copy of cs_attack from there (the build tree may be private).
#
# Short bounds, so that a stall shows within seconds: quantum 100..200 ms,
# revoke_timeout_ms 1000. A stall is "the longest time in the attack's
# window when none of the honest jobs had a kernel running" (trace_check
# gaps), and the bound every attack must keep is one quantum (the cap) plus
# one revoke timeout plus ADV_MARGIN_MS for a loaded 2-core machine (600 ms;
# 1000 under a sanitizer).
#
# Assertions go through adv_check, which records a failure and goes on, so
# that one run shows every assertion an attack breaks; adv_end fails the
# test if any did.
#
# ADV_OLD_DAEMON=1 leaves out of the daemon's config every line given as
# "new:LINE" (the keys and sections issue 17 adds): a daemon without them
# refuses unknown keys at start, and this shows instead which assertions it
# fails. The tests never set it.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
ATK_BIN=$B/tests/e2e/cs_attack
require "$ATK_BIN"

ADV_USER=cushare-adv1
ADV_QMIN_MS=100
ADV_QMAX_MS=200
ADV_REVOKE_MS=1000
ADV_MARGIN_MS=${ADV_MARGIN_MS:-$([ -n "$SAN" ] && echo 1000 || echo 600)}
ADV_BOUND_MS=$((ADV_QMAX_MS + ADV_REVOKE_MS + ADV_MARGIN_MS))
# The daemon's settings every attack runs under.
ADV_CONF=("mode = exclusive" "quantum_floor_ms = $ADV_QMIN_MS" "quantum_cap_ms = $ADV_QMAX_MS"
          "revoke_timeout_ms = $ADV_REVOKE_MS" "log_level = debug")

chmod 0711 "$T"
mkdir -p -m 0755 "$T/pub"
SOCK=$T/pub/cushared.sock
export CUSHARE_SOCKET=$SOCK
ATK=$T/pub/cs_attack
install -m 0755 "$ATK_BIN" "$ATK"

declare -A ATK_PID=()
ADV_FAILS=()
ADV_AS=()

# adv_check MESSAGE COMMAND...: records MESSAGE as a failure unless
# COMMAND (a test) succeeds.
adv_check() {
    local msg=$1
    shift
    if "$@"; then
        echo "ok: $msg"
    else
        echo "FAILED: $msg"
        ADV_FAILS+=("$msg")
    fi
}

# adv_end: fails the test with every recorded failure, or prints ok.
adv_end() {
    if [ ${#ADV_FAILS[@]} -gt 0 ]; then
        fail "${#ADV_FAILS[@]} assertion(s) failed:$(printf '\n  - %s' "${ADV_FAILS[@]}")"
    fi
    echo "$TEST_NAME: ok"
}

# adv_attacker_uid any|other: how the attacker runs. "other": the attack
# needs another uid (skipped without root); "any": another uid when root,
# else the test's own.
adv_attacker_uid() {
    if [ "$(id -u)" -ne 0 ]; then
        if [ "$1" = other ]; then
            echo "SKIP: needs root to create users (this attack needs the attacker's own uid)"
            exit 0
        fi
        echo "not root: the attacker runs as the test's own uid"
        ADV_AS=()
        return 0
    fi
    if ! id -u "$ADV_USER" >/dev/null 2>&1; then
        # Another test may create it at the same moment.
        useradd -r -M -s /usr/sbin/nologin "$ADV_USER" 2>/dev/null ||
            id -u "$ADV_USER" >/dev/null 2>&1 || fail "cannot create the user $ADV_USER"
    fi
    ADV_UID=$(id -u "$ADV_USER")
    ADV_AS=(setpriv "--reuid=$ADV_UID" "--regid=$(id -g "$ADV_USER")" --clear-groups --)
    echo "the attacker runs as $ADV_USER (uid $ADV_UID)"
}

# adv_start_daemon [LINE...]: lib.sh's start_daemon with ADV_CONF and the
# given lines; "new:LINE" is a line of issue 17's config (see above).
adv_start_daemon() {
    local l lines=("${ADV_CONF[@]}")
    for l in "$@"; do
        case $l in
        new:*) [ "${ADV_OLD_DAEMON:-0}" = 1 ] || lines+=("${l#new:}") ;;
        *) lines+=("$l") ;;
        esac
    done
    start_daemon "${lines[@]}"
}

# adv_gpu: the simulated GPU's UUID and memory as the driver reports them
# (ADV_UUID, ADV_TOTAL), read as the test's uid before any job starts.
adv_gpu() {
    local line
    line=$("$ATK_BIN" uuid) || fail "cs_attack uuid: $line"
    ADV_UUID=$(field "$line" uuid)
    ADV_TOTAL=$(field "$line" total_mem)
    echo "GPU $ADV_UUID, $ADV_TOTAL bytes"
}

# adv_attack NAME MODE [ARGS...]: cs_attack MODE as the attacker, in the
# background, on the test's GPU; output in $T/NAME.out, pid in ATK_PID[NAME].
adv_attack() {
    local name=$1 mode=$2
    shift 2
    "${ADV_AS[@]}" "$ATK" "$mode" --socket "$SOCK" --uuid "$ADV_UUID" --total-mem "$ADV_TOTAL" \
        --name "$name" "$@" >"$T/$name.out" 2>"$T/$name.err" &
    ATK_PID[$name]=$!
    JOB_PIDS+=($!)
}

# adv_wait_line NAME REGEX [TIMEOUT_S]: until the attacker's output has a
# line matching REGEX; prints it.
adv_wait_line() {
    local _
    for _ in $(seq $((${3:-10} * 50))); do
        grep -m1 -E "$2" "$T/$1.out" 2>/dev/null && return 0
        kill -0 "${ATK_PID[$1]}" 2>/dev/null || break
        sleep 0.02
    done
    grep -m1 -E "$2" "$T/$1.out" 2>/dev/null && return 0
    fail "attacker $1 printed no line like '$2': $(cat "$T/$1.out" "$T/$1.err" 2>/dev/null)"
}

# adv_wait_attack NAME [TIMEOUT_S]: waits for the attacker to end by
# itself (it must: every mode is bounded) and prints its last line. Not in
# a $(...): a subshell cannot wait for the test's children.
adv_wait_attack() {
    local pid=${ATK_PID[$1]} _
    for _ in $(seq $((${2:-30} * 20))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    kill -0 "$pid" 2>/dev/null && fail "attacker $1 still running after ${2:-30} s"
    local rc=0
    wait "$pid" || rc=$?
    [ $rc -eq 0 ] || fail "attacker $1 exit $rc: $(tail -n 5 "$T/$1.out" "$T/$1.err")"
    tail -n 1 "$T/$1.out"
}

# adv_honest NAME...: busy honest jobs, normal class, weight 1, that keep
# running until $T/stop exists (5 ms kernels, synchronized every
# iteration, as frameworks do); waits until each has run a kernel.
adv_honest() {
    local n
    for n in "$@"; do
        launch "$n" normal 1 --mem-mb "${ADV_JOB_MB:-8}" --iters 20 --kernel-ns 5000000 \
            --sync-every 1 --until-file "$T/stop" --seed "${#JOB_PIDS[@]}"
    done
    for n in "$@"; do wait_trace "${JOB_PID[$n]}" 30; done
}

# adv_finish NAME...: stops the honest jobs and checks their results.
adv_finish() {
    local n
    touch "$T/stop"
    for n in "$@"; do finish "$n" 60; done
}

# adv_finish_within NAME S: the job must end within S seconds with correct
# results; one that does not is a recorded failure (and is killed), so
# that the test goes on to its other assertions.
adv_finish_within() {
    local _
    for _ in $(seq $(($2 * 20))); do
        kill -0 "${JOB_PID[$1]}" 2>/dev/null || break
        sleep 0.05
    done
    if kill -0 "${JOB_PID[$1]}" 2>/dev/null; then
        adv_check "job $1 ends within $2 s" false
        kill -9 "${JOB_PID[$1]}"
        wait "${JOB_PID[$1]}" 2>/dev/null || true
    else
        finish "$1"
    fi
}

# adv_gaps FROM_NS TO_NS NAME...: trace_check gaps of the honest jobs'
# kernels over the window, gaps counted from half a revoke timeout; the
# result line in GAPS (key=value).
adv_gaps() {
    local from=$1 to=$2 n pids=()
    shift 2
    for n in "$@"; do pids+=("${JOB_PID[$n]}"); done
    if [ ! -s "$T/trace" ]; then # no kernel ran at all: one long gap
        GAPS="window_ns=$((to - from)) busy_ns=0 longest_gap_ns=$((to - from)) gap_start=$from gap_end=$to gaps_over=1"
        echo "no kernel in the trace: $GAPS"
        return 0
    fi
    "$TC" "$T/trace" gaps "$from" "$to" $((ADV_REVOKE_MS * 500000)) "${pids[@]}" \
        >"$T/gaps.txt" || fail "trace_check gaps failed: $(cat "$T/gaps.txt")"
    GAPS=$(tail -n 1 "$T/gaps.txt")
    echo "window of $(ms $((to - from))) ms: $GAPS"
}

# adv_check_stall WHAT: (b) from GAPS: the longest stall within the bound.
adv_check_stall() {
    local g
    g=$(field "$GAPS" longest_gap_ns)
    adv_check "$1: honest jobs stalled at most $ADV_BOUND_MS ms (quantum $ADV_QMAX_MS + revoke $ADV_REVOKE_MS + margin $ADV_MARGIN_MS): longest stall $(ms "$g") ms" \
        test "$g" -le $((ADV_BOUND_MS * 1000000))
}

# adv_check_once WHAT: from GAPS: the attacker was waited for once at most
# (at most one stall longer than half a revoke timeout).
adv_check_once() {
    local n
    n=$(field "$GAPS" gaps_over)
    adv_check "$1: the unresponsive attacker was waited for once at most: $n stalls over $((ADV_REVOKE_MS / 2)) ms" \
        test "$n" -le 1
}

# adv_client_of PID FILE: polls status (into FILE) until it lists the
# client PID; its line in CLIENT ("" if not within 2 s). With "managed":
# until that client has had a slice (5 s at most).
adv_client_of() {
    local pid=$1 file=$2 want=${3:-} _
    CLIENT=
    for _ in $(seq 100); do
        status "$file" && CLIENT=$(client_line "$file" "$pid")
        [ -n "$CLIENT" ] && { [ "$want" != managed ] || [ "0$(field "$CLIENT" slices)" -ge 1 ]; } &&
            return 0
        sleep 0.05
    done
}

# adv_check_managed NAME WHEN: (c) the job NAME, started WHEN, runs
# managed: status lists it with at least one slice.
adv_check_managed() {
    local c
    adv_client_of "${JOB_PID[$1]}" "$T/status-$1" managed
    c=$CLIENT
    echo "job $1: ${c:-not in status}"
    adv_check "a job started $2 runs managed (status: slices=$(field "$c" slices))" \
        test -n "$c" -a "0$(field "$c" slices)" -ge 1
}

# adv_status FILE: status, failing the test if the daemon does not answer.
adv_status() {
    status "$1" || fail "cusharectl status failed: $(cat "$1.err")"
}
