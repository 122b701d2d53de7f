#include "plugin/runtime.hpp"

#include <spdlog/spdlog.h>

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

Runtime::Runtime(PluginManager& manager, InventorySource read_inventory, mps::Supervisor* daemons,
                 RuntimeOptions options, RuntimeClock::time_point now)
    : manager_(manager),
      read_inventory_(std::move(read_inventory)),
      daemons_(daemons),
      options_(options),
      next_inventory_(now + options.inventory_interval) {
  supervise(now, true);
}

void Runtime::step(RuntimeClock::time_point now, bool mig_changed) {
  manager_.tick(now);
  if (mig_changed) spdlog::debug("MIG configuration changed: reading the inventory");
  if (mig_changed || now >= next_inventory_) {
    next_inventory_ = now + options_.inventory_interval;
    refresh_inventory();
    supervise(now, true);  // the devices with MPS shares may have changed
    return;
  }
  supervise(now, false);
}

Result<void> Runtime::reload(const config::DevicePluginConfig& config, RuntimeClock::time_point now) {
  auto r = manager_.reload(config);
  supervise(now, true);
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

void Runtime::supervise(RuntimeClock::time_point now, bool reconcile) {
  if (!daemons_) return;
  if (reconcile) daemons_->set(daemon_specs(manager_));
  if (daemons_->tick(now) || reconcile) manager_.set_mps_up(daemons_->up());
}

}  // namespace tessera::plugin
