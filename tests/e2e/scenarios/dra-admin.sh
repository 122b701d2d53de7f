# Admin access (resource.k8s.io/v1, GA in 1.36) on the two-GPU node: an
# admin claim in a namespace labelled resource.kubernetes.io/admin-access
# gets a MIG device beside a running workload, and a second workload runs
# beside both. tessera counts
# the admin as no user of the device: nothing is refused, nothing extra cut,
# and the admin's going destroys nothing.
scenario_dra-admin() {
  deploy_dra
  kc create namespace e2e-admin >/dev/null 2>&1 || true
  kc label namespace e2e-admin --overwrite resource.kubernetes.io/admin-access=true >/dev/null
  profile_pod work-1 1g.10gb | kc apply -f - >/dev/null
  wait_for 90 "pod work-1 Running" is_running work-1
  local device
  device=$(claim_device work-1)
  # The admin pod's claim asks for a 1g.10gb too (which one is the
  # scheduler's choice: the workload's, or a placement nobody cut).
  dra_claim_pod admin "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'" |
    sed -e 's/namespace: default/namespace: e2e-admin/' -e 's/^        exactly:$/        exactly:\n          adminAccess: true/' |
    kc apply -f - >/dev/null
  admin_running() { [[ $(kc -n e2e-admin get pod admin -o jsonpath='{.status.phase}' 2>/dev/null) == Running ]]; }
  wait_for 90 "the admin pod Running" admin_running
  local admin_device
  admin_device=$(kc -n e2e-admin get resourceclaims -o json | jq -r '.items[0].status.allocation.devices.results[0] | "\(.device) \(.adminAccess)"')
  [[ $admin_device == *"-mig-1g10gb-"*" true" ]] || fail "the admin claim got '$admin_device', expected a 1g.10gb with adminAccess true"
  [[ $(wc -w <<<"$(sim_instances)") == 1 ]] || fail "the admin claim cut an instance: the GPUs hold '$(sim_instances)'"
  # The second workload: the next first fit, the admin's placement when it is not the first's.
  profile_pod work-2 1g.10gb | kc apply -f - >/dev/null
  wait_for 90 "pod work-2 Running" is_running work-2
  local instances
  instances=$(sim_instances)
  [[ $(wc -w <<<"$instances") == 2 ]] || fail "the GPUs hold '$instances', expected the two workloads' instances only"
  kc -n e2e-admin delete pod admin --wait=true >/dev/null
  kc -n e2e-admin delete resourceclaimtemplates --all >/dev/null
  wait_for 60 "the admin claim to go" eval '[[ -z $(kc -n e2e-admin get resourceclaims -o name) ]]'
  [[ $(sim_instances) == "$instances" ]] || fail "the admin claim's going changed the GPUs: '$(sim_instances)', was '$instances'"
  is_running work-1 || fail "work-1 stopped when the admin claim went"
  echo "  admin claim on ${admin_device% true} (adminAccess), work-1 on $device, work-2 on $(claim_device work-2); instances $instances; the admin's going destroyed nothing"
  kc delete namespace e2e-admin --wait=false >/dev/null 2>&1 || true
  remove_dra_consumers
  dra_driver_scope
}

# The DRA driver's own service-account token (from its pod, so it names
# NODE): deploy/overlays/dra/slice-scope.yaml lets it write its own node's
# ResourceSlices only, and its role grants no Node change and no eviction.
dra_driver_scope() {
  local token who
  token=$(kc -n tessera exec "$(tessera_pod)" -c dra-driver -- cat /var/run/secrets/kubernetes.io/serviceaccount/token)
  [[ -n $token ]] || fail "cannot read the DRA driver's service-account token"
  as_driver() { "$PEERS/kubectl" --kubeconfig "$E2E_STATE/kubeconfig" --request-timeout=20s --token "$token" "$@"; }
  who=$(as_driver auth whoami -o json)
  [[ $(jq -r '.status.userInfo.extra["authentication.kubernetes.io/node-name"][0]' <<<"$who") == "$NODE" ]] ||
    fail "the DRA driver's token does not name its node $NODE: $(jq -c .status.userInfo <<<"$who")"
  slice() {  # slice NAME NODE: a ResourceSlice of a driver of the scenario's own
    printf 'apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: %s}
spec:
  driver: e2e-scope.example.com
  nodeName: %s
  pool: {name: %s, generation: 0, resourceSliceCount: 1}
  devices: []
' "$1" "$2" "$2"
  }
  local out
  if out=$(slice e2e-scope-other "$NODE2" | as_driver create -f - 2>&1); then
    kc delete resourceslice e2e-scope-other >/dev/null 2>&1 || true
    fail "the DRA driver on $NODE was allowed to create a ResourceSlice of $NODE2"
  fi
  grep -qF "may write only that node's ResourceSlices" <<<"$out" || fail "another node's slice was refused, but not by the policy: $out"
  slice e2e-scope-own "$NODE" | as_driver create -f - >/dev/null || fail "the DRA driver may not create a ResourceSlice of its own node"
  as_driver delete resourceslice e2e-scope-own >/dev/null || fail "the DRA driver may not delete a ResourceSlice of its own node"
  [[ $(as_driver auth can-i patch nodes) == no && $(as_driver auth can-i create pods/eviction) == no ]] ||
    fail "the DRA driver may patch Nodes or evict pods"
  echo "  the DRA driver's token (node $NODE): its own node's slice created and deleted; $NODE2's refused; no Node patch, no eviction"
}
