#include "core/mig_layout.hpp"
#include "core/text.hpp"

#include <algorithm>
#include <numeric>

namespace tessera {
namespace {

// Occupancy of one GPU while a layout is built up.
struct Occupancy {
  uint64_t memory_mask = 0;
  uint32_t compute_slices = 0;
  uint32_t instances = 0;
  std::vector<uint32_t> per_profile;
  Engines engines;  // what the instances hold
  Engines total;    // the GPU's

  explicit Occupancy(const GpuModel& model) : per_profile(model.profiles.size(), 0), total(engine_totals(model)) {}

  static bool fits(const Engines& held, const Engines& more, const Engines& total) {
    for (auto kind : kEngineKinds)
      if (uint64_t{held.*kind} + more.*kind > total.*kind) return false;
    return true;
  }

  static uint64_t mask(uint32_t start, uint32_t size) {
    return size >= 64 ? ~uint64_t{0} : ((uint64_t{1} << size) - 1) << start;
  }

  bool can_add(const GpuModel& model, uint32_t profile, uint32_t start) const {
    const auto& p = model.profiles[profile];
    if (!p.allows_start(start)) return false;
    if (per_profile[profile] >= p.max_count) return false;
    if (instances >= model.max_instances) return false;
    if (compute_slices + p.slices > model.compute_slices) return false;
    if (!fits(engines, p.engines, total)) return false;
    return (memory_mask & mask(start, p.memory_slices)) == 0;
  }
  void add(const GpuModel& model, uint32_t profile, uint32_t start) {
    const auto& p = model.profiles[profile];
    memory_mask |= mask(start, p.memory_slices);
    compute_slices += p.slices;
    ++instances;
    ++per_profile[profile];
    for (auto kind : kEngineKinds) engines.*kind += p.engines.*kind;
  }
  void remove(const GpuModel& model, uint32_t profile, uint32_t start) {
    const auto& p = model.profiles[profile];
    memory_mask &= ~mask(start, p.memory_slices);
    compute_slices -= p.slices;
    --instances;
    --per_profile[profile];
    for (auto kind : kEngineKinds) engines.*kind -= p.engines.*kind;
  }
};

bool place_rest(const GpuModel& model, std::span<const uint32_t> wanted, size_t next, Occupancy& occ,
                MigLayout& placed) {
  if (next == wanted.size()) return true;
  uint32_t profile = wanted[next];
  // Identical profiles are placed at increasing starts, so each set is tried once.
  uint32_t min_start = 0;
  if (next > 0 && wanted[next - 1] == profile) min_start = placed.back().start + 1;
  for (const auto& pl : model.profiles[profile].placements) {
    if (pl.start < min_start || !occ.can_add(model, profile, pl.start)) continue;
    occ.add(model, profile, pl.start);
    placed.push_back({profile, pl.start});
    if (place_rest(model, wanted, next + 1, occ, placed)) return true;
    placed.pop_back();
    occ.remove(model, profile, pl.start);
  }
  return false;
}

struct Candidate {
  uint32_t profile;
  uint32_t start;
};

void enumerate(const GpuModel& model, std::span<const Candidate> candidates, size_t from, Occupancy& occ,
               MigLayout& current, std::vector<MigLayout>& out) {
  bool extended = false;
  for (size_t i = from; i < candidates.size(); ++i) {
    const auto& c = candidates[i];
    if (!occ.can_add(model, c.profile, c.start)) continue;
    extended = true;
    occ.add(model, c.profile, c.start);
    current.push_back({c.profile, c.start});
    enumerate(model, candidates, i + 1, occ, current, out);
    current.pop_back();
    occ.remove(model, c.profile, c.start);
  }
  if (extended) return;
  // Nothing later in the order fits; maximal only if nothing earlier fits either.
  for (size_t i = 0; i < from; ++i)
    if (occ.can_add(model, candidates[i].profile, candidates[i].start)) return;
  if (!current.empty()) out.push_back(current);
}

// "1 JPEG, 1 OFA" for the kinds `total` counts.
std::string engines_text(const Engines& e, const Engines& total) {
  std::string out;
  for (const auto& [name, kind] : {std::pair{"copy", &Engines::copy}, {"decoder", &Engines::decoders},
                                   {"encoder", &Engines::encoders}, {"JPEG", &Engines::jpegs}, {"OFA", &Engines::ofas}})
    if (total.*kind != kUncountedEngines)
      out += (out.empty() ? "" : ", ") + std::to_string(e.*kind) + " " + name;
  return out;
}

}  // namespace

Engines engine_totals(const GpuModel& model) {
  const GpuInstanceProfile* whole = nullptr;
  for (const auto& p : model.profiles)
    if (p.slices == model.compute_slices && p.memory_slices == model.memory_slices && !is_media_variant(p)) whole = &p;
  Engines totals;
  for (auto kind : kEngineKinds) {
    // A kind counts where the whole GPU's profile holds at least as many as
    // any other profile: a smaller figure there is a gap in the sources.
    const bool gap = !whole || std::any_of(model.profiles.begin(), model.profiles.end(), [&](const GpuInstanceProfile& p) {
                       return p.engines.*kind > whole->engines.*kind;
                     });
    totals.*kind = gap ? kUncountedEngines : whole->engines.*kind;
  }
  return totals;
}

bool is_media_variant(const GpuInstanceProfile& profile) {
  return profile.name.find('+') != std::string::npos || profile.name.find("-me") != std::string::npos;
}

Result<void> check_layout(const GpuModel& model, std::span<const PlacedInstance> layout) {
  Occupancy occ(model);
  for (const auto& inst : layout) {
    if (inst.profile >= model.profiles.size())
      return fail(Errc::invalid_argument, "profile index " + std::to_string(inst.profile) + " is not a profile of " + model.name);
    const auto& p = model.profiles[inst.profile];
    std::string where = p.name + " at " + std::to_string(inst.start);
    if (!p.allows_start(inst.start))
      return fail(Errc::validation, where + ": " + p.name + " cannot start at memory slice " + std::to_string(inst.start) + " on " + model.name);
    if (occ.per_profile[inst.profile] >= p.max_count)
      return fail(Errc::validation, where + ": more than " + std::to_string(p.max_count) + " instances of " + p.name);
    if (occ.instances >= model.max_instances)
      return fail(Errc::validation, where + ": more than " + std::to_string(model.max_instances) + " GPU instances");
    if (occ.compute_slices + p.slices > model.compute_slices)
      return fail(Errc::validation, where + ": needs " + std::to_string(occ.compute_slices + p.slices) + " compute slices, the GPU has " + std::to_string(model.compute_slices));
    if (occ.memory_mask & Occupancy::mask(inst.start, p.memory_slices))
      return fail(Errc::validation, where + ": overlaps another instance's memory slices");
    if (!Occupancy::fits(occ.engines, p.engines, occ.total))
      return fail(Errc::validation, where + ": needs engines the other instances hold (the GPU has " +
                                        engines_text(occ.total, occ.total) + "; they hold " +
                                        engines_text(occ.engines, occ.total) + ", " + p.name + " needs " +
                                        engines_text(p.engines, occ.total) + ")");
    occ.add(model, inst.profile, inst.start);
  }
  return {};
}

std::optional<MigLayout> place_profiles(const GpuModel& model, std::span<const uint32_t> wanted,
                                        std::span<const PlacedInstance> fixed) {
  Occupancy occ(model);
  for (const auto& f : fixed) {
    if (f.profile >= model.profiles.size() || !occ.can_add(model, f.profile, f.start)) return std::nullopt;
    occ.add(model, f.profile, f.start);
  }
  std::vector<uint32_t> order(wanted.begin(), wanted.end());
  for (uint32_t w : order)
    if (w >= model.profiles.size()) return std::nullopt;
  // Largest first (memory, then compute), equal profiles adjacent.
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const auto& pa = model.profiles[a];
    const auto& pb = model.profiles[b];
    if (pa.memory_slices != pb.memory_slices) return pa.memory_slices > pb.memory_slices;
    if (pa.slices != pb.slices) return pa.slices > pb.slices;
    return a < b;
  });
  MigLayout placed;
  if (!place_rest(model, order, 0, occ, placed)) return std::nullopt;
  std::sort(placed.begin(), placed.end());
  return placed;
}

