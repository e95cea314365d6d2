#!/bin/sh
# tests/k8s/manifests_check.sh: the Kubernetes manifests (deploy/kubernetes)
# and the Helm chart (deploy/helm/cushare) render and validate, without a
# cluster:
#   1. check_manifests.py: structure of every manifest and example, the
#      chart's values against values.schema.json, its templates' actions,
#      .Values paths and includes;
#   2. the DaemonSet's device-plugin flags and its cushared.conf are parsed
#      by the real programs of this build (--print-config);
#   3. with kubectl on PATH: `kubectl kustomize` renders deploy/kubernetes
#      (offline) and the result is checked again; `kubectl apply
#      --dry-run=client` only if a cluster answers (client dry-run still asks
#      the API server for its schemas);
#   4. with helm on PATH: `helm lint`, and `helm template` with the default
#      values, with the ServiceMonitor and preload injection, each result
#      checked as above (flags and config included);
#   5. the metrics checks of 1 (never 0.0.0.0, a NetworkPolicy, the
#      examples' CUSHARE_CONTAINER) and the pod-resources mount fail on
#      broken copies of deploy/, and helm refuses metrics.bindAddress=0.0.0.0;
#   6. with promtool on PATH (Debian: prometheus): the PrometheusRule's
#      groups and the Grafana dashboard's queries pass `promtool check
#      rules` (tests/k8s/monitoring.py; tests/e2e/prometheus_check.sh also
#      holds their metric names to a real scrape and evaluates them).
set -eu
cd "$(dirname "$0")/../.."
B=${CUSHARE_BUILD:-build}
T=${TEST_TMP:-$(mktemp -d)}
DP=$B/bin/cushare-device-plugin
CUSHARED=$B/bin/cushared

# The python3 on PATH may be a private one (pyenv) that does not see
# Debian's python3-yaml: fall back to the system interpreter.
PY=
for p in python3 /usr/bin/python3; do
    if "$p" -c 'import yaml' 2>/dev/null; then PY=$p; break; fi
done
[ -n "$PY" ] || {
    echo "manifests_check: python3 with PyYAML is needed (Debian: python3-yaml)" >&2
    exit 1
}

# $1: a device-plugin flags file (one argument a line); $2: a cushared.conf
programs_accept() {
    echo "-- device plugin flags ($1)"
    xargs -d '\n' "$DP" --print-config <"$1"
    if [ -x "$CUSHARED" ]; then
        echo "-- cushared.conf ($2)"
        "$CUSHARED" --socket "$T/print.sock" --config "$2" --print-config >/dev/null
        echo "cushared accepts it"
    else
        echo "-- $CUSHARED not built: cushared.conf not checked by the daemon"
    fi
}

# Pulls the device-plugin arguments and cushared.conf out of rendered YAML.
extract() { # $1 rendered yaml, $2 prefix for the outputs
    "$PY" - "$1" "$2" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
for d in docs:
    if d.get("kind") == "DaemonSet":
        for c in d["spec"]["template"]["spec"]["containers"]:
            if "cushare-device-plugin" in " ".join(c.get("command", [])):
                open(sys.argv[2] + ".flags", "w").write("\n".join(c["command"][1:]) + "\n")
    if d.get("kind") == "ConfigMap" and "cushared.conf" in d.get("data", {}):
        open(sys.argv[2] + ".conf", "w").write(d["data"]["cushared.conf"])
PY
}

echo "== structure"
"$PY" tests/k8s/check_manifests.py --dp-flags "$T/plain.flags" --daemon-conf "$T/plain.conf"
programs_accept "$T/plain.flags" "$T/plain.conf"

