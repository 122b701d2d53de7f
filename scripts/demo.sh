#!/usr/bin/env bash
# The demo: tessera end to end on simulated GPUs. Called by `./x demo` after
# the build, with the build directory as its argument.
set -euo pipefail
build=${1:-build/dev}
bin=$build/src/tessera
kubelet_sim=$build/sim/kubelet/tessera-kubelet-sim
# NVIDIA's own default configs, kept verbatim in third_party/.
defaults=third_party/nvidia-mig-parted/config-default.yaml
operator_configmap=third_party/nvidia-gpu-operator/0400_configmap.yaml
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-demo-XXXXXX")
plugin_pid=
cleanup() {
  [[ -n $plugin_pid ]] && kill "$plugin_pid" 2>/dev/null && wait "$plugin_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }

step "The GPU catalog"
"$bin" catalog
echo
"$bin" catalog --gpu A100-SXM4-80GB

step "NVIDIA's default mig-parted configs, checked entry by entry against the catalog"
# Warnings are summed up: NVIDIA's files name boards and profiles the catalog
# does not know (B300, RTX PRO), which tessera reports without failing.
validate_all() {
  local warnings=$work/warnings.txt
  if ! "$bin" mig validate -f "$1" 2>"$warnings"; then
    cat "$warnings" >&2
    return 1
  fi
  if [[ -s $warnings ]]; then
    echo "  ($(wc -l <"$warnings") warnings, such as:)"
    head -2 "$warnings" | sed 's/^/  /'
  fi
}
validate_all "$defaults"
validate_all "$operator_configmap"
"$bin" mig validate -f "$defaults" -c all-balanced --gpu H100-80GB

step "The example config on an A100-80GB: one layout fits, one asks for a profile the GPU lacks"
"$bin" mig validate -f examples/mig-config.yaml -c all-1g.20gb --gpu A100-SXM4-80GB
"$bin" mig validate -f examples/mig-config.yaml -c mixed-inference --gpu A100-SXM4-80GB || true

step "A simulated node: two A100-80GB joined by NVLink"
node=$work/node
"$bin" sim create "$node" --gpu A100-SXM4-80GB --count 2 --nvlink all
"$bin" inventory --sim "$node"

step "Apply all-1g.10gb: MIG on, seven 1g.10gb per GPU"
"$bin" mig apply -f "$defaults" -c all-1g.10gb --sim "$node" | tail -4

step "Plan, then apply, all-balanced: only what must change changes"
"$bin" mig plan -f "$defaults" -c all-balanced --sim "$node" | head -4
"$bin" mig apply -f "$defaults" -c all-balanced --sim "$node" | sed -n '/MIG devices/,$p'
"$bin" inventory --sim "$node" | tail -9

step "The device plugin, with a kubelet peer: MIG devices by profile, 1g.10gb time-sliced x2"
cat > "$work/plugin.yaml" <<'YAML'
version: v1
flags:
  migStrategy: mixed
sharing:
  timeSlicing:
    resources:
    - name: nvidia.com/mig-1g.10gb
      replicas: 2
YAML
mkdir -p "$work/device-plugins"
# Each quota'd container gets a ledger directory under the ledger root; here, the demo's own.
"$bin" plugin --config-file "$work/plugin.yaml" --sim "$node" --kubelet-dir "$work/device-plugins" \
  --quota-ledger-root "$work/ledgers" --quota-library-dir "$(cd "$build/src/cuda_quota" && pwd)" >"$work/plugin.log" 2>&1 &
plugin_pid=$!
"$kubelet_sim" --dir "$work/device-plugins" --resources 3 --allocate 2 --timeout 60 >"$work/kubelet.out"
# Two containers per resource were allocated; show the time-sliced ones.
sed -n '/^registered nvidia.com\/mig-1g.10gb/,/^registered/p' "$work/kubelet.out" | sed '$d'
grep '^registered' "$work/kubelet.out" | tail -n +2
kill -TERM "$plugin_pid"; wait "$plugin_pid" || true; plugin_pid=
grep -E "ready|stopped" "$work/plugin.log"

step "Memory quotas: the two time-sliced replicas of one MIG device share it; one bursts"
# Each replica runs a CUDA program with the environment and mounts its Allocate
# answer gave (host paths in place of the container's). The program loads the
# simulated CUDA driver as CUDA's runtime does; the GPU's memory is shared
# through the simulator's directory, as a real MIG device is.
client=$build/tests/cuda_quota/tessera_cuda_client
replica_env() {  # replica_env N: NAME=VALUE lines for the Nth time-sliced container
  python3 - "$work/kubelet.out" "$1" "$build/src/cuda_quota/libtessera-cuda.so" <<'PY'
import re, sys
text, n, library = open(sys.argv[1]).read(), int(sys.argv[2]), sys.argv[3]
blocks = re.findall(r"  Allocate (MIG-[^:]+::\d+):\n((?:    .*\n)+)", text)
env, mounts = {}, {}
for line in blocks[n][1].splitlines():
    line = line.strip()
    if line.startswith("mount "):
        host, container = line[6:].split(" -> ")
        mounts[container] = host
    else:
        name, value = line.split("=", 1)
        env[name] = value
env["LD_PRELOAD"] = library
# The container's ledger is a single-file mount; here its host directory. The
# read-only limits file a container reads at /run/tessera/limits needs a mount
# namespace (the real-cluster tier has one), so the demo takes the quota from
# the environment, the library's fallback, which says so on stderr.
ledger = mounts["/run/tessera/ledger/ledger"]
env["TESSERA_LEDGER_DIR"] = ledger.rsplit("/", 1)[0]
env.pop("TESSERA_LIMITS_FILE", None)
print(blocks[n][0])
for name, value in env.items():
    print(f"{name}={value}")
PY
}
mapfile -t first < <(replica_env 0)
mapfile -t second < <(replica_env 1)
uuid=${first[0]%%::*}
[[ ${second[0]%%::*} == "$uuid" ]] || { echo "demo: the two replicas are not on one MIG device" >&2; exit 1; }
memory=$("$bin" inventory --sim "$node" --json | python3 -c "
import json, sys
print(next(m['memory']['total_bytes'] for g in json.load(sys.stdin)['gpus'] for m in g['mig_devices'] if m['uuid'] == '$uuid'))")
mkdir -p "$work/gpu"
gpu=(LD_LIBRARY_PATH="$build/sim/cuda" TESSERA_SIM_CUDA_DEVICES="$uuid:$memory" TESSERA_SIM_CUDA_DIR="$work/gpu")
echo "MIG device $uuid: $((memory >> 20)) MiB; each replica's quota: $(( $(printf '%s\n' "${first[@]}" | sed -n 's/^TESSERA_DEVICE_MEMORY_LIMIT_0=//p') >> 20 )) MiB"
explain() {  # the client's lines, in words
  awk -v who="$1" '
    function size(b) { return sprintf("%.1f GiB", b / 1073741824) }
    function result(c) { return c == 0 ? "CUDA_SUCCESS" : c == 2 ? "CUDA_ERROR_OUT_OF_MEMORY" : "error " c }
    $1 ~ /^alloc:/ { split($1, a, ":"); printf "  %s: cuMemAlloc(%s) -> %s\n", who, size(a[2]), result($2) }
    $1 ~ /^info/ { printf "  %s: cuMemGetInfo -> free %s, total %s\n", who, size($3), size($4) }
    $1 ~ /^usage/ { printf "  %s: the device holds %s for all processes\n", who, size($4) }'
}
gib=$((1 << 30))
env "${gpu[@]}" "${first[@]:1}" "$client" init alloc:$((3 * gib)) info await:"$work/burst-done" \
  alloc:$((gib)):after-burst usage >"$work/replica0.out" 2>&1 &
replica0=$!
until grep -q '^info' "$work/replica0.out" 2>/dev/null; do sleep 0.05; done
explain "replica ::0" <"$work/replica0.out"
env "${gpu[@]}" "${second[@]:1}" "$client" init info alloc:$((3 * gib)) alloc:$((3 * gib)):burst usage \
  >"$work/replica1.out" 2>"$work/replica1.err"
explain "replica ::1" <"$work/replica1.out" | sed 's/:burst//'
sed 's/^/  replica ::1 stderr: /' "$work/replica1.err"
echo "  replica ::1 has exited; replica ::0 goes on:"
touch "$work/burst-done"
wait "$replica0"
grep -v '^init\|^alloc:[0-9]* \|^info\|^await' "$work/replica0.out" | explain "replica ::0" | sed 's/:after-burst//'

if "$bin" plan --help >/dev/null 2>&1 && [[ -f examples/fleet.yaml ]]; then
  step "The planner: how to cut a fleet for a set of services"
  "$bin" plan -f examples/fleet.yaml
fi
