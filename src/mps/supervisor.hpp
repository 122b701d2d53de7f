// One supervised MPS control daemon per GPU or MIG device that has MPS shares
// (docs/design-mps.md). Each daemon has a worker thread of its own, which
//   - starts it in the foreground (`nvidia-cuda-mps-control -f`,
//     CUDA_VISIBLE_DEVICES = the device's UUID) in its pipe and log
//     directories, so the daemon is this process's child, waits until it
//     answers, then sets its default per-client limits and reads them back:
//     `set_default_device_pinned_mem_limit 0 <MiB>M` (the device is ordinal 0
//     for a daemon that sees only it) and `set_default_active_thread_percentage`;
//   - sees it exit through its pidfd the moment it does (no polling), and
//     checks that it still answers every `check_interval` with a deadline of
//     its own: a hung daemon delays nothing but itself;
//   - restarts one that died or stopped answering after a backoff doubling
//     from `backoff_min` to `backoff_max`, killing a hung one first through
//     its pidfd: the only process it ever signals is the child it started;
//   - applies new limits to a running daemon without quitting it: the
//     defaults for servers to come, and each running server's own limits for
//     the clients that connect to it afterwards (NVIDIA: "Existing clients are
//     not affected"), and says how many clients keep their old limits;
//   - stops it with `quit`, then through its pidfd if it is still there.
// want() and status() never wait on a daemon. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "mps/daemons.hpp"

namespace tessera::mps {

using Clock = std::chrono::steady_clock;

struct SupervisorOptions {
  ControlOptions control;
  std::chrono::milliseconds check_interval{2000};  // "still answering?" (a death needs no check)
  std::chrono::milliseconds backoff_min{1000};
  std::chrono::milliseconds backoff_max{60000};
  std::chrono::milliseconds quit_grace{2000};      // after `quit`, before the kill
};

class Supervisor final : public Daemons {
 public:
  explicit Supervisor(SupervisorOptions options);
  ~Supervisor() override;  // stop()
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  void want(std::vector<DaemonSpec> wanted) override { set(std::move(wanted), false); }
  // The same; with `verify_kept`, daemons kept as they are have their limits
  // read back again (and set again when they differ) and their clients
  // counted: what an adopting client asks for.
  void set(std::vector<DaemonSpec> wanted, bool verify_kept);
  std::vector<DaemonStatus> status() const override;
  std::set<std::string> up() const override;
  std::set<std::string> down() const;  // wanted, not up
  int changed_fd() const override { return changed_.fd(); }
  void drain() override { changed_.drain(); }
  void shutdown() override { stop(); }
  std::string where() const override { return "this process"; }

  // Stops every daemon (in parallel; each: quit, then killed) and waits for
  // them. Idempotent.
  void stop();

  // One daemon's state; a down one with an empty spec when unknown.
  DaemonStatus status(const std::string& uuid) const;
  bool healthy(const std::string& uuid) const { return status(uuid).up; }

  class Worker;

 private:
  void reap_retired();  // joins the workers that finished stopping their daemons

  SupervisorOptions options_;
  Notifier changed_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<Worker>> workers_;  // wanted, by device UUID
  std::vector<std::shared_ptr<Worker>> retired_;           // stopping their daemons
};

}  // namespace tessera::mps
