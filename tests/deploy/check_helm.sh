#!/usr/bin/env bash
# The Helm chart deploy/helm/tessera: `helm lint --strict` and `helm template`
# (Kubernetes 1.36.0) of each value combination below, and
# - where a kustomize render is its equivalent (an overlay, or an overlay
#   with components as check_manifests.sh composes them), the same objects
#   field by field (render_checks.py compare: only Helm's own labels,
#   kustomize's ConfigMap hash suffixes and the order of lists Kubernetes
#   gives none are ignored);
# - CDI: with cdi.enabled, the spec directory mounted read-write at its path,
#   --cdi-spec-dir and --driver-root on the command and deviceListStrategy
#   [cdi-cri] (or the user's own); without, none of them;
# - the DRA driver (dra.enabled, as deploy/overlays/dra and with the dra
#   values and CDI's driver root set): one container, dra-driver, running
#   exactly the `tessera dra` command those values give, every option one its
#   --help lists; the DeviceClasses gpu.nvidia.com and mig.nvidia.com with
#   NVIDIA's CEL naming the configured driver; the ClusterRole for
#   resource.k8s.io resourceslices and resourceclaims bound to the pod's
#   service account; no node agent, device plugin, exporter, mig apply,
#   ConfigMap, node-scope policy or tessera-mps-host;
# - the share-isolation ValidatingAdmissionPolicy (admission.*, which no
#   kustomize render has: left out of the comparison): rendered, with its
#   binding, exactly where the values hand out shares, for exactly the
#   resource names the device-plugin config's sharing advertises (or
#   admission.shareResources), failurePolicy Fail, the binding's
#   validationActions and the namespaces it leaves out (render_checks.py
#   admission); none where nothing is shared or admission.enabled=false;
#   refused where the API server lists no ValidatingAdmissionPolicy kind;
# - every render goes through check_manifests.sh's checks (flags, mounts,
#   privileges, RBAC, the configs validated by tessera itself);
# - values that make no sense are refused with a message;
# - docs/install.md's shortest path, read from the document: its image
#   command's options parse, and its helm install renders the no-runtime
#   agent (no runtime class, CDI specs, an image without the hooks refused);
# - the chart's version and appVersion are the project's, and its files/ are
#   the kustomize manifests' configs, byte-identical copies (not symlinks).
# helm and kubectl are the real-cluster tier's peers (lib.sh: built when
# missing); a missing tool fails the test.
# Usage: check_helm.sh TESSERA_BIN DEPLOY_DIR
set -euo pipefail
bin=$1
deploy=$(cd "$2" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
source "$here/lib.sh"
require_pyyaml
kubectl=$(peer_tool kubectl kubernetes)
helm=$(peer_tool helm helm)
chart=$deploy/helm/tessera
checks=$here/render_checks.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export HELM_CACHE_HOME=$work/helm/cache HELM_CONFIG_HOME=$work/helm/config HELM_DATA_HOME=$work/helm/data
KUBE_VERSION=1.36.0
failures=0
bad() { echo "$*"; failures=$((failures + 1)); }
echo "helm $("$helm" version --template '{{.Version}}'), kubectl $("$kubectl" version --client 2>/dev/null | sed -n 's/^Client Version: //p')"

# The chart's version and appVersion: the project's.
project=$(sed -n 's/^project(tessera VERSION \([0-9][0-9.]*\).*/\1/p' "$deploy/../CMakeLists.txt")
read -r version app_version < <(python3 -c 'import sys, yaml; c = yaml.safe_load(open(sys.argv[1])); print(c["version"], c["appVersion"])' "$chart/Chart.yaml")
if [[ -n $project && $version == "$project" && $app_version == "$project" ]]; then
  echo "Chart.yaml: version and appVersion $project, the project's"
else
  bad "Chart.yaml: version $version, appVersion $app_version, not the project's version '$project' (CMakeLists.txt)"
fi

# The chart's files: the kustomize manifests' own, so that there is one copy.
declare -A files=(
  [device-plugin-config.yaml]=base/device-plugin-config.yaml
  [device-plugin-config-mps.yaml]=overlays/mps/device-plugin-config.yaml
  [device-plugin-config-mig.yaml]=overlays/gpu-node-mig/device-plugin-config.yaml
  [mig-config.yaml]=base/mig-config.yaml
  [prometheusrule.yaml]=overlays/metrics/component/prometheusrule.yaml
  [node-scope.yaml]=overlays/gpu-node/node-scope.yaml
  [slice-scope.yaml]=overlays/dra/slice-scope.yaml
  [dra-config-policy.yaml]=overlays/dra/config-policy.yaml
)
for f in "$chart"/files/*; do
  name=${f##*/}
  [[ -n ${files[$name]:-} ]] || bad "files/$name: not a file of the kustomize manifests (check_helm.sh lists them)"
