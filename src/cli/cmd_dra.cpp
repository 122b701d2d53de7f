// tessera dra: the DRA driver, a kubelet plugin. Publishes the node's GPUs
// as ResourceSlices (every whole GPU and every legal MIG placement, sharing
// per-GPU counters, in an order that keeps first fit a good packing),
// prepares the claims the scheduler allocated (cutting the MIG instance
// chosen, writing the claim's CDI spec and quota files) and unprepares
// them. docs/design-dra.md.
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include "cli/numbers.hpp"
#include "cli/commands.hpp"
#include "cli/dra_args.hpp"
#include "cli/kube_args.hpp"
#include "cli/nvml_driver.hpp"
#include "cli/output.hpp"
#include "dra/driver.hpp"
#include "dra/kubelet_plugin.hpp"
#include "dra/publisher.hpp"
#include "exporter/server.hpp"
#include "mps/supervisor.hpp"
#include "nvml/device.hpp"
#include "plugin/event_watch.hpp"

namespace tessera::cli {
namespace {


// Publishes the driver's pool whenever it changes, on a thread of its own:
// a failed publish is retried with backoff (1 s doubling to 30 s), never in
// a busy loop; a change that comes meanwhile is published with the next try.
class PublishLoop {
 public:
  PublishLoop(dra::Driver& driver, dra::Publisher& publisher) : driver_(driver), publisher_(publisher) {
    thread_ = std::thread([this] { run(); });
  }
  ~PublishLoop() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  void poke() {
    std::lock_guard lock(mutex_);
    dirty_ = true;
    wake_.notify_all();
  }

 private:
  void run() {
    auto backoff = std::chrono::seconds(1);
    bool failing = false;
    std::unique_lock lock(mutex_);
    while (!stop_) {
      wake_.wait(lock, [&] { return stop_ || dirty_; });
      if (stop_) break;
      dirty_ = false;
      lock.unlock();
      auto r = publisher_.publish(driver_.pool());
      lock.lock();
      if (r) {
        if (failing) spdlog::info("ResourceSlices published again (generation {})", publisher_.generation());
        failing = false;
        backoff = std::chrono::seconds(1);
        continue;
      }
      if (!failing) spdlog::error("cannot publish the ResourceSlices: {}; retrying", r.error().message);
      failing = true;
      dirty_ = true;
      wake_.wait_for(lock, backoff, [&] { return stop_; });
      backoff = std::min(backoff * 2, std::chrono::seconds(30));
    }
  }

