// Applying a mig-parted config to a node: choose the entry for each GPU,
// plan every GPU (pure, all before anything changes), then execute through
// NVML with a journal, and report per MIG device what was kept, destroyed
// and created.
#pragma once

#include <string>
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
  std::vector<std::string> destroyed;  // MIG device UUIDs destroyed
  std::vector<std::string> created;    // MIG device UUIDs created
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
// placed, busy instances in the way without `force` (naming the processes).
[[nodiscard]] Result<NodePlan> plan_node(const std::vector<NodeGpu>& node, const config::MigConfig& config, bool force);

struct ApplyResult {
  NodePlan plan;
  bool success = false;
  bool pending_reset = false;
};

// Executes `plan`, recording each step in `journal` before and after it.
// Stops at the first failure of a GPU's step (its later steps are left for
// the next apply); other GPUs go on.
ApplyResult execute_plan(const nvml::Session& session, NodePlan plan, const JournalFile& journal_file,
                         Journal& journal);

}  // namespace tessera::reconciler
