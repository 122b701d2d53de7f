// The MIG decision, in pure code: from the current state of a GPU and the
// desired entry of a mig-parted config, the operations that get there while
// destroying as few instances as possible. NVIDIA's mig-parted clears and
// recreates a GPU whose layout changes (mig-parted pkg/mig/config); tessera
// keeps every instance the desired layout can keep, so the pods on them run on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/catalog.hpp"
#include "core/error.hpp"
#include "core/mig_layout.hpp"

namespace tessera::mig {

// A GPU instance as the driver reports it.
struct CurrentInstance {
  uint32_t gi_id = 0;             // NVML GPU-instance id
  PlacedInstance placed;          // profile (catalog index) and start
  std::string uuid;               // MIG device UUID ("" when it has no compute instance)
  uint32_t compute_instances = 0;
  bool default_compute_only = true;  // its compute instances are exactly one full-GI CI (or none)
  std::vector<std::string> processes;  // "pid 4242 (python3)"; non-empty = busy
  bool busy() const { return !processes.empty(); }
};

struct GpuState {
  uint32_t index = 0;
  std::string uuid;
  const GpuModel* model = nullptr;
  bool mig_enabled = false;
  std::optional<bool> pending_mig_enabled;  // set when a mode change awaits a reset
  std::vector<CurrentInstance> instances;
};

struct DesiredGpu {
  bool mig_enabled = false;
  ProfileCounts counts;  // profile name -> count; empty when MIG is disabled
};

enum class OpKind {
  set_mig_mode,          // value: enabled
  destroy_compute_instances,
  destroy_gpu_instance,
  create_gpu_instance,   // profile at start
  create_compute_instance,  // default CI on the GI created or kept
};

std::string_view to_string(OpKind kind);

struct Operation {
  OpKind kind = OpKind::create_gpu_instance;
  uint32_t gpu = 0;
  bool enabled = false;    // set_mig_mode
  uint32_t profile = 0;    // catalog index
  uint32_t start = 0;
  uint32_t gi_id = 0;      // for operations on an existing instance
  std::string uuid;        // MIG device destroyed, when known
  std::string describe(const GpuModel& model) const;
};

struct PlanOptions {
  bool force = false;  // allow destroying instances that have processes
};

struct GpuPlan {
  uint32_t gpu = 0;
  std::vector<Operation> operations;  // in the order to execute
  std::vector<uint32_t> kept;         // gi ids kept as they are
  std::vector<uint32_t> destroyed;    // gi ids destroyed
  MigLayout created;                  // instances to create
  bool mode_change = false;           // MIG mode must change (may need a GPU reset)
  bool changes() const { return !operations.empty(); }
};

// Plans one GPU. Errors: an unknown profile or an unplaceable set (the entry
// is invalid for this GPU), or busy instances that block the desired layout
// without `force`, naming the instances and their processes.
[[nodiscard]] Result<GpuPlan> plan_gpu(const GpuState& state, const DesiredGpu& desired, const PlanOptions& options = {});

}  // namespace tessera::mig