  dra::Driver& driver_;
  dra::Publisher& publisher_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool dirty_ = true;
  std::thread thread_;
};

}  // namespace

int run_dra(const DraArgs& args) {
  const std::string cmd = "tessera dra";
  std::string node = args.node_name;
  if (node.empty())
    if (const char* env = std::getenv("NODE_NAME")) node = env;
  if (node.empty()) {
    std::cerr << cmd << ": no Node name: pass --node-name or set NODE_NAME (from the downward API's spec.nodeName)\n";
    return kExitUsage;
  }
  std::optional<exporter::ListenAddress> metrics_address;
  if (!args.metrics_listen.empty()) {
    auto a = exporter::parse_listen(args.metrics_listen);
    if (!a) {
      std::cerr << cmd << ": --metrics-listen " << a.error().message << '\n';
      return kExitUsage;
    }
    metrics_address = *a;
  }
  std::optional<sharing::dra::SharesMode> shares_mode;
  if (!args.consumable_shares.empty() && args.consumable_shares != "disabled") {
    auto mode = sharing::dra::parse_shares_mode(args.consumable_shares);
    if (!mode) {
      std::cerr << cmd << ": --consumable-shares: " << mode.error().message << '\n';
      return kExitUsage;
    }
    if (args.memory_shares && mode->kind != sharing::dra::SharesMode::Kind::memory) {
      std::cerr << cmd << ": --memory-shares is --consumable-shares memory, not " << args.consumable_shares << '\n';
      return kExitUsage;
    }
    shares_mode = *mode;
  }
  if (args.order != "tessera" && args.order != "by-start") {
    std::cerr << cmd << ": --order must be tessera or by-start, not " << args.order << '\n';
    return kExitUsage;
  }
  // Signals are taken by the main loop (signalfd): blocked before any thread starts.
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  pthread_sigmask(SIG_BLOCK, &mask, nullptr);
  const int signal_fd = signalfd(-1, &mask, SFD_CLOEXEC);

  kube::ClientOptions api;
  api.max_attempts = 3;
  api.request_timeout = std::chrono::seconds(10);
  auto client = make_kube_client(args.kube, cmd, api);
  if (!client) return kExitInvalid;
  auto session = open_nvml(args.nvml);
  if (!session) {
    std::cerr << cmd << ": " << session.error().message << '\n';
    return kExitInvalid;
  }

  dra::DriverOptions options;
  options.driver = args.driver_name;
  options.node = node;
  const std::string plugin_dir = args.kubelet_dir + "/plugins/" + args.driver_name;
  options.state_dir = args.state_dir.empty() ? dra::default_state_dir(plugin_dir, args.driver_name) : args.state_dir;
  options.cdi.write_specs = true;
  options.cdi.spec_dir = args.cdi_spec_dir;
  options.cdi.driver_root = args.driver_root;
  options.cdi.dev_root = args.dev_root;
  options.cdi.container_driver_root = args.container_driver_root;
  options.cdi.cdi_hook = args.cdi_hook;
  options.cdi.names.vendor = "k8s." + args.driver_name;
  options.order = args.order == "by-start" ? sharing::dra::Order::by_start : sharing::dra::Order::tessera;
  options.memory_shares = args.memory_shares || shares_mode.has_value();
  if (shares_mode) options.shares = *shares_mode;
  options.switch_mig_mode = !args.no_mig_mode_switch;
  options.quota = args.quota;
  options.quota.inject = !args.no_quota_library;
  options.quota.memory_hook =
      memory_hook_settings(args.memory_hook, args.nvml, args.driver_root, args.container_driver_root);
  options.health.recovery = millis(args.recovery_seconds);
  // MPS daemons for the claims that ask for them: tessera mps-host's, or this process's children.
  std::unique_ptr<mps::Daemons> daemons;
  if (!args.mps_host.empty()) {
    daemons = std::make_unique<mps::HostClient>(args.mps_host);
  } else {
    mps::SupervisorOptions mps_options;
    mps_options.control.binary = args.mps_control;
    mps_options.control.library_dir = driver_library_dir(args.nvml.nvml_library);
    daemons = std::make_unique<mps::Supervisor>(mps_options);
  }
  options.daemons = daemons.get();
  options.mps_root = args.mps_root;
  options.mps_start_timeout = millis(args.mps_timeout_seconds);
  options.nvidia_smi = args.nvidia_smi;
  options.sysfs = args.sysfs;
  // A simulated node keeps its own boot id (`tessera sim reboot` changes it).
  if (!args.nvml.sim.empty()) options.boot_id_file = args.nvml.sim + "/proc/sys/kernel/random/boot_id";
  options.health.ignored_xids = {args.ignored_xids.begin(), args.ignored_xids.end()};
  if (auto n = client->get_node(node); n) options.node_uid = (*n)["metadata"].value("uid", "");
  else spdlog::warn("cannot read Node {}: {}; its ResourceSlices get no owner", node, n.error().message);

  dra::ApiClaimSource claims(*client);
  auto driver = dra::Driver::start(*session, options, claims);
  if (!driver) {
    std::cerr << cmd << ": " << driver.error().message << '\n';
    return kExitInvalid;
  }
  dra::PoolSpec spec;
  spec.driver = options.driver;
  spec.node = node;
  spec.node_uid = options.node_uid;
  spec.memory_shares = options.memory_shares;
  spec.shares = options.shares;
  dra::Publisher publisher(*client, spec);
  PublishLoop loop(**driver, publisher);
  (*driver)->on_change([&loop] { loop.poke(); });

  dra::KubeletPluginOptions kp;
  kp.driver = args.driver_name;
  kp.dra_socket = plugin_dir + "/dra.sock";
  kp.registration_socket = args.kubelet_dir + "/plugins_registry/" + args.driver_name + "-reg.sock";
  auto plugin = dra::KubeletPlugin::start(kp, **driver);
  if (!plugin) {
    std::cerr << cmd << ": " << plugin.error().message << '\n';
    return kExitInvalid;
  }
  std::vector<uint32_t> indices;
  if (auto count = session->device_count(); count)
    for (uint32_t i = 0; i < *count; ++i) indices.push_back(i);
  plugin::EventSinks sinks;
  sinks.health = [&](const sharing::HealthEvent& e) { (*driver)->record_health(e); };
  sinks.mig_changed = [&] {
    if (auto r = (*driver)->refresh(); !r) spdlog::warn("cannot read the GPUs after a MIG change: {}", r.error().message);
  };
  auto events = plugin::EventWatch::start(*session, indices, sinks);
  if (!events) spdlog::warn("no NVML events ({}): health is not watched", events.error().message);
  // /metrics reads the driver's counters under its lock; /healthz answers while the kubelet can
  // reach the plugin as it does (both sockets there and answering), 503 with why when it cannot.
  std::unique_ptr<exporter::TextEndpoint> metrics;
  if (metrics_address) {
    auto started = exporter::TextEndpoint::start(
        *metrics_address, [&d = **driver, &publisher] { return d.metrics_text() + publisher.metrics_text(); },
        [&p = **plugin] { return p.self_check(); });
    if (!started) {
      std::cerr << cmd << ": --metrics-listen: " << started.error().message << '\n';
      (*plugin)->stop();
      return kExitInvalid;
    }
    metrics = std::move(*started);
    spdlog::info("metrics on http://{}:{}/metrics", metrics_address->host, metrics_address->port);
  }
  spdlog::info("DRA driver {} on node {}: {} GPUs, order {}, memory shares {}", args.driver_name, node, indices.size(),
               args.order, options.memory_shares ? to_string(options.shares) : "off");

  auto next_resync = std::chrono::steady_clock::now() + millis(args.resync_seconds);
  for (;;) {
    pollfd p{signal_fd, POLLIN, 0};
    if (::poll(&p, 1, 1000) > 0) {
      signalfd_siginfo info{};
      if (::read(signal_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
        spdlog::info("signal {}: stopping", info.ssi_signo);
        break;
      }
    }
    (*driver)->recover_health();
    if (std::chrono::steady_clock::now() >= next_resync) {
      next_resync = std::chrono::steady_clock::now() + millis(args.resync_seconds);
      if (auto r = (*driver)->refresh(); !r) spdlog::warn("cannot read the GPUs: {}", r.error().message);
    }
  }
  events = nullptr;
  metrics = nullptr;
  (*plugin)->stop();
  daemons->shutdown();  // a Supervisor stops its daemons; tessera mps-host keeps its
  ::close(signal_fd);
  std::cout << cmd << ": stopped" << std::endl;
  return kExitOk;
}


void add_dra_options(CLI::App& cmd, DraArgs& args, bool with_common) {
  // What only the DRA driver has (`tessera node --mode dra` takes these too).
  cmd.add_option("--driver-name", args.driver_name, "The DRA driver's name (NVIDIA's: gpu.nvidia.com)")
      ->capture_default_str();
  cmd.add_option("--order", args.order,
                  "Device order in the slices, the scheduler's first fit: tessera (small MIG profiles from the end\n"
                  "of a GPU, the fullest GPU first: 0.73-0.78 of by-start's stranded claims at half load,\n"
                  "0.94-1.06 near full, in bench_dra's traces; docs/benchmarks.md) or by-start (NVIDIA's)")
      ->capture_default_str();
  cmd.add_flag("--memory-shares", args.memory_shares,
                "GPUs and MIG devices take many claims, each asking for `memory` (1 MiB steps); each claim's share\n"
                "is enforced by the quota library");
  cmd.add_option("--consumable-shares", args.consumable_shares,
                 "NVIDIA's consumable-shares modes, for claims written for its driver: memory (as --memory-shares),\n"
                 "unlimited (a claim takes no memory unless it asks, any number share a device), or N (as unlimited,\n"
                 "with a `shares` capacity of N, one per claim); disabled or empty: off");
  cmd.add_flag("--no-mig-mode-switch", args.no_mig_mode_switch,
                "Never change a GPU's MIG mode (by default Hopper and newer switch at prepare, as they need no reset)");
  cmd.add_option("--resync", args.resync_seconds, "Seconds between reads of the GPUs (instances others made)")
      ->check(positive_number())
      ->capture_default_str();
  cmd.add_option("--mps-root", args.mps_root,
                 "Host directory of the MPS daemons' pipe and log directories (<root>/<device UUID>/pipe) and of\n"
                 "the clients' /dev/shm (<root>/shm), for claims whose config asks for MPS")
      ->capture_default_str();
  if (!with_common) return;
  cmd.add_option("--metrics-listen", args.metrics_listen,
                 "Serve the driver's /metrics (prepares, unprepares and their latency, claims prepared, MIG\n"
                 "instances cut; docs/metrics.md) and /healthz (503 with why when the kubelet cannot reach\n"
                 "the driver's sockets) on HOST:PORT (default: none)");
  // What `tessera node` has under the device plugin's names: the NVML
  // library, the API server, the Node, the kubelet's and CDI's directories,
  // the quota library, health.
  add_driver_options(cmd, args.nvml);
  add_kube_options(cmd, args.kube);
  cmd.add_option("--node-name", args.node_name, "This node's Node object (default: $NODE_NAME)");
  cmd.add_option("--kubelet-dir", args.kubelet_dir,
                  "The kubelet's root: sockets go to plugins_registry/ and plugins/<driver>/")
      ->capture_default_str();
  cmd.add_option("--state-dir", args.state_dir,
                 "Where the checkpoint is kept (default: <kubelet dir>/plugins/<driver>/tessera; a\n"
                 "checkpoint.json of NVIDIA's DRA driver in <kubelet dir>/plugins/<driver> is left alone)");
  cmd.add_option("--cdi-spec-dir", args.cdi_spec_dir, "Where the claims' CDI specs go")->capture_default_str();
  cmd.add_option("--driver-root", args.driver_root, "The driver's root on the host (NVIDIA's nvidiaDriverRoot)")
      ->capture_default_str();
  cmd.add_option("--dev-root", args.dev_root, "The host root of dev/ (default: the driver root)");
  cmd.add_option("--container-driver-root", args.container_driver_root,
                  "Where this process sees the driver root (when it exists; else the driver root itself)")
      ->capture_default_str();
  add_cdi_hook_option(cmd, args.cdi_hook);
  cmd.add_option("--quota-library-dir", args.quota.library_dir, "Host directory holding libtessera-cuda.so")
      ->capture_default_str();
  cmd.add_option("--quota-ledger-root", args.quota.ledger_root, "Host directory of the claims' quota files")
      ->capture_default_str();
  cmd.add_option("--quota-preload", args.quota.preload, "How a memory share loads the quota library: env, file or both")
      ->transform(CLI::CheckedTransformer(std::map<std::string, sharing::Preload>{
          {"env", sharing::Preload::env}, {"file", sharing::Preload::file}, {"both", sharing::Preload::both}}))
      ->default_str("both");
  cmd.add_flag("--no-quota-library", args.no_quota_library, "Memory shares are counted by the scheduler only");
  add_memory_hook_option(cmd, args.memory_hook);
  cmd.add_option("--health-recovery", args.recovery_seconds,
                  "Seconds without a new critical XID before a tainted device is untainted (its GPU must answer)")
      ->check(positive_number())
      ->capture_default_str();
  cmd.add_option("--ignore-xids", args.ignored_xids, "XIDs that do not taint (application errors)")
      ->delimiter(',')
      ->capture_default_str();
  cmd.add_option("--mps-control", args.mps_control,
                 "NVIDIA's MPS control program: without --mps-host the driver runs one daemon per device a claim\n"
                 "asks MPS of, as its own children (they end with it)")
      ->capture_default_str();
  cmd.add_option("--mps-host", args.mps_host,
                 "The socket of `tessera mps-host` (e.g. " + std::string(mps::kDefaultHostSocket) + "): the daemons\n"
                 "are its, so they outlive this process; --mps-control is then the host's option")
      ->envname("TESSERA_MPS_HOST");
  cmd.add_option("--nvidia-smi", args.nvidia_smi,
                 "NVIDIA's nvidia-smi, which sets a GPU's time-slice interval for claims that name one\n"
                 "(timeSlicingConfig.interval: `compute-policy -i UUID --set-timeslice N`); empty: such claims are refused")
      ->capture_default_str();
  cmd.add_option("--sysfs", args.sysfs,
                 "Where sysfs is mounted: each GPU's PCIe root and NUMA node, published as the standard attributes\n"
                 "resource.kubernetes.io/pcieRoot and numaNode (empty: not read)")
      ->capture_default_str();
  cmd.add_option("--mps-timeout", args.mps_timeout_seconds, "Seconds a prepare waits for its MPS daemon to answer")
      ->check(positive_number())
      ->capture_default_str();
}

void add_dra_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<DraArgs>();
  auto* cmd = app.add_subcommand(
      "dra",
      "The DRA driver (Kubernetes 1.34+, resource.k8s.io/v1; partitionable devices and consumable capacity\n"
      "from 1.36): a kubelet plugin, one per GPU node. Publishes the node's GPUs as ResourceSlices (every\n"
      "whole GPU and every legal MIG placement, sharing per-GPU counters so the scheduler never hands out\n"
      "two that overlap), with NVIDIA's driver name, device classes and attributes, so claims written for\n"
      "NVIDIA's DRA driver work unchanged. At NodePrepareResources it cuts the MIG instance the scheduler\n"
      "chose and writes the claim's CDI spec; at NodeUnprepareResources it destroys it. A checkpoint in the\n"
      "state directory records every change before it is made.");
  add_dra_options(*cmd, *args, true);
  cmd->callback([args, &exit_code] { exit_code = run_dra(*args); });
}

}  // namespace tessera::cli
