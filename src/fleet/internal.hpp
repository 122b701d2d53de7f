// Shared inside src/fleet only.
#pragma once

#include <vector>

#include "fleet/fleet.hpp"
#include "planner/integer_program.hpp"

namespace tessera::fleet {

// Every legal target of `model`: MIG off, then every profile multiset that
// some layout of the catalog holds (media-engine variants left out), the
// empty one included. Computed once per model.
const std::vector<Target>& candidate_targets(const GpuModel& model);

// The greedy first fit as a plan (GPUs, placements; no configs or rollout yet).
FleetPlan first_fit_plan(const Problem& problem);

}  // namespace tessera::fleet
