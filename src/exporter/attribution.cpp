#include "exporter/attribution.hpp"

#include <algorithm>

namespace tessera::exporter {

std::string replica_device(const std::string& id) {
  auto at = id.rfind("::");
  if (at == std::string::npos || at == 0 || at + 2 >= id.size()) return {};
  for (size_t i = at + 2; i < id.size(); ++i)
    if (id[i] < '0' || id[i] > '9') return {};
  return id.substr(0, at);
}

Attribution attribute(const std::vector<plugin::PodDevices>& pods, const std::string& resource_prefix) {
  Attribution out;
  for (const auto& pod : pods)
    for (const auto& c : pod.containers)
      for (const auto& r : c.resources) {
        if (!r.resource.starts_with(resource_prefix)) continue;
        Owner owner{pod.name, pod.pod_namespace, c.name};
        std::map<std::string, std::vector<std::string>> by_device;  // replicas of this container
        for (const auto& id : r.ids) {
          if (auto device = replica_device(id); !device.empty())
            by_device[device].push_back(id);
          else
            out.devices[id] = owner;
        }
        for (auto& [device, ids] : by_device) {
          std::ranges::sort(ids);
          out.replicas.push_back({owner, device, ids, r.resource, r.ids});
        }
      }
  return out;
}

}  // namespace tessera::exporter
