// The simulated control daemon: start-up (checks, single instance, socket),
// its event loop, and the client side of the simulator's own transport.
#pragma once

#include <string>

namespace tessera_mps_sim {

struct Paths {
  std::string pipe_dir, log_dir;
};

// CUDA_MPS_PIPE_DIRECTORY / CUDA_MPS_LOG_DIRECTORY, or the real defaults.
Paths paths_from_env();

// `-d` (background) or `-f` (foreground). Returns the process's exit code.
int start_daemon(const Paths& paths, bool background, bool multi_user = false);

// No arguments: commands from stdin to the daemon, replies to stdout.
int run_client(const Paths& paths);

// `--tessera-sim-client`: a stand-in for a CUDA program under MPS. Connects to
// the daemon, which starts a server for its user if there is none; prints the
// limits it got; stays connected until SIGTERM/SIGINT (exit 0) or until the
// daemon or its server goes (exit 1).
int run_sim_client(const Paths& paths);

}  // namespace tessera_mps_sim
