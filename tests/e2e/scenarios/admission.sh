# The chart's share-isolation policy (admission.*, on by default), under the
# time-slicing configuration time-slicing installed: its config shares
# nvidia.com/gpu, so the chart renders ValidatingAdmissionPolicy
# tessera-share-isolation and its binding for that name. A pod holding a
# replica with no seccomp profile and no allowPrivilegeEscalation is refused
# by the API server, which names the policy and RuntimeDefault; the same pod
# with RuntimeDefault and allowPrivilegeEscalation: false runs, its runtime
# spec carrying the seccomp filter and no_new_privs; the confined pod setting
# NVIDIA_GPU_MEMORY_LIMIT itself, or through envFrom with no prefix, is refused; a pod without a GPU and
# with neither setting is admitted (the policy leaves it alone), and so is the
# unconfined share pod in tessera's own namespace, which the binding leaves
# out. The API server takes a new policy in asynchronously: the refusal is
# waited for, never slept for.
readonly SHARE_POLICY=tessera-share-isolation

# unconfined POD-YAML: the pod without the securityContext lines pod() gives.
unconfined() { grep -v 'securityContext:'; }

scenario_admission() {
  remove_consumers
  local out=$E2E_STATE/logs/admission-refusal.log got
  [[ $(kc get validatingadmissionpolicy "$SHARE_POLICY" -o jsonpath='{.spec.failurePolicy}') == Fail ]] ||
    fail "no ValidatingAdmissionPolicy $SHARE_POLICY with failurePolicy Fail: the chart's default admission.enabled should render it for the time-slicing config"
  [[ $(kc get validatingadmissionpolicybinding "$SHARE_POLICY" -o jsonpath='{.spec.validationActions}') == '["Deny"]' ]] ||
    fail "binding $SHARE_POLICY has validationActions '$(kc get validatingadmissionpolicybinding "$SHARE_POLICY" -o jsonpath='{.spec.validationActions}')', expected [\"Deny\"]"
  # A server-side dry run goes through admission: poll with it until the
  # API server enforces the policy, so no pod is made before it does.
  refused() {
    ! pod adm-bare nvidia.com/gpu 1 | unconfined | kc apply --dry-run=server -f - >"$out" 2>&1 &&
      grep -qF "$SHARE_POLICY" "$out"
  }
  wait_for 60 "the API server to enforce $SHARE_POLICY (a server dry run of an unconfined share pod refused by it)" refused

  # (a) The real apply: refused, with the policy's name and what to set.
  if pod adm-bare nvidia.com/gpu 1 | unconfined | kc apply -f - >"$out" 2>&1; then
    kc delete pod adm-bare --wait=false >/dev/null 2>&1 || true
    fail "an unconfined pod holding nvidia.com/gpu was admitted: $(cat "$out")"
  fi
  got=$(cat "$out")
  [[ $got == *"$SHARE_POLICY"* && $got == *RuntimeDefault* && $got == *"allowPrivilegeEscalation: false"* &&
     $got == *"seccomp profile not RuntimeDefault: cuda"* ]] ||
    fail "the refusal does not name $SHARE_POLICY, RuntimeDefault, allowPrivilegeEscalation: false and the container cuda: $got"
  [[ -z $(kc get pod adm-bare -o name 2>/dev/null) ]] || fail "the refused pod adm-bare exists"
  echo "  unconfined share pod refused: $(sed -n 's/.*denied request: //p' "$out" | cut -c1-160)..."

  # (b) Confined (pod() as the tier writes every consumer): admitted, and run
  # with the seccomp filter and no_new_privs.
  pod adm-confined nvidia.com/gpu 1 | kc apply -f - >"$out" 2>&1 ||
    fail "the confined share pod (RuntimeDefault, allowPrivilegeEscalation: false) was refused: $(cat "$out")"
  wait_for 90 "adm-confined Running" eval '[[ $(kc get pod adm-confined -o jsonpath="{.status.phase}") == Running ]]'
  local spec
  spec=$(container_spec adm-confined)
  [[ $(jq -r '.process.noNewPrivileges' <<<"$spec") == true && $(jq '.linux.seccomp.syscalls // [] | length' <<<"$spec") -gt 0 ]] ||
    fail "adm-confined's runtime spec: noNewPrivileges $(jq -c '.process.noNewPrivileges' <<<"$spec"), seccomp $(jq -c '.linux.seccomp | if . then {defaultAction, rules: (.syscalls | length)} else null end' <<<"$spec")"
  echo "  confined share pod admitted and Running on $(held_devices adm-confined): noNewPrivileges, seccomp default action $(jq -r '.linux.seccomp.defaultAction' <<<"$spec") with $(jq '.linux.seccomp.syscalls | length' <<<"$spec") rules"
  kc delete pod adm-confined --wait=true --timeout=60s >/dev/null

  # (b2) Confined, but setting NVIDIA's limit variable itself (NVIDIA's toolkit would cap the GPU
  # at the pod's value, not the share's): refused, naming the container (server dry run).
  if pod adm-limit nvidia.com/gpu 1 | sed 's|^    resources: |    env: [{name: NVIDIA_GPU_MEMORY_LIMIT, value: "81920"}]\n    resources: |' |
    kc apply --dry-run=server -f - >"$out" 2>&1; then
    fail "a share pod setting NVIDIA_GPU_MEMORY_LIMIT itself was admitted: $(cat "$out")"
  fi
  grep -qF "NVIDIA_GPU_MEMORY_* in env, or envFrom with no prefix ruling it out: cuda" "$out" || fail "the refusal does not name NVIDIA_GPU_MEMORY_* and the container cuda: $(cat "$out")"
  echo "  share pod setting NVIDIA_GPU_MEMORY_LIMIT itself: refused"

  # (b3) The same through envFrom: a ConfigMap's keys are not in the pod, so a source whose prefix
  # could make the name is refused (server dry run); (b4) one whose prefix rules it out is admitted.
  envfrom() { sed "s|^    resources: |    envFrom: [{configMapRef: {name: app-settings}$1}]\n    resources: |"; }
  if pod adm-envfrom nvidia.com/gpu 1 | envfrom "" | kc apply --dry-run=server -f - >"$out" 2>&1; then
    fail "a share pod taking a ConfigMap's keys through envFrom with no prefix was admitted: $(cat "$out")"
  fi
  grep -qF "envFrom with no prefix ruling it out: cuda" "$out" || fail "the refusal does not name envFrom and the container cuda: $(cat "$out")"
  if pod adm-envfrom nvidia.com/gpu 1 | envfrom ", prefix: NVIDIA_" | kc apply --dry-run=server -f - >"$out" 2>&1; then
    fail "a share pod taking a ConfigMap's keys through envFrom with prefix NVIDIA_ was admitted: $(cat "$out")"
  fi
  pod adm-envfrom nvidia.com/gpu 1 | envfrom ", prefix: APP_" | kc apply --dry-run=server -f - >"$out" 2>&1 ||
    fail "a share pod taking a ConfigMap's keys through envFrom with prefix APP_ was refused: $(cat "$out")"
  echo "  share pod with envFrom and no prefix, or prefix NVIDIA_: refused; with prefix APP_: admitted (server dry runs)"

  # (c) No GPU, no seccomp profile, no allowPrivilegeEscalation: not the policy's.
  pod adm-cpu cpu 10m | unconfined | kc apply -f - >"$out" 2>&1 ||
    fail "a pod holding no share was refused: $(cat "$out")"
  echo "  unconfined pod without a GPU: admitted"
  # tessera's own namespace is left out (dry run: no replica taken).
  pod adm-own nvidia.com/gpu 1 tessera | unconfined | kc apply --dry-run=server -f - >"$out" 2>&1 ||
    fail "an unconfined share pod in namespace tessera was refused: $(cat "$out")"
  echo "  unconfined share pod in namespace tessera (left out by the binding): admitted (server dry run)"
  remove_consumers
}
