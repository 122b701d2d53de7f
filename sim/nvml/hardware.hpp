// The simulated driver's own hardware facts: for each GPU model it can
// simulate, what NVIDIA's driver reports about it (name, PCI id,
// architecture, memory, SMs) and its MIG geometry (every GPU-instance
// profile with its NVML index and id, slices, memory, placements and
// compute-instance profiles). Written from NVIDIA's documentation and
// published nvidia-smi outputs (sources per fact in hardware.cpp), apart from
// tessera's catalog, so that a wrong catalog entry shows up as a difference
// (tests/nvml/sim_facts_test.cpp) instead of passing every simulator test.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nvml/abi.hpp"

namespace tessera::sim {

// A GPU-instance placement in memory slices (nvmlGpuInstancePlacement_t), or
// a compute-instance placement in compute slices inside its GPU instance.
struct Placement {
  uint32_t start = 0;
  uint32_t size = 0;
  friend bool operator==(const Placement&, const Placement&) = default;
};

namespace hw {

struct Engines {
  uint32_t copy = 0;
  uint32_t decoders = 0;
  uint32_t encoders = 0;
  uint32_t jpegs = 0;
  uint32_t ofas = 0;
};

// A compute-instance profile inside a GPU instance of some profile.
struct CiProfile {
  std::string name;         // "1c.3g.40gb"; the one spanning the GPU instance has its name
  uint32_t nvml_index = 0;  // NVML_COMPUTE_INSTANCE_PROFILE_*
  uint32_t profile_id = 0;  // nvmlComputeInstanceProfileInfo_t.id
  uint32_t slices = 0;      // compute slices
  uint32_t sm_count = 0;    // 0: NVIDIA publishes no figure
  uint32_t max_count = 0;
  std::vector<Placement> placements;
};

struct GiProfile {
  std::string name;         // "1g.10gb", "1g.10gb+me"
  uint32_t nvml_index = 0;  // NVML_GPU_INSTANCE_PROFILE_*: what ...GetGpuInstanceProfileInfo takes
  uint32_t profile_id = 0;  // nvmlGpuInstanceProfileInfo_t.id: what every other call takes
  uint32_t slices = 0;      // compute slices
  uint32_t memory_slices = 0;
  uint64_t memory_mib = 0;
  bool memory_exact = true;  // false: derived here, NVIDIA publishes no figure
  uint32_t sm_count = 0;
  bool sm_exact = true;
  Engines engines;
  bool engines_exact = true;  // false: no published table or output gives them all
  bool p2p = false;
  uint32_t max_count = 0;
  std::vector<Placement> placements;
  std::vector<CiProfile> compute_profiles;

  const CiProfile* compute_by_id(uint32_t profile_id) const;
  const CiProfile* compute_by_index(uint32_t nvml_index) const;
};

struct Gpu {
  std::string name;       // the simulator's model name, e.g. "A100-SXM4-80GB"
  std::string nvml_name;  // what nvmlDeviceGetName returns
  bool nvml_name_exact = true;
  uint32_t pci_device_id = 0;            // device << 16 | vendor
  std::vector<uint32_t> sibling_pci_ids;  // other boards NVIDIA configures with the same MIG geometry
  std::vector<std::string> aliases;      // other names `tessera sim create --gpu` accepts
  nvml::abi::nvmlDeviceArchitecture_t architecture = nvml::abi::NVML_DEVICE_ARCH_UNKNOWN;
  int cc_major = 0;
  int cc_minor = 0;
  uint64_t memory_mib = 0;
  bool memory_exact = true;
  uint32_t sm_count = 0;
  bool sm_exact = true;
  uint32_t memory_slices = 0;
  uint32_t compute_slices = 0;
  uint32_t max_instances = 0;
  uint32_t nvlinks = 0;  // NVLink links per GPU
  std::vector<GiProfile> profiles;

  const GiProfile* profile_by_id(uint32_t profile_id) const;
  const GiProfile* profile_by_index(uint32_t nvml_index) const;
  // GPM (nvmlGpm*): Hopper and newer.
  bool has_gpm() const;
};

// A GPU-instance profile's memory as a driver of `driver_version` reports it (memorySizeMB, and a
// MIG device's total): drivers differ (hardware.cpp says which).
uint64_t profile_memory_mib(const Gpu& model, const GiProfile& p, std::string_view driver_version);

// Every model the simulator knows.
std::span<const Gpu> gpus();
// By model name, NVML name or alias; case-insensitive. nullptr when unknown.
const Gpu* find_gpu(std::string_view name);
// The known names closest to `name` (edit distance), best first.
std::vector<std::string> nearest_gpu_names(std::string_view name, size_t count = 3);

}  // namespace hw
}  // namespace tessera::sim
