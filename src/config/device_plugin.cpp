#include "config/device_plugin.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <regex>
#include <set>

#include "config/mig_parted.hpp"
#include "config/yaml_document.hpp"
#include "core/text.hpp"

namespace tessera::config {
namespace {

// NVIDIA's reader is non-strict: unknown keys are ignored (a warning here),
// duplicate keys keep the last, and plain structs match keys case-insensitively
// (Go's encoding/json); the hand-written unmarshallers (timeSlicing/mps, a
// resource entry) look their keys up exactly.
const KeyRules kStructKeys{.unknown_is_error = false, .duplicates_are_errors = false, .ignore_case = true};
const KeyRules kExactKeys{.unknown_is_error = false, .duplicates_are_errors = false, .ignore_case = false};

template <class E>
struct Choice {
  std::string_view name;
  E value;
};

template <class E, size_t N>
std::optional<E> parse_choice(const YamlNode& node, const Choice<E> (&choices)[N], Diagnostics& diags) {
  std::string allowed;
  for (const auto& c : choices) allowed += (allowed.empty() ? "" : ", ") + std::string(c.name);
  if (node.is_scalar() && !node.is_null() && node.yaml11_kind() == ScalarKind::string) {
    for (const auto& c : choices)
      if (node.scalar() == c.name) return c.value;
  }
  diags.error(node.where(), node.path(), "got " + node.kind_name() + " (allowed: " + allowed + ")");
  return std::nullopt;
}

constexpr Choice<MigStrategy> kMigStrategies[] = {
    {"none", MigStrategy::none}, {"single", MigStrategy::single}, {"mixed", MigStrategy::mixed}};
constexpr Choice<DeviceListStrategy> kListStrategies[] = {{"envvar", DeviceListStrategy::envvar},
                                                          {"volume-mounts", DeviceListStrategy::volume_mounts},
                                                          {"cdi-annotations", DeviceListStrategy::cdi_annotations},
                                                          {"cdi-cri", DeviceListStrategy::cdi_cri}};
constexpr Choice<DeviceIdStrategy> kIdStrategies[] = {{"uuid", DeviceIdStrategy::uuid}, {"index", DeviceIdStrategy::index}};
constexpr Choice<SharedAllocationPolicy> kPolicies[] = {{"distributed", SharedAllocationPolicy::distributed},
                                                        {"packed", SharedAllocationPolicy::packed}};

// Every flag is a pointer in NVIDIA's Flags: null leaves the default.
void read_string(const YamlNode& node, std::string& out, Diagnostics& diags) {
  if (node.is_null()) return;
  if (auto s = node.as_yaml11_string(diags)) out = *s;
}
void read_bool(const YamlNode& node, bool& out, Diagnostics& diags) {
  if (node.is_null()) return;
  if (auto b = node.as_yaml11_bool(diags)) out = *b;
}

bool expect_map(const YamlNode& node, Diagnostics& diags) {
  if (node.is_map()) return true;
  if (!node.is_null()) diags.error(node.where(), node.path(), "expected a map, got " + node.kind_name());
  return false;
}

// Go's time.ParseDuration, or "infinite" (flags.gfd.sleepInterval); a number is nanoseconds.
bool is_duration(const YamlNode& node) {
  auto kind = node.yaml11_kind();
  if (kind == ScalarKind::integer || kind == ScalarKind::floating) return true;
  if (kind != ScalarKind::string) return false;
  static const std::regex re(R"(^[-+]?(0|(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|\xC2\xB5s|\xCE\xBCs|ms|s|m|h))+)$)");
  return node.scalar() == "infinite" || std::regex_match(node.scalar(), re);
}

void parse_gfd(const YamlNode& node, Diagnostics& diags) {
  if (!expect_map(node, diags)) return;
  for (const auto& e : node.checked_entries(diags, {"oneshot", "noTimestamp", "sleepInterval", "outputFile", "machineTypeFile"},
                                            kStructKeys)) {
    if (e.value.is_null()) continue;
    if (e.key == "oneshot" || e.key == "noTimestamp") (void)e.value.as_yaml11_bool(diags);
    else if (e.key == "sleepInterval") {
      if (!e.value.is_scalar() || !is_duration(e.value))
        diags.error(e.value.where(), e.value.path(), "expected a duration such as 60s, 5m or infinite, got " + e.value.kind_name());
    } else (void)e.value.as_yaml11_string(diags);
  }
}

void parse_plugin(const YamlNode& node, PluginFlags& plugin, Diagnostics& diags) {
  if (!expect_map(node, diags)) return;
  for (const auto& e : node.checked_entries(diags, {"passDeviceSpecs", "deviceListStrategy", "deviceIDStrategy",
                                                    "cdiAnnotationPrefix", "nvidiaCTKPath", "containerDriverRoot",
                                                    "sharedDevicesAllocationPolicy"}, kStructKeys)) {
    if (e.value.is_null()) continue;  // the default
    if (e.key == "passDeviceSpecs") read_bool(e.value, plugin.pass_device_specs, diags);
    else if (e.key == "deviceListStrategy") {
      plugin.device_list_strategy.clear();
      std::vector<YamlNode> items = e.value.is_sequence() ? e.value.items() : std::vector<YamlNode>{e.value};
      if (items.empty())
        diags.warning(e.value.where(), e.value.path(), "the list is empty: containers get no device list (allowed: envvar, volume-mounts, cdi-annotations, cdi-cri)");
      std::set<DeviceListStrategy> seen;
      for (const auto& item : items)
        if (auto s = parse_choice(item, kListStrategies, diags)) {
          if (seen.insert(*s).second) plugin.device_list_strategy.push_back(*s);
          else diags.warning(item.where(), item.path(), "strategy " + quote(item.scalar()) + " is listed twice");
        }
    } else if (e.key == "deviceIDStrategy") {
      if (auto s = parse_choice(e.value, kIdStrategies, diags)) plugin.device_id_strategy = *s;
    } else if (e.key == "cdiAnnotationPrefix") read_string(e.value, plugin.cdi_annotation_prefix, diags);
    else if (e.key == "nvidiaCTKPath") read_string(e.value, plugin.nvidia_ctk_path, diags);
    else if (e.key == "containerDriverRoot") read_string(e.value, plugin.container_driver_root, diags);
    else if (auto p = parse_choice(e.value, kPolicies, diags)) plugin.shared_allocation_policy = *p;
  }
}

void parse_flags(const YamlNode& node, DevicePluginConfig& config, Diagnostics& diags) {
  if (!expect_map(node, diags)) return;
  for (const auto& e : node.checked_entries(diags, {"migStrategy", "failOnInitError", "mpsRoot", "nvidiaDriverRoot",
                                                    "nvidiaDevRoot", "gdrcopyEnabled", "gdsEnabled", "mofedEnabled",
                                                    "useNodeFeatureAPI", "deviceDiscoveryStrategy", "plugin", "gfd"},
                                            kStructKeys)) {
    if (e.value.is_null()) continue;  // the default
    if (e.key == "migStrategy") {
      if (auto s = parse_choice(e.value, kMigStrategies, diags)) config.mig_strategy = *s;
    } else if (e.key == "failOnInitError") read_bool(e.value, config.fail_on_init_error, diags);
    else if (e.key == "mpsRoot") read_string(e.value, config.mps_root, diags);
    else if (e.key == "nvidiaDriverRoot") read_string(e.value, config.nvidia_driver_root, diags);
    else if (e.key == "nvidiaDevRoot") read_string(e.value, config.nvidia_dev_root, diags);
    else if (e.key == "gdrcopyEnabled") read_bool(e.value, config.gdrcopy_enabled, diags);
    else if (e.key == "gdsEnabled") read_bool(e.value, config.gds_enabled, diags);
    else if (e.key == "mofedEnabled") read_bool(e.value, config.mofed_enabled, diags);
    else if (e.key == "useNodeFeatureAPI") { bool ignored = false; read_bool(e.value, ignored, diags); }
    else if (e.key == "deviceDiscoveryStrategy") {
      std::string s = "auto";
      read_string(e.value, s, diags);
      if (s == "tegra")
        diags.warning(e.value.where(), e.value.path(), "'tegra' is not supported by tessera; it discovers GPUs through NVML");
      else if (s != "auto" && s != "nvml")
        diags.error(e.value.where(), e.value.path(), "got " + quote(s) + " (allowed: auto, nvml, tegra)");
    } else if (e.key == "plugin") parse_plugin(e.value, config.plugin, diags);
    else parse_gfd(e.value, diags);  // feature-discovery settings: checked, not used
  }
}

// google/uuid.Parse: 36 characters with dashes, 32 hex digits, {36} or urn:uuid:36.
bool is_uuid(std::string_view s) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); };
  if (s.size() == 32) return std::all_of(s.begin(), s.end(), hex);
  if (s.size() == 38) {
    if (s.front() != '{' || s.back() != '}') return false;
    s = s.substr(1, 36);
  } else if (s.size() == 45) {
    std::string prefix(s.substr(0, 9));
    for (auto& c : prefix) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (prefix != "urn:uuid:") return false;
    s.remove_prefix(9);
  }
  if (s.size() != 36) return false;
  for (size_t i = 0; i < 36; ++i) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !hex(s[i])) return false;
  }
  return true;
}

