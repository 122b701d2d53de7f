# tessera fleet run against the real cluster: tessera node as the chart
# deploys it (its layout annotation published by default) on
# tessera-node-1's two A100-80GB, each cut to one 1g.20gb. A Deployment's
# pod that a PodDisruptionBudget allows no disruption holds one, a bare pod
# the other, and a pod of a higher PriorityClass waits for a 7g.80gb, which
# fits only once a pod goes. Neither may go (the eviction API would refuse
# the one, nothing recreates the other): the controller, the chart's
# Deployment tessera-fleet (fleet.enabled) in the cluster with its own
# service account and roles, polling every second, changes nothing and says
# why. The bare pod replaced by another Deployment's, the plan evicts that
# one, never the guarded one (the waiting pod's priority is higher:
# preemption, though nothing serves the evicted pod again). Nothing changes
# before the plan's hash is approved; an approval after a node label changed
# is refused as stale and planned again; after approval the waiting pod
# runs, only the pod the plan named was evicted (the guarded one keeps its
# UID), and its replacement waits, as the plan said.
fleet_pods() {  # "name uid" of the app=e2e-fleet pods, sorted
  kc get pods -l app=e2e-fleet -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.uid}{"\n"}{end}' | sort
}
role_pod() {  # "name uid phase" of the app=e2e-fleet pod of role $1
  kc get pods -l "app=e2e-fleet,role=$1" -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.uid} {.status.phase}{"\n"}{end}'
}
replacement_waits() {  # $1: role_pod's lines: a pod other than the evicted $small Pending, none Running
  local name uid phase pending=0
  while read -r name uid phase; do
    [[ -z $name || $name == "$small" ]] && continue
    [[ $phase == Running ]] && return 1
    [[ $phase == Pending ]] && pending=1
  done <<<"$1"
  ((pending))
}
plan_field() { kc -n tessera get configmap tessera-fleet-plan -o jsonpath="{.data.$1}" 2>/dev/null; }
fleet_events() { kc -n tessera get events --field-selector involvedObject.name=tessera-fleet-plan \
                   --sort-by=.metadata.creationTimestamp -o jsonpath='{range .items[*]}{.reason}{"\n"}{end}'; }
layout_names_pods() {  # the layout annotation names each pod "$@" (of namespace default)
  local ann name
  ann=$(kc get node "$NODE" -o jsonpath='{.metadata.annotations.tessera\.dev/mig-layout}')
  [[ -n $ann ]] || return 1
  for name in "$@"; do
    jq -e --arg p "default/$name" '[.gpus[].instances[]?.pod] | index($p) != null' <<<"$ann" >/dev/null || return 1
  done
}
fleet_deployment() {  # a one-pod Deployment $1 of app=e2e-fleet, role $2, on a 1g.20gb
  cat <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: e2e-fleet, role: $2}}
  template:
    metadata: {labels: {app: e2e-fleet, role: $2}}
    spec:
      nodeSelector: {kubernetes.io/hostname: $NODE}
      automountServiceAccountToken: false
      terminationGracePeriodSeconds: 1
      containers:
      - name: cuda
        image: $E2E_SHELL_IMAGE
        imagePullPolicy: Never
        command: ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"]
        resources: {limits: {nvidia.com/mig-1g.20gb: 1}}
EOF
}
big_pod() {  # fleet-big: a 7g.80gb at priority 1000
  pod fleet-big nvidia.com/mig-7g.80gb 1 | sed -e 's/app: e2e-consumer/app: e2e-fleet-big/' \
    -e '0,/^spec:/s//spec:\n  priorityClassName: e2e-fleet-high/'
}
fleet_cleanup() {
  kc delete deployment fleet-guarded fleet-small --ignore-not-found --wait=false >/dev/null
  kc delete pod fleet-big fleet-bare --ignore-not-found --wait=false >/dev/null
  kc delete pdb fleet-guard --ignore-not-found >/dev/null
  kc delete priorityclass e2e-fleet-high --ignore-not-found >/dev/null
  wait_for 60 "the fleet pods to go" eval '[[ -z $(kc get pods -l "app in (e2e-fleet, e2e-fleet-big, e2e-fleet-bare)" -o name) ]]'
}

