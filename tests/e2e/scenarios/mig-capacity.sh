# The init container applies all-1g.20gb; with migStrategy mixed the Node's
# capacity and allocatable show nvidia.com/mig-1g.20gb: 8, and tessera
# inventory lists 8 GPU instances of 1g.20gb.
scenario_mig-capacity() {
  deploy_overlay mig-mixed
  expect_resource 120 nvidia.com/mig-1g.20gb 8
  local n
  n=$(node_field capacity nvidia.com/mig-1g.20gb)
  [[ $n == "$(want 8)" ]] || fail "node $NODE has nvidia.com/mig-1g.20gb capacity $n, expected $(want 8)"
  n=$(inventory | jq '[.gpus[].gpu_instances[] | select(.profile == "1g.20gb")] | length')
  [[ $n == 8 ]] || fail "tessera inventory lists $n 1g.20gb GPU instances, expected 8"
  echo "  capacity nvidia.com/mig-1g.20gb: $(node_field capacity nvidia.com/mig-1g.20gb), allocatable $(node_field allocatable nvidia.com/mig-1g.20gb)"
}
