// tessera config ...: NVIDIA device-plugin configs.
#include <nlohmann/json.hpp>

#include <iostream>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "config/device_plugin.hpp"
#include "config/yaml_document.hpp"
#include "core/text.hpp"

namespace tessera::cli {
namespace {

void print_summary(const config::DevicePluginConfig& c) {
  std::cout << c.file << ": valid device-plugin config\n";
  std::cout << "  migStrategy: " << config::to_string(c.mig_strategy)
            << ", deviceIDStrategy: " << config::to_string(c.plugin.device_id_strategy) << ", deviceListStrategy:";
  for (auto s : c.plugin.device_list_strategy) std::cout << ' ' << config::to_string(s);
  std::cout << '\n';
  const auto* sharing = c.sharing();
  if (!sharing) {
    std::cout << "  sharing: none (each device allocated whole)\n";
    return;
  }
  std::cout << "  sharing: " << (c.uses_mps() ? "mps" : "time-slicing")
            << ", renameByDefault: " << (sharing->rename_by_default ? "true" : "false")
            << ", failRequestsGreaterThanOne: " << (sharing->fail_requests_greater_than_one ? "true" : "false") << '\n';
  for (const auto& r : sharing->resources) {
    std::string advertised = !r.rename.empty() ? r.rename : (sharing->rename_by_default ? r.name + ".shared" : r.name);
    std::string devices = r.devices.all ? "all" : r.devices.count ? "first " + std::to_string(*r.devices.count) : "";
    for (const auto& id : r.devices.ids) devices += (devices.empty() ? "" : ",") + id;
    std::cout << "    " << r.name << " x" << r.replicas << " -> " << advertised << " (devices: " << devices << ")\n";
  }
}

}  // namespace

void add_config_command(CLI::App& app, int& exit_code) {
  auto* cfg = app.add_subcommand("config", "NVIDIA device-plugin configs (version v1)");
  cfg->require_subcommand(1);
  auto file = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  auto strict = std::make_shared<bool>(false);
  auto* validate = cfg->add_subcommand(
      "validate", "Check a device-plugin config: flags (migStrategy, deviceListStrategy, ...) and sharing\n"
                  "(timeSlicing or mps replicas), or each config of a ConfigMap holding them (the GPU Operator's\n"
                  "devicePlugin.config). Accepts what NVIDIA's plugin accepts; what it accepts but will do\n"
                  "nothing (an unknown field, a name that matches no resource) is a warning. An empty file,\n"
                  "several YAML documents, another Kubernetes object or a file with none of a config's fields\n"
                  "is an error. Exit 0 when valid, 1 with the errors when not.");
  validate->add_option("-f,--file", *file, "The config file ('-' for standard input)")->required();
  validate->add_flag("--json", *json, "Print the result as JSON");
  validate->add_flag("--strict", *strict, "Treat warnings as errors");
  validate->callback([file, json, strict, &exit_code] {
    config::Diagnostics diags;
    const auto configs = config::validate_device_plugin_file(*file, diags);
    if (*strict) diags = config::warnings_as_errors(diags);
    bool valid = !configs.empty() && !diags.has_errors();
    if (*json) {
      auto errors = nlohmann::json::array();
      for (const auto& d : diags.items()) errors.push_back(config::format(d));
      nlohmann::json j = {{"file", *file}, {"valid", valid}, {"diagnostics", errors}};
      if (valid) {
        auto sharing = [](const config::DevicePluginConfig& c) {
          return c.sharing() ? (c.uses_mps() ? "mps" : "time-slicing") : "none";
        };
        j["migStrategy"] = config::to_string(configs[0].mig_strategy);
        j["sharing"] = sharing(configs[0]);
        // A ConfigMap's configs, each by its data key.
        if (configs.size() > 1 || configs[0].file != (*file == "-" ? "<stdin>" : *file)) {
          j["configs"] = nlohmann::json::array();
          for (const auto& c : configs)
            j["configs"].push_back({{"name", c.file}, {"migStrategy", config::to_string(c.mig_strategy)}, {"sharing", sharing(c)}});
        }
      }
      std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    } else {
      print_diagnostics(diags, std::cerr);
      if (valid)
        for (const auto& c : configs) print_summary(c);
      else std::cerr << *file << ": invalid: " << counted(diags.error_count(), "error") << '\n';
    }
    exit_code = valid ? kExitOk : kExitInvalid;
  });
}

}  // namespace tessera::cli
