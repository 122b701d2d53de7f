// Simulated NVML: MIG mode, GPU instances, compute instances, MIG devices.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "driver.hpp"
#include "nvml/functions.hpp"

using namespace tessera::sim;
using namespace tessera::sim::compat;

namespace {

nvmlGpuInstance_t gi_handle(Driver& d, uint32_t gpu, uint64_t uid) {
  return reinterpret_cast<nvmlGpuInstance_t>(d.intern(HandleKind::gpu_instance, gpu, uid));
}

// NVML's list calls: INSUFFICIENT_SIZE (with the count needed) when the
// caller's array is too small, else the handles and their count.
template <class Handle, class Make>
Return fill_handles(const std::vector<uint64_t>& uids, unsigned int* count, Handle* out, Make make) {
  if (uids.size() > *count) {
    *count = static_cast<unsigned int>(uids.size());
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  for (size_t i = 0; i < uids.size(); ++i) out[i] = make(uids[i]);
  *count = static_cast<unsigned int>(uids.size());
  return NVML_SUCCESS;
}

nvmlComputeInstance_t ci_handle(Driver& d, uint32_t gpu, uint64_t uid) {
  return reinterpret_cast<nvmlComputeInstance_t>(d.intern(HandleKind::compute_instance, gpu, uid));
}

// The MIG devices of a GPU in NVML's index order: by GPU instance, then
// compute instance id.
std::vector<std::pair<const SimGpuInstance*, const SimComputeInstance*>> mig_devices(const SimGpu& gpu) {
  std::vector<std::pair<const SimGpuInstance*, const SimComputeInstance*>> out;
  for (const auto& gi : gpu.gpu_instances)
    for (const auto& ci : gi.compute_instances) out.emplace_back(&gi, &ci);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a.first->id != b.first->id ? a.first->id < b.first->id : a.second->id < b.second->id;
  });
  return out;
}

template <class Info>
void fill_gi_profile(const hw::GiProfile& p, uint64_t memory_mib, Info& info) {
  info.id = p.profile_id;
  info.sliceCount = p.slices;
  info.instanceCount = p.max_count;
  info.multiprocessorCount = p.sm_count;
  info.copyEngineCount = p.engines.copy;
  info.decoderCount = p.engines.decoders;
  info.encoderCount = p.engines.encoders;
  info.jpegCount = p.engines.jpegs;
  info.ofaCount = p.engines.ofas;
  info.memorySizeMB = memory_mib;
}

