// tessera fleet plan / run: the fleet re-planner's command line (docs/design-fleet.md).
// `plan` reads a snapshot (a file, or the API server) and prints the plan;
// `run` is the controller: plan when GPU pods stay pending, publish, wait for
// approval, roll out in waves.
#include <spdlog/spdlog.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <thread>
// After the standard headers, which define __GLIBC__ on glibc.
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "cli/progress.hpp"
#include "cli/numbers.hpp"
#include "cli/commands.hpp"
#include "cli/kube_args.hpp"
#include "cli/output.hpp"
#include "config/mig_parted.hpp"
#include "core/file_read.hpp"
#include "core/text.hpp"
#include "exporter/server.hpp"
#include "fleet/controller.hpp"
#include "fleet/fleet.hpp"
#include "kube/client.hpp"
#include "kube/list_watch.hpp"

namespace tessera::cli {
namespace {

using json = nlohmann::json;

struct ClusterArgs {
  std::string kubeconfig;
  bool allow_insecure_http = false;
  std::string ns;
  std::string mig_configmap = "tessera-mig-config";
  std::string mig_configmap_key = "config.yaml";
  std::vector<std::string> dra_drivers{fleet::kGpuDraDriver};
};

struct FleetPlanArgs {
  ClusterArgs cluster;
  std::string snapshot;
  bool from_cluster = false;
  std::string mig_config;
  double time_limit = 8;
  std::string output = "text";
  int64_t max_evictions = -1;
  int64_t max_wave_evictions = 10;
  std::string max_wave_nodes = "10%";
  std::string svg;
};

std::string namespace_of(const ClusterArgs& a) {
  if (!a.ns.empty()) return a.ns;
  if (const char* env = std::getenv("POD_NAMESPACE"); env && *env) return env;
  return "tessera";
}

Result<std::unique_ptr<kube::Client>> connect(const ClusterArgs& a) {
  auto creds = kube_credentials(a.kubeconfig);  // as tessera node and tessera dra find the API server
  if (!creds) return unexpected(creds.error());
  kube::ClientOptions options;
  options.allow_insecure_http = a.allow_insecure_http;
  options.max_attempts = 3;
  return kube::Client::create(*creds, options);
}

// The collections the snapshot reads, as `fleet plan --from-cluster` lists them and `fleet run`
// keeps them (list-and-watch), so that both read a cluster alike: Nodes and GPU pods (the fields
// the snapshot never reads never built); the PodDisruptionBudgets, which the eviction API applies
// (a plan that cannot read them fails, rather than plan evictions the API refuses); the
// ResourceClaims, whose GPUs the device plugin's count shows as free (none where the API server
// serves no DRA).
std::vector<kube::WatchedCollection> watched_collections() {
  auto collection = [](const char* path, const char* kind, const char* api_version) {
    kube::WatchedCollection c;
    c.path = path;
    c.kind = kind;
    c.api_version = api_version;
    return c;
  };
  std::vector<kube::WatchedCollection> c{collection("/api/v1/nodes", "Node", "v1"), collection("/api/v1/pods", "Pod", "v1"),
                                         collection("/apis/policy/v1/poddisruptionbudgets", "PodDisruptionBudget", "policy/v1"),
                                         collection("/apis/resource.k8s.io/v1/resourceclaims", "ResourceClaim", "resource.k8s.io/v1")};
  for (size_t i = 0; i < 2; ++i) {
    c[i].keep = fleet::slim_snapshot_item;
    c[i].wanted = fleet::snapshot_field_wanted;
  }
  c[3].optional = true;  // an API server without DRA: no claims
  return c;
}

// Those collections listed once, in pages of 500, as one List.
kube::ApiResult<json> list_snapshot(kube::Client& client) {
  json items = json::array();
  for (const auto& c : watched_collections()) {
    auto list = client.list_all(c.path, c.kind, c.api_version, c.keep, 500, c.wanted);
    if (!list && list.error().status == 404 && c.optional) continue;
    if (!list) return list;
    for (auto& item : (*list)["items"]) items.push_back(std::move(item));
  }
  return json{{"apiVersion", "v1"}, {"kind", "List"}, {"items", std::move(items)}};
}

void add_cluster_options(CLI::App& cmd, ClusterArgs& a) {
  cmd.add_option("--kubeconfig", a.kubeconfig, "kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the pod's service account)");
  cmd.add_flag("--allow-insecure-http", a.allow_insecure_http, "Send credentials to an http:// API server (tests only)");
  cmd.add_option("--namespace", a.ns, "Namespace of the ConfigMaps (default: $POD_NAMESPACE, else tessera)");
  cmd.add_option("--mig-configmap", a.mig_configmap, "The node agents' mig-parted ConfigMap")->capture_default_str();
  cmd.add_option("--mig-configmap-key", a.mig_configmap_key, "Its key holding the mig-parted file")->capture_default_str();
  cmd.add_option("--dra-driver", a.dra_drivers,
                 "A DRA driver whose ResourceClaims hold GPUs (repeat for more; a node where they hold any is kept as it is).\n"
                 "Give tessera's own when `tessera dra --driver-name` renamed it")
      ->capture_default_str()
      ->type_name("NAME");
}

// --max-wave-nodes: a number of nodes (0: no limit) or a share of the fleet's GPU nodes, "10%".
// Empty when it reads; else what is wrong.
std::string read_wave_nodes(const std::string& text, int64_t& nodes, double& share) {
  nodes = 0;
  share = 0;
  const bool percent = !text.empty() && text.back() == '%';
  const std::string digits = percent ? text.substr(0, text.size() - 1) : text;
  int64_t n = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || n < 0 || (percent && (n < 1 || n > 100)))
    return "'" + text + "' is neither a number of nodes (0 or more; 0: no limit) nor a share of the fleet from 1% to 100%";
  if (percent) share = double(n) / 100.0;
  else nodes = n;
  return "";
}

fleet::PlanOptions plan_options(double time_limit, int64_t max_evictions, int64_t max_wave_evictions,
                                const std::string& max_wave_nodes) {
  fleet::PlanOptions o;
  o.seconds = time_limit;
  if (max_evictions >= 0) o.max_evictions = max_evictions;
  o.max_wave_evictions = max_wave_evictions;
  (void)read_wave_nodes(max_wave_nodes, o.max_wave_nodes, o.max_wave_share);  // checked when parsed
  return o;
}

CLI::Validator wave_nodes_check() {
  return CLI::Validator(
      [](std::string& text) {
        int64_t n;
        double share;
        return read_wave_nodes(text, n, share);
      },
      "N|P%");
}

int run_fleet_plan(const FleetPlanArgs& args) {
  const char* cmd = "tessera fleet plan";
  if (args.from_cluster == !args.snapshot.empty()) {
    std::cerr << cmd << ": give --snapshot FILE or --from-cluster (one of them)\n";
    return kExitUsage;
  }
  json list;
  std::string source = args.snapshot;
  std::string mig_text, mig_source = args.mig_config;
  std::unique_ptr<kube::Client> client;
  if (args.from_cluster) {
    auto c = connect(args.cluster);
    if (!c) {
      std::cerr << cmd << ": " << c.error().message << '\n';
      return kExitInvalid;
    }
    client = std::move(*c);
    auto got = list_snapshot(*client);
    if (!got) {
      std::cerr << cmd << ": " << got.error().message << '\n';
      return kExitInvalid;
    }
    list = std::move(*got);
    source = "the cluster (" + client->credentials().server + ")";
  } else {
    auto text = read_whole_file(args.snapshot, 1u << 30);
    if (!text) {
      std::cerr << cmd << ": " << args.snapshot << ": " << text.error().message << '\n';
      return kExitInvalid;
    }
    list = json::parse(*text, nullptr, false);
    if (list.is_discarded()) {
      std::cerr << cmd << ": " << args.snapshot << ": not JSON (expected the output of `kubectl get nodes,pods -A -o json`)\n";
      return kExitInvalid;
    }
  }
  if (!args.mig_config.empty()) {
    config::Diagnostics diags;
    auto t = config::read_config_file(args.mig_config, diags);
    if (!t) {
      print_diagnostics(diags, std::cerr);
      return kExitInvalid;
    }
    mig_text = *t;
  } else if (client) {
    const std::string ns = namespace_of(args.cluster);
    auto cm = client->get_configmap(ns, args.cluster.mig_configmap);
    if (!cm) {
      std::cerr << cmd << ": " << cm.error().message << '\n';
      return kExitInvalid;
    }
    auto data = (*cm)["data"];
    if (!data.is_object() || !data.contains(args.cluster.mig_configmap_key) || !data[args.cluster.mig_configmap_key].is_string()) {
      std::cerr << cmd << ": ConfigMap " << ns << "/" << args.cluster.mig_configmap << " has no key " << args.cluster.mig_configmap_key << '\n';
      return kExitInvalid;
    }
    mig_text = data[args.cluster.mig_configmap_key].get<std::string>();
    mig_source = "ConfigMap " + ns + "/" + args.cluster.mig_configmap;
  } else {
    std::cerr << cmd << ": --mig-config FILE is required with --snapshot\n";
    return kExitUsage;
  }
  config::Diagnostics diags;
  auto configs = config::parse_mig_parted(mig_text, mig_source, diags);
  if (!configs || diags.has_errors()) {
    print_diagnostics(diags, std::cerr);
    return kExitInvalid;
  }
  auto snap = fleet::parse_snapshot(list, source, args.cluster.dra_drivers);
  if (!snap) {
    std::cerr << cmd << ": " << snap.error().message << '\n';
    return kExitInvalid;
  }
  auto problem = fleet::build_problem(*snap, *configs);
  if (!problem) {
    std::cerr << cmd << ": " << source << ": " << snap->nodes.size() << " nodes read; " << problem.error().message << '\n';
    return kExitInvalid;
  }
  auto options = plan_options(args.time_limit, args.max_evictions, args.max_wave_evictions, args.max_wave_nodes);
  auto plan = [&] {
    Progress progress("tessera fleet plan: planning " + std::to_string(problem->gpus.size()) + " GPUs", args.time_limit);
    return fleet::plan_fleet(*problem, options);
  }();
  if (auto ok = fleet::check_fleet_plan(*problem, plan, options); !ok) {
    std::cerr << cmd << ": internal error, the plan breaks a rule: " << ok.error().message << '\n';
    return kExitInvalid;
  }
  if (!args.svg.empty()) {
    std::ofstream out(args.svg);
    if (out) out << fleet::plan_svg(*problem, plan);
    if (!out) {
      std::cerr << cmd << ": cannot write " << args.svg << ": " << std::strerror(errno) << '\n';
      return kExitInvalid;
    }
  }
  json doc = fleet::plan_json(*problem, plan);
  doc["hash"] = fleet::hash_text(doc.dump());
  if (args.output == "json") std::cout << doc.dump(2) << '\n';
  else if (args.output == "yaml") std::cout << fleet::to_yaml(doc);
  else std::cout << fleet::plan_text(*problem, plan);
  return kExitOk;
}

// ---- tessera fleet run ------------------------------------------------------

// The cluster as `fleet run` reads it: through a list-and-watch cache (the default), or a whole
// list at every poll (--no-watch).
class KubeFleetApi : public fleet::FleetApi {
 public:
  KubeFleetApi(std::unique_ptr<kube::Client> client, std::string ns, std::unique_ptr<kube::ListWatch> watched)
      : client_(std::move(client)), ns_(std::move(ns)), watched_(std::move(watched)) {}
  Result<ClusterList> snapshot() override {
    const auto start = std::chrono::steady_clock::now();
    if (watched_) {
      // The first list of a big cluster takes seconds; a stop is served by the watchdog meanwhile.
      auto cached = watched_->snapshot(std::chrono::seconds(60));
      if (!cached) return fail(Errc::io, cached.error().message);
      return ClusterList{std::move(cached->list), cached->version};
    }
    auto list = list_snapshot(*client_);
    if (!list) return fail(Errc::io, list.error().message);
    spdlog::debug("listed nodes and GPU pods: {} items in {} ms", (*list)["items"].size(),
                  std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count());
    return ClusterList{std::make_shared<const json>(std::move(*list)), 0};
  }
  // Ends the watches (their calls return at once).
  void stop_watching() {
    if (watched_) watched_->stop();
  }
  Result<std::optional<fleet::ConfigMapView>> get_configmap(const std::string& name) override {
    auto cm = client_->get_configmap(ns_, name);
    if (!cm) {
      if (cm.error().status == 404) return std::optional<fleet::ConfigMapView>();
      return fail(Errc::io, cm.error().message);
    }
    fleet::ConfigMapView v;
    const json& meta = (*cm)["metadata"];
    if (meta.contains("annotations") && meta["annotations"].is_object())
      for (auto it = meta["annotations"].begin(); it != meta["annotations"].end(); ++it)
        if (it->is_string()) v.annotations[it.key()] = it->get<std::string>();
    if (cm->contains("data") && (*cm)["data"].is_object())
      for (auto it = (*cm)["data"].begin(); it != (*cm)["data"].end(); ++it)
        if (it->is_string()) v.data[it.key()] = it->get<std::string>();
    v.resource_version = meta.value("resourceVersion", "");
    if (name == fleet::kPlanConfigMap) uid_ = meta.value("uid", "");
    return std::optional<fleet::ConfigMapView>(std::move(v));
  }
  Result<void> put_configmap(const std::string& name, const std::map<std::string, std::string>& data,
                             const std::map<std::string, std::optional<std::string>>& annotations) override {
    json ann = json::object();
    for (const auto& [k, v] : annotations) ann[k] = v ? json(*v) : json(nullptr);
    json patch = {{"metadata", {{"annotations", ann}}}, {"data", data}};
    auto r = client_->patch_configmap(ns_, name, patch);
    if (r) return {};
    if (r.error().status != 404) return fail(Errc::io, r.error().message);
    json fresh_ann = json::object();
    for (const auto& [k, v] : annotations)
      if (v) fresh_ann[k] = *v;
    json cm = {{"metadata", {{"name", name}, {"namespace", ns_}, {"annotations", fresh_ann},
                             {"labels", {{"app.kubernetes.io/name", "tessera"}, {"app.kubernetes.io/component", "fleet"}}}}},
               {"data", data}};
    auto c = client_->create_configmap(ns_, cm);
    if (!c) return fail(Errc::io, c.error().message);
    return {};
  }
  Result<void> label_node(const std::string& node, const std::map<std::string, std::optional<std::string>>& labels) override {
    auto r = client_->patch_node_labels(node, labels);
    if (!r) return fail(Errc::io, r.error().message);
    return {};
  }
  Result<void> event(const std::string& type, const std::string& reason, const std::string& message) override {
    json involved = {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"name", fleet::kPlanConfigMap}, {"namespace", ns_}};
    if (!uid_.empty()) involved["uid"] = uid_;
    if (type == "Warning") spdlog::warn("{}: {}", reason, message);
    else spdlog::info("{}: {}", reason, message);
    auto r = client_->create_event(ns_, involved, type, reason, message, "tessera-fleet");
    if (!r) return fail(Errc::io, r.error().message);
    return {};
  }

