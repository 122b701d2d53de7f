// The tests' oracle: an exhaustive search over every legal layout of every
// GPU of a tiny fleet, written apart from the model in src/fleet. It shares
// only the facts: the catalog's placement rules (core's place_profiles) and
// what the node agent does to a GPU whose counts change (mig::plan_gpu, with
// the pod-holding instances busy). Every pod placement is searched too.
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <vector>

#include "fleet/fleet.hpp"
#include "mig/mig_plan.hpp"

namespace tessera::fleet::testing {

struct Choice {
  bool mig = false;
  ProfileCounts counts;
};

// Every profile-count vector the GPU can hold (media variants left out), and MIG off.
inline std::vector<Choice> all_choices(const GpuModel& model) {
  std::vector<uint32_t> profiles;
  for (uint32_t i = 0; i < model.profiles.size(); ++i)
    if (model.profiles[i].name.find('+') == std::string::npos && model.profiles[i].name.find("-me") == std::string::npos)
      profiles.push_back(i);
  std::vector<Choice> out{Choice{false, {}}};
  if (model.profiles.empty()) return out;  // no MIG: whole, only
  std::vector<uint32_t> counts(profiles.size(), 0);
  std::function<void(size_t, uint32_t)> rec = [&](size_t k, uint32_t slices) {
    if (k == profiles.size()) {
      std::vector<uint32_t> wanted;
      ProfileCounts c;
      for (size_t i = 0; i < profiles.size(); ++i) {
        wanted.insert(wanted.end(), counts[i], profiles[i]);
        if (counts[i]) c[model.profiles[profiles[i]].name] = counts[i];
      }
      if (place_profiles(model, wanted)) out.push_back(Choice{true, c});
      return;
    }
    const auto& p = model.profiles[profiles[k]];
    for (uint32_t n = 0; n <= p.max_count && slices + n * p.slices <= model.compute_slices; ++n) {
      counts[k] = n;
      rec(k + 1, slices + n * p.slices);
    }
    counts[k] = 0;
  };
  rec(0, 0);
  return out;
}

struct After {
  bool mig = false;
  bool changed = false;
  std::vector<std::pair<std::string, int>> slots;  // (resource, pod kept there or -1)
  std::vector<bool> kept;                          // per old instance
};

inline After outcome(const Gpu& gpu, const Choice& c) {
  After a;
  a.mig = c.mig;
  a.kept.assign(gpu.instances.size(), false);
  ProfileCounts now;
  if (gpu.mig)
    for (const auto& i : gpu.instances) ++now[gpu.model->profiles[i.profile].name];
  bool same = c.mig == gpu.mig && (!c.mig || now == c.counts);
  a.changed = !same;
  if (same) {
    for (size_t i = 0; i < gpu.instances.size(); ++i) {
      a.kept[i] = true;
      a.slots.push_back({c.mig ? gpu.model->profiles[gpu.instances[i].profile].name : std::string("gpu"), gpu.instances[i].pod});
    }
    return a;
  }
  if (!c.mig) {
    a.slots.push_back({"gpu", -1});
    return a;
  }
  if (!gpu.mig) {
    for (const auto& [name, n] : c.counts)
      for (uint32_t k = 0; k < n; ++k) a.slots.push_back({name, -1});
    return a;
  }
  mig::GpuState st;
  st.model = gpu.model;
  st.mig_enabled = true;
  for (size_t i = 0; i < gpu.instances.size(); ++i) {
    mig::CurrentInstance ci;
    ci.gi_id = uint32_t(100 + i);
    ci.placed = {gpu.instances[i].profile, gpu.instances[i].start};
    ci.compute_instances = 1;
    if (gpu.instances[i].pod >= 0) ci.processes = {"x"};
    st.instances.push_back(ci);
  }
  mig::PlanOptions o;
  o.force = true;
  auto plan = mig::plan_gpu(st, mig::DesiredGpu{true, c.counts}, o);
  for (uint32_t gi : plan->kept) {
    size_t i = gi - 100;
    a.kept[i] = true;
    a.slots.push_back({gpu.model->profiles[gpu.instances[i].profile].name, gpu.instances[i].pod});
  }
  for (const auto& cr : plan->created) a.slots.push_back({gpu.model->profiles[cr.profile].name, -1});
  return a;
}

// The scheduler's filters, written here apart from src/fleet: a node takes a
// new pod when it is Ready, not cordoned and not frozen (build_problem keeps a node whose pods it
// cannot place on its devices as it is), every NoSchedule or NoExecute
// taint is tolerated, the nodeSelector's labels are there, and some required
// term's requirements all hold (In, NotIn, Exists, DoesNotExist on labels; In
// on metadata.name).
inline bool oracle_admits(const Node& n, const PodRules& r) {
  if (!n.ready || n.unschedulable || n.frozen) return false;
  for (const auto& t : n.taints) {
    if (t.effect != "NoSchedule" && t.effect != "NoExecute") continue;
    bool ok = false;
    for (const auto& tol : r.tolerations)
      ok = ok || ((tol.effect.empty() || tol.effect == t.effect) &&
                  ((tol.op == "Exists" && (tol.key.empty() || tol.key == t.key)) ||
                   (tol.op != "Exists" && tol.key == t.key && tol.value == t.value)));
    if (!ok) return false;
  }
  for (const auto& [k, v] : r.node_selector)
    if (!n.labels.contains(k) || n.labels.at(k) != v) return false;
  if (r.required.empty()) return true;
  for (const auto& term : r.required) {
    bool all = !term.expressions.empty() || !term.fields.empty();
    for (const auto& q : term.expressions) {
      const bool has = n.labels.contains(q.key);
      const bool in = has && std::count(q.values.begin(), q.values.end(), n.labels.at(q.key)) > 0;
      if (q.op == "In") all = all && in;
      else if (q.op == "NotIn") all = all && !in;
      else if (q.op == "Exists") all = all && has;
      else if (q.op == "DoesNotExist") all = all && !has;
      else all = false;
    }
    for (const auto& q : term.fields) all = all && q.op == "In" && std::count(q.values.begin(), q.values.end(), n.name) > 0;
    if (all) return true;
  }
  return false;
}

// The lexicographic optimum over every layout of every GPU and every placement of every pod.
inline Objective brute_force(const Problem& p, std::optional<int64_t> max_evictions = std::nullopt) {
  const size_t G = p.gpus.size();
  std::vector<std::vector<After>> options(G);
  for (size_t g = 0; g < G; ++g) {
    const Node& n = p.nodes[size_t(p.gpus[g].node)];
    if (const Gpu& gpu = p.gpus[g]; gpu.fixed) {
      // Planned as it is: each device (each replica of one) serves what the device plugin
      // advertises it as: nvidia.com/gpu when whole or under the single strategy, else its profile.
      After a;
      a.mig = gpu.mig;
      for (const auto& i : gpu.instances) {
        a.kept.push_back(true);
        const std::string name = !gpu.mig || gpu.single ? std::string("gpu") : gpu.model->profiles[i.profile].name;
        a.slots.push_back({gpu.renamed.count(name) ? name + ".shared" : name, i.pod});
      }
      options[g].push_back(std::move(a));
      continue;
    }
    for (const auto& c : all_choices(*p.gpus[g].model)) {
      After a = outcome(p.gpus[g], c);
      if (a.changed && (n.unschedulable || !n.ready || n.frozen)) continue;  // a node that takes no pods stays as it is
      options[g].push_back(std::move(a));
    }
  }
  Objective best;
  best.waiting.assign(p.priorities.size(), INT64_MAX);
  best.unserved = best.evicted = best.changed_gpus = best.gpus_used = INT64_MAX;
  std::vector<size_t> pick(G, 0);
  for (;;) {
    // Kept pods: every instance kept.
    std::vector<bool> kept(p.pods.size(), false);
    int64_t evicted = 0, changed = 0;
    for (size_t i = 0; i < p.pods.size(); ++i) {
      if (!p.pods[i].running()) continue;
      bool k = true;
      for (auto [g, inst] : p.pods[i].holds) k = k && options[size_t(g)][pick[size_t(g)]].kept[size_t(inst)];
      kept[i] = k;
      if (!k) ++evicted;
    }
    for (size_t g = 0; g < G; ++g) changed += options[g][pick[g]].changed;
    if (!max_evictions || evicted <= *max_evictions) {
      // Free slots per GPU per resource; a slot whose pod is not kept is free.
      std::vector<std::map<std::string, int>> free(G);
      std::vector<bool> used(G, false);
      for (size_t g = 0; g < G; ++g)
        for (const auto& [r, pod] : options[g][pick[g]].slots) {
          if (pod >= 0 && kept[size_t(pod)]) used[g] = true;
          else ++free[g][r];
        }
      std::vector<int> demand;
      for (size_t i = 0; i < p.pods.size(); ++i)
        if (!kept[i]) demand.push_back(int(i));
      // Search: each demand pod unserved, or on one node with its count spread over that node's GPUs.
      // The key, minimised lexicographically: per priority (highest first) the pods left pending or
      // evicted, then every pod unserved, then the GPUs in use.
      const size_t tiers = p.priorities.size();
      std::vector<int64_t> best_key, key(tiers + 1, 0);
      auto tier_of = [&](const Pod& pod) -> std::optional<size_t> {
        for (size_t t = 0; t < tiers; ++t)
          if (p.priorities[t] == pod.priority) return t;
        return std::nullopt;
      };
      for (size_t i = 0; i < p.pods.size(); ++i)
        if (p.pods[i].running() && !kept[i])
          if (auto t = tier_of(p.pods[i])) ++key[*t];
      std::function<void(size_t)> place = [&](size_t k) {
        if (!best_key.empty() && std::lexicographical_compare(best_key.begin(), best_key.end() - 1, key.begin(), key.end())) return;
        if (k == demand.size()) {
          std::vector<int64_t> full = key;
          full.push_back(std::count(used.begin(), used.end(), true));
          if (best_key.empty() || full < best_key) best_key = full;
          return;
        }
        const Pod& pod = p.pods[size_t(demand[k])];
        const std::string& r = p.resources[size_t(pod.resource)];
        const auto tier = pod.running() ? std::nullopt : tier_of(pod);  // an evicted pod is counted above
        if (tier) ++key[*tier];
        ++key[tiers];
        place(k + 1);
        if (tier) --key[*tier];
        --key[tiers];
        for (const auto& node : p.nodes) {
          if (!oracle_admits(node, pod.rules)) continue;
          // Every way to take pod.count instances from the node's GPUs.
          std::function<void(size_t, uint32_t)> spread = [&](size_t gi, uint32_t left) {
            if (left == 0) {
              place(k + 1);
              return;
            }
            if (gi == node.gpus.size()) return;
            size_t g = size_t(node.gpus[gi]);
            int avail = free[g][r];
            for (int take = std::min<int>(avail, int(left)); take >= 0; --take) {
              free[g][r] -= take;
              bool was = used[g];
              if (take) used[g] = true;
              spread(gi + 1, left - uint32_t(take));
              used[g] = was;
              free[g][r] += take;
            }
          };
          spread(0, pod.count);
        }
      };
      place(0);
      Objective o;
      o.waiting.assign(best_key.begin(), best_key.begin() + std::ptrdiff_t(tiers));
      o.unserved = best_key[tiers];
      o.evicted = evicted;
      o.changed_gpus = changed;
      o.gpus_used = best_key[tiers + 1];
      if (o < best) best = o;
    }
    size_t g = 0;
    while (g < G && ++pick[g] == options[g].size()) pick[g++] = 0;
    if (g == G) break;
  }
  return best;
}

}  // namespace tessera::fleet::testing
