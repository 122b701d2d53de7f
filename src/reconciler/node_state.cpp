#include "reconciler/node_state.hpp"

#include "nvml/device.hpp"
#include "nvml/inventory.hpp"

namespace tessera::reconciler {

Result<std::vector<NodeGpu>> read_node_state(const nvml::Session& session) {
  auto inv = nvml::collect_inventory(session);
  if (!inv) return unexpected(inv.error().to_error());
  return read_node_state(session, *inv);
}

Result<std::vector<NodeGpu>> read_node_state(const nvml::Session& session, const nvml::Inventory& inventory) {
  const auto& catalog = Catalog::builtin();
  std::vector<NodeGpu> out;
  for (const auto& g : inventory.gpus) {
    NodeGpu node;
    node.name = g.name;
    node.pci_device_id = g.pci.pci_device_id;
    node.pci_subsystem_id = g.pci.subsystem_id;
    auto& s = node.state;
    s.index = g.index;
    s.uuid = g.uuid;
    s.model = g.model.empty() ? catalog.find_by_pci_id(g.pci.pci_device_id) : catalog.find(g.model);
    s.mig_enabled = g.mig.current;
    if (g.mig.pending != g.mig.current) s.pending_mig_enabled = g.mig.pending;
    if (!s.model) {
      out.push_back(std::move(node));
      continue;
    }
    for (const auto& gi : g.gpu_instances) {
      mig::CurrentInstance inst;
      inst.gi_id = gi.info.id;
      const auto* profile = s.model->profile_by_id(gi.info.profile_id);
      if (!profile)
        return fail(Errc::unsupported, "GPU " + std::to_string(g.index) + " (" + s.model->name +
                                           "): GPU instance " + std::to_string(gi.info.id) + " has profile id " +
                                           std::to_string(gi.info.profile_id) + ", which the catalog does not know");
      inst.placed = {static_cast<uint32_t>(profile - s.model->profiles.data()), gi.info.placement.start};
      inst.compute_instances = static_cast<uint32_t>(gi.compute_instances.size());
      inst.default_compute_only =
          gi.compute_instances.empty() || (gi.compute_instances.size() == 1 && gi.compute_instances[0].profile == gi.profile);
      for (const auto& m : g.mig_devices) {
        if (m.gpu_instance_id != gi.info.id) continue;
        if (inst.uuid.empty()) inst.uuid = m.uuid;
        auto dev = session.device_by_uuid(m.uuid);
        if (!dev) continue;
        auto procs = dev->compute_processes();
        if (!procs) continue;
        for (const auto& p : *procs) inst.processes.push_back("pid " + std::to_string(p.pid));
      }
      s.instances.push_back(std::move(inst));
    }
    out.push_back(std::move(node));
  }
  return out;
}

}  // namespace tessera::reconciler
