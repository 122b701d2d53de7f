// MIG instances through NVML: a GPU instance (a slice of memory and compute
// on one GPU) and the compute instances inside it. These are handles, not
// owners: destroying an instance is an explicit act (the MIG reconciler's),
// never a side effect of a C++ object going away. Valid while their Session
// lives.
#pragma once

#include <vector>

#include "nvml/error.hpp"
#include "nvml/library.hpp"
#include "nvml/types.hpp"

namespace tessera::nvml {

class ComputeInstance {
 public:
  ComputeInstance(const Api* api, abi::nvmlComputeInstance_t handle) : api_(api), handle_(handle) {}
  abi::nvmlComputeInstance_t handle() const { return handle_; }

  [[nodiscard]] Result<ComputeInstanceInfo> info() const;
  // NVML_ERROR_IN_USE while processes run on it.
  [[nodiscard]] Result<void> destroy() const;

 private:
  const Api* api_;
  abi::nvmlComputeInstance_t handle_;
};

class GpuInstance {
 public:
  GpuInstance(const Api* api, abi::nvmlGpuInstance_t handle) : api_(api), handle_(handle) {}
  abi::nvmlGpuInstance_t handle() const { return handle_; }

  [[nodiscard]] Result<GpuInstanceInfo> info() const;
  // `index` is an NVML_COMPUTE_INSTANCE_PROFILE_* value.
  [[nodiscard]] Result<ComputeInstanceProfileInfo> compute_profile(uint32_t index) const;
  // Every compute-instance profile this GPU instance supports.
  [[nodiscard]] Result<std::vector<ComputeInstanceProfileInfo>> compute_profiles() const;
  [[nodiscard]] Result<uint32_t> remaining_compute_capacity(uint32_t profile_id) const;
  [[nodiscard]] Result<ComputeInstance> create_compute_instance(uint32_t profile_id) const;
  [[nodiscard]] Result<std::vector<ComputeInstance>> compute_instances(const ComputeInstanceProfileInfo& profile) const;
  // All compute instances, of every profile.
  [[nodiscard]] Result<std::vector<ComputeInstance>> compute_instances() const;
  [[nodiscard]] Result<ComputeInstance> compute_instance_by_id(uint32_t id) const;
  // NVML_ERROR_IN_USE while it holds compute instances or processes.
  [[nodiscard]] Result<void> destroy() const;

 private:
  const Api* api_;
  abi::nvmlGpuInstance_t handle_;
};

}  // namespace tessera::nvml
