#!/usr/bin/env bash
# prometheus_check.sh: issue 22, cushared's metrics as Prometheus sees them.
#
# A real cushared on the simulated GPU serves its metrics on a port it picks
# (`cusharectl status --json`: daemon.metrics_port). Jobs that hold the GPU
# in turn, each with its own POD_NAME, POD_NAMESPACE and CUSHARE_CONTAINER
# (one of them with quotes, backslashes and braces in all three), run while
#
#  1. `promtool check metrics` passes on the page (names, types, units);
#  2. Debian's prometheus scrapes it every second, as a Kubernetes target
#     would: `pod`, `namespace` and `container` target labels of its own
#     and honor_labels, as deploy/'s ServiceMonitor sets. Its HTTP API must
#     answer cushare_client_gpu_seconds_total > 0 for each job's pod, with
#     that pod's namespace and container, the hostile values intact, and
#     none of the three for the job that names none (an empty label is no
#     label: the target's do not take its place);
#  3. the PrometheusRule's alerts and every query of the Grafana dashboard
#     (deploy/, tests/k8s/monitoring.py) pass `promtool check rules`, name
#     only metrics the page has, and evaluate without error in that
#     Prometheus (loaded as its rules: /api/v1/rules health "ok").
#
# SKIP (exit 77) without /usr/bin/prometheus and /usr/bin/promtool (Debian's
# prometheus package; scripts/deps.sh installs it as root). ~15 s.
source "$(dirname "$0")/lib.sh"
# The runner's own labels must not reach job d: in a pod the hook would
# take HOSTNAME for the pod's name, CONTAINER_NAME for the container's.
unset KUBERNETES_SERVICE_HOST CONTAINER_NAME POD_NAME POD_NAMESPACE
PROM=/usr/bin/prometheus
PROMTOOL=/usr/bin/promtool
for t in "$PROM" "$PROMTOOL"; do
    [ -x "$t" ] || {
        echo "SKIP: $TEST_NAME needs $t (Debian package prometheus: scripts/deps.sh installs it as root)"
        exit 77
    }
done
PY=
for p in python3 /usr/bin/python3; do
    if "$p" -c 'import yaml' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || fail "python3 with PyYAML is needed (Debian: python3-yaml)"
MON=tests/k8s/monitoring.py

# get URL: the body, or non-zero.
get() { "$PY" -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1"; }

start_daemon "metrics = 127.0.0.1:0" "mode = exclusive" \
    "quantum_floor_ms = 100" "quantum_cap_ms = 100"
"$CTL" --socket "$SOCK" status --json >"$T/status.json"
MPORT=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["daemon"]["metrics_port"])' \
    "$T/status.json")
[ "${MPORT:-0}" -gt 0 ] || fail "no metrics port in the status"

# The hostile job's claims: every character the text format escapes, and
# the ones that end a label set.
EVIL_POD='evil"},x="1\'
EVIL_NS='ns\"{'
EVIL_CT='c,"=}\\'
job() { # NAME POD NS CONTAINER
    POD_NAME=$2 POD_NAMESPACE=$3 CUSHARE_CONTAINER=$4 \
        launch "$1" normal 1 --mem-mb 4 --iters 1 --kernel-ns 2000000 --sync-every 1 \
            --until-file "$T/stop"
}
job a pod-a team-a trainer
job b pod-b team-b server
job c "$EVIL_POD" "$EVIL_NS" "$EVIL_CT"
job d "" "" "" # none: "" on the page, no label in Prometheus (not the target's)

# ---- 1: promtool on the page ------------------------------------------------------
for _ in $(seq 100); do # until every job held the GPU once
    get "http://127.0.0.1:$MPORT/metrics" >"$T/scrape.txt" || fail "cannot scrape :$MPORT"
    [ "$(grep -c '^cushare_client_slices_total{.*} [1-9]' "$T/scrape.txt")" -ge 4 ] && break
    sleep 0.05
done
[ "$(grep -c '^cushare_client_slices_total{.*} [1-9]' "$T/scrape.txt")" -ge 4 ] ||
    fail "the jobs did not all get the GPU: $(grep '^cushare_client_slices_total' "$T/scrape.txt")"
"$PROMTOOL" check metrics <"$T/scrape.txt" >"$T/promtool.out" 2>&1 ||
    fail "promtool check metrics: $(cat "$T/promtool.out")"
echo "promtool check metrics: clean ($(grep -vc '^#' "$T/scrape.txt") samples)"

