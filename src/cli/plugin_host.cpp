#include "cli/numbers.hpp"
#include "cli/plugin_host.hpp"

#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "config/mig_parted.hpp"  // read_config_file
#include "config/yaml_document.hpp"
#include "core/file_read.hpp"
#include "cuda_quota/env.h"
#include "mps/host.hpp"
#include "mps/supervisor.hpp"
#include "plugin/event_watch.hpp"
#include "plugin/ledger_cleaner.hpp"
#include "plugin/node_inventory.hpp"
#include "plugin/runtime.hpp"

namespace tessera::cli {

namespace {

// The config in `text`, read from `file`; diagnostics printed. `list_strategy`, when given,
// replaces its deviceListStrategy (names checked by the option).
std::optional<config::DevicePluginConfig> parse_plugin_config(const std::string& text, const std::string& file,
                                                              bool strict, const std::vector<std::string>& list_strategy) {
  config::Diagnostics diags;
  auto c = config::parse_device_plugin_config(text, file, diags);
  if (strict) diags = config::warnings_as_errors(diags);
  print_diagnostics(diags, std::cerr);
  if (diags.has_errors() || !c) return std::nullopt;
  if (!list_strategy.empty()) {
    c->plugin.device_list_strategy.clear();
    for (const auto& name : list_strategy)
      if (auto s = config::device_list_strategy_named(name); s && std::ranges::count(c->plugin.device_list_strategy, *s) == 0)
        c->plugin.device_list_strategy.push_back(*s);
  }
  return c;
}

}  // namespace

std::optional<config::DevicePluginConfig> load_plugin_config(const std::string& file, bool strict,
                                                             const std::vector<std::string>& list_strategy) {
  if (file.empty()) return parse_plugin_config("version: v1\n", "<defaults>", strict, list_strategy);
  config::Diagnostics diags;
  auto text = config::read_config_file(file, diags);
  if (!text) {
    print_diagnostics(diags, std::cerr);
    return std::nullopt;
  }
  return parse_plugin_config(*text, file, strict, list_strategy);
}

struct PluginHost::Parts {
  int signal_fd = -1;
  int mig_fd = -1;      // NVML's MIG events wake the loop for a fresh inventory
  int inotify_fd = -1;  // the config file's directory (a ConfigMap update swaps a symlink there)
  std::string config_text;  // what was last loaded, to tell a real change from a touch
  std::unique_ptr<plugin::EventWatch> events;
  std::unique_ptr<mps::Daemons> daemons;
  std::unique_ptr<plugin::Runtime> runtime;
  std::unique_ptr<plugin::LedgerSweeper> ledgers;  // removes quota ledgers no container holds
  ~Parts() {
    for (int fd : {signal_fd, mig_fd, inotify_fd})
      if (fd >= 0) close(fd);
  }
};

namespace {

std::string file_text(const std::string& path) {
  auto text = read_whole_file(path, 16u << 20);
  return text ? *text : std::string();
}

}  // namespace

std::unique_ptr<PluginHost> PluginHost::start(const PluginArgs& args, const std::string& command) {
  std::unique_ptr<PluginHost> host(new PluginHost());
  host->args_ = args;
  host->parts_ = std::make_unique<Parts>();
  auto& parts = *host->parts_;
  // Signals arrive on a descriptor: no async handlers. Blocked before any thread starts.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  parts.signal_fd = signalfd(-1, &mask, SFD_CLOEXEC);
  parts.mig_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

  std::optional<config::DevicePluginConfig> config;
  if (args.config_file.empty()) {
    config = load_plugin_config("", args.strict, args.device_list_strategy);
  } else {
    config::Diagnostics diags;
    auto text = config::read_config_file(args.config_file, diags);
    print_diagnostics(diags, std::cerr);
    if (text) {
      parts.config_text = *text;
      config = parse_plugin_config(*text, args.config_file, args.strict, args.device_list_strategy);
    }
  }
  if (!config) return nullptr;
  if (!args.config_file.empty() || !args.config_dir.empty()) {
    parts.inotify_fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    auto dir = args.config_file.empty() ? std::filesystem::path(args.config_dir)
                                        : std::filesystem::path(args.config_file).parent_path();
    if (dir.empty()) dir = ".";
    // A writer closing a file, or a name renamed into place (the kubelet's
    // ConfigMap volumes rename a new ..data symlink over the old): the file
    // is complete by then.
    if (parts.inotify_fd < 0 || inotify_add_watch(parts.inotify_fd, dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO) < 0)
      spdlog::warn("cannot watch {} for config changes: {} (SIGHUP still reloads)", dir.string(),
                   std::strerror(errno));
  }
  auto session = open_nvml(args.driver);
  if (!session) {
    std::cerr << command << ": " << session.error().message << '\n';
    return nullptr;
  }
  host->session_.emplace(std::move(*session));
  auto inventory = plugin::read_node_inventory(*host->session_);
  if (!inventory) {
    std::cerr << command << ": " << inventory.error().message << '\n';
    return nullptr;
  }
  plugin::PluginOptions opts;
  opts.kubelet_dir = args.kubelet_dir;
  opts.config = *config;
  opts.health.ignored_xids = {args.ignored_xids.begin(), args.ignored_xids.end()};
  opts.health.recovery = millis(args.recovery_seconds);
  opts.gpu_answers = plugin::nvml_gpu_probe(*host->session_);
  opts.quota = args.quota;
  opts.quota.inject = !args.no_quota_library;
  opts.quota.memory_hook =
      memory_hook_settings(args.memory_hook, args.driver, args.driver_root, args.container_driver_root);
  opts.cdi.spec_dir = args.cdi_spec_dir;
  opts.cdi.names.vendor = args.cdi_vendor;
  opts.cdi.driver_root = args.driver_root;
  opts.cdi.dev_root = args.dev_root;
  opts.cdi.container_driver_root = args.container_driver_root;
  opts.cdi.cdi_hook = args.cdi_hook;
  if (auto names = sharing::check_cdi_names(opts.cdi.names); !names) {
    std::cerr << command << ": --cdi-vendor: " << names.error().message << '\n';
    return nullptr;
  }
  host->manager_ = std::make_unique<plugin::PluginManager>(opts);
  auto& manager = *host->manager_;
  if (auto started = manager.start(*inventory); !started) {
    std::cerr << command << ": " << started.error().message << '\n';
    return nullptr;
  }
  std::string names;
  for (const auto& r : manager.resources()) names += (names.empty() ? "" : ", ") + r;
  spdlog::info("serving {} resources from {} GPUs in {}: {}", manager.resources().size(), inventory->gpus.size(),
               args.kubelet_dir, names);
  std::cout << command << ": ready: " << names << std::endl;

  std::vector<uint32_t> gpus;
  for (const auto& g : inventory->gpus) gpus.push_back(g.index);
  plugin::EventSinks sinks;
  sinks.health = [&manager](const sharing::HealthEvent& e) { manager.on_event(e); };
  sinks.mig_changed = [fd = parts.mig_fd] {
    uint64_t one = 1;
    [[maybe_unused]] auto n = write(fd, &one, sizeof one);
  };
  if (opts.quota.inject) {
    plugin::LedgerSweeper::Options sweep;
    sweep.root = args.quota.ledger_root;
    // The kubelet's pod-resources socket sits beside its device-plugin directory.
    sweep.pod_resources_socket =
        (std::filesystem::path(args.kubelet_dir).parent_path() / "pod-resources" / "kubelet.sock").string();
    if (opts.quota.memory_hook.enabled()) sweep.cdi_spec_dir = args.cdi_spec_dir;
    parts.ledgers = std::make_unique<plugin::LedgerSweeper>(std::move(sweep));
  }
  auto events = plugin::EventWatch::start(*host->session_, gpus, std::move(sinks));
  if (events) parts.events = std::move(*events);
  else spdlog::warn("no NVML events: {} (health stays as it is)", events.error().message);

  // One MPS control daemon per device with MPS shares; a share is Healthy
  // only while its daemon is up (docs/design-mps.md). With --mps-host the
  // daemons are `tessera mps-host`'s and outlive this process; without, they
  // are this process's children and end with it.
  if (!args.mps_host.empty()) {
    parts.daemons = std::make_unique<mps::HostClient>(args.mps_host);
  } else {
    mps::SupervisorOptions mps_options;
    mps_options.control.binary = args.mps_control;
    mps_options.control.library_dir = driver_library_dir(args.driver.nvml_library);
    mps_options.control.timeout = millis(args.mps_timeout_seconds);
    parts.daemons = std::make_unique<mps::Supervisor>(mps_options);
  }
  plugin::RuntimeOptions runtime_options;
  runtime_options.inventory_interval = millis(args.inventory_seconds);
  parts.runtime = std::make_unique<plugin::Runtime>(
      manager, [host = host.get()] { return plugin::read_node_inventory(*host->session_); }, parts.daemons.get(),
      runtime_options, plugin::RuntimeClock::now());
  return host;
}

PluginHost::~PluginHost() { stop(); }

Result<void> PluginHost::refresh_inventory() {
  auto inventory = plugin::read_node_inventory(*session_);
  if (!inventory) return unexpected(inventory.error());
  return manager_->update_inventory(std::move(*inventory));
}

void PluginHost::reload(const char* why) {
  spdlog::info("{}: reloading {}", why, args_.config_file.empty() ? "the default config" : args_.config_file);
  // An empty file at start means the defaults; at a reload it is a file
  // caught while being rewritten, or emptied by mistake: not a reason to drop
  // every sharing setting.
  if (!args_.config_file.empty() &&
      parts_->config_text.find_first_not_of(" \t\r\n") == std::string::npos) {
    spdlog::warn("config not reloaded: {} is empty; still serving the previous one", args_.config_file);
    return;
  }
  // The text compared is the text parsed: a file being rewritten is read once.
  auto fresh = args_.config_file.empty()
                   ? load_plugin_config("", args_.strict, args_.device_list_strategy)
                   : parse_plugin_config(parts_->config_text, args_.config_file, args_.strict, args_.device_list_strategy);
  if (!fresh) {
    spdlog::error("config not reloaded: it is invalid; still serving the previous one");
    return;
  }
  if (auto r = parts_->runtime->reload(*fresh, plugin::RuntimeClock::now()); !r) {
    spdlog::error("config not reloaded: {}", r.error().message);
    return;
  }
  if (on_reload_) on_reload_();
}

void PluginHost::load(const std::string& file, const char* why) {
  std::string text;  // the built-in defaults have none
  if (!file.empty()) {
    auto read = read_whole_file(file, 16u << 20);
    if (!read) {
      spdlog::error("config not reloaded: {}: {}; still serving the previous one", file, read.error().message);
      return;
    }
    text = std::move(*read);
  }
  args_.config_file = file;
  parts_->config_text = std::move(text);
  reload(why);
}

void PluginHost::use_config_file(std::string file, std::string why) {
  std::lock_guard lock(switch_mutex_);
  switch_to_ = {std::move(file), std::move(why)};
}

void PluginHost::run(const std::function<void()>& on_reload) {
  on_reload_ = on_reload;
  auto& parts = *parts_;
  while (true) {
    // (The MPS daemons' changes reach the shares through the runtime's own
    // thread, not this loop.)
    pollfd p[3] = {{parts.signal_fd, POLLIN, 0}, {parts.mig_fd, POLLIN, 0}, {parts.inotify_fd, POLLIN, 0}};
    int n = poll(p, parts.inotify_fd >= 0 ? 3 : 2, 250);
    bool mig_changed = n > 0 && (p[1].revents & POLLIN);
    if (mig_changed) {
      uint64_t count = 0;
      [[maybe_unused]] auto r = read(parts.mig_fd, &count, sizeof count);
    }
    parts.runtime->step(plugin::RuntimeClock::now(), mig_changed);
    std::optional<std::pair<std::string, std::string>> next;
    {
      std::lock_guard lock(switch_mutex_);
      next = std::exchange(switch_to_, std::nullopt);
    }
    if (next) load(next->first, next->second.c_str());
    if (n > 0 && parts.inotify_fd >= 0 && (p[2].revents & POLLIN)) {
      alignas(inotify_event) char buf[4096];
      while (read(parts.inotify_fd, buf, sizeof buf) > 0) {
      }
      // Reload only when the text changed: a ConfigMap update touches several names.
      if (auto text = file_text(args_.config_file); !text.empty() && text != parts.config_text) {
        parts.config_text = text;
        reload("the config file changed");
      }
    }
    if (n <= 0 || !(p[0].revents & POLLIN)) continue;
    signalfd_siginfo info{};
    if (read(parts.signal_fd, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) continue;
    if (info.ssi_signo == SIGHUP) {
      load(args_.config_file, "SIGHUP");
      continue;
    }
    spdlog::info("signal {}: stopping", info.ssi_signo);
    break;
  }
}

void PluginHost::stop() {
  if (!parts_) return;
  parts_->events.reset();
  if (manager_) manager_->stop();
  parts_->runtime.reset();  // no more health to hand to the shares
  // After the kubelet stopped seeing the shares: this process's own daemons
  // stop; `tessera mps-host`'s keep running for the next plugin to adopt.
  if (parts_->daemons) parts_->daemons->shutdown();
  parts_.reset();
}

void add_plugin_options(CLI::App& cmd, PluginArgs& args) {
  cmd.add_option("-f,--config-file", args.config_file,
                 "NVIDIA device-plugin config file (default: whole GPUs). Reloaded on SIGHUP and when the file\n"
                 "changes (a mounted ConfigMap's update); an invalid one is reported and the previous one kept");
  cmd.add_flag("--strict", args.strict, "Refuse a config file with warnings (as `tessera config validate --strict`)");
  cmd.add_option("--device-list-strategy", args.device_list_strategy,
                 "How containers are given their devices, for every config served (replaces its\n"
                 "flags.plugin.deviceListStrategy, as NVIDIA's plugin's flag does): envvar, volume-mounts,\n"
                 "cdi-annotations, cdi-cri (comma-separated; default: each config's own)")
      ->delimiter(',')
      ->check(CLI::IsMember(config::device_list_strategy_names()));
  add_driver_options(cmd, args.driver);
  cmd.add_option("--kubelet-dir", args.kubelet_dir, "The kubelet's device-plugin directory")->capture_default_str();
  cmd.add_option("--health-recovery", args.recovery_seconds,
                 "Seconds without a critical event before a device is Healthy again (once its GPU answers)")
      ->check(positive_number())
      ->capture_default_str();
  cmd.add_option("--ignore-xids", args.ignored_xids, "XIDs treated as application errors (NVIDIA's list by default)")
      ->delimiter(',');
  cmd.add_option("--inventory-interval", args.inventory_seconds,
                 "Seconds between inventory refreshes (MIG changes also refresh it at once)")
      ->check(positive_number())
      ->capture_default_str();
  cmd.add_option("--quota-library-dir", args.quota.library_dir,
                 "Host directory holding libtessera-cuda.so (the DaemonSet's init container puts it there). A shared\n"
                 "replica with a memory quota gets it mounted read-only at " TESSERA_CONTAINER_LIBRARY_DIR "\n"
                 "and LD_PRELOAD naming it")
      ->capture_default_str();
  cmd.add_option("--quota-ledger-root", args.quota.ledger_root,
                 "Host directory of the quota ledgers: for each container with a quota the plugin writes\n"
                 "<root>/<key>/limits and a fresh <root>/<key>/ledger before answering Allocate and mounts\n"
                 "them at " TESSERA_CONTAINER_LIMITS_FILE " (read-only) and " TESSERA_CONTAINER_LEDGER_FILE ";\n"
                 "ledgers no container holds (pod-resources) are removed. The plugin must see it at this same path")
      ->capture_default_str();
  cmd.add_option("--quota-preload", args.quota.preload,
                 "How a container's ld.so is told to load the library: env (LD_PRELOAD; a pod that sets its own\n"
                 "LD_PRELOAD replaces it and runs without a quota), file (<ledger root>/" TESSERA_PRELOAD_FILE_NAME
                 " mounted read-only\n"
                 "at " TESSERA_CONTAINER_PRELOAD_FILE ", which replaces an image's own), or both")
      ->transform(CLI::CheckedTransformer(std::map<std::string, sharing::Preload>{
          {"env", sharing::Preload::env}, {"file", sharing::Preload::file}, {"both", sharing::Preload::both}}))
      ->default_str("both");
  cmd.add_option("--mps-control", args.mps_control,
                 "NVIDIA's MPS control program (a path, or a name on PATH). With sharing.mps and no --mps-host the\n"
                 "plugin runs one control daemon per GPU or MIG device with MPS shares itself, under the config's\n"
                 "mpsRoot; they are its children and end with it. A share is Healthy only while its daemon is up")
      ->capture_default_str();
  cmd.add_option("--mps-timeout", args.mps_timeout_seconds,
                 "Seconds an MPS control command may take before its daemon counts as not answering (without\n"
                 "--mps-host)")
      ->check(positive_number())
      ->capture_default_str();
  cmd.add_option("--mps-host", args.mps_host,
                 "The socket of `tessera mps-host` (e.g. " + std::string(mps::kDefaultHostSocket) + "): the MPS control\n"
                 "daemons are its, so they outlive this process (a restart or an upgrade keeps every MPS client);\n"
                 "the plugin says which it wants, adopts those running, and follows their health as the host reports\n"
                 "it. --mps-control and --mps-timeout are then the host's options")
      ->envname("TESSERA_MPS_HOST");
  cmd.add_option("--cdi-spec-dir", args.cdi_spec_dir,
                 "Where the CDI spec of the advertised devices is written (<vendor>-gpu.json, replaced\n"
                 "atomically, rewritten when the MIG layout changes) when the config's deviceListStrategy has\n"
                 "cdi-cri or cdi-annotations; the container runtime must read this directory")
      ->capture_default_str();
  cmd.add_option("--cdi-vendor", args.cdi_vendor,
                 "The vendor of the CDI names, as NVIDIA's device plugin names devices: <vendor>/gpu=<UUID or\n"
                 "index> for a GPU, <vendor>/gpu=<MIG UUID or gpu:index> for a MIG device")
      ->capture_default_str();
  cmd.add_option("--driver-root", args.driver_root,
                 "The driver's root on the host: its libraries and programs as the CDI specs mount them\n"
                 "(default: the config's flags.nvidiaDriverRoot, /)");
  cmd.add_option("--dev-root", args.dev_root,
                 "The root of the driver's device nodes on the host, <dir>/dev/nvidia0 (default: the config's\n"
                 "flags.nvidiaDevRoot, else the driver root)");
  cmd.add_option("--container-driver-root", args.container_driver_root,
                 "Where this process sees the driver root, mounted (default: the config's\n"
                 "flags.plugin.containerDriverRoot, /driver-root; when it does not exist, the driver root itself)");
  add_cdi_hook_option(cmd, args.cdi_hook);
  cmd.add_flag("--no-quota-library", args.no_quota_library,
               "Hand shared replicas only their TESSERA_DEVICE_MEMORY_LIMIT_<k>: no library, ledger, mounts or LD_PRELOAD");
  add_memory_hook_option(cmd, args.memory_hook);
}

}  // namespace tessera::cli
