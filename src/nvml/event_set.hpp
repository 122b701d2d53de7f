// An NVML event set: the devices and event types (Xid, ECC, MIG changes) one
// watcher waits for. Owns its nvmlEventSet_t; move-only.
#pragma once

#include <optional>
#include <utility>

#include "nvml/device.hpp"
#include "nvml/error.hpp"
#include "nvml/library.hpp"

namespace tessera::nvml {

struct Event {
  Device device;
  unsigned long long type = 0;  // one nvmlEventType* bit
  unsigned long long data = 0;  // the Xid for Xid events
  std::optional<uint32_t> gpu_instance_id;
  std::optional<uint32_t> compute_instance_id;
};

class EventSet {
 public:
  [[nodiscard]] static Result<EventSet> create(const Api& api);
  EventSet(EventSet&& o) noexcept : api_(o.api_), handle_(std::exchange(o.handle_, nullptr)) {}
  EventSet& operator=(EventSet&& o) noexcept;
  EventSet(const EventSet&) = delete;
  EventSet& operator=(const EventSet&) = delete;
  ~EventSet();

  // Registers `types`; NOT_SUPPORTED (and nothing registered) when any bit is
  // not in the device's supported set (facts 1.4).
  [[nodiscard]] Result<void> add(const Device& device, unsigned long long types) const;
  // The next event, or NVML_ERROR_TIMEOUT after `timeout_ms` (NVML also
  // returns TIMEOUT when interrupted).
  [[nodiscard]] Result<Event> wait(unsigned int timeout_ms) const;

 private:
  EventSet(const Api* api, abi::nvmlEventSet_t handle) : api_(api), handle_(handle) {}
  const Api* api_;
  abi::nvmlEventSet_t handle_;
};

}  // namespace tessera::nvml
