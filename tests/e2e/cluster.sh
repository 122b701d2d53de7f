#!/usr/bin/env bash
# A local Kubernetes 1.36 cluster with simulated GPU nodes and tessera on them,
# to try tessera or to test against (the real-cluster tier's own cluster,
# kept running). ./x cluster up and ./x cluster down call this.
#
#   tests/e2e/cluster.sh up BUILD_DIR [--nodes N] [--gpus MODEL:COUNT] [--mode device-plugin|dra]
#                            [--set KEY=VALUE]... [-f VALUES-FILE]...
#   tests/e2e/cluster.sh down
#
# up starts etcd, the control plane and N nodes (default 1), each a
# containerd and a kubelet of its own over COUNT simulated GPUs of MODEL
# (default A100-SXM4-80GB:2; any model `tessera catalog` lists), installs
# tessera's Helm chart, packaged, with tests/e2e/simulated-node.values.yaml:
# tessera node on every node (MIG managed from each Node's
# nvidia.com/mig.config label, NVIDIA's default mig-parted configs from
# third_party/), or with --mode dra the DRA driver; --set and -f are given to
# helm after those (e.g. --mode dra --set dra.memoryShares=true). It waits
# until every node serves its GPUs, and prints exactly two lines for a shell
# to eval:
#   export KUBECONFIG=<dir>/kubeconfig
#   export PATH="<dir>/bin:$PATH"      (kubectl 1.36 and tessera)
# Progress goes to stderr. down stops everything up started (by PID; the
# nodes' pods through their cgroups) and removes the cluster's directory,
# $TESSERA_CLUSTER_DIR (default /tmp/tessera-cluster). Needs root.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
here=$REPO/tests/e2e
usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; }

source "$here/lib/common.sh"
source "$here/lib/cluster.sh"
source "$here/lib/images.sh"
source "$here/lib/deploy.sh"
fail() { die "$*"; }  # what lib/deploy.sh calls on an error

E2E_STATE=${TESSERA_CLUSTER_DIR:-/tmp/tessera-cluster}

