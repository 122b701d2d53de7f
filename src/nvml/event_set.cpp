#include "nvml/event_set.hpp"

namespace tessera::nvml {

using namespace abi;

Result<EventSet> EventSet::create(const Api& api) {
  nvmlEventSet_t handle = nullptr;
  if (auto r = api.nvmlEventSetCreate(&handle); r != NVML_SUCCESS) return fail(r, "nvmlEventSetCreate");
  return EventSet(&api, handle);
}

EventSet& EventSet::operator=(EventSet&& o) noexcept {
  if (this != &o) {
    if (handle_) api_->nvmlEventSetFree(handle_);
    api_ = o.api_;
    handle_ = std::exchange(o.handle_, nullptr);
  }
  return *this;
}

EventSet::~EventSet() {
  if (handle_) api_->nvmlEventSetFree(handle_);
}

Result<void> EventSet::add(const Device& device, unsigned long long types) const {
  if (auto r = api_->nvmlDeviceRegisterEvents(device.handle(), types, handle_); r != NVML_SUCCESS) {
    auto uuid = device.uuid();
    return fail(r, "nvmlDeviceRegisterEvents", uuid ? *uuid : std::string());
  }
  return {};
}

Result<Event> EventSet::wait(unsigned int timeout_ms) const {
  nvmlEventData_t raw{};
  if (auto r = api_->nvmlEventSetWait_v2(handle_, &raw, timeout_ms); r != NVML_SUCCESS)
    return fail(r, "nvmlEventSetWait_v2");
  Event e{Device(api_, raw.device), raw.eventType, raw.eventData, std::nullopt, std::nullopt};
  if (raw.gpuInstanceId != NVML_INSTANCE_ID_NONE) e.gpu_instance_id = raw.gpuInstanceId;
  if (raw.computeInstanceId != NVML_INSTANCE_ID_NONE) e.compute_instance_id = raw.computeInstanceId;
  return e;
}

}  // namespace tessera::nvml
