#!/usr/bin/env bash
# Builds tessera's container image with no registry and no container daemon,
# as an OCI image archive that containerd (`ctr images import`), skopeo
# (`skopeo copy oci-archive:FILE docker://...`) or podman (`podman load`) take.
#
#   deploy/image/build.sh --build DIR [--name tessera:VERSION] --output FILE
#   deploy/image/build.sh --tessera BIN --cuda-lib LIB --cdi-hook BIN --memory-hook BIN [--sim-lib LIB]
#                         [--mps-control BIN] [--without-hooks] [--name tessera:VERSION] --output FILE
#   deploy/image/build.sh --base-only --tessera BIN [...]   # print the base layer's path
#
# --build DIR takes tessera, the quota library and both hooks from a build
# tree (build/release: src/tessera, src/cuda_quota/...). The hooks are part of
# the image unless --without-hooks says otherwise: every CDI spec tessera
# writes (cdi-cri, cdi-annotations, the DRA driver) names tessera-cdi-hook,
# and a runtime fails a container whose hook is missing. --sim-lib (the
# simulated NVML) and --mps-control are for test images only.
#
# Two layers: a Debian bookworm root filesystem made with debootstrap
# (minbase, plus exactly the packages whose libraries the binaries load, found
# with ldd and dpkg -S), cached by its package list under $TESSERA_IMAGE_CACHE
# (default ~/.cache/tessera/images) so it is made once; then tessera's files:
#   /usr/bin/tessera                               the program (the entrypoint)
#   /usr/lib/tessera/sim/libnvidia-ml.so.1         --sim-lib: the simulated NVML (test images; used
#                                                  only with TESSERA_SIM)
#   /usr/local/tessera/lib/libtessera-cuda.so      --cuda-lib: the memory-quota library, which the
#                                                  DaemonSet's init container copies to the host
#   /usr/local/tessera/lib/tessera-cdi-hook        --cdi-hook: the CDI specs' createContainer hook
#                                                  (linker cache, libcuda.so), copied to the host too
#   /usr/local/tessera/lib/tessera-memory-hook     --memory-hook: the quota's driver backend, a CDI
#                                                  createRuntime hook, copied to the host too
#   /usr/local/tessera/bin/nvidia-cuda-mps-control --mps-control: an MPS control program for nodes
#                                                  with no driver, off PATH, with the
#                                                  nvidia-cuda-mps-server beside it (required
#                                                  there: the daemon runs it from its PATH)
# Before it writes the archive it runs `tessera --version` inside the image's
# file system (an overlay on the base, chrooted), so a library missing from
# the base fails the build. TESSERA_DEBIAN_MIRROR overrides the mirror
# debootstrap uses. Needs root (debootstrap, mount, chroot).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
name=  # default: tessera:<the program's version>, the tag the manifests and the chart name
tessera= sim_lib= cuda_lib= cdi_hook= memory_hook= mps_control= output= base_only=0 without_hooks=0 build_dir=
usage() { sed -n '2,35p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "image: error: $*" >&2; exit 1; }
say() { echo "image: $*" >&2; }

while (($#)); do
  case $1 in
    --build) build_dir=${2:?}; shift 2 ;;
    --without-hooks) without_hooks=1; shift ;;
    --tessera) tessera=${2:?}; shift 2 ;;
    --sim-lib) sim_lib=${2:?}; shift 2 ;;
    --cuda-lib) cuda_lib=${2:?}; shift 2 ;;
    --mps-control) mps_control=${2:?}; shift 2 ;;
    --cdi-hook) cdi_hook=${2:?}; shift 2 ;;
    --memory-hook) memory_hook=${2:?}; shift 2 ;;
    --name) name=${2:?}; shift 2 ;;
    --output) output=${2:?}; shift 2 ;;
    --base-only) base_only=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done
