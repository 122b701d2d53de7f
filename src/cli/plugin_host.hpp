// The device plugin as a running service, shared by `tessera plugin` and
// `tessera node`: the config, NVML, the inventory, the servers, NVML's event
// watch, the MPS daemons (supervised here, or by `tessera mps-host` with
// --mps-host) and the loop that turns plugin::Runtime on signals, MIG events,
// the MPS daemons' changes and config-file changes.
#pragma once

#include <CLI/CLI.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cli/nvml_driver.hpp"
#include "config/device_plugin.hpp"
#include "core/error.hpp"
#include "plugin/plugin_manager.hpp"
#include "sharing/allocate.hpp"

namespace tessera::cli {

struct PluginArgs {
  std::string config_file;
  DriverOptions driver;
  std::string kubelet_dir = plugin::kDefaultKubeletDir;
  double recovery_seconds = 60;
  std::vector<uint64_t> ignored_xids{13, 31, 43, 45, 68, 109};
  double inventory_seconds = 30;
  bool strict = false;
  sharing::QuotaLibrarySettings quota;
  bool no_quota_library = false;
  std::string memory_hook;  // tessera-memory-hook's host path; empty: no driver backend
  std::string mps_control = "nvidia-cuda-mps-control";
  double mps_timeout_seconds = 5;
  std::string mps_host;  // `tessera mps-host`'s socket: the daemons are its, not this process's
  // CDI (empty roots: the config's flags.nvidiaDriverRoot, nvidiaDevRoot, plugin.containerDriverRoot).
  std::string cdi_spec_dir = "/var/run/cdi";
  std::string cdi_vendor = "k8s.device-plugin.nvidia.com";
  std::string driver_root, dev_root, container_driver_root;
  std::string cdi_hook;  // --cdi-hook: host path of tessera-cdi-hook
  // Watched for config changes even while config_file is empty (the node
  // agent's --device-plugin-configs: configs chosen there later).
  std::string config_dir;
  // --device-list-strategy: replaces every config's flags.plugin.deviceListStrategy (NVIDIA's
  // plugin's flag and DEVICE_LIST_STRATEGY do the same); empty: each config's own.
  std::vector<std::string> device_list_strategy;
};

// The options both commands take (everything in PluginArgs).
void add_plugin_options(CLI::App& cmd, PluginArgs& args);

// The device-plugin config in `file` (defaults when empty); diagnostics
// printed; nullopt when invalid. A non-empty `list_strategy` (--device-list-strategy's
// names) replaces its flags.plugin.deviceListStrategy.
std::optional<config::DevicePluginConfig> load_plugin_config(const std::string& file, bool strict,
                                                             const std::vector<std::string>& list_strategy = {});

class PluginHost {
 public:
  // Blocks SIGTERM, SIGINT and SIGHUP (before any thread starts), loads the
  // config, opens NVML, reads the inventory and starts serving. Errors are
  // printed prefixed with `command`; nullptr then.
  static std::unique_ptr<PluginHost> start(const PluginArgs& args, const std::string& command);
  ~PluginHost();

  // Turns the loop until SIGTERM or SIGINT. SIGHUP, and a change of the
  // config file (a ConfigMap update replaces it), reload the config.
  // `on_reload` is told of each config that was taken.
  void run(const std::function<void()>& on_reload = {});
  // Stops serving (sockets removed), and the MPS daemons it supervises itself
  // (those of `tessera mps-host` keep running).
  void stop();

  plugin::PluginManager& manager() { return *manager_; }
  const nvml::Session& session() const { return *session_; }
  // Reads the inventory now and serves what changed (any thread). Errors:
  // it cannot be read, or the config cannot serve it (the old one stays).
  [[nodiscard]] Result<void> refresh_inventory();
  // Serves the config in `file` from now on, `why` logged (any thread; the
  // loop takes it on its next turn). For configs that share the directory
  // of the file the host started with, which the loop already watches: the
  // Node's nvidia.com/device-plugin.config label choosing among them.
  void use_config_file(std::string file, std::string why);

 private:
  PluginHost() = default;
  void reload(const char* why);
  // Reads `file` (empty: the built-in defaults) and serves it through
  // reload(); an unreadable file is said and changes nothing.
  void load(const std::string& file, const char* why);
  struct Parts;
  PluginArgs args_;
  std::optional<nvml::Session> session_;
  std::unique_ptr<plugin::PluginManager> manager_;
  std::unique_ptr<Parts> parts_;
  std::function<void()> on_reload_;
  std::mutex switch_mutex_;
  std::optional<std::pair<std::string, std::string>> switch_to_;  // file, why
};

}  // namespace tessera::cli
