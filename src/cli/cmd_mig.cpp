// tessera mig ...: MIG configs in mig-parted's format.
#include <nlohmann/json.hpp>

#include <iostream>
#include <set>

#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "config/mig_parted.hpp"
#include "config/mig_parted_validate.hpp"
#include "config/yaml_document.hpp"
#include "core/catalog.hpp"
#include "core/text.hpp"

namespace tessera::cli {
namespace {

nlohmann::json diagnostics_json(const config::Diagnostics& diags, config::Severity severity) {
  auto arr = nlohmann::json::array();
  for (const auto& d : diags.items()) {
    if (d.severity != severity) continue;
    arr.push_back({{"file", d.where.file}, {"line", d.where.line}, {"column", d.where.column}, {"field", d.field},
                   {"message", d.message}, {"text", config::format(d)}});
  }
  return arr;
}

struct ValidateArgs {
  std::string file;
  std::string config_name;
  std::string gpu;
  bool json = false;
  bool verbose = false;
  bool strict = false;
};

int run_validate(const ValidateArgs& args) {
  config::Diagnostics diags;
  const auto& catalog = Catalog::builtin();
  config::MigValidateOptions options;
  if (!args.config_name.empty()) options.config_name = args.config_name;
  if (!args.gpu.empty()) {
    options.gpu = find_gpu_model("tessera mig validate", args.gpu, std::cerr);
    if (!options.gpu) return kExitUsage;
  }
  std::vector<config::EntryCheck> checks;
  size_t config_count = 0;
  if (auto cfg = config::load_mig_parted(args.file, diags)) {
    config_count = cfg->configs.size();
    checks = config::validate_mig_parted(*cfg, catalog, options, diags);
  }
  if (args.strict) diags = config::warnings_as_errors(diags);
  bool valid = !diags.has_errors();
  if (args.json) {
    auto arr = nlohmann::json::array();
    for (const auto& c : checks)
      arr.push_back({{"config", c.config}, {"entry", c.entry}, {"gpu", c.gpu}, {"ok", c.ok}, {"layout", c.detail}});
    nlohmann::json j = {{"file", args.file},
                        {"valid", valid},
                        {"configs", config_count},
                        {"errors", diagnostics_json(diags, config::Severity::error)},
                        {"warnings", diagnostics_json(diags, config::Severity::warning)},
                        {"checks", arr}};
    std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << '\n';
    return valid ? kExitOk : kExitInvalid;
  }
  print_diagnostics(diags, std::cerr);
  if (args.verbose || !args.config_name.empty()) {
    Table t({"CONFIG", "ENTRY", "GPU", "RESULT", "LAYOUT"});
    for (const auto& c : checks)
      t.add({c.config, std::to_string(c.entry), c.gpu, c.ok ? "ok" : "INVALID", c.ok ? c.detail : ""});
    t.print(std::cout);
  }
  std::set<std::string> gpus;
  for (const auto& c : checks) gpus.insert(c.gpu);
  size_t warnings = diags.items().size() - diags.error_count();
  if (valid)
    std::cout << args.file << ": valid: " << counted(config_count, "config") << ", " << counted(checks.size(), "entry check")
              << " on " << counted(gpus.size(), "GPU model") << ", " << counted(warnings, "warning") << '\n';
  else
    std::cerr << args.file << ": invalid: " << counted(diags.error_count(), "error") << ", " << counted(warnings, "warning")
              << '\n';
  return valid ? kExitOk : kExitInvalid;
}

}  // namespace

void add_mig_command(CLI::App& app, int& exit_code) {
  auto* mig = app.add_subcommand("mig", "MIG layouts in NVIDIA mig-parted's config format");
  mig->require_subcommand(1);
  auto args = std::make_shared<ValidateArgs>();
  auto* validate = mig->add_subcommand(
      "validate",
      "Check a mig-parted config (version v1, or a ConfigMap holding one) against the GPU catalog.\n"
      "Each entry is checked on the GPUs it can apply to: those its device-filter selects, or, without a\n"
      "filter, every catalog GPU that has all of its profiles. Accepts what NVIDIA's mig-parted accepts;\n"
      "what it accepts but will do nothing, and what the catalog doubts without --gpu, is a warning.\n"
      "Exit 0 when valid, 1 with the errors when not.");
  // As in `tessera mig plan` / `mig apply`, and as mig-parted spells them: -f the file, -c the config's name.
  validate->add_option("-f,--file,--config-file", args->file, "The config file ('-' for standard input)")->required();
  validate->add_option("-c,--config,--selected-config", args->config_name, "Only this named config (a key of mig-configs)");
  validate->add_option("--gpu", args->gpu, "Check every entry that would apply to this GPU model on it");
  validate->add_flag("--json", args->json, "Print the result as JSON");
  validate->add_flag("-v,--verbose", args->verbose, "List every entry checked, with the layout it places");
  validate->add_flag("--strict", args->strict, "Treat warnings as errors");
  validate->callback([args, &exit_code] { exit_code = run_validate(*args); });
  add_mig_apply_commands(*mig, exit_code);
}

}  // namespace tessera::cli
