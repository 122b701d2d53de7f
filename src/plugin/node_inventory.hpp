// The sharing policy's view of a node, read through NVML: GPUs with their
// catalog model, memory, MIG devices and NVLink peers.
#pragma once

#include "core/error.hpp"
#include "nvml/session.hpp"
#include "sharing/inventory.hpp"

namespace tessera::plugin {

[[nodiscard]] Result<sharing::Inventory> read_node_inventory(const nvml::Session& session);

}  // namespace tessera::plugin
