// tessera: plan, apply, expose, isolate and measure shares of NVIDIA GPUs on
// Kubernetes. This is the command-line entry point.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/commands.hpp"
#include "cli/output.hpp"

int main(int argc, char** argv) {
  CLI::App app{
      "tessera: share NVIDIA GPUs between inference services on Kubernetes.\n"
      "Plans MIG layouts, applies mig-parted configs, serves GPUs, MIG instances and\n"
      "shared replicas to the kubelet, and checks the configs you already have.",
      "tessera"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "tessera " TESSERA_VERSION, "Print tessera's version and exit");
  app.footer("Run `tessera COMMAND --help` for a command's options. Exit codes: 0 ok, 1 invalid input or failure, 2 usage.");
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "Log level: trace, debug, info, warn, error, off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}))
      ->envname("TESSERA_LOG_LEVEL");
  app.parse_complete_callback([&] { spdlog::set_level(spdlog::level::from_str(log_level)); });
  // Commands (made after this) pass options they lack up to here, so
  // `tessera plugin --log-level info` works as well as `tessera --log-level info plugin`.
  app.fallthrough();
  spdlog::set_default_logger(spdlog::stderr_color_mt("tessera"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");

  int exit_code = tessera::cli::kExitOk;
  tessera::cli::add_catalog_command(app, exit_code);
  tessera::cli::add_mig_command(app, exit_code);
  tessera::cli::add_config_command(app, exit_code);
  tessera::cli::add_inventory_command(app, exit_code);
  tessera::cli::add_sim_command(app, exit_code);
  tessera::cli::add_plan_command(app, exit_code);
  tessera::cli::add_plugin_command(app, exit_code);
  tessera::cli::add_pods_command(app, exit_code);
  tessera::cli::add_exporter_command(app, exit_code);
  tessera::cli::add_node_command(app, exit_code);
  tessera::cli::add_mps_host_command(app, exit_code);
  tessera::cli::add_fleet_command(app, exit_code);
  tessera::cli::add_dra_command(app, exit_code);
  tessera::cli::add_alerts_command(app, exit_code);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return tessera::cli::kExitUsage;
  }
  return exit_code;
}
