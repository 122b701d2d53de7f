#include "driver.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace tessera::sim {

Driver& driver() {
  // Destroyed when the library is unloaded (dlclose) or the process exits,
  // so nothing it owns outlives the library's code.
  static Driver d;
  return d;
}

Driver::~Driver() { reset(); }

SimHandle* Driver::intern(HandleKind kind, uint32_t gpu, uint64_t uid) {
  auto& slot = handles_[{kind, gpu, uid}];
  if (!slot) slot = std::make_unique<SimHandle>(SimHandle{kHandleMagic, kind, gpu, uid});
  return slot.get();
}

void Driver::reset() {
  handles_.clear();
  for (auto* s : event_sets) delete s;
  event_sets.clear();
  for (auto* s : gpm_samples) delete s;
  gpm_samples.clear();
  store.reset();
}

Return Driver::inject_fault(const char* function, const Node& current) {
  const auto& faults = current.faults;
  if (std::none_of(faults.begin(), faults.end(), [&](const SimFault& f) { return f.function == function; }))
    return NVML_SUCCESS;
  // Calls are counted in the node, so "the Nth call" means across processes.
  Return result = NVML_SUCCESS;
  bool crash = false;
  auto written = store->update([&](Node& n) {
    for (auto it = n.faults.begin(); it != n.faults.end(); ++it) {
      if (it->function != function) continue;
      ++it->calls;
      if (it->calls >= it->nth && it->calls < it->nth + it->times) {
        if (it->crash) crash = true;
        else result = static_cast<Return>(it->error);
      }
      if (it->calls + 1 >= it->nth + it->times) n.faults.erase(it);
      return true;
    }
    return false;
  });
  if (!written) return NVML_ERROR_UNKNOWN;
  crash_after_change = crash;
  return result;
}

Return Driver::mutate(const std::function<Return(Node&)>& change) {
  // Every MIG change comes through here; the driver refuses them to non-root callers.
  if (auto node = store->read(); node && !(*node)->privileged) return NVML_ERROR_NO_PERMISSION;
  Return result = NVML_SUCCESS;
  auto written = store->update([&](Node& n) {
    result = change(n);
    return result == NVML_SUCCESS;
  });
  if (crash_after_change) std::_Exit(137);  // killed right after the change, before the caller saw it
  if (!written) return NVML_ERROR_UNKNOWN;
  return result;
}

namespace {

const SimHandle* as_handle(const void* p) {
  auto* h = static_cast<const SimHandle*>(p);
  return h && h->magic == kHandleMagic ? h : nullptr;
}

}  // namespace

Return resolve_device(const Node& node, nvmlDevice_t device, DeviceRef& out) {
  const auto* h = as_handle(device);
  if (!h || h->gpu >= node.gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  if (node.gpus[h->gpu].lost) return NVML_ERROR_GPU_IS_LOST;
  out = DeviceRef{h->gpu, nullptr, nullptr};
  if (h->kind == HandleKind::gpu) return NVML_SUCCESS;
  if (h->kind != HandleKind::mig_device) return NVML_ERROR_INVALID_ARGUMENT;
  auto ref = find_compute_instance(node, h->gpu, h->uid);
  if (!ref.ci) return NVML_ERROR_INVALID_ARGUMENT;  // its compute instance is gone
  out.gi = ref.gi;
  out.ci = ref.ci;
  return NVML_SUCCESS;
}

Return resolve_gpu(const Node& node, nvmlDevice_t device, uint32_t& gpu) {
  const auto* h = as_handle(device);
  if (!h || h->kind != HandleKind::gpu || h->gpu >= node.gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
  if (node.gpus[h->gpu].lost) return NVML_ERROR_GPU_IS_LOST;
  gpu = h->gpu;
  return NVML_SUCCESS;
}

Return resolve_gpu_instance(const Node& node, nvmlGpuInstance_t handle, uint32_t& gpu, const SimGpuInstance*& gi) {
  const auto* h = as_handle(handle);
  if (!h || h->kind != HandleKind::gpu_instance) return NVML_ERROR_INVALID_ARGUMENT;
  gi = find_gpu_instance(node, h->gpu, h->uid);
  if (!gi) return NVML_ERROR_INVALID_ARGUMENT;
  gpu = h->gpu;
  return NVML_SUCCESS;
}

Return resolve_compute_instance(const Node& node, nvmlComputeInstance_t handle, uint32_t& gpu, ComputeRef& ref) {
  const auto* h = as_handle(handle);
  if (!h || h->kind != HandleKind::compute_instance) return NVML_ERROR_INVALID_ARGUMENT;
  ref = find_compute_instance(node, h->gpu, h->uid);
  if (!ref.ci) return NVML_ERROR_INVALID_ARGUMENT;
  gpu = h->gpu;
  return NVML_SUCCESS;
}

Return copy_string(const std::string& text, char* buffer, unsigned int length) {
  if (!buffer) return NVML_ERROR_INVALID_ARGUMENT;
  if (text.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buffer, text.c_str(), text.size() + 1);
  return NVML_SUCCESS;
}

}  // namespace tessera::sim
