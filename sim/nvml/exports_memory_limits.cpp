// Simulated NVML: driver-enforced memory limits of cgroup partitions
// (nvmlDeviceSetMemoryLimits_v1, nvmlDeviceGetMemoryLimits_v1; R615 / CUDA
// 13.4). The rules, from NVIDIA's NVML API reference and the MPS
// documentation (release 620, "MPS v3 Memory Partitioning"): whole GPUs
// only, MIG device handles are not supported; a cgroup is named by the full
// path of its cgroup v2 directory; setting is privileged, reading is not;
// "no limit" is soft 0 with hard NVML_DEVICE_MEMORY_LIMIT_MAX: setting that
// clears a limit, and a cgroup without one reads as that. The simulator's own
// choices where NVIDIA says nothing: a driver older than R615 answers
// NOT_SUPPORTED (a real one lacks the symbols), a relative path or a soft
// limit above the hard one is INVALID_ARGUMENT, a path that is not a
// directory is NOT_FOUND, except that a limit recorded for a cgroup since
// removed can still be cleared (the driver keeps a partition's limits after
// its cgroup goes until they are cleared). The simulator records limits; it
// does not count a partition's usage (currentUsed reads 0).
#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "driver.hpp"

using namespace tessera::sim;

namespace {

bool driver_has_memory_limits(const Node& node) {
  return std::strtoul(node.driver_version.c_str(), nullptr, 10) >= 615;
}

bool recorded(const Node& node, uint32_t gpu, const char* name_space) {
  for (const auto& l : node.gpus[gpu].memory_limits)
    if (l.name_space == name_space) return true;
  return false;
}

// The GPU a limit call names, or the error the driver answers; with
// `clearing`, a cgroup that is gone but still has a limit recorded is found.
Return limit_target(const Node& node, nvmlDevice_t device, const char* name_space, uint32_t& gpu,
                    bool clearing = false) {
  DeviceRef ref;
  if (Return r = resolve_device(node, device, ref); r != NVML_SUCCESS) return r;
  if (!driver_has_memory_limits(node) || ref.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
  if (!name_space || name_space[0] != '/') return NVML_ERROR_INVALID_ARGUMENT;
  struct stat st {};
  if ((::stat(name_space, &st) != 0 || !S_ISDIR(st.st_mode)) && !(clearing && recorded(node, ref.gpu, name_space)))
    return NVML_ERROR_NOT_FOUND;
  gpu = ref.gpu;
  return NVML_SUCCESS;
}

}  // namespace

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceSetMemoryLimits_v1(nvmlDevice_t device, nvmlSetMemoryLimits_v1_t* limits) {
  return call("nvmlDeviceSetMemoryLimits_v1", [&](Driver& d, const Node& node) {
    if (!limits) return NVML_ERROR_INVALID_ARGUMENT;
    uint32_t gpu = 0;
    const bool clear = limits->softLimit == 0 && limits->hardLimit == NVML_DEVICE_MEMORY_LIMIT_MAX;
    if (Return r = limit_target(node, device, limits->nameSpace, gpu, clear); r != NVML_SUCCESS) return r;
    if (limits->softLimit > limits->hardLimit) return NVML_ERROR_INVALID_ARGUMENT;
    const std::string name_space = limits->nameSpace;
    return d.mutate([&](Node& n) {
      auto& all = n.gpus[gpu].memory_limits;
      std::erase_if(all, [&](const SimMemoryLimit& l) { return l.name_space == name_space; });
      if (!clear) all.push_back({name_space, limits->softLimit, limits->hardLimit});
      return NVML_SUCCESS;
    });
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryLimits_v1(nvmlDevice_t device, nvmlGetMemoryLimits_v1_t* limits) {
  return call("nvmlDeviceGetMemoryLimits_v1", [&](Driver&, const Node& node) {
    if (!limits) return NVML_ERROR_INVALID_ARGUMENT;
    uint32_t gpu = 0;
    if (Return r = limit_target(node, device, limits->nameSpace, gpu); r != NVML_SUCCESS) return r;
    for (const auto& l : node.gpus[gpu].memory_limits)
      if (l.name_space == limits->nameSpace) {
        limits->softLimit = l.soft;
        limits->hardLimit = l.hard;
        limits->currentUsed = 0;
        return NVML_SUCCESS;
      }
    // No limit: soft 0 and hard NVML_DEVICE_MEMORY_LIMIT_MAX, the values that clear one.
    limits->softLimit = 0;
    limits->hardLimit = NVML_DEVICE_MEMORY_LIMIT_MAX;
    limits->currentUsed = 0;
    return NVML_SUCCESS;
  });
}
