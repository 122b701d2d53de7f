#include "planner/formulation.hpp"

#include <algorithm>
#include <cmath>

namespace tessera::planner {

namespace {

// Shared replicas by memory only (formulation.hpp); adds the columns to `unit_rows`.
void add_sharing_by_memory(const Problem& p, IntegerProgram& ip, std::vector<Row>& unit_rows) {
  for (Isolation mode : {Isolation::shared, Isolation::best_effort}) {
    std::vector<size_t> types;
    for (size_t t = 0; t < p.share_types.size(); ++t)
      if (p.share_types[t].isolation == mode) types.push_back(t);
    if (types.empty()) continue;
    // Units that may hold replicas of this mode: those some fill uses.
    std::vector<int> col(p.units.size(), -1);
    for (const auto& pat : p.patterns)
      if (pat.isolation == mode && col[size_t(pat.unit)] < 0) {
        col[size_t(pat.unit)] = ip.add({0, kInfinity, 0.0, false});
        unit_rows[size_t(pat.unit)].terms.emplace_back(col[size_t(pat.unit)], 1.0);
      }
    uint32_t clients = mode == Isolation::shared ? kMaxMpsClients : kMaxTimeSlices;
    Row compute{{}, 0, kInfinity}, count{{}, 0, kInfinity};
    for (size_t u = 0; u < p.units.size(); ++u)
      if (col[u] >= 0) {
        compute.terms.emplace_back(col[u], 1.0);
        count.terms.emplace_back(col[u], double(clients));
      }
    for (size_t t : types) {
      const auto& type = p.share_types[t];
      compute.lower += type.replicas * type.compute;
      count.lower += type.replicas;
      Row memory{{}, 0, kInfinity};
      for (size_t v : types)
        if (p.share_types[v].memory_mib >= type.memory_mib)
          memory.lower += double(p.share_types[v].replicas) * double(p.share_types[v].memory_mib);
      for (size_t u = 0; u < p.units.size(); ++u)
        if (col[u] >= 0 && p.units[u].memory_mib >= type.memory_mib)
          memory.terms.emplace_back(col[u], double(p.units[u].memory_mib));
      ip.rows.push_back(std::move(memory));
    }
    ip.rows.push_back(std::move(compute));
    ip.rows.push_back(std::move(count));
  }
}

}  // namespace

Formulation formulate(const Problem& p, bool with_extra, SharingModel sharing) {
  Formulation f;
  auto& ip = f.program;
  for (size_t l = 0; l < p.layouts.size(); ++l) {
    const auto& type = p.gpu_types[static_cast<size_t>(p.layouts[l].gpu_type)];
    f.layout_col.push_back(ip.add({0, type.count && !with_extra ? double(*type.count) : kInfinity, 1.0, true}));
  }
  f.group_col.assign(p.groups.size(), std::vector<int>(p.units.size(), -1));
  for (size_t g = 0; g < p.groups.size(); ++g)
    for (size_t u = 0; u < p.units.size(); ++u)
      if (p.groups[g].fits[u]) f.group_col[g][u] = ip.add({0, kInfinity, 0.0, true});
  if (sharing == SharingModel::patterns)
    for (size_t k = 0; k < p.patterns.size(); ++k) f.pattern_col.push_back(ip.add({0, kInfinity, 0.0, true}));

  // Units used never exceed units cut.
  std::vector<Row> unit_rows(p.units.size(), Row{{}, -kInfinity, 0.0});
  for (size_t l = 0; l < p.layouts.size(); ++l)
    for (const auto& [u, n] : p.layouts[l].units)
      unit_rows[static_cast<size_t>(u)].terms.emplace_back(f.layout_col[l], -double(n));
  for (size_t g = 0; g < p.groups.size(); ++g)
    for (size_t u = 0; u < p.units.size(); ++u)
      if (f.group_col[g][u] >= 0) unit_rows[u].terms.emplace_back(f.group_col[g][u], double(p.groups[g].gpus));
  for (size_t k = 0; k < f.pattern_col.size(); ++k)
    unit_rows[static_cast<size_t>(p.patterns[k].unit)].terms.emplace_back(f.pattern_col[k], 1.0);
  if (sharing == SharingModel::by_memory) add_sharing_by_memory(p, ip, unit_rows);
  for (auto& r : unit_rows)
    if (!r.terms.empty()) ip.rows.push_back(std::move(r));

  for (size_t g = 0; g < p.groups.size(); ++g) {
    const auto& group = p.groups[g];
    Row r;
    for (size_t u = 0; u < p.units.size(); ++u) {
      int c = f.group_col[g][u];
      if (c < 0) continue;
      r.terms.emplace_back(c, group.demand ? group.capacity[u] : 1.0);
    }
    if (group.demand) {
      r.lower = *group.demand;
      // Valid for whole instances and much tighter in the LP: at least demand / best rate of them.
      double best = 0;
      Row count;
      for (size_t u = 0; u < p.units.size(); ++u)
        if (int c = f.group_col[g][u]; c >= 0) {
          best = std::max(best, group.capacity[u]);
          count.terms.emplace_back(c, 1.0);
        }
      if (best > 0) {
        count.lower = std::ceil(*group.demand / best - 1e-9);
        ip.rows.push_back(std::move(count));
      }
    } else {
      r.lower = r.upper = group.replicas;
    }
    ip.rows.push_back(std::move(r));
  }

  if (sharing == SharingModel::patterns) {
    std::vector<Row> type_rows(p.share_types.size());
    for (size_t t = 0; t < p.share_types.size(); ++t) type_rows[t].lower = p.share_types[t].replicas;
    for (size_t k = 0; k < p.patterns.size(); ++k)
      for (const auto& [t, n] : p.patterns[k].types)
        type_rows[static_cast<size_t>(t)].terms.emplace_back(f.pattern_col[k], double(n));
    for (auto& r : type_rows) ip.rows.push_back(std::move(r));
  }

  f.extra_col.assign(p.gpu_types.size(), -1);
  for (size_t t = 0; t < p.gpu_types.size(); ++t) {
    if (!p.gpu_types[t].count) continue;
    Row r{{}, -kInfinity, double(*p.gpu_types[t].count)};
    for (size_t l = 0; l < p.layouts.size(); ++l)
      if (static_cast<size_t>(p.layouts[l].gpu_type) == t) r.terms.emplace_back(f.layout_col[l], 1.0);
    if (with_extra) {
      f.extra_col[t] = ip.add({0, kInfinity, kExtraGpuCost, true});
      r.terms.emplace_back(f.extra_col[t], -1.0);
    }
    ip.rows.push_back(std::move(r));
  }
  return f;
}

}  // namespace tessera::planner
