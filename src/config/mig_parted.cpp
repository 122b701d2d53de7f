#include "config/mig_parted.hpp"

#include <algorithm>
#include <charconv>
#include <climits>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "config/yaml_document.hpp"
#include "core/catalog.hpp"
#include "core/file_read.hpp"
#include "core/text.hpp"

namespace tessera::config {
namespace {

// Duplicate keys: yaml.v2 (non-strict, as NVIDIA's readers use it) keeps the last.
const KeyRules kNvidiaKeys{.unknown_is_error = true, .duplicates_are_errors = false, .ignore_case = false};

// Go's strconv.ParseUint(s, 0, 32): as ParseInt, without a sign.
std::optional<uint32_t> parse_go_uint32(std::string_view s) {
  if (s.empty() || s[0] == '+' || s[0] == '-') return std::nullopt;
  int64_t v = 0;
  bool overflow = false;
  if (!go_parse_int(s, v, overflow) || v > static_cast<int64_t>(UINT32_MAX)) return std::nullopt;
  return static_cast<uint32_t>(v);
}

// go-nvlib parseMigProfileField: "<n><suffix>", n a decimal int64 (strconv.Atoi).
std::optional<int64_t> parse_profile_field(std::string_view s, std::string_view suffix, std::string& why) {
  if (s.size() < suffix.size() || s.substr(s.size() - suffix.size()) != suffix) {
    why = "missing '" + std::string(suffix) + "' in " + quote(s);
    return std::nullopt;
  }
  s.remove_suffix(suffix.size());
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 10);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || s[0] == '-') {
    why = "malformed number in " + quote(std::string(s) + std::string(suffix));
    return std::nullopt;
  }
  return v;
}

void parse_devices(const YamlNode& node, MigConfigEntry& entry, Diagnostics& diags) {
  if (node.is_scalar() && !node.is_null() && node.yaml11_kind() == ScalarKind::string) {
    if (node.scalar() == "all") {
      entry.devices.all = true;
      return;
    }
    diags.error(node.where(), node.path(), "expected 'all' or a list of GPU indices, got " + node.kind_name());
    return;
  }
  if (!node.is_sequence()) {
    diags.error(node.where(), node.path(), "expected 'all' or a list of GPU indices, got " + node.kind_name());
    return;
  }
  entry.devices.all = false;
  if (node.items().empty()) {
    diags.warning(node.where(), node.path(), "the list is empty: this entry selects no GPU");
    return;
  }
  std::set<int64_t> seen;
  for (const auto& item : node.items()) {
    int64_t v = 0;
    if (item.is_null()) {
      diags.warning(item.where(), item.path(), "an empty item reads as GPU index 0");
    } else {
      auto parsed = item.as_yaml11_int(diags, INT64_MIN, INT64_MAX);
      if (!parsed) continue;
      v = *parsed;
    }
    if (!seen.insert(v).second) {
      diags.warning(item.where(), item.path(), "GPU index " + std::to_string(v) + " is listed twice");
      continue;
    }
    if (v < 0 || v > static_cast<int64_t>(UINT32_MAX)) {
      diags.warning(item.where(), item.path(), "GPU index " + std::to_string(v) + " selects no GPU");
      continue;
    }
    entry.devices.indices.push_back(static_cast<uint32_t>(v));
  }
}

void parse_filter_id(const YamlNode& node, MigConfigEntry& entry, Diagnostics& diags) {
  auto s = node.as_yaml11_string(diags);
  if (!s) return;
  auto filter = parse_device_filter(*s);
  if (!filter) {
    diags.warning(node.where(), node.path(),
                  quote(*s) + " is not a PCI device id (such as 0x20B210DE or 0x233010DE:0x16C010DE): it matches no GPU");
    return;
  }
  entry.device_filter.push_back(*filter);
}

void parse_filter(const YamlNode& node, MigConfigEntry& entry, Diagnostics& diags) {
  entry.filter_where = node.where();
  if (node.is_null()) return;  // `device-filter:` with nothing = "" = every GPU
  if (node.is_sequence()) {
    entry.has_device_filter = !node.items().empty();
    for (const auto& item : node.items()) parse_filter_id(item, entry, diags);
  } else if (node.is_scalar()) {
    if (node.yaml11_kind() == ScalarKind::string && node.scalar().empty()) return;  // "" = every GPU
    entry.has_device_filter = true;
    parse_filter_id(node, entry, diags);
  } else {
    diags.error(node.where(), node.path(), "expected a PCI device id or a list of them, got " + node.kind_name());
  }
}

