// tessera node: the node agent. One process per GPU node that serves the
// device plugin, applies the MIG config its Node's nvidia.com/mig.config
// label names (evicting only the pods on devices the change destroys), keeps
// GPU-feature-discovery-compatible labels on the Node, supervises MPS daemons
// and, when asked, serves the metrics exporter. docs/design-node-agent.md.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "agent/mig_controller.hpp"
#include "agent/node_watch.hpp"
#include "cli/numbers.hpp"
#include "cli/commands.hpp"
#include "cli/dra_args.hpp"
#include "cli/kube_args.hpp"
#include "cli/output.hpp"
#include "cli/plugin_host.hpp"
#include "core/file_read.hpp"
#include "core/text.hpp"
#include "config/mig_parted.hpp"
#include "exporter/sampler.hpp"
#include "exporter/server.hpp"
#include "kube/client.hpp"
#include "plugin/pod_resources.hpp"
#include "sharing/node_labels.hpp"

namespace tessera::cli {
namespace {

struct NodeArgs {
  std::string mode = "device-plugin";
  DraArgs dra;  // --mode dra: the DRA driver's own options; the shared ones come from `plugin`
  PluginArgs plugin;
  std::string node_name;
  std::string kubeconfig;
  std::string mig_config;
  std::string state_dir = "/var/lib/tessera";
  double eviction_timeout = 300;
  bool no_node_labels = false;
  std::string metrics_listen;
  double metrics_interval = 10;
  std::string pod_resources = plugin::kDefaultPodResourcesSocket;
  bool allow_insecure_http = false;
  bool publish_layout = false;
  std::string device_plugin_configs;   // a directory of named device-plugin configs
  std::string device_plugin_default;   // the one served when the Node's label names none
};

// The Node label that names the device-plugin config to serve, as NVIDIA's
// GPU Operator and device plugin use it [k8s-device-plugin README, "Multiple
// Config File Example"; cmd/config-manager].
constexpr const char* kDevicePluginConfigLabel = "nvidia.com/device-plugin.config";

// Which of the configs in a --device-plugin-configs directory a Node serves:
// the one its label names, else the default named, else the only one there,
// else the plugin's built-in defaults (empty file name). `why` says which
// rule chose; an error when the label or the default names a config the
// directory lacks (the caller keeps what it serves).
struct ConfigChoice {
  std::string file;  // empty: the built-in defaults
  std::string why;
};
Result<ConfigChoice> choose_device_plugin_config(const std::string& dir, const std::string& default_name,
                                                  const std::map<std::string, std::string>& labels) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    // A ConfigMap volume's own entries (..data, ..2026_...) are not configs; a key's
    // symlink is followed, and one left dangling by an update is skipped.
    std::error_code file_ec;
    if (!name.starts_with(".") && std::filesystem::is_regular_file(e.path(), file_ec)) names.push_back(name);
  }
  if (ec) return fail(Errc::io, "--device-plugin-configs " + dir + ": " + ec.message());
  std::sort(names.begin(), names.end());
  auto in_dir = [&](const std::string& name, const std::string& by) -> Result<ConfigChoice> {
    if (std::find(names.begin(), names.end(), name) == names.end())
      return fail(Errc::not_found, by + " names the device-plugin config '" + name + "', which " + dir +
                                       " does not have (it has: " + (names.empty() ? "none" : join(names, ", ")) + ")");
    return ConfigChoice{(std::filesystem::path(dir) / name).string(), by + " chose the device-plugin config '" + name + "'"};
  };
  if (auto it = labels.find(kDevicePluginConfigLabel); it != labels.end() && !it->second.empty())
    return in_dir(it->second, std::string("the Node's label ") + kDevicePluginConfigLabel);
  if (!default_name.empty()) return in_dir(default_name, "no label: --device-plugin-default-config");
  if (names.size() == 1) return in_dir(names.front(), "no label and no default: the only config in " + dir);
  return ConfigChoice{"", "no label, no default and " + std::to_string(names.size()) +
                              " configs: the built-in defaults"};
}