if [[ -n $build_dir ]]; then
  [[ -d $build_dir ]] || die "--build: '$build_dir' is not a directory"
  tessera=${tessera:-$build_dir/src/tessera}
  cuda_lib=${cuda_lib:-$build_dir/src/cuda_quota/libtessera-cuda.so}
  if ((!without_hooks)); then
    cdi_hook=${cdi_hook:-$build_dir/src/cuda_quota/tessera-cdi-hook}
    memory_hook=${memory_hook:-$build_dir/src/cuda_quota/tessera-memory-hook}
  fi
  for f in "$tessera" "$cuda_lib" $cdi_hook $memory_hook; do
    [[ -e $f ]] || die "--build: $f does not exist: is '$build_dir' a finished build (cmake --build --preset release)?"
  done
fi
[[ -x $tessera ]] || die "--tessera: '$tessera' is not an executable (or give --build DIR)"
[[ -z $sim_lib || -f $sim_lib ]] || die "--sim-lib: '$sim_lib' does not exist"
if ((!without_hooks && !base_only)) && [[ -z $cdi_hook || -z $memory_hook ]]; then
  die "no --cdi-hook or no --memory-hook: every CDI spec tessera writes names tessera-cdi-hook (and, with memory quotas, tessera-memory-hook), and a container runtime fails a container whose hook is missing; give --build DIR, both hooks, or --without-hooks for an image that never writes CDI specs"
fi
((!without_hooks)) || say "--without-hooks: the image carries no CDI hooks; the chart refuses to run it with CDI or the DRA driver"
[[ -z $cuda_lib || -f $cuda_lib ]] || die "--cuda-lib: '$cuda_lib' does not exist"
[[ -z $mps_control || -x $mps_control ]] || die "--mps-control: '$mps_control' is not an executable"
mps_server=${mps_control:+$(dirname "$mps_control")/nvidia-cuda-mps-server}
[[ -z $mps_server || -x $mps_server ]] ||
  die "--mps-control: no executable nvidia-cuda-mps-server beside '$mps_control' (the control daemon runs the server from its directory on PATH)"
[[ -z $cdi_hook || -x $cdi_hook ]] || die "--cdi-hook: '$cdi_hook' is not an executable"
[[ -z $memory_hook || -x $memory_hook ]] || die "--memory-hook: '$memory_hook' is not an executable"
((base_only)) || [[ -n $output ]] || die "--output FILE is needed (or --base-only)"
[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, mount, chroot)"
((base_only)) || [[ -n $cuda_lib ]] || say "no --cuda-lib: the image carries no libtessera-cuda.so (memory quotas go unenforced)"

# The Debian packages that own the shared libraries the binaries load.
packages() {
  local lib real
  { ldd "$tessera"; [[ -z $sim_lib ]] || ldd "$sim_lib"; [[ -z $cuda_lib ]] || ldd "$cuda_lib"; [[ -z $mps_control ]] || ldd "$mps_control" "$mps_server"; } |
    awk '$3 ~ /^\// {print $3}' | sort -u | while read -r lib; do
    real=$(readlink -f "$lib")
    dpkg -S "$real" 2>/dev/null || dpkg -S "${real/#\/usr\/lib/\/lib}" 2>/dev/null ||
      die "no Debian package owns $lib ($real)"
  done | sed 's/: .*//; s/, /\n/g' | cut -d: -f1 | sort -u | { grep -vx -e libc6 -e libgcc-s1 -e libstdc++6 || true; } |
    paste -sd, -
}

cache=${TESSERA_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera/images}
mkdir -p "$cache"
# And CBC, which the planner loads at run time (tessera plan): not in ldd's list.
pkgs=$(packages),coinor-libcbc3
base_id=bookworm-$(printf '%s' "$pkgs" | sha256sum | cut -c1-12)
base_dir=$cache/base-$base_id
base_tar=$cache/base-$base_id.tar
if [[ -f $base_tar && -d $base_dir ]]; then
  say "base $base_id present"
