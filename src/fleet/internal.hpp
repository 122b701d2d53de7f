// Shared inside src/fleet only.
#pragma once

#include <vector>

#include "fleet/fleet.hpp"
#include "planner/integer_program.hpp"

namespace tessera::fleet {

// Every legal target of `model`: MIG off, then every profile multiset that
// some layout of the catalog holds, the empty one included; media-engine
// variants (1g.10gb+me, ...) only with `media` (Problem::media_engines: some
// pod or GPU has one). Computed once per model and flag.
const std::vector<Target>& candidate_targets(const GpuModel& model, bool media);

// The greedy first fit as a plan (GPUs, placements; no configs or rollout yet).
FleetPlan first_fit_plan(const Problem& problem);

// NodeResourcesFit over a whole plan: on each node, the pods placed there anew (the highest
// priority first) take its room in turn, with what the pods evicted there held given back; a pod
// that no longer fits is left unserved and its instances freed. The number left out.
size_t drop_unfit(const Problem& problem, FleetPlan& plan);

}  // namespace tessera::fleet
