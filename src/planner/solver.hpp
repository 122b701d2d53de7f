// The two ways to solve a planning problem, both returning counts and a
// proven lower bound:
// - exact: CBC on the full integer program (formulation.hpp); proves the optimum
//   unless the time limit is hit, and then reports its best bound.
// - fast: the LP relaxation (its optimum rounded up is the bound), rounded to
//   instances per group, then the fewest GPUs whose layouts hold them (a small
//   covering program over layouts only). For thousands of services and GPUs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "planner/problem.hpp"

namespace tessera::planner {

enum class Mode { exact, fast, automatic };
std::string_view to_string(Mode mode);

struct Counts {
  std::vector<uint32_t> layouts;                   // GPUs per layout choice
  std::vector<std::vector<uint32_t>> group_units;  // per group, instances per unit
  std::vector<uint32_t> patterns;                  // units filled per pattern
};

struct SolverOptions {
  Mode mode = Mode::automatic;
  double seconds = 60;               // time limit of the exact solve
  size_t exact_max_columns = 4000;   // automatic: larger programs go to the fast mode,
  uint64_t exact_max_replicas = 5000;  // and so do programs with more replicas
};

struct Solved {
  Counts counts;
  uint32_t gpus = 0;
  uint32_t lower_bound = 0;
  bool optimal = false;  // proven
  Mode mode = Mode::exact;
  double seconds = 0;
};

// Errors: Errc::validation when the fleet is too small, with how many more
// GPUs of which model would make it feasible, formatted as a diagnostic that
// points at the fleet entry's count.
[[nodiscard]] Result<Solved> solve(const Problem& problem, const SolverOptions& options);

// Why a solve that was reported infeasible gave no plan: stopped by the clock
// (Errc::timeout: no plan found in time, which proves nothing), else the
// fleet is too small (as solve() says it).
[[nodiscard]] Error why_no_plan(const Problem& problem, double seconds, bool time_limit_reached);

// GPUs per model in `counts`.
std::vector<uint32_t> gpus_per_type(const Problem& problem, const Counts& counts);

}  // namespace tessera::planner
