// The plan checker: every rule re-checked from the problem and the plan alone.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "fleet/fleet.hpp"

namespace tessera::fleet {
namespace {

// The counts a mig-parted config gives GPU `index` of `model` (nullopt: MIG off; no entry: unset).
std::optional<std::optional<ProfileCounts>> resolve(const config::MigConfig& cfg, const GpuModel& model, uint32_t index) {
  for (const auto& e : cfg.entries) {
    if (!e.devices.selects(index) || !config::filter_selects(e, model.pci_device_id, 0, &model)) continue;
    if (!e.mig_enabled) return std::optional<ProfileCounts>();
    ProfileCounts c;
    for (const auto& d : e.mig_devices)
      if (d.count) c[d.canonical.empty() ? d.profile : d.canonical] += d.count;
    return std::optional<ProfileCounts>(c);
  }
  return std::nullopt;
}

}  // namespace

Result<void> check_fleet_plan(const Problem& p, const FleetPlan& plan, const PlanOptions& options) {
  auto bad = [](const std::string& why) { return fail(Errc::internal, why); };
  if (plan.gpus.size() != p.gpus.size() || plan.placement.size() != p.pods.size() || plan.evicted.size() != p.pods.size())
    return bad("the plan does not cover every GPU and pod of the problem");
  std::map<int, std::vector<std::pair<size_t, size_t>>> held;  // pod -> (gpu, instance) after
  for (size_t g = 0; g < p.gpus.size(); ++g) {
    const Gpu& gpu = p.gpus[g];
    const PlannedGpu& pg = plan.gpus[g];
    const Node& node = p.nodes[size_t(gpu.node)];
    std::string where = "node " + node.name + " GPU " + std::to_string(gpu.index);
    if (gpu.model != node.model) return bad(where + ": not the node's product");
    if (gpu.fixed) {
      // Planned as it is (uncatalogued product, single strategy, shared replicas): the same devices.
      bool same_devices = pg.target == current_target(gpu) && pg.layout.size() == gpu.instances.size();
      for (size_t s = 0; same_devices && s < pg.layout.size(); ++s)
        same_devices = pg.layout[s].profile == gpu.instances[s].profile && pg.layout[s].start == gpu.instances[s].start;
      if (!same_devices) return bad(where + ": changed, but its GPUs are planned as they are");
    } else if (pg.target.mig) {
      MigLayout layout;
      std::vector<uint32_t> profiles;
      for (const auto& i : pg.layout) {
        layout.push_back({i.profile, i.start});
        profiles.push_back(i.profile);
      }
      if (auto ok = check_layout(*gpu.model, layout); !ok) return bad(where + ": " + ok.error().message);
      std::sort(profiles.begin(), profiles.end());
      if (profiles != pg.target.profiles) return bad(where + ": the layout is not the GPU's target");
    } else if (pg.layout.size() != 1) {
      return bad(where + ": MIG off, but not one whole GPU");
    }
    bool same = pg.target.mig == gpu.mig;
    if (same && gpu.mig) {
      std::vector<uint32_t> now;
      for (const auto& i : gpu.instances) now.push_back(i.profile);
      std::sort(now.begin(), now.end());
      same = now == pg.target.profiles;
    }
    if (pg.changed == same) return bad(where + ": marked " + (pg.changed ? "changed" : "unchanged") + " wrongly");
    if (pg.changed && !node.accepts_pods())
      return bad(where + ": changed, but the node takes no new pods (" +
                 (node.frozen ? "kept as it is" : node.ready ? "cordoned" : "not Ready") + ")");
    if (!pg.changed)
      for (const auto& i : gpu.instances)
        if (std::none_of(pg.layout.begin(), pg.layout.end(),
                         [&](const Instance& a) { return a.profile == i.profile && a.start == i.start; }))
          return bad(where + ": unchanged, yet an instance moved");
    for (size_t s = 0; s < pg.layout.size(); ++s)
      if (pg.layout[s].pod >= 0) {
        if (size_t(pg.layout[s].pod) >= p.pods.size()) return bad(where + ": an instance holds an unknown pod");
        held[pg.layout[s].pod].push_back({g, s});
      }
  }
  Objective o;
  std::map<int64_t, int64_t> waiting;  // priority -> pending pods unserved and running pods evicted
  for (size_t i = 0; i < p.pods.size(); ++i) {
    const Pod& pod = p.pods[i];
    auto it = held.find(int(i));
    size_t n = it == held.end() ? 0 : it->second.size();
    if (plan.placement[i] < 0) {
      if (n) return bad("pod " + pod.id + ": unserved but holds devices");
      ++o.unserved;
      if (!pod.running()) ++waiting[pod.priority];
    } else {
      if (n != pod.count)
        return bad("pod " + pod.id + ": holds " + std::to_string(n) + " devices, asks for " + std::to_string(pod.count));
      for (auto [g, s] : it->second) {
        const Gpu& gpu = p.gpus[g];
        if (gpu.node != plan.placement[i]) return bad("pod " + pod.id + ": its devices are not all on its node");
        if (instance_resource(gpu, plan.gpus[g].layout[s], plan.gpus[g].target.mig) != p.resources[size_t(pod.resource)])
          return bad("pod " + pod.id + ": a device of another resource");
      }
    }
    // A pod placed anew goes only where the scheduler would bind it.
    if (plan.placement[i] >= 0 && (!pod.running() || plan.evicted[i])) {
      const Node& to = p.nodes[size_t(plan.placement[i])];
      if (!to.accepts_pods() || !node_admits(to, pod.rules))
        return bad("pod " + pod.id + ": placed on node " + to.name + ", which the scheduler would not give it");
    }
    if (pod.running()) {
      bool kept = true;
      for (auto [g, s] : pod.holds) {
        const Instance& old = p.gpus[size_t(g)].instances[size_t(s)];
        const PlannedGpu& pg = plan.gpus[size_t(g)];
        bool here = pg.target.mig == p.gpus[size_t(g)].mig &&
                    std::any_of(pg.layout.begin(), pg.layout.end(), [&](const Instance& a) {
                      return a.profile == old.profile && a.start == old.start && a.pod == int(i);
                    });
        kept = kept && here;
      }
      if (kept == bool(plan.evicted[i])) return bad("pod " + pod.id + ": " + (kept ? "kept but listed as evicted" : "not on its devices, yet not evicted"));
      if (plan.evicted[i]) {
        ++o.evicted;
        ++waiting[pod.priority];
      }
    } else if (plan.evicted[i]) {
      return bad("pod " + pod.id + ": pending, yet evicted");
    }
  }
  for (const auto& pg : plan.gpus) {
    if (pg.changed) ++o.changed_gpus;
    if (std::any_of(pg.layout.begin(), pg.layout.end(), [](const Instance& i) { return i.pod >= 0; })) ++o.gpus_used;
  }
  // NodeResourcesFit: on each node, the pods placed anew ask no more than its room and what the
  // pods evicted there held.
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    if (p.nodes[n].room.empty()) continue;
    Amounts left = p.nodes[n].room;
    for (size_t i = 0; i < p.pods.size(); ++i) {
      const Pod& pod = p.pods[i];
      for (const auto& [r, q] : pod.requests) {
        auto it = left.find(r);
        if (it == left.end()) continue;
        if (pod.node == int(n) && plan.evicted[i]) it->second += q;
        if (plan.placement[i] == int(n) && (!pod.running() || plan.evicted[i])) it->second -= q;
      }
    }
    for (const auto& [r, q] : left)
      if (q < 0) return bad("node " + p.nodes[n].name + ": the pods placed there ask for more " + r + " than it has allocatable");
  }
  for (int64_t prio : p.priorities) o.waiting.push_back(waiting[prio]);
  if (o.waiting != plan.objective.waiting)
    return bad("the objective's pods left pending or evicted per priority are not the plan's");
  if (o != plan.objective)
    return bad("the objective says unserved " + std::to_string(plan.objective.unserved) + ", evicted " +
               std::to_string(plan.objective.evicted) + ", changed " + std::to_string(plan.objective.changed_gpus) +
               ", used " + std::to_string(plan.objective.gpus_used) + "; the plan has " + std::to_string(o.unserved) +
               ", " + std::to_string(o.evicted) + ", " + std::to_string(o.changed_gpus) + ", " + std::to_string(o.gpus_used));
  if (options.max_evictions && o.evicted > *options.max_evictions)
    return bad("evicts " + std::to_string(o.evicted) + " pods, over --max-evictions " + std::to_string(*options.max_evictions));
  // Each node's config gives each of its GPUs its target.
  if (plan.node_config.size() != p.nodes.size()) return bad("no config per node");
  std::vector<bool> changed_node(p.nodes.size(), false);
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    const Node& node = p.nodes[n];
    for (int g : node.gpus) changed_node[n] = changed_node[n] || plan.gpus[size_t(g)].changed;
    if (!changed_node[n]) {
      if (plan.node_config[n] != node.config) return bad("node " + node.name + ": unchanged, yet its config changes");
      continue;
    }
    const config::MigConfig* cfg = plan.generated.find(plan.node_config[n]);
    if (!cfg && p.configs) cfg = p.configs->find(plan.node_config[n]);
    if (!cfg) return bad("node " + node.name + ": config " + plan.node_config[n] + " is in no file");
    for (int g : node.gpus) {
      const Gpu& gpu = p.gpus[size_t(g)];
      auto r = resolve(*cfg, *gpu.model, gpu.index);
      const Target& t = plan.gpus[size_t(g)].target;
      bool ok = r && (t.mig ? (r->has_value() && **r == target_counts(*gpu.model, t)) : !r->has_value());
      if (!ok) return bad("node " + node.name + ": config " + cfg->name + " does not give GPU " + std::to_string(gpu.index) + " its planned layout");
    }
  }
  // The rollout: every changed node once; nodes that evict nothing first; waves within the cap.
  std::set<int> seen;
  bool evicting_seen = false;
  for (const auto& wave : plan.rollout) {
    int64_t ev = 0;
    bool zero = true;
    for (int n : wave) {
      if (n < 0 || size_t(n) >= p.nodes.size() || !changed_node[size_t(n)] || !seen.insert(n).second)
        return bad("the rollout names a node twice, or one the plan does not change");
      int64_t here = 0;
      for (size_t i = 0; i < p.pods.size(); ++i)
        if (plan.evicted[i] && p.pods[i].node == n) ++here;
      ev += here;
      zero = zero && here == 0;
    }
    if (zero && evicting_seen) return bad("a wave that evicts nothing comes after one that evicts");
    if (!zero) evicting_seen = true;
    if (options.max_wave_nodes > 0 && int64_t(wave.size()) > options.max_wave_nodes)
      return bad("a wave of " + std::to_string(wave.size()) + " nodes, over --max-wave-nodes " + std::to_string(options.max_wave_nodes));
    if (options.max_wave_share > 0 && wave.size() > 1 &&
        double(wave.size()) > std::ceil(options.max_wave_share * double(p.nodes.size()) - 1e-9))
      return bad("a wave of " + std::to_string(wave.size()) + " nodes, over " +
                 std::to_string(int(options.max_wave_share * 100 + 0.5)) + "% of the fleet's " + std::to_string(p.nodes.size()));
    if (ev > options.max_wave_evictions && wave.size() > 1)
      return bad("a wave evicts " + std::to_string(ev) + " pods, over --max-wave-evictions " + std::to_string(options.max_wave_evictions));
  }
  for (size_t n = 0; n < p.nodes.size(); ++n)
    if (changed_node[n] && !seen.contains(int(n))) return bad("node " + p.nodes[n].name + " changes but is in no wave");
  return {};
}

}  // namespace tessera::fleet
