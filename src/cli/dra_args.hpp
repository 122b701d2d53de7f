// The DRA driver's options, shared by `tessera dra` and `tessera node --mode dra`.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "cli/kube_args.hpp"
#include "cli/nvml_driver.hpp"
#include "sharing/allocate.hpp"
#include "mps/host.hpp"
#include "sharing/dra.hpp"

namespace tessera::cli {

struct DraArgs {
  DriverOptions nvml;
  KubeArgs kube;
  std::string driver_name = sharing::dra::kDefaultDriver;
  std::string node_name;
  std::string kubelet_dir = "/var/lib/kubelet";
  std::string state_dir;  // default: <kubelet dir>/plugins/<driver>
  std::string order = "tessera";
  bool memory_shares = false;
  std::string consumable_shares;  // NVIDIA's --consumable-shares: memory, unlimited or N
  bool no_mig_mode_switch = false;
  std::string cdi_spec_dir = "/var/run/cdi";
  std::string driver_root = "/";
  std::string dev_root;
  std::string container_driver_root = "/driver-root";
  std::string cdi_hook;  // --cdi-hook: host path of tessera-cdi-hook
  sharing::QuotaLibrarySettings quota;
  bool no_quota_library = false;
  std::string memory_hook;  // tessera-memory-hook's host path; empty: no driver backend
  double recovery_seconds = 60;
  std::vector<uint64_t> ignored_xids{13, 31, 43, 45, 68, 109};
  double resync_seconds = 30;
  std::string mps_root = "/run/nvidia/mps";
  std::string mps_control = "nvidia-cuda-mps-control";
  std::string nvidia_smi = "nvidia-smi";
  std::string sysfs = "/sys";
  std::string mps_host;  // `tessera mps-host`'s socket: the daemons are its
  double mps_timeout_seconds = 15;
  std::string metrics_listen;  // HOST:PORT of /metrics and /healthz; empty: none
};

// Adds the driver's own options; with `with_common` also those `tessera node`
// has under the device plugin's names (NVML, API server, Node, directories,
// quota library, health), which `tessera node --mode dra` maps over.
void add_dra_options(CLI::App& cmd, DraArgs& args, bool with_common);

// Runs the driver until SIGTERM or SIGINT; the exit code.
int run_dra(const DraArgs& args);

}  // namespace tessera::cli
