#!/usr/bin/env python3
"""Checks of the Helm chart's renders, for check_helm.sh.

  render_checks.py compare HELM.yaml KUSTOMIZE.yaml [--drop KIND]... [--helm-only KIND/NAME]...
      The two renders hold the same objects, field by field, after
      normalising: the labels Helm's conventions add (helm.sh/chart,
      app.kubernetes.io/managed-by, instance, version) are dropped, as are
      kustomize's ConfigMap name hash suffixes (in names and references), and
      the lists Kubernetes gives no order (volumes, volumeMounts, env, ports,
      tolerations) are compared by their key. --drop KIND: the kustomize
      render's objects of that kind are not expected. --helm-only KIND/NAME:
      that object of the chart's, which no kustomize render has, is left out
      (the admission check looks at it). Every other difference is printed
      with the object and the field.
  render_checks.py cdi RENDER on SPEC_DIR DRIVER_ROOT STRATEGY_JSON
  render_checks.py cdi RENDER off
      With CDI: the tessera container's command has --cdi-spec-dir SPEC_DIR
      --driver-root DRIVER_ROOT, SPEC_DIR is a hostPath mounted read-write at
      its own path in it (and in no other container), and the device-plugin
      config's flags.plugin.deviceListStrategy is STRATEGY_JSON. Without: none
      of the flags, no CDI directory mounted, no CDI list strategy.
  render_checks.py custom RENDER
      The values check_helm.sh's `custom` case sets reach the objects.
  render_checks.py names RENDER FULLNAME NAME
      fullnameOverride FULLNAME and nameOverride NAME: every object but the
      Namespace and the DeviceClasses is named FULLNAME or FULLNAME-..., every app.kubernetes.io/name
      label is NAME or NAME-..., and every reference between the objects
      resolves: service accounts, ConfigMaps (volumes, configMapKeyRef,
      --mig-configmap), role bindings, selectors (DaemonSets, Deployment,
      Service, ServiceMonitor), the alerting rules' job (the Service's name),
      the admission policy's service account and binding.
  render_checks.py admission RENDER off
  render_checks.py admission RENDER NAME ACTIONS_JSON NAMESPACES_JSON SHARES_JSON CLAIMS
      The share-isolation ValidatingAdmissionPolicy (templates/admission.yaml):
      off, no policy or binding named *-share-isolation. Else exactly one
      policy NAME and its binding: failurePolicy Fail, pods on CREATE and
      UPDATE, a matchCondition that looks for exactly the resource names
      SHARES_JSON (a list; names ending in * as prefixes) and, with CLAIMS
      true, for resource claims; a validation whose message and
      messageExpression name the policy and RuntimeDefault; the binding's
      validationActions ACTIONS_JSON and its namespaceSelector leaving out
      exactly NAMESPACES_JSON.
  render_checks.py objects RENDER KIND/NAME...
      The render holds exactly these objects (KIND/NAME, in any order).
  render_checks.py configs RENDER VALUES.yaml
      The ConfigMaps carry VALUES' devicePluginConfig and migConfig maps.
  render_checks.py namespace RENDER NAMESPACE
      Every namespaced object is in NAMESPACE, and the service account the
      ClusterRoleBinding binds too.
"""
import json
import re
import sys

import yaml

# Kinds without a namespace among what the chart renders.
CLUSTER_SCOPED = ("Namespace", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
                  "ValidatingAdmissionPolicyBinding")

HELM_LABELS = {"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance",
               "app.kubernetes.io/version"}
# kustomize's name suffix: 10 characters of its hash alphabet.
HASH_SUFFIX = re.compile(r"-[2456789bcdfghkmt]{10}$")
# Lists whose order means nothing to Kubernetes, by the field that keys them.
UNORDERED = {"volumes": "name", "volumeMounts": "mountPath", "ports": "name", "env": "name",
             "tolerations": None}
# Lists in order whose items have names: compared in order, then by name.
NAMED = {"containers", "initContainers"}


def load(path):
    return [d for d in yaml.safe_load_all(open(path)) if d]


def ident(d):
    md = d.get("metadata", {})
    ns = md.get("namespace")
    return "%s %s" % (d.get("kind"), (ns + "/" if ns else "") + str(md.get("name")))


def strip_hash(name):
    return HASH_SUFFIX.sub("", name) if isinstance(name, str) else name