// strconv.ParseUint(s, 10, 64)
bool is_decimal_uint(std::string_view s) {
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  return !s.empty() && ec == std::errc() && ptr == s.data() + s.size();
}

// A GPU index, a "gpu:mig" index, GPU-<uuid>, MIG-<uuid> or MIG-GPU-<uuid>/<gi>/<ci> (replicas.go).
bool is_device_ref(std::string_view id) {
  if (is_decimal_uint(id)) return true;
  if (auto colon = id.find(':'); colon != std::string_view::npos && is_decimal_uint(id.substr(0, colon)) &&
                                 is_decimal_uint(id.substr(colon + 1)))
    return true;
  if (id.rfind("GPU-", 0) == 0) return is_uuid(id.substr(4));
  if (id.rfind("MIG-", 0) != 0) return false;
  std::string_view suffix = id.substr(4);
  if (is_uuid(suffix)) return true;
  auto first = suffix.find('/');
  if (first == std::string_view::npos) return false;
  auto second = suffix.find('/', first + 1);
  if (second == std::string_view::npos) return false;
  std::string_view gpu = suffix.substr(0, first);
  return gpu.rfind("GPU-", 0) == 0 && is_uuid(gpu.substr(4)) &&
         is_decimal_uint(suffix.substr(first + 1, second - first - 1)) && is_decimal_uint(suffix.substr(second + 1));
}

