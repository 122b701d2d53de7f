// The aggregate model and its solution, level by level (docs/design-fleet.md, "The model").
//
// GPUs of one product with the same layout and the same pod-holding
// instances are interchangeable: they form a class, and the program counts
// how many GPUs of each class take each target (a column). A GPU that holds
// part of a pod spanning several instances is a class of its own, and such a
// pod is kept only if all its instances are (y_m = AND of its GPUs' columns).
// Pending demand and evicted pods are fleet-wide: they are served from the
// free instances of their resource on GPUs in use.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include "fleet/fleet.hpp"
#include "fleet/internal.hpp"
#include "core/text.hpp"
#include "planner/integer_program.hpp"

namespace tessera::fleet {
namespace {

using planner::IntegerProgram;
using planner::kInfinity;
using planner::Row;
using planner::SolveLimits;
using planner::SolveStatus;

// A fixed GPU's one column: the GPU as it is (Gpu::fixed; its layout may be no candidate target).
constexpr size_t kAsIs = SIZE_MAX;

struct Col {
  size_t target = 0;  // into candidate_targets(model), or kAsIs
  bool used = true;
  bool changed = false;
  std::vector<int> cap;    // free instances per resource
  std::vector<int> evict;  // single-instance pods evicted, per resource
  std::vector<int> evict_level;  // the same, per Problem::priorities
  int evict_total = 0;
  int kept_single = 0;
  std::vector<std::pair<int, int>> multi_kept;  // (multi pod, instances of it kept here)
  std::vector<int> multi_all;                   // multi pods whose every instance here is kept
  int var = -1;
};

struct Klass {
  const GpuModel* model = nullptr;
  std::vector<int> gpus;
  std::vector<Col> cols;
  size_t unchanged_used = 0;  // index of the column that keeps the GPU as it is, in use
  bool singleton = false;
  int block = -1;             // the GPUs freed by evicted blocks of this type (their count varies)
};

// Pods on several whole GPUs (MIG off) of one product and size are interchangeable blocks: the
// program counts how many of each type stay (z); the GPUs of the others join a class of free
// MIG-off GPUs whose size is k x (blocks - z).
struct Block {
  const GpuModel* model = nullptr;
  uint32_t k = 0;
  std::vector<int> pods;
  int z_var = -1;
  int freed_class = -1;
};

bool dominates(const Col& a, const Col& b) {  // a at least as good as b everywhere
  if (a.used != b.used || a.changed > b.changed) return false;
  if (a.multi_kept != b.multi_kept || a.multi_all != b.multi_all) return false;
  for (size_t r = 0; r < a.cap.size(); ++r)
    if ((a.used && a.cap[r] < b.cap[r]) || a.evict[r] > b.evict[r]) return false;
  for (size_t t = 0; t < a.evict_level.size(); ++t)
    if (a.evict_level[t] > b.evict_level[t]) return false;
  return true;
}

struct Model {
  const Problem* p = nullptr;
  std::vector<Klass> classes;
  std::vector<int> multi;               // pod indices of running pods that hold several instances
  std::map<int, int> multi_of;          // pod -> index in multi
  std::map<std::pair<int, uint32_t>, int> pending;  // (resource, count) -> pending pods
  std::map<std::pair<int, uint32_t>, std::vector<int>> multi_shape;  // (resource, count) -> multi indices
  std::map<std::pair<int, uint32_t>, int> s_var;
  // Problem::priorities: pending pods per (resource, count, priority) and the served of each.
  std::map<std::tuple<int, uint32_t, int64_t>, int> tier_pending;
  std::map<std::tuple<int, uint32_t, int64_t>, int> t_var;
  std::vector<int> y_var;
  std::vector<Block> blocks;
  std::map<int, int> block_of;  // pod -> block type
  IntegerProgram program;
};

void build_classes(Model& m) {
  const Problem& p = *m.p;
  const size_t R = p.resources.size();
  std::map<std::tuple<const GpuModel*, uint32_t, int>, int> block_type;  // (model, GPUs, priority level)
  for (size_t i = 0; i < p.pods.size(); ++i) {
    const Pod& pod = p.pods[i];
    if (!pod.running() || pod.holds.size() < 2) continue;
    bool whole = pod.resource == 0;
    for (auto [g, inst] : pod.holds) whole = whole && !p.gpus[size_t(g)].mig;
    // A block's GPUs may change once it goes: not on a node that takes no pods (cordoned, not
    // Ready, kept as it is), where the pod is one on several devices whose GPUs stay.
    if (whole && p.nodes[size_t(pod.node)].accepts_pods()) {
      const GpuModel* model = p.gpus[size_t(pod.holds.front().first)].model;
      auto [it, fresh] = block_type.emplace(std::tuple(model, uint32_t(pod.holds.size()), p.priority_level(int(i))), int(m.blocks.size()));
      if (fresh) m.blocks.push_back(Block{model, uint32_t(pod.holds.size()), {}, -1, -1});
      m.blocks[size_t(it->second)].pods.push_back(int(i));
      m.block_of[int(i)] = it->second;
      continue;
    }
    m.multi_of[int(i)] = int(m.multi.size());
    m.multi.push_back(int(i));
  }
  for (size_t b = 0; b < m.blocks.size(); ++b) {
    Klass k;
    k.model = m.blocks[b].model;
    k.block = int(b);
    for (int pod : m.blocks[b].pods)
      for (auto [g, inst] : p.pods[size_t(pod)].holds) k.gpus.push_back(g);
    m.blocks[b].freed_class = int(m.classes.size());
    m.classes.push_back(std::move(k));
  }
  std::map<std::string, int> by_key;
  for (size_t g = 0; g < p.gpus.size(); ++g) {
    const Gpu& gpu = p.gpus[g];
    if (!gpu.mig && gpu.instances.size() == 1 && m.block_of.contains(gpu.instances[0].pod)) continue;
    bool single = false;
    std::vector<std::tuple<uint32_t, uint32_t, int>> insts;
    for (const auto& i : gpu.instances) {
      // Busy instances by their pod's priority level (1 + level; 1 without levels): pods of
      // different priorities are not interchangeable.
      int busy = i.pod >= 0 ? 1 + std::max(0, p.priority_level(i.pod)) : 0;
      if (i.pod >= 0 && m.multi_of.contains(i.pod)) single = true;
      insts.emplace_back(i.profile, i.start, busy);
    }
    std::sort(insts.begin(), insts.end());
    std::string key = gpu.model->name + (gpu.mig ? "|mig" : "|off");
    if (!p.nodes[size_t(gpu.node)].accepts_pods()) key += "|closed";
    if (gpu.fixed) {
      key += "|fixed" + std::string(gpu.single ? "|single" : "");
      for (const auto& r : gpu.renamed) key += "|" + r + ".shared";
    }
    for (auto [a, b, c] : insts) key += "|" + std::to_string(a) + "@" + std::to_string(b) + (c ? "*" + std::to_string(c) : "");
    if (single) key += "|gpu" + std::to_string(g);
    auto [it, fresh] = by_key.emplace(key, int(m.classes.size()));
    if (fresh) {
      Klass k;
      k.model = gpu.model;
      k.singleton = single;
      m.classes.push_back(std::move(k));
    }
    m.classes[size_t(it->second)].gpus.push_back(int(g));
  }
  for (auto& k : m.classes) {
    Gpu gpu = p.gpus[size_t(k.gpus.front())];
    if (k.block >= 0)
      for (auto& i : gpu.instances) i.pod = -1;  // a freed GPU holds nothing
    const Target now = current_target(gpu);
    // A fixed GPU has one target: as it is.
    const std::vector<Target> as_is{now};
    const auto& targets = gpu.fixed ? as_is : candidate_targets(*k.model, p.media_engines);
    // A node that takes no new pods (cordoned, not Ready) is not changed and offers nothing.
    const bool closed = k.block < 0 && !p.nodes[size_t(gpu.node)].accepts_pods();
    bool busy = std::any_of(gpu.instances.begin(), gpu.instances.end(), [](const Instance& i) { return i.pod >= 0; });
    // Per target, the column's facts.
    std::vector<Col> all;
    std::vector<int> resource_of_profile(k.model->profiles.size(), -1);
    for (size_t q = 0; q < k.model->profiles.size(); ++q) resource_of_profile[q] = p.resource_index(k.model->profiles[q].name);
    for (size_t t = 0; t < targets.size(); ++t) {
      Col c;
      c.target = gpu.fixed ? kAsIs : t;
      c.cap.assign(R, 0);
      c.evict.assign(R, 0);
      c.evict_level.assign(p.priorities.size(), 0);
      c.changed = targets[t] != now;
      if (!busy && !gpu.fixed) {
        if (!targets[t].mig) c.cap[0] = 1;
        else
          for (uint32_t q : targets[t].profiles)
            if (resource_of_profile[q] >= 0) ++c.cap[size_t(resource_of_profile[q])];
      } else {
        GpuOutcome out = apply_target(gpu, targets[t]);
        for (const auto& i : out.layout)
          if (i.pod < 0) {
            int r = p.resource_index(instance_resource(gpu, i, targets[t].mig));
            if (r >= 0) ++c.cap[size_t(r)];
          }
        std::map<int, std::pair<int, int>> multi_here;  // multi -> (kept, total)
        for (size_t i = 0; i < gpu.instances.size(); ++i) {
          int pod = gpu.instances[i].pod;
          if (pod < 0) continue;
          if (auto mi = m.multi_of.find(pod); mi != m.multi_of.end()) {
            auto& [kept, total] = multi_here[mi->second];
            ++total;
            if (out.kept[i]) ++kept;
          } else if (out.kept[i]) {
            ++c.kept_single;
          } else {
            ++c.evict[size_t(p.pods[size_t(pod)].resource)];
            if (int level = p.priority_level(pod); level >= 0) ++c.evict_level[size_t(level)];
            ++c.evict_total;
          }
        }
        for (auto [mi, kt] : multi_here) {
          if (kt.first > 0) c.multi_kept.push_back({mi, kt.first});
          if (kt.first == kt.second) c.multi_all.push_back(mi);
        }
      }
      if (closed) {
        if (c.changed) continue;
        std::fill(c.cap.begin(), c.cap.end(), 0);
      }
      all.push_back(std::move(c));
    }
    // Idle variants: no pod on the GPU, so it gives no capacity (and counts as not in use).
    std::vector<Col> idle;
    for (const auto& c : all)
      if (c.kept_single == 0 && (!busy || k.singleton) && (!c.changed || k.singleton)) {
        Col i = c;
        i.used = false;
        std::fill(i.cap.begin(), i.cap.end(), 0);
        idle.push_back(std::move(i));
      }
    all.insert(all.end(), idle.begin(), idle.end());
    // Keep the columns no other column dominates (most capacity first, so dominators come early).
    std::stable_sort(all.begin(), all.end(), [](const Col& a, const Col& b) {
      if (a.changed != b.changed) return a.changed < b.changed;
      int sa = std::accumulate(a.cap.begin(), a.cap.end(), 0), sb = std::accumulate(b.cap.begin(), b.cap.end(), 0);
      if (sa != sb) return sa > sb;
      return a.evict_total < b.evict_total;
    });
    for (auto& c : all) {
      bool dominated = false;
      for (const auto& kept : k.cols)
        if (dominates(kept, c)) {
          dominated = true;
          break;
        }
      if (!dominated) k.cols.push_back(std::move(c));
    }
    for (size_t j = 0; j < k.cols.size(); ++j)
      if (!k.cols[j].changed && k.cols[j].used) k.unchanged_used = j;
  }
}

// The linear expression of one level: sum of terms plus a constant.
struct Expr {
  std::vector<std::pair<int, double>> terms;
  double constant = 0;
};

void formulate(Model& m, const PlanOptions& options, std::vector<Expr>& levels) {
  const Problem& p = *m.p;
  const size_t R = p.resources.size();
  auto& ip = m.program;
  // Pending pods that only some nodes admit are left to the concrete placement (which honours
  // their rules): without them the program's optimum is still a lower bound.
  for (const auto& pod : p.pods)
    if (!pod.running() && !pod.constrained) {
      ++m.pending[{pod.resource, pod.count}];
      if (!p.priorities.empty()) ++m.tier_pending[{pod.resource, pod.count, pod.priority}];
    }
  for (size_t mi = 0; mi < m.multi.size(); ++mi) {
    const Pod& pod = p.pods[size_t(m.multi[mi])];
    m.multi_shape[{pod.resource, pod.count}].push_back(int(mi));
  }
  for (auto& k : m.classes)
    for (auto& c : k.cols) c.var = ip.add({0, double(k.gpus.size()), 0, true});
  for (size_t mi = 0; mi < m.multi.size(); ++mi) m.y_var.push_back(ip.add({0, 1, 0, true}));
  for (auto& b : m.blocks) b.z_var = ip.add({0, double(b.pods.size()), 0, true});
  std::set<std::pair<int, uint32_t>> shapes;
  for (const auto& [s, n] : m.pending) shapes.insert(s);
  for (const auto& [s, v] : m.multi_shape) shapes.insert(s);
  for (const auto& b : m.blocks) shapes.insert({0, b.k});
  for (int r = 0; r < int(R); ++r) shapes.insert({r, 1});  // evicted single pods come back as demand
  for (const auto& s : shapes) m.s_var[s] = ip.add({0, kInfinity, 0, true});
  // Served pending pods of each priority: together no more than the shape's served (which also
  // counts evicted pods served again, so the levels below are lower bounds, never more).
  for (const auto& [key, n] : m.tier_pending) m.t_var[key] = ip.add({0, double(n), 0, true});
  for (const auto& [shape, var] : m.s_var) {
    Row row;
    for (const auto& [key, t] : m.t_var)
      if (std::get<0>(key) == shape.first && std::get<1>(key) == shape.second) row.terms.push_back({t, 1});
    if (row.terms.empty()) continue;
    row.terms.push_back({var, -1});
    row.upper = 0;
    ip.rows.push_back(std::move(row));
  }

  for (const auto& k : m.classes) {
    Row row;
    for (const auto& c : k.cols) row.terms.push_back({c.var, 1});
    if (k.block >= 0) row.terms.push_back({m.blocks[size_t(k.block)].z_var, double(m.blocks[size_t(k.block)].k)});
    row.lower = row.upper = double(k.gpus.size());
    ip.rows.push_back(std::move(row));
  }
  // An evicted block goes only if one of its GPUs changes (the agents evict only pods in the way).
  for (const auto& b : m.blocks) {
    Row row;
    row.terms.push_back({b.z_var, 1});
    for (const auto& c : m.classes[size_t(b.freed_class)].cols)
      if (c.changed) row.terms.push_back({c.var, 1});
    row.lower = double(b.pods.size());
    ip.rows.push_back(std::move(row));
  }
  // Capacity per resource.
  for (size_t r = 0; r < R; ++r) {
    Row row;
    for (const auto& [s, var] : m.s_var)
      if (s.first == int(r)) row.terms.push_back({var, double(s.second)});
    for (const auto& k : m.classes)
      for (const auto& c : k.cols) {
        double free = c.used ? c.cap[r] : 0;
        // Instances of pods spanning several that this column keeps: free once the pod goes.
        if (c.used)
          for (auto [mi, kept] : c.multi_kept)
            if (p.pods[size_t(m.multi[size_t(mi)])].resource == int(r)) free += kept;
        if (free != 0) row.terms.push_back({c.var, -free});
      }
    for (size_t mi = 0; mi < m.multi.size(); ++mi) {
      const Pod& pod = p.pods[size_t(m.multi[mi])];
      if (pod.resource == int(r)) row.terms.push_back({m.y_var[mi], double(pod.holds.size())});
    }
    row.upper = 0;
    ip.rows.push_back(std::move(row));
  }
  // Demand per shape.
  for (const auto& [s, var] : m.s_var) {
    Row row;
    row.terms.push_back({var, 1});
    double bound = 0;
    if (auto it = m.pending.find(s); it != m.pending.end()) bound += it->second;
    if (auto it = m.multi_shape.find(s); it != m.multi_shape.end()) {
      bound += double(it->second.size());
      for (int mi : it->second) row.terms.push_back({m.y_var[size_t(mi)], 1});
    }
    for (const auto& b : m.blocks)
      if (s.first == 0 && s.second == b.k) {
        bound += double(b.pods.size());
        row.terms.push_back({b.z_var, 1});
      }
    if (s.second == 1)
      for (const auto& k : m.classes)
        for (const auto& c : k.cols)
          if (c.evict[size_t(s.first)]) row.terms.push_back({c.var, -double(c.evict[size_t(s.first)])});
    row.upper = bound;
    ip.rows.push_back(std::move(row));
  }
  // y_m = AND over its GPUs of "every instance of m kept here" (and the GPU in use).
  for (size_t mi = 0; mi < m.multi.size(); ++mi) {
    const Pod& pod = p.pods[size_t(m.multi[mi])];
    std::set<int> gpus;
    for (auto [g, i] : pod.holds) gpus.insert(g);
    Row lower;
    lower.terms.push_back({m.y_var[mi], 1});
    for (int g : gpus) {
      Row upper;
      upper.terms.push_back({m.y_var[mi], 1});
      for (const auto& k : m.classes) {
        if (!k.singleton || k.gpus.front() != g) continue;
        for (const auto& c : k.cols)
          if (std::find(c.multi_all.begin(), c.multi_all.end(), int(mi)) != c.multi_all.end()) {
            if (c.used) upper.terms.push_back({c.var, -1});
            lower.terms.push_back({c.var, -1});
          }
      }
      upper.upper = 0;
      ip.rows.push_back(std::move(upper));
    }
    lower.lower = 1.0 - double(gpus.size());
    ip.rows.push_back(std::move(lower));
  }
  // The levels: first, per priority (highest first), its pending pods left unserved and its
  // running pods evicted.
  levels.clear();
  for (size_t level = 0; level < p.priorities.size(); ++level) {
    Expr waiting;
    for (const auto& [key, n] : m.tier_pending)
      if (std::get<2>(key) == p.priorities[level]) {
        waiting.constant += n;
        waiting.terms.push_back({m.t_var.at(key), -1});
      }
    for (const auto& k : m.classes)
      for (const auto& c : k.cols)
        if (c.evict_level[level]) waiting.terms.push_back({c.var, double(c.evict_level[level])});
    for (size_t mi = 0; mi < m.multi.size(); ++mi)
      if (p.priority_level(m.multi[mi]) == int(level)) {
        waiting.constant += 1;
        waiting.terms.push_back({m.y_var[mi], -1});
      }
    for (const auto& b : m.blocks)
      if (!b.pods.empty() && p.priority_level(b.pods.front()) == int(level)) {
        waiting.constant += double(b.pods.size());
        waiting.terms.push_back({b.z_var, -1});
      }
    levels.push_back(std::move(waiting));
  }
  Expr unserved, evicted, changed, used;
  double pending_total = 0;
  for (const auto& [s, n] : m.pending) pending_total += n;
  unserved.constant = pending_total + double(m.multi.size());
  evicted.constant = double(m.multi.size());
  for (const auto& k : m.classes)
    for (const auto& c : k.cols) {
      if (c.evict_total) {
        unserved.terms.push_back({c.var, double(c.evict_total)});
        evicted.terms.push_back({c.var, double(c.evict_total)});
      }
      if (c.changed) changed.terms.push_back({c.var, 1});
      if (c.used) used.terms.push_back({c.var, 1});
    }
  for (int y : m.y_var) {
    unserved.terms.push_back({y, -1});
    evicted.terms.push_back({y, -1});
  }
  for (const auto& b : m.blocks) {
    unserved.constant += double(b.pods.size());
    evicted.constant += double(b.pods.size());
    unserved.terms.push_back({b.z_var, -1});
    evicted.terms.push_back({b.z_var, -1});
    used.terms.push_back({b.z_var, double(b.k)});
  }
  for (const auto& [s, var] : m.s_var) unserved.terms.push_back({var, -1});
  if (options.max_evictions) {
    Row cap;
    cap.terms = evicted.terms;
    cap.upper = double(*options.max_evictions) - evicted.constant;
    ip.rows.push_back(std::move(cap));
  }
  for (auto* e : {&unserved, &evicted, &changed, &used}) levels.push_back(std::move(*e));
}

// The plan that changes nothing: every GPU as it is and in use, every pod kept, nothing placed.
std::vector<double> trivial_start(const Model& m) {
  std::vector<double> v(m.program.columns.size(), 0.0);
  for (const auto& k : m.classes)
    if (k.block < 0) v[size_t(k.cols[k.unchanged_used].var)] = double(k.gpus.size());
  for (int y : m.y_var) v[size_t(y)] = 1;
  for (const auto& b : m.blocks) v[size_t(b.z_var)] = double(b.pods.size());
  return v;
}

// Columns chosen, GPU by GPU, from the program's values.
std::vector<std::pair<int, size_t>> spread(const Model& m, const std::vector<double>& values) {
  const Problem& p = *m.p;
  std::vector<std::pair<int, size_t>> choice(p.gpus.size(), {-1, 0});  // -1: a kept block's GPU, as it is
  std::vector<std::vector<int>> freed(m.blocks.size());
  for (size_t b = 0; b < m.blocks.size(); ++b) {
    const Block& bl = m.blocks[b];
    long keep = values.empty() ? long(bl.pods.size()) : std::lround(values[size_t(bl.z_var)]);
    std::vector<int> pods = bl.pods;
    std::sort(pods.begin(), pods.end(), [&](int a, int c) { return p.pods[size_t(a)].node < p.pods[size_t(c)].node; });
    // One GPU of each evicted block first: those take the changed columns (the block's way out).
    for (size_t i = size_t(std::max(0L, keep)); i < pods.size(); ++i) freed[b].push_back(p.pods[size_t(pods[i])].holds.front().first);
    for (size_t i = size_t(std::max(0L, keep)); i < pods.size(); ++i)
      for (size_t h = 1; h < p.pods[size_t(pods[i])].holds.size(); ++h) freed[b].push_back(p.pods[size_t(pods[i])].holds[h].first);
  }
  for (size_t ki = 0; ki < m.classes.size(); ++ki) {
    const Klass& k = m.classes[ki];
    std::vector<int> gpus = k.block >= 0 ? freed[size_t(k.block)] : k.gpus;
    if (k.block < 0)
      std::sort(gpus.begin(), gpus.end(), [&](int a, int b) {
        return std::pair(p.gpus[size_t(a)].node, p.gpus[size_t(a)].index) < std::pair(p.gpus[size_t(b)].node, p.gpus[size_t(b)].index);
      });
    // Unchanged columns first, then by target, so that the GPUs of one node tend to take the same one.
    std::vector<size_t> order(k.cols.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      const Col &ca = k.cols[a], &cb = k.cols[b];
      const bool flip = k.block >= 0;  // freed GPUs: the changed columns first (see above)
      return std::tuple(ca.changed != flip, !ca.used, ca.target) < std::tuple(cb.changed != flip, !cb.used, cb.target);
    });
    size_t next = 0;
    for (size_t j : order) {
      long n = values.empty() ? 0 : std::lround(values[size_t(k.cols[j].var)]);
      for (long c = 0; c < n && next < gpus.size(); ++c) choice[size_t(gpus[next++])] = {int(ki), j};
    }
    // Whatever rounding left: as it is.
    while (next < gpus.size()) choice[size_t(gpus[next++])] = {k.block >= 0 ? -1 : int(ki), k.unchanged_used};
  }
  return choice;
}

// The mig-parted entries a node's targets resolve to in an existing config, compared GPU by GPU.
bool config_gives(const config::MigConfig& cfg, const Problem& p, const Node& n, const std::vector<Target>& targets) {
  for (size_t i = 0; i < n.gpus.size(); ++i) {
    const GpuModel& model = *n.model;
    const config::MigConfigEntry* e = nullptr;
    for (const auto& entry : cfg.entries)
      if (entry.devices.selects(uint32_t(i)) && config::filter_selects(entry, model.pci_device_id, 0, &model)) {
        e = &entry;
        break;
      }
    if (!e) return false;
    if (e->mig_enabled != targets[i].mig) return false;
    if (!e->mig_enabled) continue;
    ProfileCounts want = target_counts(model, targets[i]), have;
    for (const auto& d : e->mig_devices) have[d.canonical.empty() ? d.profile : d.canonical] += d.count;
    std::erase_if(have, [](const auto& kv) { return kv.second == 0; });
    if (want != have) return false;
  }
  (void)p;
  return true;
}

void name_configs(const Problem& p, FleetPlan& plan) {
  plan.node_config.assign(p.nodes.size(), "");
  std::map<std::string, std::string> generated_by_content;
  for (size_t ni = 0; ni < p.nodes.size(); ++ni) {
    const Node& n = p.nodes[ni];
    plan.node_config[ni] = n.config;
    if (!plan.node_changed(p, int(ni))) continue;
    std::vector<Target> targets;
    for (int g : n.gpus) targets.push_back(plan.gpus[size_t(g)].target);
    std::string found;
    if (p.configs)
      for (const auto& cfg : p.configs->configs)
        if (config_gives(cfg, p, n, targets)) {
          found = cfg.name;
          break;
        }
    if (found.empty()) {
      // One entry per distinct target, naming its devices (all when there is one).
      std::map<Target, std::vector<uint32_t>> groups;
      for (size_t i = 0; i < targets.size(); ++i) groups[targets[i]].push_back(uint32_t(i));
      std::string content = n.model->name;
      config::MigConfig cfg;
      for (const auto& [t, devices] : groups) {
        config::MigConfigEntry e;
        e.devices.all = groups.size() == 1;
        if (!e.devices.all) e.devices.indices = devices;
        e.mig_enabled = t.mig;
        for (const auto& [name, count] : target_counts(*n.model, t)) e.mig_devices.push_back({name, name, count, {}});
        content += ";";
        for (uint32_t d : devices) content += std::to_string(d) + ",";
        content += t.mig ? "on:" : "off:";
        for (const auto& md : e.mig_devices) content += md.profile + "=" + std::to_string(md.count) + ",";
        cfg.entries.push_back(std::move(e));
      }
      auto it = generated_by_content.find(content);
      if (it == generated_by_content.end()) {
        std::string model = n.model->name;
        for (auto& c : model) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        cfg.name = kGeneratedPrefix + model + "-" + hash_text(content).substr(0, 8);
        it = generated_by_content.emplace(content, cfg.name).first;
        plan.generated.configs.push_back(std::move(cfg));
      }
      found = it->second;
    }
    plan.node_config[ni] = found;
  }
}

}  // namespace

