#!/usr/bin/env python3
"""A small client for what check_prometheus_live.sh asks of HTTP servers:
the exporter's /healthz, and Prometheus's readiness and HTTP API
(/api/v1/alerts, /api/v1/rules, /api/v1/query). The standard library only.

  prom.py ok URL                 exit 0 if URL answers 200
  prom.py alerts BASE            one line per pending or firing alert:
                                 state alertname UUID GPU_I_ID GPU_I_PROFILE gpu severity
  prom.py rules BASE             one line per rule group: name health alerting-rules
                                 last-evaluation (unix seconds), then a line per
                                 rule that is not healthy
  prom.py query BASE EXPR        one line per sample of an instant query:
                                 value followed by the labels as name=value
Exit 1 with the reason on standard error when a request fails or Prometheus
answers with an error status.
"""
import datetime
import json
import sys
import urllib.error
import urllib.parse
import urllib.request

TIMEOUT_S = 5


def get(url):
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as reply:
        return reply.status, reply.read()


def api(base, path, **params):
    url = base + path + ("?" + urllib.parse.urlencode(params) if params else "")
    _, body = get(url)
    doc = json.loads(body)
    if doc.get("status") != "success":
        raise RuntimeError(f"{url}: {doc.get('errorType')}: {doc.get('error')}")
    return doc["data"]


def unix_seconds(rfc3339):
    # Prometheus writes nanoseconds and 'Z'; Python's parser takes microseconds.
    text = rfc3339.replace("Z", "+00:00")
    if "." in text:
        head, tail = text.split(".", 1)
        digits = "".join(c for c in tail if c.isdigit())
        zone = tail[len(digits):]
        text = f"{head}.{digits[:6]}{zone}"
    return datetime.datetime.fromisoformat(text).timestamp()


def main(argv):
    what = argv[1]
    if what == "ok":
        status, _ = get(argv[2])
        return 0 if status == 200 else 1
    base = argv[2].rstrip("/")
    if what == "alerts":
        for a in api(base, "/api/v1/alerts")["alerts"]:
            l = a["labels"]
            print(a["state"], l.get("alertname", "-"), l.get("UUID", "-"), l.get("GPU_I_ID", "-"),
                  l.get("GPU_I_PROFILE", "-"), l.get("gpu", "-"), l.get("severity", "-"))
        return 0
    if what == "rules":
        for g in api(base, "/api/v1/rules")["groups"]:
            rules = g["rules"]
            alerting = sum(1 for r in rules if r["type"] == "alerting")
            healths = {r.get("health", "unknown") for r in rules}
            health = "ok" if healths == {"ok"} else ",".join(sorted(healths))
            print(g["name"], health, alerting, f"{unix_seconds(g['lastEvaluation']):.3f}")
            for r in rules:
                if r.get("health") != "ok":
                    print(f"  rule {r['name']}: {r.get('health')} {r.get('lastError', '')}")
        return 0
    if what == "query":
        data = api(base, "/api/v1/query", query=argv[3])
        if data["resultType"] == "scalar":
            print(data["result"][1])
            return 0
        for s in data["result"]:
            labels = " ".join(f"{k}={v}" for k, v in sorted(s["metric"].items()))
            print(s["value"][1], labels)
        return 0
    print(f"prom.py: unknown command {what}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except (OSError, urllib.error.URLError, ValueError, RuntimeError, KeyError) as e:
        print(f"prom.py {' '.join(sys.argv[1:3])}: {e}", file=sys.stderr)
        sys.exit(1)
