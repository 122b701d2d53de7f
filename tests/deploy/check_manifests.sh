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
# NVIDIA container toolkit; no other overlay gets hostIPC.
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