bool FleetPlan::node_changed(const Problem& p, int node) const {
  for (int g : p.nodes[size_t(node)].gpus)
    if (gpus[size_t(g)].changed) return true;
  return false;
}

namespace {

FleetPlan solve_once(const Problem& p, const PlanOptions& options) {
  auto started = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  FleetPlan plan;
  Model m;
  m.p = &p;
  build_classes(m);
  std::vector<Expr> levels;
  formulate(m, options, levels);
  size_t ncols = 0;
  for (const auto& k : m.classes) ncols += k.cols.size();
  plan.notes.push_back("model: " + std::to_string(m.classes.size()) + " GPU classes, " + std::to_string(ncols) +
                       " layout columns, " + std::to_string(m.multi.size()) + " pods on several devices, " +
                       std::to_string(m.program.rows.size()) + " rows; built in " + format_seconds(elapsed()));

  // The levels' names: one per pending priority, then the four of Objective.
  std::vector<std::string> level_name;
  for (int64_t prio : p.priorities) level_name.push_back("priority " + std::to_string(prio) + " pods waiting or evicted");
  for (const char* name : {"unserved", "evicted", "changed_gpus", "gpus_used"}) level_name.push_back(name);
  const size_t L = levels.size();
  const size_t tiers = p.priorities.size();
  std::vector<double> values;
  std::vector<int64_t> bounds(L, 0), found(L, -1);
  std::vector<bool> proven(L, false);
  bool infeasible = false;
  for (size_t level = 0; level < L; ++level) {
    const Expr& e = levels[level];
    for (auto& c : m.program.columns) c.cost = 0;
    for (auto [var, coef] : e.terms) m.program.columns[size_t(var)].cost += coef;
    double left = std::max(0.05, options.seconds - elapsed());
    // Of what is left: a priority's level 0.3, then unserved 0.4, evicted 0.45, changed 0.6, used all.
    static const double kShare[] = {0.4, 0.45, 0.6, 1.0};
    SolveLimits limits;
    limits.seconds = std::max(0.05, left * (level < tiers ? 0.3 : kShare[level - tiers]));
    // Each solve starts from a plan that holds: the GPUs as they are for the first, the level
    // before's solution (which meets its own fixing row) for the others.
    const std::vector<double> start = values.empty() ? trivial_start(m) : values;
    auto sol = planner::solve_program(m.program, limits, start);
    if (sol.status == SolveStatus::infeasible) {
      infeasible = true;
      plan.notes.push_back(level_name[level] + ": infeasible");
      break;
    }
    if (sol.values.empty()) {
      plan.notes.push_back(level_name[level] + ": no solution within the time limit; the levels from here keep the plan found before");
      bounds[level] = std::max<int64_t>(0, int64_t(std::ceil(sol.bound + e.constant - 1e-6)));
      break;
    }
    values = sol.values;
    double v = 0;
    for (auto [var, coef] : e.terms) v += coef * values[size_t(var)];
    int64_t value = std::llround(v + e.constant);
    found[level] = value;
    proven[level] = sol.status == SolveStatus::optimal;
    bounds[level] = proven[level] ? value : std::min<int64_t>(value, std::max<int64_t>(0, int64_t(std::ceil(sol.bound + e.constant - 1e-6))));
    plan.notes.push_back(level_name[level] + ": " + std::to_string(value) +
                         (proven[level] ? " (optimal)" : ", bound " + std::to_string(bounds[level])) + " in " +
                         format_seconds(sol.seconds));
    Row fix;
    fix.terms = e.terms;
    fix.upper = double(value) - e.constant + 0.5;
    m.program.rows.push_back(std::move(fix));
  }
  if (infeasible && values.empty()) {
    plan.status = "infeasible";
    plan.gpus.resize(p.gpus.size());
    for (size_t g = 0; g < p.gpus.size(); ++g) plan.gpus[g] = {current_target(p.gpus[g]), false, p.gpus[g].instances};
    plan.placement.assign(p.pods.size(), -1);
    plan.evicted.assign(p.pods.size(), false);
    for (size_t i = 0; i < p.pods.size(); ++i) plan.placement[i] = p.pods[i].node;
    plan.objective = evaluate(p, plan);
    plan.bound = Objective::from_levels(bounds);
    name_configs(p, plan);
    plan.seconds = elapsed();
    return plan;
  }

  // From the aggregate to GPUs and pods.
  const double solved = elapsed();
  auto choice = spread(m, values);
  plan.gpus.resize(p.gpus.size());
  std::vector<GpuOutcome> outcomes(p.gpus.size());
  std::vector<bool> in_use(p.gpus.size(), false);
  for (size_t g = 0; g < p.gpus.size(); ++g) {
    if (choice[g].first < 0) {  // a kept block's GPU
      outcomes[g] = apply_target(p.gpus[g], current_target(p.gpus[g]));
      in_use[g] = true;
    } else {
      const Klass& k = m.classes[size_t(choice[g].first)];
      const Col& c = k.cols[choice[g].second];
      outcomes[g] = apply_target(p.gpus[g], c.target == kAsIs ? current_target(p.gpus[g]) : candidate_targets(*k.model, p.media_engines)[c.target]);
      in_use[g] = c.used;
    }
    plan.gpus[g] = {outcomes[g].target, outcomes[g].changed, outcomes[g].layout};
  }
  plan.placement.assign(p.pods.size(), -1);
  plan.evicted.assign(p.pods.size(), false);
  for (size_t i = 0; i < p.pods.size(); ++i) {
    const Pod& pod = p.pods[i];
    if (!pod.running()) continue;
    bool kept = true;
    for (auto [g, inst] : pod.holds) kept = kept && outcomes[size_t(g)].kept[size_t(inst)];
    if (kept) {
      plan.placement[i] = pod.node;
      continue;
    }
    plan.evicted[i] = true;
    for (auto& pg : plan.gpus)
      for (auto& inst : pg.layout)
        if (inst.pod == int(i)) inst.pod = -1;
  }
  // GPUs with a kept pod are in use whatever their column says.
  for (size_t g = 0; g < p.gpus.size(); ++g)
    for (const auto& inst : plan.gpus[g].layout)
      if (inst.pod >= 0) in_use[g] = true;
  // Pods to place: the highest priority first (as the scheduler's queue takes them), then the
  // biggest, evicted before pending.
  std::vector<int> demand;
  for (size_t i = 0; i < p.pods.size(); ++i)
    if (plan.placement[i] < 0) demand.push_back(int(i));
  std::stable_sort(demand.begin(), demand.end(), [&](int a, int b) {
    const Pod &pa = p.pods[size_t(a)], &pb = p.pods[size_t(b)];
    return std::tuple(-pa.priority, -int64_t(pa.count), !pa.running()) < std::tuple(-pb.priority, -int64_t(pb.count), !pb.running());
  });
  // Free instances per GPU and resource; GPUs that already hold a pod are filled first.
  const size_t R = p.resources.size();
  std::vector<std::vector<std::vector<size_t>>> slots(p.gpus.size(), std::vector<std::vector<size_t>>(R));
  std::vector<bool> occupied(p.gpus.size(), false);
  std::vector<std::set<size_t>> warm(R), cold(R);  // GPUs with a free instance of r, with and without pods
  std::vector<std::vector<int>> free_count(R, std::vector<int>(p.nodes.size(), 0));
  std::vector<int> warm_free(R, 0);  // free instances of r on GPUs in warm[r], summed
  // The resource an instance offers, by index: a GPU that may change offers its profiles' names (or
  // the whole GPU); only a fixed one may be renamed or single. Looked up per model once.
  std::map<const GpuModel*, std::vector<int>> profile_resource;
  auto resource_of = [&](size_t g, const Instance& inst, bool mig) {
    const Gpu& gpu = p.gpus[g];
    if (gpu.fixed) return p.resource_index(instance_resource(gpu, inst, mig));
    if (!mig) return 0;
    auto [it, fresh] = profile_resource.try_emplace(gpu.model);
    if (fresh)
      for (const auto& prof : gpu.model->profiles) it->second.push_back(p.resource_index(prof.name));
    return it->second[inst.profile];
  };
  // A GPU's free instances by resource, as its layout in the plan has them (again after its target changes).
  auto reslot = [&](size_t g) {
    const int node = p.gpus[g].node;
    for (size_t q = 0; q < R; ++q) {
      if (warm[q].erase(g)) warm_free[q] -= int(slots[g][q].size());
      cold[q].erase(g);
      free_count[q][size_t(node)] -= int(slots[g][q].size());
      slots[g][q].clear();
    }
    if (!in_use[g] || !p.nodes[size_t(node)].accepts_pods()) return;
    const auto& layout = plan.gpus[g].layout;
    for (size_t s = 0; s < layout.size(); ++s) {
      int r = resource_of(g, layout[s], plan.gpus[g].target.mig);
      if (layout[s].pod < 0 && r >= 0) slots[g][size_t(r)].push_back(s);
    }
    for (size_t q = 0; q < R; ++q)
      if (!slots[g][q].empty()) {
        (occupied[g] ? warm : cold)[q].insert(g);
        if (occupied[g]) warm_free[q] += int(slots[g][q].size());
        free_count[q][size_t(node)] += int(slots[g][q].size());
      }
  };
  for (size_t g = 0; g < p.gpus.size(); ++g) {
    for (const auto& inst : plan.gpus[g].layout) occupied[g] = occupied[g] || inst.pod >= 0;
    reslot(g);
  }
  auto take = [&](size_t g, size_t r, int pod) {
    size_t s = slots[g][r].back();
    slots[g][r].pop_back();
    plan.gpus[g].layout[s].pod = pod;
    --free_count[r][size_t(p.gpus[g].node)];
    if (!occupied[g]) {
      occupied[g] = true;
      for (size_t q = 0; q < R; ++q)
        if (cold[q].erase(g)) {
          warm[q].insert(g);
          warm_free[q] += int(slots[g][q].size());
        }
    } else {
      --warm_free[r];
    }
    if (slots[g][r].empty()) warm[r].erase(g);
  };
  // A pod of several devices on node n, which has free instances enough: GPUs
  // that already hold pods first, so that idle ones stay free.
  auto place_on_node = [&](size_t n, size_t r, int i) {
    const Pod& pod = p.pods[size_t(i)];
    uint32_t placed = 0;
    std::vector<int> order = p.nodes[n].gpus;
    std::stable_partition(order.begin(), order.end(), [&](int g) { return bool(occupied[size_t(g)]); });
    for (int g : order)
      while (placed < pod.count && !slots[size_t(g)][r].empty()) {
        take(size_t(g), r, i);
        ++placed;
      }
    plan.placement[size_t(i)] = int(n);
  };
  for (int i : demand) {
    const Pod& pod = p.pods[size_t(i)];
    const size_t r = size_t(pod.resource);
    if (pod.count == 1) {
      std::optional<size_t> g;
      for (const auto* set : {&warm[r], &cold[r]}) {
        for (size_t h : *set)
          if (p.allows(i, p.gpus[h].node)) {
            g = h;
            break;
          }
        if (g) break;
      }
      if (!g) continue;
      take(*g, r, i);
      plan.placement[size_t(i)] = p.gpus[*g].node;
      continue;
    }
    int best = -1;
    for (size_t n = 0; n < p.nodes.size(); ++n)
      if (p.allows(i, int(n)) && free_count[r][n] >= int(pod.count) &&
          (best < 0 || free_count[r][n] < free_count[r][size_t(best)]))
        best = int(n);
    if (best < 0) continue;
    uint32_t placed = 0;
    std::vector<int> order = p.nodes[size_t(best)].gpus;
    std::stable_partition(order.begin(), order.end(), [&](int g) { return bool(occupied[size_t(g)]); });
    for (int g : order)
      while (placed < pod.count && !slots[size_t(g)][r].empty()) {
        take(size_t(g), r, i);
        ++placed;
      }
    plan.placement[size_t(i)] = best;
  }
  // Repair: a pod left over (one that needs several devices on one node, which the aggregate does not
  // see) may fit once GPUs of a node that hold nothing, and never held a pod, take another target
  // (reslot, above).
  auto count_of = [&](size_t g, const Target& t, int r) {
    if (!t.mig) return resource_of(g, Instance{}, false) == r ? 1 : 0;
    int n = 0;
    for (uint32_t q : t.profiles) n += resource_of(g, Instance{q, 0, -1}, true) == r;
    return n;
  };
  auto never_busy = [&](size_t g) {
    return std::none_of(p.gpus[g].instances.begin(), p.gpus[g].instances.end(), [](const Instance& x) { return x.pod >= 0; });
  };
  // Per resource, the fewest devices the repair could not find since it last changed the plan: a
  // pod the nodes all admit that asks as many or more fails the same way, so it is not tried.
  std::vector<uint32_t> repair_refused(R, UINT32_MAX);
  for (int i : demand) {
    if (plan.placement[size_t(i)] >= 0) continue;
    const Pod& pod = p.pods[size_t(i)];
    const int r = pod.resource;
    if (!pod.constrained && pod.count >= repair_refused[size_t(r)]) continue;
    // Free instances per resource, fleet-wide (free_count summed over the nodes), counted once per
    // pod: nothing changes while the nodes are weighed, only once one is chosen.
    std::vector<int> free_total(R, -1);
    for (size_t n = 0; n < p.nodes.size() && plan.placement[size_t(i)] < 0; ++n) {
      if (!p.allows(i, int(n))) continue;
      int have = free_count[size_t(r)][n];
      std::vector<std::pair<size_t, std::optional<Target>>> moves;  // GPU, new target (nullopt: as it is, now in use)
      std::vector<int> gpus = p.nodes[n].gpus;
      std::stable_partition(gpus.begin(), gpus.end(), [&](int g) { return plan.gpus[size_t(g)].changed; });
      std::map<int, int> relocate;  // resource -> pods to move off converted GPUs
      auto free_elsewhere = [&](int q) {
        int& total = free_total[size_t(q)];
        if (total < 0) total = std::accumulate(free_count[size_t(q)].begin(), free_count[size_t(q)].end(), 0);
        return total - free_count[size_t(q)][n];
      };
      for (int gi : gpus) {
        if (have >= int(pod.count)) break;
        size_t g = size_t(gi);
        if (!never_busy(g) || p.gpus[g].fixed) continue;
        // Pods placed here (never kept ones) may move to free instances on other nodes.
        std::map<int, int> here;
        bool movable = true;
        for (const auto& x : plan.gpus[g].layout)
          if (x.pod >= 0) {
            movable = movable && p.pods[size_t(x.pod)].count == 1 && !p.pods[size_t(x.pod)].constrained;
            ++here[p.pods[size_t(x.pod)].resource];
          }
        if (!movable) continue;
        bool room = true;
        for (auto [q, c] : here) room = room && free_elsewhere(q) >= relocate[q] + c;
        if (!room) continue;
        const Gpu& gpu = p.gpus[g];
        int now_free = in_use[g] ? int(slots[g][size_t(r)].size()) : 0;
        int as_is = count_of(g, plan.gpus[g].target, r);
        const Target* best = nullptr;
        int best_n = 0;
        for (const auto& t : candidate_targets(*gpu.model, p.media_engines))
          if (int c = count_of(g, t, r); c > best_n) {
            best_n = c;
            best = &t;
          }
        if (!occupied[g] && !in_use[g] && as_is > 0 && as_is >= best_n) {
          moves.push_back({g, std::nullopt});
          have += as_is;
        } else if (best && best_n > now_free) {
          moves.push_back({g, *best});
          have += best_n - now_free;
          for (auto [q, c] : here) relocate[q] += c;
        }
      }
      if (have < int(pod.count)) continue;
      for (auto& [g, t] : moves) {
        std::vector<int> displaced;
        if (t) {
          for (const auto& x : plan.gpus[g].layout)
            if (x.pod >= 0) displaced.push_back(x.pod);
          GpuOutcome out = apply_target(p.gpus[g], *t);
          plan.gpus[g] = {out.target, out.changed, out.layout};
          occupied[g] = false;
        }
        in_use[g] = true;
        reslot(g);
        for (int d : displaced) {
          size_t q = size_t(p.pods[size_t(d)].resource);
          std::optional<size_t> h;
          for (const auto* set : {&warm[q], &cold[q]}) {
            for (size_t c : *set)
              if (p.gpus[c].node != int(n)) {
                h = c;
                break;
              }
            if (h) break;
          }
          if (!h) {  // cannot happen: counted above
            plan.placement[size_t(d)] = -1;
            continue;
          }
          take(*h, q, d);
          plan.placement[size_t(d)] = p.gpus[*h].node;
        }
      }
      place_on_node(n, r, i);
    }
    if (plan.placement[size_t(i)] >= 0) std::fill(repair_refused.begin(), repair_refused.end(), UINT32_MAX);
    else if (!pod.constrained) repair_refused[size_t(r)] = std::min(repair_refused[size_t(r)], pod.count);
  }
  // First fit for what is still left: an instance of the pod's profile added to a GPU in use, its
  // layout kept around the instances it has (the agent keeps every instance that holds a pod), as
  // long as the pods placed there find instances of their resource again.
  auto augment = [&](size_t g, int r) -> bool {
    const Gpu& gpu = p.gpus[g];
    const PlannedGpu& now = plan.gpus[g];
    if (gpu.fixed || !now.target.mig || r == 0 || !p.nodes[size_t(gpu.node)].accepts_pods()) return false;
    const GpuInstanceProfile* prof = gpu.model->profile(p.resources[size_t(r)]);
    if (!prof) return false;
    uint32_t q = uint32_t(prof - gpu.model->profiles.data());
    uint32_t slices = prof->slices;
    for (uint32_t x : now.target.profiles) slices += gpu.model->profiles[x].slices;
    if (slices > gpu.model->compute_slices) return false;
    Target t = now.target;
    t.profiles.push_back(q);
    std::sort(t.profiles.begin(), t.profiles.end());
    if (!place_profiles(*gpu.model, t.profiles)) return false;
    GpuOutcome out = apply_target(gpu, t);
    // Kept pods stay kept; placed ones take free instances of their resource in the new layout.
    std::vector<int> placed_here;
    for (const auto& x : now.layout)
      if (x.pod >= 0) {
        const Pod& pod = p.pods[size_t(x.pod)];
        bool kept_pod = pod.running() && !plan.evicted[size_t(x.pod)];
        if (kept_pod) {
          if (std::none_of(out.layout.begin(), out.layout.end(), [&](const Instance& y) { return y.pod == x.pod; })) return false;
        } else {
          placed_here.push_back(x.pod);
        }
      }
    std::vector<Instance> layout = out.layout;
    for (auto& y : layout)
      if (y.pod >= 0 && plan.evicted[size_t(y.pod)]) y.pod = -1;  // an evicted pod's instance kept by chance is free
    for (int pod : placed_here) {
      bool ok = false;
      for (auto& y : layout)
        if (y.pod < 0 && resource_of(g, y, true) == p.pods[size_t(pod)].resource) {
          y.pod = pod;
          ok = true;
          break;
        }
      if (!ok) return false;
    }
    plan.gpus[g] = {out.target, out.changed, layout};
    in_use[g] = true;
    reslot(g);
    return true;
  };
  std::set<std::pair<int, uint32_t>> exhausted;
  for (int i : demand) {
    if (plan.placement[size_t(i)] >= 0) continue;
    const Pod& pod = p.pods[size_t(i)];
    const int r = pod.resource;
    if (!pod.constrained && (exhausted.contains({r, pod.count}) || exhausted.contains({r, 1}))) continue;
    for (size_t n = 0; n < p.nodes.size() && plan.placement[size_t(i)] < 0; ++n) {
      if (!p.allows(i, int(n))) continue;
      for (int g : p.nodes[n].gpus)
        while (free_count[size_t(r)][n] < int(pod.count) && in_use[size_t(g)] && augment(size_t(g), r)) {
        }
      if (free_count[size_t(r)][n] < int(pod.count)) continue;
      place_on_node(n, size_t(r), i);
    }
    if (plan.placement[size_t(i)] < 0 && !pod.constrained) exhausted.insert({r, pod.count});
  }
  // Pods placed together on a node where their cpu, memory or pod count do not all fit.
  if (size_t dropped = drop_unfit(p, plan))
    plan.notes.push_back(std::to_string(dropped) + " pod(s) left unserved: placed on nodes whose cpu, memory, storage "
                         "or pod count does not take them all");
  // Clean-up: a changed GPU that never held a pod and holds none now goes back as it was; one whose
  // pods (each on one device) all fit in free instances elsewhere hands them over first.
  for (size_t g = 0; g < p.gpus.size(); ++g) {
    if (!plan.gpus[g].changed || !never_busy(g)) continue;
    std::vector<std::pair<size_t, int>> mine;  // (slot, pod)
    bool movable = true;
    for (size_t s = 0; s < plan.gpus[g].layout.size(); ++s)
      if (int pod = plan.gpus[g].layout[s].pod; pod >= 0) {
        mine.push_back({s, pod});
        movable = movable && p.pods[size_t(pod)].count == 1 && !p.pods[size_t(pod)].constrained;
      }
    if (!movable) continue;
    // Enough free instances elsewhere, per resource?
    std::map<int, int> need;
    for (auto [s, pod] : mine) ++need[p.pods[size_t(pod)].resource];
    bool fits = true;
    for (auto [r, n] : need) {
      int elsewhere = warm_free[size_t(r)] - (warm[size_t(r)].contains(g) ? int(slots[g][size_t(r)].size()) : 0);
      fits = fits && elsewhere >= n;
    }
    if (!fits) continue;
    for (auto [s, pod] : mine) {
      size_t r = size_t(p.pods[size_t(pod)].resource);
      size_t h = *warm[r].begin() == g ? *std::next(warm[r].begin()) : *warm[r].begin();
      plan.gpus[g].layout[s].pod = -1;
      take(h, r, pod);
      plan.placement[size_t(pod)] = p.gpus[h].node;
    }
    plan.gpus[g] = {current_target(p.gpus[g]), false, p.gpus[g].instances};
    in_use[g] = false;
    occupied[g] = false;
    reslot(g);
  }
  // Again: the clean-up's moves count instances, not room.
  if (size_t dropped = drop_unfit(p, plan))
    plan.notes.push_back(std::to_string(dropped) + " pod(s) moved by the clean-up left unserved: their new nodes' cpu, "
                         "memory, storage or pod count does not take them");
  plan.objective = evaluate(p, plan);
  const std::vector<int64_t> obj = plan.objective.levels();
  bool all_proven = true;
  plan.gap = 0;
  for (size_t level = 0; level < L; ++level) {
    // A level not reached keeps the bound it had (0 when nothing was proven about it).
    bool exact = (proven[level] && found[level] == obj[level]) || obj[level] <= bounds[level];
    if (!exact && all_proven) {
      double gap = double(obj[level] - std::min(bounds[level], obj[level])) / double(std::max<int64_t>(1, obj[level]));
      plan.gap = gap;
      if (obj[level] != found[level] && found[level] >= 0)
        plan.notes.push_back(level_name[level] + ": the aggregate gave " + std::to_string(found[level]) +
                             ", the concrete plan " + std::to_string(obj[level]) +
                             " (pods that need several devices on one node, or that only some nodes admit)");
    }
    // While the levels before are at their bound, a level's bound holds as is; after the first that
    // is not, the bounds are those of the program (they assume the levels before at their bound).
    if (all_proven) bounds[level] = std::min(bounds[level], obj[level]);
    all_proven = all_proven && exact;
  }
  plan.bound = Objective::from_levels(bounds);
  plan.status = all_proven ? "optimal" : "feasible";
  const double named = elapsed();
  name_configs(p, plan);
  plan.rollout = order_rollout(p, plan, options, &plan.notes);
  plan.seconds = elapsed();
  plan.convert_seconds = named - solved;
  plan.finish_seconds = plan.seconds - named;
  plan.notes.push_back("turned into GPUs and pods in " + format_seconds(plan.convert_seconds) + ", configs and waves in " +
                       format_seconds(plan.finish_seconds));
  return plan;
}

// Status and gap of `plan` against lower bounds proven level by level (each bound holds once the
// levels before it are at their bound).
void grade(FleetPlan& plan, const Objective& bound) {
  const std::vector<int64_t> obj = plan.objective.levels();
  Objective proven = bound;
  proven.waiting.resize(plan.objective.waiting.size(), 0);  // a priority with nothing proven: bound 0
  std::vector<int64_t> b = proven.levels();
  plan.status = "optimal";
  plan.gap = 0;
  for (size_t level = 0; level < obj.size() && plan.status == "optimal"; ++level) {
    if (obj[level] > b[level]) {
      plan.status = "feasible";
      plan.gap = double(obj[level] - b[level]) / double(std::max<int64_t>(1, obj[level]));
    } else {
      b[level] = obj[level];
    }
  }
  plan.bound = Objective::from_levels(b);
}

}  // namespace