scenario_fleet() {
  local cfg=$E2E_STATE/fleet-mig-config.yaml
  cat >"$cfg" <<'YAML'
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  fleet-start:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.20gb": 1}
  # The two layouts a plan for one 7g.80gb can name (which GPU depends on where the pods are).
  fleet-7g-on-0:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"7g.80gb": 1}
    - devices: [1]
      mig-enabled: true
      mig-devices: {"1g.20gb": 1}
  fleet-7g-on-1:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"1g.20gb": 1}
    - devices: [1]
      mig-enabled: true
      mig-devices: {"7g.80gb": 1}
YAML
  fleet_cleanup
  kc -n tessera delete configmap tessera-fleet-plan --ignore-not-found >/dev/null
  relabel fleet-start
  AGENT_MIG_CONFIGS=$cfg deploy_agent "" -- --set fleet.enabled=true --set fleet.pendingAfter=3 \
    --set fleet.maxWaveEvictions=5 --set-json 'fleet.extraArgs=["--poll","1","--config-propagation","45","--wave-timeout","240"]'
  wait_for 120 "the agent to apply fleet-start (mig.config.state=success)" state_is success
  expect_resource 60 nvidia.com/mig-1g.20gb 2
  kc apply -f - >/dev/null <<EOF
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: e2e-fleet-high}
value: 1000
preemptionPolicy: Never
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: fleet-guard, namespace: default}
spec: {minAvailable: 1, selector: {matchLabels: {role: guarded}}}
EOF
  fleet_deployment fleet-guarded guarded | kc apply -f - >/dev/null
  wait_for 120 "the guarded pod Running" eval '[[ $(role_pod guarded) == *" Running" ]]'
  pod fleet-bare nvidia.com/mig-1g.20gb 1 | sed 's/app: e2e-consumer/app: e2e-fleet-bare/' | kc apply -f - >/dev/null
  wait_for 60 "fleet-bare Running" eval '[[ $(kc get pod fleet-bare -o jsonpath="{.status.phase}") == Running ]]'
  local guarded
  guarded=$(role_pod guarded)
  wait_for 60 "the Node annotation tessera.dev/mig-layout to name both pods" layout_names_pods "${guarded%% *}" fleet-bare
  big_pod | kc apply -f - >/dev/null
  [[ $(kc get pod fleet-big -o jsonpath='{.spec.priority}') == 1000 ]] || fail "fleet-big's priority is not 1000"
  wait_for 30 "fleet-big to wait (no 7g.80gb anywhere)" eval '[[ $(kc get pod fleet-big -o jsonpath="{.status.conditions[?(@.type==\"PodScheduled\")].reason}") == Unschedulable ]]'
  wait_for 60 "the fleet controller Ready" eval '[[ $(kc -n tessera get pods -l app.kubernetes.io/name=tessera-fleet \
    -o jsonpath="{.items[0].status.conditions[?(@.type==\"Ready\")].status}") == True ]]'
  local metrics_at
  metrics_at=$(kc -n tessera get pods -l app.kubernetes.io/name=tessera-fleet -o jsonpath='{.items[0].status.podIP}'):9402
  # Neither running pod may go: nothing to change, and the plan says why.
  wait_for 60 "tessera fleet run to plan with fleet-big waiting" eval '[[ $(plan_field status) == "nothing to change"* ]] &&
    jq -e ".unserved | index(\"default/fleet-big\")" <<<"$(plan_field "plan\\.json")" >/dev/null'
  local plan warnings
  plan=$(plan_field 'plan\.json')
  warnings=$(jq -r '.warnings[]' <<<"$plan")
  [[ $warnings == *"Pod default/fleet-bare on $NODE has no owner (nothing recreates it after an eviction)"* ]] ||
    fail "the plan does not say the bare pod is kept: $warnings"
  [[ $warnings == *"Pod default/${guarded%% *} on $NODE its PodDisruptionBudget default/fleet-guard allows no more disruptions"* ]] ||
    fail "the plan does not say the guarded pod is kept: $warnings"
  [[ $(jq -r .objective.evicted <<<"$plan") == 0 ]] || fail "a plan that evicts: $(jq -c .objective <<<"$plan")"
  [[ $(node_label nvidia.com/mig.config) == fleet-start ]] || fail "the node was relabelled"
  echo "  a bare pod and a guarded one: '$(plan_field status | cut -c1-40)...', fleet-big unserved, nothing evicted"
  # The bare pod's place taken by a Deployment's pod: that one may go. (fleet-big goes meanwhile
  # and comes back once fleet-small runs, so no plan is made on the cluster in between.)
  kc delete pod fleet-big fleet-bare --wait=true >/dev/null
  fleet_deployment fleet-small free | kc apply -f - >/dev/null
  wait_for 120 "the fleet-small pod Running" eval '[[ $(role_pod free) == *" Running" ]]'
  local before small
  small=$(role_pod free)
  small=${small%% *}
  wait_for 60 "the Node annotation tessera.dev/mig-layout to name both pods" layout_names_pods "${guarded%% *}" "$small"
  before=$(fleet_pods)
  big_pod | kc apply -f - >/dev/null
  wait_for 60 "tessera fleet run to propose a plan in ConfigMap tessera-fleet-plan" eval '[[ $(plan_field status) == proposed* ]]'
  local hash evict config
  hash=$(plan_field hash)
  plan=$(plan_field 'plan\.json')
  [[ $(jq -r .status <<<"$plan") == optimal ]] || fail "the plan is not optimal: $(jq -c '{status, objective, gap}' <<<"$plan")"
  [[ $(jq -c .objective <<<"$plan") == '{"changed_gpus":1,"evicted":1,"gpus_used":2,"unserved":1,"waiting":[{"pending_or_evicted":0,"priority":1000},{"pending_or_evicted":1,"priority":0}]}' ]] ||
    fail "the plan's objective: $(jq -c .objective <<<"$plan")"
  [[ $(jq -r '.placements["default/fleet-big"]' <<<"$plan") == "$NODE" ]] || fail "the plan does not place fleet-big on $NODE"
  [[ $(jq -c .rollout <<<"$plan") == "[[\"$NODE\"]]" ]] || fail "rollout $(jq -c .rollout <<<"$plan"), expected [[\"$NODE\"]]"
  config=$(jq -r --arg n "$NODE" '.nodes[] | select(.name == $n) | .["mig.config"]' <<<"$plan")
  evict=$(jq -r --arg n "$NODE" '.nodes[] | select(.name == $n) | .evict[]' <<<"$plan" | sed 's|^default/||' | sort)
  [[ $evict == "$small" ]] || fail "the plan evicts [${evict//$'\n'/ }], not the unguarded $small"
  echo "  proposed plan $hash: $(jq -c .objective <<<"$plan"), $NODE -> $config, evict [$evict]"
  plan_field summary | sed -n '1,10p' | sed 's/^/    /'
  # Nothing changes before approval.
  sleep 8
  [[ $(node_label nvidia.com/mig.config) == fleet-start ]] || fail "the node was relabelled before approval"
  state_is success || fail "mig.config.state changed before approval"
  [[ $(fleet_pods) == "$before" ]] || fail "pods changed before approval"
  [[ $(kc get pod fleet-big -o jsonpath='{.status.phase}') == Pending ]] || fail "fleet-big runs before approval"
  curl -sf "http://$metrics_at/metrics" | grep -c '^tessera_fleet_phase{phase="proposed"} 1' >/dev/null ||
    fail "the controller's metrics do not say proposed"
  echo "  8 s later, not approved: label, state, pods as they were; metrics phase=proposed"
  # A fact the plan stood on changes after it was made (a label on the node): the approval of
  # the old hash is refused as stale, nothing changes, and a new plan is proposed.
  kc label node "$NODE" --overwrite e2e-fleet-stale=1 >/dev/null
  kc -n tessera annotate configmap tessera-fleet-plan --overwrite "tessera.dev/approve=$hash" >/dev/null
  wait_for 30 "the stale approval refused and a new plan proposed" \
    eval '[[ -n $(plan_field hash) && $(plan_field hash) != "$hash" ]]'
  [[ $(fleet_events) == *FleetPlanStale* ]] || fail "no Event FleetPlanStale about tessera-fleet-plan"
  [[ $(node_label nvidia.com/mig.config) == fleet-start ]] || fail "the stale plan relabelled the node"
  [[ $(fleet_pods) == "$before" ]] || fail "pods changed on a stale approval"
  echo "  a node label changed after plan $hash: its approval refused (FleetPlanStale), plan $(plan_field hash) proposed"
  hash=$(plan_field hash)
  plan=$(plan_field 'plan\.json')
  config=$(jq -r --arg n "$NODE" '.nodes[] | select(.name == $n) | .["mig.config"]' <<<"$plan")
  evict=$(jq -r --arg n "$NODE" '.nodes[] | select(.name == $n) | .evict[]' <<<"$plan" | sed 's|^default/||' | sort)
  [[ $evict == "$small" ]] || fail "the new plan evicts [${evict//$'\n'/ }], not the unguarded $small"
  kc -n tessera annotate configmap tessera-fleet-plan --overwrite "tessera.dev/approve=$hash" >/dev/null
  wait_for 60 "the node relabelled to $config" eval '[[ $(node_label nvidia.com/mig.config) == "$config" ]]'
  wait_for 180 "mig.config.state=success for $config" state_is success
  wait_for 120 "fleet-big Running" eval '[[ $(kc get pod fleet-big -o jsonpath="{.status.phase}") == Running ]]'
  wait_for 60 "the plan applied (status done)" eval '[[ $(plan_field status) == done:* ]]'
  # Only the pod the plan named was evicted: the guarded one keeps its UID; the evicted one's
  # replacement waits (nothing serves it, as the plan said).
  [[ $(role_pod guarded) == "$guarded" ]] || fail "the guarded pod changed: '$(role_pod guarded)', was '$guarded'"
  # A replacement the scheduler bound while the node's allocatable still counted the device the
  # change took away is refused by the kubelet (UnexpectedAdmissionError, Failed), as it refuses any
  # device plugin's: the ReplicaSet's next one waits. None may run.
  local free deadline=$((SECONDS + 60))
  until free=$(role_pod free) && replacement_waits "$free"; do
    ((SECONDS < deadline)) || fail "timed out after 60s waiting for the evicted pod's replacement to wait; role=free pods: $(tr '\n' ';' <<<"$free")"
    sleep 0.5
  done
  local events reason
  events=$(fleet_events | tr '\n' ' ')
  for reason in FleetPlanProposed FleetPlanStale FleetPlanApproved FleetPlanApplied; do
    [[ $events == *"$reason"* ]] || fail "no Event $reason about tessera-fleet-plan (Events: '$events')"
  done
  [[ $(plan_field status) == "done: plan $hash applied in 1 wave(s)" ]] || fail "the rollout ended '$(plan_field status)'"
  echo "  approved: $NODE -> $config (success), fleet-big Running; evicted [$small] as planned, kept the guarded ${guarded%% *}"
  echo "  Events: $events; status: $(plan_field status)"
  # The controller kept the cluster by list-and-watch: pods listed once (again only after a 410 or
  # a failed watch), not at each of its one-second polls.
  local log lists
  log=$(kc -n tessera logs deploy/tessera-fleet 2>&1)
  lists=$(grep -c '/api/v1/pods: listed .* watching from there' <<<"$log" || true)
  ((lists >= 1 && lists <= 2)) || fail "the fleet controller listed pods $lists times (want once, by list-and-watch); its log: $(head -c 800 <<<"$log")"
  echo "  the controller listed pods $lists time(s) and followed them by watch over the scenario"
  kc label node "$NODE" e2e-fleet-stale- >/dev/null
  fleet_cleanup
}
