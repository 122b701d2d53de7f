// A simulated `nvidia-cuda-mps-control`: the MPS control daemon and its
// command-line client, for testing tessera's MPS supervisor through the path
// it takes on a node. It shares no code with the product.
//
// Facts about the real tool this follows (sources in brackets; README.md has
// the list of what is the simulator's own choice):
//  - `-d` starts the control daemon in the background, `-f` in the foreground;
//    `echo quit | nvidia-cuda-mps-control` shuts it down. [MPS docs, "Appendix:
//    Tools and Interface Reference" and "Legacy MPS v2 Interface"]
//  - `-M` (with -d or -f): multi-user, one server shared by clients of
//    different user ids. [dra-driver-nvidia-gpu mps-control-daemon.tmpl.yaml,
//    MpsConfig.MultiUser, PR #1153]
//  - Without arguments it is the interactive client: commands on stdin, one per
//    line, among them get_server_list, start_server -uid <uid>,
//    set_default_active_thread_percentage <percentage>,
//    get_default_active_thread_percentage, set_default_device_pinned_mem_limit
//    <dev> <value>, get_default_device_pinned_mem_limit <dev>, quit, and per
//    server get_client_list <PID>, set_/get_active_thread_percentage <PID>,
//    set_/get_device_pinned_mem_limit <PID> <dev>. The defaults "only affect
//    the next server"; a server's own limits reach "all clients created with
//    that server afterwards. Existing clients are not affected."
//    [same pages; k8s-device-plugin cmd/mps-control-daemon/mps/daemon.go]
//  - NVIDIA's device plugin runs `nvidia-cuda-mps-control -d` (it returns once
//    the daemon is up) with only CUDA_MPS_PIPE_DIRECTORY and
//    CUDA_MPS_LOG_DIRECTORY set, creates both directories itself first, writes
//    each command to the client's stdin without a trailing newline and closes
//    it, judges success by the exit status, sets limits as
//    `set_default_device_pinned_mem_limit <index> <N>M`, checks health with
//    `get_default_active_thread_percentage`, stops with `quit`, and tails
//    `<log dir>/control.log`. [k8s-device-plugin daemon.go]
//  - Memory limits are set by device index (the device plugin found UUIDs not
//    applied, PR #572); the DRA driver passes a UUID with CUDA_VISIBLE_DEVICES
//    set to it (dra-driver-nvidia-gpu PR #11). With CUDA_VISIBLE_DEVICES set
//    before the daemon starts, devices are renumbered from 0 in that order;
//    UUIDs (or their leading characters) are recommended. [MPS docs, "Appendix:
//    Environment Variables"]
//  - Defaults: pipe directory /tmp/nvidia-mps, log directory
//    /var/log/nvidia-mps. The daemon writes nvidia-cuda-mps-control.pid (its
//    pid) in the pipe directory; its socket there is `control`. [MPS docs,
//    CUDA_MPS_PIPE_DIRECTORY, CUDA_MPS_LOG_DIRECTORY, Tools reference; log
//    excerpts in k8s-device-plugin PR #575]
//  - control.log holds startup and shutdown notices, every command and its
//    result; lines look like `[2024-03-13 19:24:23.903 Control    98] NEW UI`
//    (pid right-aligned in 5 columns). Startup: "Starting control daemon using
//    socket <pipe>/control", "To connect CUDA applications to this daemon, set
//    env CUDA_MPS_PIPE_DIRECTORY=<pipe>", "CUDA MPS Control binary version: N".
//    A client session: "Accepting connection...", "NEW UI", "Cmd:<command>",
//    the reply lines (e.g. "10.0"), "UI closed". quit: "Cmd:quit", "Exit with
//    status 0". Servers: "Starting new server <pid> for user <uid>", "NEW
//    SERVER <pid>: Ready", "Server <pid> exited with status <n>". [MPS docs,
//    "Appendix: Logging" and "Control Log"; k8s-device-plugin PR #575 and
//    issue #764; dra-driver-nvidia-gpu PR #1153]
//  - get_default_active_thread_percentage answers with one decimal ("10.0");
//    the default is 100. [k8s-device-plugin PR #575; the ECS NvidiaMpsAllocation
//    reference]
//  - A client with no daemon prints "Cannot find MPS control daemon process".
//    [globus-labs/mof-generation-at-scale issue #29]
//  - Limit values carry a unit: "1G", "512MB", "4606M". [MPS docs,
//    CUDA_MPS_PINNED_DEVICE_MEM_LIMIT example "0=1G,1=512MB"; device plugin]
#include <cstring>
#include <iostream>
#include <string>

#include "daemon.hpp"

int main(int argc, char** argv) {
  auto paths = tessera_mps_sim::paths_from_env();
  if (argc == 1) return tessera_mps_sim::run_client(paths);
  std::string arg = argv[1];
  // `-d` or `-f`, with `-M` (multi-user: one server for clients of every user) before or after.
  if (argc == 2 || argc == 3) {
    std::string mode = arg, other = argc == 3 ? argv[2] : "";
    if (mode == "-M" && argc == 3) std::swap(mode, other);
    if ((mode == "-d" || mode == "-f") && (other.empty() || other == "-M"))
      return tessera_mps_sim::start_daemon(paths, mode == "-d", other == "-M");
  }
  if (argc == 2 && arg == "--tessera-sim-client") return tessera_mps_sim::run_sim_client(paths);
  if (argc == 2 && (arg == "-h" || arg == "--help")) {
    std::cout << "Usage: nvidia-cuda-mps-control [-d | -f] [-M]\n"
                 "  -d  start the control daemon in the background\n"
                 "  -f  start the control daemon in the foreground\n"
                 "  -M  multi-user: one server takes clients of every user\n"
                 "  (no option: read commands from stdin and send them to the daemon)\n"
                 "  --tessera-sim-client  the simulator's stand-in for a CUDA program: connect as an MPS\n"
                 "      client (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT), print\n"
                 "      its limits, stay connected until SIGTERM or until the daemon goes\n"
                 "This is tessera's simulator of the MPS control program (sim/mps/README.md).\n";
    return 0;
  }
  std::cerr << "nvidia-cuda-mps-control: unsupported option " << arg << " (the simulator knows -d, -f)\n";
  return 1;
}
