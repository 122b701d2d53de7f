// One NVML device: a whole GPU or a MIG device (a compute instance seen as a
// device). A handle, valid while its Session lives; cheap to copy.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "nvml/error.hpp"
#include "nvml/gpu_instance.hpp"
#include "nvml/library.hpp"
#include "nvml/types.hpp"

namespace tessera::nvml {

class GpmSample;

class Device {
 public:
  Device(const Api* api, abi::nvmlDevice_t handle) : api_(api), handle_(handle) {}
  abi::nvmlDevice_t handle() const { return handle_; }
  friend bool operator==(const Device& a, const Device& b) { return a.handle_ == b.handle_; }

  [[nodiscard]] Result<std::string> name() const;
  [[nodiscard]] Result<std::string> uuid() const;
  [[nodiscard]] Result<uint32_t> minor_number() const;
  [[nodiscard]] Result<PciInfo> pci_info() const;
  // nvmlDeviceGetMemoryInfo_v2 where the driver has it (R510+), else v1.
  [[nodiscard]] Result<MemoryInfo> memory_info() const;
  [[nodiscard]] Result<Utilization> utilization() const;
  [[nodiscard]] Result<abi::nvmlDeviceArchitecture_t> architecture() const;
  // Sensors of a whole GPU (MIG device handles get NOT_SUPPORTED), each
  // FUNCTION_NOT_FOUND when the driver lacks the call.
  [[nodiscard]] Result<uint32_t> temperature_c() const;    // the GPU die, degrees C
  [[nodiscard]] Result<uint32_t> power_mw() const;         // draw, milliwatts
  [[nodiscard]] Result<uint32_t> clock_mhz(abi::nvmlClockType_t type) const;  // current
  [[nodiscard]] Result<EccCounts> ecc_volatile() const;    // NOT_SUPPORTED with ECC off
  // CUDA compute capability as major * 10 + minor (8.0 -> 80).
  [[nodiscard]] Result<uint32_t> compute_capability() const;
  [[nodiscard]] Result<abi::nvmlBrandType_t> brand() const;

  // MIG mode. Changing it may stay pending (the returned activation status is
  // NVML_ERROR_IN_USE while processes run, RESET_REQUIRED when a reset is due).
  [[nodiscard]] Result<MigMode> mig_mode() const;
  [[nodiscard]] Result<Return> set_mig_mode(bool enabled) const;

  // MIG device handles.
  [[nodiscard]] Result<bool> is_mig_device() const;
  [[nodiscard]] Result<uint32_t> max_mig_device_count() const;
  // The MIG devices of this GPU; indices may be sparse, empty ones skipped.
  [[nodiscard]] Result<std::vector<Device>> mig_devices() const;
  // The same, each with the index nvmlDeviceGetMigDeviceHandleByIndex took:
  // the MIG device's number in "<gpu>:<index>" ids (deviceIDStrategy: index).
  struct Indexed;
  [[nodiscard]] Result<std::vector<Indexed>> indexed_mig_devices() const;
  [[nodiscard]] Result<Device> parent() const;  // of a MIG device
  [[nodiscard]] Result<uint32_t> gpu_instance_id() const;
  [[nodiscard]] Result<uint32_t> compute_instance_id() const;

  // GPU-instance profiles. `index` is an NVML_GPU_INSTANCE_PROFILE_* value.
  [[nodiscard]] Result<GpuInstanceProfileInfo> gpu_instance_profile(uint32_t index) const;
  // Every profile index this GPU and driver know, in index order.
  [[nodiscard]] Result<std::vector<GpuInstanceProfileInfo>> gpu_instance_profiles() const;
  [[nodiscard]] Result<std::vector<Placement>> possible_placements(uint32_t profile_id) const;
  [[nodiscard]] Result<uint32_t> remaining_capacity(uint32_t profile_id) const;

  // GPU instances. Without a placement NVML chooses one.
  [[nodiscard]] Result<GpuInstance> create_gpu_instance(uint32_t profile_id,
                                                        std::optional<Placement> placement = std::nullopt) const;
  [[nodiscard]] Result<std::vector<GpuInstance>> gpu_instances(const GpuInstanceProfileInfo& profile) const;
  [[nodiscard]] Result<std::vector<GpuInstance>> gpu_instances() const;  // of every profile
  [[nodiscard]] Result<GpuInstance> gpu_instance_by_id(uint32_t id) const;

  [[nodiscard]] Result<std::vector<ProcessInfo>> compute_processes() const;

  // Driver-enforced memory limits of the cgroup partition whose cgroup v2
  // directory is `cgroup` (a full path), R615 and newer, whole GPUs only.
  // Reading gives nullopt where no limit is set; both fail with
  // FUNCTION_NOT_FOUND on an older driver and NOT_SUPPORTED on a MIG device.
  [[nodiscard]] Result<std::optional<MemoryLimits>> memory_limits(const std::string& cgroup) const;
  [[nodiscard]] Result<void> set_memory_limits(const std::string& cgroup, uint64_t soft, uint64_t hard) const;

  // Topology and NVLink.
  [[nodiscard]] Result<abi::nvmlGpuTopologyLevel_t> common_ancestor(const Device& other) const;
  [[nodiscard]] Result<bool> nvlink_active(uint32_t link) const;
  [[nodiscard]] Result<PciInfo> nvlink_remote_pci(uint32_t link) const;

  [[nodiscard]] Result<unsigned long long> supported_event_types() const;

  // GPM (Hopper and newer): whether supported, and taking samples of the
  // whole GPU or of one of its GPU instances (call on the parent GPU).
  [[nodiscard]] Result<bool> gpm_supported() const;
  [[nodiscard]] Result<void> gpm_sample(GpmSample& sample) const;
  [[nodiscard]] Result<void> gpm_mig_sample(uint32_t gpu_instance_id, GpmSample& sample) const;

 private:
  // The UUID for an error message, or a neutral word when even that fails.
  std::string describe() const;
  const Api* api_;
  abi::nvmlDevice_t handle_;
};

struct Device::Indexed {
  uint32_t index;
  Device device;
};

// The PCI fields of a raw struct (also used for NVLink peers).
PciInfo to_pci_info(const abi::nvmlPciInfo_t& raw);

}  // namespace tessera::nvml
