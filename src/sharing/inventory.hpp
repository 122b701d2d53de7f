// What a node has, as plain values: GPUs and their MIG devices. Built from
// NVML by the node agent (or by tests directly); the sharing policy reads
// only this.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tessera::sharing {

struct MigDevice {
  std::string uuid;       // "MIG-..."
  std::string profile;    // "1g.10gb", "1g.10gb+me"
  uint32_t gi_id = 0;
  uint32_t ci_id = 0;
  uint32_t start = 0;     // placement, memory slices
  uint64_t memory_bytes = 0;
  bool full_instance = true;  // its compute instance spans the whole GPU instance
  // NVML's MIG device index on its GPU (nvmlDeviceGetMigDeviceHandleByIndex):
  // what "<gpu>:<index>" ids name and the container runtime resolves. Not
  // the placement order: NVML numbers by GPU instance id, then compute
  // instance id, and instance ids follow creation order.
  uint32_t nvml_index = 0;
  friend bool operator==(const MigDevice&, const MigDevice&) = default;
};

struct Gpu {
  uint32_t index = 0;
  std::string uuid;       // "GPU-..."
  std::string model;      // catalog name when known, else the NVML name
  std::string pci_bus_id;
  uint64_t memory_bytes = 0;  // usable: total less what the driver reserves (nvmlDeviceGetMemoryInfo_v2)
  bool mig_enabled = false;
  std::vector<MigDevice> mig_devices;  // by placement start
  std::vector<uint32_t> nvlink_peers;  // indices of GPUs with an active NVLink to this one
  uint32_t compute_capability = 0;     // major * 10 + minor (8.0 -> 80); 0 when unknown
  std::optional<uint32_t> minor;       // of its /dev/nvidia<minor> (nvmlDeviceGetMinorNumber); unknown: its index
  friend bool operator==(const Gpu&, const Gpu&) = default;
};

struct Inventory {
  std::vector<Gpu> gpus;
  const Gpu* find_gpu(const std::string& uuid) const;
  friend bool operator==(const Inventory&, const Inventory&) = default;
};

}  // namespace tessera::sharing
