// Cost of the catalog's placement decisions, which the MIG manager and the
// planner call in their inner loops.
#include <benchmark/benchmark.h>

#include "core/catalog.hpp"
#include "core/mig_layout.hpp"

namespace {

using namespace tessera;

const GpuModel& a100() { return *Catalog::builtin().find("A100-SXM4-80GB"); }

void BM_MaximalLayouts(benchmark::State& state) {
  const auto& m = a100();
  bool media = state.range(0) != 0;
  size_t n = 0;
  for (auto _ : state) {
    auto layouts = maximal_layouts(m, {.include_media_variants = media});
    n = layouts.size();
    benchmark::DoNotOptimize(layouts);
  }
  state.counters["layouts"] = static_cast<double>(n);
}
BENCHMARK(BM_MaximalLayouts)->Arg(0)->Arg(1)->ArgName("media")->Unit(benchmark::kMicrosecond);

void BM_MaximalLayoutsAllModels(benchmark::State& state) {
  for (auto _ : state)
    for (const auto& m : Catalog::builtin().models()) benchmark::DoNotOptimize(maximal_layouts(m));
}
BENCHMARK(BM_MaximalLayoutsAllModels)->Unit(benchmark::kMicrosecond);

// The hard case: 3g.40gb + four 1g.10gb fits only with the 3g at slice 4.
void BM_PlaceCounts(benchmark::State& state) {
  const auto& m = a100();
  ProfileCounts counts{{"3g.40gb", 1}, {"1g.10gb", 4}};
  for (auto _ : state) benchmark::DoNotOptimize(place_counts(m, counts));
}
BENCHMARK(BM_PlaceCounts);

// An unplaceable request explores every placement before saying no.
void BM_PlaceCountsInfeasible(benchmark::State& state) {
  const auto& m = a100();
  ProfileCounts counts{{"3g.40gb", 2}, {"1g.10gb", 1}};
  for (auto _ : state) benchmark::DoNotOptimize(place_counts(m, counts));
}
BENCHMARK(BM_PlaceCountsInfeasible);

void BM_CheckLayout(benchmark::State& state) {
  const auto& m = a100();
  auto layout = *place_counts(m, {{"2g.20gb", 3}, {"1g.20gb", 1}});
  for (auto _ : state) benchmark::DoNotOptimize(check_layout(m, layout));
}
BENCHMARK(BM_CheckLayout);

}  // namespace

BENCHMARK_MAIN();
