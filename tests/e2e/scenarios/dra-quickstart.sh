# NVIDIA's own quickstart claims (third_party/nvidia-dra-driver-gpu/quickstart,
# as NVIDIA publishes them, only ubuntu:22.04 swapped for the tier's shell
# image) on NODE's two A100s served whole:
#  - gpu-test1: two pods, each with a claim of its own from one template: both
#    Running, each given one GPU's device node, not the other's.
#  - gpu-test2: one claim shared by the two containers of one pod: both given
#    the same GPU's device node.
#  - extended-resources/gpu-full: a pod asking nvidia.com/gpu: 1 with no
#    claim: the scheduler makes one from the class gpu.nvidia.com (its
#    extendedResourceName, KEP-5004, beta in 1.36), which gets a whole GPU, and
#    the pod runs to completion.
#  - gpu-test6: a Deployment of four replicas, each with its own claim of an
#    A100 whose index is 0, 2, 4 or 6, time-sliced with interval Long. The node
#    has GPUs 0 and 1: one replica Running on GPU 0, whose time-slice the
#    driver set to LONG (nvidia-smi compute-policy, as the simulator records
#    it); three Pending, as NVIDIA's driver would leave them. Deleted: GPU 0
#    back to DEFAULT.
#  - gpu-test3: one claim shared by two pods: both Running, each container
#    given the claim's GPU's device node and no other GPU's.
#  - gpu-test-mps: one claim shared by two containers of one pod through MPS
#    (50 % of the threads, 10Gi pinned): both given the same GPU, and each,
#    connecting as a CUDA client, given those limits by that GPU's control
#    daemon.
#  - gpu-test5: one claim of two GPUs, one time-sliced (interval Long) for two
#    containers, the other shared through MPS by two more: the two pairs on
#    different GPUs, the time-sliced one set LONG, the MPS pair's limits from
#    the daemon.
#    These two run NVIDIA's nbody image as published: the tier imports a
#    stand-in under its name (lib/images.sh; not NVIDIA's program).
#  - the chart's tessera-dra-configs policy: claims with a bad opaque config
#    refused when written, each saying what is wrong; good ones admitted.
#  - the two together (the tier's own claim): gpu-test3's shared claim with
#    gpu-test6's config, interval Long: two pods Running on one GPU set LONG.
# config_claim NAME PARAMETERS: a claim of a whole GPU with that opaque config for gpu.nvidia.com.
config_claim() {
  cat <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $1, namespace: default}
spec:
  devices:
    requests:
    - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}
    config:
    - {requests: [gpu], opaque: {driver: gpu.nvidia.com, parameters: $2}}
EOF
}
# The chart's tessera-dra-configs policy (dra.configPolicy, on by default): a claim whose opaque
# config the driver would refuse at prepare is refused when written, saying what is wrong; a good
# one, and one for another driver, are admitted (server dry runs; the API server takes a new
# policy in asynchronously: the first refusal is waited for).
check_config_policy() {
  local out=$E2E_STATE/logs/dra-config-refusal.log api='apiVersion: resource.nvidia.com/v1beta1'
  refused() { ! config_claim "$1" "$2" | kc apply --dry-run=server -f - >"$out" 2>&1 && grep -qF "$3" "$out"; }
  wait_for 60 "the API server to enforce tessera-dra-configs" \
    refused bad-kind "{$api, kind: GpuConfg}" "kind must be GpuConfig or MigDeviceConfig"
  local bad name params says
  for bad in "bad-pct|{$api, kind: GpuConfig, sharing: {strategy: MPS, mpsConfig: {defaultActiveThreadPercentage: 0}}}|defaultActiveThreadPercentage must be an integer from 1 to 100" \
    "bad-interval|{$api, kind: GpuConfig, sharing: {strategy: TimeSlicing, timeSlicingConfig: {interval: Longest}}}|its interval is Default, Short, Medium or Long" \
    "bad-field|{$api, kind: GpuConfig, sharng: {strategy: MPS}}|its fields are apiVersion, kind and sharing" \
    "bad-limit|{$api, kind: GpuConfig, sharing: {strategy: MPS, mpsConfig: {defaultPinnedDeviceMemoryLimit: 10Gigs}}}|pinned memory limits are quantities above 0"; do
    IFS='|' read -r name params says <<<"$bad"
    refused "$name" "$params" "$says" || fail "claim $name ($params) was not refused with '$says': $(cat "$out")"
  done
  config_claim good "{$api, kind: GpuConfig, sharing: {strategy: MPS, mpsConfig: {defaultActiveThreadPercentage: 50, defaultPinnedDeviceMemoryLimit: 10Gi}}}" |
    kc apply --dry-run=server -f - >"$out" 2>&1 || fail "a claim with a good MPS config was refused: $(cat "$out")"
  config_claim other '{kind: Anything}' | sed 's/driver: gpu.nvidia.com/driver: net.example.com/' |
    kc apply --dry-run=server -f - >"$out" 2>&1 || fail "a claim with another driver's config was refused: $(cat "$out")"
  echo "  opaque configs at admission: a bad kind, thread percentage, interval, field and memory limit refused, each named; a good MPS config and another driver's admitted"
}

