#!/usr/bin/env bash
# e2e_nvml.sh: issue 22, NVML shows the job's GPU, not the card's.
#
# A real cushared on the simulated GPU, a cs_job holding 512 MiB under the
# hook, and nvml_probe (libnvidia-ml.so.1 loaded as nvidia-smi and pynvml
# load it: dlopen, versioned names) under the hook against the simulated
# NVML, whose card lists two other tenants (a compute and a graphics
# process) and 1 GiB in use. Checked:
#   1. with a quota (default_mem_limit = 3G): memory info v1 and v2 show
#      total 3 GiB, used = the job's 512 MiB, free the rest, nothing
#      reserved; the compute lists (v1, v3) show the job alone with its
#      memory; the graphics list nothing; the utilization samples and the
#      accounting pids the job's only; the detail list is refused
#      (NOT_SUPPORTED); nvidia-smi's way, the private export table's
#      process lists, the job alone too (and a table of another layout,
#      standing for another driver, untouched);
#   2. pynvml inside a CUDA process: its NVML free and total equal its own
#      cuMemGetInfo's;
#   3. a probe on an endpoint of another allocation sees nothing of the job
#      (and the quota of its own endpoint); one on the job's endpoint sees it;
#   4. no daemon, a quota of 1G in the environment: total 1 GiB, no process;
#   5. no daemon, no quota: the card's own answers, untouched.
source "$(dirname "$0")/lib.sh"
NP=$B/tests/e2e/nvml_probe
NVML_DIR=$B/tests/k8s/nvml
require "$NP" "$NVML_DIR/libnvidia-ml.so.1"
GIB=1073741824
MIB=1048576
export FAKECUDA_MEM_MB=16384 # the card: 16 GiB, as the simulated NVML's

# probe NAME [ENV...] [-- ARGS]: nvml_probe under the hook, output in $T/NAME.
probe() {
    local name=$1
    shift
    local envs=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
    [ "${1:-}" = -- ] && shift
    env LD_PRELOAD="$PRELOAD" LD_LIBRARY_PATH="$NVML_DIR:$LD_LIBRARY_PATH" \
        FAKE_NVML_UUIDS="$UUID" FAKE_NVML_USED_MB=1024 FAKE_NVML_MEM_MB=16384 \
        FAKE_NVML_PROCS="0:$JOBPID:512,0:4242:700,0:4343:300:g" "${envs[@]}" \
        "$NP" "$@" >"$T/$name" 2>"$T/$name.err" || fail "nvml_probe $name failed: $(cat "$T/$name" "$T/$name.err")"
}
# val FILE KEY FIELD: FIELD=... of the line starting with KEY.
val() { sed -n "s/^$2 .*\b$3=\([^ ]*\).*/\1/p" "$T/$1"; }
expect() { # FILE KEY FIELD VALUE
    local got
    got=$(val "$1" "$2" "$3")
    [ "$got" = "$4" ] || fail "$1: $2 $3=$got, expected $4 ($(cat "$T/$1"))"
}

mkdir -p "$T/ep"
start_daemon "endpoint_dir = $T/ep"
status "$T/st0"
UUID=$(sed -n 's/.*"uuid": *"\(GPU-[0-9a-f-]*\)".*/\1/p' "$T/st0.json" | head -n 1)
[ -n "$UUID" ] || fail "no GPU UUID in status: $(cat "$T/st0.json")"

# footprint FILE PID: the client's memory as the daemon knows it (USAGE).
footprint() { sed -n "s/^client .* pid=$2 .* footprint=\([0-9]*\) .*/\1/p" "$1"; }
# wait_memory PID: until the daemon knows the job's memory; prints it.
wait_memory() {
    local _ f
    for _ in $(seq 200); do
        status "$T/stm"
        f=$(footprint "$T/stm" "$1")
        [ -n "$f" ] && [ "$f" -ge $((128 * MIB)) ] && { echo "$f"; return 0; }
        sleep 0.05
    done
    fail "the daemon never learned pid $1's memory: $(cat "$T/stm")"
}

# The job: 512 MiB under a 3 GiB quota, running long enough for the probes.
export CUSHARE_MEM_LIMIT=3G
launch job normal 1 --mem-mb 512 --iters 100000 --kernel-ns 1000000 --sync-every 1 --seed 5
unset CUSHARE_MEM_LIMIT
JOBPID=${JOB_PID[job]}
wait_trace "$JOBPID"
JOBMEM=$(wait_memory "$JOBPID")

