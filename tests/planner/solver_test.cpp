// The solvers against optima computed by hand, and the invariants of every
// plan checked here with core's rules, not the planner's own checker.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "config/fleet_spec.hpp"
#include "core/mig_layout.hpp"
#include "planner/plan.hpp"
#include "planner/plan_check.hpp"
#include "planner/problem.hpp"
#include "planner/solver.hpp"

namespace tessera::planner {
namespace {

struct Outcome {
  Problem problem;
  Solved solved;
  Plan plan;
};

std::optional<Problem> problem_of(const std::string& yaml, config::Diagnostics& diags) {
  auto spec = config::parse_fleet_spec(yaml, "spec.yaml", Catalog::builtin(), diags);
  if (!spec) return std::nullopt;
  return build_problem(*spec, {}, diags);
}

// Invariants every plan must keep, checked independently of plan_check.cpp.
void expect_valid(const Problem& p, const Plan& plan) {
  std::map<std::pair<int, uint32_t>, std::set<uint32_t>> ranks;  // (service, replica) -> GPUs of its ranks
  for (const auto& gpu : plan.gpus) {
    const GpuModel& model = *p.gpu_types[size_t(gpu.gpu_type)].model;
    MigLayout layout;
    for (const auto& inst : gpu.instances)
      if (p.units[size_t(inst.unit)].profile != kWholeGpu) layout.push_back({inst.profile, inst.start});
    if (!layout.empty()) {
      auto ok = check_layout(model, layout);
      EXPECT_TRUE(ok) << (ok ? "" : ok.error().message);
    } else {
      EXPECT_EQ(gpu.instances.size(), 1u);
    }
    for (const auto& inst : gpu.instances) {
      uint64_t used = 0;
      for (const auto& r : inst.replicas) used += p.services[size_t(r.service)].memory_mib;
      EXPECT_LE(used, p.units[size_t(inst.unit)].memory_mib);
      if (inst.sharing == Isolation::dedicated) {
        EXPECT_LE(inst.replicas.size(), 1u);
      }
    }
  }
  for (size_t g = 0; g < plan.gpus.size(); ++g)
    for (const auto& inst : plan.gpus[g].instances)
      for (const auto& r : inst.replicas) {
        auto& gpus = ranks[std::pair(r.service, r.replica)];
        EXPECT_TRUE(gpus.insert(uint32_t(g)).second);
      }
  for (size_t s = 0; s < p.services.size(); ++s) {
    const auto& svc = p.services[s];
    if (!svc.replicas) continue;
    for (uint32_t r = 0; r < *svc.replicas; ++r)
      EXPECT_EQ(ranks[std::pair(int(s), r)].size(), svc.gpus) << svc.name << " replica " << r << " placed once per rank";
  }
  size_t placed = ranks.size();
  size_t wanted = 0;
  for (const auto& svc : p.services) wanted += svc.replicas.value_or(0);
  for (size_t s = 0; s < p.services.size(); ++s)
    if (p.services[s].demand) wanted += plan.sites[s].size();
  EXPECT_EQ(placed, wanted);
  auto checked = check_plan(p, plan);
  EXPECT_TRUE(checked) << (checked ? "" : checked.error().message);
}

Outcome run(const std::string& yaml, Mode mode = Mode::exact) {
  config::Diagnostics diags;
  auto problem = problem_of(yaml, diags);
  EXPECT_TRUE(problem.has_value()) << (diags.items().empty() ? "" : config::format(diags.items()[0]));
  if (!problem) return {};
  auto solved = solve(*problem, {.mode = mode});
  EXPECT_TRUE(solved.has_value()) << (solved ? "" : solved.error().message);
  if (!solved) return {};
  auto plan = build_plan(*problem, solved->counts);
  expect_valid(*problem, plan);
  return {std::move(*problem), *solved, std::move(plan)};
}

std::string a100(const std::string& services) {
  return "fleet:\n  - gpu: A100-SXM4-80GB\nservices:\n" + services;
}

struct Case {
  const char* description;
  std::string services;
  uint32_t optimum;
};

// Memory of A100-80GB slices (catalog): 1g.10gb 9.5 GiB, 1g.20gb/2g.20gb 19.5 GiB,
// 3g.40gb/4g.40gb 39.25 GiB, 7g.80gb 79 GiB, whole GPU 80 GiB; 8 memory and 7 compute slices.
const Case kCases[] = {
    {"seven 1g.10gb replicas fill one GPU", "  - {name: a, memory: 9GiB, replicas: 7}\n", 1},
    {"an eighth needs a second GPU", "  - {name: a, memory: 9GiB, replicas: 8}\n", 2},
    {"two 3g.40gb side by side (3g+3g)", "  - {name: a, memory: 38GiB, replicas: 2}\n", 1},
    {"three 38 GiB replicas need two GPUs", "  - {name: a, memory: 38GiB, replicas: 3}\n", 2},
    {"memory slices: 4+2+2+1 > 8",
     "  - {name: a, memory: 35GiB, replicas: 1}\n  - {name: b, memory: 19GiB, replicas: 2}\n"
     "  - {name: c, memory: 9GiB, replicas: 1}\n",
     2},
    {"3g + 2g + 1g.20gb share a GPU",
     "  - {name: a, memory: 35GiB, replicas: 1}\n  - {name: b, memory: 19GiB, replicas: 2}\n", 1},
    {"a 70 GiB replica takes a GPU of its own",
     "  - {name: a, memory: 70GiB, replicas: 1}\n  - {name: b, memory: 9GiB, replicas: 1}\n", 2},
    {"tensor parallel over two whole GPUs",
     "  - {name: a, memory: 150GiB, replicas: 1, gpus: 2}\n  - {name: b, memory: 9GiB, replicas: 7}\n", 3},
    {"demand: 1400 by 7g (800) or 1g (100) needs two GPUs",
     "  - name: a\n    memory: 5GiB\n    demand: 1400\n    capacity: {1g.10gb: 100, 7g.80gb: 800}\n", 2},
    {"demand: 700 on seven 1g.10gb",
     "  - name: a\n    memory: 5GiB\n    demand: 700\n    capacity: {1g.10gb: 100, 7g.80gb: 600}\n", 1},
    {"bandwidth share from a whole-GPU rate: 3g.40gb gets 4/8",
     "  - name: a\n    memory: 30GiB\n    demand: 1000\n    capacity: {gpu: 1000}\n", 1},
    {"shared: sixteen 5 GiB replicas fill a whole GPU's 80 GiB",
     "  - {name: a, memory: 5GiB, replicas: 16, isolation: shared}\n", 1},
    {"shared with half the SMs each: two per slice, seven slices at most",
     "  - {name: a, memory: 5GiB, replicas: 16, isolation: shared, compute: 0.5}\n", 2},
    {"dedicated 12 GiB replicas: four 1g.20gb per GPU", "  - {name: a, memory: 12GiB, replicas: 6}\n", 2},
    {"shared 12 GiB replicas: six in one GPU", "  - {name: a, memory: 12GiB, replicas: 6, isolation: shared}\n", 1},
    {"best-effort is packed like shared but never mixed with it (45 + 30 GiB would fit one GPU)",
     "  - {name: a, memory: 45GiB, replicas: 1, isolation: shared}\n"
     "  - {name: b, memory: 30GiB, replicas: 1, isolation: best-effort}\n",
     2},
};

class HandComputed : public ::testing::TestWithParam<Case> {};

TEST_P(HandComputed, ExactFindsAndProvesTheOptimum) {
  auto out = run(a100(GetParam().services), Mode::exact);
  EXPECT_EQ(out.solved.gpus, GetParam().optimum);
  EXPECT_EQ(out.plan.gpus.size(), GetParam().optimum);
  EXPECT_TRUE(out.solved.optimal);
  EXPECT_EQ(out.solved.lower_bound, GetParam().optimum);
}

TEST_P(HandComputed, FastIsValidAndWithinItsBound) {
  auto out = run(a100(GetParam().services), Mode::fast);
  EXPECT_GE(out.solved.gpus, GetParam().optimum);
  EXPECT_LE(out.solved.lower_bound, GetParam().optimum);
  EXPECT_LE(out.solved.gpus, GetParam().optimum + 1) << "rounding should cost at most one GPU on these";
}

INSTANTIATE_TEST_SUITE_P(Planner, HandComputed, ::testing::ValuesIn(kCases));

TEST(Planner, ShareCounterpartsNeverMix) {
  auto out = run(a100("  - {name: a, memory: 20GiB, replicas: 2, isolation: shared}\n"
                      "  - {name: b, memory: 20GiB, replicas: 2, isolation: best-effort}\n"));
  for (const auto& gpu : out.plan.gpus)
    for (const auto& inst : gpu.instances)
      for (const auto& r : inst.replicas) EXPECT_EQ(out.problem.services[size_t(r.service)].isolation, inst.sharing);
}

TEST(Planner, FleetCountsAreRespectedAcrossModels) {
  auto out = run(
      "fleet:\n  - gpu: A100-SXM4-80GB\n    count: 1\n  - gpu: H100-SXM5-80GB\n    count: 2\n"
      "services:\n  - {name: a, memory: 70GiB, replicas: 3}\n");
  EXPECT_EQ(out.solved.gpus, 3u);
  auto per = gpus_per_type(out.problem, out.solved.counts);
  EXPECT_EQ(per[0], 1u);
  EXPECT_EQ(per[1], 2u);
}

TEST(Planner, TooSmallFleetSaysHowManyMore) {
  config::Diagnostics diags;
  auto problem = problem_of(
      "fleet:\n  - gpu: A100-SXM4-80GB\n    count: 1\nservices:\n  - {name: a, memory: 9GiB, replicas: 15}\n", diags);
  ASSERT_TRUE(problem);
  for (Mode mode : {Mode::exact, Mode::fast}) {
    auto solved = solve(*problem, {.mode = mode});
    ASSERT_FALSE(solved);
    EXPECT_EQ(solved.error().code, Errc::validation);
    EXPECT_EQ(solved.error().message,
              "spec.yaml:2:5: error: fleet[0].count: the fleet is too small: 2 more A100-SXM4-80GB (3 in all) would "
              "make it feasible");
  }
}

// Stopped by the clock, a solve reported infeasible proves nothing: the answer is "no plan in
// time" with the limit as given, never that the fleet is too small (which it is here).
TEST(Planner, InfeasibleOnlyByTheClockIsNoPlanInTime) {
  config::Diagnostics diags;
  auto problem = problem_of(
      "fleet:\n  - gpu: A100-SXM4-80GB\n    count: 1\nservices:\n  - {name: a, memory: 9GiB, replicas: 15}\n", diags);
  ASSERT_TRUE(problem);
  auto timed_out = why_no_plan(*problem, 0.001, true);
  EXPECT_EQ(timed_out.code, Errc::timeout);
  EXPECT_EQ(timed_out.message,
            "no plan found within the time limit (0.001 s); this does not mean the services cannot fit: give a longer "
            "--time-limit");
  auto proven = why_no_plan(*problem, 5, false);
  EXPECT_EQ(proven.code, Errc::validation);
  EXPECT_NE(proven.message.find("the fleet is too small: 2 more A100-SXM4-80GB (3 in all)"), std::string::npos)
      << proven.message;
  auto unlimited = problem_of("fleet:\n  - gpu: A100-SXM4-80GB\nservices:\n  - {name: a, memory: 9GiB}\n", diags);
  ASSERT_TRUE(unlimited);
  EXPECT_EQ(why_no_plan(*unlimited, 5, true).code, Errc::timeout);
  EXPECT_EQ(why_no_plan(*unlimited, 5, false).code, Errc::internal);  // an unlimited fleet is never too small
}

TEST(Planner, ServiceThatFitsNowhereSaysWhy) {
  config::Diagnostics diags;
  EXPECT_FALSE(problem_of(a100("  - {name: big, memory: 500GiB, replicas: 1}\n"
                               "  - name: slow\n    memory: 30GiB\n    demand: 10\n    capacity: {1g.10gb: 5}\n"),
                          diags));
  ASSERT_EQ(diags.items().size(), 2u);
  EXPECT_EQ(config::format(diags.items()[0]),
            "spec.yaml:4:5: error: services[0]: service 'big' fits nowhere: needs 500 GiB per replica, more than a "
            "whole A100-SXM4-80GB (80 GiB); set gpus: 7 or more for tensor parallelism");
  EXPECT_EQ(config::format(diags.items()[1]),
            "spec.yaml:5:5: error: services[1]: service 'slow' fits nowhere: needs 30 GiB per replica, and no slice "
            "that fits it has a capacity above 0");
}

TEST(Planner, KeepsCurrentLayoutsWhenItCostsNothing) {
  // Two 38 GiB and five 9 GiB replicas need two GPUs either way; devices 1 and 2 are cut for them already,
  // device 3 in a layout (3g + 1g) that the planner does not offer by itself, device 0 not at all.
  auto out = run(
      "fleet:\n  - gpu: A100-SXM4-80GB\n    count: 4\n    current:\n      - {}\n      - {1g.10gb: 7}\n"
      "      - {3g.40gb: 2}\n      - {3g.40gb: 1, 1g.10gb: 1}\n"
      "services:\n  - {name: a, memory: 38GiB, replicas: 2}\n  - {name: b, memory: 9GiB, replicas: 5}\n");
  ASSERT_EQ(out.plan.gpus.size(), 2u);
  EXPECT_TRUE(out.solved.optimal);
  EXPECT_EQ(gpus_kept(out.problem, out.plan), 2u);
  std::set<uint32_t> devices;
  for (const auto& gpu : out.plan.gpus) devices.insert(gpu.device);
  EXPECT_EQ(devices, (std::set<uint32_t>{1, 2}));
}

TEST(Planner, TruncatedFillsStillGiveAValidPlanAndBound) {
  std::string services;
  for (int i = 1; i <= 6; ++i)
    services += "  - {name: s" + std::to_string(i) + ", memory: " + std::to_string(2 + i) +
                "GiB, replicas: 5, isolation: shared}\n";
  config::Diagnostics diags;
  auto spec = config::parse_fleet_spec(a100(services), "spec.yaml", Catalog::builtin(), diags);
  ASSERT_TRUE(spec);
  auto full = build_problem(*spec, {}, diags);
  ASSERT_TRUE(full && full->patterns_complete);
  auto optimum = solve(*full, {.mode = Mode::exact});
  ASSERT_TRUE(optimum && optimum->optimal);
  auto truncated = build_problem(*spec, {.max_patterns = 8}, diags);
  ASSERT_TRUE(truncated);
  EXPECT_FALSE(truncated->patterns_complete);
  for (Mode mode : {Mode::exact, Mode::fast}) {
    auto solved = solve(*truncated, {.mode = mode});
    ASSERT_TRUE(solved);
    EXPECT_GE(solved->gpus, optimum->gpus);
    EXPECT_LE(solved->lower_bound, optimum->gpus);
    EXPECT_GT(solved->lower_bound, 0u);
    expect_valid(*truncated, build_plan(*truncated, solved->counts));
  }
}

TEST(Planner, LayoutsComeFromTheCatalog) {
  config::Diagnostics diags;
  auto problem = problem_of(a100("  - {name: a, memory: 9GiB}\n"), diags);
  ASSERT_TRUE(problem);
  const GpuModel& model = *Catalog::builtin().find("A100-SXM4-80GB");
  auto sets = distinct_profile_sets(maximal_layouts(model, {.include_media_variants = false}));
  EXPECT_EQ(problem->layouts.size(), sets.size() + 1);  // + the whole GPU
  for (const auto& l : problem->layouts)
    if (l.mig_enabled) {
      EXPECT_TRUE(check_layout(model, l.layout));
    }
}

TEST(Planner, FastModeScalesAndStaysNearItsBound) {
  std::string services;
  for (int i = 0; i < 400; ++i)
    services += "  - {name: s" + std::to_string(i) + ", memory: " + std::to_string(5 + (i * 7) % 70) +
                "GiB, replicas: " + std::to_string(1 + i % 3) + (i % 5 == 0 ? ", isolation: shared" : "") + "}\n";
  auto out = run(a100(services), Mode::fast);
  ASSERT_GT(out.solved.lower_bound, 0u);
  EXPECT_LE(out.solved.gpus, out.solved.lower_bound + out.problem.layouts.size());
}

}  // namespace
}  // namespace tessera::planner
