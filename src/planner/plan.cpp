#include "planner/plan.hpp"

#include <algorithm>
#include <deque>

namespace tessera::planner {
namespace {

struct Slot {
  uint32_t gpu = 0;
  uint32_t instance = 0;
};

// The replicas of a set of services, in service order.
std::deque<ReplicaRef> replicas_of(const Problem& p, const std::vector<int>& services) {
  std::deque<ReplicaRef> out;
  for (int s : services)
    for (uint32_t r = 0; r < p.services[size_t(s)].replicas.value_or(0); ++r) out.push_back({s, r, 0});
  return out;
}

// Devices already cut the planned way first, then the lowest free ones.
void assign_devices(const Problem& p, Plan& plan) {
  for (size_t t = 0; t < p.gpu_types.size(); ++t) {
    const auto& current = p.gpu_types[t].current;
    std::vector<bool> taken;
    auto claim = [&](uint32_t d) {
      if (taken.size() <= d) taken.resize(d + 1, false);
      taken[d] = true;
    };
    std::vector<bool> placed(plan.gpus.size(), false);
    for (size_t g = 0; g < plan.gpus.size(); ++g) {
      auto& gpu = plan.gpus[g];
      if (size_t(gpu.gpu_type) != t) continue;
      for (uint32_t d = 0; d < current.size(); ++d)
        if (current[d] == gpu.layout && (d >= taken.size() || !taken[d])) {
          gpu.device = d;
          claim(d);
          placed[g] = true;
          break;
        }
    }
    uint32_t next = 0;
    for (size_t g = 0; g < plan.gpus.size(); ++g) {
      auto& gpu = plan.gpus[g];
      if (size_t(gpu.gpu_type) != t || placed[g]) continue;
      while (next < taken.size() && taken[next]) ++next;
      gpu.device = next;
      claim(next);
    }
  }
}

}  // namespace

const Unit& unit_of(const Problem& p, const PlannedInstance& instance) { return p.units[size_t(instance.unit)]; }

uint64_t used_memory_mib(const Problem& p, const PlannedInstance& instance) {
  uint64_t sum = 0;
  for (const auto& r : instance.replicas) sum += p.services[size_t(r.service)].memory_mib;
  return sum;
}

Plan build_plan(const Problem& p, const Counts& counts) {
  Plan plan;
  // Whole GPUs first, so that tensor-parallel replicas get neighbouring GPUs.
  std::vector<size_t> order(p.layouts.size());
  for (size_t l = 0; l < order.size(); ++l) order[l] = l;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(p.layouts[a].gpu_type, p.layouts[a].mig_enabled) < std::pair(p.layouts[b].gpu_type, p.layouts[b].mig_enabled);
  });
  std::vector<std::deque<Slot>> free(p.units.size());
  for (size_t l : order) {
    const auto& layout = p.layouts[l];
    for (uint32_t n = 0; n < counts.layouts[l]; ++n) {
      PlannedGpu gpu{layout.gpu_type, 0, static_cast<int>(l), {}};
      uint32_t index = static_cast<uint32_t>(plan.gpus.size());
      if (!layout.mig_enabled) {
        gpu.instances.push_back({layout.units.front().first, 0, 0, Isolation::dedicated, {}});
      } else {
        for (const auto& inst : layout.layout) {
          int unit = -1;
          for (size_t u = 0; u < p.units.size(); ++u)
            if (p.units[u].gpu_type == layout.gpu_type && p.units[u].profile == static_cast<int>(inst.profile)) unit = int(u);
          gpu.instances.push_back({unit, inst.profile, inst.start, Isolation::dedicated, {}});
        }
      }
      for (uint32_t i = 0; i < gpu.instances.size(); ++i) free[size_t(gpu.instances[i].unit)].push_back({index, i});
      plan.gpus.push_back(std::move(gpu));
    }
  }
  plan.sites.resize(p.services.size());
  for (size_t s = 0; s < p.services.size(); ++s) plan.sites[s].resize(p.services[s].replicas.value_or(0));

  auto take = [&](size_t unit) -> std::optional<Slot> {
    if (free[unit].empty()) return std::nullopt;
    Slot slot = free[unit].front();
    free[unit].pop_front();
    return slot;
  };
  auto put = [&](const Slot& slot, ReplicaRef ref) {
    plan.gpus[slot.gpu].instances[slot.instance].replicas.push_back(ref);
    auto& sites = plan.sites[size_t(ref.service)];
    if (sites.size() <= ref.replica) sites.resize(ref.replica + 1);
    sites[ref.replica].emplace_back(slot.gpu, slot.instance);
  };

  // Tensor-parallel groups first (widest first), then the rest.
  std::vector<size_t> groups(p.groups.size());
  for (size_t g = 0; g < groups.size(); ++g) groups[g] = g;
  std::stable_sort(groups.begin(), groups.end(), [&](size_t a, size_t b) { return p.groups[a].gpus > p.groups[b].gpus; });
  for (size_t g : groups) {
    const auto& group = p.groups[g];
    auto queue = replicas_of(p, group.services);
    uint32_t next = 0;  // replica number for groups served by rate
    for (size_t u = 0; u < p.units.size(); ++u) {
      for (uint32_t n = 0; n < counts.group_units[g][u]; ++n) {
        ReplicaRef ref;
        if (group.demand) {
          ref = {group.services.front(), next++, 0};
        } else {
          if (queue.empty()) break;
          ref = queue.front();
          queue.pop_front();
        }
        for (uint32_t rank = 0; rank < group.gpus; ++rank) {
          auto slot = take(u);
          if (!slot) break;
          ref.rank = rank;
          put(*slot, ref);
        }
      }
    }
  }

  std::vector<std::deque<ReplicaRef>> type_queue;
  for (const auto& t : p.share_types) type_queue.push_back(replicas_of(p, t.services));
  for (size_t k = 0; k < p.patterns.size(); ++k) {
    const auto& pat = p.patterns[k];
    for (uint32_t n = 0; n < counts.patterns[k]; ++n) {
      bool any = false;
      for (const auto& [t, c] : pat.types) any = any || !type_queue[size_t(t)].empty();
      if (!any) break;
      auto slot = take(size_t(pat.unit));
      if (!slot) break;
      plan.gpus[slot->gpu].instances[slot->instance].sharing = pat.isolation;
      for (const auto& [t, c] : pat.types)
        for (uint32_t i = 0; i < c && !type_queue[size_t(t)].empty(); ++i) {
          put(*slot, type_queue[size_t(t)].front());
          type_queue[size_t(t)].pop_front();
        }
    }
  }

  // Drop GPUs that received nothing, renumbering the sites.
  std::vector<int64_t> renumber(plan.gpus.size(), -1);
  std::vector<PlannedGpu> kept;
  for (size_t i = 0; i < plan.gpus.size(); ++i) {
    bool used = std::any_of(plan.gpus[i].instances.begin(), plan.gpus[i].instances.end(),
                            [](const PlannedInstance& inst) { return !inst.replicas.empty(); });
    if (!used) continue;
    renumber[i] = int64_t(kept.size());
    kept.push_back(std::move(plan.gpus[i]));
  }
  plan.gpus = std::move(kept);
  for (auto& service : plan.sites)
    for (auto& site : service)
      for (auto& [gpu, inst] : site) gpu = static_cast<uint32_t>(renumber[gpu]);
  assign_devices(p, plan);
  return plan;
}

uint32_t gpus_kept(const Problem& p, const Plan& plan) {
  uint32_t kept = 0;
  for (const auto& gpu : plan.gpus) {
    const auto& current = p.gpu_types[size_t(gpu.gpu_type)].current;
    if (gpu.device < current.size() && current[gpu.device] == gpu.layout) ++kept;
  }
  return kept;
}

}  // namespace tessera::planner
