#!/usr/bin/env python3
"""Every metric name in the alerting rules' and the Grafana dashboard's
expressions is one the exporter writes (metric_names.txt), and the dashboard
shows every one of them.

A PromQL expression is reduced to its metric names by dropping strings,
label matchers, ranges, grouping lists and numbers, then keeping each
identifier that is not a function call, keyword or template variable.
Names inside a __name__ matcher count as well.
Usage: check_metric_names.py --names FILE --dashboard JSON --tessera BIN --rules FILE
"""
import argparse
import json
import re
import subprocess
import sys

KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
            "bool", "offset", "atan2", "inf", "nan", "Inf", "NaN"}


def metric_names(expr):
    names = set()
    for m in re.finditer(r'__name__\s*=~?\s*"([^"]*)"', expr):
        names.update(n for n in m.group(1).split("|") if n)
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)           # strings
    e = re.sub(r"\{[^}]*\}", " ", e)                          # label matchers
    e = re.sub(r"\[[^\]]*\]", " ", e)                         # ranges, subqueries
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r" ", e)
    e = re.sub(r"\$\{?\w+\}?", " ", e)                        # Grafana variables
    for m in re.finditer(r"(?<![\w.])([A-Za-z_:][A-Za-z0-9_:]*)\s*(\()?", e):
        word, call = m.group(1), m.group(2)
        if call or word in KEYWORDS:
            continue
        names.add(word)
    return names


def dashboard_exprs(dash):
    exprs = []
    def walk(panels):
        for p in panels:
            exprs.extend((p.get("title", "?"), t["expr"]) for t in p.get("targets", []) if t.get("expr"))
            walk(p.get("panels", []))
    walk(dash.get("panels", []))
    for v in dash.get("templating", {}).get("list", []):
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        if v.get("type") == "query" and q:
            m = re.fullmatch(r"\s*label_values\((.*),\s*\w+\)\s*", q)
            exprs.append(("variable " + v["name"], m.group(1) if m else q))
    return exprs


def rule_exprs(text, source):
    exprs = []
    for line in text.splitlines():
        m = re.match(r"\s*expr:\s*(.*)$", line)
        if not m:
            continue
        if m.group(1) in ("", "|", "|-", ">", ">-"):
            raise SystemExit(f"{source}: keep each expr on one line: {line.strip()}")
        exprs.append((source, m.group(1)))
    return exprs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--names", required=True)
    ap.add_argument("--dashboard", required=True)
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--rules", required=True, help="the committed PrometheusRule")
    a = ap.parse_args()
    known = {l.strip() for l in open(a.names) if l.strip() and not l.startswith("#")}

    # Self-check of the reduction on expressions whose names are known.
    for expr, want in [
        ('sum by (namespace, pod) (rate(x_total{a="b(c)"}[5m])) / on(pod) group_left(node) y > 0.9', {"x_total", "y"}),
        ('timestamp(a) - a > 30 and absent(b{job="j"})', {"a", "b"}),
        ('{__name__=~"m1|m2",Hostname=~"$node"}', {"m1", "m2"}),
    ]:
        got = metric_names(expr)
        if got != want:
            raise SystemExit(f"metric_names({expr!r}) = {sorted(got)}, expected {sorted(want)}")

    dash = json.load(open(a.dashboard))
    exprs = [("dashboard: " + t, e) for t, e in dashboard_exprs(dash)]
    dash_names = set()
    for _, e in exprs:
        dash_names |= metric_names(e)
    for fmt in (["--format", "rules"], ["--format", "prometheusrule"]):
        out = subprocess.run([a.tessera, "alerts", *fmt], capture_output=True, text=True, check=True).stdout
        exprs += rule_exprs(out, "tessera alerts " + " ".join(fmt))
    exprs += rule_exprs(open(a.rules).read(), a.rules)

    failures = 0
    used = set()
    for where, e in exprs:
        names = metric_names(e)
        if not names:
            print(f"FAIL {where}: no metric name in {e!r}")
            failures += 1
        for n in sorted(names - known):
            print(f"FAIL {where}: {n} is not a metric the exporter writes ({e})")
            failures += 1
        used |= names
    unshown = sorted(known - {"up"} - dash_names)
    if unshown:
        print("FAIL dashboard: shows nothing of " + ", ".join(unshown))
        failures += 1
    if failures:
        return 1
    print(f"{len(exprs)} expressions use {len(used)} names, all in {a.names}; the dashboard shows every one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