void parse_devices(const YamlNode& node, ReplicatedDevices& devices, Diagnostics& diags) {
  const std::string expected = "expected 'all', a device count, or a list of GPU indices, 'gpu:mig' indices or UUIDs; got ";
  if (node.is_scalar() && !node.is_null()) {
    auto kind = node.yaml11_kind();
    if (kind == ScalarKind::string) {
      if (node.scalar() == "all") return;  // quoted or not
      diags.error(node.where(), node.path(), expected + node.kind_name());
      return;
    }
    if (auto n = yaml11_integer(node.scalar()); n && (kind == ScalarKind::integer || kind == ScalarKind::floating)) {
      if (*n <= 0) {
        diags.error(node.where(), node.path(), "a count of devices must be > 0, got " + std::to_string(*n));
        return;
      }
      devices.all = false;
      devices.count = static_cast<uint32_t>(std::min<int64_t>(*n, UINT32_MAX));
      return;
    }
  }
  if (!node.is_sequence()) {
    diags.error(node.where(), node.path(), expected + node.kind_name());
    return;
  }
  devices.all = false;
  if (node.items().empty()) diags.warning(node.where(), node.path(), "the list is empty: this resource covers no device");
  std::set<std::string> seen;
  for (const auto& item : node.items()) {
    std::string id;
    if (item.is_null()) {
      id = "0";  // JSON null leaves Go's uint64 at 0
      diags.warning(item.where(), item.path(), "an empty item reads as GPU index 0");
    } else if (!item.is_scalar()) {
      diags.error(item.where(), item.path(), "expected a device id, got " + item.kind_name());
      continue;
    } else if (item.yaml11_kind() == ScalarKind::string) {
      id = item.scalar();
      if (!is_device_ref(id)) {
        diags.error(item.where(), item.path(), quote(id) + " is not a device id (GPU index, 'gpu:mig' index, GPU-<uuid> or MIG-<uuid>)");
        continue;
      }
    } else {
      auto n = yaml11_integer(item.scalar());
      if (!n || *n < 0) {
        diags.error(item.where(), item.path(), quote(item.scalar()) + " is not a device id (GPU index, 'gpu:mig' index, GPU-<uuid> or MIG-<uuid>)");
        continue;
      }
      id = std::to_string(*n);
    }
    if (!seen.insert(id).second) {
      diags.warning(item.where(), item.path(), "device " + quote(id) + " is listed twice");
      continue;
    }
    devices.ids.push_back(id);
  }
}

