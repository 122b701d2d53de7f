# The exporter beside the plugin (the metrics Component over the mig-mixed
# overlay): Ready through its /healthz, listening in its pod's own network
# namespace, behind the Service's endpoint. Three pods in their own namespace
# get a 1g.20gb MIG device each; /metrics, scraped from the host at the pod's
# address, shows each pod's device (its GPU's UUID and its GPU_I_ID, as
# inventory maps its MIG UUID) with that pod's pod, namespace and container
# labels, on every series of that device; no other series has a pod label
# (the other five MIG devices and both GPUs carry none), and Hostname is the
# Node's name.
readonly METRICS_NS=e2e-metrics
exporter_address() {
  kc -n tessera get pod "$(tessera_pod)" -o jsonpath='{.status.podIP}'
}
metrics_text() {  # metrics_text: the exporter's /metrics, scraped from the host
  python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
    "http://$(exporter_address):9400/metrics"
}

# check_attribution EXPECTED-FILE METRICS-FILE: EXPECTED holds "UUID GPU_I_ID
# POD" per held MIG device. Prints one line per device's memory series; exits
# 1 naming the first series that breaks the rules above.
check_attribution() {
  python3 - "$1" "$2" "$METRICS_NS" "$NODE" <<'PY'
import re, sys
expected_file, metrics_file, ns, node = sys.argv[1:]
held = {}
for line in open(expected_file):
    uuid, gi, pod = line.split()
    held[(uuid, gi)] = pod
label_re = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
series = []
for line in open(metrics_file):
    m = re.match(r'^(\w+)\{(.*)\} (\S+)$', line.strip())
    if m:
        series.append((m.group(1), dict(label_re.findall(m.group(2))), m.group(3)))
problems, fb, labelled = [], [], set()
for name, labels, value in series:
    if "UUID" not in labels:
        continue
    key = (labels["UUID"], labels.get("GPU_I_ID", ""))
    where = f'{name}{{UUID="{key[0]}", GPU_I_ID="{key[1]}"}}'
    if labels.get("Hostname") != node:
        problems.append(f'{where}: Hostname="{labels.get("Hostname")}", expected the Node\'s name {node}')
    pod = held.get(key)
    got = (labels.get("pod"), labels.get("namespace"), labels.get("container"))
    if pod is not None:
        if got != (pod, ns, "cuda"):
            problems.append(f"{where}: pod, namespace, container {got}, expected {(pod, ns, 'cuda')}")
        labelled.add(key)
    elif any(got):
        problems.append(f"{where}: no pod holds this device, yet it has pod, namespace, container {got}")
    if name == "DCGM_FI_DEV_FB_USED":
        fb.append(f'  {labels.get("GPU_I_PROFILE", "whole GPU"):10} UUID={key[0]} GPU_I_ID={key[1] or "-"}: '
                  + (f"pod={got[0]} namespace={got[1]} container={got[2]}" if any(got) else "no pod label")
                  + f" ({value} MiB used)")
for key, pod in held.items():
    if key not in labelled:
        problems.append(f"no series of UUID={key[0]} GPU_I_ID={key[1]} (pod {pod})")
print("\n".join(sorted(fb)))
print(f"labelled devices: {len(labelled)}")
if problems:
    print("\n".join(problems[:10]), file=sys.stderr)
    sys.exit(1)
PY
}

scenario_metrics() {
  remove_consumers
  local t=$SECONDS
  deploy_overlay mig-mixed metrics
  expect_resource 120 nvidia.com/mig-1g.20gb 8
  exporter_ready() {
    [[ $(kc -n tessera get pods -l app.kubernetes.io/name=tessera \
           -o jsonpath='{.items[*].status.containerStatuses[?(@.name=="exporter")].ready}') == true ]]
  }
  wait_for 90 "tessera's exporter container to be Ready (its /healthz)" exporter_ready
  local address
  address=$(exporter_address)
  ! ss -Hltn "sport = :9400" | grep -q . || fail "something listens on port 9400 in the host's network namespace: the exporter should be in its pod's"
  endpoint() { [[ $(kc -n tessera get endpoints tessera-exporter -o jsonpath='{.subsets[0].addresses[0].ip}:{.subsets[0].ports[0].port}') == "$address:9400" ]]; }
  wait_for 30 "the tessera-exporter Service's endpoint $address:9400" endpoint
  echo "  exporter Ready $((SECONDS - t)) s after the deploy, in its pod's network at $address:9400, the Service's endpoint"

  kc create namespace "$METRICS_NS" >/dev/null
  local i p env uuid where expected=$E2E_STATE/metrics-expected.txt scraped=$E2E_STATE/metrics.txt
  for i in 0 1 2; do pod "metrics-$i" nvidia.com/mig-1g.20gb 1 "$METRICS_NS"; echo ---; done | kc apply -f - >/dev/null
  three_running() { [[ $(kc -n $METRICS_NS get pods --field-selector=status.phase=Running -o name | wc -l) == 3 ]]; }
  wait_for 90 "3 pods Running in $METRICS_NS" three_running
  : >"$expected"
  for p in metrics-0 metrics-1 metrics-2; do
    uuid=$(held_uuid "$p" cuda "$METRICS_NS")
    where=$(inventory | jq -r --arg u "$uuid" '.gpus[] | .uuid as $g | .mig_devices[] | select(.uuid == $u) | "\($g) \(.gpu_instance)"')
    [[ -n $where ]] || fail "$p: its device '$uuid' (pod-resources) is not a MIG device in tessera inventory"
    echo "$where $p" >>"$expected"
    echo "  $METRICS_NS/$p: $uuid = GPU $(cut -d' ' -f1 <<<"$where") GPU instance $(cut -d' ' -f2 <<<"$where")"
  done
  # The exporter reads pod-resources every interval (1 s here).
  attributed() { metrics_text >"$scraped" && check_attribution "$expected" "$scraped" >/dev/null; }
  local deadline=$((SECONDS + 30))
  until attributed; do
    ((SECONDS < deadline)) || { check_attribution "$expected" "$scraped" >&2; fail "the exporter's series do not name the pods as expected after 30 s"; }
    sleep 0.5
  done
  local out
  out=$(check_attribution "$expected" "$scraped")
  grep -v '^labelled devices:' <<<"$out"
  [[ $(sed -n 's/^labelled devices: //p' <<<"$out") == "$(want 3)" ]] ||
    fail "$(sed -n 's/^labelled devices: //p' <<<"$out") devices have pod labels, expected $(want 3)"
  echo "  $(grep -c . "$scraped") lines scraped; every series of a held device names its pod, no other has a pod label"
  kc delete namespace "$METRICS_NS" --wait=false >/dev/null
}