// The mig-parted file as last read, read again when its text changes (a
// mounted ConfigMap's update): a valid new one goes to the controller, an
// invalid one is reported once and the previous one kept.
class MigConfigFile {
 public:
  explicit MigConfigFile(std::string path) : path_(std::move(path)) {}
  std::optional<config::MigPartedConfig> load(bool first) {
    auto text = read_whole_file(path_, 16u << 20);
    if (!text) {
      if (first) std::cerr << "tessera node: " << path_ << ": " << text.error().message << '\n';
      else if (text_ != "\0unreadable") spdlog::error("{}: {}; keeping the config read before", path_, text.error().message);
      text_ = "\0unreadable";
      return std::nullopt;
    }
    if (!first && *text == text_) return std::nullopt;
    text_ = *text;
    config::Diagnostics diags;
    auto parsed = config::parse_mig_parted(*text, path_, diags);
    if (first) {
      print_diagnostics(diags, std::cerr);
    } else if (diags.has_errors()) {
      std::ostringstream out;
      print_diagnostics(diags, out);
      spdlog::error("{} changed but is invalid; keeping the config read before:\n{}", path_, out.str());
    }
    if (!parsed || diags.has_errors()) return std::nullopt;
    if (!first) spdlog::info("{} changed", path_);
    return parsed;
  }

 private:
  std::string path_;
  std::string text_;
};

// The labels tessera owns on the Node (GPU feature discovery's names), kept
// equal to what the node has: docs/node-labels.md.
class LabelSync {
 public:
  LabelSync(agent::KubeClusterApi& api, const nvml::Session& session, plugin::PluginManager& manager)
      : api_(api), manager_(manager) {
    if (auto v = session.driver_version(); v) driver_ = *v;
    // nvmlSystemGetCudaDriverVersion_v2: 1000 * major + 10 * minor (12040 -> 12.4).
    if (auto v = session.cuda_driver_version(); v && *v > 0) cuda_ = fmt::format("{}.{}", *v / 1000, *v % 1000 / 10);
    // gpu.machine: what GFD reads, the board's DMI product name.
    if (auto text = read_whole_file("/sys/class/dmi/id/product_name", 4096); text) {
      machine_ = *text;
      while (!machine_.empty() && std::isspace(static_cast<unsigned char>(machine_.back()))) machine_.pop_back();
    }
    auto count = session.device_count();
    for (uint32_t i = 0; count && i < *count; ++i) {
      auto dev = session.device(i);
      if (!dev) continue;
      auto uuid = dev->uuid();
      if (!uuid) continue;
      sharing::GpuFacts facts;
      if (auto n = dev->name(); n) facts.name = *n;
      if (auto m = dev->memory_info(); m) facts.memory_total_bytes = m->total;
      if (auto mode = dev->mig_mode(); mode) facts.mig_capable = true;
      else if (mode.error().code == nvml::abi::NVML_ERROR_NOT_SUPPORTED) facts.mig_capable = false;
      facts_[*uuid] = std::move(facts);
    }
  }
  // Patches what differs between the wanted labels and the Node's
  // `current`, which is updated when the patch is taken.
  void sync(std::map<std::string, std::string>& current) {
    auto inventory = manager_.inventory();
    auto config = manager_.config();
    sharing::LabelInputs in(inventory, config);
    in.gpu_facts = facts_;
    in.driver_version = driver_;
    in.cuda_driver_version = cuda_;
    in.machine_type = machine_;
    auto wanted = sharing::node_labels(in);
    std::map<std::string, std::optional<std::string>> patch;
    for (const auto& [k, v] : wanted.labels)
      if (auto it = current.find(k); it == current.end() || it->second != v) patch[k] = v;
    for (const auto& k : sharing::stale_labels(current, wanted.labels)) patch[k] = std::nullopt;
    if (patch.empty()) return;
    // The same patch the API refused is asked again after a while, not on every turn.
    const auto now = std::chrono::steady_clock::now();
    if (patch == last_failed_ && now < retry_at_) return;
    for (const auto& d : wanted.dropped)
      if (logged_dropped_.insert(d).second) spdlog::warn("Node label left out: {}", d);
    if (auto r = api_.patch_labels(patch); !r) {
      if (patch != last_failed_) spdlog::warn("cannot update the Node's GPU labels: {} (trying again every 30 s)", r.error().message);
      last_failed_ = patch;
      retry_at_ = now + std::chrono::seconds(30);
      return;
    }
    last_failed_.clear();
    size_t set = 0;
    for (const auto& [k, v] : patch) {
      if (v) {
        current[k] = *v;
        ++set;
      } else {
        current.erase(k);
      }
    }
    spdlog::info("Node labels updated: {} set, {} removed", set, patch.size() - set);
  }

