// The subcommands of `tessera`: each adds itself to the parser and returns
// the exit code through `exit_code` when it ran.
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdint>

namespace tessera::cli {

// A flag given in seconds (fractions allowed), as a duration.
inline std::chrono::milliseconds millis(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

void add_catalog_command(CLI::App& app, int& exit_code);
void add_mig_command(CLI::App& app, int& exit_code);
void add_mig_apply_commands(CLI::App& mig, int& exit_code);  // tessera mig plan / apply
void add_config_command(CLI::App& app, int& exit_code);
void add_inventory_command(CLI::App& app, int& exit_code);  // tessera inventory
void add_sim_command(CLI::App& app, int& exit_code);        // tessera sim ...
void add_plan_command(CLI::App& app, int& exit_code);       // tessera plan
void add_plugin_command(CLI::App& app, int& exit_code);     // tessera plugin
void add_pods_command(CLI::App& app, int& exit_code);       // tessera pods
void add_exporter_command(CLI::App& app, int& exit_code);   // tessera exporter
void add_alerts_command(CLI::App& app, int& exit_code);     // tessera alerts
void add_node_command(CLI::App& app, int& exit_code);       // tessera node
void add_mps_host_command(CLI::App& app, int& exit_code);   // tessera mps-host
void add_fleet_command(CLI::App& app, int& exit_code);      // tessera fleet plan / run
void add_dra_command(CLI::App& app, int& exit_code);        // tessera dra

}  // namespace tessera::cli
