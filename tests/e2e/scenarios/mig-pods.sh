# Nine pods ask for one nvidia.com/mig-1g.20gb each: eight run, each
# container's NVIDIA_VISIBLE_DEVICES (in the runtime spec containerd made) is
# a distinct MIG UUID that tessera inventory lists; the ninth stays Pending
# with Insufficient nvidia.com/mig-1g.20gb.
scenario_mig-pods() {
  local i
  for i in $(seq 0 8); do pod "mig-$i" nvidia.com/mig-1g.20gb 1; echo ---; done | kc apply -f - >/dev/null
  running_eight() { [[ $(pods_in_phase Running) == 8 && $(pods_in_phase Pending) == 1 ]]; }
  wait_for 120 "8 pods Running and 1 Pending" running_eight
  local pending uuids=() env uuid known
  pending=$(kc get pods -l app=e2e-consumer --field-selector=status.phase=Pending -o jsonpath='{.items[0].metadata.name}')
  scheduling_refused() {
    kc get events --field-selector "involvedObject.name=$pending,reason=FailedScheduling" -o jsonpath='{.items[*].message}' |
      grep -q 'Insufficient nvidia.com/mig-1g.20gb'
  }
  wait_for 30 "a FailedScheduling Event for $pending naming nvidia.com/mig-1g.20gb" scheduling_refused
  echo "  $pending: Pending (Insufficient nvidia.com/mig-1g.20gb)"
  known=$(inventory | jq -r '.gpus[].mig_devices[].uuid')
  for i in $(seq 0 8); do
    [[ mig-$i == "$pending" ]] && continue
    env=$(container_env "mig-$i")
    uuid=$(env_var "$env" NVIDIA_VISIBLE_DEVICES)
    [[ $uuid == MIG-* ]] || fail "mig-$i: NVIDIA_VISIBLE_DEVICES='$uuid' is not one MIG UUID"
    grep -qxF "$uuid" <<<"$known" || fail "mig-$i: $uuid is not a MIG device in tessera inventory"
    uuids+=("$uuid")
    echo "  mig-$i: NVIDIA_VISIBLE_DEVICES=$uuid"
  done
  local distinct
  distinct=$(printf '%s\n' "${uuids[@]}" | sort -u | wc -l)
  [[ $distinct == "$(want 8)" ]] || fail "$distinct distinct MIG UUIDs among 8 pods"
}
