// An NVML session: nvmlInit_v2 on creation, nvmlShutdown on destruction (NVML
// counts them, so sessions may overlap). It keeps the library loaded, and
// the devices, instances and event sets taken from it are valid while it
// lives.
#pragma once

#include <memory>
#include <string>

#include "nvml/device.hpp"
#include "nvml/error.hpp"
#include "nvml/event_set.hpp"
#include "nvml/gpm.hpp"
#include "nvml/library.hpp"

namespace tessera::nvml {

class Session {
 public:
  [[nodiscard]] static Result<Session> open(std::shared_ptr<const Library> library);
  Session(Session&& o) noexcept : library_(std::move(o.library_)) {}
  Session& operator=(Session&& o) noexcept;
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session();

  const Api& api() const { return library_->api(); }
  const Library& library() const { return *library_; }

  [[nodiscard]] Result<std::string> driver_version() const;  // "550.90.07"
  // CUDA version the driver supports, as 1000 * major + 10 * minor.
  [[nodiscard]] Result<int> cuda_driver_version() const;
  [[nodiscard]] Result<uint32_t> device_count() const;
  [[nodiscard]] Result<Device> device(uint32_t index) const;
  // A GPU's UUID ("GPU-...") or a MIG device's ("MIG-...").
  [[nodiscard]] Result<Device> device_by_uuid(const std::string& uuid) const;
  [[nodiscard]] Result<EventSet> create_event_set() const { return EventSet::create(api()); }
  [[nodiscard]] Result<GpmSample> create_gpm_sample() const { return GpmSample::allocate(api()); }
  [[nodiscard]] Result<GpmMetrics> gpm_metrics(const GpmSample& earlier, const GpmSample& later) const {
    return nvml::gpm_metrics(api(), earlier, later);
  }

 private:
  explicit Session(std::shared_ptr<const Library> library) : library_(std::move(library)) {}
  std::shared_ptr<const Library> library_;
};

// "12.4" from 12040.
std::string format_cuda_version(int version);

}  // namespace tessera::nvml