# The metrics checks catch what they are for: a copy of deploy/ that binds
# every address, then one without the NetworkPolicy, must each fail.
echo "== the checks fail on an any-address bind, a missing NetworkPolicy, an example without CUSHARE_CONTAINER, a plugin without the pod-resources mount"
mkdir -p "$T/bad1" "$T/bad2" "$T/bad3" "$T/bad4"
for bad in bad1 bad2 bad3 bad4; do cp -r deploy "$T/$bad/"; done
sed -i 's/--metrics=\$(POD_IP):/--metrics=0.0.0.0:/' "$T/bad1/deploy/kubernetes/daemonset.yaml"
rm "$T/bad2/deploy/kubernetes/networkpolicy.yaml"
sed -i '/networkpolicy.yaml/d' "$T/bad2/deploy/kubernetes/kustomization.yaml"
sed -i '/name: CUSHARE_CONTAINER/,+1d' "$T/bad3/deploy/kubernetes/examples/lc-inference.yaml"
sed -i 's|mountPath: /var/lib/kubelet/pod-resources|mountPath: /pod-resources|' \
    "$T/bad4/deploy/kubernetes/daemonset.yaml"
for bad in bad1 bad2 bad3 bad4; do
    if "$PY" tests/k8s/check_manifests.py --root "$T/$bad" >"$T/$bad.out"; then
        echo "check_manifests.py passed a broken copy ($bad)" >&2
        exit 1
    fi
    grep FAIL "$T/$bad.out"
done

if command -v promtool >/dev/null 2>&1; then
    echo "== promtool check rules: the PrometheusRule and the dashboard's queries"
    "$PY" tests/k8s/monitoring.py rules "$T/rules.yaml"
    promtool check rules "$T/rules.yaml"
else
    echo "== promtool not on PATH (Debian: prometheus): rules and dashboard checked by structure only"
fi

if command -v kubectl >/dev/null 2>&1; then
    echo "== kubectl kustomize deploy/kubernetes"
    kubectl kustomize deploy/kubernetes >"$T/kustomized.yaml"
    "$PY" tests/k8s/check_manifests.py --rendered "$T/kustomized.yaml"
    if kubectl version --request-timeout=3s >/dev/null 2>&1; then
        echo "== kubectl apply --dry-run=client"
        kubectl apply --dry-run=client -f "$T/kustomized.yaml"
        kubectl apply --dry-run=client -f deploy/kubernetes/examples/
    else
        echo "== kubectl: no cluster answers; apply --dry-run=client skipped"
    fi
else
    echo "== kubectl not on PATH: kustomize rendering skipped"
fi

if command -v helm >/dev/null 2>&1; then
    echo "== helm lint / helm template"
    helm lint deploy/helm/cushare
    i=0
    for set in "" "--set metrics.serviceMonitor.enabled=true" \
        "--set devicePlugin.inject=preload --set devicePlugin.memory.enabled=false --set devicePlugin.advertise[0].name=gpu --set devicePlugin.advertise[0].memLimit=8G"; do
        i=$((i + 1))
        # shellcheck disable=SC2086
        helm template cushare deploy/helm/cushare --namespace cushare $set >"$T/helm$i.yaml"
        "$PY" tests/k8s/check_manifests.py --rendered "$T/helm$i.yaml"
        extract "$T/helm$i.yaml" "$T/helm$i"
        programs_accept "$T/helm$i.flags" "$T/helm$i.conf"
    done
    # The chart refuses a memory resource combined with a memLimit.
    if helm template cushare deploy/helm/cushare --set devicePlugin.advertise[0].name=gpu \
        --set devicePlugin.advertise[0].memLimit=8G >/dev/null 2>&1; then
        echo "helm template accepted memLimit with the memory resource" >&2
        exit 1
    fi
    # ... and a metrics endpoint on every address.
    if helm template cushare deploy/helm/cushare --set metrics.bindAddress=0.0.0.0 \
        >/dev/null 2>&1; then
        echo "helm template accepted metrics.bindAddress=0.0.0.0" >&2
        exit 1
    fi
else
    echo "== helm not on PATH (not in Debian): chart checked by structure and schema only"
fi
echo "manifests_check: PASS"
