# The API server validates every overlay of deploy/ and the Helm chart's
# renders (unknown fields, types, admission) in a server-side dry run. The
# cluster has no Prometheus Operator, so the chart's ServiceMonitor and
# PrometheusRule are left out where metrics are on (tests/deploy checks them).
readonly HELM_RENDERS=(
  ""
  "--set mps.enabled=true"
  "--set metrics.enabled=true --set metrics.serviceMonitor.enabled=false --set metrics.prometheusRule.enabled=false"
  "--set cdi.enabled=true"
  "--set mode=node"
  "--set mode=node --set migManager.enabled=true"
  "--set mode=node --set migMonitor.enabled=true --set-file devicePluginConfig=$REPO/deploy/overlays/mig-mixed/device-plugin-config.yaml"
  "--set mode=node --set migManager.enabled=true --set mps.enabled=true --set metrics.enabled=true --set metrics.serviceMonitor.enabled=false --set metrics.prometheusRule.enabled=false --set cdi.enabled=true"
)

scenario_manifests() {
  kc apply -f "$REPO/deploy/base/namespace.yaml" >/dev/null
  local o log=$E2E_STATE/logs/dry-run.log values
  for o in base overlays/mig-mixed overlays/time-slicing overlays/mps overlays/gpu-node overlays/gpu-node-mig; do
    kc apply --dry-run=server -k "$REPO/deploy/$o" >"$log" 2>&1 ||
      { cat "$log"; fail "the API server refused deploy/$o"; }
    echo "  deploy/$o: accepted ($(grep -c 'server dry run' "$log") objects)"
  done
  for values in "${HELM_RENDERS[@]}"; do
    # shellcheck disable=SC2086 # the values are words
    "$PEERS/helm" template tessera "$REPO/deploy/helm/tessera" --kube-version 1.36.0 $values \
      >"$E2E_STATE/helm-render.yaml" 2>"$E2E_STATE/logs/helm.log" ||
      { cat "$E2E_STATE/logs/helm.log"; fail "helm template ${values:-(defaults)} failed"; }
    kc apply --dry-run=server -f "$E2E_STATE/helm-render.yaml" >"$log" 2>&1 ||
      { cat "$log"; fail "the API server refused the chart rendered with ${values:-its defaults}"; }
    echo "  deploy/helm/tessera ${values:-(defaults)}: accepted ($(grep -c 'server dry run' "$log") objects)" |
      sed "s|$REPO/||g"
  done
}
