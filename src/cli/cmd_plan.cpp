// tessera plan: cut a fleet's GPUs for a set of services, with proof of how
// good the plan is (lower bound, gap, baselines).
#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>

#include "cli/progress.hpp"
#include "cli/commands.hpp"
#include "cli/output.hpp"
#include "config/fleet_spec.hpp"
#include "planner/outputs.hpp"
#include "planner/plan_check.hpp"
#include "planner/report.hpp"
#include "core/text.hpp"

namespace tessera::cli {
namespace {

struct PlanArgs {
  std::string file;
  std::string out_dir;
  std::string svg;
  std::string mode = "auto";
  std::string gpu;
  double time_limit = 60;
  uint32_t gpus_per_node = 8;
  bool json = false;
  bool no_baselines = false;
};

nlohmann::json report_json(const planner::Report& r) {
  nlohmann::json by_model = nlohmann::json::object();
  for (const auto& [m, n] : r.gpus_by_model) by_model[m] = n;
  nlohmann::json baselines = nlohmann::json::object();
  nlohmann::json whole = nlohmann::json::object();
  for (const auto& b : r.baselines) {
    baselines[b.name] = b.gpus ? nlohmann::json(*b.gpus) : nlohmann::json(nullptr);
    if (b.name != "whole-gpu") whole[b.name] = b.replicas_on_whole_gpus;
  }
  return {{"gpus_used", r.gpus_used},
          {"gpus_by_model", by_model},
          {"lower_bound", r.lower_bound},
          {"optimal", r.optimal},
          {"gap", r.gap},
          {"mode", r.mode},
          {"solve_seconds", r.seconds},
          {"replicas", r.replicas},
          {"instances_used", r.instances_used},
          {"memory_utilisation", r.memory_utilisation},
          {"gpus_changed", r.gpus_kept ? nlohmann::json(r.gpus_used - *r.gpus_kept) : nlohmann::json(nullptr)},
          {"baselines", baselines},
          {"baseline_replicas_on_whole_gpus", whole}};
}

void print_report(const planner::Problem& problem, const planner::Plan& plan, const planner::Report& r) {
  Table gpus({"GPU", "MODEL", "LAYOUT", "INSTANCES"});
  for (size_t g = 0; g < plan.gpus.size(); ++g) {
    const auto& gpu = plan.gpus[g];
    std::string instances;
    for (const auto& inst : gpu.instances) {
      std::string names;
      for (const auto& rep : inst.replicas)
        names += (names.empty() ? "" : "+") + problem.services[size_t(rep.service)].name;
      instances += (instances.empty() ? "" : "  ") + planner::unit_of(problem, inst).name + "[" +
                   (names.empty() ? "idle" : names) + "]";
    }
    gpus.add({std::to_string(g), problem.gpu_types[size_t(gpu.gpu_type)].model->name,
              problem.layouts[size_t(gpu.layout)].name, instances});
  }
  gpus.print(std::cout);
  char gap[32], util[32];
  std::snprintf(gap, sizeof gap, "gap %.1f%%", r.gap * 100);
  std::snprintf(util, sizeof util, "%.1f%%", r.memory_utilisation * 100);
  std::cout << "\nGPUs used: " << r.gpus_used << " (lower bound " << r.lower_bound << ", "
            << (r.optimal ? "proven optimal" : gap) << ", " << r.mode << " mode, " << int(r.seconds * 1000) << " ms)\n"
            << "replicas: " << r.replicas << ", instances used: " << r.instances_used << ", memory utilisation: " << util
            << "\n";
  if (r.gpus_kept)
    std::cout << "GPUs keeping their current layout: " << *r.gpus_kept << ", to reconfigure: " << r.gpus_used - *r.gpus_kept
              << "\n";
  for (const auto& b : r.baselines)
    std::cout << "baseline " << b.name << ": "
              << (b.gpus        ? counted(*b.gpus, "GPU")
                  : b.timed_out ? "no plan found within the time limit"
                                : "cannot hold these services")
              << "\n";
}

bool write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) std::cerr << "tessera plan: cannot write " << path.string() << ": " << std::strerror(errno) << "\n";
  return bool(out);
}

