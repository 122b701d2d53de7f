#include "planner/solver.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "core/text.hpp"
#include "planner/formulation.hpp"

namespace tessera::planner {
namespace {

constexpr double kTolerance = 1e-6;

uint32_t to_count(double v) { return static_cast<uint32_t>(std::llround(std::max(0.0, v))); }

Counts read_counts(const Problem& p, const Formulation& f, const std::vector<double>& values) {
  Counts c;
  for (int col : f.layout_col) c.layouts.push_back(to_count(values[static_cast<size_t>(col)]));
  c.group_units.assign(p.groups.size(), std::vector<uint32_t>(p.units.size(), 0));
  for (size_t g = 0; g < p.groups.size(); ++g)
    for (size_t u = 0; u < p.units.size(); ++u)
      if (int col = f.group_col[g][u]; col >= 0) c.group_units[g][u] = to_count(values[static_cast<size_t>(col)]);
  for (int col : f.pattern_col) c.patterns.push_back(to_count(values[static_cast<size_t>(col)]));
  return c;
}

uint32_t total(const std::vector<uint32_t>& v) { return std::accumulate(v.begin(), v.end(), 0u); }

uint32_t ceil_bound(double v) { return static_cast<uint32_t>(std::max(0.0, std::ceil(v - kTolerance))); }

// A valid bound when the fills were too many to list: the program with
// sharing by memory only (formulation.hpp), as an LP or, within a time
// limit, as an integer program (its best bound).
uint32_t relaxed_bound(const Problem& p, double seconds, bool lp_only) {
  auto f = formulate(p, false, SharingModel::by_memory);
  auto sol = solve_program(f.program, {std::min(seconds, 10.0), lp_only});
  if (sol.status == SolveStatus::infeasible || (lp_only && sol.status != SolveStatus::optimal)) return 0;
  return ceil_bound(lp_only ? sol.objective : sol.bound);  // CBC's best bound holds even without a solution
}

// "fleet.yaml:3:5: error: fleet[0].count: <message>": errors about the fleet point at the count.
std::string at_fleet(const Problem& p, size_t type, const std::string& message) {
  const auto& t = p.gpu_types[type];
  return config::format({config::Severity::error, t.where, t.field + ".count", message});
}

// No plan in time says so, and says it is not a proof that none exists.
Error no_plan_in_time(double seconds) {
  return Error{Errc::timeout, "no plan found within the time limit (" + format_seconds(seconds) +
                                  "); this does not mean the services cannot fit: give a longer --time-limit"};
}

bool fleet_is_limited(const Problem& p) {
  return std::any_of(p.gpu_types.begin(), p.gpu_types.end(), [](const auto& t) { return t.count.has_value(); });
}

size_t first_counted(const Problem& p) {
  for (size_t t = 0; t < p.gpu_types.size(); ++t)
    if (p.gpu_types[t].count) return t;
  return 0;
}

// The fleet is too small: find the fewest extra GPUs (by model) that make it feasible.
Error too_small(const Problem& p, double seconds) {
  auto f = formulate(p, true);
  // Bounded: on a large fleet proving the fewest extra GPUs can take long; any feasible answer is true.
  const double limit = std::min(seconds, 10.0);
  auto sol = solve_program(f.program, {limit, false});
  if (sol.status == SolveStatus::infeasible)  // proven: not even with more GPUs
    return Error{Errc::validation, at_fleet(p, first_counted(p), "the fleet cannot hold these services")};
  if (sol.status != SolveStatus::optimal && sol.status != SolveStatus::feasible)
    return Error{Errc::validation,
                 at_fleet(p, first_counted(p), "the fleet is too small for these services (proven); how many more GPUs "
                                               "it needs was not found within the time limit (" +
                                               format_seconds(limit) + ")")};
  std::string more;
  size_t first = 0;
  for (size_t t = 0; t < p.gpu_types.size(); ++t) {
    if (f.extra_col[t] < 0) continue;
    uint32_t n = to_count(sol.values[static_cast<size_t>(f.extra_col[t])]);
    if (n == 0) continue;
    const auto& type = p.gpu_types[t];
    if (more.empty()) first = t;
    more += (more.empty() ? "" : " and ") + std::to_string(n) + " more " + type.model->name + " (" +
            std::to_string(*type.count + n) + " in all)";
  }
  return Error{Errc::validation, at_fleet(p, first, "the fleet is too small: " + more + " would make it feasible")};
}

// Among plans with `gpus` GPUs, one that keeps the most GPUs as they are cut now.
void keep_current(const Problem& p, Solved& s, double seconds) {
  auto f = formulate(p);
  auto& ip = f.program;
  for (auto& col : ip.columns) col.cost = 0;
  Row limit{{}, -kInfinity, double(s.gpus)};
  for (int col : f.layout_col) limit.terms.emplace_back(col, 1.0);
  ip.rows.push_back(std::move(limit));
  auto now = p.current_counts();
  for (size_t l = 0; l < p.layouts.size(); ++l) {
    if (now[l] == 0) continue;
    int kept = ip.add({0, double(now[l]), -1.0, true});
    ip.rows.push_back({{{kept, 1.0}, {f.layout_col[l], -1.0}}, -kInfinity, 0.0});
  }
  auto sol = solve_program(ip, {seconds, false});
  if (sol.status != SolveStatus::optimal && sol.status != SolveStatus::feasible) return;
  auto counts = read_counts(p, f, sol.values);
  if (total(counts.layouts) == s.gpus) s.counts = std::move(counts);
}

Result<Solved> solve_exact(const Problem& p, const SolverOptions& options) {
  auto f = formulate(p);
  auto sol = solve_program(f.program, {options.seconds, false});
  if (sol.status == SolveStatus::infeasible)
    return unexpected<Error>(why_no_plan(p, options.seconds, sol.time_limit_reached));
  if (sol.status == SolveStatus::unknown) return unexpected<Error>(no_plan_in_time(options.seconds));
  Solved s;
  s.counts = read_counts(p, f, sol.values);
  s.gpus = total(s.counts.layouts);
  s.lower_bound = std::min(s.gpus, ceil_bound(sol.bound));
  s.optimal = sol.status == SolveStatus::optimal && p.patterns_complete;
  if (!p.patterns_complete) s.lower_bound = relaxed_bound(p, options.seconds, false);
  s.optimal = s.optimal || s.gpus == s.lower_bound;
  s.mode = Mode::exact;
  if (p.has_current()) keep_current(p, s, options.seconds);
  return s;
}

// Floors the LP's fills, then covers the replicas left over greedily: each
// step adds the fill that places the most memory still unplaced per memory
// slice it occupies. (Rounding every fill up leaves many instances empty.)
void round_patterns(const Problem& p, const Formulation& f, const std::vector<double>& lp, Counts& c) {
  std::vector<int64_t> left(p.share_types.size());
  for (size_t t = 0; t < left.size(); ++t) left[t] = p.share_types[t].replicas;
  c.patterns.assign(p.patterns.size(), 0);
  for (size_t k = 0; k < p.patterns.size(); ++k) {
    c.patterns[k] = static_cast<uint32_t>(std::floor(lp[size_t(f.pattern_col[k])] + kTolerance));
    for (const auto& [t, n] : p.patterns[k].types) left[size_t(t)] -= int64_t(n) * c.patterns[k];
  }
  for (;;) {
    int best = -1;
    double best_score = 0;
    for (size_t k = 0; k < p.patterns.size(); ++k) {
      uint64_t placed = 0;
      for (const auto& [t, n] : p.patterns[k].types)
        placed += uint64_t(std::clamp<int64_t>(left[size_t(t)], 0, n)) * p.share_types[size_t(t)].memory_mib;
      double score = double(placed) / std::max(1u, p.units[size_t(p.patterns[k].unit)].memory_slices);
      if (placed > 0 && score > best_score) {
        best = int(k);
        best_score = score;
      }
    }
    if (best < 0) break;
    ++c.patterns[size_t(best)];
    for (const auto& [t, n] : p.patterns[size_t(best)].types) left[size_t(t)] -= n;
  }
}

// Rounds the LP's instance counts up to whole instances that still serve every group.
Counts round_instances(const Problem& p, const Formulation& f, const std::vector<double>& lp) {
  Counts c;
  c.group_units.assign(p.groups.size(), std::vector<uint32_t>(p.units.size(), 0));
  for (size_t g = 0; g < p.groups.size(); ++g) {
    const auto& group = p.groups[g];
    auto& out = c.group_units[g];
    if (group.demand) {
      // Floors, then the smallest single slice that serves what is left (ParvaGPU's "demand
      // matching" idea); while no slice is big enough, one more of the highest-rate slice.
      double residual = *group.demand;
      for (size_t u = 0; u < p.units.size(); ++u)
        if (int col = f.group_col[g][u]; col >= 0) {
          out[u] = static_cast<uint32_t>(std::floor(lp[size_t(col)] + kTolerance));
          residual -= out[u] * group.capacity[u];
        }
      while (residual > kTolerance) {
        int smallest = -1, fastest = -1;
        for (size_t u = 0; u < p.units.size(); ++u) {
          if (f.group_col[g][u] < 0) continue;
          const Unit& unit = p.units[u];
          auto size = [&](int v) { return p.units[size_t(v)].memory_slices + p.units[size_t(v)].compute_slices; };
          if (group.capacity[u] + kTolerance >= residual && (smallest < 0 || unit.memory_slices + unit.compute_slices < size(smallest)))
            smallest = int(u);
          if (fastest < 0 || group.capacity[u] > group.capacity[size_t(fastest)]) fastest = int(u);
        }
        int pick = smallest >= 0 ? smallest : fastest;
        ++out[size_t(pick)];
        residual -= group.capacity[size_t(pick)];
      }
      continue;
    }
    // Largest remainder: floors first, then the biggest fractions, keeping the replica count exact.
    uint32_t placed = 0;
    std::vector<std::pair<double, size_t>> fractions;
    for (size_t u = 0; u < p.units.size(); ++u) {
      int col = f.group_col[g][u];
      if (col < 0) continue;
      double v = std::max(0.0, lp[size_t(col)]);
      out[u] = static_cast<uint32_t>(std::floor(v + kTolerance));
      placed += out[u];
      fractions.emplace_back(v - out[u], u);
    }
    std::sort(fractions.begin(), fractions.end(), std::greater<>());
    for (size_t i = 0; placed < group.replicas && !fractions.empty(); ++i, ++placed) ++out[fractions[i % fractions.size()].second];
  }
  round_patterns(p, f, lp, c);
  return c;
}

// The fewest GPUs whose layouts hold `needed` instances of each unit.
// `limited`: within the fleet's counts.
Result<std::vector<uint32_t>> cover(const Problem& p, const std::vector<uint64_t>& needed, double seconds, bool limited) {
  IntegerProgram ip;
  for (const auto& l : p.layouts) {
    const auto& type = p.gpu_types[size_t(l.gpu_type)];
    ip.add({0, type.count && limited ? double(*type.count) : kInfinity, 1.0, true});
  }
  for (size_t u = 0; u < p.units.size(); ++u) {
    if (needed[u] == 0) continue;
    Row r{{}, double(needed[u]), kInfinity};
    for (size_t l = 0; l < p.layouts.size(); ++l)
      for (const auto& [unit, n] : p.layouts[l].units)
        if (size_t(unit) == u) r.terms.emplace_back(int(l), double(n));
    ip.rows.push_back(std::move(r));
  }
  for (size_t t = 0; t < p.gpu_types.size() && limited; ++t) {
    if (!p.gpu_types[t].count) continue;
    Row r{{}, -kInfinity, double(*p.gpu_types[t].count)};
    for (size_t l = 0; l < p.layouts.size(); ++l)
      if (size_t(p.layouts[l].gpu_type) == t) r.terms.emplace_back(int(l), 1.0);
    ip.rows.push_back(std::move(r));
  }
  auto sol = solve_program(ip, {seconds, false});
  if (sol.status == SolveStatus::unknown) return unexpected<Error>(no_plan_in_time(seconds));
  if (sol.status != SolveStatus::optimal && sol.status != SolveStatus::feasible)
    return fail(Errc::validation, "rounded plan does not fit the fleet");
  std::vector<uint32_t> y;
  for (double v : sol.values) y.push_back(to_count(v));
  return y;
}

Result<Solved> solve_fast(const Problem& p, const SolverOptions& options) {
  auto f = formulate(p);
  auto lp = solve_program(f.program, {options.seconds, true});
  if (lp.status == SolveStatus::infeasible) return unexpected<Error>(why_no_plan(p, options.seconds, lp.time_limit_reached));
  if (lp.status != SolveStatus::optimal) {
    if (lp.time_limit_reached) return unexpected<Error>(no_plan_in_time(options.seconds));
    return fail(Errc::internal, "the LP relaxation did not solve");
  }
  Solved s;
  s.mode = Mode::fast;
  s.counts = round_instances(p, f, lp.values);
  std::vector<uint64_t> needed(p.units.size(), 0);
  for (size_t g = 0; g < p.groups.size(); ++g)
    for (size_t u = 0; u < p.units.size(); ++u) needed[u] += uint64_t(s.counts.group_units[g][u]) * p.groups[g].gpus;
  for (size_t k = 0; k < p.patterns.size(); ++k) needed[size_t(p.patterns[k].unit)] += s.counts.patterns[k];
  auto y = cover(p, needed, std::min(options.seconds, 2.0), true);
  // Out of time is not out of GPUs: an unlimited fleet is never too small.
  if (!y && y.error().code == Errc::timeout) return unexpected<Error>(no_plan_in_time(options.seconds));
  if (!y) {
    // Rounding overflowed a fleet limit: let CBC try for a while, then say what the rounding needed.
    SolverOptions bounded = options;
    bounded.seconds = std::min(options.seconds, 10.0);
    if (auto exact = solve_exact(p, bounded)) return exact;
    auto open = cover(p, needed, std::min(options.seconds, 2.0), false);
    std::string needs = open ? std::to_string(total(*open)) + " GPUs" : "more GPUs";
    return fail(Errc::validation, at_fleet(p, first_counted(p), "the fast mode's plan needs " + needs + " (lower bound " +
                                                                   std::to_string(ceil_bound(lp.objective)) +
                                                                   "), more than the fleet has; try --mode exact "
                                                                   "with a longer --time-limit"));
  }
  s.counts.layouts = std::move(*y);
  s.gpus = total(s.counts.layouts);
  s.lower_bound = std::min(s.gpus, p.patterns_complete ? ceil_bound(lp.objective) : relaxed_bound(p, options.seconds, true));
  s.optimal = s.gpus == s.lower_bound;
  return s;
}

}  // namespace

// The program was reported infeasible. Proven only when the solve ran to its
// end; then the fleet is too small (an unlimited fleet never is).
Error why_no_plan(const Problem& p, double seconds, bool time_limit_reached) {
  if (time_limit_reached) return no_plan_in_time(seconds);
  if (fleet_is_limited(p)) return too_small(p, seconds);
  return Error{Errc::internal, "the solver found an unlimited fleet infeasible"};
}

std::string_view to_string(Mode mode) {
  switch (mode) {
    case Mode::exact: return "exact";
    case Mode::fast: return "fast";
    case Mode::automatic: return "auto";
  }
  return "auto";
}

std::vector<uint32_t> gpus_per_type(const Problem& p, const Counts& counts) {
  std::vector<uint32_t> out(p.gpu_types.size(), 0);
  for (size_t l = 0; l < p.layouts.size(); ++l) out[size_t(p.layouts[l].gpu_type)] += counts.layouts[l];
  return out;
}

Result<Solved> solve(const Problem& p, const SolverOptions& options) {
  if (auto cbc = solver_available(); !cbc) return unexpected(cbc.error());
  auto start = std::chrono::steady_clock::now();
  Mode mode = options.mode;
  if (mode == Mode::automatic) {
    size_t columns = p.layouts.size() + p.patterns.size();
    for (const auto& g : p.groups) columns += size_t(std::count(g.fits.begin(), g.fits.end(), true));
    mode = columns <= options.exact_max_columns && p.replica_count() <= options.exact_max_replicas ? Mode::exact : Mode::fast;
  }
  auto out = mode == Mode::exact ? solve_exact(p, options) : solve_fast(p, options);
  if (out) out->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace tessera::planner
