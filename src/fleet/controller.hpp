// `tessera fleet run`'s decisions (docs/design-fleet.md, "The controller"):
// watch for GPU pods pending too long, plan, publish the plan in a
// ConfigMap, wait for a person's approval (the plan's hash in an
// annotation), refuse a plan whose snapshot went stale, then roll the
// plan's waves out one by one through the node agents' labels, stopping at
// the first failure. Time is handed in (step(now)); the API server is behind
// FleetApi, so tests drive it without a cluster.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "fleet/fleet.hpp"

namespace tessera::fleet {

using Clock = std::chrono::steady_clock;

inline constexpr const char* kPlanConfigMap = "tessera-fleet-plan";
inline constexpr const char* kApproveAnnotation = "tessera.dev/approve";
inline constexpr const char* kPlanHashAnnotation = "tessera.dev/plan-hash";
inline constexpr const char* kReplanAnnotation = "tessera.dev/replan";

struct ConfigMapView {
  std::map<std::string, std::string> data;
  std::map<std::string, std::string> annotations;
  std::string resource_version;
};

// What the controller asks of the API server (ConfigMaps in its own namespace).
class FleetApi {
 public:
  virtual ~FleetApi() = default;
  // Nodes and Pods (and the budgets and claims the snapshot reads), as one List (what `kubectl
  // get nodes,pods -A -o json` prints), and its version: the same non-zero version again means
  // nothing changed since (a cache kept by watches), and the controller does not read it again;
  // 0: read it.
  struct ClusterList {
    std::shared_ptr<const nlohmann::json> list;
    uint64_t version = 0;
  };
  virtual Result<ClusterList> snapshot() = 0;
  // nullopt: no such ConfigMap.
  virtual Result<std::optional<ConfigMapView>> get_configmap(const std::string& name) = 0;
  // Creates it, or replaces its data and sets these annotations (others kept).
  virtual Result<void> put_configmap(const std::string& name, const std::map<std::string, std::string>& data,
                                     const std::map<std::string, std::optional<std::string>>& annotations) = 0;
  // Merge patch of one Node's labels (nullopt removes).
  virtual Result<void> label_node(const std::string& node, const std::map<std::string, std::optional<std::string>>& labels) = 0;
  // An Event about the plan ConfigMap. type: Normal or Warning.
  virtual Result<void> event(const std::string& type, const std::string& reason, const std::string& message) = 0;
};

struct ControllerOptions {
  std::string mig_configmap = "tessera-mig-config";  // the mig-parted ConfigMap the node agents read
  std::string mig_configmap_key = "config.yaml";
  std::vector<std::string> dra_drivers;  // whose ResourceClaims hold GPUs (empty: kGpuDraDriver)
  std::chrono::milliseconds pending_after{std::chrono::seconds(60)};
  std::chrono::milliseconds poll{std::chrono::seconds(5)};
  // After new configs go into the mig-parted ConfigMap: time for the kubelets to update the mounted file.
  std::chrono::milliseconds config_propagation{std::chrono::seconds(90)};
  std::chrono::milliseconds wave_timeout{std::chrono::minutes(15)};
  PlanOptions plan;
  bool auto_approve = false;  // only with plan.max_evictions set
  bool dry_run = false;       // plan and publish; never change a Node or the mig-parted ConfigMap
};

enum class ControllerPhase { watching, proposed, propagating, rolling, done, failed };
std::string_view to_string(ControllerPhase phase);

struct ControllerMetrics {
  int64_t pending_gpu_pods = 0;     // GPU pods without a node
  int64_t pending_gpu_devices = 0;  // the devices they ask for
  std::string plan_status;          // optimal | feasible | infeasible | "" (none yet)
  int64_t plans_made = 0;
  int64_t waves_done = 0;
  int64_t waves_total = 0;
  std::string phase;
};

class Controller {
 public:
  Controller(FleetApi& api, ControllerOptions options);
  // Plan at the next step, whatever is pending (`on request`).
  void request_plan() { requested_ = true; }
  Clock::time_point step(Clock::time_point now);
  ControllerPhase phase() const { return phase_; }
  const ControllerMetrics& metrics() const { return metrics_; }
  // The plan proposed or being applied (its hash), and its JSON.
  const std::string& plan_hash() const { return hash_; }
  const nlohmann::json& plan() const { return plan_json_; }
  const std::string& last_error() const { return error_; }
  // Prometheus text of metrics().
  std::string metrics_text() const;

 private:
  struct Facts {
    std::shared_ptr<const Snapshot> snapshot;
    config::MigPartedConfig configs;
    std::string mig_text;
  };
  Result<Facts> read_facts();
  // After a restart: the plan, phase and wave the plan's ConfigMap records (its "state").
  void resume(Clock::time_point now);
  std::string state_json() const;
  void load_plan(const nlohmann::json& plan);
  // Before a wave: its nodes as the cluster has them now still match the plan (same GPUs,
  // taking pods, evictions within --max-wave-evictions and --max-evictions). The reason when not.
  std::optional<std::string> wave_mismatch(const Facts& facts, const std::vector<std::string>& wave, int64_t& evictions);
  void watch(Clock::time_point now);
  void propose(Clock::time_point now, const std::string& why, bool approve_now = true);
  void check_approval(Clock::time_point now);
  void start_rollout(Clock::time_point now);
  void roll(Clock::time_point now);
  void fail_rollout(const std::string& why, const std::string& reason = "FleetRolloutFailed");
  void publish_status(const std::string& status);

  FleetApi& api_;
  ControllerOptions options_;
  ControllerPhase phase_ = ControllerPhase::watching;
  ControllerMetrics metrics_;
  bool requested_ = false;
  std::map<std::string, Clock::time_point> pending_since_;
  std::string hash_;
  std::string snapshot_hash_;
  nlohmann::json plan_json_;
  std::vector<std::vector<std::string>> waves_;
  std::map<std::string, std::string> node_config_;  // node -> config to label it with
  nlohmann::json generated_;                        // configs to add to the mig-parted ConfigMap
  size_t wave_ = 0;
  bool wave_started_ = false;
  Clock::time_point wave_deadline_{};
  Clock::time_point propagated_at_{};
  std::string last_planned_snapshot_;
  uint64_t last_version_ = 0;  // the version of the List last read, and what it read as
  std::shared_ptr<const Snapshot> last_snapshot_;
  bool resumed_ = false;
  int64_t evicted_ = 0;  // pods the waves so far evicted (counted when each wave starts)
  std::string replan_seen_;
  std::string error_;
};

// The mig-parted text with `configs` (a "mig-configs" JSON map) added, as
// text appended under mig-configs when the file allows it (comments kept),
// else the whole file written again. Configs already there are left alone.
Result<std::string> add_mig_configs(const std::string& text, const nlohmann::json& configs);

// Configs tessera generated ("tessera-fleet-..." names) that no name in `keep` (the nodes'
// mig.config labels, the plan's) uses, removed: the file written again without them.
// The text as it is when there is none.
Result<std::string> prune_mig_configs(const std::string& text, const std::set<std::string>& keep);

}  // namespace tessera::fleet
