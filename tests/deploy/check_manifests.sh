#!/usr/bin/env bash
# Renders each kustomize overlay under deploy/ and checks what the node agent
# will read: the mig-parted config and the MIG config name it is told to
# apply, and the device-plugin config, each validated by tessera itself; and
# how the memory-quota library reaches the host: an init container installs
# it into the hostPath the plugin names as its library directory (its script
# run here on a scratch directory), and the plugin sees the ledger root
# hostPath at the same path. An overlay with MPS shares runs the control
# daemons in a DaemonSet of their own, tessera-mps-host (updateStrategy
# OnDelete, so a tessera upgrade keeps them; scheduled as tessera's pod; one
# unprivileged `tessera mps-host` container with only flags it has, no
# service account token): it needs the host's IPC namespace, its mpsRoot
# hostPath mounted read-write at the same path, <mpsRoot>/shm as the
# container's /dev/shm (what Allocate gives the clients), its socket's
# directory (not under mpsRoot, which tenants see) as a hostPath, and either
# --mps-control naming the image's control program or the driver's from the
# NVIDIA container toolkit; the plugin is told that socket (--mps-host or
# TESSERA_MPS_HOST), mounts its directory and nothing under mpsRoot, and has
# no hostIPC; no other overlay gets hostIPC or tessera-mps-host. An overlay with the
# metrics exporter runs `tessera exporter` with flags it has, listening on all
# addresses at its named metrics port, /healthz probes on that port, small
# resources, the kubelet's pod-resources socket and the plugin's ledger root
# mounted read-only, a headless Service and a ServiceMonitor that reach that
# port, and a PrometheusRule.
#
# The gpu-node overlays run `tessera node` in one container, node-agent,
# rendered as shipped and with the components a user adds
# (deploy/components: mig-manager, mig-monitor, node-metrics, node-mps)
# through a kustomization made here. The agent is given only flags of
# `tessera node` (the list below: the command may not be built yet, so its
# --help is not asked), its Node's name from the downward API, the NVIDIA
# container toolkit's runtime class and variables, host paths from a fixed
# set, and its config files through directory mounts of their ConfigMaps;
# privileged only with --mig-config (the mig-manager component), which no
# other container anywhere may be but the base's mig apply init container
# (the plugin-mode overlays, which ask the toolkit's runtime for every GPU and
# NVML for it and the plugin); CAP_SYS_ADMIN only for MIG monitoring;
# probes only on the exporter's /healthz when it serves metrics; the
# namespace at Pod Security's privileged level. In every overlay, the
# ClusterRole the DaemonSet's service account is bound to grants exactly what
# the agent uses: its Node, evictions, events. With CDI (--cdi-spec-dir, or a
# deviceListStrategy naming cdi-cri or cdi-annotations), the spec directory is
# a hostPath mounted read-write at its own path.
#
# The dra overlay runs `tessera dra` in one container, dra-driver, and nothing
# of the device plugin's: no tessera ConfigMap, no other container running
# tessera (install-quota-library stays: memory shares load the quota
# library), no hostIPC, no tessera-mps-host, no exporter. The driver is given
# only flags its `tessera dra --help` lists (this check needs the binary),
# its Node's name from the downward API, the NVIDIA container toolkit's
# runtime class and variables (MIG config devices included), and host paths
# from a fixed set: the kubelet's plugins_registry/ and plugins/ (its
# sockets and checkpoint) read-write at their own paths, the CDI spec
# directory read-write, the quota library and ledger root, and a driver root
# other than / read-only where --container-driver-root says. It is
# privileged (cutting MIG instances), the only container anywhere that may
# be besides the mig manager's agent. The DeviceClasses gpu.nvidia.com
# (extended resource nvidia.com/gpu) and mig.nvidia.com select the driver's
# name (--driver-name) with NVIDIA's CEL; the service account may do what the
# driver does (its Node: get; Events: create; ResourceSlices: list, create,
# update, delete; ResourceClaims: get) and beyond that only get/watch on
# ResourceSlices, which the check names as unused: no Node patch, no eviction.
#
# Usage: check_manifests.sh TESSERA_BIN DEPLOY_DIR [NAME=RENDERED.yaml...]
# With NAME=FILE arguments it checks those renders (check_helm.sh hands it the
# Helm chart's) instead of rendering the overlays. kubectl is the real-cluster
# tier's, 1.36 (lib.sh: built when missing, a missing one fails); the checks
# parse the renders with PyYAML (python3-yaml).
set -euo pipefail
bin=$1
deploy=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH=$here${PYTHONPATH:+:$PYTHONPATH} PYTHONDONTWRITEBYTECODE=1  # node_pod.py, no __pycache__ in the tree
# shellcheck source=lib.sh
source "$here/lib.sh"
require_pyyaml
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
# Each render: an overlay under deploy/, or OVERLAY+COMPONENT...[@CONFIG]: that
# overlay with those components of deploy/components and, with @, CONFIG (a
# device-plugin config under deploy/) as its tessera-device-plugin-config
# (lib.sh, compose).
renders=(base overlays/mig-mixed overlays/time-slicing overlays/mps overlays/metrics
         overlays/gpu-node overlays/gpu-node-mig
         overlays/gpu-node+node-metrics
         overlays/gpu-node+mig-monitor@overlays/mig-mixed/device-plugin-config.yaml
         overlays/gpu-node+node-mps+node-metrics@overlays/mps/device-plugin-config.yaml
         overlays/gpu-node-mig+node-metrics
         overlays/dra overlays/dra+dra-mps)
