// What the device plugin needs of the MPS control daemons, wherever they run
// (docs/design-mps.md): say which daemons it wants, learn their health when
// it changes, never wait on a daemon. Two implementations:
//   - Supervisor (supervisor.hpp): the daemons are children of this process
//     (`tessera plugin --mps-control`, and inside `tessera mps-host`); they end
//     with it;
//   - HostClient (host.hpp): the daemons belong to `tessera mps-host`, a
//     process of their own on the node, reached through a unix socket; they
//     outlive the plugin, which adopts them when it starts again.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "mps/control.hpp"

namespace tessera::mps {

struct DaemonSpec {
  std::string uuid;                        // GPU or MIG UUID: the daemon's CUDA_VISIBLE_DEVICES
  std::string resource;                    // the resource whose shares it serves (for messages)
  Dirs dirs;                               // its pipe and log directories
  std::uint64_t pinned_mem_limit_mib = 0;  // per client; 0: leave the daemon's default
  std::uint32_t active_thread_percentage = 100;
  bool multi_user = false;                 // started with -M: one server for clients of every user
  bool operator==(const DaemonSpec&) const = default;
};

struct DaemonStatus {
  DaemonSpec spec;        // the daemon as wanted (its limits: the last ones asked for)
  bool up = false;        // started, limits set, answering
  pid_t pid = -1;         // the control daemon, a child of its supervisor; -1 when none
  std::string since;      // when it came up (local time, ISO 8601), empty when down
  unsigned failures = 0;  // failed starts and checks in a row
  std::int64_t retry_in_ms = 0;  // when down: the backoff before the next start
  std::string error;      // when down: why
  std::string limits;     // what the daemon answers for its limits, read back, e.g. "20357M, 25.0%"
  int clients = -1;       // clients of its servers when last counted (-1: not counted)
  std::string note;       // what the last limit change did and could not do
  bool operator==(const DaemonStatus&) const = default;
};

class Daemons {
 public:
  virtual ~Daemons() = default;
  // The daemons wanted from now on (replacing the previous list). Returns at
  // once: starting, changing and stopping daemons happens elsewhere.
  virtual void want(std::vector<DaemonSpec> wanted) = 0;
  // Every wanted daemon's state.
  virtual std::vector<DaemonStatus> status() const = 0;
  // Devices whose wanted daemon is up (with the wanted directories).
  virtual std::set<std::string> up() const = 0;
  // Readable when status() changed; drain() empties it. For a poll loop.
  virtual int changed_fd() const = 0;
  virtual void drain() = 0;
  // The owner is going away. Supervisor: stops every daemon. HostClient:
  // disconnects and leaves them running.
  virtual void shutdown() = 0;
  // Where the daemons run, for messages.
  virtual std::string where() const = 0;
};

// An eventfd that says "something changed" to a poll loop.
class Notifier {
 public:
  Notifier();
  ~Notifier();
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;
  void notify() const;
  void drain() const;
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// Local time now as "2026-12-02T10:11:12".
std::string local_time_now();

}  // namespace tessera::mps
