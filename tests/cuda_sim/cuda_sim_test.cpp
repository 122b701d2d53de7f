// The simulated CUDA driver (sim/cuda) through the paths a CUDA program
// uses: dlopen(RTLD_NOW | RTLD_LOCAL), dlsym of exported names, and
// cuGetProcAddress/_v2 as the runtime calls it. Every case runs in a forked
// child with its own environment; the simulator starts a forked child afresh,
// so each case configures the driver at its own cuInit.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cuda_api.hpp"  // the simulator's own declarations: types only, nothing is linked
#include "support/run.hpp"

namespace {

constexpr std::uint64_t kMiB = 1ULL << 20, kGiB = 1ULL << 30;
constexpr const char* kUuid0 = "GPU-11111111-2222-3333-4444-555555555555";
constexpr const char* kUuid1 = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";

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
  return reinterpret_cast<F*>(dlsym(library(), name));
}

// The entry points by their exported names, as a program linked against
// libcuda.so.1 (or dlsym-ing it) gets them.
struct Api {
#define TESSERA_API(name) decltype(&::name) name = sym<decltype(::name)>(#name);
  TESSERA_API(cuInit)
  TESSERA_API(cuDriverGetVersion)
  TESSERA_API(cuDeviceGetCount)
  TESSERA_API(cuDeviceGet)
  TESSERA_API(cuDeviceGetName)
  TESSERA_API(cuDeviceGetUuid)
  TESSERA_API(cuDeviceGetUuid_v2)
  TESSERA_API(cuDeviceTotalMem)
  TESSERA_API(cuDeviceTotalMem_v2)
  TESSERA_API(cuCtxCreate_v2)
  TESSERA_API(cuCtxCreate_v3)
  TESSERA_API(cuCtxCreate_v4)
  TESSERA_API(cuCtxDestroy)
  TESSERA_API(cuCtxDestroy_v2)
  TESSERA_API(cuCtxSetCurrent)
  TESSERA_API(cuCtxGetCurrent)
  TESSERA_API(cuCtxGetDevice)
  TESSERA_API(cuDevicePrimaryCtxRetain)
  TESSERA_API(cuDevicePrimaryCtxRelease)
  TESSERA_API(cuDevicePrimaryCtxRelease_v2)
  TESSERA_API(cuMemGetInfo)
  TESSERA_API(cuMemGetInfo_v2)
  TESSERA_API(cuMemAlloc)
  TESSERA_API(cuMemAlloc_v2)
  TESSERA_API(cuMemFree)
  TESSERA_API(cuMemFree_v2)
  TESSERA_API(cuMemAllocPitch)
  TESSERA_API(cuMemAllocPitch_v2)
  TESSERA_API(cuGetErrorName)
  TESSERA_API(cuGetErrorString)
  TESSERA_API(cuGetProcAddress)
  TESSERA_API(cuGetProcAddress_v2)
  TESSERA_API(tesseraCudaSimUsage)
  TESSERA_API(tesseraCudaSimCalls)
  TESSERA_API(cuMemAllocManaged)
  TESSERA_API(cuDevicePrimaryCtxGetState)
  TESSERA_API(cuDevicePrimaryCtxReset)
  TESSERA_API(cuDevicePrimaryCtxReset_v2)
  TESSERA_API(cuCtxSynchronize)
  TESSERA_API(cuCtxSynchronize_v2)
  TESSERA_API(cuStreamSynchronize)
  TESSERA_API(cuStreamSynchronize_ptsz)
  TESSERA_API(cuLaunchKernel)
  TESSERA_API(cuLaunchKernel_ptsz)
  TESSERA_API(cuMemcpyHtoD_v2)
  TESSERA_API(cuMemcpyHtoD_v2_ptds)
  TESSERA_API(cuGetExportTable)
  TESSERA_API(cuMemGetAllocationGranularity)
  TESSERA_API(cuMemCreate)
  TESSERA_API(cuMemRelease)
  TESSERA_API(cuMemAddressReserve)
  TESSERA_API(cuMemAddressFree)
  TESSERA_API(cuMemMap)
  TESSERA_API(cuMemUnmap)
  TESSERA_API(cuMemSetAccess)
  TESSERA_API(cuMemRetainAllocationHandle)
  TESSERA_API(cuMemExportToShareableHandle)
  TESSERA_API(cuMemImportFromShareableHandle)
  TESSERA_API(cuLibraryLoadData)
  TESSERA_API(cuLibraryLoadFromFile)
  TESSERA_API(cuLibraryUnload)
  TESSERA_API(cuLibraryGetKernel)
  TESSERA_API(cuDeviceGetDefaultMemPool)
  TESSERA_API(cuDeviceGetMemPool)
  TESSERA_API(cuDeviceSetMemPool)
  TESSERA_API(cuMemGetDefaultMemPool)
  TESSERA_API(cuMemGetMemPool)
  TESSERA_API(cuMemSetMemPool)
  TESSERA_API(cuMemPoolCreate)
  TESSERA_API(cuMemPoolDestroy)
  TESSERA_API(cuMemPoolTrimTo)
  TESSERA_API(cuMemPoolSetAttribute)
  TESSERA_API(cuMemPoolGetAttribute)
  TESSERA_API(cuMemAllocAsync)
  TESSERA_API(cuMemAllocAsync_ptsz)
  TESSERA_API(cuMemAllocFromPoolAsync)
  TESSERA_API(cuMemAllocFromPoolAsync_ptsz)
  TESSERA_API(cuMemFreeAsync)
  TESSERA_API(cuMemFreeAsync_ptsz)
  TESSERA_API(cuArrayCreate)
  TESSERA_API(cuArrayCreate_v2)
  TESSERA_API(cuArray3DCreate)
  TESSERA_API(cuArray3DCreate_v2)
  TESSERA_API(cuArrayDestroy)
  TESSERA_API(cuMipmappedArrayCreate)
  TESSERA_API(cuMipmappedArrayDestroy)
  TESSERA_API(cuCtxPushCurrent_v2)
  TESSERA_API(cuCtxPopCurrent_v2)
  TESSERA_API(cuModuleLoad)
  TESSERA_API(cuModuleLoadData)
  TESSERA_API(cuModuleUnload)
  TESSERA_API(cuStreamCreate)
  TESSERA_API(cuStreamDestroy_v2)
  TESSERA_API(cuStreamGetCtx)
  TESSERA_API(cuStreamGetDevice)
  TESSERA_API(cuStreamBeginCapture_v2)
  TESSERA_API(cuStreamEndCapture)
  TESSERA_API(cuStreamIsCapturing)
  TESSERA_API(cuGraphCreate)
  TESSERA_API(cuGraphDestroy)
  TESSERA_API(cuGraphAddMemAllocNode)
  TESSERA_API(cuGraphAddMemFreeNode)
  TESSERA_API(cuGraphGetNodes)
  TESSERA_API(cuGraphNodeGetType)
  TESSERA_API(cuGraphMemAllocNodeGetParams)
  TESSERA_API(cuGraphInstantiateWithFlags)
  TESSERA_API(cuGraphInstantiateWithParams)
  TESSERA_API(cuGraphUpload)
  TESSERA_API(cuGraphLaunch)
  TESSERA_API(cuGraphLaunch_ptsz)
  TESSERA_API(cuGraphExecDestroy)
  TESSERA_API(cuDeviceGetGraphMemAttribute)
  TESSERA_API(cuDeviceGraphMemTrim)
#undef TESSERA_API
};

const Api& api() {
  static Api a;
  return a;
}

struct Env {
  const char* devices = nullptr;  // TESSERA_SIM_CUDA_DEVICES (nullptr: unset)
  const char* dir = nullptr;      // TESSERA_SIM_CUDA_DIR (nullptr: unset)
};

void set_env(const Env& env) {
  if (env.devices) setenv("TESSERA_SIM_CUDA_DEVICES", env.devices, 1);
  else unsetenv("TESSERA_SIM_CUDA_DEVICES");
  if (env.dir) setenv("TESSERA_SIM_CUDA_DIR", env.dir, 1);
  else unsetenv("TESSERA_SIM_CUDA_DIR");
}

// Forks; the child sets `env`, runs `body` and exits 1 if any expectation failed.
pid_t spawn(const Env& env, const std::function<void()>& body) {
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    set_env(env);
    body();
    std::fflush(stdout);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  return pid;
}

