#!/usr/bin/env bash
# Installs what tessera needs to build and test, from Debian's packages only.
# Idempotent: installs nothing when everything is present. Needs root (or sudo)
# only when something is missing.
#
#   scripts/setup.sh          build and unit-test dependencies
#   scripts/setup.sh --e2e    also what the real-cluster tests need (tests/e2e)
set -euo pipefail

# Build and test dependencies (docs/architecture.md, Conventions).
packages=(
  cmake ninja-build g++ pkg-config python3
  clang libclang-rt-14-dev            # libFuzzer targets
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  coinor-libcbc-dev                   # exact MILP solver for the planner
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc   # kubelet device-plugin API
  libcpp-httplib-dev                  # the exporter's /metrics endpoint
  libssl-dev                          # TLS to the Kubernetes API server (src/kube)
  prometheus                          # promtool: the alert rules' tests
)

case "${1:-}" in
  "") ;;
  --e2e)
    # A loopback Kubernetes: Go builds kubelet and control plane from Debian's
    # source package; etcd, dockerd and a debootstrap base image run them.
    packages+=(golang-go make rsync etcd-server docker.io debootstrap) ;;
  *) echo "setup: unknown option '$1' (use --e2e or nothing)" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "setup: need root to install ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "setup: done"
