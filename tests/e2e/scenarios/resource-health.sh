# The Pod's own record of its devices' health (status.containerStatuses[]
# .allocatedResourcesStatus, KEP-4680, beta and on by default in 1.36): XID 79
# on GPU 0 makes each running pod on a GPU 0 MIG device list that device
# Unhealthy, while pods on GPU 1 keep theirs Healthy; once the recovery period
# passes, they read Healthy again.
health_of() {  # health_of POD DEVICE: the health its status gives DEVICE
  kc get pod "$1" -o json | jq -r --arg d "$2" \
    '[.status.containerStatuses[].allocatedResourcesStatus[]?.resources[]? | select(.resourceID == $d) | .health] | first // ""'
}

scenario_resource-health() {
  local pods p env uuid gpu0 on0=() on1=() t
  gpu0=$(inventory | jq -r '.gpus[0].mig_devices[].uuid')
  pods=$(kc get pods -l app=e2e-consumer --field-selector=status.phase=Running -o jsonpath='{.items[*].metadata.name}')
  local -A device_of=()
  for p in $pods; do
    uuid=$(held_uuid "$p")
    device_of[$p]=$uuid
    if grep -qxF "$uuid" <<<"$gpu0"; then on0+=("$p"); else on1+=("$p"); fi
  done
  ((${#on0[@]} > 0 && ${#on1[@]} > 0)) || fail "expected running pods on both GPUs (GPU 0: ${#on0[@]}, GPU 1: ${#on1[@]})"
  for p in $pods; do
    wait_for 30 "$p's status to list ${device_of[$p]} Healthy" eval '[[ $(health_of "$p" "${device_of[$p]}") == Healthy ]]'
  done
  t=$(now_ms)
  "$TESSERA" sim event "$(sim_dir)" --gpu 0 --xid 79 >/dev/null
  for p in "${on0[@]}"; do
    wait_for 30 "$p's status to list ${device_of[$p]} Unhealthy" eval '[[ $(health_of "$p" "${device_of[$p]}") == Unhealthy ]]'
  done
  echo "  XID 79 on GPU 0: ${#on0[@]} pods list their device Unhealthy in their status after $(($(now_ms) - t)) ms"
  local expected=Healthy
  [[ ${TESSERA_E2E_BREAK:-} != "$current" ]] || expected=Unhealthy
  for p in "${on1[@]}"; do
    [[ $(health_of "$p" "${device_of[$p]}") == "$expected" ]] ||
      fail "$p (GPU 1) lists ${device_of[$p]} as '$(health_of "$p" "${device_of[$p]}")', expected $expected"
  done
  echo "  ${#on1[@]} pods on GPU 1 still list theirs Healthy"
  t=$(now_ms)
  for p in "${on0[@]}"; do
    wait_for 60 "$p's status to list ${device_of[$p]} Healthy again" eval '[[ $(health_of "$p" "${device_of[$p]}") == Healthy ]]'
  done
  echo "  after the recovery period: Healthy again in $(($(now_ms) - t)) ms"
}