done
# Real files, not symlinks: Flux and other tools that package a chart from a
# Git tree drop symlinks.
copies=0
for name in "${!files[@]}"; do
  f=$chart/files/$name target=$deploy/${files[$name]}
  if [[ -L $f ]]; then
    bad "files/$name: a symlink (Flux and chart packagers reading a Git tree drop symlinks): copy deploy/${files[$name]} there"
  elif [[ -f $f ]] && cmp -s "$f" "$target"; then
    copies=$((copies + 1))
  else
    bad "files/$name: not a byte-identical copy of deploy/${files[$name]} (copy it again after changing that file)"
  fi
done
echo "files/: $copies of ${#files[@]} byte-identical copies of the kustomize manifests' configs"

# helm CMD ARGS...: helm without its note on each symlink it follows; stderr in $work/helm.err.
run_helm() {
  local rc=0
  "$helm" "$@" 2>"$work/helm.err.all" || rc=$?
  grep -v 'found symbolic link in path' "$work/helm.err.all" >"$work/helm.err" || true
  return $rc
}
# expand ARGS: the values arguments of a case, with @/ for the deploy directory
# and %/ for the scratch one.
expand() { local a; for a in "$@"; do a=${a//@\//$deploy/}; printf '%s\n' "${a//%\//$work/}"; done; }
# The configs as maps in a values file (rather than files' text).
cat >"$work/config-maps.yaml" <<'EOF'
devicePluginConfig:
  version: v1
  flags: {migStrategy: mixed}
  sharing:
    timeSlicing:
      resources:
      - {name: nvidia.com/gpu, replicas: 4}
migConfig:
  version: v1
  mig-configs:
    all-disabled:
    - {devices: all, mig-enabled: false}
    all-3g.40gb:
    - {devices: all, mig-enabled: true, mig-devices: {3g.40gb: 2}}
EOF

# NAME|KUSTOMIZE|DROP|VALUES: the case's helm values; the kustomize render it
# must equal (- for none); the kinds of the kustomize render the chart leaves
# out (comma-separated).
cases=(
  "plugin|base||"
  "plugin+mps|overlays/mps||--set mps.enabled=true"
  "plugin+metrics|overlays/metrics||--set metrics.enabled=true"
  "plugin+time-slicing|overlays/time-slicing||--set-file devicePluginConfig=@/overlays/time-slicing/device-plugin-config.yaml"
  "plugin+mig-mixed|overlays/mig-mixed||--set-file devicePluginConfig=@/overlays/mig-mixed/device-plugin-config.yaml --set migApply.configName=all-1g.20gb"
  "node|overlays/gpu-node||--set mode=node"
  "node+migManager|overlays/gpu-node-mig||--set mode=node --set migManager.enabled=true"
  "node+migManager+metrics|overlays/gpu-node-mig+node-metrics||--set mode=node --set migManager.enabled=true --set metrics.enabled=true"
  "node+metrics|overlays/gpu-node+node-metrics||--set mode=node --set metrics.enabled=true"
  "node+metrics-operator|overlays/gpu-node+node-metrics|ServiceMonitor,PrometheusRule|--set mode=node --set metrics.enabled=true --set metrics.serviceMonitor.enabled=false --set metrics.prometheusRule.enabled=false"
  "node+mps|overlays/gpu-node+node-mps@overlays/mps/device-plugin-config.yaml||--set mode=node --set mps.enabled=true"
  "node+mps+metrics|overlays/gpu-node+node-mps+node-metrics@overlays/mps/device-plugin-config.yaml||--set mode=node --set mps.enabled=true --set metrics.enabled=true"
  "node+migMonitor|overlays/gpu-node+mig-monitor@overlays/mig-mixed/device-plugin-config.yaml||--set mode=node --set migMonitor.enabled=true --set-file devicePluginConfig=@/overlays/mig-mixed/device-plugin-config.yaml"
  "plugin+cdi|-||--set cdi.enabled=true"
  "node+cdi|-||--set mode=node --set cdi.enabled=true"
  "node+migManager+mps+metrics+cdi|-||--set mode=node --set migManager.enabled=true --set mps.enabled=true --set metrics.enabled=true --set cdi.enabled=true --set cdi.specDir=/etc/cdi --set driver.root=/run/nvidia/driver"
  "node+cdi+own-config|-||--set mode=node --set cdi.enabled=true --set-file devicePluginConfig=@/base/device-plugin-config.yaml"
  # A ConfigMap of configs, one per kind of node: served as written, the default named; with CDI
  # (the host's driver) every config told cdi-cri; a list strategy of the values' own.
  "node+device-plugin-configs|-||--set mode=node --set devicePluginConfigs.name=gpu-configs --set devicePluginConfigs.default=a100 --set-json admission.shareResources=[\"nvidia.com/gpu.shared\"]"
  "node+device-plugin-configs+host|-||--set mode=node --set driver.source=host --set devicePluginConfigs.name=gpu-configs --set-json admission.shareResources=[]"
  "node+device-plugin-configs+strategy|-||--set mode=node --set cdi.enabled=true --set devicePluginConfigs.name=gpu-configs --set-json devicePluginConfigs.deviceListStrategy=[\"envvar\",\"cdi-annotations\"] --set admission.enabled=false"
  "node+migManager+config-maps|-||--set mode=node --set migManager.enabled=true -f %/config-maps.yaml"
  "custom|-||--set mode=node --set image.repository=registry.example.com/tessera --set image.tag=0.1.0 --set image.pullPolicy=Always --set-json imagePullSecrets=[{\"name\":\"registry\"}] --set namespace.name=gpu-system --set runtimeClassName= --set-json nodeSelector={\"example.com/gpu\":\"yes\"} --set-json tolerations=[{\"operator\":\"Exists\"}] --set priorityClassName=gpu-critical --set terminationGracePeriodSeconds=90 --set-json resources={\"limits\":{\"memory\":\"1Gi\"},\"requests\":{\"cpu\":\"100m\"}} --set logLevel=debug --set-json extraArgs=[\"--eviction-timeout\",\"600\",\"--no-node-labels\"] --set-json podAnnotations={\"example.com/team\":\"gpu\"} --set updateStrategy.type=OnDelete --set hostNetwork=true --set-json extraEnv=[{\"name\":\"HTTPS_PROXY\",\"value\":\"http://proxy:3128\"}] --set-json extraVolumes=[{\"name\":\"site\",\"configMap\":{\"name\":\"site\"}}] --set-json extraVolumeMounts=[{\"name\":\"site\",\"mountPath\":\"/etc/site\",\"readOnly\":true}] --set-json affinity={\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"example.com/accelerator\",\"operator\":\"In\",\"values\":[\"h200\"]}]}]}}} --set-json podSecurityContext={\"runAsUser\":0,\"fsGroup\":0} --set-json securityContext={\"privileged\":true,\"readOnlyRootFilesystem\":true}"
  # fullnameOverride and nameOverride: every object renamed, every reference kept.
  "names|-||--set mode=node --set migManager.enabled=true --set metrics.enabled=true --set mps.enabled=true --set fleet.enabled=true --set fullnameOverride=gpu-share --set nameOverride=gs"
  # The fleet controller told of a renamed DRA driver (its claims hold GPUs).
  "fleet+dra-driver|-||--set fleet.enabled=true --set dra.driverName=gpu.example.com"
  "names+dra|-||--set dra.enabled=true --set mps.enabled=true --set fullnameOverride=gpu-share --set nameOverride=gs"
  "release-namespace|-||--set namespace.create=false --set namespace.name= --namespace gpu-tenant"
  "dra|overlays/dra||--set dra.enabled=true"
  # mode does not matter with dra.
  "dra+node|overlays/dra||--set mode=node --set dra.enabled=true"
  "dra+values|-||--set dra.enabled=true --set dra.memoryShares=true --set dra.order=by-start --set dra.driverName=gpu.example.com --set dra.migModeSwitch=false"
  "dra+memory-shares|-||--set dra.enabled=true --set dra.memoryShares=true"
  "dra+cdi|-||--set dra.enabled=true --set cdi.enabled=true --set cdi.specDir=/etc/cdi --set driver.root=/run/nvidia/driver --set-json extraArgs=[\"--resync\",\"10\"]"
  "dra+mps|overlays/dra+dra-mps||--set dra.enabled=true --set mps.enabled=true"
  # No NVIDIA runtime at all (driver.source host): CDI implied, the driver from the host.
  # The share-isolation policy: off (the config shares nothing, so it is
  # rendered nowhere and the render is the overlay's exactly), Warn with more
  # namespaces left out, and shares named in the values.
  "plugin+time-slicing+admission-off|overlays/time-slicing||--set-file devicePluginConfig=@/overlays/time-slicing/device-plugin-config.yaml --set admission.enabled=false"
  "plugin+mps+admission-warn|overlays/mps||--set mps.enabled=true --set-json admission.validationActions=[\"Warn\",\"Audit\"] --set-json admission.excludeNamespaces=[\"kube-system\",\"gpu-operator\"]"
  "plugin+admission-resources|base||--set-json admission.shareResources=[\"nvidia.com/gpu\",\"nvidia.com/mig-*\"] --set admission.allowLocalhostSeccomp=true"
  "dra+memory-shares+admission-no-claims|-||--set dra.enabled=true --set dra.memoryShares=true --set admission.resourceClaims=false"
  "plugin+host|-||--set driver.source=host --set metrics.enabled=true"
  "node+migManager+mps+host|-||--set mode=node --set migManager.enabled=true --set mps.enabled=true --set driver.source=host --set driver.root=/run/nvidia/driver"
  "dra+mps+host|-||--set dra.enabled=true --set mps.enabled=true --set driver.source=host"
  # The GPU Operator's driver container: the driver under /run/nvidia/driver,
  # mounted there after the node is up, the device nodes in the host's /dev.
  "node+migManager+cdi+operator|-||--set mode=node --set migManager.enabled=true --set cdi.enabled=true --set driver.root=/run/nvidia/driver --set driver.devRoot=/"
  "dra+operator-no-wait|-||--set dra.enabled=true --set cdi.enabled=true --set driver.root=/run/nvidia/driver --set driver.devRoot=/ --set driver.wait=false"
  # A dev root of its own, and a driver root under /usr/lib64.
  "plugin+mps+host+dev-root|-||--set mps.enabled=true --set driver.source=host --set driver.root=/opt/nvidia --set driver.devRoot=/opt/nvidia-dev --set driver.libraryDir=/usr/lib64"
)

# check_dra RENDER DRIVER_NAME SPEC_DIR [ARG...]: the DRA driver's render:
# its container's command is exactly deploy/overlays/dra's (with SPEC_DIR)
# followed by ARGs, every option one `tessera dra --help` lists; DeviceClasses
# selecting DRIVER_NAME; the role for ResourceSlices and ResourceClaims; the
# spec directory (and, with --driver-root, the driver root at
# --container-driver-root) mounted; nothing of the device plugin's.
check_dra() {
  python3 - "$bin" "$@" <<'PY'
import json, os, re, subprocess, sys
import yaml
binary, render, driver_name, spec_dir, *args = sys.argv[1:]
docs = [d for d in yaml.safe_load_all(open(render)) if d]
problems = []
def want(what, got, expected):
    if got != expected:
        problems.append("%s: %s, not %s" % (what, json.dumps(got), json.dumps(expected)))
# The share-isolation policy (dra.memoryShares): the admission check's.
kinds = sorted("%s/%s" % (d["kind"], d["metadata"]["name"]) for d in docs if not d["metadata"]["name"].endswith("-share-isolation"))
want("objects", kinds, sorted(["Namespace/tessera", "ServiceAccount/tessera", "ClusterRole/tessera-dra-driver",
     "ClusterRoleBinding/tessera-dra-driver", "ValidatingAdmissionPolicy/tessera-dra-driver-own-node",
     "ValidatingAdmissionPolicyBinding/tessera-dra-driver-own-node",
     "ValidatingAdmissionPolicy/tessera-dra-configs", "ValidatingAdmissionPolicyBinding/tessera-dra-configs",
     "DaemonSet/tessera", "DeviceClass/gpu.nvidia.com", "DeviceClass/mig.nvidia.com"]))
# The opaque-config policy checks configs for the driver's own name, and says so.
policy = next(d for d in docs if d["kind"] == "ValidatingAdmissionPolicy" and d["metadata"]["name"] == "tessera-dra-configs")
params = next(v["expression"] for v in policy["spec"]["variables"] if v["name"] == "params")
want("tessera-dra-configs' driver", re.findall(r"c\.opaque\.driver == '([^']*)'", params), [driver_name])
want("tessera-dra-configs' messages", sorted({m["message"].split(":")[0] for m in policy["spec"]["validations"]}),
     ["opaque config for " + driver_name])
ds = next(d for d in docs if d["kind"] == "DaemonSet")
spec = ds["spec"]["template"]["spec"]
want("containers", [c["name"] for c in spec["containers"]], ["dra-driver"])
# wait-for-driver first where the driver root is mounted (unless DRIVER_WAIT=false).
waits = "--driver-root" in args and os.environ.get("DRIVER_WAIT", "true") == "true"
want("init containers", [c["name"] for c in spec.get("initContainers", [])],
     ["wait-for-driver"] * waits + ["install-quota-library"])
driver = spec["containers"][0]
cmd = driver["command"]
want("dra-driver command", cmd, ["tessera", "dra", "--kubelet-dir", "/var/lib/kubelet", "--cdi-spec-dir", spec_dir,
     "--quota-library-dir", "/var/lib/tessera/lib", "--quota-ledger-root", "/var/lib/tessera/ledgers",
     "--cdi-hook", "/var/lib/tessera/lib/tessera-cdi-hook",
     "--memory-hook", "/var/lib/tessera/lib/tessera-memory-hook"] + args)
help_text = subprocess.run([binary, "dra", "--help"], capture_output=True, text=True).stdout
for f in [a for a in cmd[2:] if a.startswith("--")]:
    if not re.search(r"(^|[ ,])" + re.escape(f) + r"[ =\n]", help_text, re.M):
        problems.append("tessera dra has no option " + f)
want("dra-driver privileged", (driver.get("securityContext") or {}).get("privileged"), True)
host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
mounts = {m["mountPath"]: (host.get(m["name"]), bool(m.get("readOnly"))) for m in driver.get("volumeMounts", [])}
want("the CDI spec directory's mount", mounts.get(spec_dir), (spec_dir, False))
if "--driver-root" in args:
    root, at = args[args.index("--driver-root") + 1], args[args.index("--container-driver-root") + 1]
    want("the driver root's mount", mounts.get(at), (root, True))
else:
    want("volumes under /driver-root", [p for p in mounts if p.startswith("/driver-root")], [])
for name, typ in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig")):
    c = next(d for d in docs if d["kind"] == "DeviceClass" and d["metadata"]["name"] == name)
    want("DeviceClass %s selectors" % name, c["spec"]["selectors"],
         [{"cel": {"expression": "device.driver == '%s' && device.attributes['%s'].type == '%s'" % (driver_name, driver_name, typ)}}])
    want("DeviceClass %s extendedResourceName" % name, c["spec"].get("extendedResourceName"),
         "nvidia.com/gpu" if typ == "gpu" else None)
role = next(d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "tessera-dra-driver")
want("ClusterRole tessera-dra-driver rules", sorted((r["apiGroups"], r["resources"], sorted(r["verbs"])) for r in role["rules"]),
     sorted([(["resource.k8s.io"], ["resourceslices"], sorted(["get", "list", "watch", "create", "update", "delete"])),
             (["resource.k8s.io"], ["resourceclaims"], ["get"]), ([""], ["nodes"], ["get"]), ([""], ["events"], ["create"])]))
binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"] == "tessera-dra-driver")
want("ClusterRoleBinding tessera-dra-driver", (binding["roleRef"]["name"], binding["subjects"]),
     ("tessera-dra-driver", [{"kind": "ServiceAccount", "name": "tessera", "namespace": ds["metadata"]["namespace"]}]))
for p in problems:
    print("  dra: " + p)
if not problems:
    print("  dra: %s; DeviceClasses select driver %s; ClusterRole tessera-dra-driver (resourceslices, resourceclaims) "
          "bound; no node agent or device plugin" % (" ".join(cmd), driver_name))
sys.exit(1 if problems else 0)
PY
}
# check_admission NAME RENDER: the share-isolation policy each case renders
# (render_checks.py admission): NAME ACTIONS NAMESPACES SHARES CLAIMS, or off.
check_admission() {
  local expected=(off)
  case $1 in
    plugin+mps|node+mps|node+mps+metrics|node+migManager+mps+metrics+cdi|node+migManager+mps+host|plugin+mps+host+dev-root|node+device-plugin-configs)
      expected=(tessera-share-isolation '["Deny"]' '["tessera","kube-system"]' '["nvidia.com/gpu.shared"]' false) ;;
    plugin+time-slicing|node+migManager+config-maps)
      expected=(tessera-share-isolation '["Deny"]' '["tessera","kube-system"]' '["nvidia.com/gpu"]' false) ;;
    names) expected=(gpu-share-share-isolation '["Deny"]' '["tessera","kube-system"]' '["nvidia.com/gpu.shared"]' false) ;;
    plugin+mps+admission-warn)
      expected=(tessera-share-isolation '["Warn","Audit"]' '["tessera","kube-system","gpu-operator"]' '["nvidia.com/gpu.shared"]' false) ;;
    plugin+admission-resources)
      expected=(tessera-share-isolation '["Deny"]' '["tessera","kube-system"]' '["nvidia.com/gpu","nvidia.com/mig-*"]' false) ;;
    # DRA memory shares: every claim has a quota.
    dra+values|dra+memory-shares)
      expected=(tessera-share-isolation '["Deny"]' '["tessera","kube-system"]' '[]' true) ;;
  esac
  python3 "$checks" admission "$2" "${expected[@]}"
}
helm_only=(--helm-only ValidatingAdmissionPolicy/tessera-share-isolation
           --helm-only ValidatingAdmissionPolicyBinding/tessera-share-isolation)