def normalise(node, parent=None):
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            v = normalise(v, k)
            if k == "labels" and parent == "metadata" and isinstance(v, dict):
                v = {lk: lv for lk, lv in v.items() if lk not in HELM_LABELS}
                if not v:
                    continue
            out[k] = v
        if parent in ("configMap", "configMapKeyRef", "configMapRef") and "name" in out:
            out["name"] = strip_hash(out["name"])
        return out
    if isinstance(node, list):
        items = [normalise(v) for v in node]
        if parent == "env" and any("$(" in str(i.get("value", "")) for i in items if isinstance(i, dict)):
            return items  # a value naming another variable: order matters
        if parent in UNORDERED and all(isinstance(i, dict) for i in items):
            key = UNORDERED[parent]
            keyed = {}
            for i in items:
                k = "%s=%s" % (key, i.get(key)) if key and key in i else json.dumps(i, sort_keys=True)
                keyed[k] = i
            return {"<unordered>": keyed}
        return items
    return node


def short(v):
    s = json.dumps(v, sort_keys=True)
    return s if len(s) <= 160 else s[:157] + "..."


def diff(h, k, path, out):
    if isinstance(h, dict) and isinstance(k, dict):
        if "<unordered>" in h and "<unordered>" in k:
            h, k = h["<unordered>"], k["<unordered>"]
            for key in sorted(set(h) | set(k)):
                p = "%s[%s]" % (path, key)
                if key not in h:
                    out.append("%s: only in kustomize's: %s" % (p, short(k[key])))
                elif key not in k:
                    out.append("%s: only in helm's: %s" % (p, short(h[key])))
                else:
                    diff(h[key], k[key], p, out)
            return
        for key in sorted(set(h) | set(k), key=str):
            p = "%s.%s" % (path, key) if path else str(key)
            if key not in h:
                out.append("%s: only in kustomize's: %s" % (p, short(k[key])))
            elif key not in k:
                out.append("%s: only in helm's: %s" % (p, short(h[key])))
            else:
                diff(h[key], k[key], p, out)
        return
    if isinstance(h, list) and isinstance(k, list):
        if path.rsplit(".", 1)[-1] in NAMED and all(isinstance(i, dict) and "name" in i for i in h + k):
            hn, kn = [i["name"] for i in h], [i["name"] for i in k]
            if hn != kn:
                out.append("%s: containers %s in helm's, %s in kustomize's" % (path, hn, kn))
            hd, kd = {i["name"]: i for i in h}, {i["name"]: i for i in k}
            for name in [n for n in kn if n in hd]:
                diff(hd[name], kd[name], "%s[name=%s]" % (path, name), out)
            return
        if len(h) != len(k):
            out.append("%s: helm's %s, kustomize's %s" % (path, short(h), short(k)))
            return
        for i, (a, b) in enumerate(zip(h, k)):
            diff(a, b, "%s[%d]" % (path, i), out)
        return
    if h != k or type(h) is not type(k):
        out.append("%s: helm's %s, kustomize's %s" % (path, short(h), short(k)))


def compare(helm_file, kustomize_file, drop, helm_only=()):
    helm = {}
    for d in load(helm_file):
        if "%s/%s" % (d.get("kind"), d.get("metadata", {}).get("name")) in helm_only:
            continue
        d = normalise(d)
        helm[ident(d)] = d
    kust = {}
    for d in load(kustomize_file):
        if d.get("kind") in drop:
            continue
        d = normalise(d)
        if d.get("kind") == "ConfigMap":
            d["metadata"]["name"] = strip_hash(d["metadata"]["name"])
        kust[ident(d)] = d
    problems = []
    for name in sorted(set(helm) | set(kust)):
        if name not in helm:
            problems.append("%s: in kustomize's render, not in helm's" % name)
        elif name not in kust:
            problems.append("%s: in helm's render, not in kustomize's" % name)
        else:
            out = []
            diff(helm[name], kust[name], "", out)
            problems += ["%s: %s" % (name, o) for o in out]
    for p in problems:
        print("  " + p)
    if not problems:
        print("  same %d objects: %s" % (len(helm), ", ".join(sorted(helm))))
    return 1 if problems else 0


def daemonset(docs):
    return next(d for d in docs if d["kind"] == "DaemonSet")


def tessera_container(spec):
    return next(c for c in spec["containers"] if c["name"] in ("device-plugin", "node-agent"))


def device_plugin_config(docs):
    cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "tessera-device-plugin-config")
    return yaml.safe_load(cm["data"]["config.yaml"]) or {}


def arg(cmd, flag):
    return cmd[cmd.index(flag) + 1] if flag in cmd and cmd.index(flag) + 1 < len(cmd) else None


