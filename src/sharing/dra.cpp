#include "sharing/dra.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <set>
#include <tuple>

namespace tessera::sharing::dra {
namespace {

constexpr const char* kComputeCounter = "compute-slices";
constexpr const char* kInstancesCounter = "gpu-instances";

std::string memory_slice(uint32_t i) { return "memory-slice-" + std::to_string(i); }

// Engines `e` as counters (NVIDIA's driver's names, partitions.go), of each
// kind the GPU's totals count (core's engine_totals), so the scheduler
// refuses what the hardware does, e.g. two media-engine instances on an A30
// (one JPEG and one OFA engine in all).
std::vector<Counter> engine_counters(const Engines& e, const Engines& totals) {
  std::vector<Counter> out;
  for (const auto& [name, kind] : {std::pair{"copy-engines", &Engines::copy}, {"decoders", &Engines::decoders},
                                   {"encoders", &Engines::encoders}, {"jpeg-engines", &Engines::jpegs},
                                   {"ofa-engines", &Engines::ofas}})
    if (e.*kind > 0 && totals.*kind != kUncountedEngines) out.push_back({name, e.*kind});
  return out;
}
std::string profile_counter(const GpuInstanceProfile& p) { return "profile-" + profile_token(p.name); }

// How many instances of `p` fit a GPU by slices, compute and the instance
// limit alone: its own limit binds only below that.
uint32_t fit_without_own_limit(const GpuModel& m, const GpuInstanceProfile& p) {
  uint32_t disjoint = 0, end = 0;
  std::vector<uint32_t> starts;
  for (const auto& pl : p.placements) starts.push_back(pl.start);
  std::sort(starts.begin(), starts.end());
  for (uint32_t s : starts)
    if (disjoint == 0 || s >= end) {
      ++disjoint;
      end = s + p.memory_slices;
    }
  uint32_t by_compute = p.slices ? m.compute_slices / p.slices : disjoint;
  return std::min({disjoint, by_compute, m.max_instances});
}

bool own_limit_binds(const GpuModel& m, const GpuInstanceProfile& p) { return p.max_count < fit_without_own_limit(m, p); }

std::string version3(std::string v) {  // "8.0" -> "8.0.0"; "550.90.07" -> "550.90.7" (semver: no leading zeros)
  std::vector<std::string> parts;
  size_t at = 0;
  while (at <= v.size()) {
    size_t dot = v.find('.', at);
    std::string part = v.substr(at, dot == std::string::npos ? std::string::npos : dot - at);
    while (part.size() > 1 && part[0] == '0') part.erase(0, 1);
    if (part.empty()) part = "0";
    parts.push_back(part);
    if (dot == std::string::npos) break;
    at = dot + 1;
  }
  while (parts.size() < 3) parts.push_back("0");
  if (parts.size() > 3) parts.resize(3);
  return parts[0] + "." + parts[1] + "." + parts[2];
}

// What the counters still hold on a GPU after what is taken.
struct Remaining {
  std::map<std::string, int64_t> left;
  explicit Remaining(const CounterSet& set) {
    for (const auto& c : set.counters) left[c.name] = c.value;
  }
  bool can(const std::vector<Counter>& use) const {
    for (const auto& c : use) {
      auto it = left.find(c.name);
      if (it == left.end() || it->second < c.value) return false;
    }
    return true;
  }
  void take(const std::vector<Counter>& use) {
    for (const auto& c : use) left[c.name] -= c.value;
  }
  int64_t free_memory_slices(uint32_t n) const {
    int64_t free = 0;
    for (uint32_t i = 0; i < n; ++i) free += left.at(memory_slice(i));
    return free;
  }
};

std::vector<Counter> whole_consumption(const GpuModel& m) {
  std::vector<Counter> out;
  for (uint32_t i = 0; i < m.memory_slices; ++i) out.push_back({memory_slice(i), 1});
  out.push_back({kComputeCounter, m.compute_slices});
  const Engines totals = engine_totals(m);
  for (auto& c : engine_counters(totals, totals)) out.push_back(std::move(c));
  return out;
}

std::vector<Counter> taken_consumption(const GpuModel& m, const PlacedInstance& t) {
  return t.profile == kWholeGpuProfile ? whole_consumption(m) : consumption(m, t);
}

Remaining remaining(const Gpu& gpu, const CounterSet& set, const Taken& taken) {
  Remaining r(set);
  for (const auto& t : taken) r.take(taken_consumption(*gpu.model, t));
  return r;
}

void common_attributes(const Gpu& g, Device& d) {
  d.attributes["productName"] = g.product_name;
  // The driver's word first (any GPU); the catalog's only where NVML could not say.
  if (!g.brand.empty()) d.attributes["brand"] = g.brand;
  const std::string architecture = !g.architecture.empty() ? g.architecture : g.model ? g.model->architecture : "";
  if (!architecture.empty()) d.attributes["architecture"] = architecture;
  const std::string cc = !g.compute_capability.empty() ? g.compute_capability : g.model ? g.model->compute_capability : "";
  if (!cc.empty()) d.attributes["cudaComputeCapability"] = Version{version3(cc)};
  if (!g.driver_version.empty()) d.attributes["driverVersion"] = Version{version3(g.driver_version)};
  if (!g.cuda_driver_version.empty()) d.attributes["cudaDriverVersion"] = Version{version3(g.cuda_driver_version)};
  // Kubernetes' standard attributes (k8s.io/dynamic-resource-allocation/deviceattribute), on MIG
  // devices as their GPU's, as NVIDIA's driver publishes them.
  if (!g.pci_bus_id.empty()) d.attributes["resource.kubernetes.io/pciBusID"] = g.pci_bus_id;
  if (!g.pcie_root.empty()) d.attributes["resource.kubernetes.io/pcieRoot"] = g.pcie_root;
  if (g.numa_node) d.attributes["resource.kubernetes.io/numaNode"] = *g.numa_node;
  d.attributes["index"] = static_cast<int64_t>(g.index);
  d.attributes["minor"] = static_cast<int64_t>(g.minor);
}

}  // namespace

Result<SharesMode> parse_shares_mode(const std::string& text) {
  if (text == "memory") return SharesMode{};
  if (text == "unlimited") return SharesMode{SharesMode::Kind::unlimited, 0};
  uint32_t n = 0;
  bool digits = !text.empty() && text.size() <= 5;
  for (char c : text) {
    if (c < '0' || c > '9') digits = false;
    else n = n * 10 + static_cast<uint32_t>(c - '0');
  }
  if (!digits || n == 0 || n > 65535)
    return fail(Errc::invalid_argument, "\"" + text + "\" is not a shares mode: memory, unlimited, or a number of shares "
                                        "per device from 1 to 65535");
  return SharesMode{SharesMode::Kind::count, n};
}

std::string to_string(const SharesMode& mode) {
  switch (mode.kind) {
    case SharesMode::Kind::memory: return "memory";
    case SharesMode::Kind::unlimited: return "unlimited";
    case SharesMode::Kind::count: return std::to_string(mode.count) + " shares";
  }
  return "?";
}

std::string profile_token(const std::string& profile) {
  // NVIDIA's driver: dots dropped, then RFC 1123 (lower case, anything but
  // [a-z0-9-.] a '-', no '-' at either end): "1g.10gb+me" -> "1g10gb-me".
  std::string out;
  for (char c : profile) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '.') continue;
    if (std::isalnum(u)) out += static_cast<char>(std::tolower(u));
    else out += '-';
  }
  while (!out.empty() && out.front() == '-') out.erase(0, 1);
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

