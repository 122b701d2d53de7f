#include "plugin/node_inventory.hpp"

#include <algorithm>

#include "nvml/device.hpp"
#include "nvml/inventory.hpp"

namespace tessera::plugin {
namespace {

// NVML numbers NVLink links from 0; no GPU tessera knows has more than 18
// (NVML_NVLINK_MAX_LINKS).
constexpr uint32_t kMaxLinks = 18;

}  // namespace

Result<sharing::Inventory> read_node_inventory(const nvml::Session& session) {
  auto inv = nvml::collect_inventory(session);
  if (!inv) return unexpected(inv.error().to_error());
  sharing::Inventory out;
  for (const auto& g : inv->gpus) {
    sharing::Gpu gpu;
    gpu.index = g.index;
    gpu.uuid = g.uuid;
    gpu.model = g.model.empty() ? g.name : g.model;
    gpu.pci_bus_id = g.pci.bus_id;
    // What the driver says is usable: replica quotas are shares of this, so
    // together they never promise the memory the driver keeps for itself.
    gpu.memory_bytes = g.memory.total - std::min(g.memory.reserved, g.memory.total);
    gpu.mig_enabled = g.mig.current;
    gpu.minor = g.minor;
    for (const auto& m : g.mig_devices) {
      sharing::MigDevice md;
      md.uuid = m.uuid;
      md.nvml_index = m.index;
      md.gi_id = m.gpu_instance_id;
      md.ci_id = m.compute_instance_id;
      md.memory_bytes = m.memory.total;
      for (const auto& gi : g.gpu_instances) {
        if (gi.info.id != m.gpu_instance_id) continue;
        md.profile = gi.profile;
        md.start = gi.info.placement.start;
        // Advertised only when its compute instance spans the whole GPU instance.
        md.full_instance = gi.compute_instances.size() == 1 && gi.compute_instances[0].profile == gi.profile;
      }
      gpu.mig_devices.push_back(md);
    }
    std::sort(gpu.mig_devices.begin(), gpu.mig_devices.end(),
              [](const auto& a, const auto& b) { return a.start < b.start; });
    out.gpus.push_back(std::move(gpu));
  }
  // NVLink peers, by the remote end's PCI bus id; the compute capability.
  for (auto& gpu : out.gpus) {
    auto dev = session.device(gpu.index);
    if (!dev) continue;
    if (auto cc = dev->compute_capability()) gpu.compute_capability = *cc;
    for (uint32_t link = 0; link < kMaxLinks; ++link) {
      auto active = dev->nvlink_active(link);
      if (!active) break;  // NOT_SUPPORTED / INVALID_ARGUMENT past the last link
      if (!*active) continue;
      auto remote = dev->nvlink_remote_pci(link);
      if (!remote) continue;
      for (const auto& peer : out.gpus)
        if (peer.pci_bus_id == remote->bus_id && peer.index != gpu.index &&
            std::find(gpu.nvlink_peers.begin(), gpu.nvlink_peers.end(), peer.index) == gpu.nvlink_peers.end())
          gpu.nvlink_peers.push_back(peer.index);
    }
  }
  return out;
}

}  // namespace tessera::plugin
