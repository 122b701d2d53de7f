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
"$bin" plugin --config "$work/plugin.yaml" --sim "$node" --kubelet-dir "$work/device-plugins" \
  >"$work/plugin.log" 2>&1 &
plugin_pid=$!
"$kubelet_sim" --dir "$work/device-plugins" --resources 3 --allocate 1
kill -TERM "$plugin_pid"; wait "$plugin_pid" || true; plugin_pid=
grep -E "ready|stopped" "$work/plugin.log"

if "$bin" plan --help >/dev/null 2>&1 && [[ -f examples/fleet.yaml ]]; then
  step "The planner: how to cut a fleet for a set of services"
  "$bin" plan -f examples/fleet.yaml
fi
