#include "mig/mig_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "config/mig_parted.hpp"
#include "config/mig_parted_validate.hpp"
#include "support/data.hpp"
#include "support/mig_brute_force.hpp"

namespace tessera::mig {
namespace {

const GpuModel& model(const char* name) { return *Catalog::builtin().find(name); }

// The state a GPU is in after `layout` was created on it: one default
// compute instance per GPU instance, ids and UUIDs in creation order.
GpuState state_with(const GpuModel& m, const MigLayout& layout) {
  GpuState s;
  s.model = &m;
  s.mig_enabled = true;
  uint32_t id = 1;
  for (const auto& p : layout) {
    CurrentInstance inst;
    inst.gi_id = id;
    inst.placed = p;
    inst.uuid = "MIG-" + std::to_string(id);
    inst.compute_instances = 1;
    s.instances.push_back(inst);
    ++id;
  }
  return s;
}

// After the plan: kept + created.
MigLayout result_of(const GpuState& s, const GpuPlan& plan) {
  MigLayout out = plan.created;
  for (const auto& inst : s.instances)
    if (std::find(plan.kept.begin(), plan.kept.end(), inst.gi_id) != plan.kept.end()) out.push_back(inst.placed);
  std::sort(out.begin(), out.end());
  return out;
}

std::map<uint32_t, int> counts_of(const MigLayout& l) {
  std::map<uint32_t, int> c;
  for (const auto& i : l) ++c[i.profile];
  return c;
}

using testing::brute_force_min_destroyed;

TEST(MigPlan, SevenOneGToFourOneGPlusThreeGKeepsFour) {
  const auto& m = model("A100-SXM4-80GB");
  auto seven = *place_counts(m, {{"1g.10gb", 7}});
  auto s = state_with(m, seven);
  auto plan = plan_gpu(s, {true, {{"1g.10gb", 4}, {"3g.40gb", 1}}});
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->kept.size(), 4u);
  EXPECT_EQ(plan->destroyed.size(), 3u);
  // The three 1g at slices 4-6 make room for the 3g at 4.
  EXPECT_EQ(plan->kept, (std::vector<uint32_t>{1, 2, 3, 4}));
  ASSERT_EQ(plan->created.size(), 1u);
  EXPECT_EQ(plan->created[0].start, 4u);
  EXPECT_TRUE(check_layout(m, result_of(s, *plan)));
  // 3 x (destroy CI, destroy GI) + create GI + create CI.
  EXPECT_EQ(plan->operations.size(), 8u);
}

// With force, instances may go, but as few users as possible are disturbed:
// among layouts that keep the same number of instances, the one that keeps
// the busy ones, even before the one that keeps more idle ones.
TEST(MigPlan, ForceKeepsTheBusyInstancesWhereTheLayoutAllows) {
  const auto& m = model("A100-SXM4-80GB");
  auto s = state_with(m, *place_counts(m, {{"1g.10gb", 7}}));
  // A 3g and three 1g: the 3g at 0 keeps the 1g at 4-6, the 3g at 4 keeps 0-2.
  s.instances[1].processes = {"pod team-a/a"};
  s.instances[4].processes = {"pod team-a/b"};
  s.instances[6].processes = {"pod team-a/c"};
  EXPECT_FALSE(plan_gpu(s, {true, {{"3g.40gb", 1}, {"1g.10gb", 3}}})) << "1, 4 and 6 cannot all stay";
  auto forced = plan_gpu(s, {true, {{"3g.40gb", 1}, {"1g.10gb", 3}}}, {.force = true});
  ASSERT_TRUE(forced);
  EXPECT_EQ(forced->kept, (std::vector<uint32_t>{5, 6, 7})) << "the 1g at 4, 5 and 6 (GI 5-7): two busy kept, not one";
  ASSERT_EQ(forced->created.size(), 1u);
  EXPECT_EQ(forced->created[0].start, 0u);
  // Two busy instances kept beat three idle ones kept.
  auto t = state_with(m, *place_counts(m, {{"1g.10gb", 7}}));
  t.instances[0].processes = {"pod x/0"};
  t.instances[1].processes = {"pod x/1"};
  auto fewer = plan_gpu(t, {true, {{"3g.40gb", 1}, {"1g.10gb", 1}}}, {.force = true});
  ASSERT_TRUE(fewer);
  EXPECT_EQ(fewer->kept, (std::vector<uint32_t>{1})) << "a 3g at 4 and one 1g: only one 1g stays, the busy one at 0";
}

TEST(MigPlan, SameLayoutTwiceDoesNothing) {
  const auto& m = model("H100-SXM5-80GB");
  auto layout = *place_counts(m, {{"2g.20gb", 3}, {"1g.20gb", 1}});
  auto plan = plan_gpu(state_with(m, layout), {true, {{"2g.20gb", 3}, {"1g.20gb", 1}}});
  ASSERT_TRUE(plan);
  EXPECT_FALSE(plan->changes());
  EXPECT_EQ(plan->kept.size(), 4u);
}

TEST(MigPlan, EnableFromDisabledThenCreate) {
  const auto& m = model("H200");
  GpuState s;
  s.model = &m;
  auto plan = plan_gpu(s, {true, {{"3g.71gb", 2}}});
  ASSERT_TRUE(plan);
  ASSERT_GE(plan->operations.size(), 1u);
  EXPECT_EQ(plan->operations[0].kind, OpKind::set_mig_mode);
  EXPECT_TRUE(plan->operations[0].enabled);
  EXPECT_TRUE(plan->mode_change);
  EXPECT_EQ(plan->created.size(), 2u);
}

TEST(MigPlan, DisableDestroysEverythingThenSwitchesMode) {
  const auto& m = model("A100-SXM4-80GB");
  auto s = state_with(m, *place_counts(m, {{"3g.40gb", 2}}));
  auto plan = plan_gpu(s, {false, {}});
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->destroyed.size(), 2u);
  EXPECT_EQ(plan->operations.back().kind, OpKind::set_mig_mode);
  EXPECT_FALSE(plan->operations.back().enabled);
}