renders=()
for c in "${cases[@]}"; do
  IFS='|' read -r name spec drop values <<<"$c"
  read -r -a words <<<"$values"
  mapfile -t args < <(expand ${words[@]+"${words[@]}"})
  out=$work/helm-${name//[^A-Za-z0-9+-]/_}.yaml
  echo "$name: ${values:-(defaults)}"
  if ! run_helm lint --strict --kube-version "$KUBE_VERSION" "$chart" ${args[@]+"${args[@]}"} >"$work/lint.out"; then
    cat "$work/lint.out" "$work/helm.err"
    bad "$name: helm lint --strict failed"
    continue
  fi
  if ! run_helm template tessera "$chart" --kube-version "$KUBE_VERSION" ${args[@]+"${args[@]}"} >"$out"; then
    cat "$work/helm.err"
    bad "$name: helm template failed"
    continue
  fi
  echo "  helm lint --strict: ok; helm template: $(grep -c '^kind: ' "$out") objects"
  if [[ $spec != - ]]; then
    kustomized=$work/kustomize-${name//[^A-Za-z0-9+-]/_}.yaml
    kustomize_render "$kubectl" "$spec" "$deploy" "$kustomized" ||
      { bad "$name: kubectl kustomize of $spec failed"; continue; }
    drops=()
    IFS=, read -r -a kinds <<<"$drop"
    for k in ${kinds[@]+"${kinds[@]}"}; do drops+=(--drop "$k"); done
    echo "  compared with kustomize's $spec${drop:+ less its $drop}:"
    python3 "$checks" compare "$out" "$kustomized" ${drops[@]+"${drops[@]}"} "${helm_only[@]}" ||
      bad "$name: helm's render differs from kustomize's $spec"
  fi
  check_admission "$name" "$out" || bad "$name: the share-isolation policy"
  case $name in
    # The DRA driver: CDI specs always, no device-plugin config (check_dra).
    dra|dra+node) check_dra "$out" gpu.nvidia.com /var/run/cdi || bad "$name: DRA driver" ;;
    dra+values) check_dra "$out" gpu.example.com /var/run/cdi --driver-name gpu.example.com --order by-start \
      --memory-shares --no-mig-mode-switch || bad "$name: DRA driver" ;;
    dra+memory-shares|dra+memory-shares+admission-no-claims)
      check_dra "$out" gpu.nvidia.com /var/run/cdi --memory-shares || bad "$name: DRA driver" ;;
    dra+cdi) check_dra "$out" gpu.nvidia.com /etc/cdi --driver-root /run/nvidia/driver \
      --container-driver-root /driver-root --resync 10 || bad "$name: DRA driver" ;;
    plugin+cdi) python3 "$checks" cdi "$out" on /var/run/cdi / '["cdi-cri"]' || bad "$name: CDI" ;;
    node+cdi) python3 "$checks" cdi "$out" on /var/run/cdi / '["cdi-cri"]' || bad "$name: CDI" ;;
    node+migManager+mps+metrics+cdi) python3 "$checks" cdi "$out" on /etc/cdi /run/nvidia/driver '["cdi-cri"]' || bad "$name: CDI" ;;
    # The user's config names its own deviceListStrategy: kept.
    node+cdi+own-config) python3 "$checks" cdi "$out" on /var/run/cdi / '"envvar"' || bad "$name: CDI" ;;
    plugin+host) python3 "$checks" cdi "$out" on /var/run/cdi / '["cdi-cri"]' || bad "$name: CDI" ;;
    node+migManager+mps+host) python3 "$checks" cdi "$out" on /var/run/cdi /run/nvidia/driver '["cdi-cri"]' || bad "$name: CDI" ;;
    node+migManager+cdi+operator) python3 "$checks" cdi "$out" on /var/run/cdi /run/nvidia/driver '["cdi-cri"]' || bad "$name: CDI" ;;
    dra+operator-no-wait) DRIVER_WAIT=false check_dra "$out" gpu.nvidia.com /var/run/cdi --driver-root /run/nvidia/driver \
      --container-driver-root /driver-root --dev-root / || bad "$name: DRA driver" ;;
    plugin+mps+host+dev-root) python3 "$checks" cdi "$out" on /var/run/cdi /opt/nvidia '["cdi-cri"]' || bad "$name: CDI" ;;
    dra+mps|dra+mps+host|names|names+dra) ;;  # compared with kustomize's dra-mps above; the DRA driver's specs are always CDI
    node+device-plugin-configs)
      python3 "$checks" device-plugin-configs "$out" gpu-configs a100 - || bad "$name: device-plugin configs" ;;
    node+device-plugin-configs+host)
      python3 "$checks" device-plugin-configs "$out" gpu-configs - cdi-cri || bad "$name: device-plugin configs" ;;
    node+device-plugin-configs+strategy)
      python3 "$checks" device-plugin-configs "$out" gpu-configs - envvar,cdi-annotations || bad "$name: device-plugin configs" ;;
    *) python3 "$checks" cdi "$out" off || bad "$name: CDI" ;;
  esac
  case $name in
    custom) python3 "$checks" custom "$out" || bad "$name: values not applied" ;;
    names|names+dra) python3 "$checks" names "$out" gpu-share gs || bad "$name: names" ;;
    fleet+dra-driver)
      python3 "$checks" fleet-dra-drivers "$out" gpu.nvidia.com gpu.example.com || bad "$name: fleet's DRA drivers"
      renders+=("helm:$name=$out") ;;
    node+migManager+config-maps)
      python3 "$checks" configs "$out" "$work/config-maps.yaml" || bad "$name: configs"
      renders+=("helm:$name=$out") ;;
    release-namespace)
      python3 "$checks" namespace "$out" gpu-tenant || bad "$name: namespace"
      python3 "$checks" objects "$out" ServiceAccount/tessera ClusterRole/tessera-node-agent \
        ClusterRoleBinding/tessera-node-agent ConfigMap/tessera-mig-config ConfigMap/tessera-device-plugin-config \
        ConfigMap/tessera-node DaemonSet/tessera || bad "$name: objects" ;;
    # Its exporter check asks for the ServiceMonitor and PrometheusRule, which are off here.
    node+metrics-operator) ;;
    # check_manifests.sh's privilege rules are the NVIDIA runtime's setups'; these are the host driver's.
    plugin+host|dra+mps+host) python3 "$checks" host-driver "$out" / || bad "$name: host driver" ;;
    node+migManager+mps+host) python3 "$checks" host-driver "$out" /run/nvidia/driver || bad "$name: host driver" ;;
    node+migManager+cdi+operator|node+migManager+mps+metrics+cdi)
      python3 "$checks" driver-root "$out" /run/nvidia/driver "$([[ $name == *operator ]] && echo / || echo -)" true ||
        bad "$name: driver root"
      renders+=("helm:$name=$out") ;;
    dra+operator-no-wait)
      python3 "$checks" driver-root "$out" /run/nvidia/driver / false || bad "$name: driver root"
      renders+=("helm:$name=$out") ;;
    plugin+mps+host+dev-root)
      python3 "$checks" host-driver "$out" /opt/nvidia /usr/lib64 || bad "$name: host driver"
      python3 "$checks" driver-root "$out" /opt/nvidia /opt/nvidia-dev true /usr/lib64 || bad "$name: driver root" ;;
    # Checked above (device-plugin-configs): check_manifests.sh's checks read the chart's own
    # device-plugin ConfigMap, which these renders leave to the user's.
    node+device-plugin-configs*) ;;
    # The rest go through every check of check_manifests.sh.
    *) renders+=("helm:$name=$out") ;;
  esac
