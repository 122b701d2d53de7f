// Applying a mig-parted config to a node: choose the entry for each GPU,
// plan every GPU (pure, all before anything changes), then execute through
// NVML with a journal, and report per MIG device what was kept, destroyed
// and created.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "config/mig_parted.hpp"
#include "core/error.hpp"
#include "mig/mig_plan.hpp"
#include "nvml/session.hpp"
#include "reconciler/journal.hpp"
#include "reconciler/node_state.hpp"

namespace tessera::reconciler {

struct GpuOutcome {
  uint32_t gpu = 0;
  std::string uuid;
  const GpuModel* model = nullptr;
  size_t entry = 0;  // which entry of the config applies
  mig::GpuPlan plan;
  std::vector<std::string> kept;       // MIG device UUIDs left running
  std::vector<std::string> destroyed;  // MIG device UUIDs destroyed (planned, until an apply ran)
  std::vector<std::string> created;    // MIG device UUIDs created
  // After a failed apply: MIG devices planned for destruction that are still
  // there (the apply stopped first); they are no longer listed in `destroyed`.
  std::vector<std::string> not_destroyed;
  size_t operations_done = 0;          // of plan.operations, by an apply
  bool pending_reset = false;          // a MIG mode change waits for a GPU reset
  std::string error;
};

struct NodePlan {
  std::string config_name;
  std::vector<GpuOutcome> gpus;
  size_t operations() const;
};

// Plans every GPU of the node for `config`. Errors (nothing changes): a GPU
// no entry selects, a model the catalog lacks, an entry that cannot be
// placed, busy instances in the way without `force` (naming the processes;
// Errc::conflict when that is the only kind of error).
[[nodiscard]] Result<NodePlan> plan_node(const std::vector<NodeGpu>& node, const config::MigConfig& config, bool force);

struct ApplyResult {
  NodePlan plan;
  bool success = false;
  bool pending_reset = false;
  std::string journal_error;  // set when a journal write failed: the change stopped there
};

// One operation on one GPU, as execute_plan runs it; also for adapters that
// cut single instances (the DRA driver). Returns the GPU-instance id that a
// create_gpu_instance made; a create_compute_instance without a gi_id goes
// into `last_created_gi`. A MIG mode change that waits for a GPU reset is
// the error (Errc::conflict) "pending-reset".
[[nodiscard]] Result<uint32_t> run_operation(const nvml::Session& session, const GpuModel& model,
                                             const mig::Operation& op, uint32_t last_created_gi = 0);

// Executes `plan`, recording each step in `journal` before and after it.
// Stops at the first failure of a GPU's step (its later steps are left for
// the next apply); other GPUs go on. A journal write that fails stops the
// whole change before the next step: no step runs unrecorded.
// `on_step`, when given, is called after each step is recorded (for progress).
ApplyResult execute_plan(const nvml::Session& session, NodePlan plan, const JournalFile& journal_file,
                         Journal& journal, const std::function<void(const Journal&)>& on_step = {});

// The whole `mig apply` transaction, as a library: the previous journal read
// (an interrupted apply is reported and planned over from the GPUs' state),
// the plan, the state (nvidia.com/mig.config.state) and journal written
// before anything changes, execution, and the outcome recorded.
struct ApplyRequest {
  std::string config_file;  // for the journal
  std::string config_name;
  const config::MigConfig* config = nullptr;
  bool force = false;
  bool dry_run = false;  // plan only: nothing is written or changed
  // Users NVML does not see, per MIG device UUID, or per GPU UUID for users
  // of every instance on it ("pod ns/name"): the kubelet's allocations. They
  // count as processes, so the plan keeps those instances, or refuses
  // without `force`.
  std::map<std::string, std::vector<std::string>> in_use;
  // Called after each step of the change is recorded (a command's progress line).
  std::function<void(const Journal&)> on_step;
};

// Adds `in_use` to the instances' processes (see ApplyRequest::in_use).
void mark_in_use(std::vector<NodeGpu>& node, const std::map<std::string, std::vector<std::string>>& in_use);

enum class Outcome {
  planned,        // dry run: the plan, nothing changed
  success,        // the node matches the config
  pending_reset,  // done but for MIG mode changes that wait for a GPU reset
  failed,         // a step failed (the journal says which); other GPUs went on
  refused,        // nothing changed: the node could not be read or the plan refused it
};
std::string_view to_string(Outcome outcome);

struct ApplyReport {
  Outcome outcome = Outcome::refused;
  std::string message;  // why, for refused and failed
  NodePlan plan;        // the plan, with per-GPU results once executed
  bool interrupted_before = false;  // the previous apply had not finished
  Journal previous;                 // that apply's journal, when there is one
  Journal journal;                  // this apply's (empty for a dry run)
  std::string state;                // the mig.config.state written, empty for a dry run
};

// Errors (nothing changed on the GPUs): the previous journal cannot be read,
// or the state or journal cannot be written before the change. A refusal is
// a report, not an error: its state ("failed") and journal are written.
[[nodiscard]] Result<ApplyReport> apply_config(const nvml::Session& session, const ApplyRequest& request,
                                               const JournalFile& journal_file);

}  // namespace tessera::reconciler
