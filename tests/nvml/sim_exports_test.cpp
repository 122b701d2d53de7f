// The simulated libnvidia-ml.so.1 as an outside client sees it (HAMi-core's
// interposer, a program built against an older nvml.h): dlopen, then dlsym
// by name, with no tessera loader in between. A real driver exports the
// unversioned and older-versioned names beside the current ones, with their
// older struct layouts; a client that finds one missing, or gets the wrong
// layout, crashes.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "support/run.hpp"

namespace {

using tessera::testing::run;
using tessera::testing::TempDir;

const std::string kBin = TESSERA_BIN;
const std::string kSimLibrary = TESSERA_SIM_LIBRARY;

// Every entry point the simulator simulates, by the names a real driver
// exports. Source: NVIDIA nvml.h (NVML 13.3.29, as go-nvml vendors it in
// gen/nvml/nvml.h): the prototypes, and the older names declared under
// `#ifdef NVML_NO_UNVERSIONED_FUNC_DEFS`.
const char* const kExported[] = {
    // Initialisation and system queries.
    "nvmlInit", "nvmlInit_v2", "nvmlShutdown", "nvmlErrorString", "nvmlSystemGetDriverVersion",
    "nvmlSystemGetCudaDriverVersion", "nvmlSystemGetCudaDriverVersion_v2",
    // Device handles and queries.
    "nvmlDeviceGetCount", "nvmlDeviceGetCount_v2", "nvmlDeviceGetHandleByIndex", "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetHandleByPciBusId", "nvmlDeviceGetHandleByPciBusId_v2", "nvmlDeviceGetHandleByUUID",
    "nvmlDeviceGetName", "nvmlDeviceGetUUID", "nvmlDeviceGetMinorNumber", "nvmlDeviceGetPciInfo",
    "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetProcessUtilization", "nvmlDeviceGetTemperature",
    "nvmlDeviceGetPowerUsage", "nvmlDeviceGetClockInfo", "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetArchitecture",
    "nvmlDeviceGetCudaComputeCapability", "nvmlDeviceGetBrand", "nvmlDeviceGetComputeRunningProcesses",
    "nvmlDeviceGetComputeRunningProcesses_v2", "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetTopologyCommonAncestor", "nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkRemotePciInfo",
    "nvmlDeviceGetNvLinkRemotePciInfo_v2",
    // Memory partitions of cgroups (NVML 13.4 / R615: its API reference).
    "nvmlDeviceSetMemoryLimits_v1", "nvmlDeviceGetMemoryLimits_v1",
    // MIG.
    "nvmlDeviceGetMigMode", "nvmlDeviceSetMigMode", "nvmlDeviceIsMigDeviceHandle", "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex", "nvmlDeviceGetDeviceHandleFromMigDeviceHandle",
    "nvmlDeviceGetGpuInstanceId", "nvmlDeviceGetComputeInstanceId", "nvmlDeviceGetGpuInstanceProfileInfo",
    "nvmlDeviceGetGpuInstanceProfileInfoV", "nvmlDeviceGetGpuInstancePossiblePlacements",
    "nvmlDeviceGetGpuInstancePossiblePlacements_v2", "nvmlDeviceGetGpuInstanceRemainingCapacity",
    "nvmlDeviceCreateGpuInstance", "nvmlDeviceCreateGpuInstanceWithPlacement", "nvmlGpuInstanceDestroy",
    "nvmlDeviceGetGpuInstances", "nvmlDeviceGetGpuInstanceById", "nvmlGpuInstanceGetInfo",
    "nvmlGpuInstanceGetComputeInstanceProfileInfo", "nvmlGpuInstanceGetComputeInstanceRemainingCapacity",
    "nvmlGpuInstanceCreateComputeInstance", "nvmlComputeInstanceDestroy", "nvmlGpuInstanceGetComputeInstances",
    "nvmlGpuInstanceGetComputeInstanceById", "nvmlComputeInstanceGetInfo", "nvmlComputeInstanceGetInfo_v2",
    // Events and GPM.
    "nvmlEventSetCreate", "nvmlDeviceRegisterEvents", "nvmlDeviceGetSupportedEventTypes", "nvmlEventSetWait",
    "nvmlEventSetWait_v2", "nvmlEventSetFree", "nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc",
    "nvmlGpmSampleFree", "nvmlGpmSampleGet", "nvmlGpmMigSampleGet", "nvmlGpmMetricsGet",
};

// The client's own declarations, as nvml.h has them (x86-64 layouts).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t NVML_SUCCESS = 0, NVML_ERROR_UNINITIALIZED = 1, NVML_ERROR_INVALID_ARGUMENT = 2,
                       NVML_ERROR_NOT_SUPPORTED = 3, NVML_ERROR_NOT_FOUND = 6, NVML_ERROR_INSUFFICIENT_SIZE = 7;
struct nvmlProcessInfo_v1_t {  // nvml.h nvmlProcessInfo_v1_st
  unsigned int pid;
  unsigned long long usedGpuMemory;
};
struct nvmlProcessInfo_v2_t {  // nvml.h nvmlProcessInfo_v2_st
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
struct nvmlProcessUtilizationSample_t {  // nvml.h nvmlProcessUtilizationSample_st
  unsigned int pid;
  unsigned long long timeStamp;
  unsigned int smUtil, memUtil, encUtil, decUtil;
};
struct nvmlMemory_t {  // nvml.h nvmlMemory_st (v1)
  unsigned long long total, free, used;
};
struct nvmlPciInfo_t {  // nvml.h nvmlPciInfo_st
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16 && sizeof(nvmlProcessInfo_v2_t) == 24);
static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32 && sizeof(nvmlPciInfo_t) == 68);

class Library {
 public:
  Library() : handle_(dlopen(kSimLibrary.c_str(), RTLD_NOW | RTLD_LOCAL)) {}
  ~Library() {
    if (handle_) dlclose(handle_);
  }
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  void* handle() const { return handle_; }
  template <class F>
  F get(const char* name) const {
    return reinterpret_cast<F>(dlsym(handle_, name));
  }