 private:
  agent::KubeClusterApi& api_;
  plugin::PluginManager& manager_;
  std::map<std::string, sharing::GpuFacts> facts_;
  std::string driver_;
  std::string cuda_;
  std::string machine_;
  std::map<std::string, std::optional<std::string>> last_failed_;
  std::chrono::steady_clock::time_point retry_at_{};
  std::set<std::string> logged_dropped_;
};

// The Node annotation tessera.dev/mig-layout (--publish-layout): each GPU's MIG mode and instances
// with the pod on each, for `tessera fleet` (docs/design-fleet.md, "The layout annotation").
std::string layout_annotation(const sharing::Inventory& inventory, const std::vector<sharing::Resource>& advertised,
                              const std::vector<plugin::PodDevices>& pods) {
  std::map<std::pair<std::string, std::string>, const sharing::Device*> by_id;
  for (const auto& r : advertised)
    for (const auto& d : r.devices) by_id[{r.name, d.id}] = &d;
  // GPU or MIG device UUID -> every "ns/pod" holding it (replicas of a shared device: several).
  std::map<std::string, std::vector<std::string>> holder;
  for (const auto& pod : pods)
    for (const auto& c : pod.containers)
      for (const auto& rd : c.resources)
        for (const auto& id : rd.ids)
          if (auto it = by_id.find({rd.resource, id}); it != by_id.end()) {
            auto& list = holder[it->second->is_mig ? it->second->physical_uuid : it->second->gpu_uuid];
            const std::string name = pod.pod_namespace + "/" + pod.name;
            if (std::find(list.begin(), list.end(), name) == list.end()) list.push_back(name);
          }
  // One holder: "pod" (what every reader of the annotation reads); several: "pods" as well.
  auto name_holders = [&](nlohmann::json& e, const std::string& uuid) {
    auto it = holder.find(uuid);
    if (it == holder.end()) return;
    e["pod"] = it->second.front();
    if (it->second.size() > 1) e["pods"] = it->second;
  };
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : inventory.gpus) {
    nlohmann::json e = {{"index", g.index}, {"mig", g.mig_enabled}};
    if (g.mig_enabled) {
      nlohmann::json insts = nlohmann::json::array();
      for (const auto& m : g.mig_devices) {
        nlohmann::json i = {{"profile", m.profile}, {"start", m.start}};
        name_holders(i, m.uuid);
        insts.push_back(i);
      }
      e["instances"] = insts;
    } else {
      name_holders(e, g.uuid);
    }
    gpus.push_back(e);
  }
  return nlohmann::json{{"gpus", gpus}}.dump();
}

