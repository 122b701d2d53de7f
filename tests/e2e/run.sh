#!/usr/bin/env bash
# tessera on a real, current Kubernetes: a loopback cluster (etcd 3.6,
# kube-apiserver, kube-controller-manager, kube-scheduler and kubelets 1.36,
# containerd 2.3 with CDI, runc and the CNI bridge plugin) of two nodes:
# tessera-node-1 with two simulated A100-80GB GPUs, where tessera runs as the
# DaemonSets of deploy/ (the node agent, then the DRA driver for the dra-*
# scenarios), and tessera-node-2 with one simulated H100, which runs
# no tessera (the scenarios that check what one node's agent may do to
# another use it).
#
#   tests/e2e/run.sh BUILD_DIR [--only NAME[,NAME...]] [--list]
#
# BUILD_DIR holds a built tessera (src/tessera, sim/nvml/libnvidia-ml.so.1,
# src/cuda_quota/libtessera-cuda.so, sim/cuda/libcuda.so.1,
# tests/cuda_quota/tessera_cuda_client, sim/mps/nvidia-cuda-mps-control).
# One scenario per file in tests/e2e/scenarios; each prints its time; a
# failing one is named, with the last lines of the kubelet's, containerd's and
# tessera's logs, and the run exits 1. Everything started is stopped by PID
# (pods through their cgroups) and every mount goes with its node's mount
# namespace, pass or fail; the last line says whether anything was left.
#
# Environment:
#   TESSERA_E2E_CACHE   the peers' builds (~/.cache/tessera/e2e); images in ~/.cache/tessera/images
#   TESSERA_E2E_BREAK   a scenario whose expectation is broken on purpose, to
#                       prove that a failure is caught and reported
#   TESSERA_E2E_KEEP    1: keep the run directory (logs) after the run
# Needs root. Runs in a network namespace of its own (127.0.0.1 and a bridge,
# 10.88.0.0/16, that nothing outside sees), after fetching what needs the network.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
here=$REPO/tests/e2e
usage() { sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; }

args=("$@")  # for the re-run in a network namespace of its own (below)
BUILD_DIR= only= list=0
while (($#)); do
  case $1 in
    --only) only=${2:?--only needs a scenario name}; shift 2 ;;
    --list) list=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) usage >&2; echo "e2e: unknown option '$1'" >&2; exit 2 ;;
    *) [[ -z $BUILD_DIR ]] || { echo "e2e: one BUILD_DIR only" >&2; exit 2; }; BUILD_DIR=$1; shift ;;
  esac
done

# In the order they run; what one needs done before it is in NEEDS.
readonly SCENARIOS=(manifests mig-capacity mig-pods pod-resources kubelet-restart xid-79 resource-health
                    time-slicing quota admission mps mps-upgrade metrics cdi node-agent agent-scope fleet
                    dra-mig dra-packing dra-shares dra-mps dra-health dra-quickstart dra-admin dra-reboot)
declare -A NEEDS=([mig-pods]=mig-capacity [pod-resources]="mig-capacity mig-pods"
                  [kubelet-restart]=mig-capacity [xid-79]=mig-capacity [resource-health]="mig-capacity mig-pods"
                  [quota]=time-slicing [admission]=time-slicing [agent-scope]=node-agent)
