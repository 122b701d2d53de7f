#include "planner/report.hpp"

#include <algorithm>
#include <cmath>

namespace tessera::planner {
namespace {

uint32_t whole_gpu_baseline(const Problem& p) {
  uint64_t gpus = 0;
  for (const auto& s : p.services) {
    uint64_t replicas = s.replicas.value_or(0);
    if (s.demand) {
      double best = 0;  // the whole GPU's rate, or failing that the best slice's
      for (size_t u = 0; u < p.units.size(); ++u)
        if (p.units[u].profile == kWholeGpu) best = std::max(best, s.capacity[u]);
      if (best <= 0)
        for (double c : s.capacity) best = std::max(best, c);
      replicas = best > 0 ? static_cast<uint64_t>(std::ceil(*s.demand / best - 1e-9)) : 0;
    }
    gpus += replicas * s.gpus;
  }
  return static_cast<uint32_t>(gpus);
}

Baseline mig_baseline(const config::FleetSpec& spec, LayoutSet layouts, std::string name, const SolverOptions& options) {
  Baseline b{std::move(name), std::nullopt, 0};
  config::FleetSpec open = spec;
  for (auto& g : open.fleet) {
    g.count.reset();
    g.current.clear();
  }
  config::Diagnostics ignored;
  auto problem = build_problem(open, {.layouts = layouts, .whole_gpu = true}, ignored);
  if (!problem) return b;
  auto solved = solve(*problem, options);
  if (!solved) {
    b.timed_out = solved.error().code == Errc::timeout;
    return b;
  }
  b.gpus = solved->gpus;
  for (size_t g = 0; g < problem->groups.size(); ++g)
    for (size_t u = 0; u < problem->units.size(); ++u)
      if (problem->units[u].profile == kWholeGpu) b.replicas_on_whole_gpus += solved->counts.group_units[g][u];
  for (size_t k = 0; k < problem->patterns.size(); ++k)
    if (problem->units[size_t(problem->patterns[k].unit)].profile == kWholeGpu)
      for (const auto& [t, n] : problem->patterns[k].types) b.replicas_on_whole_gpus += uint64_t(n) * solved->counts.patterns[k];
  return b;
}

}  // namespace

std::vector<Baseline> compute_baselines(const config::FleetSpec& spec, const SolverOptions& options) {
  std::vector<Baseline> out;
  config::Diagnostics ignored;
  config::FleetSpec open = spec;
  for (auto& g : open.fleet) {
    g.count.reset();
    g.current.clear();
  }
  if (auto problem = build_problem(open, {}, ignored)) out.push_back({"whole-gpu", whole_gpu_baseline(*problem), 0});
  out.push_back(mig_baseline(spec, LayoutSet::uniform_smallest, "all-1g", options));
  out.push_back(mig_baseline(spec, LayoutSet::balanced, "all-balanced", options));
  return out;
}

Report make_report(const Problem& p, const Solved& solved, const Plan& plan, std::vector<Baseline> baselines) {
  Report r;
  r.mode = std::string(to_string(solved.mode));
  r.gpus_used = static_cast<uint32_t>(plan.gpus.size());
  r.lower_bound = std::min(solved.lower_bound, r.gpus_used);
  r.optimal = solved.optimal && r.gpus_used == solved.gpus;
  r.gap = r.lower_bound > 0 ? double(r.gpus_used - r.lower_bound) / r.lower_bound : 0.0;
  r.seconds = solved.seconds;
  std::vector<uint32_t> per_type(p.gpu_types.size(), 0);
  uint64_t asked = 0, offered = 0;
  for (const auto& gpu : plan.gpus) {
    ++per_type[size_t(gpu.gpu_type)];
    offered += p.gpu_types[size_t(gpu.gpu_type)].model->memory_mib;
    for (const auto& inst : gpu.instances) {
      if (!inst.replicas.empty()) ++r.instances_used;
      asked += used_memory_mib(p, inst);
    }
  }
  for (size_t t = 0; t < p.gpu_types.size(); ++t) r.gpus_by_model.emplace_back(p.gpu_types[t].model->name, per_type[t]);
  for (const auto& sites : plan.sites) r.replicas += sites.size();
  r.memory_utilisation = offered > 0 ? double(asked) / double(offered) : 0.0;
  if (p.has_current()) r.gpus_kept = gpus_kept(p, plan);
  r.baselines = std::move(baselines);
  return r;
}

}  // namespace tessera::planner
