# tessera node with the MIG manager from the packaged chart (mode node,
# migManager.enabled: deploy/overlays/gpu-node-mig), as shipped, on the
# simulated node (tests/e2e/simulated-node.values.yaml: the driver from the
# node's driver root, no NVIDIA runtime), reaching the API server through the
# kubernetes Service with its own service account, and a MIG config of the
# scenario's own. Driven by the Node's label: success, GFD labels, RBAC that
# allows exactly its calls, a change that evicts only the pods on destroyed
# devices, failures with Events, and an API server that dies and comes back.
# deploy_agent [agent_values's arguments]: tessera node in place of whatever ran, its state label cleared.
deploy_agent() {
  remove_consumers
  kc -n tessera delete daemonset tessera --wait=true >/dev/null 2>&1 || true
  wait_for 60 "tessera's node pods to go" eval '[[ -z $(kc -n tessera get pods -l "app.kubernetes.io/name in (tessera, tessera-mps-host)" -o name) ]]'
  kc label node "$NODE" nvidia.com/mig.config.state- >/dev/null 2>&1 || true
  local args
  mapfile -t args < <(agent_values "$@")
  helm_deploy "${args[@]}"
}

node_label() { kc get node "${2:-$NODE}" -o jsonpath="{.metadata.labels.${1//./\\.}}"; }
relabel() { kc label node "$NODE" --overwrite "nvidia.com/mig.config=$1" >/dev/null; }
state_is() { [[ $(node_label nvidia.com/mig.config.state) == "$1" ]]; }
label_is() { [[ $(node_label "$1") == "$2" ]]; }
consumer_pods() {  # "name uid restarts" per e2e pod, sorted
  kc get pods -l app=e2e-consumer \
    -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.uid} {.status.containerStatuses[0].restartCount}{"\n"}{end}' | sort
}
node_events() {  # node_events REASON: the messages of the Node's Events with REASON
  kc get events -n default --field-selector "involvedObject.name=$NODE,reason=$1" -o jsonpath='{.items[*].message}'
}
pod_gone() { [[ -z $(kc get pod "$1" -o name 2>/dev/null) ]]; }

