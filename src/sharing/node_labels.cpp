#include "sharing/node_labels.hpp"

#include <algorithm>
#include <array>
#include <cctype>
#include <set>

#include "config/mig_parted.hpp"
#include "core/catalog.hpp"
#include "core/text.hpp"
#include "sharing/resources.hpp"

namespace tessera::sharing {
namespace {

using config::MigStrategy;

constexpr std::string_view kNs = "nvidia.com/";
constexpr std::string_view kGpuResource = "nvidia.com/gpu";
constexpr uint64_t kMiB = 1ull << 20;

// <resource>.<suffix> for a resource: product, count, replicas and
// sharing-strategy (internal/lm/resource.go, baseLabeler), memory (same file),
// and a MIG device's attributes (internal/resource/nvml-mig-device.go,
// GetAttributes).
constexpr std::array<std::string_view, 13> kResourceSuffixes = {
    "product",         "count",        "replicas",     "sharing-strategy", "memory",
    "multiprocessors", "slices.gi",    "slices.ci",    "engines.copy",     "engines.decoder",
    "engines.encoder", "engines.jpeg", "engines.ofa",
};

// Node-wide keys after nvidia.com/: versions (internal/lm/nvml.go, newVersionLabeler; the
// first five are GFD's deprecated names, still written), architecture
// (internal/lm/resource.go, newArchitectureLabels), machine (internal/lm/machine-type.go),
// capabilities (internal/lm/nvml.go) and the strategy (internal/lm/strategy.go).
constexpr std::array<std::string_view, 19> kNodeKeys = {
    "cuda.driver.major",          "cuda.driver.minor",          "cuda.driver.rev",
    "cuda.runtime.major",         "cuda.runtime.minor",         "cuda.driver-version.major",
    "cuda.driver-version.minor",  "cuda.driver-version.revision", "cuda.driver-version.full",
    "cuda.runtime-version.major", "cuda.runtime-version.minor", "cuda.runtime-version.full",
    "gpu.family",                 "gpu.compute.major",          "gpu.compute.minor",
    "gpu.machine",                "mig.capable",                "mps.capable",
    "mig.strategy",
};

bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    size_t at = text.find(separator, start);
    out.push_back(text.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

bool all_digits(std::string_view text) { return !text.empty() && std::all_of(text.begin(), text.end(), is_digit); }

// A MIG device type as go-nvlib's profile String() names it, '+' made '.'
// (internal/resource/nvml-mig-device.go, GetName): [<c>c.]<g>g.<gb>gb, then
// nothing or '.'/'-' and attributes ("me", "me.all", "gfx").
bool is_mig_type(std::string_view t) {
  size_t i = 0;
  auto digits = [&] {
    size_t from = i;
    while (i < t.size() && is_digit(t[i])) ++i;
    return i > from;
  };
  auto literal = [&](std::string_view s) {
    if (t.substr(i, s.size()) != s) return false;
    i += s.size();
    return true;
  };
  if (!digits()) return false;
  if (i < t.size() && t[i] == 'c' && !(literal("c.") && digits())) return false;
  if (!literal("g.") || !digits() || !literal("gb")) return false;
  if (i == t.size()) return true;
  if (t[i] != '.' && t[i] != '-') return false;
  if (++i == t.size()) return false;
  return std::all_of(t.begin() + static_cast<std::ptrdiff_t>(i), t.end(),
                     [](char c) { return is_alnum(c) || c == '.' || c == '-'; });
}

// A name part: 1 to 63 characters, letters or digits at both ends, '-', '_'
// or '.' inside (apimachinery pkg/util/validation/validation.go, qualifiedNameFmt).
std::optional<std::string> name_problem(std::string_view name, std::string_view what) {
  if (name.empty()) return std::string(what) + " is empty";
  if (name.size() > 63) return std::string(what) + " is " + std::to_string(name.size()) + " characters, over 63";
  if (!is_alnum(name.front()) || !is_alnum(name.back()))
    return std::string(what) + " must begin and end with a letter or digit";
  for (char c : name)
    if (!is_alnum(c) && c != '-' && c != '_' && c != '.')
      return std::string(what) + " holds " + quote(std::string_view(&c, 1)) + " (only letters, digits, '-', '_', '.')";
  return std::nullopt;
}

// RFC 1123 subdomain: at most 253 characters, dot-separated lower-case labels
// of letters, digits and inner '-' (apimachinery IsDNS1123Subdomain).
std::optional<std::string> subdomain_problem(std::string_view prefix) {
  if (prefix.empty()) return std::string("the prefix is empty");
  if (prefix.size() > 253) return std::string("the prefix is over 253 characters");
  for (auto part : split(prefix, '.')) {
    bool ok = !part.empty() && is_alnum(part.front()) && is_alnum(part.back()) &&
              std::all_of(part.begin(), part.end(), [](char c) {
                return (is_alnum(c) && !std::isupper(static_cast<unsigned char>(c))) || c == '-';
              });
    if (!ok) return "the prefix " + quote(prefix) + " is not a lower-case DNS subdomain";
  }
  return std::nullopt;
}

// Labels before validation; later writes replace earlier ones, as GFD's Merge does
// (internal/lm/list.go).
using RawLabels = std::map<std::string, std::string>;

// What the plugin advertises for each physical device: how many replicas, and
// whether under a new name. From build_resources when it accepts the node;
// otherwise GFD's own rule (internal/lm/resource.go, replicationInfo): the
// first sharing entry with the resource's name, whatever devices it selects.
class Shares {
 public:
  Shares(const Inventory& inventory, const config::DevicePluginConfig& config) : config_(config) {
    auto resources = build_resources(inventory, config);
    if (!resources) return;
    built_ = true;
    for (const auto& r : *resources)
      for (const auto& d : r.devices) by_device_[d.physical_uuid] = {d.replicas, r.name};
  }

  struct Share {
    uint32_t replicas = 1;
    bool renamed = false;
  };

  Share of(const std::string& physical_uuid, std::string_view unshared_name) const {
    if (built_) {
      auto it = by_device_.find(physical_uuid);
      if (it == by_device_.end()) return {};
      return {it->second.first, it->second.first > 1 && it->second.second != unshared_name};
    }
    const auto* sharing = config_.sharing();
    if (!sharing) return {};
    for (const auto& r : sharing->resources)
      if (r.name == unshared_name) return {r.replicas, !r.rename.empty() || sharing->rename_by_default};
    return {};
  }

 private:
  const config::DevicePluginConfig& config_;
  bool built_ = false;
  std::map<std::string, std::pair<uint32_t, std::string>> by_device_;
};

// The active sharing strategy's name (api/config/v1/sharing.go, SharingStrategy).
std::string_view strategy_name(const config::DevicePluginConfig& config) {
  return config.uses_mps() ? "mps" : "time-slicing";
}

class Labeller {
 public:
  explicit Labeller(const LabelInputs& in)
      : in_(in), catalog_(in.catalog ? *in.catalog : Catalog::builtin()), shares_(in.inventory, in.config) {
    for (const auto& g : in.inventory.gpus) gpus_.push_back(&g);
    std::stable_sort(gpus_.begin(), gpus_.end(), [](const Gpu* a, const Gpu* b) { return a->index < b->index; });
  }

  RawLabels run() {
    // No GPU, no GFD labels at all (internal/lm/nvml.go, NewDeviceLabeler).
    if (!gpus_.empty()) {
      machine();
      versions();
      mig_capable();
      mps_capable();
      full_gpus();
      if (in_.config.mig_strategy != MigStrategy::none)
        raw_[std::string(kNs) + "mig.strategy"] = std::string(config::to_string(in_.config.mig_strategy));
      if (in_.config.mig_strategy == MigStrategy::single) mig_single();
      if (in_.config.mig_strategy == MigStrategy::mixed) mig_mixed();
    }
    // mig-manager's protocol labels (NVIDIA/mig-parted, cmd/nvidia-mig-manager): given, not derived.
    if (!in_.mig_config.empty()) raw_[std::string(kNs) + "mig.config"] = in_.mig_config;
    if (!in_.mig_config_state.empty()) raw_[std::string(kNs) + "mig.config.state"] = in_.mig_config_state;
    return std::move(raw_);
  }

 private:
  const GpuModel* model(const Gpu& g) const { return catalog_.find(g.model); }

  const GpuFacts* facts(const Gpu& g) const {
    auto it = in_.gpu_facts.find(g.uuid);
    return it == in_.gpu_facts.end() ? nullptr : &it->second;
  }

  // NVML's name, as GFD reads it (internal/resource/nvml-device.go, GetName):
  // from the agent, else the catalog's NVML name, else the Inventory's model
  // (which is the NVML name when the catalog lacks the GPU).
  std::string name(const Gpu& g) const {
    if (const auto* f = facts(g); f && !f->name.empty()) return f->name;
    if (const auto* m = model(g); m && !m->nvml_name.empty()) return m->nvml_name;
    return g.model;
  }

  // NVML's total in MiB, rounded down (internal/resource/nvml-device.go, GetTotalMemoryMiB).
  std::optional<uint64_t> memory_mib(const Gpu& g) const {
    if (const auto* f = facts(g); f && f->memory_total_bytes > 0) return f->memory_total_bytes / kMiB;
    if (const auto* m = model(g); m && !m->memory_estimated && m->memory_mib > 0) return m->memory_mib;
    return std::nullopt;
  }

  // major * 10 + minor; the Inventory's, else the catalog's; 0 when unknown.
  uint32_t compute_capability(const Gpu& g) const {
    if (g.compute_capability != 0) return g.compute_capability;
    const auto* m = model(g);
    if (!m) return 0;
    auto parts = split(m->compute_capability, '.');
    if (parts.size() != 2 || !all_digits(parts[0]) || parts[1].size() != 1 || !is_digit(parts[1][0])) return 0;
    return static_cast<uint32_t>(std::stoul(std::string(parts[0])) * 10 + std::stoul(std::string(parts[1])));
  }

  void set(std::string_view resource, std::string_view suffix, std::string value) {
    raw_[std::string(resource) + "." + std::string(suffix)] = std::move(value);
  }

  // internal/lm/resource.go, getProductName: each non-empty part sanitised,
  // joined with '-', "SHARED" appended when replicated and not renamed.
  static std::string product(std::initializer_list<std::string_view> parts, bool shared_suffix) {
    std::string out;
    for (auto p : parts) {
      if (p.empty()) continue;
      if (!out.empty()) out += '-';
      out += gfd_sanitise(p);
    }
    if (!out.empty() && shared_suffix) out += "-SHARED";
    return out;
  }

  // internal/lm/resource.go, baseLabeler/getReplicas: without sharing (a
  // MIG-enabled GPU's whole-GPU labels) replicas is 0; else the configured
  // replicas, or 1; the strategy is the active one only when replicas > 1.
  void base(std::string_view resource, size_t count, std::optional<Shares::Share> share,
            std::initializer_list<std::string_view> parts) {
    const uint32_t replicas = share ? share->replicas : 0;
    const bool shared = replicas > 1;
    set(resource, "product", product(parts, shared && !share->renamed));
    set(resource, "count", std::to_string(count));
    set(resource, "replicas", std::to_string(replicas));
    set(resource, "sharing-strategy", std::string(shared ? strategy_name(in_.config) : "none"));
  }

  void machine() {
    // internal/lm/machine-type.go: the file's text, trimmed, sanitised.
    if (!in_.machine_type.empty()) raw_[std::string(kNs) + "gpu.machine"] = gfd_sanitise(in_.machine_type);
  }

  void versions() {
    // internal/lm/nvml.go, newVersionLabeler: "X.Y[.Z]" (anything else is an
    // error there, and left out here); the revision is empty for "X.Y".
    if (!in_.driver_version.empty()) {
      auto parts = split(in_.driver_version, '.');
      if (parts.size() == 2 || parts.size() == 3) {
        std::string major(parts[0]), minor(parts[1]), rev(parts.size() == 3 ? parts[2] : "");
        const std::vector<std::pair<std::string_view, std::string>> labels = {
            {"cuda.driver.major", major},         {"cuda.driver.minor", minor},
            {"cuda.driver.rev", rev},             {"cuda.driver-version.major", major},
            {"cuda.driver-version.minor", minor}, {"cuda.driver-version.revision", rev},
            {"cuda.driver-version.full", in_.driver_version}};
        for (const auto& [key, value] : labels) raw_[std::string(kNs) + std::string(key)] = value;
      }
    }
    // The CUDA driver API version, "major.minor" from NVML's integer
    // (internal/resource/nvml-lib.go, GetCudaDriverVersion).
    auto parts = split(in_.cuda_driver_version, '.');
    if (parts.size() == 2 && all_digits(parts[0]) && all_digits(parts[1]) && parts[0].size() < 6 &&
        parts[1].size() < 6) {
      std::string major = std::to_string(std::stoul(std::string(parts[0])));
      std::string minor = std::to_string(std::stoul(std::string(parts[1])));
      const std::vector<std::pair<std::string_view, std::string>> labels = {
          {"cuda.runtime.major", major},         {"cuda.runtime.minor", minor},
          {"cuda.runtime-version.major", major}, {"cuda.runtime-version.minor", minor},
          {"cuda.runtime-version.full", major + "." + minor}};
      for (const auto& [key, value] : labels) raw_[std::string(kNs) + std::string(key)] = value;
    }
  }

  // internal/lm/nvml.go, newMigCapabilityLabeler: "true" when any GPU is.
  // Known capable: MIG on, the agent says so, or the catalog (which holds
  // only MIG-capable models) knows the model. Known not: the agent says so,
  // or compute capability below 8.0 (MIG came with Ampere).
  void mig_capable() {
    bool all_known = true;
    for (const Gpu* g : gpus_) {
      const auto* f = facts(*g);
      const auto* m = model(*g);
      if (g->mig_enabled || (f && f->mig_capable == true) || (m && !m->profiles.empty())) {
        raw_[std::string(kNs) + "mig.capable"] = "true";
        return;
      }
      const uint32_t cc = compute_capability(*g);
      if (!(f && f->mig_capable == false) && !(cc != 0 && cc < 80)) all_known = false;
    }
    if (all_known) raw_[std::string(kNs) + "mig.capable"] = "false";
  }

  // internal/lm/nvml.go, newSharingLabeler: "true" when MPS sharing is in
  // force. GFD refuses (an error, no labels) when a GPU has MIG on; tessera
  // runs MPS inside MIG devices (docs/design-mps.md), so it stays "true".
  void mps_capable() {
    bool mps = false;
    if (in_.config.uses_mps())
      for (const auto& r : in_.config.mps->resources) mps = mps || r.replicas > 1;
    raw_[std::string(kNs) + "mps.capable"] = mps ? "true" : "false";
  }

  // internal/lm/mig-strategy.go, newGPULabelers: one set of nvidia.com/gpu.*
  // labels per product name, counting every GPU of that name; those of a
  // name with a GPU without MIG are written last and win. GFD picks among
  // names by map order (random); here the name of the lowest-indexed GPU
  // without MIG wins, else that of the lowest-indexed GPU.
  void full_gpus() {
    const Gpu* representative = nullptr;
    for (const Gpu* g : gpus_)
      if (!g->mig_enabled) {
        representative = g;
        break;
      }
    const bool with_sharing = representative != nullptr;
    if (!representative) representative = gpus_.front();
    const std::string product_name = name(*representative);
    size_t count = 0;
    for (const Gpu* g : gpus_) count += name(*g) == product_name ? 1 : 0;

    std::optional<Shares::Share> share;
    if (with_sharing) share = shares_.of(representative->uuid, kGpuResource);
    base(kGpuResource, count, share, {product_name});
    // Left out when unknown, as GFD does for 0 (internal/lm/resource.go).
    if (auto mib = memory_mib(*representative)) set(kGpuResource, "memory", std::to_string(*mib));
    // internal/lm/resource.go, newArchitectureLabels: none when the major is 0.
    if (uint32_t cc = compute_capability(*representative); cc / 10 != 0) {
      set(kGpuResource, "family", std::string(gfd_family(cc / 10, cc % 10)));
      set(kGpuResource, "compute.major", std::to_string(cc / 10));
      set(kGpuResource, "compute.minor", std::to_string(cc % 10));
    }
  }

  struct MigRef {
    const Gpu* gpu;
    const MigDevice* mig;
  };

  // Every MIG device under its type (go-nvlib's name, '+' made '.'), in GPU
  // then placement order. A device whose compute instance is smaller than its
  // GPU instance has a go-nvlib name of its own ("1c.2g.20gb") that the
  // Inventory does not carry: it goes under `unnamed`.
  std::map<std::string, std::vector<MigRef>> mig_types(std::vector<MigRef>& unnamed) const {
    std::map<std::string, std::vector<MigRef>> out;
    for (const Gpu* g : gpus_) {
      if (!g->mig_enabled) continue;
      for (const auto& m : g->mig_devices) {
        if (!m.full_instance) {
          unnamed.push_back({g, &m});
          continue;
        }
        std::string type = m.profile;
        std::replace(type.begin(), type.end(), '+', '.');
        out[type].push_back({g, &m});
      }
    }
    return out;
  }

  // internal/lm/resource.go, NewMIGResourceLabeler: base labels with the
  // parent's name, "MIG" and the type, then the first device's attributes.
  void mig_resource(std::string_view resource, const std::string& type, const std::vector<MigRef>& devices) {
    const MigRef& first = devices.front();
    base(resource, devices.size(), shares_.of(first.mig->uuid, resource), {name(*first.gpu), "MIG", type});
    const GpuModel* m = model(*first.gpu);
    const GpuInstanceProfile* p = m ? m->profile(first.mig->profile) : nullptr;
    // nvmlDeviceGetAttributes' memorySizeMB, in MiB (go-nvml's nvml.h): the
    // driver's figure for this device, else the catalog's when not estimated.
    if (first.mig->memory_bytes > 0)
      set(resource, "memory", std::to_string(first.mig->memory_bytes / kMiB));
    else if (p && !p->memory_estimated && p->memory_mib > 0)
      set(resource, "memory", std::to_string(p->memory_mib));
    if (p && !p->sm_estimated && p->sm_count > 0) set(resource, "multiprocessors", std::to_string(p->sm_count));
    // GPU instance slices are the profile's <g>; the compute instance spans it.
    if (auto parsed = config::parse_mig_profile_name(first.mig->profile)) {
      set(resource, "slices.gi", std::to_string(parsed->g));
      set(resource, "slices.ci", std::to_string(parsed->g));
    }
    // Engine counts only from a catalog row seen on hardware
    // (data/mig-profiles.json conventions: evidence "observed").
    if (p && (p->evidence.starts_with("observed") || p->evidence.starts_with("partly observed"))) {
      set(resource, "engines.copy", std::to_string(p->engines.copy));
      set(resource, "engines.decoder", std::to_string(p->engines.decoders));
      set(resource, "engines.encoder", std::to_string(p->engines.encoders));
      set(resource, "engines.jpeg", std::to_string(p->engines.jpegs));
      set(resource, "engines.ofa", std::to_string(p->engines.ofas));
    }
  }

  // internal/lm/mig-strategy.go, newMigStrategySingleLabeler.
  void mig_single() {
    const Gpu* first_mig = nullptr;
    bool empty = false, whole = false;
    for (const Gpu* g : gpus_) {
      if (!g->mig_enabled) {
        whole = true;
        continue;
      }
      if (!first_mig) first_mig = g;
      empty = empty || g->mig_devices.empty();
    }
    if (!first_mig) return;  // no GPU with MIG on: as strategy none
    std::vector<MigRef> unnamed;
    auto types = mig_types(unnamed);
    const size_t kinds = types.size() + (unnamed.empty() ? 0 : 1);
    if (empty || whole || kinds != 1 || types.empty()) {
      // newInvalidMigStrategyLabeler: over the whole-GPU labels.
      set(kGpuResource, "product", product({name(*first_mig), "MIG", "INVALID"}, false));
      set(kGpuResource, "count", "0");
      set(kGpuResource, "replicas", "0");
      set(kGpuResource, "sharing-strategy", "");
      set(kGpuResource, "memory", "0");
      return;
    }
    mig_resource(kGpuResource, types.begin()->first, types.begin()->second);
  }

  // internal/lm/mig-strategy.go, newMigStrategyMixedLabeler: one resource per
  // type, "nvidia.com/mig-<type>". Devices with no name here are left out;
  // the plugin does not advertise them either.
  void mig_mixed() {
    std::vector<MigRef> unnamed;
    for (const auto& [type, devices] : mig_types(unnamed))
      mig_resource(mig_resource_name(devices.front().mig->profile), type, devices);
  }

  const LabelInputs& in_;
  const Catalog& catalog_;
  Shares shares_;
  std::vector<const Gpu*> gpus_;
  RawLabels raw_;
};

}  // namespace

std::optional<std::string> label_key_problem(std::string_view key) {
  auto parts = split(key, '/');
  if (parts.size() > 2) return "the key " + quote(key) + " has more than one '/'";
  if (parts.size() == 2)
    if (auto why = subdomain_problem(parts[0])) return "the key " + quote(key) + ": " + *why;
  if (auto why = name_problem(parts.back(), "the name part")) return "the key " + quote(key) + ": " + *why;
  return std::nullopt;
}

std::optional<std::string> label_value_problem(std::string_view value) {
  if (value.empty()) return std::nullopt;
  if (auto why = name_problem(value, "the value")) return *why;
  return std::nullopt;
}

std::string gfd_sanitise(std::string_view text) {
  // internal/lm/resource.go, sanitise.
  std::string out;
  bool pending_space = false;
  for (char c : text) {
    if (c == ' ') {
      pending_space = !out.empty();
      continue;
    }
    if (!is_alnum(c) && c != '-' && c != '_' && c != '.') continue;
    if (pending_space) out += '-';
    pending_space = false;
    out += c;
  }
  return out;
}

std::string_view gfd_family(uint32_t major, uint32_t minor) {
  // internal/lm/resource.go, getArchFamily.
  switch (major) {
    case 1: return "tesla";
    case 2: return "fermi";
    case 3: return "kepler";
    case 5: return "maxwell";
    case 6: return "pascal";
    case 7: return minor < 5 ? "volta" : "turing";
    case 8: return minor < 9 ? "ampere" : "ada-lovelace";
    case 9: return "hopper";
    case 10:
    case 12: return "blackwell";
    case 13: return "rubin";
    default: return "undefined";
  }
}

NodeLabels node_labels(const LabelInputs& inputs) {
  NodeLabels out;
  for (auto& [key, value] : Labeller(inputs).run()) {
    auto why = label_key_problem(key);
    if (!why) why = label_value_problem(value);
    if (why) {
      out.dropped.push_back(key + "=" + excerpt(value) + ": " + *why);
      continue;
    }
    out.labels.emplace(key, std::move(value));
  }
  return out;
}

bool owned_label(std::string_view key) {
  if (!key.starts_with(kNs)) return false;
  const std::string_view rest = key.substr(kNs.size());
  if (std::find(kNodeKeys.begin(), kNodeKeys.end(), rest) != kNodeKeys.end()) return true;
  for (auto suffix : kResourceSuffixes) {
    if (rest.size() <= suffix.size() + 1 || !rest.ends_with(suffix) || rest[rest.size() - suffix.size() - 1] != '.')
      continue;
    const std::string_view resource = rest.substr(0, rest.size() - suffix.size() - 1);
    if (resource == "gpu") return true;
    if (resource.starts_with("mig-") && is_mig_type(resource.substr(4))) return true;
  }
  return false;
}

std::vector<std::string> stale_labels(const std::map<std::string, std::string>& current,
                                      const std::map<std::string, std::string>& wanted) {
  std::vector<std::string> out;
  for (const auto& [key, value] : current)
    if (owned_label(key) && !wanted.contains(key)) out.push_back(key);
  return out;
}

}  // namespace tessera::sharing
