# MPS from the kubelet's side: the mps overlay, whose control daemons (here
# the simulated nvidia-cuda-mps-control the image carries), one per GPU,
# belong to tessera-mps-host, a DaemonSet of their own, and whose plugin
# follows them through the host's socket. Each GPU's daemon is up under the
# node's mpsRoot with CUDA_VISIBLE_DEVICES = the GPU's UUID and one share's
# limits (the simulator's state file records what it was told); pods get
# replicas whose environment names the daemon's pipe directory and the same
# limits, with that directory mounted read-only (a client connects to the
# daemon's socket; no process of the pod can create a file there, so none can
# bind a daemon of its own in its place). A GPU whose daemon is SIGKILLed (and
# again whenever the host restarts it, until the Node shows the drop: a single
# kill can be mended between two node-status updates) loses its replicas from
# the Node's allocatable; they come back once the daemon is let live and the
# host has restarted it. (mps-upgrade times a single kill as the kubelet sees it.)
mps_share() {  # mps_share: "RESOURCE REPLICAS" of the mps overlay's config, as tessera reads it
  "$TESSERA" config validate -f "$REPO/deploy/overlays/mps/device-plugin-config.yaml" |
    sed -n 's|^ *nvidia.com/gpu x\([0-9]*\) -> \([^ ]*\).*|\2 \1|p'
}
mps_root() { echo "$(node_dir "$NODE")/run-nvidia/mps"; }  # the node's /run/nvidia/mps, seen from the host
mps_state() { echo "$(mps_root)/$1/pipe/tessera-sim-mps.json"; }  # mps_state UUID: its daemon's own record
mps_daemon_pid() { cat "$(mps_root)/$1/pipe/nvidia-cuda-mps-control.pid" 2>/dev/null; }
# The tessera-mps-host pod on NODE.
mps_host_pod() {
  kc -n tessera get pods -l app.kubernetes.io/name=tessera-mps-host --field-selector "spec.nodeName=$NODE" \
    -o jsonpath='{.items[0].metadata.name}'
}
mps_host_running() { [[ $(kc -n tessera get pod "$(mps_host_pod)" -o jsonpath='{.status.phase}' 2>/dev/null) == Running ]]; }
# mps_daemon_alive UUID: its daemon's pid (in tessera-mps-host's container) is a live process there.
mps_daemon_alive() {
  local pid
  pid=$(mps_daemon_pid "$1") && [[ -n $pid ]] && kc -n tessera exec "$(mps_host_pod)" -c mps-host -- sh -c "kill -0 $pid" 2>/dev/null
}

