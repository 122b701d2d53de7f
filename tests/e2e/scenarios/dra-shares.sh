# Memory shares the scheduler counts (dra.memoryShares): one claim takes a
# GPU whole, four 20 GiB claims share the other, a fifth the scheduler
# refuses; a share's container reads its quota in a read-only limits file.
# Then with MIG on: three 20 GiB claims on a 7g.80gb placement all run on the
# one instance the first cut (the allocator charges none of a shared MIG
# device's multiprocessors or engines), and the instance goes with the last.
# Last NVIDIA's counted shares (dra.consumableShares=2): claims that ask for no
# memory, two per GPU, the fifth Pending, and no quota for memory not asked for.
scenario_dra-shares() {
  # Whole GPUs: MIG off, memory shares on.
  DRA_MIG=off deploy_dra --set dra.memoryShares=true
  wait_for 120 "tessera dra to publish whole GPUs" eval '(($(dra_slices "$NODE") == 2))'
  # One GPU taken whole (a claim asking for no memory takes all of it), four 20 GiB shares of the other.
  dra_claim_pod whole "" gpu.nvidia.com | kc apply -f - >/dev/null
  wait_for 90 "pod whole Running" is_running whole
  local i
  for i in 1 2 3 4; do
    dra_claim_pod "share-$i" "" gpu.nvidia.com 20Gi | kc apply -f - >/dev/null
  done
  for i in 1 2 3 4; do wait_for 90 "pod share-$i Running" is_running "share-$i"; done
  dra_claim_pod share-5 "" gpu.nvidia.com 20Gi | kc apply -f - >/dev/null
  wait_unschedulable 60 share-5
  local limits
  limits=$(kc exec share-1 -c cuda -- cat /run/tessera/limits) || fail "share-1 has no /run/tessera/limits"
  [[ $limits == *" 21474836480"* ]] || fail "share-1's limits file says '$limits', expected a 21474836480-byte quota"
  kc exec share-1 -c cuda -- sh -c 'echo x > /run/tessera/limits' 2>/dev/null && fail "share-1 could write its limits file"
  echo "  4 x 20Gi shares Running on one GPU, the fifth Pending; share-1's quota file (read-only): $(tr '\n' ' ' <<<"$limits")"
  remove_dra_consumers

  # Shares of one MIG instance.
  deploy_dra --set dra.memoryShares=true
  local sel="device.attributes['gpu.nvidia.com'].profile == '7g.80gb'" devices instances
  for i in 1 2 3; do
    dra_claim_pod "mig-share-$i" "$sel" mig.nvidia.com 20Gi | kc apply -f - >/dev/null
  done
  for i in 1 2 3; do wait_for 90 "pod mig-share-$i Running" is_running "mig-share-$i"; done
  devices=$(for i in 1 2 3; do claim_device "mig-share-$i"; done | sort -u | paste -sd' ' -)
  instances=$(sim_instances)
  [[ $devices == gpu-?-mig-7g80gb-0-0 ]] || fail "the three 20Gi claims were given '$devices', expected one 7g.80gb placement"
  [[ $instances == "${devices:4:1}:0@0" ]] || fail "the simulated GPUs hold '$instances', expected exactly one 7g.80gb (${devices:4:1}:0@0)"
  echo "  3 x 20Gi claims Running on $devices, one instance ($instances)"
  kc delete pod mig-share-1 mig-share-2 --wait=true >/dev/null
  [[ $(sim_instances) == "$instances" ]] || fail "the 7g.80gb went with two of its three claims: '$(sim_instances)'"
  kc delete pod mig-share-3 --wait=true >/dev/null
  wait_for 60 "the 7g.80gb to be destroyed with its last claim" eval '[[ -z $(sim_instances) ]]'
  echo "  two claims gone: the instance stays; the last gone: destroyed"
  remove_dra_consumers

  # NVIDIA's counted shares: two per GPU, claims that ask for nothing.
  DRA_MIG=off deploy_dra --set dra.consumableShares=2
  wait_for 120 "tessera dra to publish whole GPUs" eval '(($(dra_slices "$NODE") == 2))'
  for i in 1 2 3 4; do
    dra_claim_pod "counted-$i" "" gpu.nvidia.com | kc apply -f - >/dev/null
  done
  for i in 1 2 3 4; do wait_for 90 "pod counted-$i Running" is_running "counted-$i"; done
  devices=$(for i in 1 2 3 4; do claim_device "counted-$i"; done | sort | uniq -c | awk '{print $1}' | paste -sd' ' -)
  [[ $devices == "2 2" ]] || fail "the four counted shares landed $devices per GPU, expected 2 and 2"
  dra_claim_pod counted-5 "" gpu.nvidia.com | kc apply -f - >/dev/null
  wait_unschedulable 60 counted-5
  kc exec counted-1 -c cuda -- test -e /run/tessera/limits 2>/dev/null && fail "counted-1 asked for no memory but has a quota"
  echo "  counted shares (2 per GPU): 4 claims Running, 2 per GPU, the fifth Pending; no quota without memory asked"
  remove_dra_consumers
}
