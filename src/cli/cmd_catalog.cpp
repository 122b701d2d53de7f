// tessera catalog: the GPU models tessera knows and their MIG geometry.
#include <nlohmann/json.hpp>

#include <iostream>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "core/catalog.hpp"
#include "core/mig_layout.hpp"
#include "core/units.hpp"
#include "core/text.hpp"

namespace tessera::cli {
namespace {

std::string placements_text(const std::vector<Placement>& ps) {
  std::string out = "{";
  for (size_t i = 0; i < ps.size(); ++i) out += (i ? "," : "") + std::to_string(ps[i].start);
  out += "}:" + (ps.empty() ? std::string("0") : std::to_string(ps[0].size));
  return out;
}

std::string mib(uint64_t v, bool estimated) {
  return std::to_string(v) + (estimated ? "~" : "");
}

nlohmann::json placements_json(const std::vector<Placement>& ps) {
  auto arr = nlohmann::json::array();
  for (const auto& p : ps) arr.push_back({{"start", p.start}, {"size", p.size}});
  return arr;
}

nlohmann::json model_json(const GpuModel& m, bool with_layouts) {
  nlohmann::json j = {
      {"name", m.name}, {"nvml_name", m.nvml_name}, {"pci_device_id", format_pci_id(m.pci_device_id)},
      {"architecture", m.architecture}, {"compute_capability", m.compute_capability},
      {"memory_mib", m.memory_mib}, {"memory_estimated", m.memory_estimated}, {"sm_count", m.sm_count},
      {"sm_estimated", m.sm_estimated}, {"memory_slices", m.memory_slices}, {"compute_slices", m.compute_slices},
      {"max_instances", m.max_instances}, {"confidence", m.confidence}, {"source", m.source},
  };
  auto aliases = nlohmann::json::array();
  for (uint32_t id : m.alias_pci_ids) aliases.push_back(format_pci_id(id));
  j["alias_pci_ids"] = aliases;
  auto profiles = nlohmann::json::array();
  for (const auto& p : m.profiles) {
    nlohmann::json pj = {
        {"name", p.name}, {"nvml_index", p.nvml_index}, {"profile_id", p.profile_id}, {"slices", p.slices},
        {"memory_slices", p.memory_slices}, {"memory_mib", p.memory_mib}, {"memory_estimated", p.memory_estimated},
        {"sm_count", p.sm_count}, {"sm_estimated", p.sm_estimated}, {"max_count", p.max_count}, {"p2p", p.p2p},
        {"engines", {{"copy", p.engines.copy}, {"decoders", p.engines.decoders}, {"encoders", p.engines.encoders},
                     {"jpegs", p.engines.jpegs}, {"ofas", p.engines.ofas}}},
        {"placements", placements_json(p.placements)}, {"evidence", p.evidence},
    };
    auto cis = nlohmann::json::array();
    for (const auto& c : p.compute_profiles)
      cis.push_back({{"name", c.name}, {"nvml_index", c.nvml_index}, {"profile_id", c.profile_id}, {"slices", c.slices},
                     {"sm_count", c.sm_count}, {"max_count", c.max_count}, {"is_default", c.is_default},
                     {"placements", placements_json(c.placements)}});
    pj["compute_profiles"] = cis;
    profiles.push_back(pj);
  }
  j["profiles"] = profiles;
  if (with_layouts) {
    auto layouts = nlohmann::json::array();
    for (const auto& l : maximal_layouts(m)) {
      auto lj = nlohmann::json::array();
      for (const auto& i : l) lj.push_back({{"profile", m.profiles[i.profile].name}, {"start", i.start}});
      layouts.push_back(lj);
    }
    j["maximal_layouts"] = layouts;
  }
  return j;
}

void print_model(const GpuModel& m, bool with_layouts) {
  std::cout << m.name << " (" << m.nvml_name << ", PCI " << format_pci_id(m.pci_device_id) << ", " << m.architecture
            << ")\n";
  std::cout << "  memory " << m.memory_mib << " MiB" << (m.memory_estimated ? " (estimated)" : "") << ", " << m.sm_count
            << " SMs" << (m.sm_estimated ? " (estimated)" : "") << ", " << m.compute_slices << " compute / "
            << m.memory_slices << " memory slices, up to " << m.max_instances << " GPU instances\n";
  std::cout << "  confidence: " << m.confidence << "\n\n";
  Table t({"PROFILE", "NVML", "ID", "SLICES", "MEM-SLICES", "MEMORY-MiB", "SMS", "CE/DEC/ENC/JPG/OFA", "MAX",
           "PLACEMENTS", "COMPUTE-PROFILES"});
  for (const auto& p : m.profiles) {
    std::string cis;
    for (const auto& c : p.compute_profiles) cis += (cis.empty() ? "" : " ") + c.name + "x" + std::to_string(c.max_count);
    t.add({p.name, std::to_string(p.nvml_index), std::to_string(p.profile_id), std::to_string(p.slices),
           std::to_string(p.memory_slices), mib(p.memory_mib, p.memory_estimated),
           std::to_string(p.sm_count) + (p.sm_estimated ? "~" : ""),
           std::to_string(p.engines.copy) + "/" + std::to_string(p.engines.decoders) + "/" +
               std::to_string(p.engines.encoders) + "/" + std::to_string(p.engines.jpegs) + "/" +
               std::to_string(p.engines.ofas),
           std::to_string(p.max_count), placements_text(p.placements), cis});
  }
  t.print(std::cout);
  auto layouts = maximal_layouts(m);
  auto base = maximal_layouts(m, {.include_media_variants = false});
  std::cout << "\n  maximal layouts: " << layouts.size() << " (" << base.size()
            << " without media-engine variants; " << distinct_profile_sets(base).size() << " distinct profile sets)\n";
  if (with_layouts)
    for (const auto& l : layouts) std::cout << "    " << describe_layout(m, l) << '\n';
  std::cout << "  (~ marks values estimated where the sources give none)\n";
}

}  // namespace

void add_catalog_command(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("catalog", "List the GPU models tessera knows and their MIG profiles and placements");
  auto gpu = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto layouts = std::make_shared<bool>(false);
  cmd->add_option("--gpu", *gpu, "Show one model in detail (catalog name, NVIDIA name or alias such as A100-80GB)");
  cmd->add_flag("--json", *json, "Print JSON instead of a table");
  cmd->add_flag("--layouts", *layouts, "Also list every maximal MIG layout (with --gpu, or in JSON)");
  cmd->callback([gpu, json, layouts, &exit_code] {
    const auto& catalog = Catalog::builtin();
    if (!gpu->empty()) {
      const auto* m = find_gpu_model("tessera catalog", *gpu, std::cerr);
      if (!m) {
        exit_code = kExitUsage;
        return;
      }
      if (*json) std::cout << model_json(*m, *layouts).dump(2) << '\n';
      else print_model(*m, *layouts);
      return;
    }
    if (*json) {
      auto arr = nlohmann::json::array();
      for (const auto& m : catalog.models()) arr.push_back(model_json(m, *layouts));
      std::cout << nlohmann::json{{"gpus", arr}}.dump(2) << '\n';
      return;
    }
    Table t({"GPU", "PCI-ID", "MEMORY", "SMS", "PROFILES", "MAXIMAL-LAYOUTS", "CONFIDENCE"});
    for (const auto& m : catalog.models()) {
      std::string profiles;
      for (const auto& p : m.profiles)
        if (!is_media_variant(p)) profiles += (profiles.empty() ? "" : " ") + p.name;
      t.add({m.name, format_pci_id(m.pci_device_id), format_bytes(m.memory_mib * kMiB) + (m.memory_estimated ? "~" : ""),
             std::to_string(m.sm_count) + (m.sm_estimated ? "~" : ""), profiles,
             std::to_string(maximal_layouts(m).size()), m.confidence.substr(0, m.confidence.find(' '))});
    }
    t.print(std::cout);
  });
}

}  // namespace tessera::cli
