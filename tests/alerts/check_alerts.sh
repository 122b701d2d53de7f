#!/usr/bin/env bash
# The rules `tessera alerts` writes, checked by Prometheus's own promtool:
# both formats parse as rules (the PrometheusRule's spec is the rule file,
# line for line), every *_test.yaml here passes `promtool test rules`, and
# every alert the command writes is expected to fire in at least one case.
# Usage: check_alerts.sh TESSERA_BIN TESTS_DIR
set -euo pipefail
bin=$1
here=$2
command -v promtool >/dev/null || { echo "promtool not found (scripts/setup.sh installs Debian's prometheus): skipping"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$bin" alerts -o "$work/rules.yaml"
"$bin" alerts --format prometheusrule --namespace tessera -o "$work/prometheusrule.yaml"
# The flags thresholds_test.yaml is written for.
"$bin" alerts --memory-pressure 80 --sm-saturation 90 --quota-pressure 80 --sampler-interval 20 \
  --job gpu-metrics --ignore-xids 13,31,43,45,68,94,109 -o "$work/rules-custom.yaml"

# The PrometheusRule object: its spec, unindented, is the rule file without its comments.
grep -q '^kind: PrometheusRule$' "$work/prometheusrule.yaml"
grep -q '^apiVersion: monitoring.coreos.com/v1$' "$work/prometheusrule.yaml"
awk 'f { sub(/^  /, ""); print } /^spec:$/ { f = 1 }' "$work/prometheusrule.yaml" >"$work/prometheusrule-spec.yaml"
if ! diff -u <(grep -v '^#' "$work/rules.yaml") "$work/prometheusrule-spec.yaml"; then
  echo "FAIL: the PrometheusRule's spec differs from the rule file"
  exit 1
fi

promtool check rules "$work/rules.yaml" "$work/prometheusrule-spec.yaml" "$work/rules-custom.yaml"

cp "$here"/*_test.yaml "$work/"
promtool test rules "$work"/*_test.yaml

# Every alert has a case where it fires (an alertname whose exp_alerts is not empty).
python3 - "$work/rules.yaml" "$here" <<'PY'
import glob, re, sys
rules, here = sys.argv[1:]
alerts = re.findall(r"^\s*- alert: (\S+)$", open(rules).read(), re.M)
fired = set()
for path in glob.glob(here + "/*_test.yaml"):
    text = open(path).read()
    for m in re.finditer(r"alertname: (\S+)\n\s*exp_alerts:(.*)\n", text):
        if m.group(2).strip() != "[]":
            fired.add(m.group(1))
missing = [a for a in alerts if a not in fired]
if missing:
    raise SystemExit("FAIL: no test case expects these alerts to fire: " + ", ".join(missing))
print("every alert fires in a test case: " + ", ".join(alerts))
PY
