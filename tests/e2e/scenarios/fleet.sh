# tessera fleet run against the real cluster: tessera node as the chart
# deploys it (its layout annotation published by default) on
# tessera-node-1's two A100-80GB, each cut in four
# 1g.20gb; two running pods of a Deployment on them and a pod waiting for a
# 7g.80gb, which fits only after a re-plan. The controller, the chart's
# Deployment tessera-fleet (fleet.enabled) in the cluster with its own service
# account and roles, polling every second, proposes a plan in ConfigMap
# tessera-fleet-plan; nothing changes before the plan's hash is approved; an
# approval after a node label changed is refused as stale and planned again;
# after approval the waiting pod runs, only the pods the plan named were
# evicted (the others keep their UIDs), and the waves went in order.
fleet_pods() {  # "name uid" of the fleet-small pods, sorted
  kc get pods -l app=e2e-fleet -o jsonpath='{range .items[*]}{.metadata.name} {.metadata.uid}{"\n"}{end}' | sort
}
fleet_running() { [[ $(kc get pods -l app=e2e-fleet --field-selector=status.phase=Running -o name | wc -l) == "$1" ]]; }
plan_field() { kc -n tessera get configmap tessera-fleet-plan -o jsonpath="{.data.$1}" 2>/dev/null; }
fleet_events() { kc -n tessera get events --field-selector involvedObject.name=tessera-fleet-plan \
                   --sort-by=.metadata.creationTimestamp -o jsonpath='{range .items[*]}{.reason}{"\n"}{end}'; }
layout_names_pods() {  # the layout annotation names both fleet-small pods
  local ann
  ann=$(kc get node "$NODE" -o jsonpath='{.metadata.annotations.tessera\.dev/mig-layout}')
  [[ -n $ann ]] || return 1
  while read -r name _; do
    jq -e --arg p "default/$name" '[.gpus[].instances[]?.pod] | index($p) != null' <<<"$ann" >/dev/null || return 1
  done <<<"$(fleet_pods)"
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
      mig-devices: {"1g.20gb": 4}
  # The two layouts a plan for one 7g.80gb can name (which GPU depends on where the pods are).
  fleet-7g-on-0:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"7g.80gb": 1}
    - devices: [1]
      mig-enabled: true
      mig-devices: {"1g.20gb": 4}
  fleet-7g-on-1:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"1g.20gb": 4}
    - devices: [1]
      mig-enabled: true
      mig-devices: {"7g.80gb": 1}
