#!/usr/bin/env bash
# Proves that the e2e run catches a failure: with one expectation broken on
# purpose (TESSERA_E2E_BREAK), run.sh must exit non-zero, name the scenario,
# print the last lines of the kubelet's and tessera's logs, and still leave
# nothing running or mounted.
#
#   tests/e2e/check-failure.sh BUILD_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build_dir=${1:?usage: check-failure.sh BUILD_DIR}
scenario=mig-capacity
out=$(mktemp)
trap 'rm -f "$out"' EXIT

rc=0
TESSERA_E2E_BREAK=$scenario "$here/run.sh" "$build_dir" --only $scenario >"$out" 2>&1 || rc=$?
problems=()
((rc != 0)) || problems+=("run.sh exited 0 with a broken expectation")
grep -q "scenario $scenario FAILED: .*expected 9" "$out" || problems+=("the failure does not name scenario $scenario and its expectation")
grep -q "last 25 lines of the kubelet's log" "$out" || problems+=("no kubelet log lines")
grep -q "last 15 lines of containerd's log" "$out" || problems+=("no containerd log lines")
grep -q '^\[device-plugin\]' "$out" || problems+=("no tessera device-plugin log lines")
grep -q "registered nvidia.com/mig-1g.20gb with the kubelet" "$out" || problems+=("tessera's log lines are not its own")
grep -q "nothing left running or mounted" "$out" || problems+=("teardown did not confirm a clean machine")
if ((${#problems[@]})); then
  cat "$out"
  printf 'check-failure: %s\n' "${problems[@]}" >&2
  exit 1
fi
echo "check-failure: a broken '$scenario' expectation failed the run (exit $rc), named it, showed the logs and left nothing behind"
