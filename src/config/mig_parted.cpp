#include "config/mig_parted.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>

#include "config/yaml_document.hpp"
#include "core/catalog.hpp"

namespace tessera::config {
namespace {

// <g>g.<mem>gb, optionally <c>c. in front and attributes (+me, +gfx, +me.all, -me) after.
const std::regex& profile_pattern() {
  static const std::regex re(R"(^(\d+c\.)?\d+g\.\d+gb((\+[a-z]+(\.[a-z]+)*)|(-me))?$)");
  return re;
}

void parse_devices(const YamlNode& node, MigConfigEntry& entry, Diagnostics& diags) {
  if (node.is_scalar() && !node.is_null()) {
    if (node.scalar() == "all") {
      entry.devices.all = true;
      return;
    }
    diags.error(node.where(), node.path(), "expected 'all' or a list of GPU indices, got " + node.kind_name());
    return;
  }
  if (!node.is_sequence() || node.items().empty()) {
    diags.error(node.where(), node.path(), "expected 'all' or a non-empty list of GPU indices, got " + node.kind_name());
    return;
  }
  entry.devices.all = false;
  std::set<int64_t> seen;
  for (const auto& item : node.items()) {
    auto v = item.as_int(diags, 0, 1023);
    if (!v) continue;
    if (!seen.insert(*v).second) {
      diags.error(item.where(), item.path(), "GPU index " + std::to_string(*v) + " is listed twice");
      continue;
    }
    entry.devices.indices.push_back(static_cast<uint32_t>(*v));
  }
}

void parse_filter_id(const YamlNode& node, MigConfigEntry& entry, Diagnostics& diags) {
  auto s = node.as_string(diags);
  if (!s) return;
  static const std::regex pci_re("^0[xX][0-9A-Fa-f]{8}$");
  auto id = parse_pci_id(*s);
  if (!id || !std::regex_match(*s, pci_re)) {
    diags.error(node.where(), node.path(), "'" + *s + "' is not a PCI device id (expected 8 hex digits such as 0x20B210DE)");
    return;
  }
  entry.device_filter.push_back(*id);
}

void parse_filter(const YamlNode& node, MigConfigEntry& entry, Diagnostics& diags) {
  entry.filter_where = node.where();
  if (node.is_sequence()) {
    if (node.items().empty()) diags.error(node.where(), node.path(), "device-filter is an empty list (omit it to select every GPU)");
    for (const auto& item : node.items()) parse_filter_id(item, entry, diags);
  } else if (node.is_scalar() && !node.is_null()) {
    parse_filter_id(node, entry, diags);
  } else {
    diags.error(node.where(), node.path(), "expected a PCI device id or a list of them, got " + node.kind_name());
  }
}

void parse_mig_devices(const YamlNode& node, MigConfigEntry& entry, Diagnostics& diags) {
  entry.mig_devices_where = node.where();
  if (node.is_null()) return;  // `mig-devices:` with nothing = {}
  if (!node.is_map()) {
    diags.error(node.where(), node.path(), "expected a map of MIG profile to count, got " + node.kind_name());
    return;
  }
  std::set<std::string> seen;
  for (const auto& e : node.entries()) {
    if (!std::regex_match(e.key, profile_pattern())) {
      diags.error(e.key_where, e.value.path(),
                  "'" + e.key + "' is not a MIG profile name (expected <g>g.<mem>gb with optional +me, such as 1g.10gb or 3g.40gb)");
      continue;
    }
    if (!seen.insert(e.key).second) {
      diags.error(e.key_where, e.value.path(), "profile '" + e.key + "' is listed twice");
      continue;
    }
    auto count = e.value.as_int(diags, 0, kMaxMigDeviceCount);
    if (!count) continue;
    entry.mig_devices.push_back({e.key, static_cast<uint32_t>(*count), e.value.where()});
  }
}

std::optional<MigConfigEntry> parse_entry(const YamlNode& node, Diagnostics& diags) {
  if (!node.is_map()) {
    diags.error(node.where(), node.path(), "expected a map with devices, mig-enabled and mig-devices, got " + node.kind_name());
    return std::nullopt;
  }
  MigConfigEntry entry;
  entry.where = node.where();
  entry.field = node.path();
  size_t errors_before = diags.error_count();
  bool has_devices = false, has_enabled = false, has_mig_devices = false;
  for (const auto& e : node.checked_entries(diags, {"device-filter", "devices", "mig-enabled", "mig-devices"})) {
    if (e.key == "device-filter") {
      parse_filter(e.value, entry, diags);
    } else if (e.key == "devices") {
      has_devices = true;
      parse_devices(e.value, entry, diags);
    } else if (e.key == "mig-enabled") {
      has_enabled = true;
      if (auto b = e.value.as_bool(diags)) entry.mig_enabled = *b;
    } else {
      has_mig_devices = true;
      parse_mig_devices(e.value, entry, diags);
    }
  }
  if (!has_devices) diags.error(entry.where, entry.field, "missing required field 'devices' ('all' or a list of GPU indices)");
  if (!has_enabled) diags.error(entry.where, entry.field, "missing required field 'mig-enabled' (true or false)");
  if (has_enabled && entry.mig_enabled && !has_mig_devices)
    diags.error(entry.where, entry.field, "missing field 'mig-devices', required when mig-enabled is true ({} for none)");
  if (has_enabled && !entry.mig_enabled && !entry.mig_devices.empty())
    diags.error(entry.mig_devices_where, entry.field + ".mig-devices", "must be empty when mig-enabled is false");
  if (diags.error_count() != errors_before) return std::nullopt;
  return entry;
}

// A ConfigMap wraps the config as a string under data.<key>: find it, and the
// line and indentation where its text starts in the outer file.
std::optional<std::pair<std::string, DocumentContext>> unwrap_config_map(const YamlNode& root, std::string_view text,
                                                                          const std::string& file, Diagnostics& diags) {
  YamlNode data;
  bool found = false;
  for (const auto& e : root.entries())
    if (e.key == "data") { data = e.value; found = true; }
  if (!found || !data.is_map() || data.entries().empty()) {
    diags.error(root.where(), "data", "ConfigMap has no data entry holding a mig-parted config");
    return std::nullopt;
  }
  auto entries = data.entries();
  auto chosen = std::find_if(entries.begin(), entries.end(), [](const auto& e) { return e.key == "config.yaml"; });
  if (chosen == entries.end()) chosen = entries.begin();
  auto inner = chosen->value.as_string(diags);
  if (!inner) return std::nullopt;
  DocumentContext ctx{file, 0, 0};
  // A block scalar (`config.yaml: |`) starts on the next line; find its indentation there.
  int mark_line = chosen->value.where().line;  // 1-based line of the '|' indicator
  std::istringstream lines{std::string(text)};
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    if (n <= mark_line) continue;
    if (line.find_first_not_of(' ') == std::string::npos) continue;
    ctx.line_offset = mark_line;
    ctx.column_offset = static_cast<int>(line.find_first_not_of(' '));
    break;
  }
  return std::make_pair(*inner, ctx);
}

std::optional<MigPartedConfig> parse_document(const YamlNode& root, const std::string& file, Diagnostics& diags) {
  if (!root.is_map()) {
    diags.error(root.where(), "", "expected a mig-parted config (a map with version and mig-configs), got " + root.kind_name());
    return std::nullopt;
  }
  size_t errors_before = diags.error_count();
  MigPartedConfig config;
  config.file = file;
  bool has_version = false, has_configs = false;
  for (const auto& e : root.checked_entries(diags, {"version", "mig-configs"})) {
    if (e.key == "version") {
      has_version = true;
      auto v = e.value.as_string(diags);
      if (v && *v != "v1") diags.error(e.value.where(), "version", "unknown version '" + *v + "' (allowed: v1)");
      continue;
    }
    has_configs = true;
    if (!e.value.is_map() || e.value.entries().empty()) {
      diags.error(e.value.where(), "mig-configs", "expected a map of named MIG configs, got " + e.value.kind_name());
      continue;
    }
    std::set<std::string> names;
    for (const auto& c : e.value.entries()) {
      if (!names.insert(c.key).second) {
        diags.error(c.key_where, c.value.path(), "duplicate config name '" + c.key + "'");
        continue;
      }
      if (c.key.empty()) {
        diags.error(c.key_where, "mig-configs", "config name is empty");
        continue;
      }
      if (!c.value.is_sequence() || c.value.items().empty()) {
        diags.error(c.value.where(), c.value.path(), "expected a non-empty list of entries, got " + c.value.kind_name());
        continue;
      }
      MigConfig mc{c.key, c.key_where, {}};
      for (const auto& item : c.value.items())
        if (auto entry = parse_entry(item, diags)) mc.entries.push_back(std::move(*entry));
      config.configs.push_back(std::move(mc));
    }
  }
  if (!has_version) diags.error(root.where(), "version", "missing required field 'version' (allowed: v1)");
  if (!has_configs) diags.error(root.where(), "mig-configs", "missing required field 'mig-configs'");
  if (diags.error_count() != errors_before) return std::nullopt;
  return config;
}

}  // namespace