quickstart_claims() {
  sed "s|image: ubuntu:22.04|image: $E2E_SHELL_IMAGE|" "$REPO/third_party/nvidia-dra-driver-gpu/quickstart/$1.yaml"
}
# Each GPU's time-slice level as the simulated node records it: "LONG,DEFAULT".
sim_timeslices() {
  TESSERA_SIM=$(sim_dir) "$(sim_dir)/usr/bin/nvidia-smi" compute-policy -l | awk '{print $NF}' | paste -sd, -
}
# The GPU device nodes (/dev/nvidiaN) of a container, "0 1 ...".
gpu_device_nodes() {
  container_spec "$1" "$2" "$3" | jq -r '[.linux.devices[]?.path | select(test("^/dev/nvidia[0-9]+$")) | ltrimstr("/dev/nvidia")] | sort | join(" ")'
}
# expect_mps_client NAMESPACE POD CONTAINER: the container's CUDA client (the nbody stand-in)
# connected to its GPU's control daemon, which gave it the quickstart's 50 % of the threads and
# 10Gi pinned on its one device.
expect_mps_client() {
  local line
  wait_for 30 "$1/$2's $3 to connect to its MPS daemon" eval '[[ $(kc -n '"$1"' logs '"$2"' -c '"$3"' 2>/dev/null) == *"MPS server"* ]]'
  line=$(kc -n "$1" logs "$2" -c "$3")
  [[ $line == *"active thread percentage 50.0, pinned device memory limit 0=10240M" ]] ||
    fail "$1/$2's $3 says '$line', expected the claim's 50% of threads and 10Gi pinned (0=10240M) from the daemon"
  echo "    $3: ${line#tessera sim MPS client }"
}
pods_in() {  # pods_in NAMESPACE PHASE: how many of its pods are in PHASE
  kc -n "$1" get pods -o json | jq --arg p "$2" '[.items[] | select(.status.phase == $p)] | length'
}

