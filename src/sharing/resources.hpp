// What to advertise to the kubelet: resources (nvidia.com/gpu,
// nvidia.com/mig-1g.10gb, nvidia.com/gpu.shared, ...) and their devices,
// from the inventory and NVIDIA's device-plugin config. Pure: values in,
// values out.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/device_plugin.hpp"
#include "core/error.hpp"
#include "sharing/inventory.hpp"

namespace tessera::sharing {

enum class SharingMode { none, time_slicing, mps };
std::string_view to_string(SharingMode mode);

// One device as the kubelet sees it.
struct Device {
  std::string id;            // advertised id: a UUID, or "<uuid>::<n>" for a replica
  std::string physical_uuid; // the GPU or MIG device it runs on
  std::string index_id;      // "0" for a GPU, "0:1" for a MIG device (deviceIDStrategy: index)
  uint32_t gpu_index = 0;    // the physical GPU
  std::string gpu_uuid;
  uint64_t memory_bytes = 0; // the device's memory, or one replica's share of it
  uint32_t replica = 0;
  uint32_t replicas = 1;     // how many replicas its physical device is cut into
  bool is_mig = false;
  uint32_t gi_id = 0;        // MIG devices: the instance ids that NVML events carry
  uint32_t ci_id = 0;
  // How this device is shared. A resource can hold both: with a sharing
  // entry's `devices`, the GPUs it names are replicated and the others are
  // served whole under the same name.
  SharingMode sharing = SharingMode::none;
};

struct Resource {
  std::string name;  // "nvidia.com/gpu"
  SharingMode sharing = SharingMode::none;
  bool fail_requests_greater_than_one = false;
  std::vector<Device> devices;
  const Device* find(const std::string& id) const;
};

// Errors: migStrategy single on GPUs with different MIG profiles, or on a mix
// of GPUs with and without MIG. A sharing entry for a resource the node
// lacks is not an error: one config serves many nodes.
[[nodiscard]] Result<std::vector<Resource>> build_resources(const Inventory& inventory,
                                                            const config::DevicePluginConfig& config);

}  // namespace tessera::sharing
