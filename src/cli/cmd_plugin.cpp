// tessera plugin: the kubelet device plugin for this node.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <poll.h>
#include <unistd.h>

#include <iostream>

#include "cli/commands.hpp"
#include "cli/nvml_driver.hpp"
#include "cli/output.hpp"
#include "config/device_plugin.hpp"
#include "config/yaml_document.hpp"
#include "cuda_quota/env.h"
#include "mps/supervisor.hpp"
#include "nvml/device.hpp"
#include "plugin/event_watch.hpp"
#include "plugin/node_inventory.hpp"
#include "plugin/plugin_manager.hpp"
#include "plugin/runtime.hpp"
#include "sharing/allocate.hpp"

namespace tessera::cli {
namespace {

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
  std::string mps_control = "nvidia-cuda-mps-control";
  double mps_timeout_seconds = 5;
};

std::optional<config::DevicePluginConfig> load_config(const std::string& file, bool strict) {
  config::Diagnostics diags;
  if (file.empty()) return config::parse_device_plugin_config("version: v1\n", "<defaults>", diags);
  auto c = config::load_device_plugin_config(file, diags);
  if (strict) diags = config::warnings_as_errors(diags);
  print_diagnostics(diags, std::cerr);
  if (diags.has_errors()) return std::nullopt;
  return c;
}

int run_plugin(const PluginArgs& args) {
  auto config = load_config(args.config_file, args.strict);
  if (!config) return kExitInvalid;
  auto session = open_nvml(args.driver);
  if (!session) {
    std::cerr << "tessera plugin: " << session.error().message << '\n';
    return kExitInvalid;
  }
  auto inventory = plugin::read_node_inventory(*session);
  if (!inventory) {
    std::cerr << "tessera plugin: " << inventory.error().message << '\n';
    return kExitInvalid;
  }
  plugin::PluginOptions opts;
  opts.kubelet_dir = args.kubelet_dir;
  opts.config = *config;
  opts.health.ignored_xids = {args.ignored_xids.begin(), args.ignored_xids.end()};
  opts.health.recovery = std::chrono::milliseconds(static_cast<int64_t>(args.recovery_seconds * 1000));
  opts.gpu_answers = plugin::nvml_gpu_probe(*session);
  opts.quota = args.quota;
  opts.quota.inject = !args.no_quota_library;
  plugin::PluginManager manager(opts);

  // Signals arrive on a descriptor: no async handlers.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
  // MIG changes wake the loop at once for a fresh inventory.
  int mig_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

  if (auto started = manager.start(*inventory); !started) {
    std::cerr << "tessera plugin: " << started.error().message << '\n';
    close(sfd);
    close(mig_fd);
    return kExitInvalid;
  }
  std::string names;
  for (const auto& r : manager.resources()) names += (names.empty() ? "" : ", ") + r;
  spdlog::info("serving {} resources from {} GPUs in {}: {}", manager.resources().size(), inventory->gpus.size(),
               args.kubelet_dir, names);
  std::cout << "tessera plugin: ready: " << names << std::endl;

  std::vector<uint32_t> gpus;
  for (const auto& g : inventory->gpus) gpus.push_back(g.index);
  plugin::EventSinks sinks;
  sinks.health = [&manager](const sharing::HealthEvent& e) { manager.on_event(e); };
  sinks.mig_changed = [mig_fd] {
    uint64_t one = 1;
    [[maybe_unused]] auto n = write(mig_fd, &one, sizeof one);
  };
  auto events = plugin::EventWatch::start(*session, gpus, std::move(sinks));
  if (!events) spdlog::warn("no NVML events: {} (health stays as it is)", events.error().message);

  // One MPS control daemon per device with MPS shares; a share is Healthy
  // only while its daemon answers (docs/design-mps.md).
  mps::SupervisorOptions mps_options;
  mps_options.control.binary = args.mps_control;
  mps_options.control.timeout = std::chrono::milliseconds(static_cast<int64_t>(args.mps_timeout_seconds * 1000));
  mps::Supervisor daemons(mps_options);
  plugin::RuntimeOptions runtime_options;
  runtime_options.inventory_interval = std::chrono::milliseconds(static_cast<int64_t>(args.inventory_seconds * 1000));
  plugin::Runtime runtime(
      manager, [&session] { return plugin::read_node_inventory(*session); }, &daemons, runtime_options,
      plugin::RuntimeClock::now());
  while (true) {
    pollfd p[2] = {{sfd, POLLIN, 0}, {mig_fd, POLLIN, 0}};
    int n = poll(p, 2, 250);
    bool mig_changed = n > 0 && (p[1].revents & POLLIN);
    if (mig_changed) {
      uint64_t count = 0;
      [[maybe_unused]] auto r = read(mig_fd, &count, sizeof count);
    }
    runtime.step(plugin::RuntimeClock::now(), mig_changed);
    if (n <= 0 || !(p[0].revents & POLLIN)) continue;
    signalfd_siginfo info{};
    if (read(sfd, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) continue;
    if (info.ssi_signo == SIGHUP) {
      spdlog::info("SIGHUP: reloading {}", args.config_file.empty() ? "the default config" : args.config_file);
      auto fresh = load_config(args.config_file, args.strict);
      if (!fresh) {
        spdlog::error("config not reloaded: it is invalid; still serving the previous one");
        continue;
      }
      if (auto r = runtime.reload(*fresh, plugin::RuntimeClock::now()); !r)
        spdlog::error("config not reloaded: {}", r.error().message);
      continue;
    }
    spdlog::info("signal {}: stopping", info.ssi_signo);
    break;
  }
  if (events) events->reset();
  manager.stop();
  daemons.stop();  // after the kubelet stopped seeing the shares
  close(sfd);
  close(mig_fd);
  std::cout << "tessera plugin: stopped" << std::endl;
  return kExitOk;
}

}  // namespace

void add_plugin_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<PluginArgs>();
  auto* cmd = app.add_subcommand(
      "plugin",
      "Serve this node's GPUs, MIG devices and shared replicas to the kubelet (device-plugin API v1beta1).\n"
      "Reads NVIDIA's device-plugin config; registers one resource per name; re-registers when the kubelet\n"
      "restarts; marks devices Unhealthy on critical XID/ECC events (and every GPU when NVML's event wait\n"
      "fails), and Healthy again only after a quiet period and once the GPU answers. MIG changes are seen\n"
      "at once through NVML's events. SIGHUP reloads the config; SIGTERM stops and removes the sockets.");
  cmd->add_option("-c,--config", args->config_file, "NVIDIA device-plugin config file (default: whole GPUs)");
  cmd->add_flag("--strict", args->strict, "Refuse a config file with warnings (as `tessera config validate --strict`)");
  add_driver_options(*cmd, args->driver);
  cmd->add_option("--kubelet-dir", args->kubelet_dir, "The kubelet's device-plugin directory")
      ->capture_default_str();
  cmd->add_option("--health-recovery", args->recovery_seconds,
                  "Seconds without a critical event before a device is Healthy again (once its GPU answers)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--ignore-xids", args->ignored_xids, "XIDs treated as application errors (NVIDIA's list by default)")
      ->delimiter(',');
  cmd->add_option("--inventory-interval", args->inventory_seconds,
                  "Seconds between inventory refreshes (MIG changes also refresh it at once)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--quota-library-dir", args->quota.library_dir,
                  "Host directory holding libtessera-cuda.so (the DaemonSet's init container puts it there). A shared\n"
                  "replica with a memory quota gets it mounted read-only at " TESSERA_CONTAINER_LIBRARY_DIR "\n"
                  "and LD_PRELOAD naming it")
      ->capture_default_str();
  cmd->add_option("--quota-ledger-root", args->quota.ledger_root,
                  "Host directory of the quota ledgers: for each container with a quota the plugin creates\n"
                  "<root>/<key> (mode 1777) before answering Allocate and mounts it read-write at\n"
                  TESSERA_CONTAINER_LEDGER_DIR ". The plugin must see it at this same path")
      ->capture_default_str();
  cmd->add_option("--quota-preload", args->quota.preload,
                  "How a container's ld.so is told to load the library: env (LD_PRELOAD; a pod that sets its own\n"
                  "LD_PRELOAD replaces it and runs without a quota), file (<ledger root>/" TESSERA_PRELOAD_FILE_NAME
                  " mounted read-only\n"
                  "at " TESSERA_CONTAINER_PRELOAD_FILE ", which replaces an image's own), or both")
      ->transform(CLI::CheckedTransformer(std::map<std::string, sharing::Preload>{
          {"env", sharing::Preload::env}, {"file", sharing::Preload::file}, {"both", sharing::Preload::both}}))
      ->default_str("both");
  cmd->add_option("--mps-control", args->mps_control,
                  "NVIDIA's MPS control program (a path, or a name on PATH). With sharing.mps the plugin runs one\n"
                  "control daemon per GPU or MIG device with MPS shares, under the config's mpsRoot, and a share is\n"
                  "Healthy only while its daemon answers")
      ->capture_default_str();
  cmd->add_option("--mps-timeout", args->mps_timeout_seconds,
                  "Seconds an MPS control command may take before its daemon counts as not answering")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--no-quota-library", args->no_quota_library,
                "Hand shared replicas only their TESSERA_DEVICE_MEMORY_LIMIT_<k>: no library, ledger, mounts or LD_PRELOAD");
  cmd->callback([args, &exit_code] { exit_code = run_plugin(*args); });
}

}  // namespace tessera::cli
