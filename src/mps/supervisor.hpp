// One supervised MPS control daemon per GPU or MIG device that has MPS shares
// (docs/design-mps.md). The supervisor
//   - starts each daemon (`nvidia-cuda-mps-control -d`, CUDA_VISIBLE_DEVICES =
//     the device's UUID) in its own pipe and log directories under mpsRoot,
//     then sets its default per-client limits through the control interface:
//     `set_default_device_pinned_mem_limit 0 <MiB>M` (the device is ordinal 0
//     for a daemon that sees only it) and `set_default_active_thread_percentage`;
//   - checks each daemon on an interval (`get_default_active_thread_percentage`
//     must answer within the timeout) and restarts one that died or stopped
//     answering, with backoff doubling from `backoff_min` to `backoff_max`
//     (a hung daemon is killed first, by the pid it wrote, never by name);
//   - stops daemons with `quit` when their device leaves the wanted set (a
//     config change) and all of them on stop().
// Time comes in through tick(now): no sleeps, no thread of its own. Not
// thread-safe: one owner calls set, tick, healthy and stop.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "mps/control.hpp"

namespace tessera::mps {

using Clock = std::chrono::steady_clock;

struct DaemonSpec {
  std::string uuid;                       // GPU or MIG UUID: the daemon's CUDA_VISIBLE_DEVICES
  std::string resource;                   // the resource whose shares it serves (for messages)
  Dirs dirs;                              // its pipe and log directories
  std::uint64_t pinned_mem_limit_mib = 0;  // per client; 0: leave the daemon's default
  std::uint32_t active_thread_percentage = 100;
  bool operator==(const DaemonSpec&) const = default;
};

struct SupervisorOptions {
  ControlOptions control;
  std::chrono::milliseconds check_interval{2000};
  std::chrono::milliseconds backoff_min{1000};
  std::chrono::milliseconds backoff_max{60000};
};

class Supervisor {
 public:
  explicit Supervisor(SupervisorOptions options) : options_(std::move(options)) {}
  ~Supervisor();  // stop()
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // The daemons wanted from now on: those no longer wanted (or wanted with
  // other directories or limits) are stopped; new ones start at the next tick.
  void set(std::vector<DaemonSpec> wanted);
  // Starts what is due, checks what is up, restarts what died (after its
  // backoff). Returns true when any daemon's health changed.
  bool tick(Clock::time_point now);
  // Whether the daemon for `uuid` is up and answering (false for unknown ones).
  bool healthy(const std::string& uuid) const;
  // Devices whose daemon is wanted but not up, and those up.
  std::set<std::string> down() const;
  std::set<std::string> up() const;
  // The last error of `uuid`'s daemon, empty when up.
  std::string last_error(const std::string& uuid) const;
  // Failed starts and checks in a row (0 when up or unknown).
  unsigned failures(const std::string& uuid) const;
  // Stops every daemon (quit; killed if it does not go). Idempotent.
  void stop();

 private:
  struct Daemon {
    DaemonSpec spec;
    bool up = false;
    Clock::time_point next{};  // the next start attempt or check
    std::chrono::milliseconds backoff{0};
    unsigned failures = 0;
    std::string error;
  };
  // Brings one daemon up: directories, -d, limits. Error says what failed.
  Result<void> start(const DaemonSpec& spec);
  void quit(const DaemonSpec& spec);
  void failed(Daemon& d, Clock::time_point now, const std::string& why);

  SupervisorOptions options_;
  std::map<std::string, Daemon> daemons_;  // by device UUID
};

}  // namespace tessera::mps
