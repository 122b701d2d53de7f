#include "plugin/device_state.hpp"

namespace tessera::plugin {
namespace {

std::map<std::string, bool> health_of(const std::vector<sharing::Resource>& resources,
                                      const sharing::HealthTracker& health) {
  std::map<std::string, bool> out;
  for (const auto& r : resources)
    for (const auto& d : r.devices)
      out[d.id] = health.healthy(d) && (d.sharing != sharing::SharingMode::mps || health.service_up(d.physical_uuid));
  return out;
}

}  // namespace

const sharing::Resource* Snapshot::resource(const std::string& name) const {
  for (const auto& r : resources)
    if (r.name == name) return &r;
  return nullptr;
}

DeviceState::DeviceState() : current_(std::make_shared<Snapshot>()) {}

std::shared_ptr<const Snapshot> DeviceState::snapshot() const {
  std::lock_guard lock(mutex_);
  return current_;
}

void DeviceState::publish(sharing::Inventory inventory, std::vector<sharing::Resource> resources,
                          const sharing::HealthTracker& health, Serving serving) {
  auto next = std::make_shared<Snapshot>();
  next->serving = std::move(serving);
  next->healthy = health_of(resources, health);
  next->inventory = std::move(inventory);
  next->resources = std::move(resources);
  {
    std::lock_guard lock(mutex_);
    next->version = current_->version + 1;
    current_ = std::move(next);
  }
  changed_.notify_all();
}

bool DeviceState::refresh_health(const sharing::HealthTracker& health) {
  {
    std::lock_guard lock(mutex_);
    auto healthy = health_of(current_->resources, health);
    if (healthy == current_->healthy) return false;
    auto next = std::make_shared<Snapshot>(*current_);
    next->healthy = std::move(healthy);
    next->version = current_->version + 1;
    current_ = std::move(next);
  }
  changed_.notify_all();
  return true;
}

std::shared_ptr<const Snapshot> DeviceState::wait_for_change(uint64_t seen, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return stopping_ || current_->version != seen; });
  return current_;
}

void DeviceState::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
}

bool DeviceState::stopping() const {
  std::lock_guard lock(mutex_);
  return stopping_;
}

}  // namespace tessera::plugin
