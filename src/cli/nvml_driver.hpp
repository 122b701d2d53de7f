// Which NVML a command talks to: the system's libnvidia-ml.so.1, a library
// named with --nvml-library, or the simulator's with --sim DIR (a node made
// by `tessera sim create`). Also the simulator's control entry point, which
// `tessera sim` uses to drive a node.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.hpp"
#include "nvml/session.hpp"
#include "sharing/cdi.hpp"

namespace tessera::cli {

struct DriverOptions {
  std::string sim;           // a simulated node's directory
  std::string nvml_library;  // an NVML library to load instead of the system's
};

// Adds --sim (env TESSERA_SIM) and --nvml-library (env TESSERA_NVML_LIBRARY).
void add_driver_options(CLI::App& command, DriverOptions& options);

// The simulator library: TESSERA_SIM_LIBRARY, else the one built beside this
// program (<dir of the executable>/../sim/nvml/libnvidia-ml.so.1).
std::string simulator_library_path();

// Loads the chosen library and initialises NVML. Without a driver the error
// is one line that says so and how to use --sim.
[[nodiscard]] Result<nvml::Session> open_nvml(const DriverOptions& options);

// `path` as the host sees it: a path under the container's mount of the
// driver root (container_root, other than /) moved under host_root; any other
// path as it is.
std::string host_path_of(const std::string& path, const std::string& host_root, const std::string& container_root);

// The memory hook's settings (sharing::MemoryHook) for a hook installed at
// `path` (empty: off): it loads the NVML this command uses (--nvml-library,
// else the simulator's under --sim, else the driver root's where that is not
// /, else the system's), by its host path when it is under the container's
// driver root, and the simulated node's directory under --sim.
sharing::MemoryHook memory_hook_settings(const std::string& path, const DriverOptions& options,
                                         const std::string& host_driver_root, const std::string& container_driver_root);

// The directory of an NVML library named by its path (--nvml-library,
// TESSERA_NVML_LIBRARY: the driver root's library directory when no NVIDIA
// runtime put the driver on the loader's path), where the MPS daemons' servers
// find libcuda.so.1 (mps::ControlOptions::library_dir). Empty otherwise.
std::string driver_library_dir(const std::string& nvml_library);

// Adds --memory-hook to a command that serves memory shares.
void add_memory_hook_option(CLI::App& command, std::string& path);
// --cdi-hook PATH: tessera-cdi-hook's host path, named by every CDI spec's
// createContainer hooks (sharing::driver_hooks).
void add_cdi_hook_option(CLI::App& command, std::string& path);

// Sends one request to the simulator library's control entry point.
[[nodiscard]] Result<nlohmann::json> sim_control(const nlohmann::json& request);

}  // namespace tessera::cli
