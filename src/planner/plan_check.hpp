// Checks a plan against the hardware's rules and the services' needs,
// independently of how it was built: every MIG layout placeable (core's
// check_layout), every replica placed exactly once (tensor-parallel replicas
// on distinct whole GPUs), memory and compute shares within each instance,
// rates served, fleet counts respected.
#pragma once

#include "core/error.hpp"
#include "planner/plan.hpp"
#include "planner/problem.hpp"

namespace tessera::planner {

[[nodiscard]] Result<void> check_plan(const Problem& problem, const Plan& plan);

}  // namespace tessera::planner
