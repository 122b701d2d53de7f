# Shared by check_manifests.sh and check_helm.sh (sourced).
#
# peer_tool NAME PEER: the path of kubectl or helm. The real-cluster tier's
# peers come first (tests/e2e/build-peers.sh: kubectl 1.36 with its kustomize,
# Helm 3.22), so that a render does not depend on what the machine has on
# PATH; when they are not built yet they are built here (Go and the module
# proxy needed: minutes, Kubernetes' the longest). Only when that fails is
# NAME taken from PATH, with a note. Nothing found: an error, never a skip.
peer_tool() {
  local name=$1 peer=$2 here cache bin log
  here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
  cache=${TESSERA_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tessera/e2e}
  bin=$cache/peers/bin
  if [[ ! -x $bin/$name ]]; then
    echo "$name: not built at $bin; building it (tests/e2e/build-peers.sh $peer)" >&2
    mkdir -p "$cache"
    log=$(mktemp)
    # build-peers.sh builds one peer at a time (ctest may run both checks at once).
    if bin=$("$here/../e2e/build-peers.sh" "$peer" 2>"$log") && [[ -x $bin/$name ]]; then
      rm -f "$log"
    else
      tail -n 20 "$log" | sed 's/^/  | /' >&2
      rm -f "$log"
      if command -v "$name" >/dev/null; then
        echo "$name: the peers' build failed; using $(command -v "$name") from PATH, whose version may differ" >&2
        command -v "$name"
        return 0
      fi
      echo "$name: not found: tests/e2e/build-peers.sh $peer failed and there is none on PATH" >&2
      return 1
    fi
  fi
  echo "$bin/$name"
}

# PyYAML parses the renders (Debian: python3-yaml).
require_pyyaml() {
  python3 -c 'import yaml' 2>/dev/null && return 0
  echo "python3 cannot import yaml (PyYAML; Debian package python3-yaml): the rendered manifests cannot be checked" >&2
  return 1
}

# compose SPEC DIR DEPLOY: writes DIR/kustomization.yaml for SPEC, an overlay
# under DEPLOY or OVERLAY+COMPONENT...[@CONFIG]: that overlay with those
# components of DEPLOY/components and, with @, CONFIG (a device-plugin config
# under DEPLOY) as its tessera-device-plugin-config.
compose() {
  local spec=$1 dir=$2 deploy=$3 config= parts c
  [[ $spec == *@* ]] && { config=${spec#*@}; spec=${spec%@*}; }
  IFS=+ read -r -a parts <<<"$spec"
  mkdir -p "$dir"
  {
    echo "apiVersion: kustomize.config.k8s.io/v1beta1"
    echo "kind: Kustomization"
    echo "resources:"
    echo "- $(realpath --relative-to="$dir" "$deploy/${parts[0]}")"
    echo "components:"
    for c in "${parts[@]:1}"; do echo "- $(realpath --relative-to="$dir" "$deploy/components/$c")"; done
    if [[ -n $config ]]; then
      cp "$deploy/$config" "$dir/device-plugin-config.yaml"
      echo "generatorOptions: {disableNameSuffixHash: true}"
      echo "configMapGenerator:"
      echo "- {name: tessera-device-plugin-config, behavior: replace, files: [config.yaml=device-plugin-config.yaml]}"
    fi
  } >"$dir/kustomization.yaml"
}

# kustomize_render KUBECTL SPEC DEPLOY OUT: renders SPEC (as compose takes it) into OUT.
kustomize_render() {
  local kubectl=$1 spec=$2 deploy=$3 out=$4
  if [[ $spec == *[+@]* ]]; then
    local dir
    dir=$(mktemp -d)
    compose "$spec" "$dir/kustomization" "$deploy"
    "$kubectl" kustomize "$dir/kustomization" >"$out" || { rm -rf "$dir"; return 1; }
    rm -rf "$dir"
    return 0
  fi
  "$kubectl" kustomize "$deploy/$spec" >"$out"
}
