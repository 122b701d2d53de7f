#include "planner/problem.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <tuple>

#include "core/units.hpp"
#include "core/text.hpp"

namespace tessera::planner {
namespace {

std::string gib(uint64_t mib) {
  std::ostringstream out;
  out.precision(3);
  out << static_cast<double>(mib) / 1024.0 << " GiB";
  return out.str();
}

void add_units(Problem& p, int type) {
  const GpuModel& m = *p.gpu_types[static_cast<size_t>(type)].model;
  for (size_t i = 0; i < m.profiles.size(); ++i) {
    const auto& prof = m.profiles[i];
    if (is_media_variant(prof)) continue;
    p.units.push_back({type, static_cast<int>(i), prof.name, prof.memory_mib, prof.memory_slices, prof.slices});
  }
  p.units.push_back({type, kWholeGpu, std::string(config::kWholeGpuKey), m.memory_mib, m.memory_slices, m.compute_slices});
}

int unit_index(const Problem& p, int type, int profile) {
  for (size_t u = 0; u < p.units.size(); ++u)
    if (p.units[u].gpu_type == type && p.units[u].profile == profile) return static_cast<int>(u);
  return -1;
}

void add_layout(Problem& p, int type, MigLayout layout) {
  const GpuModel& m = *p.gpu_types[static_cast<size_t>(type)].model;
  std::sort(layout.begin(), layout.end());
  LayoutChoice choice;
  choice.gpu_type = type;
  std::vector<uint32_t> profiles;
  std::map<int, uint32_t> counts;
  for (const auto& inst : layout) {
    profiles.push_back(inst.profile);
    ++counts[unit_index(p, type, static_cast<int>(inst.profile))];
  }
  choice.units.assign(counts.begin(), counts.end());
  choice.layout = std::move(layout);
  choice.name = layout_name(m, profiles);
  p.layouts.push_back(std::move(choice));
}

// The smallest-memory profile with `slices` compute slices, if any.
std::optional<uint32_t> smallest_profile(const GpuModel& m, uint32_t slices) {
  std::optional<uint32_t> best;
  for (uint32_t i = 0; i < m.profiles.size(); ++i) {
    const auto& prof = m.profiles[i];
    if (is_media_variant(prof) || prof.slices != slices) continue;
    if (!best || prof.memory_mib < m.profiles[*best].memory_mib) best = i;
  }
  return best;
}

void add_layouts(Problem& p, int type, const ProblemOptions& options) {
  const GpuModel& m = *p.gpu_types[static_cast<size_t>(type)].model;
  if (options.layouts == LayoutSet::maximal) {
    std::map<std::vector<uint32_t>, MigLayout> by_set;  // one placement per distinct profile multiset
    for (auto& layout : maximal_layouts(m, {.include_media_variants = false})) {
      std::vector<uint32_t> key;
      for (const auto& inst : layout) key.push_back(inst.profile);
      std::sort(key.begin(), key.end());
      by_set.emplace(std::move(key), std::move(layout));
    }
    for (auto& [key, layout] : by_set) add_layout(p, type, layout);
  } else {
    std::vector<uint32_t> wanted;
    auto one = smallest_profile(m, 1);
    if (options.layouts == LayoutSet::uniform_smallest) {
      if (one) wanted.assign(m.profiles[*one].max_count, *one);
    } else {
      // NVIDIA mig-parted config-default.yaml, "all-balanced": 2 x 1g, 1 x 2g, 1 x 3g.
      auto two = smallest_profile(m, 2), three = smallest_profile(m, 3);
      if (one && two && three) wanted = {*one, *one, *two, *three};
    }
    if (!wanted.empty())
      if (auto layout = place_profiles(m, wanted)) add_layout(p, type, *layout);
  }
  if (options.whole_gpu) {
    LayoutChoice whole;
    whole.gpu_type = type;
    whole.mig_enabled = false;
    whole.units = {{unit_index(p, type, kWholeGpu), 1}};
    whole.name = "whole";
    p.layouts.push_back(std::move(whole));
  }
}

// Maps each device's current layout to a layout choice, adding it when it is
// not one already offered (a non-maximal layout may be kept too).
void add_current(Problem& p, int type, const std::vector<config::CurrentLayout>& current) {
  const GpuModel& m = *p.gpu_types[size_t(type)].model;
  auto units_of = [&](const MigLayout& layout) {
    std::map<int, uint32_t> counts;
    for (const auto& inst : layout) ++counts[unit_index(p, type, int(inst.profile))];
    return std::vector<std::pair<int, uint32_t>>(counts.begin(), counts.end());
  };
  for (const auto& c : current) {
    int found = -1;
    bool mig = !c.placed.empty();
    bool media = std::any_of(c.placed.begin(), c.placed.end(), [&](const PlacedInstance& i) {
      return is_media_variant(m.profiles[i.profile]);
    });
    if (!media) {
      auto units = mig ? units_of(c.placed) : std::vector<std::pair<int, uint32_t>>{};
      for (size_t l = 0; l < p.layouts.size() && found < 0; ++l) {
        const auto& choice = p.layouts[l];
        if (choice.gpu_type != type || choice.mig_enabled != mig) continue;
        if (!mig || choice.units == units) found = int(l);
      }
      if (found < 0 && mig) {
        add_layout(p, type, c.placed);
        found = int(p.layouts.size()) - 1;
      }
    }
    p.gpu_types[size_t(type)].current.push_back(found);
  }
}

// Capacity of each unit for a service served by rate (fleet_spec.hpp explains the rule).
std::vector<double> unit_capacity(const Problem& p, const config::ServiceSpec& s) {
  std::vector<double> cap(p.units.size(), 0.0);
  std::optional<double> whole;
  bool per_profile = false;
  for (const auto& c : s.capacity) {
    if (c.profile == config::kWholeGpuKey) whole = c.rate;
    else per_profile = true;
  }
  for (size_t u = 0; u < p.units.size(); ++u) {
    const Unit& unit = p.units[u];
    const GpuModel& m = *p.gpu_types[static_cast<size_t>(unit.gpu_type)].model;
    if (unit.profile == kWholeGpu) {
      if (whole) { cap[u] = *whole; continue; }
      // Without a rate for the whole GPU, credit it the full-GPU profile's rate.
      for (const auto& c : s.capacity)
        if (auto* prof = m.profile(c.profile); prof && prof->slices == m.compute_slices) cap[u] = c.rate;
      continue;
    }
    if (per_profile) {
      for (const auto& c : s.capacity)
        if (c.profile == unit.name) cap[u] = c.rate;
    } else if (whole && m.memory_slices > 0) {
      cap[u] = *whole * unit.memory_slices / m.memory_slices;
    }
  }
  return cap;
}

uint32_t auto_tensor_parallel(const Problem& p, uint64_t memory_bytes) {
  uint64_t largest = 0;
  for (const auto& t : p.gpu_types) largest = std::max(largest, t.model->memory_mib);
  uint32_t k = 1;
  while (k < config::kMaxTensorParallel && (memory_bytes + kMiB - 1) / kMiB > largest * k) k *= 2;
  return k;
}

// Why a service fits no unit, for the error message.
std::string why_unfit(const Problem& p, const Service& s) {
  const Unit* largest = nullptr;
  for (const auto& u : p.units)
    if (u.profile != kWholeGpu && (!largest || u.memory_mib > largest->memory_mib)) largest = &u;
  const Unit* whole = nullptr;
  for (const auto& u : p.units)
    if (u.profile == kWholeGpu && (!whole || u.memory_mib > whole->memory_mib)) whole = &u;
  std::string need = "needs " + gib(s.memory_mib) + (s.gpus > 1 ? " per GPU" : " per replica");
  bool memory_fits = whole && s.memory_mib <= whole->memory_mib;
  if (!memory_fits) {
    std::string model = p.gpu_types[static_cast<size_t>(whole->gpu_type)].model->name;
    std::string out = need + ", more than a whole " + model + " (" + gib(whole->memory_mib) + ")";
    uint64_t total = s.memory_mib * s.gpus;
    uint64_t width = (total + whole->memory_mib - 1) / whole->memory_mib;
    if (s.isolation == Isolation::dedicated)
      out += "; set gpus: " + std::to_string(width) + " or more for tensor parallelism";
    return out;
  }
  if (s.demand) return need + ", and no slice that fits it has a capacity above 0";
  if (s.gpus > 1) return need + " on each of " + std::to_string(s.gpus) + " GPUs, but no whole GPU is offered";
  return need + ", more than any offered slice" + (largest ? " (largest " + largest->name + ", " + gib(largest->memory_mib) + ")" : "");
}

bool unit_offered(const Problem& p, size_t u) {
  for (const auto& l : p.layouts)
    for (const auto& [unit, count] : l.units)
      if (static_cast<size_t>(unit) == u && count > 0) return true;
  return false;
}

bool fits_mig_slice(const Problem& p, const std::vector<bool>& fits) {
  for (size_t u = 0; u < p.units.size(); ++u)
    if (fits[u] && p.units[u].profile != kWholeGpu) return true;
  return false;
}

void enumerate_patterns(Problem& p, const ProblemOptions& options) {
  for (size_t u = 0; u < p.units.size(); ++u) {
    if (!unit_offered(p, u)) continue;
    const Unit& unit = p.units[u];
    for (Isolation mode : {Isolation::shared, Isolation::best_effort}) {
      std::vector<int> types;
      for (size_t t = 0; t < p.share_types.size(); ++t) {
        const ShareType& type = p.share_types[t];
        if (type.isolation != mode || type.memory_mib > unit.memory_mib) continue;
        if (unit.profile == kWholeGpu && options.layouts != LayoutSet::maximal) {
          std::vector<bool> fits(p.units.size());
          for (size_t v = 0; v < p.units.size(); ++v) fits[v] = unit_offered(p, v) && type.memory_mib <= p.units[v].memory_mib;
          if (fits_mig_slice(p, fits)) continue;  // baselines: whole GPUs only as the fallback
        }
        types.push_back(static_cast<int>(t));
      }
      if (types.empty()) continue;
      uint32_t max_clients = mode == Isolation::shared ? kMaxMpsClients : kMaxTimeSlices;
      std::vector<uint32_t> counts(types.size(), 0);
      // Depth-first over types (largest first), most copies first; keep maximal fills only.
      auto fits_one_more = [&](uint64_t mem, double compute, uint32_t clients, const ShareType& t) {
        return clients < max_clients && mem + t.memory_mib <= unit.memory_mib && compute + t.compute <= 1.0 + 1e-9;
      };
      auto dfs = [&](auto&& self, size_t i, uint64_t mem, double compute, uint32_t clients) -> void {
        if (p.patterns.size() >= options.max_patterns) {
          p.patterns_complete = false;
          return;
        }
        if (i == types.size()) {
          if (clients == 0) return;
          for (size_t k = 0; k < types.size(); ++k) {
            const ShareType& t = p.share_types[static_cast<size_t>(types[k])];
            if (counts[k] < t.replicas && fits_one_more(mem, compute, clients, t)) return;  // not maximal
          }
          Pattern pat{static_cast<int>(u), mode, {}};
          for (size_t k = 0; k < types.size(); ++k)
            if (counts[k] > 0) pat.types.emplace_back(types[k], counts[k]);
          p.patterns.push_back(std::move(pat));
          return;
        }
        const ShareType& t = p.share_types[static_cast<size_t>(types[i])];
        uint32_t most = 0;
        while (most < t.replicas && fits_one_more(mem + most * t.memory_mib, compute + most * t.compute, clients + most, t))
          ++most;
        for (uint32_t c = most + 1; c-- > 0;) {
          counts[i] = c;
          self(self, i + 1, mem + c * t.memory_mib, compute + c * t.compute, clients + c);
        }
        counts[i] = 0;
      };
      std::sort(types.begin(), types.end(), [&](int a, int b) {
        return p.share_types[static_cast<size_t>(a)].memory_mib > p.share_types[static_cast<size_t>(b)].memory_mib;
      });
      dfs(dfs, 0, 0, 0.0, 0);
    }
  }
  // A truncated enumeration may miss a type: give it a fill of its own on the smallest unit that holds it.
  for (size_t t = 0; t < p.share_types.size(); ++t) {
    bool covered = std::any_of(p.patterns.begin(), p.patterns.end(), [&](const Pattern& pat) {
      return std::any_of(pat.types.begin(), pat.types.end(), [&](const auto& e) { return size_t(e.first) == t; });
    });
    if (covered) continue;
    int best = -1;
    for (size_t u = 0; u < p.units.size(); ++u)
      if (unit_offered(p, u) && p.units[u].memory_mib >= p.share_types[t].memory_mib &&
          (best < 0 || p.units[u].memory_mib < p.units[size_t(best)].memory_mib))
        best = static_cast<int>(u);
    if (best >= 0) p.patterns.push_back({best, p.share_types[t].isolation, {{static_cast<int>(t), 1}}});
  }
}

}  // namespace

std::string layout_name(const GpuModel& model, const std::vector<uint32_t>& profiles) {
  if (profiles.empty()) return "whole";
  std::map<uint32_t, uint32_t> counts;
  for (auto prof : profiles) ++counts[prof];
  // Largest profiles first, as nvidia-smi lists them.
  std::vector<std::pair<uint32_t, uint32_t>> ordered(counts.begin(), counts.end());
  std::sort(ordered.begin(), ordered.end(), [&](const auto& a, const auto& b) {
    const auto &pa = model.profiles[a.first], &pb = model.profiles[b.first];
    return std::tie(pb.slices, pb.memory_mib) < std::tie(pa.slices, pa.memory_mib);
  });
  std::string out;
  for (const auto& [prof, n] : ordered)
    out += (out.empty() ? "" : "-") + model.profiles[prof].name + "x" + std::to_string(n);
  return out;
}

std::vector<uint32_t> Problem::current_counts() const {
  std::vector<uint32_t> out(layouts.size(), 0);
  for (const auto& t : gpu_types)
    for (int l : t.current)
      if (l >= 0) ++out[size_t(l)];
  return out;
}

bool Problem::has_current() const {
  return std::any_of(gpu_types.begin(), gpu_types.end(), [](const GpuType& t) { return !t.current.empty(); });
}

uint64_t Problem::replica_count() const {
  uint64_t n = 0;
  for (const auto& g : groups) n += g.replicas;
  for (const auto& t : share_types) n += t.replicas;
  return n;
}

std::optional<Problem> build_problem(const config::FleetSpec& spec, const ProblemOptions& options,
                                     config::Diagnostics& diags) {
  Problem p;
  if (spec.fleet.empty()) {
    diags.error({spec.file, 0, 0}, "fleet", "no GPU model to plan for");
    return std::nullopt;
  }
  for (const auto& g : spec.fleet) p.gpu_types.push_back({g.model, g.count, g.where, g.field, {}});
  for (size_t t = 0; t < p.gpu_types.size(); ++t) add_units(p, static_cast<int>(t));
  for (size_t t = 0; t < p.gpu_types.size(); ++t) add_layouts(p, static_cast<int>(t), options);
  for (size_t t = 0; t < p.gpu_types.size(); ++t) add_current(p, static_cast<int>(t), spec.fleet[t].current);

  std::vector<bool> offered(p.units.size());
  for (size_t u = 0; u < p.units.size(); ++u) offered[u] = unit_offered(p, u);
  std::map<std::pair<uint32_t, std::vector<bool>>, size_t> group_of;
  std::map<std::tuple<Isolation, uint64_t, double>, size_t> type_of;
  for (const auto& s : spec.services) {
    Service svc;
    svc.name = s.name;
    svc.where = s.where;
    svc.field = s.field;
    svc.isolation = s.isolation;
    svc.gpus = s.gpus_auto ? auto_tensor_parallel(p, s.memory_bytes) : s.gpus;
    uint64_t per_gpu = (s.memory_bytes + svc.gpus - 1) / svc.gpus;
    svc.memory_mib = (per_gpu + kMiB - 1) / kMiB;
    svc.replicas = s.replicas;
    svc.demand = s.demand;
    svc.compute = s.compute.value_or(0.0);
    if (s.demand) svc.capacity = unit_capacity(p, s);
    // Decode is bound by memory bandwidth, which tensor parallelism adds up (performance-anchors.md §0.3).
    if (s.demand && s.capacity_per_gpu && svc.gpus > 1)
      for (size_t u = 0; u < p.units.size(); ++u)
        if (p.units[u].profile == kWholeGpu) svc.capacity[u] *= svc.gpus;
    int index = static_cast<int>(p.services.size());

    std::vector<bool> fits(p.units.size(), false);
    bool any = false;
    for (size_t u = 0; u < p.units.size(); ++u) {
      const Unit& unit = p.units[u];
      bool ok = offered[u] && svc.memory_mib <= unit.memory_mib &&
                (svc.gpus == 1 || unit.profile == kWholeGpu) && (!svc.demand || svc.capacity[u] > 0);
      fits[u] = ok;
      any = any || ok;
    }
    // A baseline deploys its layout and gives whole GPUs only to what fits none of its slices.
    if (options.layouts != LayoutSet::maximal && fits_mig_slice(p, fits))
      for (size_t u = 0; u < p.units.size(); ++u)
        if (p.units[u].profile == kWholeGpu) fits[u] = false;
    if (!any) {
      diags.error(s.where, s.field, "service " + quote(s.name) + " fits nowhere: " + why_unfit(p, svc));
      p.services.push_back(std::move(svc));
      continue;
    }
    if (svc.isolation == Isolation::dedicated) {
      if (svc.demand) {
        DedicatedGroup g{{index}, svc.gpus, fits, 0, svc.demand, svc.capacity};
        p.groups.push_back(std::move(g));
      } else {
        auto [it, added] = group_of.try_emplace({svc.gpus, fits}, p.groups.size());
        if (added) p.groups.push_back({{}, svc.gpus, fits, 0, std::nullopt, {}});
        auto& g = p.groups[it->second];
        g.services.push_back(index);
        g.replicas += *svc.replicas;
      }
    } else {
      auto [it, added] = type_of.try_emplace({svc.isolation, svc.memory_mib, svc.compute}, p.share_types.size());
      if (added) p.share_types.push_back({svc.isolation, svc.memory_mib, svc.compute, {}, 0});
      auto& t = p.share_types[it->second];
      t.services.push_back(index);
      t.replicas += *svc.replicas;
    }
    p.services.push_back(std::move(svc));
  }
  if (diags.has_errors()) return std::nullopt;
  enumerate_patterns(p, options);
  return p;
}

}  // namespace tessera::planner