Result<MigLayout> place_counts(const GpuModel& model, const ProfileCounts& counts) {
  std::vector<uint32_t> wanted;
  for (const auto& [name, count] : counts) {
    const auto* p = model.profile(name);
    if (!p) {
      std::vector<std::string> names;
      for (const auto& q : model.profiles) names.push_back(q.name);
      std::string hint = join(nearest(name, names, 3));
      return fail(Errc::not_found, model.name + " has no MIG profile " + quote(name) + " (nearest: " + hint + ")");
    }
    if (count > p->max_count)
      return fail(Errc::validation, std::to_string(count) + " x " + p->name + " is over the maximum of " +
                                        std::to_string(p->max_count) + " on " + model.name);
    auto index = static_cast<uint32_t>(p - model.profiles.data());
    wanted.insert(wanted.end(), count, index);
  }
  auto placed = place_profiles(model, wanted);
  if (!placed) {
    uint32_t slices = 0;
    Engines engines;
    for (uint32_t w : wanted) {
      slices += model.profiles[w].slices;
      for (auto kind : kEngineKinds) engines.*kind += model.profiles[w].engines.*kind;
    }
    const Engines total = engine_totals(model);
    std::string detail = slices > model.compute_slices
                             ? "they need " + std::to_string(slices) + " compute slices, the GPU has " + std::to_string(model.compute_slices)
                         : !Occupancy::fits({}, engines, total)
                             ? "they need " + engines_text(engines, total) + " engines, the GPU has " + engines_text(total, total)
                             : "no placement of these instances avoids overlapping memory slices";
    std::string set;
    for (const auto& [name, count] : counts) set += (set.empty() ? "" : " + ") + std::to_string(count) + "x" + name;
    return fail(Errc::validation, set + " cannot be placed on one " + model.name + ": " + detail);
  }
  return *placed;
}

