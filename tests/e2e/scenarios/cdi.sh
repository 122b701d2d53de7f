# CDI through containerd 2, from tessera's own specs (no NVIDIA runtime): the
# node agent with deviceListStrategy cdi-cri, its specs in the node's
# /var/run/cdi, the simulated node as the driver root (its device nodes, MIG
# capabilities and the simulated driver's libraries). A pod asking for two
# whole GPUs gets exactly its two /dev/nvidiaN nodes and the control nodes,
# the driver's libraries in its linker cache (ldconfig -p) with libcuda.so
# made, and NVIDIA_VISIBLE_DEVICES only as the specs' void
# (so an NVIDIA runtime would add nothing); the Node is
# relabelled to a MIG layout, and a pod on a new MIG device gets its GPU's
# node and that device's two capability nodes, with tessera not restarted.
# In both, a driver-API program (the CUDA test client) loads libcuda.so.1
# from the spec's mount of the node's driver and runs; the specs carry
# NVIDIA's four createContainer hooks, which the runtime ran.
cdi_devices_in() {  # cdi_devices_in POD: the /dev entries of NVIDIA's the container sees, sorted
  kc exec "$1" -c cuda -- sh -c 'ls /dev; ls /dev/nvidia-caps 2>/dev/null | sed "s|^|nvidia-caps/|"' | grep nvidia | sort | tr '\n' ' '
}

