// The fleet planner on published data; prints tables.
//   bench_planner [SOURCE_DIR [a|b|c]]   (default: this source tree; reads
//   data/workloads/ and third_party/parvagpu/)
// (a) llm-mix-37.csv on A100-80GB, H100-80GB, H200: exact and fast modes vs baselines and bound.
// (b) ParvaGPU's six SLO scenarios (A100-80GB): our GPUs next to ParvaGPU's published 2, 3, 5, 7, 13, 16.
// (c) scale: 10,000 GPUs and 50,000 services in the fast mode.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "config/fleet_spec.hpp"
#include "core/units.hpp"
#include "planner/plan.hpp"
#include "planner/plan_check.hpp"
#include "planner/report.hpp"
#include "planner/solver.hpp"

using namespace tessera;
using planner::Mode;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::cerr << "bench_planner: cannot read " << path << "\n";
    std::exit(1);
  }
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> split(const std::string& line, char sep = ',') {
  std::vector<std::string> out(1);
  for (char c : line) {
    if (c == sep) out.emplace_back();
    else if (c != '\r' && c != '\n') out.back() += c;
  }
  return out;
}

// ParvaGPU's admission rule (third_party/parvagpu/README.md): latency x 1000 < SLO / 2 x 0.9, at most 3
// MPS processes per instance; an instance serves Throughput x processes.
std::map<int, double> parva_capacity(const std::string& data, const std::string& model, double slo_ms) {
  std::map<int, double> best;  // compute slices -> requests/s
  std::istringstream in(slurp(data + "/third_party/parvagpu/prof_data/" + model + ".csv"));
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) {
    auto f = split(line);
    if (f.size() < 5) continue;
    int size = std::stoi(f[0]), procs = std::stoi(f[2]);
    double tput = std::stod(f[3]), latency = std::stod(f[4]);
    if (procs > 3 || latency * 1000 >= slo_ms / 2 * 0.9) continue;
    best[size] = std::max(best[size], tput * procs);
  }
  return best;
}

// Capacity per profile of `model` from a per-compute-slice table.
std::vector<config::CapacitySpec> by_profile(const GpuModel& model, const std::map<int, double>& per_slices) {
  std::vector<config::CapacitySpec> out;
  for (const auto& prof : model.profiles) {
    if (is_media_variant(prof)) continue;
    auto it = per_slices.find(int(prof.slices));
    if (it != per_slices.end() && it->second > 0) out.push_back({prof.name, it->second, {}});
  }
  return out;
}

// ParvaGPU runs up to 3 processes of ~3 GiB each in an instance (performance-anchors.md §8.1).
constexpr uint64_t kCnnInstanceMemory = 9 * kGiB;

struct Outcome {
  std::optional<planner::Report> report;
  std::string error;
};

Outcome plan(const config::FleetSpec& spec, Mode mode, bool baselines, double seconds = 60) {
  config::Diagnostics diags;
  auto problem = planner::build_problem(spec, {}, diags);
  if (!problem) return {std::nullopt, diags.items().empty() ? "?" : config::format(diags.items()[0])};
  planner::SolverOptions options{.mode = mode, .seconds = seconds};
  auto solved = planner::solve(*problem, options);
  if (!solved) return {std::nullopt, solved.error().message};
  auto p = planner::build_plan(*problem, solved->counts);
  if (auto ok = planner::check_plan(*problem, p); !ok) return {std::nullopt, "invalid plan: " + ok.error().message};
  auto b = baselines ? planner::compute_baselines(spec, {.mode = Mode::exact, .seconds = 10}) : std::vector<planner::Baseline>{};
  return {planner::make_report(*problem, *solved, p, std::move(b)), ""};
}

std::string baseline(const planner::Report& r, const std::string& name) {
  for (const auto& b : r.baselines)
    if (b.name == name) return b.gpus ? std::to_string(*b.gpus) : "-";
  return "-";
}

std::string ms(double seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f ms", seconds * 1000);
  return buf;
}