std::optional<ReplicatedResource> parse_resource(const YamlNode& node, bool mps, Diagnostics& diags) {
  if (!node.is_map()) {
    diags.error(node.where(), node.path(), "expected a map with name and replicas, got " + node.kind_name());
    return std::nullopt;
  }
  size_t before = diags.error_count();
  ReplicatedResource r;
  r.where = node.where();
  bool has_name = false, has_replicas = false;
  for (const auto& e : node.checked_entries(diags, {"name", "replicas", "rename", "devices"}, kExactKeys)) {
    if (e.key == "name" || e.key == "rename") {
      if (e.key == "name") has_name = true;
      auto s = e.value.is_null() ? std::optional<std::string>("") : e.value.as_yaml11_string(diags);
      if (!s) continue;
      std::string why;
      auto n = normalise_resource_name(*s, why);
      if (!n) { diags.error(e.value.where(), e.value.path(), why); continue; }
      if (e.key == "name") r.name = *n;
      else r.rename = *n;
    } else if (e.key == "replicas") {
      has_replicas = true;
      int64_t max = mps ? kMaxMpsReplicas : kMaxTimeSlicingReplicas;
      if (e.value.is_null()) {  // JSON null leaves Go's int at 0
        diags.error(e.value.where(), e.value.path(), "expected an integer >= 2, got nothing");
        continue;
      }
      auto v = e.value.as_yaml11_int(diags, 2, max);
      if (v) r.replicas = static_cast<uint32_t>(*v);
    } else {
      parse_devices(e.value, r.devices, diags);
    }
  }
  if (!has_name) diags.error(r.where, node.path(), "missing required field 'name' (for example nvidia.com/gpu)");
  if (!has_replicas) diags.error(r.where, node.path(), "missing required field 'replicas' (an integer >= 2)");
  if (!r.rename.empty() && r.rename == r.name)
    diags.warning(r.where, node.path() + ".rename", "rename is the same as name: it changes nothing");
  if (diags.error_count() != before) return std::nullopt;
  return r;
}