// --mode dra: the node's GPUs served by the DRA driver instead of the device
// plugin, with the options the node agent shares with it.
int run_node_as_dra(const NodeArgs& args) {
  const char* cmd = "tessera node --mode dra";
  for (const auto& [given, what] : {std::pair{!args.mig_config.empty(), "--mig-config"},
                                    std::pair{!args.plugin.config_file.empty(), "--config-file"}})
    if (given) {
      std::cerr << cmd << ": " << what << " is the device plugin's; the DRA driver cuts MIG per claim and takes no "
                << "device-plugin config\n";
      return kExitUsage;
    }
  DraArgs dra = args.dra;
  // In this mode /metrics is the DRA driver's (run the exporter as its own container for the GPUs').
  dra.metrics_listen = args.metrics_listen;
  dra.nvml = args.plugin.driver;
  dra.kube = {args.kubeconfig, args.allow_insecure_http};
  dra.node_name = args.node_name;
  // The device plugin's --kubelet-dir is <kubelet root>/device-plugins.
  std::string dir = args.plugin.kubelet_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string suffix = "/device-plugins";
  if (dir.size() <= suffix.size() || dir.compare(dir.size() - suffix.size(), suffix.size(), suffix) != 0) {
    std::cerr << cmd << ": --kubelet-dir " << args.plugin.kubelet_dir
              << " is not <kubelet root>/device-plugins: the DRA driver's sockets go under the kubelet root\n";
    return kExitUsage;
  }
  dra.kubelet_dir = dir.substr(0, dir.size() - suffix.size());
  dra.cdi_spec_dir = args.plugin.cdi_spec_dir;
  if (!args.plugin.driver_root.empty()) dra.driver_root = args.plugin.driver_root;
  dra.dev_root = args.plugin.dev_root;
  if (!args.plugin.container_driver_root.empty()) dra.container_driver_root = args.plugin.container_driver_root;
  dra.cdi_hook = args.plugin.cdi_hook;
  dra.quota = args.plugin.quota;
  dra.no_quota_library = args.plugin.no_quota_library;
  dra.recovery_seconds = args.plugin.recovery_seconds;
  dra.ignored_xids = args.plugin.ignored_xids;
  dra.mps_control = args.plugin.mps_control;
  dra.mps_host = args.plugin.mps_host;
  return run_dra(dra);
}

