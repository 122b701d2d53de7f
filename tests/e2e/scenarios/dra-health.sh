# XIDs as device taints in the driver's ResourceSlices: the next claim goes
# elsewhere, and the taint goes after the recovery period. The same health
# reaches the Pod's own status through the kubelet's DRA health stream
# (KEP-4680, v1alpha1.DRAResourceHealth): a running pod on a GPU 0 device
# reads it Healthy, Unhealthy after the XID, Healthy again after recovery.
# The kubelet names a claim's device by its first CDI name (k8s.gpu.nvidia.com/claim=<uid>-DEVICE).
dra_health_of() {  # dra_health_of POD DEVICE: the health the pod's status gives DEVICE
  kc get pod "$1" -o json | jq -r --arg d "$2" \
    '[.status.containerStatuses[].allocatedResourcesStatus[]?.resources[]? | select(.resourceID | endswith("-" + $d)) | .health] | first // ""'
}

scenario_dra-health() {
  deploy_dra
  dra_claim_pod on-gpu0 "device.attributes['gpu.nvidia.com'].profile == '2g.20gb' && device.attributes['gpu.nvidia.com'].index == 0" |
    kc apply -f - >/dev/null
  wait_for 90 "pod on-gpu0 Running" is_running on-gpu0
  local dev
  dev=$(claim_device on-gpu0)
  [[ $dev == gpu-0-* ]] || fail "on-gpu0's claim got $dev, expected a GPU 0 device"
  wait_for 30 "on-gpu0's status to list $dev Healthy" eval '[[ $(dra_health_of on-gpu0 "$dev") == Healthy ]]'
  "$TESSERA" sim event "$(sim_dir)" --gpu 0 --xid 48 >/dev/null || fail "cannot inject XID 48"
  wait_for 30 "gpu-0's devices to be tainted" eval '[[ $(dra_taints gpu-0-mig-1g10gb-19-6) == "gpu.nvidia.com/xid=48:NoSchedule" ]]'
  wait_for 30 "on-gpu0's status to list $dev Unhealthy" eval '[[ $(dra_health_of on-gpu0 "$dev") == Unhealthy ]]'
  echo "  pod on-gpu0 on $dev: Healthy in its status, Unhealthy after the XID"
  profile_pod after-xid 1g.10gb | kc apply -f - >/dev/null
  wait_for 90 "pod after-xid Running" is_running after-xid
  [[ $(claim_device after-xid) == gpu-1-* ]] || fail "after an XID on GPU 0 the scheduler chose $(claim_device after-xid), expected a GPU 1 device"
  echo "  XID 48 on GPU 0: its devices tainted gpu.nvidia.com/xid=48:NoSchedule; a new claim went to $(claim_device after-xid)"
  wait_for 60 "the taint to go after the recovery period" eval '[[ -z $(dra_taints gpu-0-mig-1g10gb-19-6) ]]'
  wait_for 30 "on-gpu0's status to list $dev Healthy again" eval '[[ $(dra_health_of on-gpu0 "$dev") == Healthy ]]'
  echo "  5 s without a new XID and the GPU answering: untainted, and Healthy again in on-gpu0's status"
  remove_dra_consumers
}
