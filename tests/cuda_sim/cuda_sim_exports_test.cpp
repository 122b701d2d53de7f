// The simulated libcuda.so.1 as an outside client sees it (HAMi-core's
// interposer, the CUDA runtime, a framework at start): dlopen the built
// library, dlsym each entry point by its exported name, call it. Nothing of
// ours is included: the types, prototypes and enum values below are typed
// from NVIDIA's cuda.h, as a client compiled against it would have them.
// Each case runs in a forked child, which the simulator starts afresh, with
// its own TESSERA_SIM_CUDA_DEVICES.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <link.h>
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <string>

namespace {

// ---- from NVIDIA's cuda.h (CUDA 13.0), as a client declares them

using CUresult = int;
using CUdevice = int;
using CUcontext = struct CUctx_st*;
using CUdeviceptr = unsigned long long;
constexpr CUresult CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_NOT_INITIALIZED = 3,
                   CUDA_ERROR_INVALID_DEVICE = 101, CUDA_ERROR_INVALID_CONTEXT = 201;

// CUdevice_attribute_enum values, cuda.h (CUDA 12.6 for 1-135, CUDA 13.0 for 136-147 and MAX = 148).
enum Attribute : int {
  MAX_THREADS_PER_BLOCK = 1,
  MAX_BLOCK_DIM_X = 2,
  MAX_BLOCK_DIM_Y = 3,
  MAX_BLOCK_DIM_Z = 4,
  MAX_GRID_DIM_X = 5,
  MAX_GRID_DIM_Y = 6,
  MAX_GRID_DIM_Z = 7,
  MAX_SHARED_MEMORY_PER_BLOCK = 8,
  TOTAL_CONSTANT_MEMORY = 9,
  WARP_SIZE = 10,
  MAX_REGISTERS_PER_BLOCK = 12,
  CLOCK_RATE = 13,
  MULTIPROCESSOR_COUNT = 16,
  INTEGRATED = 18,
  CAN_MAP_HOST_MEMORY = 19,
  COMPUTE_MODE = 20,
  ECC_ENABLED = 32,
  PCI_BUS_ID = 33,
  PCI_DEVICE_ID = 34,
  TCC_DRIVER = 35,
  MEMORY_CLOCK_RATE = 36,
  GLOBAL_MEMORY_BUS_WIDTH = 37,
  L2_CACHE_SIZE = 38,
  MAX_THREADS_PER_MULTIPROCESSOR = 39,
  ASYNC_ENGINE_COUNT = 40,
  UNIFIED_ADDRESSING = 41,
  PCI_DOMAIN_ID = 50,
  COMPUTE_CAPABILITY_MAJOR = 75,
  COMPUTE_CAPABILITY_MINOR = 76,
  MANAGED_MEMORY = 83,
  CONCURRENT_MANAGED_ACCESS = 89,
  MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
  MEMORY_POOLS_SUPPORTED = 115,
  GPU_PCI_DEVICE_ID = 139,
  ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED = 147,
  ATTRIBUTE_MAX = 148,
};

using Init = CUresult(unsigned int);
using DeviceGet = CUresult(CUdevice*, int);
using DeviceGetCount = CUresult(int*);
using DeviceGetAttribute = CUresult(int*, int, CUdevice);
using DeviceGetName = CUresult(char*, int, CUdevice);
using DeviceTotalMem32 = CUresult(unsigned int*, CUdevice);  // cuDeviceTotalMem: the 2000 ABI
using DeviceTotalMem = CUresult(std::size_t*, CUdevice);    // cuDeviceTotalMem_v2
using CtxCreate = CUresult(CUcontext*, unsigned int, CUdevice);
using CtxGetDevice = CUresult(CUdevice*);
using CtxGetDeviceV2 = CUresult(CUdevice*, CUcontext);
using MemAlloc32 = CUresult(unsigned int*, unsigned int);
using MemcpyHtoD32 = CUresult(unsigned int, const void*, unsigned int);
using MemFree32 = CUresult(unsigned int);
using GetProcAddressV2 = CUresult(const char*, void**, int, std::uint64_t, int*);

// Every exported name of the functions the simulator simulates, as NVIDIA's
// cuda.h (CUDA 13.0) declares them: the current prototypes, the _ptsz/_ptds
// names its __CUDA_API_PTSZ/__CUDA_API_PTDS macros make, and the older ABIs
// of its __CUDA_API_VERSION_INTERNAL block, which a real libcuda.so.1 exports.
const char* const kCudaHNames[] = {
    "cuInit", "cuDriverGetVersion", "cuDeviceGet", "cuDeviceGetCount", "cuDeviceGetName",
    "cuDeviceGetUuid", "cuDeviceGetUuid_v2", "cuDeviceTotalMem", "cuDeviceTotalMem_v2", "cuDeviceGetAttribute",
    "cuCtxCreate", "cuCtxCreate_v2", "cuCtxCreate_v3", "cuCtxCreate_v4", "cuCtxDestroy", "cuCtxDestroy_v2",
    "cuCtxSetCurrent", "cuCtxGetCurrent", "cuCtxGetDevice", "cuCtxGetDevice_v2", "cuCtxSynchronize",
    "cuCtxSynchronize_v2", "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2",
    "cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2", "cuDevicePrimaryCtxGetState", "cuStreamSynchronize",
    "cuStreamSynchronize_ptsz", "cuLaunchKernel", "cuLaunchKernel_ptsz", "cuMemcpyHtoD", "cuMemcpyHtoD_v2",
    "cuMemcpyHtoD_v2_ptds", "cuGetExportTable", "cuMemGetInfo", "cuMemGetInfo_v2", "cuMemAlloc", "cuMemAlloc_v2",
    "cuMemFree", "cuMemFree_v2", "cuMemAllocPitch", "cuMemAllocPitch_v2", "cuMemAllocManaged", "cuArrayCreate",
    "cuArrayCreate_v2", "cuArray3DCreate", "cuArray3DCreate_v2", "cuArrayDestroy", "cuMipmappedArrayCreate",
    "cuMipmappedArrayDestroy", "cuMemGetAllocationGranularity", "cuMemCreate", "cuMemRelease", "cuMemAddressReserve",
    "cuMemAddressFree", "cuMemMap", "cuMemUnmap", "cuMemSetAccess", "cuMemRetainAllocationHandle",
    "cuMemExportToShareableHandle", "cuMemImportFromShareableHandle", "cuLibraryLoadData", "cuLibraryLoadFromFile",
    "cuLibraryUnload", "cuLibraryGetKernel", "cuDeviceGetDefaultMemPool", "cuDeviceGetMemPool",
    "cuDeviceSetMemPool", "cuMemGetDefaultMemPool", "cuMemGetMemPool", "cuMemSetMemPool", "cuMemPoolCreate", "cuMemPoolDestroy", "cuMemPoolTrimTo", "cuMemPoolSetAttribute",
    "cuMemPoolGetAttribute", "cuMemAllocAsync", "cuMemAllocAsync_ptsz", "cuMemAllocFromPoolAsync",
    "cuMemAllocFromPoolAsync_ptsz", "cuMemFreeAsync", "cuMemFreeAsync_ptsz", "cuGetErrorName", "cuGetErrorString",
    "cuGetProcAddress", "cuGetProcAddress_v2",
};

// ---- the client side: dlopen, dlsym, a fresh process per case

void* library() {
  static void* h = [] {
    void* p = dlopen(TESSERA_CUDA_SIM_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!p) ADD_FAILURE() << dlerror();
    return p;
  }();
  return h;
}

template <class F>
F* sym(const char* name) {
  auto* f = reinterpret_cast<F*>(dlsym(library(), name));
  if (!f) ADD_FAILURE() << name << " does not resolve";
  return f;
}

// Runs `body` in a forked child with TESSERA_SIM_CUDA_DEVICES = `devices`
// (nullptr: unset); fails if the child's expectations failed.
void in_child(const char* devices, const std::function<void()>& body) {
  std::fflush(stdout);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (devices) setenv("TESSERA_SIM_CUDA_DEVICES", devices, 1);
    else unsetenv("TESSERA_SIM_CUDA_DEVICES");
    unsetenv("TESSERA_SIM_CUDA_DIR");
    body();
    std::fflush(stdout);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

constexpr std::uint64_t kGiB = 1ULL << 30;
const std::string kA100 = "GPU-a1000000-0000-4000-8000-000000000080";
const std::string kH200 = "GPU-42000000-0000-4000-8000-000000000141";
const std::string kB200 = "GPU-b2000000-0000-4000-8000-000000000180";
const std::string kA30 = "GPU-a3000000-0000-4000-8000-000000000024";
// Four models, one of them small enough for the 32-bit cuDeviceTotalMem.
const std::string kDevices =
    kA100 + ":80G:A100-SXM4-80GB," + kH200 + ":143771M:NVIDIA H200," + kB200 + ":3G:b200-180gb," + kA30 + ":24G:A30";

int attribute(int attr, CUdevice dev) {
  int v = -12345;
  EXPECT_EQ(sym<DeviceGetAttribute>("cuDeviceGetAttribute")(&v, attr, dev), CUDA_SUCCESS) << attr << " on " << dev;
  return v;
}

// ---- (a) every name of cuda.h's list resolves, each to its own function

TEST(CudaSimExports, EveryCudaHNameOfTheSimulatedFunctionsResolves) {
  void* h = library();
  ASSERT_NE(h, nullptr);
  Dl_info self{};
  ASSERT_NE(dladdr(dlsym(h, "cuInit"), &self), 0);
  std::set<void*> seen;
  for (const char* name : kCudaHNames) {
    void* f = dlsym(h, name);
    ASSERT_NE(f, nullptr) << name << " is in cuda.h but not exported";
    Dl_info where{};
    ASSERT_NE(dladdr(f, &where), 0) << name;
    EXPECT_EQ(where.dli_fbase, self.dli_fbase) << name << " resolves outside the simulator";
    EXPECT_STREQ(where.dli_sname, name) << "another function answers for " << name;
    EXPECT_TRUE(seen.insert(f).second) << name << " shares its code with another variant";
  }
}

// What the runtime and a framework ask first: through cuGetProcAddress_v2
// too, each name gives the exported function of the ABI its version names.
TEST(CudaSimExports, CuGetProcAddressHandsOutTheNewEntryPoints) {
  in_child(nullptr, [] {
    auto* gpa = sym<GetProcAddressV2>("cuGetProcAddress_v2");
    ASSERT_NE(gpa, nullptr);
    const struct {
      const char* base;
      int version;
      const char* exported;
    } rows[] = {
        {"cuDeviceGetAttribute", 2000, "cuDeviceGetAttribute"}, {"cuDeviceGetAttribute", 13000, "cuDeviceGetAttribute"},
        {"cuDeviceGetName", 13000, "cuDeviceGetName"},          {"cuDeviceTotalMem", 2000, "cuDeviceTotalMem"},
        {"cuDeviceTotalMem", 3020, "cuDeviceTotalMem_v2"},      {"cuCtxCreate", 2000, "cuCtxCreate"},
        {"cuCtxCreate", 3020, "cuCtxCreate_v2"},                {"cuCtxCreate", 13000, "cuCtxCreate_v4"},
        {"cuCtxGetDevice", 12090, "cuCtxGetDevice"},            {"cuCtxGetDevice", 13000, "cuCtxGetDevice_v2"},
        {"cuMemcpyHtoD", 2000, "cuMemcpyHtoD"},                 {"cuMemcpyHtoD", 3020, "cuMemcpyHtoD_v2"},
        {"cuMemAlloc", 2000, "cuMemAlloc"},                     {"cuMemGetInfo", 2000, "cuMemGetInfo"},
        {"cuCtxDestroy", 2000, "cuCtxDestroy"},                 {"cuDevicePrimaryCtxRelease", 7000, "cuDevicePrimaryCtxRelease"},
    };
    for (const auto& r : rows) {
      void* fn = nullptr;
      int status = -1;
      EXPECT_EQ(gpa(r.base, &fn, r.version, 0, &status), CUDA_SUCCESS) << r.base;
      EXPECT_EQ(status, 0) << r.base << " at " << r.version;  // CU_GET_PROC_ADDRESS_SUCCESS
      EXPECT_EQ(fn, dlsym(library(), r.exported)) << r.base << " at " << r.version << " wants " << r.exported;
    }
    // The 2000 ABI has no per-thread twin: the per-thread flag gives it as it is.
    void* fn = nullptr;
    EXPECT_EQ(gpa("cuMemcpyHtoD", &fn, 3010, 2, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(fn, dlsym(library(), "cuMemcpyHtoD"));
  });
}

// ---- (b) the device queries answer as NVIDIA's driver documents

TEST(CudaSimExports, BeforeCuInitEveryDeviceQueryIsNotInitialized) {
  in_child(kDevices.c_str(), [] {
    int v = 0;
    CUdevice dev = -1;
    char name[64];
    unsigned int total32 = 0;
    EXPECT_EQ(sym<DeviceGet>("cuDeviceGet")(&dev, 0), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(sym<DeviceGetCount>("cuDeviceGetCount")(&v), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(sym<DeviceGetAttribute>("cuDeviceGetAttribute")(&v, COMPUTE_CAPABILITY_MAJOR, 0),
              CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(sym<DeviceGetAttribute>("cuDeviceGetAttribute")(nullptr, 0, 99), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(sym<DeviceGetName>("cuDeviceGetName")(name, sizeof name, 0), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(sym<DeviceTotalMem32>("cuDeviceTotalMem")(&total32, 0), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(sym<DeviceTotalMem32>("cuDeviceTotalMem")(nullptr, 0), CUDA_ERROR_NOT_INITIALIZED);
  });
}

TEST(CudaSimExports, DevicesAnswerForTheirModel) {
  in_child(kDevices.c_str(), [] {
    ASSERT_EQ(sym<Init>("cuInit")(0), CUDA_SUCCESS);
    int n = 0;
    ASSERT_EQ(sym<DeviceGetCount>("cuDeviceGetCount")(&n), CUDA_SUCCESS);
    ASSERT_EQ(n, 4);
    const struct {
      const char* name;
      int major, minor, sms;
    } want[] = {
        {"NVIDIA A100-SXM4-80GB", 8, 0, 108},  // Ampere whitepaper: 108 SMs
        {"NVIDIA H200", 9, 0, 132},            // GH100 as the H100 SXM5: 132 SMs
        {"NVIDIA B200", 10, 0, 148},
        {"NVIDIA A30", 8, 0, 56},
    };
    for (int i = 0; i < n; ++i) {
      CUdevice dev = -1;
      ASSERT_EQ(sym<DeviceGet>("cuDeviceGet")(&dev, i), CUDA_SUCCESS);
      EXPECT_EQ(dev, i);
      char name[256] = {};
      EXPECT_EQ(sym<DeviceGetName>("cuDeviceGetName")(name, sizeof name, dev), CUDA_SUCCESS);
      EXPECT_STREQ(name, want[i].name);
      EXPECT_EQ(attribute(COMPUTE_CAPABILITY_MAJOR, dev), want[i].major) << want[i].name;
      EXPECT_EQ(attribute(COMPUTE_CAPABILITY_MINOR, dev), want[i].minor) << want[i].name;
      EXPECT_EQ(attribute(MULTIPROCESSOR_COUNT, dev), want[i].sms) << want[i].name;
      // What cudaGetDeviceProperties asks: every attribute of the enum answers.
      for (int a = 1; a < ATTRIBUTE_MAX; ++a) {
        int v = 0;
        EXPECT_EQ(sym<DeviceGetAttribute>("cuDeviceGetAttribute")(&v, a, dev), CUDA_SUCCESS)
            << "attribute " << a << " on " << want[i].name;
      }
    }
    // The A100's per-architecture limits (programming guide, compute capability 8.0).
    EXPECT_EQ(attribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 0), 163 * 1024);
    EXPECT_EQ(attribute(MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 1), 227 * 1024);  // 9.0
    EXPECT_EQ(attribute(L2_CACHE_SIZE, 0), 40 << 20);
    EXPECT_EQ(attribute(GPU_PCI_DEVICE_ID, 1), 0x233510DE);
  });
}

TEST(CudaSimExports, WhatTheRuntimeAndFrameworksAskAtStart) {
  in_child(nullptr, [] {  // the default device: an 80 GiB H100-SXM5-80GB
    ASSERT_EQ(sym<Init>("cuInit")(0), CUDA_SUCCESS);
    char name[64] = {};
    EXPECT_EQ(sym<DeviceGetName>("cuDeviceGetName")(name, sizeof name, 0), CUDA_SUCCESS);
    EXPECT_STREQ(name, "NVIDIA H100 80GB HBM3");
    const std::pair<int, int> want[] = {
        {COMPUTE_CAPABILITY_MAJOR, 9}, {COMPUTE_CAPABILITY_MINOR, 0},
        {MULTIPROCESSOR_COUNT, 132}, {MAX_THREADS_PER_BLOCK, 1024},
        {WARP_SIZE, 32}, {MAX_SHARED_MEMORY_PER_BLOCK, 49152},
        {MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448}, {CLOCK_RATE, 1980000},
        {MEMORY_CLOCK_RATE, 2619000}, {GLOBAL_MEMORY_BUS_WIDTH, 5120},
        {L2_CACHE_SIZE, 52428800}, {MAX_THREADS_PER_MULTIPROCESSOR, 2048},
        {UNIFIED_ADDRESSING, 1}, {MANAGED_MEMORY, 1},
        {CONCURRENT_MANAGED_ACCESS, 1}, {MEMORY_POOLS_SUPPORTED, 1},
        {VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1}, {PCI_BUS_ID, 0x07},
        {PCI_DEVICE_ID, 0}, {PCI_DOMAIN_ID, 0},
        {INTEGRATED, 0}, {COMPUTE_MODE, 0},  // CU_COMPUTEMODE_DEFAULT
        {ECC_ENABLED, 1}, {TCC_DRIVER, 0},
        {ASYNC_ENGINE_COUNT, 3}, {CAN_MAP_HOST_MEMORY, 1},
        {MAX_GRID_DIM_X, INT_MAX}, {MAX_GRID_DIM_Y, 65535},
        {MAX_GRID_DIM_Z, 65535}, {MAX_BLOCK_DIM_X, 1024},
        {MAX_BLOCK_DIM_Y, 1024}, {MAX_BLOCK_DIM_Z, 64},
        {TOTAL_CONSTANT_MEMORY, 65536}, {MAX_REGISTERS_PER_BLOCK, 65536},
        {GPU_PCI_DEVICE_ID, 0x233010DE}, {ONLY_PARTIAL_HOST_NATIVE_ATOMIC_SUPPORTED, 0},
    };
    for (auto [attr, value] : want) EXPECT_EQ(attribute(attr, 0), value) << "attribute " << attr;
  });
}

TEST(CudaSimExports, AttributeAndDeviceErrors) {
  in_child(kDevices.c_str(), [] {
    ASSERT_EQ(sym<Init>("cuInit")(0), CUDA_SUCCESS);
    auto* get = sym<DeviceGetAttribute>("cuDeviceGetAttribute");
    int v = 77;
    // Outside CUdevice_attribute (1 ... 147): INVALID_VALUE, the output untouched.
    for (int bad : {0, static_cast<int>(ATTRIBUTE_MAX), ATTRIBUTE_MAX + 1, -1, 100000, INT_MIN}) {
      EXPECT_EQ(get(&v, bad, 0), CUDA_ERROR_INVALID_VALUE) << bad;
      EXPECT_EQ(v, 77) << bad;
    }
    EXPECT_EQ(get(nullptr, WARP_SIZE, 0), CUDA_ERROR_INVALID_VALUE);
    for (CUdevice bad : {4, -1, 64, INT_MAX}) {
      EXPECT_EQ(get(&v, WARP_SIZE, bad), CUDA_ERROR_INVALID_DEVICE) << bad;
      CUdevice dev = 0;
      EXPECT_EQ(sym<DeviceGet>("cuDeviceGet")(&dev, bad), CUDA_ERROR_INVALID_DEVICE) << bad;
      char name[16];
      EXPECT_EQ(sym<DeviceGetName>("cuDeviceGetName")(name, sizeof name, bad), CUDA_ERROR_INVALID_DEVICE) << bad;
      unsigned int total32 = 0;
      EXPECT_EQ(sym<DeviceTotalMem32>("cuDeviceTotalMem")(&total32, bad), CUDA_ERROR_INVALID_DEVICE) << bad;
    }
    EXPECT_EQ(v, 77);
    char name[16];
    EXPECT_EQ(sym<DeviceGetName>("cuDeviceGetName")(nullptr, 16, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(sym<DeviceGetName>("cuDeviceGetName")(name, 0, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(sym<DeviceGetName>("cuDeviceGetName")(name, 12, 0), CUDA_SUCCESS);
    EXPECT_STREQ(name, "NVIDIA A100");  // 11 characters and the NUL
    EXPECT_EQ(sym<DeviceTotalMem32>("cuDeviceTotalMem")(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(sym<DeviceGet>("cuDeviceGet")(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
  });
}

// cuDeviceTotalMem keeps the 2000 ABI: unsigned int bytes, never a size_t
// store (the word after it is untouched). Past 4 GiB the simulator saturates.
TEST(CudaSimExports, CuDeviceTotalMemKeepsThe32BitAbi) {
  in_child(kDevices.c_str(), [] {
    ASSERT_EQ(sym<Init>("cuInit")(0), CUDA_SUCCESS);
    unsigned int words[2] = {0, 0xA5A5A5A5u};
    EXPECT_EQ(sym<DeviceTotalMem32>("cuDeviceTotalMem")(&words[0], 2), CUDA_SUCCESS);  // the 3 GiB B200
    EXPECT_EQ(words[0], 3 * kGiB);
    EXPECT_EQ(words[1], 0xA5A5A5A5u);
    EXPECT_EQ(sym<DeviceTotalMem32>("cuDeviceTotalMem")(&words[0], 0), CUDA_SUCCESS);  // 80 GiB
    EXPECT_EQ(words[0], UINT_MAX);
    EXPECT_EQ(words[1], 0xA5A5A5A5u);
    std::size_t total = 0;
    EXPECT_EQ(sym<DeviceTotalMem>("cuDeviceTotalMem_v2")(&total, 0), CUDA_SUCCESS);
    EXPECT_EQ(total, 80 * kGiB);
    EXPECT_EQ(sym<DeviceTotalMem>("cuDeviceTotalMem_v2")(&total, 1), CUDA_SUCCESS);
    EXPECT_EQ(total, 143771ULL << 20);  // SIZE is the device's memory, whatever the model
  });
}

// The older names work with their own ABI and count as their own functions.
TEST(CudaSimExports, TheOlderNamesAnswerWithTheirOwnAbi) {
  in_child(kDevices.c_str(), [] {
    ASSERT_EQ(sym<Init>("cuInit")(0), CUDA_SUCCESS);
    CUcontext ctx = nullptr;
    ASSERT_EQ(sym<CtxCreate>("cuCtxCreate")(&ctx, 0, 2), CUDA_SUCCESS);
    ASSERT_NE(ctx, nullptr);
    CUdevice dev = -1;
    EXPECT_EQ(sym<CtxGetDevice>("cuCtxGetDevice")(&dev), CUDA_SUCCESS);
    EXPECT_EQ(dev, 2);
    CUcontext other = nullptr;
    ASSERT_EQ(sym<CtxCreate>("cuCtxCreate_v2")(&other, 0, 1), CUDA_SUCCESS);  // now current
    dev = -1;
    EXPECT_EQ(sym<CtxGetDeviceV2>("cuCtxGetDevice_v2")(&dev, ctx), CUDA_SUCCESS);  // the named context
    EXPECT_EQ(dev, 2);
    EXPECT_EQ(sym<CtxGetDeviceV2>("cuCtxGetDevice_v2")(&dev, nullptr), CUDA_SUCCESS);  // NULL: the current one
    EXPECT_EQ(dev, 1);
    EXPECT_EQ(sym<CtxGetDeviceV2>("cuCtxGetDevice_v2")(nullptr, ctx), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(sym<CUresult(CUcontext)>("cuCtxDestroy")(other), CUDA_SUCCESS);
    EXPECT_EQ(sym<CtxGetDeviceV2>("cuCtxGetDevice_v2")(&dev, other), CUDA_ERROR_INVALID_CONTEXT);
    // A 32-bit allocation, copied into with the 2000 cuMemcpyHtoD and freed with cuMemFree.
    EXPECT_EQ(sym<CUresult(CUcontext)>("cuCtxSetCurrent")(ctx), CUDA_SUCCESS);
    unsigned int p = 0;
    ASSERT_EQ(sym<MemAlloc32>("cuMemAlloc")(&p, 4096), CUDA_SUCCESS);
    EXPECT_NE(p, 0u);
    char host[4096] = {};
    EXPECT_EQ(sym<MemcpyHtoD32>("cuMemcpyHtoD")(p, host, sizeof host), CUDA_SUCCESS);
    EXPECT_EQ(sym<MemcpyHtoD32>("cuMemcpyHtoD")(p + 1, host, sizeof host), CUDA_ERROR_INVALID_VALUE);  // past the end
    EXPECT_EQ(sym<MemFree32>("cuMemFree")(p), CUDA_SUCCESS);
    // Each name is its own counted function.
    auto* calls = sym<CUresult(const char*, unsigned long long*)>("tesseraCudaSimCalls");
    ASSERT_NE(calls, nullptr);
    for (auto [fn, want] : {std::pair{"cuCtxCreate", 1ULL}, std::pair{"cuCtxCreate_v2", 1ULL},
                            std::pair{"cuCtxGetDevice", 1ULL}, std::pair{"cuCtxGetDevice_v2", 4ULL},
                            std::pair{"cuMemcpyHtoD", 2ULL}, std::pair{"cuMemcpyHtoD_v2", 0ULL},
                            std::pair{"cuDeviceGetAttribute", 0ULL}}) {
      unsigned long long count = ~0ULL;
      EXPECT_EQ(calls(fn, &count), CUDA_SUCCESS) << fn;
      EXPECT_EQ(count, want) << fn;
    }
  });
}

// As NVIDIA's driver names itself (DT_SONAME libcuda.so.1): ldconfig then
// links libcuda.so.1 to the versioned file a driver install leaves.
TEST(CudaSimExports, TheLibraryNamesItselfLibcudaSo1) {
  link_map* map = nullptr;
  ASSERT_EQ(dlinfo(library(), RTLD_DI_LINKMAP, &map), 0) << dlerror();
  const char* strtab = nullptr;
  std::uint64_t soname = 0;
  bool named = false;
  for (const ElfW(Dyn)* d = map->l_ld; d->d_tag != DT_NULL; ++d) {
    if (d->d_tag == DT_STRTAB) strtab = reinterpret_cast<const char*>(d->d_un.d_ptr);
    if (d->d_tag == DT_SONAME) {
      soname = d->d_un.d_val;
      named = true;
    }
  }
  ASSERT_TRUE(named) << "no DT_SONAME";
  ASSERT_NE(strtab, nullptr);
  EXPECT_STREQ(strtab + soname, "libcuda.so.1");
}

TEST(CudaSimExports, AnUnknownModelRefusesInit) {
  for (const std::string& bad : {kA100 + ":80G:A200", kA100 + ":80G:", kA100 + ":80G:H100:extra"}) {
    in_child(bad.c_str(), [&] {
      EXPECT_EQ(sym<Init>("cuInit")(0), 999) << bad;  // CUDA_ERROR_UNKNOWN: a broken simulator configuration
      int n = 0;
      EXPECT_EQ(sym<DeviceGetCount>("cuDeviceGetCount")(&n), CUDA_ERROR_NOT_INITIALIZED) << bad;
    });
  }
  // Keys and NVIDIA names, any case, with or without "NVIDIA ".
  for (const char* model : {"H100-SXM5-80GB", "NVIDIA H100 80GB HBM3", "h100 80gb hbm3"}) {
    const std::string devices = kA100 + ":1G:" + model;
    in_child(devices.c_str(), [&] {
      ASSERT_EQ(sym<Init>("cuInit")(0), CUDA_SUCCESS) << model;
      EXPECT_EQ(attribute(MULTIPROCESSOR_COUNT, 0), 132) << model;
    });
  }
}

}  // namespace
