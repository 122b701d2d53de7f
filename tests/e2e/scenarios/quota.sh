# Memory quotas in pods: three pods on time-sliced replicas get the quota
# library from Allocate (LD_PRELOAD, the library's mount, the plugin's
# limits file and ledger as single-file mounts, the preload list); of two
# pods on one GPU, the neighbour holds half its quota
# while the other bursts past its own and gets CUDA_ERROR_OUT_OF_MEMORY from
# the library, sees its quota as the device's total memory, and the GPU holds
# exactly the neighbour's memory plus what the burst was allowed (the
# simulated driver's own accounting). A pod whose spec sets its own LD_PRELOAD
# still runs under its quota: /etc/ld.so.preload, mounted by Allocate, loads
# the library. Each replica's CDI devices include its quota's, whose
# createRuntime hook (tessera-memory-hook, the driver backend) containerd and
# runc run on the node: its log names the container's own cgroup, and its
# poststop run follows the pod's deletion. The CUDA test client and the simulated driver come from the
# build through a hostPath; the client runs through kubectl exec, so with the
# environment the kubelet and containerd gave the container.

# A pod holding one nvidia.com/gpu that can run the CUDA test client: the
# client from a host directory (it loads libcuda.so.1 from the CDI spec's
# mount of the node's driver, through the linker cache the spec's hook
# made), the simulator's per-device accounting in another that every such
# pod shares. The simulated driver tells live processes by PID and start
# time, so these pods share the host's PID namespace. Confined as the chart's
# share-isolation policy asks (RuntimeDefault, allowPrivilegeEscalation: false).
quota_pod() {  # quota_pod NAME [LD_PRELOAD]: it sleeps; LD_PRELOAD, if given, is set in its spec
  local preload=
  [[ -z ${2:-} ]] || preload="    - {name: LD_PRELOAD, value: \"$2\"}"
  cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default, labels: {app: e2e-consumer}}
spec:
  nodeSelector: {kubernetes.io/hostname: $NODE}
  hostPID: true
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  securityContext: {seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: cuda
    image: $E2E_SHELL_IMAGE
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"]
    securityContext: {allowPrivilegeEscalation: false}
    env:
    - {name: TESSERA_SIM_CUDA_DIR, value: /run/tessera-sim-cuda}
$preload
    resources: {limits: {nvidia.com/gpu: 1}}
    volumeMounts:
    - {name: cuda-tools, mountPath: /opt/tessera-e2e, readOnly: true}
    - {name: cuda-sim, mountPath: /run/tessera-sim-cuda}
  volumes:
  - {name: cuda-tools, hostPath: {path: "$E2E_STATE/cuda-tools", type: Directory}}
  - {name: cuda-sim, hostPath: {path: "$E2E_STATE/cuda-sim", type: Directory}}
YAML
}

# client_in POD UUID: sets client to the command that runs the test client in
# POD's container on the simulated GPU UUID.
client_in() {
  client=(timeout 120 "$PEERS/kubectl" --kubeconfig "$E2E_STATE/kubeconfig" exec "$1" -c cuda --
          env "TESSERA_SIM_CUDA_DEVICES=$2:$gpu_bytes" /opt/tessera-e2e/bin/tessera_cuda_client)
}

# sim_usage UUID: "PROCESS DEVICE PEAK" bytes of the simulator's accounting of
# UUID, read on the host from the directory the pods share (the oracle).
sim_usage() {
  env -u LD_PRELOAD LD_LIBRARY_PATH="$E2E_STATE/cuda-tools/lib" TESSERA_SIM_CUDA_DIR="$E2E_STATE/cuda-sim" \
    TESSERA_SIM_CUDA_DEVICES="$1:$gpu_bytes" "$E2E_STATE/cuda-tools/bin/tessera_cuda_client" init usage |
    awk '$1 == "usage" && $2 == 0 {print $3, $4, $5}'
}

step_field() {  # step_field FILE STEP N: field N (2 is the CUresult) of STEP's first line in the client's output FILE
  awk -v s="$2" -v n="$3" '$1 == s {print $n; exit}' "$1"
}

