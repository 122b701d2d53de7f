"""Shared checks of the node agents' pods (tessera node, tessera dra), for
check_manifests.sh. check_node_pod: the namespace at Pod Security's
privileged level (host paths, privileged containers and hostIPC need it),
tolerations that reach every GPU node, system-node-critical priority, a
nodeSelector or required node affinity picking only GPU nodes, and CPU and memory requests with a memory
limit on the container. parse_flags: a container's tessera command line read
against the options the command has.
"""


def picks_gpu_nodes(spec):
    """Whether every node the pod may run on is labelled nvidia.com/gpu.present=true, or
    node-feature-discovery's NVIDIA PCI label (vendor 10de): the nodeSelector, or each term
    of the required node affinity, asks for one of them."""
    gpu = {("nvidia.com/gpu.present", "true")} | {
        (f"feature.node.kubernetes.io/pci-{label}.present", "true") for label in ("0302_10de", "0300_10de", "10de")}
    if any((k, v) in gpu for k, v in (spec.get("nodeSelector") or {}).items()):
        return True
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
    def term_picks(term):
        return any(e.get("operator") == "In" and e.get("values") == ["true"] and (e.get("key"), "true") in gpu
                   for e in term.get("matchExpressions") or [])
    return bool(terms) and all(term_picks(t) for t in terms)


def node_allows(spec, labels):
    """Whether a node with `labels` meets the pod's required node affinity (terms ORed,
    expressions ANDed; only In and Exists, which the manifests use)."""
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
    def holds(e):
        if e.get("operator") == "Exists":
            return e.get("key") in labels
        return e.get("operator") == "In" and labels.get(e.get("key")) in (e.get("values") or [])
    return not terms or any(all(holds(e) for e in t.get("matchExpressions") or []) for t in terms)


def check_node_pod(docs, ns, spec, container, fail):
    nsdoc = next((d for d in docs if d["kind"] == "Namespace" and d["metadata"]["name"] == ns), None)
    if ((nsdoc or {}).get("metadata", {}).get("labels") or {}).get("pod-security.kubernetes.io/enforce") != "privileged":
        fail("namespace %s is not labelled pod-security.kubernetes.io/enforce=privileged: "
             "Pod Security would refuse the pod's host paths" % ns)
    tol = spec.get("tolerations", [])
    if not any(t.get("key") == "nvidia.com/gpu" and t.get("operator") == "Exists"
               and t.get("effect") in (None, "NoSchedule") for t in tol) \
       or not any(t.get("key") == "CriticalAddonsOnly" and t.get("operator") == "Exists" for t in tol):
        fail("tolerations lack nvidia.com/gpu (NoSchedule) or CriticalAddonsOnly: %s" % tol)
    if spec.get("priorityClassName") != "system-node-critical":
        fail("priorityClassName %s, not system-node-critical" % spec.get("priorityClassName"))
    if not picks_gpu_nodes(spec):
        fail("neither the nodeSelector nor a required node affinity picks nvidia.com/gpu.present=true: %s %s" %
             (spec.get("nodeSelector"), spec.get("affinity")))
    # A node as stock node-feature-discovery labels it (class and vendor:
    # 0302 for a 3D controller such as an A100 or H100, 0300 for a display
    # controller), with nothing else: the pod must be allowed there.
    if not spec.get("nodeSelector"):
        for label in ("0302_10de", "0300_10de"):
            if not node_allows(spec, {f"feature.node.kubernetes.io/pci-{label}.present": "true"}):
                fail("a GPU node that node-feature-discovery labels pci-%s.present=true (and no more) is not "
                     "allowed by the required node affinity: %s" % (label, spec.get("affinity")))
    res = container.get("resources", {})
    if not {"cpu", "memory"} <= set(res.get("requests", {})) or "memory" not in res.get("limits", {}):
        fail("resources need CPU and memory requests and a memory limit: %s" % res)


def parse_flags(cmd, flags, fail, unknown):
    """The options of `cmd` (tessera and its subcommand first) as {flag: its first value, or True}.

    `flags` maps each option the command has to what it takes: nothing (a
    switch, falsy), one value, or "+" (one or more). An option not in
    `flags` fails with unknown(flag); an option that needs a value and is
    given none fails too.
    """
    given, i = {}, 2
    while i < len(cmd):
        f = cmd[i]
        if f not in flags:
            fail(unknown(f))
        values = []
        i += 1
        while i < len(cmd) and not cmd[i].startswith("-") and (flags[f] == "+" or (flags[f] and not values)):
            values.append(cmd[i])
            i += 1
        if flags[f] and not values:
            fail("%s is given no value" % f)
        given[f] = values[0] if values else True
    return given
