// Label-driven MIG changes on one node, the way NVIDIA's mig-manager is
// driven (the Node label nvidia.com/mig.config names a mig-parted config;
// nvidia.com/mig.config.state says pending, success or failed), but
// disturbing only what the new layout destroys:
//
//   1. the config looked up; the change planned against the GPUs' state with
//      the kubelet's allocations counted as users, so instances that hold
//      pods are kept where the layout allows; the layout the plan leads to
//      checked against the device plugin's config (nothing is disturbed for
//      a layout it could not serve); a layout already in place is `success`
//      with nothing written but the state; otherwise `pending`;
//   2. the devices the plan destroys (and whole GPUs whose MIG mode changes,
//      or that are advertised whole, as with migStrategy none) taken out of
//      service, so nothing new lands there;
//   3. the pods holding them evicted through the API (PodDisruptionBudgets
//      apply: a blocked eviction is tried again) and waited for, until a
//      deadline;
//   4. applied (reconciler::apply_config, which refuses if a user is still
//      there), the devices put back, the inventory read again;
//   5. `success`, or `failed` with a Warning Event giving the reason and the
//      previous devices advertised again. A deadline always ends in `failed`;
//      nothing is left `pending`.
//
// Time is handed in (`step(now)`), and every peer is an interface, so tests
// drive it over the simulated node without sleeping.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "config/mig_parted.hpp"
#include "core/error.hpp"
#include "nvml/session.hpp"
#include "plugin/pod_resources.hpp"
#include "reconciler/journal.hpp"
#include "reconciler/mig_apply.hpp"
#include "sharing/inventory.hpp"
#include "sharing/resources.hpp"

namespace tessera::agent {

using Clock = std::chrono::steady_clock;

inline constexpr const char* kMigConfigLabel = "nvidia.com/mig.config";
inline constexpr const char* kMigStateLabel = "nvidia.com/mig.config.state";

struct PodRef {
  std::string pod_namespace;
  std::string name;
  std::string display() const { return pod_namespace + "/" + name; }
  friend auto operator<=>(const PodRef&, const PodRef&) = default;
};

enum class Eviction { evicted, gone, blocked };

// What the controller asks of the API server, about its own Node.
class ClusterApi {
 public:
  virtual ~ClusterApi() = default;
  virtual Result<void> set_label(const std::string& key, const std::string& value) = 0;
  virtual Result<Eviction> evict(const PodRef& pod) = 0;
  // type: "Normal" or "Warning".
  virtual Result<void> event(const std::string& type, const std::string& reason, const std::string& message) = 0;
};

// What the controller asks of the node's device plugin and kubelet.
struct NodeHooks {
  // Pods with their devices, as the kubelet's pod-resources API lists them.
  std::function<Result<std::vector<plugin::PodDevices>>()> pod_devices;
  // The resources advertised now (to map a device id to the GPU or MIG
  // device it runs on).
  std::function<std::vector<sharing::Resource>()> advertised;
  // Takes GPU or MIG devices out of service; an empty set puts all back.
  std::function<void(std::set<std::string>)> withdraw;
  // The layout changed: read the inventory again and serve it. An error
  // (the new inventory cannot be read or served) ends the change failed with
  // the destroyed devices kept out of service.
  std::function<Result<void>()> layout_changed;
  // Optional: the inventory served now, and whether the device plugin could
  // serve a given one (its config's rules, e.g. migStrategy single wants one
  // profile). With both, a layout it could not serve is refused before any
  // pod is disturbed.
  std::function<sharing::Inventory()> served_inventory;
  std::function<Result<void>(const sharing::Inventory&)> can_serve;
};

struct MigControllerOptions {
  std::string config_file;  // for messages and the journal
  config::MigPartedConfig configs;
  std::chrono::milliseconds eviction_timeout{std::chrono::minutes(5)};
  std::chrono::milliseconds poll_interval{std::chrono::seconds(1)};  // while pods leave
  std::chrono::milliseconds retry_interval{std::chrono::seconds(5)};  // a label write the API refused
  // After devices are taken out of service and before the GPUs change: time
  // for the kubelet to see them Unhealthy (its ListAndWatch stream is pushed
  // at once), so that it admits no new pod onto them.
  std::chrono::milliseconds withdraw_settle{std::chrono::seconds(1)};
};

// The inventory `plan` leads to from `now`: kept MIG devices as they are,
// created ones with placeholder UUIDs and the catalog's memory, MIG mode as
// the plan's entries say. For checking that the result can be served.
sharing::Inventory predict_inventory(const sharing::Inventory& now, const reconciler::NodePlan& plan,
                                     const config::MigConfig& config);

enum class Phase { idle, draining };

// One change, as it ended (for tests, logs and the benchmark).
struct ChangeRecord {
  std::string config;
  std::string state;                 // success or failed
  std::string reason;                // why it failed
  std::set<std::string> destroyed;   // GPU or MIG devices the change took away
  std::set<PodRef> evicted;          // pods asked to leave
  Clock::time_point started{}, ended{};
};

class MigController {
 public:
  MigController(const nvml::Session& session, ClusterApi& api, NodeHooks hooks, reconciler::JournalFile journal,
                MigControllerOptions options);

