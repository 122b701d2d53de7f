#!/usr/bin/env bash
# Builds kubelet, kube-apiserver, kube-controller-manager and kube-scheduler
# from Debian's `kubernetes` source package (1.20.2, with vendor/) once, into a
# cache outside the clone, and prints the directory that holds them. It builds
# the package's upstream tarball (orig.tar.gz) as it is; Debian's patches are
# not applied.
#
#   tests/e2e/build-kubernetes.sh      # reuses the cache when its version matches
#
# The cache is $TESSERA_E2E_CACHE (default ~/.cache/tessera/e2e). Apt runs with
# its own sources list and index under the cache, so the system's apt
# configuration is never changed. Progress goes to stderr; stdout is the bin dir.
set -euo pipefail

readonly K8S_VERSION=v1.20.2
# Debian 12's source version of kubernetes (the source of kubernetes-client).
readonly DEB_VERSION=1.20.5+really1.20.2-1.1+deb12u1
readonly BINARIES=(kubelet kube-apiserver kube-controller-manager kube-scheduler)

cache=${TESSERA_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera/e2e}
out=$cache/kubernetes-$K8S_VERSION
bin=$out/bin

say() { printf 'build-kubernetes: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

cached() {
  [[ -f $out/VERSION && $(cat "$out/VERSION") == "$K8S_VERSION $DEB_VERSION" ]] || return 1
  local b
  for b in "${BINARIES[@]}"; do [[ -x $bin/$b ]] || return 1; done
  "$bin/kubelet" --version 2>/dev/null | grep -qx "Kubernetes $K8S_VERSION"
}

if cached; then
  say "using cached $K8S_VERSION binaries in $bin"
  echo "$bin"
  exit 0
fi

command -v go >/dev/null || die "go is missing (run scripts/setup.sh --e2e)"
command -v rsync >/dev/null || die "rsync is missing (run scripts/setup.sh --e2e)"

work=$out/work
rm -rf "$out"
# A failed build leaves no 3.5 GB tree behind.
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/dl" "$work/src" "$bin"

# The deb-src index for bookworm, read with apt's own signature checks.
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
mirror=${TESSERA_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security=${TESSERA_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
cat >"$work/apt/sources.list" <<EOF
deb-src [signed-by=$keyring] $mirror bookworm main
deb-src [signed-by=$keyring] $mirror bookworm-updates main
deb-src [signed-by=$keyring] $security bookworm-security main
EOF
apt_opts=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o "Dir::Etc::SourceParts=$work/apt/none"
          -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache" -o "Debug::NoLocking=1")
started=$SECONDS
say "fetching the source index"
apt-get "${apt_opts[@]}" -qq update >&2 || die "apt-get update of the deb-src index failed"
say "downloading kubernetes $DEB_VERSION source"
(cd "$work/dl" && apt-get "${apt_opts[@]}" -qq source --download-only "kubernetes=$DEB_VERSION" >&2) ||
  die "apt-get source kubernetes=$DEB_VERSION failed"

orig=$(compgen -G "$work/dl/kubernetes_*.orig.tar.gz" | head -1) || true
[[ -n $orig ]] || die "no orig tarball downloaded in $work/dl"
say "unpacking $(basename "$orig")"
tar -xzf "$orig" --strip-components=1 -C "$work/src"

# hack/lib/version.sh reads the version from this file when there is no git tree.
cat >"$work/version.env" <<EOF
KUBE_GIT_VERSION='$K8S_VERSION'
KUBE_GIT_MAJOR='1'
KUBE_GIT_MINOR='20'
KUBE_GIT_COMMIT='debian-$DEB_VERSION'
KUBE_GIT_TREE_STATE='clean'
EOF

say "building ${BINARIES[*]} with $(go version | cut -d' ' -f3) (6-7 minutes on 2 cores)"
what=$(printf 'cmd/%s ' "${BINARIES[@]}")
(
  cd "$work/src"
  export HOME=$work/home GOPATH=$work/gopath GOCACHE=$work/gocache GOFLAGS= GO111MODULE=off
  export KUBE_GIT_VERSION_FILE=$work/version.env KUBE_VERBOSE=1
  make WHAT="${what% }" >&2
) || die "make WHAT=\"$what\" failed (the log is above)"

for b in "${BINARIES[@]}"; do
  install -m 0755 "$work/src/_output/bin/$b" "$bin/$b" || die "make did not produce $b"
done
"$bin/kubelet" --version | grep -qx "Kubernetes $K8S_VERSION" ||
  die "built kubelet reports '$("$bin/kubelet" --version)', not $K8S_VERSION"
echo "$K8S_VERSION $DEB_VERSION" >"$out/VERSION"
# The tree and Go's build cache are 3.5 GB; the binaries are all that is reused
# (the EXIT trap removes them).
say "built in $((SECONDS - started)) s: $(du -sh "$bin" | cut -f1) in $bin"
echo "$bin"
