# The API server validates every overlay of deploy/ (with the fleet and
# dra-mps components too) and the Helm chart's renders in every mode and
# option (unknown fields, types, admission) in a server-side dry run. The
# cluster has no Prometheus Operator, so the ServiceMonitor and
# PrometheusRule are left out where metrics are on (tests/deploy renders and
# checks them; tests/alerts runs the rules).
readonly HELM_RENDERS=(
  ""
  "--set mps.enabled=true"
  "--set metrics.enabled=true --set metrics.serviceMonitor.enabled=false --set metrics.prometheusRule.enabled=false"
  "--set cdi.enabled=true"
  "--set driver.source=host"
  "--set mode=node"
  "--set mode=node --set migManager.enabled=true"
  "--set mode=node --set migMonitor.enabled=true --set-file devicePluginConfig=$REPO/deploy/overlays/mig-mixed/device-plugin-config.yaml"
  "--set mode=node --set migManager.enabled=true --set mps.enabled=true --set metrics.enabled=true --set metrics.serviceMonitor.enabled=false --set metrics.prometheusRule.enabled=false --set cdi.enabled=true"
  "--set mode=node --set migManager.enabled=true --set driver.source=host --set fleet.enabled=true"
  "--set dra.enabled=true"
  "--set dra.enabled=true --set mps.enabled=true --set dra.memoryShares=true --set driver.source=host"
)

# kustomize_without_crds DIR: the overlay rendered, less the Prometheus
# Operator's kinds (which this cluster does not serve).
kustomize_without_crds() {
  kc kustomize "$1" | python3 -c '
import sys, yaml
docs = [d for d in yaml.safe_load_all(sys.stdin) if d and not d["apiVersion"].startswith("monitoring.coreos.com/")]
yaml.safe_dump_all(docs, sys.stdout)'
}

scenario_manifests() {
  kc apply -f "$REPO/deploy/base/namespace.yaml" >/dev/null
  local o log=$E2E_STATE/logs/dry-run.log values dir=$E2E_STATE/manifests n=0
  mkdir -p "$dir/fleet" "$dir/dra-mps"
  # The components that only ever come with an overlay.
  printf 'resources: [%s]\ncomponents: [%s]\n' "$(realpath --relative-to="$dir/fleet" "$REPO/deploy/overlays/gpu-node-mig")" \
    "$(realpath --relative-to="$dir/fleet" "$REPO/deploy/components/fleet")" >"$dir/fleet/kustomization.yaml"
  printf 'resources: [%s]\ncomponents: [%s]\n' "$(realpath --relative-to="$dir/dra-mps" "$REPO/deploy/overlays/dra")" \
    "$(realpath --relative-to="$dir/dra-mps" "$REPO/deploy/components/dra-mps")" >"$dir/dra-mps/kustomization.yaml"
  for o in "$REPO"/deploy/base "$REPO"/deploy/overlays/* "$dir/fleet" "$dir/dra-mps"; do
    kustomize_without_crds "$o" >"$dir/render.yaml" 2>"$log" || { cat "$log"; fail "kubectl kustomize ${o#"$REPO"/} failed"; }
    kc apply --dry-run=server -f "$dir/render.yaml" >"$log" 2>&1 ||
      { cat "$log"; fail "the API server refused ${o#"$REPO"/}"; }
    echo "  ${o#"$REPO"/}: accepted ($(grep -c 'server dry run' "$log") objects)" | sed "s|$E2E_STATE/manifests/|components over an overlay: |"
    n=$((n + 1))
  done
  for values in "${HELM_RENDERS[@]}"; do
    # shellcheck disable=SC2086 # the values are words
    helm_cmd template tessera "$(chart_package)" --kube-version 1.36.0 $values \
      >"$dir/helm-render.yaml" 2>"$E2E_STATE/logs/helm.log" ||
      { cat "$E2E_STATE/logs/helm.log"; fail "helm template ${values:-(defaults)} failed"; }
    kc apply --dry-run=server -f "$dir/helm-render.yaml" >"$log" 2>&1 ||
      { cat "$log"; fail "the API server refused the chart rendered with ${values:-its defaults}"; }
    echo "  the packaged chart ${values:-(defaults)}: accepted ($(grep -c 'server dry run' "$log") objects)" |
      sed "s|$REPO/||g"
  done
  [[ $n == "$(want 10)" ]] || fail "$n kustomize renders dry-run, expected 10 (base, 7 overlays, 2 components)"
}
