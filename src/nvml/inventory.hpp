// What a node's GPUs are and how they are cut, read through NVML in one pass:
// GPUs, their MIG mode, GPU and compute instances, and MIG devices. Profile
// names come from the driver where it gives them, else from the catalog.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nvml/error.hpp"
#include "nvml/session.hpp"
#include "nvml/types.hpp"

namespace tessera::nvml {

struct ComputeInstanceRecord {
  ComputeInstanceInfo info;
  std::string profile;  // "1c.3g.40gb"
};

struct GpuInstanceRecord {
  GpuInstanceInfo info;
  std::string profile;  // "3g.40gb"
  std::vector<ComputeInstanceRecord> compute_instances;
};

struct MigDeviceRecord {
  std::string uuid;  // "MIG-..."
  uint32_t index = 0;  // nvmlDeviceGetMigDeviceHandleByIndex's index on its GPU
  uint32_t gpu_instance_id = 0;
  uint32_t compute_instance_id = 0;
  MemoryInfo memory;
};

struct GpuRecord {
  uint32_t index = 0;
  std::string name;   // what NVML calls it: "NVIDIA A100-SXM4-80GB"
  std::string model;  // the catalog's name, empty when the catalog lacks it
  std::string uuid;
  PciInfo pci;
  std::optional<uint32_t> minor;
  MemoryInfo memory;
  MigMode mig;
  std::vector<GpuInstanceRecord> gpu_instances;
  std::vector<MigDeviceRecord> mig_devices;
  // As NVIDIA's DRA driver names them (go-nvlib's *AsString): "Hopper",
  // "Ada Lovelace"; "9.0"; "Nvidia", "Tesla". Empty where the driver cannot say.
  std::string architecture;
  std::string compute_capability;
  std::string brand;
  // What could not be read for lack of privileges (NVML_ERROR_NO_PERMISSION:
  // the aggregate memory of a MIG-mode GPU, or its instances, for non-root
  // users); the rest of the record is still right.
  std::vector<std::string> notes;
  // With InventoryOptions::each_gpu: why the GPU could not be read at all
  // (NVML_ERROR_GPU_IS_LOST after it fell off the bus); only `index` is set.
  std::string error;
};

struct Inventory {
  std::string driver_version;
  std::string cuda_version;  // "12.4"; empty when libcuda is absent
  std::vector<GpuRecord> gpus;
};

struct InventoryOptions {
  // A GPU that cannot be read is recorded with its error (GpuRecord::error)
  // and the others still read, for a person looking at a failing node. Off:
  // the first such error is the result, for what acts on the inventory.
  bool each_gpu = false;
};

// NVML's architecture and brand as names (empty for a value NVML does not define).
std::string architecture_name(abi::nvmlDeviceArchitecture_t arch);
std::string brand_name(abi::nvmlBrandType_t brand);

[[nodiscard]] Result<Inventory> collect_inventory(const Session& session, InventoryOptions options = {});

}  // namespace tessera::nvml