TEST(MigPlan, BusyInstancesAreNeverDestroyedWithoutForce) {
  const auto& m = model("A100-SXM4-80GB");
  auto s = state_with(m, *place_counts(m, {{"1g.10gb", 7}}));
  s.instances[5].processes = {"pid 4242 (python3)"};  // 1g.10gb@5 blocks a 3g at 4
  auto plan = plan_gpu(s, {true, {{"3g.40gb", 2}}});
  ASSERT_FALSE(plan);
  EXPECT_EQ(plan.error().code, Errc::conflict);
  EXPECT_EQ(plan.error().message,
            "GPU 0 (A100-SXM4-80GB): the desired layout cannot be placed around instances in use: 1g.10gb@5 (GI 6, "
            "MIG-6) used by pid 4242 (python3) (stop those processes, or pass --force to destroy them)");
  auto forced = plan_gpu(s, {true, {{"3g.40gb", 2}}}, {.force = true});
  ASSERT_TRUE(forced);
  EXPECT_EQ(forced->destroyed.size(), 7u);
  // 3g + four 1g needs the 3g at 4: impossible around a busy 1g at 5 ...
  EXPECT_FALSE(plan_gpu(s, {true, {{"3g.40gb", 1}, {"1g.10gb", 4}}}));
  // ... and possible around a busy 1g at 1, which is kept.
  s.instances[5].processes.clear();
  s.instances[1].processes = {"pid 7 (vllm)"};
  auto around = plan_gpu(s, {true, {{"3g.40gb", 1}, {"1g.10gb", 4}}});
  ASSERT_TRUE(around) << around.error().message;
  EXPECT_NE(std::find(around->kept.begin(), around->kept.end(), 2u), around->kept.end());
}

TEST(MigPlan, InvalidDesiredEntryIsAnError) {
  const auto& m = model("A100-SXM4-80GB");
  GpuState s;
  s.model = &m;
  auto plan = plan_gpu(s, {true, {{"2g.40gb", 1}}});
  ASSERT_FALSE(plan);
  EXPECT_NE(plan.error().message.find("GPU 0 (A100-SXM4-80GB): A100-SXM4-80GB has no MIG profile '2g.40gb'"),
            std::string::npos);
}

// Every ordered pair of NVIDIA's default configs for one GPU model: the plan
// converges to the second config and destroys the minimum number of instances.
class ConfigPairs : public ::testing::TestWithParam<const char*> {};

TEST_P(ConfigPairs, ConvergeWithMinimumDestroyed) {
  const auto& m = model(GetParam());
  config::Diagnostics diags;
  auto cfg = config::load_mig_parted(testing::kNvidiaMigDefaults, diags);
  ASSERT_TRUE(cfg);
  std::vector<std::pair<std::string, DesiredGpu>> configs;
  for (const auto& mc : cfg->configs)
    for (const auto& e : mc.entries) {
      auto targets = config::entry_targets(e, Catalog::builtin());
      if (std::find(targets.begin(), targets.end(), &m) == targets.end()) continue;
      configs.push_back({mc.name, {e.mig_enabled, config::entry_counts(e)}});
      break;
    }
  ASSERT_GE(configs.size(), 8u);
  size_t pairs = 0;
  for (const auto& [from_name, from] : configs) {
    MigLayout start = from.mig_enabled ? *place_counts(m, from.counts) : MigLayout{};
    GpuState s = state_with(m, start);
    s.mig_enabled = from.mig_enabled;
    for (const auto& [to_name, to] : configs) {
      SCOPED_TRACE(from_name + " -> " + to_name);
      auto plan = plan_gpu(s, to);
      ASSERT_TRUE(plan) << plan.error().message;
      auto result = result_of(s, *plan);
      ASSERT_TRUE(check_layout(m, result));
      MigLayout desired_layout = to.mig_enabled ? *place_counts(m, to.counts) : MigLayout{};
      EXPECT_EQ(counts_of(result), counts_of(desired_layout));
      std::vector<uint32_t> wanted;
      for (const auto& i : desired_layout) wanted.push_back(i.profile);
      size_t minimum = to.mig_enabled ? brute_force_min_destroyed(m, start, wanted) : start.size();
      EXPECT_EQ(plan->destroyed.size(), minimum);
      if (from_name == to_name) { EXPECT_FALSE(plan->changes()); }
      ++pairs;
    }
  }
  EXPECT_EQ(pairs, configs.size() * configs.size());
}

INSTANTIATE_TEST_SUITE_P(Models, ConfigPairs, ::testing::Values("A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB"));

}  // namespace
}  // namespace tessera::mig
