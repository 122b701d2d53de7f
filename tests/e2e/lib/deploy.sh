# tessera on the simulated nodes, installed as a user installs it: the chart
# deploy/helm/tessera packaged (helm package) and installed or upgraded
# (helm upgrade --install) as release tessera, with one values file for the
# simulated node (tests/e2e/simulated-node.values.yaml, the only difference
# from a real GPU node without the NVIDIA runtime) and each scenario's own
# values. Nothing is patched after rendering. For the scenarios and for
# ./x cluster up. Sourced after lib/common.sh and lib/cluster.sh; uses REPO,
# E2E_STATE, PEERS (with helm) and kc, and calls fail on an error.

readonly SIM_VALUES=$REPO/tests/e2e/simulated-node.values.yaml
# The simulated MPS client in tessera's image (mps-upgrade's client pod).
readonly IMAGE_MPS_CONTROL=/usr/local/tessera/bin/nvidia-cuda-mps-control
# The test's settings that make failures and recoveries quick: a 5 s health
# recovery (plugin and agent) and a 20 s eviction timeout (agent).
readonly HEALTH_RECOVERY=5 AGENT_EVICTION_TIMEOUT=20

helm_cmd() {
  HELM_CACHE_HOME=$E2E_STATE/helm/cache HELM_CONFIG_HOME=$E2E_STATE/helm/config HELM_DATA_HOME=$E2E_STATE/helm/data \
    "$PEERS/helm" --kubeconfig "$E2E_STATE/kubeconfig" "$@"
}

# chart_package: the chart as a release is made, once per run: its path.
chart_package() {
  local dir=$E2E_STATE/chart
  if ! compgen -G "$dir/tessera-*.tgz" >/dev/null; then
    mkdir -p "$dir"
    helm_cmd package "$REPO/deploy/helm/tessera" -d "$dir" >"$E2E_STATE/logs/helm-package.log" 2>&1 ||
      { cat "$E2E_STATE/logs/helm-package.log" >&2; fail "helm package deploy/helm/tessera failed"; }
  fi
  compgen -G "$dir/tessera-*.tgz"
}

# helm_deploy VALUE-ARG...: release tessera installed or upgraded from the
# packaged chart into namespace tessera, made by Helm if missing and not
# owned by the release (--create-namespace with namespace.create=false, as
# the chart's README says), with the simulated node's values and VALUE-ARGs
# (--set, --set-file, --set-json, -f), every value not given reset to the
# chart's.
helm_deploy() {
  local pkg
  pkg=$(chart_package) || exit 1
  helm_cmd upgrade --install tessera "$pkg" --namespace tessera --create-namespace --set namespace.create=false \
    --reset-values -f "$SIM_VALUES" "$@" \
    >"$E2E_STATE/logs/helm.log" 2>&1 ||
    { cat "$E2E_STATE/logs/helm.log" >&2; fail "helm upgrade --install tessera $pkg -f $SIM_VALUES $* failed"; }
}

# The values of the plugin-mode configurations the scenarios deploy, named
# after the kustomize overlay each equals (tests/deploy/check_helm.sh
# compares the renders): mig-mixed, time-slicing, mps; metrics adds the
# exporter (without the ServiceMonitor and PrometheusRule: this cluster has
# no Prometheus Operator), sampling every second.
overlay_values() {  # overlay_values NAME [metrics]: the helm arguments, one per line
  local d=$REPO/deploy/overlays
  printf '%s\n' --set-json "extraArgs=[\"--health-recovery\",\"$HEALTH_RECOVERY\"]"
  case $1 in
    mig-mixed) printf '%s\n' --set-file "devicePluginConfig=$d/mig-mixed/device-plugin-config.yaml" \
                 --set migApply.configName=all-1g.20gb ;;
    time-slicing) printf '%s\n' --set-file "devicePluginConfig=$d/time-slicing/device-plugin-config.yaml" ;;
    mps) printf '%s\n' --set mps.enabled=true ;;
    *) fail "overlay_values: no values for '$1'" ;;
  esac
  [[ ${2:-} != metrics ]] || printf '%s\n' --set metrics.enabled=true --set metrics.serviceMonitor.enabled=false \
    --set metrics.prometheusRule.enabled=false --set-json 'metrics.exporter.extraArgs=["--interval","1","--gpm-window","0.5"]'
}