// The files a plan writes into --output-dir; an earlier plan's device-plugin-*.yaml that this
// one does not write (a kind of node it no longer has) is removed, so that the directory holds
// this plan only. Nothing else there is touched.
bool write_outputs(const PlanArgs& args, const planner::Problem& problem, const planner::Plan& plan,
                   const planner::Report& report) {
  std::error_code ec;
  if (!args.out_dir.empty()) {
    std::filesystem::create_directories(args.out_dir, ec);
    if (ec) {
      std::cerr << "tessera plan: cannot create " << args.out_dir << ": " << ec.message() << "\n";
      return false;
    }
  }
  // After the output directory, so that --svg may name a file inside it.
  if (!args.svg.empty() && !write_file(args.svg, planner::render_svg(problem, plan))) return false;
  if (args.out_dir.empty()) return true;
  std::filesystem::path dir(args.out_dir);
  auto nodes = planner::assign_nodes(problem, plan, args.gpus_per_node);
  const auto configs = planner::device_plugin_configs(problem, plan, nodes);
  bool ok = write_file(dir / "plan.yaml", planner::render_plan(problem, plan, nodes)) &&
            write_file(dir / "mig-parted.yaml", planner::render_mig_parted(problem, nodes)) &&
            write_file(dir / "nodes.yaml", planner::render_node_map(problem, nodes)) &&
            write_file(dir / "deployments.yaml", planner::render_deployments(problem, plan)) &&
            write_file(dir / "report.json", report_json(report).dump(2) + "\n");
  std::set<std::string> written;
  for (const auto& [name, text] : configs) {
    written.insert("device-plugin-" + name + ".yaml");
    ok = ok && write_file(dir / ("device-plugin-" + name + ".yaml"), text);
  }
  std::vector<std::filesystem::path> stale;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string f = e.path().filename().string();
    if (f.starts_with("device-plugin-") && f.ends_with(".yaml") && !written.contains(f)) stale.push_back(e.path());
  }
  for (const auto& f : stale)
    if (std::filesystem::remove(f, ec))
      std::cerr << "tessera plan: removed " << f.string() << ", an earlier plan's: no node of this plan takes that config\n";
  for (const auto& n : nodes)
    for (uint32_t g : n.mixed_sharing)
      std::cerr << "tessera plan: note: GPU " << g << " (" << n.name << ") holds time-sliced and MPS slices; a node's "
                << "device plugin shares one way, so its config (" << n.device_plugin_config
                << ") shares them all through MPS\n";
  return ok;
}

