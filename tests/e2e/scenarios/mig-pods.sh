# Nine pods ask for one nvidia.com/mig-1g.20gb each: eight run, each holding
# (pod-resources) a distinct MIG UUID that tessera inventory lists, whose
# device nodes (its GPU's and its two MIG capabilities, from tessera's CDI
# spec) are in the runtime spec containerd made; the ninth stays Pending with
# Insufficient nvidia.com/mig-1g.20gb.
scenario_mig-pods() {
  local i
  for i in $(seq 0 8); do pod "mig-$i" nvidia.com/mig-1g.20gb 1; echo ---; done | kc apply -f - >/dev/null
  running_eight() { [[ $(pods_in_phase Running) == 8 && $(pods_in_phase Pending) == 1 ]]; }
  wait_for 120 "8 pods Running and 1 Pending" running_eight
  local pending uuids=() uuid known why
  pending=$(kc get pods -l app=e2e-consumer --field-selector=status.phase=Pending -o jsonpath='{.items[0].metadata.name}')
  wait_unschedulable 30 "$pending" 'Insufficient nvidia.com/mig-1g.20gb'
  echo "  $pending: Pending (Insufficient nvidia.com/mig-1g.20gb)"
  known=$(inventory | jq -r '.gpus[].mig_devices[].uuid')
  for i in $(seq 0 8); do
    [[ mig-$i == "$pending" ]] && continue
    uuid=$(held_uuid "mig-$i")
    [[ $uuid == MIG-* && $uuid != *,* ]] || fail "mig-$i: holds '$uuid' (pod-resources), not one MIG UUID"
    grep -qxF "$uuid" <<<"$known" || fail "mig-$i: $uuid is not a MIG device in tessera inventory"
    why=$(container_has_devices "mig-$i" "$uuid") || fail "mig-$i: $why"
    uuids+=("$uuid")
    echo "  mig-$i: $uuid, device nodes $(cdi_device_nodes "$uuid" | paste -sd' ' -)"
  done
  local distinct
  distinct=$(printf '%s\n' "${uuids[@]}" | sort -u | wc -l)
  [[ $distinct == "$(want 8)" ]] || fail "$distinct distinct MIG UUIDs among 8 pods"
}