# deploy_overlay NAME [metrics]: that configuration installed, and tessera's
# pods replaced so they read the new configs at once (a ConfigMap change
# alone reaches a running pod only after the kubelet's sync). tessera-mps-host
# (mps's) keeps its pod across upgrades (updateStrategy OnDelete), and goes,
# with its daemons, when a configuration without mps is installed.
deploy_overlay() {
  local args
  mapfile -t args < <(overlay_values "$@")
  helm_deploy "${args[@]}"
  kc -n tessera delete pod -l app.kubernetes.io/name=tessera --wait=false >/dev/null 2>&1 || true
}

# agent_values [DEVICE-PLUGIN-CONFIG [EXTRA-ARG...] [-- VALUE-ARG...]]: the
# helm arguments (one per line) of tessera node with the MIG manager (mode
# node, migManager.enabled: deploy/overlays/gpu-node-mig): the scenarios' MIG
# configs (or the mig-parted file AGENT_MIG_CONFIGS names), the
# device-plugin config DEVICE-PLUGIN-CONFIG (a file, or empty for the
# chart's), EXTRA-ARGs on the agent's command, and VALUE-ARGs for helm.
agent_values() {
  local dp=${1:-} a json
  shift $(($# > 0 ? 1 : 0))
  json="[\"--health-recovery\",\"$HEALTH_RECOVERY\",\"--eviction-timeout\",\"$AGENT_EVICTION_TIMEOUT\""
  while (($#)) && [[ $1 != -- ]]; do json+=",$(jq -cRn --arg a "$1" '$a')"; shift; done
  json+="]"
  shift $(($# > 0 ? 1 : 0))  # the --
  local cfg=${AGENT_MIG_CONFIGS:-$E2E_STATE/agent-mig-config.yaml}
  [[ -n ${AGENT_MIG_CONFIGS:-} ]] || agent_mig_configs "$cfg"
  printf '%s\n' --set mode=node --set migManager.enabled=true --set-file "migConfig=$cfg" --set-json "extraArgs=$json"
  [[ -z $dp ]] || printf '%s\n' --set-file "devicePluginConfig=$dp"
  (($# == 0)) || printf '%s\n' "$@"
}

# agent_mig_configs FILE: the scenarios' own mig-parted config.
agent_mig_configs() {
  cat >"$1" <<'YAML'
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  # GPU 0 whole, GPU 1 in four 1g.20gb.
  e2e-gpu1-mig:
    - devices: [0]
      mig-enabled: false
    - devices: [1]
      mig-enabled: true
      mig-devices: {"1g.20gb": 4}
  all-1g.20gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.20gb": 4}
  # GPU 0: a 3g.40gb where two 1g.20gb were; GPU 1 as it is.
  e2e-mixed:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"3g.40gb": 1, "1g.20gb": 2}
    - devices: [1]
      mig-enabled: true
      mig-devices: {"1g.20gb": 4}
  # Five 1g.20gb do not fit an A100-80GB (four memory pairs).
  e2e-impossible:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.20gb": 5}
YAML
}

# dra_values [EXTRA-VALUE-ARG...]: the helm arguments (one per line) of
# tessera's DRA driver (dra.enabled: deploy/overlays/dra) with MPS claims
# (mps.enabled: deploy/components/dra-mps), a 5 s health recovery, its
# /metrics and /healthz on port 9401 (dra.metricsPort), and
# EXTRA-VALUE-ARGs (e.g. --set dra.memoryShares=true).
dra_values() {
  printf '%s\n' --set dra.enabled=true --set mps.enabled=true --set dra.metricsPort=9401 \
    --set-json "extraArgs=[\"--health-recovery\",\"$HEALTH_RECOVERY\"]" "$@"
}

# dra_get PATH: the DRA driver's PATH on NODE (its pod's port 9401); dra_metrics: its /metrics.
dra_get() {
  local ip
  ip=$(kc -n tessera get pods -l app.kubernetes.io/name=tessera --field-selector "spec.nodeName=$NODE" \
    -o jsonpath='{.items[0].status.podIP}')
  curl -sf --max-time 5 "http://$ip:9401$1"
}
dra_metrics() { dra_get /metrics; }

# dra_slices NODE: how many devices the node's ResourceSlices of gpu.nvidia.com list.
dra_slices() {
  kc get resourceslices -o json | jq --arg n "$1" \
    '[.items[] | select(.spec.nodeName == $n and .spec.driver == "gpu.nvidia.com") | (.spec.devices // [])[]] | length'
}