done

# Values the chart refuses: MESSAGE|VALUES.
refusals=(
  "at '/mode': value must be one of 'plugin', 'node'|--set mode=daemon"
  "mode \"daemon\": plugin or node|--set mode=daemon --skip-schema-validation"
  "options of mode node|--set migManager.enabled=true"
  "options of mode node|--set migMonitor.enabled=true"
  "has no sharing.mps|--set mps.enabled=true --set-file devicePluginConfig=@/base/device-plugin-config.yaml"
  "set mps.enabled=true|--set-file devicePluginConfig=@/overlays/mps/device-plugin-config.yaml"
  "devicePluginConfig is not a YAML map|--set devicePluginConfig=not-a-map"
  "devicePluginConfigs needs mode=node|--set devicePluginConfigs.name=gpu-configs --set-json admission.shareResources=[]"
  "devicePluginConfigs and devicePluginConfig both|--set mode=node --set devicePluginConfigs.name=gpu-configs --set-json admission.shareResources=[] --set-file devicePluginConfig=@/base/device-plugin-config.yaml"
  "cannot read ConfigMap \"gpu-configs\"|--set mode=node --set devicePluginConfigs.name=gpu-configs"
  "dra.enabled with devicePluginConfigs|--set dra.enabled=true --set devicePluginConfigs.name=gpu-configs"
  "devicePluginConfigs.default names a config of devicePluginConfigs.name, which is not set|--set mode=node --set devicePluginConfigs.default=a100"
  "at '/devicePluginConfigs/deviceListStrategy/0': value must be one of|--set mode=node --set devicePluginConfigs.name=gpu-configs --set-json devicePluginConfigs.deviceListStrategy=[\"cdi\"]"
  "needs metrics.service.enabled|--set metrics.enabled=true --set metrics.service.enabled=false"
  "additional properties 'migmanager' not allowed|--set migmanager.enabled=true"
  "value must be one of 'Always', 'IfNotPresent', 'Never'|--set image.pullPolicy=Sometimes"
  # The DRA driver beside what does not run with it (before the mode checks:
  # in plugin mode too it is dra's message).
  "dra.enabled with migManager.enabled|--set dra.enabled=true --set migManager.enabled=true"
  "dra.enabled with migManager.enabled|--set mode=node --set dra.enabled=true --set migManager.enabled=true"
  "dra.enabled with migMonitor.enabled|--set mode=node --set dra.enabled=true --set migMonitor.enabled=true"
  "at '/driver/source': value must be one of 'runtime', 'host'|--set driver.source=none"
  "driver.source \"none\": runtime|--set driver.source=none --skip-schema-validation"
  "driver.root \"run/nvidia/driver\" is not an absolute path|--set driver.source=host --set driver.root=run/nvidia/driver --skip-schema-validation"
  "additional properties 'driverRoot' not allowed|--set cdi.enabled=true --set cdi.driverRoot=/run/nvidia/driver"
  "dra.enabled with metrics.enabled|--set mode=node --set dra.enabled=true --set metrics.enabled=true"
  "dra.enabled with a devicePluginConfig|--set dra.enabled=true --set-file devicePluginConfig=@/overlays/time-slicing/device-plugin-config.yaml"
  "dra.enabled with a migConfig|--set dra.enabled=true --set-file migConfig=@/base/mig-config.yaml"
  "dra.enabled needs Kubernetes 1.34 or newer|--set dra.enabled=true --kube-version 1.33.0"
  # The template too (cdi.specDir is the DRA driver's with cdi off as well).
  "cdi.specDir \"cdi\" is not an absolute path|--set dra.enabled=true --set cdi.specDir=cdi --skip-schema-validation"
  "at '/dra/order': value must be one of 'tessera', 'by-start'|--set dra.enabled=true --set dra.order=first-fit"
  "at '/dra/driverName': 'gpu_nvidia' does not match pattern|--set dra.enabled=true --set dra.driverName=gpu_nvidia"
  "additional properties 'memoryshares' not allowed|--set dra.enabled=true --set dra.memoryshares=true"
  # The share-isolation policy: an API server whose kinds helm lists (a live
  # cluster; here --api-versions) without ValidatingAdmissionPolicy, and
  # values the binding or the CEL cannot take.
  "set admission.enabled=false to install without the share-isolation policy|--set mps.enabled=true --api-versions v1/Pod"
  "Deny and Warn do not go together|--set mps.enabled=true --set-json admission.validationActions=[\"Deny\",\"Warn\"]"
  "at '/admission/validationActions/0': value must be one of 'Deny', 'Warn', 'Audit'|--set-json admission.validationActions=[\"Block\"]"
  "at '/admission/shareResources/0': 'gpu' does not match pattern|--set-json admission.shareResources=[\"gpu\"]"
  "at '/admission/shareResources/0': 'nvidia.com/gpu\'' does not match pattern|--set-json admission.shareResources=[\"nvidia.com/gpu'\"]"
)
for r in "${refusals[@]}"; do
  IFS='|' read -r message values <<<"$r"
  read -r -a words <<<"$values"
  mapfile -t args < <(expand "${words[@]}")
  if run_helm template tessera "$chart" --kube-version "$KUBE_VERSION" "${args[@]}" >/dev/null; then
    bad "refused: $values: helm template accepted it"
  elif ! grep -qF -- "$message" "$work/helm.err"; then
    cat "$work/helm.err"
    bad "refused: $values: the error does not say '$message'"
  else
    echo "refused: $values ($message)"
  fi
