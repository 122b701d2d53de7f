// The simulated MPS control daemon's state and its command interpreter.
// Everything here is the simulator's own; the facts about the real
// nvidia-cuda-mps-control it follows are listed in main.cpp and README.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera_mps_sim {

// Names of the simulator's files in the pipe directory. The real daemon keeps
// a unix socket `control` and `nvidia-cuda-mps-control.pid` there (plus the
// servers' pipes); the simulator writes the pid file as the real one does but
// never a file named `control`, so nothing mistakes it for a real daemon.
inline constexpr const char* kSocketName = "tessera-sim-mps.sock";
inline constexpr const char* kLockName = "tessera-sim-mps.lock";
inline constexpr const char* kStateName = "tessera-sim-mps.json";
inline constexpr const char* kHangFileName = "tessera-sim-mps.hang";
inline constexpr const char* kPidFileName = "nvidia-cuda-mps-control.pid";

struct Limit {
  std::string text;         // as given, e.g. "2G"
  std::uint64_t bytes = 0;  // what it means
};

struct Server {
  int pid = 0;
  long uid = 0;
};

struct State {
  int pid = 0;
  std::string pipe_dir, log_dir, started_at;
  std::optional<std::string> cuda_visible_devices;  // as the daemon got it
  std::vector<std::string> visible;                 // its comma-separated entries
  double thread_percentage = 100.0;
  bool thread_percentage_set = false;
  std::map<std::string, Limit> pinned_mem_limits;  // by device as given
  std::vector<Server> servers;
  std::vector<std::string> commands;  // every command line received, in order
  bool hang = false;                  // TESSERA_SIM_MPS_HANG at start
  bool running = true;
  std::optional<long> quit_timeout;  // `quit -t T`
};

struct Outcome {
  std::vector<std::string> reply;      // lines printed by the client
  bool quit = false;                   // the daemon shuts down after replying
  std::optional<long> start_server;    // uid of a server to start
};

// Runs one command line against `state` (a server start is left to the caller).
Outcome execute(State& state, const std::string& line);

// "<digits><unit>[B]" with unit K, M, G or T (powers of 1024); nullopt when malformed.
std::optional<std::uint64_t> parse_mem_value(const std::string& text);

// The state as the test hook's JSON document.
std::string to_json(const State& state);

}  // namespace tessera_mps_sim