void workload(const std::string& data) {
  std::cout << "(a) llm-mix-37.csv: 37 services. LLM capacity: the CSV's full-A100 rate x the slice's share of memory\n"
               "    slices (x k for tensor-parallel width k); CNN capacity: ParvaGPU's A100 profiles with its admission\n"
               "    rule. The A100 rates are used on every model (conservative for H100/H200). bound = exact's proven\n"
               "    optimum bound; fast-lb = the LP relaxation bound the fast mode reports.\n";
  std::printf("%-16s %6s %6s %6s %6s %7s %8s %10s %6s %8s %8s %10s\n", "GPU", "exact", "proven", "fast", "bound",
              "fast-lb", "fast-gap", "whole-gpu", "all-1g", "balanced", "exact-t", "fast-t");
  config::Diagnostics diags;
  auto base = config::parse_service_csv(slurp(data + "/data/workloads/llm-mix-37.csv"), "llm-mix-37.csv", diags);
  if (!base) {
    std::cerr << config::format(diags.items()[0]) << "\n";
    std::exit(1);
  }
  // CNN rows: rate and latency SLO from the CSV, per-slice capacity from ParvaGPU's profiles.
  std::map<std::string, std::pair<std::string, double>> cnn;  // service -> (model, rate)
  std::map<std::string, double> slo;
  std::istringstream rows(slurp(data + "/data/workloads/llm-mix-37.csv"));
  std::string line;
  std::getline(rows, line);
  while (std::getline(rows, line)) {
    if (line.find("ParvaGPU profile") == std::string::npos) continue;
    auto f = split(line);
    cnn[f[0]] = {f[1], std::stod(f[8])};
    auto at = line.find("p99<=");
    slo[f[0]] = std::stod(line.substr(at + 5));
  }
  for (const char* gpu : {"A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB"}) {
    const GpuModel& model = *Catalog::builtin().find(gpu);
    config::FleetSpec spec = *base;
    spec.fleet.push_back({&model, {}, "fleet[0]", std::nullopt, {}});
    for (auto& s : spec.services) {
      auto it = cnn.find(s.name);
      if (it == cnn.end()) continue;
      s.replicas.reset();
      s.demand = it->second.second;
      s.memory_bytes = kCnnInstanceMemory;
      s.capacity = by_profile(model, parva_capacity(data, it->second.first, slo[s.name]));
    }
    auto exact = plan(spec, Mode::exact, true, 10);
    auto fast = plan(spec, Mode::fast, false);
    if (!exact.report || !fast.report) {
      std::cout << gpu << ": " << exact.error << fast.error << "\n";
      continue;
    }
    const auto &e = *exact.report, &f = *fast.report;
    std::printf("%-16s %6u %6s %6u %6u %7u %7.1f%% %10s %6s %8s %8s %10s\n", gpu, e.gpus_used, e.optimal ? "yes" : "no",
                f.gpus_used, e.lower_bound, f.lower_bound, 100.0 * (f.gpus_used - e.lower_bound) / std::max(1u, e.lower_bound),
                baseline(e, "whole-gpu").c_str(), baseline(e, "all-1g").c_str(), baseline(e, "all-balanced").c_str(),
                ms(e.seconds).c_str(), ms(f.seconds).c_str());
  }
}

void parvagpu(const std::string& data) {
  std::cout << "\n(b) ParvaGPU SLO scenarios on A100-SXM4-80GB (rates from SLO/, capacity from prof_data/)\n";
  std::printf("%-9s %8s %6s %6s %6s %6s %7s %10s %6s %8s %9s\n", "scenario", "services", "exact", "proven", "fast",
              "bound", "fast-lb", "whole-gpu", "all-1g", "balanced", "ParvaGPU");
  // Models in alphabetical order of the prof_data files (third_party/parvagpu/README.md).
  const std::vector<std::string> models = {"bert",      "densenet121", "densenet169", "densenet201",
                                           "inceptionv3", "mobilenetv2", "resnet101",   "resnet152",
                                           "resnet50",    "vgg16",       "vgg19"};
  const int published[] = {2, 3, 5, 7, 13, 16};  // ParvaGPU's deployment/SLO<i> GPU counts (README)
  auto rates = split(slurp(data + "/third_party/parvagpu/SLO/SLO_req_rate.csv"), '\n');
  auto slos = split(slurp(data + "/third_party/parvagpu/SLO/SLO_latency.csv"), '\n');
  const GpuModel& model = *Catalog::builtin().find("A100-SXM4-80GB");
  for (int row = 0; row < 6; ++row) {
    auto rate = split(rates[size_t(row)]), slo = split(slos[size_t(row)]);
    config::FleetSpec spec;
    spec.fleet.push_back({&model, {}, "fleet[0]", std::nullopt, {}});
    for (size_t m = 0; m < models.size(); ++m) {
      if (m >= rate.size() || rate[m] == "N/A" || slo[m] == "N/A") continue;
      config::ServiceSpec s;
      s.name = models[m];
      s.memory_bytes = kCnnInstanceMemory;
      s.demand = std::stod(rate[m]);
      s.capacity = by_profile(model, parva_capacity(data, models[m], std::stod(slo[m])));
      spec.services.push_back(std::move(s));
    }
    auto exact = plan(spec, Mode::exact, true, 10);
    auto fast = plan(spec, Mode::fast, false);
    if (!exact.report || !fast.report) {
      std::cout << "SLO" << row + 1 << ": " << exact.error << fast.error << "\n";
      continue;
    }
    const auto &e = *exact.report, &f = *fast.report;
    std::printf("SLO%-6d %8zu %6u %6s %6u %6u %7u %10s %6s %8s %9d   (exact %s)\n", row + 1, spec.services.size(), e.gpus_used,
                e.optimal ? "yes" : "no", f.gpus_used, e.lower_bound, f.lower_bound, baseline(e, "whole-gpu").c_str(),
                baseline(e, "all-1g").c_str(), baseline(e, "all-balanced").c_str(), published[row], ms(e.seconds).c_str());
  }
}

