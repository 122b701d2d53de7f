# An upgrade of tessera while an MPS client runs (docs/design-mps.md,
# "Daemons that outlive the agent"). A pod whose one process is the
# simulator's CUDA client (nvidia-cuda-mps-control --tessera-sim-client, in
# tessera's image) holds an MPS share and stays connected to its GPU's daemon.
# `helm upgrade` of the release with a new value (logLevel debug) changes both
# DaemonSets' pod templates, as a new release does: tessera's rolls
# (RollingUpdate), tessera-mps-host's pod stays (OnDelete). The client keeps running (no restart, the same connection in the
# daemon's own record), its daemon keeps its pid, and the new plugin adopts
# the daemons. Then the other GPU's daemon is SIGKILLed from the host: the
# kubelet's own log times its shares Unhealthy (under 100 ms after the kill)
# and Healthy again once tessera-mps-host has restarted it.
KUBELET_LOG=
# mps_client_pod NAME RESOURCE: one MPS share, held by the simulator's CUDA
# client; confined as the chart's share-isolation policy asks.
mps_client_pod() {
  cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default, labels: {app: e2e-consumer}}
spec:
  nodeSelector: {kubernetes.io/hostname: $NODE}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  # A client that loses its daemon exits 1: the pod fails rather than restarts.
  restartPolicy: Never
  securityContext: {seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: cuda
    image: $TESSERA_IMAGE
    imagePullPolicy: Never
    command: ["$IMAGE_MPS_CONTROL", "--tessera-sim-client"]
    securityContext: {allowPrivilegeEscalation: false}
    resources: {limits: {$2: 1}}
EOF
}
# mps_daemon_host_pid UUID: the pid, on the host, of UUID's control daemon
# (a process of the node's pods, `nvidia-cuda-mps-control -f`, for that GPU).
mps_daemon_host_pid() {
  local pid
  for pid in $(node_pod_pids "$NODE"); do
    [[ $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) == *"nvidia-cuda-mps-control -f "* ]] || continue
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qxF "CUDA_VISIBLE_DEVICES=$1" && { echo "$pid"; return 0; }
  done
  return 1
}
# klog_ms LINE: epoch milliseconds of a kubelet log line ("I1202 03:20:01.123456 ...", local time).
klog_ms() {
  local mmdd=${1:1:4} time
  time=$(awk '{print $2}' <<<"$1")
  echo $(($(date -d "$(date +%Y)-${mmdd:0:2}-${mmdd:2:2} $time" +%s%N) / 1000000))
}
# kubelet_update_after LINE RESOURCE HEALTHY: the first of the kubelet's
# "Processed device updates" lines after line LINE of its log for RESOURCE
# with HEALTHY healthy devices, prefixed with its line number.
kubelet_update_after() {
  local hit
  hit=$(tail -n +$(($1 + 1)) "$KUBELET_LOG" |
    grep -n -m1 -E "Processed device updates for resource.*resourceName=\"$2\".*healthyCount=$3( |$)" || true)
  [[ -n $hit ]] || return 1
  echo "$((${hit%%:*} + $1)):${hit#*:}"
}
pod_uid() { kc -n "$1" get pod "$2" -o jsonpath='{.metadata.uid}'; }
client_state() { jq -c --argjson id "$2" '.clients[] | select(.id == $id)' "$(mps_state "$1")"; }