expect_step() {  # expect_step FILE STEP N VALUE WHAT
  local got
  got=$(step_field "$1" "$2" "$3")
  [[ $got == "$4" ]] && return 0
  echo "--- $(basename "$1")" >&2
  sed 's/^/    /' "$1" >&2
  fail "$5: step $2 field $3 is '$got', expected $4"
}

# memory_hook_ran POD: the quota's driver backend, tessera-memory-hook, ran
# for POD's container as the CDI spec Allocate named asks: containerd and
# runc ran it as a createRuntime hook, on the node, with the container's own
# pid, and its log in the container's ledger directory names the container's
# own cgroup: on a cgroup v1 host (no driver limits there) the memory
# controller's, with the quota library kept as the backend; on cgroup v2 the
# container's directory. Then the pod goes, and the poststop hook (--clear)
# has run for the same container.
memory_hook_ran() {
  local pod=$1 env key uuid limit cid log nd
  nd=$(node_dir "$NODE")
  env=$(container_env "$pod")
  key=$(env_var "$env" TESSERA_LEDGER_KEY)
  uuid=$(env_var "$env" TESSERA_DEVICE_UUID_0)
  limit=$(env_var "$env" TESSERA_DEVICE_MEMORY_LIMIT_0)
  cid=$(kc get pod "$pod" -o jsonpath='{.status.containerStatuses[?(@.name=="cuda")].containerID}')
  cid=${cid#containerd://}
  log=$nd/tessera/ledgers/$key/memory-hook.log
  [[ -f $log ]] || fail "$pod: no memory-hook.log in its ledger directory ($log): the runtime ran no createRuntime hook"
  container_spec "$pod" | jq -e --arg limits "/var/lib/tessera/ledgers/$key/limits" \
    '[.hooks.createRuntime // [] | .[] | select(.args[0] == "tessera-memory-hook" and .args[1] == "--limits" and .args[2] == $limits)] | length == 1' >/dev/null ||
    fail "$pod: its runtime spec has no createRuntime hook running tessera-memory-hook on its limits file: $(container_spec "$pod" | jq -c '.hooks')"
  local line
  if [[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]]; then
    line=$(grep -F "$uuid: " "$log" | head -1)
    [[ $line == *"/$cid"* || $line == *"the quota library holds $limit bytes"* ]] ||
      fail "$pod: the memory hook's log does not speak of its container's cgroup (…/$cid) or its quota: $(cat "$log")"
  else
    line=$(grep -F "$uuid: the quota library holds $limit bytes: the host has no cgroup v2 hierarchy" "$log" | head -1)
    [[ $line == *"the container's memory cgroup /"*"/$cid" ]] ||
      fail "$pod: the memory hook's log does not name its container's memory cgroup (…/$cid) with the library as the backend: $(cat "$log")"
  fi
  echo "  $pod: tessera-memory-hook ran at createRuntime: ${line#*: }"
  kc delete pod "$pod" --wait=true --timeout=60s >/dev/null
  cleared() { grep -qF "container $cid" "$log"; }
  wait_for 60 "the poststop hook (--clear) to run for $pod's container" cleared
  echo "  $pod deleted: poststop: $(grep -F "container $cid" "$log" | head -1 | cut -d' ' -f2-)"
}

scenario_quota() {
  local i p env uuid limit key mounts quota gpu_bytes client=() nd
  local -A gpu_of=()
  nd=$(node_dir "$NODE")
  cuda_tools
  # Three pods on two GPUs: two of them share one. A fourth sets its own LD_PRELOAD.
  { for i in 0 1 2; do quota_pod "quota-$i"; echo ---; done; quota_pod quota-own-preload libm.so.6; } |
    kc apply -f - >/dev/null
  four_running() { [[ $(kc get pods -l app=e2e-consumer --field-selector=status.phase=Running -o name | grep -c /quota-) == 4 ]]; }
  wait_for 90 "4 quota pods Running" four_running
  gpu_bytes=$(inventory | jq -r '.gpus[0].memory.total_bytes')
  quota=$(inventory | jq -r '.gpus[0].memory | (.total_bytes - .reserved_bytes) / 4 | floor')
  for p in quota-0 quota-1 quota-2; do
    env=$(container_env "$p")
    uuid=$(held_uuid "$p")
    limit=$(env_var "$env" TESSERA_DEVICE_MEMORY_LIMIT_0)
    key=$(env_var "$env" TESSERA_LEDGER_KEY)
    [[ $(env_var "$env" LD_PRELOAD) == /usr/local/tessera/lib/libtessera-cuda.so ]] ||
      fail "$p: LD_PRELOAD='$(env_var "$env" LD_PRELOAD)', expected Allocate's /usr/local/tessera/lib/libtessera-cuda.so"
    [[ $(env_var "$env" TESSERA_DEVICE_UUID_0) == "$uuid" && $uuid == GPU-* ]] ||
      fail "$p: TESSERA_DEVICE_UUID_0='$(env_var "$env" TESSERA_DEVICE_UUID_0)', its device (pod-resources) '$uuid'"
    [[ $limit == "$quota" ]] || fail "$p: TESSERA_DEVICE_MEMORY_LIMIT_0='$limit', expected $quota"
    [[ $(env_var "$env" TESSERA_LEDGER_DIR) == /run/tessera/ledger && -n $key ]] ||
      fail "$p: TESSERA_LEDGER_DIR='$(env_var "$env" TESSERA_LEDGER_DIR)', TESSERA_LEDGER_KEY='$key'"
    mounts=$(container_mounts "$p")
    grep -qxF "/var/lib/tessera/lib /usr/local/tessera/lib ro" <<<"$mounts" ||
      fail "$p: no read-only mount of /var/lib/tessera/lib at /usr/local/tessera/lib; mounts: $mounts"
    [[ $(env_var "$env" TESSERA_LIMITS_FILE) == /run/tessera/limits ]] ||
      fail "$p: TESSERA_LIMITS_FILE='$(env_var "$env" TESSERA_LIMITS_FILE)', expected /run/tessera/limits"
    # The plugin's ledger and limits file, each a single-file mount (the limits read-only).
    grep -qxF "/var/lib/tessera/ledgers/$key/ledger /run/tessera/ledger/ledger rw" <<<"$mounts" ||
      fail "$p: no read-write mount of /var/lib/tessera/ledgers/$key/ledger at /run/tessera/ledger/ledger; mounts: $mounts"
    grep -qxF "/var/lib/tessera/ledgers/$key/limits /run/tessera/limits ro" <<<"$mounts" ||
      fail "$p: no read-only mount of /var/lib/tessera/ledgers/$key/limits at /run/tessera/limits; mounts: $mounts"
    grep -qxF "/var/lib/tessera/ledgers/ld.so.preload /etc/ld.so.preload ro" <<<"$mounts" ||
      fail "$p: no read-only mount of the preload list at /etc/ld.so.preload; mounts: $mounts"
    [[ -f $nd/tessera/lib/libtessera-cuda.so ]] || fail "the init container did not install libtessera-cuda.so in the node's /var/lib/tessera/lib"
    gpu_of[$p]=$uuid
    echo "  $p: $uuid, quota $limit, LD_PRELOAD, the limits file and the ledger from Allocate, ledger $key"
  done
  local a= b= pair
  for pair in "0 1" "0 2" "1 2"; do
    set -- $pair
    if [[ ${gpu_of[quota-$1]} == "${gpu_of[quota-$2]}" ]]; then a=quota-$1 b=quota-$2; break; fi
  done
  [[ -n $a ]] || fail "no two of quota-0, quota-1, quota-2 share a GPU (the node has two)"
  local gpu=${gpu_of[$a]}
  [[ $(env_var "$(container_env "$a")" TESSERA_LEDGER_KEY) != "$(env_var "$(container_env "$b")" TESSERA_LEDGER_KEY)" ]] ||
    fail "$a and $b share a ledger"

  # The neighbour (a) takes half its quota and holds it until b is done
  # (each await waits 10 s at most).
  local hold=$((quota / 2)) first=$((quota * 3 / 4)) burst=$((quota / 2)) awaits=() t
  for i in $(seq 12); do awaits+=(await:/run/tessera-sim-cuda/b-done); done
  client_in "$a" "$gpu"
  start quota-neighbour "${client[@]}" init "alloc:$hold:hold" usage:held "${awaits[@]}" usage:after
  holding() { [[ $(sim_usage "$gpu" | cut -d' ' -f2) == "$hold" ]]; }
  t=$(now_ms)
  wait_for 60 "$a to hold $hold bytes of $gpu (the simulator's accounting)" holding
  echo "  $a (neighbour) holds $hold bytes of $gpu after $(($(now_ms) - t)) ms"
  # b bursts: three quarters of its quota fit, half more is refused by the library.
  local out=$E2E_STATE/logs/quota-burst.log
  client_in "$b" "$gpu"
  "${client[@]}" driver init info "alloc:$first:first" "alloc:$burst:burst" info:after usage >"$out" 2>&1 ||
    { sed 's/^/    /' "$out" >&2; fail "the test client failed in $b"; }
  local during after
  after=$(sim_usage "$gpu")
  touch "$E2E_STATE/cuda-sim/b-done"
  wait_until 30 "the neighbour's client to end" eval '! alive quota-neighbour'
  expect_step "$out" driver 3 /usr/lib/x86_64-linux-gnu/libcuda.so.1 "$b: libcuda.so.1 from the CDI spec's mount of the driver"
  expect_step "$out" init 2 0 "$b: cuInit"
  expect_step "$out" info 4 "$quota" "$b: memory info's total is its quota"
  expect_step "$out" info 3 "$quota" "$b: memory info's free is its quota before it allocates"
  expect_step "$out" "alloc:$first:first" 2 0 "$b: three quarters of its quota"
  expect_step "$out" "alloc:$burst:burst" 2 "$(want 2)" "$b: past its quota, CUDA_ERROR_OUT_OF_MEMORY"
  grep -q "out of memory: container .* quota $quota used $first request $burst" "$out" ||
    { sed 's/^/    /' "$out" >&2; fail "$b: no 'out of memory: container ... quota $quota used $first request $burst' line from the library"; }
  expect_step "$out" info:after 4 "$quota" "$b: memory info's total after the refusal"
  expect_step "$out" info:after 3 $((quota - first)) "$b: memory info's free after the refusal"
  expect_step "$out" usage 4 $((hold + first)) "$b: the device holds a's memory plus b's allowed allocation"
  during=$(step_field "$out" usage 5)
  ((during == hold + first && during <= 2 * quota)) ||
    fail "the device's high-water mark is $during bytes; expected $((hold + first)), never above the two quotas ($((2 * quota)))"
  [[ ${after#* } == "$hold "* ]] || fail "after $b exited the device holds '${after#* }' (device, peak), expected $a's $hold"
  local nlog=$E2E_STATE/logs/quota-neighbour.log
  expect_step "$nlog" "alloc:$hold:hold" 2 0 "$a: half its quota"
  expect_step "$nlog" usage:after 3 "$hold" "$a still holds its memory after $b's burst"
  echo "  $b (burst): memory info total $quota free $quota; $first bytes: 0; $burst more: $(step_field "$out" "alloc:$burst:burst" 2) (CUDA_ERROR_OUT_OF_MEMORY)"
  echo "  $b's stderr: $(grep -o 'tessera-cuda.*out of memory: container .*' "$out" | head -1)"
  echo "  device $gpu: $during bytes at most ($a's $hold + $b's $first, quotas $((2 * quota))); $a still holds $hold after $b"

  # LD_PRELOAD precedence (docs/design-memory-quotas.md §7): whichever entry
  # the runtime keeps, the preload list holds the quota.
  local own_env own_gpu own_info
  own_env=$(container_env quota-own-preload)
  own_gpu=$(held_uuid quota-own-preload)
  echo "  quota-own-preload (spec LD_PRELOAD=libm.so.6): the runtime spec has $(grep -c '^LD_PRELOAD=' <<<"$own_env") LD_PRELOAD entries: $(grep '^LD_PRELOAD=' <<<"$own_env" | paste -sd' ' -); kubectl exec sees LD_PRELOAD='$(kc exec quota-own-preload -c cuda -- printenv LD_PRELOAD)'"
  client_in quota-own-preload "$own_gpu"
  own_info=$("${client[@]}" init info 2>/dev/null | awk '$1 == "info" {print $2, $3, $4}')
  echo "    its memory info (code free total): $own_info (quota $quota, card $gpu_bytes)"
  [[ $own_info == "0 $quota $quota" ]] ||
    fail "quota-own-preload: memory info '$own_info', expected '0 $quota $quota': /etc/ld.so.preload did not load the library"
  memory_hook_ran quota-0
}