scenario_dra-quickstart() {
  DRA_MIG=off deploy_dra
  wait_for 120 "tessera dra to publish whole GPUs" eval '(($(dra_slices "$NODE") == 2))'
  [[ $(sim_timeslices) == DEFAULT,DEFAULT ]] || fail "the GPUs' time-slices are '$(sim_timeslices)' before any claim"
  check_config_policy

  local one two device want
  quickstart_claims gpu-test1 | kc apply -f - >/dev/null
  wait_for 90 "gpu-test1's two pods Running" eval '(($(pods_in gpu-test1 Running) == 2))'
  one=$(gpu_device_nodes pod1 ctr gpu-test1)
  two=$(gpu_device_nodes pod2 ctr gpu-test1)
  [[ "$one,$two" == "0,1" || "$one,$two" == "1,0" ]] ||
    fail "gpu-test1's pods hold GPU device nodes '$one' and '$two', expected one GPU each, not the same"
  echo "  gpu-test1: two pods, a claim each, Running on /dev/nvidia$one and /dev/nvidia$two"
  kc delete namespace gpu-test1 --wait=true --timeout=120s >/dev/null || fail "namespace gpu-test1 did not go"

  quickstart_claims gpu-test2 | kc apply -f - >/dev/null
  wait_for 90 "gpu-test2's pod Running" eval '(($(pods_in gpu-test2 Running) == 1))'
  one=$(gpu_device_nodes pod ctr0 gpu-test2)
  two=$(gpu_device_nodes pod ctr1 gpu-test2)
  [[ $one == [01] && $two == "$one" ]] ||
    fail "gpu-test2's containers hold GPU device nodes '$one' and '$two', expected the claim's one GPU in both"
  echo "  gpu-test2: one claim, two containers of one pod, both given /dev/nvidia$one only"
  kc delete namespace gpu-test2 --wait=true --timeout=120s >/dev/null || fail "namespace gpu-test2 did not go"

  # NVIDIA's extended-resource example: a pod asking nvidia.com/gpu: 1 and no claim; the
  # scheduler makes its claim from the class gpu.nvidia.com (extendedResourceName, KEP-5004).
  sed "s|image: nvcr.io/nvidia/k8s/cuda-sample:vectoradd-cuda12.5.0|image: $E2E_SHELL_IMAGE|" \
    "$REPO/third_party/nvidia-dra-driver-gpu/extended-resources/gpu-full.yaml" | kc apply -f - >/dev/null
  local ns=extended-resource-gpu-full claim
  wait_for 90 "gpu-full-pod to run to completion" eval \
    '[[ $(kc -n '$ns' get pod gpu-full-pod -o jsonpath="{.status.phase}") == Succeeded ]]'
  claim=$(kc -n $ns get pod gpu-full-pod -o jsonpath='{.status.extendedResourceClaimStatus.resourceClaimName}')
  [[ -n $claim ]] || fail "gpu-full-pod has no extendedResourceClaimStatus: $(kc -n $ns get pod gpu-full-pod -o json | jq -c .status)"
  # The claim goes with the finished pod: what tessera prepared for it is in the driver's log.
  device=$(tessera_logs dra-driver | sed -n "s|.* prepared claim $ns/$claim ([^)]*): ||p" | tail -1) || true
  [[ $device == gpu-[01] ]] || fail "tessera prepared '$device' for gpu-full-pod's claim $claim, expected a whole GPU"
  echo "  gpu-full (nvidia.com/gpu: 1, no claim): the scheduler's claim $claim, prepared as $device; the pod ran to completion"
  kc delete namespace $ns --wait=true --timeout=120s >/dev/null || fail "namespace $ns did not go"

  quickstart_claims gpu-test6 | kc apply -f - >/dev/null
  wait_for 90 "one gpu-test6 replica Running" eval '(($(pods_in gpu-test6 Running) == 1))'
  wait_for 60 "three gpu-test6 replicas Pending, unschedulable" eval \
    '(($(kc -n gpu-test6 get pods -o json | jq "[.items[] | select(.status.phase == \"Pending\" and any(.status.conditions[]?; .reason == \"Unschedulable\"))] | length") == 3))'
  local pod nodes
  pod=$(kc -n gpu-test6 get pods --field-selector=status.phase=Running -o jsonpath='{.items[0].metadata.name}')
  nodes=$(gpu_device_nodes "$pod" ctr gpu-test6)
  [[ $nodes == 0 ]] || fail "gpu-test6's running replica holds GPU device nodes '$nodes', expected GPU 0's only"
  [[ $(sim_timeslices) == LONG,DEFAULT ]] || fail "the GPUs' time-slices are '$(sim_timeslices)', expected LONG on GPU 0"
  echo "  gpu-test6 (interval: Long): 1 replica Running on GPU 0 (time-slice LONG), 3 Pending (no A100 with index 2, 4 or 6)"
  kc delete namespace gpu-test6 --wait=true --timeout=120s >/dev/null || fail "namespace gpu-test6 did not go"
  wait_for 60 "GPU 0's time-slice back to DEFAULT" eval '[[ $(sim_timeslices) == DEFAULT,DEFAULT ]]'
  echo "  gpu-test6 deleted: GPU 0's time-slice back to DEFAULT"

  quickstart_claims gpu-test3 | kc apply -f - >/dev/null
  wait_for 90 "gpu-test3's two pods Running" eval '(($(pods_in gpu-test3 Running) == 2))'
  device=$(kc -n gpu-test3 get resourceclaim single-gpu -o jsonpath='{.status.allocation.devices.results[0].device}')
  [[ $device == gpu-[01] ]] || fail "gpu-test3's claim was given '$device', expected a whole GPU"
  one=$(gpu_device_nodes pod1 ctr gpu-test3)
  two=$(gpu_device_nodes pod2 ctr gpu-test3)
  [[ $one == "${device#gpu-}" && $two == "$one" ]] ||
    fail "gpu-test3's pods hold GPU device nodes '$one' and '$two', expected ${device#gpu-} in both"
  echo "  gpu-test3: one claim ($device), two pods Running, both given /dev/nvidia${device#gpu-} only"
  kc delete namespace gpu-test3 --wait=true --timeout=120s >/dev/null || fail "namespace gpu-test3 did not go"

  kc apply -f "$REPO/third_party/nvidia-dra-driver-gpu/quickstart/gpu-test-mps.yaml" >/dev/null
  wait_for 90 "gpu-test-mps's pod Running" eval '(($(pods_in gpu-test-mps Running) == 1))'
  one=$(gpu_device_nodes test-pod mps-ctr0 gpu-test-mps)
  two=$(gpu_device_nodes test-pod mps-ctr1 gpu-test-mps)
  [[ $one == [01] && $two == "$one" ]] ||
    fail "gpu-test-mps's containers hold GPU device nodes '$one' and '$two', expected the claim's one GPU in both"
  echo "  gpu-test-mps: one claim, two containers of one pod on /dev/nvidia$one through MPS:"
  expect_mps_client gpu-test-mps test-pod mps-ctr0
  expect_mps_client gpu-test-mps test-pod mps-ctr1
  kc delete namespace gpu-test-mps --wait=true --timeout=120s >/dev/null || fail "namespace gpu-test-mps did not go"

  kc apply -f "$REPO/third_party/nvidia-dra-driver-gpu/quickstart/gpu-test5.yaml" >/dev/null
  wait_for 90 "gpu-test5's pod Running" eval '(($(pods_in gpu-test5 Running) == 1))'
  local ts0 ts1 mps0 mps1
  ts0=$(gpu_device_nodes pod0 ts-ctr0 gpu-test5)
  ts1=$(gpu_device_nodes pod0 ts-ctr1 gpu-test5)
  mps0=$(gpu_device_nodes pod0 mps-ctr0 gpu-test5)
  mps1=$(gpu_device_nodes pod0 mps-ctr1 gpu-test5)
  [[ $ts0 == [01] && $ts1 == "$ts0" && $mps0 == [01] && $mps1 == "$mps0" && $ts0 != "$mps0" ]] ||
    fail "gpu-test5's containers hold GPU device nodes ts '$ts0' '$ts1', mps '$mps0' '$mps1': expected each pair on one GPU, the pairs on two"
  want=$([[ $ts0 == 0 ]] && echo LONG,DEFAULT || echo DEFAULT,LONG)
  [[ $(sim_timeslices) == "$want" ]] || fail "the GPUs' time-slices are '$(sim_timeslices)', expected $want (time-sliced GPU $ts0)"
  echo "  gpu-test5: one claim of two GPUs; ts-ctr0 and ts-ctr1 on /dev/nvidia$ts0 (time-slice LONG), the MPS pair on /dev/nvidia$mps0:"
  expect_mps_client gpu-test5 pod0 mps-ctr0
  expect_mps_client gpu-test5 pod0 mps-ctr1
  kc delete namespace gpu-test5 --wait=true --timeout=120s >/dev/null || fail "namespace gpu-test5 did not go"
  wait_for 60 "the time-slice back to DEFAULT" eval '[[ $(sim_timeslices) == DEFAULT,DEFAULT ]]'

  cat <<EOF | kc apply -f - >/dev/null
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: ts-long, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu.nvidia.com}
    config:
    - requests: ["gpu"]
      opaque:
        driver: gpu.nvidia.com
        parameters:
          apiVersion: resource.nvidia.com/v1beta1
          kind: GpuConfig
          sharing: {strategy: TimeSlicing, timeSlicingConfig: {interval: Long}}
