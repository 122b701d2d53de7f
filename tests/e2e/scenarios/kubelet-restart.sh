# The kubelet is stopped and started (a restarted kubelet counts no device
# until the plugin registers again): tessera's container, the same one with
# its restart count unchanged, registers again, the new kubelet logs its
# endpoint, and capacity and allocatable are back at 8.
scenario_kubelet-restart() {
  local before restarts_before pod log=$E2E_STATE/logs/node-$NODE-kubelet.log log_from
  pod=$(tessera_pod)
  restarts_before=$(tessera_restarts device-plugin)
  before=$(registrations device-plugin)
  log_from=$(wc -l <"$log")
  stop "node-$NODE-kubelet"
  kubelet_start "$NODE"
  registered_again() { (($(registrations device-plugin) > before)); }
  wait_for 60 "tessera to register again with the restarted kubelet" registered_again
  # Wait for the new kubelet to take tessera's endpoint, then two node-status
  # periods (2 s each), so the Node shows what it counts now.
  new_kubelet_logged() { tail -n +$((log_from + 1)) "$log" | grep -c "$1"; }
  wait_for 30 "the new kubelet to take tessera's endpoint" new_kubelet_logged 'Device plugin connected.*nvidia.com/mig-1g.20gb'
  sleep 4
  expect_resource 60 nvidia.com/mig-1g.20gb 8
  [[ $(tessera_pod) == "$pod" ]] || fail "tessera's pod was replaced; it should have re-registered in place"
  local restarts
  restarts=$(tessera_restarts device-plugin)
  [[ $restarts == "$restarts_before" ]] || fail "tessera's container restarted ($restarts_before -> $restarts)"
  echo "  registrations $before -> $(registrations device-plugin); same container, allocatable back to 8"
}
