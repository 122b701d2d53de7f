#include "sharing/resources.hpp"

#include <algorithm>
#include <set>

#include "core/catalog.hpp"

namespace tessera::sharing {
namespace {

using config::MigStrategy;

// A physical device before sharing is applied.
struct Physical {
  std::string resource;  // resource name it belongs to unshared
  Device device;
  std::string profile;   // MIG profile, or "" for a whole GPU
};

Device whole_gpu(const Gpu& g) {
  return {g.uuid, g.uuid, std::to_string(g.index), g.index, g.uuid, g.memory_bytes, 0, 1, false, 0, 0};
}

Device mig_device(const Gpu& g, const MigDevice& m) {
  return {m.uuid, m.uuid, std::to_string(g.index) + ":" + std::to_string(m.nvml_index), g.index, g.uuid, m.memory_bytes, 0, 1,
          true, m.gi_id, m.ci_id};
}

Result<std::vector<Physical>> physical_devices(const Inventory& inv, MigStrategy strategy) {
  std::vector<Physical> out;
  if (strategy == MigStrategy::none) {
    for (const auto& g : inv.gpus) out.push_back({"nvidia.com/gpu", whole_gpu(g), ""});
    return out;
  }
  if (strategy == MigStrategy::single) {
    // NVIDIA: every GPU must be MIG-enabled with devices of one profile, or none may be.
    std::set<std::string> profiles;
    size_t mig_gpus = 0;
    for (const auto& g : inv.gpus) {
      if (!g.mig_enabled) continue;
      ++mig_gpus;
      for (const auto& m : g.mig_devices) profiles.insert(m.profile);
    }
    if (mig_gpus == 0) {
      for (const auto& g : inv.gpus) out.push_back({"nvidia.com/gpu", whole_gpu(g), ""});
      return out;
    }
    if (mig_gpus != inv.gpus.size())
      return fail(Errc::validation, "migStrategy single needs MIG enabled on every GPU or on none; " +
                                        std::to_string(mig_gpus) + " of " + std::to_string(inv.gpus.size()) +
                                        " GPUs have it (use migStrategy mixed)");
    if (profiles.size() > 1) {
      std::string list;
      for (const auto& p : profiles) list += (list.empty() ? "" : ", ") + p;
      return fail(Errc::validation, "migStrategy single needs MIG devices of one profile; found " + list +
                                        " (use migStrategy mixed)");
    }
  }
  for (const auto& g : inv.gpus) {
    if (!g.mig_enabled) {
      out.push_back({"nvidia.com/gpu", whole_gpu(g), ""});
      continue;
    }
    for (const auto& m : g.mig_devices) {
      if (!m.full_instance) continue;  // NVIDIA advertises only CI == GI devices
      std::string name = strategy == MigStrategy::single ? "nvidia.com/gpu" : mig_resource_name(m.profile);
      out.push_back({name, mig_device(g, m), m.profile});
    }
  }
  return out;
}

// Whether a sharing entry's `devices` selects this physical device.
bool selects(const config::ReplicatedDevices& sel, const Device& d, size_t position_in_resource) {
  if (sel.all) return true;
  if (sel.count) return position_in_resource < *sel.count;
  for (const auto& id : sel.ids)
    if (id == d.physical_uuid || id == d.index_id || id == std::to_string(d.gpu_index) || id == d.gpu_uuid) return true;
  return false;
}

}  // namespace

std::string_view to_string(SharingMode mode) {
  switch (mode) {
    case SharingMode::none: return "none";
    case SharingMode::time_slicing: return "time-slicing";
    case SharingMode::mps: return "mps";
  }
  return "?";
}

const Gpu* Inventory::find_gpu(const std::string& uuid) const {
  for (const auto& g : gpus)
    if (g.uuid == uuid) return &g;
  return nullptr;
}

const Device* Resource::find(const std::string& id) const {
  for (const auto& d : devices)
    if (d.id == id) return &d;
  return nullptr;
}

Result<std::vector<Resource>> build_resources(const Inventory& inventory, const config::DevicePluginConfig& config) {
  auto physical = physical_devices(inventory, config.mig_strategy);
  if (!physical) return unexpected(physical.error());

  std::map<std::string, Resource> by_name;
  auto resource = [&](const std::string& name) -> Resource& {
    auto& r = by_name[name];
    r.name = name;
    return r;
  };
  const auto* sharing = config.sharing();
  SharingMode mode = config.uses_mps() ? SharingMode::mps : SharingMode::time_slicing;
  std::map<std::string, size_t> position;  // per unshared resource, for `devices: N`
  for (const auto& p : *physical) {
    size_t pos = position[p.resource]++;
    const config::ReplicatedResource* entry = nullptr;
    if (sharing) {
      for (const auto& r : sharing->resources)
        if (r.name == p.resource && selects(r.devices, p.device, pos)) {
          entry = &r;
          break;
        }
    }
    if (!entry) {
      resource(p.resource).devices.push_back(p.device);
      continue;
    }
    std::string name = !entry->rename.empty() ? entry->rename
                       : sharing->rename_by_default ? p.resource + ".shared"
                                                    : p.resource;
    if (mode == SharingMode::mps) {
      // MPS serves 48 client contexts per device from Volta on, 16 before;
      // NVIDIA's device plugin draws the line at compute capability 7.5
      // (maxClients in cmd/mps-control-daemon; NVIDIA MPS documentation, "Limitations").
      const Gpu* gpu = inventory.find_gpu(p.device.gpu_uuid);
      const uint32_t cc = gpu ? gpu->compute_capability : 0;
      const uint32_t limit = cc != 0 && cc < 75 ? 16 : 48;
      if (entry->replicas > limit)
        return fail(Errc::validation,
                    p.resource + ": " + std::to_string(entry->replicas) + " MPS replicas of " + p.device.physical_uuid +
                        " (GPU " + std::to_string(p.device.gpu_index) + (gpu ? ", " + gpu->model : std::string()) +
                        ", compute capability " + std::to_string(cc / 10) + "." + std::to_string(cc % 10) +
                        "), but an MPS daemon serves at most " + std::to_string(limit) +
                        " clients per device on it: lower sharing.mps replicas to " + std::to_string(limit) +
                        " or fewer");
    }
    auto& r = resource(name);
    r.sharing = mode;
    r.fail_requests_greater_than_one = sharing->fail_requests_greater_than_one;
    for (uint32_t n = 0; n < entry->replicas; ++n) {
      Device d = p.device;
      d.id = p.device.physical_uuid + "::" + std::to_string(n);
      d.replica = n;
      d.replicas = entry->replicas;
      d.sharing = mode;
      d.memory_bytes = p.device.memory_bytes / entry->replicas;
      r.devices.push_back(d);
    }
  }
  std::vector<Resource> out;
  for (auto& [name, r] : by_name) out.push_back(std::move(r));
  return out;
}

}  // namespace tessera::sharing
