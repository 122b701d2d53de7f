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
# Usage: check_manifests.sh TESSERA_BIN DEPLOY_DIR
set -euo pipefail
bin=$1
deploy=$2
command -v kubectl >/dev/null || { echo "kubectl not found: skipping"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
for overlay in base overlays/mig-mixed overlays/time-slicing overlays/mps overlays/metrics; do
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
plugin = next(c for c in spec["containers"] if c["name"] == "device-plugin")
cmd = plugin["command"]
if "--no-quota-library" in cmd:
    raise SystemExit(0)
# Flags the plugin is given, else its defaults as its --help prints them.
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
    fail("the device-plugin container does not mount hostPath %s read-write at the same path" % ledger_root)
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
plugin = next(c for c in spec["containers"] if c["name"] == "device-plugin")
mounts = plugin.get("volumeMounts", [])
if not any(host.get(m["name"]) == root and m["mountPath"] == root and not m.get("readOnly") for m in mounts):
    fail("the device-plugin container does not mount hostPath %s (mpsRoot) read-write at the same path" % root)
if not any(host.get(m["name"]) == root + "/shm" and m["mountPath"] == "/dev/shm" and not m.get("readOnly") for m in mounts):
    fail("the device-plugin container does not mount hostPath %s/shm at /dev/shm, as Allocate does for clients" % root)
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
extra = [d["kind"] + "/" + d["metadata"]["name"] for d in docs if d["kind"] in ("Service", "ServiceMonitor", "PrometheusRule")]
if exporter is None:
    if extra:
        fail("no exporter container, yet " + ", ".join(extra))
    raise SystemExit(0)
cmd = exporter["command"]
if cmd[:2] != ["tessera", "exporter"]:
    fail("the exporter container runs %s, not tessera exporter" % cmd[:2])
help_text = subprocess.run([binary, "exporter", "--help"], capture_output=True, text=True).stdout
for f in [a for a in cmd[2:] if a.startswith("--")]:
    if not re.search(r"(^|[ ,])" + re.escape(f) + r"[ =\n]", help_text, re.M):
        fail("tessera exporter has no option " + f)
def flag(name):
    if name not in cmd:
        fail("the exporter is not given " + name)
    return cmd[cmd.index(name) + 1]
host, port = flag("--listen").rsplit(":", 1)
if host not in ("0.0.0.0", ""):
    fail("--listen %s: the Service reaches the pod's address, not %s" % (flag("--listen"), host))
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
if req is None or lim is None or not 20 <= req <= lim <= 128:
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