 private:
  void* handle_;
};

// A node made by the real `tessera sim`, which the library finds in
// TESSERA_SIM (set for this process while the node lives; the `tessera`
// processes get their node on their command line and TESSERA_SIM cleared,
// since it is --sim's variable too).
class Node {
 public:
  Node(const std::string& model, const std::vector<std::string>& extra = {}) : dir_(tmp_.path() + "/node") {
    std::vector<std::string> argv = {kBin, "sim", "create", dir_, "--gpu", model};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto r = run(argv, "", {"TESSERA_SIM="});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    setenv("TESSERA_SIM", dir_.c_str(), 1);
  }
  ~Node() { unsetenv("TESSERA_SIM"); }
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  void drive(const std::string& sub, std::vector<std::string> args) const {
    args.insert(args.begin(), {kBin, "sim", sub, dir_});
    auto r = run(args, "", {"TESSERA_SIM="});
    EXPECT_EQ(r.exit_code, 0) << sub << ": " << r.err;
  }

 private:
  TempDir tmp_;
  std::string dir_;
};

TEST(SimExports, EveryNameOfNvmlhResolves) {
  Library lib;
  ASSERT_NE(lib.handle(), nullptr) << dlerror();
  for (const char* name : kExported) EXPECT_NE(dlsym(lib.handle(), name), nullptr) << name;
  // The older names are entry points of their own, not the current ones under another name.
  EXPECT_NE(dlsym(lib.handle(), "nvmlInit"), dlsym(lib.handle(), "nvmlInit_v2"));
  EXPECT_NE(dlsym(lib.handle(), "nvmlDeviceGetComputeRunningProcesses"),
            dlsym(lib.handle(), "nvmlDeviceGetComputeRunningProcesses_v3"));
}

TEST(SimExports, OldNamesAnswerAsTheDriverDocuments) {
  Node node("H100-80GB", {"--count", "2"});
  // A process on GPU 1 holding 1 GiB, and that GPU 60% busy.
  node.drive("process", {"--pid", "4242", "--gpu", "1", "--memory", "1GiB"});
  node.drive("activity", {"--gpu", "1", "--gpu-util", "60", "--memory-util", "25"});
  Library lib;
  ASSERT_NE(lib.handle(), nullptr) << dlerror();
  auto count_fn = lib.get<nvmlReturn_t (*)(unsigned int*)>("nvmlDeviceGetCount");
  unsigned int count = 0;
  EXPECT_EQ(count_fn(&count), NVML_ERROR_UNINITIALIZED);  // before nvmlInit
  ASSERT_EQ(lib.get<nvmlReturn_t (*)()>("nvmlInit")(), NVML_SUCCESS);
  ASSERT_EQ(count_fn(&count), NVML_SUCCESS);
  EXPECT_EQ(count, 2u);

  nvmlDevice_t gpu = nullptr;
  auto by_index = lib.get<nvmlReturn_t (*)(unsigned int, nvmlDevice_t*)>("nvmlDeviceGetHandleByIndex");
  ASSERT_EQ(by_index(1, &gpu), NVML_SUCCESS);
  EXPECT_EQ(by_index(2, &gpu), NVML_ERROR_INVALID_ARGUMENT);
  ASSERT_EQ(by_index(1, &gpu), NVML_SUCCESS);
  nvmlDevice_t same = nullptr;
  ASSERT_EQ(lib.get<nvmlReturn_t (*)(unsigned int, nvmlDevice_t*)>("nvmlDeviceGetHandleByIndex_v2")(1, &same),
            NVML_SUCCESS);
  EXPECT_EQ(gpu, same);  // one handle per GPU, whichever name gave it

  // The PCI bus id as v1 reports it finds the GPU again, in each format nvml.h accepts.
  nvmlPciInfo_t pci{};
  ASSERT_EQ(lib.get<nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t*)>("nvmlDeviceGetPciInfo")(gpu, &pci), NVML_SUCCESS);
  EXPECT_EQ(pci.pciDeviceId, 0x233010DEu);
  auto by_bus = lib.get<nvmlReturn_t (*)(const char*, nvmlDevice_t*)>("nvmlDeviceGetHandleByPciBusId");
  char bus_dbf[32], bus_short[32];
  std::snprintf(bus_dbf, sizeof bus_dbf, "%x:%x.0", pci.bus, pci.device);
  std::snprintf(bus_short, sizeof bus_short, "0000:%02x:%02x", pci.bus, pci.device);
  for (const char* id : {static_cast<const char*>(pci.busId), static_cast<const char*>(pci.busIdLegacy),
                         static_cast<const char*>(bus_dbf), static_cast<const char*>(bus_short)}) {
    nvmlDevice_t found = nullptr;
    EXPECT_EQ(by_bus(id, &found), NVML_SUCCESS) << id;
    EXPECT_EQ(found, gpu) << id;
  }
  nvmlDevice_t none = nullptr;
  EXPECT_EQ(by_bus("00000000:FE:00.0", &none), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(by_bus("not a bus id", &none), NVML_ERROR_INVALID_ARGUMENT);

  // v1 running processes: 16-byte entries, pid and memory only.
  using ProcessesV1 = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v1_t*);
  auto procs_v1 = lib.get<ProcessesV1>("nvmlDeviceGetComputeRunningProcesses");
  unsigned int n = 0;
  EXPECT_EQ(procs_v1(gpu, &n, nullptr), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(n, 1u);
  nvmlProcessInfo_v1_t v1[2];
  std::memset(v1, 0xAB, sizeof v1);
  n = 2;
  ASSERT_EQ(procs_v1(gpu, &n, v1), NVML_SUCCESS);
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(v1[0].pid, 4242u);
  EXPECT_EQ(v1[0].usedGpuMemory, 1ULL << 30);
  unsigned char untouched[sizeof v1[1]];
  std::memset(untouched, 0xAB, sizeof untouched);
  EXPECT_EQ(std::memcmp(&v1[1], untouched, sizeof untouched), 0) << "wrote past the 16-byte entry";
  // _v2: the 24-byte entries with the instance ids (none outside MIG).
  nvmlProcessInfo_v2_t v2[1]{};
  n = 1;
  ASSERT_EQ(lib.get<nvmlReturn_t (*)(nvmlDevice_t, unsigned int*, nvmlProcessInfo_v2_t*)>(
                "nvmlDeviceGetComputeRunningProcesses_v2")(gpu, &n, v2),
            NVML_SUCCESS);
  EXPECT_EQ(v2[0].pid, 4242u);
  EXPECT_EQ(v2[0].gpuInstanceId, 0xFFFFFFFFu);
  EXPECT_EQ(v2[0].computeInstanceId, 0xFFFFFFFFu);

  // v1 memory info: total, free and used, used holding the process.
  nvmlMemory_t memory{};
  ASSERT_EQ(lib.get<nvmlReturn_t (*)(nvmlDevice_t, nvmlMemory_t*)>("nvmlDeviceGetMemoryInfo")(gpu, &memory),
            NVML_SUCCESS);
  EXPECT_EQ(memory.total, memory.free + memory.used);
  EXPECT_GE(memory.used, 1ULL << 30);

  // Process utilisation: the count with a NULL buffer, then one sample for the
  // one process, newer than the last one seen.
  auto utilization = lib.get<nvmlReturn_t (*)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned int*,
                                              unsigned long long)>("nvmlDeviceGetProcessUtilization");
  unsigned int samples = 0;
  EXPECT_EQ(utilization(gpu, nullptr, &samples, 0), NVML_ERROR_INSUFFICIENT_SIZE);
  EXPECT_EQ(samples, 1u);
  nvmlProcessUtilizationSample_t sample[2]{};
  samples = 2;
  ASSERT_EQ(utilization(gpu, sample, &samples, 0), NVML_SUCCESS);
  ASSERT_EQ(samples, 1u);
  EXPECT_EQ(sample[0].pid, 4242u);
  EXPECT_EQ(sample[0].smUtil, 60u);
  EXPECT_EQ(sample[0].memUtil, 25u);
  EXPECT_GT(sample[0].timeStamp, 0u);
  samples = 2;
  EXPECT_EQ(utilization(gpu, sample, &samples, sample[0].timeStamp + 1'000'000'000ULL), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(samples, 0u);
  // GPU 0 runs nothing: no samples.
  nvmlDevice_t idle = nullptr;
  ASSERT_EQ(by_index(0, &idle), NVML_SUCCESS);
  samples = 2;
  EXPECT_EQ(utilization(idle, sample, &samples, 0), NVML_ERROR_NOT_FOUND);
  EXPECT_EQ(utilization(idle, sample, nullptr, 0), NVML_ERROR_INVALID_ARGUMENT);

  EXPECT_EQ(lib.get<nvmlReturn_t (*)()>("nvmlShutdown")(), NVML_SUCCESS);
  EXPECT_EQ(count_fn(&count), NVML_ERROR_UNINITIALIZED);
}

TEST(SimExports, ProcessUtilizationIsNotSupportedInMigMode) {
  Node node("A100-80GB", {"--mig"});
  Library lib;
  ASSERT_EQ(lib.get<nvmlReturn_t (*)()>("nvmlInit")(), NVML_SUCCESS);
  nvmlDevice_t gpu = nullptr;
  ASSERT_EQ(lib.get<nvmlReturn_t (*)(unsigned int, nvmlDevice_t*)>("nvmlDeviceGetHandleByIndex")(0, &gpu),
            NVML_SUCCESS);
  unsigned int samples = 0;
  EXPECT_EQ(lib.get<nvmlReturn_t (*)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned int*,
                                     unsigned long long)>("nvmlDeviceGetProcessUtilization")(gpu, nullptr, &samples, 0),
            NVML_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(lib.get<nvmlReturn_t (*)()>("nvmlShutdown")(), NVML_SUCCESS);
}

}  // namespace