scenario_mps-upgrade() {
  KUBELET_LOG=$E2E_STATE/logs/node-$NODE-kubelet.log
  local resource replicas gpus total
  read -r resource replicas < <(mps_share) || true
  [[ -n $resource && $replicas -gt 0 ]] || fail "cannot read the mps overlay's resource and replicas"
  remove_consumers
  # The Node's allocatable may still be the previous plugin's (the mps
  # scenario's): wait for this deployment's own report of healthy shares.
  local from
  from=$(wc -l <"$KUBELET_LOG")
  deploy_overlay mps
  gpus=$(inventory | jq -r '.gpus[].uuid')
  total=$(($(wc -l <<<"$gpus") * replicas))
  expect_resource 120 "$resource" "$total"
  all_healthy() { kubelet_update_after "$from" "$resource" "$total" >/dev/null; }
  wait_for 60 "the kubelet to see all $total $resource Healthy" all_healthy
  wait_for 60 "tessera-mps-host Running on $NODE" mps_host_running
  local uuid
  for uuid in $gpus; do wait_for 30 "the MPS daemon of $uuid" mps_daemon_alive "$uuid"; done

  # The client: Running, connected to its GPU's daemon.
  mps_client_pod mps-client "$resource" | kc apply -f - >/dev/null
  client_running() { [[ $(kc get pod mps-client -o jsonpath='{.status.phase}') == Running ]]; }
  wait_for 90 "the MPS client pod Running" client_running
  client_connected() { kc logs mps-client -c cuda 2>/dev/null | grep -c "MPS server"; }
  wait_for 30 "the MPS client to connect" client_connected
  local gpu other env said client id container pid host host_uid agent state
  gpu=$(held_uuid mps-client)
  other=$(grep -vxF "$gpu" <<<"$gpus" | head -1)
  said=$(kc logs mps-client -c cuda | grep "MPS server" | sed -n 1p)
  state=$(mps_state "$gpu")
  [[ $(jq '.clients | length' "$state") == 1 ]] || fail "$gpu's daemon records $(jq -c .clients "$state") as its clients, not one"
  id=$(jq '.clients[0].id' "$state")
  client=$(client_state "$gpu" "$id")
  container=$(kc get pod mps-client -o jsonpath='{.status.containerStatuses[0].containerID}')
  pid=$(jq -r .pid "$state")
  host=$(mps_host_pod) host_uid=$(pod_uid tessera "$(mps_host_pod)") agent=$(tessera_pod)
  echo "  before: $agent (tessera), $host (tessera-mps-host); mps-client on $gpu, connected to its daemon (pid $pid) at $(jq -r .connected_at <<<"$client"): ${said#*: }"

  # The upgrade: helm upgrade with a new value changes both pod templates.
  local t rolled args
  mapfile -t args < <(overlay_values mps)
  t=$(now_ms)
  helm_deploy "${args[@]}" --set logLevel=debug
  [[ $(kc -n tessera get ds tessera-mps-host -o jsonpath='{.spec.template.spec.containers[0].env[?(@.name=="TESSERA_LOG_LEVEL")].value}') == debug ]] ||
    fail "helm upgrade did not change tessera-mps-host's pod template"
  kc -n tessera rollout status daemonset/tessera --timeout=180s >/dev/null || fail "tessera's rollout did not finish"
  rolled=$(($(now_ms) - t))
  agent_rolled() { [[ -n $(tessera_pod) && $(tessera_pod) != "$agent" ]]; }
  wait_for 60 "a new tessera pod" agent_rolled
  [[ $(mps_host_pod) == "$host" && $(pod_uid tessera "$host") == "$host_uid" ]] ||
    fail "tessera-mps-host's pod is now $(mps_host_pod) ($(pod_uid tessera "$(mps_host_pod)")), was $host ($host_uid): OnDelete should keep it"
  [[ $(kc -n tessera get pod "$host" -o jsonpath='{.status.containerStatuses[0].restartCount}') == 0 ]] ||
    fail "tessera-mps-host's container restarted"
  local updated
  updated=$(kc -n tessera get ds tessera-mps-host -o jsonpath='{.status.updatedNumberScheduled}')
  [[ ${updated:-0} == 0 ]] || fail "tessera-mps-host has $updated pod(s) of the new template: OnDelete should have replaced none"
  expect_allocatable 60 "$resource" "$total"
  # The client and its daemon as they were.
  [[ $(kc get pod mps-client -o jsonpath='{.status.phase}') == Running ]] ||
    fail "mps-client is $(kc get pod mps-client -o jsonpath='{.status.phase}') after the upgrade: $(kc logs mps-client -c cuda 2>&1 | tail -3)"
  [[ $(kc get pod mps-client -o jsonpath='{.status.containerStatuses[0].containerID}') == "$container" &&
     $(kc get pod mps-client -o jsonpath='{.status.containerStatuses[0].restartCount}') == 0 ]] ||
    fail "mps-client's container changed or restarted"
  ! kc logs mps-client -c cuda | grep -c lost >/dev/null || fail "mps-client lost its server: $(kc logs mps-client -c cuda | tail -2)"
  [[ $(jq -r .pid "$state") == "$pid" && $(jq -r .running "$state") == true ]] && mps_daemon_alive "$gpu" ||
    fail "$gpu's daemon is pid $(jq -r .pid "$state") (running $(jq -r .running "$state")), was $pid"
  [[ $(client_state "$gpu" "$id") == "$client" ]] ||
    fail "$gpu's daemon no longer has the client it had: $(jq -c .clients "$state"), was $client"
  local lost=$((1 - $(jq '.clients | length' "$state")))
  ((lost <= 0)) || fail "$gpu's daemon lost $lost client(s)"
  wait_for 30 "the new plugin to adopt $gpu's daemon" eval "tessera_logs device-plugin | grep -c 'MPS daemon for $gpu .*adopted from tessera mps-host: pid $pid,'"
  echo "  upgrade: both templates changed; tessera rolled to $(tessera_pod) in $rolled ms; tessera-mps-host kept $host (OnDelete, ${updated:-0} pods updated, 0 restarts)"
  echo "  after: mps-client Running, 0 restarts, still connected since $(jq -r .connected_at <<<"$client") (MPS clients lost: 0); $gpu's daemon pid $pid (unchanged), adopted by the new plugin"
  local line
  line=$(tessera_logs device-plugin | grep "MPS daemon for $gpu .*adopted" | sed -n 1p)
  echo "  the new plugin's log: $(sed 's/^[^ ]* [^ ]* //' <<<"$line")"

  # A daemon dies: the kubelet sees its shares Unhealthy at once, and Healthy once it is back.
  local victim from down up down_at up_at old_pid new_pid
  victim=$(mps_daemon_host_pid "$other") || fail "no control daemon process for $other among the node's pods"
  old_pid=$(jq -r .pid "$(mps_state "$other")")
  from=$(wc -l <"$KUBELET_LOG")
  t=$(now_ms)
  kill -KILL "$victim"
  wait_for 10 "the kubelet to see $other's shares Unhealthy" kubelet_update_after "$from" "$resource" $((total - replicas))
  down=$(kubelet_update_after "$from" "$resource" $((total - replicas)))
  down_at=$(klog_ms "${down#*:}")
  wait_for 30 "the kubelet to see every share Healthy again" kubelet_update_after "${down%%:*}" "$resource" "$total"
  up=$(kubelet_update_after "${down%%:*}" "$resource" "$total")
  up_at=$(klog_ms "${up#*:}")
  local limit=100
  [[ ${TESSERA_E2E_BREAK:-} != "$current" ]] || limit=0  # broken on purpose: no time is short enough
  (( down_at - t < limit )) ||
    fail "the kubelet saw $other's shares Unhealthy $((down_at - t)) ms after the kill, not within 100 ms: ${down#*:}"
  wait_for 10 "the restarted daemon of $other" mps_daemon_alive "$other"
  new_pid=$(mps_daemon_pid "$other")
  [[ $new_pid != "$old_pid" ]] || fail "$other's daemon is still pid $old_pid"
  [[ $(kc get pod mps-client -o jsonpath='{.status.phase}') == Running && $(client_state "$gpu" "$id") == "$client" ]] ||
    fail "mps-client, on $gpu, was hurt by $other's daemon's death"
  echo "  $other's daemon (pid $old_pid, host pid $victim) SIGKILLed: the kubelet had its $replicas shares Unhealthy $((down_at - t)) ms later, all $total Healthy again after $((up_at - t)) ms (restarted: pid $new_pid); mps-client on $gpu unaffected"
  echo "  the kubelet's log: $(sed 's/^[0-9]*:[^ ]* //' <<<"$down" | cut -c1-160)"
  remove_consumers
}
