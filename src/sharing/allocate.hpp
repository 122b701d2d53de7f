// Answers to the kubelet's Allocate and GetPreferredAllocation, from memory:
// no process spawned, no NVML call. Pure functions of the advertised
// resource, the request and the settings.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "config/device_plugin.hpp"
#include "core/error.hpp"
#include "sharing/inventory.hpp"
#include "sharing/resources.hpp"

namespace tessera::sharing {

struct Mount {
  std::string host_path;
  std::string container_path;
  bool read_only = false;
};

struct ContainerAllocation {
  std::map<std::string, std::string> envs;
  std::vector<Mount> mounts;
  std::map<std::string, std::string> annotations;
};

struct AllocateSettings {
  config::DeviceIdStrategy id_strategy = config::DeviceIdStrategy::uuid;
  std::vector<config::DeviceListStrategy> list_strategy{config::DeviceListStrategy::envvar};
  std::string mps_root = "/run/nvidia/mps";
  std::string cdi_annotation_prefix = "cdi.k8s.io/";
};

AllocateSettings settings_from(const config::DevicePluginConfig& config);

// Environment the memory-quota library reads: one limit per visible device,
// in the order of NVIDIA_VISIBLE_DEVICES, in bytes.
inline constexpr const char* kMemoryLimitEnvPrefix = "TESSERA_DEVICE_MEMORY_LIMIT_";

// Errors (the kubelet shows them as the pod's admission error): an id the
// resource does not advertise, a device asked twice, more than one replica
// when the resource fails requests greater than one.
[[nodiscard]] Result<ContainerAllocation> allocate(const Resource& resource, std::span<const std::string> ids,
                                                   const AllocateSettings& settings);

enum class SharedPolicy { distributed, packed };

// Which `size` devices to hand out among `available`, always including
// `must_include`. Whole GPUs: the set with the most NVLink connections among
// them (exhaustive for small sets, greedy beyond). Replicas: spread across
// (distributed) or packed onto (packed) physical devices, counting what is
// already allocated (advertised but not available).
[[nodiscard]] Result<std::vector<std::string>> preferred_allocation(const Resource& resource, const Inventory& inventory,
                                                                    std::span<const std::string> available,
                                                                    std::span<const std::string> must_include,
                                                                    size_t size, SharedPolicy policy);

}  // namespace tessera::sharing
