# The kubelet's pod-resources API v1, read by tessera pods, agrees with each
# running pod's environment.
scenario_pod-resources() {
  local listed i pod env uuid got
  listed=$(pod_resources) || fail "tessera pods could not list the kubelet's pod resources"
  for pod in $(kc get pods -l app=e2e-consumer --field-selector=status.phase=Running -o jsonpath='{.items[*].metadata.name}'); do
    env=$(container_env "$pod")
    uuid=$(env_var "$env" NVIDIA_VISIBLE_DEVICES)
    got=$(jq -r --arg p "$pod" '.[] | select(.namespace == "default" and .pod == $p and .container == "cuda"
            and .resource == "nvidia.com/mig-1g.20gb") | .devices[]' <<<"$listed")
    [[ -n $uuid && $got == "$uuid" ]] || fail "pod-resources lists '$got' for $pod, its env says '$uuid'"
    echo "  default/$pod cuda nvidia.com/mig-1g.20gb [$got]"
  done
  i=$(jq '[.[] | select(.namespace == "default") | .pod] | unique | length' <<<"$listed")
  [[ $i == "$(want 8)" ]] || fail "pod-resources lists $i pods in default, expected 8"
}