 private:
  std::unique_ptr<kube::Client> client_;
  std::string ns_;
  std::string uid_;
  std::unique_ptr<kube::ListWatch> watched_;
};

struct FleetRunArgs {
  ClusterArgs cluster;
  double pending_after = 60;
  double poll = 5;
  double config_propagation = 90;
  double wave_timeout = 900;
  double time_limit = 8;
  int64_t max_evictions = -1;
  int64_t max_wave_evictions = 10;
  std::string max_wave_nodes = "10%";
  bool auto_approve = false;
  bool dry_run = false;
  bool plan_now = false;
  bool exit_when_done = false;
  bool no_watch = false;
  std::string metrics_listen;
};

std::atomic<bool> g_stop{false};
extern "C" void on_stop_signal(int) { g_stop = true; }

int run_fleet_run(const FleetRunArgs& args) {
  const char* cmd = "tessera fleet run";
  if (args.auto_approve && args.max_evictions < 0) {
    std::cerr << cmd << ": --auto-approve needs --max-evictions N (the most pods a plan approved without a person may evict)\n";
    return kExitUsage;
  }
#if defined(__GLIBC__)
  // Each poll builds the cluster's items and frees the last poll's: hundreds of thousands of small
  // blocks. glibc keeps small freed blocks in fast bins and merges them all at the next large
  // allocation, which cost a third of a poll's CPU at 30,000 pods (bench_fleet_poll); without fast
  // bins a block is merged as it is freed.
  mallopt(M_MXFAST, 0);
#endif
  std::optional<exporter::ListenAddress> address;
  if (!args.metrics_listen.empty()) {
    auto a = exporter::parse_listen(args.metrics_listen);
    if (!a) {
      std::cerr << cmd << ": --metrics-listen " << a.error().message << '\n';
      return kExitUsage;
    }
    address = *a;
  }
  auto client = connect(args.cluster);
  if (!client) {
    std::cerr << cmd << ": " << client.error().message << '\n';
    return kExitInvalid;
  }
  const std::string ns = namespace_of(args.cluster);
  std::unique_ptr<kube::ListWatch> watched;
  if (!args.no_watch) {
    auto own = connect(args.cluster);  // its own client: stopping the watches stops its calls only
    if (!own) {
      std::cerr << cmd << ": " << own.error().message << '\n';
      return kExitInvalid;
    }
    watched = std::make_unique<kube::ListWatch>(std::move(*own), watched_collections());
  }
  KubeFleetApi api(std::move(*client), ns, std::move(watched));
  fleet::ControllerOptions options;
  options.mig_configmap = args.cluster.mig_configmap;
  options.mig_configmap_key = args.cluster.mig_configmap_key;
  options.dra_drivers = args.cluster.dra_drivers;
  options.pending_after = millis(args.pending_after);
  options.poll = millis(args.poll);
  options.config_propagation = millis(args.config_propagation);
  options.wave_timeout = millis(args.wave_timeout);
  options.plan = plan_options(args.time_limit, args.max_evictions, args.max_wave_evictions, args.max_wave_nodes);
  options.auto_approve = args.auto_approve;
  options.dry_run = args.dry_run;
  fleet::Controller controller(api, options);
  if (args.plan_now) controller.request_plan();
  std::mutex mu;
  std::unique_ptr<exporter::TextEndpoint> server;
  if (address) {
    auto started = exporter::TextEndpoint::start(*address, [&] {
      std::lock_guard lock(mu);
      return controller.metrics_text();
    });
    if (!started) {
      std::cerr << cmd << ": " << started.error().message << '\n';
      return kExitInvalid;
    }
    server = std::move(*started);
  }
  std::signal(SIGTERM, on_stop_signal);
  std::signal(SIGINT, on_stop_signal);
  spdlog::info("fleet controller in namespace {}: plans when GPU pods are pending for {} s{}{}", ns, args.pending_after,
               args.dry_run ? " (dry run)" : "", args.auto_approve ? " (auto-approve)" : "");
  // A stop comes within 2 s even in the middle of a step (a plan may take its whole --time-limit):
  // the controller keeps its state in the cluster, so the process may end there.
  std::atomic<bool> finished{false};
  std::thread watchdog([&] {
    while (!g_stop && !finished) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    while (!finished && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (finished) return;
    std::fprintf(stderr, "%s: stopped in the middle of a step (what it had written stays in the cluster)\n", cmd);
    std::fflush(stderr);
    std::_Exit(kExitOk);
  });
  std::string last_error;
  auto last_phase = controller.phase();
  while (!g_stop) {
    fleet::Clock::time_point next;
    {
      std::lock_guard lock(mu);
      next = controller.step(fleet::Clock::now());
    }
    if (controller.last_error() != last_error) {
      last_error = controller.last_error();
      if (!last_error.empty()) spdlog::warn("{}", last_error);
    }
    if (controller.phase() != last_phase) {
      last_phase = controller.phase();
      spdlog::info("phase: {}", fleet::to_string(last_phase));
      if (args.exit_when_done && (last_phase == fleet::ControllerPhase::done || last_phase == fleet::ControllerPhase::failed)) break;
    }
    while (!g_stop && fleet::Clock::now() < next) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  api.stop_watching();  // while the watchdog still bounds how long a stop takes
  finished = true;
  watchdog.join();
  server = nullptr;
  std::cout << cmd << ": stopped (" << fleet::to_string(controller.phase()) << ")" << std::endl;
  return controller.phase() == fleet::ControllerPhase::failed ? kExitInvalid : kExitOk;
}

}  // namespace

void add_fleet_command(CLI::App& app, int& exit_code) {
  auto* fleet = app.add_subcommand("fleet", "Re-plan the MIG layout of a whole cluster from what it runs and what is pending, "
                                            "and roll the plan out (docs/design-fleet.md)");
  fleet->require_subcommand(1);

  auto pa = std::make_shared<FleetPlanArgs>();
  auto* plan = fleet->add_subcommand(
      "plan",
      "The proven best new layout for a fleet: fewest pods of the highest priority left pending or evicted,\n"
      "then of the next (as preemption weighs them), then fewest pods unserved, then fewest running pods\n"
      "evicted, then fewest GPUs changed, then fewest GPUs in use; each level optimal or its gap reported.\n"
      "Pods go only where the scheduler would bind them (rules, taints, cpu and memory against\n"
      "allocatable). Reads a snapshot (`kubectl get nodes,pods -A -o json`) or the cluster itself.");
  plan->add_option("--snapshot", pa->snapshot,
                   "The Nodes and Pods (and the PodDisruptionBudgets and ResourceClaims, where there are any), as\n"
                   "`kubectl get nodes,pods,pdb,resourceclaims -A -o json` prints them");
  plan->add_flag("--from-cluster", pa->from_cluster, "Read the Nodes and Pods (and without --mig-config, the mig-parted ConfigMap) from the API server");
  plan->add_option("--mig-config", pa->mig_config, "The mig-parted file the Nodes' nvidia.com/mig.config labels name");
  plan->add_option("--time-limit", pa->time_limit,
                   "Seconds the solver may take, all levels and both solves together (turning the solution into\n"
                   "GPUs and pods comes on top: 0.1-0.2 s for 12,000 GPUs, 1-3 s for 40,000)")->check(CLI::Range(0.1, 3600.0))->capture_default_str();
  auto* as_json = plan->add_flag_callback("--json", [pa] { pa->output = "json"; }, "Print the plan as JSON (the contract for scripts)");
  auto* as_yaml = plan->add_flag_callback("--yaml", [pa] { pa->output = "yaml"; }, "Print the plan as YAML");
  as_json->excludes(as_yaml);
  // The old spelling (--output text|json|yaml), hidden: the other commands say --json.
  plan->add_option("--output", pa->output)
      ->group("")
      ->check(CLI::IsMember({"text", "json", "yaml"}))
      ->each([](const std::string& v) {
        std::cerr << "tessera fleet plan: --output " << v << " is now " << (v == "text" ? "the default" : "--" + v)
                  << " (the old spelling still works; docs/cli.md lists the flags)\n";
      });
  plan->add_option("--max-evictions", pa->max_evictions, "At most this many running pods evicted (a constraint)")->check(non_negative_number());
  plan->add_option("--max-wave-evictions", pa->max_wave_evictions, "At most this many evictions per rollout wave")
      ->check(non_negative_number())
      ->capture_default_str();
  plan->add_option("--max-wave-nodes", pa->max_wave_nodes,
                   "At most this many nodes per wave: a number (0: no limit) or a share of the fleet's GPU nodes")
      ->check(wave_nodes_check())
      ->capture_default_str();
  plan->add_option("--svg", pa->svg, "Draw every changed node before and after to this SVG file");
  add_cluster_options(*plan, pa->cluster);
  plan->callback([pa, &exit_code] { exit_code = run_fleet_plan(*pa); });

  auto ra = std::make_shared<FleetRunArgs>();
  auto* run = fleet->add_subcommand(
      "run",
      "The fleet controller: watches Nodes and Pods; when GPU pods stay pending longer than --pending-after\n"
      "(or on request: --plan-now, or a new value of the tessera.dev/replan annotation), plans and writes the\n"
      "plan to ConfigMap tessera-fleet-plan (summary, plan.json, hash). Changes nothing until a person\n"
      "annotates that ConfigMap tessera.dev/approve=<hash> (or --auto-approve with --max-evictions). Then\n"
      "adds the plan's configs to the mig-parted ConfigMap and relabels the nodes wave by wave, each wave\n"
      "waiting for nvidia.com/mig.config.state=success; a failure stops the rollout with an Event.");
  add_cluster_options(*run, ra->cluster);
  run->add_option("--pending-after", ra->pending_after, "Seconds a GPU pod may stay pending before a plan is made")
      ->check(non_negative_number())
      ->capture_default_str();
  run->add_option("--poll", ra->poll, "Seconds between looks at the cluster")->check(positive_number())->capture_default_str();
  run->add_option("--config-propagation", ra->config_propagation,
                  "Seconds to wait after adding configs to the mig-parted ConfigMap (the kubelets update mounted files)")
      ->check(non_negative_number())
      ->capture_default_str();
  run->add_option("--wave-timeout", ra->wave_timeout, "Seconds a wave may take to reach success")->check(positive_number())->capture_default_str();
  run->add_option("--time-limit", ra->time_limit, "Seconds per plan")->check(CLI::Range(0.1, 3600.0))->capture_default_str();
  run->add_option("--max-evictions", ra->max_evictions, "At most this many running pods evicted per plan")->check(non_negative_number());
  run->add_option("--max-wave-evictions", ra->max_wave_evictions, "At most this many evictions per wave")->check(non_negative_number())->capture_default_str();
  run->add_option("--max-wave-nodes", ra->max_wave_nodes,
                  "At most this many nodes per wave: a number (0: no limit) or a share of the fleet's GPU nodes")
      ->check(wave_nodes_check())
      ->capture_default_str();
  run->add_flag("--auto-approve", ra->auto_approve, "Apply plans without a person's approval (needs --max-evictions)");
  run->add_flag("--dry-run", ra->dry_run, "Plan and publish, never change a Node or the mig-parted ConfigMap");
  run->add_flag("--plan-now", ra->plan_now, "Plan at start, whatever is pending");
  run->add_flag("--exit-when-done", ra->exit_when_done, "Exit once a plan is applied or its rollout failed");
  run->add_flag("--no-watch", ra->no_watch,
                "List the whole cluster at every poll instead of keeping it by list-and-watch\n"
                "(for a proxy that does not pass watches; costs the API server a full list each poll)");
  run->add_option("--metrics-listen", ra->metrics_listen, "Serve /metrics and /healthz on HOST:PORT");
  run->callback([ra, &exit_code] { exit_code = run_fleet_run(*ra); });
}

}  // namespace tessera::cli
