// How good a plan is: GPUs used against the proven lower bound, memory
// utilisation, and the baselines a user would otherwise deploy:
// - whole-gpu: one whole GPU per replica (a tensor-parallel replica takes its width);
// - all-1g: every GPU cut into the smallest 1g profile (NVIDIA's all-1g.*),
//   whole GPUs for what fits no 1g slice;
// - all-balanced: NVIDIA mig-parted's all-balanced layout on every GPU (2 x 1g,
//   1 x 2g, 1 x 3g), whole GPUs for what fits none of its slices.
// The two MIG baselines are solved with the same solver restricted to their
// layouts, ignoring the fleet's counts.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/fleet_spec.hpp"
#include "planner/plan.hpp"
#include "planner/problem.hpp"
#include "planner/solver.hpp"

namespace tessera::planner {

struct Baseline {
  std::string name;
  std::optional<uint32_t> gpus;  // nothing: the baseline cannot hold these services, or see timed_out
  uint64_t replicas_on_whole_gpus = 0;
  bool timed_out = false;  // no gpus because the solver ran out of time, not because none would do
};

struct Report {
  std::string mode;
  uint32_t gpus_used = 0;
  std::vector<std::pair<std::string, uint32_t>> gpus_by_model;
  uint32_t lower_bound = 0;
  bool optimal = false;
  double gap = 0;  // (gpus_used - lower_bound) / lower_bound; 0 when both are 0
  double seconds = 0;
  uint64_t replicas = 0;
  uint64_t instances_used = 0;
  double memory_utilisation = 0;  // memory asked by replicas / memory of the GPUs used
  std::optional<uint32_t> gpus_kept;  // with current layouts: GPUs used that keep theirs
  std::vector<Baseline> baselines;
};

std::vector<Baseline> compute_baselines(const config::FleetSpec& spec, const SolverOptions& options);

Report make_report(const Problem& problem, const Solved& solved, const Plan& plan, std::vector<Baseline> baselines);

}  // namespace tessera::planner
