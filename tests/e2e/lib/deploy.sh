# The overlays of deploy/ that run tessera on the simulated nodes, for the
# scenarios and for ./x cluster up. Sourced after lib/common.sh and
# lib/cluster.sh; uses REPO and E2E_STATE, and kc.

# overlay NAME [metrics]: a kustomize overlay over deploy/overlays/NAME that
# runs tessera on the simulated node: TESSERA_SIM and the node's directory
# (at /var/lib/tessera-sim in every node's namespace), a short health-recovery
# period, and for mps tessera-mps-host given the simulated control program the
# image carries. Every other host path of deploy/ is the node's own already
# (lib/cluster.sh; /run/nvidia, which holds mpsRoot and the mps-host socket, too).
readonly IMAGE_MPS_CONTROL=/usr/local/tessera/bin/nvidia-cuda-mps-control
readonly MPS_HOST_SOCKET=/run/nvidia/tessera/mps-host.sock
overlay() {
  local name=$1 with=${2:-} dir=$E2E_STATE/overlays/$1${2:++$2}
  mkdir -p "$dir"
  cat >"$dir/kustomization.yaml" <<EOF
resources:
- $(realpath --relative-to="$dir" "$REPO/deploy/overlays/$name")
patches:
- path: simulated-node.yaml
EOF
  if [[ $name == mps ]]; then
    echo "- path: mps-host.yaml" >>"$dir/kustomization.yaml"
    mps_host_patch "$dir/mps-host.yaml"
  fi
  if [[ $with == metrics ]]; then
    cat >>"$dir/kustomization.yaml" <<EOF
- path: metrics.yaml
- path: no-servicemonitor.yaml
- path: no-prometheusrule.yaml
components:
- $(realpath --relative-to="$dir" "$REPO/deploy/overlays/metrics/component")
EOF
    metrics_patches "$dir"
  fi
  cat >"$dir/simulated-node.yaml" <<EOF
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: tessera, namespace: tessera}
spec:
  template:
    spec:
      initContainers:
      - name: mig-apply
        env: [{name: TESSERA_SIM, value: /var/lib/tessera-sim}]
        volumeMounts: [{name: sim, mountPath: /var/lib/tessera-sim}]
      containers:
      - name: device-plugin
        command: ["tessera", "plugin", "--config", "/etc/tessera/device-plugin/config.yaml",
                  "--kubelet-dir", "/var/lib/kubelet/device-plugins", "--health-recovery", "5",
                  "--quota-library-dir", "/var/lib/tessera/lib", "--quota-ledger-root", "/var/lib/tessera/ledgers"]
        env: [{name: TESSERA_SIM, value: /var/lib/tessera-sim}]
        volumeMounts: [{name: sim, mountPath: /var/lib/tessera-sim}]
      volumes:
      - {name: sim, hostPath: {path: /var/lib/tessera-sim, type: Directory}}
EOF
  echo "$dir"
}

# The metrics Component on the test node: the exporter beside the plugin,
# given the simulated node as the plugin is, sampling every second. The
# cluster has no Prometheus Operator, so the ServiceMonitor and the
# PrometheusRule are deleted from the render rather than stand-in CRDs
# installed, since a CRD with a permissive schema would accept anything and
# prove nothing (tests/deploy renders and checks the ServiceMonitor;
# tests/alerts and tests/prometheus_live run the rules in promtool and a real
# Prometheus). One patch per file: kustomize crashes on a file whose second
# document deletes an object.
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
        command: ["tessera", "exporter", "--listen", "0.0.0.0:9400", "--interval", "1", "--gpm-window", "0.5",
                  "--pod-resources", "/var/lib/kubelet/pod-resources/kubelet.sock", "--ledger-root", "/var/lib/tessera/ledgers"]
        env: [{name: TESSERA_SIM, value: /var/lib/tessera-sim}]
        volumeMounts: [{name: sim, mountPath: /var/lib/tessera-sim}]
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

