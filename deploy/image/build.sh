#!/usr/bin/env bash
# Builds tessera's container image with no registry: a Debian bookworm base made
# with debootstrap (holding exactly the packages whose libraries the binary
# links) is imported once, then deploy/image/Dockerfile adds the binaries.
#
#   deploy/image/build.sh --tessera BIN --sim-lib LIB [--cuda-lib LIB] [--mps-control BIN] [--tag tessera:latest]
#
# --cuda-lib: libtessera-cuda.so (CMake target tessera_cuda), the memory-quota
# library; without it the image carries none and quotas go unenforced.
# --mps-control: an MPS control program (the simulated one, for nodes with no
# driver) put at /usr/local/tessera/bin/nvidia-cuda-mps-control, off PATH: the
# plugin runs it only when told `--mps-control` that path. Without it the
# plugin runs the driver's, which the NVIDIA container toolkit puts on PATH.
#
# Talks to the daemon named by DOCKER_HOST. The base image's tag carries a hash
# of its package list, so it is rebuilt only when the binary's libraries change.
# TESSERA_DEBIAN_MIRROR overrides the mirror debootstrap uses. Needs root.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
tag=tessera:latest
tessera= sim_lib= cuda_lib= mps_control=
usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "image: error: $*" >&2; exit 1; }
say() { echo "image: $*" >&2; }

while (($#)); do
  case $1 in
    --tessera) tessera=${2:?}; shift 2 ;;
    --sim-lib) sim_lib=${2:?}; shift 2 ;;
    --cuda-lib) cuda_lib=${2:?}; shift 2 ;;
    --mps-control) mps_control=${2:?}; shift 2 ;;
    --tag) tag=${2:?}; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done
[[ -x $tessera ]] || die "--tessera: '$tessera' is not an executable"
[[ -f $sim_lib ]] || die "--sim-lib: '$sim_lib' does not exist"
[[ -z $cuda_lib || -f $cuda_lib ]] || die "--cuda-lib: '$cuda_lib' does not exist"
[[ -z $mps_control || -x $mps_control ]] || die "--mps-control: '$mps_control' is not an executable"
[[ -n $cuda_lib ]] || say "no --cuda-lib: the image carries no libtessera-cuda.so (memory quotas go unenforced)"
command -v docker >/dev/null || die "docker is missing (scripts/setup.sh --e2e)"

# The Debian packages that own the shared libraries the binaries load.
packages() {
  local lib real
  { ldd "$tessera"; ldd "$sim_lib"; [[ -z $cuda_lib ]] || ldd "$cuda_lib"; [[ -z $mps_control ]] || ldd "$mps_control"; } | awk '$3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
    real=$(readlink -f "$lib")
    dpkg -S "$real" 2>/dev/null || dpkg -S "${real/#\/usr\/lib/\/lib}" 2>/dev/null ||
      die "no Debian package owns $lib ($real)"
  done | sed 's/: .*//; s/, /\n/g' | cut -d: -f1 | sort -u | { grep -vx -e libc6 -e libgcc-s1 -e libstdc++6 || true; } |
    paste -sd, -
}

pkgs=$(packages)
base=tessera-base:bookworm-$(printf '%s' "$pkgs" | sha256sum | cut -c1-12)
if docker image inspect "$base" >/dev/null 2>&1; then
  say "base $base present"
else
  command -v debootstrap >/dev/null || die "debootstrap is missing (scripts/setup.sh --e2e)"
  rootfs=$(mktemp -d /tmp/tessera-rootfs.XXXXXX)
  trap 'rm -rf "$rootfs"' EXIT
  say "debootstrap bookworm (minbase + ${pkgs//,/ })"
  started=$SECONDS
  debootstrap --variant=minbase --include="$pkgs" bookworm "$rootfs" \
    "${TESSERA_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$rootfs.log" 2>&1 ||
    { tail -20 "$rootfs.log" >&2; rm -f "$rootfs.log"; die "debootstrap failed"; }
  rm -f "$rootfs.log"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -c . | docker import -m "debootstrap bookworm minbase: $pkgs" - "$base" >/dev/null
  say "base $base made in $((SECONDS - started)) s"
fi

context=$(mktemp -d /tmp/tessera-image.XXXXXX)
trap 'rm -rf "$context" ${rootfs:+"$rootfs"}' EXIT
cp "$here/Dockerfile" "$context/"
cp "$tessera" "$context/tessera"
cp "$sim_lib" "$context/libnvidia-ml-sim.so.1"
mkdir "$context/lib"
[[ -z $cuda_lib ]] || cp "$cuda_lib" "$context/lib/libtessera-cuda.so"
mkdir "$context/bin"
[[ -z $mps_control ]] || cp "$mps_control" "$context/bin/nvidia-cuda-mps-control"
# The legacy builder: BuildKit's default network needs a bridge, which a
# node built with --bridge=none does not have.
DOCKER_BUILDKIT=0 docker build -q --network=none --build-arg "BASE=$base" -t "$tag" "$context" >/dev/null 2>"$context/err" ||
  { cat "$context/err" >&2; die "docker build failed"; }
say "built $tag ($(docker image inspect -f '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}')) on $base"
echo "$base"
