# XID 79 injected on GPU 0: allocatable drops to 4 (GPU 0's four MIG
# devices), then returns to 8 after the recovery period.
scenario_xid-79() {
  local t
  t=$(now_ms)
  "$TESSERA" sim event "$(sim_dir)" --gpu 0 --xid 79 >/dev/null
  expect_allocatable 15 nvidia.com/mig-1g.20gb 4
  echo "  XID 79 on GPU 0: allocatable 8 -> 4 in $(($(now_ms) - t)) ms"
  t=$(now_ms)
  expect_allocatable 30 nvidia.com/mig-1g.20gb 8
  echo "  no further event: allocatable back to 8 in $(($(now_ms) - t)) ms (recovery period 5 s)"
}
