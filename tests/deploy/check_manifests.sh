#!/usr/bin/env bash
# Renders each kustomize overlay under deploy/ and checks what the node agent
# will read: the mig-parted config and the MIG config name it is told to
# apply, and the device-plugin config, each validated by tessera itself.
# Usage: check_manifests.sh TESSERA_BIN DEPLOY_DIR
set -euo pipefail
bin=$1
deploy=$2
command -v kubectl >/dev/null || { echo "kubectl not found: skipping"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
for overlay in base overlays/mig-mixed overlays/time-slicing overlays/mps; do
  out=$work/${overlay//\//_}
  mkdir -p "$out"
  kubectl kustomize "$deploy/$overlay" >"$out/rendered.yaml"
  # Split out the ConfigMaps' payloads.
  python3 - "$out" <<'PY'
import sys, re
out = sys.argv[1]
text = open(out + "/rendered.yaml").read()
docs = text.split("\n---\n")
kinds = {}
for d in docs:
    kind = re.search(r"^kind: (\S+)", d, re.M).group(1)
    name = re.search(r"^  name: (\S+)", d, re.M).group(1)
    kinds.setdefault(kind, []).append(name)
    if kind != "ConfigMap":
        continue
    if name == "tessera-node":
        value = re.search(r"^  mig-config: (\S+)", d, re.M).group(1)
        open(out + "/mig-config-name", "w").write(value)
        continue
    m = re.search(r"^  config.yaml: \|\n((?:    .*\n|\n)*)", d + "\n", re.M)
    body = "".join(line[4:] + "\n" for line in m.group(1).splitlines())
    open(out + "/" + name + ".yaml", "w").write(body)
for kind in ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"):
    if kind not in kinds:
        raise SystemExit("missing " + kind)
PY
  name=$(cat "$out/mig-config-name")
  if "$bin" mig validate -f "$out/tessera-mig-config.yaml" -c "$name" >/dev/null &&
     "$bin" config validate -f "$out/tessera-device-plugin-config.yaml" >/dev/null; then
    echo "$overlay: ok (MIG config $name)"
  else
    echo "$overlay: INVALID"
    failures=$((failures + 1))
  fi
done
exit $((failures > 0))
