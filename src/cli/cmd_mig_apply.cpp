// tessera mig plan / apply: bring a node's MIG layout to a named config of a
// mig-parted file, changing only what must change.
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <iostream>
#include <optional>
#include <sstream>

#include "cli/progress.hpp"
#include "cli/commands.hpp"
#include "cli/nvml_driver.hpp"
#include "cli/output.hpp"
#include "config/mig_parted.hpp"
#include "config/mig_parted_validate.hpp"
#include "config/yaml_document.hpp"
#include "reconciler/journal.hpp"
#include "reconciler/mig_apply.hpp"
#include "reconciler/node_state.hpp"
#include "core/file_read.hpp"
#include "core/text.hpp"

namespace tessera::cli {
namespace {

struct ApplyArgs {
  std::string file;
  std::string config_name;
  std::string labels_file;
  DriverOptions driver;
  std::string state_dir;
  bool json = false;
  bool force = false;
  bool dry_run = false;
  bool strict = false;
};

constexpr const char* kConfigLabel = "nvidia.com/mig.config";

// Labels files are a few lines; this bounds a wrong path to something huge.
constexpr size_t kMaxLabelsBytes = 1 << 20;

// The config name: -c/--config, else the node label from a labels file
// ("key=value" lines, as the downward API or a label writer leaves them).
// `usage`: the command line names no config (exit 2) rather than a file failing (exit 1).
std::optional<std::string> config_name(const ApplyArgs& args, std::string& why, bool& usage) {
  usage = false;
  if (!args.config_name.empty()) return args.config_name;
  if (args.labels_file.empty()) {
    usage = true;
    why = "no config named: pass -c NAME, or --labels-file FILE holding " + std::string(kConfigLabel) + "=NAME";
    return std::nullopt;
  }
  auto text = read_whole_file(args.labels_file, kMaxLabelsBytes);
  if (!text) {
    why = args.labels_file + ": " + text.error().message;  // "cannot open file: No such file or directory"
    return std::nullopt;
  }
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') value = value.substr(1, value.size() - 2);
    if (key == kConfigLabel && !value.empty()) return value;
  }
  why = args.labels_file + ": no " + std::string(kConfigLabel) + " label";
  return std::nullopt;
}

std::string state_dir(const ApplyArgs& args) {
  if (!args.state_dir.empty()) return args.state_dir;
  if (!args.driver.sim.empty()) return args.driver.sim + "/tessera-state";
  return "/var/lib/tessera";
}

nlohmann::json plan_json(const reconciler::NodePlan& plan) {
  auto gpus = nlohmann::json::array();
  for (const auto& g : plan.gpus) {
    auto ops = nlohmann::json::array();
    for (const auto& op : g.plan.operations)
      ops.push_back({{"kind", mig::to_string(op.kind)}, {"description", g.model ? op.describe(*g.model) : ""}});
    gpus.push_back({{"gpu", g.gpu},
                    {"uuid", g.uuid},
                    {"model", g.model ? g.model->name : ""},
                    {"operations", ops},
                    {"kept", g.kept},
                    {"destroyed", g.destroyed},
                    {"not_destroyed", g.not_destroyed},
                    {"created", g.created},
                    {"operations_done", g.operations_done},
                    {"mode_change", g.plan.mode_change},
                    {"pending_reset", g.pending_reset},
                    {"error", g.error}});
  }
  return {{"config", plan.config_name}, {"operations", plan.operations()}, {"gpus", gpus}};
}

void print_plan(const reconciler::NodePlan& plan) {
  Table t({"GPU", "MODEL", "KEEP", "DESTROY", "CREATE", "OPERATIONS"});
  for (const auto& g : plan.gpus) {
    std::string create;
    for (const auto& c : g.plan.created)
      create += (create.empty() ? "" : " ") + g.model->profiles[c.profile].name + "@" + std::to_string(c.start);
    t.add({std::to_string(g.gpu), g.model ? g.model->name : "?", std::to_string(g.plan.kept.size()),
           std::to_string(g.plan.destroyed.size()), create.empty() ? "-" : create,
           std::to_string(g.plan.operations.size())});
  }
  t.print(std::cout);
  for (const auto& g : plan.gpus)
    for (const auto& op : g.plan.operations) std::cout << "  " << op.describe(*g.model) << '\n';
}

void print_report(const reconciler::NodePlan& plan) {
  std::cout << "\nMIG devices:\n";
  for (const auto& g : plan.gpus) {
    for (const auto& u : g.kept) std::cout << "  GPU " << g.gpu << "  kept       " << u << '\n';
    for (const auto& u : g.destroyed) std::cout << "  GPU " << g.gpu << "  destroyed  " << u << '\n';
    for (const auto& u : g.not_destroyed)
      std::cout << "  GPU " << g.gpu << "  NOT destroyed (still there)  " << u << '\n';
    for (const auto& u : g.created) std::cout << "  GPU " << g.gpu << "  created    " << u << '\n';
    if (g.pending_reset)
      std::cout << "  GPU " << g.gpu << "  MIG mode change pending: reset the GPU (nvidia-smi -r -i " << g.gpu
                << ") or reboot the node, then apply again\n";
    if (!g.error.empty()) std::cout << "  GPU " << g.gpu << "  FAILED: " << g.error << '\n';
  }
}

// After a failed apply: which GPUs changed and which did not, and what to run next.
void print_half_applied(const reconciler::NodePlan& plan, const ApplyArgs& args, const std::string& name) {
  std::vector<std::string> states;
  bool changed_any = false;
  for (const auto& g : plan.gpus) {
    const size_t total = g.plan.operations.size();
    if (total == 0) continue;
    changed_any = changed_any || g.operations_done > 0;
    states.push_back("GPU " + std::to_string(g.gpu) + " " +
                     (g.operations_done == total ? "changed"
                      : g.operations_done == 0   ? "not changed"
                                                 : "partly changed (" + std::to_string(g.operations_done) + " of " +
                                                       std::to_string(total) + " operations)"));
  }
  std::cout << (changed_any ? "the node is half-applied: " : "nothing was changed: ") << join(states, ", ") << '\n';
  // The hint for the failure that happened (the driver's error name is in each GPU's error).
  auto failed_with = [&](std::string_view what) {
    return std::any_of(plan.gpus.begin(), plan.gpus.end(), [&](const auto& g) { return g.error.find(what) != std::string::npos; });
  };
  std::string cause = failed_with("NVML_ERROR_IN_USE")          ? " (a MIG device in use: stop its processes, e.g. drain the node's GPU pods)"
                      : failed_with("NVML_ERROR_NO_PERMISSION") ? " (a permission: run it as root on the host)"
                                                                : "";
  std::cout << "next: remove the cause named under FAILED" << cause << ", then run `tessera mig apply -f "
            << args.file << " -c " << name
            << (args.driver.sim.empty() ? "" : " --sim " + args.driver.sim) << "` again: it changes only what still differs\n";
}

int run(const ApplyArgs& args, bool apply) {
  const char* cmd = apply ? "tessera mig apply" : "tessera mig plan";
  std::string why;
  bool usage = false;
  auto name = config_name(args, why, usage);
  if (!name) {
    std::cerr << cmd << ": " << escape_control(why) << '\n';
    return usage ? kExitUsage : kExitInvalid;
  }
  // Validate everything before touching anything.
  config::Diagnostics diags;
  auto cfg = config::load_mig_parted(args.file, diags);
  if (args.strict) diags = config::warnings_as_errors(diags);
  print_diagnostics(diags, std::cerr);
  if (!cfg || diags.has_errors()) return kExitInvalid;
  const auto* mc = cfg->find(*name);
  if (!mc) {
    std::vector<std::string> names;
    for (const auto& c : cfg->configs) names.push_back(c.name);
    std::string hint = escape_control(join(nearest(*name, names, 3)));
    std::cerr << cmd << ": " << args.file << " has no config named " << quote(*name) << " (nearest: " << hint << ")\n";
    return kExitInvalid;
  }
  auto session = open_nvml(args.driver);
  if (!session) {
    std::cerr << cmd << ": " << session.error().message << '\n';
    return kExitInvalid;
  }
  reconciler::JournalFile journal_file(state_dir(args));
  reconciler::ApplyRequest request{args.file, *name, mc, args.force, !apply || args.dry_run, {}, {}};
  std::optional<Progress> progress;
  if (apply && !args.dry_run) {
    progress.emplace("tessera mig apply: " + *name);
    request.on_step = [&progress](const reconciler::Journal& j) {
      std::string last;
      for (const auto& s : j.steps)
        if (s.status == "done") last = s.operation;
      progress->set("step " + std::to_string(j.done()) + " of " + std::to_string(j.steps.size()) + " (" + last + ")");
    };
  }
  auto report = reconciler::apply_config(*session, request, journal_file);
  progress.reset();
  if (!report) {
    std::cerr << cmd << ": " << report.error().message << '\n';
    return kExitInvalid;
  }
  if (report->outcome == reconciler::Outcome::refused) {
    std::cerr << cmd << ": " << report->message << '\n';
    return kExitInvalid;
  }
  if (report->outcome == reconciler::Outcome::planned) {
    if (args.json) std::cout << plan_json(report->plan).dump(2) << '\n';
    else {
      print_plan(report->plan);
      std::cout << (report->plan.operations() == 0 ? "nothing to do: the node matches '" + *name + "'\n"
                                                   : std::to_string(report->plan.operations()) + " operations\n");
      // A dry run looks like `mig plan` but must say that it stopped there.
      if (apply && report->plan.operations() != 0)
        std::cout << "dry run: nothing changed; run without --dry-run to apply these operations\n";
    }
    if (!report->message.empty()) std::cerr << cmd << ": warning: " << report->message << '\n';
    return kExitOk;
  }
  const auto& journal = report->journal;
  if (args.json) {
    auto j = plan_json(report->plan);
    j["outcome"] = journal.outcome;
    if (!report->message.empty()) j["error"] = report->message;
    std::cout << j.dump(2) << '\n';
  } else {
    print_plan(report->plan);
    print_report(report->plan);
    std::cout << "\n" << *name << ": " << journal.outcome << " (" << journal.done() << " of " << journal.steps.size()
              << " operations done; journal " << journal_file.journal_path() << ")\n";
    if (report->outcome == reconciler::Outcome::failed) print_half_applied(report->plan, args, *name);
  }
  if (!report->message.empty()) std::cerr << cmd << ": " << report->message << '\n';
  return report->outcome == reconciler::Outcome::failed ? kExitInvalid : kExitOk;
}

void add_common(CLI::App* cmd, ApplyArgs& args) {
  // As in `tessera mig validate`, and as mig-parted spells them: -f the file, -c the config's name.
  cmd->add_option("-f,--file,--config-file", args.file, "mig-parted config file (version v1, or a ConfigMap holding one)")
      ->required();
  cmd->add_option("-c,--config,--selected-config,--config-name", args.config_name,
                  "The named config to apply (a key of mig-configs)");
  cmd->add_option("--labels-file", args.labels_file,
                  "Read the config name from this node's labels (nvidia.com/mig.config=NAME lines)");
  add_driver_options(*cmd, args.driver);
  cmd->add_option("--state-dir", args.state_dir,
                  "Where the journal and nvidia.com/mig.config.state live (default /var/lib/tessera; with --sim, DIR/tessera-state)");
  cmd->add_flag("--json", args.json, "Print JSON");
  cmd->add_flag("--force", args.force,
                "Plan as if busy MIG devices were free (a layout keeping the most of them still comes first):\n"
                "`mig plan --force` shows the change for once they are stopped. The driver refuses to destroy a\n"
                "MIG device with processes running, so `mig apply --force` that needs to is refused before its\n"
                "first step, naming them");
  cmd->add_flag("--strict", args.strict, "Treat warnings about the config file as errors");
}

}  // namespace

void add_mig_apply_commands(CLI::App& mig, int& exit_code) {
  auto plan_args = std::make_shared<ApplyArgs>();
  auto* plan = mig.add_subcommand("plan", "Show what `mig apply` would change on this node (reads only)");
  add_common(plan, *plan_args);
  plan->callback([plan_args, &exit_code] { exit_code = run(*plan_args, false); });

  auto apply_args = std::make_shared<ApplyArgs>();
  auto* apply = mig.add_subcommand(
      "apply",
      "Bring this node's MIG layout to a named config, keeping every instance the config can keep.\n"
      "Validates first (nothing changes on invalid input), refuses to destroy instances in use (with\n"
      "--force, still those with processes running, which the driver would refuse halfway through the\n"
      "node), records each step in a journal so an interrupted apply is completed by the next one, and\n"
      "writes nvidia.com/mig.config.state (pending | success | failed) to the state directory.\n"
      "MIG mode changes that need a GPU reset are reported as pending; tessera never resets a GPU.");
  add_common(apply, *apply_args);
  apply->add_flag("--dry-run", apply_args->dry_run, "Print the plan and change nothing");
  apply->callback([apply_args, &exit_code] { exit_code = run(*apply_args, true); });
}

}  // namespace tessera::cli
