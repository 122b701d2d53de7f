// Removing quota ledgers no container holds (docs/design-memory-quotas.md §4):
// <ledger root>/<key> directories whose key no container the kubelet lists
// (pod-resources) holds, once they are old enough that an Allocate the
// kubelet has not recorded yet cannot be theirs. The decision rests on the
// directory names the plugin made, on pod-resources and on the kernel's lock
// table: a ledger a live process holds (its slot lock) is kept, because
// pod-resources omits non-restartable init containers. Nothing a container
// writes into its mounts (its ledger's contents) is read, so no container can
// make the plugin act on another's files; a container can only keep its own
// ledger, as it does by running.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "plugin/pod_resources.hpp"

namespace tessera::plugin {

// The ledger keys of every container's resources in `pods`
// (sharing::ledger_key over each resource's ids).
std::set<std::string> held_ledger_keys(const std::vector<PodDevices>& pods);

// Whether `name` can be a ledger key: at most 48 of [A-Za-z0-9._-], '-', 16
// lowercase hex digits (sharing::ledger_key's shape).
bool is_ledger_key(const std::string& name);

struct LedgerSweep {
  std::vector<std::string> removed;  // keys
  std::vector<std::string> young;    // stale keys left for now: changed within `grace`
  std::vector<std::string> in_use;   // unlisted keys a live process still holds (its slot lock)
  std::vector<std::string> errors;   // "<path>: <why>"
};

// Removes each directory of `root` named like a ledger key that `held` does
// not list, whose ledger no live process holds, and that was last changed
// (mtime) more than `grace` before `now`,
// with its files; symlinks are never followed (one is removed as a link, and
// a directory is entered only by a descriptor opened without following).
// Anything else in `root` (the preload list, other names) is left alone.
// With `cdi_spec_dir`, a removed ledger's own CDI spec (the memory hook's,
// sharing::quota_cdi_file) goes with it.
LedgerSweep remove_stale_ledgers(const std::string& root, const std::set<std::string>& held,
                                 std::chrono::system_clock::time_point now, std::chrono::seconds grace,
                                 const std::string& cdi_spec_dir = {});

// One sweep: the kubelet's pod-resources, then remove_stale_ledgers. When
// pod-resources cannot be read nothing is removed (the error is returned).
[[nodiscard]] Result<LedgerSweep> sweep_ledgers(const std::string& root, const std::string& pod_resources_socket,
                                                std::chrono::milliseconds timeout, std::chrono::seconds grace,
                                                const std::string& cdi_spec_dir = {});

// A thread that sweeps at start and then every `interval`, logging what it
// removed (info) and why it could not (warn, once per distinct message).
class LedgerSweeper {
 public:
  struct Options {
    std::string root;
    std::string pod_resources_socket = kDefaultPodResourcesSocket;
    std::chrono::seconds interval{600};
    std::chrono::seconds grace{600};
    std::chrono::milliseconds timeout{5000};
    std::string cdi_spec_dir;  // where the memory hook's per-container specs are; empty: none
  };
  explicit LedgerSweeper(Options options);
  ~LedgerSweeper();  // stops and joins
  LedgerSweeper(const LedgerSweeper&) = delete;
  LedgerSweeper& operator=(const LedgerSweeper&) = delete;

 private:
  void loop();
  Options options_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tessera::plugin
