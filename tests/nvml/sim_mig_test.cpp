// MIG through the C++ wrapper on simulated A100-80GB, H100-80GB and H200
// nodes: every profile at every placement the catalog allows, and the NVML
// errors the hardware gives for everything else.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "core/catalog.hpp"
#include "core/units.hpp"
#include "sim_node.hpp"

namespace tessera {
namespace {

using namespace nvml::abi;
using testing::SimNode;

const std::regex kMigUuid("MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");

class SimMig : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    model_ = Catalog::builtin().find(GetParam());
    ASSERT_NE(model_, nullptr);
    node_ = std::make_unique<SimNode>(GetParam(), 1);
  }
  // Enables MIG on GPU 0 (idle, so at once).
  nvml::Device enable_mig(const nvml::Session& s) {
    auto gpu = OK(s.device(0));
    EXPECT_EQ(OK(gpu.set_mig_mode(true)), NVML_SUCCESS);
    auto mode = OK(gpu.mig_mode());
    EXPECT_TRUE(mode.current && mode.pending);
    return gpu;
  }
  const GpuModel* model_ = nullptr;
  std::unique_ptr<SimNode> node_;
};

TEST_P(SimMig, ProfilesAreTheCatalogs) {
  auto s = node_->open();
  auto gpu = enable_mig(s);
  auto profiles = OK(gpu.gpu_instance_profiles());
  ASSERT_EQ(profiles.size(), model_->profiles.size());
  for (const auto& p : profiles) {
    const auto* cp = model_->profile_by_nvml_index(p.index);
    ASSERT_NE(cp, nullptr) << p.index;
    EXPECT_EQ(p.id, cp->profile_id) << cp->name;  // index and id differ: facts 1.5 #6
    EXPECT_EQ(p.name, "MIG " + cp->name);
    EXPECT_EQ(p.slice_count, cp->slices);
    EXPECT_EQ(p.instance_count, cp->max_count);
    EXPECT_EQ(p.memory_mib, cp->memory_mib);
    EXPECT_EQ(p.multiprocessor_count, cp->sm_count);
    EXPECT_EQ(OK(gpu.possible_placements(p.id)), cp->placements) << cp->name;
  }
  // Indices beyond NVML's range and ones this GPU lacks.
  auto beyond = gpu.gpu_instance_profile(NVML_GPU_INSTANCE_PROFILE_COUNT);
  ASSERT_FALSE(beyond);
  EXPECT_EQ(beyond.error().code, NVML_ERROR_INVALID_ARGUMENT);
  auto gfx = gpu.gpu_instance_profile(NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX);
  ASSERT_FALSE(gfx);
  EXPECT_EQ(gfx.error().code, NVML_ERROR_NOT_SUPPORTED);
}

TEST_P(SimMig, EveryProfileAtEveryPlacement) {
  auto s = node_->open();
  auto gpu = enable_mig(s);
  size_t created = 0;
  for (const auto& profile : model_->profiles) {
    for (const auto& placement : profile.placements) {
      SCOPED_TRACE(profile.name + " at " + std::to_string(placement.start));
      auto gi = OK(gpu.create_gpu_instance(profile.profile_id, placement));
      auto info = OK(gi.info());
      EXPECT_EQ(info.profile_id, profile.profile_id);
      EXPECT_EQ(info.placement, placement);
      // The same placement again: taken.
      auto again = gpu.create_gpu_instance(profile.profile_id, placement);
      ASSERT_FALSE(again);
      EXPECT_EQ(again.error().code, NVML_ERROR_INSUFFICIENT_RESOURCES);
      EXPECT_NE(again.error().message().find("NVML_ERROR_INSUFFICIENT_RESOURCES"), std::string::npos);
      // Its default compute instance is a MIG device with the profile's memory.
      const auto* default_ci = profile.default_compute_profile();
      ASSERT_NE(default_ci, nullptr);
      auto ci = OK(gi.create_compute_instance(default_ci->profile_id));
      auto migs = OK(gpu.mig_devices());
      ASSERT_EQ(migs.size(), 1u);
      EXPECT_TRUE(std::regex_match(OK(migs[0].uuid()), kMigUuid));
      EXPECT_EQ(OK(migs[0].memory_info()).total, profile.memory_mib * kMiB);
      EXPECT_EQ(OK(migs[0].gpu_instance_id()), info.id);
      EXPECT_EQ(OK(migs[0].parent()), gpu);
      // A GPU instance holding a compute instance is in use.
      auto busy = gi.destroy();
      ASSERT_FALSE(busy);
      EXPECT_EQ(busy.error().code, NVML_ERROR_IN_USE);
      EXPECT_NVML_OK(ci.destroy());
      EXPECT_NVML_OK(gi.destroy());
      EXPECT_TRUE(OK(gpu.gpu_instances()).empty());
      ++created;
    }
  }
  EXPECT_GE(created, 20u);
}

