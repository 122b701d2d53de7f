#include "nvml/device.hpp"

#include <algorithm>
#include <cstring>

#include "nvml/gpm.hpp"

namespace tessera::nvml {

using namespace abi;

namespace {

// NVML writes a NUL-terminated string into a caller's buffer.
template <size_t N>
std::string from_buffer(const char (&buf)[N]) {
  return std::string(buf, strnlen(buf, N));
}

std::string profile_context(uint32_t profile_id) { return "GPU instance profile " + std::to_string(profile_id); }

}  // namespace

PciInfo to_pci_info(const nvmlPciInfo_t& raw) {
  return PciInfo{from_buffer(raw.busId), raw.domain, raw.bus, raw.device, raw.pciDeviceId, raw.pciSubSystemId};
}

std::string Device::describe() const {
  char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  if (api_->nvmlDeviceGetUUID(handle_, buf, sizeof buf) == NVML_SUCCESS) return from_buffer(buf);
  return "device";
}

Result<std::string> Device::name() const {
  char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
  if (auto r = api_->nvmlDeviceGetName(handle_, buf, sizeof buf); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetName", describe());
  return from_buffer(buf);
}

Result<std::string> Device::uuid() const {
  char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
  if (auto r = api_->nvmlDeviceGetUUID(handle_, buf, sizeof buf); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetUUID");
  return from_buffer(buf);
}

Result<uint32_t> Device::minor_number() const {
  unsigned int minor = 0;
  if (auto r = api_->nvmlDeviceGetMinorNumber(handle_, &minor); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetMinorNumber", describe());
  return minor;
}

Result<PciInfo> Device::pci_info() const {
  nvmlPciInfo_t raw{};
  if (auto r = api_->nvmlDeviceGetPciInfo_v3(handle_, &raw); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetPciInfo_v3", describe());
  return to_pci_info(raw);
}

Result<MemoryInfo> Device::memory_info() const {
  if (api_->nvmlDeviceGetMemoryInfo_v2) {
    nvmlMemory_v2_t raw{};
    raw.version = nvmlMemory_v2;
    auto r = api_->nvmlDeviceGetMemoryInfo_v2(handle_, &raw);
    if (r == NVML_SUCCESS) return MemoryInfo{raw.total, raw.free, raw.used, raw.reserved};
    if (r != NVML_ERROR_NOT_SUPPORTED && r != NVML_ERROR_FUNCTION_NOT_FOUND)
      return fail(r, "nvmlDeviceGetMemoryInfo_v2", describe());
  }
  nvmlMemory_t raw{};
  if (auto r = api_->nvmlDeviceGetMemoryInfo(handle_, &raw); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetMemoryInfo", describe());
  return MemoryInfo{raw.total, raw.free, raw.used, 0};
}

Result<std::optional<MemoryLimits>> Device::memory_limits(const std::string& cgroup) const {
  if (!api_->nvmlDeviceGetMemoryLimits_v1)
    return fail(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceGetMemoryLimits_v1", describe());
  nvmlGetMemoryLimits_v1_t raw{};
  raw.nameSpace = cgroup.c_str();
  auto r = api_->nvmlDeviceGetMemoryLimits_v1(handle_, &raw);
  // No limit reads as soft 0 / hard NVML_DEVICE_MEMORY_LIMIT_MAX (NVML API reference); NOT_FOUND is taken too.
  if (r == NVML_ERROR_NOT_FOUND) return std::optional<MemoryLimits>{};
  if (r != NVML_SUCCESS) return fail(r, "nvmlDeviceGetMemoryLimits_v1", describe() + ", cgroup " + cgroup);
  if (raw.softLimit == 0 && raw.hardLimit == NVML_DEVICE_MEMORY_LIMIT_MAX) return std::optional<MemoryLimits>{};
  return std::optional<MemoryLimits>{MemoryLimits{raw.softLimit, raw.hardLimit, raw.currentUsed}};
}

Result<void> Device::set_memory_limits(const std::string& cgroup, uint64_t soft, uint64_t hard) const {
  if (!api_->nvmlDeviceSetMemoryLimits_v1)
    return fail(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceSetMemoryLimits_v1", describe());
  nvmlSetMemoryLimits_v1_t raw{cgroup.c_str(), soft, hard};
  if (auto r = api_->nvmlDeviceSetMemoryLimits_v1(handle_, &raw); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceSetMemoryLimits_v1", describe() + ", cgroup " + cgroup);
  return {};
}

Result<Utilization> Device::utilization() const {
  nvmlUtilization_t raw{};
  if (auto r = api_->nvmlDeviceGetUtilizationRates(handle_, &raw); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetUtilizationRates", describe());
  return Utilization{raw.gpu, raw.memory};
}

Result<nvmlDeviceArchitecture_t> Device::architecture() const {
  nvmlDeviceArchitecture_t arch = NVML_DEVICE_ARCH_UNKNOWN;
  if (auto r = api_->nvmlDeviceGetArchitecture(handle_, &arch); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetArchitecture", describe());
  return arch;
}

Result<uint32_t> Device::compute_capability() const {
  int major = 0, minor = 0;
  if (auto r = api_->nvmlDeviceGetCudaComputeCapability(handle_, &major, &minor); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetCudaComputeCapability", describe());
  return static_cast<uint32_t>(std::max(major, 0) * 10 + std::clamp(minor, 0, 9));
}

Result<nvmlBrandType_t> Device::brand() const {
  if (!api_->nvmlDeviceGetBrand) return fail(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceGetBrand", describe());
  nvmlBrandType_t brand = 0;
  if (auto r = api_->nvmlDeviceGetBrand(handle_, &brand); r != NVML_SUCCESS) return fail(r, "nvmlDeviceGetBrand", describe());
  return brand;
}

Result<MigMode> Device::mig_mode() const {
  unsigned int current = 0, pending = 0;
  if (auto r = api_->nvmlDeviceGetMigMode(handle_, &current, &pending); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetMigMode", describe());
  return MigMode{current == NVML_DEVICE_MIG_ENABLE, pending == NVML_DEVICE_MIG_ENABLE};
}

Result<Return> Device::set_mig_mode(bool enabled) const {
  nvmlReturn_t activation = NVML_SUCCESS;
  if (auto r =
          api_->nvmlDeviceSetMigMode(handle_, enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE, &activation);
      r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceSetMigMode", describe());
  return activation;
}

Result<bool> Device::is_mig_device() const {
  unsigned int is_mig = 0;
  if (auto r = api_->nvmlDeviceIsMigDeviceHandle(handle_, &is_mig); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceIsMigDeviceHandle");
  return is_mig != 0;
}

Result<uint32_t> Device::max_mig_device_count() const {
  unsigned int count = 0;
  if (auto r = api_->nvmlDeviceGetMaxMigDeviceCount(handle_, &count); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetMaxMigDeviceCount", describe());
  return count;
}

Result<std::vector<Device>> Device::mig_devices() const {
  auto indexed = indexed_mig_devices();
  if (!indexed) return unexpected<Error>(indexed.error());
  std::vector<Device> out;
  for (const auto& m : *indexed) out.push_back(m.device);
  return out;
}

Result<std::vector<Device::Indexed>> Device::indexed_mig_devices() const {
  auto max = max_mig_device_count();
  if (!max) return unexpected<Error>(max.error());
  std::vector<Indexed> out;
  for (unsigned int i = 0; i < *max; ++i) {
    nvmlDevice_t mig = nullptr;
    auto r = api_->nvmlDeviceGetMigDeviceHandleByIndex(handle_, i, &mig);
    if (r == NVML_ERROR_NOT_FOUND) continue;  // indices can be sparse (facts 1.2)
    if (r != NVML_SUCCESS)
      return fail(r, "nvmlDeviceGetMigDeviceHandleByIndex", describe() + ", index " + std::to_string(i));
    out.push_back({i, Device(api_, mig)});
  }
  return out;
}

Result<Device> Device::parent() const {
  nvmlDevice_t parent = nullptr;
  if (auto r = api_->nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle_, &parent); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", describe());
  return Device(api_, parent);
}

Result<uint32_t> Device::gpu_instance_id() const {
  unsigned int id = 0;
  if (auto r = api_->nvmlDeviceGetGpuInstanceId(handle_, &id); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetGpuInstanceId", describe());
  return id;
}

Result<uint32_t> Device::compute_instance_id() const {
  unsigned int id = 0;
  if (auto r = api_->nvmlDeviceGetComputeInstanceId(handle_, &id); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetComputeInstanceId", describe());
  return id;
}

// The fields the v1 and v2 profile structs share.
template <class Raw>
GpuInstanceProfileInfo profile_info(uint32_t index, const Raw& raw, std::string name) {
  return GpuInstanceProfileInfo{index,
                                raw.id,
                                raw.isP2pSupported != 0,
                                raw.sliceCount,
                                raw.instanceCount,
                                raw.multiprocessorCount,
                                Engines{raw.copyEngineCount, raw.decoderCount, raw.encoderCount, raw.jpegCount, raw.ofaCount},
                                raw.memorySizeMB,
                                std::move(name)};
}

Result<GpuInstanceProfileInfo> Device::gpu_instance_profile(uint32_t index) const {
  // The V call with a v2 struct adds the profile's name (R510+).
  if (api_->nvmlDeviceGetGpuInstanceProfileInfoV) {
    nvmlGpuInstanceProfileInfo_v2_t raw{};
    raw.version = nvmlGpuInstanceProfileInfo_v2;
    auto r = api_->nvmlDeviceGetGpuInstanceProfileInfoV(handle_, index, &raw);
    if (r != NVML_SUCCESS)
      return fail(r, "nvmlDeviceGetGpuInstanceProfileInfoV", describe() + ", profile index " + std::to_string(index));
    return profile_info(index, raw, from_buffer(raw.name));
  }
  nvmlGpuInstanceProfileInfo_t raw{};
  if (auto r = api_->nvmlDeviceGetGpuInstanceProfileInfo(handle_, index, &raw); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetGpuInstanceProfileInfo", describe() + ", profile index " + std::to_string(index));
  return profile_info(index, raw, "");
}

Result<std::vector<GpuInstanceProfileInfo>> Device::gpu_instance_profiles() const {
  std::vector<GpuInstanceProfileInfo> out;
  for (uint32_t index = 0; index < NVML_GPU_INSTANCE_PROFILE_COUNT; ++index) {
    auto p = gpu_instance_profile(index);
    if (p) {
      out.push_back(std::move(*p));
      continue;
    }
    // Indices this GPU or driver does not have (facts 1.4).
    if (p.error().code == NVML_ERROR_NOT_SUPPORTED || p.error().code == NVML_ERROR_INVALID_ARGUMENT) continue;
    return unexpected<Error>(p.error());
  }
  return out;
}

Result<std::vector<Placement>> Device::possible_placements(uint32_t profile_id) const {
  unsigned int count = 0;
  // A null buffer asks for the count (facts 1.2).
  if (auto r = api_->nvmlDeviceGetGpuInstancePossiblePlacements_v2(handle_, profile_id, nullptr, &count);
      r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetGpuInstancePossiblePlacements_v2", describe() + ", " + profile_context(profile_id));
  std::vector<nvmlGpuInstancePlacement_t> raw(count);
  if (count > 0) {
    if (auto r = api_->nvmlDeviceGetGpuInstancePossiblePlacements_v2(handle_, profile_id, raw.data(), &count);
        r != NVML_SUCCESS)
      return fail(r, "nvmlDeviceGetGpuInstancePossiblePlacements_v2", describe() + ", " + profile_context(profile_id));
  }
  std::vector<Placement> out;
  for (unsigned int i = 0; i < count && i < raw.size(); ++i) out.push_back(Placement{raw[i].start, raw[i].size});
  return out;
}

Result<uint32_t> Device::remaining_capacity(uint32_t profile_id) const {
  unsigned int count = 0;
  if (auto r = api_->nvmlDeviceGetGpuInstanceRemainingCapacity(handle_, profile_id, &count); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetGpuInstanceRemainingCapacity", describe() + ", " + profile_context(profile_id));
  return count;
}

Result<GpuInstance> Device::create_gpu_instance(uint32_t profile_id, std::optional<Placement> placement) const {
  nvmlGpuInstance_t gi = nullptr;
  if (placement) {
    nvmlGpuInstancePlacement_t raw{placement->start, placement->size};
    if (auto r = api_->nvmlDeviceCreateGpuInstanceWithPlacement(handle_, profile_id, &raw, &gi); r != NVML_SUCCESS)
      return fail(r, "nvmlDeviceCreateGpuInstanceWithPlacement",
                  describe() + ", " + profile_context(profile_id) + " at " + std::to_string(placement->start) + ":" +
                      std::to_string(placement->size));
  } else if (auto r = api_->nvmlDeviceCreateGpuInstance(handle_, profile_id, &gi); r != NVML_SUCCESS) {
    return fail(r, "nvmlDeviceCreateGpuInstance", describe() + ", " + profile_context(profile_id));
  }
  return GpuInstance(api_, gi);
}

Result<std::vector<GpuInstance>> Device::gpu_instances(const GpuInstanceProfileInfo& profile) const {
  // The buffer must hold the profile's instance count (facts 1.2).
  std::vector<nvmlGpuInstance_t> raw(profile.instance_count ? profile.instance_count : 1);
  unsigned int count = static_cast<unsigned int>(raw.size());
  if (auto r = api_->nvmlDeviceGetGpuInstances(handle_, profile.id, raw.data(), &count); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetGpuInstances", describe() + ", " + profile_context(profile.id));
  std::vector<GpuInstance> out;
  for (unsigned int i = 0; i < count && i < raw.size(); ++i) out.emplace_back(api_, raw[i]);
  return out;
}

Result<std::vector<GpuInstance>> Device::gpu_instances() const {
  auto profiles = gpu_instance_profiles();
  if (!profiles) return unexpected<Error>(profiles.error());
  std::vector<GpuInstance> out;
  for (const auto& p : *profiles) {
    auto gis = gpu_instances(p);
    if (!gis) return unexpected<Error>(gis.error());
    out.insert(out.end(), gis->begin(), gis->end());
  }
  return out;
}

Result<GpuInstance> Device::gpu_instance_by_id(uint32_t id) const {
  nvmlGpuInstance_t gi = nullptr;
  if (auto r = api_->nvmlDeviceGetGpuInstanceById(handle_, id, &gi); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetGpuInstanceById", describe() + ", GPU instance " + std::to_string(id));
  return GpuInstance(api_, gi);
}

Result<std::vector<ProcessInfo>> Device::compute_processes() const {
  auto* query = api_->nvmlDeviceGetComputeRunningProcesses_v3 ? api_->nvmlDeviceGetComputeRunningProcesses_v3
                                                              : api_->nvmlDeviceGetComputeRunningProcesses_v2;
  const char* call = api_->nvmlDeviceGetComputeRunningProcesses_v3 ? "nvmlDeviceGetComputeRunningProcesses_v3"
                                                                   : "nvmlDeviceGetComputeRunningProcesses_v2";
  if (!query) return fail(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceGetComputeRunningProcesses_v3", describe());
  // The entry stride is 24 bytes on most drivers and 32 on 535.43-535.86
  // (facts 1.5 #4): over-allocate at 32, fill with a sentinel and infer the
  // stride from how far the driver wrote.
  constexpr size_t kWide = 32;
  constexpr unsigned char kSentinel = 0xA5;
  unsigned int capacity = 16;
  for (int attempt = 0; attempt < 4; ++attempt) {
    std::vector<unsigned char> buf(capacity * kWide, kSentinel);
    unsigned int count = capacity;
    auto r = query(handle_, &count, reinterpret_cast<nvmlProcessInfo_t*>(buf.data()));
    if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
      capacity = count + 8;  // processes may start meanwhile
      continue;
    }
    if (r != NVML_SUCCESS) return fail(r, call, describe());
    size_t narrow_end = count * sizeof(nvmlProcessInfo_t);
    bool wide = false;
    for (size_t i = narrow_end; i < count * kWide; ++i) wide = wide || buf[i] != kSentinel;
    size_t stride = wide ? kWide : sizeof(nvmlProcessInfo_t);
    std::vector<ProcessInfo> out;
    for (unsigned int i = 0; i < count; ++i) {
      nvmlProcessInfo_t e{};
      std::memcpy(&e, buf.data() + i * stride, sizeof e);
      ProcessInfo p;
      p.pid = e.pid;
      if (e.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE) p.used_bytes = e.usedGpuMemory;
      if (e.gpuInstanceId != NVML_INSTANCE_ID_NONE) p.gpu_instance_id = e.gpuInstanceId;
      if (e.computeInstanceId != NVML_INSTANCE_ID_NONE) p.compute_instance_id = e.computeInstanceId;
      out.push_back(p);
    }
    return out;
  }
  return fail(NVML_ERROR_INSUFFICIENT_SIZE, call, describe());
}

Result<nvmlGpuTopologyLevel_t> Device::common_ancestor(const Device& other) const {
  nvmlGpuTopologyLevel_t level = NVML_TOPOLOGY_SYSTEM;
  if (auto r = api_->nvmlDeviceGetTopologyCommonAncestor(handle_, other.handle_, &level); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetTopologyCommonAncestor", describe() + " and " + other.describe());
  return level;
}

Result<bool> Device::nvlink_active(uint32_t link) const {
  nvmlEnableState_t active = NVML_FEATURE_DISABLED;
  if (auto r = api_->nvmlDeviceGetNvLinkState(handle_, link, &active); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetNvLinkState", describe() + ", link " + std::to_string(link));
  return active == NVML_FEATURE_ENABLED;
}

Result<PciInfo> Device::nvlink_remote_pci(uint32_t link) const {
  nvmlPciInfo_t raw{};
  if (auto r = api_->nvmlDeviceGetNvLinkRemotePciInfo_v2(handle_, link, &raw); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetNvLinkRemotePciInfo_v2", describe() + ", link " + std::to_string(link));
  return to_pci_info(raw);
}

Result<unsigned long long> Device::supported_event_types() const {
  unsigned long long types = 0;
  if (auto r = api_->nvmlDeviceGetSupportedEventTypes(handle_, &types); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetSupportedEventTypes", describe());
  return types;
}

Result<uint32_t> Device::temperature_c() const {
  if (!api_->nvmlDeviceGetTemperature) return fail(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceGetTemperature");
  unsigned int value = 0;
  if (auto r = api_->nvmlDeviceGetTemperature(handle_, NVML_TEMPERATURE_GPU, &value); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetTemperature", describe());
  return value;
}

Result<uint32_t> Device::power_mw() const {
  if (!api_->nvmlDeviceGetPowerUsage) return fail(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceGetPowerUsage");
  unsigned int value = 0;
  if (auto r = api_->nvmlDeviceGetPowerUsage(handle_, &value); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetPowerUsage", describe());
  return value;
}

Result<uint32_t> Device::clock_mhz(nvmlClockType_t type) const {
  if (!api_->nvmlDeviceGetClockInfo) return fail(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceGetClockInfo");
  unsigned int value = 0;
  if (auto r = api_->nvmlDeviceGetClockInfo(handle_, type, &value); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetClockInfo", describe() + ", clock " + std::to_string(static_cast<int>(type)));
  return value;
}

Result<EccCounts> Device::ecc_volatile() const {
  if (!api_->nvmlDeviceGetTotalEccErrors) return fail(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlDeviceGetTotalEccErrors");
  EccCounts out;
  unsigned long long n = 0;
  if (auto r = api_->nvmlDeviceGetTotalEccErrors(handle_, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &n);
      r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetTotalEccErrors", describe() + ", corrected");
  out.corrected = n;
  if (auto r = api_->nvmlDeviceGetTotalEccErrors(handle_, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &n);
      r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetTotalEccErrors", describe() + ", uncorrected");
  out.uncorrected = n;
  return out;
}

Result<bool> Device::gpm_supported() const {
  if (!api_->nvmlGpmQueryDeviceSupport) return false;  // a driver before R520
  nvmlGpmSupport_t support{};
  support.version = NVML_GPM_SUPPORT_VERSION;
  if (auto r = api_->nvmlGpmQueryDeviceSupport(handle_, &support); r != NVML_SUCCESS)
    return fail(r, "nvmlGpmQueryDeviceSupport", describe());
  return support.isSupportedDevice != 0;
}

Result<void> Device::gpm_sample(GpmSample& sample) const {
  if (!api_->nvmlGpmSampleGet) return fail(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlGpmSampleGet", describe());
  if (auto r = api_->nvmlGpmSampleGet(handle_, sample.handle()); r != NVML_SUCCESS)
    return fail(r, "nvmlGpmSampleGet", describe());
  return {};
}

Result<void> Device::gpm_mig_sample(uint32_t gpu_instance_id, GpmSample& sample) const {
  if (!api_->nvmlGpmMigSampleGet) return fail(NVML_ERROR_FUNCTION_NOT_FOUND, "nvmlGpmMigSampleGet", describe());
  if (auto r = api_->nvmlGpmMigSampleGet(handle_, gpu_instance_id, sample.handle()); r != NVML_SUCCESS)
    return fail(r, "nvmlGpmMigSampleGet", describe() + ", GPU instance " + std::to_string(gpu_instance_id));
  return {};
}

}  // namespace tessera::nvml