done

# The same API server listing the kind: rendered.
if run_helm template tessera "$chart" --kube-version "$KUBE_VERSION" --set mps.enabled=true --api-versions v1/Pod \
     --api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy >"$work/helm-apis.yaml"; then
  echo "accepted: --set mps.enabled=true with the API server's kinds, ValidatingAdmissionPolicy among them"
  check_admission plugin+mps "$work/helm-apis.yaml" || bad "the share-isolation policy with the API server's kinds"
else
  cat "$work/helm.err"
  bad "helm template with the API server's kinds, ValidatingAdmissionPolicy among them, failed"
fi

# docs/install.md's shortest path (a node with only NVIDIA's driver), as
# written: its image command takes the options it names, and its helm
# install renders a DaemonSet whose pods need no runtime class, whose init
# container refuses an image without the CDI hooks, and which writes CDI
# specs from the host's driver root.
quick=$work/install-quick.sh
python3 - "$deploy/../docs/install.md" >"$quick" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
section = text.split("## A node with only NVIDIA's driver", 1)[1].split("\n## ", 1)[0]
block = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
for line in block.replace("\\\n", " ").splitlines():
    if line.startswith(("helm install ", "deploy/image/build.sh ")):
        print(line)
PY
if [[ $(grep -c '^helm install tessera deploy/helm/tessera ' "$quick") != 1 || $(grep -c '^deploy/image/build.sh ' "$quick") != 1 ]]; then
  cat "$quick"
  bad "docs/install.md's shortest path: not one helm install and one deploy/image/build.sh command"