TEST_P(SimMig, InvalidPlacementsAndProfilesAreRefused) {
  auto s = node_->open();
  auto gpu = enable_mig(s);
  for (const auto& profile : model_->profiles) {
    for (uint32_t start = 0; start < model_->memory_slices; ++start) {
      if (profile.allows_start(start)) continue;
      auto r = gpu.create_gpu_instance(profile.profile_id, Placement{start, profile.memory_slices});
      ASSERT_FALSE(r) << profile.name << " at " << start;
      EXPECT_EQ(r.error().code, NVML_ERROR_INVALID_ARGUMENT) << profile.name << " at " << start;
    }
    // Right start, wrong size.
    auto sized =
        gpu.create_gpu_instance(profile.profile_id, Placement{profile.placements[0].start, profile.memory_slices + 1});
    ASSERT_FALSE(sized);
    EXPECT_EQ(sized.error().code, NVML_ERROR_INVALID_ARGUMENT);
  }
  auto unknown = gpu.create_gpu_instance(99);
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, NVML_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(OK(gpu.gpu_instances()).empty());
}

TEST_P(SimMig, FillingTheGpuRunsOutOfResources) {
  auto s = node_->open();
  auto gpu = enable_mig(s);
  const auto* small = model_->profile_by_nvml_index(NVML_GPU_INSTANCE_PROFILE_1_SLICE);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(OK(gpu.remaining_capacity(small->profile_id)), small->max_count);
  std::set<uint32_t> starts;
  for (uint32_t i = 0; i < small->max_count; ++i) {
    auto gi = OK(gpu.create_gpu_instance(small->profile_id));  // NVML picks the placement
    starts.insert(OK(gi.info()).placement.start);
    EXPECT_EQ(OK(gpu.remaining_capacity(small->profile_id)), small->max_count - i - 1);
  }
  EXPECT_EQ(starts.size(), small->max_count);
  auto full = gpu.create_gpu_instance(small->profile_id);
  ASSERT_FALSE(full);
  EXPECT_EQ(full.error().code, NVML_ERROR_INSUFFICIENT_RESOURCES);
  // A 7-slice instance cannot go anywhere now either.
  const auto* whole = model_->profile_by_nvml_index(NVML_GPU_INSTANCE_PROFILE_7_SLICE);
  auto none = gpu.create_gpu_instance(whole->profile_id, whole->placements[0]);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, NVML_ERROR_INSUFFICIENT_RESOURCES);
  EXPECT_EQ(OK(gpu.gpu_instances()).size(), small->max_count);
}

TEST_P(SimMig, ComputeInstancesFollowTheCatalog) {
  auto s = node_->open();
  auto gpu = enable_mig(s);
  const auto* whole = model_->profile_by_nvml_index(NVML_GPU_INSTANCE_PROFILE_7_SLICE);
  auto gi = OK(gpu.create_gpu_instance(whole->profile_id, whole->placements[0]));
  auto profiles = OK(gi.compute_profiles());
  ASSERT_EQ(profiles.size(), whole->compute_profiles.size());
  for (const auto& cp : whole->compute_profiles) {
    SCOPED_TRACE(cp.name);
    auto info = OK(gi.compute_profile(cp.nvml_index));
    EXPECT_EQ(info.id, cp.profile_id);
    EXPECT_EQ(info.slice_count, cp.slices);
    // As many as fit, then no more.
    uint32_t fit = OK(gi.remaining_compute_capacity(cp.profile_id));
    EXPECT_EQ(fit, std::min(cp.max_count, whole->slices / cp.slices));
    std::vector<nvml::ComputeInstance> made;
    std::set<std::string> uuids;
    for (uint32_t i = 0; i < fit; ++i) made.push_back(OK(gi.create_compute_instance(cp.profile_id)));
    auto more = gi.create_compute_instance(cp.profile_id);
    ASSERT_FALSE(more);
    EXPECT_EQ(more.error().code, NVML_ERROR_INSUFFICIENT_RESOURCES);
    EXPECT_EQ(OK(gi.compute_instances()).size(), fit);
    for (const auto& m : OK(gpu.mig_devices())) uuids.insert(OK(m.uuid()));
    EXPECT_EQ(uuids.size(), fit);
    for (const auto& ci : made) EXPECT_NVML_OK(ci.destroy());
  }
  EXPECT_NVML_OK(gi.destroy());
}