// The aggregate does not see that a pod asking for several whole GPUs needs them on one node. When
// the concrete plan leaves such pods out, a second solve sets them on nodes first (the nodes with the
// most GPUs that hold nothing, MIG off ones first) and plans the rest around them; the better plan
// wins, graded against the first solve's bounds, which hold for both.
//
// The whole plan keeps to options.seconds: the first solve's levels get 40 % of it; then the first
// fit is made; the second solve gets what is left once a conversion like the first's is set aside,
// and is skipped when that is too little to be worth it.
FleetPlan plan_fleet(const Problem& p, const PlanOptions& options) {
  auto started = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  PlanOptions first = options;
  first.seconds = options.seconds * 0.4;
  FleetPlan a = solve_once(p, first);
  if (a.status == "optimal") return a;
  const Objective bound = a.bound;  // the first solve's: they hold for every plan below
  // The greedy first fit (no eviction) is a plan too: never return a worse one. Made now, so that
  // the time it takes is known before the second solve's share is.
  FleetPlan ff = first_fit_plan(p);
  auto fall_back = [&](FleetPlan best) {
    if (ff.objective < best.objective && (!options.max_evictions || ff.objective.evicted <= *options.max_evictions)) {
      ff.notes = best.notes;
      ff.notes.push_back("the greedy first fit beat the model's plan: it is the plan, graded against the model's bounds");
      grade(ff, bound);
      name_configs(p, ff);
      ff.rollout = order_rollout(p, ff, options, &ff.notes);
      best = std::move(ff);
    }
    best.seconds = elapsed();
    return best;
  };
  bool left_out = false;
  for (size_t i = 0; i < p.pods.size(); ++i)
    left_out = left_out || (a.placement[i] < 0 && p.pods[i].resource == 0 && p.pods[i].count > 1 && !p.pods[i].running());
  if (!left_out) return fall_back(std::move(a));
  // The second problem: pending multi-GPU pods pinned, as if running, on GPUs that hold nothing.
  Problem q = p;
  std::vector<bool> reserved(p.gpus.size(), false);
  std::vector<int> pending;
  for (size_t i = 0; i < p.pods.size(); ++i)
    if (!p.pods[i].running() && p.pods[i].resource == 0 && p.pods[i].count > 1) pending.push_back(int(i));
  std::stable_sort(pending.begin(), pending.end(), [&](int x, int y) { return p.pods[size_t(x)].count > p.pods[size_t(y)].count; });
  auto empty = [&](int g) {
    return !reserved[size_t(g)] && !p.gpus[size_t(g)].fixed && std::none_of(p.gpus[size_t(g)].instances.begin(), p.gpus[size_t(g)].instances.end(),
                                                [](const Instance& x) { return x.pod >= 0; });
  };
  // Each node's empty GPUs, and those of them with MIG off: counted once, and again for a node
  // when a pod is set on it (not for every pending pod and node: 10,000 pods on 5,000 nodes).
  std::vector<int> empty_all(p.nodes.size(), 0), empty_off(p.nodes.size(), 0);
  auto count_empty = [&](size_t n) {
    empty_all[n] = empty_off[n] = 0;
    for (int g : p.nodes[n].gpus)
      if (empty(g)) {
        ++empty_all[n];
        empty_off[n] += !p.gpus[size_t(g)].mig;
      }
  };
  for (size_t n = 0; n < p.nodes.size(); ++n) count_empty(n);
  for (int i : pending) {
    const Pod& pod = p.pods[size_t(i)];
    int best = -1;
    std::pair<int, int> best_key{-1, -1};  // (empty MIG-off GPUs, empty GPUs)
    for (size_t n = 0; n < p.nodes.size(); ++n) {
      const int all = empty_all[n], off = empty_off[n];
      if (all < int(pod.count) || !p.allows(i, int(n))) continue;
      // Fewest GPUs left over (best fit), then the most already MIG off.
      std::pair<int, int> key{-(all - int(pod.count)), off};
      if (key > best_key) {
        best_key = key;
        best = int(n);
      }
    }
    if (best < 0) continue;
    std::vector<int> gpus = p.nodes[size_t(best)].gpus;
    std::stable_partition(gpus.begin(), gpus.end(), [&](int g) { return !p.gpus[size_t(g)].mig; });
    Pod& qp = q.pods[size_t(i)];
    qp.node = best;
    qp.holds.clear();
    for (int g : gpus) {
      if (qp.holds.size() == pod.count) break;
      if (!empty(g)) continue;
      reserved[size_t(g)] = true;
      q.gpus[size_t(g)].mig = false;
      q.gpus[size_t(g)].instances = {Instance{0, 0, i}};
      qp.holds.push_back({g, 0});
    }
    count_empty(size_t(best));
  }
  PlanOptions second = options;
  // Set aside: the second plan's conversion, configs and waves (as long as the first's, and a half
  // again), its configs and waves made twice more (for the plan it becomes and, should the first fit
  // win, for that), and a twentieth of the limit for the solver's overrun of its own limits.
  const double reserve = (a.convert_seconds + a.finish_seconds) * 1.5 + a.finish_seconds * 2 + 0.05 * options.seconds;
  second.seconds = options.seconds - elapsed() - reserve;
  if (second.seconds < 0.2) {
    a.notes.push_back("pods on several whole GPUs: the first plan left some out; no time left to plan again with them set first");
    return fall_back(std::move(a));
  }
  FleetPlan b = solve_once(q, second);
  // Back to the real problem: the pinned pods are placed, not running; their GPUs change if they had MIG on.
  FleetPlan c = b;
  for (size_t g = 0; g < p.gpus.size(); ++g) {
    if (!reserved[g]) continue;
    c.gpus[g].changed = c.gpus[g].target != current_target(p.gpus[g]);
  }
  for (int i : pending) c.evicted[size_t(i)] = false;
  c.generated = {};
  c.notes = a.notes;
  c.notes.push_back("pods on several whole GPUs: the first plan left some out; planned again with them set on nodes first");
  c.objective = evaluate(p, c);
  if (c.objective >= a.objective) {
    a.notes.push_back("pods on several whole GPUs: a second plan with them set first was no better");
    return fall_back(std::move(a));
  }
  grade(c, a.bound);
  name_configs(p, c);
  c.rollout = order_rollout(p, c, options, &c.notes);
  return fall_back(std::move(c));
}