if (($#)); then
  renders=("$@")
else
  kubectl=$(peer_tool kubectl kubernetes)
  echo "kubectl $("$kubectl" version --client 2>/dev/null | sed -n 's/^Client Version: //p')"
fi
for overlay in "${renders[@]}"; do
  out=$work/${overlay//[^A-Za-z0-9+-]/_}
  mkdir -p "$out"
  if [[ $overlay == *=* ]]; then
    cp "${overlay#*=}" "$out/rendered.yaml"
    overlay=${overlay%%=*}
  elif ! kustomize_render "$kubectl" "$overlay" "$deploy" "$out/rendered.yaml"; then
    echo "$overlay: INVALID (kubectl kustomize failed)"
    failures=$((failures + 1))
    continue
  fi
  # Split out the ConfigMaps' payloads.
  if ! python3 - "$out" <<'PY'
import sys, yaml
out = sys.argv[1]
docs = [d for d in yaml.safe_load_all(open(out + "/rendered.yaml")) if d]
kinds = {}
for d in docs:
    kind, name = d["kind"], d["metadata"]["name"]
    kinds.setdefault(kind, []).append(name)
    if kind != "ConfigMap":
        continue
    if name == "tessera-node":
        open(out + "/mig-config-name", "w").write(d["data"]["mig-config"])
        continue
    open(out + "/" + name + ".yaml", "w").write(d["data"]["config.yaml"])
for kind in ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet"):
    if kind not in kinds:
        raise SystemExit("  missing " + kind)
# The DRA driver (`tessera dra` in the DaemonSet): its DeviceClasses, and none
# of the device plugin's ConfigMaps (it reads none).
dra = any(c.get("command", [])[:2] == ["tessera", "dra"]
          for d in docs if d["kind"] == "DaemonSet" for c in d["spec"]["template"]["spec"]["containers"])
if dra:
    open(out + "/dra", "w").write("")
    for name in ("gpu.nvidia.com", "mig.nvidia.com"):
        if name not in kinds.get("DeviceClass", []):
            raise SystemExit("  missing DeviceClass " + name)
    for name in ("tessera-mig-config", "tessera-device-plugin-config", "tessera-node"):
        if name in kinds.get("ConfigMap", []):
            raise SystemExit("  ConfigMap %s beside the DRA driver, which reads no device-plugin or MIG config" % name)
    raise SystemExit(0)
for name in ("tessera-mig-config", "tessera-device-plugin-config"):
    if name not in kinds.get("ConfigMap", []):
        raise SystemExit("  missing ConfigMap " + name)
PY
  then
    echo "$overlay: INVALID (objects)"
    failures=$((failures + 1))
    continue
  fi
  if ! python3 - "$out/rendered.yaml" "$bin" "$deploy" "$work/quota" <<'PY'
import os, re, shutil, stat, subprocess, sys
import yaml
rendered, binary, deploy, scratch = sys.argv[1:]
LIB = "/usr/local/tessera/lib/libtessera-cuda.so"  # TESSERA_CONTAINER_LIBRARY_PATH
ds = next(d for d in yaml.safe_load_all(open(rendered)) if d and d["kind"] == "DaemonSet")
spec = ds["spec"]["template"]["spec"]
host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
def fail(msg):
    raise SystemExit("  quota library: " + msg)
# The device plugin: `tessera plugin`, or `tessera node` (the same quota
# flags); or the DRA driver, `tessera dra` (its ledger root is --quota-ledger-root).
plugin = next(c for c in spec["containers"] if c["name"] in ("device-plugin", "node-agent", "dra-driver"))
cmd = plugin["command"]
if "--no-quota-library" in cmd:
    raise SystemExit(0)
dra = cmd[:2] == ["tessera", "dra"]
# Flags the plugin is given, else its defaults as `tessera plugin --help`
# prints them (`tessera node` has the same; the DRA driver's, its own).
sub = "dra" if dra else "plugin"
help_text = subprocess.run([binary, sub, "--help"], capture_output=True, text=True).stdout
def flag(name):
    if name in cmd:
        return cmd[cmd.index(name) + 1]
    m = re.search(re.escape(name) + r" TEXT=(\S+)", help_text)
    if not m:
        fail("tessera %s --help shows no default for %s" % (sub, name))
    return m.group(1)
library_dir, ledger_root = flag("--quota-library-dir"), flag("--quota-ledger-root")
# The ledger root: a hostPath mounted read-write at the path it has on the host.
mounts = [m for m in plugin.get("volumeMounts", []) if host.get(m["name"]) == ledger_root]
if not any(m["mountPath"] == ledger_root and not m.get("readOnly") for m in mounts):
    fail("the %s container does not mount hostPath %s read-write at the same path" % (plugin["name"], ledger_root))
# The library: an init container writes it into the library directory's hostPath.
installers = [(c, m) for c in spec.get("initContainers", []) for m in c.get("volumeMounts", [])
              if host.get(m["name"]) == library_dir and not m.get("readOnly") and LIB in " ".join(c["command"])]
if not installers:
    fail("no init container copies %s into hostPath %s" % (LIB, library_dir))
if '"$work/app%s"' % LIB not in open(os.path.join(deploy, "image/build.sh")).read():
    fail("deploy/image/build.sh does not put --cuda-lib at %s in the image" % LIB)
# Its script, on a scratch directory: installs a copy by renaming it into
# place (a running container keeps the inode it mapped), and without a
# library in the image says so and leaves the host as it was.
c, m = installers[0]
shutil.rmtree(scratch, ignore_errors=True)
image, hostdir = scratch + "/image", scratch + "/host"
os.makedirs(image); os.makedirs(hostdir)
script = c["command"][-1].replace(os.path.dirname(LIB) + "/", image + "/").replace(m["mountPath"], hostdir)
def install():
    return subprocess.run(c["command"][:-1] + [script], capture_output=True, text=True)
# Where the pod writes CDI specs (CDI, the DRA driver), the specs name both
# hooks: the script installs them and refuses an image without them.
HOOKS = ["tessera-cdi-hook", "tessera-memory-hook"]
needs_hooks = "--cdi-spec-dir" in cmd or dra
if needs_hooks:
    for h in HOOKS:
        open(image + "/" + h, "w").write("#!/bin/sh\n")
        os.chmod(image + "/" + h, 0o755)
open(image + "/libtessera-cuda.so", "w").write("v1")
r = install()
dst = hostdir + "/libtessera-cuda.so"
if r.returncode != 0 or open(dst).read() != "v1" or stat.S_IMODE(os.stat(dst).st_mode) != 0o755:
    fail("the install script did not install the library: " + r.stderr)
before = os.stat(dst).st_ino
open(image + "/libtessera-cuda.so", "w").write("v2")
r = install()
if r.returncode != 0 or open(dst).read() != "v2" or os.stat(dst).st_ino == before:
    fail("the install script did not replace the library by renaming a new copy over it")
if sorted(os.listdir(hostdir)) != sorted(["libtessera-cuda.so"] + (HOOKS if needs_hooks else [])):
    fail("the install script left %s" % os.listdir(hostdir))
if needs_hooks:
    os.remove(image + "/tessera-cdi-hook")
    open(image + "/libtessera-cuda.so", "w").write("v3")
    r = install()
    if r.returncode == 0 or "no " + image + "/tessera-cdi-hook" not in r.stderr or "--build" not in r.stderr \
            or open(dst).read() != "v2":
        fail("an image without tessera-cdi-hook must stop the pod, say what to do and install nothing: rc %d, %s"
             % (r.returncode, r.stderr))
    open(image + "/tessera-cdi-hook", "w").write("#!/bin/sh\n")
    os.chmod(image + "/tessera-cdi-hook", 0o755)
    open(image + "/libtessera-cuda.so", "w").write("v2")
os.remove(image + "/libtessera-cuda.so")
r = install()
if r.returncode != 0 or open(dst).read() != "v2" or "no " + image not in r.stderr:
    fail("without a library in the image the script should say so and change nothing: " + r.stderr)
PY
  then
    echo "$overlay: INVALID (quota library)"
    failures=$((failures + 1))
    continue
  fi
  # The DRA driver: its own checks, then nothing of the device plugin's
  # (no device-plugin or MIG config to validate).
  if [[ -f $out/dra ]]; then
    if python3 - "$out/rendered.yaml" "$bin" "$deploy" <<'PY'
import os, re, subprocess, sys
import yaml
from node_pod import check_node_pod, parse_flags
rendered, binary, deploy = sys.argv[1:]
docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
daemonsets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "DaemonSet"}
ds = daemonsets["tessera"]
spec = ds["spec"]["template"]["spec"]
def fail(msg):
    raise SystemExit("  dra: " + msg)
def sc(c):
    return c.get("securityContext") or {}

# `tessera dra`'s options, from its --help (True: takes a value; "+": one or
# more; False: none), and the defaults it prints for its paths.
help_text = subprocess.run([binary, "dra", "--help"], capture_output=True, text=True).stdout
FLAGS, DEFAULTS = {}, {}
for line in help_text.splitlines():
    m = re.match(r"\s+(?:-\w,)?(--[a-z0-9][a-z0-9-]*)(.*)$", line)
    if not m:
        continue
    name, rest = m.groups()
    t = re.match(r" (TEXT|ENUM|FLOAT|UINT|INT)(\S*)", rest)
    FLAGS[name] = False if not t else ("+" if re.search(r" \.\.\.(\s|$)", rest) else True)
    if t and t.group(1) == "TEXT" and t.group(2).startswith("="):
        DEFAULTS[name] = t.group(2)[1:]
for f in ("--driver-name", "--kubelet-dir", "--cdi-spec-dir", "--quota-library-dir", "--quota-ledger-root"):
    if f not in DEFAULTS:
        fail("`tessera dra --help` shows no default for %s: %r" % (f, help_text[:300]))

# One container, dra-driver, runs `tessera dra`; nothing else runs tessera
# (mig apply would change the layout the driver publishes; a device plugin
# would hand out the same GPUs).
containers = spec.get("initContainers", []) + spec["containers"]
names = [c["name"] for c in spec["containers"]]
if names != ["dra-driver"] or spec["containers"][0].get("command", [])[:2] != ["tessera", "dra"]:
    fail("the DaemonSet should run one container, dra-driver, `tessera dra`: %s" % [
        (c["name"], " ".join(c.get("command", [])[:2])) for c in spec["containers"]])
driver = spec["containers"][0]
for c in spec.get("initContainers", []):
    if c.get("command", [])[:1] == ["tessera"]:
        fail("init container %s runs %s before the DRA driver" % (c["name"], " ".join(c["command"][:3])))
cmd = driver["command"]
given = parse_flags(cmd, FLAGS, fail,
                    lambda f: "tessera dra has no option %s (its --help lists none such): %s" % (f, " ".join(cmd)))
def flag(name):
    return given.get(name) or DEFAULTS[name]
if any(f in given for f in ("--sim", "--nvml-library", "--kubeconfig", "--allow-insecure-http")):
    fail("a real node's driver takes the driver's NVML and the in-cluster service account: %s" % " ".join(cmd))
if given.get("--order", "tessera") not in ("tessera", "by-start"):
    fail("--order %s: tessera or by-start" % given["--order"])
env = {e["name"]: e for e in driver.get("env", [])}
def value(name):
    return env.get(name, {}).get("value")
if "--node-name" not in given:
    ref = ((env.get("NODE_NAME") or {}).get("valueFrom") or {}).get("fieldRef") or {}
    if ref.get("fieldPath") != "spec.nodeName":
        fail("no --node-name, and NODE_NAME does not come from the downward API's spec.nodeName: %s" % env.get("NODE_NAME"))

# The NVIDIA container toolkit: its runtime class, every GPU, NVML and CUDA
# (the claims' CDI specs name the driver's libraries), MIG management.
rc = yaml.safe_load(open(os.path.join(deploy, "overlays/gpu-node/runtimeclass.yaml")))
if rc["metadata"]["name"] != spec.get("runtimeClassName") or rc.get("handler") != "nvidia":
    fail("runtimeClassName %s is not deploy/overlays/gpu-node/runtimeclass.yaml's (handler nvidia)" % spec.get("runtimeClassName"))
caps = (value("NVIDIA_DRIVER_CAPABILITIES") or "").split(",")
if value("NVIDIA_VISIBLE_DEVICES") != "all" or not ({"utility", "compute"} <= set(caps) or caps == ["all"]):
    fail("NVIDIA_VISIBLE_DEVICES=%s NVIDIA_DRIVER_CAPABILITIES=%s: the driver needs every GPU, NVML (utility) and "
         "CUDA's driver library (compute)" % (value("NVIDIA_VISIBLE_DEVICES"), value("NVIDIA_DRIVER_CAPABILITIES")))
if value("NVIDIA_MIG_CONFIG_DEVICES") != "all":
    fail("NVIDIA_MIG_CONFIG_DEVICES=%s, not all: cutting MIG instances at prepare would fail" % value("NVIDIA_MIG_CONFIG_DEVICES"))

# Privileged: the driver (cutting MIG instances); no other container.
if sc(driver).get("privileged") is not True:
    fail("dra-driver is not privileged: creating MIG instances and their device nodes would fail")
for c in containers:
    if c is driver:
        continue
    s = sc(c)
    if s.get("privileged") or s.get("allowPrivilegeEscalation") is not False or "ALL" not in ((s.get("capabilities") or {}).get("drop") or []):
        fail("container %s should be unprivileged and drop every capability: %s" % (c["name"], s))
# MPS claims (components/dra-mps): tessera mps-host beside the driver owns the
# daemons, and the driver reaches its socket read-only; without it no MPS.
mps_host = daemonsets.get("tessera-mps-host")
for name, d in daemonsets.items():
    if name not in ("tessera", "tessera-mps-host"):
        fail("DaemonSet %s beside the DRA driver" % name)
    if name == "tessera" and d["spec"]["template"]["spec"].get("hostIPC"):
        fail("the DRA driver's DaemonSet has hostIPC: its MPS daemons are tessera-mps-host's")
mps_socket_dir = None
if mps_host:
    hs = mps_host["spec"]["template"]["spec"]
    hc = hs["containers"][0]
    if hc.get("command", [])[:2] != ["tessera", "mps-host"] or not hs.get("hostIPC"):
        fail("tessera-mps-host should run `tessera mps-host` with hostIPC: %s" % hc.get("command"))
    if mps_host["spec"].get("updateStrategy", {}).get("type") != "OnDelete":
        fail("tessera-mps-host should be updateStrategy OnDelete, so an upgrade keeps the MPS servers")
    sock = value("TESSERA_MPS_HOST")
    if not sock:
        fail("tessera-mps-host runs, but the driver has no TESSERA_MPS_HOST: MPS claims would be refused")
    mps_socket_dir = os.path.dirname(sock)
    if not any(m["mountPath"] == mps_socket_dir and m.get("readOnly") for m in driver.get("volumeMounts", [])):
        fail("the driver's TESSERA_MPS_HOST %s is not under a read-only mount at %s" % (sock, mps_socket_dir))
elif value("TESSERA_MPS_HOST"):
    fail("TESSERA_MPS_HOST=%s, but no tessera-mps-host DaemonSet runs" % value("TESSERA_MPS_HOST"))
extra = [d["kind"] + "/" + d["metadata"]["name"] for d in docs if d["kind"] in ("Service", "ServiceMonitor", "PrometheusRule")]
if extra:
    fail("no exporter runs beside the DRA driver, yet " + ", ".join(extra))

# Host paths: the kubelet's registration and plugin directories, the CDI
# specs, a state directory it is told, the quota paths (the quota-library
# check has those), and a driver root other than / read-only at
# --container-driver-root. All but the last read-write at their own paths.
host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
mounts = driver.get("volumeMounts", [])
kubelet = flag("--kubelet-dir").rstrip("/")
rw = {kubelet + "/plugins_registry": "the registration socket", kubelet + "/plugins": "the DRA socket and checkpoint",
      flag("--cdi-spec-dir"): "the CDI specs"}
if "--state-dir" in given:
    rw[given["--state-dir"]] = "the checkpoint"
allowed = set(rw) | {flag("--quota-library-dir"), flag("--quota-ledger-root")}
if mps_socket_dir:
    allowed.add(mps_socket_dir)
root = given.get("--driver-root", "/")
if root != "/":
    at = given.get("--container-driver-root") or "/driver-root"
    if not any(host.get(m["name"]) == root and m["mountPath"] == at and m.get("readOnly") for m in mounts):
        fail("--driver-root %s is not a hostPath mounted read-only at %s (--container-driver-root): the CDI specs "
             "would name the container's files, not the host's" % (root, at))
    allowed.add(root)
for name, path in sorted(host.items()):
    if path not in allowed:
        fail("hostPath %s (volume %s) is not one the DRA driver needs" % (path, name))
def mounted_rw(path):
    return any((path == m["mountPath"] or path.startswith(m["mountPath"].rstrip("/") + "/"))
               and host.get(m["name"]) == m["mountPath"] and not m.get("readOnly") for m in mounts)
for path, what in sorted(rw.items()):
    if not mounted_rw(path):
        fail("%s (%s) is not under a hostPath mounted read-write at its own path" % (path, what))

# The DeviceClasses: NVIDIA's names, selecting this driver's devices.
drv = flag("--driver-name")
classes = {d["metadata"]["name"]: d for d in docs if d["kind"] == "DeviceClass"}
if sorted(classes) != ["gpu.nvidia.com", "mig.nvidia.com"]:
    fail("DeviceClasses %s, not gpu.nvidia.com and mig.nvidia.com" % sorted(classes))
for name, typ in (("gpu.nvidia.com", "gpu"), ("mig.nvidia.com", "mig")):
    c = classes[name]
    want = "device.driver == '%s' && device.attributes['%s'].type == '%s'" % (drv, drv, typ)
    if c.get("apiVersion") != "resource.k8s.io/v1" or c["metadata"].get("namespace"):
        fail("DeviceClass %s: apiVersion %s, namespace %s: resource.k8s.io/v1, cluster-scoped" % (
            name, c.get("apiVersion"), c["metadata"].get("namespace")))
    got = [s.get("cel", {}).get("expression") for s in (c.get("spec") or {}).get("selectors", [])]
    if got != [want]:
        fail("DeviceClass %s selects %s, not [%r]" % (name, got, want))
    ext = (c.get("spec") or {}).get("extendedResourceName")
    if ext != ("nvidia.com/gpu" if typ == "gpu" else None):
        fail("DeviceClass %s: extendedResourceName %s" % (name, ext))

# RBAC: what the driver does, and beyond it only what is named here.
USES = {("", "nodes"): {"get"}, ("", "events"): {"create"},
        ("resource.k8s.io", "resourceslices"): {"list", "create", "update", "delete"},
        ("resource.k8s.io", "resourceclaims"): {"get"}}
# Granted but not used by `tessera dra`: get/watch on slices (NVIDIA's
# driver's grant; tessera lists with a field selector). Nothing of the base's
# node-agent role (Node patches, evictions): the DRA overlay deletes it.
UNUSED = {("resource.k8s.io", "resourceslices"): {"get", "watch"}}
sa, ns = spec.get("serviceAccountName"), ds["metadata"].get("namespace")
roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
bound = [b["roleRef"]["name"] for b in docs if b["kind"] == "ClusterRoleBinding"
         and any(s.get("kind") == "ServiceAccount" and s.get("name") == sa and s.get("namespace") == ns
                 for s in b.get("subjects", []))]
granted = {}
for name in bound:
    for rule in roles[name].get("rules", []):
        for g in rule.get("apiGroups", []):
            for r in rule.get("resources", []):
                granted.setdefault((g, r), set()).update(rule.get("verbs", []))
for key, verbs in sorted(USES.items()):
    if not verbs <= granted.get(key, set()):
        fail("service account %s/%s may not %s %s: the DRA driver does" % (
            ns, sa, sorted(verbs - granted.get(key, set())), "/".join(filter(None, key))))
for key, verbs in sorted(granted.items()):
    beyond = verbs - USES.get(key, set()) - UNUSED.get(key, set())
    if beyond:
        fail("service account %s/%s is granted %s on %s, which neither the DRA driver nor the base role uses" % (
            ns, sa, sorted(beyond), "/".join(filter(None, key))))
unused = sorted("%s %s" % ("/".join(filter(None, k)), ",".join(sorted(v - USES.get(k, set()))))
                for k, v in granted.items() if v - USES.get(k, set()))

# Pod Security, scheduling and resources, as the node agent's.
check_node_pod(docs, ns, spec, driver, fail)
print("  dra: %s; driver %s; privileged (MIG); hostPaths %s; DeviceClasses gpu.nvidia.com, mig.nvidia.com; "
      "RBAC as used, and unused: %s" % (" ".join(cmd[:2] + [f for f in given]), drv, ", ".join(sorted(set(host.values()))),
                                        "; ".join(unused) or "nothing"))
PY
    then
      echo "$overlay: ok (DRA driver)"
    else
      echo "$overlay: INVALID (dra)"
      failures=$((failures + 1))
    fi
    continue
  fi
  if ! python3 - "$out/rendered.yaml" "$out/tessera-device-plugin-config.yaml" "$bin" "$deploy" <<'PY'
import os, re, subprocess, sys
import yaml
rendered, config_file, binary, deploy = sys.argv[1:]
IMAGE_MPS_CONTROL = "/usr/local/tessera/bin/nvidia-cuda-mps-control"
docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
daemonsets = {d["metadata"]["name"]: d for d in docs if d["kind"] == "DaemonSet"}
ds = daemonsets["tessera"]
spec = ds["spec"]["template"]["spec"]
config = yaml.safe_load(open(config_file))
def fail(msg):
    raise SystemExit("  mps: " + msg)
def help_of(*command):
    return subprocess.run([binary, *command, "--help"], capture_output=True, text=True).stdout
host_ds = daemonsets.get("tessera-mps-host")
if "mps" not in (config.get("sharing") or {}):
    for name, d in daemonsets.items():
        if d["spec"]["template"]["spec"].get("hostIPC"):
            fail("DaemonSet %s has hostIPC but the device-plugin config has no sharing.mps" % name)
    if host_ds is not None:
        fail("DaemonSet tessera-mps-host but the device-plugin config has no sharing.mps")
    raise SystemExit(0)
# The daemons are tessera-mps-host's, in a DaemonSet of its own that a tessera
# upgrade does not replace; the tessera pod only follows them.
if host_ds is None:
    fail("sharing.mps without the DaemonSet tessera-mps-host, the daemons' owner")
if spec.get("hostIPC"):
    fail("the tessera pod has hostIPC: only tessera-mps-host runs MPS daemons")
if (host_ds["spec"].get("updateStrategy") or {}).get("type") != "OnDelete":
    fail("tessera-mps-host's updateStrategy is %s, not OnDelete: applying a new tessera would replace it and end "
         "every MPS client's server" % host_ds["spec"].get("updateStrategy"))
if host_ds["metadata"].get("namespace") != ds["metadata"].get("namespace"):
    fail("tessera-mps-host is in namespace %s, tessera in %s" % (host_ds["metadata"].get("namespace"), ds["metadata"].get("namespace")))
hspec = host_ds["spec"]["template"]["spec"]
sel, labels = host_ds["spec"]["selector"].get("matchLabels", {}), host_ds["spec"]["template"]["metadata"].get("labels", {})
if not sel or any(labels.get(k) != v for k, v in sel.items()) or \
        all(ds["spec"]["template"]["metadata"].get("labels", {}).get(k) == v for k, v in sel.items()):
    fail("tessera-mps-host's selector %s must select its own pods and not tessera's" % sel)
if hspec.get("hostIPC") is not True:
    fail("tessera-mps-host without hostIPC: true (the MPS server and its clients share memory)")
# Wherever tessera runs, and as tessera's pod does.
for field in ("nodeSelector", "affinity", "securityContext", "priorityClassName", "runtimeClassName"):
    if hspec.get(field) != spec.get(field):
        fail("tessera-mps-host's %s %s is not tessera's %s" % (field, hspec.get(field), spec.get(field)))
key = lambda t: sorted((k, str(v)) for k, v in t.items())
if sorted(map(key, hspec.get("tolerations") or [])) != sorted(map(key, spec.get("tolerations") or [])):
    fail("tessera-mps-host's tolerations %s are not tessera's %s" % (hspec.get("tolerations"), spec.get("tolerations")))
if hspec.get("automountServiceAccountToken") is not False:
    fail("tessera-mps-host mounts a service account token: it asks the API server nothing")
hosts = [c for c in hspec["containers"] if c.get("command", [])[:2] == ["tessera", "mps-host"]]
if len(hspec["containers"]) != 1 or len(hosts) != 1:
    fail("tessera-mps-host should run one container, `tessera mps-host`: %s" % [c.get("command", [])[:2] for c in hspec["containers"]])
host = hosts[0]
sc = host.get("securityContext") or {}
if sc.get("privileged") or sc.get("allowPrivilegeEscalation") is not False or \
        "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
    fail("the mps-host container should be unprivileged and drop every capability: %s" % sc)
cmd = host["command"]
host_help = help_of("mps-host")
for f in [a for a in cmd[2:] if a.startswith("--")]:
    if not re.search(r"(^|[ ,])" + re.escape(f) + r"[ =\n]", host_help, re.M):
        fail("tessera mps-host has no option " + f)
if "--socket" in cmd:
    socket = cmd[cmd.index("--socket") + 1]
else:
    m = re.search(r"--socket TEXT=(\S+)", host_help)
    if not m:
        fail("tessera mps-host --help shows no default for --socket")
    socket = m.group(1)
root = (config.get("flags") or {}).get("mpsRoot")
if not root:
    fail("sharing.mps without flags.mpsRoot")
hvols = {v["name"]: v["hostPath"]["path"] for v in hspec["volumes"] if "hostPath" in v}
hmounts = host.get("volumeMounts", [])
def mounts_rw(mounts, vols, path, at):
    return any(vols.get(m["name"]) == path and m["mountPath"] == at and not m.get("readOnly") for m in mounts)
if not mounts_rw(hmounts, hvols, root, root):
    fail("the mps-host container does not mount hostPath %s (mpsRoot) read-write at the same path" % root)
if not mounts_rw(hmounts, hvols, root + "/shm", "/dev/shm"):
    fail("the mps-host container does not mount hostPath %s/shm at /dev/shm, as Allocate does for clients" % root)
sock_dir = os.path.dirname(socket)
if not mounts_rw(hmounts, hvols, sock_dir, sock_dir):
    fail("the mps-host container does not mount hostPath %s (its socket's directory) read-write at the same path" % sock_dir)
# Tenants are given <mpsRoot>/<device>/pipe and <mpsRoot>/shm: the socket is elsewhere.
if socket == root or socket.startswith(root.rstrip("/") + "/"):
    fail("the mps-host socket %s is under mpsRoot %s, which tenants' pipe directories live in" % (socket, root))
if "--mps-control" in cmd:
    control = cmd[cmd.index("--mps-control") + 1]
    if control != IMAGE_MPS_CONTROL:
        fail("--mps-control %s: the image carries a control program only at %s" % (control, IMAGE_MPS_CONTROL))
    if '"$work/app%s"' % IMAGE_MPS_CONTROL not in open(deploy + "/image/build.sh").read():
        fail("deploy/image/build.sh does not put --mps-control at %s in the image" % IMAGE_MPS_CONTROL)
    control = "--mps-control " + control
else:
    # The driver's, from PATH: the NVIDIA container toolkit injects it for the compute capability.
    env = {e["name"]: e.get("value", "") for e in host.get("env", [])}
    caps = env.get("NVIDIA_DRIVER_CAPABILITIES", "")
    if not (caps == "all" or "compute" in caps.split(",")) or env.get("NVIDIA_VISIBLE_DEVICES", "") in ("", "void"):
        fail("no --mps-control, and the mps-host container does not ask the NVIDIA container toolkit for the "
             "driver's binaries (NVIDIA_VISIBLE_DEVICES set, NVIDIA_DRIVER_CAPABILITIES with compute): "
             "NVIDIA_VISIBLE_DEVICES=%r NVIDIA_DRIVER_CAPABILITIES=%r" % (env.get("NVIDIA_VISIBLE_DEVICES"), caps))
    control = "the driver's nvidia-cuda-mps-control from PATH (NVIDIA_DRIVER_CAPABILITIES=%s)" % caps
# The plugin (or agent) follows the host through that socket, and mounts none of mpsRoot.
plugin = next(c for c in spec["containers"] if c["name"] in ("device-plugin", "node-agent"))
pcmd, penv = plugin["command"], {e["name"]: e.get("value") for e in plugin.get("env", [])}
told = pcmd[pcmd.index("--mps-host") + 1] if "--mps-host" in pcmd else penv.get("TESSERA_MPS_HOST")
if told != socket:
    fail("the %s container is told the mps-host socket %s (--mps-host or TESSERA_MPS_HOST), not %s" % (plugin["name"], told, socket))
if "--mps-host" not in help_of("plugin") or "TESSERA_MPS_HOST" not in help_of("plugin"):
    fail("tessera plugin has no --mps-host option read from TESSERA_MPS_HOST")
pvols = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
if not any(pvols.get(m["name"]) == sock_dir and m["mountPath"] == sock_dir for m in plugin.get("volumeMounts", [])):
    fail("the %s container does not mount hostPath %s (the mps-host socket's directory) at the same path" % (plugin["name"], sock_dir))
for c in spec.get("initContainers", []) + spec["containers"]:
    for m in c.get("volumeMounts", []):
        p = pvols.get(m["name"], "")
        if p == root or p.startswith(root.rstrip("/") + "/"):
            fail("container %s mounts %s, under mpsRoot: the daemons are tessera-mps-host's" % (c["name"], p))
print("  mps: tessera-mps-host (OnDelete, hostIPC, mpsRoot %s read-write, %s/shm at /dev/shm, socket %s; %s); "
      "%s follows it" % (root, root, socket, control, plugin["name"]))
PY
  then
    echo "$overlay: INVALID (mps)"
    failures=$((failures + 1))
    continue
  fi
  if ! python3 - "$out/rendered.yaml" "$out/tessera-device-plugin-config.yaml" <<'PY'
import os, sys
import yaml
rendered, config_file = sys.argv[1:]
CDI_SPEC_DIR = "/var/run/cdi"  # --cdi-spec-dir's default
ds = next(d for d in yaml.safe_load_all(open(rendered)) if d and d["kind"] == "DaemonSet")
spec = ds["spec"]["template"]["spec"]
config = yaml.safe_load(open(config_file)) or {}
def fail(msg):
    raise SystemExit("  cdi: " + msg)
plugin = next(c for c in spec["containers"] if c["name"] in ("device-plugin", "node-agent"))
cmd = plugin["command"]
strategies = ((config.get("flags") or {}).get("plugin") or {}).get("deviceListStrategy") or []
strategies = strategies if isinstance(strategies, list) else [strategies]
uses_cdi = sorted({"cdi-cri", "cdi-annotations"} & set(strategies))
def value(flag):
    if flag not in cmd:
        return None
    i = cmd.index(flag) + 1
    if i >= len(cmd) or cmd[i].startswith("-"):
        fail("%s is given no value" % flag)
    return cmd[i]
spec_dir = value("--cdi-spec-dir")
if spec_dir is None and not uses_cdi:
    raise SystemExit(0)
spec_dir = spec_dir or CDI_SPEC_DIR
# The plugin writes the specs; the container runtime on the host reads them.
host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
if not any(host.get(m["name"]) == spec_dir and m["mountPath"] == spec_dir and not m.get("readOnly")
           for m in plugin.get("volumeMounts", [])):
    fail("the %s container does not mount hostPath %s (the CDI spec directory) read-write at the same path"
         % (plugin["name"], spec_dir))
for flag in ("--driver-root", "--dev-root", "--container-driver-root"):
    if value(flag) is not None and not os.path.isabs(value(flag)):
        fail("%s %s is not an absolute path" % (flag, value(flag)))
print("  cdi: specs in hostPath %s (read-write at the same path); driver root %s; deviceListStrategy %s" % (
    spec_dir, value("--driver-root") or "the config's", strategies or "envvar"))
PY
  then
    echo "$overlay: INVALID (cdi)"
    failures=$((failures + 1))
    continue
  fi
  if ! python3 - "$out/rendered.yaml" "$bin" <<'PY'
import re, subprocess, sys
import yaml
rendered, binary = sys.argv[1:]
docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
ds = next(d for d in docs if d["kind"] == "DaemonSet")
spec = ds["spec"]["template"]["spec"]
def fail(msg):
    raise SystemExit("  exporter: " + msg)
exporter = next((c for c in spec["containers"] if c["name"] == "exporter"), None)
# Or the node agent serves the exporter itself (`tessera node --metrics-listen`).
agent = next((c for c in spec["containers"] if c["name"] == "node-agent"), None)
in_agent = agent is not None and "--metrics-listen" in agent["command"]
extra = [d["kind"] + "/" + d["metadata"]["name"] for d in docs if d["kind"] in ("Service", "ServiceMonitor", "PrometheusRule")]
if exporter is not None and in_agent:
    fail("an exporter container beside `tessera node --metrics-listen`: two exporters in one pod")
if exporter is None and not in_agent:
    if extra:
        fail("no exporter container and no --metrics-listen, yet " + ", ".join(extra))
    raise SystemExit(0)
if in_agent:
    # Its flags are checked against `tessera node`'s list in the node agent's checks.
    exporter, listen_flag = agent, "--metrics-listen"
    cmd = exporter["command"]
else:
    listen_flag = "--listen"
    cmd = exporter["command"]
    if cmd[:2] != ["tessera", "exporter"]:
        fail("the exporter container runs %s, not tessera exporter" % cmd[:2])
    help_text = subprocess.run([binary, "exporter", "--help"], capture_output=True, text=True).stdout
    for f in [a for a in cmd[2:] if a.startswith("--")]:
        if not re.search(r"(^|[ ,])" + re.escape(f) + r"[ =\n]", help_text, re.M):
            fail("tessera exporter has no option " + f)
def flag(name):
    if name not in cmd:
        fail("the %s container is not given %s" % (exporter["name"], name))
    return cmd[cmd.index(name) + 1]
host, port = flag(listen_flag).rsplit(":", 1)
if host not in ("0.0.0.0", ""):
    fail("%s %s: the Service reaches the pod's address, not %s" % (listen_flag, flag(listen_flag), host))
ports = {p.get("name"): p for p in exporter.get("ports", [])}
if "metrics" not in ports or str(ports["metrics"]["containerPort"]) != port:
    fail("no container port named metrics at %s (the --listen port): %s" % (port, list(ports.values())))
for probe in ("readinessProbe", "livenessProbe"):
    get = (exporter.get(probe) or {}).get("httpGet") or {}
    if get.get("path") != "/healthz" or str(get.get("port")) not in ("metrics", port):
        fail("%s is not an HTTP GET of /healthz on the metrics port: %s" % (probe, exporter.get(probe)))
res = exporter.get("resources", {})
def mib(q):
    units = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}
    m = re.fullmatch(r"(\d+)(Ki|Mi|Gi)", str(q))
    return int(m.group(1)) * units[m.group(2)] if m else None
req, lim = mib(res.get("requests", {}).get("memory")), mib(res.get("limits", {}).get("memory"))
if in_agent:
    # The agent's own budget (64Mi request, 256Mi limit) plus the exporter's.
    if req is None or lim is None or not (96 <= req <= lim and 352 <= lim <= 1024):
        fail("the node agent with the exporter needs its memory request and limit at least 96Mi and 352Mi "
             "(its own 64Mi and 256Mi and the exporter's), the limit at most 1Gi: %s" % res)
elif req is None or lim is None or not 20 <= req <= lim <= 128:
    fail("memory request and limit should be set, at least 20Mi and at most 128Mi: %s" % res)
if "cpu" not in res.get("requests", {}):
    fail("no CPU request")
host_paths = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
mounts = exporter.get("volumeMounts", [])
def mounted_ro(path):
    return any(path == m["mountPath"] or path.startswith(m["mountPath"].rstrip("/") + "/")
               for m in mounts if m.get("readOnly") and host_paths.get(m["name"]) == m["mountPath"])
sock = flag("--pod-resources")
if not mounted_ro(sock):
    fail("--pod-resources %s is not under a hostPath mounted read-only at its own path" % sock)
if not in_agent:
    # A separate exporter reads the plugin's ledgers; the agent has them already.
    plugin = next(c for c in spec["containers"] if c["name"] == "device-plugin")
    pcmd = plugin["command"]
    if "--quota-ledger-root" in pcmd and flag("--quota-ledger-root") != pcmd[pcmd.index("--quota-ledger-root") + 1]:
        fail("--quota-ledger-root %s is not the plugin's %s" % (flag("--quota-ledger-root"), pcmd[pcmd.index("--quota-ledger-root") + 1]))
    if not mounted_ro(flag("--quota-ledger-root")):
        fail("--quota-ledger-root %s is not a hostPath mounted read-only at its own path" % flag("--quota-ledger-root"))
pod_labels = ds["spec"]["template"]["metadata"]["labels"]
services = [d for d in docs if d["kind"] == "Service"
            and d["spec"].get("selector") and all(pod_labels.get(k) == v for k, v in d["spec"]["selector"].items())]
svc = next((s for s in services for p in s["spec"]["ports"] if p.get("targetPort") in ("metrics", int(port))), None)
if svc is None:
    fail("no Service selects the DaemonSet's pods with a port targeting metrics")
if svc["spec"].get("clusterIP") != "None":
    fail("Service %s is not headless (clusterIP: None)" % svc["metadata"]["name"])
svc_port = next(p for p in svc["spec"]["ports"] if p.get("targetPort") in ("metrics", int(port)))
monitors = [d for d in docs if d["kind"] == "ServiceMonitor"
            and all(svc["metadata"].get("labels", {}).get(k) == v for k, v in d["spec"]["selector"]["matchLabels"].items())
            and d["metadata"].get("namespace") == svc["metadata"].get("namespace")]
if not any(e.get("port") == svc_port.get("name") and e.get("path", "/metrics") == "/metrics"
           for m in monitors for e in m["spec"]["endpoints"]):
    fail("no ServiceMonitor selects Service %s and scrapes its port %s at /metrics" % (svc["metadata"]["name"], svc_port.get("name")))
rules = [d for d in docs if d["kind"] == "PrometheusRule"]
if not rules or not rules[0]["spec"]["groups"]:
    fail("no PrometheusRule with rules")
print("  exporter: %s on port %s (/healthz probes, memory %s-%sMi), Service %s, ServiceMonitor, PrometheusRule %s" %
      (" ".join(cmd[:2]), port, int(req), int(lim), svc["metadata"]["name"], rules[0]["metadata"]["name"]))
PY
  then
    echo "$overlay: INVALID (exporter)"
    failures=$((failures + 1))
    continue
  fi
  if ! python3 - "$out/rendered.yaml" "$out/tessera-device-plugin-config.yaml" "$deploy" <<'PY'
import os, re, sys
import yaml
from node_pod import check_node_pod, parse_flags
rendered, config_file, deploy = sys.argv[1:]
# `tessera node`'s options (True: takes a value; "+": one or more). The command
# is checked against this list, not its --help, so the manifests can lead it.
NODE_FLAGS = {
    "--node-name": True, "--kubeconfig": True, "-f": True, "--config-file": True, "--mig-config": True,
    "--state-dir": True, "--eviction-timeout": True, "--no-node-labels": False, "--metrics-listen": True,
    "--kubelet-dir": True, "--pod-resources": True, "--health-recovery": True, "--ignore-xids": "+",
    "--inventory-interval": True, "--quota-library-dir": True, "--quota-ledger-root": True,
    "--quota-preload": True, "--no-quota-library": False, "--mps-control": True, "--mps-timeout": True,
    "--mps-host": True,
    "--sim": True, "--nvml-library": True,
    "--cdi-spec-dir": True, "--cdi-vendor": True, "--driver-root": True, "--dev-root": True,
    "--container-driver-root": True, "--cdi-hook": True, "--memory-hook": True, "--publish-layout": False,
}
DEFAULTS = {"--state-dir": "/var/lib/tessera", "--kubelet-dir": "/var/lib/kubelet/device-plugins",
            "--pod-resources": "/var/lib/kubelet/pod-resources/kubelet.sock"}
# Every host path a gpu-node overlay may mount, and when.
HOST_PATHS = {
    "/var/lib/kubelet/device-plugins": "always", "/var/lib/kubelet/pod-resources": "always",
    "/var/lib/tessera/lib": "always", "/var/lib/tessera/ledgers": "always",
    "/var/lib/tessera": "mig", "/run/nvidia/tessera": "mps",
}
# And the CDI spec directory (--cdi-spec-dir, default /var/run/cdi) when CDI is used.
CDI_SPEC_DIR = "/var/run/cdi"
# What the agent asks of the API server: (API group, resource) -> verbs.
RBAC = {("", "nodes"): {"get", "list", "watch", "patch"},
        ("", "pods/eviction"): {"create"}, ("", "events"): {"create"}}
docs = [d for d in yaml.safe_load_all(open(rendered)) if d]
ds = next(d for d in docs if d["kind"] == "DaemonSet")
spec = ds["spec"]["template"]["spec"]
def fail(msg):
    raise SystemExit("  node agent: " + msg)
containers = spec.get("initContainers", []) + spec["containers"]
def sc(c):
    return c.get("securityContext") or {}

# RBAC, shared by every overlay: the ClusterRole bound to the DaemonSet's
# service account grants exactly what the agent uses, and nothing beyond.
sa, ns = spec.get("serviceAccountName"), ds["metadata"].get("namespace")
roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ClusterRole"}
bound = [b["roleRef"]["name"] for b in docs if b["kind"] == "ClusterRoleBinding"
         and any(s.get("kind") == "ServiceAccount" and s.get("name") == sa and s.get("namespace") == ns
                 for s in b.get("subjects", []))]
granted = {}
for name in bound:
    for rule in roles[name].get("rules", []):
        for g in rule.get("apiGroups", []):
            for r in rule.get("resources", []):
                granted.setdefault((g, r), set()).update(rule.get("verbs", []))
if granted != RBAC:
    fail("service account %s/%s is granted %s, not exactly what the agent uses: %s" % (
        ns, sa, sorted((k, sorted(v)) for k, v in granted.items()), sorted((k, sorted(v)) for k, v in RBAC.items())))

agent = next((c for c in spec["containers"] if c["name"] == "node-agent"), None)
mig = agent is not None and "--mig-config" in agent["command"]
# Privileged: only what changes MIG, the agent with the mig-manager component
# or the base's `tessera mig apply` init container, each with the toolkit's
# variables for the driver's mig-config capability.
def env_of(c):
    return {e["name"]: e.get("value") for e in c.get("env", [])}
def applies_mig(c):
    return (c is agent and mig) or (c in spec.get("initContainers", []) and c.get("command", [])[:3] == ["tessera", "mig", "apply"])
# And, with no NVIDIA runtime (the chart's driver.source host: NVML loaded
# from the driver root at /driver-root), a container that opens the GPUs'
# device nodes: nothing else admits them to its device cgroup.
def host_driver(c):
    return (env_of(c).get("TESSERA_NVML_LIBRARY") or "").startswith("/driver-root/")
for c in containers:
    if sc(c).get("privileged") and not applies_mig(c) and not host_driver(c):
        fail("container %s is privileged: only the node agent with --mig-config, the mig apply init container or "
             "a container loading the host's driver from /driver-root may be" % c["name"])
    if applies_mig(c) and (not sc(c).get("privileged") or env_of(c).get("NVIDIA_MIG_CONFIG_DEVICES") != "all"):
        fail("container %s changes MIG without privileged: true and NVIDIA_MIG_CONFIG_DEVICES=all: "
             "switching MIG mode and creating instances would fail" % c["name"])
if agent is None:
    for c in containers:
        if c.get("command", [])[:2] == ["tessera", "node"]:
            fail("container %s runs tessera node but is not named node-agent" % c["name"])
    # The plugin (plugin mode) on a node whose default runtime is the NVIDIA
    # container toolkit's: it asks the toolkit for every GPU and NVML.
    for c in containers:
        if c.get("command", [])[:2] in (["tessera", "plugin"], ["tessera", "mig"]):
            e = env_of(c)
            if e.get("NVIDIA_VISIBLE_DEVICES") != "all" or "utility" not in (e.get("NVIDIA_DRIVER_CAPABILITIES") or "").split(","):
                fail("container %s: NVIDIA_VISIBLE_DEVICES=%s NVIDIA_DRIVER_CAPABILITIES=%s: the toolkit's runtime "
                     "would give it no GPU or no NVML" % (c["name"], e.get("NVIDIA_VISIBLE_DEVICES"), e.get("NVIDIA_DRIVER_CAPABILITIES")))
    applying = [c["name"] for c in containers if applies_mig(c)]
    print("  node agent: none; RBAC as the agent's; privileged: %s" % (", ".join(applying) or "nothing"))
    raise SystemExit(0)

cmd = agent["command"]
if cmd[:2] != ["tessera", "node"]:
    fail("the node-agent container runs %s, not tessera node" % cmd[:2])
given = parse_flags(cmd, NODE_FLAGS, fail, lambda f: "tessera node has no option %s (%s)" % (f, " ".join(cmd)))
given.setdefault("--config-file", given.get("-f"))
for other in containers:
    if other is not agent and other.get("command", [])[:2] in (["tessera", "plugin"], ["tessera", "mig"], ["tessera", "exporter"]):
        fail("container %s runs %s beside the node agent, which does that itself" % (other["name"], " ".join(other["command"][:3])))

env = {e["name"]: e for e in agent.get("env", [])}
def value(name):
    return env.get(name, {}).get("value")
if "--node-name" not in given:
    ref = ((env.get("NODE_NAME") or {}).get("valueFrom") or {}).get("fieldRef") or {}
    if ref.get("fieldPath") != "spec.nodeName":
        fail("no --node-name, and NODE_NAME does not come from the downward API's spec.nodeName: %s" % env.get("NODE_NAME"))
if "--sim" in given or "--nvml-library" in given or "--kubeconfig" in given:
    fail("a real node's agent takes the driver's NVML and the in-cluster service account: %s" % " ".join(cmd))

# The NVIDIA container toolkit: its runtime class, every GPU, NVML and CUDA;
# or no NVIDIA runtime at all (the chart's driver.source host): NVML from the
# driver root at /driver-root, no runtime class, the device nodes opened
# privileged (nothing else admits them to the container's device cgroup).
rc_file = os.path.join(deploy, "overlays/gpu-node/runtimeclass.yaml")
rc = yaml.safe_load(open(rc_file))
host_nvml = (value("TESSERA_NVML_LIBRARY") or "").startswith("/driver-root/")
if host_nvml:
    if spec.get("runtimeClassName"):
        fail("runtimeClassName %s with the host's driver (TESSERA_NVML_LIBRARY under /driver-root): a node with "
             "only the driver has no such runtime" % spec.get("runtimeClassName"))
    if not sc(agent).get("privileged"):
        fail("the agent loads the host's driver but is not privileged: it could not open the GPUs' device nodes")
elif rc.get("kind") != "RuntimeClass" or rc["metadata"]["name"] != spec.get("runtimeClassName") or rc.get("handler") != "nvidia":
    fail("runtimeClassName %s is not the RuntimeClass of %s (handler nvidia)" % (spec.get("runtimeClassName"), rc_file))
caps = (value("NVIDIA_DRIVER_CAPABILITIES") or "").split(",")
if host_nvml:
    pass
elif value("NVIDIA_VISIBLE_DEVICES") != "all" or not ({"utility", "compute"} <= set(caps) or caps == ["all"]):
    fail("NVIDIA_VISIBLE_DEVICES=%s NVIDIA_DRIVER_CAPABILITIES=%s: the agent needs every GPU, NVML (utility) and "
         "the MPS programs (compute)" % (value("NVIDIA_VISIBLE_DEVICES"), value("NVIDIA_DRIVER_CAPABILITIES")))

# Privileges: none by default; privileged with MIG management; CAP_SYS_ADMIN
# only for the toolkit's MIG monitoring.
s = sc(agent)
added = set((s.get("capabilities") or {}).get("add") or [])
if mig:
    if not s.get("privileged") or value("NVIDIA_MIG_CONFIG_DEVICES") != "all":
        fail("--mig-config without privileged: true and NVIDIA_MIG_CONFIG_DEVICES=all: creating MIG instances would fail")
elif not host_nvml:
    if s.get("privileged"):
        fail("privileged without --mig-config")
    if "ALL" not in ((s.get("capabilities") or {}).get("drop") or []):
        fail("the agent does not drop every capability: %s" % s)
    if added - {"SYS_ADMIN", "CAP_SYS_ADMIN"}:
        fail("capabilities added: %s" % sorted(added))
    if added and value("NVIDIA_MIG_MONITOR_DEVICES") != "all":
        fail("CAP_SYS_ADMIN without NVIDIA_MIG_MONITOR_DEVICES=all (the only reason the agent is given it)")
    if not added and s.get("allowPrivilegeEscalation") is not False:
        fail("allowPrivilegeEscalation is not false: %s" % s)

# Host paths: from the fixed set, the state directory only with MIG, MPS's
# only with sharing.mps.
config = yaml.safe_load(open(config_file)) or {}
mps = "mps" in (config.get("sharing") or {})
host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
strategies = ((config.get("flags") or {}).get("plugin") or {}).get("deviceListStrategy") or []
cdi_dir = given.get("--cdi-spec-dir") or (CDI_SPEC_DIR if {"cdi-cri", "cdi-annotations"} & set(
    strategies if isinstance(strategies, list) else [strategies]) else None)
# With CDI, the driver's root too, read-only, where --container-driver-root says.
driver_root = given.get("--driver-root") if cdi_dir else None
mounts = agent.get("volumeMounts", [])
for name, path in sorted(host.items()):
    when = "cdi" if path == cdi_dir else HOST_PATHS.get(path)
    if driver_root is not None and path == driver_root and any(
            m["name"] == name and m["mountPath"] == given.get("--container-driver-root") and m.get("readOnly")
            for m in mounts):
        when = "cdi"
    if when is None or (when == "mig" and not mig) or (when == "mps" and not mps):
        fail("hostPath %s (volume %s) is not one the agent needs here" % (path, name))
def mounted(path, rw):
    return any((path == m["mountPath"] or path.startswith(m["mountPath"].rstrip("/") + "/"))
               and host.get(m["name"]) == m["mountPath"] and (not rw or not m.get("readOnly")) for m in mounts)
def flag(name):
    return given.get(name) or DEFAULTS[name]
if not mounted(flag("--kubelet-dir"), rw=True):
    fail("--kubelet-dir %s is not a hostPath mounted read-write at its own path" % flag("--kubelet-dir"))
if not mounted(flag("--pod-resources"), rw=False):
    fail("--pod-resources %s is not under a hostPath mounted at its own path" % flag("--pod-resources"))
if any(host.get(m["name"]) == "/var/lib/kubelet/pod-resources" and not m.get("readOnly") for m in mounts):
    fail("the kubelet's pod-resources directory is mounted read-write")
if mig and not mounted(flag("--state-dir"), rw=True):
    fail("--state-dir %s (the MIG journal) is not a hostPath mounted read-write at its own path" % flag("--state-dir"))

# Config files: a ConfigMap's key through a directory mount (a subPath mount
# never sees the ConfigMap change, and the agent reloads on change).
cms = {v["name"]: v["configMap"]["name"] for v in spec["volumes"] if "configMap" in v}
def from_configmap(path, configmap):
    return any(cms.get(m["name"]) == configmap and not m.get("subPath")
               and path == m["mountPath"].rstrip("/") + "/config.yaml" for m in mounts)
if not given.get("--config-file") or not from_configmap(given["--config-file"], "tessera-device-plugin-config"):
    fail("--config-file %s is not config.yaml of a directory mount of ConfigMap tessera-device-plugin-config" % given.get("--config-file"))
if mig and not from_configmap(given["--mig-config"], "tessera-mig-config"):
    fail("--mig-config %s is not config.yaml of a directory mount of ConfigMap tessera-mig-config" % given["--mig-config"])
if any(d["kind"] == "ConfigMap" and d["metadata"]["name"] == "tessera-node" for d in docs):
    fail("ConfigMap tessera-node names a MIG config, but the agent follows the Node label nvidia.com/mig.config")

# Pod Security, scheduling (every GPU node, before ordinary pods) and resources.
check_node_pod(docs, ns, spec, agent, fail)
# Probes ask the exporter's /healthz; without it the agent answers none.
if "--metrics-listen" not in given and (agent.get("livenessProbe") or agent.get("readinessProbe")):
    fail("a probe without --metrics-listen: the agent has nothing a probe could ask")
print("  node agent: %s; %s; hostPaths %s; RBAC as used" % (
    " ".join(cmd[:2] + [f for f in given if f.startswith("-")]),
    "privileged (MIG)" if mig else ("CAP_SYS_ADMIN (MIG monitoring)" if added else "unprivileged"),
    ", ".join(sorted(set(host.values())))))
PY
  then
    echo "$overlay: INVALID (node agent)"
    failures=$((failures + 1))
    continue
  fi
  # The MIG config: the entry the base's ConfigMap names, or (the gpu-node
  # overlays, where a Node label names it) every entry.
  if [[ -f $out/mig-config-name ]]; then
    name=$(cat "$out/mig-config-name") what="MIG config $name"
    set -- -c "$name"
  else
    what="every MIG config, as a Node label names one"
    set --
  fi
  if "$bin" mig validate -f "$out/tessera-mig-config.yaml" "$@" >/dev/null &&
     "$bin" config validate -f "$out/tessera-device-plugin-config.yaml" >/dev/null; then
    echo "$overlay: ok ($what)"
  else
    echo "$overlay: INVALID"
    failures=$((failures + 1))
  fi
done
exit $((failures > 0))
