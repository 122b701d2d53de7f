// The fleet re-planner on generated fleets in the shape of Alibaba's 2023 GPU
// trace (Weng et al., "Beware of Fragmentation", USENIX ATC '23: about 1,200
// nodes of 8 GPUs, about 8,000 pods, most asking for part of a GPU, some for
// one or several whole GPUs). Here: mixed A100-80GB / H100 / H200 nodes whose
// current mig-parted configs are drawn from a few named layouts, pods of MIG
// profiles and whole GPUs, 70-90 % of them running (placed on free instances
// of the current layouts), the rest pending. Prints one table row per fleet:
// time to plan, status and gap, and unserved/evicted against mig-manager's
// way (one named layout per product fleet-wide) and a greedy first fit.
//
//   bench_fleet [--nodes N] [--pods N] [--seeds K] [--time-limit S] [--write DIR]
//
// Run it on 2 cores: `taskset -c 0,1 build/release/bench/bench_fleet`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "config/mig_parted.hpp"
#include "fleet/fleet.hpp"

using namespace tessera;
using json = nlohmann::json;

namespace {

const char* kConfigs = R"(version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g:
    - device-filter: ["0x20B210DE", "0x233010DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
    - device-filter: ["0x233510DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"1g.18gb": 7}
  all-balanced:
    - device-filter: ["0x20B210DE", "0x233010DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    - device-filter: ["0x233510DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
  all-3g:
    - device-filter: ["0x20B210DE", "0x233010DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
    - device-filter: ["0x233510DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"3g.71gb": 2}
  half-whole:
    - devices: [0, 1, 2, 3]
      mig-enabled: false
    - device-filter: ["0x20B210DE", "0x233010DE"]
      devices: [4, 5, 6, 7]
      mig-enabled: true
      mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    - device-filter: ["0x233510DE"]
      devices: [4, 5, 6, 7]
      mig-enabled: true
      mig-devices: {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}
)";

struct Shape {
  std::string resource;  // "gpu" or a profile of the A100/H100 family (mapped for H200)
  int count;
  double weight;
};

// Requests by share of pods: most ask for part of a GPU, a third for one whole GPU, a few for several.
const std::vector<Shape> kShapes = {
    {"1g.10gb", 1, 0.10}, {"2g.20gb", 1, 0.10}, {"3g.40gb", 1, 0.12}, {"4g.40gb", 1, 0.08}, {"7g.80gb", 1, 0.06},
    {"1g.10gb", 2, 0.02}, {"gpu", 1, 0.35},     {"gpu", 2, 0.08},     {"gpu", 4, 0.05},     {"gpu", 8, 0.04},
};

std::string h200_name(const std::string& r) {
  if (r == "1g.10gb") return "1g.18gb";
  if (r == "2g.20gb") return "2g.35gb";
  if (r == "3g.40gb") return "3g.71gb";
  if (r == "4g.40gb") return "4g.71gb";
  if (r == "7g.80gb") return "7g.141gb";
  return r;
}

struct Generated {
  json snapshot;
  int running = 0, pending = 0;
};

// Nodes first, then pods: a running pod takes free instances of its resource on a random node that has
// them (as the scheduler placed it); one that finds none, and every pod past the running share, waits.
// hard: running pods scattered over each node's GPUs (a shuffled GPU order per pod) and every
// pending pod asking for one whole GPU, so serving them costs evictions (levels 1 and 2 work).
Generated generate(int nodes, int pods, double running_share, unsigned seed, const config::MigPartedConfig& cfgs,
                   bool hard = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  json items = json::array();
  struct Slot { std::string resource; bool used = false; };
  std::vector<std::vector<std::vector<Slot>>> free(static_cast<size_t>(nodes));  // node -> gpu -> instances
  std::vector<bool> h200(static_cast<size_t>(nodes));
  const char* configs[] = {"all-disabled", "all-1g", "all-balanced", "all-3g", "half-whole"};
  const double config_weight[] = {0.40, 0.10, 0.20, 0.15, 0.15};
  for (int n = 0; n < nodes; ++n) {
    double x = u(rng);
    const char* product = x < 0.5 ? "NVIDIA-A100-SXM4-80GB" : x < 0.8 ? "NVIDIA-H100-80GB-HBM3" : "NVIDIA-H200";
    h200[size_t(n)] = x >= 0.8;
    double y = u(rng), acc = 0;
    const char* config = configs[0];
    for (int c = 0; c < 5; ++c)
      if (y < (acc += config_weight[c])) {
        config = configs[c];
        break;
      }
    char name[32];
    std::snprintf(name, sizeof name, "gpu-%04d", n);
    items.push_back({{"kind", "Node"},
                     {"apiVersion", "v1"},
                     {"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.product", product}, {"nvidia.com/gpu.count", "8"},
                                                              {"nvidia.com/mig.config", config}}}}}});
    // The instances the config gives each GPU, as the planner reads them.
    const GpuModel* model = fleet::find_product(Catalog::builtin(), product);
    const auto* cfg = cfgs.find(config);
    free[size_t(n)].resize(8);
    for (uint32_t g = 0; g < 8; ++g) {
      for (const auto& e : cfg->entries) {
        if (!e.devices.selects(g) || !config::filter_selects(e, model->pci_device_id, 0, model)) continue;
        if (!e.mig_enabled) free[size_t(n)][g].push_back({"gpu"});
        else
          for (const auto& d : e.mig_devices)
            for (uint32_t k = 0; k < d.count; ++k) free[size_t(n)][g].push_back({d.profile});
        break;
      }
    }
  }
  Generated out;
  double total_w = 0;
  for (const auto& s : kShapes) total_w += s.weight;
  for (int i = 0; i < pods; ++i) {
    double x = u(rng) * total_w, acc = 0;
    const Shape* shape = &kShapes.back();
    for (const auto& s : kShapes)
      if (x < (acc += s.weight)) {
        shape = &s;
        break;
      }
    bool wants_running = u(rng) < running_share;
    std::string on;
    std::string resource = shape->resource;
    bool on_h200 = false;
    if (wants_running) {
      int start = int(rng() % unsigned(nodes));
      for (int k = 0; k < nodes && on.empty(); ++k) {
        int n = (start + k) % nodes;
        std::string r = h200[size_t(n)] ? h200_name(shape->resource) : shape->resource;
        std::vector<Slot*> got;
        std::vector<size_t> order(free[size_t(n)].size());
        for (size_t g = 0; g < order.size(); ++g) order[g] = g;
        if (hard) std::shuffle(order.begin(), order.end(), rng);
        for (size_t g : order)
          for (auto& s : free[size_t(n)][g])
            if (!s.used && s.resource == r && int(got.size()) < shape->count) got.push_back(&s);
        if (int(got.size()) < shape->count) continue;
        for (auto* s : got) s->used = true;
        char name[32];
        std::snprintf(name, sizeof name, "gpu-%04d", n);
        on = name;
        on_h200 = h200[size_t(n)];
      }
    } else {
      on_h200 = u(rng) < 0.2;  // pending pods ask in the names of the product they were written for
      if (hard) resource = "gpu";
    }
    if (on_h200) resource = h200_name(resource);
    const int count = !wants_running && hard ? 1 : shape->count;
    std::string key = resource == "gpu" ? "nvidia.com/gpu" : "nvidia.com/mig-" + resource;
    json pod = {{"kind", "Pod"},
                {"apiVersion", "v1"},
                // A Job's pod: its controller makes a new one after an eviction (a bare pod is never evicted).
                {"metadata", {{"name", "job-" + std::to_string(i)}, {"namespace", "team-" + std::to_string(i % 17)},
                              {"ownerReferences", json::array({{{"apiVersion", "batch/v1"}, {"kind", "Job"}, {"controller", true},
                                                                {"name", "job-" + std::to_string(i)},
                                                                {"uid", "job-uid-" + std::to_string(i)}}})}}},
                {"spec", {{"containers", json::array({{{"name", "main"}, {"resources", {{"limits", {{key, std::to_string(count)}}}}}}})}}},
                {"status", {{"phase", on.empty() ? "Pending" : "Running"}}}};
    if (!on.empty()) {
      pod["spec"]["nodeName"] = on;
      ++out.running;
    } else {
      ++out.pending;
    }
    items.push_back(std::move(pod));
  }
  out.snapshot = {{"apiVersion", "v1"}, {"kind", "List"}, {"items", items}};
  return out;
}

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  int nodes = 1500, pods = 8000, seeds = 3;
  double time_limit = 8, running_share = 0.8;
  bool hard = false;
  std::string write_dir;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (a == "--nodes") nodes = std::atoi(next().c_str());
    else if (a == "--pods") pods = std::atoi(next().c_str());
    else if (a == "--seeds") seeds = std::atoi(next().c_str());
    else if (a == "--time-limit") time_limit = std::atof(next().c_str());
    else if (a == "--running") running_share = std::atof(next().c_str());
    else if (a == "--write") write_dir = next();
    else if (a == "--hard") hard = true;
    else {
      std::cerr << "usage: bench_fleet [--nodes N] [--pods N] [--seeds K] [--running SHARE] [--time-limit S] [--hard] [--write DIR]\n";
      return 2;
    }
  }
  config::Diagnostics diags;
  auto cfgs = config::parse_mig_parted(kConfigs, "bench-configs.yaml", diags);
  if (!cfgs || diags.has_errors()) {
    std::cerr << "bench_fleet: the built-in mig-parted configs do not parse\n";
    return 1;
  }
  std::printf("| seed | nodes | GPUs | pods running / pending | read + build | plan (limit %.0f s) | levels 1-4 | status | gap | "
              "plan unserved / evicted | changed GPUs | GPUs used | mig-manager unserved / evicted | first-fit unserved / evicted |\n",
              time_limit);
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (int seed = 1; seed <= seeds; ++seed) {
    auto gen = generate(nodes, pods, running_share, unsigned(seed), *cfgs, hard);
    if (!write_dir.empty()) {
      std::filesystem::create_directories(write_dir);
      std::ofstream(write_dir + "/snapshot-" + std::to_string(seed) + ".json") << gen.snapshot.dump();
      std::ofstream(write_dir + "/mig-parted.yaml") << kConfigs;
    }
    auto t0 = std::chrono::steady_clock::now();
    auto snap = fleet::parse_snapshot(gen.snapshot, "generated");
    if (!snap) {
      std::cerr << snap.error().message << "\n";
      return 1;
    }
    auto problem = fleet::build_problem(*snap, *cfgs);
    if (!problem) {
      std::cerr << problem.error().message << "\n";
      return 1;
    }
    double read_s = since(t0);
    fleet::PlanOptions options;
    options.seconds = time_limit;
    auto t1 = std::chrono::steady_clock::now();
    auto plan = fleet::plan_fleet(*problem, options);
    auto ok = fleet::check_fleet_plan(*problem, plan, options);
    double plan_s = since(t1);  // the whole plan, checked, as `tessera fleet plan` makes it
    if (!ok) {
      std::cerr << "bench_fleet: the plan breaks a rule: " << ok.error().message << "\n";
      return 1;
    }
    auto mm = fleet::baseline_one_layout(*problem);
    auto ff = fleet::baseline_first_fit(*problem);
    // Each level's value and time, from the plan's notes ("evicted: 12 (optimal) in 0.31 s").
    std::string levels;
    for (const char* name : {"unserved", "evicted", "changed_gpus", "gpus_used"}) {
      std::string cell = "-";
      for (const auto& n : plan.notes)
        if (n.rfind(std::string(name) + ": ", 0) == 0 && n.find(" in ") != std::string::npos) {
          cell = n.substr(std::strlen(name) + 2);
          break;
        }
      levels += (levels.empty() ? "" : "; ") + cell;
    }
    std::printf("| %d | %zu | %zu | %d / %d | %.2f s | %.2f s | %s | %s | %.4f | %lld / %lld | %lld | %lld | %lld / %lld | %lld / %lld |\n",
                seed, problem->nodes.size(), problem->gpus.size(), gen.running, gen.pending, read_s, plan_s, levels.c_str(),
                plan.status.c_str(), plan.gap, (long long)plan.objective.unserved, (long long)plan.objective.evicted,
                (long long)plan.objective.changed_gpus, (long long)plan.objective.gpus_used, (long long)mm.unserved,
                (long long)mm.evicted, (long long)ff.unserved, (long long)ff.evicted);
    for (const auto& n : plan.notes) std::fprintf(stderr, "  seed %d: %s\n", seed, n.c_str());
    std::fflush(stdout);
  }
  return 0;
}
