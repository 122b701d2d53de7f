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
// The first line a simulated CUDA client sends on the simulator's socket
// (`nvidia-cuda-mps-control --tessera-sim-client`), then its
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT, "-"
// for an unset one, and its pid as it sees it. Not a control command: the real CUDA driver speaks a
// protocol of its own to the daemon.
inline constexpr const char* kClientHello = "TESSERA-SIM-CLIENT";

struct Limit {
  std::string text;         // as given, e.g. "2G"
  std::uint64_t bytes = 0;  // what it means
};

// An MPS server takes the daemon's defaults when it starts ("If there is
// already a server spawned, this command will only affect the next server");
// set_active_thread_percentage / set_device_pinned_mem_limit <PID> change them
// for the clients that connect afterwards ("Existing clients are not affected").
struct Server {
  int pid = 0;
  long uid = 0;
  double thread_percentage = 100.0;
  std::map<std::string, Limit> pinned_mem_limits;  // by device as given
};

// A client connected through the simulator's transport (`--tessera-sim-client`,
// standing for a CUDA program): the limits it got when it connected, from its
// server's and its own CUDA_MPS_* variables (which can lower them, not raise them).
struct Client {
  long id = 0;            // the daemon's own number for it
  int pid = 0;            // as the daemon sees it (SO_PEERCRED; 0 from another pid namespace)
  int reported_pid = 0;   // as the client says, in its own pid namespace
  long uid = 0;
  int server = 0;
  double thread_percentage = 100.0;
  std::map<std::string, Limit> pinned_mem_limits;
  std::string connected_at;
};

struct State {
  int pid = 0;
  std::string pipe_dir, log_dir, started_at;
  std::optional<std::string> cuda_visible_devices;  // as the daemon got it
  std::optional<std::string> ld_library_path;       // as the daemon got it
  std::vector<std::string> visible;                 // its comma-separated entries
  double thread_percentage = 100.0;
  bool thread_percentage_set = false;
  std::map<std::string, Limit> pinned_mem_limits;  // by device as given
  std::vector<Server> servers;
  std::vector<Client> clients;
  std::vector<std::string> commands;  // every command line received, in order
  bool hang = false;                  // TESSERA_SIM_MPS_HANG at start
  bool multi_user = false;            // started with -M
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

// The limits a client of `server` gets, given its own CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
// and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT ("0=1G,1=512MB"; empty when unset): the
// server's, lowered by the client's where they are lower.
Client client_limits(const Server& server, const std::string& threads, const std::string& pinned);

// "1.0" style: the form get_*_active_thread_percentage answers in.
std::string one_decimal(double v);

// "<digits><unit>[B]" with unit K, M, G or T (powers of 1024); nullopt when malformed.
std::optional<std::uint64_t> parse_mem_value(const std::string& text);

// The state as the test hook's JSON document.
std::string to_json(const State& state);

}  // namespace tessera_mps_sim
