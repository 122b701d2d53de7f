// Two baselines for the benchmark: mig-manager's one layout fleet-wide, and a greedy first fit.
#include <algorithm>
#include <cstdint>
#include <map>
#include <set>

#include "fleet/fleet.hpp"
#include "fleet/internal.hpp"

namespace tessera::fleet {
namespace {

struct State {
  std::vector<PlannedGpu> gpus;
  std::vector<int> placement;
  std::vector<bool> evicted;
  std::vector<Amounts> room;  // per node: what is left for pods placed anew (NodeResourcesFit)
  // Whether pod i fits node n's room now; if so and `take`, it takes its part.
  bool fit(const Problem& p, int i, size_t n, bool take) {
    const Amounts& asks = p.pods[size_t(i)].requests;
    if (!fits(room[n], asks)) return false;
    if (take)
      for (const auto& [r, q] : asks)
        if (auto it = room[n].find(r); it != room[n].end()) it->second -= q;
    return true;
  }
};

Objective objective_of(const Problem& p, const State& s) {
  FleetPlan plan;
  plan.gpus = s.gpus;
  plan.placement = s.placement;
  plan.evicted = s.evicted;
  return evaluate(p, plan);
}

std::vector<int> demand_order(const Problem& p, const State& s) {
  std::vector<int> d;
  for (size_t i = 0; i < p.pods.size(); ++i)
    if (s.placement[i] < 0) d.push_back(int(i));
  // The highest priority first, then the biggest.
  std::stable_sort(d.begin(), d.end(), [&](int a, int b) {
    const Pod &pa = p.pods[size_t(a)], &pb = p.pods[size_t(b)];
    return std::pair(pa.priority, pa.count) > std::pair(pb.priority, pb.count);
  });
  return d;
}

// Free instances of `resource` on GPU g.
std::vector<size_t> free_of(const PlannedGpu& pg, const Gpu& gpu, const std::string& resource) {
  std::vector<size_t> out;
  for (size_t s = 0; s < pg.layout.size(); ++s)
    if (pg.layout[s].pod < 0 && instance_resource(gpu, pg.layout[s], pg.target.mig) == resource) out.push_back(s);
  return out;
}

// First fit of the demand on the layouts as they are (the scheduler's part).
void first_fit_fixed(const Problem& p, State& s) {
  std::set<std::pair<int, uint32_t>> exhausted;
  // Free instances per node and resource, counted when first needed and kept as pods take them.
  const size_t R = p.resources.size();
  std::vector<int> free_at(p.nodes.size() * R, -1);
  for (int i : demand_order(p, s)) {
    const Pod& pod = p.pods[size_t(i)];
    if (!pod.constrained && (exhausted.contains({pod.resource, pod.count}) || exhausted.contains({pod.resource, 1}))) continue;
    const std::string& r = p.resources[size_t(pod.resource)];
    bool done = false;
    for (size_t n = 0; n < p.nodes.size() && !done; ++n) {
      int& known = free_at[n * R + size_t(pod.resource)];
      if (known >= 0 && known < int(pod.count)) continue;
      if (!p.allows(i, int(n)) || !p.nodes[n].accepts_pods() || !s.fit(p, i, n, false)) continue;
      std::vector<std::pair<size_t, size_t>> slots;
      for (int g : p.nodes[n].gpus)
        for (size_t sl : free_of(s.gpus[size_t(g)], p.gpus[size_t(g)], r)) slots.push_back({size_t(g), sl});
      known = int(slots.size());
      if (slots.size() < pod.count) continue;
      known -= int(pod.count);
      s.fit(p, i, n, true);
      for (uint32_t c = 0; c < pod.count; ++c) s.gpus[slots[c].first].layout[slots[c].second].pod = i;
      s.placement[size_t(i)] = int(n);
      done = true;
    }
    if (!done && !pod.constrained) exhausted.insert({pod.resource, pod.count});
  }
}

State initial(const Problem& p) {
  State s;
  for (const auto& g : p.gpus) s.gpus.push_back({current_target(g), false, g.instances});
  s.placement.assign(p.pods.size(), -1);
  s.evicted.assign(p.pods.size(), false);
  for (size_t i = 0; i < p.pods.size(); ++i) s.placement[i] = p.pods[i].node;
  for (const auto& n : p.nodes) s.room.push_back(n.room);
  return s;
}

void retarget(PlannedGpu& pg, const Gpu& gpu) {
  pg.target.mig = gpu.mig;
  pg.target.profiles.clear();
  if (gpu.mig)
    for (const auto& i : pg.layout) pg.target.profiles.push_back(i.profile);
  std::sort(pg.target.profiles.begin(), pg.target.profiles.end());
  pg.changed = pg.target != current_target(gpu);
}

}  // namespace

Objective baseline_first_fit(const Problem& p) { return first_fit_plan(p).objective; }

FleetPlan first_fit_plan(const Problem& p) {
  State s = initial(p);
  std::set<std::pair<int, uint32_t>> exhausted;
  // Per node and resource, the fewest devices the node could not give since a pod was last placed
  // there. A node's attempt depends only on its state, the resource and the count (and fails for
  // a larger count where it failed for a smaller one), so it is not tried again until it changes.
  const size_t R = p.resources.size();
  std::vector<uint32_t> refused(p.nodes.size() * R, UINT32_MAX);
  for (int i : demand_order(p, s)) {
    const Pod& pod = p.pods[size_t(i)];
    if (!pod.constrained && (exhausted.contains({pod.resource, pod.count}) || exhausted.contains({pod.resource, 1}))) continue;
    const std::string& r = p.resources[size_t(pod.resource)];
    bool done = false;
    for (size_t n = 0; n < p.nodes.size() && !done; ++n) {
      uint32_t& refused_from = refused[n * R + size_t(pod.resource)];
      if (pod.count >= refused_from) continue;
      if (!p.allows(i, int(n)) || !p.nodes[n].accepts_pods() || !s.fit(p, i, n, false)) continue;
      // The GPUs this node's attempt changes, as they were (saved before the first change, so a
      // node that cannot serve costs no copies).
      std::vector<std::pair<int, PlannedGpu>> saved;
      auto save = [&](int g) { saved.emplace_back(g, s.gpus[size_t(g)]); };
      std::vector<std::pair<size_t, size_t>> slots;
      for (int g : p.nodes[n].gpus)
        for (size_t sl : free_of(s.gpus[size_t(g)], p.gpus[size_t(g)], r)) slots.push_back({size_t(g), sl});
      // Not enough: change GPUs of this node, adding instances without evicting anyone.
      for (int g : p.nodes[n].gpus) {
        if (slots.size() >= pod.count) break;
        PlannedGpu& pg = s.gpus[size_t(g)];
        const Gpu& gpu = p.gpus[size_t(g)];
        if (gpu.fixed) continue;
        bool busy = std::any_of(pg.layout.begin(), pg.layout.end(), [](const Instance& x) { return x.pod >= 0; });
        if (r == kWholeGpu) {
          if (busy || !pg.target.mig) continue;
          save(g);
          pg.layout = {{0, 0, -1}};
          pg.target = {false, {}};
          pg.changed = pg.target != current_target(gpu);
          slots.push_back({size_t(g), 0});
          continue;
        }
        const GpuInstanceProfile* prof = gpu.model->profile(r);
        if (!prof) continue;
        uint32_t q = uint32_t(prof - gpu.model->profiles.data());
        if (!pg.target.mig && busy) continue;
        save(g);
        if (!pg.target.mig) {
          pg.layout.clear();
          pg.target = {true, {}};
        }
        bool dropped = false;
        while (slots.size() < pod.count) {
          MigLayout fixed;
          for (const auto& x : pg.layout) fixed.push_back({x.profile, x.start});
          std::vector<uint32_t> want{q};
          auto placed = place_profiles(*gpu.model, want, fixed);
          if (!placed) {
            // Drop the idle instances and try again around the busy ones.
            MigLayout busy_only;
            std::vector<Instance> keep;
            for (const auto& x : pg.layout)
              if (x.pod >= 0) {
                busy_only.push_back({x.profile, x.start});
                keep.push_back(x);
              }
            if (dropped || keep.size() == pg.layout.size()) break;
            dropped = true;
            placed = place_profiles(*gpu.model, want, busy_only);
            if (!placed) break;
            // Idle instances removed: the slots counted on them go.
            std::erase_if(slots, [&](const auto& sl) { return sl.first == size_t(g); });
            pg.layout = keep;
          }
          pg.layout.push_back({(*placed)[0].profile, (*placed)[0].start, -1});
          slots.push_back({size_t(g), pg.layout.size() - 1});
        }
        retarget(pg, gpu);
      }
      if (slots.size() >= pod.count) {
        s.fit(p, i, n, true);
        for (uint32_t c = 0; c < pod.count; ++c) s.gpus[slots[c].first].layout[slots[c].second].pod = i;
        s.placement[size_t(i)] = int(n);
        done = true;
        std::fill_n(refused.begin() + ptrdiff_t(n * R), R, UINT32_MAX);
      } else {
        for (auto& [g, was] : saved) s.gpus[size_t(g)] = std::move(was);
        refused_from = pod.count;
      }
    }
    if (!done && !pod.constrained) exhausted.insert({pod.resource, pod.count});
  }
  FleetPlan plan;
  plan.gpus = std::move(s.gpus);
  plan.placement = std::move(s.placement);
  plan.evicted = std::move(s.evicted);
  plan.objective = evaluate(p, plan);
  return plan;
}

Objective baseline_one_layout(const Problem& p) {
  // Per product, the layouts to choose from: MIG off and each maximal multiset.
  std::map<const GpuModel*, std::vector<Target>> choices;
  for (const auto& n : p.nodes) {
    if (choices.contains(n.model)) continue;
    const auto& all = candidate_targets(*n.model, p.media_engines);
    std::vector<Target> maximal;
    for (const auto& t : all) {
      if (!t.mig) {
        maximal.push_back(t);
        continue;
      }
      bool covered = false;
      for (const auto& u : all)
        if (u.mig && u.profiles.size() > t.profiles.size() &&
            std::includes(u.profiles.begin(), u.profiles.end(), t.profiles.begin(), t.profiles.end())) {
          covered = true;
          break;
        }
      if (!covered) maximal.push_back(t);
    }
    choices[n.model] = std::move(maximal);
  }
  const size_t R = p.resources.size();
  std::map<const GpuModel*, size_t> pick;
  for (const auto& [m, ts] : choices) pick[m] = 0;
  // Counting estimate of (served units, evicted) for a choice of one layout per product.
  auto estimate = [&](const std::map<const GpuModel*, size_t>& choice) {
    std::vector<int64_t> cap(R, 0), demand(R, 0);
    int64_t evicted = 0;
    for (const auto& pod : p.pods)
      if (!pod.running()) demand[size_t(pod.resource)] += pod.count;
    for (const auto& gpu : p.gpus) {
      const Target& t = choices.at(gpu.model)[choice.at(gpu.model)];
      if (gpu.fixed || t == current_target(gpu)) {
        for (const auto& i : gpu.instances)
          if (i.pod < 0)
            if (int r = p.resource_index(instance_resource(gpu, i)); r >= 0) ++cap[size_t(r)];
        continue;
      }
      // mig-manager clears a GPU whose layout changes: every pod on it goes.
      for (const auto& i : gpu.instances)
        if (i.pod >= 0) {
          ++evicted;
          ++demand[size_t(p.pods[size_t(i.pod)].resource)];
        }
      if (!t.mig) ++cap[0];
      for (uint32_t q : t.profiles)
        if (int r = p.resource_index(gpu.model->profiles[q].name); r >= 0) ++cap[size_t(r)];
    }
    int64_t served = 0;
    for (size_t r = 0; r < R; ++r) served += std::min(cap[r], demand[r]);
    return std::pair(served, -evicted);
  };
  for (int round = 0; round < 2; ++round)
    for (auto& [m, idx] : pick) {
      auto best = estimate(pick);
      size_t best_i = idx;
      for (size_t c = 0; c < choices[m].size(); ++c) {
        idx = c;
        auto e = estimate(pick);
        if (e > best) {
          best = e;
          best_i = c;
        }
      }
      idx = best_i;
    }
  State s = initial(p);
  for (size_t g = 0; g < p.gpus.size(); ++g) {
    const Gpu& gpu = p.gpus[g];
    const Target& t = choices.at(gpu.model)[pick.at(gpu.model)];
    if (gpu.fixed || t == current_target(gpu)) continue;
    for (const auto& i : gpu.instances)
      if (i.pod >= 0) {
        s.evicted[size_t(i.pod)] = true;
        s.placement[size_t(i.pod)] = -1;
      }
    PlannedGpu& pg = s.gpus[g];
    pg.target = t;
    pg.changed = true;
    pg.layout.clear();
    if (!t.mig) pg.layout.push_back({0, 0, -1});
    else if (auto placed = place_profiles(*gpu.model, t.profiles))
      for (const auto& x : *placed) pg.layout.push_back({x.profile, x.start, -1});
  }
  // A pod spanning several GPUs loses all of them when one goes.
  for (auto& pg : s.gpus)
    for (auto& i : pg.layout)
      if (i.pod >= 0 && s.evicted[size_t(i.pod)]) i.pod = -1;
  first_fit_fixed(p, s);
  return objective_of(p, s);
}

}  // namespace tessera::fleet