def cdi(render, mode, *rest):
    docs = load(render)
    spec = daemonset(docs)["spec"]["template"]["spec"]
    agent = tessera_container(spec)
    cmd = agent["command"]
    host = {v["name"]: v["hostPath"]["path"] for v in spec.get("volumes", []) if "hostPath" in v}
    strategy = ((device_plugin_config(docs).get("flags") or {}).get("plugin") or {}).get("deviceListStrategy")
    problems = []
    containers = spec.get("initContainers", []) + spec["containers"]
    if mode == "on":
        spec_dir, driver_root, want = rest[0], rest[1], json.loads(rest[2])
        if arg(cmd, "--cdi-spec-dir") != spec_dir:
            problems.append("%s: --cdi-spec-dir is %s, not %s: %s" % (agent["name"], arg(cmd, "--cdi-spec-dir"), spec_dir, cmd))
        if arg(cmd, "--driver-root") != driver_root:
            problems.append("%s: --driver-root is %s, not %s: %s" % (agent["name"], arg(cmd, "--driver-root"), driver_root, cmd))
        vols = [n for n, p in host.items() if p == spec_dir]
        if not vols:
            problems.append("no hostPath volume of %s" % spec_dir)
        for c in containers:
            m = [m for m in c.get("volumeMounts", []) if m["name"] in vols]
            if c is agent:
                if not any(x["mountPath"] == spec_dir and not x.get("readOnly") for x in m):
                    problems.append("%s does not mount hostPath %s read-write at %s: %s" % (c["name"], spec_dir, spec_dir, m))
            elif m:
                problems.append("%s mounts the CDI spec directory too" % c["name"])
        if strategy != want:
            problems.append("the device-plugin config's deviceListStrategy is %s, not %s" % (strategy, want))
    else:
        for c in containers:
            for f in ("--cdi-spec-dir", "--driver-root"):
                if f in c.get("command", []):
                    problems.append("%s has %s without cdi.enabled" % (c["name"], f))
            for m in c.get("volumeMounts", []):
                if "cdi" in m["mountPath"].split("/"):
                    problems.append("%s mounts %s without cdi.enabled" % (c["name"], m["mountPath"]))
        for n, p in host.items():
            if "cdi" in p.split("/"):
                problems.append("hostPath volume %s (%s) without cdi.enabled" % (n, p))
        if any(str(s).startswith("cdi-") for s in (strategy if isinstance(strategy, list) else [strategy])):
            problems.append("deviceListStrategy %s without cdi.enabled" % strategy)
    for p in problems:
        print("  cdi %s: %s" % (mode, p))
    if not problems:
        print("  cdi %s: %s" % (mode, "%s %s %s %s, hostPath mounted read-write, deviceListStrategy %s" % (
            "--cdi-spec-dir", arg(cmd, "--cdi-spec-dir"), "--driver-root", arg(cmd, "--driver-root"), strategy)
            if mode == "on" else "no CDI flags, mounts or list strategy (deviceListStrategy %s)" % (strategy or "unset: envvar")))
    return 1 if problems else 0


def host_driver(render, root, library_dir="/usr/lib/x86_64-linux-gnu", bin_dir="/usr/bin"):
    """driver.source host: no NVIDIA runtime. In every DaemonSet, no
    RuntimeClass; every container but install-quota-library privileged, with
    NVML from the driver root (TESSERA_NVML_LIBRARY) and the driver root, a
    hostPath volume of `root`, mounted read-only at /driver-root;
    tessera-mps-host runs the driver root's MPS control program; the CDI
    specs set NVIDIA_VISIBLE_DEVICES=void (tested in tests/sharing)."""
    docs = load(render)
    problems = []
    nvml = "/driver-root%s/libnvidia-ml.so.1" % library_dir.rstrip("/")
    sets = [d for d in docs if d["kind"] == "DaemonSet"]
    if not sets:
        problems.append("no DaemonSet")
    for ds in sets:
        spec = ds["spec"]["template"]["spec"]
        where = ds["metadata"]["name"]
        if spec.get("runtimeClassName"):
            problems.append("%s: runtimeClassName %s with driver.source host" % (where, spec["runtimeClassName"]))
        host = {v["name"]: v["hostPath"]["path"] for v in spec.get("volumes", []) if "hostPath" in v}
        for c in spec.get("initContainers", []) + spec["containers"]:
            if c["name"] in ("install-quota-library", "wait-for-driver"):
                continue
            name = "%s/%s" % (where, c["name"])
            if (c.get("securityContext") or {}).get("privileged") is not True:
                problems.append("%s is not privileged: without a runtime nothing gives it /dev/nvidia*" % name)
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            if env.get("TESSERA_NVML_LIBRARY") != nvml:
                problems.append("%s: TESSERA_NVML_LIBRARY=%s, not %s" % (name, env.get("TESSERA_NVML_LIBRARY"), nvml))
            if not any(m["mountPath"] == "/driver-root" and m.get("readOnly") and host.get(m["name"]) == root
                       for m in c.get("volumeMounts", [])):
                problems.append("%s does not mount hostPath %s read-only at /driver-root" % (name, root))
            if c["name"] == "mps-host" and arg(c["command"], "--mps-control") != "/driver-root%s/nvidia-cuda-mps-control" % bin_dir.rstrip("/"):
                problems.append("%s runs %s as the MPS control program" % (name, arg(c["command"], "--mps-control")))
    for p in problems:
        print("  host driver: " + p)
    if not problems:
        print("  host driver: no RuntimeClass; %s privileged, NVML %s, %s read-only at /driver-root" % (
            ", ".join("%s/%s" % (ds["metadata"]["name"], c["name"]) for ds in sets
                      for c in ds["spec"]["template"]["spec"].get("initContainers", []) + ds["spec"]["template"]["spec"]["containers"]
                      if c["name"] not in ("install-quota-library", "wait-for-driver")), nvml, root))
    return 1 if problems else 0