// timeSlicing or mps: a value NVIDIA always unmarshals when its key is present.
std::optional<SharingSpec> parse_sharing_spec(const YamlNode& node, bool mps, Diagnostics& diags) {
  SharingSpec spec;
  spec.fail_requests_greater_than_one = mps;  // NVIDIA: true for MPS, false for time-slicing
  const std::string no_resources = "no resources specified (expected resources: a non-empty list)";
  if (node.is_null()) {
    diags.error(node.where(), node.path(), no_resources);
    return std::nullopt;
  }
  if (!node.is_map()) {
    diags.error(node.where(), node.path(), "expected a map with resources, got " + node.kind_name());
    return std::nullopt;
  }
  size_t before = diags.error_count();
  bool has_resources = false;
  for (const auto& e : node.checked_entries(diags, {"renameByDefault", "failRequestsGreaterThanOne", "resources"}, kExactKeys)) {
    if (e.key == "renameByDefault") read_bool(e.value, spec.rename_by_default, diags);
    else if (e.key == "failRequestsGreaterThanOne") read_bool(e.value, spec.fail_requests_greater_than_one, diags);
    else {
      has_resources = true;
      if (e.value.is_null() || (e.value.is_sequence() && e.value.items().empty())) {
        diags.error(e.value.where(), e.value.path(), "no resources specified (the list is empty)");
        continue;
      }
      if (!e.value.is_sequence()) {
        diags.error(e.value.where(), e.value.path(), "expected a list of resources, got " + e.value.kind_name());
        continue;
      }
      std::set<std::string> names;
      for (const auto& item : e.value.items()) {
        auto r = parse_resource(item, mps, diags);
        if (!r) continue;
        // The same resource twice: tessera shares each device by the first entry that selects it.
        if (r->devices.all && !names.insert(r->name).second)
          diags.warning(r->where, item.path() + ".name",
                        "resource " + quote(r->name) + " is listed twice; the first entry that selects a device applies");
        spec.resources.push_back(std::move(*r));
      }
    }
  }
  if (!has_resources) diags.error(node.where(), node.path(), no_resources);
  if (diags.error_count() != before) return std::nullopt;
  return spec;
}

void parse_imex(const YamlNode& node, Diagnostics& diags) {
  if (!expect_map(node, diags)) return;
  for (const auto& e : node.checked_entries(diags, {"channelIDs", "required"}, kStructKeys)) {
    if (e.value.is_null()) continue;
    if (e.key == "required") {
      (void)e.value.as_yaml11_bool(diags);
      continue;
    }
    if (!e.value.is_sequence()) {
      diags.error(e.value.where(), e.value.path(), "expected a list of channel ids, got " + e.value.kind_name());
      continue;
    }
    std::vector<int64_t> ids;
    bool ok = true;
    for (const auto& item : e.value.items()) {
      if (item.is_null()) { ids.push_back(0); continue; }
      auto v = item.as_yaml11_int(diags, INT64_MIN, INT64_MAX);
      if (v) ids.push_back(*v);
      else ok = false;
    }
    if (!ok || ids.empty() || (ids.size() == 1 && ids[0] == 0)) continue;
    std::string found;
    for (auto id : ids) found += (found.empty() ? "" : " ") + std::to_string(id);
    diags.error(e.value.where(), e.value.path(), "channelIDs must be [] or [0]; found [" + found + "]");
  }
}