else
  command -v debootstrap >/dev/null || die "debootstrap is missing (scripts/setup.sh --e2e)"
  rm -rf "$base_dir.tmp" "$base_dir"
  say "debootstrap bookworm (minbase + ${pkgs//,/ })"
  started=$SECONDS
  debootstrap --variant=minbase --include="$pkgs" bookworm "$base_dir.tmp" \
    "${TESSERA_DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$cache/debootstrap.log" 2>&1 ||
    { tail -20 "$cache/debootstrap.log" >&2; rm -rf "$base_dir.tmp"; die "debootstrap failed (log: $cache/debootstrap.log)"; }
  rm -rf "$base_dir.tmp"/var/cache/apt/archives/*.deb "$base_dir.tmp"/var/lib/apt/lists/*
  tar --numeric-owner --xattrs -C "$base_dir.tmp" -cf "$base_tar.tmp" .
  mv "$base_dir.tmp" "$base_dir"
  mv "$base_tar.tmp" "$base_tar"
  # Older bases go.
  for old in "$cache"/base-*; do [[ $old == "$base_dir" || $old == "$base_tar" ]] || rm -rf "$old"; done
  say "base $base_id made in $((SECONDS - started)) s ($(du -sh "$base_tar" | cut -f1))"
fi
if ((base_only)); then
  echo "$base_tar"
  exit 0
fi

work=$(mktemp -d /tmp/tessera-image.XXXXXX)
trap 'umount "$work/merged" 2>/dev/null || true; rm -rf "$work"' EXIT
mkdir -p "$work/app/usr/bin" "$work/app/usr/lib/tessera/sim" "$work/app/usr/local/tessera/lib" "$work/app/usr/local/tessera/bin"
install -m 0755 "$tessera" "$work/app/usr/bin/tessera"
[[ -z $sim_lib ]] || install -m 0644 "$sim_lib" "$work/app/usr/lib/tessera/sim/libnvidia-ml.so.1"
[[ -z $cuda_lib ]] || install -m 0755 "$cuda_lib" "$work/app/usr/local/tessera/lib/libtessera-cuda.so"
[[ -z $cdi_hook ]] || install -m 0755 "$cdi_hook" "$work/app/usr/local/tessera/lib/tessera-cdi-hook"
[[ -z $memory_hook ]] || install -m 0755 "$memory_hook" "$work/app/usr/local/tessera/lib/tessera-memory-hook"
[[ -z $mps_control ]] || install -m 0755 "$mps_control" "$work/app/usr/local/tessera/bin/nvidia-cuda-mps-control"
[[ -z $mps_server ]] || install -m 0755 "$mps_server" "$work/app/usr/local/tessera/bin/nvidia-cuda-mps-server"

# The image's file system as a container sees it: does the program start?
mkdir -p "$work/merged" "$work/upper" "$work/overlay-work"
mount -t overlay overlay -o "lowerdir=$work/app:$base_dir,upperdir=$work/upper,workdir=$work/overlay-work" "$work/merged" ||
  die "cannot mount the image's layers to check them"
version=$(chroot "$work/merged" /usr/bin/tessera --version 2>&1) ||
  die "tessera does not start in the image: $version"
umount "$work/merged"
name=${name:-tessera:${version#tessera }}

tar --numeric-owner -C "$work/app" -cf "$work/app.tar" .
env_args=()
[[ -z $sim_lib ]] || env_args=(--env TESSERA_SIM_LIBRARY=/usr/lib/tessera/sim/libnvidia-ml.so.1)
python3 "$here/oci_image.py" --name "$name" --layer "$base_tar" --layer "$work/app.tar" \
  --entrypoint '["/usr/bin/tessera"]' --cmd '["--help"]' "${env_args[@]}" \
  --label org.opencontainers.image.title=tessera \
  --label "org.opencontainers.image.description=GPU sharing node agent: MIG manager, device plugin, exporter" \
  --label "org.opencontainers.image.version=${version#tessera }" \
  --output "$output" >/dev/null
say "built $name ($(du -h "$output" | cut -f1), $version) on base $base_id: $output"