std::vector<MigLayout> maximal_layouts(const GpuModel& model, LayoutOptions options) {
  std::vector<Candidate> candidates;
  for (uint32_t i = 0; i < model.profiles.size(); ++i) {
    if (!options.include_media_variants && is_media_variant(model.profiles[i])) continue;
    for (const auto& pl : model.profiles[i].placements) candidates.push_back({i, pl.start});
  }
  std::vector<MigLayout> out;
  Occupancy occ(model);
  MigLayout current;
  enumerate(model, candidates, 0, occ, current, out);
  for (auto& l : out) std::sort(l.begin(), l.end());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::vector<uint32_t>> distinct_profile_sets(std::span<const MigLayout> layouts) {
  std::vector<std::vector<uint32_t>> sets;
  for (const auto& l : layouts) {
    std::vector<uint32_t> s;
    for (const auto& i : l) s.push_back(i.profile);
    std::sort(s.begin(), s.end());
    sets.push_back(std::move(s));
  }
  std::sort(sets.begin(), sets.end());
  sets.erase(std::unique(sets.begin(), sets.end()), sets.end());
  return sets;
}

std::string describe_layout(const GpuModel& model, std::span<const PlacedInstance> layout) {
  std::vector<PlacedInstance> by_start(layout.begin(), layout.end());
  std::stable_sort(by_start.begin(), by_start.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  std::string out;
  for (const auto& i : by_start) {
    if (!out.empty()) out += ' ';
    out += (i.profile < model.profiles.size() ? model.profiles[i.profile].name : "?") + "@" + std::to_string(i.start);
  }
  return out;
}

}  // namespace tessera