scenario_cdi() {
  local dp=$E2E_STATE/cdi-device-plugin.yaml
  printf 'version: v1\nflags:\n  migStrategy: mixed\n  plugin:\n    deviceListStrategy: [cdi-cri]\n' >"$dp"
  relabel all-disabled
  deploy_agent "$dp"
  wait_for 120 "the agent to apply all-disabled (mig.config.state=success)" state_is success
  expect_resource 60 nvidia.com/gpu 2
  local specs
  specs=$(node_dir "$NODE")/cdi-run
  [[ -f $specs/k8s.device-plugin.nvidia.com-gpu.json ]] || fail "no CDI spec k8s.device-plugin.nvidia.com-gpu.json in the node's /var/run/cdi"
  echo "  specs in the node's /var/run/cdi: $(ls "$specs" | tr '\n' ' ')"

  cuda_tools
  cuda_pod cdi-two nvidia.com/gpu 2 | kc apply -f - >/dev/null
  wait_for 90 "pod cdi-two Running" eval '[[ $(pods_in_phase Running) == 1 ]]'
  local spec env seen want
  spec=$(container_spec cdi-two)
  [[ $(jq -r '.process.env[]' <<<"$spec" | grep '^NVIDIA_VISIBLE_DEVICES=' | paste -sd' ' -) == NVIDIA_VISIBLE_DEVICES=void ]] ||
    fail "cdi-two has '$(jq -r '.process.env[]' <<<"$spec" | grep '^NVIDIA_VISIBLE_DEVICES=' | paste -sd' ' -)', expected only NVIDIA_VISIBLE_DEVICES=void from the CDI specs"
  seen=$(cdi_devices_in cdi-two)
  want=$(want 2)
  [[ $seen == "nvidia-uvm nvidia-uvm-tools nvidia0 nvidia1 nvidiactl " ]] ||
    fail "cdi-two sees /dev entries '$seen', expected exactly nvidia0 nvidia1 and the control nodes (nvidiactl, nvidia-uvm, nvidia-uvm-tools)"
  # The node has no nvidia-uvm (nvidia_uvm loaded, no node made): the runtime
  # made the container's from the spec's major and minor.
  [[ ! -e $(node_dir "$NODE")/sim/dev/nvidia-uvm ]] || fail "the simulated node has a /dev/nvidia-uvm: it must be laid out as a driver install leaves it"
  [[ $(kc exec cdi-two -c cuda -- stat -c '%F %t:%T' /dev/nvidia-uvm) == "character special file 1fe:0" ]] ||
    fail "cdi-two's /dev/nvidia-uvm is '$(kc exec cdi-two -c cuda -- stat -c '%F %t:%T' /dev/nvidia-uvm)', expected the character device 510:0 (1fe:0) of the node's proc/devices"
  [[ $(jq '[.linux.devices[] | select(.path | test("^/dev/nvidia[0-9]+$"))] | length' <<<"$spec") == "$want" ]] ||
    fail "the runtime spec of cdi-two has $(jq '[.linux.devices[] | select(.path | test("^/dev/nvidia[0-9]+$"))] | length' <<<"$spec") GPU device nodes, expected $want"
  kc exec cdi-two -c cuda -- test -f /usr/lib/x86_64-linux-gnu/libcuda.so.1 ||
    fail "cdi-two has no /usr/lib/x86_64-linux-gnu/libcuda.so.1 from the driver root"
  kc exec cdi-two -c cuda -- test -f /lib/firmware/nvidia/550.90.07/gsp_ga10x.bin ||
    fail "cdi-two has no /lib/firmware/nvidia/550.90.07/gsp_ga10x.bin: the driver's GSP firmware is not in the spec"
  # The specs' createContainer hooks (tessera-cdi-hook, installed on the node
  # by the init container): the driver's libcuda.so.1 in the container's
  # linker cache, where `ldconfig -p` looks (Triton, vLLM), and libcuda.so.
  local cache
  cache=$(kc exec cdi-two -c cuda -- ldconfig -p) || fail "cdi-two: ldconfig -p failed"
  grep -qF "libcuda.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libcuda.so.1" <<<"$cache" ||
    fail "cdi-two's linker cache does not list the driver's libcuda.so.1: $(grep -i cuda <<<"$cache" || echo none)"
  [[ $(kc exec cdi-two -c cuda -- readlink /usr/lib/x86_64-linux-gnu/libcuda.so) == libcuda.so.1 ]] ||
    fail "cdi-two has no /usr/lib/x86_64-linux-gnu/libcuda.so -> libcuda.so.1"
  echo "  cdi-two: ldconfig -p lists $(grep -F 'libcuda.so.1 ' <<<"$cache" | xargs); libcuda.so -> libcuda.so.1"
  # NVIDIA's hooks, in NVIDIA's order, with the driver's version and the
  # simulated node's parameters file.
  local hooks
  hooks=$(jq -r '[.hooks.createContainer // [] | .[] | select(.args[0] == "tessera-cdi-hook") | .args[1]] | join(" ")' <<<"$spec")
  [[ $hooks == "create-symlinks enable-cuda-compat update-ldcache disable-device-node-modification" ]] ||
    fail "cdi-two's runtime spec runs tessera-cdi-hook '$hooks', expected create-symlinks enable-cuda-compat update-ldcache disable-device-node-modification"
  jq -e '.hooks.createContainer[] | select(.args[1] == "enable-cuda-compat") | .args[2] == "--host-driver-version=550.90.07"' <<<"$spec" >/dev/null ||
    fail "cdi-two's enable-cuda-compat hook does not name the node's driver 550.90.07: $(jq -c '.hooks.createContainer' <<<"$spec")"
  echo "  cdi-two: createContainer hooks $hooks (the driver's 550.90.07)"
  cuda_runs cdi-two "$(held_uuid cdi-two)"
  echo "  cdi-two (2 GPUs, cdi-cri): /dev $seen, the driver's libcuda.so.1 and libnvidia-ml.so.1 mounted, NVIDIA_VISIBLE_DEVICES=void"
  echo "    the device nodes in its runtime spec: $(jq -r '[.linux.devices[].path] | join(" ")' <<<"$spec")"

  # A new layout from the label: the specs follow, tessera does not restart.
  local restarts
  restarts=$(tessera_restarts node-agent)
  kc delete pod cdi-two --wait=false >/dev/null
  wait_for 60 "cdi-two to go" no_consumers
  relabel e2e-gpu1-mig
  wait_for 120 "the agent to apply e2e-gpu1-mig" state_is success
  expect_resource 60 nvidia.com/mig-1g.20gb 4
  cuda_pod cdi-mig nvidia.com/mig-1g.20gb 1 | kc apply -f - >/dev/null
  wait_for 90 "pod cdi-mig Running" eval '[[ $(pods_in_phase Running) == 1 ]]'
  seen=$(cdi_devices_in cdi-mig)
  local caps
  caps=$(grep -o 'nvidia-caps/nvidia-cap[0-9]*' <<<"$seen" | wc -l)
  [[ $seen == *"nvidia1 "* && $seen != *"nvidia0 "* && $caps == 2 ]] ||
    fail "cdi-mig sees /dev entries '$seen', expected nvidia1 (its GPU) and two capability nodes, not nvidia0"
  cuda_runs cdi-mig "$(held_uuid cdi-mig)"
  [[ $(tessera_restarts node-agent) == "$restarts" ]] || fail "tessera node restarted during the MIG change"
  echo "  relabelled e2e-gpu1-mig: cdi-mig (a new 1g.20gb) sees /dev $seen; tessera not restarted"
}
