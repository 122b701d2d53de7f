// The device plugin's runtime loop, without the loop: what happens on each
// turn (health recovery, the MPS daemons' health handed to the shares, the
// inventory read again when due or when MIG changed) and on a reload, with
// time handed in. `tessera plugin` turns it from its poll loop on signals,
// NVML's MIG events and the MPS daemons' changes; tests turn it with their
// own clock, without sleeping. The MPS daemons are told what is wanted and
// report back on their own (mps::Daemons): no turn waits on a daemon, and a
// thread of the runtime's own hands each change of their health to the
// shares the moment it is reported, whatever the loop is doing.
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <thread>
#include <set>
#include <string>

#include "config/device_plugin.hpp"
#include "core/error.hpp"
#include "mps/daemons.hpp"
#include "mps/supervisor.hpp"  // the in-process mps::Daemons
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
  Runtime(PluginManager& manager, InventorySource read_inventory, mps::Daemons* daemons, RuntimeOptions options,
          RuntimeClock::time_point now);
  ~Runtime();  // stops the thread that follows the daemons (before `daemons` goes)
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

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
  // With `reconcile`, tells the daemons which are wanted now; hands the
  // shares the devices whose daemon is up when that changed.
  void supervise(bool reconcile);
  void follow_daemons();  // the thread: daemons_->changed_fd() to the shares

  PluginManager& manager_;
  InventorySource read_inventory_;
  mps::Daemons* daemons_;
  std::mutex mps_mutex_;          // one writer of the shares' MPS health at a time
  std::set<std::string> mps_up_;  // under mps_mutex_
  mps::Notifier stop_;
  std::thread follower_;
  RuntimeOptions options_;
  RuntimeClock::time_point next_inventory_;
  bool inventory_readable_ = true;  // log once per change
  size_t inventory_reads_ = 0;
};

}  // namespace tessera::plugin
