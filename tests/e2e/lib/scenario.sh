# What scenarios share: failing with the logs that explain it, waiting,
# reading the Node and pods, test pods, and the simulated node's overlays of
# deploy/. Sourced by tests/e2e/run.sh after lib/common.sh and lib/cluster.sh.
# NODE is the node every scenario runs tessera on; NODE2 a second node that
# runs no tessera (for what one node's agent may do to another).

readonly NODE=tessera-node-1 NODE2=tessera-node-2
current=setup
failed=0

# The last lines of what ran: the kubelet's, containerd's and tessera's logs.
show_logs() {
  local n f
  n=$(node_dir "$NODE")
  echo "--- last 25 lines of the kubelet's log ($NODE)"
  tail -n 25 "$E2E_STATE/logs/node-$NODE-kubelet.log" 2>/dev/null || echo "(no kubelet log)"
  echo "--- last 15 lines of containerd's log ($NODE)"
  tail -n 15 "$E2E_STATE/logs/node-$NODE-containerd.log" 2>/dev/null || echo "(no containerd log)"
  echo "--- last 25 lines of each tessera container's log"
  # Straight from the nodes' pod log directories: there even when the API server is not (the
  # fleet controller, a Deployment, may run on either node).
  local node
  for node in "$NODE" "$NODE2"; do
    for f in "$(node_dir "$node")"/pods-log/tessera_tessera-*/*/*.log; do
      [[ -f $f ]] || continue
      echo "[$(basename "$(dirname "$f")")] ($(basename "$(dirname "$(dirname "$f")")" | cut -d_ -f2) on $node, $(basename "$f"))"
      tail -n 25 "$f" | cut -d' ' -f4-
    done
  done
  if [[ $current == setup ]]; then
    for f in "$E2E_STATE"/logs/*.log; do
      [[ -f $f ]] || continue
      echo "--- last 10 lines of $(basename "$f")"
      tail -n 10 "$f"
    done
  fi
}

fail() {
  failed=1
  echo >&2
  echo "e2e: scenario $current FAILED: $*" >&2
  show_logs >&2
  exit 1
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...: poll until COMMAND succeeds, or fail the scenario
  local limit=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "timed out after ${limit}s waiting for $what"
    sleep 0.5
  done
}

# The expected value, or a wrong one when this scenario is broken on purpose
# (used where the check does not wait, so a broken run fails at once).
want() { if [[ ${TESSERA_E2E_BREAK:-} == "$current" ]]; then echo $(($1 + 1)); else echo "$1"; fi; }

node_field() {  # node_field capacity|allocatable RESOURCE [NODE]
  local r=${2//./\\.}
  kc get node "${3:-$NODE}" -o jsonpath="{.status.$1.$r}"
}

expect_resource() {  # expect_resource SECONDS RESOURCE COUNT: capacity and allocatable
  local resource=$2 want=$3 deadline=$((SECONDS + $1)) cap alloc
  while :; do
    cap=$(node_field capacity "$resource") alloc=$(node_field allocatable "$resource")
    [[ $cap == "$want" && $alloc == "$want" ]] && return 0
    ((SECONDS < deadline)) || fail "node $NODE has $resource capacity '$cap', allocatable '$alloc' after $1 s; expected $want"
    sleep 0.5
  done
}

expect_allocatable() {  # expect_allocatable SECONDS RESOURCE COUNT
  local resource=$2 want=$3 deadline=$((SECONDS + $1)) got
  while :; do
    got=$(node_field allocatable "$resource")
    [[ $got == "$want" ]] && return 0
    ((SECONDS < deadline)) || fail "allocatable $resource is '$got' after $1 s, expected $want"
    sleep 0.1
  done
}

# pod NAME RESOURCE COUNT [NAMESPACE]: a pod on NODE that holds COUNT of
# RESOURCE and sleeps, on the pod network, in the shell image, named as a
# user would (no imagePullPolicy: the tag is not latest, so IfNotPresent).
# Confined as the chart's share-isolation policy asks of a pod holding a
# share (the RuntimeDefault seccomp profile, allowPrivilegeEscalation: false):
# the two securityContext lines, which the admission scenario drops.
pod() {
  cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: ${4:-default}, labels: {app: e2e-consumer}}
spec:
  nodeSelector: {kubernetes.io/hostname: $NODE}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  securityContext: {seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: cuda
    image: $E2E_SHELL_IMAGE
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"]
    securityContext: {allowPrivilegeEscalation: false}
    resources: {limits: {$2: $3}}
EOF
}

# cuda_tools: the CUDA test client (a driver-API program: it dlopens
# libcuda.so.1 as CUDA's runtime does) in $E2E_STATE/cuda-tools/bin, which
# pods mount; the simulated driver in .../lib, for the host's own reads of
# the simulator's accounting. In a pod the client finds libcuda.so.1 where
# the CDI spec mounted the node's driver and its hook listed it in the
# container's linker cache.
cuda_tools() {
  mkdir -p "$E2E_STATE/cuda-tools/bin" "$E2E_STATE/cuda-tools/lib" "$E2E_STATE/cuda-sim"
  cp "$BUILD_DIR/tests/cuda_quota/tessera_cuda_client" "$E2E_STATE/cuda-tools/bin/"
  cp "$BUILD_DIR/sim/cuda/libcuda.so.1" "$E2E_STATE/cuda-tools/lib/libcuda.so.1"
}

# cuda_pod NAME RESOURCE COUNT: as pod, with the CUDA test client at
# /opt/tessera-e2e/bin (no LD_LIBRARY_PATH: the driver is the spec's).
cuda_pod() {
  pod "$@"
  cat <<EOF
    volumeMounts: [{name: cuda-tools, mountPath: /opt/tessera-e2e, readOnly: true}]
  volumes: [{name: cuda-tools, hostPath: {path: "$E2E_STATE/cuda-tools", type: Directory}}]
EOF
}

# cuda_runs POD UUID[,UUID...]: the CUDA test client in POD's container,
# on the simulated devices UUID (80 GiB each), loads libcuda.so.1 from the
# driver's folder the CDI spec mounted, initialises CUDA and allocates 64 MiB.
cuda_runs() {
  local pod=$1 devices out
  devices=$(sed 's/\([^,]*\)/\1:80G/g' <<<"$2")
  out=$(kc exec "$pod" -c cuda -- env "TESSERA_SIM_CUDA_DEVICES=$devices" /opt/tessera-e2e/bin/tessera_cuda_client \
          driver init alloc:67108864 2>&1) || fail "$pod: the CUDA test client failed: $out"
  [[ $(awk '$1 == "driver" {print $2, $3}' <<<"$out") == "0 /usr/lib/x86_64-linux-gnu/libcuda.so.1" ]] ||
    fail "$pod: the client did not load the spec's /usr/lib/x86_64-linux-gnu/libcuda.so.1: $out"
  [[ $(awk '$1 == "init" || $1 == "alloc:67108864" {printf "%s ", $2}' <<<"$out") == "0 0 " ]] ||
    fail "$pod: cuInit or a 64 MiB allocation failed: $out"
  echo "  $pod: a driver-API program loaded $(awk '$1 == "driver" {print $3}' <<<"$out") (the spec's), cuInit and 64 MiB: CUDA_SUCCESS"
}

# wait_unschedulable SECONDS POD [MESSAGE]: the scheduler has said it cannot
# place POD (a FailedScheduling Event, whose message contains MESSAGE), and
# POD is still Pending: "stays Pending" decided by the scheduler's own word,
# never by a sleep.
wait_unschedulable() {
  local limit=$1 pod=$2 message=${3:-}
  refused() {
    kc get events --field-selector "involvedObject.name=$pod,reason=FailedScheduling" -o jsonpath='{.items[*].message}' |
      grep -qF -- "$message"
  }
  wait_for "$limit" "the scheduler's FailedScheduling Event for $pod${message:+ ($message)}" refused
  [[ $(kc get pod "$pod" -o jsonpath='{.status.phase}') == Pending ]] ||
    fail "$pod is $(kc get pod "$pod" -o jsonpath='{.status.phase}') after the scheduler refused it, expected Pending"
}

no_consumers() { [[ -z $(kc get pods -A -l app=e2e-consumer -o name) ]]; }
pods_in_phase() { kc get pods -l app=e2e-consumer --field-selector="status.phase=$1" -o name | wc -l; }
remove_consumers() {
  kc delete pods -A -l app=e2e-consumer --wait=false >/dev/null
  wait_for 60 "the consumer pods to go away" no_consumers
}

sim_dir() { echo "$(node_dir "${1:-$NODE}")/sim"; }
inventory() { "$TESSERA" inventory --sim "$(sim_dir)" --json; }
pod_resources() { "$TESSERA" pods --socket "$(node_dir "$NODE")/kubelet/pod-resources/kubelet.sock" --json; }

# container_spec POD [CONTAINER] [NAMESPACE]: the OCI runtime spec containerd
# made for the pod's container (env, mounts, devices as the runtime has them).
container_spec() {
  local pod=$1 c=${2:-cuda} ns=${3:-default} id node
  id=$(kc -n "$ns" get pod "$pod" -o jsonpath="{.status.containerStatuses[?(@.name==\"$c\")].containerID}")
  node=$(kc -n "$ns" get pod "$pod" -o jsonpath='{.spec.nodeName}')
  [[ $id == containerd://* ]] || fail "pod $ns/$pod has no running container $c (containerID '$id')"
  node_ctr "$node" containers info "${id#containerd://}" | jq -c '.Spec'
}
container_env() { container_spec "$@" | jq -r '.process.env[]'; }
# "SOURCE DESTINATION ro|rw" per bind mount (the kubelet's, typed "bind" or
# with rbind, and a CDI spec's, with the option bind).
container_mounts() {
  container_spec "$@" | jq -r '.mounts[] | select(.type == "bind" or (.options // [] | (index("rbind") or index("bind")))) |
    "\(.source) \(.destination) \(if (.options // [] | index("ro")) then "ro" else "rw" end)"'
}
env_var() { sed -n "s/^$2=//p" <<<"$1"; }  # env_var ENV NAME: NAME's value in ENV's lines

# Which devices a container holds: the kubelet's own record (pod-resources),
# as tessera hands devices by CDI name (no NVIDIA_VISIBLE_DEVICES names them:
# CDI specs set it to void). held_devices POD [CONTAINER] [NAMESPACE]: the
# device IDs, one per line; held_uuid: the physical device's UUID (a shared
# replica's id <uuid>::<n> is its GPU's), several joined by commas.
held_devices() {
  pod_resources | jq -r --arg p "$1" --arg c "${2:-cuda}" --arg ns "${3:-default}" \
    '.[] | select(.namespace == $ns and .pod == $p and .container == $c) | .devices[]'
}
held_uuid() { held_devices "$@" | sed 's/::[0-9]*$//' | sort -u | paste -sd, -; }

# cdi_device_nodes ID [NODE]: the device nodes the node's CDI specs give the
# device named ID (tessera's specs in the node's /var/run/cdi), sorted.
cdi_device_nodes() {
  cat "$(node_dir "${2:-$NODE}")"/cdi-run/*.json 2>/dev/null |
    jq -r --arg id "$1" '.devices[]? | select(.name == $id) | .containerEdits.deviceNodes[]?.path' | sort -u
}
# container_has_devices POD ID...: the container's runtime spec has every
# device node the CDI specs give each ID (what the runtime injected).
container_has_devices() {
  local pod=$1 id nodes have
  shift
  have=$(container_spec "$pod" | jq -r '.linux.devices[]?.path' | sort -u)
  for id in "$@"; do
    nodes=$(cdi_device_nodes "$id")
    [[ -n $nodes ]] || { echo "no CDI device $id in $NODE's specs"; return 1; }
    comm -23 <(echo "$nodes") <(echo "$have") | grep -q . && { echo "$pod lacks $(comm -23 <(echo "$nodes") <(echo "$have") | paste -sd' ' -) of $id"; return 1; }
  done
  return 0
}

# The tessera pod on NODE, and its containers' restarts and logs.
tessera_pod() {
  kc -n tessera get pods -l app.kubernetes.io/name=tessera --field-selector "spec.nodeName=$NODE" \
    -o jsonpath='{.items[0].metadata.name}'
}
tessera_restarts() {  # tessera_restarts CONTAINER
  kc -n tessera get pod "$(tessera_pod)" -o jsonpath="{.status.containerStatuses[?(@.name==\"$1\")].restartCount}"
}
# Its output is long (debug logs): read it whole (grep -c, or grep | sed -n 1p),
# never with grep -q or -m1, whose early exit makes kubectl die of SIGPIPE and,
# under pipefail, the pipeline fail whatever grep found.
tessera_logs() { kc -n tessera logs "$(tessera_pod)" -c "$1" 2>/dev/null; }
registrations() { tessera_logs "$1" | grep -c 'registered .* with the kubelet' || true; }
