// MIG decisions and applies, measured:
//   (a) plan time for a node of 8 GPUs, for every ordered pair of NVIDIA's
//       default configs of a model (pure code, no driver);
//   (b) `mig apply` on the simulator, through the real NVML loader: time per
//       apply and NVML calls per apply (counted by the simulated driver).
// Usage: bench_mig [MIG_CONFIG TESSERA_BIN SIM_LIBRARY] (default: NVIDIA's
// default config in third_party/ and this build's tessera and simulator)
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/mig_parted.hpp"
#include "config/mig_parted_validate.hpp"
#include "mig/mig_plan.hpp"
#include "nvml/library.hpp"
#include "nvml/session.hpp"
#include "reconciler/mig_apply.hpp"
#include "reconciler/node_state.hpp"

namespace {

using namespace tessera;
using Clock = std::chrono::steady_clock;

struct Named {
  const config::MigConfig* config;
  const config::MigConfigEntry* entry;
};

std::vector<Named> configs_for(const config::MigPartedConfig& cfg, const GpuModel& m) {
  std::vector<Named> out;
  for (const auto& mc : cfg.configs)
    for (const auto& e : mc.entries) {
      auto t = config::entry_targets(e, Catalog::builtin());
      if (std::find(t.begin(), t.end(), &m) == t.end()) continue;
      out.push_back({&mc, &e});
      break;
    }
  return out;
}

double pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

mig::GpuState state_of(const GpuModel& m, uint32_t index, const Named& c) {
  mig::GpuState s;
  s.index = index;
  s.model = &m;
  s.mig_enabled = c.entry->mig_enabled;
  if (!c.entry->mig_enabled) return s;
  auto layout = place_counts(m, config::entry_counts(*c.entry));
  uint32_t id = 1;
  for (const auto& p : *layout) s.instances.push_back({id++, p, "MIG-x", 1, true, {}});
  return s;
}

void plan_times(const config::MigPartedConfig& cfg) {
  std::printf("(a) plan time, 8 GPUs per node, every ordered pair of NVIDIA's default configs\n");
  std::printf("%-16s %7s %12s %12s %12s %10s\n", "model", "pairs", "p50_us/node", "p99_us/node", "max_us/node",
              "total_ms");
  for (const char* name : {"A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB"}) {
    const auto& m = *Catalog::builtin().find(name);
    auto configs = configs_for(cfg, m);
    std::vector<double> per_node;
    auto t0 = Clock::now();
    for (const auto& from : configs)
      for (const auto& to : configs) {
        std::vector<mig::GpuState> node;
        for (uint32_t g = 0; g < 8; ++g) node.push_back(state_of(m, g, from));
        mig::DesiredGpu desired{to.entry->mig_enabled, config::entry_counts(*to.entry)};
        auto s = Clock::now();
        for (const auto& gpu : node)
          if (!mig::plan_gpu(gpu, desired)) std::abort();
        per_node.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
      }
    double total = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    std::printf("%-16s %7zu %12.1f %12.1f %12.1f %10.1f\n", name, per_node.size(), pct(per_node, 0.5),
                pct(per_node, 0.99), pct(per_node, 1.0), total);
  }
}

void apply_times(const config::MigPartedConfig& cfg, const std::string& bin, const std::string& sim_lib) {
  std::printf("\n(b) mig apply on the simulator (8 x A100-SXM4-80GB, in-process, real NVML loader)\n");
  std::printf("%-28s %10s %8s %10s %10s\n", "transition", "ms/apply", "ops", "nvml_calls", "calls/op");
  auto dir = std::filesystem::temp_directory_path() / ("tessera-bench-mig-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::string cmd = bin + " sim create " + dir.string() + " --gpu A100-SXM4-80GB --count 8 > /dev/null";
  if (std::system(cmd.c_str()) != 0) std::abort();
  setenv("TESSERA_SIM", dir.c_str(), 1);
  auto lib = nvml::Library::open(sim_lib);
  if (!lib) std::abort();
  using Control = int (*)(const char*, char**);
  using Free = void (*)(char*);
  auto control = reinterpret_cast<Control>((*lib)->symbol("tesseraSimControl"));
  auto release = reinterpret_cast<Free>((*lib)->symbol("tesseraSimFree"));
  auto calls = [&]() -> uint64_t {
    if (!control) return 0;
    char* reply = nullptr;
    if (control(R"({"op":"calls"})", &reply) != 0 || !reply) return 0;
    auto j = nlohmann::json::parse(reply, nullptr, false);
    release(reply);
    uint64_t n = 0;
    if (j.is_object() && j.contains("calls"))
      for (const auto& [k, v] : j["calls"].items()) n += v.get<uint64_t>();
    return n;
  };
  auto session = nvml::Session::open(*lib);
  if (!session) std::abort();
  reconciler::JournalFile journal_file((dir / "state").string());
  const char* sequence[] = {"all-1g.10gb", "all-balanced", "all-3g.40gb", "all-2g.20gb", "all-7g.80gb", "all-disabled"};
  std::string from = "all-disabled";
  for (const char* to : sequence) {
    const auto* mc = cfg.find(to);
    uint64_t before = calls();
    auto s = Clock::now();
    auto node = reconciler::read_node_state(*session);
    if (!node) std::abort();
    auto plan = reconciler::plan_node(*node, *mc, false);
    if (!plan) std::abort();
    size_t ops = plan->operations();
    reconciler::Journal journal{"bench", to, "", "", "in-progress", "", {}};
    auto result = reconciler::execute_plan(*session, std::move(*plan), journal_file, journal);
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - s).count();
    if (!result.success) std::abort();
    uint64_t n = calls() - before;
    std::string label = from + " -> " + to;
    std::printf("%-28s %10.1f %8zu %10llu %10.1f\n", label.c_str(), ms, ops, static_cast<unsigned long long>(n),
                ops ? static_cast<double>(n) / static_cast<double>(ops) : 0.0);
    from = to;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 1 && argc != 4) {
    std::fprintf(stderr, "usage: bench_mig [MIG_CONFIG TESSERA_BIN SIM_LIBRARY]\n");
    return 2;
  }
  std::string config_file = argc == 4 ? argv[1] : TESSERA_SOURCE_DIR "/third_party/nvidia-mig-parted/config-default.yaml";
  std::string bin = argc == 4 ? argv[2] : TESSERA_BIN;
  std::string sim = argc == 4 ? argv[3] : TESSERA_SIM_LIBRARY;
  config::Diagnostics diags;
  auto cfg = config::load_mig_parted(config_file, diags);
  if (!cfg) {
    for (const auto& d : diags.items()) std::fprintf(stderr, "%s\n", config::format(d).c_str());
    return 1;
  }
  plan_times(*cfg);
  apply_times(*cfg, bin, sim);
  return 0;
}
