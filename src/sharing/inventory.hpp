// What a node has, as plain values: GPUs and their MIG devices. Built from
// NVML by the node agent (or by tests directly); the sharing policy reads
// only this.
#pragma once

#include <cstdint>
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
};

struct Gpu {
  uint32_t index = 0;
  std::string uuid;       // "GPU-..."
  std::string model;      // catalog name when known, else the NVML name
  std::string pci_bus_id;
  uint64_t memory_bytes = 0;
  bool mig_enabled = false;
  std::vector<MigDevice> mig_devices;  // by start
  std::vector<uint32_t> nvlink_peers;  // indices of GPUs with an active NVLink to this one
};

struct Inventory {
  std::vector<Gpu> gpus;
  const Gpu* find_gpu(const std::string& uuid) const;
};

}  // namespace tessera::sharing