# 1. The job's view from a plain process of the same uid and environment
#    (nvidia-smi run in the job's container).
probe smi CUSHARE_MEM_LIMIT=3G
expect smi mem total $((3 * GIB))
expect smi mem used "$JOBMEM"
expect smi mem free $((3 * GIB - JOBMEM))
expect smi mem2 total $((3 * GIB))
expect smi mem2 reserved 0
expect smi mem2 used "$JOBMEM"
expect smi mem2 free $((3 * GIB - JOBMEM))
expect smi procs1 list "$JOBPID:$JOBMEM"
expect smi procs3 list "$JOBPID:$JOBMEM"
expect smi graphics3 n 0
expect smi util pids "$JOBPID"
expect smi acct pids "$JOBPID"
expect smi detail rc 3
# nvidia-smi's own process table (the private export table): the job alone,
# with cushare's figure; no graphics or MPS process.
expect smi xtab list "$JOBPID:$JOBMEM"
expect smi xtab-other graphics 0
expect smi xtab-other mps 0
# A table of a layout cushare does not know (another driver) is untouched.
probe smi2 CUSHARE_MEM_LIMIT=3G FAKE_NVML_XTAB_SIZE=2168
expect smi2 xtab list "$JOBPID:$((512 * MIB)),4242:$((700 * MIB))"
expect smi2 xtab-other graphics 1

# 2. pynvml in a CUDA process: NVML agrees with cuMemGetInfo.
#    Its own memory comes from its own records, as cuMemGetInfo's does; the
#    first job (same uid: the same job here) is the difference.
probe inproc CUSHARE_MEM_LIMIT=3G -- --cuda 256
expect inproc cumem total $((3 * GIB))
expect inproc mem total "$(val inproc cumem total)"
expect inproc mem free $(($(val inproc cumem free) - JOBMEM))
grep -q "^procs3 n=2 " "$T/inproc" || fail "the in-process probe lists $(grep procs3 "$T/inproc")"

# 3. Endpoints: another allocation sees nothing of the job.
"$CTL" --socket "$SOCK" endpoint create alloc-a --mem-limit 2G --pod a --namespace t >/dev/null ||
    fail "endpoint alloc-a"
"$CTL" --socket "$SOCK" endpoint create alloc-b --mem-limit 1G --pod b --namespace t >/dev/null ||
    fail "endpoint alloc-b"
probe epb CUSHARE_SOCKET="$T/ep/alloc-b/cushared.sock"
expect epb mem total $GIB
expect epb mem used 0
expect epb procs3 n 0
expect epb util n 0
expect epb acct n 0
expect epb xtab n 0
# A job on alloc-a, and a probe there: it sees that job (and not the first).
env CUSHARE_SOCKET="$T/ep/alloc-a/cushared.sock" LD_PRELOAD="$PRELOAD" CUSHARE_NAME=ja \
    "$B/bin/cs_job" --name ja --mem-mb 128 --iters 100000 --kernel-ns 1000000 --sync-every 1 \
    --seed 6 >"$T/ja.out" 2>"$T/ja.err" &
JA=$!
JOB_PIDS+=("$JA")
wait_trace "$JA"
JAMEM=$(wait_memory "$JA")
# (the card lists that job too, as the driver would)
probe epa CUSHARE_SOCKET="$T/ep/alloc-a/cushared.sock" \
    FAKE_NVML_PROCS="0:$JOBPID:512,0:$JA:128,0:4242:700,0:4343:300:g"
expect epa mem total $((2 * GIB))
expect epa mem used "$JAMEM"
expect epa procs3 list "$JA:$JAMEM"
expect epa xtab list "$JA:$JAMEM"
kill "$JA" "$JOBPID"
wait "$JA" "$JOBPID" 2>/dev/null || true
stop_daemon

# 4. No daemon, a quota in the environment: the quota, no process of anyone.
probe nod CUSHARE_MEM_LIMIT=1G
expect nod mem total $GIB
expect nod mem used 0
expect nod procs3 n 0
expect nod xtab n 0
# 5. No daemon, no quota: NVML's own answers.
probe raw
expect raw mem total $((16384 * MIB))
expect raw mem used $((1024 * MIB))
expect raw procs3 n 2
expect raw graphics3 n 1
expect raw detail rc 0
expect raw acct n 3
expect raw xtab n 2
expect raw xtab-other graphics 1
echo "e2e_nvml: ok"
