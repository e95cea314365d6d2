#!/usr/bin/env python3
"""check_manifests.py: structural validation of deploy/kubernetes and the
Helm chart deploy/helm/cushare without a cluster.

Plain manifests (and any rendered YAML given with --rendered): every document
parses, has apiVersion/kind/metadata.name; pod templates have named, imaged,
uniquely named containers whose volumeMounts name declared volumes, requests
not above limits, absolute hostPaths; a DaemonSet's selector matches its
template's labels; a Service selects the DaemonSet; the cushare.io/*
resources the examples request are advertised by the device plugin's flags;
cushared's --metrics is not bound to every address, a $(VAR) host is the
pod's IP (status.podIP), and off loopback a NetworkPolicy admits ingress to
the metrics port from named peers only (never on the host network).
the device plugin keeps endpoints on, and cushared and the plugin share the
socket directory as a hostPath mounted at its own path (the plugin hands the
daemon's endpoint paths to the kubelet as host paths); unless
--pod-resources=off, the plugin has the kubelet's pod-resources directory as
a hostPath at its own path (the socket it asks which pod holds an endpoint).
A container of an example that asks for a cushare.io resource sets POD_NAME
and POD_NAMESPACE by the downward API and CUSHARE_CONTAINER to its own name
(the labels of docs/metrics.md); a ServiceMonitor honors the scraped labels.
The monitoring files (monitoring.py: deploy/kubernetes/prometheusrule.yaml,
deploy/grafana/cushare-dashboard.json) are well formed, and the
PrometheusRule is not in kustomization.yaml (it needs the operator's CRDs).
The chart: Chart.yaml fields, values.yaml against values.schema.json (a
draft-07 subset: type, properties, required, additionalProperties, items,
minItems, enum, minimum, maximum, minLength, pattern), templates with
balanced actions and blocks, every .Values path they use defined in
values.yaml, every include'd template defined.

Prints one line per finding; exits 1 if there is any. With --dp-flags FILE
and --daemon-conf FILE it writes the device plugin's arguments and the
cushared.conf of the DaemonSet for the shell wrapper to check with the real
programs.
"""
import argparse
import glob
import json
import os
import re
import sys

import yaml

import monitoring

errors = []


def err(where, msg):
    errors.append(f"{where}: {msg}")


# ---- quantities ------------------------------------------------------------------

_SUFFIX = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
           "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(q):
    m = re.fullmatch(r"([0-9.]+)(m|k|M|G|T|Ki|Mi|Gi|Ti)?", str(q))
    if not m:
        return None
    return float(m.group(1)) * _SUFFIX[m.group(2) or ""]


# ---- Kubernetes objects ----------------------------------------------------------------

def pod_spec(obj):
    kind = obj.get("kind")
    spec = obj.get("spec") or {}
    if kind == "Pod":
        return spec
    if kind in ("DaemonSet", "Deployment", "StatefulSet", "Job"):
        return (spec.get("template") or {}).get("spec")
    return None


def check_container(where, c, volumes):
    if not c.get("name") or not c.get("image"):
        err(where, "a container without name or image")
    for vm in c.get("volumeMounts") or []:
        if vm.get("name") not in volumes:
            err(where, f"container {c.get('name')}: volumeMount {vm.get('name')} names no volume")
        if not str(vm.get("mountPath", "")).startswith("/"):
            err(where, f"container {c.get('name')}: mountPath {vm.get('mountPath')} not absolute")
    res = c.get("resources") or {}
    for r, lim in (res.get("limits") or {}).items():
        req = (res.get("requests") or {}).get(r)
        if req is not None and r in ("cpu", "memory"):
            a, b = quantity(req), quantity(lim)
            if a is None or b is None:
                err(where, f"container {c.get('name')}: bad quantity {req!r}/{lim!r}")
            elif a > b:
                err(where, f"container {c.get('name')}: {r} request {req} above limit {lim}")
    for e in c.get("env") or []:
        if "name" not in e or ("value" in e) == ("valueFrom" in e):
            err(where, f"container {c.get('name')}: env entry {e} needs name and value or valueFrom")
        if "value" in e and not isinstance(e["value"], str):
            err(where, f"container {c.get('name')}: env {e['name']} value must be a string")