int run_node(NodeArgs args) {
  const char* cmd = "tessera node";
  if (args.node_name.empty())
    if (const char* env = std::getenv("NODE_NAME"); env) args.node_name = env;
  if (args.node_name.empty()) {
    std::cerr << cmd << ": no Node name: pass --node-name or set NODE_NAME (from the downward API's spec.nodeName)\n";
    return kExitUsage;
  }
  if (args.mode == "dra") return run_node_as_dra(args);
  if (!args.device_plugin_configs.empty() && !args.plugin.config_file.empty()) {
    std::cerr << cmd << ": --device-plugin-configs and --config-file both name the device-plugin config; give one\n";
    return kExitUsage;
  }
  if (!args.device_plugin_default.empty() && args.device_plugin_configs.empty()) {
    std::cerr << cmd << ": --device-plugin-default-config names a config of --device-plugin-configs, which is not given\n";
    return kExitUsage;
  }
  if (!args.device_plugin_configs.empty()) {
    std::error_code ec;
    if (!std::filesystem::is_directory(args.device_plugin_configs, ec)) {
      std::cerr << cmd << ": --device-plugin-configs " << args.device_plugin_configs
                << ": not a directory (mount the ConfigMap of named configs there)\n";
      return kExitInvalid;
    }
    args.plugin.config_dir = args.device_plugin_configs;
  }
  std::optional<MigConfigFile> mig_file;
  std::optional<config::MigPartedConfig> mig_configs;
  if (!args.mig_config.empty()) {
    mig_file.emplace(args.mig_config);
    mig_configs = mig_file->load(true);
    if (!mig_configs) return kExitInvalid;
  }
  auto creds = kube_credentials(args.kubeconfig);
  if (!creds) {
    std::cerr << cmd << ": " << creds.error().message << '\n';
    return kExitInvalid;
  }
  // Two clients: the watch holds one connection open. Neither retries much
  // on its own: the watch has its backoff, the agent's calls are asked again
  // on its next turn, and neither should hold up a stop.
  kube::ClientOptions watch_options;
  watch_options.max_attempts = 1;
  watch_options.allow_insecure_http = args.allow_insecure_http;
  kube::ClientOptions api_options;
  api_options.allow_insecure_http = args.allow_insecure_http;
  api_options.max_attempts = 2;
  api_options.request_timeout = std::chrono::seconds(5);
  auto watch_client = kube::Client::create(*creds, watch_options);
  if (!watch_client) {
    std::cerr << cmd << ": " << watch_client.error().message << '\n';
    return kExitInvalid;
  }
  auto api_client = kube::Client::create(*creds, api_options);
  if (!api_client) {
    std::cerr << cmd << ": " << api_client.error().message << '\n';
    return kExitInvalid;
  }
  std::optional<exporter::ListenAddress> metrics_address;
  if (!args.metrics_listen.empty()) {
    auto address = exporter::parse_listen(args.metrics_listen);
    if (!address) {
      std::cerr << cmd << ": --metrics-listen " << address.error().message << '\n';
      return kExitUsage;
    }
    metrics_address = *address;
  }
  // The config the Node's label chooses, before anything is served: a node
  // is never offered to the kubelet with another config first.
  std::string served_config;
  if (!args.device_plugin_configs.empty()) {
    std::map<std::string, std::string> labels;
    auto node = (*api_client)->get_node(args.node_name);
    if (node) {
      labels = agent::node_view(*node).labels;
    } else {
      spdlog::warn("cannot read Node {} for its {} label now ({}): starting with the default config, the label taken "
                   "when the API server answers",
                   args.node_name, kDevicePluginConfigLabel, node.error().message);
    }
    auto choice = choose_device_plugin_config(args.device_plugin_configs, args.device_plugin_default, labels);
    if (!choice && choice.error().code == Errc::not_found && labels.contains(kDevicePluginConfigLabel)) {
      // A label naming no config is the Node's mistake, not the agent's: said, and the
      // config an unlabelled node would get served meanwhile.
      spdlog::error("{}; serving the config of a node without the label until it names one", choice.error().message);
      labels.erase(kDevicePluginConfigLabel);
      choice = choose_device_plugin_config(args.device_plugin_configs, args.device_plugin_default, labels);
    }
    if (!choice) {
      std::cerr << cmd << ": " << choice.error().message << '\n';
      return kExitInvalid;
    }
    spdlog::info("{}", choice->why);
    args.plugin.config_file = choice->file;
    served_config = choice->file;
  }
  auto host = PluginHost::start(args.plugin, cmd);
  if (!host) return kExitInvalid;
  // The exporter, on its own NVML session so its calls never wait on the plugin's.
  std::unique_ptr<exporter::Service> metrics;
  if (metrics_address) {
    auto session = open_nvml(args.plugin.driver);
    exporter::SamplerOptions options;
    options.interval = millis(args.metrics_interval);
    options.pod_resources_socket = args.pod_resources;
    options.ledger_root = args.plugin.quota.ledger_root;
    options.hostname = args.node_name;
    options.version = TESSERA_VERSION;
    auto started = session ? exporter::Service::start(std::move(*session), options, *metrics_address)
                           : Result<std::unique_ptr<exporter::Service>>(unexpected(session.error()));
    if (!started) {
      std::cerr << cmd << ": no metrics: " << started.error().message << '\n';
      host->stop();
      return kExitInvalid;
    }
    metrics = std::move(*started);
    spdlog::info("metrics on http://{}:{}/metrics", metrics_address->host, metrics->port());
  }
  spdlog::info("the node agent of Node {} talks to {} ({})", args.node_name, creds->server, creds->source);

  agent::KubeClusterApi api(std::move(*api_client), args.node_name);
  std::unique_ptr<agent::MigController> controller;
  if (mig_configs) {
    agent::NodeHooks hooks;
    hooks.pod_devices = [socket = args.pod_resources] {
      return plugin::list_pod_resources(socket, std::chrono::seconds(5));
    };
    hooks.advertised = [&host] { return host->manager().state()->snapshot()->resources; };
    hooks.withdraw = [&host](std::set<std::string> uuids) { host->manager().withdraw(std::move(uuids)); };
    hooks.layout_changed = [&host] { return host->refresh_inventory(); };
    hooks.served_inventory = [&host] { return host->manager().inventory(); };
    hooks.can_serve = [&host](const sharing::Inventory& inventory) -> Result<void> {
      auto resources = sharing::build_resources(inventory, host->manager().config());
      if (!resources) return unexpected(resources.error());
      return {};
    };
    agent::MigControllerOptions options;
    options.config_file = args.mig_config;
    options.configs = std::move(*mig_configs);
    options.eviction_timeout = millis(args.eviction_timeout);
    controller = std::make_unique<agent::MigController>(host->session(), api, std::move(hooks),
                                                        reconciler::JournalFile(args.state_dir), options);
  }
  if (!controller)
    spdlog::info("no --mig-config: the Node's {} label is not acted on; MIG stays as it is", agent::kMigConfigLabel);
  LabelSync labels(api, host->session(), host->manager());

  // The agent's thread: the Node as last seen, MIG changes, labels.
  std::mutex mutex;
  std::condition_variable wake;
  std::optional<agent::NodeView> seen;  // a newer Node from the watch, not yet taken
  bool label_was_absent = false;        // a version without the label came by: "removed, then set again" counts
  bool poked = false, stopping = false;
  agent::NodeWatch watch(std::move(*watch_client), args.node_name, [&](const agent::NodeView& v) {
    std::lock_guard lock(mutex);
    seen = v;
    if (!v.labels.contains(agent::kMigConfigLabel)) label_was_absent = true;
    wake.notify_all();
  });
  std::thread worker([&] {
    std::map<std::string, std::string> current;
    bool have_node = false;
    std::string published_layout;
    std::string config_error;  // the last error choosing a device-plugin config, said once
    bool layout_warned = false;
    auto next = agent::Clock::now();
    std::unique_lock lock(mutex);
    while (!stopping) {
      // At least every 5 s: labels follow inventory changes the plugin saw.
      wake.wait_until(lock, std::min(next, agent::Clock::now() + std::chrono::seconds(5)),
                      [&] { return stopping || seen || poked; });
      if (stopping) break;
      auto view = std::exchange(seen, std::nullopt);
      bool was_absent = std::exchange(label_was_absent, false);
      poked = false;
      lock.unlock();
      if (view) {
        current = view->labels;
        have_node = true;
        api.set_node_uid(view->uid);
        if (controller) {
          if (was_absent) controller->set_desired(std::nullopt);
          auto it = current.find(agent::kMigConfigLabel);
          controller->set_desired(it == current.end() ? std::nullopt : std::optional<std::string>(it->second));
        }
      }
      if (controller && mig_file)
        if (auto fresh = mig_file->load(false)) controller->set_configs(std::move(*fresh));
      next = controller ? controller->step(agent::Clock::now()) : agent::Clock::time_point::max();
      if (have_node && !args.device_plugin_configs.empty()) {
        auto choice = choose_device_plugin_config(args.device_plugin_configs, args.device_plugin_default, current);
        const std::string error = choice ? "" : choice.error().message;
        if (!choice && error != config_error) spdlog::error("{}; still serving the config served before", error);
        config_error = error;
        if (choice && choice->file != served_config) {
          spdlog::info("{}", choice->why);
          host->use_config_file(choice->file, choice->why.c_str());
          served_config = choice->file;
        }
      }
      if (have_node && !args.no_node_labels) labels.sync(current);
      if (have_node && args.publish_layout && (!controller || controller->phase() == agent::Phase::idle)) {
        auto pods = plugin::list_pod_resources(args.pod_resources, std::chrono::seconds(5));
        if (pods) {
          std::string text = layout_annotation(host->manager().inventory(), host->manager().state()->snapshot()->resources, *pods);
          if (text != published_layout) {
            if (auto r = api.patch_annotations({{"tessera.dev/mig-layout", text}}); r) published_layout = text;
            else if (!layout_warned) {
              spdlog::warn("cannot write the Node annotation tessera.dev/mig-layout: {} (trying again)", r.error().message);
              layout_warned = true;
            }
          }
        }
      }
      lock.lock();
    }
  });

  host->run([&] {
    std::lock_guard lock(mutex);
    poked = true;
    wake.notify_all();
  });

  {
    std::lock_guard lock(mutex);
    stopping = true;
    wake.notify_all();
  }
  worker.join();
  if (controller) controller->abandon(agent::Clock::now(), "tessera node was stopped");
  watch.stop();
  if (metrics) metrics->stop();
  host->stop();
  std::cout << cmd << ": stopped" << std::endl;
  return kExitOk;
}

}  // namespace