size_t drop_unfit(const Problem& p, FleetPlan& plan) {
  std::vector<Amounts> room(p.nodes.size());
  bool fitted = false;
  for (size_t n = 0; n < p.nodes.size(); ++n) {
    room[n] = p.nodes[n].room;
    fitted = fitted || !room[n].empty();
  }
  if (!fitted) return 0;
  auto add = [](Amounts& to, const Amounts& what, int64_t sign) {
    for (const auto& [r, q] : what)
      if (auto it = to.find(r); it != to.end()) it->second += sign * q;
  };
  std::vector<int> placed;
  for (size_t i = 0; i < p.pods.size(); ++i) {
    const Pod& pod = p.pods[i];
    if (pod.running() && plan.evicted[i]) add(room[size_t(pod.node)], pod.requests, +1);
    if (plan.placement[i] >= 0 && (!pod.running() || plan.evicted[i])) placed.push_back(int(i));
  }
  std::stable_sort(placed.begin(), placed.end(), [&](int a, int b) { return p.pods[size_t(a)].priority > p.pods[size_t(b)].priority; });
  size_t dropped = 0;
  for (int i : placed) {
    Amounts& here = room[size_t(plan.placement[size_t(i)])];
    const Pod& pod = p.pods[size_t(i)];
    if (fits(here, pod.requests)) {
      add(here, pod.requests, -1);
      continue;
    }
    plan.placement[size_t(i)] = -1;
    for (auto& pg : plan.gpus)
      for (auto& inst : pg.layout)
        if (inst.pod == i) inst.pod = -1;
    ++dropped;
  }
  return dropped;
}