if ((list)); then printf '%s\n' "${SCENARIOS[@]}"; exit 0; fi
[[ -n $BUILD_DIR ]] || { usage >&2; exit 2; }
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
for s in ${only//,/ }; do
  [[ " ${SCENARIOS[*]} " == *" $s "* ]] || { echo "e2e: unknown scenario '$s' (--list shows them)" >&2; exit 2; }
done

# The nodes' cgroups are this run's own too (a run killed before its teardown
# leaves cgroups behind that the next must not trip over).
export E2E_CGROUP_BASE=tessera-e2e-$$
source "$here/lib/common.sh"
source "$here/lib/cluster.sh"
source "$here/lib/images.sh"
source "$here/lib/deploy.sh"
source "$here/lib/scenario.sh"
source "$here/lib/dra.sh"
for f in "$here"/scenarios/*.sh; do source "$f"; done

TESSERA=$BUILD_DIR/src/tessera
for f in src/tessera sim/nvml/libnvidia-ml.so.1 src/cuda_quota/libtessera-cuda.so sim/cuda/libcuda.so.1 \
         tests/cuda_quota/tessera_cuda_client sim/mps/nvidia-cuda-mps-control sim/mps/nvidia-cuda-mps-server sim/nvml/nvidia-smi; do
  [[ -e $BUILD_DIR/$f ]] || die "$BUILD_DIR/$f is missing: build first (./x build dev)"
done
command -v jq >/dev/null || die "jq is missing (run scripts/setup.sh --e2e)"

# The cluster runs in a network namespace of its own: its bridge, node
# addresses and 127.0.0.1 listeners cannot meet another cluster's on this
# machine (./x cluster up, a run killed before its teardown, a parallel job),
# and they go with the namespace whatever happens. What needs the network
# (the peers' modules, the image's Debian base) is fetched first, outside.
if [[ -z ${TESSERA_E2E_NETNS:-} ]]; then
  command -v unshare >/dev/null || die "unshare is missing (run scripts/setup.sh --e2e)"
  "$here/build-peers.sh" >/dev/null
  images_base
  TESSERA_E2E_NETNS=1 exec unshare --net -- "$0" "${args[@]}"
fi
ip link set lo up
cluster_preflight

started_at=$SECONDS
PEERS=$("$here/build-peers.sh")
# Short: unix socket paths under it must stay under 108 bytes.
E2E_STATE=$(mktemp -d /tmp/tessera-e2e.XXXXXX)
mkdir -p "$E2E_STATE"/{logs,pids}
export KUBECONFIG=$E2E_STATE/kubeconfig

teardown() {
  local rc=$? left
  trap - EXIT INT TERM
  set +e
  if ((rc != 0 && !failed)) && [[ $current != done ]]; then
    echo "e2e: scenario $current FAILED: exit $rc from ${failed_cmd:-a command} (in $0)" >&2
    show_logs >&2
  fi
  say "teardown"
  # What a scenario started (a client in a pod, a watch), then the cluster.
  local name
  while read -r name; do
    case $name in node-*|kube-*|etcd) ;; *) stop "$name" 5 ;; esac
  done < <(cat "$E2E_STATE/pids/order" 2>/dev/null)
  cluster_down
  left=$(cluster_leftovers)
  # MPS daemons the plugin started: their environment names the node's mpsRoot.
  local pid
  for pid in $(pgrep -f nvidia-cuda-mps || true); do
    grep -qaF "$E2E_STATE/" "/proc/$pid/environ" 2>/dev/null && left+=$'\n'"MPS daemon $pid"
  done
  if [[ ${TESSERA_E2E_KEEP:-0} == 1 ]]; then say "logs kept in $E2E_STATE/logs"; else rm -rf --one-file-system "$E2E_STATE"; fi
  if [[ -n $left ]]; then
    echo "e2e: LEFT BEHIND: $(tr '\n' ';' <<<"$left")" >&2
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

t0=$SECONDS
say "images"
images_build
say "cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler; nodes $NODE (2 x A100-80GB), $NODE2 (1 x H100-80GB)"
cluster_up A100-80GB:2 H100-80GB:1
# tessera runs on the first node only.
kc label node "$NODE2" nvidia.com/gpu.present- >/dev/null
cluster_s=$((SECONDS - t0))
say "cluster up in $cluster_s s ($("$PEERS/kubelet" --version), containerd $("$PEERS/containerd" --version | awk '{print $3}'), $("$PEERS/etcd" --version | head -1), runc $(runc --version | awk 'NR==1 {print $3}'))"

timings=()
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
printf '%s\n' "${timings[@]}" >&2
