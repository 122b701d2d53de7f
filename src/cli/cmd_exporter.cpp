// tessera exporter: per-GPU, per-MIG-device and per-replica metrics in
// dcgm-exporter's names, attributed to pods, on an HTTP endpoint
// (docs/metrics.md).
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <ctime>
#include <iostream>

#include "cli/commands.hpp"
#include "cli/nvml_driver.hpp"
#include "cli/output.hpp"
#include "exporter/sampler.hpp"
#include "exporter/server.hpp"
#include "plugin/pod_resources.hpp"
#include "sharing/allocate.hpp"

namespace tessera::cli {
namespace {

struct ExporterArgs {
  DriverOptions driver;
  std::string listen = "127.0.0.1:9400";
  std::string pod_resources = plugin::kDefaultPodResourcesSocket;
  double pod_resources_timeout = 1;
  double interval = 10;
  double gpm_window = 1;
  std::string ledger_root = sharing::kDefaultLedgerRoot;
  std::string resource_prefix = "nvidia.com/";
  std::string hostname;
};

std::string default_hostname() {
  if (const char* node = std::getenv("NODE_NAME"); node && *node) return node;
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return {};
  return buf;
}

int run_exporter(const ExporterArgs& args) {
  auto address = exporter::parse_listen(args.listen);
  if (!address) {
    std::cerr << "tessera exporter: --listen " << address.error().message << '\n';
    return kExitUsage;
  }
  // SIGTERM and SIGINT are taken by sigtimedwait below; blocked before any thread starts.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto session = open_nvml(args.driver);
  if (!session) {
    std::cerr << "tessera exporter: " << session.error().message << '\n';
    return kExitInvalid;
  }
  exporter::SamplerOptions options;
  options.interval = millis(args.interval);
  options.gpm_window = millis(args.gpm_window);
  options.pod_resources_socket = args.pod_resources;
  options.pod_resources_timeout = millis(args.pod_resources_timeout);
  options.resource_prefix = args.resource_prefix;
  options.ledger_root = args.ledger_root;
  options.hostname = args.hostname.empty() ? default_hostname() : args.hostname;
  options.version = TESSERA_VERSION;
  auto service = exporter::Service::start(std::move(*session), options, *address);
  if (!service) {
    std::cerr << "tessera exporter: " << service.error().message << '\n';
    return kExitInvalid;
  }
  std::cout << "tessera exporter: listening on http://" << address->host << ":" << (*service)->port()
            << "/metrics (every " << args.interval << " s)" << std::endl;

  int signal = 0;
  while (signal <= 0) {
    timespec tick{1, 0};
    signal = sigtimedwait(&stop_signals, nullptr, &tick);
    if (signal < 0 && errno != EAGAIN && errno != EINTR) break;
  }
  spdlog::info("tessera exporter: signal {}: stopping", signal);
  (*service)->stop();
  std::cout << "tessera exporter: stopped" << std::endl;
  return kExitOk;
}

}  // namespace

void add_exporter_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<ExporterArgs>();
  auto* cmd = app.add_subcommand(
      "exporter",
      "Serve Prometheus metrics for this node's GPUs, MIG devices and shared replicas on /metrics, in\n"
      "dcgm-exporter's names and labels (DCGM_FI_DEV_FB_USED, DCGM_FI_PROF_SM_ACTIVE, ...; gpu, UUID,\n"
      "GPU_I_PROFILE, GPU_I_ID, pod, namespace, container), read through NVML without DCGM. One thread samples\n"
      "every --interval: framebuffer, GPM activity (Hopper and newer; left out where NVML has none), temperature,\n"
      "power, clocks, ECC counts and Xid events. Scrapes return the last sample and never call NVML. Pod labels\n"
      "come from the kubelet's pod-resources API; a time-sliced or MPS replica gets its own\n"
      "tessera_replica_memory_{used,quota}_bytes from its container's quota ledger. /healthz answers 200 while\n"
      "samples are recent. A GPU whose NVML call fails shows tessera_device_up 0; the others keep flowing.\n"
      "SIGTERM or SIGINT stops it. Every series is described in docs/metrics.md.");
  add_driver_options(*cmd, args->driver);
  cmd->add_option("--listen", args->listen, "Address and port to serve on, HOST:PORT (:PORT for every address)")
      ->capture_default_str();
  cmd->add_option("--interval", args->interval, "Seconds between samples")
      ->check(CLI::Range(0.2, 3600.0))
      ->capture_default_str();
  cmd->add_option("--gpm-window", args->gpm_window,
                  "Seconds between a GPM pair's two samples (at least 0.1, at most half the interval)")
      ->check(CLI::Range(0.1, 1800.0))
      ->capture_default_str();
  cmd->add_option("--pod-resources", args->pod_resources,
                  "The kubelet's pod-resources socket; an empty value turns pod labels off")
      ->capture_default_str();
  cmd->add_option("--pod-resources-timeout", args->pod_resources_timeout,
                  "Seconds to wait for the kubelet's answer each interval")
      ->check(CLI::Range(0.05, 60.0))
      ->capture_default_str();
  cmd->add_option("--quota-ledger-root", args->ledger_root,
                  "Where the plugin keeps containers' quota ledgers (its --quota-ledger-root); an empty value turns "
                  "replica memory off")
      ->capture_default_str();
  cmd->add_option("--resource-prefix", args->resource_prefix, "Resources that count for pod labels")
      ->capture_default_str();
  cmd->add_option("--hostname", args->hostname, "The Hostname label (default: $NODE_NAME, else the host's name)");
  cmd->footer(
      "Exit codes: 0 stopped by a signal, 1 NVML could not be opened or the address is taken, 2 usage.\n"
      "Example: tessera exporter --sim /tmp/node --listen 127.0.0.1:9400 --interval 2 --pod-resources ''");
  cmd->callback([args, &exit_code] { exit_code = run_exporter(*args); });
}

}  // namespace tessera::cli