void scale(int by_rate_percent) {
  std::cout << "\n(c) scale: 50,000 services (" << by_rate_percent
            << "% served by rate, the rest by replicas) on a fleet of 10,000 A100-SXM4-80GB, fast mode\n";
  const GpuModel& model = *Catalog::builtin().find("A100-SXM4-80GB");
  config::FleetSpec spec;
  spec.fleet.push_back({&model, {}, "fleet[0]", 10000u, {}});
  std::mt19937 rng(42);
  // Sizes of the llm-mix-37 services (GiB), most of them small, as in production skew.
  const double dedicated[] = {5, 7.8, 8.9, 10.2, 11, 15.6, 17, 23, 29.7, 32.5, 38.3, 53, 74.2};
  const double weights[] = {24, 12, 10, 10, 12, 6, 6, 4, 3, 3, 2, 1, 0.5};
  const double shared[] = {3, 5, 7.8, 11};
  std::discrete_distribution<int> pick(std::begin(weights), std::end(weights));
  std::uniform_int_distribution<int> pick_shared(0, 3), percent(0, 99);
  for (int i = 0; i < 50000; ++i) {
    config::ServiceSpec s;
    s.name = "svc-" + std::to_string(i);
    bool is_shared = percent(rng) < 25;
    double gib = is_shared ? shared[pick_shared(rng)] : dedicated[pick(rng)];
    s.memory_bytes = uint64_t(gib * double(kGiB));
    s.replicas = 1;
    if (!is_shared && percent(rng) < by_rate_percent) {
      // Rate over a whole-GPU rate, as llm-mix-37.csv gives them (performance-anchors.md §8.1).
      s.replicas.reset();
      s.demand = 10.0 + percent(rng) * 2.0;
      s.capacity.push_back({std::string(config::kWholeGpuKey), 1000.0 + percent(rng) * 20.0, {}});
    }
    if (is_shared) s.isolation = percent(rng) < 50 ? config::Isolation::shared : config::Isolation::best_effort;
    spec.services.push_back(std::move(s));
  }
  auto start = std::chrono::steady_clock::now();
  auto fast = plan(spec, Mode::fast, false);
  double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!fast.report) {
    std::cout << "failed: " << fast.error << "\n";
    return;
  }
  const auto& f = *fast.report;
  std::printf("%-10s %8s %6s %6s %8s %10s %12s\n", "services", "replicas", "GPUs", "bound", "gap", "solve", "end-to-end");
  std::printf("%-10zu %8llu %6u %6u %7.2f%% %10s %12s\n", spec.services.size(), (unsigned long long)f.replicas,
              f.gpus_used, f.lower_bound, 100 * f.gap, ms(f.seconds).c_str(), ms(total).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::string data = argc > 1 ? argv[1] : TESSERA_SOURCE_DIR;
  std::string only = argc > 2 ? argv[2] : "";  // a, b or c: one table only
  auto timed = [](const char* name, auto&& table) {
    auto start = std::chrono::steady_clock::now();
    table();
    std::cerr << "(" << name << " took " << ms(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()) << ")\n";
  };
  if (only.empty() || only == "a") timed("a", [&] { workload(data); });
  if (only.empty() || only == "b") timed("b", [&] { parvagpu(data); });
  if (only.empty() || only == "c") timed("c", [&] { scale(0); });
  if (only.empty() || only == "c") timed("c", [&] { scale(10); });
  return 0;
}
