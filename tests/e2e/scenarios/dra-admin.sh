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
}
