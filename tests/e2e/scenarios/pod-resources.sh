# The kubelet's pod-resources API v1, read by tessera pods, agrees with what
# the runtime gave each running pod: the one MIG device it lists for the
# pod's container has, in the runtime spec containerd made, exactly the
# device nodes tessera's CDI spec gives that device.
scenario_pod-resources() {
  local listed i pod got why
  listed=$(pod_resources) || fail "tessera pods could not list the kubelet's pod resources"
  for pod in $(kc get pods -l app=e2e-consumer --field-selector=status.phase=Running -o jsonpath='{.items[*].metadata.name}'); do
    got=$(jq -r --arg p "$pod" '.[] | select(.namespace == "default" and .pod == $p and .container == "cuda"
            and .resource == "nvidia.com/mig-1g.20gb") | .devices[]' <<<"$listed")
    [[ $got == MIG-* && $got != *$'\n'* ]] || fail "pod-resources lists '$got' for $pod, expected one MIG device"
    why=$(container_has_devices "$pod" "$got") || fail "pod-resources lists $got for $pod, but $why"
    echo "  default/$pod cuda nvidia.com/mig-1g.20gb [$got]: $(cdi_device_nodes "$got" | paste -sd' ' -) in its runtime spec"
  done
  i=$(jq '[.[] | select(.namespace == "default") | .pod] | unique | length' <<<"$listed")
  [[ $i == "$(want 8)" ]] || fail "pod-resources lists $i pods in default, expected 8"
}
