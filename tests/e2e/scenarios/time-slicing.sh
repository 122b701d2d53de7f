# The time-slicing overlay (MIG disabled, 4 replicas): capacity
# nvidia.com/gpu: 8; three pods get replicas <uuid>::<n> (as pod-resources
# lists them) of a GPU of the node, its device nodes (tessera's CDI spec) and
# TESSERA_DEVICE_MEMORY_LIMIT_0 = a quarter of the memory the driver says is
# usable (80 GiB less what it reserves), and NVIDIA_GPU_MEMORY_LIMIT the same
# in whole MiB (what NVIDIA's toolkit hook reads from the runtime spec).
scenario_time-slicing() {
  remove_consumers
  deploy_overlay time-slicing
  expect_resource 120 nvidia.com/gpu 8
  echo "  capacity nvidia.com/gpu: $(node_field capacity nvidia.com/gpu)"
  local i env gpus quarter listed uuid limit ids why
  gpus=$(inventory | jq -r '.gpus[].uuid')
  quarter=$(inventory | jq -r '.gpus[0].memory | (.total_bytes - .reserved_bytes) / 4 | floor')
  ((quarter > 0 && quarter < 85899345920 / 4)) || fail "the driver reports no reserved memory (quarter of usable: $quarter)"
  for i in 0 1 2; do pod "ts-$i" nvidia.com/gpu 1; echo ---; done | kc apply -f - >/dev/null
  three_running() { [[ $(pods_in_phase Running) == 3 ]]; }
  wait_for 90 "3 time-sliced pods Running" three_running
  listed=$(pod_resources)
  for i in 0 1 2; do
    env=$(container_env "ts-$i")
    ids=$(jq -r --arg p "ts-$i" '.[] | select(.pod == $p and .resource == "nvidia.com/gpu") | .devices[]' <<<"$listed")
    uuid=${ids%::*}
    limit=$(env_var "$env" TESSERA_DEVICE_MEMORY_LIMIT_0)
    [[ $uuid == GPU-* ]] && grep -qxF "$uuid" <<<"$gpus" || fail "ts-$i: its device '$ids' (pod-resources) is not a replica of a GPU of the node"
    why=$(container_has_devices "ts-$i" "$ids") || fail "ts-$i: $why"
    [[ $limit == "$quarter" ]] || fail "ts-$i: TESSERA_DEVICE_MEMORY_LIMIT_0='$limit', expected $quarter (a quarter of the usable memory)"
    # NVIDIA's toolkit hook reads its variable from this same runtime spec: the quota in whole MiB.
    [[ $(env_var "$env" NVIDIA_GPU_MEMORY_LIMIT) == $((quarter >> 20)) ]] ||
      fail "ts-$i: NVIDIA_GPU_MEMORY_LIMIT='$(env_var "$env" NVIDIA_GPU_MEMORY_LIMIT)', expected $((quarter >> 20)) (the quota in whole MiB)"
    [[ $ids =~ ^"$uuid"::[0-9]+$ ]] || fail "ts-$i: pod-resources lists '$ids', expected one replica $uuid::<n>"
    echo "  ts-$i: device $ids, its nodes $(cdi_device_nodes "$ids" | paste -sd' ' -), TESSERA_DEVICE_MEMORY_LIMIT_0=$limit"
  done
}