# ---- 3 (static part): rules and dashboard queries ------------------------------------
"$PY" "$MON" rules "$T/rules.yaml" || fail "deploy/'s rules or dashboard are malformed"
"$PROMTOOL" check rules "$T/rules.yaml" >"$T/rules.out" 2>&1 ||
    fail "promtool check rules: $(cat "$T/rules.out")"
"$PY" "$MON" names "$T/scrape.txt" || fail "deploy/ names metrics that cushared does not export"

# ---- 2: a real Prometheus ------------------------------------------------------------
PPORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat >"$T/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ["$T/rules.yaml"]
scrape_configs:
  - job_name: cushare
    honor_labels: true
    static_configs:
      - targets: ["127.0.0.1:$MPORT"]
        labels: {pod: cushare-node-x, namespace: cushare, container: cushared, node: node-x}
EOF
"$PROM" --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
    --web.listen-address="127.0.0.1:$PPORT" --log.level=warn 2>"$T/prometheus.err" &
JOB_PIDS+=($!)
API=http://127.0.0.1:$PPORT/api/v1

# query PROMQL: the result vector as JSON lines {"metric": ..., "value": v}.
query() {
    "$PY" - "$API" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
url = sys.argv[1] + "/query?" + urllib.parse.urlencode({"query": sys.argv[2]})
r = json.load(urllib.request.urlopen(url, timeout=5))
assert r["status"] == "success", r
for s in r["data"]["result"]:
    print(json.dumps({"metric": s["metric"], "value": float(s["value"][1])}, sort_keys=True))
PY
}

# wait_labels SECONDS [POD NS CONTAINER]...: until Prometheus has, for each
# triple, exactly one series of GPU time above 0 with those labels, "" for
# none (polled in one process: a python start per try would be most of the
# wait).
wait_labels() {
    "$PY" - "$API" "$@" <<'PY'
import json, sys, time, urllib.parse, urllib.request
api, limit, want = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
want = [tuple(x or None for x in want[i:i + 3]) for i in range(0, len(want), 3)]
url = api + "/query?" + urllib.parse.urlencode({"query": "cushare_client_gpu_seconds_total"})
end, rows = time.monotonic() + limit, []
while time.monotonic() < end:
    try:
        rows = json.load(urllib.request.urlopen(url, timeout=5))["data"]["result"]
    except OSError:
        rows = []  # not up yet
    def n(pod, ns, ct):
        return sum(1 for r in rows if float(r["value"][1]) > 0 and
                   (r["metric"].get("pod"), r["metric"].get("namespace"),
                    r["metric"].get("container")) == (pod, ns, ct))
    if all(n(*w) == 1 for w in want):
        sys.exit(0)
    time.sleep(0.1)
print("\n".join(json.dumps(r["metric"], sort_keys=True) for r in rows) or "no series")
sys.exit(1)
PY
}

wait_labels 20 pod-a team-a trainer pod-b team-b server "$EVIL_POD" "$EVIL_NS" "$EVIL_CT" \
    "" "" "" >"$T/q.out" ||
    fail "Prometheus has no GPU time with each job's pod, namespace and container: $(cat "$T/q.out")"
echo "prometheus: GPU time of pod-a, pod-b, the hostile pod and the one without, with their labels"
query 'count by (pod) (cushare_client_gpu_seconds_total{pod=~"pod-a|pod-b"} > 0)' >"$T/q.json"
[ "$(grep -c . "$T/q.json")" = 2 ] || fail "expected both pods: $(cat "$T/q.json")"
# The daemon's own series keep the target's labels (nothing of a client's).
query 'cushare_uptime_seconds' >"$T/q.json"
grep -q '"pod": "cushare-node-x"' "$T/q.json" || fail "target labels lost: $(cat "$T/q.json")"

# ---- 3 (live part): every rule evaluates --------------------------------------------
"$PY" - "$API" >"$T/rules.out" <<'PY' || fail "rules do not evaluate: $(cat "$T/rules.out")"
import json, sys, time, urllib.request
end, bad, rules = time.monotonic() + 10, None, []
while time.monotonic() < end:
    groups = json.load(urllib.request.urlopen(sys.argv[1] + "/rules", timeout=5))["data"]["groups"]
    rules = [r for g in groups for r in g["rules"]]
    bad = [(r["name"], r["health"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    if rules and not bad:
        print(f"prometheus: {len(rules)} rules evaluated, all ok")
        sys.exit(0)
    time.sleep(0.2)
print(f"{len(rules)} rules, not ok: {bad}")
sys.exit(1)
PY
cat "$T/rules.out"

touch "$T/stop"
finish a
finish b
finish c
finish d
echo "prometheus_check: PASS"
