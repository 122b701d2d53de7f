#!/usr/bin/env bash
# Builds the real peers of the real-cluster tier once, with the machine's Go,
# from the Go module proxy, and prints the directory that holds them:
#
#   kubelet kube-apiserver kube-controller-manager kube-scheduler kubectl  (Kubernetes 1.36)
#   containerd containerd-shim-runc-v2 ctr                                 (containerd 2.3)
#   etcd                                                                   (etcd 3.6)
#   helm                                                                   (Helm 3)
#
#   tests/e2e/build-peers.sh [PEER...]   # default: all four; reuses what is built
#
# Each peer is a small build module of the project's own (tests/e2e/peers/NAME:
# go.mod pins the exact versions, go.sum their checksums; Kubernetes' staging
# modules are pinned to the matching v0.36 release, as its own go.mod points
# them at local paths the module zip does not carry). Nothing of theirs is in
# the tree. Output, the module cache and Go's build cache live under
# $TESSERA_E2E_CACHE (default ~/.cache/tessera/e2e); a peer is rebuilt only
# when its go.mod or go.sum changes. Progress goes to stderr; stdout is the
# bin directory.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${TESSERA_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera/e2e}
all=(kubernetes containerd etcd helm)
peers=("$@")
((${#peers[@]})) || peers=("${all[@]}")

say() { printf 'build-peers: %s\n' "$*" >&2; }
die() { say "error: $*"; exit 1; }

command -v go >/dev/null || die "go is missing (the machine's Go 1.26 is needed; scripts/setup.sh --e2e checks it)"

# Version stamps the binaries print, from each module's pinned version.
pinned() { awk -v m="$2" '$1 == m && $2 ~ /^v/ {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' "$here/peers/$1/go.mod"; }
ldflags_for() {
  local v
  case $1 in
    kubernetes)
      v=$(pinned kubernetes k8s.io/kubernetes)
      local minor=${v#v1.}; minor=${minor%%.*}
      echo "-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1" \
           "-X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean" \
           "-X k8s.io/client-go/pkg/version.gitVersion=$v" ;;
    containerd)
      v=$(pinned containerd github.com/containerd/containerd/v2)
      echo "-s -w -X github.com/containerd/containerd/v2/version.Version=$v" ;;
    helm)
      v=$(pinned helm helm.sh/helm/v3)
      echo "-s -w -X helm.sh/helm/v3/internal/version.version=$v" ;;
    *) echo "-s -w" ;;
  esac
}
# The binaries each module's `tool` lines name, by the name they are run as.
binaries_of() {
  case $1 in
    kubernetes) echo kubelet kube-apiserver kube-controller-manager kube-scheduler kubectl ;;
    containerd) echo containerd containerd-shim-runc-v2 ctr ;;
    etcd) echo etcd ;;
    helm) echo helm ;;
  esac
}

bin=$cache/peers/bin
mkdir -p "$bin"
# One build at a time (tests that need a peer run in parallel): a second
# caller waits, then finds the peer built.
command -v flock >/dev/null || die "flock is missing (util-linux)"
exec 9>"$cache/peers/.lock"
flock 9
export GOMODCACHE=$cache/go/mod GOCACHE=$cache/go/build GOFLAGS=-mod=mod CGO_ENABLED=0 GOTOOLCHAIN=local
export GOPROXY=${GOPROXY:-https://proxy.golang.org}
for peer in "${peers[@]}"; do
  [[ -f $here/peers/$peer/go.mod ]] || die "unknown peer '$peer' (known: ${all[*]})"
  stamp=$(cat "$here/peers/$peer/go.mod" "$here/peers/$peer/go.sum" | sha256sum | cut -c1-16)
  out=$cache/peers/$peer-$stamp
  fresh=1
  for b in $(binaries_of "$peer"); do [[ -x $out/$b ]] || fresh=0; done
  if ((fresh)); then
    say "$peer: built ($out)"
  else
    started=$SECONDS
    note=
    [[ $peer != kubernetes ]] || note=" (6-7 minutes on 2 cores the first time)"
    say "$peer: building $(binaries_of "$peer") with $(go env GOVERSION)$note"
    rm -rf "$out.tmp"
    mkdir -p "$out.tmp"
    (cd "$here/peers/$peer" && GOBIN=$out.tmp go install -trimpath -tags "no_btrfs no_devmapper no_zfs" \
      -ldflags "$(ldflags_for "$peer")" tool) >&2 || die "$peer: go install failed (the log is above)"
    # etcd's main package is its server module's root (go.etcd.io/etcd/server/v3): go install names it "server".
    [[ $peer != etcd ]] || mv "$out.tmp/server" "$out.tmp/etcd"
    for b in $(binaries_of "$peer"); do [[ -x $out.tmp/$b ]] || die "$peer: go install made no $b"; done
    rm -rf "$out"
    mv "$out.tmp" "$out"
    # Older builds of this peer go.
    for old in "$cache/peers/$peer"-*; do [[ $old == "$out" ]] || rm -rf "$old"; done
    say "$peer: built in $((SECONDS - started)) s"
  fi
  for b in $(binaries_of "$peer"); do ln -sfn "$out/$b" "$bin/$b"; done
done
echo "$bin"