EOF
  local i
  want=DEFAULT,DEFAULT
  for i in 1 2; do
    cat <<EOF | kc apply -f - >/dev/null
apiVersion: v1
kind: Pod
metadata: {name: ts-long-$i, namespace: default, labels: {app: e2e-consumer}}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  securityContext: {seccompProfile: {type: RuntimeDefault}}
  resourceClaims: [{name: gpu, resourceClaimName: ts-long}]
  containers:
  - name: ctr
    image: $E2E_SHELL_IMAGE
    command: ["sleep", "infinity"]
    securityContext: {allowPrivilegeEscalation: false}
    resources: {claims: [{name: gpu}]}
EOF
  done
  for i in 1 2; do wait_for 90 "pod ts-long-$i Running" is_running "ts-long-$i"; done
  device=$(kc get resourceclaim ts-long -o jsonpath='{.status.allocation.devices.results[0].device}')
  [[ $device == gpu-0 ]] && want=LONG,DEFAULT
  [[ $device == gpu-1 ]] && want=DEFAULT,LONG
  [[ $(sim_timeslices) == "$want" && $want != DEFAULT,DEFAULT ]] ||
    fail "the GPUs' time-slices are '$(sim_timeslices)', expected $want (the claim has '$device')"
  echo "  one claim with interval Long ($device), two pods Running; the GPUs' time-slices: $want"
  remove_consumers
  kc delete resourceclaim ts-long --wait=true >/dev/null
  wait_for 60 "the time-slice back to DEFAULT" eval '[[ $(sim_timeslices) == DEFAULT,DEFAULT ]]'
}