up() {
  local nodes=1 gpus=A100-SXM4-80GB:2 mode=device-plugin values=()
  BUILD_DIR=
  while (($#)); do
    case $1 in
      --nodes) nodes=${2:?--nodes needs a number}; shift 2 ;;
      --gpus) gpus=${2:?--gpus needs MODEL:COUNT}; shift 2 ;;
      --mode) mode=${2:?--mode needs device-plugin or dra}; shift 2 ;;
      --set|--set-string|--set-json|--set-file) [[ $2 == *=* ]] || { echo "cluster: $1 '${2:-}': expected KEY=VALUE" >&2; exit 2; }
        values+=("$1" "$2"); shift 2 ;;
      -f|--values) [[ -f ${2:-} ]] || { echo "cluster: $1 '${2:-}': no such file" >&2; exit 2; }
        values+=(-f "$(realpath "$2")"); shift 2 ;;
      -h|--help) usage; exit 0 ;;
      -*) usage >&2; die "unknown option '$1'" ;;
      *) BUILD_DIR=$1; shift ;;
    esac
  done
  [[ $nodes =~ ^[0-9]+$ ]] && ((nodes >= 1 && nodes <= 8)) || { echo "cluster: --nodes '$nodes': expected 1 to 8" >&2; exit 2; }
  [[ $gpus =~ ^[A-Za-z0-9._-]+:[0-9]+$ ]] || { echo "cluster: --gpus '$gpus': expected MODEL:COUNT, e.g. A100-SXM4-80GB:2" >&2; exit 2; }
  case $mode in
    device-plugin) ;;
    dra) ;;
    *) echo "cluster: --mode '$mode': expected device-plugin or dra" >&2; exit 2 ;;
  esac
  [[ -n $BUILD_DIR ]] || die "no BUILD_DIR (./x cluster up builds one)"
  BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
  TESSERA=$BUILD_DIR/src/tessera
  [[ -x $TESSERA ]] || die "$TESSERA is missing: build first (./x build dev)"
  "$TESSERA" catalog --gpu "${gpus%%:*}" >/dev/null 2>&1 ||
    { echo "cluster: --gpus '$gpus': no GPU model '${gpus%%:*}' (tessera catalog lists them)" >&2; exit 2; }
  ((${gpus##*:} >= 1 && ${gpus##*:} <= 16)) || { echo "cluster: --gpus '$gpus': 1 to 16 GPUs per node" >&2; exit 2; }
  if [[ -d $E2E_STATE/pids ]] && [[ -n $(cluster_leftovers) ]]; then
    die "a cluster is up in $E2E_STATE (./x cluster down stops it)"
  fi
  cluster_preflight
  rm -rf "$E2E_STATE"
  mkdir -p "$E2E_STATE"/{logs,pids,bin}
  # A failure half-way stops what was started.
  trap 'rc=$?; if ((rc != 0)); then say "cluster up failed: stopping what it started"; cluster_down; fi' EXIT
  PEERS=$("$here/build-peers.sh" kubernetes containerd etcd helm)
  say "images"
  images_build
  local specs=() i
  for ((i = 0; i < nodes; i++)); do specs+=("$gpus"); done
  say "cluster: $nodes node(s) of ${gpus##*:} x ${gpus%%:*} (simulated)"
  # The DRA driver serves GPUs in the MIG mode they are in where a change
  # needs a reset (A100): its GPUs start in MIG mode, as an admin would set.
  [[ $mode != dra ]] || export E2E_SIM_ARGS=--mig
  cluster_up "${specs[@]}"
  local n
  if [[ $mode == dra ]]; then
    say "tessera's DRA driver on every node"
    local args
    mapfile -t args < <(dra_values)
    helm_deploy "${args[@]}" "${values[@]}"
    for ((i = 1; i <= nodes; i++)); do
      n=tessera-node-$i
      publishing() { (($(dra_slices "$1") > 0)); }
      wait_until 180 "tessera to publish $n's ResourceSlices" publishing "$n"
    done
  else
    say "tessera node on every node"
    local args
    mapfile -t args < <(AGENT_MIG_CONFIGS=$REPO/third_party/nvidia-mig-parted/config-default.yaml agent_values)
    helm_deploy "${args[@]}" "${values[@]}"
    for ((i = 1; i <= nodes; i++)); do
      n=tessera-node-$i
      serving() { [[ -n $(kc get node "$1" -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.count}') ]]; }
      wait_until 180 "tessera to serve $n's GPUs (its GFD labels)" serving "$n"
    done
  fi
  ln -sfn "$PEERS/kubectl" "$E2E_STATE/bin/kubectl"
  ln -sfn "$TESSERA" "$E2E_STATE/bin/tessera"
  trap - EXIT
  say "up: $(kc get nodes --no-headers | wc -l) nodes Ready; try: kubectl get nodes -L nvidia.com/gpu.product,nvidia.com/gpu.count"
  if [[ $mode == dra ]]; then
    say "DRA: kubectl get resourceslices; kubectl apply -f examples/dra/mig-1g.yaml (./x cluster down stops it all)"
  else
    say "MIG: kubectl label node tessera-node-1 nvidia.com/mig.config=all-1g.10gb --overwrite (./x cluster down stops it all)"
  fi
  echo "export KUBECONFIG=$E2E_STATE/kubeconfig"
  echo "export PATH=\"$E2E_STATE/bin:\$PATH\""
}

down() {
  (($# == 0)) || { usage >&2; exit 2; }
  if [[ ! -d $E2E_STATE ]]; then
    say "no cluster in $E2E_STATE"
    return 0
  fi
  [[ $(id -u) -eq 0 ]] || die "needs root"
  PEERS=${E2E_STATE}/bin
  say "stopping the cluster in $E2E_STATE"
  cluster_down
  local left
  left=$(cluster_leftovers)
  if [[ -n $left ]]; then
    echo "cluster: LEFT BEHIND: $(tr '\n' ';' <<<"$left")" >&2
    exit 1
  fi
  rm -rf --one-file-system "$E2E_STATE"
  say "down: nothing left running or mounted"
}

cmd=${1:-}
shift || true
case $cmd in
  up) up "$@" ;;
  down) down "$@" ;;
  -h|--help|help) usage ;;
  *) usage >&2; exit 2 ;;
esac
