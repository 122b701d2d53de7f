// The simulated driver against hand-written cases per GPU model: sequences of
// GPU-instance creations with NVML's result for each, written from NVIDIA's
// MIG User Guide ("Supported MIG Profiles": each profile's placements, the
// GPU's compute and memory slices), not from tessera's catalog or layout
// code. The simulator decides with its own slice-occupancy code, so these
// rows check it; the simulator in turn checks tessera. Also: a node without
// privileges, the memory a driver reserves, and nvmlErrorString.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sim_node.hpp"

namespace tessera {
namespace {

using namespace nvml::abi;
using testing::SimNode;

// NVML_GPU_INSTANCE_PROFILE_* indices (nvml.h): what GetGpuInstanceProfileInfo takes.
constexpr unsigned k1Slice = 0, k2Slice = 1, k3Slice = 2, k4Slice = 3, k7Slice = 4, k1SliceMe = 7, k2SliceMe = 8,
                   k1SliceTwoMem = 9;

struct Step {
  unsigned profile_index;
  unsigned start;
  unsigned size;  // memory slices of the placement
  nvmlReturn_t expect;
};

struct Case {
  const char* model;
  const char* name;
  std::vector<Step> steps;
};

constexpr auto OK_ = NVML_SUCCESS;
constexpr auto FULL = NVML_ERROR_INSUFFICIENT_RESOURCES;  // allowed placement, but taken or over a limit
constexpr auto BAD = NVML_ERROR_INVALID_ARGUMENT;         // a placement the profile can never take

// A100-80GB, H100-80GB and H200 share one geometry: 7 compute slices, 8
// memory slices; 1g {0..6} size 1, 1g.+me {0..6} at most one, 1g with two
// memory slices {0,2,4,6}, 2g {0,2,4}, 3g {0,4}, 4g {0}, 7g {0} size 8.
std::vector<Case> seven_slice_cases(const char* model) {
  return {
      {model, "whole GPU, then nothing", {{k7Slice, 0, 8, OK_}, {k1Slice, 0, 1, FULL}, {k1Slice, 6, 1, FULL}}},
      {model, "4g + 3g use all 7 compute slices", {{k4Slice, 0, 4, OK_}, {k3Slice, 4, 4, OK_}, {k1Slice, 3, 1, FULL}}},
      {model, "two 3g fill the memory", {{k3Slice, 0, 4, OK_}, {k3Slice, 4, 4, OK_}, {k1Slice, 6, 1, FULL}}},
      {model, "4g only at 0", {{k4Slice, 4, 4, BAD}, {k4Slice, 0, 4, OK_}}},
      {model, "2g only at even starts", {{k2Slice, 1, 2, BAD}, {k2Slice, 3, 2, BAD}, {k2Slice, 6, 2, BAD}, {k2Slice, 4, 2, OK_}}},
      {model, "a placement of the wrong size", {{k3Slice, 0, 2, BAD}, {k1Slice, 0, 2, BAD}}},
      {model, "one media-engine 1g", {{k1SliceMe, 0, 1, OK_}, {k1SliceMe, 1, 1, FULL}, {k1Slice, 1, 1, OK_}}},
      {model, "seven 1g, no eighth", {{k1Slice, 0, 1, OK_}, {k1Slice, 1, 1, OK_}, {k1Slice, 2, 1, OK_}, {k1Slice, 3, 1, OK_},
                                      {k1Slice, 4, 1, OK_}, {k1Slice, 5, 1, OK_}, {k1Slice, 6, 1, OK_}, {k1Slice, 7, 1, BAD}}},
      {model, "three 2g and a 1g", {{k2Slice, 0, 2, OK_}, {k2Slice, 2, 2, OK_}, {k2Slice, 4, 2, OK_}, {k1Slice, 6, 1, OK_},
                                    {k1SliceTwoMem, 6, 2, FULL}}},
      {model, "3g at 4 then 2g + two 1g", {{k3Slice, 4, 4, OK_}, {k2Slice, 0, 2, OK_}, {k1Slice, 2, 1, OK_}, {k1Slice, 3, 1, OK_},
                                           {k1Slice, 1, 1, FULL}}},
      {model, "1g with two memory slices at even starts", {{k1SliceTwoMem, 1, 2, BAD}, {k1SliceTwoMem, 0, 2, OK_},
                                                           {k1SliceTwoMem, 2, 2, OK_}, {k1SliceTwoMem, 4, 2, OK_},
                                                           {k1SliceTwoMem, 6, 2, OK_}, {k1Slice, 1, 1, FULL}}},
      {model, "overlap", {{k3Slice, 0, 4, OK_}, {k4Slice, 0, 4, FULL}, {k2Slice, 2, 2, FULL}, {k2Slice, 4, 2, OK_}}},
      {model, "4g + 2g + 1g", {{k4Slice, 0, 4, OK_}, {k2Slice, 4, 2, OK_}, {k1Slice, 6, 1, OK_}, {k1Slice, 7, 1, BAD}}},
  };
}

// A30-24GB: 4 compute and 4 memory slices; 1g {0..3}, 2g {0,2}, 4g {0}, and
// one each of the media-engine 1g and 2g.
std::vector<Case> a30_cases() {
  const char* m = "A30-24GB";
  return {
      {m, "whole GPU", {{k4Slice, 0, 4, OK_}, {k1Slice, 0, 1, FULL}}},
      {m, "two 2g", {{k2Slice, 0, 2, OK_}, {k2Slice, 2, 2, OK_}, {k1Slice, 3, 1, FULL}}},
      {m, "2g only at 0 and 2", {{k2Slice, 1, 2, BAD}, {k2Slice, 2, 2, OK_}}},
      {m, "four 1g", {{k1Slice, 0, 1, OK_}, {k1Slice, 1, 1, OK_}, {k1Slice, 2, 1, OK_}, {k1Slice, 3, 1, OK_}, {k1Slice, 4, 1, BAD}}},
      {m, "one media-engine 1g", {{k1SliceMe, 0, 1, OK_}, {k1SliceMe, 1, 1, FULL}}},
      {m, "one media-engine 2g", {{k2SliceMe, 0, 2, OK_}, {k2SliceMe, 2, 2, FULL}, {k2Slice, 2, 2, OK_}}},
      // One JPEG and one OFA engine in all: a media-engine 1g and 2g never together.
      {m, "one media-engine instance of any size", {{k1SliceMe, 0, 1, OK_}, {k2SliceMe, 2, 2, FULL}, {k1Slice, 1, 1, OK_}}},
      {m, "the media-engine 2g first", {{k2SliceMe, 2, 2, OK_}, {k1SliceMe, 0, 1, FULL}, {k2Slice, 0, 2, OK_}}},
      {m, "no 3g on A30", {{k3Slice, 0, 4, NVML_ERROR_NOT_SUPPORTED}}},
  };
}

std::string name_of(nvmlReturn_t r) {
  switch (r) {
    case NVML_SUCCESS: return "SUCCESS";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "INSUFFICIENT_RESOURCES";
    case NVML_ERROR_INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case NVML_ERROR_NOT_SUPPORTED: return "NOT_SUPPORTED";
    default: return std::to_string(static_cast<int>(r));
  }
}

void run_case(const Case& c) {
  SCOPED_TRACE(std::string(c.model) + ": " + c.name);
  SimNode node(c.model, 1, {"--mig"});
  auto session = node.open();
  const auto& api = session.api();
  nvmlDevice_t gpu = nullptr;
  ASSERT_EQ(api.nvmlDeviceGetHandleByIndex_v2(0, &gpu), NVML_SUCCESS);
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const auto& s = c.steps[i];
    nvmlGpuInstanceProfileInfo_t info{};
    nvmlReturn_t r = api.nvmlDeviceGetGpuInstanceProfileInfo(gpu, s.profile_index, &info);
    if (r == NVML_SUCCESS) {
      nvmlGpuInstancePlacement_t where{s.start, s.size};
      nvmlGpuInstance_t gi = nullptr;
      r = api.nvmlDeviceCreateGpuInstanceWithPlacement(gpu, info.id, &where, &gi);
    }
    EXPECT_EQ(name_of(r), name_of(s.expect)) << "step " << i + 1 << ": profile index " << s.profile_index << " at "
                                             << s.start << " size " << s.size;
  }
}

TEST(SimRules, HandWrittenCasesPerModel) {
  std::vector<Case> cases;
  for (const char* model : {"A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB"})
    for (auto& c : seven_slice_cases(model)) cases.push_back(std::move(c));
  for (auto& c : a30_cases()) cases.push_back(std::move(c));
  for (const auto& c : cases) run_case(c);
}

// A caller without root: reads work, MIG changes are refused with
// NO_PERMISSION, and `tessera mig apply` says what privilege is missing.
TEST(SimRules, UnprivilegedNodeRefusesMigChanges) {
  SimNode node("A100-SXM4-80GB", 1, {"--unprivileged"});
  auto session = node.open();
  auto gpu = OK(session.device(0));
  EXPECT_NVML_OK(gpu.uuid());
  auto mode = gpu.set_mig_mode(true);
  ASSERT_FALSE(mode);
  EXPECT_EQ(mode.error().code, NVML_ERROR_NO_PERMISSION);
  auto config = node.dir() + "/../mig.yaml";
  {
    std::ofstream out(config);
    out << "version: v1\nmig-configs:\n  all-1g:\n    - devices: all\n      mig-enabled: true\n"
           "      mig-devices: {\"1g.10gb\": 7}\n";
  }
  auto r = node.tessera({"mig", "apply", "-f", config, "-c", "all-1g"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("NVML_ERROR_NO_PERMISSION"), std::string::npos) << r.out << r.err;
  EXPECT_NE((r.out + r.err).find("needs root privileges"), std::string::npos) << r.out << r.err;
}

// A whole GPU reports what the driver reserves, inside `used`, as R510+
// drivers do: hundreds of MiB, not zero.
TEST(SimRules, WholeGpuReportsReservedMemory) {
  SimNode node("A100-SXM4-80GB", 1);
  auto session = node.open();
  const auto& api = session.api();
  nvmlDevice_t gpu = nullptr;
  ASSERT_EQ(api.nvmlDeviceGetHandleByIndex_v2(0, &gpu), NVML_SUCCESS);
  nvmlMemory_v2_t m{};
  m.version = nvmlMemory_v2;
  ASSERT_EQ(api.nvmlDeviceGetMemoryInfo_v2(gpu, &m), NVML_SUCCESS);
  EXPECT_EQ(m.total, 81920ull << 20);
  EXPECT_GE(m.reserved, 100ull << 20);
  EXPECT_LE(m.reserved, 1024ull << 20);
  EXPECT_EQ(m.used, m.reserved);  // no processes: only what the driver keeps
  EXPECT_EQ(m.free, m.total - m.used);
}

// Any code a planned fault may return has a description.
TEST(SimRules, ErrorStringKnowsEveryCode) {
  SimNode node("A100-SXM4-80GB", 1);
  auto session = node.open();
  const auto& api = session.api();
  for (int code = 0; code <= 30; ++code) {
    std::string text = api.nvmlErrorString(static_cast<nvmlReturn_t>(code));
    EXPECT_NE(text, "Unknown Error") << "code " << code;
    EXPECT_FALSE(text.empty()) << "code " << code;
  }
  EXPECT_EQ(std::string(api.nvmlErrorString(NVML_ERROR_UNKNOWN)), "Unknown Error");
}

// Driver-enforced memory limits (R615+), through the production wrapper: a
// whole GPU records a cgroup's soft and hard limit and reads them back; the
// rules NVIDIA documents hold (no limit reads as absent, clearing, MIG device
// handles refused, setting needs privileges); an older driver refuses.
TEST(SimRules, MemoryLimitsOfACgroupOnAWholeGpu) {
  testing::TempDir cgroups;
  const std::string pod = cgroups.path() + "/kubepods/pod1";
  std::filesystem::create_directories(pod);
  SimNode node("H100-SXM5-80GB", 2, {"--driver-version", "615.71.09"});
  auto session = node.open();
  auto gpu = OK(session.device(0));
  EXPECT_EQ(OK(gpu.memory_limits(pod)), std::nullopt) << "no limit yet";
  EXPECT_NVML_OK(gpu.set_memory_limits(pod, 4ULL << 30, 8ULL << 30));
  auto got = OK(gpu.memory_limits(pod));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->soft, 4ULL << 30);
  EXPECT_EQ(got->hard, 8ULL << 30);
  EXPECT_EQ(OK(OK(session.device(1)).memory_limits(pod)), std::nullopt) << "per GPU";
  // Another process of the node sees it: the limit is the driver's, not the caller's.
  auto second = node.open();
  EXPECT_TRUE(OK(OK(second.device(0)).memory_limits(pod)));

  auto refused = [&](nvml::Result<void> r, nvmlReturn_t code, const char* why) {
    ASSERT_FALSE(r) << why;
    EXPECT_EQ(r.error().code, code) << why << ": " << r.error().message();
  };
  refused(gpu.set_memory_limits("kubepods/pod1", 0, 1ULL << 30), NVML_ERROR_INVALID_ARGUMENT, "a relative path");
  refused(gpu.set_memory_limits(pod + "/missing", 0, 1ULL << 30), NVML_ERROR_NOT_FOUND, "no such cgroup");
  refused(gpu.set_memory_limits(pod, 2ULL << 30, 1ULL << 30), NVML_ERROR_INVALID_ARGUMENT, "soft above hard");
  EXPECT_EQ(OK(gpu.memory_limits(pod))->hard, 8ULL << 30) << "a refused call changes nothing";

  EXPECT_NVML_OK(gpu.set_memory_limits(pod, 0, NVML_DEVICE_MEMORY_LIMIT_MAX));
  EXPECT_EQ(OK(gpu.memory_limits(pod)), std::nullopt) << "cleared";

}

TEST(SimRules, MemoryLimitsRefuseMigDevices) {
  testing::TempDir cgroups;
  SimNode node("H100-SXM5-80GB", 1, {"--driver-version", "615.71.09", "--mig"});
  auto session = node.open();
  auto gpu = OK(session.device(0));
  auto gi = OK(gpu.create_gpu_instance(OK(gpu.gpu_instance_profile(k1Slice)).id));
  (void)OK(gi.create_compute_instance(0));
  auto migs = OK(gpu.mig_devices());
  ASSERT_EQ(migs.size(), 1u);
  auto r = migs[0].set_memory_limits(cgroups.path(), 0, 1ULL << 30);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, NVML_ERROR_NOT_SUPPORTED);
  auto g = migs[0].memory_limits(cgroups.path());
  ASSERT_FALSE(g);
  EXPECT_EQ(g.error().code, NVML_ERROR_NOT_SUPPORTED);
}

TEST(SimRules, MemoryLimitsNeedR615AndPrivilegesAndAWholeGpu) {
  testing::TempDir cgroups;
  {
    SimNode old("H100-SXM5-80GB", 1);  // 550.90.07
    auto session = old.open();
    auto r = OK(session.device(0)).set_memory_limits(cgroups.path(), 0, 1ULL << 30);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, NVML_ERROR_NOT_SUPPORTED);
  }
  {
    SimNode user("H100-SXM5-80GB", 1, {"--driver-version", "615.71.09", "--unprivileged"});
    auto session = user.open();
    auto gpu = OK(session.device(0));
    auto r = gpu.set_memory_limits(cgroups.path(), 0, 1ULL << 30);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, NVML_ERROR_NO_PERMISSION);
    EXPECT_EQ(OK(gpu.memory_limits(cgroups.path())), std::nullopt) << "reading needs no privilege";
  }
}

}  // namespace
}  // namespace tessera