def driver_root(render, root, dev_root, wait, library_dir="/usr/lib/x86_64-linux-gnu"):
    """Where a DaemonSet mounts the driver root (cdi.enabled or source host),
    as NVIDIA's plugins run beside the GPU Operator's driver container: the
    hostPath volume `root`, made if missing (DirectoryOrCreate: the driver
    container mounts it later); every mount of it read-only with
    mountPropagation HostToContainer; with `wait` true the first init
    container, wait-for-driver, waits for NVML under the root's library
    directory (and none with false); tessera's commands carry --dev-root
    `dev_root` where it differs from the root (- for none), and a dev root
    other than / is a hostPath mounted read-only at its own path."""
    docs = load(render)
    problems = []
    want_wait = wait == "true"
    seen = 0
    for ds in (d for d in docs if d["kind"] == "DaemonSet"):
        spec = ds["spec"]["template"]["spec"]
        where = ds["metadata"]["name"]
        vols = {v["name"]: v for v in spec.get("volumes", [])}
        rooted = [c for c in spec.get("initContainers", []) + spec["containers"]
                  if any(m["name"] == "driver-root" for m in c.get("volumeMounts", []))]
        if not rooted:
            continue
        seen += 1
        hp = vols.get("driver-root", {}).get("hostPath", {})
        if (hp.get("path"), hp.get("type")) != (root, "DirectoryOrCreate"):
            problems.append("%s: the driver-root volume is %s, not hostPath %s DirectoryOrCreate" % (where, hp, root))
        for c in rooted:
            for m in c["volumeMounts"]:
                if m["name"] in ("driver-root", "dev-root") and (not m.get("readOnly") or m.get("mountPropagation") != "HostToContainer"):
                    problems.append("%s/%s mounts %s %s: not read-only with HostToContainer" % (where, c["name"], m["name"], m))
        inits = spec.get("initContainers", [])
        waits = [c for c in inits if c["name"] == "wait-for-driver"]
        if want_wait:
            lib = "/driver-root%s/libnvidia-ml.so.1" % library_dir.rstrip("/")
            if not inits or inits[0]["name"] != "wait-for-driver":
                problems.append("%s: the first init container is %s, not wait-for-driver" % (where, inits[0]["name"] if inits else "none"))
            elif ("lib=%s\n" % lib) not in inits[0]["command"][-1] or 'until [ -e "$lib" ]' not in inits[0]["command"][-1]:
                problems.append("%s: wait-for-driver does not wait for %s: %s" % (where, lib, inits[0]["command"]))
        elif waits:
            problems.append("%s: wait-for-driver with driver.wait=false" % where)
        for c in spec["containers"]:
            cmd = c.get("command", [])
            if "--driver-root" not in cmd:
                continue
            got = arg(cmd, "--dev-root")
            if got != (None if dev_root == "-" else dev_root):
                problems.append("%s/%s: --dev-root %s, not %s" % (where, c["name"], got, dev_root))
        if dev_root not in ("-", "/"):
            dv = vols.get("dev-root", {}).get("hostPath", {})
            if dv.get("path") != dev_root or not any(m["name"] == "dev-root" and m["mountPath"] == dev_root
                                                     for c in rooted for m in c["volumeMounts"]):
                problems.append("%s: dev root %s is not a hostPath mounted at its own path" % (where, dev_root))
        elif "dev-root" in vols:
            problems.append("%s: a dev-root volume for dev root %s" % (where, dev_root))
    if not seen:
        problems.append("no DaemonSet mounts the driver root")
    for p in problems:
        print("  driver root: " + p)
    if not problems:
        print("  driver root: %s DirectoryOrCreate, HostToContainer in %d DaemonSet(s); %s; --dev-root %s" % (
            root, seen, "wait-for-driver first" if want_wait else "no wait-for-driver", dev_root))
    return 1 if problems else 0


