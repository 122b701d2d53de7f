// CBC through its C interface (coin/Cbc_C_Interface.h), so no COIN-OR C++
// headers leak into the rest of the planner; and loaded at run time
// (libCbcSolver.so.3, as the NVML driver is), so that only commands that
// solve a program map COIN-OR's libraries: `tessera exporter`, `plugin` and
// `node` never do (docs/benchmarks.md, the exporter's memory).
#include <coin/Cbc_C_Interface.h>
#include <dlfcn.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <span>
#include <string>

#include "planner/integer_program.hpp"

namespace tessera::planner {
namespace {

// The entry points used, by the C interface's own declarations.
#define TESSERA_CBC_FUNCTIONS(X)                                                                                   \
  X(Cbc_newModel) X(Cbc_deleteModel) X(Cbc_loadProblem) X(Cbc_setInteger) X(Cbc_setContinuous) X(Cbc_setObjSense) \
  X(Cbc_setLogLevel) X(Cbc_setMaximumSeconds) X(Cbc_setAllowableGap) X(Cbc_setParameter) X(Cbc_solve)             \
  X(Cbc_isSecondsLimitReached) X(Cbc_isProvenInfeasible) X(Cbc_getColSolution) X(Cbc_getNumCols)                 \
  X(Cbc_isProvenOptimal) X(Cbc_getObjValue) X(Cbc_getBestPossibleObjValue) X(Cbc_setMIPStartI)

struct CbcApi {
#define TESSERA_CBC_POINTER(name) decltype(&::name) name = nullptr;
  TESSERA_CBC_FUNCTIONS(TESSERA_CBC_POINTER)
#undef TESSERA_CBC_POINTER
  std::string error;  // why it could not be loaded; empty when loaded
};

// Loaded once, never unloaded. TESSERA_CBC_LIBRARY names another library.
const CbcApi& cbc() {
  static CbcApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string tried;
    void* handle = nullptr;
    const char* env = std::getenv("TESSERA_CBC_LIBRARY");
    for (const char* name : {env, "libCbcSolver.so.3", "libCbcSolver.so"}) {
      if (!name || !*name) continue;
      handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (handle) break;
      const char* why = ::dlerror();
      tried += std::string(tried.empty() ? "" : "; ") + (why ? std::string(why) : std::string(name) + ": not found");
      if (name == env) break;  // a library named on purpose is not replaced by another
    }
    if (!handle) {
      api.error = "the CBC solver library cannot be loaded (" + tried +
                  "); install Debian's coinor-libcbc3, or name the library in TESSERA_CBC_LIBRARY";
      return;
    }
#define TESSERA_CBC_BIND(name)                                                                      \
  api.name = reinterpret_cast<decltype(&::name)>(::dlsym(handle, #name));                          \
  if (!api.name) {                                                                                  \
    api.error = std::string("the CBC solver library has no ") + #name + " (it is not CBC's C interface)"; \
    return;                                                                                         \
  }
    TESSERA_CBC_FUNCTIONS(TESSERA_CBC_BIND)
#undef TESSERA_CBC_BIND
  });
  return api;
}

struct CbcDeleter {
  void operator()(Cbc_Model* m) const { cbc().Cbc_deleteModel(m); }
};
using CbcModel = std::unique_ptr<Cbc_Model, CbcDeleter>;

// CBC spells infinity as DBL_MAX.
double finite(double v) {
  if (v == kInfinity) return std::numeric_limits<double>::max();
  if (v == -kInfinity) return -std::numeric_limits<double>::max();
  return v;
}

}  // namespace

Result<void> solver_available() {
  if (const auto& api = cbc(); !api.error.empty()) return fail(Errc::unsupported, api.error);
  return {};
}

ProgramSolution solve_program(const IntegerProgram& program, const SolveLimits& limits, std::span<const double> mip_start) {
  auto start = std::chrono::steady_clock::now();
  ProgramSolution out;
  const CbcApi& api = cbc();
  if (!api.error.empty()) {
    out.error = api.error;
    return out;
  }
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

  CbcModel model(api.Cbc_newModel());
  api.Cbc_loadProblem(model.get(), ncols, nrows, starts.data(), index.data(), value.data(), col_lb.data(), col_ub.data(),
                  obj.data(), row_lb.data(), row_ub.data());
  for (int c = 0; c < ncols; ++c) {
    if (program.columns[static_cast<size_t>(c)].integer && !limits.relax) api.Cbc_setInteger(model.get(), c);
    else api.Cbc_setContinuous(model.get(), c);
  }
  api.Cbc_setObjSense(model.get(), 1.0);
  api.Cbc_setLogLevel(model.get(), 0);
  api.Cbc_setMaximumSeconds(model.get(), limits.seconds);
  api.Cbc_setAllowableGap(model.get(), 0.0);
  api.Cbc_setParameter(model.get(), "ratioGap", "0");
  const bool started = mip_start.size() == static_cast<size_t>(ncols) && ncols > 0;
  if (started) {
    std::vector<int> idx(static_cast<size_t>(ncols));
    for (int c = 0; c < ncols; ++c) idx[static_cast<size_t>(c)] = c;
    api.Cbc_setMIPStartI(model.get(), ncols, idx.data(), mip_start.data());
    // CBC 2.10's preprocessing can crash in CglPreProcess::postProcess when
    // the clock stops a solve that began from a MIP start (seen on the fleet
    // benchmark's fullest fleets): it is left off then.
    api.Cbc_setParameter(model.get(), "preprocess", "off");
  }
  api.Cbc_solve(model.get());

  // Stopped by the clock (in preprocessing CBC does not always set its flag),
  // CBC can report a program it never finished as infeasible: only a solve
  // that ended before its limit proves infeasibility.
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.time_limit_reached = api.Cbc_isSecondsLimitReached(model.get()) != 0 || elapsed >= limits.seconds;
  if (api.Cbc_isProvenInfeasible(model.get()) && !out.time_limit_reached) {
    out.status = SolveStatus::infeasible;
  } else {
    const double* sol = api.Cbc_getColSolution(model.get());
    int numcols = api.Cbc_getNumCols(model.get());
    if (sol && numcols == ncols && (api.Cbc_isProvenOptimal(model.get()) || api.Cbc_getObjValue(model.get()) < 1e49)) {
      out.values.assign(sol, sol + ncols);
      out.objective = api.Cbc_getObjValue(model.get());
      out.status = api.Cbc_isProvenOptimal(model.get()) ? SolveStatus::optimal : SolveStatus::feasible;
    }
    out.bound = api.Cbc_getBestPossibleObjValue(model.get());
    if (out.status == SolveStatus::optimal) out.bound = out.objective;
  }
  // Without an answer of its own, a start holds (the caller's contract: it is feasible).
  if (started && out.values.empty() && out.status != SolveStatus::infeasible) {
    out.values.assign(mip_start.begin(), mip_start.end());
    out.status = SolveStatus::feasible;
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace tessera::planner
