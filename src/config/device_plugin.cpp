#include "config/device_plugin.hpp"

#include <regex>
#include <set>

#include "config/mig_parted.hpp"
#include "config/yaml_document.hpp"

namespace tessera::config {
namespace {

template <class E>
struct Choice {
  std::string_view name;
  E value;
};

template <class E, size_t N>
std::optional<E> parse_choice(const YamlNode& node, const Choice<E> (&choices)[N], Diagnostics& diags) {
  std::string allowed;
  for (const auto& c : choices) allowed += (allowed.empty() ? "" : ", ") + std::string(c.name);
  if (node.is_scalar() && !node.is_null()) {
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

void read_string(const YamlNode& node, std::string& out, Diagnostics& diags) {
  if (auto s = node.as_string(diags)) out = *s;
}
void read_bool(const YamlNode& node, bool& out, Diagnostics& diags) {
  if (auto b = node.as_bool(diags)) out = *b;
}

void parse_plugin(const YamlNode& node, PluginFlags& plugin, Diagnostics& diags) {
  if (!node.is_map()) {
    diags.error(node.where(), node.path(), "expected a map, got " + node.kind_name());
    return;
  }
  for (const auto& e : node.checked_entries(diags, {"passDeviceSpecs", "deviceListStrategy", "deviceIDStrategy",
                                                    "cdiAnnotationPrefix", "nvidiaCTKPath", "containerDriverRoot",
                                                    "sharedDevicesAllocationPolicy"})) {
    if (e.key == "passDeviceSpecs") read_bool(e.value, plugin.pass_device_specs, diags);
    else if (e.key == "deviceListStrategy") {
      plugin.device_list_strategy.clear();
      std::vector<YamlNode> items = e.value.is_sequence() ? e.value.items() : std::vector<YamlNode>{e.value};
      if (items.empty()) diags.error(e.value.where(), e.value.path(), "list is empty (allowed: envvar, volume-mounts, cdi-annotations, cdi-cri)");
      std::set<DeviceListStrategy> seen;
      for (const auto& item : items)
        if (auto s = parse_choice(item, kListStrategies, diags)) {
          if (seen.insert(*s).second) plugin.device_list_strategy.push_back(*s);
          else diags.error(item.where(), item.path(), "strategy '" + item.scalar() + "' is listed twice");
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
  if (!node.is_map()) {
    diags.error(node.where(), node.path(), "expected a map, got " + node.kind_name());
    return;
  }
  for (const auto& e : node.checked_entries(diags, {"migStrategy", "failOnInitError", "mpsRoot", "nvidiaDriverRoot",
                                                    "nvidiaDevRoot", "gdrcopyEnabled", "gdsEnabled", "mofedEnabled",
                                                    "useNodeFeatureAPI", "deviceDiscoveryStrategy", "plugin", "gfd"})) {
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
      std::string s;
      read_string(e.value, s, diags);
      if (!s.empty() && s != "auto" && s != "nvml")
        diags.error(e.value.where(), e.value.path(), "'" + s + "' is not supported by tessera (allowed: auto, nvml)");
    } else if (e.key == "plugin") parse_plugin(e.value, config.plugin, diags);
    else if (!e.value.is_map() && !e.value.is_null())
      diags.error(e.value.where(), e.value.path(), "expected a map, got " + e.value.kind_name());
    // gfd: feature-discovery settings; accepted for compatibility, not used.
  }
}

void parse_devices(const YamlNode& node, ReplicatedDevices& devices, Diagnostics& diags) {
  if (node.is_scalar() && !node.is_null() && !node.is_quoted() && node.scalar() == "all") return;
  if (node.is_scalar() && !node.is_null() && !node.is_quoted()) {
    if (auto n = node.as_int(diags, 1, 1024)) {
      devices.all = false;
      devices.count = static_cast<uint32_t>(*n);
    }
    return;
  }
  if (!node.is_sequence() || node.items().empty()) {
    diags.error(node.where(), node.path(), "expected 'all', a device count, or a list of GPU indices, 'gpu:mig' indices or UUIDs; got " + node.kind_name());
    return;
  }
  static const std::regex id_re(R"(^(\d+|\d+:\d+|GPU-[0-9a-fA-F-]+|MIG-[0-9a-fA-F-]+|MIG-GPU-[0-9a-fA-F-]+/\d+/\d+)$)");
  devices.all = false;
  std::set<std::string> seen;
  for (const auto& item : node.items()) {
    if (!item.is_scalar() || item.is_null()) {
      diags.error(item.where(), item.path(), "expected a device id, got " + item.kind_name());
      continue;
    }
    std::string id = item.scalar();
    if (!std::regex_match(id, id_re)) {
      diags.error(item.where(), item.path(), "'" + id + "' is not a device id (GPU index, 'gpu:mig' index, GPU-<uuid> or MIG-<uuid>)");
      continue;
    }
    if (!seen.insert(id).second) {
      diags.error(item.where(), item.path(), "device '" + id + "' is listed twice");
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
  for (const auto& e : node.checked_entries(diags, {"name", "replicas", "rename", "devices"})) {
    if (e.key == "name" || e.key == "rename") {
      auto s = e.value.as_string(diags);
      if (!s) continue;
      std::string why;
      auto n = normalise_resource_name(*s, why);
      if (!n) { diags.error(e.value.where(), e.value.path(), why); continue; }
      if (e.key == "name") { r.name = *n; has_name = true; }
      else r.rename = *n;
    } else if (e.key == "replicas") {
      has_replicas = true;
      int64_t max = mps ? kMaxMpsReplicas : kMaxTimeSlicingReplicas;
      auto v = e.value.as_int(diags, 2, max);
      if (v) r.replicas = static_cast<uint32_t>(*v);
    } else {
      parse_devices(e.value, r.devices, diags);
    }
  }
  if (!has_name) diags.error(r.where, node.path(), "missing required field 'name' (for example nvidia.com/gpu)");
  if (!has_replicas) diags.error(r.where, node.path(), "missing required field 'replicas' (an integer >= 2)");
  if (has_name && r.name != "nvidia.com/gpu" && r.name.rfind("nvidia.com/mig-", 0) != 0)
    diags.error(r.where, node.path() + ".name", "'" + r.name + "' cannot be shared (allowed: nvidia.com/gpu or nvidia.com/mig-<profile>)");
  if (mps && r.rename.size() > 0 && r.rename == r.name)
    diags.error(r.where, node.path() + ".rename", "rename must differ from name");
  if (diags.error_count() != before) return std::nullopt;
  return r;
}

std::optional<SharingSpec> parse_sharing_spec(const YamlNode& node, bool mps, Diagnostics& diags) {
  SharingSpec spec;
  spec.fail_requests_greater_than_one = mps;  // NVIDIA: true for MPS, false for time-slicing
  if (node.is_null()) return spec;
  if (!node.is_map()) {
    diags.error(node.where(), node.path(), "expected a map with resources, got " + node.kind_name());
    return std::nullopt;
  }
  for (const auto& e : node.checked_entries(diags, {"renameByDefault", "failRequestsGreaterThanOne", "resources"})) {
    if (e.key == "renameByDefault") read_bool(e.value, spec.rename_by_default, diags);
    else if (e.key == "failRequestsGreaterThanOne") read_bool(e.value, spec.fail_requests_greater_than_one, diags);
    else {
      if (!e.value.is_sequence()) {
        diags.error(e.value.where(), e.value.path(), "expected a list of resources, got " + e.value.kind_name());
        continue;
      }
      std::set<std::string> names;
      for (const auto& item : e.value.items()) {
        auto r = parse_resource(item, mps, diags);
        if (!r) continue;
        // The same resource twice is fine only when the entries cover different devices.
        std::string key = r->name + (r->devices.all ? std::string("#all") : "");
        if (r->devices.all && !names.insert(key).second) {
          diags.error(r->where, item.path() + ".name", "resource '" + r->name + "' is listed twice");
          continue;
        }
        spec.resources.push_back(std::move(*r));
      }
    }
  }
  return spec;
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
  std::string full(name);
  if (full.find('/') == std::string::npos) full = "nvidia.com/" + full;
  static const std::regex re(R"(^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$)");
  auto slash = full.find('/');
  if (!std::regex_match(full, re) || full.size() - slash - 1 > 63) {
    why = "'" + std::string(name) + "' is not a valid resource name (domain/name, name up to 63 characters of letters, digits, '-', '_', '.')";
    return std::nullopt;
  }
  return full;
}

std::optional<DevicePluginConfig> parse_device_plugin_config(std::string_view text, const std::string& file,
                                                             Diagnostics& diags) {
  auto doc = YamlDocument::parse(text, DocumentContext{file, 0, 0}, diags);
  if (diags.has_errors()) return std::nullopt;
  YamlNode root = doc->root();
  if (root.is_null()) {
    diags.error({file, 0, 0}, "", "file is empty; expected a device-plugin config (version: v1, flags: ..., sharing: ...)");
    return std::nullopt;
  }
  if (!root.is_map()) {
    diags.error(root.where(), "", "expected a device-plugin config (a map with version, flags, sharing), got " + root.kind_name());
    return std::nullopt;
  }
  size_t before = diags.error_count();
  DevicePluginConfig config;
  config.file = file;
  bool has_version = false;
  for (const auto& e : root.checked_entries(diags, {"version", "flags", "sharing", "resources", "imex"})) {
    if (e.key == "version") {
      has_version = true;
      auto v = e.value.as_string(diags);
      if (v && *v != "v1") diags.error(e.value.where(), "version", "unknown version '" + *v + "' (allowed: v1)");
    } else if (e.key == "flags") {
      parse_flags(e.value, config, diags);
    } else if (e.key == "sharing") {
      if (e.value.is_null()) continue;
      if (!e.value.is_map()) {
        diags.error(e.value.where(), "sharing", "expected a map with timeSlicing or mps, got " + e.value.kind_name());
        continue;
      }
      for (const auto& s : e.value.checked_entries(diags, {"timeSlicing", "mps"})) {
        bool mps = s.key == "mps";
        auto spec = parse_sharing_spec(s.value, mps, diags);
        if (mps) config.mps = spec; else config.time_slicing = spec;
      }
    } else if (!e.value.is_map() && !e.value.is_null()) {
      diags.error(e.value.where(), e.key, "expected a map, got " + e.value.kind_name());
    }
    // resources / imex: NVIDIA's customisation hooks; accepted, not used.
  }
  if (!has_version) diags.error(root.where(), "version", "missing required field 'version' (allowed: v1)");
  if (config.time_slicing && config.mps && !config.time_slicing->resources.empty() && !config.mps->resources.empty())
    diags.error(root.where(), "sharing", "timeSlicing and mps cannot both be configured (NVIDIA's plugin applies one sharing mode per node)");
  if (config.uses_mps())
    for (const auto& r : config.mps->resources)
      if (r.name.rfind("nvidia.com/mig-", 0) == 0 && config.mig_strategy == MigStrategy::none)
        diags.error(r.where, "sharing.mps", "'" + r.name + "' needs migStrategy mixed");
  if (config.nvidia_dev_root.empty()) config.nvidia_dev_root = config.nvidia_driver_root;
  if (diags.error_count() != before) return std::nullopt;
  return config;
}

std::optional<DevicePluginConfig> load_device_plugin_config(const std::string& path, Diagnostics& diags) {
  auto text = read_config_file(path, diags);
  if (!text) return std::nullopt;
  return parse_device_plugin_config(*text, path == "-" ? "<stdin>" : path, diags);
}

}  // namespace tessera::config