std::vector<Counter> consumption(const GpuModel& m, const PlacedInstance& instance) {
  const auto& p = m.profiles.at(instance.profile);
  std::vector<Counter> out;
  for (uint32_t i = instance.start; i < instance.start + p.memory_slices && i < m.memory_slices; ++i)
    out.push_back({memory_slice(i), 1});
  out.push_back({kComputeCounter, p.slices});
  out.push_back({kInstancesCounter, 1});
  for (auto& c : engine_counters(p.engines, engine_totals(m))) out.push_back(std::move(c));
  if (own_limit_binds(m, p)) out.push_back({profile_counter(p), 1});
  return out;
}

std::optional<CounterSet> counter_set(const Gpu& gpu, const Taken& fixed) {
  if (!gpu.model) return std::nullopt;
  const auto& m = *gpu.model;
  CounterSet set{"gpu-" + std::to_string(gpu.minor) + "-counter-set", {}};
  for (uint32_t i = 0; i < m.memory_slices; ++i) set.counters.push_back({memory_slice(i), 1});
  set.counters.push_back({kComputeCounter, m.compute_slices});
  set.counters.push_back({kInstancesCounter, m.max_instances});
  const Engines totals = engine_totals(m);
  for (auto& c : engine_counters(totals, totals)) set.counters.push_back(std::move(c));
  for (const auto& p : m.profiles)
    if (own_limit_binds(m, p)) set.counters.push_back({profile_counter(p), p.max_count});
  for (const auto& f : fixed)
    for (const auto& use : taken_consumption(m, f))
      for (auto& c : set.counters)
        if (c.name == use.name) c.value = std::max<int64_t>(0, c.value - use.value);
  return set;
}

