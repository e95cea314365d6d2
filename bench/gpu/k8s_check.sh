#!/usr/bin/env bash
# bench/gpu/k8s_check.sh [BUILD]: the Kubernetes device plugin on a node with
# a real NVIDIA GPU, without Kubernetes. Runs from the repository root of a
# built tree (make; scripts/gpu-bundle.sh BUILD puts the gRPC/protobuf-c
# libraries in BUILD/gpu-libs for machines without them).
#
#   1. cushared on a private socket;
#   2. the test kubelet (BUILD/tests/k8s/tkubelet, the v1beta1 API over unix
#      sockets) and cushare-device-plugin with the real NVML: registration,
#      ListAndWatch, GetPreferredAllocation, Allocate, PreStartContainer for
#      cushare.io/gpu-high; then a second kubelet (the first one "restarted")
#      must get a re-registration and allocates cushare.io/gpu-low;
#   3. two "pods": cs_job processes run with exactly the environment of each
#      Allocate answer (the answer's mounts map host paths to themselves
#      here: --container-lib is the library's host path), at the same time;
#      both must finish correctly, and the daemon must have seen both,
#      with their priority classes;
#   4. SIGTERM to the plugin: a clean exit.
# Prints each Allocate answer and PASS/FAIL per step; exit status 0 = PASS.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:-${CUSHARE_BUILD:-build}}
GL=$PWD/$B/gpu-libs
LLP=$GL${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
ours() { LD_LIBRARY_PATH=$LLP "$@"; }
W=$(mktemp -d /tmp/cushare-k8s.XXXXXX)
PLUG=$W/device-plugins
RUN=$W/run
SOCK=$RUN/cushared.sock
LIB=$PWD/$B/lib/libcushare.so
DP=$B/bin/cushare-device-plugin
TK=$B/tests/k8s/tkubelet
fails=0
DPID= CPID=

pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
cleanup() {
    [ -n "$DPID" ] && kill "$DPID" 2>/dev/null
    [ -n "$CPID" ] && kill "$CPID" 2>/dev/null
    wait 2>/dev/null
}
trap cleanup EXIT

for f in "$DP" "$TK" "$B/bin/cushared" "$B/bin/cusharectl" "$B/bin/cs_job" "$LIB"; do
    [ -e "$f" ] || { echo "FAIL $f missing: build the tree first (make; make $TK)"; exit 1; }
done
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader
mkdir -p "$PLUG" "$RUN"
echo "work directory: $W"

# ---- 1. the daemon ------------------------------------------------------------
printf '[cushared]\nclient_reserve_mb = 512\n' >"$W/cushared.conf"
# Not through ours(): $! must be the program itself, for kill.
LD_LIBRARY_PATH=$LLP "$B/bin/cushared" --socket "$SOCK" --config "$W/cushared.conf" 2>"$W/cushared.log" &
CPID=$!
for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.05; done
[ -S "$SOCK" ] && pass "cushared listens on $SOCK" || { fail "cushared did not start"; cat "$W/cushared.log"; exit 1; }

# ---- 2. kubelet + plugin ---------------------------------------------------------
kubelet() { # RESOURCE NAME: one test kubelet run, its Allocate env in $W/NAME.env
    ours "$TK" --dir "$PLUG" --resource "$1" --env-out "$W/$2.env" >"$W/tkubelet-$2.log" 2>&1 &
    TKPID=$!
    for _ in $(seq 200); do [ -S "$PLUG/kubelet.sock" ] && break; sleep 0.05; done
}
kubelet_result() { # NAME
    wait "$TKPID"
    local rc=$?
    sed 's/^/    /' "$W/tkubelet-$1.log"
    [ $rc = 0 ] && pass "kubelet ($1): registration, list, preferred allocation, Allocate, PreStart" \
        || fail "kubelet ($1): see above"
}

kubelet cushare.io/gpu-high lc
# --pod-resources off: a node's own kubelet, if it has one, knows nothing of these pods.
LD_LIBRARY_PATH=$LLP "$DP" --plugin-dir "$PLUG" --lib "$LIB" --container-lib "$LIB" --socket "$SOCK" \
    --pod-resources off --resource gpu --resource gpu-high:slots=2,priority=high,weight=4 \
    --resource gpu-low:priority=low,mem-limit=4G 2>"$W/plugin.log" &
DPID=$!
kubelet_result lc
if grep -q "NVML loaded" "$W/plugin.log"; then
    pass "NVML: $(grep -m1 'NVML loaded' "$W/plugin.log" | sed 's/.*info: //')"
    grep 'NVML: \|GPU [0-9]*:' "$W/plugin.log" | sed 's/.*info: /    /'
else
    fail "the plugin did not load NVML:"; cat "$W/plugin.log"
fi

# Every GPU of the node found, and every GPU's shares listed (IDs are
# GPU-<uuid>::<n>): on a node of several GPUs, both counts must be its count.
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
nfound=$(grep -c 'info: GPU [0-9]*: ' "$W/plugin.log")
nlisted=$(grep -o '^  GPU-[0-9a-f-]*::' "$W/tkubelet-lc.log" | sort -u | wc -l)
[ "$nfound" = "$ngpu" ] && [ "$nlisted" = "$ngpu" ] &&
    pass "all $ngpu GPUs found by the plugin and listed to the kubelet" ||
    fail "GPUs: nvidia-smi $ngpu, found by the plugin $nfound, listed by ListAndWatch $nlisted"

# The same kubelet again, as after a restart: the plugin must register anew.
kubelet cushare.io/gpu-low be
kubelet_result be

# ---- 3. two pod-like processes sharing the GPU -----------------------------------
pod() { # NAME ARGS...: cs_job with the env of the NAME Allocate answer only
    local name=$1
    shift
    env -i PATH="$PATH" HOME="$HOME" LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" \
        CUSHARE_NAME="k8s-$name" $(cat "$W/$name.env") "$B/bin/cs_job" --name "k8s-$name" "$@" \
        >"$W/pod-$name.log" 2>&1
}
if [ -s "$W/lc.env" ] && [ -s "$W/be.env" ]; then
    pod be --mem-mb 512 --iters 60 --kernel-ns 50000000 --sync-every 1 &
    BE=$!
    pod lc --mem-mb 128 --iters 40 --kernel-ns 2000000 --gap-ms 20 --start-delay-ms 500 &
    LC=$!
    seen=""
    while kill -0 $BE 2>/dev/null || kill -0 $LC 2>/dev/null; do
        st=$(ours "$B/bin/cusharectl" --socket "$SOCK" status 2>/dev/null)
        echo "$st" | grep -q k8s-lc && echo "$st" | grep -q k8s-be && { seen=$st; break; }
        sleep 0.1
    done
    wait $BE; rbe=$?
    wait $LC; rlc=$?
    cat "$W/pod-be.log" "$W/pod-lc.log" | sed 's/^/    /'
    [ $rbe = 0 ] && grep -q '^cs_job: ok' "$W/pod-be.log" && pass "BE pod (gpu-low, 4G quota) ran correctly" \
        || fail "BE pod (see $W/pod-be.log)"
    [ $rlc = 0 ] && grep -q '^cs_job: ok' "$W/pod-lc.log" && pass "LC pod (gpu-high) ran correctly" \
        || fail "LC pod (see $W/pod-lc.log)"
    if [ -n "$seen" ]; then
        echo "$seen" | sed 's/^/    /'
        pass "cushared scheduled both pods on the GPU"
    else
        fail "cushared never showed both pods (status: $(ours "$B/bin/cusharectl" --socket "$SOCK" status 2>&1))"
    fi
else
    fail "no Allocate environment to run the pods with"
fi

# ---- 4. clean stop ------------------------------------------------------------------
kill -TERM "$DPID"
wait "$DPID"
rc=$?
DPID=
[ $rc = 0 ] && pass "plugin exits 0 on SIGTERM" || fail "plugin exit status $rc on SIGTERM"
[ -e "$PLUG/cushare-gpu.sock" ] && fail "plugin socket left behind" || pass "plugin sockets removed"

echo "logs: $W"
if [ $fails = 0 ]; then echo "k8s_check: PASS"; else echo "k8s_check: FAIL ($fails)"; exit 1; fi