# deploy_overlay NAME [metrics]: apply it and replace tessera's pods so they
# read the new configs. tessera-mps-host (the mps overlay's) is left as it is
# (updateStrategy OnDelete: its pod holds the MPS daemons), and removed, with
# its daemons, when another overlay comes (kubectl apply does not prune it).
deploy_overlay() {
  [[ $1 == mps ]] || kc -n tessera delete daemonset tessera-mps-host --ignore-not-found --wait=false >/dev/null 2>&1 || true
  kc apply -k "$(overlay "$@")" >/dev/null || fail "kubectl apply -k of overlay $* failed"
  kc -n tessera delete pod -l app.kubernetes.io/name=tessera --wait=false >/dev/null 2>&1 || true
}

# agent_overlay [NAME DEVICE-PLUGIN-CONFIG EXTRA-ARG...]: tessera node from
# deploy/overlays/gpu-node-mig on the simulated nodes, with the scenarios'
# MIG configs (or the mig-parted file AGENT_MIG_CONFIGS names); with NAME, a variant (its own directory) whose
# tessera-device-plugin-config is DEVICE-PLUGIN-CONFIG (a file, or empty for
# deploy's) and whose agent gets EXTRA-ARGs; an extra --cdi-spec-dir also
# mounts the node's CDI spec directory there.
readonly AGENT_EVICTION_TIMEOUT=20
agent_overlay() {
  local name=${1:-node-agent} dp=${2:-} dir extra="" mounts="" volumes="" a
  shift $(($# > 2 ? 2 : $#))
  dir=$E2E_STATE/overlays/$name
  mkdir -p "$dir"
  for a in "$@"; do extra+=", \"$a\""; done
  if [[ " $* " == *" --cdi-spec-dir "* ]]; then
    mounts="        - {name: cdi-specs, mountPath: /var/run/cdi}"
    volumes="      - {name: cdi-specs, hostPath: {path: /var/run/cdi, type: DirectoryOrCreate}}"
  fi
  cat >"$dir/kustomization.yaml" <<EOF
resources:
- $(realpath --relative-to="$dir" "$REPO/deploy/overlays/gpu-node-mig")
patches:
- path: simulated-node.yaml
generatorOptions:
  disableNameSuffixHash: true
configMapGenerator:
EOF
  agent_mig_configs "$dir" "${AGENT_MIG_CONFIGS:-}"
  if [[ -n $dp ]]; then
    cp "$dp" "$dir/device-plugin-config.yaml"
    cat >>"$dir/kustomization.yaml" <<EOF
- name: tessera-device-plugin-config
  namespace: tessera
  behavior: replace
  files:
  - config.yaml=device-plugin-config.yaml
EOF
  fi
  sim_agent_patch "$dir/simulated-node.yaml" node-agent '["tessera", "node", "--config", "/etc/tessera/device-plugin/config.yaml",
                  "--mig-config", "/etc/tessera/mig/config.yaml", "--state-dir", "/var/lib/tessera",
                  "--kubelet-dir", "/var/lib/kubelet/device-plugins",
                  "--pod-resources", "/var/lib/kubelet/pod-resources/kubelet.sock",
                  "--health-recovery", "5", "--eviction-timeout", "'"$AGENT_EVICTION_TIMEOUT"'",
                  "--quota-library-dir", "/var/lib/tessera/lib", "--quota-ledger-root", "/var/lib/tessera/ledgers"'"$extra]" \
    "$mounts" "$volumes"
  echo "$dir"
}

# agent_mig_configs DIR [FILE]: the overlay's tessera-mig-config: FILE (a
# mig-parted config), or the scenarios' own.
agent_mig_configs() {
  cat >>"$1/kustomization.yaml" <<EOF
- name: tessera-mig-config
  namespace: tessera
  behavior: replace
  files:
  - config.yaml=mig-config.yaml
EOF
  if [[ -n ${2:-} ]]; then
    cp "$2" "$1/mig-config.yaml"
    return
  fi
  cat >"$1/mig-config.yaml" <<'YAML'
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  # GPU 0 whole, GPU 1 in four 1g.20gb.
  e2e-gpu1-mig:
    - devices: [0]
      mig-enabled: false
    - devices: [1]
      mig-enabled: true
      mig-devices: {"1g.20gb": 4}
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
YAML
}

# mps_host_patch FILE: tessera-mps-host given the simulated control program
# the image carries, in place of the driver's.
mps_host_patch() {
  cat >"$1" <<EOF
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: tessera-mps-host, namespace: tessera}
spec:
  template:
    spec:
      containers:
      - name: mps-host
        command: ["tessera", "mps-host", "--socket", "$MPS_HOST_SOCKET", "--mps-control", "$IMAGE_MPS_CONTROL"]
EOF
}

# sim_agent_patch FILE CONTAINER COMMAND [MOUNTS VOLUMES]: the patch that runs
# tessera's CONTAINER, an agent that talks to the API server, on the simulated
# node: the host's network (the API server listens on the host's loopback),
# no NVIDIA runtime (the simulated node is mounted instead), unprivileged (no
# real MIG capability to hold). COMMAND is a YAML flow list; MOUNTS and
# VOLUMES are further list items of the container and of the pod.
sim_agent_patch() {
  local file=$1 container=$2 command=$3 mounts=${4:-} volumes=${5:-}
  cat >"$file" <<EOF
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: tessera, namespace: tessera}
spec:
  template:
    spec:
      hostNetwork: true
      runtimeClassName: null
      containers:
      - name: $container
        command: $command
        securityContext:
          \$patch: replace
          allowPrivilegeEscalation: false
          capabilities: {drop: ["ALL"]}
        env:
        - {name: TESSERA_SIM, value: /var/lib/tessera-sim}
        - {name: KUBERNETES_SERVICE_HOST, value: 127.0.0.1}
        - {name: KUBERNETES_SERVICE_PORT, value: "$APISERVER_PORT"}
        volumeMounts:
        - {name: sim, mountPath: /var/lib/tessera-sim}
$mounts
      volumes:
      - {name: sim, hostPath: {path: /var/lib/tessera-sim, type: Directory}}
$volumes
EOF
}

