// What the NVML wrapper returns: plain values, in tessera's units (bytes,
// MiB where NVML speaks MiB, catalog placements), never NVML structs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/catalog.hpp"
#include "nvml/abi.hpp"

namespace tessera::nvml {

struct PciInfo {
  std::string bus_id;  // "00000000:07:00.0"
  uint32_t domain = 0;
  uint32_t bus = 0;
  uint32_t device = 0;
  uint32_t pci_device_id = 0;  // device << 16 | vendor, e.g. 0x20B210DE
  uint32_t subsystem_id = 0;
};

struct MemoryInfo {  // bytes
  uint64_t total = 0;
  uint64_t free = 0;
  uint64_t used = 0;
  uint64_t reserved = 0;  // only from nvmlDeviceGetMemoryInfo_v2; part of `used`
};

// A cgroup partition's driver-enforced memory limits (R615+), bytes.
struct MemoryLimits {
  uint64_t soft = 0;
  uint64_t hard = 0;
  uint64_t used = 0;  // what the partition's processes hold on the device now
};

struct Utilization {  // percent over the driver's last sample period
  uint32_t gpu = 0;
  uint32_t memory = 0;
};

struct MigMode {
  bool current = false;
  bool pending = false;
};

struct GpuInstanceProfileInfo {
  uint32_t index = 0;  // the NVML_GPU_INSTANCE_PROFILE_* index asked for
  uint32_t id = 0;     // the profile id every other call takes
  bool p2p = false;
  uint32_t slice_count = 0;
  uint32_t instance_count = 0;  // how many of this profile fit on an empty GPU
  uint32_t multiprocessor_count = 0;
  Engines engines;
  uint64_t memory_mib = 0;
  std::string name;  // "MIG 1g.10gb"; empty on drivers without the V call
};

struct GpuInstanceInfo {
  uint32_t id = 0;
  uint32_t profile_id = 0;
  Placement placement;  // memory slices
};

struct ComputeInstanceProfileInfo {
  uint32_t index = 0;  // NVML_COMPUTE_INSTANCE_PROFILE_*
  uint32_t id = 0;
  uint32_t slice_count = 0;
  uint32_t instance_count = 0;
  uint32_t multiprocessor_count = 0;
};

struct ComputeInstanceInfo {
  uint32_t id = 0;
  uint32_t profile_id = 0;
  Placement placement;  // compute slices inside the GPU instance
};

struct ProcessInfo {
  uint32_t pid = 0;
  std::optional<uint64_t> used_bytes;  // absent when NVML says "not available"
  std::optional<uint32_t> gpu_instance_id;
  std::optional<uint32_t> compute_instance_id;
};

// Percentages (0-100) between two GPM samples; absent when the driver
// reports the metric as unsupported.
struct GpmMetrics {
  std::optional<double> sm_util;
  std::optional<double> sm_occupancy;
  std::optional<double> dram_bw_util;
  std::optional<double> graphics_util;
  std::optional<double> tensor_util;  // any tensor pipe
};

// ECC error counts since the driver loaded (volatile), a whole GPU's.
struct EccCounts {
  uint64_t corrected = 0;    // single-bit
  uint64_t uncorrected = 0;  // double-bit
};

}  // namespace tessera::nvml