// The profile at an NVML index: INVALID_ARGUMENT beyond NVML's range,
// NOT_SUPPORTED for an index this GPU lacks.
Return gi_profile_at(const Node& node, nvmlDevice_t device, unsigned int index,
                     const hw::GiProfile*& out, uint64_t& memory_mib) {
  uint32_t gpu = 0;
  if (Return r = resolve_gpu(node, device, gpu); r != NVML_SUCCESS) return r;
  if (index >= NVML_GPU_INSTANCE_PROFILE_COUNT) return NVML_ERROR_INVALID_ARGUMENT;
  const hw::Gpu& model = model_of(node.gpus[gpu]);
  out = model.profile_by_index(index);
  if (out) memory_mib = hw::profile_memory_mib(model, *out, node.driver_version);
  return out ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

}  // namespace

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* currentMode,
                                                     unsigned int* pendingMode) {
  return call("nvmlDeviceGetMigMode", [&](Driver&, const Node& node) {
    uint32_t gpu = 0;
    if (Return r = resolve_gpu(node, device, gpu); r != NVML_SUCCESS) return r;
    if (!currentMode || !pendingMode) return NVML_ERROR_INVALID_ARGUMENT;
    *currentMode = node.gpus[gpu].mig_current ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    *pendingMode = node.gpus[gpu].mig_pending ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode,
                                                     nvmlReturn_t* activationStatus) {
  return call("nvmlDeviceSetMigMode", [&](Driver& d, const Node& node) {
    uint32_t gpu = 0;
    if (Return r = resolve_gpu(node, device, gpu); r != NVML_SUCCESS) return r;
    if (!activationStatus || mode > NVML_DEVICE_MIG_ENABLE) return NVML_ERROR_INVALID_ARGUMENT;
    return d.mutate([&](Node& n) { return set_mig_mode(n, gpu, mode == NVML_DEVICE_MIG_ENABLE, *activationStatus); });
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int* isMigDevice) {
  return call("nvmlDeviceIsMigDeviceHandle", [&](Driver&, const Node& node) {
    DeviceRef ref;
    if (Return r = resolve_device(node, device, ref); r != NVML_SUCCESS) return r;
    if (!isMigDevice) return NVML_ERROR_INVALID_ARGUMENT;
    *isMigDevice = ref.is_mig() ? 1 : 0;
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  return call("nvmlDeviceGetMaxMigDeviceCount", [&](Driver&, const Node& node) {
    uint32_t gpu = 0;
    if (Return r = resolve_gpu(node, device, gpu); r != NVML_SUCCESS) return r;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = node.gpus[gpu].mig_current ? model_of(node.gpus[gpu]).max_instances : 0;  // 0 without MIG (facts 1.2)
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                                    nvmlDevice_t* migDevice) {
  return call("nvmlDeviceGetMigDeviceHandleByIndex", [&](Driver& d, const Node& node) {
    uint32_t gpu = 0;
    if (Return r = resolve_gpu(node, device, gpu); r != NVML_SUCCESS) return r;
    if (!migDevice) return NVML_ERROR_INVALID_ARGUMENT;
    const auto& g = node.gpus[gpu];
    if (!g.mig_current) return NVML_ERROR_NOT_SUPPORTED;
    if (index >= model_of(g).max_instances) return NVML_ERROR_INVALID_ARGUMENT;
    auto devices = mig_devices(g);
    if (index >= devices.size()) return NVML_ERROR_NOT_FOUND;
    *migDevice = reinterpret_cast<nvmlDevice_t>(d.intern(HandleKind::mig_device, gpu, devices[index].second->uid));
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice,
                                                                             nvmlDevice_t* device) {
  return call("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", [&](Driver& d, const Node& node) {
    DeviceRef ref;
    if (Return r = resolve_device(node, migDevice, ref); r != NVML_SUCCESS) return r;
    if (!ref.is_mig() || !device) return NVML_ERROR_INVALID_ARGUMENT;
    *device = d.gpu_handle(ref.gpu);
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  return call("nvmlDeviceGetGpuInstanceId", [&](Driver&, const Node& node) {
    DeviceRef ref;
    if (Return r = resolve_device(node, device, ref); r != NVML_SUCCESS) return r;
    if (!ref.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    if (!id) return NVML_ERROR_INVALID_ARGUMENT;
    *id = ref.gi->id;
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  return call("nvmlDeviceGetComputeInstanceId", [&](Driver&, const Node& node) {
    DeviceRef ref;
    if (Return r = resolve_device(node, device, ref); r != NVML_SUCCESS) return r;
    if (!ref.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    if (!id) return NVML_ERROR_INVALID_ARGUMENT;
    *id = ref.ci->id;
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                                    nvmlGpuInstanceProfileInfo_t* info) {
  return call("nvmlDeviceGetGpuInstanceProfileInfo", [&](Driver&, const Node& node) {
    const hw::GiProfile* p = nullptr;
    uint64_t memory_mib = 0;
    if (Return r = gi_profile_at(node, device, profile, p, memory_mib); r != NVML_SUCCESS) return r;
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    *info = nvmlGpuInstanceProfileInfo_t{};
    fill_gi_profile(*p, memory_mib, *info);
    info->isP2pSupported = p->p2p ? 1 : 0;
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                                     nvmlGpuInstanceProfileInfo_v2_t* info) {
  return call("nvmlDeviceGetGpuInstanceProfileInfoV", [&](Driver&, const Node& node) {
    const hw::GiProfile* p = nullptr;
    uint64_t memory_mib = 0;
    if (Return r = gi_profile_at(node, device, profile, p, memory_mib); r != NVML_SUCCESS) return r;
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    std::string name = "MIG " + p->name;
    if (info->version == nvmlGpuInstanceProfileInfo_v2) {
      *info = nvmlGpuInstanceProfileInfo_v2_t{};
      info->version = nvmlGpuInstanceProfileInfo_v2;
      fill_gi_profile(*p, memory_mib, *info);
      info->isP2pSupported = p->p2p ? 1 : 0;
      std::snprintf(info->name, sizeof info->name, "%s", name.c_str());
      return NVML_SUCCESS;
    }
    if (info->version == nvmlGpuInstanceProfileInfo_v3) {
      // The same pointer type carries a v3 struct (facts 1.2), laid out differently.
      auto* v3 = reinterpret_cast<nvmlGpuInstanceProfileInfo_v3_t*>(info);
      *v3 = nvmlGpuInstanceProfileInfo_v3_t{};
      v3->version = nvmlGpuInstanceProfileInfo_v3;
      fill_gi_profile(*p, memory_mib, *v3);
      std::snprintf(v3->name, sizeof v3->name, "%s", name.c_str());
      v3->capabilities = p->p2p ? 0x1 : 0x0;  // NVML_GPU_INSTANCE_PROFILE_CAPS_P2P
      return NVML_SUCCESS;
    }
    return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device,
                                                                              unsigned int profileId,
                                                                              nvmlGpuInstancePlacement_t* placements,
                                                                              unsigned int* count) {
  return call("nvmlDeviceGetGpuInstancePossiblePlacements_v2", [&](Driver&, const Node& node) {
    uint32_t gpu = 0;
    if (Return r = resolve_gpu(node, device, gpu); r != NVML_SUCCESS) return r;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    const auto* p = model_of(node.gpus[gpu]).profile_by_id(profileId);
    if (!p) return NVML_ERROR_INVALID_ARGUMENT;
    // Every placement of the profile, taken or not.
    unsigned int n = static_cast<unsigned int>(p->placements.size());
    if (!placements) {  // a query for the count
      *count = n;
      return NVML_SUCCESS;
    }
    if (*count < n) {
      *count = n;
      return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int i = 0; i < n; ++i) placements[i] = {p->placements[i].start, p->placements[i].size};
    *count = n;
    return NVML_SUCCESS;
  });
}

// v1, as the 11.0 nvml.h documents it: the buffer must hold every placement
// (NULL is INVALID_ARGUMENT, there is no count query), MIG mode must be on
// (NOT_SUPPORTED), and `count` is only written.
TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements(nvmlDevice_t device, unsigned int profileId,
                                                                           nvmlGpuInstancePlacement_t* placements,
                                                                           unsigned int* count) {
  return call("nvmlDeviceGetGpuInstancePossiblePlacements", [&](Driver&, const Node& node) {
    uint32_t gpu = 0;
    if (Return r = resolve_gpu(node, device, gpu); r != NVML_SUCCESS) return r;
    if (!count || !placements) return NVML_ERROR_INVALID_ARGUMENT;
    if (!node.gpus[gpu].mig_current) return NVML_ERROR_NOT_SUPPORTED;
    const auto* p = model_of(node.gpus[gpu]).profile_by_id(profileId);
    if (!p) return NVML_ERROR_INVALID_ARGUMENT;
    for (size_t i = 0; i < p->placements.size(); ++i) placements[i] = {p->placements[i].start, p->placements[i].size};
    *count = static_cast<unsigned int>(p->placements.size());
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int profileId,
                                                                          unsigned int* count) {
  return call("nvmlDeviceGetGpuInstanceRemainingCapacity", [&](Driver&, const Node& node) {
    uint32_t gpu = 0;
    if (Return r = resolve_gpu(node, device, gpu); r != NVML_SUCCESS) return r;
    if (!count || !model_of(node.gpus[gpu]).profile_by_id(profileId)) return NVML_ERROR_INVALID_ARGUMENT;
    if (!node.gpus[gpu].mig_current) return NVML_ERROR_NOT_SUPPORTED;
    *count = remaining_capacity(node, gpu, profileId);
    return NVML_SUCCESS;
  });
}

namespace {

nvmlReturn_t create_gi(const char* function, nvmlDevice_t device, unsigned int profileId,
                       std::optional<Placement> placement, nvmlGpuInstance_t* gpuInstance) {
  return call(function, [&](Driver& d, const Node& node) {
    uint32_t gpu = 0;
    if (Return r = resolve_gpu(node, device, gpu); r != NVML_SUCCESS) return r;
    if (!gpuInstance) return NVML_ERROR_INVALID_ARGUMENT;
    uint64_t uid = 0;
    Return r = d.mutate([&](Node& n) { return create_gpu_instance(n, gpu, profileId, placement, uid); });
    if (r == NVML_SUCCESS) *gpuInstance = gi_handle(d, gpu, uid);
    return r;
  });
}

}  // namespace

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profileId,
                                                            nvmlGpuInstance_t* gpuInstance) {
  return create_gi("nvmlDeviceCreateGpuInstance", device, profileId, std::nullopt, gpuInstance);
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profileId,
                                                                         const nvmlGpuInstancePlacement_t* placement,
                                                                         nvmlGpuInstance_t* gpuInstance) {
  if (!placement) return NVML_ERROR_INVALID_ARGUMENT;
  return create_gi("nvmlDeviceCreateGpuInstanceWithPlacement", device, profileId,
                   Placement{placement->start, placement->size}, gpuInstance);
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance) {
  return call("nvmlGpuInstanceDestroy", [&](Driver& d, const Node& node) {
    uint32_t gpu = 0;
    const SimGpuInstance* gi = nullptr;
    if (Return r = resolve_gpu_instance(node, gpuInstance, gpu, gi); r != NVML_SUCCESS) return r;
    uint64_t uid = gi->uid;
    return d.mutate([&](Node& n) { return destroy_gpu_instance(n, gpu, uid); });
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                                          nvmlGpuInstance_t* gpuInstances, unsigned int* count) {
  return call("nvmlDeviceGetGpuInstances", [&](Driver& d, const Node& node) {
    uint32_t gpu = 0;
    if (Return r = resolve_gpu(node, device, gpu); r != NVML_SUCCESS) return r;
    if (!count || !gpuInstances || !model_of(node.gpus[gpu]).profile_by_id(profileId))
      return NVML_ERROR_INVALID_ARGUMENT;
    if (!node.gpus[gpu].mig_current) return NVML_ERROR_NOT_SUPPORTED;
    std::vector<uint64_t> uids;
    for (const auto& gi : node.gpus[gpu].gpu_instances)
      if (gi.profile_id == profileId) uids.push_back(gi.uid);
    return fill_handles(uids, count, gpuInstances, [&](uint64_t uid) { return gi_handle(d, gpu, uid); });
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id,
                                                             nvmlGpuInstance_t* gpuInstance) {
  return call("nvmlDeviceGetGpuInstanceById", [&](Driver& d, const Node& node) {
    uint32_t gpu = 0;
    if (Return r = resolve_gpu(node, device, gpu); r != NVML_SUCCESS) return r;
    if (!gpuInstance) return NVML_ERROR_INVALID_ARGUMENT;
    if (!node.gpus[gpu].mig_current) return NVML_ERROR_NOT_SUPPORTED;
    for (const auto& gi : node.gpus[gpu].gpu_instances)
      if (gi.id == id) {
        *gpuInstance = gi_handle(d, gpu, gi.uid);
        return NVML_SUCCESS;
      }
    return NVML_ERROR_NOT_FOUND;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gpuInstance, nvmlGpuInstanceInfo_t* info) {
  return call("nvmlGpuInstanceGetInfo", [&](Driver& d, const Node& node) {
    uint32_t gpu = 0;
    const SimGpuInstance* gi = nullptr;
    if (Return r = resolve_gpu_instance(node, gpuInstance, gpu, gi); r != NVML_SUCCESS) return r;
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    *info = nvmlGpuInstanceInfo_t{d.gpu_handle(gpu), gi->id, gi->profile_id, {gi->start, gi->size}};
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance,
                                                                             unsigned int profile,
                                                                             unsigned int engProfile,
                                                                             nvmlComputeInstanceProfileInfo_t* info) {
  return call("nvmlGpuInstanceGetComputeInstanceProfileInfo", [&](Driver&, const Node& node) {
    uint32_t gpu = 0;
    const SimGpuInstance* gi = nullptr;
    if (Return r = resolve_gpu_instance(node, gpuInstance, gpu, gi); r != NVML_SUCCESS) return r;
    if (!info || profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT ||
        engProfile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
      return NVML_ERROR_INVALID_ARGUMENT;
    const auto* gp = model_of(node.gpus[gpu]).profile_by_id(gi->profile_id);
    for (const auto& cp : gp->compute_profiles) {
      if (cp.nvml_index != profile) continue;
      *info = nvmlComputeInstanceProfileInfo_t{cp.profile_id,        cp.slices,         cp.max_count,
                                               cp.sm_count,          gp->engines.copy,  gp->engines.decoders,
                                               gp->engines.encoders, gp->engines.jpegs, gp->engines.ofas};
      return NVML_SUCCESS;
    }
    return NVML_ERROR_NOT_SUPPORTED;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceRemainingCapacity(nvmlGpuInstance_t gpuInstance,
                                                                                   unsigned int profileId,
                                                                                   unsigned int* count) {
  return call("nvmlGpuInstanceGetComputeInstanceRemainingCapacity", [&](Driver&, const Node& node) {
    uint32_t gpu = 0;
    const SimGpuInstance* gi = nullptr;
    if (Return r = resolve_gpu_instance(node, gpuInstance, gpu, gi); r != NVML_SUCCESS) return r;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = remaining_compute_capacity(node, gpu, gi->uid, profileId);
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance,
                                                                     unsigned int profileId,
                                                                     nvmlComputeInstance_t* computeInstance) {
  return call("nvmlGpuInstanceCreateComputeInstance", [&](Driver& d, const Node& node) {
    uint32_t gpu = 0;
    const SimGpuInstance* gi = nullptr;
    if (Return r = resolve_gpu_instance(node, gpuInstance, gpu, gi); r != NVML_SUCCESS) return r;
    if (!computeInstance) return NVML_ERROR_INVALID_ARGUMENT;
    uint64_t gi_uid = gi->uid, uid = 0;
    Return r = d.mutate([&](Node& n) { return create_compute_instance(n, gpu, gi_uid, profileId, uid); });
    if (r == NVML_SUCCESS) *computeInstance = ci_handle(d, gpu, uid);
    return r;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance) {
  return call("nvmlComputeInstanceDestroy", [&](Driver& d, const Node& node) {
    uint32_t gpu = 0;
    ComputeRef ref;
    if (Return r = resolve_compute_instance(node, computeInstance, gpu, ref); r != NVML_SUCCESS) return r;
    uint64_t uid = ref.ci->uid;
    return d.mutate([&](Node& n) { return destroy_compute_instance(n, gpu, uid); });
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance,
                                                                   unsigned int profileId,
                                                                   nvmlComputeInstance_t* computeInstances,
                                                                   unsigned int* count) {
  return call("nvmlGpuInstanceGetComputeInstances", [&](Driver& d, const Node& node) {
    uint32_t gpu = 0;
    const SimGpuInstance* gi = nullptr;
    if (Return r = resolve_gpu_instance(node, gpuInstance, gpu, gi); r != NVML_SUCCESS) return r;
    if (!count || !computeInstances) return NVML_ERROR_INVALID_ARGUMENT;
    std::vector<uint64_t> uids;
    for (const auto& ci : gi->compute_instances)
      if (ci.profile_id == profileId) uids.push_back(ci.uid);
    return fill_handles(uids, count, computeInstances, [&](uint64_t uid) { return ci_handle(d, gpu, uid); });
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gpuInstance, unsigned int id,
                                                                      nvmlComputeInstance_t* computeInstance) {
  return call("nvmlGpuInstanceGetComputeInstanceById", [&](Driver& d, const Node& node) {
    uint32_t gpu = 0;
    const SimGpuInstance* gi = nullptr;
    if (Return r = resolve_gpu_instance(node, gpuInstance, gpu, gi); r != NVML_SUCCESS) return r;
    if (!computeInstance) return NVML_ERROR_INVALID_ARGUMENT;
    for (const auto& ci : gi->compute_instances)
      if (ci.id == id) {
        *computeInstance = ci_handle(d, gpu, ci.uid);
        return NVML_SUCCESS;
      }
    return NVML_ERROR_NOT_FOUND;
  });
}

namespace {

template <class Write>
nvmlReturn_t compute_instance_info(const char* function, nvmlComputeInstance_t computeInstance, bool has_info,
                                   Write write) {
  return call(function, [&](Driver& d, const Node& node) {
    uint32_t gpu = 0;
    ComputeRef ref;
    if (Return r = resolve_compute_instance(node, computeInstance, gpu, ref); r != NVML_SUCCESS) return r;
    if (!has_info) return NVML_ERROR_INVALID_ARGUMENT;
    write(nvmlComputeInstanceInfo_t{d.gpu_handle(gpu),
                                    gi_handle(d, gpu, ref.gi->uid),
                                    ref.ci->id,
                                    ref.ci->profile_id,
                                    {ref.ci->start, ref.ci->size}});
    return NVML_SUCCESS;
  });
}

}  // namespace

TESSERA_SIM_EXPORT nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t computeInstance,
                                                              nvmlComputeInstanceInfo_t* info) {
  return compute_instance_info("nvmlComputeInstanceGetInfo_v2", computeInstance, info != nullptr,
                               [&](const nvmlComputeInstanceInfo_t& full) { *info = full; });
}

// v1 writes the 24 bytes the struct had before `placement` (facts 1.5 #1).
TESSERA_SIM_EXPORT nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t computeInstance,
                                                           nvmlComputeInstanceInfo_v1_t* info) {
  return compute_instance_info("nvmlComputeInstanceGetInfo", computeInstance, info != nullptr,
                               [&](const nvmlComputeInstanceInfo_t& full) {
                                 *info = nvmlComputeInstanceInfo_v1_t{full.device, full.gpuInstance, full.id,
                                                                      full.profileId};
                               });
}