# check_helm.sh's `custom` case's affinity.
CUSTOM_AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "example.com/accelerator", "operator": "In", "values": ["h200"]}]}]}}}


def custom(render):
    """The values of check_helm.sh's `custom` case."""
    docs = load(render)
    problems = []
    def want(what, got, expected):
        if got != expected:
            problems.append("%s: %s, not %s" % (what, short(got), short(expected)))
    for d in docs:
        if d["kind"] in CLUSTER_SCOPED:
            continue
        want(ident(d) + " namespace", d["metadata"].get("namespace"), "gpu-system")
    ns = [d for d in docs if d["kind"] == "Namespace"]
    want("Namespaces", [d["metadata"]["name"] for d in ns], ["gpu-system"])
    if ns:
        want("Namespace label pod-security.kubernetes.io/enforce",
             ns[0]["metadata"].get("labels", {}).get("pod-security.kubernetes.io/enforce"), "privileged")
    crb = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    want("ClusterRoleBinding subjects", crb["subjects"],
         [{"kind": "ServiceAccount", "name": "tessera", "namespace": "gpu-system"}])
    ds = daemonset(docs)
    spec = ds["spec"]["template"]["spec"]
    for c in spec.get("initContainers", []) + spec["containers"]:
        want(c["name"] + " image", c["image"], "registry.example.com/tessera:0.1.0")
        want(c["name"] + " imagePullPolicy", c["imagePullPolicy"], "Always")
        env = {e["name"]: e.get("value") for e in c.get("env", [])}
        if c["name"] != "install-quota-library":
            want(c["name"] + " TESSERA_LOG_LEVEL", env.get("TESSERA_LOG_LEVEL"), "debug")
    want("runtimeClassName", spec.get("runtimeClassName", "<none>"), "<none>")
    want("nodeSelector", spec.get("nodeSelector"), {"example.com/gpu": "yes"})
    want("affinity", spec.get("affinity"), CUSTOM_AFFINITY)
    want("pod securityContext", spec.get("securityContext"), {"runAsUser": 0, "fsGroup": 0})
    want("tolerations", spec.get("tolerations"), [{"operator": "Exists"}])
    want("priorityClassName", spec.get("priorityClassName"), "gpu-critical")
    want("terminationGracePeriodSeconds", spec.get("terminationGracePeriodSeconds"), 90)
    want("imagePullSecrets", spec.get("imagePullSecrets"), [{"name": "registry"}])
    agent = tessera_container(spec)
    want("node-agent securityContext", agent.get("securityContext"), {"privileged": True, "readOnlyRootFilesystem": True})
    want("node-agent resources", agent.get("resources"), {"limits": {"memory": "1Gi"}, "requests": {"cpu": "100m"}})
    want("node-agent command's end", agent["command"][-3:], ["--eviction-timeout", "600", "--no-node-labels"])
    want("pod annotations", ds["spec"]["template"]["metadata"].get("annotations"), {"example.com/team": "gpu"})
    want("updateStrategy", ds["spec"].get("updateStrategy"), {"type": "OnDelete"})
    want("hostNetwork", (spec.get("hostNetwork"), spec.get("dnsPolicy")), (True, "ClusterFirstWithHostNet"))
    want("node-agent extra env", [e for e in agent.get("env", []) if e["name"] == "HTTPS_PROXY"],
         [{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}])
    want("node-agent extra mount", [m for m in agent.get("volumeMounts", []) if m["name"] == "site"],
         [{"name": "site", "mountPath": "/etc/site", "readOnly": True}])
    want("extra volume", [v for v in spec.get("volumes", []) if v["name"] == "site"],
         [{"name": "site", "configMap": {"name": "site"}}])
    for p in problems:
        print("  custom: " + p)
    if not problems:
        print("  custom: image, pull policy and secrets, namespace, runtime class (none), node selector, tolerations, "
              "priority, grace period, affinity, pod and container security contexts, resources, log level, "
              "extra options, pod annotations, update strategy, "
              "host network, extra env, volume and mount as set")
    return 1 if problems else 0