else
  read -ra words < <(grep '^deploy/image/build.sh ' "$quick")
  for ((i = 1; i < ${#words[@]}; i++)); do [[ ${words[i]} != build/release ]] || words[i]=$work/no-build; done
  if out=$("$deploy/image/build.sh" "${words[@]:1}" 2>&1) || [[ $out != *"--build: '$work/no-build' is not a directory"* ]]; then
    echo "$out"
    bad "docs/install.md's image command: deploy/image/build.sh does not take its options as written"
  else
    echo "install.md: the image command's options are deploy/image/build.sh's"
  fi
  read -ra words < <(grep '^helm install ' "$quick")
  if run_helm template tessera "$chart" --kube-version "$KUBE_VERSION" "${words[@]:4}" >"$work/helm-install-md.yaml"; then
    renders+=("helm:install-md=$work/helm-install-md.yaml")
    if python3 - "$work/helm-install-md.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
pods = [d["spec"]["template"]["spec"] for d in docs if d["kind"] == "DaemonSet"]
errors = []
if not pods:
    errors.append("no DaemonSet")
for spec in pods:
    if spec.get("runtimeClassName"):
        errors.append("a DaemonSet sets runtimeClassName %s" % spec["runtimeClassName"])
agent = [p for p in pods if any("--cdi-spec-dir" in (c.get("command") or []) for c in p["containers"])]
if not agent:
    errors.append("no container writes CDI specs (--cdi-spec-dir)")
for spec in agent:
    init = " ".join(" ".join(c.get("command") or []) for c in spec.get("initContainers") or [])
    if "/usr/local/tessera/lib/tessera-cdi-hook" not in init or "which every CDI spec tessera writes names" not in init \
            or "exit 1" not in init:
        errors.append("the init container does not refuse an image without tessera-cdi-hook")
for e in errors:
    print("install.md's helm install:", e)
sys.exit(1 if errors else 0)
PY
    then
      echo "install.md: its helm install renders the no-runtime agent (no runtime class, CDI specs, hooks required)"
    else
      bad "docs/install.md's helm install does not render the no-runtime setup it promises"
    fi
  else
    cat "$work/helm.err"
    bad "docs/install.md's helm install: helm template refused its values"
  fi
fi

# The renders through check_manifests.sh's checks.
echo "check_manifests.sh on ${#renders[@]} helm renders:"
"$here/check_manifests.sh" "$bin" "$deploy" "${renders[@]}" || bad "check_manifests.sh refused a helm render"

if ((failures)); then
  echo "check_helm: $failures failures"
  exit 1
fi
echo "check_helm: ok"
