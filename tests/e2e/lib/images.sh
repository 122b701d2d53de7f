# The images the test nodes run, made without a registry and imported into
# every node's containerd (lib/cluster.sh, E2E_IMAGES):
#   localhost/tessera-e2e/pause:e2e     the pod sandbox: tests/e2e/images/pause.c, static
#   localhost/tessera-e2e/shell:e2e     a POSIX shell, coreutils and glibc: the debootstrap base
#                                       tessera's image is built on, for test pods (ours and anyone's)
#   tessera:<appVersion>                deploy/image/build.sh, from the build under test, under the
#                                       tag the chart's image.tag defaults to ($TESSERA_IMAGE)
#   nvcr.io/nvidia/k8s/cuda-sample:nbody-cuda11.6.0-ubuntu18.04
#                                       NOT NVIDIA's image: a stand-in under its name, so that NVIDIA's
#                                       quickstart pods run as published. The shell image plus
#                                       /tmp/sample (tests/e2e/images/nbody-sample.sh), which under MPS
#                                       is the simulator's CUDA client ($E2E_NBODY_IMAGE)
# Sourced after lib/common.sh; needs E2E_STATE, BUILD_DIR and REPO.

# tessera's image as the chart names it by default: the chart's appVersion.
TESSERA_IMAGE=docker.io/library/tessera:$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$REPO/deploy/helm/tessera/Chart.yaml")

# The tier's own images carry a tag other than latest, so a pod that names
# one without an imagePullPolicy gets IfNotPresent (Kubernetes' default for
# any other tag; latest means Always, which no registry here could answer).
E2E_PAUSE_IMAGE=localhost/tessera-e2e/pause:e2e
E2E_SHELL_IMAGE=localhost/tessera-e2e/shell:e2e
E2E_NBODY_IMAGE=nvcr.io/nvidia/k8s/cuda-sample:nbody-cuda11.6.0-ubuntu18.04

# image_args: the build under test, as docs/install.md builds the image
# (--build: tessera, the quota library, both hooks), plus the simulated NVML
# and MPS control program of a test image.
image_args() {
  args=(--build "$BUILD_DIR" --sim-lib "$BUILD_DIR/sim/nvml/libnvidia-ml.so.1")
  [[ ! -x $BUILD_DIR/sim/mps/nvidia-cuda-mps-control ]] || args+=(--mps-control "$BUILD_DIR/sim/mps/nvidia-cuda-mps-control")
}

# images_base: the debootstrap base (the one step that needs Debian's mirror),
# made once into the cache; images_build then works offline.
images_base() {
  local args
  image_args
  "$REPO/deploy/image/build.sh" --base-only "${args[@]}" >/dev/null
}

images_build() {
  local cache=${TESSERA_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera/images} work stamp args
  mkdir -p "$cache" "$E2E_STATE/images"
  image_args

  # The pause image, rebuilt when its source changes.
  stamp=$(cat "$REPO/tests/e2e/images/pause.c" <(echo "$E2E_PAUSE_IMAGE") | sha256sum | cut -c1-12)
  local pause=$cache/pause-$stamp.oci.tar
  if [[ ! -f $pause ]]; then
    work=$(mktemp -d)
    mkdir -p "$work/root"
    gcc -static -O2 -Wall -Werror -o "$work/root/pause" "$REPO/tests/e2e/images/pause.c" ||
      die "cannot build the pause image's program (gcc -static)"
    tar --numeric-owner -C "$work/root" -cf "$work/layer.tar" .
    python3 "$REPO/deploy/image/oci_image.py" --name "$E2E_PAUSE_IMAGE" --layer "$work/layer.tar" \
      --entrypoint '["/pause"]' --output "$pause" >/dev/null
    rm -rf "$work"
  fi

  local base shell
  base=$("$REPO/deploy/image/build.sh" --base-only "${args[@]}")
  shell=$cache/shell-${E2E_SHELL_IMAGE##*:}-$(basename "$base" .tar).oci.tar
  [[ -f $shell ]] || python3 "$REPO/deploy/image/oci_image.py" --name "$E2E_SHELL_IMAGE" \
    --layer "$base" --cmd '["/bin/sh"]' --output "$shell" >/dev/null
  # The nbody stand-in: the shell image and a layer with /tmp/sample and the simulator's MPS
  # client, rebuilt when either changes.
  local mps=$BUILD_DIR/sim/mps/nvidia-cuda-mps-control nbody
  [[ -x $mps ]] || die "no $mps: the nbody stand-in image needs the simulator's MPS client"
  stamp=$(cat "$REPO/tests/e2e/images/nbody-sample.sh" "$mps" <(echo "$E2E_NBODY_IMAGE $base") | sha256sum | cut -c1-12)
  nbody=$cache/nbody-$stamp.oci.tar
  if [[ ! -f $nbody ]]; then
    rm -f "$cache"/nbody-*.oci.tar
    work=$(mktemp -d)
    mkdir -p "$work/root/tmp" "$work/root/usr/local/bin"
    install -m 0755 "$REPO/tests/e2e/images/nbody-sample.sh" "$work/root/tmp/sample"
    install -m 0755 "$mps" "$work/root/usr/local/bin/nvidia-cuda-mps-control"
    tar --numeric-owner -C "$work/root" -cf "$work/layer.tar" .
    python3 "$REPO/deploy/image/oci_image.py" --name "$E2E_NBODY_IMAGE" --layer "$base" --layer "$work/layer.tar" \
      --cmd '["/tmp/sample"]' --output "$nbody" >/dev/null
    rm -rf "$work"
  fi
  "$REPO/deploy/image/build.sh" "${args[@]}" --name "$TESSERA_IMAGE" \
    --output "$E2E_STATE/images/tessera.oci.tar"
  E2E_IMAGES=("$pause" "$shell" "$nbody" "$E2E_STATE/images/tessera.oci.tar")
}
