# Three 1g.10gb, then a 4g.40gb (it has one placement, at 0), with the other
# GPU taken whole by a 7g.80gb. First fit by start puts the 1g at 0, 1, 2 and
# strands the 4g; tessera's order puts them at 6, 5, 4 and the 4g runs.
packing_sequence() {
  profile_pod big 7g.80gb | kc apply -f - >/dev/null
  wait_for 90 "pod big Running" is_running big
  local i
  for i in 1 2 3; do
    profile_pod "small-$i" 1g.10gb | kc apply -f - >/dev/null
    wait_for 90 "pod small-$i Running" is_running "small-$i"
  done
  profile_pod four 4g.40gb | kc apply -f - >/dev/null
}

scenario_dra-packing() {
  deploy_dra --set dra.order=by-start
  packing_sequence
  wait_unschedulable 60 four
  echo "  by-start: 1g.10gb at $(sim_instances | tr ' ' '\n' | grep ':19@' | tr '\n' ' ')-> the 4g.40gb stays Pending with 4 slices free"
  remove_dra_consumers
  wait_for 60 "every instance destroyed" eval '[[ -z $(sim_instances) ]]'

  deploy_dra
  packing_sequence
  wait_for 90 "pod four Running (tessera's order)" is_running four
  local placed g
  placed=$(sim_instances)
  # The GPU the 7g.80gb (profile 0) did not take holds the rest.
  if [[ $placed == *"0:0@0"* ]]; then g=1; else g=0; fi
  [[ $placed == *"$g:19@4"* && $placed == *"$g:19@5"* && $placed == *"$g:19@6"* && $placed == *"$g:5@0"* ]] ||
    fail "the GPUs hold '$placed', expected the 1g.10gb at 4, 5, 6 and the 4g.40gb at 0 on GPU $g"
  echo "  tessera: $placed -> every pod Running"
  remove_dra_consumers
}
