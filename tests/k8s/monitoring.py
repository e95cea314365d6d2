#!/usr/bin/env python3
"""monitoring.py: deploy/'s monitoring files, read for the checks.

  monitoring.py check          structure of deploy/kubernetes/prometheusrule.yaml
                               and deploy/grafana/cushare-dashboard.json
  monitoring.py rules OUT      their PromQL as one Prometheus rules file: the
                               PrometheusRule's groups as they are, then every
                               query of the dashboard (panels and variables) as
                               a recording rule, Grafana's variables replaced
                               ($__rate_interval by 1m, $gpu and $node by .*), for
                               `promtool check rules` and for a Prometheus to
                               evaluate (tests/e2e/prometheus_check.sh)
  monitoring.py names SCRAPE   every cushare_* metric those queries name must be
                               on SCRAPE, a page cushared served

check_manifests.py imports check(). Prints one line per finding; exits 1 if
there is any.
"""
import json
import os
import re
import sys

import yaml

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
RULE = "deploy/kubernetes/prometheusrule.yaml"
DASH = "deploy/grafana/cushare-dashboard.json"
DS = "${datasource}"


def load(root):
    with open(os.path.join(root, RULE)) as f:
        rule = yaml.safe_load(f)
    with open(os.path.join(root, DASH)) as f:
        dash = json.load(f)
    return rule, dash


def check_rule(rule, err):
    if rule.get("apiVersion") != "monitoring.coreos.com/v1" or rule.get("kind") != "PrometheusRule":
        err(RULE, "not a monitoring.coreos.com/v1 PrometheusRule")
    groups = (rule.get("spec") or {}).get("groups") or []
    if not groups:
        err(RULE, "spec.groups is empty")
    for g in groups:
        for r in g.get("rules") or []:
            name = r.get("alert") or r.get("record")
            if not name or not r.get("expr"):
                err(RULE, f"group {g.get('name')}: a rule without alert/record or expr")
            if r.get("alert"):
                if (r.get("labels") or {}).get("severity") not in ("critical", "warning", "info"):
                    err(RULE, f"{name}: severity must be critical, warning or info")
                ann = r.get("annotations") or {}
                if not ann.get("summary") or not ann.get("description"):
                    err(RULE, f"{name}: needs a summary and a description")


def panels(dash):
    """Every panel, those inside collapsed rows included."""
    for p in dash.get("panels") or []:
        yield p
        yield from p.get("panels") or []


def variables(dash):
    return (dash.get("templating") or {}).get("list") or []


def check_dashboard(dash, err):
    vs = {v.get("name"): v for v in variables(dash)}
    ds = vs.get("datasource") or {}
    if ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        err(DASH, "no `datasource` variable of type datasource, query prometheus")
    for name in ("node", "gpu"):
        v = vs.get(name) or {}
        if v.get("type") != "query" or (v.get("datasource") or {}).get("uid") != DS:
            err(DASH, f"no `{name}` query variable on {DS}")
    ids = set()
    for p in panels(dash):
        if p.get("id") in ids:
            err(DASH, f"panel id {p.get('id')} used twice")
        ids.add(p.get("id"))
        if p.get("type") == "row":
            continue
        if (p.get("datasource") or {}).get("uid") != DS:
            err(DASH, f"panel {p.get('title')!r}: datasource is not {DS}")
        if not p.get("targets"):
            err(DASH, f"panel {p.get('title')!r}: no query")
        for t in p.get("targets") or []:
            if (t.get("datasource") or {}).get("uid") != DS or not t.get("expr"):
                err(DASH, f"panel {p.get('title')!r}: a target without expr or on another datasource")


def check(root=ROOT, err=None):
    """Structure; findings go to err(where, what). Returns their number."""
    found = []
    err = err or (lambda where, what: found.append(f"{where}: {what}"))
    rule, dash = load(root)
    check_rule(rule, err)
    check_dashboard(dash, err)
    for f in found:
        print("FAIL", f)
    return len(found)


def promql(expr):
    """A dashboard query as PromQL: Grafana's variables replaced."""
    expr = re.sub(r"\$__(rate_interval|interval|range)", "1m", expr)
    return re.sub(r"\$\{?[A-Za-z_]\w*\}?", ".*", expr)


def dashboard_queries(dash):
    """(name, PromQL) of every panel query and variable query."""
    out = []
    for p in panels(dash):
        for t in p.get("targets") or []:
            out.append((f"dashboard:panel_{p['id']}_{t['refId']}", promql(t["expr"])))
    for v in variables(dash):
        if v.get("type") != "query":
            continue
        q = v["query"]["query"] if isinstance(v.get("query"), dict) else v.get("query", "")
        m = re.fullmatch(r"\s*label_values\((.*),\s*\w+\)\s*", q)
        if not m:
            raise SystemExit(f"{DASH}: variable {v['name']}: only label_values(SELECTOR, LABEL)")
        out.append((f"dashboard:variable_{v['name']}", promql(m.group(1))))
    return out


def rules_file(rule, dash):
    groups = list(rule["spec"]["groups"])
    groups.append({"name": "dashboard",
                   "rules": [{"record": n, "expr": e} for n, e in dashboard_queries(dash)]})
    return {"groups": groups}


def exprs(rule, dash):
    for g in rules_file(rule, dash)["groups"]:
        for r in g["rules"]:
            yield r.get("alert") or r.get("record"), r["expr"]


def names(rule, dash, scrape):
    have = set()
    with open(scrape) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                have.add(re.match(r"[A-Za-z_:][A-Za-z0-9_:]*", line).group(0))
    missing = 0
    for name, e in exprs(rule, dash):
        for m in sorted(set(re.findall(r"\bcushare_[a-z0-9_]+", e))):
            if m not in have:
                print(f"FAIL {name}: {m} is not on the page cushared served ({scrape})")
                missing += 1
    return missing


def main(argv):
    if len(argv) < 2 or argv[1] not in ("check", "rules", "names"):
        print(__doc__, file=sys.stderr)
        return 2
    if check():
        return 1
    rule, dash = load(ROOT)
    if argv[1] == "rules":
        with open(argv[2], "w") as f:
            yaml.safe_dump(rules_file(rule, dash), f, sort_keys=False, width=1000)
    elif argv[1] == "names":
        return 1 if names(rule, dash, argv[2]) else 0
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
