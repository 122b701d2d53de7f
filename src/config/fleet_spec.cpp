#include "config/fleet_spec.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <set>
#include <sstream>

#include "config/mig_parted.hpp"
#include "config/yaml_document.hpp"
#include "core/units.hpp"
#include "core/text.hpp"

namespace tessera::config {
namespace {

std::optional<double> parse_double(std::string_view text) {
  double v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string format_number(double v) {
  std::ostringstream out;
  out << v;
  return out.str();
}

// A non-negative rate (or share), at most `max`.
std::optional<double> read_number(const YamlNode& node, Diagnostics& diags, double min, double max, bool min_open) {
  auto value = node.is_scalar() && !node.is_quoted() && !node.is_null() ? parse_double(node.scalar()) : std::nullopt;
  if (!value) {
    diags.error(node.where(), node.path(), "expected a number, got " + node.kind_name());
    return std::nullopt;
  }
  bool low = min_open ? *value <= min : *value < min;
  if (low || *value > max) {
    diags.error(node.where(), node.path(), format_number(*value) + " is out of range (allowed: " +
                                               (min_open ? "above " : "") + format_number(min) + " to " +
                                               format_number(max) + ")");
    return std::nullopt;
  }
  return value;
}

std::optional<Isolation> parse_isolation(std::string_view text) {
  if (text == "dedicated") return Isolation::dedicated;
  if (text == "shared") return Isolation::shared;
  if (text == "best-effort") return Isolation::best_effort;
  return std::nullopt;
}

void parse_capacity(const YamlNode& node, ServiceSpec& service, Diagnostics& diags) {
  if (!node.is_map() || node.entries().empty()) {
    diags.error(node.where(), node.path(), "expected a map of MIG profile (or 'gpu') to rate, got " + node.kind_name());
    return;
  }
  std::set<std::string> seen;
  for (const auto& e : node.entries()) {
    if (!seen.insert(e.key).second) {
      diags.error(e.key_where, e.value.path(), "profile " + quote(e.key) + " is listed twice");
      continue;
    }
    if (auto rate = read_number(e.value, diags, 0, kMaxRate, false))
      service.capacity.push_back({e.key, *rate, e.value.where()});
  }
}

std::optional<ServiceSpec> parse_service(const YamlNode& node, Diagnostics& diags) {
  if (!node.is_map()) {
    diags.error(node.where(), node.path(), "expected a service (a map with name, memory, replicas or demand), got " +
                                               node.kind_name());
    return std::nullopt;
  }
  size_t errors_before = diags.error_count();
  ServiceSpec s;
  s.where = node.where();
  s.field = node.path();
  bool has_name = false, has_memory = false;
  SourceLocation demand_where;
  for (const auto& e : node.checked_entries(
           diags, {"name", "memory", "replicas", "demand", "capacity", "isolation", "gpus", "compute"})) {
    const auto& v = e.value;
    if (e.key == "name") {
      has_name = true;
      if (auto n = v.as_string(diags)) {
        if (n->empty()) diags.error(v.where(), v.path(), "service name is empty");
        s.name = *n;
      }
    } else if (e.key == "memory") {
      has_memory = true;
      auto text = v.as_string(diags);
      if (!text) continue;
      auto bytes = parse_size(*text);
      if (!bytes) {
        diags.error(v.where(), v.path(), bytes.error().message);
      } else if (*bytes == 0 || *bytes > kMaxServiceMemory) {
        diags.error(v.where(), v.path(), quote(*text) + " is out of range (allowed: above 0 to 64 TiB)");
      } else {
        s.memory_bytes = *bytes;
      }
    } else if (e.key == "replicas") {
      if (auto r = v.as_int(diags, 1, kMaxReplicas)) s.replicas = static_cast<uint32_t>(*r);
    } else if (e.key == "demand") {
      demand_where = v.where();
      s.demand = read_number(v, diags, 0, kMaxRate, true);
    } else if (e.key == "capacity") {
      parse_capacity(v, s, diags);
    } else if (e.key == "isolation") {
      auto text = v.as_string(diags);
      if (!text) continue;
      auto iso = parse_isolation(*text);
      if (!iso)
        diags.error(v.where(), v.path(), "unknown isolation " + quote(*text) + " (allowed: dedicated, shared, best-effort)");
      else
        s.isolation = *iso;
    } else if (e.key == "gpus") {
      if (auto g = v.as_int(diags, 1, kMaxTensorParallel)) s.gpus = static_cast<uint32_t>(*g);
    } else {
      s.compute = read_number(v, diags, 0, 1, true);
    }
  }
  if (!has_name) diags.error(s.where, s.field, "missing required field 'name'");
  if (!has_memory) diags.error(s.where, s.field, "missing required field 'memory' (need per replica, such as 32.5GiB)");
  if (s.replicas && s.demand)
    diags.error(demand_where, s.field + ".demand", "give either replicas or demand, not both");
  if (s.demand && s.capacity.empty())
    diags.error(demand_where, s.field + ".capacity", "missing field 'capacity', required with demand (rate per profile)");
  if (!s.replicas && !s.demand && diags.error_count() == errors_before) s.replicas = 1;
  if (s.isolation != Isolation::dedicated) {
    if (s.demand)
      diags.error(demand_where, s.field + ".demand", "demand applies to dedicated services; give replicas for " +
                                                          std::string(to_string(s.isolation)) + " services");
    if (s.gpus > 1)
      diags.error(s.where, s.field + ".gpus", "tensor parallelism (gpus > 1) needs isolation: dedicated");
  } else if (s.compute) {
    diags.error(s.where, s.field + ".compute", "compute shares apply to shared and best-effort services");
  }
  if (diags.error_count() != errors_before) return std::nullopt;
  return s;
}

// `current`: one mig-devices map per GPU, each placeable on the model.
void parse_current(const YamlNode& node, FleetGpuSpec& g, Diagnostics& diags) {
  if (!node.is_sequence()) {
    diags.error(node.where(), node.path(), "expected a list of mig-devices maps (one per GPU, {} for MIG off), got " +
                                               node.kind_name());
    return;
  }
  for (const auto& item : node.items()) {
    if (!item.is_map() && !item.is_null()) {
      diags.error(item.where(), item.path(), "expected a map of MIG profile to count, got " + item.kind_name());
      continue;
    }
    CurrentLayout layout;
    layout.where = item.where();
    bool ok = true;
    if (item.is_map())
      for (const auto& e : item.entries()) {
        auto count = e.value.as_int(diags, 0, kMaxMigDeviceCount);
        if (!count) { ok = false; continue; }
        if (*count > 0) layout.counts[e.key] = static_cast<uint32_t>(*count);
      }
    if (!ok) continue;
    if (!layout.counts.empty()) {
      auto placed = place_counts(*g.model, layout.counts);
      if (!placed) {
        diags.error(item.where(), item.path(), placed.error().message);
        continue;
      }
      layout.placed = std::move(*placed);
    }
    g.current.push_back(std::move(layout));
  }
  if (g.count && g.current.size() > *g.count)
    diags.error(node.where(), node.path(), std::to_string(g.current.size()) + " current layouts for a count of " +
                                               std::to_string(*g.count) + " GPUs");
}

std::optional<FleetGpuSpec> parse_fleet_gpu(const YamlNode& node, const Catalog& catalog, Diagnostics& diags) {
  if (!node.is_map()) {
    diags.error(node.where(), node.path(), "expected a map with gpu and count, got " + node.kind_name());
    return std::nullopt;
  }
  size_t errors_before = diags.error_count();
  FleetGpuSpec g;
  g.where = node.where();
  g.field = node.path();
  bool has_gpu = false;
  YamlNode current;
  bool has_current = false;
  for (const auto& e : node.checked_entries(diags, {"gpu", "count", "current"})) {
    if (e.key == "current") {
      current = e.value;
      has_current = true;
    } else if (e.key == "gpu") {
      has_gpu = true;
      auto name = e.value.as_string(diags);
      if (!name) continue;
      g.model = catalog.find(*name);
      if (!g.model) {
        std::string hint = join(catalog.nearest_names(*name));
        diags.error(e.value.where(), e.value.path(), "unknown GPU model " + quote(*name) + " (nearest: " + hint + ")");
      } else if (g.model->profiles.empty()) {
        diags.error(e.value.where(), e.value.path(), "GPU model '" + g.model->name + "' has no MIG profiles");
      }
    } else {
      if (auto c = e.value.as_int(diags, 0, kMaxFleetCount)) g.count = static_cast<uint32_t>(*c);
    }
  }
  if (!has_gpu) diags.error(g.where, g.field, "missing required field 'gpu' (a catalog GPU model)");
  if (diags.error_count() != errors_before) return std::nullopt;
  if (has_current) parse_current(current, g, diags);
  if (diags.error_count() != errors_before) return std::nullopt;
  return g;
}

// Every capacity key must name a profile of some GPU model in the fleet.
void check_capacity_profiles(const FleetSpec& spec, Diagnostics& diags) {
  for (const auto& s : spec.services)
    for (const auto& c : s.capacity) {
      if (c.profile == kWholeGpuKey) continue;
      bool known = false;
      std::vector<std::string> names;
      for (const auto& g : spec.fleet)
        for (const auto& p : g.model->profiles) {
          known = known || p.name == c.profile;
          names.push_back(p.name);
        }
      if (known) continue;
      std::string hint = join(nearest(c.profile, names, 3));
      diags.error(c.where, s.field + ".capacity." + c.profile,
                  "unknown MIG profile " + quote(c.profile) + " for the fleet's GPUs (nearest: " + hint + "; or 'gpu')");
    }
}

}  // namespace

std::string_view to_string(Isolation isolation) {
  switch (isolation) {
    case Isolation::dedicated: return "dedicated";
    case Isolation::shared: return "shared";
    case Isolation::best_effort: return "best-effort";
  }
  return "dedicated";
}

std::optional<FleetSpec> parse_fleet_spec(std::string_view text, const std::string& file, const Catalog& catalog,
                                          Diagnostics& diags) {
  auto doc = YamlDocument::parse(text, DocumentContext{file, 0, 0}, diags);
  if (diags.has_errors()) return std::nullopt;
  YamlNode root = doc->root();
  if (!root.is_map()) {
    diags.error(root.where(), "", "expected a fleet spec (a map with fleet and services), got " + root.kind_name());
    return std::nullopt;
  }
  size_t errors_before = diags.error_count();
  FleetSpec spec;
  spec.file = file;
  bool has_fleet = false, has_services = false;
  for (const auto& e : root.checked_entries(diags, {"fleet", "services"})) {
    if (!e.value.is_sequence() || e.value.items().empty()) {
      diags.error(e.value.where(), e.key, "expected a non-empty list, got " + e.value.kind_name());
      continue;
    }
    if (e.key == "fleet") {
      has_fleet = true;
      std::set<std::string> models;
      for (const auto& item : e.value.items()) {
        auto g = parse_fleet_gpu(item, catalog, diags);
        if (!g) continue;
        if (!models.insert(g->model->name).second) {
          diags.error(g->where, g->field + ".gpu", "GPU model '" + g->model->name + "' is listed twice");
          continue;
        }
        spec.fleet.push_back(std::move(*g));
      }
    } else {
      has_services = true;
      std::set<std::string> names;
      for (const auto& item : e.value.items()) {
        auto s = parse_service(item, diags);
        if (!s) continue;
        if (!names.insert(s->name).second) {
          diags.error(s->where, s->field + ".name", "duplicate service name " + quote(s->name));
          continue;
        }
        spec.services.push_back(std::move(*s));
      }
    }
  }
  if (!has_fleet) diags.error(root.where(), "fleet", "missing required field 'fleet' (a list of GPU models)");
  if (!has_services) diags.error(root.where(), "services", "missing required field 'services'");
  if (diags.error_count() != errors_before) return std::nullopt;
  check_capacity_profiles(spec, diags);
  if (diags.error_count() != errors_before) return std::nullopt;
  return spec;
}

namespace {

// One CSV record, with quoted fields ("a, b") kept whole.
std::vector<std::string> split_csv_line(std::string_view line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) fields.emplace_back();
    else if (c != '\r') fields.back() += c;
  }
  return fields;
}

// "1352 out-tok/s" -> 1352; text without a leading number -> nothing.
std::optional<double> leading_number(std::string_view text) {
  size_t end = 0;
  while (end < text.size() && (std::isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.')) ++end;
  if (end == 0) return std::nullopt;
  return parse_double(text.substr(0, end));
}

}  // namespace

std::optional<FleetSpec> parse_service_csv(std::string_view text, const std::string& file, Diagnostics& diags) {
  std::istringstream in{std::string(text)};
  std::string line;
  if (!std::getline(in, line)) {
    diags.error({file, 1, 0}, "", "file is empty; expected a CSV header line");
    return std::nullopt;
  }
  auto header = split_csv_line(line);
  auto column = [&](std::string_view name) -> int {
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return static_cast<int>(i);
    return -1;
  };
  int c_name = column("service"), c_mem = column("mem_need_GiB"), c_demand = column("demand"),
      c_full = column("full_A100_capacity"), c_smallest = column("smallest_A100_profile"),
      c_replicas = column("replicas");
  if (c_name < 0 || c_mem < 0) {
    diags.error({file, 1, 0}, "", "CSV header lacks the required columns 'service' and 'mem_need_GiB'");
    return std::nullopt;
  }
  FleetSpec spec;
  spec.file = file;
  std::set<std::string> names;
  size_t errors_before = diags.error_count();
  for (int n = 2; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \r") == std::string::npos) continue;
    auto f = split_csv_line(line);
    auto field = [&](int c) { return c >= 0 && static_cast<size_t>(c) < f.size() ? f[static_cast<size_t>(c)] : std::string(); };
    ServiceSpec s;
    s.name = field(c_name);
    s.where = {file, n, 1};
    s.field = "line " + std::to_string(n);
    auto mem = parse_double(field(c_mem));
    if (s.name.empty() || !names.insert(s.name).second) {
      diags.error(s.where, "service", s.name.empty() ? "service name is empty" : "duplicate service name " + quote(s.name));
      continue;
    }
    if (!mem || *mem <= 0 || *mem * static_cast<double>(kGiB) > static_cast<double>(kMaxServiceMemory)) {
      diags.error(s.where, "mem_need_GiB", quote(field(c_mem)) + " is not a memory size in GiB (above 0 to 64 TiB)");
      continue;
    }
    s.memory_bytes = static_cast<uint64_t>(std::llround(*mem * static_cast<double>(kGiB)));
    auto demand = leading_number(field(c_demand));
    auto full = leading_number(field(c_full));
    if (c_replicas >= 0 && !field(c_replicas).empty()) {
      auto r = parse_double(field(c_replicas));
      if (!r || *r < 1 || *r > static_cast<double>(kMaxReplicas) || *r != std::floor(*r)) {
        diags.error(s.where, "replicas", quote(field(c_replicas)) + " is not a replica count (1 to 1000000)");
        continue;
      }
      s.replicas = static_cast<uint32_t>(*r);
    } else if (demand && full && *demand > 0 && *full > 0) {
      s.demand = *demand;
      s.capacity.push_back({std::string(kWholeGpuKey), *full, s.where});
      s.capacity_per_gpu = true;
    } else {
      s.replicas = 1;  // no rate to serve: one instance
    }
    s.gpus_auto = field(c_smallest).find("multi-GPU") != std::string::npos;
    spec.services.push_back(std::move(s));
  }
  if (diags.error_count() != errors_before) return std::nullopt;
  if (spec.services.empty()) {
    diags.error({file, 1, 0}, "", "CSV has no service rows");
    return std::nullopt;
  }
  return spec;
}

std::optional<FleetSpec> load_fleet_spec(const std::string& path, const Catalog& catalog, Diagnostics& diags) {
  auto text = read_config_file(path, diags);
  if (!text) return std::nullopt;
  std::string file = path == "-" ? "<stdin>" : path;
  if (path.size() > 4 && path.substr(path.size() - 4) == ".csv") return parse_service_csv(*text, file, diags);
  return parse_fleet_spec(*text, file, catalog, diags);
}

}  // namespace tessera::config