std::vector<int64_t> Objective::levels() const {
  std::vector<int64_t> out = waiting;
  out.insert(out.end(), {unserved, evicted, changed_gpus, gpus_used});
  return out;
}

Objective Objective::from_levels(std::span<const int64_t> levels) {
  Objective o;
  const size_t tiers = levels.size() - 4;
  o.waiting.assign(levels.begin(), levels.begin() + std::ptrdiff_t(tiers));
  o.unserved = levels[tiers];
  o.evicted = levels[tiers + 1];
  o.changed_gpus = levels[tiers + 2];
  o.gpus_used = levels[tiers + 3];
  return o;
}

Objective evaluate(const Problem& p, const FleetPlan& plan) {
  Objective o;
  o.waiting.assign(p.priorities.size(), 0);
  for (size_t i = 0; i < p.pods.size(); ++i) {
    if ((plan.placement[i] < 0 && !p.pods[i].running()) || plan.evicted[i])
      if (int level = p.priority_level(int(i)); level >= 0) ++o.waiting[size_t(level)];
    if (plan.placement[i] < 0) ++o.unserved;
    if (plan.evicted[i]) ++o.evicted;
  }
  for (const auto& g : plan.gpus) {
    if (g.changed) ++o.changed_gpus;
    if (std::any_of(g.layout.begin(), g.layout.end(), [](const Instance& i) { return i.pod >= 0; })) ++o.gpus_used;
  }
  return o;
}