YAML
  kc delete deployment fleet-small --ignore-not-found --wait=true >/dev/null
  kc delete pod fleet-big --ignore-not-found --wait=true >/dev/null
  kc -n tessera delete configmap tessera-fleet-plan --ignore-not-found >/dev/null
  relabel fleet-start
  AGENT_MIG_CONFIGS=$cfg deploy_agent "" -- --set fleet.enabled=true --set fleet.pendingAfter=3 \
    --set fleet.maxWaveEvictions=5 --set-json 'fleet.extraArgs=["--poll","1","--config-propagation","45","--wave-timeout","240"]'
  wait_for 120 "the agent to apply fleet-start (mig.config.state=success)" state_is success
  expect_resource 60 nvidia.com/mig-1g.20gb 8
  kc apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: fleet-small, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: e2e-fleet}}
  template:
    metadata: {labels: {app: e2e-fleet}}
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
  wait_for 120 "2 fleet-small pods Running" fleet_running 2
  wait_for 60 "the Node annotation tessera.dev/mig-layout to name both pods" layout_names_pods
  pod fleet-big nvidia.com/mig-7g.80gb 1 | sed 's/app: e2e-consumer/app: e2e-fleet-big/' | kc apply -f - >/dev/null
  wait_for 30 "fleet-big to wait (no 7g.80gb anywhere)" eval '[[ $(kc get pod fleet-big -o jsonpath="{.status.conditions[?(@.type==\"PodScheduled\")].reason}") == Unschedulable ]]'
  local before
  before=$(fleet_pods)
  wait_for 60 "the fleet controller Ready" eval '[[ $(kc -n tessera get pods -l app.kubernetes.io/name=tessera-fleet \
    -o jsonpath="{.items[0].status.conditions[?(@.type==\"Ready\")].status}") == True ]]'
  local metrics_at
  metrics_at=$(kc -n tessera get pods -l app.kubernetes.io/name=tessera-fleet -o jsonpath='{.items[0].status.podIP}'):9402
  wait_for 60 "tessera fleet run to propose a plan in ConfigMap tessera-fleet-plan" eval '[[ -n $(plan_field hash) ]]'
  local hash plan evict config
  hash=$(plan_field hash)
  plan=$(plan_field 'plan\.json')
  [[ $(jq -r .status <<<"$plan") == optimal ]] || fail "the plan is not optimal: $(jq -c '{status, objective, gap}' <<<"$plan")"
  [[ $(jq -r .objective.unserved <<<"$plan") == 0 ]] || fail "the plan leaves pods unserved: $(jq -c .unserved <<<"$plan")"
  [[ $(jq -r '.placements["default/fleet-big"]' <<<"$plan") == "$NODE" ]] || fail "the plan does not place fleet-big on $NODE"
  [[ $(jq -c .rollout <<<"$plan") == "[[\"$NODE\"]]" ]] || fail "rollout $(jq -c .rollout <<<"$plan"), expected [[\"$NODE\"]]"
  config=$(jq -r --arg n "$NODE" '.nodes[] | select(.name == $n) | .["mig.config"]' <<<"$plan")
  evict=$(jq -r --arg n "$NODE" '.nodes[] | select(.name == $n) | .evict[]' <<<"$plan" | sed 's|^default/||' | sort)
  echo "  proposed plan $hash: $(jq -c .objective <<<"$plan"), $NODE -> $config, evict [${evict//$'\n'/ }]"
  plan_field summary | sed -n '1,9p' | sed 's/^/    /'
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
  kc -n tessera annotate configmap tessera-fleet-plan --overwrite "tessera.dev/approve=$hash" >/dev/null
  wait_for 60 "the node relabelled to $config" eval '[[ $(node_label nvidia.com/mig.config) == "$config" ]]'
  wait_for 180 "mig.config.state=success for $config" state_is success
  wait_for 120 "fleet-big Running" eval '[[ $(kc get pod fleet-big -o jsonpath="{.status.phase}") == Running ]]'
  wait_for 60 "the plan applied (status done)" eval '[[ $(plan_field status) == done:* ]]'
  # Only the pods the plan named were evicted; the others kept their UIDs.
  local gone kept name uid now
  now=$(fleet_pods)
  gone=$(while read -r name uid; do grep -q " $uid\$" <<<"$now" || echo "$name"; done <<<"$before" | sort)
  [[ $gone == "$evict" ]] || fail "evicted [${gone//$'\n'/ }], the plan named [${evict//$'\n'/ }]"
  kept=$(while read -r name uid; do grep -q " $uid\$" <<<"$now" && echo "$name"; done <<<"$before" | sort || true)
  wait_for 120 "2 fleet-small pods Running again" fleet_running 2
  local events
  events=$(fleet_events | tr '\n' ' ')
  local reason
  for reason in FleetPlanProposed FleetPlanStale FleetPlanApproved FleetPlanApplied; do
    [[ $events == *"$reason"* ]] || fail "no Event $reason about tessera-fleet-plan (Events: '$events')"
  done
  [[ $(plan_field status) == "done: plan $hash applied in 1 wave(s)" ]] || fail "the rollout ended '$(plan_field status)'"
  echo "  approved: $NODE -> $config (success), fleet-big Running; evicted [${gone//$'\n'/ }] as planned, kept [${kept//$'\n'/ }]"
  echo "  Events: $events; status: $(plan_field status)"
  kc label node "$NODE" e2e-fleet-stale- >/dev/null
  kc delete deployment fleet-small --wait=false >/dev/null
  kc delete pod fleet-big --wait=false >/dev/null
  wait_for 60 "the fleet pods to go" eval '[[ -z $(kc get pods -l "app in (e2e-fleet, e2e-fleet-big)" -o name) ]]'
}