  // The label's value as the Node has it now (nullopt: no label: the layout
  // is left as it is). A change while pods are leaving abandons that change
  // (nothing was applied) and starts the new one.
  void set_desired(std::optional<std::string> config_name);
  // A new mig-parted config (the file changed). Taken at once when idle, else
  // when the change in progress ends; the label is then acted on again, so a
  // name that was missing is applied once it is there.
  void set_configs(config::MigPartedConfig configs);
  // One turn at `now`; returns when the next turn is due.
  Clock::time_point step(Clock::time_point now);

  // The agent is stopping: a change still waiting for pods ends `failed`
  // (nothing was applied) and its devices are put back, so the Node is never
  // left `pending` by an agent that went away.
  void abandon(Clock::time_point now, const std::string& why);

  Phase phase() const { return phase_; }
  const std::vector<ChangeRecord>& history() const { return history_; }
  // The config last applied with success (empty before any).
  const std::string& applied() const { return applied_; }
  // A state label the API server has not taken yet (written again each retry_interval).
  const std::optional<std::string>& unwritten_state() const { return unwritten_state_; }

 private:
  void begin(Clock::time_point now);
  void idle(Clock::time_point now);
  void drain(Clock::time_point now);
  void apply(Clock::time_point now);
  void finish(Clock::time_point now, const std::string& state, const std::string& reason);
  void write_state(const std::string& state, Clock::time_point now);
  // Each pod's devices as advertised: (pod, advertised id, the device).
  struct Held {
    PodRef pod;
    std::string id;
    sharing::Device device;
  };
  Result<std::vector<Held>> held();
  // The pods on devices that run on one of `uuids` (GPU or MIG device UUIDs), with those ids.
  Result<std::map<PodRef, std::vector<std::string>>> holders(const std::set<std::string>& uuids);
  // The kubelet's allocations as users per MIG device UUID, and per GPU UUID
  // for a whole GPU (every instance on it), as "pod ns/name".
  Result<std::map<std::string, std::vector<std::string>>> in_use();

  const nvml::Session& session_;
  ClusterApi& api_;
  NodeHooks hooks_;
  reconciler::JournalFile journal_;
  MigControllerOptions options_;

  std::optional<std::string> desired_;
  std::string applied_;
  std::optional<std::string> attempted_;  // the last name acted on (success or failed): not retried until it changes
  Phase phase_ = Phase::idle;
  ChangeRecord current_;
  Clock::time_point deadline_{};
  Clock::time_point settle_until_{};  // withdrawn devices seen Unhealthy by the kubelet from here on
  std::optional<config::MigPartedConfig> next_configs_;  // a reload that waits for the change to end
  std::map<PodRef, Clock::time_point> asked_;  // pods asked to leave, and when to ask again if blocked
  std::optional<std::string> unwritten_state_;  // a state label the API has not taken yet
  Clock::time_point next_state_write_{};
  std::vector<ChangeRecord> history_;
};

}  // namespace tessera::agent
