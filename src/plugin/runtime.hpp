// The device plugin's runtime loop, without the loop: what happens on each
// turn (health recovery, MPS daemon checks, the inventory read again when due
// or when MIG changed) and on a reload, with time handed in. `tessera plugin`
// turns it from its poll loop on signals and NVML's MIG events; tests turn it
// with their own clock, without sleeping.
#pragma once

#include <chrono>
#include <functional>

#include "config/device_plugin.hpp"
#include "core/error.hpp"
#include "mps/supervisor.hpp"
#include "plugin/plugin_manager.hpp"
#include "sharing/inventory.hpp"

namespace tessera::plugin {

using RuntimeClock = std::chrono::steady_clock;

struct RuntimeOptions {
  std::chrono::milliseconds inventory_interval{30000};
};

class Runtime {
 public:
  using InventorySource = std::function<Result<sharing::Inventory>()>;

  // `manager` must have started; `daemons` may be null (no MPS supervision).
  Runtime(PluginManager& manager, InventorySource read_inventory, mps::Supervisor* daemons, RuntimeOptions options,
          RuntimeClock::time_point now);

  // One turn at `now`. `mig_changed`: NVML said a MIG device came or went,
  // so the inventory is read at once rather than when due.
  void step(RuntimeClock::time_point now, bool mig_changed);
  // A new device-plugin config: resources rebuilt (servers of resources that
  // remain keep serving), MPS daemons brought in line. An invalid config
  // leaves the previous one serving and is returned.
  [[nodiscard]] Result<void> reload(const config::DevicePluginConfig& config, RuntimeClock::time_point now);

  RuntimeClock::time_point next_inventory() const { return next_inventory_; }
  size_t inventory_reads() const { return inventory_reads_; }

 private:
  void refresh_inventory();
  void supervise(RuntimeClock::time_point now, bool reconcile);

  PluginManager& manager_;
  InventorySource read_inventory_;
  mps::Supervisor* daemons_;
  RuntimeOptions options_;
  RuntimeClock::time_point next_inventory_;
  bool inventory_readable_ = true;  // log once per change
  size_t inventory_reads_ = 0;
};

}  // namespace tessera::plugin
