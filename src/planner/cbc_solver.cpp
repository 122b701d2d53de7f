// CBC through its C interface (coin/Cbc_C_Interface.h), so no COIN-OR C++
// headers leak into the rest of the planner.
#include <coin/Cbc_C_Interface.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "planner/integer_program.hpp"

namespace tessera::planner {
namespace {

struct CbcDeleter {
  void operator()(Cbc_Model* m) const { Cbc_deleteModel(m); }
};
using CbcModel = std::unique_ptr<Cbc_Model, CbcDeleter>;

// CBC spells infinity as DBL_MAX.
double finite(double v) {
  if (v == kInfinity) return std::numeric_limits<double>::max();
  if (v == -kInfinity) return -std::numeric_limits<double>::max();
  return v;
}

}  // namespace

ProgramSolution solve_program(const IntegerProgram& program, const SolveLimits& limits) {
  auto start = std::chrono::steady_clock::now();
  ProgramSolution out;
  const int ncols = static_cast<int>(program.columns.size());
  const int nrows = static_cast<int>(program.rows.size());

  // Column-major (CSC) matrix, as Cbc_loadProblem wants it.
  std::vector<std::vector<std::pair<int, double>>> by_col(program.columns.size());
  for (int r = 0; r < nrows; ++r)
    for (const auto& [c, v] : program.rows[static_cast<size_t>(r)].terms) by_col[static_cast<size_t>(c)].emplace_back(r, v);
  std::vector<CoinBigIndex> starts{0};
  std::vector<int> index;
  std::vector<double> value;
  std::vector<double> col_lb, col_ub, obj, row_lb, row_ub;
  for (int c = 0; c < ncols; ++c) {
    for (const auto& [r, v] : by_col[static_cast<size_t>(c)]) {
      index.push_back(r);
      value.push_back(v);
    }
    starts.push_back(static_cast<CoinBigIndex>(index.size()));
    const auto& col = program.columns[static_cast<size_t>(c)];
    col_lb.push_back(finite(col.lower));
    col_ub.push_back(finite(col.upper));
    obj.push_back(col.cost);
  }
  for (const auto& row : program.rows) {
    row_lb.push_back(finite(row.lower));
    row_ub.push_back(finite(row.upper));
  }

  CbcModel model(Cbc_newModel());
  Cbc_loadProblem(model.get(), ncols, nrows, starts.data(), index.data(), value.data(), col_lb.data(), col_ub.data(),
                  obj.data(), row_lb.data(), row_ub.data());
  for (int c = 0; c < ncols; ++c) {
    if (program.columns[static_cast<size_t>(c)].integer && !limits.relax) Cbc_setInteger(model.get(), c);
    else Cbc_setContinuous(model.get(), c);
  }
  Cbc_setObjSense(model.get(), 1.0);
  Cbc_setLogLevel(model.get(), 0);
  Cbc_setMaximumSeconds(model.get(), limits.seconds);
  Cbc_setAllowableGap(model.get(), 0.0);
  Cbc_setParameter(model.get(), "ratioGap", "0");
  Cbc_solve(model.get());

  // Stopped by the clock (in preprocessing CBC does not always set its flag),
  // CBC can report a program it never finished as infeasible: only a solve
  // that ended before its limit proves infeasibility.
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.time_limit_reached = Cbc_isSecondsLimitReached(model.get()) != 0 || elapsed >= limits.seconds;
  if (Cbc_isProvenInfeasible(model.get()) && !out.time_limit_reached) {
    out.status = SolveStatus::infeasible;
  } else {
    const double* sol = Cbc_getColSolution(model.get());
    int numcols = Cbc_getNumCols(model.get());
    if (sol && numcols == ncols && (Cbc_isProvenOptimal(model.get()) || Cbc_getObjValue(model.get()) < 1e49)) {
      out.values.assign(sol, sol + ncols);
      out.objective = Cbc_getObjValue(model.get());
      out.status = Cbc_isProvenOptimal(model.get()) ? SolveStatus::optimal : SolveStatus::feasible;
    }
    out.bound = Cbc_getBestPossibleObjValue(model.get());
    if (out.status == SolveStatus::optimal) out.bound = out.objective;
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace tessera::planner
