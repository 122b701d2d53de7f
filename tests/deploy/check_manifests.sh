#!/usr/bin/env bash
# Renders each kustomize overlay under deploy/ and checks what the node agent
# will read: the mig-parted config and the MIG config name it is told to
# apply, and the device-plugin config, each validated by tessera itself; and
# how the memory-quota library reaches the host: an init container installs
# it into the hostPath the plugin names as its library directory (its script
# run here on a scratch directory), and the plugin sees the ledger root
# hostPath at the same path. An overlay with MPS shares runs the control
# daemons in the plugin's container: it needs the host's IPC namespace, its
# mpsRoot hostPath mounted read-write at the same path, <mpsRoot>/shm as the
# container's /dev/shm (what Allocate gives the clients), and either
# --mps-control naming the image's control program or the driver's from the
# NVIDIA container toolkit; no other overlay gets hostIPC. An overlay with the
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
# other container anywhere may be; CAP_SYS_ADMIN only for MIG monitoring;
# probes only on the exporter's /healthz when it serves metrics; the
# namespace at Pod Security's privileged level. In every overlay, the
# ClusterRole the DaemonSet's service account is bound to grants exactly what
# the agent uses: its Node, evictions, events.
# Usage: check_manifests.sh TESSERA_BIN DEPLOY_DIR
set -euo pipefail
bin=$1
deploy=$2
command -v kubectl >/dev/null || { echo "kubectl not found: skipping"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
# Each render: an overlay under deploy/, or OVERLAY+COMPONENT...[@CONFIG]: that
# overlay with those components of deploy/components and, with @, CONFIG (a
# device-plugin config under deploy/) as its tessera-device-plugin-config.
renders=(base overlays/mig-mixed overlays/time-slicing overlays/mps overlays/metrics
         overlays/gpu-node overlays/gpu-node-mig
         overlays/gpu-node+node-metrics
         overlays/gpu-node+mig-monitor@overlays/mig-mixed/device-plugin-config.yaml
         overlays/gpu-node+node-mps+node-metrics@overlays/mps/device-plugin-config.yaml
         overlays/gpu-node-mig+node-metrics)
compose() {
  local spec=$1 dir=$2 config= parts c
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
for overlay in "${renders[@]}"; do
  out=$work/${overlay//[^A-Za-z0-9+-]/_}
  mkdir -p "$out"
  if [[ $overlay == *[+@]* ]]; then
    compose "$overlay" "$out/kustomization"
    kubectl kustomize "$out/kustomization" >"$out/rendered.yaml"
  else
    kubectl kustomize "$deploy/$overlay" >"$out/rendered.yaml"
  fi
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
  if ! python3 - "$out/rendered.yaml" "$bin" "$deploy" "$work/quota" <<'PY'
import os, re, shutil, stat, subprocess, sys
try:
    import yaml
except ImportError:
    print("  (no PyYAML: quota library checks skipped)")
    raise SystemExit(0)
rendered, binary, deploy, scratch = sys.argv[1:]
LIB = "/usr/local/tessera/lib/libtessera-cuda.so"  # TESSERA_CONTAINER_LIBRARY_PATH
ds = next(d for d in yaml.safe_load_all(open(rendered)) if d and d["kind"] == "DaemonSet")
spec = ds["spec"]["template"]["spec"]
host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
def fail(msg):
    raise SystemExit("  quota library: " + msg)
# The device plugin: `tessera plugin`, or `tessera node` (the same quota flags).
plugin = next(c for c in spec["containers"] if c["name"] in ("device-plugin", "node-agent"))
cmd = plugin["command"]
if "--no-quota-library" in cmd:
    raise SystemExit(0)
# Flags the plugin is given, else its defaults as `tessera plugin --help`
# prints them (`tessera node` has the same).
help_text = subprocess.run([binary, "plugin", "--help"], capture_output=True, text=True).stdout
def flag(name):
    if name in cmd:
        return cmd[cmd.index(name) + 1]
    m = re.search(re.escape(name) + r" TEXT=(\S+)", help_text)
    if not m:
        fail("tessera plugin --help shows no default for " + name)
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
if "COPY lib/ /usr/local/tessera/lib/" not in open(os.path.join(deploy, "image/Dockerfile")).read():
    fail("deploy/image/Dockerfile does not put lib/ at /usr/local/tessera/lib/")
# Its script, on a scratch directory: installs a copy by renaming it into
# place (a running container keeps the inode it mapped), and without a
# library in the image says so and leaves the host as it was.
c, m = installers[0]
shutil.rmtree(scratch, ignore_errors=True)
image, hostdir = scratch + "/image", scratch + "/host"
os.makedirs(image); os.makedirs(hostdir)
script = c["command"][-1].replace(LIB, image + "/libtessera-cuda.so").replace(m["mountPath"], hostdir)
def install():
    return subprocess.run(c["command"][:-1] + [script], capture_output=True, text=True)
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
if sorted(os.listdir(hostdir)) != ["libtessera-cuda.so"]:
    fail("the install script left %s" % os.listdir(hostdir))
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
  if ! python3 - "$out/rendered.yaml" "$out/tessera-device-plugin-config.yaml" "$bin" "$deploy" <<'PY'
import re, subprocess, sys
try:
    import yaml
except ImportError:
    print("  (no PyYAML: MPS checks skipped)")
    raise SystemExit(0)
rendered, config_file, binary, deploy = sys.argv[1:]
IMAGE_MPS_CONTROL = "/usr/local/tessera/bin/nvidia-cuda-mps-control"
ds = next(d for d in yaml.safe_load_all(open(rendered)) if d and d["kind"] == "DaemonSet")
spec = ds["spec"]["template"]["spec"]
config = yaml.safe_load(open(config_file))
def fail(msg):
    raise SystemExit("  mps: " + msg)
if "mps" not in (config.get("sharing") or {}):
    if spec.get("hostIPC"):
        fail("hostIPC is set but the device-plugin config has no sharing.mps")
    raise SystemExit(0)
if spec.get("hostIPC") is not True:
    fail("sharing.mps without hostIPC: true (the MPS server and its clients share memory)")
root = (config.get("flags") or {}).get("mpsRoot")
if not root:
    fail("sharing.mps without flags.mpsRoot")
host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
plugin = next(c for c in spec["containers"] if c["name"] in ("device-plugin", "node-agent"))
mounts = plugin.get("volumeMounts", [])
if not any(host.get(m["name"]) == root and m["mountPath"] == root and not m.get("readOnly") for m in mounts):
    fail("the %s container does not mount hostPath %s (mpsRoot) read-write at the same path" % (plugin["name"], root))
if not any(host.get(m["name"]) == root + "/shm" and m["mountPath"] == "/dev/shm" and not m.get("readOnly") for m in mounts):
    fail("the %s container does not mount hostPath %s/shm at /dev/shm, as Allocate does for clients" % (plugin["name"], root))
cmd = plugin["command"]
if "--mps-control" in cmd:
    control = cmd[cmd.index("--mps-control") + 1]
    if control != IMAGE_MPS_CONTROL:
        fail("--mps-control %s: the image carries a control program only at %s" % (control, IMAGE_MPS_CONTROL))
    if "COPY bin/ " + IMAGE_MPS_CONTROL.rsplit("/", 1)[0] + "/" not in open(deploy + "/image/Dockerfile").read():
        fail("deploy/image/Dockerfile does not put bin/ where --mps-control looks")
    control = "--mps-control " + control
else:
    # The driver's, from PATH: the NVIDIA container toolkit injects it for the compute capability.
    env = {e["name"]: e.get("value", "") for e in plugin.get("env", [])}
    caps = env.get("NVIDIA_DRIVER_CAPABILITIES", "")
    if not (caps == "all" or "compute" in caps.split(",")) or env.get("NVIDIA_VISIBLE_DEVICES", "") in ("", "void"):
        fail("no --mps-control, and the container does not ask the NVIDIA container toolkit for the driver's "
             "binaries (NVIDIA_VISIBLE_DEVICES set, NVIDIA_DRIVER_CAPABILITIES with compute): NVIDIA_VISIBLE_DEVICES=%r "
             "NVIDIA_DRIVER_CAPABILITIES=%r" % (env.get("NVIDIA_VISIBLE_DEVICES"), caps))
    control = "the driver's nvidia-cuda-mps-control from PATH (NVIDIA_DRIVER_CAPABILITIES=%s)" % caps
# `tessera node` has it too (its flags are checked against their list below).
if "--mps-control" not in subprocess.run([binary, "plugin", "--help"], capture_output=True, text=True).stdout:
    fail("tessera plugin has no --mps-control option")
print("  mps: hostIPC; mpsRoot %s mounted read-write at the same path, %s/shm at /dev/shm; %s" % (root, root, control))
PY
  then
    echo "$overlay: INVALID (mps)"
    failures=$((failures + 1))
    continue
  fi
  if ! python3 - "$out/rendered.yaml" "$bin" <<'PY'
import re, subprocess, sys
try:
    import yaml
except ImportError:
    print("  (no PyYAML: exporter checks skipped)")
    raise SystemExit(0)
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
    if "--quota-ledger-root" in pcmd and flag("--ledger-root") != pcmd[pcmd.index("--quota-ledger-root") + 1]:
        fail("--ledger-root %s is not the plugin's --quota-ledger-root %s" % (flag("--ledger-root"), pcmd[pcmd.index("--quota-ledger-root") + 1]))
    if not mounted_ro(flag("--ledger-root")):
        fail("--ledger-root %s is not a hostPath mounted read-only at its own path" % flag("--ledger-root"))
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
try:
    import yaml
except ImportError:
    print("  (no PyYAML: node agent checks skipped)")
    raise SystemExit(0)
rendered, config_file, deploy = sys.argv[1:]
# `tessera node`'s options (True: takes a value; "+": one or more). The command
# is checked against this list, not its --help, so the manifests can lead it.
NODE_FLAGS = {
    "--node-name": True, "--kubeconfig": True, "-c": True, "--config": True, "--mig-config": True,
    "--state-dir": True, "--eviction-timeout": True, "--no-node-labels": False, "--metrics-listen": True,
    "--kubelet-dir": True, "--pod-resources": True, "--health-recovery": True, "--ignore-xids": "+",
    "--inventory-interval": True, "--quota-library-dir": True, "--quota-ledger-root": True,
    "--quota-preload": True, "--no-quota-library": False, "--mps-control": True, "--mps-timeout": True,
    "--sim": True, "--nvml-library": True,
}
DEFAULTS = {"--state-dir": "/var/lib/tessera", "--kubelet-dir": "/var/lib/kubelet/device-plugins",
            "--pod-resources": "/var/lib/kubelet/pod-resources/kubelet.sock"}
# Every host path a gpu-node overlay may mount, and when.
HOST_PATHS = {
    "/var/lib/kubelet/device-plugins": "always", "/var/lib/kubelet/pod-resources": "always",
    "/var/lib/tessera/lib": "always", "/var/lib/tessera/ledgers": "always",
    "/var/lib/tessera": "mig", "/run/nvidia/mps": "mps", "/run/nvidia/mps/shm": "mps",
}
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
# Privileged: only the agent that changes MIG (the mig-manager component).
for c in containers:
    if sc(c).get("privileged") and not (c is agent and mig):
        fail("container %s is privileged: only the node agent with --mig-config may be" % c["name"])
if agent is None:
    for c in containers:
        if c.get("command", [])[:2] == ["tessera", "node"]:
            fail("container %s runs tessera node but is not named node-agent" % c["name"])
    print("  node agent: none; RBAC as the agent's; nothing privileged")
    raise SystemExit(0)

cmd = agent["command"]
if cmd[:2] != ["tessera", "node"]:
    fail("the node-agent container runs %s, not tessera node" % cmd[:2])
given, i = {}, 2
while i < len(cmd):
    f = cmd[i]
    if f not in NODE_FLAGS:
        fail("tessera node has no option %s (%s)" % (f, " ".join(cmd)))
    values = []
    i += 1
    while i < len(cmd) and not cmd[i].startswith("-") and (NODE_FLAGS[f] == "+" or (NODE_FLAGS[f] and not values)):
        values.append(cmd[i])
        i += 1
    if NODE_FLAGS[f] and not values:
        fail("%s is given no value" % f)
    given[f] = values[0] if values else True
given.setdefault("--config", given.get("-c"))
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

# The NVIDIA container toolkit: its runtime class, every GPU, NVML and CUDA.
rc_file = os.path.join(deploy, "overlays/gpu-node/runtimeclass.yaml")
rc = yaml.safe_load(open(rc_file))
if rc.get("kind") != "RuntimeClass" or rc["metadata"]["name"] != spec.get("runtimeClassName") or rc.get("handler") != "nvidia":
    fail("runtimeClassName %s is not the RuntimeClass of %s (handler nvidia)" % (spec.get("runtimeClassName"), rc_file))
caps = (value("NVIDIA_DRIVER_CAPABILITIES") or "").split(",")
if value("NVIDIA_VISIBLE_DEVICES") != "all" or not ({"utility", "compute"} <= set(caps) or caps == ["all"]):
    fail("NVIDIA_VISIBLE_DEVICES=%s NVIDIA_DRIVER_CAPABILITIES=%s: the agent needs every GPU, NVML (utility) and "
         "the MPS programs (compute)" % (value("NVIDIA_VISIBLE_DEVICES"), value("NVIDIA_DRIVER_CAPABILITIES")))

# Privileges: none by default; privileged with MIG management; CAP_SYS_ADMIN
# only for the toolkit's MIG monitoring.
s = sc(agent)
added = set((s.get("capabilities") or {}).get("add") or [])
if mig:
    if not s.get("privileged") or value("NVIDIA_MIG_CONFIG_DEVICES") != "all":
        fail("--mig-config without privileged: true and NVIDIA_MIG_CONFIG_DEVICES=all: creating MIG instances would fail")
else:
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
for name, path in sorted(host.items()):
    when = HOST_PATHS.get(path)
    if when is None or (when == "mig" and not mig) or (when == "mps" and not mps):
        fail("hostPath %s (volume %s) is not one the agent needs here" % (path, name))
mounts = agent.get("volumeMounts", [])
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
if not given.get("--config") or not from_configmap(given["--config"], "tessera-device-plugin-config"):
    fail("--config %s is not config.yaml of a directory mount of ConfigMap tessera-device-plugin-config" % given.get("--config"))
if mig and not from_configmap(given["--mig-config"], "tessera-mig-config"):
    fail("--mig-config %s is not config.yaml of a directory mount of ConfigMap tessera-mig-config" % given["--mig-config"])
if any(d["kind"] == "ConfigMap" and d["metadata"]["name"] == "tessera-node" for d in docs):
    fail("ConfigMap tessera-node names a MIG config, but the agent follows the Node label nvidia.com/mig.config")

# Pod Security: host paths (and privileged, hostIPC) need the namespace's `privileged` level.
nsdoc = next((d for d in docs if d["kind"] == "Namespace" and d["metadata"]["name"] == ns), None)
if ((nsdoc or {}).get("metadata", {}).get("labels") or {}).get("pod-security.kubernetes.io/enforce") != "privileged":
    fail("namespace %s is not labelled pod-security.kubernetes.io/enforce=privileged: Pod Security would refuse the host paths" % ns)

# Scheduling: every GPU node, before ordinary pods.
tol = spec.get("tolerations", [])
if not any(t.get("key") == "nvidia.com/gpu" and t.get("operator") == "Exists" and t.get("effect") in (None, "NoSchedule") for t in tol) \
   or not any(t.get("key") == "CriticalAddonsOnly" and t.get("operator") == "Exists" for t in tol):
    fail("tolerations lack nvidia.com/gpu (NoSchedule) or CriticalAddonsOnly: %s" % tol)
if spec.get("priorityClassName") != "system-node-critical":
    fail("priorityClassName %s, not system-node-critical" % spec.get("priorityClassName"))
if (spec.get("nodeSelector") or {}).get("nvidia.com/gpu.present") != "true":
    fail("nodeSelector does not pick nvidia.com/gpu.present=true: %s" % spec.get("nodeSelector"))
res = agent.get("resources", {})
if not {"cpu", "memory"} <= set(res.get("requests", {})) or "memory" not in res.get("limits", {}):
    fail("resources need CPU and memory requests and a memory limit: %s" % res)
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
