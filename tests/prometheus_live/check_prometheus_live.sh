#!/usr/bin/env bash
# A real Prometheus (Debian's package) scrapes a running `tessera exporter` on a
# simulated node and evaluates the rules of `tessera alerts`: a memory spike on
# one MIG instance fires TesseraMIGInstanceMemoryPressure for that instance
# (its parent GPU's UUID and its GPU_I_ID) and for no other, and no alert fires
# before it. Everything is read from Prometheus's HTTP API (prom.py).
#
# The node: 2 x A100-80GB in MIG mode with deploy/base/mig-config.yaml's
# mixed-inference layout applied by `tessera mig apply` (per GPU one 3g.40gb
# and two 1g.20gb instances). Everything listens on 127.0.0.1 on a port the
# system picks (port 0; each program logs the one it got). Every wait polls
# with a deadline; a failure prints the exporter's and Prometheus's logs. Both
# are stopped by PID and the work directory removed, pass or fail; the
# exporter must exit 0 on SIGTERM (under the asan preset, also free of leaks).
#
# Usage: check_prometheus_live.sh TESSERA_BIN SOURCE_DIR
# Exit 77 (skipped) when /usr/bin/prometheus is missing (scripts/setup.sh
# installs Debian's prometheus).
set -euo pipefail
bin=${1:?usage: check_prometheus_live.sh TESSERA_BIN SOURCE_DIR}
src=${2:?usage: check_prometheus_live.sh TESSERA_BIN SOURCE_DIR}
here=$(cd "$(dirname "$0")" && pwd)
readonly PROMETHEUS=/usr/bin/prometheus
if [[ ! -x $PROMETHEUS ]]; then
  echo "SKIP: $PROMETHEUS is missing (scripts/setup.sh installs Debian's prometheus package)"
  exit 77
fi
# The exporter samples every second; Prometheus scrapes and evaluates every second.
readonly INTERVAL=1

prom() { python3 "$here/prom.py" "$@"; }
now() { date +%s.%N; }
ms_since() { python3 -c "import sys, time; print(round((time.time() - float(sys.argv[1])) * 1000))" "$1"; }

work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-prometheus-live.XXXXXX")
declare -A pid_of=()
reported=0

show_logs() {
  local name
  if [[ -n ${prometheus:-} && -n ${pid_of[prometheus]:-} ]]; then
    echo "--- Prometheus's alerts (state alertname UUID GPU_I_ID GPU_I_PROFILE gpu severity)"
    prom alerts "$prometheus" 2>&1 || true
    echo "--- Prometheus's MIG memory series (MiB used; labels)"
    prom query "$prometheus" 'DCGM_FI_DEV_FB_USED{GPU_I_ID!=""}' 2>&1 | sed 's/ pci_bus_id=[^ ]*//; s/ modelName=.*Hostname=[^ ]*//' || true
  fi
  for name in exporter prometheus; do
    echo "--- last 40 lines of the $name's log"
    tail -n 40 "$work/$name.log" 2>/dev/null || echo "(no log)"
  done
}

fail() {
  reported=1
  echo "FAIL: $*" >&2
  show_logs >&2
  exit 1
}

stop() {  # stop NAME: SIGTERM, SIGKILL after 10 s; its exit status in stopped_rc
  local name=$1 pid=${pid_of[$1]:-} i
  stopped_rc=0
  [[ -n $pid ]] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 100; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "$name (pid $pid) ignored SIGTERM for 10 s: killing it" >&2
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || stopped_rc=$?
  unset "pid_of[$name]"
}

