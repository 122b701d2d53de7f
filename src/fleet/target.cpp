// One GPU's target and what the node agent makes of it.
#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include "fleet/fleet.hpp"
#include "fleet/internal.hpp"
#include "mig/mig_plan.hpp"

namespace tessera::fleet {

Target current_target(const Gpu& gpu) {
  Target t;
  t.mig = gpu.mig;
  if (gpu.mig)
    for (const auto& i : gpu.instances) t.profiles.push_back(i.profile);
  std::sort(t.profiles.begin(), t.profiles.end());
  return t;
}

ProfileCounts target_counts(const GpuModel& model, const Target& target) {
  ProfileCounts c;
  for (uint32_t p : target.profiles) ++c[model.profiles[p].name];
  return c;
}

GpuOutcome apply_target(const Gpu& gpu, const Target& target) {
  GpuOutcome out;
  out.target = target;
  out.kept.assign(gpu.instances.size(), false);
  const GpuModel& model = *gpu.model;
  out.changed = current_target(gpu) != target;
  if (!out.changed) {
    out.layout = gpu.instances;
    out.kept.assign(gpu.instances.size(), true);
    return out;
  }
  if (!target.mig) {
    out.layout.push_back({0, 0, -1});
    return out;
  }
  if (!gpu.mig) {
    auto placed = place_profiles(model, target.profiles);
    if (placed)
      for (const auto& p : *placed) out.layout.push_back({p.profile, p.start, -1});
    return out;
  }
  // MIG to MIG: the agent's own planner, with the pod-holding instances as busy.
  mig::GpuState state;
  state.index = gpu.index;
  state.model = &model;
  state.mig_enabled = true;
  for (size_t i = 0; i < gpu.instances.size(); ++i) {
    mig::CurrentInstance ci;
    ci.gi_id = static_cast<uint32_t>(i + 1);
    ci.placed = {gpu.instances[i].profile, gpu.instances[i].start};
    ci.compute_instances = 1;
    if (gpu.instances[i].pod >= 0) ci.processes.push_back("pod");
    state.instances.push_back(std::move(ci));
  }
  mig::DesiredGpu desired;
  desired.mig_enabled = true;
  desired.counts = target_counts(model, target);
  mig::PlanOptions options;
  options.force = true;
  auto plan = mig::plan_gpu(state, desired, options);
  if (!plan) return out;  // cannot happen for a target from the catalog; the checker would say so
  for (uint32_t gi : plan->kept) {
    size_t i = gi - 1;
    out.kept[i] = true;
    out.layout.push_back(gpu.instances[i]);
  }
  for (const auto& c : plan->created) out.layout.push_back({c.profile, c.start, -1});
  std::sort(out.layout.begin(), out.layout.end(),
            [](const Instance& a, const Instance& b) { return a.start < b.start || (a.start == b.start && a.profile < b.profile); });
  return out;
}

const std::vector<Target>& candidate_targets(const GpuModel& model, bool media) {
  static std::mutex mu;
  static std::map<std::pair<const GpuModel*, bool>, std::vector<Target>> cache;
  std::lock_guard lock(mu);
  auto it = cache.find({&model, media});
  if (it != cache.end()) return it->second;
  std::set<std::vector<uint32_t>> sets;
  auto layouts = maximal_layouts(model, LayoutOptions{media});
  for (const auto& s : distinct_profile_sets(layouts)) {
    // Every sub-multiset of a legal set is legal: enumerate them by choosing, per distinct profile, how many.
    std::vector<std::pair<uint32_t, uint32_t>> groups;
    for (uint32_t p : s) {
      if (groups.empty() || groups.back().first != p) groups.push_back({p, 0});
      ++groups.back().second;
    }
    std::vector<uint32_t> pick(groups.size(), 0);
    for (;;) {
      std::vector<uint32_t> sub;
      for (size_t g = 0; g < groups.size(); ++g) sub.insert(sub.end(), pick[g], groups[g].first);
      sets.insert(sub);
      size_t g = 0;
      while (g < groups.size() && pick[g] == groups[g].second) pick[g++] = 0;
      if (g == groups.size()) break;
      ++pick[g];
    }
  }
  std::vector<Target> out;
  out.push_back(Target{false, {}});
  if (!model.profiles.empty())  // a GPU without MIG (or one the catalog lacks) is whole, only
    for (const auto& s : sets) out.push_back(Target{true, s});
  return cache.emplace(std::pair(&model, media), std::move(out)).first->second;
}

}  // namespace tessera::fleet