// resources: NVIDIA's naming hooks ({gpus, mig}: [{pattern, name}]); checked, then not used (NVIDIA's plugin drops them too).
void parse_resources(const YamlNode& node, Diagnostics& diags) {
  if (!expect_map(node, diags)) return;
  for (const auto& e : node.checked_entries(diags, {"gpus", "mig"}, kStructKeys)) {
    if (e.value.is_null()) continue;
    if (!e.value.is_sequence()) {
      diags.error(e.value.where(), e.value.path(), "expected a list of {pattern, name}, got " + e.value.kind_name());
      continue;
    }
    for (const auto& item : e.value.items()) {
      if (!item.is_map()) {
        diags.error(item.where(), item.path(), "expected a map with pattern and name, got " + item.kind_name());
        continue;
      }
      bool has_pattern = false, has_name = false;
      for (const auto& f : item.checked_entries(diags, {"pattern", "name"}, kExactKeys)) {
        if (f.key == "pattern") {
          has_pattern = true;
          if (!f.value.is_null()) (void)f.value.as_yaml11_string(diags);
        } else {
          has_name = true;
          auto s = f.value.is_null() ? std::optional<std::string>("") : f.value.as_yaml11_string(diags);
          std::string why;
          if (s && !normalise_resource_name(*s, why)) diags.error(f.value.where(), f.value.path(), why);
        }
      }
      if (!has_pattern) diags.error(item.where(), item.path(), "missing required field 'pattern'");
      if (!has_name) diags.error(item.where(), item.path(), "missing required field 'name'");
    }
  }
}

}  // namespace

std::string_view to_string(MigStrategy s) {
  for (const auto& c : kMigStrategies)
    if (c.value == s) return c.name;
  return "?";
}
std::string_view to_string(DeviceListStrategy s) {
  for (const auto& c : kListStrategies)
    if (c.value == s) return c.name;
  return "?";
}
std::optional<DeviceListStrategy> device_list_strategy_named(std::string_view name) {
  for (const auto& c : kListStrategies)
    if (c.name == name) return c.value;
  return std::nullopt;
}
std::vector<std::string> device_list_strategy_names() {
  std::vector<std::string> out;
  for (const auto& c : kListStrategies) out.emplace_back(c.name);
  return out;
}
std::string_view to_string(DeviceIdStrategy s) {
  for (const auto& c : kIdStrategies)
    if (c.value == s) return c.name;
  return "?";
}

const SharingSpec* DevicePluginConfig::sharing() const {
  if (mps && !mps->resources.empty()) return &*mps;
  if (time_slicing && !time_slicing->resources.empty()) return &*time_slicing;
  return nullptr;
}

std::optional<std::string> normalise_resource_name(std::string_view name, std::string& why) {
  // NVIDIA's NewResourceName: nvidia.com/ is always the domain, the whole name is at
  // most 63 characters, and the rest is a lower-case DNS subdomain (RFC 1123).
  constexpr std::string_view kPrefix = "nvidia.com/";
  std::string full(name);
  if (full.rfind(kPrefix, 0) != 0) full = std::string(kPrefix) + full;
  static const std::regex re(R"(^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$)");
  std::string rest = full.substr(kPrefix.size());
  if (name.find('/') != std::string_view::npos && std::string_view(name).rfind(kPrefix, 0) != 0) {
    why = quote(name) + " is not an nvidia.com/ resource (NVIDIA's plugin reads it as '" + excerpt(full) +
          "', which is not a valid name)";
    return std::nullopt;
  }
  if (full.size() > 63) {
    why = quote(full) + " is longer than 63 characters";
    return std::nullopt;
  }
  if (!std::regex_match(rest, re)) {
    why = quote(name) + " is not a valid resource name (nvidia.com/<name>, name of lower-case letters, digits, '-' and '.')";
    return std::nullopt;
  }
  return full;
}

