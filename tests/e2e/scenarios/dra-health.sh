# XIDs as device taints in the driver's ResourceSlices: the next claim goes
# elsewhere, and the taint goes after the recovery period.
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