int run_plan(const PlanArgs& args) {
  const auto& catalog = Catalog::builtin();
  // The command line first: an unknown --gpu is a usage error whatever the file holds.
  const GpuModel* model = find_gpu_model("tessera plan", args.gpu.empty() ? "A100-SXM4-80GB" : args.gpu, std::cerr);
  if (!model) return kExitUsage;
  config::Diagnostics diags;
  auto spec = config::load_fleet_spec(args.file, catalog, diags);
  if (!spec) {
    print_diagnostics(diags, std::cerr);
    return kExitInvalid;
  }
  if (spec->fleet.empty()) {  // a CSV of services: the fleet comes from --gpu
    spec->fleet.push_back({model, {spec->file, 0, 0}, "--gpu", std::nullopt, {}});
  } else if (!args.gpu.empty()) {
    std::cerr << "tessera plan: --gpu applies to a CSV of services; " << args.file << " names its fleet\n";
    return kExitUsage;
  }
  auto problem = planner::build_problem(*spec, {}, diags);
  if (!problem) {
    print_diagnostics(diags, std::cerr);
    return kExitInvalid;
  }
  planner::SolverOptions options;
  options.mode = args.mode == "exact" ? planner::Mode::exact : args.mode == "fast" ? planner::Mode::fast : planner::Mode::automatic;
  options.seconds = args.time_limit;
  const auto started = std::chrono::steady_clock::now();
  auto solved = [&] {
    Progress progress("tessera plan: solving", args.time_limit);
    return planner::solve(*problem, options);
  }();
  if (!solved) {
    if (solved.error().code == Errc::validation) std::cerr << solved.error().message << "\n";  // names file, line, field
    else std::cerr << "tessera plan: " << spec->file << ": " << solved.error().message
                   << (solved.error().code == Errc::timeout && options.mode != planner::Mode::fast
                           ? "; or use --mode fast (LP rounding for large inputs, with its gap to the bound)"
                           : "")
                   << "\n";
    return kExitInvalid;
  }
  auto plan = planner::build_plan(*problem, solved->counts);
  if (auto ok = planner::check_plan(*problem, plan); !ok) {
    std::cerr << "tessera plan: internal error, the plan breaks a rule: " << ok.error().message << "\n";
    return kExitInvalid;
  }
  // --time-limit bounds the whole run: the two solved baselines (all-1g,
  // all-balanced) share what the plan left (10 s each at most), and report a
  // time-out rather than run past it.
  planner::SolverOptions baseline_options = options;
  const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  baseline_options.seconds = std::clamp((args.time_limit - spent) / 2, 0.001, 10.0);
  auto baselines = args.no_baselines ? std::vector<planner::Baseline>{} : planner::compute_baselines(*spec, baseline_options);
  auto report = planner::make_report(*problem, *solved, plan, std::move(baselines));
  if (!write_outputs(args, *problem, plan, report)) return kExitInvalid;
  if (args.json) std::cout << report_json(report).dump(2) << "\n";
  else print_report(*problem, plan, report);
  return kExitOk;
}

}  // namespace

void add_plan_command(CLI::App& app, int& exit_code) {
  auto args = std::make_shared<PlanArgs>();
  auto* plan = app.add_subcommand(
      "plan",
      "Decide how to cut each GPU (MIG layout, MPS or time-sliced shares) and how many GPUs a set of services\n"
      "needs, with the lower bound that proves how good the plan is. Reads a fleet spec (YAML) or a CSV of\n"
      "services (then --gpu names the model). Writes the plan, a mig-parted config with a node map, NVIDIA\n"
      "device-plugin configs and Deployments with --output-dir.");
  plan->add_option("-f,--file", args->file, "Fleet spec (YAML), or CSV of services ('-' for standard input)")->required();
  plan->add_option("--output-dir", args->out_dir, "Write plan.yaml, mig-parted.yaml, nodes.yaml, device-plugin-*.yaml, "
                                                  "deployments.yaml and report.json here");
  plan->add_flag("--json", args->json, "Print the report as JSON");
  plan->add_option("--svg", args->svg, "Draw the GPUs and their instances to this SVG file");
  plan->add_option("--mode", args->mode, "exact (CBC, proves the optimum), fast (LP rounding, for large inputs), auto")
      ->check(CLI::IsMember({"exact", "fast", "auto"}));
  plan->add_option("--gpu", args->gpu, "GPU model for a CSV of services (default A100-SXM4-80GB)");
  plan->add_option("--time-limit", args->time_limit, "Seconds the solver may take, 0.001 to 3600 (then: the best plan found and its bound)")
      ->check(CLI::Range(0.001, 3600.0));
  plan->add_option("--gpus-per-node", args->gpus_per_node, "GPUs per node in the node map (nodes.yaml): a node's config cuts each of its GPUs its way; a\n"
                   "tensor-parallel replica's GPUs stay on one node")->check(CLI::Range(1, 64));
  plan->add_flag("--no-baselines", args->no_baselines, "Skip the baselines (faster on large inputs)");
  plan->callback([args, &exit_code] { exit_code = run_plan(*args); });
}

}  // namespace tessera::cli