# dra_overlay [EXTRA-ARG...]: tessera's DRA driver from deploy/overlays/dra
# with components/dra-mps (MPS claims) on
# the simulated nodes: the simulated node in place of a GPU driver (NVML and
# the driver root with its device nodes and libraries), unprivileged (no
# NVIDIA runtime, no real MIG capability to hold), the API server on the
# host's loopback, a 5 s health recovery, and EXTRA-ARGs for `tessera dra`.
dra_overlay() {
  local dir=$E2E_STATE/overlays/dra extra="" a
  mkdir -p "$dir"
  for a in "$@"; do extra+=", \"$a\""; done
  cat >"$dir/kustomization.yaml" <<EOF2
resources:
- $(realpath --relative-to="$dir" "$REPO/deploy/overlays/dra")
components:
- $(realpath --relative-to="$dir" "$REPO/deploy/components/dra-mps")
patches:
- path: simulated-node.yaml
- path: mps-host.yaml
EOF2
  # The MPS daemons of claims that ask for MPS: the simulated control program the image carries.
  mps_host_patch "$dir/mps-host.yaml"
  sim_agent_patch "$dir/simulated-node.yaml" dra-driver '["tessera", "dra", "--kubelet-dir", "/var/lib/kubelet", "--cdi-spec-dir", "/var/run/cdi",
                  "--driver-root", "/var/lib/tessera-sim", "--container-driver-root", "/var/lib/tessera-sim",
                  "--quota-library-dir", "/var/lib/tessera/lib", "--ledger-root", "/var/lib/tessera/ledgers",
                  "--recovery", "5"'"$extra]"
  echo "$dir"
}

# dra_slices NODE: how many devices the node's ResourceSlices of gpu.nvidia.com list.
dra_slices() {
  kc get resourceslices -o json | jq --arg n "$1" \
    '[.items[] | select(.spec.nodeName == $n and .spec.driver == "gpu.nvidia.com") | (.spec.devices // [])[]] | length'
}
