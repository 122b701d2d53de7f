// The MIG state of a node as the MIG plan needs it, read through NVML: per
// GPU its model, MIG mode, GPU instances (profile, placement, compute
// instances, MIG device UUID) and the processes on each.
#pragma once

#include <string>
#include <vector>

#include "core/error.hpp"
#include "mig/mig_plan.hpp"
#include "nvml/inventory.hpp"
#include "nvml/session.hpp"

namespace tessera::reconciler {

struct NodeGpu {
  mig::GpuState state;
  uint32_t pci_device_id = 0;
  uint32_t pci_subsystem_id = 0;  // subsystem device << 16 | subsystem vendor
  std::string name;  // NVML's name, for messages when the catalog lacks the model
};

[[nodiscard]] Result<std::vector<NodeGpu>> read_node_state(const nvml::Session& session);
// The same from an inventory the caller already read (the session still
// names each instance's processes).
[[nodiscard]] Result<std::vector<NodeGpu>> read_node_state(const nvml::Session& session, const nvml::Inventory& inventory);

}  // namespace tessera::reconciler
