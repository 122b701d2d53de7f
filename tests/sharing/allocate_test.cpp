#include "sharing/allocate.hpp"

#include <gtest/gtest.h>

#include "sharing/fixtures.hpp"

namespace tessera::sharing {
namespace {

using testing::parse;
using testing::two_gpu_node;

Resource only(const char* yaml, const char* name) {
  auto rs = build_resources(two_gpu_node(), parse(yaml));
  EXPECT_TRUE(rs);
  for (auto& r : *rs)
    if (r.name == name) return r;
  throw std::runtime_error(std::string("no resource ") + name);
}

TEST(Allocate, WholeGpusByUuidAndByIndex) {
  auto r = only("version: v1\n", "nvidia.com/gpu");
  std::vector<std::string> ids{"GPU-1111", "GPU-0000"};
  auto a = allocate(r, ids, {});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-1111,GPU-0000");
  EXPECT_FALSE(a->envs.contains("TESSERA_DEVICE_MEMORY_LIMIT_0"));  // not shared: no quota
  AllocateSettings by_index;
  by_index.id_strategy = config::DeviceIdStrategy::index;
  EXPECT_EQ(allocate(r, ids, by_index)->envs.at("NVIDIA_VISIBLE_DEVICES"), "1,0");
}

// "<gpu>:<n>" names NVML's MIG device index n (what
// nvmlDeviceGetMigDeviceHandleByIndex takes and the runtime resolves), not
// the device's rank by placement: the 3g.40gb sits last by placement but is
// NVML's MIG device 0.
TEST(Allocate, MigDeviceIndexIsGpuColonNvmlIndex) {
  AllocateSettings by_index;
  by_index.id_strategy = config::DeviceIdStrategy::index;
  auto big = only("version: v1\nflags: {migStrategy: mixed}\n", "nvidia.com/mig-3g.40gb");
  EXPECT_EQ(allocate(big, std::vector<std::string>{"MIG-c"}, by_index)->envs.at("NVIDIA_VISIBLE_DEVICES"), "1:0");
  auto small = only("version: v1\nflags: {migStrategy: mixed}\n", "nvidia.com/mig-1g.20gb");
  EXPECT_EQ(allocate(small, std::vector<std::string>{"MIG-a"}, by_index)->envs.at("NVIDIA_VISIBLE_DEVICES"), "1:1");
  EXPECT_EQ(allocate(small, std::vector<std::string>{"MIG-b"}, by_index)->envs.at("NVIDIA_VISIBLE_DEVICES"), "1:2");
}

TEST(Allocate, TimeSlicedReplicaCarriesQuota) {
  auto r = only(R"(version: v1
sharing:
  timeSlicing:
    resources: [{name: nvidia.com/gpu, replicas: 4}]
)", "nvidia.com/gpu");
  std::vector<std::string> ids{"GPU-0000::2"};
  auto a = allocate(r, ids, {});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-0000");
  EXPECT_EQ(a->envs.at("TESSERA_DEVICE_MEMORY_LIMIT_0"), std::to_string(20ull << 30));
  // Two replicas of one GPU (allowed for time-slicing by default): one device, twice the quota.
  std::vector<std::string> two{"GPU-0000::0", "GPU-0000::1"};
  auto b = allocate(r, two, {});
  ASSERT_TRUE(b);
  EXPECT_EQ(b->envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-0000");
  EXPECT_EQ(b->envs.at("TESSERA_DEVICE_MEMORY_LIMIT_0"), std::to_string(40ull << 30));
}

TEST(Allocate, MpsSharePinsMemoryAndThreads) {
  auto r = only(R"(version: v1
flags: {migStrategy: mixed}
sharing:
  mps:
    resources: [{name: nvidia.com/mig-3g.40gb, replicas: 4}]
)", "nvidia.com/mig-3g.40gb");
  std::vector<std::string> ids{"MIG-c::1"};
  auto a = allocate(r, ids, {});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->envs.at("CUDA_MPS_PIPE_DIRECTORY"), "/mps/nvidia.com_mig-3g.40gb/pipe");
  EXPECT_EQ(a->envs.at("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"), "0=10048M");
  EXPECT_EQ(a->envs.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
  EXPECT_EQ(a->envs.at("TESSERA_DEVICE_MEMORY_LIMIT_0"), std::to_string((40192ull << 20) / 4));
  ASSERT_EQ(a->mounts.size(), 2u);
  EXPECT_EQ(a->mounts[0].host_path, "/run/nvidia/mps/nvidia.com_mig-3g.40gb/pipe");
  EXPECT_EQ(a->mounts[1].container_path, "/dev/shm");
}

TEST(Allocate, RejectsBadRequests) {
  auto r = only(R"(version: v1
sharing:
  mps:
    resources: [{name: nvidia.com/gpu, replicas: 2}]
)", "nvidia.com/gpu");
  std::vector<std::string> unknown{"GPU-9999::0"};
  EXPECT_EQ(allocate(r, unknown, {}).error().message, "nvidia.com/gpu: unknown device id 'GPU-9999::0'");
  std::vector<std::string> two{"GPU-0000::0", "GPU-1111::0"};
  EXPECT_EQ(allocate(r, two, {}).error().message,
            "nvidia.com/gpu: maximum request size for shared resources is 1 (asked for 2)");
  std::vector<std::string> twice{"GPU-0000::0", "GPU-0000::0"};
  EXPECT_FALSE(allocate(r, twice, {}));
  EXPECT_FALSE(allocate(r, {}, {}));
}

TEST(Allocate, VolumeMountsAndCdi) {
  auto r = only("version: v1\n", "nvidia.com/gpu");
  AllocateSettings s;
  s.list_strategy = {config::DeviceListStrategy::volume_mounts, config::DeviceListStrategy::cdi_annotations};
  std::vector<std::string> ids{"GPU-0000"};
  auto a = allocate(r, ids, s);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), "/var/run/nvidia-container-devices");
  ASSERT_EQ(a->mounts.size(), 1u);
  EXPECT_EQ(a->mounts[0].container_path, "/var/run/nvidia-container-devices/GPU-0000");
  EXPECT_EQ(a->annotations.at("cdi.k8s.io/nvidia-device-plugin_nvidia.com_gpu"), "nvidia.com/gpu=GPU-0000");
}

TEST(PreferredAllocation, NvlinkPairsFirst) {
  Inventory inv;
  // Four GPUs: 0-1 and 2-3 linked.
  for (uint32_t i = 0; i < 4; ++i) inv.gpus.push_back({i, "GPU-" + std::to_string(i), "A100", "", 80ull << 30, false, {}, {}});
  inv.gpus[0].nvlink_peers = {1};
  inv.gpus[1].nvlink_peers = {0};
  inv.gpus[2].nvlink_peers = {3};
  inv.gpus[3].nvlink_peers = {2};
  auto rs = build_resources(inv, parse("version: v1\n"));
  ASSERT_TRUE(rs);
  const auto& r = (*rs)[0];
  std::vector<std::string> avail{"GPU-0", "GPU-1", "GPU-2", "GPU-3"};
  std::vector<std::string> must{"GPU-2"};
  auto p = preferred_allocation(r, inv, avail, must, 2, SharedPolicy::distributed);
  ASSERT_TRUE(p);
  EXPECT_EQ(*p, (std::vector<std::string>{"GPU-2", "GPU-3"}));
  std::vector<std::string> none;
  std::vector<std::string> avail3{"GPU-0", "GPU-2", "GPU-3"};
  EXPECT_EQ(*preferred_allocation(r, inv, avail3, none, 2, SharedPolicy::distributed),
            (std::vector<std::string>{"GPU-2", "GPU-3"}));
  EXPECT_FALSE(preferred_allocation(r, inv, avail, none, 5, SharedPolicy::distributed));
}

TEST(PreferredAllocation, ReplicasSpreadOrPack) {
  auto r = only(R"(version: v1
sharing:
  timeSlicing:
    resources: [{name: nvidia.com/gpu, replicas: 3}]
)", "nvidia.com/gpu");
  // GPU-0000::0 is already allocated (not available).
  std::vector<std::string> avail{"GPU-0000::1", "GPU-0000::2", "GPU-1111::0", "GPU-1111::1", "GPU-1111::2"};
  std::vector<std::string> none;
  EXPECT_EQ(*preferred_allocation(r, two_gpu_node(), avail, none, 1, SharedPolicy::distributed),
            (std::vector<std::string>{"GPU-1111::0"}));
  EXPECT_EQ(*preferred_allocation(r, two_gpu_node(), avail, none, 1, SharedPolicy::packed),
            (std::vector<std::string>{"GPU-0000::1"}));
  EXPECT_EQ(*preferred_allocation(r, two_gpu_node(), avail, none, 2, SharedPolicy::distributed),
            (std::vector<std::string>{"GPU-1111::0", "GPU-0000::1"}));
}

}  // namespace
}  // namespace tessera::sharing