bool DeviceSelector::selects(uint32_t index) const {
  return all || std::find(indices.begin(), indices.end(), index) != indices.end();
}

const MigConfig* MigPartedConfig::find(std::string_view name) const {
  for (const auto& c : configs)
    if (c.name == name) return &c;
  return nullptr;
}

std::optional<MigPartedConfig> parse_mig_parted(std::string_view text, const std::string& file, Diagnostics& diags) {
  auto doc = YamlDocument::parse(text, DocumentContext{file, 0, 0}, diags);
  if (diags.has_errors()) return std::nullopt;
  YamlNode root = doc->root();
  if (root.is_null()) {
    diags.error({file, 0, 0}, "", "file is empty; expected a mig-parted config (version: v1, mig-configs: ...)");
    return std::nullopt;
  }
  bool is_config_map = false;
  for (const auto& e : root.entries())
    if (e.key == "kind" && e.value.scalar() == "ConfigMap") is_config_map = true;
  if (!is_config_map) return parse_document(root, file, diags);

  auto inner = unwrap_config_map(root, text, file, diags);
  if (!inner) return std::nullopt;
  auto inner_doc = YamlDocument::parse(inner->first, inner->second, diags);
  if (diags.has_errors()) return std::nullopt;
  return parse_document(inner_doc->root(), file, diags);
}

std::optional<std::string> read_config_file(const std::string& path, Diagnostics& diags) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      diags.error({path, 0, 0}, "", "is a directory; expected a config file");
      return std::nullopt;
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      diags.error({path, 0, 0}, "", "cannot open file");
      return std::nullopt;
    }
    in.seekg(0, std::ios::end);
    auto size = in.tellg();
    if (size < 0) {
      diags.error({path, 0, 0}, "", "cannot read file (is it a directory?)");
      return std::nullopt;
    }
    if (static_cast<size_t>(size) > kMaxConfigBytes) {
      diags.error({path, 0, 0}, "", "file is too large (" + std::to_string(static_cast<size_t>(size)) +
                                        " bytes; the limit is " + std::to_string(kMaxConfigBytes) + ")");
      return std::nullopt;
    }
    in.seekg(0);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (in.bad()) {
      diags.error({path, 0, 0}, "", "cannot read file");
      return std::nullopt;
    }
  }
  return text;
}

std::optional<MigPartedConfig> load_mig_parted(const std::string& path, Diagnostics& diags) {
  auto text = read_config_file(path, diags);
  if (!text) return std::nullopt;
  return parse_mig_parted(*text, path == "-" ? "<stdin>" : path, diags);
}

}  // namespace tessera::config