cleanup() {
  local rc=$?
  trap - EXIT
  set +e
  stop prometheus
  stop exporter
  if ((rc != 0 && !reported)); then
    echo "FAIL: exit $rc from ${failed_cmd:-a command}" >&2
    show_logs >&2
  fi
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
set -E
trap 'failed_cmd="line $LINENO: $BASH_COMMAND"' ERR

alive() {  # alive: both programs started so far still run
  local name
  for name in "${!pid_of[@]}"; do
    if ! kill -0 "${pid_of[$name]}" 2>/dev/null; then
      local rc=0
      wait "${pid_of[$name]}" || rc=$?
      unset "pid_of[$name]"
      fail "the $name exited ($rc)"
    fi
  done
}

poll() {  # poll SECONDS DESCRIPTION COMMAND...: until COMMAND succeeds, with both programs alive
  local limit=$1 what=$2; shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    alive
    ((SECONDS < deadline)) || fail "timed out after ${limit} s waiting for $what"
    sleep 0.2
  done
}

start() {  # start NAME COMMAND...: in the background, logged to NAME.log
  local name=$1; shift
  "$@" >>"$work/$name.log" 2>&1 &
  pid_of[$name]=$!
}

listening_port() {  # listening_port NAME SED-EXPRESSION: the port NAME logged
  sed -n "$2" "$work/$1.log" | head -1 | grep .
}

# ------------------------------------------------------------ the node
node=$work/node
"$bin" sim create "$node" --gpu A100-80GB --count 2 --mig >/dev/null
"$bin" mig apply -f "$src/deploy/base/mig-config.yaml" --config-name mixed-inference --sim "$node" \
  >"$work/mig-apply.log" 2>&1 || { cat "$work/mig-apply.log" >&2; fail "tessera mig apply mixed-inference failed"; }
# One line per MIG device: MIG-UUID PARENT-UUID GPU-INDEX GPU_I_ID TOTAL-BYTES.
"$bin" inventory --sim "$node" --json >"$work/inventory.json"
mapfile -t migs < <(python3 - "$work/inventory.json" <<'PY'
import json, sys
for g in json.load(open(sys.argv[1]))["gpus"]:
    for m in g["mig_devices"]:
        print(m["uuid"], g["uuid"], g["index"], m["gpu_instance"], m["memory"]["total_bytes"])
PY
)
((${#migs[@]} == 6)) || fail "expected 6 MIG devices after mig apply mixed-inference, the inventory lists ${#migs[@]}"
# The spike goes to GPU 1's last MIG device (a 1g.20gb): neighbours on the same
# GPU and the same profile on GPU 0 must stay quiet.
read -r mig parent gpu gi total <<<"${migs[5]}"
echo "node: 2 x A100-80GB, ${#migs[@]} MIG devices; the spike goes to $mig (GPU $gpu $parent, GPU_I_ID $gi)"

# ------------------------------------------------------------ exporter
start exporter "$bin" exporter --sim "$node" --listen 127.0.0.1:0 --interval $INTERVAL --gpm-window 0.25 \
  --pod-resources '' --ledger-root '' --hostname prometheus-live
poll 30 "the exporter to log its port" listening_port exporter 's|^tessera exporter: listening on http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p'
exporter_port=$(listening_port exporter 's|^tessera exporter: listening on http://127\.0\.0\.1:\([0-9]*\)/metrics.*|\1|p')
exporter=http://127.0.0.1:$exporter_port
poll 30 "the exporter's /healthz to answer 200" prom ok "$exporter/healthz"

# ------------------------------------------------------------ Prometheus
# The rules as `tessera alerts` writes them, but every `for:` rewritten to 0s:
# an alert fires at the first evaluation whose expression holds. The `for`
# logic itself is Prometheus's and tests/alerts checks the rules' durations
# with promtool; here the point is the live path (scrape, labels, expression,
# the API). --sampler-interval 2 (stalled after 6 s) rather than the
# exporter's 1 s leaves room for a loaded test machine.
"$bin" alerts --sampler-interval 2 -o "$work/rules-as-written.yaml"
sed 's/^\( *for:\) .*$/\1 0s/' "$work/rules-as-written.yaml" >"$work/rules.yaml"
n_for=$(grep -c '^ *for: ' "$work/rules-as-written.yaml")
((n_for > 0)) && [[ $(grep -c '^ *for: 0s$' "$work/rules.yaml") == "$n_for" ]] ||
  fail "rewriting the rules' for: durations to 0s changed $(grep -c '^ *for: 0s$' "$work/rules.yaml") of $n_for"
n_alerts=$(grep -c '^ *- alert: ' "$work/rules.yaml")
# The job name the exporter rules expect (tessera alerts --job's default).
cat >"$work/prometheus.yml" <<EOF
global:
  scrape_interval: ${INTERVAL}s
  scrape_timeout: ${INTERVAL}s
  evaluation_interval: ${INTERVAL}s
rule_files:
- rules.yaml
scrape_configs:
- job_name: tessera-exporter
  static_configs:
  - targets: ['127.0.0.1:$exporter_port']
EOF
start prometheus "$PROMETHEUS" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address=127.0.0.1:0 --log.level=info
poll 30 "Prometheus to log its port" listening_port prometheus 's|.*msg="Listening on" address=127\.0\.0\.1:\([0-9]*\).*|\1|p'
prometheus=http://127.0.0.1:$(listening_port prometheus 's|.*msg="Listening on" address=127\.0\.0\.1:\([0-9]*\).*|\1|p')
poll 60 "Prometheus to be ready ($prometheus/-/ready)" prom ok "$prometheus/-/ready"
echo "exporter on $exporter, Prometheus $($PROMETHEUS --version 2>&1 | head -1 | awk '{print $3}') on $prometheus"

# The rules loaded, all of them, and healthy.
rules_ok() {
  local out
  out=$(prom rules "$prometheus") || return 1
  [[ $(awk 'NF == 4 {n += $3} END {print n + 0}' <<<"$out") == "$n_alerts" ]] &&
    ! grep -q '^  rule ' <<<"$out" && ! awk 'NF == 4 && $2 != "ok" {bad = 1} END {exit !bad}' <<<"$out"
}
poll 30 "Prometheus to load the $n_alerts alerting rules, all healthy" rules_ok

# Scraped: the target is up and every MIG instance has its memory series.
count_is() {  # count_is EXPR N: the query's single value is N
  [[ $(prom query "$prometheus" "$1" | awk '{print $1}') == "$2" ]]
}
poll 30 "the exporter's target to be up" count_is 'up{job="tessera-exporter"}' 1
poll 30 "the memory series of the ${#migs[@]} MIG instances" count_is 'count(DCGM_FI_DEV_FB_USED{GPU_I_ID!=""})' "${#migs[@]}"
data_at=$(now)

# Evaluated on that data, twice: every rule group's last evaluation is more
# than 2 intervals after the series were seen.
evaluated_after() {  # evaluated_after UNIX-SECONDS
  prom rules "$prometheus" | awk -v t="$1" 'NF == 4 {n++; if ($4 <= t) late = 1} END {exit !(n > 0 && !late)}'
}
poll 30 "the rules to be evaluated on the scraped series" evaluated_after "$(python3 -c "print($data_at + 2 * $INTERVAL)")"

# ------------------------------------------------------------ before the spike: no alert
alerts=$(prom alerts "$prometheus")
[[ -z $alerts ]] || fail "alerts before any spike:
$alerts"
# Nor at any evaluation since the series were there (ALERTS holds every
# pending and firing alert Prometheus evaluated).
window=$(python3 -c "import math, time; print(max(1, math.floor(time.time() - $data_at)))")
fired=$(prom query "$prometheus" "count_over_time(ALERTS[${window}s])")
[[ -z $fired ]] || fail "alerts in the ${window} s before the spike: $fired"
echo "before the spike: no alert ($n_alerts rules evaluated for ${window} s on the scraped series)"

# ------------------------------------------------------------ the spike
# A simulated process holds 95% of that MIG device's memory (the rule: over 90%).
spike_mib=$((total * 95 / 100 / 1048576))
spike_at=$(now)
"$bin" sim process "$node" --pid $$ --memory "${spike_mib}MiB" --mig-device "$mig" >/dev/null
echo "spike: a process holds ${spike_mib} MiB of $mig ($((total / 1048576)) MiB)"

firing_for_instance() {
  prom alerts "$prometheus" | grep -q "^firing TesseraMIGInstanceMemoryPressure $parent $gi "
}
poll 60 "TesseraMIGInstanceMemoryPressure to fire for GPU $gpu ($parent) GPU_I_ID $gi" firing_for_instance
fire_ms=$(ms_since "$spike_at")
fired_at=$(now)
echo "firing $fire_ms ms after the spike (scrape, sample and evaluation every $INTERVAL s)"

# Two more evaluations, then: that alert alone, with the instance's labels.
poll 30 "two more rule evaluations" evaluated_after "$(python3 -c "print($fired_at + 2 * $INTERVAL)")"
alerts=$(prom alerts "$prometheus")
expected="firing TesseraMIGInstanceMemoryPressure $parent $gi 1g.20gb $gpu warning"
[[ $alerts == "$expected" ]] || fail "after the spike, expected exactly one alert:
  $expected
Prometheus has (state alertname UUID GPU_I_ID GPU_I_PROFILE gpu severity):
$alerts"
# Nor any other alert at any evaluation since the spike.
window=$(python3 -c "import math, time; print(max(1, math.floor(time.time() - $spike_at)))")
fired=$(prom query "$prometheus" "count by (alertname, UUID, GPU_I_ID) (count_over_time(ALERTS[${window}s]))" |
        cut -d' ' -f2- | sort -u)
[[ $fired == "GPU_I_ID=$gi UUID=$parent alertname=TesseraMIGInstanceMemoryPressure" ]] ||
  fail "alerts since the spike, by alertname, UUID and GPU_I_ID:
$fired
expected only alertname=TesseraMIGInstanceMemoryPressure UUID=$parent GPU_I_ID=$gi"
echo "alert: $alerts"

# ------------------------------------------------------------ the spike ends
"$bin" sim end-process "$node" --pid $$ >/dev/null
no_alerts() { [[ -z $(prom alerts "$prometheus") ]]; }
poll 60 "the alert to resolve after the process ended" no_alerts
echo "the process ended: no alert after $(ms_since "$spike_at") ms in all"

stop prometheus
((stopped_rc == 0)) || fail "Prometheus exited $stopped_rc on SIGTERM"
stop exporter
((stopped_rc == 0)) || fail "the exporter exited $stopped_rc on SIGTERM (expected 0)"
echo "PASS: a memory spike on MIG instance $gi of GPU $gpu fired its alert alone, read from Prometheus's API"
