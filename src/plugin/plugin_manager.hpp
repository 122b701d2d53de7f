// The device plugin as a whole: one ResourceServer per advertised resource,
// registration with the kubelet (again whenever it restarts), health from
// NVML events, config reloads that keep serving the resources that remain.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "config/device_plugin.hpp"
#include "core/error.hpp"
#include "plugin/cdi_writer.hpp"
#include "plugin/device_state.hpp"
#include "plugin/kubelet_watch.hpp"
#include "plugin/registration.hpp"
#include "plugin/resource_server.hpp"
#include "sharing/allocate.hpp"
#include "sharing/health.hpp"

namespace tessera::plugin {

struct PluginOptions {
  std::string kubelet_dir = kDefaultKubeletDir;
  config::DevicePluginConfig config;
  sharing::HealthPolicy health;
  // Asked before a quiet device is Healthy again (nvml_gpu_probe on a node);
  // without one, recovery goes by the clock alone (for tests of the policy).
  sharing::GpuProbe gpu_answers;
  bool watch_kubelet = true;  // re-register when kubelet.sock is recreated
  // The memory-quota library handed to shared replicas: its host directory,
  // the ledger root (this process creates <root>/<key> in Allocate, so it
  // must see the root at the same path as the host), or none at all.
  sharing::QuotaLibrarySettings quota;
  // CDI: the spec directory, the names, and the driver and device roots.
  // Empty roots come from the config (flags.nvidiaDriverRoot, nvidiaDevRoot,
  // plugin.containerDriverRoot); specs are written when the config's
  // deviceListStrategy has a cdi-* strategy.
  CdiOptions cdi{false, "/var/run/cdi", "", "", "", {}, ""};
};

// The CDI options in force for a config: the plugin's, with the roots it
// leaves empty taken from the config.
CdiOptions cdi_options(const PluginOptions& options, const config::DevicePluginConfig& config);

class PluginManager {
 public:
  explicit PluginManager(PluginOptions options);
  ~PluginManager();

  // Builds the resources, serves each, registers each. A registration that
  // fails (no kubelet yet) is logged and retried when the kubelet appears;
  // only an invalid inventory/config combination is an error.
  [[nodiscard]] Result<void> start(sharing::Inventory inventory);
  // Registers every served resource again; returns the first failure.
  [[nodiscard]] Result<void> register_all();
  // Applies a new config: rebuilt resources; servers of resources that
  // remain keep running, so no allocation or stream is dropped.
  [[nodiscard]] Result<void> reload(config::DevicePluginConfig config);
  // A changed inventory rebuilds the resources; an unchanged one does nothing.
  [[nodiscard]] Result<void> update_inventory(sharing::Inventory inventory);
  void on_event(const sharing::HealthEvent& event);
  // The devices whose MPS control daemon is up and answering: only their MPS
  // shares are Healthy (an MPS share starts Unhealthy until named here).
  void set_mps_up(std::set<std::string> uuids);
  // Takes GPU or MIG devices out of service (Unhealthy to the kubelet) until
  // a later call leaves them out; an empty set puts every one back.
  void withdraw(std::set<std::string> uuids);
  // The inventory and config being served.
  sharing::Inventory inventory() const;
  config::DevicePluginConfig config() const;
  // The control daemons the current MPS resources need, one per device.
  std::vector<sharing::MpsDaemon> mps_daemons() const;
  void tick(sharing::Clock::time_point now);
  void stop();

  std::vector<std::string> resources() const;
  std::shared_ptr<DeviceState> state() const { return state_; }
  size_t registrations() const;  // successful Register calls so far

 private:
  [[nodiscard]] Result<void> apply(sharing::Inventory inventory, const config::DevicePluginConfig& config);
  std::string kubelet_socket() const;
  // Registers one served resource with the kubelet; counts and logs a success.
  [[nodiscard]] Result<void> register_one(const std::string& name);

  PluginOptions options_;
  std::shared_ptr<DeviceState> state_;
  mutable std::mutex mutex_;
  sharing::HealthTracker health_;
  sharing::Inventory inventory_;
  std::map<std::string, std::unique_ptr<ResourceServer>> servers_;
  std::unique_ptr<KubeletWatch> watch_;
  size_t registrations_ = 0;
};

}  // namespace tessera::plugin
