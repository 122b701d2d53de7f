#!/usr/bin/env bash
# tessera on a real Kubernetes: a one-node loopback cluster (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, dockerd and a kubelet 1.20.2 built
# from Debian's source) whose node has two simulated A100-80GB GPUs, with
# tessera deployed as the DaemonSet of deploy/.
#
#   tests/e2e/run.sh BUILD_DIR [--only NAME[,NAME...]] [--list]
#
# BUILD_DIR holds a built tessera (src/tessera, sim/nvml/libnvidia-ml.so.1,
# src/cuda_quota/libtessera-cuda.so; for the quota scenario also the simulated
# CUDA driver sim/cuda/libcuda.so.1 and tests/cuda_quota/tessera_cuda_client;
# for the mps scenario the simulated sim/mps/nvidia-cuda-mps-control).
# Every scenario prints its time; a failing one is named, with the last lines
# of the kubelet's and tessera's logs, and the run exits 1. Everything started
# here is stopped by PID and every mount under the run's directories removed,
# pass or fail; the last line says whether anything was left behind.
#
# Environment:
#   TESSERA_E2E_CACHE   Kubernetes binaries, docker images (~/.cache/tessera/e2e)
#   TESSERA_E2E_BREAK   a scenario whose expectation is broken on purpose, to
#                       prove that a failure is caught and reported
#   TESSERA_E2E_KEEP    1: keep the run directory (logs) after the run
# Needs root: it runs dockerd and a kubelet. Listens on 127.0.0.1 only.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
here=$repo/tests/e2e
usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }

build_dir= only= list=0
while (($#)); do
  case $1 in
    --only) only=${2:?--only needs a scenario name}; shift 2 ;;
    --list) list=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; echo "e2e: unknown option '$1'" >&2; exit 2 ;;
    *) [[ -z $build_dir ]] || { echo "e2e: one BUILD_DIR only" >&2; exit 2; }; build_dir=$1; shift ;;
  esac
done

