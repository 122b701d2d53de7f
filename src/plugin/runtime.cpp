#include "plugin/runtime.hpp"

#include <poll.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>

namespace tessera::plugin {
namespace {

// The MPS daemons the resources need, as the supervisor takes them.
std::vector<mps::DaemonSpec> daemon_specs(const PluginManager& manager) {
  std::vector<mps::DaemonSpec> out;
  for (const auto& d : manager.mps_daemons()) {
    mps::DaemonSpec s;
    s.uuid = d.uuid;
    s.resource = d.resource;
    s.dirs = {d.pipe_dir, d.log_dir};
    s.pinned_mem_limit_mib = d.client_bytes >> 20;
    s.active_thread_percentage = d.active_thread_percentage;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

Runtime::Runtime(PluginManager& manager, InventorySource read_inventory, mps::Daemons* daemons,
                 RuntimeOptions options, RuntimeClock::time_point now)
    : manager_(manager),
      read_inventory_(std::move(read_inventory)),
      daemons_(daemons),
      options_(options),
      next_inventory_(now + options.inventory_interval) {
  supervise(true);
  if (daemons_) follower_ = std::thread([this] { follow_daemons(); });
}

Runtime::~Runtime() {
  stop_.notify();
  if (follower_.joinable()) follower_.join();
}

void Runtime::follow_daemons() {
  for (;;) {
    pollfd p[2] = {{stop_.fd(), POLLIN, 0}, {daemons_->changed_fd(), POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      spdlog::error("cannot follow the MPS daemons: poll: {}", std::strerror(errno));
      return;
    }
    if (p[0].revents) return;
    daemons_->drain();
    supervise(false);
  }
}

void Runtime::step(RuntimeClock::time_point now, bool mig_changed) {
  manager_.tick(now);
  if (mig_changed) spdlog::debug("MIG configuration changed: reading the inventory");
  if (mig_changed || now >= next_inventory_) {
    next_inventory_ = now + options_.inventory_interval;
    refresh_inventory();
    supervise(true);  // the devices with MPS shares may have changed
    return;
  }
  supervise(false);
}

Result<void> Runtime::reload(const config::DevicePluginConfig& config, RuntimeClock::time_point now) {
  (void)now;
  auto r = manager_.reload(config);
  supervise(true);
  return r;
}

void Runtime::refresh_inventory() {
  ++inventory_reads_;
  auto fresh = read_inventory_();
  if (!fresh) {
    if (inventory_readable_) spdlog::warn("cannot read the inventory: {} (serving the last one)", fresh.error().message);
    inventory_readable_ = false;
    return;
  }
  if (!inventory_readable_) spdlog::info("the inventory is readable again");
  inventory_readable_ = true;
  if (auto updated = manager_.update_inventory(*fresh); !updated)
    spdlog::error("inventory update refused: {}", updated.error().message);
}

void Runtime::supervise(bool reconcile) {
  if (!daemons_) return;
  std::lock_guard lock(mps_mutex_);
  if (reconcile) daemons_->want(daemon_specs(manager_));
  auto up = daemons_->up();
  if (!reconcile && up == mps_up_) return;
  mps_up_ = up;
  manager_.set_mps_up(std::move(up));
}

}  // namespace tessera::plugin