scenario_node-agent() {
  relabel all-1g.20gb
  deploy_agent
  wait_for 120 "the agent to apply all-1g.20gb (mig.config.state=success)" state_is success
  expect_resource 60 nvidia.com/mig-1g.20gb 8
  # GPU feature discovery's labels, written by the agent.
  wait_for 30 "Node label nvidia.com/mig.strategy=mixed" label_is nvidia.com/mig.strategy mixed
  wait_for 30 "Node label nvidia.com/mig-1g.20gb.count=8" label_is nvidia.com/mig-1g.20gb.count 8
  local product
  product=$(node_label nvidia.com/gpu.product)
  [[ -n $product ]] || fail "the agent wrote no nvidia.com/gpu.product label"
  echo "  all-1g.20gb: success; labels mig.strategy=mixed, mig-1g.20gb.count=8, gpu.product=$product"
  # The API server authorizes with RBAC: the agent did all that with
  # deploy/base/rbac.yaml, and that role grants no more than it uses.
  local sa=system:serviceaccount:tessera:tessera verb
  for verb in "patch nodes" "watch nodes" "create pods --subresource=eviction" "create events"; do
    [[ $(kc auth can-i $verb --as=$sa 2>/dev/null) == yes ]] || fail "the agent's service account may not $verb"
  done
  for verb in "delete pods" "list pods" "get secrets" "patch nodes --subresource=status" "delete nodes"; do
    [[ $(kc auth can-i $verb --as=$sa 2>/dev/null) == no ]] || fail "the agent's service account may $verb"
  done
  ! tessera_logs node-agent | grep -c 'HTTP 403' >/dev/null || fail "the API server refused the agent a call (403)"
  echo "  RBAC: the agent's role allows its calls and not delete pods, list pods, secrets, nodes/status"

  # One pod on each 1g.20gb device. e2e-mixed puts a 3g.40gb on GPU 0 where
  # two of them are: the pods on those two must leave, the other six stay.
  local i
  for i in $(seq 0 7); do pod "agent-$i" nvidia.com/mig-1g.20gb 1; echo ---; done | kc apply -f - >/dev/null
  wait_for 120 "8 pods Running" eval '[[ $(pods_in_phase Running) == 8 ]]'
  local before holders restarts t0 took watch_log=$E2E_STATE/logs/state-watch.log
  before=$(consumer_pods)
  holders=$(pod_resources | jq -r '.[] | "\(.pod) \(.devices[0])"')
  restarts=$(tessera_restarts node-agent)
  start state-watch "$PEERS/kubectl" --kubeconfig "$E2E_STATE/kubeconfig" --request-timeout=0 get node "$NODE" -w \
    -o jsonpath='{.metadata.labels.nvidia\.com/mig\.config\.state}{"\n"}'
  t0=$(now_ms)
  relabel e2e-mixed
  wait_for 90 "mig.config.state=success after relabelling to e2e-mixed" eval 'grep -qx pending "$watch_log" && state_is success'
  expect_resource 60 nvidia.com/mig-3g.40gb 1
  expect_resource 60 nvidia.com/mig-1g.20gb "$(want 6)"
  took=$(($(now_ms) - t0))
  stop state-watch 5
  [[ $(grep -v '^$' "$watch_log" | tr '\n' ' ') == *pending*success* ]] ||
    fail "mig.config.state went '$(tr '\n' ' ' <"$watch_log")', expected pending, then success"
  # The pods whose devices the change destroyed: exactly two, and gone.
  local present doomed=() p uuid
  present=$(inventory | jq -r '.gpus[].mig_devices[].uuid')
  while read -r p uuid; do grep -qx "$uuid" <<<"$present" || doomed+=("$p"); done <<<"$holders"
  ((${#doomed[@]} == 2)) || fail "expected the change to destroy the devices of 2 pods, it destroyed those of: ${doomed[*]}"
  for p in "${doomed[@]}"; do wait_for 60 "evicted pod $p to go" pod_gone "$p"; done
  local after expected
  after=$(consumer_pods)
  expected=$(grep -v -E "^($(IFS='|'; echo "${doomed[*]}")) " <<<"$before")
  [[ $after == "$expected" ]] || fail "the pods on kept devices changed: expected '$expected', found '$after'"
  [[ $(tessera_restarts node-agent) == "$restarts" ]] || fail "tessera node's container restarted during the change"
  wait_for 30 "Node label nvidia.com/mig-3g.40gb.count=1" label_is nvidia.com/mig-3g.40gb.count 1
  wait_for 30 "Node label nvidia.com/mig-1g.20gb.count=6" label_is nvidia.com/mig-1g.20gb.count 6
  wait_for 30 "a MigConfigApplied Event on the Node for e2e-mixed" eval 'node_events MigConfigApplied | grep -q "e2e-mixed applied"'
  echo "  e2e-mixed: pending -> success, new capacity in $took ms; evicted ${doomed[*]}; 6 pods untouched (UIDs, restarts)"

  # A config the GPUs cannot hold: failed, an Event saying why, capacity as it was.
  relabel e2e-impossible
  wait_for 60 "mig.config.state=failed for e2e-impossible" state_is failed
  wait_for 30 "a MigConfigFailed Event naming e2e-impossible" eval 'node_events MigConfigFailed | grep -q "e2e-impossible"'
  expect_resource 30 nvidia.com/mig-3g.40gb 1
  expect_resource 30 nvidia.com/mig-1g.20gb 6
  [[ $(consumer_pods) == "$after" ]] || fail "a change that failed disturbed pods"
  echo "  e2e-impossible: failed, with an Event; capacity and pods as they were"

  # An unknown name: failed at once, the Event naming it.
  relabel all-1g.2gb
  wait_for 60 "mig.config.state=failed for an unknown name" eval 'node_events MigConfigFailed | grep -q "no config named .all-1g.2gb"'
  state_is failed || fail "mig.config.state is '$(node_label nvidia.com/mig.config.state)' for an unknown name, expected failed"
  echo "  all-1g.2gb (unknown): failed, with an Event naming it"

  # The API server dies (SIGKILL: no goodbye to the agent's watch) and comes
  # back; the agent carries on and takes the next label.
  kill -KILL "$(pid_of kube-apiserver)"
  wait_until 10 "the API server to die" eval '! alive kube-apiserver'
  sleep 3
  apiserver_start
  remove_consumers
  relabel all-1g.20gb
  wait_for 120 "mig.config.state=success after the API server restarted" state_is success
  expect_resource 60 nvidia.com/mig-1g.20gb 8
  [[ $(tessera_restarts node-agent) == "$restarts" ]] || fail "tessera node's container restarted with the API server"
  wait_for 30 "Node label nvidia.com/mig-3g.40gb.count gone" label_is nvidia.com/mig-3g.40gb.count ""
  echo "  API server killed and restarted: the agent applied all-1g.20gb after it, without restarting; stale labels removed"

  # One device-plugin config per kind of node (the chart's devicePluginConfigs): a ConfigMap of
  # two, the default served until the Node's nvidia.com/device-plugin.config label names the other
  # (the 1g.20gb devices time-sliced twice), and again once the label goes. The chart tells both
  # configs cdi-cri (the node has no NVIDIA runtime), and a pod is given its device through it.
  kc -n tessera create configmap e2e-device-plugin-configs \
    --from-literal=mixed=$'version: v1\nflags: {migStrategy: mixed}\n' \
    --from-literal=shared=$'version: v1\nflags: {migStrategy: mixed}\nsharing:\n  timeSlicing:\n    resources:\n    - {name: nvidia.com/mig-1g.20gb, replicas: 2}\n' \
    --dry-run=client -o yaml | kc apply -f - >/dev/null
  deploy_agent "" -- --set devicePluginConfigs.name=e2e-device-plugin-configs --set devicePluginConfigs.default=mixed \
    --set-json 'admission.shareResources=["nvidia.com/mig-1g.20gb"]'
  wait_for 120 "the agent to serve all-1g.20gb again" state_is success
  expect_resource 60 nvidia.com/mig-1g.20gb 8
  kc label node "$NODE" --overwrite nvidia.com/device-plugin.config=shared >/dev/null
  expect_resource 60 nvidia.com/mig-1g.20gb 16
  pod dp-config nvidia.com/mig-1g.20gb 1 | kc apply -f - >/dev/null
  wait_for 90 "pod dp-config Running" is_running dp-config
  local given
  given=$(container_spec dp-config cuda default | jq -r '[.linux.devices[]?.path | select(startswith("/dev/nvidia-caps/"))] | length')
  ((given > 0)) || fail "pod dp-config was given no MIG capability device (cdi-cri through --device-list-strategy)"
  remove_consumers
  kc label node "$NODE" nvidia.com/device-plugin.config- >/dev/null
  expect_resource 60 nvidia.com/mig-1g.20gb 8
  kc -n tessera delete configmap e2e-device-plugin-configs >/dev/null
  echo "  devicePluginConfigs: 8 devices under the default config, 16 replicas once the Node's label names 'shared'"
  echo "  (a pod given its MIG device through CDI), 8 again once the label goes"
}