void parse_mig_devices(const YamlNode& node, MigConfigEntry& entry, bool& present, Diagnostics& diags) {
  entry.mig_devices_where = node.where();
  if (node.is_null()) return;  // `mig-devices:` with nothing: absent for mig-parted
  if (!node.is_map()) {
    diags.error(node.where(), node.path(), "expected a map of MIG profile to count, got " + node.kind_name());
    return;
  }
  present = true;
  std::vector<MigDeviceCount> counts;
  for (const auto& e : node.entries()) {
    std::string why;
    auto name = parse_mig_profile_name(e.key, &why);
    if (!name) {
      diags.error(e.key_where, e.value.path(),
                  quote(e.key) + " is not a MIG profile name (expected <g>g.<mem>gb with optional +me, such as 1g.10gb or 3g.40gb)");
      continue;
    }
    auto same = std::find_if(counts.begin(), counts.end(), [&](const MigDeviceCount& c) { return c.profile == e.key; });
    int64_t count = 0;
    if (!e.value.is_null()) {
      auto v = e.value.as_yaml11_int(diags, INT64_MIN, INT64_MAX);
      if (!v) continue;
      if (*v < 0) {
        diags.error(e.value.where(), e.value.path(), std::to_string(*v) + " is out of range (allowed: 0 or more)");
        continue;
      }
      count = *v;
    }
    MigDeviceCount c{e.key, name->canonical(),
                     static_cast<uint32_t>(std::min<int64_t>(count, UINT32_MAX)), e.value.where()};
    if (same != counts.end()) {
      diags.warning(e.key_where, e.value.path(), "profile " + quote(e.key) + " is listed twice; the last count is used");
      *same = c;
      continue;
    }
    counts.push_back(c);
  }
  if (!counts.empty() && std::all_of(counts.begin(), counts.end(), [](const MigDeviceCount& c) { return c.count == 0; }))
    diags.error(node.where(), node.path(), "every count is 0 (mig-parted refuses this; write {} for no MIG devices)");
  entry.mig_devices = std::move(counts);
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
  for (const auto& e : node.checked_entries(diags, {"device-filter", "devices", "mig-enabled", "mig-devices"}, kNvidiaKeys)) {
    if (e.key == "device-filter") {
      parse_filter(e.value, entry, diags);
    } else if (e.key == "devices") {
      has_devices = true;
      parse_devices(e.value, entry, diags);
    } else if (e.key == "mig-enabled") {
      has_enabled = true;
      if (e.value.is_null()) entry.mig_enabled = false;  // JSON null leaves Go's false
      else if (auto b = e.value.as_yaml11_bool(diags)) entry.mig_enabled = *b;
    } else {
      parse_mig_devices(e.value, entry, has_mig_devices, diags);
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
  MigPartedConfig config;
  config.file = file;
  if (root.is_null()) {
    // mig-parted's Spec.UnmarshalJSON reads an empty document as a spec whose
    // version is "" and refuses it ("unknown version: ") (api/spec/v1/spec.go).
    diags.error({file, 0, 0}, "",
                "the file is empty: no version and no mig-configs (a mig-parted config needs version: v1 and mig-configs)");
    return std::nullopt;
  }
  if (!root.is_map()) {
    diags.error(root.where(), "", "expected a mig-parted config (a map with version and mig-configs), got " + root.kind_name());
    return std::nullopt;
  }
  size_t errors_before = diags.error_count();
  bool has_version = false, has_configs = false;
  for (const auto& e : root.checked_entries(diags, {"version", "mig-configs"}, kNvidiaKeys)) {
    if (e.key == "version") {
      has_version = true;
      auto v = e.value.as_yaml11_string(diags);
      if (v && *v != "v1") diags.error(e.value.where(), "version", "unknown version " + quote(*v) + " (allowed: v1)");
      continue;
    }
    has_configs = true;
    if (!e.value.is_map() || e.value.entries().empty()) {
      diags.error(e.value.where(), "mig-configs", "expected a map of named MIG configs, got " + e.value.kind_name());
      continue;
    }
    std::map<std::string, size_t> names;  // name -> position in config.configs
    for (const auto& c : e.value.entries()) {
      if (!c.value.is_sequence() || c.value.items().empty()) {
        diags.error(c.value.where(), c.value.path(), "expected a non-empty list of entries, got " + c.value.kind_name());
        continue;
      }
      MigConfig mc{c.key, c.key_where, {}};
      for (const auto& item : c.value.items())
        if (auto entry = parse_entry(item, diags)) mc.entries.push_back(std::move(*entry));
      if (auto it = names.find(c.key); it != names.end()) {
        diags.warning(c.key_where, c.value.path(), "duplicate config name " + quote(c.key) + "; the last one is used");
        config.configs[it->second] = std::move(mc);
        continue;
      }
      names[c.key] = config.configs.size();
      config.configs.push_back(std::move(mc));
    }
  }
  if (!has_version) diags.error(root.where(), "version", "missing required field 'version' (allowed: v1)");
  if (has_version && !has_configs)
    diags.warning(root.where(), "mig-configs", "no field 'mig-configs': the file has no MIG configs");
  if (diags.error_count() != errors_before) return std::nullopt;
  return config;
}

}  // namespace

std::optional<MigProfileName> parse_mig_profile_name(std::string_view text, std::string* why_out) {
  std::string why;
  auto fail = [&](std::string reason) -> std::optional<MigProfileName> {
    if (why_out) *why_out = std::move(reason);
    return std::nullopt;
  };
  if (text.empty()) return fail("profile is the empty string");
  // go-nvlib splits at the first '+' and at the first '-', anywhere in the name.
  size_t plus = text.find('+'), minus = text.find('-');
  if (plus != std::string_view::npos && minus != std::string_view::npos) return fail("it has both '+' and '-' attributes");
  size_t cut = plus != std::string_view::npos ? plus : minus;
  std::string_view fields = text.substr(0, cut);
  MigProfileName out;
  out.negative = minus != std::string_view::npos;
  // SplitN(fields, ".", 3): three parts are <C>c.<G>g.<GB>gb, two <G>g.<GB>gb.
  std::vector<std::string_view> parts;
  std::string_view rest = fields;
  while (parts.size() < 2) {
    size_t dot = rest.find('.');
    if (dot == std::string_view::npos) break;
    parts.push_back(rest.substr(0, dot));
    rest.remove_prefix(dot + 1);
  }
  parts.push_back(rest);
  if (parts.size() == 3) {
    auto c = parse_profile_field(parts[0], "c", why);
    if (!c) return fail(why);
    auto g = parse_profile_field(parts[1], "g", why);
    if (!g) return fail(why);
    auto gb = parse_profile_field(parts[2], "gb", why);
    if (!gb) return fail(why);
    out.c = *c, out.g = *g, out.gb = *gb;
  } else if (parts.size() == 2) {
    auto g = parse_profile_field(parts[0], "g", why);
    if (!g) return fail(why);
    auto gb = parse_profile_field(parts[1], "gb", why);
    if (!gb) return fail(why);
    out.c = *g, out.g = *g, out.gb = *gb;
  } else {
    return fail("expected 2 or 3 dot-separated fields");
  }
  if (cut == std::string_view::npos) return out;
  std::string_view attrs = text.substr(cut + 1);
  std::set<std::string_view> seen;
  while (true) {
    size_t comma = attrs.find(',');
    std::string_view a = attrs.substr(0, comma);
    if (a.empty()) return fail("an attribute is empty");
    if (!seen.insert(a).second) return fail("attribute " + quote(a) + " is repeated");
    if (a[0] >= '0' && a[0] <= '9') return fail("attribute " + quote(a) + " begins with a digit");
    if (a.front() == '.' || a.back() == '.') return fail("attribute " + quote(a) + " begins or ends with a dot");
    for (char ch : a)
      if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.'))
        return fail("attribute " + quote(a) + " has a character other than a letter, digit or dot");
    out.attributes.emplace_back(a);
    if (comma == std::string_view::npos) break;
    attrs.remove_prefix(comma + 1);
  }
  return out;
}

std::string MigProfileName::canonical() const {
  std::string out = c == g ? "" : std::to_string(c) + "c.";
  out += std::to_string(g) + "g." + std::to_string(gb) + "gb";
  for (size_t i = 0; i < attributes.size(); ++i) out += (i ? "," : negative ? "-" : "+") + attributes[i];
  return out;
}

std::optional<DeviceFilter> parse_device_filter(std::string_view text) {
  DeviceFilter f;
  f.text = std::string(text);
  size_t colon = text.find(':');
  if (colon != std::string_view::npos && text.find(':', colon + 1) != std::string_view::npos) return std::nullopt;
  auto id = parse_go_uint32(text.substr(0, colon));
  if (!id) return std::nullopt;
  f.device_id = *id;
  if (colon != std::string_view::npos) {
    auto sub = parse_go_uint32(text.substr(colon + 1));
    if (!sub) return std::nullopt;
    f.subsystem_id = *sub;
  }
  return f;
}

bool DeviceFilter::matches(uint32_t pci_device_id, uint32_t pci_subsystem_id) const {
  return device_id == pci_device_id && (!subsystem_id || *subsystem_id == pci_subsystem_id);
}

bool filter_selects(const MigConfigEntry& entry, uint32_t pci_device_id, uint32_t pci_subsystem_id, const GpuModel* model) {
  if (!entry.has_device_filter) return true;
  return std::any_of(entry.device_filter.begin(), entry.device_filter.end(), [&](const DeviceFilter& f) {
    bool device = f.device_id == pci_device_id || (model && model->matches_pci_id(f.device_id));
    return device && (!f.subsystem_id || *f.subsystem_id == pci_subsystem_id);
  });
}

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
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  // The reason comes from the operating system: "cannot open file: No such file or directory".
  auto text = read_whole_file(path, kMaxConfigBytes);
  if (!text) {
    diags.error({path, 0, 0}, "", text.error().message);
    return std::nullopt;
  }
  return std::move(*text);
}

std::optional<MigPartedConfig> load_mig_parted(const std::string& path, Diagnostics& diags) {
  auto text = read_config_file(path, diags);
  if (!text) return std::nullopt;
  return parse_mig_parted(*text, path == "-" ? "<stdin>" : path, diags);
}

}  // namespace tessera::config
