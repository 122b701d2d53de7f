#!/usr/bin/env bash
# Installs what tessera needs to build and test, from Debian's packages only.
# Idempotent: installs nothing when everything is present. Needs root (or sudo)
# only when something is missing.
#
#   scripts/setup.sh          build and unit-test dependencies
#   scripts/setup.sh --e2e    also what the real-cluster tests need (tests/e2e)
#
# It prints one line per step (what, and how long it took); apt's own output
# goes to a log file it names ($TESSERA_SETUP_LOG, default
# ~/.cache/tessera/setup.log), whose last lines are shown only when a step fails.
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
  python3-yaml                        # tests/deploy: kustomize and Helm renders compared object by object
)

e2e=false
case "${1:-}" in
  "") ;;
  --e2e)
    # A loopback Kubernetes (tests/e2e): the machine's Go builds Kubernetes,
    # containerd and etcd from the Go module proxy (tests/e2e/peers); runc and
    # the CNI plugins run the pods; debootstrap makes the images' base.
    e2e=true
    packages+=(runc containernetworking-plugins debootstrap iproute2 iptables openssl ca-certificates curl jq) ;;
  *) echo "setup: unknown option '$1' (use --e2e or nothing)" >&2; exit 2 ;;
esac

log=${TESSERA_SETUP_LOG:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera/setup.log}
mkdir -p "$(dirname "$log")"
: >"$log"

# step "what" command...: one line on the terminal, everything else in the log.
step() {
  local what=$1 started=$SECONDS
  shift
  printf 'setup: %s ... ' "$what"
  if "$@" >>"$log" 2>&1; then
    printf 'done in %d s\n' $((SECONDS - started))
  else
    local rc=$?
    printf 'FAILED after %d s (exit %d)\n' $((SECONDS - started)) "$rc"
    echo "setup: the last lines of $log:" >&2
    tail -n 30 "$log" | sed 's/^/  /' >&2
    exit 1
  fi
}

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} > 0)); then
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "setup: need root to install ${missing[*]}" >&2; exit 1; }
    sudo_cmd=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  step "apt-get update" "${sudo_cmd[@]}" apt-get update
  step "installing ${#missing[@]} packages (${missing[*]})" \
    "${sudo_cmd[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#packages[@]} Debian packages present"
fi

if $e2e; then
  # The peers are built with the machine's Go; Debian's is too old for them.
  need=1.26
  have=$(go env GOVERSION 2>/dev/null | sed 's/^go//') || have=
  if [[ -z $have ]] || [[ $(printf '%s\n%s\n' "$need" "$have" | sort -V | head -1) != "$need" ]]; then
    echo "setup: the real-cluster tier needs Go $need or newer on PATH (found: ${have:-none})" >&2
    exit 1
  fi
  echo "setup: Go $have for the real-cluster peers"
fi
echo "setup: ready (log: $log)"