bool fits(const Gpu& gpu, const Device& device, const Taken& taken) {
  auto set = counter_set(gpu);
  if (!set) return taken.empty();
  return remaining(gpu, *set, taken).can(device.consumes);
}

std::vector<Device> devices(const std::vector<Gpu>& gpus, const std::vector<Taken>& taken, const PoolOptions& options,
                            const std::vector<Taken>& fixed) {
  struct Ranked {
    Device device;
    std::tuple<int, int64_t, uint32_t, int64_t, int64_t> key;
  };
  std::vector<Ranked> all;
  const Taken none;
  for (size_t gi = 0; gi < gpus.size(); ++gi) {
    const Gpu& g = gpus[gi];
    const Taken& t = gi < taken.size() ? taken[gi] : none;
    const Taken& f = gi < fixed.size() ? fixed[gi] : none;
    auto set = counter_set(g, f);
    const bool mig_possible = g.model && (g.mig_enabled || g.mig_mode_switchable);
    // A GPU the catalog lacks is offered whole only with MIG off: with MIG on
    // the whole GPU cannot be prepared, and its instances cannot be placed.
    const bool whole_possible = (!g.mig_enabled || g.mig_mode_switchable) && f.empty();
    const std::vector<Taint>& taints = g.taints;
    std::vector<Device> mine;
    if (whole_possible) {
      Device d;
      d.name = "gpu-" + std::to_string(g.minor);
      d.gpu = static_cast<uint32_t>(gi);
      d.attributes["type"] = std::string("gpu");
      d.attributes["uuid"] = g.uuid;
      common_attributes(g, d);
      d.capacity["memory"] = g.memory_bytes;
      if (set) {
        d.counter_set = set->name;
        d.consumes = whole_consumption(*g.model);
      }
      d.allow_multiple_allocations = options.memory_shares;
      d.taints = taints;
      mine.push_back(std::move(d));
    }
    if (mig_possible) {
      const auto& m = *g.model;
      for (uint32_t pi = 0; pi < m.profiles.size(); ++pi) {
        const auto& p = m.profiles[pi];
        for (const auto& pl : p.placements) {
          const PlacedInstance here{pi, pl.start};
          const bool is_fixed = std::find(f.begin(), f.end(), here) != f.end();
          if (!is_fixed && !f.empty()) {
            // Left out when it overlaps an instance tessera did not cut.
            Taken with = f;
            with.push_back(here);
            if (!check_layout(m, with)) continue;
          }
          Device d;
          d.name = "gpu-" + std::to_string(g.minor) + "-mig-" + profile_token(p.name) + "-" + std::to_string(p.profile_id) +
                   "-" + std::to_string(pl.start);
          d.gpu = static_cast<uint32_t>(gi);
          d.mig = here;
          d.fixed = is_fixed;
          d.attributes["type"] = std::string("mig");
          d.attributes["profile"] = p.name;
          d.attributes["parentUUID"] = g.uuid;
          common_attributes(g, d);
          const auto reported = g.reported_profiles.find(pi);
          const Gpu::ReportedProfile* r = reported != g.reported_profiles.end() ? &reported->second : nullptr;
          const Engines& engines = r ? r->engines : p.engines;
          d.capacity["memory"] = (r && r->memory_mib ? r->memory_mib : p.memory_mib) << 20;
          d.capacity["multiprocessors"] = r && r->multiprocessors ? r->multiprocessors : p.sm_count;
          d.capacity["copyEngines"] = engines.copy;
          d.capacity["decoders"] = engines.decoders;
          d.capacity["encoders"] = engines.encoders;
          d.capacity["jpegEngines"] = engines.jpegs;
          d.capacity["ofaEngines"] = engines.ofas;
          if (!is_fixed) {
            d.counter_set = set->name;
            d.consumes = consumption(m, here);
          }
          d.allow_multiple_allocations = options.memory_shares;
          d.taints = taints;
          if (auto it = g.instance_taints.find(here); it != g.instance_taints.end())
            d.taints.insert(d.taints.end(), it->second.begin(), it->second.end());
          mine.push_back(std::move(d));
        }
      }
    }
    if (options.order == Order::by_start) {
      for (auto& d : mine) {
        const int64_t start = d.mig ? d.mig->start : -1;
        all.push_back({std::move(d), {0, static_cast<int64_t>(g.minor), 0, 0, start}});
      }
      continue;
    }
    // tessera's order. First what can be had without cutting anything: an
    // instance that exists (fixed, or one that claims already share). Then
    // what fits now, on the fullest healthy GPU first; within a GPU the
    // placement that breaks the fewest other placements that fit now
    // (weighted by the memory slices they need), then the highest start.
    // What does not fit comes last.
    std::optional<Remaining> rest;
    if (set && g.model) {
      rest.emplace(*set);
      for (const auto& used : t) rest->take(taken_consumption(*g.model, used));
    }
    const int64_t free = rest ? rest->free_memory_slices(g.model->memory_slices) : (t.empty() ? 1 : 0);
    // Keys first: the damage of one device reads every other.
    std::vector<decltype(Ranked::key)> keys;
    for (const auto& d : mine) {
      const bool held = d.mig ? std::find(t.begin(), t.end(), *d.mig) != t.end()
                              : std::find(t.begin(), t.end(), PlacedInstance{kWholeGpuProfile, 0}) != t.end();
      int rank;
      int64_t damage = 0;
      if ((d.fixed && !held) || (held && d.allow_multiple_allocations)) {
        rank = 0;  // exists: nothing to cut
      } else if (held || d.fixed) {
        rank = 3;  // a claim has it
      } else {
        const bool now = !rest ? t.empty() : rest->can(d.consumes);
        rank = now ? 1 : 3;
        if (now && rest && d.mig) {
          Remaining after = *rest;
          after.take(d.consumes);
          for (const auto& other : mine) {
            if (&other == &d || !other.mig || other.fixed || other.mig->profile == d.mig->profile) continue;
            if (rest->can(other.consumes) && !after.can(other.consumes))
              damage += g.model->profiles[other.mig->profile].memory_slices;
          }
        } else if (now && !d.mig && d.consumes.size() > 0) {
          damage = std::numeric_limits<int32_t>::max();  // a whole GPU after its own MIG placements
        }
      }
      const int64_t start = d.mig ? d.mig->start : 0;
      const int health = d.taints.empty() ? 0 : 1;
      keys.push_back({health * 10 + rank, rank == 0 ? 0 : free, g.minor, damage, -start});
    }
    for (size_t k = 0; k < mine.size(); ++k) all.push_back({std::move(mine[k]), keys[k]});
  }
  std::stable_sort(all.begin(), all.end(), [](const Ranked& a, const Ranked& b) {
    if (a.key != b.key) return a.key < b.key;
    return a.device.name < b.device.name;
  });
  std::vector<Device> out;
  out.reserve(all.size());
  for (auto& r : all) out.push_back(std::move(r.device));
  return out;
}

std::vector<Device> without_partitions(const std::vector<Device>& devices) {
  std::set<uint32_t> with_instances;
  for (const auto& d : devices)
    if (d.mig && d.fixed) with_instances.insert(d.gpu);
  std::vector<Device> out;
  for (const auto& d : devices) {
    if (d.mig ? !d.fixed : with_instances.contains(d.gpu)) continue;
    Device kept = d;
    kept.counter_set.clear();
    kept.consumes.clear();
    kept.allow_multiple_allocations = false;
    out.push_back(std::move(kept));
  }
  return out;
}

}  // namespace tessera::sharing::dra
