# A Kubernetes cluster on one machine, on loopback and a private bridge:
# etcd, kube-apiserver, kube-controller-manager and kube-scheduler on
# 127.0.0.1, and N nodes, each a containerd and a kubelet in a mount namespace
# of its own over a simulated GPU node. Sourced by tests/e2e/cluster.sh and
# tests/e2e/run.sh, after lib/common.sh; needs E2E_STATE (the cluster's
# directory), PEERS (tests/e2e/build-peers.sh's bin directory) and TESSERA
# (a built tessera).
#
# A node is a mount namespace held by one process, in which /var/lib/kubelet,
# /var/run/cdi, /etc/cdi, /var/log/pods and /run/containerd are the node's own
# directories (the kubelet's device-plugin directory is fixed at
# /var/lib/kubelet/device-plugins, so several kubelets on one machine need
# this), an address on the bridge (its kubelet listens there, its pods'
# addresses come from its own range), and a cgroup subtree that holds every
# pod it runs. Stopping a node kills what is in its cgroups, then its
# containerd and the holder: its mounts go with the namespace.

readonly E2E_BRIDGE=te2e0
readonly E2E_BRIDGE_CIDR=10.88.0.1/16
readonly ETCD_PORTS=(12379 12380 12381)
readonly APISERVER_PORT=16443
readonly CGROUP_BASE=${E2E_CGROUP_BASE:-tessera-e2e}
# Host directories each node namespace mounts its own over (the node's
# directory of the same index in NODE_DIRS); created on the host, and removed
# again, only when missing. The kubelet's, containerd's and the CDI specs'
# paths, the simulated GPUs' (as a real node's driver root), and tessera's
# host paths in deploy/ (state, quota library and ledgers, the MPS root).
readonly NODE_MOUNT_POINTS=(/var/lib/kubelet /var/run/cdi /etc/cdi /var/log/pods /run/containerd
                            /var/lib/tessera-sim /var/lib/tessera /run/nvidia)
readonly NODE_DIRS=(kubelet cdi-run cdi-etc pods-log containerd-run sim tessera run-nvidia)

node_ip() { echo "10.88.0.$((10 + $1))"; }  # node_ip INDEX (1-based)
node_dir() { echo "$E2E_STATE/nodes/$1"; }
node_names() { [[ -d $E2E_STATE/nodes ]] && ls "$E2E_STATE/nodes"; }
node_holder() { pid_of "node-$1-ns"; }
# node_exec NODE COMMAND...: run in the node's mount namespace.
node_exec() { local h; h=$(node_holder "$1"); shift; nsenter --mount="/proc/$h/ns/mnt" -- "$@"; }
# node_ctr NODE ARGS...: containerd's own client on the node (its warning about cgroup v1 dropped).
node_ctr() {
  local n=$1
  shift
  node_exec "$n" "$PEERS/ctr" --address "$(node_dir "$n")/containerd.sock" -n k8s.io "$@" \
    2> >(grep -v 'The support for cgroup v1 is deprecated' >&2)
}
kc() { "$PEERS/kubectl" --kubeconfig "$E2E_STATE/kubeconfig" --request-timeout=20s "$@"; }

# ---------------------------------------------------------------- certificates
pki_make() {
  local d=$E2E_STATE/pki
  mkdir -p "$d"
  openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj /CN=tessera-e2e-ca \
    -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
  openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
  pki_cert apiserver kube-apiserver "" serverAuth \
    "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default.svc"
  # The API server's identity to the kubelets (exec, logs, port-forward).
  pki_cert apiserver-kubelet-client kube-apiserver-kubelet-client system:masters clientAuth
}

# pki_cert NAME CN ORG USAGE [SAN]: a key and a certificate from the run's CA.
pki_cert() {
  local d=$E2E_STATE/pki name=$1 cn=$2 org=$3 usage=$4 san=${5:-}
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$cn${org:+/O=$org}" \
    -keyout "$d/$name.key" -out "$d/$name.csr" 2>/dev/null
  openssl x509 -req -in "$d/$name.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 7 \
    -out "$d/$name.crt" -extfile <(printf '%s\n' ${san:+"subjectAltName=$san"} 'basicConstraints=CA:FALSE' \
      'keyUsage=digitalSignature,keyEncipherment' "extendedKeyUsage=$usage") 2>/dev/null
  rm -f "$d/$name.csr"
}

# kubeconfig FILE USER-YAML: one cluster (the API server, the run's CA), one user.
kubeconfig() {
  cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: tessera-e2e, cluster: {server: "https://127.0.0.1:$APISERVER_PORT", certificate-authority: "$E2E_STATE/pki/ca.crt"}}]
