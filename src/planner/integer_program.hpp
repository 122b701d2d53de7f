// A mixed-integer program as plain values, and its solution by CBC (COIN-OR
// branch and cut). The planner builds the program; this file only solves it.
#pragma once

#include <limits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/error.hpp"

namespace tessera::planner {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

struct Column {
  double lower = 0;
  double upper = kInfinity;
  double cost = 0;
  bool integer = true;
};

struct Row {
  std::vector<std::pair<int, double>> terms;  // (column, coefficient)
  double lower = -kInfinity;
  double upper = kInfinity;
};

struct IntegerProgram {
  std::vector<Column> columns;
  std::vector<Row> rows;
  int add(Column c) {
    columns.push_back(c);
    return static_cast<int>(columns.size()) - 1;
  }
};

enum class SolveStatus { optimal, feasible, infeasible, unknown };

struct SolveLimits {
  double seconds = 60;
  bool relax = false;  // solve the LP relaxation only
};

struct ProgramSolution {
  SolveStatus status = SolveStatus::unknown;
  std::vector<double> values;
  double objective = 0;
  double bound = 0;  // best proven lower bound (minimisation)
  double seconds = 0;
  // The solve stopped at its time limit: `unknown` then means "nothing found
  // in time", never "there is nothing".
  bool time_limit_reached = false;
  std::string error;  // the solver could not be run at all (see solver_available)
};

// Whether CBC can be loaded (it is, on first use: libCbcSolver.so.3, or
// TESSERA_CBC_LIBRARY); the error says what to install.
[[nodiscard]] Result<void> solver_available();

// Minimises; never throws. CBC's model is freed on every path. `mip_start`,
// when it has a value per column, is a feasible solution CBC begins from, so
// a solve stopped by the clock still returns at least it.
ProgramSolution solve_program(const IntegerProgram& program, const SolveLimits& limits,
                              std::span<const double> mip_start = {});

}  // namespace tessera::planner