readonly SCENARIOS=(manifests mig-capacity mig-pods pod-resources kubelet-restart xid-79 time-slicing quota mps metrics node-agent)
if ((list)); then printf '%s\n' "${SCENARIOS[@]}"; exit 0; fi
[[ -n $build_dir ]] || { usage >&2; exit 2; }
build_dir=$(cd "$build_dir" && pwd)
tessera=$build_dir/src/tessera
sim_lib=$build_dir/sim/nvml/libnvidia-ml.so.1
cuda_lib=$build_dir/src/cuda_quota/libtessera-cuda.so
cuda_sim=$build_dir/sim/cuda/libcuda.so.1
cuda_client=$build_dir/tests/cuda_quota/tessera_cuda_client
mps_control=$build_dir/sim/mps/nvidia-cuda-mps-control
# Where the image carries it (deploy/image/build.sh --mps-control).
readonly IMAGE_MPS_CONTROL=/usr/local/tessera/bin/nvidia-cuda-mps-control
for s in ${only//,/ }; do
  [[ " ${SCENARIOS[*]} " == *" $s "* ]] || { echo "e2e: unknown scenario '$s' (--list shows them)" >&2; exit 2; }
done

cache=${TESSERA_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera/e2e}
readonly NODE=tessera-e2e
# etcd off its usual ports, which a packaged etcd service may hold.
readonly ETCD_PORTS=(12379 12380 12381)
readonly PORTS=("${ETCD_PORTS[@]}" 16443 10248 10250 10257 10259)
# Paths the kubelet, dockerd and containerd use whatever their flags say (the
# last two only if a flag below stopped working), and the DaemonSet's own host
# paths (overlay() moves them under the run; /run/nvidia holds the mps
# overlay's mpsRoot); removed at the end only when this run created them, and
# checked.
readonly HOST_PATHS=(/var/lib/kubelet/device-plugins /var/lib/kubelet /var/log/pods /var/log/containers
                     /run/docker /run/containerd /var/lib/dockershim /etc/docker/key.json /var/lib/tessera /run/nvidia)

say() { printf '\033[1me2e:\033[0m %s\n' "$*"; }
die() { printf 'e2e: error: %s\n' "$*" >&2; exit 1; }

# ---------------------------------------------------------------- preflight
[[ $(id -u) -eq 0 ]] || die "needs root (it runs dockerd and a kubelet)"
[[ -x $tessera ]] || die "$tessera is missing: build first (./x build dev)"
[[ -f $sim_lib ]] || die "$sim_lib is missing: build first (./x build dev)"
[[ -f $cuda_lib ]] || die "$cuda_lib is missing: build first (./x build dev)"
if [[ -z $only || ",$only," == *,quota,* ]]; then
  for f in "$cuda_sim" "$cuda_client"; do [[ -f $f ]] || die "$f is missing (the quota scenario runs it): build first (./x build dev)"; done
fi
if [[ -z $only || ",$only," == *,mps,* ]]; then
  [[ -x $mps_control ]] || die "$mps_control is missing (the mps scenario's daemons run it): build first (./x build dev)"
fi
for tool in etcd containerd dockerd runc debootstrap openssl jq ss findmnt; do
  command -v $tool >/dev/null || die "$tool is missing (run scripts/setup.sh --e2e)"
done
# Debian 12's kubectl (1.20) embeds a kustomize too old for deploy/ (and its
# package conflicts with other kubectl installs), so this one is not installed.
command -v kubectl >/dev/null || die "kubectl is missing: install kubectl 1.21 or newer (kustomize v4+ is needed for deploy/)"
[[ ! -e /var/lib/kubelet/device-plugins ]] ||
  die "/var/lib/kubelet/device-plugins exists: a kubelet may run on this machine, so the test will not touch it (if an e2e run was killed before its teardown, stop its processes and remove /var/lib/kubelet)"
for port in "${PORTS[@]}"; do
  ! ss -Hltn "sport = :$port" | grep -q . || die "port $port is in use; the test cluster needs it on 127.0.0.1"
done

# The kubelet adds KUBE-* iptables chains; those it adds are removed at the end.
kube_chains() {
  local t
  command -v iptables >/dev/null || return 0
  for t in filter nat mangle; do iptables -t $t -S 2>/dev/null | awk -v t=$t '$1 == "-N" && $2 ~ /^KUBE-/ {print t, $2}'; done | sort
}
chains_before=$(kube_chains)

started_at=$SECONDS
kube_bin=$("$here/build-kubernetes.sh")

# Short: unix socket paths under it must stay under 108 bytes.
run=$(mktemp -d /tmp/tessera-e2e.XXXXXX)
mkdir -p "$run/logs" "$run/state"
created=()
for p in "${HOST_PATHS[@]}"; do [[ -e $p ]] || created+=("$p"); done
declare -A pid_of=()
order=()
exporter_port=  # the metrics scenario's, picked when it starts
current=setup

export DOCKER_HOST=unix://$run/docker.sock
export KUBECONFIG=$run/kubeconfig
export AWS_EC2_METADATA_DISABLED=true  # the kubelet's in-tree ECR provider probes EC2 otherwise
kc() { kubectl --request-timeout=20s "$@" 2> >(grep -v 'version difference' >&2); }

start() {  # start NAME COMMAND...: in the background, logged to logs/NAME.log
  local name=$1; shift
  "$@" >>"$run/logs/$name.log" 2>&1 &
  pid_of[$name]=$!
  order+=("$name")
}

stop() {  # stop NAME: TERM, then KILL after 20 s
  local name=$1 pid=${pid_of[$1]:-} i
  [[ -n $pid ]] || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 200; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    say "$name (pid $pid) ignored SIGTERM for 20 s: killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
  unset "pid_of[$name]"
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...: poll until COMMAND succeeds
  local limit=$1 what=$2; shift 2
  local deadline=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || fail "timed out after ${limit}s waiting for $what"
    sleep 0.5
  done
}

plugin_container() {  # tessera plugin's container, or tessera node's
  { docker ps -q --filter label=io.kubernetes.container.name=device-plugin --filter label=io.kubernetes.pod.namespace=tessera
    docker ps -q --filter label=io.kubernetes.container.name=node-agent --filter label=io.kubernetes.pod.namespace=tessera
  } | head -1
}

show_logs() {
  local c f
  if [[ $current == setup ]]; then
    for f in "$run"/logs/*.log; do
      [[ -f $f ]] || continue
      echo "--- last 10 lines of $(basename "$f")"
      tail -n 10 "$f"
    done
    return
  fi
  echo "--- last 25 lines of the kubelet's log"
  tail -n 25 "$run/logs/kubelet.log" 2>/dev/null || echo "(no kubelet log)"
  echo "--- last 25 lines of tessera's (device-plugin and mig-apply containers)"
  for c in $(docker ps -aq --filter label=io.kubernetes.pod.namespace=tessera --filter label=io.kubernetes.docker.type=container 2>/dev/null); do
    echo "[$(docker inspect -f '{{index .Config.Labels "io.kubernetes.container.name"}}] ({{.State.Status}}, exit {{.State.ExitCode}})' "$c")"
    docker logs --tail 25 "$c" 2>&1
  done
}

failed=0
fail() {
  failed=1
  echo
  echo "e2e: scenario $current FAILED: $*" >&2
  show_logs >&2
  exit 1
}

remove_new_chains() {
  local t chain rule
  comm -13 <(echo "$chains_before") <(kube_chains) | while read -r t chain; do
    # First the rules that jump to it, then the chain.
    iptables -t "$t" -S | grep -- "-j $chain\( \|$\)" | grep -v "^-A $chain " | sed 's/^-A/-D/' |
      while read -r rule; do eval "iptables -t $t $rule"; done
    iptables -t "$t" -F "$chain" && iptables -t "$t" -X "$chain"
  done
}

our_mounts() {  # the mounts under teardown's prefixes, deepest first
  local m p
  findmnt -rn -o TARGET | sort -r | while read -r m; do
    for p in "${prefixes[@]}"; do
      if [[ $m == "$p" || $m == "$p"/* ]]; then echo "$m"; break; fi
    done
  done
}

teardown() {
  local rc=$? name left=()
  trap - EXIT INT TERM
  set +e
  if ((rc != 0 && !failed)) && [[ $current != done ]]; then
    echo "e2e: scenario $current FAILED: exit $rc from ${failed_cmd:-a command} (in $0)" >&2
    [[ -n ${pid_of[dockerd]:-} ]] && show_logs >&2
  fi
  say "teardown"
  # What a scenario started (a client in a pod), before the cluster goes.
  for name in "${order[@]}"; do
    case $name in kubelet|kube-*|dockerd|containerd|etcd) ;; *) stop "$name" ;; esac
  done
  stop kubelet
  if [[ -n ${pid_of[dockerd]:-} ]]; then
    local ids
    ids=$(docker ps -aq 2>/dev/null)
    [[ -z $ids ]] || docker rm -f $ids >/dev/null 2>&1
  fi
  for name in kube-scheduler kube-controller-manager kube-apiserver dockerd containerd etcd; do stop "$name"; done
  # Whatever is still mounted under the run's paths (the kubelet's volumes, its
  # self bind-mount, dockerd's netns), deepest first.
  local prefixes=("$run" "$cache/docker" "$cache/containerd" "${created[@]}") m p still
  for ((i = 0; i < 3; i++)); do
    while read -r m; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done < <(our_mounts)
  done
  still=$(our_mounts)
  if [[ -z $still ]]; then
    for p in "${created[@]}"; do rm -rf --one-file-system "$p"; done
  fi
  remove_new_chains
  # Check: no process of ours, no mount, no listener on our ports.
  for name in "${order[@]}"; do
    [[ -n ${pid_of[$name]:-} ]] && kill -0 "${pid_of[$name]}" 2>/dev/null && left+=("process $name")
  done
  while read -r m; do [[ -n $m ]] && left+=("mount $m"); done <<<"$still"
  for port in "${PORTS[@]}" $exporter_port; do ss -Hltn "sport = :$port" | grep -q . && left+=("listener on port $port"); done
  for p in "${created[@]}"; do [[ -e $p ]] && left+=("path $p"); done
  [[ $(kube_chains) == "$chains_before" ]] || left+=("iptables chains $(comm -13 <(echo "$chains_before") <(kube_chains) | tr '\n' ' ')")
  pgrep -f "$run" >/dev/null && left+=("processes naming $run: $(pgrep -f "$run" | tr '\n' ' ')")
  # MPS control daemons (and servers) the plugin started: their command line
  # does not name the run, their environment does (CUDA_MPS_PIPE_DIRECTORY).
  local mps_left=() pid
  for pid in $(pgrep -f nvidia-cuda-mps); do
    grep -qaF "$run/mps/" "/proc/$pid/environ" 2>/dev/null && mps_left+=("$pid")
  done
  ((${#mps_left[@]} == 0)) || left+=("MPS daemons ${mps_left[*]}")
  if [[ ${TESSERA_E2E_KEEP:-0} == 1 || -n $still ]]; then say "logs kept in $run/logs"; else rm -rf --one-file-system "$run"; fi
  if ((${#left[@]})); then
    echo "e2e: LEFT BEHIND: ${left[*]}" >&2
    rc=1
  else
    say "nothing left running or mounted"
  fi
  say "total $((SECONDS - started_at)) s; exit $rc"
  exit $rc
}
trap teardown EXIT
trap 'exit 130' INT TERM
# Remember which command failed, for a failure outside fail().
set -E
trap 'failed_cmd="line $LINENO: $BASH_COMMAND"' ERR

# ---------------------------------------------------------------- cluster
t0=$SECONDS
say "containerd, dockerd"
# Our own containerd: dockerd would otherwise use a system one whenever
# /run/containerd/containerd.sock exists, and our containers would live there.
# Not its CRI plugin: the kubelet talks to dockerd.
printf 'version = 2\ndisabled_plugins = ["io.containerd.grpc.v1.cri"]\n' >"$run/containerd.toml"
start containerd containerd --config "$run/containerd.toml" --address "$run/containerd.sock" \
  --root "$cache/containerd" --state "$run/containerd"
wait_for 30 "containerd" test -S "$run/containerd.sock"
cp "$here/runc-clamp" "$run/runc-clamp"
# Its own (empty) daemon.json and key file, not /etc/docker's; cgroupfs as the kubelet is told.
echo "{\"deprecated-key-path\": \"$run/docker-key.json\"}" >"$run/daemon.json"
start dockerd dockerd --config-file="$run/daemon.json" \
  --host="$DOCKER_HOST" --containerd="$run/containerd.sock" --data-root="$cache/docker" --exec-root="$run/de" \
  --pidfile="$run/dockerd.pid" --bridge=none --iptables=false --ip6tables=false --ip-masq=false \
  --exec-opt native.cgroupdriver=cgroupfs --add-runtime runc-clamp="$run/runc-clamp" --default-runtime=runc-clamp
wait_for 30 "dockerd" docker info
# Left by an earlier run that was killed before its teardown.
stale=$(docker ps -aq)
[[ -z $stale ]] || docker rm -f $stale >/dev/null

say "images"
image_args=(--tessera "$tessera" --sim-lib "$sim_lib" --cuda-lib "$cuda_lib" --tag tessera:latest)
[[ ! -x $mps_control ]] || image_args+=(--mps-control "$mps_control")
base=$("$repo/deploy/image/build.sh" "${image_args[@]}")
# The pod sandbox: sleeps, and stops at once on SIGTERM.
DOCKER_BUILDKIT=0 docker build -q --network=none -t tessera-e2e-pause:local - >/dev/null 2>>"$run/logs/images.log" <<EOF
FROM $base
CMD ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"]
EOF
docker tag "$base" tessera-e2e-base:local

say "etcd, kube-apiserver, kube-controller-manager, kube-scheduler"
etcd_url=http://127.0.0.1:${ETCD_PORTS[0]}
start etcd etcd --name e2e --data-dir "$run/etcd" \
  --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
  --listen-peer-urls "http://127.0.0.1:${ETCD_PORTS[1]}" --initial-advertise-peer-urls "http://127.0.0.1:${ETCD_PORTS[1]}" \
  --initial-cluster "e2e=http://127.0.0.1:${ETCD_PORTS[1]}" --listen-metrics-urls "http://127.0.0.1:${ETCD_PORTS[2]}"
openssl genrsa -out "$run/sa.key" 2048 2>/dev/null
# The API server's serving certificate, from a CA of the run's own: pods that
# talk to the API server (tessera node, through its service account) verify
# it against the CA the token controller puts beside their token.
mkdir -p "$run/pki"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=tessera-e2e-ca \
  -keyout "$run/pki/ca.key" -out "$run/pki/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=kube-apiserver \
  -keyout "$run/pki/apiserver.key" -out "$run/pki/apiserver.csr" 2>/dev/null
openssl x509 -req -in "$run/pki/apiserver.csr" -CA "$run/pki/ca.crt" -CAkey "$run/pki/ca.key" -CAcreateserial \
  -days 2 -out "$run/pki/apiserver.crt" -extfile <(printf '%s\n' \
  'subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes.default.svc' \
  'basicConstraints=CA:FALSE' 'keyUsage=digitalSignature,keyEncipherment' 'extendedKeyUsage=serverAuth') 2>/dev/null
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$token,admin,admin,system:masters" >"$run/tokens.csv"
cat >"$KUBECONFIG" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: e2e, cluster: {server: "https://127.0.0.1:16443", certificate-authority: "$run/pki/ca.crt"}}]
users: [{name: admin, user: {token: "$token"}}]
contexts: [{name: e2e, context: {cluster: e2e, user: admin}}]
current-context: e2e
EOF
apiserver_args=(--etcd-servers="$etcd_url" \
  --bind-address=127.0.0.1 --secure-port=16443 --insecure-port=0 \
  --cert-dir="$run/apiserver" --tls-cert-file="$run/pki/apiserver.crt" --tls-private-key-file="$run/pki/apiserver.key" \
  --token-auth-file="$run/tokens.csv" --authorization-mode=RBAC --allow-privileged=true \
  --service-account-key-file="$run/sa.key" --service-account-signing-key-file="$run/sa.key" \
  --service-account-issuer=https://kubernetes.default.svc --service-cluster-ip-range=10.0.0.0/24)
start kube-apiserver "$kube_bin/kube-apiserver" "${apiserver_args[@]}"
wait_for 60 "the API server" kc get --raw /readyz
start kube-controller-manager "$kube_bin/kube-controller-manager" --kubeconfig="$KUBECONFIG" \
  --bind-address=127.0.0.1 --port=0 --leader-elect=false --service-account-private-key-file="$run/sa.key" \
  --root-ca-file="$run/pki/ca.crt" --use-service-account-credentials=false
start kube-scheduler "$kube_bin/kube-scheduler" --kubeconfig="$KUBECONFIG" \
  --bind-address=127.0.0.1 --port=0 --leader-elect=false

say "simulated node: 2 x A100-80GB"
"$tessera" sim create "$run/node" --gpu A100-80GB --count 2 >/dev/null

# No --node-ip: the kubelet refuses a loopback one, and host-network pods take
# the node's address as theirs.
kubelet_args=(--kubeconfig="$KUBECONFIG" --hostname-override=$NODE
  --node-labels=nvidia.com/gpu.present=true
  --address=127.0.0.1 --port=10250 --read-only-port=0 --healthz-bind-address=127.0.0.1 --healthz-port=10248
  --root-dir="$run/kubelet" --cert-dir="$run/kubelet-pki" --volume-plugin-dir="$run/kubelet-volume-plugins"
  --container-runtime=docker --docker-endpoint="$DOCKER_HOST"
  --container-runtime-endpoint="unix://$run/dockershim.sock" --image-service-endpoint="unix://$run/dockershim.sock"
  --experimental-dockershim-root-directory="$run/dockershim"
  --pod-infra-container-image=tessera-e2e-pause:local --image-pull-progress-deadline=10s
  --fail-swap-on=false --cgroups-per-qos=false --enforce-node-allocatable= --cgroup-driver=cgroupfs
  --eviction-hard='memory.available<1Mi,nodefs.available<1%,imagefs.available<1%' --image-gc-high-threshold=100
  --make-iptables-util-chains=false --node-status-update-frequency=2s --sync-frequency=5s --v=2)
say "kubelet"
start kubelet "$kube_bin/kubelet" "${kubelet_args[@]}"
node_ready() {
  [[ $(kc get node $NODE -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}') == True ]]
}
wait_for 90 "node $NODE to be Ready" node_ready
# Everything listens on loopback (or unix sockets) only.
wide=$(ss -Hltnp | awk '$4 !~ /^(127\.0\.0\.1|\[::1\]|\[::ffff:127\.0\.0\.1\]):/' |
       grep -E "$(IFS='|'; echo "pid=(${pid_of[*]})"),") || true
[[ -z $wide ]] || fail "listening beyond loopback: $wide"
cluster_s=$((SECONDS - t0))
timings=()
say "cluster up in $cluster_s s ($("$kube_bin/kubelet" --version), $(etcd --version | head -1), dockerd $(docker version -f '{{.Server.Version}}'))"

# ---------------------------------------------------------------- helpers
# A kustomize overlay over deploy/overlays/NAME that runs tessera on the
# simulated node: its directory mounted into both containers, the state dir
# and the quota library and ledger directories under the run (the plugin sees
# the ledger root at its host path, as the base does), a short health-recovery
# period, and the host's network (the test node has no CNI). For mps, also the
# daemons' mpsRoot under the run (in the config, the hostPaths and the plugin's
# mount) and the simulated control program the image carries.
# `overlay NAME metrics` also adds the metrics Component (see metrics_patch).
# What every tessera container of the run is given instead of a GPU: the
# simulated node, and the quota ledgers at their host path (the plugin creates
# the containers' ledger directories there); as a container's volumeMounts and
# the pod's volumes.
sim_mounts() {
  cat <<EOF
        - {name: sim, mountPath: /var/lib/tessera-sim}
        - {name: quota-ledgers, mountPath: "$run/quota/ledgers"}
        - {mountPath: /var/lib/tessera/ledgers, \$patch: delete}
EOF
}
sim_volumes() {
  cat <<EOF
      - {name: sim, hostPath: {path: "$run/node", type: Directory}}
      - {name: state, hostPath: {path: "$run/state", type: DirectoryOrCreate}}
      - {name: quota-library, hostPath: {path: "$run/quota/lib", type: DirectoryOrCreate}}
      - {name: quota-ledgers, hostPath: {path: "$run/quota/ledgers", type: DirectoryOrCreate}}
EOF
}

overlay() {
  local name=$1 with=${2:-} dir=$run/overlays/$1${2:++$2} mps_args= mps_mounts= mps_volumes=
  mkdir -p "$dir"
  cat >"$dir/kustomization.yaml" <<EOF
resources:
- $(realpath --relative-to="$dir" "$repo/deploy/overlays/$name")
patches:
- path: simulated-node.yaml
EOF
  if [[ $with == metrics ]]; then
    cat >>"$dir/kustomization.yaml" <<EOF
- path: metrics.yaml
- path: no-servicemonitor.yaml
- path: no-prometheusrule.yaml
components:
- $(realpath --relative-to="$dir" "$repo/deploy/overlays/metrics/component")
EOF
    metrics_patches "$dir"
  fi
  if [[ $name == mps ]]; then
    sed "s|^\(  mpsRoot:\) /run/nvidia/mps\$|\1 $run/mps|" "$repo/deploy/overlays/mps/device-plugin-config.yaml" \
      >"$dir/device-plugin-config.yaml"
    grep -qx "  mpsRoot: $run/mps" "$dir/device-plugin-config.yaml" ||
      fail "deploy/overlays/mps/device-plugin-config.yaml has no 'mpsRoot: /run/nvidia/mps' line to move under the run"
    cat >>"$dir/kustomization.yaml" <<EOF
generatorOptions:
  disableNameSuffixHash: true
configMapGenerator:
- name: tessera-device-plugin-config
  namespace: tessera
  behavior: replace
  files:
  - config.yaml=device-plugin-config.yaml
EOF
    mps_args=", \"--mps-control\", \"$IMAGE_MPS_CONTROL\""
    mps_mounts="        - {name: mps-root, mountPath: \"$run/mps\"}
        - {mountPath: /run/nvidia/mps, \$patch: delete}"
    mps_volumes="      - {name: mps-root, hostPath: {path: \"$run/mps\", type: DirectoryOrCreate}}
      - {name: mps-shm, hostPath: {path: \"$run/mps/shm\", type: DirectoryOrCreate}}"
  fi
  cat >"$dir/simulated-node.yaml" <<EOF
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: tessera, namespace: tessera}
spec:
  template:
    spec:
      hostNetwork: true  # the test node has no CNI
      initContainers:
      - name: mig-apply
        env: [{name: TESSERA_SIM, value: /var/lib/tessera-sim}]
        volumeMounts: [{name: sim, mountPath: /var/lib/tessera-sim}]
      containers:
      - name: device-plugin
        command: ["tessera", "plugin", "--config", "/etc/tessera/device-plugin/config.yaml",
                  "--kubelet-dir", "/var/lib/kubelet/device-plugins", "--health-recovery", "5",
                  "--quota-library-dir", "$run/quota/lib", "--quota-ledger-root", "$run/quota/ledgers"$mps_args]
        env: [{name: TESSERA_SIM, value: /var/lib/tessera-sim}]
        volumeMounts:
$(sim_mounts)
$mps_mounts
      volumes:
$(sim_volumes)
$mps_volumes
EOF
  echo "$dir"
}

# The metrics Component on the test node: the exporter beside the plugin, given
# the simulated node as the plugin is (TESSERA_SIM and the node's directory),
# the kubelet's pod-resources directory under the run, on 127.0.0.1 and a port
# picked when the scenario starts (the host's network: 0.0.0.0:9400 would
# listen beyond loopback), probed there, sampling every second.
# The cluster has no Prometheus Operator, so no ServiceMonitor or
# PrometheusRule kind: both objects are deleted from the render here rather
# than stand-in CRDs installed, since a CRD with a permissive schema would
# accept anything and prove nothing about them (tests/deploy renders and checks
# the ServiceMonitor; tests/alerts and tests/prometheus_live run the rules in
# promtool and a real Prometheus). The DaemonSet and the Service are applied.
# (One patch per file: kustomize 5.5 crashes on a file whose second document
# deletes an object.)
metrics_patches() {  # metrics_patches DIR
  cat >"$1/metrics.yaml" <<EOF
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: tessera, namespace: tessera}
spec:
  template:
    spec:
      containers:
      - name: exporter
        command: ["tessera", "exporter", "--listen", "127.0.0.1:$exporter_port", "--interval", "1", "--gpm-window", "0.5",
                  "--pod-resources", "/var/lib/kubelet/pod-resources/kubelet.sock", "--ledger-root", "/var/lib/tessera/ledgers"]
        env: [{name: TESSERA_SIM, value: /var/lib/tessera-sim}]
        ports:
        - {containerPort: 9400, protocol: TCP, \$patch: delete}
        - {name: metrics, containerPort: $exporter_port, protocol: TCP}
        readinessProbe: {httpGet: {host: 127.0.0.1}}
        livenessProbe: {httpGet: {host: 127.0.0.1}}
        volumeMounts: [{name: sim, mountPath: /var/lib/tessera-sim}]
      volumes:
      - {name: pod-resources, hostPath: {path: "$run/kubelet/pod-resources", type: Directory}}
EOF
  cat >"$1/no-servicemonitor.yaml" <<EOF
\$patch: delete
apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: tessera-exporter, namespace: tessera}
EOF
  cat >"$1/no-prometheusrule.yaml" <<EOF
\$patch: delete
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: {name: tessera-alerts, namespace: tessera}
EOF
}

node_field() {  # node_field capacity|allocatable RESOURCE
  local r=${2//./\\.}
  kc get node $NODE -o jsonpath="{.status.$1.$r}"
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

# The expected value, or a wrong one when this scenario is broken on purpose
# (used where the check does not wait, so a broken run fails at once).
want() { if [[ ${TESSERA_E2E_BREAK:-} == "$current" ]]; then echo $(($1 + 1)); else echo "$1"; fi; }

pod() {  # pod NAME RESOURCE COUNT: a pod that holds COUNT of RESOURCE and sleeps
  cat <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default, labels: {app: e2e-consumer}}
spec:
  hostNetwork: true
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: cuda
    image: tessera-e2e-base:local
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"]
    resources: {limits: {$2: $3}}
EOF
}

inventory() { "$tessera" inventory --sim "$run/node" --json; }
pod_resources() { "$tessera" pods --socket "$run/kubelet/pod-resources/kubelet.sock" --json; }
env_var() { sed -n "s/^$2=//p" <<<"$1"; }  # env_var ENV NAME: NAME's value in ENV's lines
plugin_restarts() {
  kc -n tessera get pods -l app.kubernetes.io/name=tessera -o jsonpath='{.items[0].status.containerStatuses[0].restartCount}'
}

container_id() {  # container_id POD: the docker id of the pod's running container
  local id
  id=$(docker ps -q --filter "label=io.kubernetes.pod.name=$1" --filter label=io.kubernetes.container.name=cuda | head -1)
  [[ -n $id ]] || fail "no running container for pod $1"
  echo "$id"
}

container_env() {  # container_env POD: the env docker gave the pod's container
  local id
  id=$(container_id "$1") || exit 1
  docker inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$id"
}

container_mounts() {  # container_mounts POD: "SOURCE DESTINATION RW" per bind mount of the pod's container
  local id
  id=$(container_id "$1") || exit 1
  docker inspect -f '{{range .Mounts}}{{.Source}} {{.Destination}} {{.RW}}{{println}}{{end}}' "$id"
}

no_consumers() { [[ -z $(kc get pods -l app=e2e-consumer -o name) ]]; }
pods_in_phase() { kc get pods -l app=e2e-consumer --field-selector="status.phase=$1" -o name | wc -l; }

deploy_overlay() {  # deploy_overlay NAME [metrics]: apply it and restart tessera's pod so it reads the new configs
  kc apply -k "$(overlay "$@")" >/dev/null || fail "kubectl apply -k of overlay $* failed"
  kc -n tessera delete pod -l app.kubernetes.io/name=tessera --wait=false >/dev/null 2>&1 || true
}

registrations() { docker logs "$(plugin_container)" 2>&1 | grep -c 'registered .* with the kubelet' || true; }

# ---------------------------------------------------------------- scenarios
scenario_manifests() {
  # The API server validates every overlay (unknown fields, types, admission).
  kc apply -f "$repo/deploy/base/namespace.yaml" >/dev/null
  local o
  for o in base overlays/mig-mixed overlays/time-slicing overlays/mps overlays/gpu-node overlays/gpu-node-mig; do
    kc apply --dry-run=server -k "$repo/deploy/$o" >"$run/logs/dry-run.log" 2>&1 ||
      { cat "$run/logs/dry-run.log"; fail "the API server refused deploy/$o"; }
    echo "  deploy/$o: accepted ($(grep -c 'server dry run' "$run/logs/dry-run.log") objects)"
  done
}

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

scenario_mig-pods() {
  local i
  for i in $(seq 0 8); do pod "mig-$i" nvidia.com/mig-1g.20gb 1; echo ---; done | kc apply -f - >/dev/null
  running_eight() { [[ $(pods_in_phase Running) == 8 && $(pods_in_phase Pending) == 1 ]]; }
  wait_for 120 "8 pods Running and 1 Pending" running_eight
  local pending uuids=() env uuid known
  pending=$(kc get pods -l app=e2e-consumer --field-selector=status.phase=Pending -o jsonpath='{.items[0].metadata.name}')
  kc get events --field-selector "involvedObject.name=$pending,reason=FailedScheduling" -o jsonpath='{.items[*].message}' |
    grep -q 'Insufficient nvidia.com/mig-1g.20gb' || fail "pod $pending is Pending but not for lack of nvidia.com/mig-1g.20gb"
  echo "  $pending: Pending (Insufficient nvidia.com/mig-1g.20gb)"
  known=$(inventory | jq -r '.gpus[].mig_devices[].uuid')
  for i in $(seq 0 8); do
    [[ mig-$i == "$pending" ]] && continue
    env=$(container_env "mig-$i")
    uuid=$(env_var "$env" NVIDIA_VISIBLE_DEVICES)
    [[ $uuid == MIG-* ]] || fail "mig-$i: NVIDIA_VISIBLE_DEVICES='$uuid' is not one MIG UUID"
    grep -qxF "$uuid" <<<"$known" || fail "mig-$i: $uuid is not a MIG device in tessera inventory"
    uuids+=("$uuid")
    echo "  mig-$i: NVIDIA_VISIBLE_DEVICES=$uuid"
  done
  local distinct
  distinct=$(printf '%s\n' "${uuids[@]}" | sort -u | wc -l)
  [[ $distinct == "$(want 8)" ]] || fail "$distinct distinct MIG UUIDs among 8 pods"
}

scenario_pod-resources() {
  # The kubelet's pod-resources API agrees with each container's environment.
  local listed i pod env uuid got
  listed=$(pod_resources) ||
    fail "tessera pods could not list the kubelet's pod resources"
  for pod in $(kc get pods -l app=e2e-consumer --field-selector=status.phase=Running -o jsonpath='{.items[*].metadata.name}'); do
    env=$(container_env "$pod")
    uuid=$(env_var "$env" NVIDIA_VISIBLE_DEVICES)
    got=$(jq -r --arg p "$pod" '.[] | select(.namespace == "default" and .pod == $p and .container == "cuda"
            and .resource == "nvidia.com/mig-1g.20gb") | .devices[]' <<<"$listed")
    [[ -n $uuid && $got == "$uuid" ]] || fail "pod-resources lists '$got' for $pod, its env says '$uuid'"
    echo "  default/$pod cuda nvidia.com/mig-1g.20gb [$got]"
  done
  i=$(jq '[.[] | select(.namespace == "default") | .pod] | unique | length' <<<"$listed")
  [[ $i == "$(want 8)" ]] || fail "pod-resources lists $i pods in default, expected 8"
}

scenario_kubelet-restart() {
  local before container restarts_before
  container=$(plugin_container)
  restarts_before=$(plugin_restarts)
  before=$(registrations)
  local log_from
  log_from=$(wc -l <"$run/logs/kubelet.log")
  stop kubelet
  start kubelet "$kube_bin/kubelet" "${kubelet_args[@]}"
  registered_again() { (($(registrations) > before)); }
  wait_for 60 "tessera to register again with the restarted kubelet" registered_again
  # A restarted kubelet counts no device of a resource until its plugin
  # registers again: wait for the new kubelet to log tessera's endpoint, then
  # two node-status periods (2 s each), so the Node shows what it counts now.
  new_kubelet_logged() { tail -n +$((log_from + 1)) "$run/logs/kubelet.log" | grep "$1" >/dev/null; }
  wait_for 30 "the new kubelet to take tessera's endpoint" new_kubelet_logged 'Registered endpoint.*nvidia.com/mig-1g.20gb'
  sleep 4
  expect_resource 60 nvidia.com/mig-1g.20gb 8
  [[ $(plugin_container) == "$container" ]] || fail "tessera's container was replaced; it should have re-registered in place"
  local restarts
  restarts=$(plugin_restarts)
  [[ $restarts == "$restarts_before" ]] || fail "tessera's container restarted ($restarts_before -> $restarts)"
  echo "  registrations $before -> $(registrations); same container, allocatable back to 8"
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

scenario_xid-79() {
  local t
  t=$(now_ms)
  "$tessera" sim event "$run/node" --gpu 0 --xid 79 >/dev/null
  expect_allocatable 15 nvidia.com/mig-1g.20gb 4
  echo "  XID 79 on GPU 0: allocatable 8 -> 4 in $(($(now_ms) - t)) ms"
  t=$(now_ms)
  expect_allocatable 30 nvidia.com/mig-1g.20gb 8
  echo "  no further event: allocatable back to 8 in $(($(now_ms) - t)) ms (recovery period 5 s)"
}

scenario_time-slicing() {
  kc delete pods -l app=e2e-consumer --wait=false >/dev/null
  wait_for 60 "the MIG consumer pods to go away" no_consumers
  deploy_overlay time-slicing
  expect_resource 120 nvidia.com/gpu 8
  echo "  capacity nvidia.com/gpu: $(node_field capacity nvidia.com/gpu)"
  local i env gpus
  gpus=$(inventory | jq -r '.gpus[].uuid')
  # A quarter of what the driver says is usable: total less what it reserves.
  local quarter
  quarter=$(inventory | jq -r '.gpus[0].memory | (.total_bytes - .reserved_bytes) / 4 | floor')
  ((quarter > 0 && quarter < 85899345920 / 4)) || fail "the driver reports no reserved memory (quarter of usable: $quarter)"
  for i in 0 1 2; do pod "ts-$i" nvidia.com/gpu 1; echo ---; done | kc apply -f - >/dev/null
  three_running() { [[ $(pods_in_phase Running) == 3 ]]; }
  wait_for 90 "3 time-sliced pods Running" three_running
  local listed
  listed=$(pod_resources)
  for i in 0 1 2; do
    env=$(container_env "ts-$i")
    local uuid limit ids
    uuid=$(env_var "$env" NVIDIA_VISIBLE_DEVICES)
    limit=$(env_var "$env" TESSERA_DEVICE_MEMORY_LIMIT_0)
    [[ $uuid == GPU-* ]] && grep -qxF "$uuid" <<<"$gpus" || fail "ts-$i: NVIDIA_VISIBLE_DEVICES='$uuid' is not a GPU of the node"
    [[ $limit == "$quarter" ]] || fail "ts-$i: TESSERA_DEVICE_MEMORY_LIMIT_0='$limit', expected $quarter (a quarter of the usable memory)"
    ids=$(jq -r --arg p "ts-$i" '.[] | select(.pod == $p and .resource == "nvidia.com/gpu") | .devices[]' <<<"$listed")
    [[ $ids =~ ^"$uuid"::[0-9]+$ ]] || fail "ts-$i: pod-resources lists '$ids', expected one replica $uuid::<n>"
    echo "  ts-$i: device $ids, NVIDIA_VISIBLE_DEVICES=$uuid, TESSERA_DEVICE_MEMORY_LIMIT_0=$limit"
  done
}

# A pod holding one nvidia.com/gpu that can run the CUDA test client: the
# client and the simulated driver (libcuda.so.1, on LD_LIBRARY_PATH) from a
# host directory, the simulator's per-device accounting in another that every
# such pod shares. The simulated driver tells live processes by PID and start
# time, so these pods share the host's PID namespace (in their own, each would
# take the other's processes for dead and drop their memory).
quota_pod() {  # quota_pod NAME [LD_PRELOAD]: it sleeps; LD_PRELOAD, if given, is set in its spec
  local preload=
  [[ -z ${2:-} ]] || preload="    - {name: LD_PRELOAD, value: \"$2\"}"
  cat <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default, labels: {app: e2e-consumer}}
spec:
  hostNetwork: true
  hostPID: true
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: cuda
    image: tessera-e2e-base:local
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"]
    env:
    - {name: LD_LIBRARY_PATH, value: /opt/tessera-e2e/lib}
    - {name: TESSERA_SIM_CUDA_DIR, value: /run/tessera-sim-cuda}
$preload
    resources: {limits: {nvidia.com/gpu: 1}}
    volumeMounts:
    - {name: cuda-tools, mountPath: /opt/tessera-e2e, readOnly: true}
    - {name: cuda-sim, mountPath: /run/tessera-sim-cuda}
  volumes:
  - {name: cuda-tools, hostPath: {path: "$run/cuda-tools", type: Directory}}
  - {name: cuda-sim, hostPath: {path: "$run/cuda-sim", type: Directory}}
YAML
}

# client_in POD UUID: sets client to the command that runs the test client in
# POD's container, on the simulated GPU UUID, with the environment the kubelet
# gave the container. docker exec is what the kubelet's own exec does with
# dockershim; kubectl exec would need the API server to reach the kubelet,
# which listens on loopback under a node name nothing resolves.
client_in() {
  local id
  id=$(container_id "$1") || exit 1
  client=(timeout 120 docker exec "$id" env "TESSERA_SIM_CUDA_DEVICES=$2:$gpu_bytes" /opt/tessera-e2e/bin/tessera_cuda_client)
}

# sim_usage UUID: "PROCESS DEVICE PEAK" bytes of the simulator's accounting of
# UUID, read on the host from the directory the pods share (the oracle).
sim_usage() {
  env -u LD_PRELOAD LD_LIBRARY_PATH="$run/cuda-tools/lib" TESSERA_SIM_CUDA_DIR="$run/cuda-sim" \
    TESSERA_SIM_CUDA_DEVICES="$1:$gpu_bytes" "$run/cuda-tools/bin/tessera_cuda_client" init usage |
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

# The memory-quota library on the kubelet and docker's path: pods on time-sliced
# replicas get it from Allocate (LD_PRELOAD, the library and ledger mounts);
# of two pods on one GPU, the neighbour holds half its quota while the other
# bursts past its own and gets CUDA_ERROR_OUT_OF_MEMORY from the library, sees
# its quota as the device's total memory, and the GPU holds exactly the
# neighbour's memory plus what the burst was allowed (the simulated driver's
# own accounting). A pod whose spec sets its own LD_PRELOAD replaces
# Allocate's (kubelet 1.20 with docker: the later entry wins), yet still runs
# under its quota: /etc/ld.so.preload, mounted by Allocate, loads the library.
scenario_quota() {
  local i p env uuid limit key mounts quota gpu_bytes client=()
  local -A gpu_of=()
  mkdir -p "$run/cuda-tools/bin" "$run/cuda-tools/lib" "$run/cuda-sim"
  cp "$cuda_client" "$run/cuda-tools/bin/tessera_cuda_client"
  cp "$cuda_sim" "$run/cuda-tools/lib/libcuda.so.1"
  # Three pods on two GPUs: two of them share one. A fourth sets its own LD_PRELOAD.
  { for i in 0 1 2; do quota_pod "quota-$i"; echo ---; done; quota_pod quota-own-preload libm.so.6; } |
    kc apply -f - >/dev/null
  four_running() { [[ $(kc get pods -l app=e2e-consumer --field-selector=status.phase=Running -o name | grep -c /quota-) == 4 ]]; }
  wait_for 90 "4 quota pods Running" four_running
  gpu_bytes=$(inventory | jq -r '.gpus[0].memory.total_bytes')
  quota=$(inventory | jq -r '.gpus[0].memory | (.total_bytes - .reserved_bytes) / 4 | floor')
  for p in quota-0 quota-1 quota-2; do
    env=$(container_env "$p")
    uuid=$(env_var "$env" NVIDIA_VISIBLE_DEVICES)
    limit=$(env_var "$env" TESSERA_DEVICE_MEMORY_LIMIT_0)
    key=$(env_var "$env" TESSERA_LEDGER_KEY)
    [[ $(env_var "$env" LD_PRELOAD) == /usr/local/tessera/lib/libtessera-cuda.so ]] ||
      fail "$p: LD_PRELOAD='$(env_var "$env" LD_PRELOAD)', expected Allocate's /usr/local/tessera/lib/libtessera-cuda.so"
    [[ $(env_var "$env" TESSERA_DEVICE_UUID_0) == "$uuid" && $uuid == GPU-* ]] ||
      fail "$p: TESSERA_DEVICE_UUID_0='$(env_var "$env" TESSERA_DEVICE_UUID_0)', NVIDIA_VISIBLE_DEVICES='$uuid'"
    [[ $limit == "$quota" ]] || fail "$p: TESSERA_DEVICE_MEMORY_LIMIT_0='$limit', expected $quota"
    [[ $(env_var "$env" TESSERA_LEDGER_DIR) == /run/tessera/ledger && -n $key ]] ||
      fail "$p: TESSERA_LEDGER_DIR='$(env_var "$env" TESSERA_LEDGER_DIR)', TESSERA_LEDGER_KEY='$key'"
    mounts=$(container_mounts "$p")
    grep -qxF "$run/quota/lib /usr/local/tessera/lib false" <<<"$mounts" ||
      fail "$p: no read-only mount of $run/quota/lib at /usr/local/tessera/lib; mounts: $mounts"
    grep -qxF "$run/quota/ledgers/$key /run/tessera/ledger true" <<<"$mounts" ||
      fail "$p: no read-write mount of $run/quota/ledgers/$key at /run/tessera/ledger; mounts: $mounts"
    grep -qxF "$run/quota/ledgers/ld.so.preload /etc/ld.so.preload false" <<<"$mounts" ||
      fail "$p: no read-only mount of the preload list at /etc/ld.so.preload; mounts: $mounts"
    [[ -f $run/quota/lib/libtessera-cuda.so ]] || fail "the init container did not install libtessera-cuda.so in $run/quota/lib"
    gpu_of[$p]=$uuid
    echo "  $p: $uuid, quota $limit, LD_PRELOAD and both mounts from Allocate, ledger $key"
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
  local out=$run/logs/quota-burst.log
  client_in "$b" "$gpu"
  "${client[@]}" init info "alloc:$first:first" "alloc:$burst:burst" info:after usage >"$out" 2>&1 ||
    { sed 's/^/    /' "$out" >&2; fail "the test client failed in $b"; }
  local during after
  after=$(sim_usage "$gpu")
  touch "$run/cuda-sim/b-done"
  local rc=0
  wait "${pid_of[quota-neighbour]}" || rc=$?
  unset "pid_of[quota-neighbour]"
  ((rc == 0)) || { sed 's/^/    /' "$run/logs/quota-neighbour.log" >&2; fail "the test client in $a exited $rc"; }
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
  expect_step "$run/logs/quota-neighbour.log" "alloc:$hold:hold" 2 0 "$a: half its quota"
  expect_step "$run/logs/quota-neighbour.log" usage:after 3 "$hold" "$a still holds its memory after $b's burst"
  echo "  $b (burst): memory info total $quota free $quota; $first bytes: 0; $burst more: $(step_field "$out" "alloc:$burst:burst" 2) (CUDA_ERROR_OUT_OF_MEMORY)"
  echo "  $b's stderr: $(grep -o 'tessera-cuda.*out of memory: container .*' "$out" | head -1)"
  echo "  device $gpu: $during bytes at most ($a's $hold + $b's $first, quotas $((2 * quota))); $a still holds $hold after $b"

  # Design §7, LD_PRELOAD precedence: the pod's own value wins, the preload list holds.
  local own_env own_gpu own_info
  own_env=$(container_env quota-own-preload)
  own_gpu=$(env_var "$own_env" NVIDIA_VISIBLE_DEVICES)
  echo "  quota-own-preload (spec LD_PRELOAD=libm.so.6): docker's env has $(grep -c '^LD_PRELOAD=' <<<"$own_env") LD_PRELOAD entries: $(grep '^LD_PRELOAD=' <<<"$own_env" | paste -sd' ' -)"
  echo "    its main process has $(tr '\0' '\n' <"/proc/$(docker inspect -f '{{.State.Pid}}' "$(container_id quota-own-preload)")/environ" | grep '^LD_PRELOAD=' | paste -sd' ' -), docker exec gives LD_PRELOAD='$(docker exec "$(container_id quota-own-preload)" printenv LD_PRELOAD)'"
  client_in quota-own-preload "$own_gpu"
  own_info=$("${client[@]}" init info 2>/dev/null | awk '$1 == "info" {print $2, $3, $4}')
  echo "    its memory info (code free total): $own_info (quota $quota, card $gpu_bytes)"
  [[ $own_info == "0 $quota $quota" ]] ||
    fail "quota-own-preload: memory info '$own_info', expected '0 $quota $quota': /etc/ld.so.preload did not load the library"
}

# MPS from the kubelet's side: the mps overlay, whose plugin runs one control
# daemon per GPU (here the simulated nvidia-cuda-mps-control the image
# carries, as the plugin's children in its container). Each GPU's daemon is
# up under the run's mpsRoot with CUDA_VISIBLE_DEVICES = the GPU's UUID and one
# share's limits (the simulator's state file records what it was told); pods
# get replicas whose environment names the daemon's pipe directory and the
# same limits, with that directory mounted. A GPU whose daemon is SIGKILLed
# (and again whenever the plugin restarts it, until the Node shows the drop:
# a single kill can be mended between two node-status updates) loses its
# replicas from the Node's allocatable; they come back once the daemon is let
# live and the plugin has restarted it.
mps_share() {  # mps_share: "RESOURCE REPLICAS" of the mps overlay's config, as tessera reads it
  "$tessera" config validate -f "$repo/deploy/overlays/mps/device-plugin-config.yaml" |
    sed -n 's|^ *nvidia.com/gpu x\([0-9]*\) -> \([^ ]*\).*|\2 \1|p'
}

mps_daemon_pid() {  # mps_daemon_pid UUID: the pid (in tessera's container) its daemon wrote
  cat "$run/mps/$1/pipe/nvidia-cuda-mps-control.pid" 2>/dev/null
}

mps_daemon_alive() {  # mps_daemon_alive UUID: its daemon's pid is a live process in tessera's container
  local pid
  pid=$(mps_daemon_pid "$1") && [[ -n $pid ]] && docker exec "$(plugin_container)" sh -c "kill -0 $pid" 2>/dev/null
}

scenario_mps() {
  local resource replicas
  read -r resource replicas < <(mps_share) || true
  [[ -n $resource && $replicas -gt 0 ]] || fail "cannot read the mps overlay's resource and replicas from tessera config validate"
  kc delete pods -l app=e2e-consumer --wait=false >/dev/null
  wait_for 60 "the consumer pods to go away" no_consumers
  deploy_overlay mps
  local gpus total
  gpus=$(inventory | jq -r '.gpus[].uuid')
  total=$(($(wc -l <<<"$gpus") * replicas))
  expect_resource 120 "$resource" "$total"
  echo "  capacity $resource: $(node_field capacity "$resource") ($replicas per GPU)"
  [[ $(kc -n tessera get ds tessera -o jsonpath='{.spec.template.spec.hostIPC}') == true ]] ||
    fail "tessera's DaemonSet does not run in the host's IPC namespace"

  # One share: the usable memory (total less what the driver reserves) over the
  # replicas, in whole MiB, and 100/replicas percent of the threads.
  local share mib percent
  share=$(inventory | jq -r --argjson n "$replicas" '.gpus[0].memory | (.total_bytes - .reserved_bytes) / $n | floor')
  mib=$((share >> 20)) percent=$((100 / replicas))
  local uuid state pid plugin
  plugin=$(plugin_container)
  local -A pid_of_gpu=()
  for uuid in $gpus; do
    state=$run/mps/$uuid/pipe/tessera-sim-mps.json
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
    echo "  $uuid: daemon pid $pid in tessera's container, CUDA_VISIBLE_DEVICES=$uuid, pinned memory ${mib}M, threads $percent%"
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
    uuid=$(env_var "$env" NVIDIA_VISIBLE_DEVICES)
    grep -qxF "$uuid" <<<"$gpus" || fail "$p: NVIDIA_VISIBLE_DEVICES='$uuid' is not a GPU of the node"
    [[ $(env_var "$env" CUDA_MPS_PIPE_DIRECTORY) == "$pipe" ]] ||
      fail "$p: CUDA_MPS_PIPE_DIRECTORY='$(env_var "$env" CUDA_MPS_PIPE_DIRECTORY)', expected $pipe"
    [[ $(env_var "$env" CUDA_MPS_PINNED_DEVICE_MEM_LIMIT) == "0=${mib}M" ]] ||
      fail "$p: CUDA_MPS_PINNED_DEVICE_MEM_LIMIT='$(env_var "$env" CUDA_MPS_PINNED_DEVICE_MEM_LIMIT)', expected 0=${mib}M"
    [[ $(env_var "$env" CUDA_MPS_ACTIVE_THREAD_PERCENTAGE) == "$(want "$percent")" ]] ||
      fail "$p: CUDA_MPS_ACTIVE_THREAD_PERCENTAGE='$(env_var "$env" CUDA_MPS_ACTIVE_THREAD_PERCENTAGE)', expected $(want "$percent")"
    mounts=$(container_mounts "$p")
    grep -qxF "$run/mps/$uuid/pipe $pipe true" <<<"$mounts" ||
      fail "$p: no mount of $uuid's pipe directory $run/mps/$uuid/pipe at $pipe; mounts: $mounts"
    grep -qxF "$run/mps/shm /dev/shm true" <<<"$mounts" ||
      fail "$p: no mount of $run/mps/shm at /dev/shm; mounts: $mounts"
    # What the pod sees there is the running daemon's own directory.
    [[ $(docker exec "$(container_id "$p")" cat "$pipe/nvidia-cuda-mps-control.pid") == "${pid_of_gpu[$uuid]}" ]] ||
      fail "$p: $pipe/nvidia-cuda-mps-control.pid in the pod does not name $uuid's daemon (${pid_of_gpu[$uuid]})"
    gpu_of[$p]=$uuid
    echo "  $p: $uuid, CUDA_MPS_PIPE_DIRECTORY=$pipe (its daemon's, mounted), CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=${mib}M, CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=$percent"
  done

  # The daemon of mps-0's GPU dies, and keeps dying until the Node shows it.
  local gpu=${gpu_of[mps-0]} stop=$run/mps/e2e-stop-killing t down_ms up_ms old
  old=${pid_of_gpu[$gpu]}
  t=$(now_ms)
  docker exec -d "$plugin" sh -c "while [ ! -e $stop ]; do p=\$(cat $run/mps/$gpu/pipe/nvidia-cuda-mps-control.pid 2>/dev/null) && kill -KILL \"\$p\" 2>/dev/null; sleep 0.05; done"
  expect_allocatable 30 "$resource" $((total - replicas))
  down_ms=$(($(now_ms) - t))
  touch "$stop"
  echo "  $gpu's daemon (pid $old) SIGKILLed: allocatable $resource $total -> $((total - replicas)) in $down_ms ms"
  t=$(now_ms)
  expect_allocatable 60 "$resource" "$total"
  up_ms=$(($(now_ms) - t))
  wait_for 10 "the restarted daemon of $gpu" mps_daemon_alive "$gpu"
  pid=$(mps_daemon_pid "$gpu")
  state=$run/mps/$gpu/pipe/tessera-sim-mps.json
  [[ $pid != "$old" && $(jq -r '.default_device_pinned_mem_limits["0"].value' "$state") == "${mib}M" &&
     $(jq -r .default_active_thread_percentage "$state") == "$percent" ]] ||
    fail "$gpu: the daemon now is pid $pid (was $old) with limits $(jq -c '[.default_device_pinned_mem_limits, .default_active_thread_percentage]' "$state")"
  echo "  killing stopped: the plugin restarted it (pid $pid, same limits), allocatable back to $total in $up_ms ms"
  echo "  the plugin's log: $(docker logs "$plugin" 2>&1 | grep -c "MPS daemon for $gpu .* is down") 'down', $(docker logs "$plugin" 2>&1 | grep -c "MPS daemon for $gpu .* is up") 'up' lines for $gpu; last: $(docker logs "$plugin" 2>&1 | grep "MPS daemon for $gpu .* is down" | tail -1 | sed 's/.*is down: //')"
}

# The exporter beside the plugin (the metrics Component over the mig-mixed
# overlay, see metrics_patches): Ready through its /healthz, on loopback only,
# behind the Service's endpoint. Three pods in their own namespace get a
# 1g.20gb MIG device each; /metrics, scraped from the host, shows each pod's
# device (its GPU's UUID and its GPU_I_ID, as inventory maps its MIG UUID)
# with that pod's pod, namespace and container labels, on every series of
# that device; no other series has a pod label (the other five MIG devices
# and both GPUs carry none), and Hostname is the Node's name.
readonly METRICS_NS=e2e-metrics
metrics_text() {  # metrics_text: the exporter's /metrics, scraped from the host
  python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
    "http://127.0.0.1:$exporter_port/metrics"
}

# check_attribution EXPECTED-FILE METRICS-FILE: EXPECTED holds "UUID GPU_I_ID
# POD" per held MIG device. Prints one line per device's memory series; exits
# 1 naming the first series that breaks the rules above.
check_attribution() {
  python3 - "$1" "$2" "$METRICS_NS" "$NODE" <<'PY'
import re, sys
expected_file, metrics_file, ns, node = sys.argv[1:]
held = {}
for line in open(expected_file):
    uuid, gi, pod = line.split()
    held[(uuid, gi)] = pod
label_re = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
series = []
for line in open(metrics_file):
    m = re.match(r'^(\w+)\{(.*)\} (\S+)$', line.strip())
    if m:
        series.append((m.group(1), dict(label_re.findall(m.group(2))), m.group(3)))
problems, fb, labelled = [], [], set()
for name, labels, value in series:
    if "UUID" not in labels:
        continue
    key = (labels["UUID"], labels.get("GPU_I_ID", ""))
    where = f'{name}{{UUID="{key[0]}", GPU_I_ID="{key[1]}"}}'
    if labels.get("Hostname") != node:
        problems.append(f'{where}: Hostname="{labels.get("Hostname")}", expected the Node\'s name {node}')
    pod = held.get(key)
    got = (labels.get("pod"), labels.get("namespace"), labels.get("container"))
    if pod is not None:
        if got != (pod, ns, "cuda"):
            problems.append(f"{where}: pod, namespace, container {got}, expected {(pod, ns, 'cuda')}")
        labelled.add(key)
    elif any(got):
        problems.append(f"{where}: no pod holds this device, yet it has pod, namespace, container {got}")
    if name == "DCGM_FI_DEV_FB_USED":
        fb.append(f'  {labels.get("GPU_I_PROFILE", "whole GPU"):10} UUID={key[0]} GPU_I_ID={key[1] or "-"}: '
                  + (f"pod={got[0]} namespace={got[1]} container={got[2]}" if any(got) else "no pod label")
                  + f" ({value} MiB used)")
for key, pod in held.items():
    if key not in labelled:
        problems.append(f"no series of UUID={key[0]} GPU_I_ID={key[1]} (pod {pod})")
print("\n".join(sorted(fb)))
print(f"labelled devices: {len(labelled)}")
if problems:
    print("\n".join(problems[:10]), file=sys.stderr)
    sys.exit(1)
PY
}

scenario_metrics() {
  kc delete pods -l app=e2e-consumer --wait=false >/dev/null
  wait_for 60 "the consumer pods to go away" no_consumers
  exporter_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  local t=$SECONDS
  deploy_overlay mig-mixed metrics
  expect_resource 120 nvidia.com/mig-1g.20gb 8
  exporter_ready() {
    [[ $(kc -n tessera get pods -l app.kubernetes.io/name=tessera \
           -o jsonpath='{.items[*].status.containerStatuses[?(@.name=="exporter")].ready}') == true ]]
  }
  wait_for 90 "tessera's exporter container to be Ready (its /healthz)" exporter_ready
  local wide
  wide=$(ss -Hltn "sport = :$exporter_port" | awk '$4 !~ /^127\.0\.0\.1:/')
  [[ -z $wide && -n $(ss -Hltn "sport = :$exporter_port") ]] ||
    fail "the exporter should listen on 127.0.0.1:$exporter_port alone: $(ss -Hltn "sport = :$exporter_port" | tr '\n' ' ')"
  endpoint_port() { [[ $(kc -n tessera get endpoints tessera-exporter -o jsonpath='{.subsets[0].ports[0].port}') == "$exporter_port" ]]; }
  wait_for 30 "the tessera-exporter Service's endpoint on port $exporter_port" endpoint_port
  echo "  exporter Ready $((SECONDS - t)) s after the deploy on 127.0.0.1:$exporter_port, the Service's endpoint $(kc -n tessera get endpoints tessera-exporter -o jsonpath='{.subsets[0].addresses[0].ip}'):$exporter_port"

  kc apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: $METRICS_NS}
EOF
  local i p env uuid where expected=$run/metrics-expected.txt scraped=$run/metrics.txt
  for i in 0 1 2; do pod "metrics-$i" nvidia.com/mig-1g.20gb 1 | sed "s/namespace: default/namespace: $METRICS_NS/"; echo ---; done |
    kc apply -f - >/dev/null
  three_running() { [[ $(kc -n $METRICS_NS get pods --field-selector=status.phase=Running -o name | wc -l) == 3 ]]; }
  wait_for 90 "3 pods Running in $METRICS_NS" three_running
  : >"$expected"
  for p in metrics-0 metrics-1 metrics-2; do
    env=$(container_env "$p")
    uuid=$(env_var "$env" NVIDIA_VISIBLE_DEVICES)
    where=$(inventory | jq -r --arg u "$uuid" '.gpus[] | .uuid as $g | .mig_devices[] | select(.uuid == $u) | "\($g) \(.gpu_instance)"')
    [[ -n $where ]] || fail "$p: NVIDIA_VISIBLE_DEVICES='$uuid' is not a MIG device in tessera inventory"
    echo "$where $p" >>"$expected"
    echo "  $METRICS_NS/$p: $uuid = GPU $(cut -d' ' -f1 <<<"$where") GPU instance $(cut -d' ' -f2 <<<"$where")"
  done
  # The exporter reads pod-resources every interval (1 s here).
  attributed() { metrics_text >"$scraped" && check_attribution "$expected" "$scraped" >/dev/null; }
  local deadline=$((SECONDS + 30))
  until attributed; do
    ((SECONDS < deadline)) || { check_attribution "$expected" "$scraped" >&2; fail "the exporter's series do not name the pods as expected after 30 s"; }
    sleep 0.5
  done
  local out
  out=$(check_attribution "$expected" "$scraped")
  grep -v '^labelled devices:' <<<"$out"
  [[ $(sed -n 's/^labelled devices: //p' <<<"$out") == "$(want 3)" ]] ||
    fail "$(sed -n 's/^labelled devices: //p' <<<"$out") devices have pod labels, expected $(want 3)"
  echo "  $(grep -c . "$scraped") lines scraped; every series of a held device names its pod, no other has a pod label"
}

# ------------------------------------------------------------ node agent
# tessera node from deploy/overlays/gpu-node-mig (the agent with the
# mig-manager component), with what the test node needs instead of a GPU and
# the NVIDIA runtime: the simulated node, the host's network, the API server
# at 127.0.0.1:16443 for its service account (KUBERNETES_SERVICE_HOST/_PORT;
# the token and the CA come from the service account's secret), no privileges
# and no runtime class, the kubelet's directories under the run, and a MIG
# config of the scenario's own.
readonly AGENT_EVICTION_TIMEOUT=20
agent_overlay() {
  local dir=$run/overlays/node-agent
  mkdir -p "$dir"
  cat >"$dir/mig-config.yaml" <<'EOF'
version: v1
mig-configs:
  all-1g.20gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.20gb": 4}
  # GPU 0: a 3g.40gb where two 1g.20gb were; GPU 1 as it is.
  e2e-mixed:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"3g.40gb": 1, "1g.20gb": 2}
    - devices: [1]
      mig-enabled: true
      mig-devices: {"1g.20gb": 4}
  # Five 1g.20gb do not fit an A100-80GB (four memory pairs).
  e2e-impossible:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.20gb": 5}
EOF
  cat >"$dir/kustomization.yaml" <<EOF
resources:
- $(realpath --relative-to="$dir" "$repo/deploy/overlays/gpu-node-mig")
patches:
- path: simulated-node.yaml
generatorOptions:
  disableNameSuffixHash: true
configMapGenerator:
- name: tessera-mig-config
  namespace: tessera
  behavior: replace
  files:
  - config.yaml=mig-config.yaml
EOF
  cat >"$dir/simulated-node.yaml" <<EOF
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: tessera, namespace: tessera}
spec:
  template:
    spec:
      hostNetwork: true  # the test node has no CNI
      runtimeClassName: null  # no NVIDIA runtime: the simulated node is mounted
      containers:
      - name: node-agent
        command: ["tessera", "node", "--config", "/etc/tessera/device-plugin/config.yaml",
                  "--mig-config", "/etc/tessera/mig/config.yaml", "--state-dir", "/var/lib/tessera",
                  "--kubelet-dir", "/var/lib/kubelet/device-plugins",
                  "--pod-resources", "$run/kubelet/pod-resources/kubelet.sock",
                  "--health-recovery", "5", "--eviction-timeout", "$AGENT_EVICTION_TIMEOUT",
                  "--quota-library-dir", "$run/quota/lib", "--quota-ledger-root", "$run/quota/ledgers"]
        securityContext:
          \$patch: replace
          allowPrivilegeEscalation: false
          capabilities: {drop: ["ALL"]}
        env:
        - {name: TESSERA_SIM, value: /var/lib/tessera-sim}
        - {name: KUBERNETES_SERVICE_HOST, value: 127.0.0.1}
        - {name: KUBERNETES_SERVICE_PORT, value: "16443"}
        volumeMounts:
$(sim_mounts)
        - {name: pod-resources, mountPath: "$run/kubelet/pod-resources", readOnly: true}
        - {mountPath: /var/lib/kubelet/pod-resources, \$patch: delete}
      volumes:
$(sim_volumes)
      - {name: pod-resources, hostPath: {path: "$run/kubelet/pod-resources", type: Directory}}
EOF
  echo "$dir"
}

node_label() { kc get node $NODE -o jsonpath="{.metadata.labels.${1//./\\.}}"; }
relabel() { kc label node $NODE --overwrite "nvidia.com/mig.config=$1" >/dev/null; }
state_is() { [[ $(node_label nvidia.com/mig.config.state) == "$1" ]]; }
label_is() { [[ $(node_label "$1") == "$2" ]]; }
agent_container_restarts() {
  kc -n tessera get pods -l app.kubernetes.io/name=tessera \
    -o jsonpath='{.items[0].status.containerStatuses[?(@.name=="node-agent")].restartCount}'
}
consumer_pods() {  # "name uid restarts" per e2e pod, sorted
  kc get pods -l app=e2e-consumer \
    -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.uid} {.status.containerStatuses[0].restartCount}{"\n"}{end}' | sort
}
node_events() {  # node_events REASON: the messages of the Node's Events with REASON
  kc get events -n default --field-selector "involvedObject.name=$NODE,reason=$1" -o jsonpath='{.items[*].message}'
}
pod_gone() { [[ -z $(kc get pod "$1" -o name 2>/dev/null) ]]; }

scenario_node-agent() {
  kc delete pods -l app=e2e-consumer --wait=false >/dev/null
  kc delete namespace "$METRICS_NS" --wait=false >/dev/null 2>&1 || true
  wait_for 60 "no e2e pods" no_consumers
  kc -n tessera delete daemonset tessera --wait=true >/dev/null 2>&1 || true
  relabel all-1g.20gb
  kc label node $NODE nvidia.com/mig.config.state- >/dev/null 2>&1 || true
  kc apply -k "$(agent_overlay)" >/dev/null || fail "kubectl apply -k of the node-agent overlay failed"
  wait_for 120 "the agent to apply all-1g.20gb (mig.config.state=success)" state_is success
  expect_resource 60 nvidia.com/mig-1g.20gb 8
  # GPU feature discovery's labels, written by the agent.
  wait_for 30 "Node label nvidia.com/mig.strategy=mixed" label_is nvidia.com/mig.strategy mixed
  wait_for 30 "Node label nvidia.com/mig-1g.20gb.count=8" label_is nvidia.com/mig-1g.20gb.count 8
  local product
  product=$(node_label nvidia.com/gpu.product)
  [[ -n $product ]] || fail "the agent wrote no nvidia.com/gpu.product label"
  echo "  all-1g.20gb: success; labels mig.strategy=mixed, mig-1g.20gb.count=8, gpu.product=$product"
  # The API server authorizes with RBAC: the agent did all that with deploy/base/rbac.yaml, and
  # that role grants no more than it uses.
  local sa=system:serviceaccount:tessera:tessera verb
  for verb in "patch nodes" "watch nodes" "create pods --subresource=eviction" "create events"; do
    [[ $(kc auth can-i $verb --as=$sa 2>/dev/null) == yes ]] || fail "the agent's service account may not $verb"
  done
  for verb in "delete pods" "list pods" "get secrets" "patch nodes --subresource=status" "delete nodes"; do
    [[ $(kc auth can-i $verb --as=$sa 2>/dev/null) == no ]] || fail "the agent's service account may $verb"
  done
  ! docker logs "$(plugin_container)" 2>&1 | grep -q 'HTTP 403' || fail "the API server refused the agent a call (403)"
  echo "  RBAC: the agent's role allows its calls and not delete pods, list pods, secrets, nodes/status"

  # One pod on each 1g.20gb device. e2e-mixed puts a 3g.40gb on GPU 0 where
  # two of them are: the pods on those two must leave, the other six stay.
  local i
  for i in $(seq 0 7); do pod "agent-$i" nvidia.com/mig-1g.20gb 1; echo ---; done | kc apply -f - >/dev/null
  wait_for 120 "8 pods Running" eval '[[ $(pods_in_phase Running) == 8 ]]'
  local before holders restarts watcher t0 took
  before=$(consumer_pods)
  holders=$(pod_resources | jq -r '.[] | "\(.pod) \(.devices[0])"')
  restarts=$(agent_container_restarts)
  kubectl --request-timeout=0 get node $NODE -w -o jsonpath='{.metadata.labels.nvidia\.com/mig\.config\.state}{"\n"}' \
    >"$run/logs/state-watch.log" 2>/dev/null &
  watcher=$!
  t0=$(now_ms)
  relabel e2e-mixed
  wait_for 90 "mig.config.state=success after relabelling to e2e-mixed" eval 'grep -qx pending "$run/logs/state-watch.log" && state_is success'
  expect_resource 60 nvidia.com/mig-3g.40gb 1
  expect_resource 60 nvidia.com/mig-1g.20gb "$(want 6)"
  took=$(($(now_ms) - t0))
  kill "$watcher" 2>/dev/null || true
  [[ $(grep -v '^$' "$run/logs/state-watch.log" | tr '\n' ' ') == *pending*success* ]] ||
    fail "mig.config.state went '$(tr '\n' ' ' <"$run/logs/state-watch.log")', expected pending, then success"
  # The pods whose devices the change destroyed: exactly two, and gone.
  local present doomed=() p uuid
  present=$(inventory | jq -r '.gpus[].mig_devices[].uuid')
  while read -r p uuid; do grep -qx "$uuid" <<<"$present" || doomed+=("$p"); done <<<"$holders"
  ((${#doomed[@]} == 2)) || fail "expected the change to destroy the devices of 2 pods, it destroyed those of: ${doomed[*]}"
  for p in "${doomed[@]}"; do wait_for 60 "evicted pod $p to go" pod_gone "$p"; done
  local after expected
  after=$(consumer_pods)
  expected=$(grep -v -E "^($(IFS='|'; echo "${doomed[*]}")) " <<<"$before")
  [[ $after == "$expected" ]] || fail "the pods on kept devices changed: expected '$expected', found '$after'"
  [[ $(agent_container_restarts) == "$restarts" ]] || fail "tessera node's container restarted during the change"
  wait_for 30 "Node label nvidia.com/mig-3g.40gb.count=1" label_is nvidia.com/mig-3g.40gb.count 1
  wait_for 30 "Node label nvidia.com/mig-1g.20gb.count=6" label_is nvidia.com/mig-1g.20gb.count 6
  node_events MigConfigApplied | grep -q "e2e-mixed applied" || fail "no MigConfigApplied Event on the Node for e2e-mixed"
  echo "  e2e-mixed: pending -> success, new capacity in $took ms; evicted ${doomed[*]}; 6 pods untouched (UIDs, restarts)"

  # A config the GPUs cannot hold: failed, an Event saying why, capacity as it was.
  relabel e2e-impossible
  wait_for 60 "mig.config.state=failed for e2e-impossible" state_is failed
  node_events MigConfigFailed | grep -q "e2e-impossible" || fail "no MigConfigFailed Event on the Node naming e2e-impossible"
  expect_resource 30 nvidia.com/mig-3g.40gb 1
  expect_resource 30 nvidia.com/mig-1g.20gb 6
  [[ $(consumer_pods) == "$after" ]] || fail "a change that failed disturbed pods"
  echo "  e2e-impossible: failed, with an Event; capacity and pods as they were"

  # An unknown name: failed at once, the Event naming it.
  relabel all-1g.2gb
  wait_for 60 "mig.config.state=failed for an unknown name" eval 'node_events MigConfigFailed | grep -q "no config named .all-1g.2gb"'
  state_is failed || fail "mig.config.state is '$(node_label nvidia.com/mig.config.state)' for an unknown name, expected failed"
  echo "  all-1g.2gb (unknown): failed, with an Event naming it"

  # The API server dies (SIGKILL: no goodbye to the agent's watch) and comes
  # back; the agent carries on and takes the next label.
  kill -KILL "${pid_of[kube-apiserver]}"
  wait "${pid_of[kube-apiserver]}" 2>/dev/null || true
  unset "pid_of[kube-apiserver]"
  sleep 3
  start kube-apiserver "$kube_bin/kube-apiserver" "${apiserver_args[@]}"
  wait_for 60 "the API server again" kc get --raw /readyz
  kc delete pods -l app=e2e-consumer --wait=false >/dev/null
  wait_for 60 "no e2e pods" no_consumers
  relabel all-1g.20gb
  wait_for 120 "mig.config.state=success after the API server restarted" state_is success
  expect_resource 60 nvidia.com/mig-1g.20gb 8
  [[ $(agent_container_restarts) == "$restarts" ]] || fail "tessera node's container restarted with the API server"
  wait_for 30 "Node label nvidia.com/mig-3g.40gb.count gone" label_is nvidia.com/mig-3g.40gb.count ""
  echo "  API server killed and restarted: the agent applied all-1g.20gb after it, without restarting; stale labels removed"
}

# What each scenario needs done before it, for --only.
declare -A NEEDS=([mig-pods]=mig-capacity [pod-resources]="mig-capacity mig-pods"
                  [kubelet-restart]=mig-capacity [xid-79]=mig-capacity [quota]=time-slicing)
# mps and metrics deploy their own overlays and need nothing before them.
selected=" ${only//,/ } "
for s in ${only//,/ }; do selected+="${NEEDS[$s]:-} "; done
for s in "${SCENARIOS[@]}"; do
  [[ -z $only || $selected == *" $s "* ]] || continue
  current=$s
  t=$SECONDS
  say "scenario $s"
  "scenario_$s"
  say "scenario $s passed in $((SECONDS - t)) s"
  timings+=("$(printf '  %-16s %4d s' "$s" $((SECONDS - t)))")
done
current=done
say "all scenarios passed (cluster up in $cluster_s s)"
printf '%s\n' "${timings[@]}"