def check_pod(where, spec, daemon):
    containers = spec.get("containers") or []
    if not containers:
        err(where, "no containers")
    names = [c.get("name") for c in containers]
    if len(set(names)) != len(names):
        err(where, f"duplicate container names {names}")
    volumes = {}
    for v in spec.get("volumes") or []:
        volumes[v.get("name")] = v
        hp = v.get("hostPath")
        if hp and not str(hp.get("path", "")).startswith("/"):
            err(where, f"volume {v.get('name')}: hostPath not absolute")
    for c in containers:
        check_container(where, c, volumes)
        sc = c.get("securityContext") or {}
        if daemon and (sc.get("privileged") or sc.get("allowPrivilegeEscalation", True)):
            err(where, f"container {c.get('name')}: must not be privileged or escalate")


def check_object(where, obj):
    for k in ("apiVersion", "kind"):
        if not obj.get(k):
            err(where, f"no {k}")
    if not (obj.get("metadata") or {}).get("name"):
        err(where, "no metadata.name")
    spec = pod_spec(obj)
    if obj.get("kind") in ("Pod", "DaemonSet", "Deployment", "StatefulSet", "Job"):
        if not spec:
            err(where, "no pod spec")
            return
        check_pod(where, spec, obj["kind"] == "DaemonSet")
    if obj.get("kind") == "DaemonSet":
        sel = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        labels = (((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("labels") or {}
        if not sel or any(labels.get(k) != v for k, v in sel.items()):
            err(where, "selector.matchLabels do not match the template's labels")
    if obj.get("kind") == "ConfigMap":
        for k, v in (obj.get("data") or {}).items():
            if not isinstance(v, str):
                err(where, f"data.{k} is not a string")
    if obj.get("kind") == "Service":
        for p in (obj.get("spec") or {}).get("ports") or []:
            if not isinstance(p.get("port"), int):
                err(where, f"port {p} has no integer port")


def plugin_container(objs):
    for o in objs:
        if o.get("kind") == "DaemonSet":
            for c in pod_spec(o).get("containers") or []:
                if "cushare-device-plugin" in " ".join(c.get("command") or []):
                    return o, c
    return None, None


def advertised(cmd):
    names = []
    for a in cmd:
        m = re.match(r"--resource=([^:]+)", a)
        if m:
            n = m.group(1)
            names.append(n if "/" in n else "cushare.io/" + n)
    return names or ["cushare.io/gpu"]


# ---- the metrics endpoint: bound to an address, fenced by a NetworkPolicy ------------------

_ANY_ADDR = {"", "0.0.0.0", "*", "::", "[::]"}
_LOOPBACK = re.compile(r"^(127\.[0-9.]+|::1|\[::1\]|localhost)$")


def metrics_flag(cmd):
    """The HOST:PORT of cushared's --metrics, or None."""
    for i, a in enumerate(cmd):
        if a.startswith("--metrics="):
            return a.split("=", 1)[1]
        if a == "--metrics" and i + 1 < len(cmd):
            return cmd[i + 1]
    return None


def selects(policy, labels):
    sel = ((policy.get("spec") or {}).get("podSelector") or {}).get("matchLabels") or {}
    return all(labels.get(k) == v for k, v in sel.items())


def check_metrics_policy(label, ds, policies, port_names):
    """A NetworkPolicy selects the DaemonSet's pods for Ingress, and each of
    its rules names its peers (no empty `from`: that admits everyone)."""
    labels = ds["spec"]["template"]["metadata"].get("labels") or {}
    mine = [p for p in policies if selects(p, labels)
            and "Ingress" in ((p.get("spec") or {}).get("policyTypes") or [])]
    if not mine:
        err(label, "no NetworkPolicy limits ingress to the metrics endpoint")
    for p in mine:
        for r in (p.get("spec") or {}).get("ingress") or []:
            if not r.get("from"):
                err(label, f"NetworkPolicy {p['metadata']['name']}: an ingress rule admits every peer")
            for pt in r.get("ports") or [{}]:
                if pt.get("port") not in port_names:
                    err(label, f"NetworkPolicy {p['metadata']['name']}: port {pt.get('port')} "
                        f"is not the metrics port")


def check_metrics(label, ds, objs):
    """cushared's --metrics never listens on every address; $(VAR) hosts come
    from the pod's IP (downward API); off loopback a NetworkPolicy fences it.
    A host-network pod has no NetworkPolicy to protect it: loopback only."""
    spec = pod_spec(ds)
    for c in spec.get("containers") or []:
        cmd = c.get("command") or []
        if not cmd or not cmd[0].endswith("/cushared"):
            continue
        hp = metrics_flag(cmd + (c.get("args") or []))
        if hp is None:
            continue
        host = hp.rsplit(":", 1)[0]
        if host in _ANY_ADDR:
            err(label, f"cushared --metrics={hp} listens on every address")
            continue
        env = {e.get("name"): e for e in c.get("env") or []}
        for var in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", host):
            path = ((env.get(var) or {}).get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath")
            if path != "status.podIP":
                err(label, f"cushared --metrics={hp}: {var} is not the pod's IP (status.podIP)")
        if _LOOPBACK.match(host):
            continue
        if spec.get("hostNetwork"):
            err(label, f"cushared --metrics={hp} on the host network: NetworkPolicy does not "
                "apply there; bind 127.0.0.1")
            continue
        ports = {"metrics"} | {p.get("containerPort") for p in c.get("ports") or []}
        ports.add(int(hp.rsplit(":", 1)[1]) if hp.rsplit(":", 1)[1].isdigit() else None)
        check_metrics_policy(label, ds, [o for o in objs if o.get("kind") == "NetworkPolicy"],
                             ports)
def flag(cmd, name):
    for a in cmd or []:
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
    return None


def hostpath_mounted(spec, container, path):
    """container mounts the host's directory path at the same path."""
    vols = {v.get("name"): v for v in spec.get("volumes") or []}
    return any(vm.get("mountPath") == path and
               ((vols.get(vm.get("name")) or {}).get("hostPath") or {}).get("path") == path
               for vm in container.get("volumeMounts") or [])


def check_endpoints(label, ds, plugin):
    cmd = plugin.get("command") or []
    if (flag(cmd, "endpoints") or "on").lower() in ("off", "false", "no", "0"):
        err(label, "the device plugin runs with --endpoints=off: any pod could claim any class")
    sock = flag(cmd, "socket") or "/run/cushare/cushared.sock"
    sdir = os.path.dirname(sock)
    spec = pod_spec(ds)
    daemons = [c for c in spec.get("containers") or []
               if (c.get("command") or [""])[0].endswith("/cushared")]
    if not daemons:
        err(label, "no cushared container beside the device plugin")
    for c in daemons + [plugin]:
        if c in daemons and (flag(c.get("command"), "socket") or sock) != sock:
            err(label, f"cushared's --socket is not the device plugin's ({sock})")
        if not hostpath_mounted(spec, c, sdir):
            err(label, f"container {c.get('name')}: the socket directory {sdir} is not a "
                       "hostPath mounted at the same path")


def check_pod_resources(label, ds, plugin):
    sock = flag(plugin.get("command") or [], "pod-resources")
    if sock is None:
        sock = "/var/lib/kubelet/pod-resources/kubelet.sock"
    if sock in ("off", "none"):
        return
    pdir = os.path.dirname(sock)
    if not hostpath_mounted(pod_spec(ds), plugin, pdir):
        err(label, f"device plugin: the pod-resources directory {pdir} is not a hostPath "
                   "mounted at the same path (--pod-resources=off if it must not be)")


def check_set(label, objs, examples=()):
    """Cross-object checks of one deployable set."""
    ds, plugin = plugin_container(objs)
    if not ds:
        err(label, "no DaemonSet running cushare-device-plugin")
        return None, None
    check_metrics(label, ds, objs)
    labels = ds["spec"]["template"]["metadata"].get("labels") or {}
    for o in objs:
        if o.get("kind") == "Service":
            sel = (o.get("spec") or {}).get("selector") or {}
            if any(labels.get(k) != v for k, v in sel.items()):
                err(label, f"Service {o['metadata']['name']} does not select the DaemonSet")
    check_endpoints(label, ds, plugin)
    check_pod_resources(label, ds, plugin)
    names = advertised(plugin.get("command") or [])
    for where, o in examples:
        spec = pod_spec(o) or {}
        for c in spec.get("containers") or []:
            wants = [r for r in ((c.get("resources") or {}).get("limits") or {})
                     if r.startswith("cushare.io/")]
            for r in wants:
                if r not in names:
                    err(where, f"requests {r}, which the device plugin does not advertise ({names})")
            if wants:
                check_example_labels(where, c)
    for o in objs:
        if o.get("kind") == "ServiceMonitor":
            for e in (o.get("spec") or {}).get("endpoints") or []:
                if e.get("honorLabels") is not True:
                    err(label, "ServiceMonitor endpoint without honorLabels: true (client labels "
                               "would become exported_pod, ...)")
    conf = None
    for o in objs:
        if o.get("kind") == "ConfigMap" and "cushared.conf" in (o.get("data") or {}):
            conf = o["data"]["cushared.conf"]
    return plugin.get("command"), conf


def check_example_labels(where, c):
    """A container of an example names its pod, namespace and itself for
    status and metrics: POD_NAME and POD_NAMESPACE by the downward API,
    CUSHARE_CONTAINER set to its own name (no fieldRef gives it)."""
    env = {e.get("name"): e for e in c.get("env") or []}
    for var, field in (("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace")):
        ref = ((env.get(var) or {}).get("valueFrom") or {}).get("fieldRef") or {}
        if ref.get("fieldPath") != field:
            err(where, f"container {c.get('name')}: {var} is not the downward API's {field}")
    if (env.get("CUSHARE_CONTAINER") or {}).get("value") != c.get("name"):
        err(where, f"container {c.get('name')}: CUSHARE_CONTAINER is not its name")


def load_docs(path, text=None):
    try:
        docs = list(yaml.safe_load_all(text if text is not None else open(path)))
    except yaml.YAMLError as e:
        err(path, f"YAML: {e}")
        return []
    return [d for d in docs if d is not None]


# ---- JSON schema subset ------------------------------------------------------------------

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def type_ok(v, t):
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    return isinstance(v, _TYPES[t])


def validate(v, s, path):
    t = s.get("type")
    if t and not any(type_ok(v, x) for x in ([t] if isinstance(t, str) else t)):
        err(path, f"{v!r} is not of type {t}")
        return
    if "enum" in s and v not in s["enum"]:
        err(path, f"{v!r} not one of {s['enum']}")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if "minimum" in s and v < s["minimum"]:
            err(path, f"{v} below {s['minimum']}")
        if "maximum" in s and v > s["maximum"]:
            err(path, f"{v} above {s['maximum']}")
    if isinstance(v, str):
        if len(v) < s.get("minLength", 0):
            err(path, "too short")
        if "pattern" in s and not re.search(s["pattern"], v):
            err(path, f"{v!r} does not match {s['pattern']}")
    if isinstance(v, list):
        if len(v) < s.get("minItems", 0):
            err(path, f"fewer than {s['minItems']} items")
        for i, x in enumerate(v):
            if "items" in s:
                validate(x, s["items"], f"{path}[{i}]")
    if isinstance(v, dict):
        for r in s.get("required", []):
            if r not in v:
                err(path, f"missing {r}")
        props = s.get("properties", {})
        extra = s.get("additionalProperties", True)
        for k, x in v.items():
            if k in props:
                validate(x, props[k], f"{path}.{k}")
            elif extra is False:
                err(path, f"unknown key {k}")
            elif isinstance(extra, dict):
                validate(x, extra, f"{path}.{k}")


# ---- the chart ------------------------------------------------------------------------------

_BLOCK_OPEN = re.compile(r"^-?\s*(if|range|with|define|block)\b")
_BLOCK_END = re.compile(r"^-?\s*end\s*-?$")


def values_has(values, path):
    cur = values
    for p in path:
        if not isinstance(cur, dict) or p not in cur:
            return False
        cur = cur[p]
    return True


def check_template(path, text, values, defined, included):
    actions = re.findall(r"\{\{(.*?)\}\}", text, re.S)
    if text.count("{{") != len(actions) or text.count("}}") != len(actions):
        err(path, "unbalanced {{ }}")
    depth = 0
    for a in actions:
        a = a.strip()
        if a.startswith("/*") or a.startswith("- /*"):
            continue
        if _BLOCK_OPEN.match(a):
            depth += 1
        elif _BLOCK_END.match(a):
            depth -= 1
            if depth < 0:
                err(path, "{{ end }} without a block")
        m = re.match(r"^-?\s*define\s+\"([^\"]+)\"", a)
        if m:
            defined.add(m.group(1))
        included.update((path, n) for n in re.findall(r"include\s+\"([^\"]+)\"", a))
        for ref in re.findall(r"\$?\.Values((?:\.[A-Za-z_][A-Za-z0-9_]*)+)", a):
            if not values_has(values, ref.strip(".").split(".")):
                err(path, f".Values{ref} is not in values.yaml")
    if depth:
        err(path, f"{depth} block(s) without {{{{ end }}}}")


def check_chart(chart):
    meta = load_docs(os.path.join(chart, "Chart.yaml"))
    meta = meta[0] if meta else {}
    for k in ("apiVersion", "name", "version", "appVersion"):
        if not meta.get(k):
            err("Chart.yaml", f"no {k}")
    if meta.get("apiVersion") != "v2":
        err("Chart.yaml", "apiVersion must be v2")
    if not re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", str(meta.get("version", ""))):
        err("Chart.yaml", "version is not SemVer")
    values = (load_docs(os.path.join(chart, "values.yaml")) or [{}])[0]
    schema = json.load(open(os.path.join(chart, "values.schema.json")))
    validate(values, schema, "values.yaml")
    defined, included = set(), set()
    for t in sorted(glob.glob(os.path.join(chart, "templates", "*"))):
        check_template(os.path.relpath(t, chart), open(t).read(), values, defined, included)
    for where, n in included:
        if n not in defined:
            err(where, f"include of undefined template {n}")
    check_chart_metrics(chart, values)
    return values


def check_chart_metrics(chart, values):
    """Without helm: the chart's metrics address and NetworkPolicy, from the
    values and the templates' text (helm template renders are checked by
    check_metrics when helm is there)."""
    m = values.get("metrics") or {}
    if str(m.get("bindAddress", "")) in _ANY_ADDR:
        err("values.yaml", f"metrics.bindAddress {m.get('bindAddress')!r} listens on every address")
    if not (m.get("networkPolicy") or {}).get("enabled"):
        err("values.yaml", "metrics.networkPolicy.enabled is off by default")
    ds = open(os.path.join(chart, "templates", "daemonset.yaml")).read()
    if "0.0.0.0" in ds or '"cushare.metricsHost"' not in ds or "status.podIP" not in ds:
        err("templates/daemonset.yaml", "--metrics must use cushare.metricsHost and POD_IP")
    sm = open(os.path.join(chart, "templates", "servicemonitor.yaml")).read()
    if "honorLabels: true" not in sm:
        err("templates/servicemonitor.yaml", "no honorLabels: true (client labels would be lost)")
    np = os.path.join(chart, "templates", "networkpolicy.yaml")
    if not os.path.exists(np) or "kind: NetworkPolicy" not in open(np).read():
        err("templates", "no NetworkPolicy template")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=".")
    ap.add_argument("--rendered", action="append", default=[], help="rendered YAML to check too")
    ap.add_argument("--dp-flags", help="write the device plugin's arguments here, one a line")
    ap.add_argument("--daemon-conf", help="write the DaemonSet's cushared.conf here")
    a = ap.parse_args()
    kdir = os.path.join(a.root, "deploy/kubernetes")
    objs, examples = [], []
    for f in sorted(glob.glob(os.path.join(kdir, "*.yaml"))):
        if os.path.basename(f) == "kustomization.yaml":
            k = load_docs(f)[0]
            for r in k.get("resources", []):
                if not os.path.exists(os.path.join(kdir, r)):
                    err(f, f"resource {r} does not exist")
                elif any(str(d.get("apiVersion", "")).startswith("monitoring.coreos.com/")
                         for d in load_docs(os.path.join(kdir, r))):
                    err(f, f"{r} needs the Prometheus Operator's CRDs: apply it on its own")
            continue
        for i, d in enumerate(load_docs(f)):
            check_object(f"{f}#{i}", d)
            objs.append(d)
    for f in sorted(glob.glob(os.path.join(kdir, "examples", "*.yaml"))):
        for i, d in enumerate(load_docs(f)):
            check_object(f"{f}#{i}", d)
            examples.append((f"{f}#{i}", d))
    cmd, conf = check_set(kdir, objs, examples)
    if a.dp_flags and cmd:
        open(a.dp_flags, "w").write("\n".join(cmd[1:]) + "\n")
    if a.daemon_conf and conf:
        open(a.daemon_conf, "w").write(conf)
    check_chart(os.path.join(a.root, "deploy/helm/cushare"))
    monitoring.check(a.root, err)
    for r in a.rendered:
        docs = load_docs(r)
        for i, d in enumerate(docs):
            check_object(f"{r}#{i}", d)
        check_set(r, docs, examples)
    for e in errors:
        print("FAIL", e)
    print(f"check_manifests: {len(errors)} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
