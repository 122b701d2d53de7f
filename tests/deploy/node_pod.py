"""What the pod of every node agent (tessera node, tessera dra) needs, for
check_manifests.sh: its namespace at Pod Security's privileged level (host
paths, privileged containers and hostIPC need it), tolerations that reach
every GPU node, system-node-critical priority, a nodeSelector picking the
GPU nodes, and CPU and memory requests with a memory limit on its container.
"""


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
    if (spec.get("nodeSelector") or {}).get("nvidia.com/gpu.present") != "true":
        fail("nodeSelector does not pick nvidia.com/gpu.present=true: %s" % spec.get("nodeSelector"))
    res = container.get("resources", {})
    if not {"cpu", "memory"} <= set(res.get("requests", {})) or "memory" not in res.get("limits", {}):
        fail("resources need CPU and memory requests and a memory limit: %s" % res)
