// Our NVML declarations against the ABI facts (docs/nvml-abi.md sections 1.3
// and 1.4), and the loader against the simulator: the same
// dlopen and binding as production.
#include "nvml/abi.hpp"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstddef>

#include "nvml/error.hpp"
#include "nvml/library.hpp"
#include "sim_node.hpp"
#include "support/sim_nvml.hpp"

namespace tessera {
namespace {

using namespace nvml::abi;

TEST(NvmlAbi, StructSizesAreTheFacts) {
  EXPECT_EQ(sizeof(nvmlReturn_t), 4u);
  EXPECT_EQ(sizeof(nvmlDevice_t), 8u);
  EXPECT_EQ(sizeof(nvmlMemory_t), 24u);
  EXPECT_EQ(sizeof(nvmlMemory_v2_t), 40u);
  EXPECT_EQ(sizeof(nvmlUtilization_t), 8u);
  EXPECT_EQ(sizeof(nvmlPciInfo_t), 68u);
  EXPECT_EQ(sizeof(nvmlProcessInfo_t), 24u);
  EXPECT_EQ(sizeof(nvmlEventData_t), 32u);
  EXPECT_EQ(sizeof(nvmlSetMemoryLimits_v1_t), 24u);
  EXPECT_EQ(sizeof(nvmlGetMemoryLimits_v1_t), 32u);
  EXPECT_EQ(offsetof(nvmlGetMemoryLimits_v1_t, currentUsed), 24u);
  EXPECT_EQ(sizeof(nvmlGpuInstancePlacement_t), 8u);
  EXPECT_EQ(sizeof(nvmlGpuInstanceProfileInfo_t), 48u);
  EXPECT_EQ(sizeof(nvmlGpuInstanceProfileInfo_v2_t), 152u);
  EXPECT_EQ(sizeof(nvmlGpuInstanceProfileInfo_v3_t), 152u);
  EXPECT_EQ(sizeof(nvmlGpuInstanceInfo_t), 24u);
  EXPECT_EQ(sizeof(nvmlComputeInstancePlacement_t), 8u);
  EXPECT_EQ(sizeof(nvmlComputeInstanceProfileInfo_t), 36u);
  EXPECT_EQ(sizeof(nvmlComputeInstanceProfileInfo_v2_t), 136u);
  EXPECT_EQ(sizeof(nvmlComputeInstanceProfileInfo_v3_t), 140u);
  EXPECT_EQ(sizeof(nvmlComputeInstanceInfo_t), 32u);
  EXPECT_EQ(sizeof(nvmlGpmMetric_t), 40u);
  EXPECT_EQ(sizeof(nvmlGpmMetricsGet_t), 3944u);  // MAX = 98, headers 11.8-12.8
  EXPECT_EQ(sizeof(nvmlGpmSupport_t), 8u);
}

TEST(NvmlAbi, FieldOffsetsAreTheFacts) {
  EXPECT_EQ(offsetof(nvmlMemory_v2_t, total), 8u);
  EXPECT_EQ(offsetof(nvmlMemory_v2_t, reserved), 16u);
  EXPECT_EQ(offsetof(nvmlMemory_v2_t, used), 32u);
  EXPECT_EQ(offsetof(nvmlPciInfo_t, domain), 16u);
  EXPECT_EQ(offsetof(nvmlPciInfo_t, pciSubSystemId), 32u);
  EXPECT_EQ(offsetof(nvmlPciInfo_t, busId), 36u);
  EXPECT_EQ(offsetof(nvmlProcessInfo_t, usedGpuMemory), 8u);
  EXPECT_EQ(offsetof(nvmlProcessInfo_t, gpuInstanceId), 16u);
  EXPECT_EQ(offsetof(nvmlProcessInfo_t, computeInstanceId), 20u);
  EXPECT_EQ(offsetof(nvmlEventData_t, eventType), 8u);
  EXPECT_EQ(offsetof(nvmlEventData_t, gpuInstanceId), 24u);
  EXPECT_EQ(offsetof(nvmlGpuInstanceProfileInfo_t, memorySizeMB), 40u);
  EXPECT_EQ(offsetof(nvmlGpuInstanceProfileInfo_v2_t, memorySizeMB), 48u);
  EXPECT_EQ(offsetof(nvmlGpuInstanceProfileInfo_v2_t, name), 56u);
  // v3 dropped isP2pSupported: everything after `id` moved by 4 bytes.
  EXPECT_EQ(offsetof(nvmlGpuInstanceProfileInfo_v3_t, sliceCount), 8u);
  EXPECT_EQ(offsetof(nvmlGpuInstanceProfileInfo_v3_t, memorySizeMB), 40u);
  EXPECT_EQ(offsetof(nvmlGpuInstanceProfileInfo_v3_t, name), 48u);
  EXPECT_EQ(offsetof(nvmlGpuInstanceProfileInfo_v3_t, capabilities), 144u);
  EXPECT_EQ(offsetof(nvmlGpuInstanceInfo_t, id), 8u);
  EXPECT_EQ(offsetof(nvmlGpuInstanceInfo_t, placement), 16u);
  EXPECT_EQ(offsetof(nvmlComputeInstanceProfileInfo_v2_t, name), 40u);
  EXPECT_EQ(offsetof(nvmlComputeInstanceProfileInfo_v3_t, capabilities), 136u);
  EXPECT_EQ(offsetof(nvmlComputeInstanceInfo_t, id), 16u);
  EXPECT_EQ(offsetof(nvmlComputeInstanceInfo_t, placement), 24u);
  EXPECT_EQ(offsetof(nvmlGpmMetric_t, value), 8u);
  EXPECT_EQ(offsetof(nvmlGpmMetric_t, metricInfo), 16u);
  EXPECT_EQ(offsetof(nvmlGpmMetricsGet_t, sample1), 8u);
  EXPECT_EQ(offsetof(nvmlGpmMetricsGet_t, metrics), 24u);
}

TEST(NvmlAbi, VersionConstantsAreTheFacts) {
  EXPECT_EQ(nvmlMemory_v2, 0x02000028u);
  EXPECT_EQ(nvmlGpuInstanceProfileInfo_v2, 0x02000098u);
  EXPECT_EQ(nvmlGpuInstanceProfileInfo_v3, 0x03000098u);
  EXPECT_EQ(nvmlComputeInstanceProfileInfo_v2, 0x02000088u);
  EXPECT_EQ(nvmlComputeInstanceProfileInfo_v3, 0x0300008Cu);
  EXPECT_EQ(NVML_GPM_METRICS_GET_VERSION, 1u);  // GPM: a plain integer
  EXPECT_EQ(NVML_GPM_SUPPORT_VERSION, 1u);
}

TEST(NvmlAbi, ConstantsAreTheFacts) {
  EXPECT_EQ(NVML_ERROR_IN_USE, 19);
  EXPECT_EQ(NVML_ERROR_INSUFFICIENT_RESOURCES, 23);
  EXPECT_EQ(NVML_ERROR_ARGUMENT_VERSION_MISMATCH, 25);
  EXPECT_EQ(NVML_ERROR_UNKNOWN, 999);
  EXPECT_EQ(NVML_GPU_INSTANCE_PROFILE_7_SLICE, 0x4u);
  EXPECT_EQ(NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 0x7u);
  EXPECT_EQ(NVML_GPU_INSTANCE_PROFILE_3_SLICE_GFX, 0x11u);
  EXPECT_EQ(nvmlEventTypeXidCriticalError, 0x8ULL);
  EXPECT_EQ(nvmlEventMigConfigChange, 0x100ULL);
  EXPECT_EQ(NVML_TOPOLOGY_NODE, 40);
  EXPECT_EQ(NVML_DEVICE_ARCH_HOPPER, 9u);
  EXPECT_EQ(NVML_DEVICE_UUID_V2_BUFFER_SIZE, 96u);
  EXPECT_EQ(NVML_GPM_METRIC_DRAM_BW_UTIL, 10u);
}

TEST(NvmlAbi, ReturnNamesRoundTrip) {
  EXPECT_EQ(nvml::return_name(NVML_ERROR_INSUFFICIENT_RESOURCES), "NVML_ERROR_INSUFFICIENT_RESOURCES");
  EXPECT_EQ(nvml::return_name(static_cast<nvmlReturn_t>(77)), "NVML_ERROR_77");
  nvml::Return code{};
  ASSERT_TRUE(nvml::parse_return_name("NVML_ERROR_GPU_IS_LOST", code));
  EXPECT_EQ(code, NVML_ERROR_GPU_IS_LOST);
  ASSERT_TRUE(nvml::parse_return_name("IN_USE", code));
  EXPECT_EQ(code, NVML_ERROR_IN_USE);
  EXPECT_FALSE(nvml::parse_return_name("NVML_ERROR_NOPE", code));
}

TEST(NvmlLoader, BindsEverySymbolOfTheSimulator) {
  auto lib = nvml::Library::open(testing::kSimLibrary);
  ASSERT_TRUE(lib) << lib.error().message;
  const auto& symbols = nvml::bound_symbols();
  EXPECT_GE(symbols.size(), 50u);
  for (const auto& s : symbols) EXPECT_NE((*lib)->symbol(std::string(s.name).c_str()), nullptr) << s.name;
  // The versioned names, never the bare ones (facts 1.5 #1).
  const auto& api = (*lib)->api();
  EXPECT_EQ(reinterpret_cast<void*>(api.nvmlInit_v2), (*lib)->symbol("nvmlInit_v2"));
  EXPECT_EQ(reinterpret_cast<void*>(api.nvmlDeviceGetGpuInstancePossiblePlacements_v2),
            (*lib)->symbol("nvmlDeviceGetGpuInstancePossiblePlacements_v2"));
  EXPECT_NE(api.nvmlDeviceGetMemoryInfo_v2, nullptr);
  EXPECT_NE(api.nvmlGpmMigSampleGet, nullptr);
}

TEST(NvmlLoader, SimulatorExportsOnlyTheCAbi) {
  auto lib = nvml::Library::open(testing::kSimLibrary);
  ASSERT_TRUE(lib) << lib.error().message;
  EXPECT_NE((*lib)->symbol("tesseraSimControl"), nullptr);
  // No tessera library is linked in, and the simulator's own C++ stays local.
  EXPECT_EQ((*lib)->symbol("_ZN7tessera7Catalog7builtinEv"), nullptr);
  EXPECT_EQ((*lib)->symbol("_ZN7tessera3sim2hw4gpusEv"), nullptr);
  // The older names are exported for outside clients, as a real driver's are
  // (sim_exports_test.cpp), but the loader never binds them.
  EXPECT_NE((*lib)->symbol("nvmlInit"), nullptr);
  EXPECT_NE(reinterpret_cast<void*>((*lib)->api().nvmlInit_v2), (*lib)->symbol("nvmlInit"));
}

TEST(NvmlLoader, NamesTheMissingLibrary) {
  auto lib = nvml::Library::open("/nonexistent/libnvidia-ml.so.1");
  ASSERT_FALSE(lib);
  EXPECT_EQ(lib.error().code, Errc::not_found);
  EXPECT_NE(lib.error().message.find("/nonexistent/libnvidia-ml.so.1"), std::string::npos) << lib.error().message;
}

TEST(NvmlLoader, NamesTheFirstMissingSymbol) {
  // A real library that is not NVML: the loader refuses it as a whole.
  auto lib = nvml::Library::open("libc.so.6");
  ASSERT_FALSE(lib);
  EXPECT_EQ(lib.error().code, Errc::unsupported);
  EXPECT_NE(lib.error().message.find("lacks the NVML symbol nvmlInit_v2"), std::string::npos) << lib.error().message;
}

TEST(NvmlLoader, SimulatorRejectsAPlainVersionNumber) {
  // nvidia-settings #78: version = 2 instead of sizeof | 2 << 24 must fail.
  testing::SimNode node("A100-80GB", 1);
  auto session = node.open();
  auto gpu = OK(session.device(0));
  nvmlMemory_v2_t mem{};
  mem.version = 2;
  EXPECT_EQ(session.api().nvmlDeviceGetMemoryInfo_v2(gpu.handle(), &mem), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
  mem.version = nvmlMemory_v2;
  EXPECT_EQ(session.api().nvmlDeviceGetMemoryInfo_v2(gpu.handle(), &mem), NVML_SUCCESS);
  EXPECT_EQ(mem.total, 81920ull * 1024 * 1024);
}

TEST(NvmlLoader, ProfileInfoVersionsHaveTheirOwnLayouts) {
  // v2 and v3 of nvmlGpuInstanceProfileInfo differ by isP2pSupported, so
  // every field after `id` sits 4 bytes apart (facts 1.5 #3).
  testing::SimNode node("H100-80GB", 1);
  auto session = node.open();
  auto gpu = OK(session.device(0));
  const auto& api = session.api();
  nvmlGpuInstanceProfileInfo_v2_t v2{};
  v2.version = nvmlGpuInstanceProfileInfo_v2;
  ASSERT_EQ(api.nvmlDeviceGetGpuInstanceProfileInfoV(gpu.handle(), NVML_GPU_INSTANCE_PROFILE_7_SLICE, &v2),
            NVML_SUCCESS);
  EXPECT_EQ(v2.id, 0u);
  EXPECT_EQ(v2.sliceCount, 7u);
  EXPECT_EQ(v2.memorySizeMB, 81152u);
  EXPECT_STREQ(v2.name, "MIG 7g.80gb");
  nvmlGpuInstanceProfileInfo_v3_t v3{};
  v3.version = nvmlGpuInstanceProfileInfo_v3;
  ASSERT_EQ(api.nvmlDeviceGetGpuInstanceProfileInfoV(gpu.handle(), NVML_GPU_INSTANCE_PROFILE_7_SLICE,
                                                     reinterpret_cast<nvmlGpuInstanceProfileInfo_v2_t*>(&v3)),
            NVML_SUCCESS);
  EXPECT_EQ(v3.version, nvmlGpuInstanceProfileInfo_v3);
  EXPECT_EQ(v3.sliceCount, 7u);
  EXPECT_EQ(v3.memorySizeMB, 81152u);
  EXPECT_STREQ(v3.name, "MIG 7g.80gb");
  nvmlGpuInstanceProfileInfo_v2_t plain{};
  plain.version = 2;  // the plain number is refused
  EXPECT_EQ(api.nvmlDeviceGetGpuInstanceProfileInfoV(gpu.handle(), 0, &plain), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
}

TEST(NvmlLoader, CallsBeforeInitAreUninitialized) {
  testing::ScopedSimEnv env("/nonexistent");
  auto lib = nvml::Library::open(testing::kSimLibrary);
  ASSERT_TRUE(lib);
  unsigned int count = 0;
  EXPECT_EQ((*lib)->api().nvmlDeviceGetCount_v2(&count), NVML_ERROR_UNINITIALIZED);
  EXPECT_EQ((*lib)->api().nvmlInit_v2(), NVML_ERROR_DRIVER_NOT_LOADED);  // no node there
}

}  // namespace
}  // namespace tessera