void expect_exit_ok(pid_t pid) {
  ASSERT_GT(pid, 0);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

void in_child(const Env& env, const std::function<void()>& body) { expect_exit_ok(spawn(env, body)); }

std::string devices2() { return std::string(kUuid0) + ":1G," + kUuid1 + ":2048M"; }

// A context on `dev`, current to the calling thread.
CUcontext context(CUdevice dev = 0) {
  CUcontext c = nullptr;
  EXPECT_EQ(api().cuCtxCreate_v2(&c, 0, dev), CUDA_SUCCESS);
  return c;
}

std::uint64_t free_now() {
  std::size_t f = 0, t = 0;
  EXPECT_EQ(api().cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
  return f;
}

// One byte over a pipe: the only sequencing between processes.
void send(int fd) { ASSERT_EQ(write(fd, "x", 1), 1); }
void receive(int fd) {
  char c = 0;
  ASSERT_EQ(read(fd, &c, 1), 1);
}

// ---------------------------------------------------------------- init

TEST(CudaSimInit, EverythingButVersionErrorsAndLookupNeedsCuInit) {
  in_child({}, [] {
    const Api& a = api();
    int n = 0;
    CUdevice dev = 0;
    CUcontext ctx = nullptr;
    CUdeviceptr p = 0;
    std::size_t f = 0, t = 0;
    char name[64];
    CUuuid uuid;
    // [CH] cuInit: before it, every driver call returns CUDA_ERROR_NOT_INITIALIZED.
    EXPECT_EQ(a.cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(a.cuDeviceGet(&dev, 0), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(a.cuDeviceGetName(name, sizeof name, 0), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(a.cuDeviceGetUuid_v2(&uuid, 0), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(a.cuDeviceTotalMem_v2(&t, 0), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(a.cuCtxCreate_v2(&ctx, 0, 0), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(a.cuCtxGetCurrent(&ctx), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(a.cuMemAlloc_v2(&p, 1), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(a.cuMemGetInfo_v2(&f, &t), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(a.tesseraCudaSimUsage(0, nullptr, nullptr, nullptr), CUDA_ERROR_NOT_INITIALIZED);
    // These answer before cuInit: the runtime finds cuInit itself through cuGetProcAddress.
    int version = 0;
    EXPECT_EQ(a.cuDriverGetVersion(&version), CUDA_SUCCESS);
    EXPECT_EQ(version, 13000);
    EXPECT_EQ(a.cuDriverGetVersion(nullptr), CUDA_ERROR_INVALID_VALUE);
    void* fn = nullptr;
    EXPECT_EQ(a.cuGetProcAddress_v2("cuInit", &fn, 13000, 0, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(fn, reinterpret_cast<void*>(a.cuInit));
    // [CH] Flags must be 0.
    EXPECT_EQ(a.cuInit(1), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(a.cuInit(0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuInit(0), CUDA_SUCCESS);  // again: still fine
    EXPECT_EQ(a.cuDeviceGetCount(&n), CUDA_SUCCESS);
    EXPECT_EQ(a.cuDeviceGetCount(nullptr), CUDA_ERROR_INVALID_VALUE);
  });
}

TEST(CudaSimInit, DefaultIsOne80GiBDevice) {
  in_child({}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    int n = 0;
    EXPECT_EQ(a.cuDeviceGetCount(&n), CUDA_SUCCESS);
    EXPECT_EQ(n, 1);
    std::size_t total = 0;
    EXPECT_EQ(a.cuDeviceTotalMem_v2(&total, 0), CUDA_SUCCESS);
    EXPECT_EQ(total, 80 * kGiB);
    char name[64] = {};
    EXPECT_EQ(a.cuDeviceGetName(name, sizeof name, 0), CUDA_SUCCESS);
    EXPECT_STREQ(name, "NVIDIA H100 80GB HBM3");  // the default model, H100-SXM5-80GB
    char shortname[8] = {};
    EXPECT_EQ(a.cuDeviceGetName(shortname, sizeof shortname, 0), CUDA_SUCCESS);
    EXPECT_STREQ(shortname, "NVIDIA ");  // [CH] at most len bytes, the NUL included
  });
}

TEST(CudaSimInit, DevicesFromEnvironment) {
  std::string devs = std::string(kUuid0) + ":81920M," + kUuid1 + ":40G";
  in_child({devs.c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    int n = 0;
    EXPECT_EQ(a.cuDeviceGetCount(&n), CUDA_SUCCESS);
    EXPECT_EQ(n, 2);
    CUdevice dev = -1;
    EXPECT_EQ(a.cuDeviceGet(&dev, 1), CUDA_SUCCESS);
    EXPECT_EQ(dev, 1);
    EXPECT_EQ(a.cuDeviceGet(&dev, 2), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_EQ(a.cuDeviceGet(&dev, -1), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_EQ(a.cuDeviceGet(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
    std::size_t total = 0;
    EXPECT_EQ(a.cuDeviceTotalMem_v2(&total, 0), CUDA_SUCCESS);
    EXPECT_EQ(total, 80 * kGiB);
    EXPECT_EQ(a.cuDeviceTotalMem_v2(&total, 1), CUDA_SUCCESS);
    EXPECT_EQ(total, 40 * kGiB);
    EXPECT_EQ(a.cuDeviceTotalMem_v2(&total, 2), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_EQ(a.cuDeviceTotalMem_v2(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
    unsigned int total32 = 0;  // the 2000 ABI: 32 bits, saturated by the simulator
    EXPECT_EQ(a.cuDeviceTotalMem(&total32, 1), CUDA_SUCCESS);
    EXPECT_EQ(total32, UINT_MAX);
    CUuuid u0{}, u1{}, u1v2{};
    EXPECT_EQ(a.cuDeviceGetUuid(&u0, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuDeviceGetUuid(&u1, 1), CUDA_SUCCESS);
    EXPECT_EQ(a.cuDeviceGetUuid_v2(&u1v2, 1), CUDA_SUCCESS);
    const unsigned char want0[16] = {0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x33, 0x33,
                                     0x44, 0x44, 0x55, 0x55, 0x55, 0x55, 0x55, 0x55};
    const unsigned char want1[16] = {0xaa, 0xaa, 0xaa, 0xaa, 0xbb, 0xbb, 0xcc, 0xcc,
                                     0xdd, 0xdd, 0xee, 0xee, 0xee, 0xee, 0xee, 0xee};
    EXPECT_EQ(std::memcmp(u0.bytes, want0, 16), 0);
    EXPECT_EQ(std::memcmp(u1.bytes, want1, 16), 0);
    EXPECT_EQ(std::memcmp(u1v2.bytes, want1, 16), 0);
    EXPECT_EQ(a.cuDeviceGetUuid_v2(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuDeviceGetUuid_v2(&u0, 5), CUDA_ERROR_INVALID_DEVICE);
  });
}

TEST(CudaSimInit, EmptyDeviceListIsNoDevice) {
  in_child({""}, [] { EXPECT_EQ(api().cuInit(0), CUDA_ERROR_NO_DEVICE); });
}

TEST(CudaSimInit, MalformedConfigurationRefusesInit) {
  const std::string u = kUuid0;
  for (std::string bad : {u, u + ":", u + ":0", u + ":12Q", u + ":-5", u + ":1G,", u + ":1G:", u + ":1G:Z100", u + ":1G:H100-SXM5-80GB:x", std::string("GPU-123:1G"), "," + u + ":1G", u + ":1G," + u + ":2G",
                          std::string("XPU-11111111-2222-3333-4444-555555555555:1G"), u + ":99999999999999999999"}) {
    in_child({bad.c_str()}, [&] {
      EXPECT_EQ(api().cuInit(0), CUDA_ERROR_UNKNOWN) << bad;
      int n = 0;
      EXPECT_EQ(api().cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED) << bad;
    });
  }
  in_child({"", "/nonexistent/tessera-cuda-sim"}, [] {
    unsetenv("TESSERA_SIM_CUDA_DEVICES");
    EXPECT_EQ(api().cuInit(0), CUDA_ERROR_UNKNOWN);
  });
}

// ---------------------------------------------------------------- contexts

TEST(CudaSimContext, WithoutACurrentContextMemoryCallsAreInvalidContext) {
  in_child({}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    CUcontext cur = reinterpret_cast<CUcontext>(1);
    EXPECT_EQ(a.cuCtxGetCurrent(&cur), CUDA_SUCCESS);  // [CH] no context: success, NULL
    EXPECT_EQ(cur, nullptr);
    CUdeviceptr p = 0;
    std::size_t f = 0, t = 0;
    CUdevice dev = 0;
    EXPECT_EQ(a.cuMemAlloc_v2(&p, 1), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(a.cuMemGetInfo_v2(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(a.cuCtxGetDevice(&dev), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(a.cuMemFree_v2(0x7f0000000000ULL), CUDA_ERROR_INVALID_CONTEXT);
  });
}

TEST(CudaSimContext, CreateMakesCurrentDestroyPopsAndInvalidates) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    CUcontext c = nullptr, cur = nullptr;
    EXPECT_EQ(a.cuCtxCreate_v2(nullptr, 0, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuCtxCreate_v2(&c, 0, 2), CUDA_ERROR_INVALID_DEVICE);
    ASSERT_EQ(a.cuCtxCreate_v2(&c, 0, 1), CUDA_SUCCESS);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(a.cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    EXPECT_EQ(cur, c);
    CUdevice dev = -1;
    EXPECT_EQ(a.cuCtxGetDevice(&dev), CUDA_SUCCESS);
    EXPECT_EQ(dev, 1);
    EXPECT_EQ(a.cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
    EXPECT_EQ(a.cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    EXPECT_EQ(cur, nullptr);
    EXPECT_EQ(a.cuCtxSetCurrent(c), CUDA_SUCCESS);
    EXPECT_EQ(a.cuCtxDestroy_v2(c), CUDA_SUCCESS);
    EXPECT_EQ(a.cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    EXPECT_EQ(cur, nullptr);
    EXPECT_EQ(a.cuCtxSetCurrent(c), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(a.cuCtxDestroy_v2(c), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(a.cuCtxDestroy_v2(nullptr), CUDA_ERROR_INVALID_VALUE);
    // _v3 and _v4 without their optional parameters create the same kind of context.
    CUcontext c3 = nullptr, c4 = nullptr;
    EXPECT_EQ(a.cuCtxCreate_v3(&c3, nullptr, 0, 0, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuCtxCreate_v4(&c4, nullptr, 0, 1), CUDA_SUCCESS);
    EXPECT_EQ(a.cuCtxGetDevice(&dev), CUDA_SUCCESS);
    EXPECT_EQ(dev, 1);
    EXPECT_NE(c3, c4);
    EXPECT_NE(c3, c);  // a destroyed handle is never handed out again
    EXPECT_NE(c4, c);
    EXPECT_EQ(a.cuCtxDestroy(c4), CUDA_SUCCESS);  // the 2000 ABI is the same call
    EXPECT_EQ(a.cuCtxDestroy_v2(c3), CUDA_SUCCESS);
  });
}

TEST(CudaSimContext, DestroyFreesOnlyThatContextsMemory) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    CUcontext ca = context(0);
    CUdeviceptr pa = 0, pb = 0;
    ASSERT_EQ(a.cuMemAlloc_v2(&pa, 300 * kMiB), CUDA_SUCCESS);
    CUcontext cb = context(0);
    ASSERT_EQ(a.cuMemAlloc_v2(&pb, 200 * kMiB), CUDA_SUCCESS);
    EXPECT_EQ(free_now(), 1 * kGiB - 500 * kMiB);
    EXPECT_EQ(a.cuCtxDestroy_v2(ca), CUDA_SUCCESS);  // not current: cb stays current
    CUcontext cur = nullptr;
    EXPECT_EQ(a.cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    EXPECT_EQ(cur, cb);
    EXPECT_EQ(free_now(), 1 * kGiB - 200 * kMiB);
    EXPECT_EQ(a.cuMemFree_v2(pa), CUDA_ERROR_INVALID_VALUE);  // freed with its context
    EXPECT_EQ(a.cuMemFree_v2(pb), CUDA_SUCCESS);
    EXPECT_EQ(free_now(), 1 * kGiB);
  });
}

TEST(CudaSimContext, PrimaryContextIsCountedAndFreedAtLastRelease) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    CUcontext p1 = nullptr, p2 = nullptr, cur = nullptr;
    EXPECT_EQ(a.cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT);  // nothing retained
    EXPECT_EQ(a.cuDevicePrimaryCtxRetain(&p1, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuDevicePrimaryCtxRetain(&p2, 0), CUDA_SUCCESS);
    EXPECT_EQ(p1, p2);
    EXPECT_EQ(a.cuDevicePrimaryCtxRetain(&p2, 9), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_EQ(a.cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    EXPECT_EQ(cur, nullptr);  // retaining does not make it current
    ASSERT_EQ(a.cuCtxSetCurrent(p1), CUDA_SUCCESS);
    CUdeviceptr p = 0;
    ASSERT_EQ(a.cuMemAlloc_v2(&p, 100 * kMiB), CUDA_SUCCESS);
    EXPECT_EQ(a.cuDevicePrimaryCtxRelease(0), CUDA_SUCCESS);  // one reference left
    EXPECT_EQ(free_now(), 1 * kGiB - 100 * kMiB);
    EXPECT_EQ(a.cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);  // the last: reset, memory freed
    EXPECT_EQ(a.cuCtxSetCurrent(p1), CUDA_ERROR_INVALID_CONTEXT);
    unsigned long long used = 1;
    EXPECT_EQ(a.tesseraCudaSimUsage(0, nullptr, &used, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(used, 0u);
    EXPECT_EQ(a.cuDevicePrimaryCtxRetain(&p2, 0), CUDA_SUCCESS);
    EXPECT_EQ(p2, p1);  // the same handle, active again
    EXPECT_EQ(a.cuCtxSetCurrent(p2), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE);
  });
}

TEST(CudaSimContext, CurrentContextIsPerThread) {
  in_child({}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    CUcontext c = context(0);
    std::thread other([&] {
      CUcontext cur = reinterpret_cast<CUcontext>(1);
      EXPECT_EQ(a.cuCtxGetCurrent(&cur), CUDA_SUCCESS);
      EXPECT_EQ(cur, nullptr);
      CUdeviceptr p = 0;
      EXPECT_EQ(a.cuMemAlloc_v2(&p, 1), CUDA_ERROR_INVALID_CONTEXT);
      EXPECT_EQ(a.cuCtxSetCurrent(c), CUDA_SUCCESS);
      EXPECT_EQ(a.cuMemAlloc_v2(&p, kMiB), CUDA_SUCCESS);
    });
    other.join();
    EXPECT_EQ(free_now(), 80 * kGiB - kMiB);  // the other thread's allocation, same context
  });
}

// ---------------------------------------------------------------- memory

TEST(CudaSimMemory, AllocAndFreeAreAccounted) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    context(0);
    CUdeviceptr p[3] = {};
    for (auto& x : p) ASSERT_EQ(a.cuMemAlloc_v2(&x, 256 * kMiB), CUDA_SUCCESS);
    EXPECT_NE(p[0], p[1]);
    EXPECT_EQ(p[0] % 256, 0u);  // at least 256-byte aligned, as cudaMalloc
    std::size_t f = 0, t = 0;
    EXPECT_EQ(a.cuMemGetInfo_v2(&f, &t), CUDA_SUCCESS);
    EXPECT_EQ(f, 1 * kGiB - 768 * kMiB);
    EXPECT_EQ(t, 1 * kGiB);
    unsigned long long mine = 0, all = 0, peak = 0;
    EXPECT_EQ(a.tesseraCudaSimUsage(0, &mine, &all, &peak), CUDA_SUCCESS);
    EXPECT_EQ(mine, 768 * kMiB);
    EXPECT_EQ(all, 768 * kMiB);
    EXPECT_EQ(peak, 768 * kMiB);
    EXPECT_EQ(a.cuMemFree_v2(p[1]), CUDA_SUCCESS);
    EXPECT_EQ(free_now(), 1 * kGiB - 512 * kMiB);
    EXPECT_EQ(a.tesseraCudaSimUsage(0, &mine, &all, &peak), CUDA_SUCCESS);
    EXPECT_EQ(mine, 512 * kMiB);
    EXPECT_EQ(peak, 768 * kMiB);  // the high-water mark stays
    // Exact sizes: 1 byte is charged as 1 byte.
    CUdeviceptr one = 0;
    ASSERT_EQ(a.cuMemAlloc_v2(&one, 1), CUDA_SUCCESS);
    EXPECT_EQ(free_now(), 1 * kGiB - 512 * kMiB - 1);
    EXPECT_EQ(a.cuMemFree_v2(one), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree_v2(p[0]), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree_v2(p[2]), CUDA_SUCCESS);
    EXPECT_EQ(free_now(), 1 * kGiB);
  });
}

TEST(CudaSimMemory, OutOfMemoryExactlyPastTheDevicesCapacity) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    context(0);
    CUdeviceptr p = 0, q = 0;
    EXPECT_EQ(a.cuMemAlloc_v2(&p, 1 * kGiB + 1), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(free_now(), 1 * kGiB);  // a refusal charges nothing
    ASSERT_EQ(a.cuMemAlloc_v2(&p, 1 * kGiB - 4096), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemAlloc_v2(&q, 4097), CUDA_ERROR_OUT_OF_MEMORY);
    ASSERT_EQ(a.cuMemAlloc_v2(&q, 4096), CUDA_SUCCESS);  // exactly full
    EXPECT_EQ(free_now(), 0u);
    CUdeviceptr r = 0;
    EXPECT_EQ(a.cuMemAlloc_v2(&r, 1), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(a.cuMemAlloc_v2(&r, SIZE_MAX), CUDA_ERROR_OUT_OF_MEMORY);
    // The other device is untouched.
    context(1);
    EXPECT_EQ(free_now(), 2 * kGiB);
    ASSERT_EQ(a.cuMemAlloc_v2(&r, 2 * kGiB), CUDA_SUCCESS);
    EXPECT_EQ(free_now(), 0u);
    unsigned long long used0 = 0;
    EXPECT_EQ(a.tesseraCudaSimUsage(0, nullptr, &used0, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(used0, 1 * kGiB);
    EXPECT_EQ(a.tesseraCudaSimUsage(2, nullptr, nullptr, nullptr), CUDA_ERROR_INVALID_DEVICE);
  });
}

TEST(CudaSimMemory, InvalidValues) {
  in_child({}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    context(0);
    CUdeviceptr p = 0;
    EXPECT_EQ(a.cuMemAlloc_v2(nullptr, 16), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemAlloc_v2(&p, 0), CUDA_ERROR_INVALID_VALUE);  // [CH] bytesize 0
    ASSERT_EQ(a.cuMemAlloc_v2(&p, 4 * kMiB), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree_v2(p + 512), CUDA_ERROR_INVALID_VALUE);  // inside, not the start
    EXPECT_EQ(a.cuMemFree_v2(0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemFree_v2(0xdead0000ULL), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(free_now(), 80 * kGiB - 4 * kMiB);  // none of those changed anything
    EXPECT_EQ(a.cuMemFree_v2(p), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE);  // twice
    EXPECT_EQ(free_now(), 80 * kGiB);
    // A NULL output of cuMemGetInfo is left alone (design §3: OptiX passes free = NULL).
    std::size_t f = 0, t = 0;
    EXPECT_EQ(a.cuMemGetInfo_v2(nullptr, &t), CUDA_SUCCESS);
    EXPECT_EQ(t, 80 * kGiB);
    EXPECT_EQ(a.cuMemGetInfo_v2(&f, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(f, 80 * kGiB);
    const char* s = nullptr;
    EXPECT_EQ(a.cuGetErrorName(CUDA_SUCCESS, nullptr), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuGetErrorString(static_cast<CUresult>(12345), &s), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(s, nullptr);
  });
}

TEST(CudaSimMemory, PitchIsWidthRoundedTo512AndChargesPitchTimesHeight) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    context(0);
    struct Case {
      std::size_t width, height;
      std::size_t pitch;
    };
    std::uint64_t charged = 0;
    for (Case c : {Case{100, 10, 512}, Case{512, 3, 512}, Case{513, 7, 1024}, Case{4000, 1, 4096}}) {
      CUdeviceptr p = 0;
      std::size_t pitch = 0;
      ASSERT_EQ(a.cuMemAllocPitch_v2(&p, &pitch, c.width, c.height, 4), CUDA_SUCCESS);
      EXPECT_EQ(pitch, c.pitch) << c.width;
      charged += c.pitch * c.height;
      EXPECT_EQ(free_now(), 1 * kGiB - charged) << c.width;
    }
    CUdeviceptr p = 0;
    std::size_t pitch = 0;
    for (unsigned element : {0u, 1u, 2u, 3u, 12u, 32u})  // [CH] ElementSizeBytes is 4, 8 or 16
      EXPECT_EQ(a.cuMemAllocPitch_v2(&p, &pitch, 64, 64, element), CUDA_ERROR_INVALID_VALUE) << element;
    EXPECT_EQ(a.cuMemAllocPitch_v2(&p, &pitch, 64, 64, 8), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemAllocPitch_v2(&p, &pitch, 64, 64, 16), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemAllocPitch_v2(&p, &pitch, 0, 64, 4), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemAllocPitch_v2(&p, &pitch, 64, 0, 4), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemAllocPitch_v2(&p, nullptr, 64, 64, 4), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemAllocPitch_v2(&p, &pitch, 1 << 20, 1025, 4), CUDA_ERROR_OUT_OF_MEMORY);  // 1 GiB + 1 MiB
    ASSERT_EQ(a.cuMemAllocPitch_v2(&p, &pitch, 1000, 1000, 4), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree_v2(p), CUDA_SUCCESS);  // a pitched allocation frees like any other
  });
}

TEST(CudaSimMemory, The2000AbisUse32BitValues) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    context(0);
    unsigned int p = 0, q = 0, pitch = 0, f = 0, t = 0;
    ASSERT_EQ(a.cuMemAlloc(&p, 1000), CUDA_SUCCESS);
    EXPECT_NE(p, 0u);
    ASSERT_EQ(a.cuMemAllocPitch(&q, &pitch, 100, 10, 8), CUDA_SUCCESS);
    EXPECT_EQ(pitch, 512u);
    EXPECT_EQ(a.cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    EXPECT_EQ(t, 1u << 30);
    EXPECT_EQ(f, (1u << 30) - 1000u - 5120u);
    EXPECT_EQ(a.cuMemFree(p), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree(q), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFree(q), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(free_now(), 1 * kGiB);
    // A 2 GiB device's figures do not fit 32 bits: the simulator saturates them.
    context(1);
    ASSERT_EQ(a.cuMemAlloc(&p, 1000), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    EXPECT_EQ(t, 2u << 30);
    EXPECT_EQ(f, (2u << 30) - 1000u);
  });
  in_child({}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    context(0);
    unsigned int f = 0, t = 0;
    EXPECT_EQ(a.cuMemGetInfo(&f, &t), CUDA_SUCCESS);
    EXPECT_EQ(t, UINT_MAX);
    EXPECT_EQ(f, UINT_MAX);
  });
}

// ---------------------------------------------------------------- processes

TEST(CudaSimProcesses, ASharedDirectoryAddsUpEveryProcess) {
  tessera::testing::TempDir dir;
  in_child({nullptr, dir.path().c_str()}, [&] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    context(0);
    CUdeviceptr mine = 0;
    ASSERT_EQ(a.cuMemAlloc_v2(&mine, 10 * kGiB), CUDA_SUCCESS);
    int up[2], down[2];
    ASSERT_EQ(pipe(up), 0);
    ASSERT_EQ(pipe(down), 0);
    pid_t other = spawn({nullptr, dir.path().c_str()}, [&] {
      ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
      context(0);
      EXPECT_EQ(free_now(), 70 * kGiB);  // the first process's 10 GiB
      CUdeviceptr p = 0;
      EXPECT_EQ(a.cuMemAlloc_v2(&p, 70 * kGiB + 1), CUDA_ERROR_OUT_OF_MEMORY);
      ASSERT_EQ(a.cuMemAlloc_v2(&p, 20 * kGiB), CUDA_SUCCESS);
      send(up[1]);
      receive(down[0]);
      EXPECT_EQ(free_now(), 80 * kGiB - 20 * kGiB - 6 * kGiB);  // the first freed 4 GiB meanwhile
      EXPECT_EQ(a.cuMemFree_v2(p), CUDA_SUCCESS);
    });
    receive(up[0]);
    EXPECT_EQ(free_now(), 50 * kGiB);
    unsigned long long own = 0, all = 0, peak = 0;
    EXPECT_EQ(a.tesseraCudaSimUsage(0, &own, &all, &peak), CUDA_SUCCESS);
    EXPECT_EQ(own, 10 * kGiB);
    EXPECT_EQ(all, 30 * kGiB);
    EXPECT_EQ(peak, 30 * kGiB);
    CUdeviceptr big = 0;
    EXPECT_EQ(a.cuMemAlloc_v2(&big, 50 * kGiB + 1), CUDA_ERROR_OUT_OF_MEMORY);
    ASSERT_EQ(a.cuMemFree_v2(mine), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemAlloc_v2(&mine, 6 * kGiB), CUDA_SUCCESS);
    send(down[1]);
    expect_exit_ok(other);
    EXPECT_EQ(free_now(), 74 * kGiB);
    EXPECT_EQ(a.tesseraCudaSimUsage(0, &own, &all, &peak), CUDA_SUCCESS);
    EXPECT_EQ(all, 6 * kGiB);
    EXPECT_EQ(peak, 30 * kGiB);
  });
}

TEST(CudaSimProcesses, AProcessThatDiesHoldingMemoryGivesItBack) {
  tessera::testing::TempDir dir;
  in_child({nullptr, dir.path().c_str()}, [&] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    context(0);
    CUdeviceptr mine = 0;
    ASSERT_EQ(a.cuMemAlloc_v2(&mine, 10 * kGiB), CUDA_SUCCESS);
    int up[2], hold[2];
    ASSERT_EQ(pipe(up), 0);
    ASSERT_EQ(pipe(hold), 0);
    pid_t victim = spawn({nullptr, dir.path().c_str()}, [&] {
      ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
      context(0);
      CUdeviceptr p = 0;
      ASSERT_EQ(a.cuMemAlloc_v2(&p, 60 * kGiB), CUDA_SUCCESS);
      send(up[1]);
      receive(hold[0]);  // never comes: killed here
    });
    receive(up[0]);
    EXPECT_EQ(free_now(), 10 * kGiB);
    ASSERT_EQ(kill(victim, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(waitpid(victim, &status, 0), victim);
    EXPECT_TRUE(WIFSIGNALED(status));
    EXPECT_EQ(free_now(), 70 * kGiB);
    // One that exits without freeing gives it back too.
    pid_t leaver = spawn({nullptr, dir.path().c_str()}, [&] {
      ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
      context(0);
      CUdeviceptr p = 0;
      ASSERT_EQ(a.cuMemAlloc_v2(&p, 70 * kGiB), CUDA_SUCCESS);
    });
    expect_exit_ok(leaver);
    EXPECT_EQ(free_now(), 70 * kGiB);
    unsigned long long peak = 0;
    EXPECT_EQ(a.tesseraCudaSimUsage(0, nullptr, nullptr, &peak), CUDA_SUCCESS);
    EXPECT_EQ(peak, 80 * kGiB);
  });
}

TEST(CudaSimProcesses, WithoutADirectoryEachProcessIsAlone) {
  in_child({}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    context(0);
    CUdeviceptr p = 0;
    ASSERT_EQ(a.cuMemAlloc_v2(&p, 50 * kGiB), CUDA_SUCCESS);
    expect_exit_ok(spawn({}, [&] {
      ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
      context(0);
      EXPECT_EQ(free_now(), 80 * kGiB);
      CUdeviceptr q = 0;
      EXPECT_EQ(a.cuMemAlloc_v2(&q, 50 * kGiB), CUDA_SUCCESS);
    }));
    EXPECT_EQ(free_now(), 30 * kGiB);
  });
}

TEST(CudaSimProcesses, AForkedChildStartsUninitialisedWithNothingOfItsParent) {
  tessera::testing::TempDir dir;
  in_child({nullptr, dir.path().c_str()}, [&] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    CUcontext parent_ctx = context(0);
    CUdeviceptr p = 0;
    ASSERT_EQ(a.cuMemAlloc_v2(&p, 5 * kGiB), CUDA_SUCCESS);
    expect_exit_ok(spawn({nullptr, dir.path().c_str()}, [&] {
      CUcontext cur = nullptr;
      CUdeviceptr q = 0;
      EXPECT_EQ(a.cuCtxGetCurrent(&cur), CUDA_ERROR_NOT_INITIALIZED);
      EXPECT_EQ(a.cuMemAlloc_v2(&q, 1), CUDA_ERROR_NOT_INITIALIZED);
      ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
      EXPECT_EQ(a.cuCtxGetCurrent(&cur), CUDA_SUCCESS);
      EXPECT_EQ(cur, nullptr);
      EXPECT_EQ(a.cuCtxSetCurrent(parent_ctx), CUDA_ERROR_INVALID_CONTEXT);
      CUcontext mine = context(0);
      EXPECT_NE(mine, parent_ctx);
      EXPECT_EQ(a.cuMemFree_v2(p), CUDA_ERROR_INVALID_VALUE);  // the parent's pointer
      EXPECT_EQ(free_now(), 75 * kGiB);                        // the parent still holds its 5 GiB
      unsigned long long own = 1;
      EXPECT_EQ(a.tesseraCudaSimUsage(0, &own, nullptr, nullptr), CUDA_SUCCESS);
      EXPECT_EQ(own, 0u);
    }));
    EXPECT_EQ(free_now(), 75 * kGiB);
    EXPECT_EQ(a.cuMemFree_v2(p), CUDA_SUCCESS);
    EXPECT_EQ(free_now(), 80 * kGiB);
  });
}

// ---------------------------------------------------------------- cuGetProcAddress

using GetProcAddressV2 = decltype(cuGetProcAddress_v2);
using GetProcAddressV1 = decltype(cuGetProcAddress);

// What the runtime does (design §1): dlsym only cuGetProcAddress_v2, ask it
// for "cuGetProcAddress" (11030, flags 0), then fetch the rest through that.
TEST(CudaSimProcAddress, TheRuntimesBootstrapPathWorks) {
  in_child({devices2().c_str()}, [] {
    auto* v2 = sym<GetProcAddressV2>("cuGetProcAddress_v2");
    ASSERT_NE(v2, nullptr);
    void* fn = nullptr;
    ASSERT_EQ(v2("cuGetProcAddress", &fn, 11030, CU_GET_PROC_ADDRESS_DEFAULT, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(fn, dlsym(library(), "cuGetProcAddress"));
    auto* get = reinterpret_cast<GetProcAddressV1*>(fn);
    auto fetch = [&](const char* name) {
      void* f = nullptr;
      EXPECT_EQ(get(name, &f, 12080, CU_GET_PROC_ADDRESS_DEFAULT), CUDA_SUCCESS) << name;
      EXPECT_NE(f, nullptr) << name;
      return f;
    };
    auto* init = reinterpret_cast<decltype(&cuInit)>(fetch("cuInit"));
    auto* create = reinterpret_cast<decltype(&cuCtxCreate_v4)>(fetch("cuCtxCreate"));  // 12050's _v4 at 12080
    auto* alloc = reinterpret_cast<decltype(&cuMemAlloc_v2)>(fetch("cuMemAlloc"));
    auto* info = reinterpret_cast<decltype(&cuMemGetInfo_v2)>(fetch("cuMemGetInfo"));
    auto* release = reinterpret_cast<decltype(&cuMemFree_v2)>(fetch("cuMemFree"));
    ASSERT_EQ(init(0), CUDA_SUCCESS);
    CUcontext ctx = nullptr;
    ASSERT_EQ(create(&ctx, nullptr, 0, 1), CUDA_SUCCESS);
    CUdeviceptr p = 0;
    ASSERT_EQ(alloc(&p, 512 * kMiB), CUDA_SUCCESS);
    std::size_t f = 0, t = 0;
    ASSERT_EQ(info(&f, &t), CUDA_SUCCESS);
    EXPECT_EQ(t, 2 * kGiB);
    EXPECT_EQ(f, 2 * kGiB - 512 * kMiB);
    EXPECT_EQ(release(p), CUDA_SUCCESS);
    ASSERT_EQ(info(&f, &t), CUDA_SUCCESS);
    EXPECT_EQ(f, 2 * kGiB);
    // "cuGetProcAddress" from 12000 on is the _v2 ABI, which works the same way.
    ASSERT_EQ(v2("cuGetProcAddress", &fn, 12000, 0, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(fn, reinterpret_cast<void*>(v2));
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    void* again = nullptr;
    EXPECT_EQ(reinterpret_cast<GetProcAddressV2*>(fn)("cuMemAlloc", &again, 13000, 0, &status), CUDA_SUCCESS);
    EXPECT_EQ(again, reinterpret_cast<void*>(alloc));
    EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SUCCESS);
    // Before 11030 there was no cuGetProcAddress.
    EXPECT_EQ(v2("cuGetProcAddress", &fn, 11020, 0, &status), CUDA_SUCCESS);
    EXPECT_EQ(fn, nullptr);
    EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  });
}

// Every base name: the variant introduced at or before the requested version,
// by the versions of design §1's table and [CH]; each the exported function.
TEST(CudaSimProcAddress, EachBaseNameGivesTheNewestVariantAtOrBeforeTheVersion) {
  struct Row {
    const char* base;
    const char* exported;
    int from;  // first version this variant answers
    int until; // last version it answers (the next variant's first, minus 10), or 13000
    const char* per_thread;  // its _ptsz/_ptds twin, if any
    int per_thread_from;     // the twin's first version
  };
  const Row rows[] = {
      {"cuInit", "cuInit", 2000, 13000, nullptr, 0},
      {"cuDriverGetVersion", "cuDriverGetVersion", 2020, 13000, nullptr, 0},
      {"cuDeviceGetCount", "cuDeviceGetCount", 2000, 13000, nullptr, 0},
      {"cuDeviceGet", "cuDeviceGet", 2000, 13000, nullptr, 0},
      {"cuDeviceGetName", "cuDeviceGetName", 2000, 13000, nullptr, 0},
      {"cuDeviceGetAttribute", "cuDeviceGetAttribute", 2000, 13000, nullptr, 0},
      {"cuDeviceGetUuid", "cuDeviceGetUuid", 9020, 11030, nullptr, 0},
      {"cuDeviceGetUuid", "cuDeviceGetUuid_v2", 11040, 13000, nullptr, 0},
      {"cuDeviceTotalMem", "cuDeviceTotalMem", 2000, 3010, nullptr, 0},
      {"cuDeviceTotalMem", "cuDeviceTotalMem_v2", 3020, 13000, nullptr, 0},
      {"cuCtxCreate", "cuCtxCreate", 2000, 3010, nullptr, 0},
      {"cuCtxCreate", "cuCtxCreate_v2", 3020, 11030, nullptr, 0},
      {"cuCtxCreate", "cuCtxCreate_v3", 11040, 12040, nullptr, 0},
      {"cuCtxCreate", "cuCtxCreate_v4", 12050, 13000, nullptr, 0},
      {"cuCtxDestroy", "cuCtxDestroy", 2000, 3999, nullptr, 0},
      {"cuCtxDestroy", "cuCtxDestroy_v2", 4000, 13000, nullptr, 0},
      {"cuCtxSetCurrent", "cuCtxSetCurrent", 4000, 13000, nullptr, 0},
      {"cuCtxGetCurrent", "cuCtxGetCurrent", 4000, 13000, nullptr, 0},
      {"cuCtxGetDevice", "cuCtxGetDevice", 2000, 12090, nullptr, 0},
      {"cuCtxGetDevice", "cuCtxGetDevice_v2", 13000, 13000, nullptr, 0},
      {"cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain", 7000, 13000, nullptr, 0},
      {"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease", 7000, 10020, nullptr, 0},
      {"cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxRelease_v2", 11000, 13000, nullptr, 0},
      {"cuMemGetInfo", "cuMemGetInfo", 2000, 3010, nullptr, 0},
      {"cuMemGetInfo", "cuMemGetInfo_v2", 3020, 13000, nullptr, 0},
      {"cuMemAlloc", "cuMemAlloc", 2000, 3010, nullptr, 0},
      {"cuMemAlloc", "cuMemAlloc_v2", 3020, 13000, nullptr, 0},
      {"cuMemFree", "cuMemFree", 2000, 3010, nullptr, 0},
      {"cuMemFree", "cuMemFree_v2", 3020, 13000, nullptr, 0},
      {"cuMemAllocPitch", "cuMemAllocPitch", 2000, 3010, nullptr, 0},
      {"cuMemAllocPitch", "cuMemAllocPitch_v2", 3020, 13000, nullptr, 0},
      {"cuGetErrorName", "cuGetErrorName", 6000, 13000, nullptr, 0},
      {"cuGetErrorString", "cuGetErrorString", 6000, 13000, nullptr, 0},
      {"cuGetProcAddress", "cuGetProcAddress", 11030, 11090, nullptr, 0},
      {"cuGetProcAddress", "cuGetProcAddress_v2", 12000, 13000, nullptr, 0},
      {"cuMemAllocManaged", "cuMemAllocManaged", 6000, 13000, nullptr, 0},
      {"cuArrayCreate", "cuArrayCreate", 2000, 3010, nullptr, 0},
      {"cuArrayCreate", "cuArrayCreate_v2", 3020, 13000, nullptr, 0},
      {"cuArray3DCreate", "cuArray3DCreate", 2000, 3010, nullptr, 0},
      {"cuArray3DCreate", "cuArray3DCreate_v2", 3020, 13000, nullptr, 0},
      {"cuArrayDestroy", "cuArrayDestroy", 2000, 13000, nullptr, 0},
      {"cuMipmappedArrayCreate", "cuMipmappedArrayCreate", 5000, 13000, nullptr, 0},
      {"cuMipmappedArrayDestroy", "cuMipmappedArrayDestroy", 5000, 13000, nullptr, 0},
      {"cuDevicePrimaryCtxGetState", "cuDevicePrimaryCtxGetState", 7000, 13000, nullptr, 0},
      {"cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset", 7000, 10020, nullptr, 0},
      {"cuDevicePrimaryCtxReset", "cuDevicePrimaryCtxReset_v2", 11000, 13000, nullptr, 0},
      {"cuCtxSynchronize", "cuCtxSynchronize", 2000, 12090, nullptr, 0},
      {"cuCtxSynchronize", "cuCtxSynchronize_v2", 13000, 13000, nullptr, 0},
      {"cuStreamSynchronize", "cuStreamSynchronize", 2000, 13000, "cuStreamSynchronize_ptsz", 7000},
      {"cuLaunchKernel", "cuLaunchKernel", 4000, 13000, "cuLaunchKernel_ptsz", 7000},
      {"cuMemcpyHtoD", "cuMemcpyHtoD", 2000, 3010, nullptr, 0},
      {"cuMemcpyHtoD", "cuMemcpyHtoD_v2", 3020, 13000, "cuMemcpyHtoD_v2_ptds", 7000},
      {"cuGetExportTable", "cuGetExportTable", 3000, 13000, nullptr, 0},
      {"cuMemGetAllocationGranularity", "cuMemGetAllocationGranularity", 10020, 13000, nullptr, 0},
      {"cuMemCreate", "cuMemCreate", 10020, 13000, nullptr, 0},
      {"cuMemRelease", "cuMemRelease", 10020, 13000, nullptr, 0},
      {"cuMemAddressReserve", "cuMemAddressReserve", 10020, 13000, nullptr, 0},
      {"cuMemAddressFree", "cuMemAddressFree", 10020, 13000, nullptr, 0},
      {"cuMemMap", "cuMemMap", 10020, 13000, nullptr, 0},
      {"cuMemUnmap", "cuMemUnmap", 10020, 13000, nullptr, 0},
      {"cuDeviceGetDefaultMemPool", "cuDeviceGetDefaultMemPool", 11020, 13000, nullptr, 0},
      {"cuDeviceGetMemPool", "cuDeviceGetMemPool", 11020, 13000, nullptr, 0},
      {"cuDeviceSetMemPool", "cuDeviceSetMemPool", 11020, 13000, nullptr, 0},
      {"cuMemGetDefaultMemPool", "cuMemGetDefaultMemPool", 13000, 13000, nullptr, 0},
      {"cuMemGetMemPool", "cuMemGetMemPool", 13000, 13000, nullptr, 0},
      {"cuMemSetMemPool", "cuMemSetMemPool", 13000, 13000, nullptr, 0},
      {"cuMemPoolCreate", "cuMemPoolCreate", 11020, 13000, nullptr, 0},
      {"cuMemPoolDestroy", "cuMemPoolDestroy", 11020, 13000, nullptr, 0},
      {"cuMemPoolTrimTo", "cuMemPoolTrimTo", 11020, 13000, nullptr, 0},
      {"cuMemPoolSetAttribute", "cuMemPoolSetAttribute", 11020, 13000, nullptr, 0},
      {"cuMemPoolGetAttribute", "cuMemPoolGetAttribute", 11020, 13000, nullptr, 0},
      {"cuMemAllocAsync", "cuMemAllocAsync", 11020, 13000, "cuMemAllocAsync_ptsz", 11020},
      {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", 11020, 13000, "cuMemAllocFromPoolAsync_ptsz", 11020},
      {"cuMemFreeAsync", "cuMemFreeAsync", 11020, 13000, "cuMemFreeAsync_ptsz", 11020},
  };
  in_child({}, [&] {
    auto* get = sym<GetProcAddressV2>("cuGetProcAddress_v2");
    ASSERT_NE(get, nullptr);
    std::set<void*> seen;
    for (const Row& r : rows) {
      void* want = dlsym(library(), r.exported);
      ASSERT_NE(want, nullptr) << r.exported;
      EXPECT_TRUE(seen.insert(want).second) << r.exported << ": every variant is a distinct function";
      void* twin = r.per_thread ? dlsym(library(), r.per_thread) : nullptr;
      if (r.per_thread) {
        ASSERT_NE(twin, nullptr) << r.per_thread;
        EXPECT_TRUE(seen.insert(twin).second) << r.per_thread << ": every variant is a distinct function";
      }
      for (int version : {r.from, r.until, r.per_thread ? r.per_thread_from - 10 : r.from,
                          r.per_thread ? r.per_thread_from : r.until}) {
        if (version < r.from) continue;
        for (cuuint64_t flags : {CU_GET_PROC_ADDRESS_DEFAULT, CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                                 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM}) {
          void* fn = nullptr;
          auto status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
          EXPECT_EQ(get(r.base, &fn, version, flags, &status), CUDA_SUCCESS) << r.base << " " << version;
          // A per-thread request gets the twin from the twin's version on, else the legacy one.
          const bool per_thread = flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM && twin &&
                                  version >= r.per_thread_from;
          EXPECT_EQ(fn, per_thread ? twin : want)
              << r.base << " at " << version << " flags " << flags << " wants "
              << (per_thread ? r.per_thread : r.exported);
          EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SUCCESS) << r.base << " " << version;
        }
      }
    }
    // Below a base name's first variant: found, version not sufficient, NULL.
    for (auto [base, version] : {std::pair{"cuDeviceGetUuid", 9010}, std::pair{"cuCtxCreate", 1010},
                                 std::pair{"cuMemcpyHtoD", 1010}, std::pair{"cuMemAllocManaged", 5050},
                                 std::pair{"cuDeviceGetAttribute", 1010},
                                 std::pair{"cuMemAllocAsync", 11010}, std::pair{"cuMemCreate", 10010},
                                 std::pair{"cuDevicePrimaryCtxRetain", 6050}, std::pair{"cuDriverGetVersion", 2010}}) {
      void* fn = reinterpret_cast<void*>(1);
      auto status = CU_GET_PROC_ADDRESS_SUCCESS;
      EXPECT_EQ(get(base, &fn, version, 0, &status), CUDA_SUCCESS) << base;
      EXPECT_EQ(fn, nullptr) << base;
      EXPECT_EQ(status, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT) << base;
    }
  });
}

TEST(CudaSimProcAddress, UnknownNamesFlagsAndVersionsAndANullStatus) {
  in_child({}, [] {
    auto* v2 = sym<GetProcAddressV2>("cuGetProcAddress_v2");
    auto* v1 = sym<GetProcAddressV1>("cuGetProcAddress");
    ASSERT_NE(v2, nullptr);
    ASSERT_NE(v1, nullptr);
    // [CH]: an unknown symbol is CUDA_SUCCESS with *pfn = NULL and SYMBOL_NOT_FOUND
    // (versioned names are not base names; cuEventCreate is not simulated).
    for (const char* name : {"cuNoSuchFunction", "cuMemAlloc_v2", "cuMemAllocAsync_ptsz", "cuEventCreate", ""}) {
      void* fn = reinterpret_cast<void*>(1);
      auto status = CU_GET_PROC_ADDRESS_SUCCESS;
      EXPECT_EQ(v2(name, &fn, 13000, 0, &status), CUDA_SUCCESS) << name;
      EXPECT_EQ(fn, nullptr) << name;
      EXPECT_EQ(status, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND) << name;
      fn = reinterpret_cast<void*>(1);
      EXPECT_EQ(v2(name, &fn, 13000, 0, nullptr), CUDA_SUCCESS) << name;  // NULL status: accepted
      EXPECT_EQ(fn, nullptr) << name;
      fn = reinterpret_cast<void*>(1);
      EXPECT_EQ(v1(name, &fn, 13000, 0), CUDA_SUCCESS) << name;
      EXPECT_EQ(fn, nullptr) << name;
    }
    void* fn = nullptr;
    EXPECT_EQ(v2("cuMemAlloc", &fn, 13000, 0, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(fn, dlsym(library(), "cuMemAlloc_v2"));
    // [CH]: a version above the driver's (13000) is INVALID_VALUE.
    auto status = CU_GET_PROC_ADDRESS_SUCCESS;
    EXPECT_EQ(v2("cuMemAlloc", &fn, 13010, 0, &status), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(v1("cuMemAlloc", &fn, 13010, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(v2(nullptr, &fn, 13000, 0, &status), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(v2("cuMemAlloc", nullptr, 13000, 0, &status), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(v2("cuMemAlloc", &fn, 13000, 3, &status), CUDA_ERROR_INVALID_VALUE);  // sim: not a documented flag
    EXPECT_EQ(v2("cuMemAlloc", &fn, 13000, 4, &status), CUDA_ERROR_INVALID_VALUE);
  });
}

TEST(CudaSimProcAddress, OnlyImplementedNamesAreExported) {
  // A real driver exports neither (no per-thread twin of a 2000 ABI; no
  // streams or host allocations here).
  for (const char* name : {"cuStreamCreate_v2", "cuMemcpyHtoD_ptds", "cuMemAllocHost_v2", "cuCtxCreate_ptsz", "nvmlInit_v2"})
    EXPECT_EQ(dlsym(library(), name), nullptr) << name;
  EXPECT_NE(dlsym(library(), "tesseraCudaSimUsage"), nullptr);
  EXPECT_NE(dlsym(library(), "tesseraCudaSimCalls"), nullptr);
  Dl_info info{};
  ASSERT_NE(dladdr(dlsym(library(), "cuInit"), &info), 0);
  EXPECT_NE(std::string(info.dli_fname).find("libcuda.so.1"), std::string::npos) << info.dli_fname;
}

TEST(CudaSimProcAddress, ErrorNamesAndStringsForEveryCodeItReturns) {
  const std::pair<CUresult, const char*> codes[] = {
      {CUDA_SUCCESS, "CUDA_SUCCESS"},
      {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
      {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
      {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
      {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"},
      {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
      {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"},
      {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"},
      {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN"},
  };
  in_child({}, [&] {
    for (auto [code, name] : codes) {
      const char* s = nullptr;
      EXPECT_EQ(api().cuGetErrorName(code, &s), CUDA_SUCCESS) << name;
      EXPECT_STREQ(s, name);
      s = nullptr;
      EXPECT_EQ(api().cuGetErrorString(code, &s), CUDA_SUCCESS) << name;
      ASSERT_NE(s, nullptr) << name;
      EXPECT_GT(std::strlen(s), 0u) << name;
    }
    const char* s = nullptr;
    EXPECT_EQ(api().cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s), CUDA_SUCCESS);
    EXPECT_STREQ(s, "out of memory");
  });
}

// ---------------------------------------------------------------- managed memory

TEST(CudaSimManaged, ChargesLikeCuMemAllocAndDiesWithItsContext) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    CUdeviceptr m = 0, h = 0;
    EXPECT_EQ(a.cuMemAllocManaged(&m, kMiB, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_CONTEXT);
    CUcontext c0 = context(0);
    ASSERT_EQ(a.cuMemAllocManaged(&m, 100 * kMiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemAllocManaged(&h, 50 * kMiB, CU_MEM_ATTACH_HOST), CUDA_SUCCESS);
    EXPECT_NE(m, h);
    EXPECT_EQ(free_now(), 1 * kGiB - 150 * kMiB);
    EXPECT_EQ(a.cuMemFree_v2(h), CUDA_SUCCESS);  // [CH] released with cuMemFree
    EXPECT_EQ(free_now(), 1 * kGiB - 100 * kMiB);
    EXPECT_EQ(a.cuMemFree_v2(h), CUDA_ERROR_INVALID_VALUE);  // twice
    // [CH] bytesize 0, and flags other than GLOBAL or HOST, are INVALID_VALUE.
    EXPECT_EQ(a.cuMemAllocManaged(&h, 0, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
    for (unsigned flags : {0u, 3u, static_cast<unsigned>(CU_MEM_ATTACH_SINGLE), 8u})
      EXPECT_EQ(a.cuMemAllocManaged(&h, kMiB, flags), CUDA_ERROR_INVALID_VALUE) << flags;
    EXPECT_EQ(a.cuMemAllocManaged(nullptr, kMiB, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemAllocManaged(&h, 1 * kGiB, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_OUT_OF_MEMORY);
    // A second context's managed memory survives the first's destruction.
    CUcontext c1 = context(0);
    CUdeviceptr keep = 0;
    ASSERT_EQ(a.cuMemAllocManaged(&keep, 10 * kMiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    EXPECT_EQ(a.cuCtxDestroy_v2(c0), CUDA_SUCCESS);
    EXPECT_EQ(free_now(), 1 * kGiB - 10 * kMiB);
    EXPECT_EQ(a.cuMemFree_v2(m), CUDA_ERROR_INVALID_VALUE);  // freed with c0
    EXPECT_EQ(a.cuCtxDestroy_v2(c1), CUDA_SUCCESS);
    unsigned long long used = 1;
    EXPECT_EQ(a.tesseraCudaSimUsage(0, nullptr, &used, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(used, 0u);
  });
}

// ---------------------------------------------------------------- primary context state and reset

TEST(CudaSimPrimary, GetStateReportsActivity) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    unsigned flags = 7;
    int active = 7;
    EXPECT_EQ(a.cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_ERROR_NOT_INITIALIZED);
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    EXPECT_EQ(active, 0);
    EXPECT_EQ(flags, 0u);
    CUcontext p = nullptr;
    ASSERT_EQ(a.cuDevicePrimaryCtxRetain(&p, 1), CUDA_SUCCESS);
    EXPECT_EQ(a.cuDevicePrimaryCtxGetState(1, &flags, &active), CUDA_SUCCESS);
    EXPECT_EQ(active, 1);
    EXPECT_EQ(a.cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
    EXPECT_EQ(active, 0);  // per device
    EXPECT_EQ(a.cuDevicePrimaryCtxGetState(2, &flags, &active), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_EQ(a.cuDevicePrimaryCtxGetState(1, nullptr, &active), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuDevicePrimaryCtxGetState(1, &flags, nullptr), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuDevicePrimaryCtxRelease_v2(1), CUDA_SUCCESS);
    EXPECT_EQ(a.cuDevicePrimaryCtxGetState(1, &flags, &active), CUDA_SUCCESS);
    EXPECT_EQ(active, 0);
  });
}

TEST(CudaSimPrimary, ResetFreesThePrimaryContextsMemoryOnlyAndKeepsTheRetain) {
  for (bool v2 : {false, true}) {
    in_child({devices2().c_str()}, [&] {
      const Api& a = api();
      auto reset = v2 ? a.cuDevicePrimaryCtxReset_v2 : a.cuDevicePrimaryCtxReset;
      ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
      CUcontext p = nullptr;
      ASSERT_EQ(a.cuDevicePrimaryCtxRetain(&p, 0), CUDA_SUCCESS);
      ASSERT_EQ(a.cuCtxSetCurrent(p), CUDA_SUCCESS);
      CUdeviceptr x = 0, m = 0, other = 0;
      ASSERT_EQ(a.cuMemAlloc_v2(&x, 100 * kMiB), CUDA_SUCCESS);
      ASSERT_EQ(a.cuMemAllocManaged(&m, 50 * kMiB, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
      CUcontext c = context(0);  // a created context: not the primary's
      ASSERT_EQ(a.cuMemAlloc_v2(&other, 10 * kMiB), CUDA_SUCCESS);
      EXPECT_EQ(free_now(), 1 * kGiB - 160 * kMiB);
      EXPECT_EQ(reset(2), CUDA_ERROR_INVALID_DEVICE);
      EXPECT_EQ(reset(0), CUDA_SUCCESS);
      EXPECT_EQ(free_now(), 1 * kGiB - 10 * kMiB);
      int active = 1;
      unsigned flags = 0;
      EXPECT_EQ(a.cuDevicePrimaryCtxGetState(0, &flags, &active), CUDA_SUCCESS);
      EXPECT_EQ(active, 0);
      EXPECT_EQ(reset(0), CUDA_SUCCESS);  // an inactive one: nothing to do
      // [CH] reset does not release: the retain still needs its release, which is fine.
      EXPECT_EQ(a.cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
      EXPECT_EQ(a.cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT);  // nothing retained now
      EXPECT_EQ(a.cuCtxDestroy_v2(c), CUDA_SUCCESS);
      EXPECT_EQ(a.cuCtxSetCurrent(nullptr), CUDA_SUCCESS);
      // Retained again: the same handle, active, without the old memory.
      CUcontext again = nullptr;
      ASSERT_EQ(a.cuDevicePrimaryCtxRetain(&again, 0), CUDA_SUCCESS);
      EXPECT_EQ(again, p);
      ASSERT_EQ(a.cuCtxSetCurrent(again), CUDA_SUCCESS);
      EXPECT_EQ(a.cuMemFree_v2(x), CUDA_ERROR_INVALID_VALUE);
      EXPECT_EQ(a.cuMemFree_v2(m), CUDA_ERROR_INVALID_VALUE);
      EXPECT_EQ(free_now(), 1 * kGiB);
      // A reset while still retained, then a retain: active again at once.
      EXPECT_EQ(reset(0), CUDA_SUCCESS);
      CUdeviceptr y = 0;
      EXPECT_EQ(a.cuMemAlloc_v2(&y, kMiB), CUDA_ERROR_INVALID_CONTEXT);  // current but inactive
      ASSERT_EQ(a.cuDevicePrimaryCtxRetain(&again, 0), CUDA_SUCCESS);
      EXPECT_EQ(a.cuMemAlloc_v2(&y, kMiB), CUDA_SUCCESS);
    });
  }
}

// ---------------------------------------------------------------- calls that allocate nothing

TEST(CudaSimNoMemory, SynchronizeLaunchAndCopyValidateAndSucceed) {
  in_child({}, [] {
    const Api& a = api();
    auto f = reinterpret_cast<CUfunction>(0x1234);
    EXPECT_EQ(a.cuStreamSynchronize(nullptr), CUDA_ERROR_NOT_INITIALIZED);
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    // [CH] the default stream with no current context is INVALID_CONTEXT.
    EXPECT_EQ(a.cuStreamSynchronize(nullptr), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(a.cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(a.cuCtxSynchronize_v2(nullptr), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(a.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_ERROR_INVALID_CONTEXT);
    CUcontext c = context(0);
    for (CUstream s : {static_cast<CUstream>(nullptr), TESSERA_CU_STREAM_LEGACY, TESSERA_CU_STREAM_PER_THREAD}) {
      EXPECT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
      EXPECT_EQ(a.cuStreamSynchronize_ptsz(s), CUDA_SUCCESS);
      EXPECT_EQ(a.cuLaunchKernel(f, 1, 2, 3, 32, 1, 1, 0, s, nullptr, nullptr), CUDA_SUCCESS);
      EXPECT_EQ(a.cuLaunchKernel_ptsz(f, 1, 2, 3, 32, 1, 1, 0, s, nullptr, nullptr), CUDA_SUCCESS);
    }
    auto bogus = reinterpret_cast<CUstream>(0x5000);  // sim: no stream was created
    EXPECT_EQ(a.cuStreamSynchronize(bogus), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(a.cuLaunchKernel(f, 0, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuCtxSynchronize(), CUDA_SUCCESS);
    EXPECT_EQ(a.cuCtxSynchronize_v2(nullptr), CUDA_SUCCESS);
    EXPECT_EQ(a.cuCtxSynchronize_v2(c), CUDA_SUCCESS);
    CUdeviceptr p = 0;
    ASSERT_EQ(a.cuMemAlloc_v2(&p, 4096), CUDA_SUCCESS);
    char host[4096] = {};
    EXPECT_EQ(a.cuMemcpyHtoD_v2(p, host, sizeof host), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemcpyHtoD_v2_ptds(p + 96, host, 4000), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemcpyHtoD_v2(p + 1, host, 4096), CUDA_ERROR_INVALID_VALUE);  // past the end
    EXPECT_EQ(a.cuMemcpyHtoD_v2(p, nullptr, 16), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemcpyHtoD_v2(0xdead0000ULL, host, 16), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(free_now(), 80 * kGiB - 4096);  // nothing here charged anything
    EXPECT_EQ(a.cuCtxDestroy_v2(c), CUDA_SUCCESS);
    EXPECT_EQ(a.cuCtxSynchronize_v2(c), CUDA_ERROR_INVALID_CONTEXT);
  });
}

TEST(CudaSimNoMemory, ExportTablesAreNotSupported) {
  in_child({}, [] {
    const Api& a = api();
    CUuuid id{};
    const void* table = reinterpret_cast<const void*>(1);
    EXPECT_EQ(a.cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);  // before cuInit too
    EXPECT_EQ(table, nullptr);
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    table = reinterpret_cast<const void*>(1);
    EXPECT_EQ(a.cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
    EXPECT_EQ(table, nullptr);
    EXPECT_EQ(a.cuGetExportTable(nullptr, &id), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuGetExportTable(&table, nullptr), CUDA_ERROR_INVALID_VALUE);
  });
}

// ---------------------------------------------------------------- call counts

unsigned long long calls(const char* name) {
  unsigned long long n = ~0ULL;
  EXPECT_EQ(api().tesseraCudaSimCalls(name, &n), CUDA_SUCCESS) << name;
  return n;
}

TEST(CudaSimCalls, EachExportedVariantCountsItsOwnCalls) {
  in_child({}, [] {
    const Api& a = api();
    EXPECT_EQ(calls("cuInit"), 0u);
    EXPECT_EQ(a.cuInit(1), CUDA_ERROR_INVALID_VALUE);  // failed calls count
    int n = 0;
    EXPECT_EQ(a.cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);  // so do calls before cuInit
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    EXPECT_EQ(calls("cuInit"), 2u);
    EXPECT_EQ(calls("cuDeviceGetCount"), 1u);
    context(0);
    unsigned int p32 = 0;
    CUdeviceptr p = 0;
    ASSERT_EQ(a.cuMemAlloc(&p32, 4096), CUDA_SUCCESS);
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(a.cuMemAlloc_v2(&p, 4096), CUDA_SUCCESS);
      ASSERT_EQ(a.cuMemFree_v2(p), CUDA_SUCCESS);
    }
    EXPECT_EQ(calls("cuMemAlloc"), 1u);
    EXPECT_EQ(calls("cuMemAlloc_v2"), 3u);
    EXPECT_EQ(calls("cuMemFree_v2"), 3u);
    EXPECT_EQ(calls("cuMemFree"), 0u);
    EXPECT_EQ(a.cuStreamSynchronize_ptsz(nullptr), CUDA_SUCCESS);
    EXPECT_EQ(calls("cuStreamSynchronize_ptsz"), 1u);
    EXPECT_EQ(calls("cuStreamSynchronize"), 0u);
    // Through cuGetProcAddress: the function handed out is the one counted;
    // the lookups count as calls of the lookup function.
    void* fn = nullptr;
    ASSERT_EQ(a.cuGetProcAddress_v2("cuStreamSynchronize", &fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                                    nullptr),
              CUDA_SUCCESS);
    ASSERT_EQ(reinterpret_cast<decltype(&cuStreamSynchronize)>(fn)(nullptr), CUDA_SUCCESS);
    EXPECT_EQ(calls("cuStreamSynchronize_ptsz"), 2u);
    EXPECT_EQ(calls("cuGetProcAddress_v2"), 1u);
    EXPECT_EQ(calls("cuGetProcAddress"), 0u);
    // A forked child counts from zero; its calls are not its parent's.
    expect_exit_ok(spawn({}, [&] {
      EXPECT_EQ(calls("cuInit"), 0u);
      EXPECT_EQ(calls("cuMemAlloc_v2"), 0u);
      ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
      EXPECT_EQ(calls("cuInit"), 1u);
    }));
    EXPECT_EQ(calls("cuInit"), 2u);
    EXPECT_EQ(calls("cuMemAlloc_v2"), 3u);
  });
}

TEST(CudaSimCalls, OnlyExportedDriverFunctionsHaveCounts) {
  in_child({}, [] {
    const Api& a = api();
    unsigned long long n = 5;
    for (const char* name : {"cuNoSuchFunction", "cuEventCreate", "cuMemcpyHtoD_ptds", "tesseraCudaSimUsage",
                             "tesseraCudaSimCalls", "malloc", "dlsym", "", "cuda"}) {
      n = 5;
      EXPECT_EQ(a.tesseraCudaSimCalls(name, &n), CUDA_ERROR_NOT_FOUND) << name;
      EXPECT_EQ(n, 5u) << name;
    }
    EXPECT_EQ(a.tesseraCudaSimCalls(nullptr, &n), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.tesseraCudaSimCalls("cuInit", nullptr), CUDA_ERROR_INVALID_VALUE);
    // Known before cuInit, and the control calls themselves are not counted.
    EXPECT_EQ(calls("cuMemAllocManaged"), 0u);
    EXPECT_EQ(calls("cuLaunchKernel_ptsz"), 0u);
    EXPECT_EQ(calls("cuMemcpyHtoD_v2_ptds"), 0u);
  });
}

// ---------------------------------------------------------------- virtual memory management

CUmemAllocationProp device_prop(int dev) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = dev;
  return p;
}

unsigned long long device_used(int dev) {
  unsigned long long used = ~0ULL;
  EXPECT_EQ(api().tesseraCudaSimUsage(dev, nullptr, &used, nullptr), CUDA_SUCCESS);
  return used;
}

TEST(CudaSimVmm, FreedOnlyAtReleaseAndLastUnmapInEitherOrder) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);  // no context needed: VMM memory belongs to none
    const auto prop = device_prop(1);
    std::size_t g = 0;
    ASSERT_EQ(a.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), CUDA_SUCCESS);
    EXPECT_EQ(g, 2 * kMiB);
    CUmemGenericAllocationHandle h1 = 0, h2 = 0;
    ASSERT_EQ(a.cuMemCreate(&h1, 64 * kMiB, &prop, 0), CUDA_SUCCESS);
    EXPECT_EQ(device_used(1), 64 * kMiB);  // charged at creation, on prop->location.id
    EXPECT_EQ(device_used(0), 0u);
    CUdeviceptr va = 0;
    ASSERT_EQ(a.cuMemAddressReserve(&va, 256 * kMiB, 0, 0, 0), CUDA_SUCCESS);
    EXPECT_EQ(va % (2 * kMiB), 0u);
    EXPECT_EQ(device_used(1), 64 * kMiB);  // addresses cost nothing
    // Mapped twice, then released: still held until both mappings go.
    ASSERT_EQ(a.cuMemMap(va, 64 * kMiB, 0, h1, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemMap(va + 64 * kMiB, 32 * kMiB, 0, h1, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemRelease(h1), CUDA_SUCCESS);
    EXPECT_EQ(device_used(1), 64 * kMiB);
    EXPECT_EQ(a.cuMemRelease(h1), CUDA_ERROR_INVALID_VALUE);  // released twice
    EXPECT_EQ(a.cuMemUnmap(va, 64 * kMiB), CUDA_SUCCESS);
    EXPECT_EQ(device_used(1), 64 * kMiB);
    EXPECT_EQ(a.cuMemUnmap(va + 64 * kMiB, 32 * kMiB), CUDA_SUCCESS);
    EXPECT_EQ(device_used(1), 0u);  // released and the last mapping gone
    // Unmapped first, released after.
    ASSERT_EQ(a.cuMemCreate(&h2, 32 * kMiB, &prop, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemMap(va, 32 * kMiB, 0, h2, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemUnmap(va, 32 * kMiB), CUDA_SUCCESS);
    EXPECT_EQ(device_used(1), 32 * kMiB);  // not released yet
    EXPECT_EQ(a.cuMemRelease(h2), CUDA_SUCCESS);
    EXPECT_EQ(device_used(1), 0u);
    EXPECT_EQ(a.cuMemAddressFree(va, 256 * kMiB), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemAddressFree(va, 256 * kMiB), CUDA_ERROR_INVALID_VALUE);
  });
}

// [CH] a handle is a reference: cuMemRetainAllocationHandle of any mapped
// address gives the handle that mapped it with one more reference; an import
// of an exported descriptor is a new handle with its own; the memory goes when
// every reference is released and every mapping unmapped.
TEST(CudaSimVmm, RetainedAndImportedHandlesAreReferences) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    auto prop = device_prop(0);
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CUmemGenericAllocationHandle h = 0, retained = 0, imported = 0;
    ASSERT_EQ(a.cuMemCreate(&h, 8 * kMiB, &prop, 0), CUDA_SUCCESS);
    CUdeviceptr va = 0;
    ASSERT_EQ(a.cuMemAddressReserve(&va, 8 * kMiB, 0, 0, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(va)), CUDA_ERROR_INVALID_VALUE)
        << "not mapped yet";
    ASSERT_EQ(a.cuMemMap(va, 8 * kMiB, 0, h, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(va + 3 * kMiB)), CUDA_SUCCESS);
    EXPECT_EQ(retained, h) << "the handle used to map it";
    EXPECT_EQ(a.cuMemRetainAllocationHandle(nullptr, reinterpret_cast<void*>(va)), CUDA_ERROR_INVALID_VALUE);
    ASSERT_EQ(a.cuMemRelease(h), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemUnmap(va, 8 * kMiB), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 8 * kMiB) << "the retained reference keeps it";
    int fd = -1;
    ASSERT_EQ(a.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 1),
              CUDA_ERROR_INVALID_VALUE) << "flags must be 0";
    ASSERT_EQ(a.cuMemImportFromShareableHandle(&imported, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              CUDA_SUCCESS);
    EXPECT_NE(imported, h);
    ASSERT_EQ(a.cuMemRelease(h), CUDA_SUCCESS);  // the retained reference
    EXPECT_EQ(device_used(0), 8 * kMiB) << "the imported handle keeps it";
    ASSERT_EQ(a.cuMemMap(va, 8 * kMiB, 0, imported, 0), CUDA_SUCCESS);
    const CUmemAccessDesc rw{{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    const CUmemAccessDesc bad_device{{CU_MEM_LOCATION_TYPE_DEVICE, 7}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    const CUmemAccessDesc bad_flags{{CU_MEM_LOCATION_TYPE_DEVICE, 0}, static_cast<CUmemAccess_flags>(2)};
    EXPECT_EQ(a.cuMemSetAccess(va, 8 * kMiB, &rw, 1), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemSetAccess(va, 16 * kMiB, &rw, 1), CUDA_ERROR_INVALID_VALUE) << "past the mapping";
    EXPECT_EQ(a.cuMemSetAccess(va, 8 * kMiB, &bad_device, 1), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_EQ(a.cuMemSetAccess(va, 8 * kMiB, &bad_flags, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemSetAccess(va, 8 * kMiB, &rw, 0), CUDA_ERROR_INVALID_VALUE);
    ASSERT_EQ(a.cuMemRelease(imported), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 8 * kMiB) << "still mapped";
    ASSERT_EQ(a.cuMemUnmap(va, 8 * kMiB), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 0u) << "no reference, no mapping: freed";
    EXPECT_EQ(a.cuMemRelease(imported), CUDA_ERROR_INVALID_VALUE);
    CUmemGenericAllocationHandle late = 0;
    EXPECT_EQ(a.cuMemImportFromShareableHandle(&late, reinterpret_cast<void*>(static_cast<std::intptr_t>(fd)),
                                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
              CUDA_ERROR_INVALID_VALUE) << "its allocation is gone";
    ::close(fd);
    // A handle created without descriptor handles cannot be exported.
    const auto plain = device_prop(0);
    ASSERT_EQ(a.cuMemCreate(&h, 2 * kMiB, &plain, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemRelease(h), CUDA_SUCCESS);
  });
}

// [CH] cuLibraryLoad*: context-independent; sim: one module in each live
// context (TESSERA_SIM_CUDA_MODULE_BYTES each), gone with the library.
TEST(CudaSimModules, LibrariesLoadIntoEveryLiveContextAndUnloadOnce) {
  in_child({devices2().c_str()}, [] {
    setenv("TESSERA_SIM_CUDA_MODULE_BYTES", "4M", 1);
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    static const char kCode[] = "library";
    CUlibrary none = nullptr;
    ASSERT_EQ(a.cuLibraryLoadData(&none, kCode, nullptr, nullptr, 0, nullptr, nullptr, 0), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 0u) << "no context: nothing placed yet";
    CUcontext c1 = context(0), c2 = context(0);
    (void)c1;
    CUlibrary lib = nullptr;
    ASSERT_EQ(a.cuLibraryLoadData(&lib, kCode, nullptr, nullptr, 0, nullptr, nullptr, 0), CUDA_SUCCESS);
    const std::uint64_t contexts = device_used(0) - 8 * kMiB;  // two modules of 4 MiB
    CUkernel k = nullptr;
    EXPECT_EQ(a.cuLibraryGetKernel(&k, lib, "forward"), CUDA_SUCCESS);
    EXPECT_NE(k, nullptr);
    EXPECT_EQ(a.cuLibraryGetKernel(&k, lib, ""), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuLibraryGetKernel(&k, reinterpret_cast<CUlibrary>(0x1234), "forward"), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(a.cuLibraryLoadData(&lib, nullptr, nullptr, nullptr, 0, nullptr, nullptr, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuLibraryLoadData(&lib, kCode, nullptr, nullptr, 2, nullptr, nullptr, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuLibraryLoadFromFile(&lib, "/nonexistent/lib.cubin", nullptr, nullptr, 0, nullptr, nullptr, 0),
              CUDA_ERROR_FILE_NOT_FOUND);
    ASSERT_EQ(a.cuCtxDestroy_v2(c2), CUDA_SUCCESS);  // takes its module with it
    EXPECT_EQ(device_used(0), contexts + 4 * kMiB);
    EXPECT_EQ(a.cuLibraryUnload(lib), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), contexts);
    EXPECT_EQ(a.cuLibraryUnload(lib), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(a.cuLibraryUnload(none), CUDA_SUCCESS);
  });
}

TEST(CudaSimVmm, NotFreedByContextDestroyOrPrimaryReset) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    CUcontext c = context(0);
    CUcontext p = nullptr;
    ASSERT_EQ(a.cuDevicePrimaryCtxRetain(&p, 0), CUDA_SUCCESS);
    const auto prop = device_prop(0);
    CUmemGenericAllocationHandle h = 0;
    ASSERT_EQ(a.cuMemCreate(&h, 8 * kMiB, &prop, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuCtxDestroy_v2(c), CUDA_SUCCESS);
    EXPECT_EQ(a.cuDevicePrimaryCtxReset_v2(0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 8 * kMiB);
    EXPECT_EQ(a.cuMemRelease(h), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 0u);
  });
}

TEST(CudaSimVmm, HostLocationsAreNotDeviceMemory) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    for (auto type : {CU_MEM_LOCATION_TYPE_HOST, CU_MEM_LOCATION_TYPE_HOST_NUMA}) {
      CUmemAllocationProp prop = device_prop(0);
      prop.location.type = type;
      prop.location.id = 0;
      CUmemGenericAllocationHandle h = 0;
      ASSERT_EQ(a.cuMemCreate(&h, 512 * kMiB, &prop, 0), CUDA_SUCCESS) << type;
      EXPECT_EQ(device_used(0), 0u);
      EXPECT_EQ(device_used(1), 0u);
      CUdeviceptr va = 0;
      ASSERT_EQ(a.cuMemAddressReserve(&va, 512 * kMiB, 0, 0, 0), CUDA_SUCCESS);
      ASSERT_EQ(a.cuMemMap(va, 512 * kMiB, 0, h, 0), CUDA_SUCCESS);
      EXPECT_EQ(a.cuMemRelease(h), CUDA_SUCCESS);
      EXPECT_EQ(a.cuMemUnmap(va, 512 * kMiB), CUDA_SUCCESS);
      EXPECT_EQ(a.cuMemAddressFree(va, 512 * kMiB), CUDA_SUCCESS);
      // [CH] host allocations are not IPC capable: requestedHandleTypes must be 0.
      prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
      EXPECT_EQ(a.cuMemCreate(&h, 2 * kMiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    }
    // A device allocation past the device's memory is OUT_OF_MEMORY and charges nothing.
    const auto prop = device_prop(0);
    CUmemGenericAllocationHandle h = 0;
    EXPECT_EQ(a.cuMemCreate(&h, 1 * kGiB + 2 * kMiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(device_used(0), 0u);
  });
}

TEST(CudaSimVmm, BadArguments) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    CUmemGenericAllocationHandle h = 0;
    auto prop = device_prop(0);
    EXPECT_EQ(a.cuMemCreate(&h, 2 * kMiB, &prop, 0), CUDA_ERROR_NOT_INITIALIZED);
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemCreate(nullptr, 2 * kMiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemCreate(&h, 2 * kMiB, nullptr, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemCreate(&h, 0, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemCreate(&h, 3 * kMiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);  // not a granule multiple
    EXPECT_EQ(a.cuMemCreate(&h, 2 * kMiB, &prop, 1), CUDA_ERROR_INVALID_VALUE);  // [CH] flags must be zero
    auto bad = prop;
    bad.location.id = 2;
    EXPECT_EQ(a.cuMemCreate(&h, 2 * kMiB, &bad, 0), CUDA_ERROR_INVALID_DEVICE);
    bad = prop;
    bad.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;  // [CH] INVALID_VALUE
    EXPECT_EQ(a.cuMemCreate(&h, 2 * kMiB, &bad, 0), CUDA_ERROR_INVALID_VALUE);
    bad = prop;
    bad.type = CU_MEM_ALLOCATION_TYPE_MANAGED;
    EXPECT_EQ(a.cuMemCreate(&h, 2 * kMiB, &bad, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(device_used(0), 0u);
    EXPECT_EQ(a.cuMemRelease(0x12345), CUDA_ERROR_INVALID_VALUE);  // never created
    CUdeviceptr va = 0;
    EXPECT_EQ(a.cuMemAddressReserve(nullptr, 4 * kMiB, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemAddressReserve(&va, 0, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemAddressReserve(&va, 100, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);  // not a page multiple
    EXPECT_EQ(a.cuMemAddressReserve(&va, 4 * kMiB, 3 * kMiB, 0, 0), CUDA_ERROR_INVALID_VALUE);  // not a power of two
    EXPECT_EQ(a.cuMemAddressReserve(&va, 4 * kMiB, 0, 0, 1), CUDA_ERROR_INVALID_VALUE);
    ASSERT_EQ(a.cuMemAddressReserve(&va, 8 * kMiB, 1ULL << 30, 0, 0), CUDA_SUCCESS);
    EXPECT_EQ(va % (1ULL << 30), 0u);
    ASSERT_EQ(a.cuMemCreate(&h, 4 * kMiB, &prop, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemMap(va, 4 * kMiB, 2 * kMiB, h, 0), CUDA_ERROR_INVALID_VALUE);  // [CH] offset must be zero
    EXPECT_EQ(a.cuMemMap(va, 4 * kMiB, 0, h, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemMap(va, 6 * kMiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  // larger than the allocation
    EXPECT_EQ(a.cuMemMap(va + 6 * kMiB, 4 * kMiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  // past the reservation
    EXPECT_EQ(a.cuMemMap(va + 4096, 2 * kMiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  // unaligned
    EXPECT_EQ(a.cuMemMap(0x1000000000ULL, 2 * kMiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  // not reserved
    EXPECT_EQ(a.cuMemMap(va, 2 * kMiB, 0, h + 1, 0), CUDA_ERROR_INVALID_VALUE);  // no such handle
    ASSERT_EQ(a.cuMemMap(va, 4 * kMiB, 0, h, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemMap(va + 2 * kMiB, 2 * kMiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  // already mapped
    ASSERT_EQ(a.cuMemMap(va + 4 * kMiB, 2 * kMiB, 0, h, 0), CUDA_SUCCESS);  // the same handle, elsewhere
    EXPECT_EQ(a.cuMemUnmap(va, 2 * kMiB), CUDA_ERROR_INVALID_VALUE);  // [CH] never part of a mapping
    EXPECT_EQ(a.cuMemUnmap(va + 2 * kMiB, 2 * kMiB), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemUnmap(va, 8 * kMiB), CUDA_ERROR_INVALID_VALUE);  // past the mapped ranges
    EXPECT_EQ(a.cuMemAddressFree(va, 8 * kMiB), CUDA_ERROR_INVALID_VALUE);  // sim: still mapped
    EXPECT_EQ(a.cuMemAddressFree(va, 4 * kMiB), CUDA_ERROR_INVALID_VALUE);  // [CH] the size must match
    char host[16] = {};
    context(0);
    EXPECT_EQ(a.cuMemcpyHtoD_v2(va + 4 * kMiB + 100, host, sizeof host), CUDA_SUCCESS);  // mapped memory
    ASSERT_EQ(a.cuMemRelease(h), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemMap(va + 6 * kMiB, 2 * kMiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  // released
    EXPECT_EQ(a.cuMemUnmap(va, 6 * kMiB), CUDA_SUCCESS);  // sim: adjacent whole mappings in one call
    EXPECT_EQ(device_used(0), 0u);
    EXPECT_EQ(a.cuMemUnmap(va, 4 * kMiB), CUDA_ERROR_INVALID_VALUE);  // twice
    EXPECT_EQ(a.cuMemAddressFree(va, 8 * kMiB), CUDA_SUCCESS);
    std::size_t g = 0;
    EXPECT_EQ(a.cuMemGetAllocationGranularity(nullptr, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemGetAllocationGranularity(&g, nullptr, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), CUDA_SUCCESS);
    EXPECT_EQ(g, 2 * kMiB);
  });
}

TEST(CudaSimVmm, SharedWithOtherProcessesAndReturnedWhenAProcessDies) {
  tessera::testing::TempDir dir;
  in_child({devices2().c_str(), dir.path().c_str()}, [&] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    expect_exit_ok(spawn({devices2().c_str(), dir.path().c_str()}, [&] {
      ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
      const auto prop = device_prop(0);
      CUmemGenericAllocationHandle h = 0;
      ASSERT_EQ(a.cuMemCreate(&h, 600 * kMiB, &prop, 0), CUDA_SUCCESS);
      EXPECT_EQ(device_used(0), 600 * kMiB);
    }));  // exits holding it
    unsigned long long used = 0, peak = 0;
    EXPECT_EQ(a.tesseraCudaSimUsage(0, nullptr, &used, &peak), CUDA_SUCCESS);
    EXPECT_EQ(used, 0u);
    EXPECT_EQ(peak, 600 * kMiB);
  });
}

// ---------------------------------------------------------------- pools and stream-ordered allocation

cuuint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute attr) {
  cuuint64_t v = ~0ULL;
  EXPECT_EQ(api().cuMemPoolGetAttribute(pool, attr, &v), CUDA_SUCCESS) << attr;
  return v;
}

CUmemoryPool default_pool(CUdevice dev) {
  CUmemoryPool p = nullptr;
  EXPECT_EQ(api().cuDeviceGetDefaultMemPool(&p, dev), CUDA_SUCCESS);
  return p;
}

TEST(CudaSimPool, GrowsInGranulesKeepsFreedMemoryAndReleasesItAtSynchronize) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    context(0);
    CUmemoryPool pool = default_pool(0);
    CUmemoryPool current = nullptr;
    ASSERT_EQ(a.cuDeviceGetMemPool(&current, 0), CUDA_SUCCESS);
    EXPECT_EQ(current, pool);  // [CH] by default the current pool is the default one
    EXPECT_NE(default_pool(1), pool);
    EXPECT_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0u);  // [CH] default 0
    CUdeviceptr p1 = 0, p2 = 0, p3 = 0;
    ASSERT_EQ(a.cuMemAllocAsync(&p1, 1000, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 2 * kMiB);  // one granule reserved for 1000 bytes
    EXPECT_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 * kMiB);
    EXPECT_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 1000u);
    ASSERT_EQ(a.cuMemAllocAsync_ptsz(&p2, kMiB, TESSERA_CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 2 * kMiB);  // fits the granule held
    ASSERT_EQ(a.cuMemAllocAsync(&p3, 3 * kMiB, TESSERA_CU_STREAM_LEGACY), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 6 * kMiB);  // 1000 + 4 MiB of use: three granules
    EXPECT_EQ(free_now(), 1 * kGiB - 6 * kMiB);
    EXPECT_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 6 * kMiB);
    EXPECT_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 4 * kMiB + 1000);
    // Freed memory stays reserved until a synchronize.
    ASSERT_EQ(a.cuMemFreeAsync(p3, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemFreeAsync_ptsz(p2, TESSERA_CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 6 * kMiB);
    EXPECT_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 1000u);
    EXPECT_EQ(a.cuMemFreeAsync(p3, nullptr), CUDA_ERROR_INVALID_VALUE);  // freed twice
    ASSERT_EQ(a.cuStreamSynchronize(nullptr), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 2 * kMiB);  // what the outstanding 1000 bytes need
    EXPECT_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 * kMiB);
    EXPECT_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 6 * kMiB);  // a watermark stays
    // A release threshold keeps that much across a synchronize.
    cuuint64_t threshold = 5 * kMiB;
    ASSERT_EQ(a.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemAllocAsync(&p2, 9 * kMiB, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 10 * kMiB);
    ASSERT_EQ(a.cuMemFree_v2(p2), CUDA_SUCCESS);  // [CH] cuMemFree takes pool pointers too
    ASSERT_EQ(a.cuCtxSynchronize(), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 4 * kMiB);  // sim: the threshold rounded down to a granule
    ASSERT_EQ(a.cuStreamSynchronize_ptsz(TESSERA_CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 4 * kMiB);
    // Trim: down to the minimum asked, never below what allocations hold.
    ASSERT_EQ(a.cuMemPoolTrimTo(pool, 3 * kMiB), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 4 * kMiB);  // at least 3 MiB: two granules
    ASSERT_EQ(a.cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 2 * kMiB);  // p1's granule
    ASSERT_EQ(a.cuMemFreeAsync(p1, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemPoolTrimTo(pool, 0), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 0u);
    // The high watermarks reset to zero only.
    cuuint64_t zero = 0, one = 1;
    EXPECT_EQ(a.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &one), CUDA_ERROR_INVALID_VALUE);
    ASSERT_EQ(a.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero), CUDA_SUCCESS);
    EXPECT_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 0u);
    EXPECT_EQ(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0u);
    EXPECT_EQ(a.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &zero), CUDA_ERROR_INVALID_VALUE);
    int reuse = 0;
    EXPECT_EQ(a.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse), CUDA_SUCCESS);
    EXPECT_EQ(reuse, 1);  // [CH] default enabled
    reuse = 0;
    ASSERT_EQ(a.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse), CUDA_SUCCESS);
    reuse = 1;
    EXPECT_EQ(a.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &reuse), CUDA_SUCCESS);
    EXPECT_EQ(reuse, 0);
  });
}

TEST(CudaSimPool, CreatedPoolsCurrentPoolsAndDestroyWithOutstandingAllocations) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    CUcontext c = context(0);
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 1;
    CUmemoryPool mine = nullptr;
    ASSERT_EQ(a.cuMemPoolCreate(&mine, &props), CUDA_SUCCESS);
    EXPECT_EQ(a.cuDeviceSetMemPool(0, mine), CUDA_ERROR_INVALID_VALUE);  // [CH] local to the device
    ASSERT_EQ(a.cuDeviceSetMemPool(1, mine), CUDA_SUCCESS);
    CUmemoryPool current = nullptr;
    ASSERT_EQ(a.cuDeviceGetMemPool(&current, 1), CUDA_SUCCESS);
    EXPECT_EQ(current, mine);
    // CUDA 13's location-keyed forms: the same current pool for a device location and a pinned type.
    CUmemLocation one{CU_MEM_LOCATION_TYPE_DEVICE, 1}, zero{CU_MEM_LOCATION_TYPE_DEVICE, 0};
    CUmemLocation host{CU_MEM_LOCATION_TYPE_HOST, 0}, nine{CU_MEM_LOCATION_TYPE_DEVICE, 9};
    ASSERT_EQ(a.cuMemGetMemPool(&current, &one, CU_MEM_ALLOCATION_TYPE_PINNED), CUDA_SUCCESS);
    EXPECT_EQ(current, mine);
    ASSERT_EQ(a.cuMemGetDefaultMemPool(&current, &one, CU_MEM_ALLOCATION_TYPE_PINNED), CUDA_SUCCESS);
    EXPECT_EQ(current, default_pool(1));
    EXPECT_EQ(a.cuMemSetMemPool(&zero, CU_MEM_ALLOCATION_TYPE_PINNED, mine), CUDA_ERROR_INVALID_VALUE);  // [CH] the pool's location
    EXPECT_EQ(a.cuMemSetMemPool(&nine, CU_MEM_ALLOCATION_TYPE_PINNED, mine), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemSetMemPool(&one, CU_MEM_ALLOCATION_TYPE_INVALID, mine), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemSetMemPool(nullptr, CU_MEM_ALLOCATION_TYPE_PINNED, mine), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemGetMemPool(&current, &host, CU_MEM_ALLOCATION_TYPE_PINNED), CUDA_ERROR_NOT_SUPPORTED);  // sim: no host pools
    ASSERT_EQ(a.cuMemSetMemPool(&one, CU_MEM_ALLOCATION_TYPE_PINNED, default_pool(1)), CUDA_SUCCESS);
    ASSERT_EQ(a.cuDeviceGetMemPool(&current, 1), CUDA_SUCCESS);
    EXPECT_EQ(current, default_pool(1)) << "cuMemSetMemPool sets what cuDeviceGetMemPool reads";
    ASSERT_EQ(a.cuMemSetMemPool(&one, CU_MEM_ALLOCATION_TYPE_PINNED, mine), CUDA_SUCCESS);
    // From a device-1 pool on a stream of device 0 ([CH]: allowed).
    CUdeviceptr p = 0, q = 0;
    ASSERT_EQ(a.cuMemAllocFromPoolAsync(&p, 3 * kMiB, mine, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemAllocFromPoolAsync_ptsz(&q, kMiB, mine, TESSERA_CU_STREAM_PER_THREAD), CUDA_SUCCESS);
    EXPECT_EQ(device_used(1), 4 * kMiB);
    EXPECT_EQ(device_used(0), 0u);
    // Pool memory belongs to no context.
    EXPECT_EQ(a.cuCtxDestroy_v2(c), CUDA_SUCCESS);
    EXPECT_EQ(device_used(1), 4 * kMiB);
    context(1);
    // [CH] destroyed with outstanding allocations: returns at once, frees with the last one.
    ASSERT_EQ(a.cuMemPoolDestroy(mine), CUDA_SUCCESS);
    ASSERT_EQ(a.cuDeviceGetMemPool(&current, 1), CUDA_SUCCESS);
    EXPECT_EQ(current, default_pool(1));  // [CH] the default pool is current again
    EXPECT_EQ(a.cuMemPoolDestroy(mine), CUDA_ERROR_INVALID_VALUE);  // twice
    CUdeviceptr r = 0;
    EXPECT_EQ(a.cuMemAllocFromPoolAsync(&r, kMiB, mine, nullptr), CUDA_ERROR_INVALID_VALUE);
    cuuint64_t v = 0;
    EXPECT_EQ(a.cuMemPoolGetAttribute(mine, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(device_used(1), 4 * kMiB);
    ASSERT_EQ(a.cuMemFreeAsync(p, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(device_used(1), 4 * kMiB);
    ASSERT_EQ(a.cuMemFreeAsync(q, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(device_used(1), 0u);  // the last one: everything back
    // Without outstanding allocations the memory goes at once.
    CUmemoryPool idle = nullptr;
    ASSERT_EQ(a.cuMemPoolCreate(&idle, &props), CUDA_SUCCESS);
    cuuint64_t keep = 1 * kGiB;
    ASSERT_EQ(a.cuMemPoolSetAttribute(idle, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemAllocFromPoolAsync(&p, 7 * kMiB, idle, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemFreeAsync(p, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamSynchronize(nullptr), CUDA_SUCCESS);
    EXPECT_EQ(device_used(1), 8 * kMiB);  // under the threshold: kept
    ASSERT_EQ(a.cuMemPoolDestroy(idle), CUDA_SUCCESS);
    EXPECT_EQ(device_used(1), 0u);
    // [CH] a default pool cannot be destroyed.
    EXPECT_EQ(a.cuMemPoolDestroy(default_pool(1)), CUDA_ERROR_INVALID_VALUE);
    // [CH] maxSize bounds a created pool.
    props.maxSize = 4 * kMiB;
    CUmemoryPool small = nullptr;
    ASSERT_EQ(a.cuMemPoolCreate(&small, &props), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemAllocFromPoolAsync(&p, 4 * kMiB + 1, small, nullptr), CUDA_ERROR_OUT_OF_MEMORY);
    ASSERT_EQ(a.cuMemAllocFromPoolAsync(&p, 4 * kMiB, small, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemAllocFromPoolAsync(&q, 1, small, nullptr), CUDA_ERROR_OUT_OF_MEMORY);
    // Past the device's memory: OUT_OF_MEMORY, nothing charged.
    EXPECT_EQ(a.cuMemAllocAsync(&q, 2 * kGiB, nullptr), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(device_used(1), 4 * kMiB);
  });
}

TEST(CudaSimPool, BadArguments) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    CUdeviceptr p = 0;
    CUmemoryPool pool = nullptr;
    EXPECT_EQ(a.cuMemAllocAsync(&p, kMiB, nullptr), CUDA_ERROR_NOT_INITIALIZED);
    EXPECT_EQ(a.cuDeviceGetDefaultMemPool(&pool, 0), CUDA_ERROR_NOT_INITIALIZED);
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    // [CH] the default stream with no current context.
    EXPECT_EQ(a.cuMemAllocAsync(&p, kMiB, nullptr), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(a.cuMemAllocAsync_ptsz(&p, kMiB, TESSERA_CU_STREAM_PER_THREAD), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(a.cuMemFreeAsync(0x1000, nullptr), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(a.cuDeviceGetDefaultMemPool(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuDeviceGetDefaultMemPool(&pool, 2), CUDA_ERROR_INVALID_DEVICE);
    EXPECT_EQ(a.cuDeviceGetMemPool(&pool, 2), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuDeviceGetMemPool(nullptr, 0), CUDA_ERROR_INVALID_VALUE);
    context(0);
    EXPECT_EQ(a.cuMemAllocAsync(nullptr, kMiB, nullptr), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemAllocAsync(&p, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemAllocAsync(&p, kMiB, reinterpret_cast<CUstream>(0x777)), CUDA_ERROR_INVALID_VALUE);
    auto bogus = reinterpret_cast<CUmemoryPool>(0x4242);
    EXPECT_EQ(a.cuMemAllocFromPoolAsync(&p, kMiB, bogus, nullptr), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemAllocFromPoolAsync(&p, kMiB, nullptr, nullptr), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemPoolDestroy(bogus), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemPoolTrimTo(bogus, 0), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuDeviceSetMemPool(0, bogus), CUDA_ERROR_INVALID_VALUE);
    cuuint64_t v = 0;
    EXPECT_EQ(a.cuMemPoolGetAttribute(bogus, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemPoolGetAttribute(default_pool(0), CU_MEMPOOL_ATTR_USED_MEM_CURRENT, nullptr),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemPoolGetAttribute(default_pool(0), static_cast<CUmemPool_attribute>(99), &v),
              CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemFreeAsync(0xdead0000ULL, nullptr), CUDA_ERROR_INVALID_VALUE);
    CUmemPoolProps props{};
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 2;
    EXPECT_EQ(a.cuMemPoolCreate(&pool, &props), CUDA_ERROR_INVALID_VALUE);
    props.location.id = 0;
    EXPECT_EQ(a.cuMemPoolCreate(nullptr, &props), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMemPoolCreate(&pool, nullptr), CUDA_ERROR_INVALID_VALUE);
    props.location.type = CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;  // [CH] INVALID_VALUE
    EXPECT_EQ(a.cuMemPoolCreate(&pool, &props), CUDA_ERROR_INVALID_VALUE);
    props.location.type = CU_MEM_LOCATION_TYPE_HOST;  // sim: host pools are not modelled
    EXPECT_EQ(a.cuMemPoolCreate(&pool, &props), CUDA_ERROR_NOT_SUPPORTED);
    // A cuMemAlloc pointer freed by cuMemFreeAsync (sim) is freed at once.
    ASSERT_EQ(a.cuMemAlloc_v2(&p, kMiB), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemFreeAsync(p, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 0u);
  });
}

TEST(CudaSimPool, AForkedChildHasNoneOfItsParentsPools) {
  tessera::testing::TempDir dir;
  in_child({nullptr, dir.path().c_str()}, [&] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    context(0);
    CUdeviceptr p = 0;
    ASSERT_EQ(a.cuMemAllocAsync(&p, 3 * kMiB, nullptr), CUDA_SUCCESS);
    CUmemoryPool parent = default_pool(0);
    expect_exit_ok(spawn({nullptr, dir.path().c_str()}, [&] {
      ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
      context(0);
      cuuint64_t v = 0;
      EXPECT_EQ(a.cuMemPoolGetAttribute(parent, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &v), CUDA_ERROR_INVALID_VALUE);
      EXPECT_NE(default_pool(0), parent);
      EXPECT_EQ(a.cuMemFreeAsync(p, nullptr), CUDA_ERROR_INVALID_VALUE);
      EXPECT_EQ(device_used(0), 4 * kMiB);  // the parent's granules, seen through the shared file
    }));
    EXPECT_EQ(device_used(0), 4 * kMiB);
  });
}

// ---------------------------------------------------------------- arrays

CUDA_ARRAY3D_DESCRIPTOR desc3(std::size_t w, std::size_t h, std::size_t d, CUarray_format f, unsigned nc,
                              unsigned flags = 0) {
  return CUDA_ARRAY3D_DESCRIPTOR{w, h, d, f, nc, flags};
}

TEST(CudaSimArray, SizesFollowTheDocumentedRule) {
  in_child({}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    context(0);
    struct Case {
      CUDA_ARRAY3D_DESCRIPTOR d;
      std::uint64_t bytes;
    };
    const Case cases[] = {
        {desc3(2048, 0, 0, CU_AD_FORMAT_FLOAT, 1), 2 * kMiB},                 // 8 KiB, one granule
        {desc3(1024, 1024, 0, CU_AD_FORMAT_FLOAT, 1), 4 * kMiB},              // exactly 4 MiB
        {desc3(1024, 1024, 0, CU_AD_FORMAT_HALF, 4), 8 * kMiB},
        {desc3(1000, 1000, 0, CU_AD_FORMAT_UNSIGNED_INT8, 2), 2 * kMiB},      // 2,000,000 bytes
        {desc3(1025, 1024, 0, CU_AD_FORMAT_SIGNED_INT32, 1), 6 * kMiB},       // just over 4 MiB
        {desc3(256, 256, 64, CU_AD_FORMAT_UNSIGNED_INT16, 1), 8 * kMiB},      // 3D
        {desc3(512, 0, 10, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_LAYERED), 2 * kMiB},  // 1D layered: 80 KiB
        {desc3(512, 512, 6, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_CUBEMAP), 6 * kMiB},  // six faces of 1 MiB
        {desc3(512, 512, 12, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_CUBEMAP | CUDA_ARRAY3D_LAYERED), 12 * kMiB},
        {desc3(4096, 4096, 0, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_SURFACE_LDST), 256 * kMiB},
        {desc3(4096, 4096, 0, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_SPARSE), 0},
        {desc3(4096, 4096, 0, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_DEFERRED_MAPPING), 0},
    };
    std::uint64_t total = 0;
    std::vector<CUarray> made;
    for (const Case& c : cases) {
      CUarray h = nullptr;
      ASSERT_EQ(a.cuArray3DCreate_v2(&h, &c.d), CUDA_SUCCESS) << c.d.Width << "x" << c.d.Height;
      total += c.bytes;
      EXPECT_EQ(device_used(0), total) << c.d.Width << "x" << c.d.Height << "x" << c.d.Depth << " flags " << c.d.Flags;
      made.push_back(h);
    }
    // The 2D calls, and the 2000 ABIs with 32-bit descriptors.
    CUarray h2 = nullptr, h1 = nullptr, h31 = nullptr;
    const CUDA_ARRAY_DESCRIPTOR d2{1024, 1024, CU_AD_FORMAT_FLOAT, 2};
    ASSERT_EQ(a.cuArrayCreate_v2(&h2, &d2), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), total + 8 * kMiB);
    const CUDA_ARRAY_DESCRIPTOR_v1 d1{1024, 1024, CU_AD_FORMAT_UNSIGNED_INT8, 1};
    ASSERT_EQ(a.cuArrayCreate(&h1, &d1), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), total + 10 * kMiB);
    const CUDA_ARRAY3D_DESCRIPTOR_v1 d31{128, 128, 128, CU_AD_FORMAT_FLOAT, 1, 0};
    ASSERT_EQ(a.cuArray3DCreate(&h31, &d31), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), total + 18 * kMiB);
    for (CUarray h : {h2, h1, h31}) EXPECT_EQ(a.cuArrayDestroy(h), CUDA_SUCCESS);
    for (CUarray h : made) EXPECT_EQ(a.cuArrayDestroy(h), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 0u);
    EXPECT_EQ(a.cuArrayDestroy(made[0]), CUDA_ERROR_INVALID_HANDLE);  // twice
  });
}

TEST(CudaSimArray, MipmappedArraysAreTheSumOfTheirLevels) {
  in_child({}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    context(0);
    // 2048² float4 = 64 MiB, then 16, 4, 1 (→2), 256 KiB (→2), …: each level rounded to 2 MiB.
    auto d = desc3(2048, 2048, 0, CU_AD_FORMAT_FLOAT, 4);
    CUmipmappedArray m = nullptr;
    ASSERT_EQ(a.cuMipmappedArrayCreate(&m, &d, 3), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), (64 + 16 + 4) * kMiB);
    ASSERT_EQ(a.cuMipmappedArrayDestroy(m), CUDA_SUCCESS);
    // [CH] levels clamp to 1 + floor(log2(2048)) = 12: 64+16+4 and nine levels of one granule.
    ASSERT_EQ(a.cuMipmappedArrayCreate(&m, &d, 100), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), (84 + 9 * 2) * kMiB);
    ASSERT_EQ(a.cuMipmappedArrayDestroy(m), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMipmappedArrayCreate(&m, &d, 0), CUDA_SUCCESS);  // clamped up to 1
    EXPECT_EQ(device_used(0), 64 * kMiB);
    ASSERT_EQ(a.cuMipmappedArrayDestroy(m), CUDA_SUCCESS);
    // A 3D one halves its depth; a layered one keeps its layers.
    auto v = desc3(256, 256, 256, CU_AD_FORMAT_FLOAT, 1);  // 64 MiB, 8 MiB, 1 MiB→2
    ASSERT_EQ(a.cuMipmappedArrayCreate(&m, &v, 3), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 74 * kMiB);
    ASSERT_EQ(a.cuMipmappedArrayDestroy(m), CUDA_SUCCESS);
    auto layered = desc3(256, 256, 256, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_LAYERED);  // 64, 16, 4 MiB
    ASSERT_EQ(a.cuMipmappedArrayCreate(&m, &layered, 3), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 84 * kMiB);
    // An array handle is not a mipmapped one, nor the reverse.
    EXPECT_EQ(a.cuArrayDestroy(reinterpret_cast<CUarray>(m)), CUDA_ERROR_INVALID_HANDLE);
    ASSERT_EQ(a.cuMipmappedArrayDestroy(m), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMipmappedArrayDestroy(m), CUDA_ERROR_INVALID_HANDLE);
    auto sparse = desc3(2048, 2048, 0, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_SPARSE);
    ASSERT_EQ(a.cuMipmappedArrayCreate(&m, &sparse, 4), CUDA_SUCCESS);
    auto deferred = desc3(2048, 2048, 0, CU_AD_FORMAT_FLOAT, 4, CUDA_ARRAY3D_DEFERRED_MAPPING);
    CUmipmappedArray m2 = nullptr;
    ASSERT_EQ(a.cuMipmappedArrayCreate(&m2, &deferred, 4), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 0u);
    CUarray arr = nullptr;
    const CUDA_ARRAY_DESCRIPTOR small{16, 16, CU_AD_FORMAT_FLOAT, 1};
    ASSERT_EQ(a.cuArrayCreate_v2(&arr, &small), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMipmappedArrayDestroy(reinterpret_cast<CUmipmappedArray>(arr)), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(a.cuMipmappedArrayDestroy(m), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMipmappedArrayDestroy(m2), CUDA_SUCCESS);
  });
}

TEST(CudaSimArray, ArraysDieWithTheirContext) {
  in_child({}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    CUcontext c0 = context(0);
    auto d = desc3(1024, 1024, 0, CU_AD_FORMAT_FLOAT, 1);
    CUarray gone = nullptr, kept = nullptr;
    CUmipmappedArray mgone = nullptr;
    ASSERT_EQ(a.cuArray3DCreate_v2(&gone, &d), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMipmappedArrayCreate(&mgone, &d, 2), CUDA_SUCCESS);
    context(0);
    ASSERT_EQ(a.cuArray3DCreate_v2(&kept, &d), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), (4 + 4 + 2 + 4) * kMiB);
    EXPECT_EQ(a.cuCtxDestroy_v2(c0), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 4 * kMiB);
    EXPECT_EQ(a.cuArrayDestroy(gone), CUDA_ERROR_CONTEXT_IS_DESTROYED);  // [CH] listed for this case
    EXPECT_EQ(a.cuMipmappedArrayDestroy(mgone), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    // The primary context's arrays go at its reset.
    CUcontext p = nullptr;
    ASSERT_EQ(a.cuDevicePrimaryCtxRetain(&p, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuCtxSetCurrent(p), CUDA_SUCCESS);
    CUarray prim = nullptr;
    ASSERT_EQ(a.cuArray3DCreate_v2(&prim, &d), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 8 * kMiB);
    EXPECT_EQ(a.cuDevicePrimaryCtxReset_v2(0), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 4 * kMiB);
    EXPECT_EQ(a.cuArrayDestroy(kept), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 0u);
  });
}

TEST(CudaSimArray, BadArguments) {
  in_child({}, [] {
    const Api& a = api();
    CUarray h = nullptr;
    auto ok = desc3(64, 64, 0, CU_AD_FORMAT_FLOAT, 1);
    EXPECT_EQ(a.cuArray3DCreate_v2(&h, &ok), CUDA_ERROR_NOT_INITIALIZED);
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuArray3DCreate_v2(&h, &ok), CUDA_ERROR_INVALID_CONTEXT);
    context(0);
    EXPECT_EQ(a.cuArray3DCreate_v2(nullptr, &ok), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuArray3DCreate_v2(&h, nullptr), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuArrayCreate_v2(&h, nullptr), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuArrayCreate(&h, nullptr), CUDA_ERROR_INVALID_VALUE);
    CUmipmappedArray m = nullptr;
    EXPECT_EQ(a.cuMipmappedArrayCreate(&m, nullptr, 1), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuMipmappedArrayCreate(nullptr, &ok, 1), CUDA_ERROR_INVALID_VALUE);
    const CUDA_ARRAY3D_DESCRIPTOR bad[] = {
        desc3(0, 64, 0, CU_AD_FORMAT_FLOAT, 1),                          // no width
        desc3(64, 64, 0, CU_AD_FORMAT_FLOAT, 3),                         // [CH] 1, 2 or 4 channels
        desc3(64, 64, 0, CU_AD_FORMAT_FLOAT, 0),
        desc3(64, 0, 8, CU_AD_FORMAT_FLOAT, 1),                          // depth without height, not layered
        desc3(64, 32, 6, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_CUBEMAP),   // cubemap not square
        desc3(64, 64, 5, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_CUBEMAP),   // not six faces
        desc3(64, 64, 12, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_CUBEMAP),  // twelve only when layered
        desc3(64, 64, 9, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_CUBEMAP | CUDA_ARRAY3D_LAYERED),
    };
    for (const auto& d : bad) {
      EXPECT_EQ(a.cuArray3DCreate_v2(&h, &d), CUDA_ERROR_INVALID_VALUE) << d.Width << "x" << d.Height << "x" << d.Depth;
      EXPECT_EQ(a.cuMipmappedArrayCreate(&m, &d, 2), CUDA_ERROR_INVALID_VALUE) << d.Width;
    }
    auto nv12 = desc3(64, 64, 0, CU_AD_FORMAT_NV12, 1);  // sim: not a modelled format
    EXPECT_EQ(a.cuArray3DCreate_v2(&h, &nv12), CUDA_ERROR_NOT_SUPPORTED);
    auto huge = desc3(SIZE_MAX / 2, 4, 0, CU_AD_FORMAT_FLOAT, 4);
    EXPECT_EQ(a.cuArray3DCreate_v2(&h, &huge), CUDA_ERROR_OUT_OF_MEMORY);
    auto big = desc3(1ULL << 20, 1ULL << 20, 0, CU_AD_FORMAT_FLOAT, 1);  // 4 TiB
    EXPECT_EQ(a.cuArray3DCreate_v2(&h, &big), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(device_used(0), 0u);
    EXPECT_EQ(a.cuArrayDestroy(nullptr), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(a.cuArrayDestroy(reinterpret_cast<CUarray>(0x1234)), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(a.cuMipmappedArrayDestroy(nullptr), CUDA_ERROR_INVALID_HANDLE);
  });
}

// ---------------------------------------------------------------- pool steps, contexts' and modules' own memory

TEST(CudaSimPool, GrowsAndShrinksInTheConfiguredStep) {
  in_child({devices2().c_str()}, [] {
    setenv("TESSERA_SIM_CUDA_POOL_STEP", "32M", 1);
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    context(0);
    CUdeviceptr p1 = 0, p2 = 0, p3 = 0;
    ASSERT_EQ(a.cuMemAllocAsync(&p1, kMiB, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 32 * kMiB);  // a 1 MiB request, a 32 MiB step
    EXPECT_EQ(pool_attr(default_pool(0), CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 32 * kMiB);
    ASSERT_EQ(a.cuMemAllocAsync(&p2, 20 * kMiB, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 32 * kMiB);  // fits what the pool holds
    ASSERT_EQ(a.cuMemAllocAsync(&p3, 20 * kMiB, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 64 * kMiB);  // one more step
    ASSERT_EQ(a.cuMemFreeAsync(p3, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamSynchronize(nullptr), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 32 * kMiB);  // released in steps
    ASSERT_EQ(a.cuMemFreeAsync(p2, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemFreeAsync(p1, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemPoolTrimTo(default_pool(0), 0), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 0u);
  });
  in_child({devices2().c_str()}, [] {
    setenv("TESSERA_SIM_CUDA_POOL_STEP", "1G", 1);
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    context(1);
    CUdeviceptr p = 0;
    ASSERT_EQ(a.cuMemAllocAsync(&p, kMiB, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(device_used(1), 1 * kGiB);
    context(0);  // a 1 GiB device cannot hold more than one step
    ASSERT_EQ(a.cuMemAllocAsync(&p, kMiB, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(a.cuMemAllocAsync(&p, 1 * kGiB, nullptr), CUDA_ERROR_OUT_OF_MEMORY);
  });
  for (const char* bad : {"3M", "0", "x"})
    in_child({}, [bad] {
      setenv("TESSERA_SIM_CUDA_POOL_STEP", bad, 1);
      EXPECT_EQ(api().cuInit(0), CUDA_ERROR_UNKNOWN) << bad;  // not a multiple of 2 MiB, or not a size
    });
}

// TESSERA_SIM_CUDA_LOAD_US: a module load takes that long, and other
// threads' calls go on meanwhile (the driver is not held).
TEST(CudaSimContext, AModuleLoadTakesItsTimeWithoutHoldingTheDriver) {
  in_child({devices2().c_str()}, [] {
    setenv("TESSERA_SIM_CUDA_LOAD_US", "200000", 1);
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    CUcontext c = context(0);
    std::atomic<bool> loaded{false};
    std::atomic<int> calls_meanwhile{0};
    std::thread other([&] {
      ASSERT_EQ(a.cuCtxSetCurrent(c), CUDA_SUCCESS);
      while (!loaded.load()) {
        CUdeviceptr p = 0;
        if (a.cuMemAlloc_v2(&p, kMiB) == CUDA_SUCCESS && a.cuMemFree_v2(p) == CUDA_SUCCESS) ++calls_meanwhile;
      }
    });
    const auto start = std::chrono::steady_clock::now();
    CUmodule m = nullptr;
    EXPECT_EQ(a.cuModuleLoadData(&m, "image"), CUDA_SUCCESS);
    const auto took = std::chrono::steady_clock::now() - start;
    loaded = true;
    other.join();
    EXPECT_GE(took, std::chrono::milliseconds(200));
    EXPECT_GT(calls_meanwhile.load(), 0) << "the driver was held for the load's time";
  });
  for (const char* bad : {"x", "-1", "", "10000001", "1.5"})
    in_child({}, [bad] {
      setenv("TESSERA_SIM_CUDA_LOAD_US", bad, 1);
      EXPECT_EQ(api().cuInit(0), CUDA_ERROR_UNKNOWN) << "'" << bad << "'";
    });
}

TEST(CudaSimContext, AContextAndAModuleHoldMemoryOfTheirOwnAsTheDriverReports) {
  in_child({devices2().c_str()}, [] {
    setenv("TESSERA_SIM_CUDA_CONTEXT_BYTES", "300M", 1);
    setenv("TESSERA_SIM_CUDA_MODULE_BYTES", "64M", 1);
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    CUcontext primary = nullptr;
    ASSERT_EQ(a.cuDevicePrimaryCtxRetain(&primary, 0), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 300 * kMiB);
    ASSERT_EQ(a.cuCtxSetCurrent(primary), CUDA_SUCCESS);
    EXPECT_EQ(free_now(), 1 * kGiB - 300 * kMiB);  // the driver's own free memory shows it
    CUcontext again = nullptr;
    ASSERT_EQ(a.cuDevicePrimaryCtxRetain(&again, 0), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 300 * kMiB);  // a second retain makes nothing new
    CUcontext created = context(0);
    EXPECT_EQ(device_used(0), 600 * kMiB);
    CUmodule m = nullptr;
    ASSERT_EQ(a.cuModuleLoadData(&m, "image"), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 664 * kMiB);
    EXPECT_EQ(a.cuModuleLoadData(&m, nullptr), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(a.cuModuleLoad(&m, "/nonexistent/module.cubin"), CUDA_ERROR_FILE_NOT_FOUND);
    CUmodule m2 = nullptr;
    ASSERT_EQ(a.cuModuleLoadData(&m2, "image"), CUDA_SUCCESS);
    ASSERT_EQ(a.cuModuleUnload(m2), CUDA_SUCCESS);
    EXPECT_EQ(a.cuModuleUnload(m2), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(device_used(0), 664 * kMiB);
    ASSERT_EQ(a.cuCtxDestroy_v2(created), CUDA_SUCCESS);  // with its module
    EXPECT_EQ(device_used(0), 300 * kMiB);
    EXPECT_EQ(a.cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);
    CUcontext c2 = nullptr, c3 = nullptr;
    ASSERT_EQ(a.cuCtxCreate_v2(&c2, 0, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuCtxCreate_v2(&c3, 0, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuCtxCreate_v2(&c3, 0, 0), CUDA_ERROR_OUT_OF_MEMORY);  // four contexts do not fit 1 GiB
    ASSERT_EQ(a.cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuDevicePrimaryCtxRelease_v2(0), CUDA_SUCCESS);  // the last release
    EXPECT_EQ(device_used(0), 600 * kMiB);
  });
}

TEST(CudaSimContext, PushAndPopTheCallingThreadsStack) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    CUcontext c0 = context(0);
    CUcontext c1 = nullptr, popped = nullptr, now = nullptr;
    ASSERT_EQ(a.cuDevicePrimaryCtxRetain(&c1, 1), CUDA_SUCCESS);
    ASSERT_EQ(a.cuCtxPushCurrent_v2(c1), CUDA_SUCCESS);
    CUdevice dev = -1;
    ASSERT_EQ(a.cuCtxGetDevice(&dev), CUDA_SUCCESS);
    EXPECT_EQ(dev, 1);
    ASSERT_EQ(a.cuCtxPopCurrent_v2(&popped), CUDA_SUCCESS);
    EXPECT_EQ(popped, c1);
    ASSERT_EQ(a.cuCtxGetCurrent(&now), CUDA_SUCCESS);
    EXPECT_EQ(now, c0);
    ASSERT_EQ(a.cuCtxPopCurrent_v2(nullptr), CUDA_SUCCESS);
    EXPECT_EQ(a.cuCtxPopCurrent_v2(&popped), CUDA_ERROR_INVALID_CONTEXT);
    EXPECT_EQ(a.cuCtxPushCurrent_v2(nullptr), CUDA_ERROR_INVALID_CONTEXT);
  });
}

// ---------------------------------------------------------------- streams, capture, graphs

TEST(CudaSimStream, ACreatedStreamRunsOnItsOwnContextsDevice) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    CUstream s = nullptr;
    EXPECT_EQ(a.cuStreamCreate(&s, 0), CUDA_ERROR_INVALID_CONTEXT);
    CUcontext c1 = context(1);
    ASSERT_EQ(a.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamCreate(&s, 4), CUDA_ERROR_INVALID_VALUE);
    context(0);  // device 0 is current now
    CUdevice dev = -1;
    CUcontext ctx = nullptr;
    ASSERT_EQ(a.cuStreamGetDevice(s, &dev), CUDA_SUCCESS);
    EXPECT_EQ(dev, 1);
    ASSERT_EQ(a.cuStreamGetCtx(s, &ctx), CUDA_SUCCESS);
    EXPECT_EQ(ctx, c1);
    ASSERT_EQ(a.cuStreamGetDevice(nullptr, &dev), CUDA_SUCCESS);
    EXPECT_EQ(dev, 0);
    CUdeviceptr p = 0;
    ASSERT_EQ(a.cuMemAllocAsync(&p, 10 * kMiB, s), CUDA_SUCCESS);  // [CH] the stream's device's pool
    EXPECT_EQ(device_used(1), 10 * kMiB);
    EXPECT_EQ(device_used(0), 0u);
    ASSERT_EQ(a.cuMemFreeAsync(p, s), CUDA_SUCCESS);
    ASSERT_EQ(a.cuStreamSynchronize(s), CUDA_SUCCESS);
    EXPECT_EQ(device_used(1), 0u);
    ASSERT_EQ(a.cuStreamDestroy_v2(s), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamDestroy_v2(s), CUDA_ERROR_INVALID_HANDLE);
    EXPECT_EQ(a.cuMemAllocAsync(&p, kMiB, s), CUDA_ERROR_INVALID_VALUE);
  });
}

CUDA_MEM_ALLOC_NODE_PARAMS alloc_node(std::uint64_t bytes, CUdevice dev = 0) {
  CUDA_MEM_ALLOC_NODE_PARAMS p{};
  p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.poolProps.location = {CU_MEM_LOCATION_TYPE_DEVICE, dev};
  p.bytesize = bytes;
  return p;
}

cuuint64_t graph_attr(CUdevice dev, CUgraphMem_attribute attr) {
  cuuint64_t v = ~0ULL;
  EXPECT_EQ(api().cuDeviceGetGraphMemAttribute(dev, attr, &v), CUDA_SUCCESS);
  return v;
}

TEST(CudaSimGraph, MemoryIsMappedAtUploadOrLaunchAndReturnedAtDestroyOrTrim) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    context(0);
    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    CUgraph g = nullptr;
    ASSERT_EQ(a.cuGraphCreate(&g, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuGraphCreate(&g, 1), CUDA_ERROR_INVALID_VALUE);
    CUgraphNode alloc = nullptr, freed = nullptr;
    auto params = alloc_node(48 * kMiB);
    ASSERT_EQ(a.cuGraphAddMemAllocNode(&alloc, g, nullptr, 0, &params), CUDA_SUCCESS);
    EXPECT_NE(params.dptr, 0u);  // [CH] the address is fixed at creation
    ASSERT_EQ(a.cuGraphAddMemFreeNode(&freed, g, &alloc, 1, params.dptr), CUDA_SUCCESS);
    EXPECT_EQ(a.cuGraphAddMemFreeNode(&freed, g, nullptr, 0, 0x1234), CUDA_ERROR_INVALID_VALUE);
    std::size_t n = 0;
    ASSERT_EQ(a.cuGraphGetNodes(g, nullptr, &n), CUDA_SUCCESS);
    EXPECT_EQ(n, 2u);
    CUgraphNode nodes[3] = {};
    n = 3;
    ASSERT_EQ(a.cuGraphGetNodes(g, nodes, &n), CUDA_SUCCESS);
    EXPECT_EQ(n, 2u);
    EXPECT_EQ(nodes[2], nullptr);
    CUgraphNodeType type = CU_GRAPH_NODE_TYPE_KERNEL;
    ASSERT_EQ(a.cuGraphNodeGetType(nodes[0], &type), CUDA_SUCCESS);
    EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_MEM_ALLOC);
    ASSERT_EQ(a.cuGraphNodeGetType(nodes[1], &type), CUDA_SUCCESS);
    EXPECT_EQ(type, CU_GRAPH_NODE_TYPE_MEM_FREE);
    CUDA_MEM_ALLOC_NODE_PARAMS read{};
    ASSERT_EQ(a.cuGraphMemAllocNodeGetParams(alloc, &read), CUDA_SUCCESS);
    EXPECT_EQ(read.bytesize, 48 * kMiB);
    EXPECT_EQ(read.poolProps.location.id, 0);
    EXPECT_EQ(read.dptr, params.dptr);
    EXPECT_EQ(device_used(0), 0u);  // a graph holds no memory
    CUgraphExec e = nullptr, second = nullptr;
    ASSERT_EQ(a.cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuGraphInstantiateWithFlags(&second, g, 0), CUDA_ERROR_NOT_SUPPORTED);  // one exec per such graph
    EXPECT_EQ(device_used(0), 0u);  // nor does instantiating it
    ASSERT_EQ(a.cuGraphUpload(e, s), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 48 * kMiB);
    EXPECT_EQ(graph_attr(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT), 48 * kMiB);
    ASSERT_EQ(a.cuGraphLaunch(e, s), CUDA_SUCCESS);
    ASSERT_EQ(a.cuGraphLaunch_ptsz(e, s), CUDA_SUCCESS);  // freed by its own free node each time
    EXPECT_EQ(device_used(0), 48 * kMiB);
    EXPECT_EQ(graph_attr(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 0u);
    EXPECT_EQ(graph_attr(0, CU_GRAPH_MEM_ATTR_USED_MEM_HIGH), 48 * kMiB);
    ASSERT_EQ(a.cuDeviceGraphMemTrim(0), CUDA_SUCCESS);  // nothing outstanding: given back
    EXPECT_EQ(device_used(0), 0u);
    ASSERT_EQ(a.cuGraphLaunch(e, nullptr), CUDA_SUCCESS);  // mapped again
    EXPECT_EQ(device_used(0), 48 * kMiB);
    ASSERT_EQ(a.cuGraphExecDestroy(e), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 0u);
    EXPECT_EQ(graph_attr(0, CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH), 48 * kMiB);
    EXPECT_EQ(a.cuGraphLaunch(e, s), CUDA_ERROR_INVALID_VALUE);
    // Past the device's memory, a launch is OUT_OF_MEMORY.
    CUgraph big = nullptr;
    ASSERT_EQ(a.cuGraphCreate(&big, 0), CUDA_SUCCESS);
    auto huge = alloc_node(2 * kGiB);
    ASSERT_EQ(a.cuGraphAddMemAllocNode(&alloc, big, nullptr, 0, &huge), CUDA_SUCCESS);
    ASSERT_EQ(a.cuGraphInstantiateWithFlags(&e, big, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuGraphLaunch(e, s), CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT_EQ(device_used(0), 0u);
  });
}

TEST(CudaSimGraph, AnOutstandingAllocationOutlivesItsExecUntilFreed) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    context(0);
    CUgraph g = nullptr;
    CUgraphNode node = nullptr;
    ASSERT_EQ(a.cuGraphCreate(&g, 0), CUDA_SUCCESS);
    auto params = alloc_node(10 * kMiB);
    ASSERT_EQ(a.cuGraphAddMemAllocNode(&node, g, nullptr, 0, &params), CUDA_SUCCESS);
    CUgraphExec e = nullptr;
    ASSERT_EQ(a.cuGraphInstantiateWithFlags(&e, g, 0), CUDA_SUCCESS);
    ASSERT_EQ(a.cuGraphLaunch(e, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(graph_attr(0, CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT), 10 * kMiB);
    EXPECT_EQ(a.cuGraphLaunch(e, nullptr), CUDA_ERROR_INVALID_VALUE);  // its allocation was never freed
    ASSERT_EQ(a.cuDeviceGraphMemTrim(0), CUDA_SUCCESS);                // in use: kept
    EXPECT_EQ(device_used(0), 10 * kMiB);
    ASSERT_EQ(a.cuGraphExecDestroy(e), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 10 * kMiB);  // outstanding: it lives on
    ASSERT_EQ(a.cuMemFreeAsync(params.dptr, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 0u);
    EXPECT_EQ(a.cuMemFree_v2(params.dptr), CUDA_ERROR_INVALID_VALUE);  // freed already
    // AUTO_FREE_ON_LAUNCH frees the previous launch's allocations.
    CUgraphExec auto_free = nullptr;
    ASSERT_EQ(a.cuGraphInstantiateWithFlags(&auto_free, g, CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH), CUDA_SUCCESS);
    ASSERT_EQ(a.cuGraphLaunch(auto_free, nullptr), CUDA_SUCCESS);
    ASSERT_EQ(a.cuGraphLaunch(auto_free, nullptr), CUDA_SUCCESS);
    EXPECT_EQ(device_used(0), 10 * kMiB);
    EXPECT_EQ(a.cuGraphInstantiateWithFlags(&e, g, CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD), CUDA_ERROR_INVALID_VALUE);
  });
}

TEST(CudaSimGraph, CaptureMakesAllocationNodesAndInstantiateCanUpload) {
  in_child({devices2().c_str()}, [] {
    const Api& a = api();
    ASSERT_EQ(a.cuInit(0), CUDA_SUCCESS);
    context(1);
    CUstream s = nullptr;
    ASSERT_EQ(a.cuStreamCreate(&s, 0), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamBeginCapture_v2(nullptr, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ASSERT_EQ(a.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_ILLEGAL_STATE);
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    ASSERT_EQ(a.cuStreamIsCapturing(s, &status), CUDA_SUCCESS);
    EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    CUdeviceptr p = 0, q = 0;
    ASSERT_EQ(a.cuMemAllocAsync(&p, 40 * kMiB, s), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemAllocAsync(&q, 4 * kMiB, s), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemFreeAsync(p, s), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    EXPECT_EQ(device_used(1), 0u);  // captured: nothing allocated yet
    CUgraph g = nullptr;
    ASSERT_EQ(a.cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    EXPECT_EQ(a.cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
    std::size_t n = 0;
    ASSERT_EQ(a.cuGraphGetNodes(g, nullptr, &n), CUDA_SUCCESS);
    EXPECT_EQ(n, 3u);
    CUgraphExec e = nullptr;
    CUDA_GRAPH_INSTANTIATE_PARAMS ip{CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD, s, nullptr, CUDA_GRAPH_INSTANTIATE_ERROR};
    ASSERT_EQ(a.cuGraphInstantiateWithParams(&e, g, &ip), CUDA_SUCCESS);
    EXPECT_EQ(ip.result_out, CUDA_GRAPH_INSTANTIATE_SUCCESS);
    EXPECT_EQ(device_used(1), 44 * kMiB);  // uploaded at instantiation, on the stream's device
    EXPECT_EQ(device_used(0), 0u);
    ASSERT_EQ(a.cuGraphLaunch(e, s), CUDA_SUCCESS);
    ASSERT_EQ(a.cuMemFreeAsync(q, s), CUDA_SUCCESS);
    ASSERT_EQ(a.cuGraphExecDestroy(e), CUDA_SUCCESS);
    EXPECT_EQ(device_used(1), 0u);
    ASSERT_EQ(a.cuGraphDestroy(g), CUDA_SUCCESS);
    EXPECT_EQ(a.cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
  });
}

}  // namespace
