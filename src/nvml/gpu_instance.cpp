#include "nvml/gpu_instance.hpp"

#include <string>

namespace tessera::nvml {

using namespace abi;

namespace {
std::string ci_context(uint32_t id) { return "compute instance profile " + std::to_string(id); }
}  // namespace

Result<ComputeInstanceInfo> ComputeInstance::info() const {
  nvmlComputeInstanceInfo_t raw{};
  if (auto r = api_->nvmlComputeInstanceGetInfo_v2(handle_, &raw); r != NVML_SUCCESS)
    return fail(r, "nvmlComputeInstanceGetInfo_v2");
  return ComputeInstanceInfo{raw.id, raw.profileId, Placement{raw.placement.start, raw.placement.size}};
}

Result<void> ComputeInstance::destroy() const {
  if (auto r = api_->nvmlComputeInstanceDestroy(handle_); r != NVML_SUCCESS) {
    auto i = info();
    return fail(r, "nvmlComputeInstanceDestroy", i ? "compute instance " + std::to_string(i->id) : "");
  }
  return {};
}

Result<GpuInstanceInfo> GpuInstance::info() const {
  nvmlGpuInstanceInfo_t raw{};
  if (auto r = api_->nvmlGpuInstanceGetInfo(handle_, &raw); r != NVML_SUCCESS) return fail(r, "nvmlGpuInstanceGetInfo");
  return GpuInstanceInfo{raw.id, raw.profileId, Placement{raw.placement.start, raw.placement.size}};
}

Result<ComputeInstanceProfileInfo> GpuInstance::compute_profile(uint32_t index) const {
  nvmlComputeInstanceProfileInfo_t raw{};
  if (auto r = api_->nvmlGpuInstanceGetComputeInstanceProfileInfo(handle_, index,
                                                                  NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &raw);
      r != NVML_SUCCESS)
    return fail(r, "nvmlGpuInstanceGetComputeInstanceProfileInfo", "profile index " + std::to_string(index));
  return ComputeInstanceProfileInfo{index, raw.id, raw.sliceCount, raw.instanceCount, raw.multiprocessorCount};
}

Result<std::vector<ComputeInstanceProfileInfo>> GpuInstance::compute_profiles() const {
  std::vector<ComputeInstanceProfileInfo> out;
  for (uint32_t index = 0; index < NVML_COMPUTE_INSTANCE_PROFILE_COUNT; ++index) {
    auto p = compute_profile(index);
    if (p) {
      out.push_back(*p);
      continue;
    }
    // Profiles this GPU instance (or this driver) does not have.
    if (p.error().code == NVML_ERROR_NOT_SUPPORTED || p.error().code == NVML_ERROR_INVALID_ARGUMENT) continue;
    return unexpected<Error>(p.error());
  }
  return out;
}

Result<uint32_t> GpuInstance::remaining_compute_capacity(uint32_t profile_id) const {
  unsigned int count = 0;
  if (auto r = api_->nvmlGpuInstanceGetComputeInstanceRemainingCapacity(handle_, profile_id, &count); r != NVML_SUCCESS)
    return fail(r, "nvmlGpuInstanceGetComputeInstanceRemainingCapacity", ci_context(profile_id));
  return count;
}

Result<ComputeInstance> GpuInstance::create_compute_instance(uint32_t profile_id) const {
  nvmlComputeInstance_t ci = nullptr;
  if (auto r = api_->nvmlGpuInstanceCreateComputeInstance(handle_, profile_id, &ci); r != NVML_SUCCESS) {
    auto i = info();
    return fail(r, "nvmlGpuInstanceCreateComputeInstance",
                (i ? "GPU instance " + std::to_string(i->id) + ", " : std::string()) + ci_context(profile_id));
  }
  return ComputeInstance(api_, ci);
}

Result<std::vector<ComputeInstance>> GpuInstance::compute_instances(const ComputeInstanceProfileInfo& profile) const {
  std::vector<nvmlComputeInstance_t> raw(profile.instance_count ? profile.instance_count : 1);
  unsigned int count = static_cast<unsigned int>(raw.size());
  if (auto r = api_->nvmlGpuInstanceGetComputeInstances(handle_, profile.id, raw.data(), &count); r != NVML_SUCCESS)
    return fail(r, "nvmlGpuInstanceGetComputeInstances", ci_context(profile.id));
  std::vector<ComputeInstance> out;
  for (unsigned int i = 0; i < count && i < raw.size(); ++i) out.emplace_back(api_, raw[i]);
  return out;
}

Result<std::vector<ComputeInstance>> GpuInstance::compute_instances() const {
  auto profiles = compute_profiles();
  if (!profiles) return unexpected<Error>(profiles.error());
  std::vector<ComputeInstance> out;
  for (const auto& p : *profiles) {
    auto cis = compute_instances(p);
    if (!cis) return unexpected<Error>(cis.error());
    out.insert(out.end(), cis->begin(), cis->end());
  }
  return out;
}

Result<ComputeInstance> GpuInstance::compute_instance_by_id(uint32_t id) const {
  nvmlComputeInstance_t ci = nullptr;
  if (auto r = api_->nvmlGpuInstanceGetComputeInstanceById(handle_, id, &ci); r != NVML_SUCCESS)
    return fail(r, "nvmlGpuInstanceGetComputeInstanceById", "compute instance " + std::to_string(id));
  return ComputeInstance(api_, ci);
}

Result<void> GpuInstance::destroy() const {
  auto i = info();
  if (auto r = api_->nvmlGpuInstanceDestroy(handle_); r != NVML_SUCCESS)
    return fail(r, "nvmlGpuInstanceDestroy", i ? "GPU instance " + std::to_string(i->id) : "");
  return {};
}

}  // namespace tessera::nvml
