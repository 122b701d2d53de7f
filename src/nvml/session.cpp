#include "nvml/session.hpp"

namespace tessera::nvml {

using namespace abi;

Result<Session> Session::open(std::shared_ptr<const Library> library) {
  if (auto r = library->api().nvmlInit_v2(); r != NVML_SUCCESS) return fail(r, "nvmlInit_v2", library->path());
  return Session(std::move(library));
}

Session& Session::operator=(Session&& o) noexcept {
  if (this != &o) {
    if (library_) (void)library_->api().nvmlShutdown();
    library_ = std::move(o.library_);
  }
  return *this;
}

Session::~Session() {
  // A failed shutdown leaves nothing to undo; the process is done with NVML.
  if (library_) (void)library_->api().nvmlShutdown();
}

Result<std::string> Session::driver_version() const {
  char buf[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
  if (auto r = api().nvmlSystemGetDriverVersion(buf, sizeof buf); r != NVML_SUCCESS)
    return fail(r, "nvmlSystemGetDriverVersion");
  return std::string(buf);
}

Result<int> Session::cuda_driver_version() const {
  int version = 0;
  if (auto r = api().nvmlSystemGetCudaDriverVersion_v2(&version); r != NVML_SUCCESS)
    return fail(r, "nvmlSystemGetCudaDriverVersion_v2");
  return version;
}

Result<uint32_t> Session::device_count() const {
  unsigned int count = 0;
  if (auto r = api().nvmlDeviceGetCount_v2(&count); r != NVML_SUCCESS) return fail(r, "nvmlDeviceGetCount_v2");
  return count;
}

Result<Device> Session::device(uint32_t index) const {
  nvmlDevice_t handle = nullptr;
  if (auto r = api().nvmlDeviceGetHandleByIndex_v2(index, &handle); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetHandleByIndex_v2", "index " + std::to_string(index));
  return Device(&api(), handle);
}

Result<Device> Session::device_by_uuid(const std::string& uuid) const {
  nvmlDevice_t handle = nullptr;
  if (auto r = api().nvmlDeviceGetHandleByUUID(uuid.c_str(), &handle); r != NVML_SUCCESS)
    return fail(r, "nvmlDeviceGetHandleByUUID", uuid);
  return Device(&api(), handle);
}

std::string format_cuda_version(int version) {
  // MAJOR = v / 1000, MINOR = (v % 1000) / 10 (facts 1.2).
  return std::to_string(version / 1000) + "." + std::to_string((version % 1000) / 10);
}

}  // namespace tessera::nvml
