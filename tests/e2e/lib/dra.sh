# What the DRA scenarios (scenarios/dra-*.sh) share: tessera's DRA driver
# (the chart's dra.enabled, deploy/overlays/dra) on the 1.36 node in place of
# the node agent, the node's two A100s put in MIG mode with no instance first,
# as an admin would (an A100 changes MIG mode only with a reset); pods with
# claims of their own; what the scheduler and the simulated driver say.
# Sourced by tests/e2e/run.sh after lib/scenario.sh.

# dra_claim_pod NAME SELECTOR-EXPRESSION [CLASS] [MEMORY]: a pod with a claim
# of its own (a ResourceClaimTemplate NAME) for one device of CLASS
# (mig.nvidia.com) that the CEL expression selects; MEMORY asks for a share.
# The pod is dra_template_pod's.
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
EOF
  dra_template_pod "$name"
}

# dra_template_pod NAME: the pod NAME on NODE with a claim of its own from the
# ResourceClaimTemplate NAME. Confined as the chart's share-isolation policy
# asks of every pod with a claim under dra.memoryShares.
dra_template_pod() {
  local name=$1
  cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $name, namespace: default, labels: {app: e2e-consumer}}
spec:
  nodeSelector: {kubernetes.io/hostname: $NODE}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  securityContext: {seccompProfile: {type: RuntimeDefault}}
  resourceClaims: [{name: gpu, resourceClaimTemplateName: $name}]
  containers:
  - name: cuda
    image: $E2E_SHELL_IMAGE
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"]
    securityContext: {allowPrivilegeEscalation: false}
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

# deploy_dra [VALUE-ARG...]: the DRA driver alone on NODE: tessera's other
# DaemonSets gone, the node's GPUs in MIG mode with nothing cut, a fresh
# checkpoint, the chart's DRA driver with VALUE-ARGs (helm's --set ...)
# publishing its slices. DRA_MIG=off: MIG off instead (A100s then serve whole
# GPUs only), and only the driver's pod replaced: tessera-mps-host and its
# daemons stay, as in an upgrade.
deploy_dra() {
  remove_consumers
  local mig=${DRA_MIG:-on} gone="tessera, tessera-mps-host" sets=(tessera tessera-mps-host) enabled=true
  [[ $mig == on ]] || { gone=tessera sets=(tessera) enabled=false; }
  kc -n tessera delete daemonset "${sets[@]}" --ignore-not-found --wait=true >/dev/null 2>&1 || true
  wait_for 60 "tessera's pods ($gone) to go" eval '[[ -z $(kc -n tessera get pods -l "app.kubernetes.io/name in ($gone)" -o name) ]]'
  local cfg=$E2E_STATE/dra-mig-$mig.yaml
  printf 'version: v1\nmig-configs:\n  dra:\n    - devices: all\n      mig-enabled: %s\n%s' "$enabled" \
    "$([[ $enabled == false ]] || printf '      mig-devices: {}\n')" >"$cfg"
  "$TESSERA" mig apply -f "$cfg" --config-name dra --sim "$(sim_dir)" --state-dir "$E2E_STATE/dra-mig-state" >/dev/null ||
    fail "cannot turn MIG $mig on $NODE's simulated GPUs"
  rm -rf "$(node_dir "$NODE")/kubelet/plugins/gpu.nvidia.com"
  local args
  mapfile -t args < <(dra_values "$@")
  helm_deploy "${args[@]}"
  wait_for 120 "tessera dra to publish $NODE's ResourceSlices" eval '(($(dra_slices "$NODE") > 0))'
  wait_for 60 "the kubelet to register gpu.nvidia.com" eval \
    'tessera_logs dra-driver | grep -c "the kubelet registered DRA driver gpu.nvidia.com"'
}
