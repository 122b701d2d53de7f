#include "mig/mig_plan.hpp"

#include <algorithm>
#include <bit>
#include <map>

namespace tessera::mig {
namespace {

std::string instance_name(const GpuModel& model, const CurrentInstance& inst) {
  std::string s = model.profiles[inst.placed.profile].name + "@" + std::to_string(inst.placed.start) + " (GI " +
                  std::to_string(inst.gi_id);
  if (!inst.uuid.empty()) s += ", " + inst.uuid;
  return s + ")";
}

struct Choice {
  uint32_t keep_mask = 0;
  MigLayout created;
};

// Operations a choice costs: each destroyed instance 1 (+1 when it has
// compute instances), each created one 2 (GI + CI), each kept one without a
// compute instance 1.
size_t operation_count(const std::vector<CurrentInstance>& current, uint32_t keep_mask, size_t created) {
  size_t ops = created * 2;
  for (uint32_t i = 0; i < current.size(); ++i) {
    bool kept = keep_mask >> i & 1;
    if (kept && current[i].compute_instances == 0) ops += 1;
    if (!kept) ops += current[i].compute_instances > 0 ? 2 : 1;
  }
  return ops;
}

// The set of current instances to keep that the desired multiset allows,
// with placements for the rest around them: the most busy instances kept
// (with `force`, the fewest users disturbed), then the most instances, then
// the fewest operations, then the lowest mask (deterministic).
std::optional<Choice> best_keep(const GpuModel& model, const std::vector<CurrentInstance>& current,
                                const std::vector<uint32_t>& wanted, uint32_t must_keep, uint32_t busy) {
  const uint32_t n = static_cast<uint32_t>(current.size());
  std::optional<Choice> best;
  int best_busy = -1;
  int best_kept = -1;
  size_t best_ops = 0;
  for (uint32_t mask = 0; mask < (1u << n); ++mask) {
    if ((mask & must_keep) != must_keep) continue;
    int kept = std::popcount(mask);
    int busy_kept = std::popcount(mask & busy);
    if (busy_kept < best_busy || (busy_kept == best_busy && kept < best_kept)) continue;
    std::map<uint32_t, int> remaining;
    for (uint32_t w : wanted) ++remaining[w];
    MigLayout fixed;
    bool fits = true;
    for (uint32_t i = 0; i < n && fits; ++i) {
      if (!(mask >> i & 1)) continue;
      const auto& inst = current[i];
      if (--remaining[inst.placed.profile] < 0 || !inst.default_compute_only) fits = false;
      fixed.push_back(inst.placed);
    }
    if (!fits) continue;
    std::vector<uint32_t> rest;
    for (auto [profile, count] : remaining) rest.insert(rest.end(), static_cast<size_t>(count), profile);
    auto placed = place_profiles(model, rest, fixed);
    if (!placed) continue;
    size_t ops = operation_count(current, mask, placed->size());
    if (busy_kept > best_busy || kept > best_kept || ops < best_ops) {
      best = Choice{mask, std::move(*placed)};
      best_busy = busy_kept;
      best_kept = kept;
      best_ops = ops;
    }
  }
  return best;
}

}  // namespace

std::string_view to_string(OpKind kind) {
  switch (kind) {
    case OpKind::set_mig_mode: return "set-mig-mode";
    case OpKind::destroy_compute_instances: return "destroy-compute-instances";
    case OpKind::destroy_gpu_instance: return "destroy-gpu-instance";
    case OpKind::create_gpu_instance: return "create-gpu-instance";
    case OpKind::create_compute_instance: return "create-compute-instance";
  }
  return "?";
}

std::string Operation::describe(const GpuModel& model) const {
  std::string p = profile < model.profiles.size() ? model.profiles[profile].name : "?";
  std::string where = "GPU " + std::to_string(gpu) + ": ";
  switch (kind) {
    case OpKind::set_mig_mode: return where + (enabled ? "enable" : "disable") + " MIG mode";
    case OpKind::destroy_compute_instances: return where + "destroy compute instances of GI " + std::to_string(gi_id);
    case OpKind::destroy_gpu_instance:
      return where + "destroy " + p + "@" + std::to_string(start) + " (GI " + std::to_string(gi_id) +
             (uuid.empty() ? "" : ", " + uuid) + ")";
    case OpKind::create_gpu_instance: return where + "create " + p + "@" + std::to_string(start);
    case OpKind::create_compute_instance:
      return where + "create compute instance " + p + " on " + (gi_id ? "GI " + std::to_string(gi_id) : p + "@" + std::to_string(start));
  }
  return where + "?";
}

Result<GpuPlan> plan_gpu(const GpuState& state, const DesiredGpu& desired, const PlanOptions& options) {
  if (!state.model) return fail(Errc::invalid_argument, "GPU " + std::to_string(state.index) + ": unknown GPU model");
  const GpuModel& model = *state.model;
  GpuPlan plan;
  plan.gpu = state.index;
  std::string gpu_name = "GPU " + std::to_string(state.index) + " (" + model.name + ")";

  std::vector<uint32_t> wanted;
  if (desired.mig_enabled) {
    auto layout = place_counts(model, desired.counts);  // validates names, counts, placeability
    if (!layout) return fail(layout.error().code, gpu_name + ": " + layout.error().message);
    for (const auto& i : *layout) wanted.push_back(i.profile);
  }
  const auto& current = state.instances;
  if (current.size() > 31) return fail(Errc::internal, gpu_name + ": more GPU instances than any GPU has");

  uint32_t busy_mask = 0;
  for (uint32_t i = 0; i < current.size(); ++i)
    if (current[i].busy()) busy_mask |= 1u << i;
  uint32_t must_keep = options.force ? 0 : busy_mask;

  std::optional<Choice> choice;
  if (desired.mig_enabled) {
    choice = best_keep(model, current, wanted, must_keep, busy_mask);
  } else if (must_keep == 0) {
    choice = Choice{0, {}};
  }
  if (!choice) {
    std::string blockers;
    for (uint32_t i = 0; i < current.size(); ++i) {
      if (!(busy_mask >> i & 1)) continue;
      std::string procs;
      for (const auto& p : current[i].processes) procs += (procs.empty() ? "" : ", ") + p;
      blockers += (blockers.empty() ? "" : "; ") + instance_name(model, current[i]) + " used by " + procs;
    }
    return fail(Errc::conflict, gpu_name + ": the desired layout cannot be placed around instances in use: " + blockers +
                                    " (stop those processes, or pass --force to destroy them)");
  }

  // Destroy first (compute instances, then the GPU instance), then create.
  for (uint32_t i = 0; i < current.size(); ++i) {
    const auto& inst = current[i];
    if (choice->keep_mask >> i & 1) {
      plan.kept.push_back(inst.gi_id);
      continue;
    }
    plan.destroyed.push_back(inst.gi_id);
    if (inst.compute_instances > 0)
      plan.operations.push_back({OpKind::destroy_compute_instances, state.index, false, inst.placed.profile,
                                 inst.placed.start, inst.gi_id, inst.uuid});
    plan.operations.push_back({OpKind::destroy_gpu_instance, state.index, false, inst.placed.profile, inst.placed.start,
                               inst.gi_id, inst.uuid});
  }
  bool mode_now = state.pending_mig_enabled.value_or(state.mig_enabled);
  if (mode_now != desired.mig_enabled) {
    plan.mode_change = true;
    // Enabling comes before creating; disabling after destroying.
    auto op = Operation{OpKind::set_mig_mode, state.index, desired.mig_enabled, 0, 0, 0, ""};
    if (desired.mig_enabled) plan.operations.insert(plan.operations.begin(), op);
    else plan.operations.push_back(op);
  }
  // Kept instances without a compute instance get their default one.
  for (uint32_t i = 0; i < current.size(); ++i)
    if ((choice->keep_mask >> i & 1) && current[i].compute_instances == 0)
      plan.operations.push_back({OpKind::create_compute_instance, state.index, false, current[i].placed.profile,
                                 current[i].placed.start, current[i].gi_id, ""});
  plan.created = choice->created;
  std::sort(plan.created.begin(), plan.created.end(),
            [](const PlacedInstance& a, const PlacedInstance& b) { return a.start < b.start; });
  for (const auto& c : plan.created) {
    plan.operations.push_back({OpKind::create_gpu_instance, state.index, false, c.profile, c.start, 0, ""});
    plan.operations.push_back({OpKind::create_compute_instance, state.index, false, c.profile, c.start, 0, ""});
  }
  return plan;
}

}  // namespace tessera::mig