TEST_P(SimMig, NoInstancesWithoutMigMode) {
  auto s = node_->open();
  auto gpu = OK(s.device(0));
  EXPECT_FALSE(OK(gpu.mig_mode()).current);
  auto r = gpu.create_gpu_instance(model_->profiles[0].profile_id);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(OK(gpu.max_mig_device_count()), 0u);
}

TEST_P(SimMig, MigModeStaysPendingWhileProcessesRun) {
  node_->drive("process", {"--pid", "4242", "--gpu", "0", "--memory", "1GiB"});
  auto s = node_->open();
  auto gpu = OK(s.device(0));
  EXPECT_EQ(OK(gpu.set_mig_mode(true)), NVML_ERROR_IN_USE);  // the activation status
  auto mode = OK(gpu.mig_mode());
  EXPECT_FALSE(mode.current);
  EXPECT_TRUE(mode.pending);
  EXPECT_NE(node_->tessera({"sim", "reset", node_->dir(), "--gpu", "0"}, false).exit_code, 0);
  node_->drive("end-process", {"--pid", "4242"});
  node_->drive("reset", {"--gpu", "0"});
  mode = OK(gpu.mig_mode());
  EXPECT_TRUE(mode.current);
  EXPECT_TRUE(mode.pending);
}

TEST_P(SimMig, ProcessesHoldInstances) {
  auto s = node_->open();
  auto gpu = enable_mig(s);
  const auto& profile = model_->profiles[0];
  auto gi = OK(gpu.create_gpu_instance(profile.profile_id, profile.placements[0]));
  auto ci = OK(gi.create_compute_instance(profile.default_compute_profile()->profile_id));
  auto mig = OK(gpu.mig_devices()).at(0);
  std::string uuid = OK(mig.uuid());
  node_->drive("process", {"--pid", "777", "--mig-device", uuid, "--memory", "2GiB"});
  auto procs = OK(mig.compute_processes());
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(procs[0].pid, 777u);
  EXPECT_EQ(procs[0].used_bytes, 2 * kGiB);
  EXPECT_EQ(procs[0].gpu_instance_id, OK(gi.info()).id);
  EXPECT_EQ(OK(mig.memory_info()).used, 2 * kGiB);
  // More than the instance holds is refused by the simulator.
  EXPECT_NE(
      node_
          ->tessera({"sim", "process", node_->dir(), "--pid", "778", "--mig-device", uuid, "--memory", "200GiB"}, false)
          .exit_code,
      0);
  auto busy = ci.destroy();
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().code, NVML_ERROR_IN_USE);
  node_->drive("end-process", {"--pid", "777"});
  EXPECT_NVML_OK(ci.destroy());
  EXPECT_NVML_OK(gi.destroy());
  // A handle to a destroyed instance is no longer valid.
  auto stale = gi.info();
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().code, NVML_ERROR_INVALID_ARGUMENT);
}

INSTANTIATE_TEST_SUITE_P(Models, SimMig, ::testing::Values("A100-80GB", "H100-80GB", "H200"), [](const auto& info) {
  std::string n = info.param;
  for (auto& c : n)
    if (c == '-') c = '_';
  return n;
});

TEST(SimUuids, AreDeterministicForASeed) {
  auto uuids = [](const char* seed) {
    SimNode node("H100-80GB", 2, {"--seed", seed, "--mig"});
    auto s = node.open();
    std::vector<std::string> out;
    for (uint32_t i = 0; i < 2; ++i) {
      auto gpu = OK(s.device(i));
      out.push_back(OK(gpu.uuid()));
      auto gi = OK(gpu.create_gpu_instance(19));  // 1g.10gb on H100
      (void)OK(gi.create_compute_instance(0));
      out.push_back(OK(OK(gpu.mig_devices()).at(0).uuid()));
    }
    return out;
  };
  auto a = uuids("7"), b = uuids("7"), c = uuids("8");
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(a[0], a[2]);
  EXPECT_TRUE(std::regex_match(a[1], kMigUuid));
  EXPECT_TRUE(std::regex_match(a[0], std::regex("GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")));
}

}  // namespace
}  // namespace tessera