std::optional<DevicePluginConfig> parse_device_plugin_config(std::string_view text, const std::string& file,
                                                             Diagnostics& diags) {
  auto doc = YamlDocument::parse(text, DocumentContext{file, 0, 0}, diags);
  if (diags.has_errors()) return std::nullopt;
  YamlNode root = doc->root();
  DevicePluginConfig config;
  config.file = file;
  if (root.is_null()) {
    // NVIDIA's plugin reads an empty file as `version: v1`: every default.
    diags.warning({file, 0, 0}, "", "file is empty; expected a device-plugin config (version: v1, flags: ..., sharing: ...)");
    config.nvidia_dev_root = config.nvidia_driver_root;
    return config;
  }
  if (!root.is_map()) {
    diags.error(root.where(), "", "expected a device-plugin config (a map with version, flags, sharing), got " + root.kind_name());
    return std::nullopt;
  }
  for (const auto& e : root.entries())
    if (e.key == "mig-configs") {
      // The other file a GPU node has: not a device-plugin config at all.
      diags.error(e.value.where(), "mig-configs",
                  "this is a mig-parted config (MIG layouts), not a device-plugin config: check it with "
                  "`tessera mig validate -f " + file + "`");
      return std::nullopt;
    }
  size_t before = diags.error_count();
  for (const auto& e : root.checked_entries(diags, {"version", "flags", "sharing", "resources", "imex"}, kStructKeys)) {
    if (e.key == "version") {
      // A missing, empty or null version means v1; a scalar of any kind is read as its text.
      if (e.value.is_null()) continue;
      auto v = e.value.as_string(diags);
      if (v && !v->empty() && *v != "v1") diags.error(e.value.where(), "version", "unknown version " + quote(*v) + " (allowed: v1)");
    } else if (e.key == "flags") {
      parse_flags(e.value, config, diags);
    } else if (e.key == "sharing") {
      if (!expect_map(e.value, diags)) continue;
      for (const auto& s : e.value.checked_entries(diags, {"timeSlicing", "mps"}, kStructKeys)) {
        bool mps = s.key == "mps";
        if (mps && s.value.is_null()) continue;  // a nil pointer: no MPS
        auto spec = parse_sharing_spec(s.value, mps, diags);
        if (mps) config.mps = spec; else config.time_slicing = spec;
      }
    } else if (e.key == "imex") {
      parse_imex(e.value, diags);
    } else {
      parse_resources(e.value, diags);
    }
  }
  if (config.time_slicing && config.mps && !config.time_slicing->resources.empty() && !config.mps->resources.empty())
    diags.warning(root.where(), "sharing", "timeSlicing and mps are both configured; mps is used and timeSlicing ignored (as NVIDIA's plugin does)");
  if (config.uses_mps()) {
    if (config.mps_root.empty())
      diags.error(root.where(), "flags.mpsRoot", "MPS needs mpsRoot, a directory for the MPS daemons (for example /run/nvidia/mps)");
    if (config.mig_strategy == MigStrategy::mixed)
      diags.note(root.where(), "flags.migStrategy",
                 "NVIDIA's plugin refuses migStrategy mixed with MPS; tessera's shares MIG devices with MPS");
  }
  // Names that are valid but match no resource the plugin advertises: nothing is shared by them.
  const std::pair<const char*, const std::optional<SharingSpec>*> modes[] = {{"timeSlicing", &config.time_slicing},
                                                                             {"mps", &config.mps}};
  for (const auto& [mode, spec] : modes) {
    if (!*spec) continue;
    for (size_t i = 0; i < (*spec)->resources.size(); ++i) {
      const auto& r = (*spec)->resources[i];
      std::string field = std::string("sharing.") + mode + ".resources[" + std::to_string(i) + "].name";
      if (r.name.rfind("nvidia.com/mig-", 0) == 0) {
        if (config.mig_strategy != MigStrategy::mixed)
          diags.warning(r.where, field, quote(r.name) + " matches no resource unless migStrategy is mixed; nothing is shared by it");
      } else if (r.name != "nvidia.com/gpu") {
        diags.warning(r.where, field, quote(r.name) + " matches no GPU or MIG resource (nvidia.com/gpu or nvidia.com/mig-<profile>); nothing is shared by it");
      }
    }
  }
  if (config.nvidia_dev_root.empty()) config.nvidia_dev_root = config.nvidia_driver_root;
  if (diags.error_count() != before) return std::nullopt;
  return config;
}

