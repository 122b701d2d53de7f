# tessera's DRA driver on the node (lib/dra.sh): ResourceSlices with one
# counter set per GPU listing every MIG placement, the stock scheduler
# choosing a placement that does not exist yet, tessera cutting exactly it at
# NodePrepareResources and destroying it at NodeUnprepareResources; a
# prioritized list (firstAvailable) served by its second choice.
scenario_dra-mig() {
  deploy_dra
  local slices
  slices=$(dra_slices "$NODE")
  # Two A100-80GB in MIG mode: 25 placements each (7 + 7 media + 4 + 3 + 2 + 1 + 1), no whole GPU.
  [[ $slices == "$(want 50)" ]] || fail "$NODE's ResourceSlices list $slices devices, expected 50 (25 MIG placements per A100)"
  [[ $(kc get resourceslices -o json | jq '[.items[] | select(.spec.nodeName == "'"$NODE"'") | (.spec.sharedCounters // [])[]] | length') == 2 ]] ||
    fail "expected one counter set per GPU"
  echo "  $NODE: $slices devices in its slices, one counter set per GPU"

  profile_pod small 1g.10gb | kc apply -f - >/dev/null
  wait_for 90 "pod small Running" is_running small
  local device instances seen
  device=$(claim_device small)
  instances=$(sim_instances)
  # tessera's order: a small profile from the end of the GPU (start 6), never where a 4g or a 3g would go.
  [[ $device == gpu-0-mig-1g10gb-19-6 ]] || fail "the scheduler chose $device, expected gpu-0-mig-1g10gb-19-6 (listed first)"
  [[ $instances == "0:19@6" ]] || fail "the simulated GPUs hold '$instances', expected exactly 0:19@6 (a 1g.10gb at 6)"
  seen=$(cdi_devices_in small)
  [[ $seen == *"nvidia0 "* && $seen != *"nvidia1 "* && $(grep -o 'nvidia-caps/nvidia-cap[0-9]*' <<<"$seen" | wc -l) == 2 ]] ||
    fail "pod small sees /dev '$seen', expected nvidia0 and its instance's two capability nodes, not nvidia1"
  local uid spec
  uid=$(kc get resourceclaims -o json | jq -r '.items[0].metadata.uid')
  spec=$(node_dir "$NODE")/cdi-run/k8s.gpu.nvidia.com-claim_$uid.json
  [[ -f $spec ]] || fail "no CDI spec $spec for the claim"
  echo "  pod small: claim on $device, cut as $instances, /dev $seen"
  kc delete pod small --wait=true >/dev/null
  wait_for 60 "the 1g.10gb to be destroyed" eval '[[ -z $(sim_instances) ]]'
  wait_for 30 "the claim's CDI spec to go" eval "[[ ! -f $spec ]]"
  echo "  pod deleted: the instance destroyed, its CDI spec removed"
  # The prioritized list (firstAvailable, GA in 1.36): a whole GPU first, which a node in MIG mode
  # does not offer, then a 1g.10gb, which tessera cuts for the subrequest "gpu/small".
  { cat <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: first-available, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        firstAvailable:
        - {name: whole, deviceClassName: gpu.nvidia.com}
        - name: small
          deviceClassName: mig.nvidia.com
          selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'"}}]
---
EOF
    dra_template_pod first-available; } | kc apply -f - >/dev/null
  wait_for 90 "pod first-available Running" is_running first-available
  local request
  request=$(kc get resourceclaims -o json | jq -r '.items[] | select((.metadata.ownerReferences // [])[0].name == "first-available") | .status.allocation.devices.results[0].request')
  device=$(claim_device first-available)
  [[ $request == gpu/small && $device == gpu-[01]-mig-1g10gb-19-* ]] ||
    fail "the first-available claim got '$device' for request '$request', expected a 1g.10gb for gpu/small"
  [[ $(sim_instances) == *":19@"* ]] || fail "no 1g.10gb was cut for the first-available claim: '$(sim_instances)'"
  echo "  firstAvailable (whole GPU, else a 1g.10gb): $device for request $request, cut as $(sim_instances)"
  kc delete pod first-available --wait=true >/dev/null
  kc delete resourceclaimtemplate first-available --wait=true >/dev/null
  wait_for 60 "the first-available instance to be destroyed" eval '[[ -z $(sim_instances) ]]'

  local metrics series health restarts
  # /healthz (the chart's liveness probe) answers ok only while both kubelet sockets answer.
  health=$(dra_get /healthz) || fail "the DRA driver's /healthz does not answer 200 on port 9401 (no answer, or 503)"
  [[ $health == ok ]] || fail "the DRA driver's /healthz says '$health', expected ok"
  restarts=$(kc -n tessera get pods -l app.kubernetes.io/name=tessera --field-selector "spec.nodeName=$NODE" \
    -o jsonpath='{.items[0].status.containerStatuses[*].restartCount}')
  [[ $restarts =~ ^[0\ ]+$ ]] || fail "a container of the DRA driver's pod restarted (restart counts: $restarts)"
  metrics=$(dra_metrics) || fail "the DRA driver's /metrics does not answer on port 9401"
  # At least one of each (the kubelet may repeat a prepare, which answers from the checkpoint), none prepared now.
  for series in 'tessera_dra_prepare_claims_total{result="ok"}' 'tessera_dra_unprepare_claims_total{result="ok"}' \
                'tessera_dra_mig_instances_total{action="cut"}' 'tessera_dra_mig_instances_total{action="destroyed"}'; do
    awk -v s="$series" '$1 == s && $2 >= 1 {found = 1} END {exit !found}' <<<"$metrics" ||
      fail "the DRA driver's /metrics has no $series of 1 or more:
$(grep '^tessera_dra' <<<"$metrics" | grep -v _bucket)"
  done
  grep -qxF 'tessera_dra_prepared_claims 0' <<<"$metrics" || fail "the DRA driver's /metrics counts claims still prepared"
  # 1.36 keeps the partitionable fields: the slices offer placements, and are in sync.
  for series in 'tessera_dra_partitionable_devices 1' 'tessera_dra_resourceslice_in_sync 1'; do
    grep -qxF "$series" <<<"$metrics" || fail "the DRA driver's /metrics does not say $series:
$(grep '^tessera_dra_\(partitionable\|resourceslice\)' <<<"$metrics")"
  done
  echo "  /metrics: prepares, unprepares, an instance cut and destroyed counted; no claim prepared now; slices partitionable, in sync"
  remove_dra_consumers
}