scenario_mps() {
  local resource replicas
  read -r resource replicas < <(mps_share) || true
  [[ -n $resource && $replicas -gt 0 ]] || fail "cannot read the mps overlay's resource and replicas from tessera config validate"
  remove_consumers
  deploy_overlay mps
  local gpus total
  gpus=$(inventory | jq -r '.gpus[].uuid')
  total=$(($(wc -l <<<"$gpus") * replicas))
  expect_resource 120 "$resource" "$total"
  echo "  capacity $resource: $(node_field capacity "$resource") ($replicas per GPU)"
  [[ $(kc -n tessera get ds tessera-mps-host -o jsonpath='{.spec.template.spec.hostIPC}') == true ]] ||
    fail "tessera-mps-host does not run in the host's IPC namespace"
  [[ $(kc -n tessera get ds tessera-mps-host -o jsonpath='{.spec.updateStrategy.type}') == OnDelete ]] ||
    fail "tessera-mps-host's updateStrategy is not OnDelete"
  [[ -z $(kc -n tessera get ds tessera -o jsonpath='{.spec.template.spec.hostIPC}') ]] ||
    fail "tessera's own pod runs in the host's IPC namespace: only tessera-mps-host needs it"
  wait_for 60 "tessera-mps-host Running on $NODE" mps_host_running

  # One share: the usable memory (total less what the driver reserves) over
  # the replicas, in whole MiB, and 100/replicas percent of the threads.
  local share mib percent uuid state pid
  share=$(inventory | jq -r --argjson n "$replicas" '.gpus[0].memory | (.total_bytes - .reserved_bytes) / $n | floor')
  mib=$((share >> 20)) percent=$((100 / replicas))
  local -A pid_of_gpu=()
  for uuid in $gpus; do
    state=$(mps_state "$uuid")
    wait_for 30 "the MPS daemon of $uuid" mps_daemon_alive "$uuid"
    pid=$(mps_daemon_pid "$uuid")
    [[ $(jq -r .pid "$state") == "$pid" && $(jq -r .running "$state") == true ]] ||
      fail "$uuid: the daemon's state file says pid $(jq -r .pid "$state"), running $(jq -r .running "$state"); its pid file says $pid"
    [[ $(jq -r .cuda_visible_devices "$state") == "$uuid" ]] ||
      fail "$uuid: its daemon was started with CUDA_VISIBLE_DEVICES='$(jq -r .cuda_visible_devices "$state")'"
    [[ $(jq -r '.default_device_pinned_mem_limits["0"].value' "$state") == "${mib}M" ]] ||
      fail "$uuid: its daemon's pinned memory limit is '$(jq -r '.default_device_pinned_mem_limits["0"].value' "$state")', expected ${mib}M (one share of $share bytes)"
    [[ $(jq -r '.default_active_thread_percentage' "$state") == "$percent" ]] ||
      fail "$uuid: its daemon's active thread percentage is $(jq -r '.default_active_thread_percentage' "$state"), expected $percent"
    pid_of_gpu[$uuid]=$pid
    echo "  $uuid: daemon pid $pid in tessera-mps-host's container, CUDA_VISIBLE_DEVICES=$uuid, pinned memory ${mib}M, threads $percent%"
  done

  # Three pods on two GPUs.
  local i p env pipe mounts
  local -A gpu_of=()
  pipe=/mps/${resource//\//_}/pipe
  for i in 0 1 2; do pod "mps-$i" "$resource" 1; echo ---; done | kc apply -f - >/dev/null
  three_running() { [[ $(pods_in_phase Running) == 3 ]]; }
  wait_for 90 "3 MPS pods Running" three_running
  for p in mps-0 mps-1 mps-2; do
    env=$(container_env "$p")
    uuid=$(held_uuid "$p")
    grep -qxF "$uuid" <<<"$gpus" || fail "$p: its device '$uuid' (pod-resources) is not a GPU of the node"
    [[ $(env_var "$env" CUDA_MPS_PIPE_DIRECTORY) == "$pipe" ]] ||
      fail "$p: CUDA_MPS_PIPE_DIRECTORY='$(env_var "$env" CUDA_MPS_PIPE_DIRECTORY)', expected $pipe"
    [[ $(env_var "$env" CUDA_MPS_PINNED_DEVICE_MEM_LIMIT) == "0=${mib}M" ]] ||
      fail "$p: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT='$(env_var "$env" CUDA_MPS_PINNED_DEVICE_MEM_LIMIT)', expected 0=${mib}M"
    [[ $(env_var "$env" CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) == "$(want "$percent")" ]] ||
      fail "$p: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE='$(env_var "$env" CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)', expected $(want "$percent")"
    mounts=$(container_mounts "$p")
    grep -qxF "/run/nvidia/mps/$uuid/pipe $pipe ro" <<<"$mounts" ||
      fail "$p: no read-only mount of $uuid's pipe directory /run/nvidia/mps/$uuid/pipe at $pipe; mounts: $mounts"
    # A tenant cannot bind a daemon of its own there (nor leave any file).
    ! kc exec "$p" -c cuda -- sh -c ": > $pipe/control.squat" 2>/dev/null ||
      fail "$p: a process of the pod created a file in its daemon's pipe directory $pipe"
    grep -qxF "/run/nvidia/mps/shm /dev/shm rw" <<<"$mounts" ||
      fail "$p: no mount of /run/nvidia/mps/shm at /dev/shm; mounts: $mounts"
    ! grep -q "/run/nvidia/tessera" <<<"$mounts" || fail "$p: the mps-host socket's directory is mounted in a tenant: $mounts"
    # What the pod sees there is the running daemon's own directory.
    [[ $(kc exec "$p" -c cuda -- cat "$pipe/nvidia-cuda-mps-control.pid") == "${pid_of_gpu[$uuid]}" ]] ||
      fail "$p: $pipe/nvidia-cuda-mps-control.pid in the pod does not name $uuid's daemon (${pid_of_gpu[$uuid]})"
    gpu_of[$p]=$uuid
    echo "  $p: $uuid, CUDA_MPS_PIPE_DIRECTORY=$pipe (its daemon's, mounted read-only), CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=${mib}M, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$percent"
  done

  # The daemon of mps-0's GPU dies, and keeps dying until the Node shows it.
  local gpu=${gpu_of[mps-0]} t down_ms up_ms old host stop=/run/nvidia/mps/e2e-stop-killing
  old=${pid_of_gpu[$gpu]} host=$(mps_host_pod)
  t=$(now_ms)
  start mps-killer "$PEERS/kubectl" --kubeconfig "$E2E_STATE/kubeconfig" -n tessera exec "$host" -c mps-host -- \
    sh -c "while [ ! -e $stop ]; do p=\$(cat /run/nvidia/mps/$gpu/pipe/nvidia-cuda-mps-control.pid 2>/dev/null) && kill -KILL \"\$p\" 2>/dev/null; sleep 0.05; done"
  expect_allocatable 30 "$resource" $((total - replicas))
  down_ms=$(($(now_ms) - t))
  touch "$(mps_root)/e2e-stop-killing"
  wait_until 10 "the killing loop to end" eval '! alive mps-killer'
  rm -f "$(mps_root)/e2e-stop-killing"
  echo "  $gpu's daemon (pid $old) SIGKILLed: allocatable $resource $total -> $((total - replicas)) in $down_ms ms"
  t=$(now_ms)
  expect_allocatable 60 "$resource" "$total"
  up_ms=$(($(now_ms) - t))
  wait_for 10 "the restarted daemon of $gpu" mps_daemon_alive "$gpu"
  pid=$(mps_daemon_pid "$gpu")
  state=$(mps_state "$gpu")
  [[ $pid != "$old" && $(jq -r '.default_device_pinned_mem_limits["0"].value' "$state") == "${mib}M" &&
     $(jq -r .default_active_thread_percentage "$state") == "$percent" ]] ||
    fail "$gpu: the daemon now is pid $pid (was $old) with limits $(jq -c '[.default_device_pinned_mem_limits, .default_active_thread_percentage]' "$state")"
  echo "  killing stopped: tessera-mps-host restarted it (pid $pid, same limits), allocatable back to $total in $up_ms ms"
  local logs
  logs=$(tessera_logs device-plugin)
  echo "  the plugin's log: $(grep -c "MPS daemon for $gpu .* is down" <<<"$logs") 'down', $(grep -c "MPS daemon for $gpu .* is up" <<<"$logs") 'up' lines for $gpu"
  remove_consumers
}