def strings(node):
    """Every string in a parsed YAML document, depth first."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for v in node.values():
            yield from strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from strings(v)


def names(render, fullname, name):
    docs = load(render)
    problems = []
    by = {}
    for d in docs:
        by.setdefault(d["kind"], {})[d["metadata"]["name"]] = d
    def has(kind, obj, why):
        if obj not in by.get(kind, {}):
            problems.append("%s names %s %s, which is not rendered" % (why, kind, obj))
    def ours(value, base):
        return value == base or value.startswith(base + "-")
    for d in docs:
        # The Namespace is namespace.name; DeviceClasses keep NVIDIA's names.
        if d["kind"] not in ("Namespace", "DeviceClass") and not ours(d["metadata"]["name"], fullname):
            problems.append("%s is not named %s or %s-..." % (ident(d), fullname, fullname))
        labels = [d["metadata"].get("labels") or {}]
        if d["kind"] in ("DaemonSet", "Deployment"):
            labels.append(d["spec"]["template"]["metadata"].get("labels") or {})
        for l in labels:
            if "app.kubernetes.io/name" in l and not ours(l["app.kubernetes.io/name"], name):
                problems.append("%s: label app.kubernetes.io/name=%s, not %s or %s-..." % (ident(d), l["app.kubernetes.io/name"], name, name))
    ns_of = lambda d: d["metadata"].get("namespace")
    for d in docs:
        if d["kind"] in ("ClusterRoleBinding", "RoleBinding"):
            has("ClusterRole" if d["roleRef"]["kind"] == "ClusterRole" else "Role", d["roleRef"]["name"], ident(d))
            for s in d.get("subjects", []):
                has("ServiceAccount", s["name"], ident(d))
        if d["kind"] in ("DaemonSet", "Deployment"):
            spec = d["spec"]["template"]["spec"]
            if spec.get("serviceAccountName"):
                has("ServiceAccount", spec["serviceAccountName"], ident(d))
            sel = d["spec"]["selector"]["matchLabels"]
            pod = d["spec"]["template"]["metadata"]["labels"]
            if any(pod.get(k) != v for k, v in sel.items()):
                problems.append("%s: selector %s does not select its pods %s" % (ident(d), sel, pod))
            for v in spec.get("volumes", []):
                if "configMap" in v:
                    has("ConfigMap", v["configMap"]["name"], ident(d) + " volume " + v["name"])
            for c in spec.get("initContainers", []) + spec["containers"]:
                for e in c.get("env", []):
                    ref = (e.get("valueFrom") or {}).get("configMapKeyRef")
                    if ref:
                        has("ConfigMap", ref["name"], "%s %s %s" % (ident(d), c["name"], e["name"]))
                cmd = c.get("command", [])
                if "--mig-configmap" in cmd:
                    has("ConfigMap", cmd[cmd.index("--mig-configmap") + 1], "%s %s --mig-configmap" % (ident(d), c["name"]))
    pods = [(d, d["spec"]["template"]["metadata"]["labels"]) for d in docs if d["kind"] == "DaemonSet"]
    for svc in by.get("Service", {}).values():
        if not any(all(l.get(k) == v for k, v in svc["spec"]["selector"].items()) for _, l in pods):
            problems.append("%s selects no DaemonSet's pods: %s" % (ident(svc), svc["spec"]["selector"]))
        for mon in by.get("ServiceMonitor", {}).values():
            if any((svc["metadata"].get("labels") or {}).get(k) != v for k, v in mon["spec"]["selector"]["matchLabels"].items()):
                problems.append("%s does not select %s" % (ident(mon), ident(svc)))
        for rule in by.get("PrometheusRule", {}).values():
            jobs = {j for s in strings(rule["spec"]) for j in re.findall(r'job="([^"]+)"', s)}
            if jobs != {svc["metadata"]["name"]}:
                problems.append("%s names the jobs %s, not the Service's %s" % (ident(rule), sorted(jobs), svc["metadata"]["name"]))
    namespaces = {ns_of(d) for d in docs if ns_of(d)}
    for pol in by.get("ValidatingAdmissionPolicy", {}).values():
        users = {u for s in strings(pol["spec"]) for u in re.findall(r"system:serviceaccount:([^:\"' ]+):([^\"' ]+)", s)}
        sas = {(ns_of(sa), n) for n, sa in by.get("ServiceAccount", {}).items()}
        if pol["metadata"]["name"].endswith("-share-isolation"):
            # It names no service account; what it refers to is the namespace it leaves out.
            if users:
                problems.append("%s names the service accounts %s" % (ident(pol), sorted(users)))
            if not all(s.startswith(("%s:" % pol["metadata"]["name"], "'%s:" % pol["metadata"]["name"]))
                       for v in pol["spec"]["validations"] for s in (v["message"], v["messageExpression"])):
                problems.append("%s: its messages do not start with its own name" % ident(pol))
        elif pol["metadata"]["name"].endswith("-dra-configs"):
            # It reads claims, whoever writes them: it names no service account.
            if users:
                problems.append("%s names the service accounts %s" % (ident(pol), sorted(users)))
        elif not users or not users <= sas:
            problems.append("%s names the service accounts %s, rendered: %s" % (ident(pol), sorted(users), sorted(sas)))
    for b in by.get("ValidatingAdmissionPolicyBinding", {}).values():
        has("ValidatingAdmissionPolicy", b["spec"]["policyName"], ident(b))
        selector = (b["spec"].get("matchResources") or {}).get("namespaceSelector")
        if selector is not None:
            left_out = {v for e in selector.get("matchExpressions", []) if e["key"] == "kubernetes.io/metadata.name"
                        and e["operator"] == "NotIn" for v in e["values"]}
            if not namespaces <= left_out:
                problems.append("%s holds the chart's own namespace %s to its policy (leaves out %s)" % (
                    ident(b), sorted(namespaces - left_out), sorted(left_out)))
    for p in problems:
        print("  names: " + p)
    if not problems:
        print("  names: %d objects named %s-..., labels %s-..., every reference between them resolves" % (
            sum(1 for d in docs if d["kind"] not in ("Namespace", "DeviceClass")), fullname, name))
    return 1 if problems else 0


def admission(render, name, *rest):
    docs = load(render)
    ours = [d for d in docs if d["kind"] in ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
            and d["metadata"]["name"].endswith("-share-isolation")]
    if name == "off":
        if ours:
            print("  admission: %s rendered, expected none" % ", ".join(ident(d) for d in ours))
            return 1
        print("  admission: no share-isolation policy")
        return 0
    actions, namespaces, shares = (json.loads(a) for a in rest[:3])
    claims = rest[3] == "true"
    problems = []
    def want(what, got, expected):
        if got != expected:
            problems.append("%s: %s, not %s" % (what, json.dumps(got), json.dumps(expected)))
    want("objects", sorted("%s/%s" % (d["kind"], d["metadata"]["name"]) for d in ours),
         ["ValidatingAdmissionPolicy/" + name, "ValidatingAdmissionPolicyBinding/" + name])
    pol = next((d for d in ours if d["kind"] == "ValidatingAdmissionPolicy"), None)
    binding = next((d for d in ours if d["kind"] == "ValidatingAdmissionPolicyBinding"), None)
    if pol is None or binding is None:
        for p in problems:
            print("  admission: " + p)
        return 1
    spec = pol["spec"]
    want("failurePolicy", spec.get("failurePolicy"), "Fail")
    want("resourceRules", spec["matchConstraints"]["resourceRules"],
         [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}])
    holds = next((m["expression"] for m in spec.get("matchConditions", []) if m["name"] == "holds-a-tessera-share"), "")
    names = re.findall(r"r in \[([^]]*)\]", holds)
    got = sorted(set(n.strip(" '") for n in names[0].split(",")) if names else set())
    got += sorted(set(p + "*" for p in re.findall(r"r\.startsWith\('([^']*)'\)", holds)))
    want("the share names its matchCondition looks for", sorted(got), sorted(shares))
    want("its matchCondition looks at resource claims", "spec.resourceClaims" in holds, claims)
    for v in spec["validations"]:
        for field in ("message", "messageExpression"):
            if not (name + ":" in v.get(field, "") and "RuntimeDefault" in v.get(field, "")
                    and "allowPrivilegeEscalation: false" in v.get(field, "")):
                problems.append("validation %s does not name %s, RuntimeDefault and allowPrivilegeEscalation: false: %s"
                                % (field, name, short(v.get(field))))
    want("binding's policyName", binding["spec"]["policyName"], name)
    want("binding's validationActions", binding["spec"]["validationActions"], actions)
    exprs = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    want("binding's namespaceSelector", exprs,
         [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": namespaces}])
    for p in problems:
        print("  admission: " + p)
    if not problems:
        print("  admission: %s (failurePolicy Fail, pods CREATE/UPDATE) for %s%s; binding %s, every namespace but %s" % (
            name, ", ".join(shares) or "no resource", " and resource claims" if claims else "",
            json.dumps(actions), ", ".join(namespaces)))
    return 1 if problems else 0


def objects(render, *expected):
    got = sorted("%s/%s" % (d["kind"], d["metadata"]["name"]) for d in load(render))
    if got != sorted(expected):
        print("  objects: %s, not %s" % (got, sorted(expected)))
        return 1
    print("  objects: %s" % ", ".join(got))
    return 0


def namespace(render, ns):
    docs = load(render)
    problems = ["%s: not in namespace %s" % (ident(d), ns) for d in docs
                if d["kind"] not in CLUSTER_SCOPED
                and d["metadata"].get("namespace") != ns]
    for b in (d for d in docs if d["kind"] == "ClusterRoleBinding"):
        if [s.get("namespace") for s in b["subjects"]] != [ns]:
            problems.append("%s binds %s" % (ident(b), b["subjects"]))
    for p in problems:
        print("  namespace: " + p)
    if not problems:
        print("  namespace: every namespaced object, and the bound service account, in %s" % ns)
    return 1 if problems else 0


def configs(render, values_file):
    docs = load(render)
    values = yaml.safe_load(open(values_file))
    problems = []
    for key, name in (("devicePluginConfig", "tessera-device-plugin-config"), ("migConfig", "tessera-mig-config")):
        cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == name)
        if yaml.safe_load(cm["data"]["config.yaml"]) != values[key]:
            problems.append("ConfigMap %s: %s, not the values' %s %s" % (name, short(cm["data"]["config.yaml"]), key,
                                                                      short(values[key])))
    for p in problems:
        print("  configs: " + p)
    if not problems:
        print("  configs: the values' devicePluginConfig and migConfig maps, as YAML")
    return 1 if problems else 0


def device_plugin_configs(render, configmap, default, strategy):
    """devicePluginConfigs: the node agent serves the user's ConfigMap of configs, mounted where
    --device-plugin-configs reads it, with its default and list strategy ("-": none), and the chart
    renders no device-plugin config of its own."""
    docs = load(render)
    spec = daemonset(docs)["spec"]["template"]["spec"]
    agent = tessera_container(spec)
    cmd = agent["command"]
    problems = []
    if agent["name"] != "node-agent":
        problems.append("the tessera container is %s, not node-agent" % agent["name"])
    if "--config-file" in cmd:
        problems.append("--config-file beside --device-plugin-configs: %s" % cmd)
    folder = arg(cmd, "--device-plugin-configs")
    mounts = {m["mountPath"]: m["name"] for m in agent.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    volume = volumes.get(mounts.get(folder, ""), {})
    if (volume.get("configMap") or {}).get("name") != configmap:
        problems.append("--device-plugin-configs %s is not ConfigMap %s mounted: %s" % (folder, configmap, volume or mounts))
    for flag, want in (("--device-plugin-default-config", default), ("--device-list-strategy", strategy)):
        if arg(cmd, flag) != (None if want == "-" else want):
            problems.append("%s is %s, not %s: %s" % (flag, arg(cmd, flag), want, cmd))
    own = [d["metadata"]["name"] for d in docs if d["kind"] == "ConfigMap" and "device-plugin" in d["metadata"]["name"]]
    if own:
        problems.append("the chart renders a device-plugin ConfigMap of its own too: %s" % own)
    for p in problems:
        print("  device-plugin configs: " + p)
    if not problems:
        print("  device-plugin configs: ConfigMap %s at %s, default %s, list strategy %s" % (configmap, folder, default, strategy))
    return 1 if problems else 0


def fleet_dra_drivers(render, *expected):
    """The fleet controller's --dra-driver values, in order (none: no such flag)."""
    docs = load(render)
    fleet = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("fleet"))
    cmd = next(c for c in fleet["spec"]["template"]["spec"]["containers"] if c["name"] == "fleet")["command"]
    got = tuple(cmd[i + 1] for i, a in enumerate(cmd[:-1]) if a == "--dra-driver")
    if got != expected:
        print("  fleet: --dra-driver %s, expected %s: %s" % (list(got), list(expected), cmd))
        return 1
    print("  fleet: --dra-driver %s" % (list(got) or "not passed"))
    return 0


def main(argv):
    cmd, args = argv[1], argv[2:]
    if cmd == "compare":
        drop = [args[i + 1] for i, a in enumerate(args) if a == "--drop"]
        helm_only = [args[i + 1] for i, a in enumerate(args) if a == "--helm-only"]
        return compare(args[0], args[1], drop, helm_only)
    if cmd == "admission":
        return admission(*args)
    if cmd == "cdi":
        return cdi(*args)
    if cmd == "custom":
        return custom(*args)
    if cmd == "driver-root":
        return driver_root(*args)
    if cmd == "host-driver":
        return host_driver(*args)
    if cmd == "names":
        return names(*argv[2:5])
    if cmd == "objects":
        return objects(*args)
    if cmd == "configs":
        return configs(*args)
    if cmd == "namespace":
        return namespace(*args)
    if cmd == "device-plugin-configs":
        return device_plugin_configs(*args)
    if cmd == "fleet-dra-drivers":
        return fleet_dra_drivers(*args)
    raise SystemExit("unknown check " + cmd)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
