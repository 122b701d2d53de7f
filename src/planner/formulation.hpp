// The planning problem as an integer program over counts: y_L = GPUs cut with
// layout L, x_gu = instances of unit u given to replica group g, z_k = units
// filled with sharing pattern k. Its size grows with the number of distinct
// layouts, units and groups, not with the number of GPUs.
//
//   min  sum_L y_L
//   s.t. sum_g gpus_g x_gu + sum_{k on u} z_k <= sum_L n_Lu y_L   for each unit u
//        sum_u x_gu  = replicas_g                                  fixed groups
//        sum_u cap_gu x_gu >= demand_g                             groups served by rate
//        sum_k n_tk z_k >= replicas_t                              shared/best-effort types
//        sum_{L of model m} y_L <= count_m (+ e_m)                 fleet limits
#pragma once

#include <vector>

#include "planner/integer_program.hpp"
#include "planner/problem.hpp"

namespace tessera::planner {

struct Formulation {
  IntegerProgram program;
  std::vector<int> layout_col;              // per layout choice
  std::vector<std::vector<int>> group_col;  // per group, per unit; -1 = does not fit
  std::vector<int> pattern_col;             // per pattern
  std::vector<int> extra_col;               // per GPU type; -1 unless with_extra and counted
};

// Cost of one GPU beyond the fleet's count in the repair program.
constexpr double kExtraGpuCost = 1e4;

// How shared and best-effort replicas enter the program: as fills (exact,
// when the enumeration was complete), or by memory only (a relaxation whose
// optimum is a valid lower bound when the fills were too many to list: the
// replicas at least a given size need at least their memory in units at
// least that size, and their compute shares and client counts fit too).
enum class SharingModel { patterns, by_memory };

// `with_extra`: allow GPUs beyond each model's count at a high cost, to say
// how many more would make an infeasible fleet feasible.
Formulation formulate(const Problem& problem, bool with_extra = false, SharingModel sharing = SharingModel::patterns);

}  // namespace tessera::planner