std::vector<std::vector<int>> order_rollout(const Problem& p, const FleetPlan& plan, const PlanOptions& options,
                                            std::vector<std::string>* notes) {
  std::vector<int64_t> evictions(p.nodes.size(), 0);
  for (size_t i = 0; i < p.pods.size(); ++i)
    if (plan.evicted[i] && p.pods[i].node >= 0) ++evictions[size_t(p.pods[i].node)];
  std::vector<std::pair<int64_t, int>> changed;  // (evictions, node)
  for (size_t n = 0; n < p.nodes.size(); ++n)
    if (plan.node_changed(p, int(n))) changed.push_back({evictions[n], int(n)});
  std::stable_sort(changed.begin(), changed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::vector<int>> waves;
  const int64_t cap = std::max<int64_t>(0, options.max_wave_evictions);
  size_t max_nodes = options.max_wave_nodes > 0 ? size_t(options.max_wave_nodes) : SIZE_MAX;
  if (options.max_wave_share > 0)
    max_nodes = std::min(max_nodes, std::max<size_t>(1, size_t(std::ceil(options.max_wave_share * double(p.nodes.size()) - 1e-9))));
  int64_t in_wave = 0;
  bool zero_wave = false;
  for (auto [ev, n] : changed) {
    bool fresh = waves.empty() || waves.back().size() >= max_nodes || (ev == 0) != zero_wave || in_wave + ev > cap;
    if (fresh) {
      waves.push_back({});
      in_wave = 0;
      zero_wave = ev == 0;
    }
    if (ev > cap && notes)
      notes->push_back("rollout: node " + p.nodes[size_t(n)].name + " alone evicts " + std::to_string(ev) +
                       " pods, more than --max-wave-evictions " + std::to_string(cap) + "; it goes in a wave of its own");
    waves.back().push_back(n);
    in_wave += ev;
    if (ev > cap) in_wave = cap + 1;  // nothing joins it
  }
  return waves;
}

}  // namespace tessera::fleet