namespace {

// The number of YAML documents in `text` (lines "---" that start one after
// content, plus the first).
size_t document_count(std::string_view text) {
  size_t docs = 0;
  bool content = false;
  for (size_t s = 0; s <= text.size();) {
    size_t e = text.find('\n', s);
    if (e == std::string_view::npos) e = text.size();
    std::string_view line = text.substr(s, e - s);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const bool marker = line == "---" || line.starts_with("--- ");
    const bool blank = line.find_first_not_of(" \t") == std::string_view::npos || line.starts_with("#");
    if (marker) {
      if (content) ++docs;
      content = false;
    } else if (!blank) {
      content = true;
    }
    s = e + 1;
  }
  return docs + (content ? 1 : 0);
}

}  // namespace

std::vector<DevicePluginConfig> validate_device_plugin_file(const std::string& path, Diagnostics& diags) {
  std::vector<DevicePluginConfig> out;
  auto text = read_config_file(path, diags);
  if (!text) return out;
  const std::string file = path == "-" ? "<stdin>" : path;
  const SourceLocation top{file, 0, 0};
  if (const size_t docs = document_count(*text); docs > 1) {
    diags.error(top, "", "the file holds " + std::to_string(docs) +
                             " YAML documents; a device-plugin config is one (NVIDIA's plugin reads only the first)");
    return out;
  }
  Diagnostics probe;
  auto doc = YamlDocument::parse(*text, DocumentContext{file, 0, 0}, probe);
  if (!probe.has_errors()) {
    const YamlNode root = doc->root();
    if (root.is_null()) {
      diags.error(top, "", "the file is empty: expected a device-plugin config (version: v1, flags: ..., sharing: ...); "
                           "NVIDIA's plugin would run with every default");
      return out;
    }
    if (root.is_map()) {
      std::string kind, api;
      bool known = false, mig = false;
      const std::set<std::string> fields = {"version", "flags", "sharing", "resources", "imex"};
      for (const auto& e : root.entries()) {
        if (e.key == "kind" && e.value.is_scalar()) kind = e.value.scalar();
        if (e.key == "apiVersion" && e.value.is_scalar()) api = e.value.scalar();
        known = known || fields.contains(e.key);
        mig = mig || e.key == "mig-configs";
      }
      if (kind == "ConfigMap") {
        SourceLocation data = root.where();
        for (const auto& e : root.entries()) {
          if (e.key != "data") continue;
          data = e.value.where();
          for (const auto& d : e.value.entries()) {
            const std::string name = file + ":data." + d.key;
            if (!d.value.is_scalar()) {
              diags.error(d.value.where(), "data." + d.key, "a ConfigMap's data value must be a string (the config's text)");
              continue;
            }
            if (auto c = parse_device_plugin_config(d.value.scalar(), name, diags)) out.push_back(std::move(*c));
          }
        }
        if (out.empty() && !diags.has_errors())
          diags.error(data, "data", "the ConfigMap holds no config under data (the GPU Operator's holds one key per "
                                            "config, e.g. data.default)");
        return out;
      }
      if (!kind.empty() && !known) {
        diags.error(root.where(), "kind", "this is a Kubernetes " + kind + (api.empty() ? "" : " (" + api + ")") +
                                              ", not a device-plugin config or a ConfigMap holding one");
        return out;
      }
      if (!known && !mig) {
        std::string keys;
        for (const auto& e : root.entries()) keys += (keys.empty() ? "" : ", ") + e.key;
        diags.error(root.where(), "", "none of a device-plugin config's fields (version, flags, sharing, resources) is here "
                                      "(it has " + keys + "): this is not a device-plugin config");
        return out;
      }
    }
  }
  if (auto c = parse_device_plugin_config(*text, file, diags)) out.push_back(std::move(*c));
  return out;
}

std::optional<DevicePluginConfig> load_device_plugin_config(const std::string& path, Diagnostics& diags) {
  auto text = read_config_file(path, diags);
  if (!text) return std::nullopt;
  return parse_device_plugin_config(*text, path == "-" ? "<stdin>" : path, diags);
}

}  // namespace tessera::config
