# A claim for a MIG instance whose config asks for MPS (NVIDIA's
# MigDeviceConfig): tessera cuts the instance and has tessera mps-host start a
# control daemon for exactly it; the pod's one process, the simulator's CUDA
# client, connects to that daemon with the claim's thread percentage.
scenario_dra-mps() {
  deploy_dra
  wait_for 60 "tessera-mps-host Running" eval \
    '[[ $(kc -n tessera get pods -l app.kubernetes.io/name=tessera-mps-host -o jsonpath="{.items[0].status.phase}") == Running ]]'
  cat <<EOF | kc apply -f - >/dev/null
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: mps-small, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: mig.nvidia.com
          selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '2g.20gb'"}}]
      config:
      - opaque:
          driver: gpu.nvidia.com
          parameters:
            apiVersion: resource.nvidia.com/v1beta1
            kind: MigDeviceConfig
            sharing: {strategy: MPS, mpsConfig: {defaultActiveThreadPercentage: 50, defaultPinnedDeviceMemoryLimit: 8Gi}}
---
apiVersion: v1
kind: Pod
metadata: {name: mps-small, namespace: default, labels: {app: e2e-consumer}}
spec:
  nodeSelector: {kubernetes.io/hostname: $NODE}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  restartPolicy: Never
  securityContext: {seccompProfile: {type: RuntimeDefault}}
  resourceClaims: [{name: gpu, resourceClaimTemplateName: mps-small}]
  containers:
  - name: cuda
    image: $TESSERA_IMAGE
    imagePullPolicy: Never
    command: ["$IMAGE_MPS_CONTROL", "--tessera-sim-client"]
    securityContext: {allowPrivilegeEscalation: false}
    resources: {claims: [{name: gpu}]}
EOF
  wait_for 90 "pod mps-small Running" is_running mps-small
  local device uuid pid line
  device=$(claim_device mps-small)
  uuid=$(jq -r --arg d "$device" '.instances[$d].uuid' "$(node_dir "$NODE")/kubelet/plugins/gpu.nvidia.com/tessera/checkpoint.json")
  [[ $uuid == MIG-* ]] || fail "the checkpoint names no MIG device for $device"
  wait_for 30 "the MPS daemon of $uuid" mps_daemon_host_pid "$uuid"
  pid=$(mps_daemon_host_pid "$uuid")
  wait_for 30 "the client to connect" eval '[[ -n $(kc logs mps-small 2>/dev/null) ]]'
  line=$(kc logs mps-small)
  [[ $line == *"active thread percentage 50"* ]] || fail "the client says '$line', expected its claim's 50% of threads"
  echo "  $device ($uuid) cut for the claim; its own MPS daemon (host pid $pid, CUDA_VISIBLE_DEVICES=$uuid)"
  echo "  the client: $line"
  remove_dra_consumers
  wait_for 60 "the daemon of $uuid to stop" eval '! mps_daemon_host_pid "$uuid"'
  wait_for 60 "the instance to be destroyed" eval '[[ -z $(sim_instances) ]]'
  echo "  claim released: the daemon stopped, the instance destroyed"
}