users: [{name: user, user: $2}]
contexts: [{name: tessera-e2e, context: {cluster: tessera-e2e, user: user}}]
current-context: tessera-e2e
EOF
}

# ---------------------------------------------------------------- preflight
cluster_preflight() {
  [[ $(id -u) -eq 0 ]] || die "needs root (it runs containerd and kubelets, and makes a bridge)"
  local t port
  for t in openssl runc nsenter unshare setsid ip findmnt ss python3; do
    command -v $t >/dev/null || die "$t is missing (run scripts/setup.sh --e2e)"
  done
  [[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] ||
    die "the CNI plugins are missing from /usr/lib/cni (run scripts/setup.sh --e2e)"
  ! ip link show "$E2E_BRIDGE" >/dev/null 2>&1 ||
    die "bridge $E2E_BRIDGE exists: a tessera test cluster is up on this machine (./x cluster down stops it)"
  for port in "${ETCD_PORTS[@]}" "$APISERVER_PORT"; do
    ! ss -Hltn "sport = :$port" | grep -q . || die "port $port is in use; the test cluster needs it on 127.0.0.1"
  done
  [[ ! -d /sys/fs/cgroup/pids/$CGROUP_BASE && ! -d /sys/fs/cgroup/$CGROUP_BASE ]] ||
    die "cgroup $CGROUP_BASE exists: a tessera test cluster is up, or one was killed before it stopped (./x cluster down)"
}

# ---------------------------------------------------------------- control plane
# apiserver_start: the API server (again, after a scenario killed it), ready.
apiserver_start() {
  local p=$E2E_STATE/pki etcd_url=http://127.0.0.1:${ETCD_PORTS[0]}
  # Node authorization and NodeRestriction: each kubelet is system:node:<name>
  # and may touch only its own Node and pods, as on a real cluster.
  start kube-apiserver "$PEERS/kube-apiserver" --etcd-servers="$etcd_url" \
    --bind-address=127.0.0.1 --secure-port=$APISERVER_PORT --cert-dir="$E2E_STATE/apiserver" \
    --advertise-address="${E2E_BRIDGE_CIDR%/*}" \
    --tls-cert-file="$p/apiserver.crt" --tls-private-key-file="$p/apiserver.key" --client-ca-file="$p/ca.crt" \
    --token-auth-file="$E2E_STATE/tokens.csv" --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --allow-privileged=true --service-account-key-file="$p/sa.key" --service-account-signing-key-file="$p/sa.key" \
    --service-account-issuer=https://kubernetes.default.svc --service-cluster-ip-range=10.0.0.0/24 \
    --kubelet-client-certificate="$p/apiserver-kubelet-client.crt" --kubelet-client-key="$p/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types=InternalIP
  wait_until 90 "the API server" kc get --raw /readyz
}

control_plane_up() {
  mkdir -p "$E2E_STATE"/{logs,pids}
  pki_make
  local token
  token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
  echo "$token,admin,admin,system:masters" >"$E2E_STATE/tokens.csv"
  kubeconfig "$E2E_STATE/kubeconfig" "{token: \"$token\"}"

  local etcd_url=http://127.0.0.1:${ETCD_PORTS[0]}
  start etcd "$PEERS/etcd" --name tessera-e2e --data-dir "$E2E_STATE/etcd" \
    --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
    --listen-peer-urls "http://127.0.0.1:${ETCD_PORTS[1]}" --initial-advertise-peer-urls "http://127.0.0.1:${ETCD_PORTS[1]}" \
    --initial-cluster "tessera-e2e=http://127.0.0.1:${ETCD_PORTS[1]}" --listen-metrics-urls "http://127.0.0.1:${ETCD_PORTS[2]}"
  apiserver_start
  local p=$E2E_STATE/pki
  start kube-controller-manager "$PEERS/kube-controller-manager" --kubeconfig="$E2E_STATE/kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=0 --leader-elect=false --service-account-private-key-file="$p/sa.key" \
    --root-ca-file="$p/ca.crt" --use-service-account-credentials=false --controllers='*,-nodeipam'
  start kube-scheduler "$PEERS/kube-scheduler" --kubeconfig="$E2E_STATE/kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=0 --leader-elect=false
  # The default service account exists once the controller manager runs.
  wait_until 60 "the default service account" kc get serviceaccount default
}

# ---------------------------------------------------------------- nodes
bridge_up() {
  ip link add "$E2E_BRIDGE" type bridge
  ip addr add "$E2E_BRIDGE_CIDR" dev "$E2E_BRIDGE"
  ip link set "$E2E_BRIDGE" up
  service_proxy up
}

# The kubernetes Service for pods. The cluster runs no kube-proxy; one DNAT
# rule sends what pods send to the Service's address (the first of
# --service-cluster-ip-range, which the kubelet gives every container as
# KUBERNETES_SERVICE_HOST, port 443) to the API server on the host's
# loopback, so in-cluster clients (tessera's agents) reach it as on any
# cluster, with their service accounts. route_localnet lets the bridge's
# packets be delivered to 127.0.0.1.
readonly KUBERNETES_SERVICE_IP=10.0.0.1
service_proxy_rule() {
  echo -i "$E2E_BRIDGE" -d "$KUBERNETES_SERVICE_IP/32" -p tcp --dport 443 -m comment --comment "tessera-e2e" \
    -j DNAT --to-destination "127.0.0.1:$APISERVER_PORT"
}
service_proxy() {  # service_proxy up|down
  local rule
  read -ra rule <<<"$(service_proxy_rule)"
  if [[ $1 == up ]]; then
    sysctl -qw "net.ipv4.conf.$E2E_BRIDGE.route_localnet=1"
    iptables -t nat -A PREROUTING "${rule[@]}"
  else
    while iptables -t nat -D PREROUTING "${rule[@]}" 2>/dev/null; do :; done
  fi
}

# cgroup_dirs NODE: the node's cgroup directory in each mounted hierarchy.
cgroup_dirs() {
  local h
  for h in /sys/fs/cgroup/*/ /sys/fs/cgroup/; do
    [[ -f $h/cgroup.procs ]] || continue
    echo "${h%/}/$CGROUP_BASE/$1"
  done
}

cgroups_make() {  # cgroups_make NODE
  local d parent
  while read -r d; do
    parent=$(dirname "$d")
    mkdir -p "$d"
    if [[ -f $parent/cpuset.cpus ]]; then  # cgroup v1 cpuset: a new group starts empty
      cat "$(dirname "$parent")/cpuset.cpus" >"$parent/cpuset.cpus" 2>/dev/null || true
      cat "$(dirname "$parent")/cpuset.mems" >"$parent/cpuset.mems" 2>/dev/null || true
      cat "$parent/cpuset.cpus" >"$d/cpuset.cpus"
      cat "$parent/cpuset.mems" >"$d/cpuset.mems"
    fi
  done < <(cgroup_dirs "$1")
}

# node_up NODE INDEX GPU COUNT: a simulated GPU node and its kubelet (Ready soon after).
node_up() {
  local name=$1 index=$2 gpu=$3 count=$4 n ip i
  n=$(node_dir "$name")
  ip=$(node_ip "$index")
  mkdir -p "$n"/{ctr-root,ctr-state,cni,cni-data,kubelet-pki}
  for i in "${NODE_DIRS[@]}"; do mkdir -p "$n/$i"; done
  # shellcheck disable=SC2086 # E2E_SIM_ARGS: extra words for tessera sim create (--mig)
  "$TESSERA" sim create "$n/sim" --gpu "$gpu" --count "$count" --device-nodes ${E2E_SIM_ARGS:-} >/dev/null ||
    die "tessera sim create $n/sim --gpu $gpu --count $count failed"
  # As a driver install leaves the node: nvidia_uvm loaded (its major in
  # proc/devices) but no /dev/nvidia-uvm, no capability nodes (the specs
  # describe them with their numbers), and the driver's libraries as the
  # .run installer or a distribution package lays them out: the versioned
  # file, libcuda.so.<version>, and its soname link beside it. The simulated
  # NVML, CUDA driver and MPS control program of the build stand for them.
  "$TESSERA" sim modprobe "$n/sim" nvidia-uvm >/dev/null || die "tessera sim modprobe $n/sim nvidia-uvm failed"
  local build lib_dir=$n/sim/usr/lib/x86_64-linux-gnu version=550.90.07 lib
  build=$(cd "$(dirname "$TESSERA")/.." && pwd)
  mkdir -p "$lib_dir" "$n/sim/usr/bin"
  for lib in nvml/libnvidia-ml cuda/libcuda; do
    cp "$build/sim/$lib.so.1" "$lib_dir/${lib#*/}.so.$version"
    ln -sfn "${lib#*/}.so.$version" "$lib_dir/${lib#*/}.so.1"
  done
  # And the GSP firmware of that version, as the installer puts it.
  mkdir -p "$n/sim/lib/firmware/nvidia/$version"
  printf 'simulated GSP firmware\n' >"$n/sim/lib/firmware/nvidia/$version/gsp_ga10x.bin"
  cp "$build/sim/mps/nvidia-cuda-mps-control" "$build/sim/mps/nvidia-cuda-mps-server" "$n/sim/usr/bin/"
  cp "$build/sim/nvml/nvidia-smi" "$n/sim/usr/bin/nvidia-smi"
  ip addr add "$ip/32" dev "$E2E_BRIDGE"
  cgroups_make "$name"

  # The node's mount namespace, held by one process.
  local mounts="set -e"
  for i in "${!NODE_MOUNT_POINTS[@]}"; do
    mounts+="; mount --bind $n/${NODE_DIRS[$i]} ${NODE_MOUNT_POINTS[$i]}"
  done
  # Shared, as systemd makes every mount of a real node: a pod's
  # HostToContainer mount (the chart's driver root) needs a shared or slave
  # source, or containerd refuses the container.
  for i in "${!NODE_MOUNT_POINTS[@]}"; do
    mounts+="; mount --make-rshared ${NODE_MOUNT_POINTS[$i]}"
  done
  mounts+="; touch $n/ns-ready; exec sleep infinity"
  rm -f "$n/ns-ready"
  start "node-$name-ns" unshare --mount --propagation private -- sh -c "$mounts"
  wait_until 10 "node $name's mount namespace" test -e "$n/ns-ready"

  cat >"$n/containerd.toml" <<EOF
version = 3
root = "$n/ctr-root"
state = "$n/ctr-state"
[grpc]
  address = "$n/containerd.sock"
[ttrpc]
  address = "$n/containerd.sock.ttrpc"
[plugins.'io.containerd.cri.v1.runtime']
  enable_cdi = true
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  # root here lacks CAP_SYS_RESOURCE: a negative oom_score_adj is refused, so
  # keep pods' at containerd's own.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "$(command -v runc)"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "$n/cni"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$E2E_PAUSE_IMAGE"
[plugins.'io.containerd.grpc.v1.cri']
  disable_tcp_service = true
  stream_server_address = "127.0.0.1"
EOF
  cat >"$n/cni/10-tessera-e2e.conflist" <<EOF
{"cniVersion": "1.0.0", "name": "tessera-e2e", "plugins": [
  {"type": "bridge", "bridge": "$E2E_BRIDGE", "isGateway": false, "ipMasq": false,
   "ipam": {"type": "host-local", "dataDir": "$n/cni-data",
            "ranges": [[{"subnet": "10.88.0.0/16", "rangeStart": "10.88.$index.1", "rangeEnd": "10.88.$index.254", "gateway": "10.88.0.1"}]],
            "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "loopback"}]}
EOF
  start "node-$name-containerd" nsenter --mount="/proc/$(node_holder "$name")/ns/mnt" -- \
    env PATH="$PEERS:$PATH" "$PEERS/containerd" --config "$n/containerd.toml"
  wait_until 30 "node $name's containerd" node_ctr "$name" version
  local image
  for image in "${E2E_IMAGES[@]}"; do
    node_ctr "$name" images import --local "$image" >>"$E2E_STATE/logs/node-$name-images.log" 2>&1 ||
      die "node $name: ctr images import $image failed (logs/node-$name-images.log)"
  done

  pki_cert "node-$name" "system:node:$name" system:nodes clientAuth
  kubeconfig "$n/kubeconfig" "{client-certificate: \"$E2E_STATE/pki/node-$name.crt\", client-key: \"$E2E_STATE/pki/node-$name.key\"}"
  cat >"$n/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ip
port: 10250
readOnlyPort: 0
healthzBindAddress: $ip
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$E2E_STATE/pki/ca.crt"}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
cgroupRoot: /$CGROUP_BASE/$name
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$n/containerd.sock
imageServiceEndpoint: unix://$n/containerd.sock
evictionHard: {memory.available: "1Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
nodeStatusUpdateFrequency: 2s
syncFrequency: 5s
resolvConf: /etc/resolv.conf
EOF
  echo "$ip" >"$n/ip"
  kubelet_start "$name"
}

# kubelet_start NODE: the node's kubelet (again, after a scenario stopped it).
kubelet_start() {
  local name=$1 n
  n=$(node_dir "$name")
  start "node-$name-kubelet" nsenter --mount="/proc/$(node_holder "$name")/ns/mnt" -- \
    "$PEERS/kubelet" --config="$n/kubelet.yaml" --kubeconfig="$n/kubeconfig" --hostname-override="$name" \
    --node-ip="$(cat "$n/ip")" --root-dir=/var/lib/kubelet --cert-dir="$n/kubelet-pki" \
    --node-labels=nvidia.com/gpu.present=true --v=2
}

node_ready() { [[ $(kc get node "$1" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null) == True ]]; }

# The PIDs in a node's cgroups (its pods' processes).
node_pod_pids() {
  local d
  while read -r d; do
    [[ -d $d ]] && find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null
  done < <(cgroup_dirs "$1") | sort -u
}

# kill_node_pods NODE: every process of the node's pods killed, as a
# power-off kills them (retried while new ones appear, 5 s at most); false
# when some are left.
kill_node_pods() {
  local i left
  for ((i = 0; i < 50; i++)); do
    left=$(node_pod_pids "$1")
    [[ -z $left ]] && return 0
    kill -KILL $left 2>/dev/null || true
    sleep 0.1
  done
  [[ -z $(node_pod_pids "$1") ]]
}

node_down() {
  local name=$1 n pid i
  n=$(node_dir "$name")
  stop "node-$name-kubelet" 15
  # Every pod's processes, then containerd, then whatever shim is left.
  kill_node_pods "$name" || true
  stop "node-$name-containerd" 15
  for pid in $(pgrep -f -- "-address $n/containerd.sock" || true); do kill -KILL "$pid" 2>/dev/null || true; done
  stop "node-$name-ns" 5
  # The cgroups, deepest first.
  while read -r i; do
    [[ -d $i ]] && find "$i" -depth -type d -exec rmdir {} + 2>/dev/null
  done < <(cgroup_dirs "$name")
  return 0
}

cluster_down() {
  local name
  for name in $(node_names); do node_down "$name"; done
  stop kube-scheduler 10
  stop kube-controller-manager 10
  stop kube-apiserver 10
  stop etcd 10
  local d
  for d in /sys/fs/cgroup/*/"$CGROUP_BASE" /sys/fs/cgroup/"$CGROUP_BASE"; do [[ -d $d ]] && rmdir "$d" 2>/dev/null; done
  service_proxy down
  ip link del "$E2E_BRIDGE" 2>/dev/null || true
  if [[ -f $E2E_STATE/created-mount-points ]]; then
    while read -r d; do rmdir "$d" 2>/dev/null || true; done <"$E2E_STATE/created-mount-points"
  fi
  return 0
}

# What is left of the cluster: one line per thing, none when it is all gone.
cluster_leftovers() {
  local name pid port d
  if [[ -d $E2E_STATE/pids ]]; then
    for f in "$E2E_STATE"/pids/*.pid; do
      [[ -f $f ]] || continue
      pid=$(cat "$f")
      kill -0 "$pid" 2>/dev/null && echo "process $(basename "$f" .pid) ($pid)"
    done
  fi
  for pid in $(pgrep -f -- "$E2E_STATE" || true); do
    [[ $pid == "$$" || $pid == "$BASHPID" ]] || echo "process $pid naming $E2E_STATE"
  done
  findmnt -rn -o TARGET | grep -F -- "$E2E_STATE" | sed 's/^/mount /'
  for port in "${ETCD_PORTS[@]}" "$APISERVER_PORT"; do
    ss -Hltn "sport = :$port" | grep -q . && echo "listener on port $port"
  done
  ip link show "$E2E_BRIDGE" >/dev/null 2>&1 && echo "bridge $E2E_BRIDGE"
  iptables -t nat -S PREROUTING 2>/dev/null | grep -q -- '--comment "\{0,1\}tessera-e2e' && echo "iptables rule tessera-e2e (nat PREROUTING)"
  for d in /sys/fs/cgroup/*/"$CGROUP_BASE" /sys/fs/cgroup/"$CGROUP_BASE"; do [[ -d $d ]] && echo "cgroup $d"; done
  return 0
}

# cluster_up GPU:COUNT...: the control plane and one node per argument,
# named tessera-node-1..N, each with COUNT simulated GPUs of model GPU, all
# Ready. Needs E2E_IMAGES (lib/images.sh).
cluster_up() {
  local i=0 spec p
  mkdir -p "$E2E_STATE"/{logs,pids,nodes}
  : >"$E2E_STATE/created-mount-points"
  for p in "${NODE_MOUNT_POINTS[@]}"; do
    [[ -e $p ]] || { mkdir -p "$p"; echo "$p" >>"$E2E_STATE/created-mount-points"; }
  done
  bridge_up
  control_plane_up
  for spec in "$@"; do
    i=$((i + 1))
    node_up "tessera-node-$i" "$i" "${spec%:*}" "${spec##*:}"
  done
  for ((i = 1; i <= $#; i++)); do wait_until 120 "node tessera-node-$i to be Ready" node_ready "tessera-node-$i"; done
}
