# tessera's DRA driver (deploy/overlays/dra) on the 1.36 node, in place of
# the node agent: ResourceSlices with per-GPU counters, the stock scheduler
# choosing a MIG placement that does not exist yet, tessera cutting it at
# NodePrepareResources and destroying it at NodeUnprepareResources; first fit
# that does not strand slices (and NVIDIA's order, which does); memory shares
# the scheduler counts and the quota library is told of; MPS inside a MIG
# instance; XIDs as device taints. The node's two A100s are put in MIG mode with no instance first, as
# an admin would (an A100 changes MIG mode only with a reset).

# dra_claim_pod NAME SELECTOR-EXPRESSION [CLASS] [MEMORY]: a pod with a claim
# of its own (a ResourceClaimTemplate NAME) for one device of CLASS
# (mig.nvidia.com) that the CEL expression selects; MEMORY asks for a share.
dra_claim_pod() {
  local name=$1 expr=$2 class=${3:-mig.nvidia.com} memory=${4:-} capacity=""
  [[ -z $memory ]] || capacity="
          capacity: {requests: {memory: $memory}}"
  local selectors=""
  [[ -z $expr ]] || selectors="
          selectors: [{cel: {expression: \"$expr\"}}]"
  cat <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: $name, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: $class$selectors$capacity
---
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: default, labels: {app: e2e-consumer}}
spec:
  nodeSelector: {kubernetes.io/hostname: $NODE}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  resourceClaims: [{name: gpu, resourceClaimTemplateName: $name}]
  containers:
  - name: cuda
    image: localhost/tessera-e2e/shell:latest
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"]
    resources: {claims: [{name: gpu}]}
EOF
}

profile_pod() { dra_claim_pod "$1" "device.attributes['gpu.nvidia.com'].profile == '$2'"; }
pod_phase() { kc get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
is_running() { [[ $(pod_phase "$1") == Running ]]; }
# The device the scheduler gave POD's claim.
claim_device() {
  kc get resourceclaims -o json | jq -r --arg p "$1" \
    '.items[] | select(.metadata.annotations["resource.kubernetes.io/pod-claim-name"] != null and (.metadata.ownerReferences // [])[0].name == $p) | .status.allocation.devices.results[0].device'
}
# The GPU instances on the node as the simulated driver has them: "<gpu>:<profile id>@<start> ...".
sim_instances() {
  "$TESSERA" sim show "$(sim_dir)" | jq -r '[.gpus | to_entries[] | .key as $g | .value.gpu_instances[]? | "\($g):\(.profile_id)@\(.start)"] | sort | join(" ")'
}
dra_taints() {  # dra_taints DEVICE: its taints, "key=value:effect ..."
  kc get resourceslices -o json | jq -r --arg d "$1" \
    '[.items[] | select(.spec.nodeName == "'"$NODE"'") | (.spec.devices // [])[] | select(.name == $d) | (.taints // [])[] | "\(.key)=\(.value // ""):\(.effect)"] | join(" ")'
}
remove_dra_consumers() {
  remove_consumers
  kc delete resourceclaimtemplates --all --wait=false >/dev/null 2>&1 || true
  wait_for 60 "the claims to go" eval '[[ -z $(kc get resourceclaims -o name) ]]'
}

# deploy_dra [EXTRA-ARG...]: the DRA driver alone on NODE: tessera's other
# DaemonSets gone, the node's GPUs in MIG mode with nothing cut, a fresh
# checkpoint, `tessera dra EXTRA-ARG...` publishing its slices.
deploy_dra() {
  remove_consumers
  kc -n tessera delete daemonset tessera tessera-mps-host --ignore-not-found --wait=true >/dev/null 2>&1 || true
  wait_for 60 "tessera's pods to go" eval '[[ -z $(kc -n tessera get pods -o name) ]]'
  local cfg=$E2E_STATE/dra-mig-enabled.yaml
  printf 'version: v1\nmig-configs:\n  dra:\n    - devices: all\n      mig-enabled: true\n      mig-devices: {}\n' >"$cfg"
  "$TESSERA" mig apply -f "$cfg" --config-name dra --sim "$(sim_dir)" --state-dir "$E2E_STATE/dra-mig-state" >/dev/null ||
    fail "cannot put $NODE's simulated GPUs in MIG mode"
  rm -rf "$(node_dir "$NODE")/kubelet/plugins/gpu.nvidia.com"
  kc apply -k "$(dra_overlay "$@")" >/dev/null || fail "kubectl apply -k of the DRA overlay failed"
  wait_for 120 "tessera dra to publish $NODE's ResourceSlices" eval '(($(dra_slices "$NODE") > 0))'
  wait_for 60 "the kubelet to register gpu.nvidia.com" eval \
    'tessera_logs dra-driver | grep -q "the kubelet registered DRA driver gpu.nvidia.com"'
}

scenario_dra-mig() {
  deploy_dra
  local slices
  slices=$(dra_slices "$NODE")
  # Two A100-80GB in MIG mode: 25 placements each (7 + 7 media + 4 + 3 + 2 + 1 + 1), no whole GPU.
  [[ $slices == "$(want 50)" ]] || fail "$NODE's ResourceSlices list $slices devices, expected 50 (25 MIG placements per A100)"
  [[ $(kc get resourceslices -o json | jq '[.items[] | select(.spec.nodeName == "'"$NODE"'") | (.spec.sharedCounters // [])[]] | length') == 2 ]] ||
    fail "expected one counter set per GPU"
  echo "  $NODE: $slices devices in its slices, one counter set per GPU"

  profile_pod small 1g.10gb | kc apply -f - >/dev/null
  wait_for 90 "pod small Running" is_running small
  local device instances seen
  device=$(claim_device small)
  instances=$(sim_instances)
  # tessera's order: a small profile from the end of the GPU (start 6), never where a 4g or a 3g would go.
  [[ $device == gpu-0-mig-1g10gb-19-6 ]] || fail "the scheduler chose $device, expected gpu-0-mig-1g10gb-19-6 (listed first)"
  [[ $instances == "0:19@6" ]] || fail "the simulated GPUs hold '$instances', expected exactly 0:19@6 (a 1g.10gb at 6)"
  seen=$(cdi_devices_in small)
  [[ $seen == *"nvidia0 "* && $seen != *"nvidia1 "* && $(grep -o 'nvidia-caps/nvidia-cap[0-9]*' <<<"$seen" | wc -l) == 2 ]] ||
    fail "pod small sees /dev '$seen', expected nvidia0 and its instance's two capability nodes, not nvidia1"
  local uid spec
  uid=$(kc get resourceclaims -o json | jq -r '.items[0].metadata.uid')
  spec=$(node_dir "$NODE")/cdi-run/k8s.gpu.nvidia.com-claim_$uid.json
  [[ -f $spec ]] || fail "no CDI spec $spec for the claim"
  echo "  pod small: claim on $device, cut as $instances, /dev $seen"
  kc delete pod small --wait=true >/dev/null
  wait_for 60 "the 1g.10gb to be destroyed" eval '[[ -z $(sim_instances) ]]'
  wait_for 30 "the claim's CDI spec to go" eval "[[ ! -f $spec ]]"
  echo "  pod deleted: the instance destroyed, its CDI spec removed"
  remove_dra_consumers
}

# Three 1g.10gb, then a 4g.40gb (it has one placement, at 0), with the other
# GPU taken whole by a 7g.80gb. First fit by start puts the 1g at 0, 1, 2 and
# strands the 4g; tessera's order puts them at 6, 5, 4 and the 4g runs.
packing_sequence() {
  profile_pod big 7g.80gb | kc apply -f - >/dev/null
  wait_for 90 "pod big Running" is_running big
  local i
  for i in 1 2 3; do
    profile_pod "small-$i" 1g.10gb | kc apply -f - >/dev/null
    wait_for 90 "pod small-$i Running" is_running "small-$i"
  done
  profile_pod four 4g.40gb | kc apply -f - >/dev/null
}

scenario_dra-packing() {
  deploy_dra --order by-start
  packing_sequence
  sleep 15
  [[ $(pod_phase four) == Pending ]] || fail "with NVIDIA's order (by start) pod four is $(pod_phase four), expected Pending (stranded)"
  echo "  by-start: 1g.10gb at $(sim_instances | tr ' ' '\n' | grep ':19@' | tr '\n' ' ')-> the 4g.40gb stays Pending with 4 slices free"
  remove_dra_consumers
  wait_for 60 "every instance destroyed" eval '[[ -z $(sim_instances) ]]'

  deploy_dra
  packing_sequence
  wait_for 90 "pod four Running (tessera's order)" is_running four
  local placed g
  placed=$(sim_instances)
  # The GPU the 7g.80gb (profile 0) did not take holds the rest.
  if [[ $placed == *"0:0@0"* ]]; then g=1; else g=0; fi
  [[ $placed == *"$g:19@4"* && $placed == *"$g:19@5"* && $placed == *"$g:19@6"* && $placed == *"$g:5@0"* ]] ||
    fail "the GPUs hold '$placed', expected the 1g.10gb at 4, 5, 6 and the 4g.40gb at 0 on GPU $g"
  echo "  tessera: $placed -> every pod Running"
  remove_dra_consumers
}

scenario_dra-shares() {
  # Whole GPUs: MIG off (A100s serve whole GPUs only then), memory shares on.
  remove_consumers
  # The driver goes; tessera-mps-host (and its daemons) stays, as in an upgrade.
  kc -n tessera delete daemonset tessera --ignore-not-found --wait=true >/dev/null 2>&1 || true
  wait_for 60 "tessera's driver pod to go" eval '[[ -z $(kc -n tessera get pods -l app.kubernetes.io/name=tessera -o name) ]]'
  local cfg=$E2E_STATE/dra-mig-disabled.yaml
  printf 'version: v1\nmig-configs:\n  off:\n    - devices: all\n      mig-enabled: false\n' >"$cfg"
  "$TESSERA" mig apply -f "$cfg" --config-name off --sim "$(sim_dir)" --state-dir "$E2E_STATE/dra-mig-state" >/dev/null ||
    fail "cannot turn MIG off on $NODE's simulated GPUs"
  rm -rf "$(node_dir "$NODE")/kubelet/plugins/gpu.nvidia.com"
  kc apply -k "$(dra_overlay --memory-shares)" >/dev/null || fail "kubectl apply -k of the DRA overlay failed"
  wait_for 120 "tessera dra to publish whole GPUs" eval '(($(dra_slices "$NODE") == 2))'
  # One GPU taken whole (a claim asking for no memory takes all of it), four 20 GiB shares of the other.
  dra_claim_pod whole "" gpu.nvidia.com | kc apply -f - >/dev/null
  wait_for 90 "pod whole Running" is_running whole
  local i
  for i in 1 2 3 4; do
    dra_claim_pod "share-$i" "" gpu.nvidia.com 20Gi | kc apply -f - >/dev/null
  done
  for i in 1 2 3 4; do wait_for 90 "pod share-$i Running" is_running "share-$i"; done
  dra_claim_pod share-5 "" gpu.nvidia.com 20Gi | kc apply -f - >/dev/null
  sleep 10
  [[ $(pod_phase share-5) == Pending ]] || fail "a fifth 20 GiB share is $(pod_phase share-5), expected Pending (80 GiB taken)"
  local limits
  limits=$(kc exec share-1 -c cuda -- cat /run/tessera/limits) || fail "share-1 has no /run/tessera/limits"
  [[ $limits == *" 21474836480"* ]] || fail "share-1's limits file says '$limits', expected a 21474836480-byte quota"
  kc exec share-1 -c cuda -- sh -c 'echo x > /run/tessera/limits' 2>/dev/null && fail "share-1 could write its limits file"
  echo "  4 x 20Gi shares Running on one GPU, the fifth Pending; share-1's quota file (read-only): $(tr '\n' ' ' <<<"$limits")"
  remove_dra_consumers
}

# A claim for a MIG instance whose config asks for MPS (NVIDIA's
# MigDeviceConfig): tessera cuts the instance and has tessera mps-host start a
# control daemon for exactly it; the pod's one process, the simulator's CUDA
# client, connects to that daemon with the claim's thread percentage.
scenario_dra-mps() {
  deploy_dra
  wait_for 60 "tessera-mps-host Running" eval \
    '[[ $(kc -n tessera get pods -l app.kubernetes.io/name=tessera-mps-host -o jsonpath="{.items[0].status.phase}") == Running ]]'
  cat <<EOF | kc apply -f - >/dev/null
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: mps-small, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: mig.nvidia.com
          selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '2g.20gb'"}}]
      config:
      - opaque:
          driver: gpu.nvidia.com
          parameters:
            apiVersion: resource.nvidia.com/v1beta1
            kind: MigDeviceConfig
            sharing: {strategy: MPS, mpsConfig: {defaultActiveThreadPercentage: 50, defaultPinnedDeviceMemoryLimit: 8Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: mps-small, namespace: default, labels: {app: e2e-consumer}}
spec:
  nodeSelector: {kubernetes.io/hostname: $NODE}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  resourceClaims: [{name: gpu, resourceClaimTemplateName: mps-small}]
  containers:
  - name: cuda
    image: docker.io/library/tessera:latest
    imagePullPolicy: Never
    command: ["$IMAGE_MPS_CONTROL", "--tessera-sim-client"]
    resources: {claims: [{name: gpu}]}
EOF
  wait_for 90 "pod mps-small Running" is_running mps-small
  local device uuid pid line
  device=$(claim_device mps-small)
  uuid=$(jq -r --arg d "$device" '.instances[$d].uuid' "$(node_dir "$NODE")/kubelet/plugins/gpu.nvidia.com/checkpoint.json")
  [[ $uuid == MIG-* ]] || fail "the checkpoint names no MIG device for $device"
  wait_for 30 "the MPS daemon of $uuid" mps_daemon_host_pid "$uuid"
  pid=$(mps_daemon_host_pid "$uuid")
  wait_for 30 "the client to connect" eval '[[ -n $(kc logs mps-small 2>/dev/null) ]]'
  line=$(kc logs mps-small)
  [[ $line == *"active thread percentage 50"* ]] || fail "the client says '$line', expected its claim's 50% of threads"
  echo "  $device ($uuid) cut for the claim; its own MPS daemon (host pid $pid, CUDA_VISIBLE_DEVICES=$uuid)"
  echo "  the client: $line"
  remove_dra_consumers
  wait_for 60 "the daemon of $uuid to stop" eval '! mps_daemon_host_pid "$uuid"'
  wait_for 60 "the instance to be destroyed" eval '[[ -z $(sim_instances) ]]'
  echo "  claim released: the daemon stopped, the instance destroyed"
}

scenario_dra-health() {
  deploy_dra
  "$TESSERA" sim event "$(sim_dir)" --gpu 0 --xid 48 >/dev/null || fail "cannot inject XID 48"
  wait_for 30 "gpu-0's devices to be tainted" eval '[[ $(dra_taints gpu-0-mig-1g10gb-19-6) == "gpu.nvidia.com/xid=48:NoSchedule" ]]'
  profile_pod after-xid 1g.10gb | kc apply -f - >/dev/null
  wait_for 90 "pod after-xid Running" is_running after-xid
  [[ $(claim_device after-xid) == gpu-1-* ]] || fail "after an XID on GPU 0 the scheduler chose $(claim_device after-xid), expected a GPU 1 device"
  echo "  XID 48 on GPU 0: its devices tainted gpu.nvidia.com/xid=48:NoSchedule; a new claim went to $(claim_device after-xid)"
  wait_for 60 "the taint to go after the recovery period" eval '[[ -z $(dra_taints gpu-0-mig-1g10gb-19-6) ]]'
  echo "  5 s without a new XID and the GPU answering: untainted"
  remove_dra_consumers
}
