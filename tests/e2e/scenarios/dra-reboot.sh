# A node rebooted under a running DRA pod: the kubelet stopped, every pod's
# process killed as a power-off kills them, then what the reboot takes with
# it (`tessera sim reboot`: the MIG instances, MIG mode, nvidia_uvm, a new
# boot id; the CDI specs in the tmpfs /var/run/cdi), MIG mode put back as a
# node's boot service puts it back, and the kubelet started again. The DRA
# driver's checkpoint on disk still says "prepared"; tessera sees the new
# boot, forgets the claims of the old one, and the kubelet's prepare cuts the
# instance and writes the spec again: the pod runs again on the same device.
scenario_dra-reboot() {
  deploy_dra
  profile_pod survivor 1g.10gb | kc apply -f - >/dev/null
  wait_for 90 "pod survivor Running" is_running survivor
  local device uid spec before restarts
  device=$(claim_device survivor)
  uid=$(kc get resourceclaims -o json | jq -r '.items[0].metadata.uid')
  spec=$(node_dir "$NODE")/cdi-run/k8s.gpu.nvidia.com-claim_$uid.json
  before=$(sim_instances)
  [[ -n $before && -f $spec ]] || fail "before the reboot: instances '$before', spec $spec $([[ -f $spec ]] || echo missing)"
  restarts=$(kc get pod survivor -o jsonpath='{.status.containerStatuses[0].restartCount}')

  # The reboot.
  stop "node-$NODE-kubelet" 15
  kill_node_pods "$NODE" || fail "the node's pod processes did not all die"
  "$TESSERA" sim reboot "$(sim_dir)" >/dev/null || fail "tessera sim reboot failed"
  rm -f "$(node_dir "$NODE")"/cdi-run/*.json
  [[ -z $(sim_instances) ]] || fail "the simulated reboot left instances: $(sim_instances)"
  # The node's boot service (mig-parted's, or tessera mig apply) puts MIG mode back; nothing is cut.
  "$TESSERA" mig apply -f "$E2E_STATE/dra-mig-on.yaml" --config-name dra --sim "$(sim_dir)" \
    --state-dir "$E2E_STATE/dra-mig-state" >/dev/null || fail "cannot turn MIG on again after the reboot"
  kubelet_start "$NODE"
  wait_for 60 "$NODE Ready again" node_ready "$NODE"

  running_again() {
    is_running survivor &&
      (($(kc get pod survivor -o jsonpath='{.status.containerStatuses[0].restartCount}') > restarts)) &&
      [[ $(kc get pod survivor -o jsonpath='{.status.containerStatuses[0].ready}') == true ]]
  }
  wait_for 180 "pod survivor running again after the reboot" running_again
  [[ $(claim_device survivor) == "$device" ]] || fail "the claim moved from $device to $(claim_device survivor)"
  [[ $(sim_instances) == "$before" ]] || fail "after the reboot the GPUs hold '$(sim_instances)', expected '$before' cut again"
  [[ -f $spec ]] || fail "the claim's CDI spec $spec was not written again"
  local said
  said=$(tessera_logs dra-driver | grep -c "the node rebooted since the checkpoint was written" || true)
  ((said > 0)) ||
    fail "the DRA driver did not say it saw a reboot: $(tessera_logs dra-driver | tail -n 5)"
  echo "  after the reboot: pod survivor running again on $device, cut again as $(sim_instances), spec rewritten"
  remove_dra_consumers
}
