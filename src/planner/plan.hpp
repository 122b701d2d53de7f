// A plan: each GPU used, how it is cut, and which replica runs in which
// instance. Built from the solver's counts by handing out instances in order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "planner/problem.hpp"
#include "planner/solver.hpp"

namespace tessera::planner {

struct ReplicaRef {
  int service = 0;
  uint32_t replica = 0;
  uint32_t rank = 0;  // tensor-parallel rank (0 unless gpus > 1)
};

struct PlannedInstance {
  int unit = 0;
  uint32_t profile = 0;  // catalog profile index; unused for a whole GPU
  uint32_t start = 0;    // memory slice; 0 for a whole GPU
  Isolation sharing = Isolation::dedicated;
  std::vector<ReplicaRef> replicas;
};

struct PlannedGpu {
  int gpu_type = 0;
  uint32_t device = 0;  // which GPU of its model in the fleet (the index of `current`)
  int layout = 0;       // index into Problem::layouts
  std::vector<PlannedInstance> instances;
};

// Where one replica runs: (GPU index in the plan, instance index) per rank.
using ReplicaSite = std::vector<std::pair<uint32_t, uint32_t>>;

struct Plan {
  std::vector<PlannedGpu> gpus;
  std::vector<std::vector<ReplicaSite>> sites;  // per service, per replica
};

// Hands out the counted instances to replicas. GPUs that receive nothing are
// left out of the plan. Each planned GPU then takes a device of its model,
// those already cut its way first.
Plan build_plan(const Problem& problem, const Counts& counts);

// The unit of an instance, for its memory and name.
const Unit& unit_of(const Problem& problem, const PlannedInstance& instance);

// Planned GPUs whose device is already cut the planned way.
uint32_t gpus_kept(const Problem& problem, const Plan& plan);

// Memory asked by the replicas in `instance`, in MiB.
uint64_t used_memory_mib(const Problem& problem, const PlannedInstance& instance);

}  // namespace tessera::planner
