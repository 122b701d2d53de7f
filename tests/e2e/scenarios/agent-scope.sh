# What the ValidatingAdmissionPolicy of deploy/overlays/gpu-node/node-scope.yaml
# holds the node agent to, tried with the agent's own service-account token
# (taken from its pod on tessera-node-1, so it names that node): it may set a
# label under nvidia.com/ on its own Node, and is refused on the other Node,
# for a label outside nvidia.com/, and for a change of its Node's spec (a
# taint). Evictions cannot be limited this way (docs/install.md).
as_agent() {  # as_agent KUBECTL-ARGS...: kubectl with the agent's token instead of the admin's
  "$PEERS/kubectl" --kubeconfig "$E2E_STATE/kubeconfig" --request-timeout=20s --token "$agent_token" "$@"
}
expect_refused() {  # expect_refused WHY KUBECTL-ARGS...
  local why=$1 out
  shift
  if out=$(as_agent "$@" 2>&1); then fail "the agent's token was allowed to: $*"; fi
  grep -qF "$why" <<<"$out" || fail "the agent's '$*' was refused, but not by the policy: $out"
}

scenario_agent-scope() {
  local agent_token who
  agent_token=$(kc -n tessera exec "$(tessera_pod)" -c node-agent -- cat /var/run/secrets/kubernetes.io/serviceaccount/token)
  [[ -n $agent_token ]] || fail "cannot read the agent's service-account token"
  who=$(as_agent auth whoami -o json)
  [[ $(jq -r '.status.userInfo.extra["authentication.kubernetes.io/node-name"][0]' <<<"$who") == "$NODE" ]] ||
    fail "the agent's token does not name its node $NODE: $(jq -c .status.userInfo <<<"$who")"
  echo "  the agent's token: $(jq -r .status.userInfo.username <<<"$who"), node $NODE"
  as_agent label node "$NODE" --overwrite nvidia.com/e2e-scope=own >/dev/null ||
    fail "the agent may not set a nvidia.com/ label on its own Node"
  as_agent label node "$NODE" nvidia.com/e2e-scope- >/dev/null
  echo "  its own Node, a nvidia.com/ label: allowed"
  expect_refused "may change only the Node its own pod runs on" label node "$NODE2" --overwrite nvidia.com/e2e-scope=other
  echo "  the other Node ($NODE2): refused"
  expect_refused "may change only labels under nvidia.com/" label node "$NODE" --overwrite e2e-scope=other
  echo "  its own Node, a label outside nvidia.com/: refused"
  expect_refused "not its spec or annotations" taint node "$NODE" e2e-scope=x:NoSchedule
  echo "  its own Node's spec (a taint): refused"
  [[ -z $(node_label e2e-scope) && -z $(node_label nvidia.com/e2e-scope "$NODE2") ]] || fail "a refused change is on a Node"
  [[ $(kc get node "$NODE" -o jsonpath='{.spec.taints}') != *e2e-scope* ]] || fail "the refused taint is on $NODE"
}
