#include "sharing/resources.hpp"

#include <gtest/gtest.h>

#include "sharing/fixtures.hpp"

namespace tessera::sharing {
namespace {

using testing::parse;
using testing::two_gpu_node;

std::map<std::string, size_t> counts(const std::vector<Resource>& rs) {
  std::map<std::string, size_t> out;
  for (const auto& r : rs) out[r.name] = r.devices.size();
  return out;
}

struct StrategyCase {
  const char* description;
  const char* config;
  std::map<std::string, size_t> expected;
  friend void PrintTo(const StrategyCase& c, std::ostream* os) { *os << c.description; }
};

class Strategies : public ::testing::TestWithParam<StrategyCase> {};

TEST_P(Strategies, AdvertiseTheExpectedResources) {
  auto rs = build_resources(two_gpu_node(), parse(GetParam().config));
  ASSERT_TRUE(rs) << rs.error().message;
  EXPECT_EQ(counts(*rs), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Table, Strategies,
    ::testing::Values(
        StrategyCase{"none: whole GPUs", "version: v1\n", {{"nvidia.com/gpu", 2}}},
        StrategyCase{"mixed: one resource per profile", "version: v1\nflags: {migStrategy: mixed}\n",
                     {{"nvidia.com/gpu", 1}, {"nvidia.com/mig-1g.20gb", 2}, {"nvidia.com/mig-3g.40gb", 1}}},
        StrategyCase{"time-slicing x4 on GPUs", R"(version: v1
sharing:
  timeSlicing:
    resources: [{name: nvidia.com/gpu, replicas: 4}]
)", {{"nvidia.com/gpu", 8}}},
        StrategyCase{"renameByDefault", R"(version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    resources: [{name: nvidia.com/gpu, replicas: 3}]
)", {{"nvidia.com/gpu.shared", 6}}},
        StrategyCase{"per-profile replicas on MIG (beyond NVIDIA)", R"(version: v1
flags: {migStrategy: mixed}
sharing:
  timeSlicing:
    resources:
    - {name: nvidia.com/mig-1g.20gb, replicas: 2}
    - {name: nvidia.com/mig-3g.40gb, replicas: 5}
)", {{"nvidia.com/gpu", 1}, {"nvidia.com/mig-1g.20gb", 4}, {"nvidia.com/mig-3g.40gb", 5}}},
        StrategyCase{"different replicas per GPU (beyond NVIDIA)", R"(version: v1
sharing:
  timeSlicing:
    resources:
    - {name: nvidia.com/gpu, replicas: 2, devices: ["0"], rename: nvidia.com/gpu-half}
    - {name: nvidia.com/gpu, replicas: 4, devices: ["1"], rename: nvidia.com/gpu-quarter}
)", {{"nvidia.com/gpu-half", 2}, {"nvidia.com/gpu-quarter", 4}}},
        StrategyCase{"MPS shares on MIG instances (beyond NVIDIA)", R"(version: v1
flags: {migStrategy: mixed}
sharing:
  mps:
    resources: [{name: nvidia.com/mig-3g.40gb, replicas: 3}]
)", {{"nvidia.com/gpu", 1}, {"nvidia.com/mig-1g.20gb", 2}, {"nvidia.com/mig-3g.40gb", 3}}}));

TEST(Resources, ReplicaIdsAndQuota) {
  auto rs = build_resources(two_gpu_node(), parse(R"(version: v1
sharing:
  mps:
    resources: [{name: nvidia.com/gpu, replicas: 4}]
)"));
  ASSERT_TRUE(rs);
  ASSERT_EQ(rs->size(), 1u);
  const auto& r = (*rs)[0];
  EXPECT_EQ(r.sharing, SharingMode::mps);
  EXPECT_TRUE(r.fail_requests_greater_than_one);
  ASSERT_EQ(r.devices.size(), 8u);
  EXPECT_EQ(r.devices[0].id, "GPU-0000::0");
  EXPECT_EQ(r.devices[7].id, "GPU-1111::3");
  EXPECT_EQ(r.devices[0].memory_bytes, 20ull << 30);
}

// An MPS daemon serves 48 clients per device from compute capability 7.5 on,
// 16 below (NVIDIA's device plugin's maxClients): more replicas is an error
// that names the GPU and the limit. An unknown capability gets the 48 the
// config reader allows.
TEST(Resources, MpsReplicasStayWithinTheDaemonsClientLimit) {
  const auto config = [](int replicas) {
    return parse("version: v1\nsharing:\n  mps:\n    resources: [{name: nvidia.com/gpu, replicas: " +
                 std::to_string(replicas) + "}]\n");
  };
  auto inv = two_gpu_node();
  inv.gpus[0].mig_enabled = false;
  inv.gpus[0].mig_devices.clear();
  for (auto& g : inv.gpus) g.compute_capability = 70;  // Volta
  auto volta = build_resources(inv, config(20));
  ASSERT_FALSE(volta);
  EXPECT_EQ(volta.error().message,
            "nvidia.com/gpu: 20 MPS replicas of GPU-0000 (GPU 0, " + inv.gpus[0].model +
                ", compute capability 7.0), but an MPS daemon serves at most 16 clients per device on it: "
                "lower sharing.mps replicas to 16 or fewer");
  EXPECT_TRUE(build_resources(inv, config(16)));
  for (auto& g : inv.gpus) g.compute_capability = 75;  // Turing: the line
  EXPECT_TRUE(build_resources(inv, config(20)));
  for (auto& g : inv.gpus) g.compute_capability = 0;  // unknown
  EXPECT_TRUE(build_resources(inv, config(48)));
}

TEST(Resources, SingleStrategyNeedsOneProfileEverywhere) {
  auto rs = build_resources(two_gpu_node(), parse("version: v1\nflags: {migStrategy: single}\n"));
  ASSERT_FALSE(rs);
  EXPECT_EQ(rs.error().message,
            "migStrategy single needs MIG enabled on every GPU or on none; 1 of 2 GPUs have it (use migStrategy mixed)");
  auto inv = two_gpu_node();
  inv.gpus.erase(inv.gpus.begin());
  auto mixed_profiles = build_resources(inv, parse("version: v1\nflags: {migStrategy: single}\n"));
  ASSERT_FALSE(mixed_profiles);
  EXPECT_EQ(mixed_profiles.error().message,
            "migStrategy single needs MIG devices of one profile; found 1g.20gb, 3g.40gb (use migStrategy mixed)");
  inv.gpus[0].mig_devices.pop_back();
  auto ok = build_resources(inv, parse("version: v1\nflags: {migStrategy: single}\n"));
  ASSERT_TRUE(ok);
  EXPECT_EQ(counts(*ok), (std::map<std::string, size_t>{{"nvidia.com/gpu", 2}}));
}

}  // namespace
}  // namespace tessera::sharing