void add_node_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<NodeArgs>();
  auto* cmd = app.add_subcommand(
      "node",
      "The node agent: one process per GPU node. Serves the device plugin (as `tessera plugin`), applies the\n"
      "MIG config its Node's nvidia.com/mig.config label names (with --mig-config) and reports it in\n"
      "nvidia.com/mig.config.state (pending, success, failed), evicting through the API only the pods on\n"
      "devices the change destroys (PodDisruptionBudgets apply; past --eviction-timeout the change ends\n"
      "failed with an Event and the previous devices served), keeps GPU feature discovery's labels\n"
      "(nvidia.com/gpu.product, gpu.count, mig-<profile>.count, ...) on the Node, supervises MPS daemons,\n"
      "and with --metrics-listen serves the exporter. Talks to the API server with the pod's service account,\n"
      "or a kubeconfig.");
  add_plugin_options(*cmd, args->plugin);
  cmd->add_option("--node-name", args->node_name, "This node's Node object (default: $NODE_NAME)");
  cmd->add_option("--kubeconfig", args->kubeconfig,
                  "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the pod's service account)");
  cmd->add_flag("--allow-insecure-http", args->allow_insecure_http,
                "Send the token to an http:// API server in clear text (tests only; warned at every start)");
  cmd->add_option("--mig-config", args->mig_config,
                  "mig-parted config file (v1, or the GPU Operator's ConfigMap). With it, the Node label\n"
                  "nvidia.com/mig.config names the entry to apply; without it MIG is left as it is");
  cmd->add_option("--state-dir", args->state_dir, "Directory of the MIG journal")->capture_default_str();
  cmd->add_option("--eviction-timeout", args->eviction_timeout,
                  "Seconds the pods on destroyed devices get to leave before the change ends failed")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_flag("--no-node-labels", args->no_node_labels, "Do not write GPU feature discovery's labels on the Node");
  cmd->add_flag("--publish-layout", args->publish_layout,
                "Keep the Node annotation tessera.dev/mig-layout: each GPU's instances and the pod on each, for\n"
                "`tessera fleet` (the node-scope policy must allow it: docs/design-fleet.md)");
  cmd->add_option("--metrics-listen", args->metrics_listen,
                  "Serve the exporter's /metrics and /healthz on HOST:PORT (default: no exporter)");
  cmd->add_option("--metrics-interval", args->metrics_interval, "Seconds between metric samples")
      ->check(positive_number())
      ->capture_default_str();
  cmd->add_option("--pod-resources", args->pod_resources, "The kubelet's pod-resources socket")->capture_default_str();
  cmd->add_option("--mode", args->mode,
                  "device-plugin (default), or dra: serve the GPUs as `tessera dra` does (DRA claims, MIG cut per\n"
                  "claim) with the options above that apply and the DRA ones below; no MIG config, labels or exporter")
      ->check(CLI::IsMember({"device-plugin", "dra"}))
      ->capture_default_str();
  cmd->add_option("--device-plugin-configs", args->device_plugin_configs,
                  "Directory of named device-plugin configs (a ConfigMap with one key per config, as the GPU\n"
                  "Operator's devicePlugin.config): the Node label nvidia.com/device-plugin.config names the one\n"
                  "to serve, read again when the label or the file changes. Instead of --config-file");
  cmd->add_option("--device-plugin-default-config", args->device_plugin_default,
                  "The config of --device-plugin-configs served when the Node has no such label (default: the\n"
                  "only config there, else the built-in defaults)");
  add_dra_options(*cmd, args->dra, false);
  cmd->callback([args, &exit_code] { exit_code = run_node(*args); });
}

}  // namespace tessera::cli
