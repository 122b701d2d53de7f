// The fleet re-planner (docs/design-fleet.md): from what a cluster runs and
// what is pending, the best new MIG layout of every GPU, proven level by
// level, and the order to roll it out in. Pure: values in, values out.
//
//   snapshot (kubectl get nodes,pods -A -o json)  --parse_snapshot-->  Snapshot
//   Snapshot + mig-parted file + catalog            --build_problem-->  Problem
//   Problem                                         --plan_fleet-->     FleetPlan (+ rollout waves)
//   Problem + FleetPlan                             --check_fleet_plan-> ok, or the rule broken
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/mig_parted.hpp"
#include "core/catalog.hpp"
#include "core/error.hpp"
#include "core/mig_layout.hpp"

namespace tessera::fleet {

inline constexpr const char* kProductLabel = "nvidia.com/gpu.product";
inline constexpr const char* kCountLabel = "nvidia.com/gpu.count";
inline constexpr const char* kMigConfigLabel = "nvidia.com/mig.config";
inline constexpr const char* kMigStateLabel = "nvidia.com/mig.config.state";
// GFD: "single" when every MIG device is advertised as nvidia.com/gpu (then
// gpu.product ends "-MIG-<profile>" and gpu.count counts MIG devices).
inline constexpr const char* kMigStrategyLabel = "nvidia.com/mig.strategy";
// GFD: "false" where the GPUs cannot be cut (no MIG, or the driver will not).
inline constexpr const char* kMigCapableLabel = "nvidia.com/mig.capable";
// GFD: how many replicas each device is advertised as (time-slicing or MPS sharing).
inline constexpr const char* kReplicasLabel = "nvidia.com/gpu.replicas";
// Kept by `tessera node`: each GPU's MIG mode and instances, and the pod on
// each instance (docs/design-fleet.md, "The layout annotation").
inline constexpr const char* kLayoutAnnotation = "tessera.dev/mig-layout";
// The names of the mig-parted configs a plan generates begin so.
inline constexpr const char* kGeneratedPrefix = "tessera-fleet-";
// The whole-GPU resource (nvidia.com/gpu: a GPU with MIG off under the mixed strategy).
inline constexpr const char* kWholeGpu = "gpu";

// ---- The snapshot: the facts, as the API server has them ----------------

// What the scheduler's filters this planner models read (kube-scheduler's
// NodeUnschedulable, NodeAffinity and TaintToleration plugins; k8s.io/api
// core/v1 Taint, Toleration, NodeSelectorRequirement).
struct Taint {
  std::string key, value, effect;  // effect: NoSchedule, PreferNoSchedule or NoExecute
};
struct Toleration {
  std::string key, op, value, effect;  // op: Equal (the default) or Exists; empty key with Exists: every taint
};
struct Requirement {
  std::string key, op;  // In, NotIn, Exists, DoesNotExist, Gt, Lt
  std::vector<std::string> values;
};
struct SelectorTerm {
  std::vector<Requirement> expressions;  // on the node's labels
  std::vector<Requirement> fields;       // on metadata.name
};
struct PodRules {
  std::map<std::string, std::string> node_selector;
  std::vector<SelectorTerm> required;  // requiredDuringScheduling...nodeSelectorTerms, ORed; empty: none
  std::vector<Toleration> tolerations;
  // Rules the planner does not model, named for the plan's warnings ("pod
  // anti-affinity", "topology spread").
  std::vector<std::string> unmodelled;
  bool selects() const { return !node_selector.empty() || !required.empty(); }
};

// Amounts as NodeResourcesFit compares them, in thousandths of the unit
// (millicores, millibytes, thousandths of a pod): "cpu", "memory",
// "ephemeral-storage" and "pods".
using Amounts = std::map<std::string, int64_t>;
// The resources this planner fits besides GPUs (kube-scheduler's NodeResourcesFit).
inline constexpr const char* kFitResources[] = {"cpu", "memory", "ephemeral-storage", "pods"};

struct SnapNode {
  std::string name;
  std::string uid;
  std::map<std::string, std::string> labels;
  std::optional<std::string> layout_annotation;
  bool unschedulable = false;  // spec.unschedulable (cordoned)
  bool ready = true;           // status.conditions Ready is True (a node with no conditions counts as ready)
  std::vector<Taint> taints;
  // status.allocatable's cpu, memory, ephemeral-storage and pods (those it
  // lists); none without a status (a hand-made snapshot): not fitted.
  Amounts allocatable;
  // status.allocatable's device resources (nvidia.com/gpu, nvidia.com/mig-1g.10gb, ...): what the
  // device plugin serves now, healthy devices only (-1: unreadable). nullopt without status.allocatable.
  std::optional<std::map<std::string, int64_t>> devices;
  // Devices that ResourceClaims allocated here through a GPU DRA driver (parse_snapshot's
  // dra_drivers): "ResourceClaim namespace/name holds 'device' of driver", one per result. The
  // device plugin's allocatable cannot tell them from free ones, so a node holding any is kept as
  // it is.
  std::vector<std::string> dra_devices;
};

// The DRA driver whose ResourceClaims hold GPUs by default: NVIDIA's, and tessera's under its
// default name (`tessera dra --driver-name`).
inline constexpr const char* kGpuDraDriver = "gpu.nvidia.com";

struct SnapPod {
  std::string id;      // "namespace/name"
  std::string node;    // spec.nodeName ("" when not scheduled)
  std::string phase;   // status.phase
  std::string resource;  // "gpu" or a MIG profile ("1g.10gb"); "" when it asks for no GPU
  uint32_t count = 0;
  std::string created;  // metadata.creationTimestamp (RFC 3339), for the pending clock
  PodRules rules;
  // Why its GPU request cannot be read (a count that is not a whole number,
  // two GPU resources): such a pod stops only itself. Pending, it is left
  // out; running, its node is kept exactly as it is.
  std::string unreadable;
  // No metadata.ownerReferences: nothing recreates it after an eviction.
  bool bare = false;
  std::map<std::string, std::string> labels;  // metadata.labels (what disruption budgets select)
  int64_t priority = 0;                       // spec.priority
  // The effective requests of kFitResources (pods: 1000, one pod), as the
  // scheduler reads them: app containers and sidecars, init containers,
  // spec.overhead; a container's limit where it gives no request.
  Amounts requests;
};

// A PodDisruptionBudget (policy/v1) as the eviction API applies it: the
// pods its selector picks in its namespace may be evicted only while
// `allowed` (status.disruptionsAllowed, which the disruption controller
// keeps) is above 0, each eviction taking one.
struct SnapBudget {
  std::string id;  // "namespace/name"
  std::string ns;
  // spec.selector: none (null) selects no pod; empty selects every pod of the namespace.
  bool selects_nothing = false;
  std::map<std::string, std::string> match_labels;
  std::vector<Requirement> match_expressions;  // In, NotIn, Exists, DoesNotExist
  // status.disruptionsAllowed; without a status (a hand-made snapshot),
  // from spec.minAvailable or spec.maxUnavailable and the snapshot's pods.
  std::optional<int64_t> allowed;
  std::optional<std::string> min_available, max_unavailable;  // as written: "2" or "50%"
  bool selects(const SnapPod& pod) const;
};

struct Snapshot {
  std::vector<SnapNode> nodes;
  std::vector<SnapPod> pods;  // only pods that ask for a GPU resource
  std::vector<SnapBudget> budgets;
  // Per node: the requests of the pods that run there and ask for no GPU (not
  // in `pods`), what NodeResourcesFit counts as taken. Not in the hash: other
  // pods come and go all the time, and each wave is checked against the cluster.
  std::map<std::string, Amounts> other_use;
  std::vector<std::string> warnings;  // objects read with a warning (a budget whose selector cannot be read)
  // A hash of every fact the plan depends on: a plan made from another hash is stale.
  std::string hash;
};

// A Kubernetes List (kind List, NodeList or PodList) of Nodes and Pods, the
// PodDisruptionBudgets that guard them and the ResourceClaims (resource.k8s.io)
// allocated on them.
// Errors name the object: a document that is not a List, a pod asking for
// two GPU resources, a count that is not a whole number. `source` names the
// input in messages.
// `dra_drivers`: the DRA drivers whose ResourceClaims hold GPUs (empty: kGpuDraDriver); another
// driver's devices (a NIC's) are not GPUs.
[[nodiscard]] Result<Snapshot> parse_snapshot(const nlohmann::json& list, const std::string& source,
                                              const std::vector<std::string>& dra_drivers = {});
[[nodiscard]] Result<Snapshot> parse_snapshot_text(const std::string& text, const std::string& source,
                                                   const std::vector<std::string>& dra_drivers = {});
// Whether parse_snapshot may read a Node's or Pod's field at `path` (object keys from the item
// down, array levels adding no step: {"spec", "containers", "resources", "limits"}). Fields a
// cluster is full of (managedFields, images, env, volumes, other annotations, requests of other
// resources than nvidia.com/ ones) are not wanted. For kube::Client's list_all, which then never
// builds them.
bool snapshot_field_wanted(std::span<const std::string> path);
// A Node or Pod cut down to the fields snapshot_field_wanted accepts (the same Snapshot and hash
// come out); false for a pod that asks for no nvidia.com/ resource, which the planner ignores.
// For reading a big cluster page by page (kube::Client's list_all keep).
bool slim_snapshot_item(nlohmann::json& item);

// ---- The problem: GPUs, their instances, pods --------------------------

struct Instance {
  uint32_t profile = 0;  // index into the GPU's model profiles (unused when the GPU has MIG off)
  uint32_t start = 0;
  int pod = -1;          // the pod holding it, or -1
};

struct Gpu {
  int node = 0;
  uint32_t index = 0;           // device index on the node
  const GpuModel* model = nullptr;
  bool mig = false;             // MIG mode on
  // MIG on: the GPU instances. MIG off: one instance that stands for the whole GPU.
  // Shared devices (replicas > 1): each instance once per replica, one pod on each.
  std::vector<Instance> instances;
  // How the device plugin advertises the GPU's devices (instance_resource):
  // under the single MIG strategy every MIG device is nvidia.com/gpu;
  // shared replicas the sharing config renames carry ".shared": `renamed`
  // holds the names ("gpu", a profile) whose devices are advertised so.
  bool single = false;
  std::set<std::string> renamed;
  uint32_t replicas = 1;         // the most replicas of any of its devices
  // Planned as it is, never changed: a product the catalog lacks, the single
  // strategy (one profile per node, advertised without its name), shared
  // replicas (a new layout would change what every replica is).
  bool fixed = false;
};

struct Node {
  std::string name;
  std::string uid;
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;
  bool unschedulable = false;  // cordoned
  bool ready = true;
  // A pod runs here on devices the planner cannot tell (neither the layout
  // annotation nor the node's free instances account for it): kept as it is.
  bool frozen = false;
  // Takes new pods and may change: not cordoned, Ready, not frozen. A node
  // that does not is never changed and offers no free device; the pods on it
  // stay as they are.
  bool accepts_pods() const { return !unschedulable && ready && !frozen; }
  const GpuModel* model = nullptr;
  std::string config;           // nvidia.com/mig.config ("" when absent)
  // What is left of its allocatable (SnapNode::allocatable) once every pod
  // that runs there has its requests; only the resources it lists are fitted.
  Amounts room;
  bool placements_known = false;  // from the layout annotation
  std::vector<int> gpus;
};

struct Pod {
  std::string id;
  int resource = 0;             // index into Problem::resources
  uint32_t count = 0;
  int node = -1;                // running there; -1: pending
  // Running: the (gpu, instance) pairs it holds.
  std::vector<std::pair<int, int>> holds;
  PodRules rules;
  // Some node that takes new pods would not take this one (its selector,
  // affinity or a taint it does not tolerate): `allowed` says, per node,
  // where it may be placed. Unconstrained pods may go to any node that
  // takes pods, and `allowed` is empty.
  bool constrained = false;
  std::vector<bool> allowed;
  int64_t priority = 0;  // spec.priority: pending pods are served highest first
  Amounts requests;      // SnapPod::requests
  bool running() const { return node >= 0; }
};

struct Problem {
  std::vector<Node> nodes;
  std::vector<Gpu> gpus;
  std::vector<Pod> pods;
  std::vector<std::string> resources;  // [0] = "gpu", then MIG profile names
  std::vector<std::string> warnings;
  // Priorities, highest first, as preemption weighs them: those of the pending
  // pods and of the running pods at or below the highest pending one, where
  // there are two or more (empty otherwise). Each is a level of the plan before
  // the others: the pods of that priority left pending or evicted. So no pod
  // waits, or is evicted, for one of lower priority, and a running pod is
  // evicted for a pending one of higher priority when nothing else serves it.
  std::vector<int64_t> priorities;
  // The index of pod `pod`'s priority in `priorities`, or -1.
  int priority_level(int pod) const;
  const config::MigPartedConfig* configs = nullptr;
  std::string snapshot_hash;
  // Some pod asks for a media-engine profile or some GPU holds one: the
  // targets include those variants (otherwise left out: more targets, a
  // bigger program, and no pod that needs them).
  bool media_engines = false;
  // Models for the products the catalog lacks: whole GPUs only, never
  // changed (the planner cannot cut what it has no table for).
  std::vector<std::shared_ptr<const GpuModel>> fixed_models;
  int resource_index(const std::string& name) const;
  // Whether pod `pod` may be placed on node `node` (placed anew: a running pod stays where it runs).
  bool allows(int pod, int node) const;
};

// The scheduler's filters this planner models: the node takes pods (or the pod
// tolerates node.kubernetes.io/unschedulable), every NoSchedule and NoExecute
// taint is tolerated, the nodeSelector's labels match, and one of the
// required node-affinity terms matches (each term: all its requirements).
bool node_admits(const Node& node, const PodRules& rules);
// NodeResourcesFit: every resource `room` lists is at least what `requests` asks
// (a resource the node does not list is not checked). `why`: the first that is short.
bool fits(const Amounts& room, const Amounts& requests, std::string* why = nullptr);

// The resource a GPU instance serves: "gpu" for a whole GPU (and for any MIG
// device under the single strategy), else its profile's name; with the
// GPU's suffix (".shared" for renamed shared replicas).
std::string instance_resource(const Gpu& gpu, const Instance& inst);
// The same, as the GPU serves it with MIG mode `mig` (a planned layout's instance).
std::string instance_resource(const Gpu& gpu, const Instance& inst, bool mig);
// The extended resource a planner resource stands for ("gpu.shared" ->
// nvidia.com/gpu.shared, "1g.10gb" -> nvidia.com/mig-1g.10gb).
std::string resource_key(const std::string& resource);
// Whether node `node` has, or could be given, a device serving `resource`.
bool node_offers(const Problem& problem, int node, const std::string& resource);

// Nodes from their GFD labels and nvidia.com/mig.config (looked up in
// `configs`), or the layout annotation when the node agent wrote one; pods
// running on a node take instances of their resource there. A product the
// catalog lacks is whole GPUs that never change (with a warning). Errors
// name the object: a config the file lacks, a GPU count that is not a number.
[[nodiscard]] Result<Problem> build_problem(const Snapshot& snapshot, const config::MigPartedConfig& configs,
                                            const Catalog& catalog = Catalog::builtin());

// The catalog product a GFD product label names ("NVIDIA-A100-SXM4-80GB",
// "NVIDIA-H100-80GB-HBM3", a "-MIG-..." suffix of the single strategy cut off).
const GpuModel* find_product(const Catalog& catalog, const std::string& label);

// ---- The plan -----------------------------------------------------------

// One GPU's target: MIG off, or MIG on with a multiset of profiles (sorted indices).
struct Target {
  bool mig = false;
  std::vector<uint32_t> profiles;
  friend auto operator<=>(const Target&, const Target&) = default;
};

Target current_target(const Gpu& gpu);
ProfileCounts target_counts(const GpuModel& model, const Target& target);

// What becomes of one GPU when it is given a target, as the node agent does
// it (mig::plan_gpu: the most pod-holding instances kept, then the most
// instances): the instances after the change, and which of the old ones stay.
struct GpuOutcome {
  Target target;
  bool changed = false;
  std::vector<Instance> layout;        // after; pod = the kept pod (or -1)
  std::vector<bool> kept;              // per old instance
};
GpuOutcome apply_target(const Gpu& gpu, const Target& target);

struct Objective {
  // Per Problem::priorities (highest first): the pods of that priority left
  // pending or evicted. Compared first, so a plan that serves a pod of higher
  // priority is better whatever it costs below. Empty with one priority.
  std::vector<int64_t> waiting;
  int64_t unserved = 0;
  int64_t evicted = 0;
  int64_t changed_gpus = 0;
  int64_t gpus_used = 0;
  friend auto operator<=>(const Objective&, const Objective&) = default;
  // The levels in the order they are minimised: waiting..., unserved, evicted, changed, used.
  std::vector<int64_t> levels() const;
  static Objective from_levels(std::span<const int64_t> levels);
};

struct PlannedGpu {
  Target target;
  bool changed = false;
  std::vector<Instance> layout;  // instances after, with the pod each holds (kept or placed)
};

struct FleetPlan {
  std::string status = "infeasible";  // optimal | feasible | infeasible
  Objective objective;
  Objective bound;                    // proven lower bounds, level by level
  double gap = 0;                     // relative gap of the first level not proven (0 when optimal)
  std::vector<PlannedGpu> gpus;       // per Problem::gpus
  std::vector<int> placement;         // per pod: node it runs on after the plan, -1 unserved
  std::vector<bool> evicted;          // per pod: running and evicted
  std::vector<std::string> node_config;  // per node: the mig.config label after the plan
  config::MigPartedConfig generated;  // configs the plan names that the input file lacks
  std::vector<std::vector<int>> rollout;  // waves of changed nodes
  std::vector<std::string> notes;     // how each level ended, warnings
  double seconds = 0;                 // the whole plan
  double convert_seconds = 0;         // of which: the solve's aggregate turned into GPUs and pods, repaired
  double finish_seconds = 0;          // of which: its configs named and its waves ordered
  bool node_changed(const Problem& p, int node) const;
};

struct PlanOptions {
  double seconds = 10;                        // the whole plan: every solve, the conversion, the repair
  std::optional<int64_t> max_evictions;       // level 2 as a constraint
  int64_t max_wave_evictions = 10;            // per rollout wave
  int64_t max_wave_nodes = 0;                 // 0: no limit
  double max_wave_share = 0;                  // at most this share of the fleet's GPU nodes per wave (at least one); 0: no limit
};

// Solves the four levels in turn (each proven, or its gap reported), turns the
// aggregate into concrete GPUs and pods, and orders the rollout.
FleetPlan plan_fleet(const Problem& problem, const PlanOptions& options = {});

// Re-checks a plan without trusting how it was built: every GPU's layout
// against the catalog's placement rules (core's check_layout), its node's
// product; every kept pod on its old instances; every placed pod on free
// instances of its resource on one node, none shared; the objective's counts;
// the evictions cap; the mig-parted configs against the layouts; the rollout.
[[nodiscard]] Result<void> check_fleet_plan(const Problem& problem, const FleetPlan& plan, const PlanOptions& options = {});

// Rollout waves: changed nodes, those that evict nothing first, then the
// others packed so that no wave evicts more than max_wave_evictions (a node
// that alone evicts more goes alone, with a note).
std::vector<std::vector<int>> order_rollout(const Problem& problem, const FleetPlan& plan, const PlanOptions& options,
                                            std::vector<std::string>* notes = nullptr);

// ---- Baselines (for the benchmark) --------------------------------------

// mig-manager's way: one named layout applied fleet-wide (per product, the
// layout that serves the most pods), the scheduler's first fit after it.
Objective baseline_one_layout(const Problem& problem);
// Greedy first fit: running pods stay; each pending pod goes to the first GPU
// that has a free instance of its profile, or whose layout can be changed to
// one that adds it without evicting anyone.
Objective baseline_first_fit(const Problem& problem);
// The objective of a concrete plan, recomputed from its GPUs and placements.
Objective evaluate(const Problem& problem, const FleetPlan& plan);

// ---- Renderings ---------------------------------------------------------

// Why a pod the plan leaves unserved is: no GPU has its profile, no node takes it, or no capacity.
std::string unserved_reason(const Problem& problem, int pod);
// The JSON contract of `tessera fleet plan --json`.
nlohmann::json plan_json(const Problem& problem, const FleetPlan& plan);
std::string plan_text(const Problem& problem, const FleetPlan& plan);
std::string plan_svg(const Problem& problem, const FleetPlan& plan);
// A mig-parted v1 document holding every config the plan names (JSON form).
nlohmann::json mig_parted_json(const Problem& problem, const FleetPlan& plan);
// The same, as YAML text.
std::string mig_parted_yaml(const Problem& problem, const FleetPlan& plan);
// A {"version": "v1", "mig-configs": {...}} document as mig-parted YAML; one config's lines at `indent`.
std::string mig_parted_yaml_of(const nlohmann::json& doc);
std::string mig_config_yaml(const std::string& name, const nlohmann::json& entries, int indent);
// The configs of a file, as mig_parted_json's "mig-configs" map.
nlohmann::json mig_configs_json(const config::MigPartedConfig& configs);
// Any JSON value as YAML (block style, strings double-quoted).
std::string to_yaml(const nlohmann::json& doc);
// FNV-1a 64, hex.
std::string hash_text(const std::string& text);

}  // namespace tessera::fleet
