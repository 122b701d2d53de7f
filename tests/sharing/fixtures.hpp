// A small node for the sharing tests: two A100-80GB, GPU 0 without MIG,
// GPU 1 with 3g.40gb + two 1g.20gb, NVLink between them. GPU 1's NVML MIG
// device indices differ from placement order, as after 1g x2 then 3g: NVML
// numbers by GPU instance id (the 3g.40gb has id 1: index 0).
#pragma once

#include <string>

#include "config/device_plugin.hpp"
#include "sharing/inventory.hpp"

namespace tessera::sharing::testing {

inline Inventory two_gpu_node() {
  Inventory inv;
  Gpu g0{0, "GPU-0000", "A100-SXM4-80GB", "00000000:07:00.0", 80ull << 30, false, {}, {1}, 80, 0};
  Gpu g1{1, "GPU-1111", "A100-SXM4-80GB", "00000000:0F:00.0", 80ull << 30, true, {}, {0}, 80, 1};
  g1.mig_devices = {
      {"MIG-a", "1g.20gb", 3, 0, 0, 19968ull << 20, true, 1},
      {"MIG-b", "1g.20gb", 4, 0, 2, 19968ull << 20, true, 2},
      {"MIG-c", "3g.40gb", 1, 0, 4, 40192ull << 20, true, 0},
  };
  inv.gpus = {g0, g1};
  return inv;
}

inline config::DevicePluginConfig parse(const std::string& yaml) {
  config::Diagnostics diags;
  auto c = config::parse_device_plugin_config(yaml, "test.yaml", diags);
  if (!c) throw std::runtime_error("bad test config: " + (diags.items().empty() ? "" : format(diags.items()[0])));
  return *c;
}

}  // namespace tessera::sharing::testing
