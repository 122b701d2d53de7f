// What the plugin serves right now: the advertised resources and the health
// of each device, behind one lock, with a version that ListAndWatch streams
// wait on. Allocate answers from here without touching the driver.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "sharing/allocate.hpp"
#include "sharing/cdi.hpp"
#include "sharing/health.hpp"
#include "sharing/inventory.hpp"
#include "sharing/resources.hpp"

namespace tessera::plugin {

// How Allocate answers, published with the resources it answers for, so
// that a reload reaches every server at once.
struct Serving {
  sharing::AllocateSettings allocate;
  sharing::SharedPolicy policy = sharing::SharedPolicy::distributed;
  std::shared_ptr<const sharing::DriverFiles> driver;  // the node's device nodes; null when not read
  std::string cdi_spec_dir;  // where a container's own spec (the memory hook's) goes; empty: no CDI
};

// An immutable view; replaced as a whole on every change.
struct Snapshot {
  sharing::Inventory inventory;
  std::vector<sharing::Resource> resources;
  Serving serving;
  std::map<std::string, bool> healthy;  // device id -> healthy
  uint64_t version = 0;
  const sharing::Resource* resource(const std::string& name) const;
};

class DeviceState {
 public:
  DeviceState();
  std::shared_ptr<const Snapshot> snapshot() const;
  // Publishes new resources (health carried over by device id) and wakes watchers.
  void publish(sharing::Inventory inventory, std::vector<sharing::Resource> resources, const sharing::HealthTracker& health,
               Serving serving = {});
  // Recomputes health from the tracker; returns true and wakes watchers when any device changed.
  bool refresh_health(const sharing::HealthTracker& health);
  // Waits until the version differs from `seen`, `stopping` is set, or `timeout` passes.
  std::shared_ptr<const Snapshot> wait_for_change(uint64_t seen, std::chrono::milliseconds timeout) const;
  void stop();
  bool stopping() const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::shared_ptr<const Snapshot> current_;
  bool stopping_ = false;
};

}  // namespace tessera::plugin
