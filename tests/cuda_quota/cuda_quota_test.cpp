// libtessera-cuda.so in real processes (docs/design-memory-quotas.md §5): each
// case runs cuda_client, which loads the driver as CUDA 13's runtime does,
// with the library in LD_PRELOAD and the simulated driver as libcuda.so.1.
// What the program sees comes from the client's output; what the device
// really holds comes from the simulator's own accounting (`usage`), never
// from the library.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cuda_quota/env.h"
#include "support/data.hpp"
#include "client_output.hpp"
#include "support/run.hpp"

namespace {

using tessera::testing::Process;
using tessera::testing::run;
using tessera::testing::RunResult;
using tessera::testing::Line;
using tessera::testing::lines;
using tessera::testing::find;
using tessera::testing::code;
using tessera::testing::value;
using tessera::testing::bytes;
using tessera::testing::TempDir;

constexpr std::uint64_t kMiB = 1ULL << 20, kGiB = 1ULL << 30;
constexpr const char* kUuid = "GPU-11111111-2222-3333-4444-555555555555";
constexpr const char* kOther = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
constexpr int kOk = 0, kOutOfMemory = 2;

// A container: a ledger directory and a simulated node, shared by the
// processes a test starts.
class Container {
 public:
  explicit Container(std::uint64_t quota, std::string devices = std::string(kUuid) + ":80G") : devices_(std::move(devices)) {
    mkdir((dir_.path() + "/sim").c_str(), 0755);
    mkdir((dir_.path() + "/ledger").c_str(), 01777);
    env_ = {
        "LD_PRELOAD=" TESSERA_CUDA_QUOTA_LIBRARY,
        "LD_LIBRARY_PATH=" TESSERA_CUDA_SIM_DIR,
        "TESSERA_SIM_CUDA_DEVICES=" + devices_,
        "TESSERA_SIM_CUDA_DIR=" + dir_.path() + "/sim",
        tessera::testing::kLateSanitizerEnv,
        std::string(TESSERA_ENV_LEDGER_DIR "=") + dir_.path() + "/ledger",
        std::string(TESSERA_ENV_DEVICE_UUID_PREFIX "0=") + kUuid,
        std::string(TESSERA_ENV_MEMORY_LIMIT_PREFIX "0=") + std::to_string(quota),
    };
  }

  // Replaces (or with an empty value after '=', keeps empty) one variable; "-NAME" removes it.
  void set(const std::string& entry) {
    const bool remove = entry[0] == '-';
    const std::string name = remove ? entry.substr(1) : entry.substr(0, entry.find('='));
    std::erase_if(env_, [&](const std::string& e) { return e.compare(0, name.size() + 1, name + "=") == 0; });
    if (!remove) env_.push_back(entry);
  }

  RunResult client(const std::vector<std::string>& steps) const {
    std::vector<std::string> argv{TESSERA_CUDA_CLIENT};
    argv.insert(argv.end(), steps.begin(), steps.end());
    return run(argv, "", env_);
  }

  std::unique_ptr<Process> start(const std::vector<std::string>& steps, const std::string& name) const {
    std::vector<std::string> argv{TESSERA_CUDA_CLIENT};
    argv.insert(argv.end(), steps.begin(), steps.end());
    return std::make_unique<Process>(argv, dir_.path() + "/" + name + ".log", env_);
  }

  std::string path(const std::string& name) const { return dir_.path() + "/" + name; }
  void touch(const std::string& name) const { std::ofstream(path(name)) << "go\n"; }

 private:
  TempDir dir_;
  std::string devices_;
  std::vector<std::string> env_;
};

// ------------------------------------------------------------------ limiting

TEST(CudaQuota, RefusesPastTheQuotaWithOutOfMemoryAndLogsOneLine) {
  Container c(1 * kGiB);
  const auto r = c.client({"init", "alloc:" + bytes(600 * kMiB), "alloc:" + bytes(600 * kMiB) + ":again",
                           "alloc:" + bytes(400 * kMiB) + ":fits", "usage"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "alloc:" + bytes(600 * kMiB)), kOk);
  EXPECT_EQ(code(r, "alloc:" + bytes(600 * kMiB) + ":again"), kOutOfMemory);
  EXPECT_EQ(code(r, "alloc:" + bytes(400 * kMiB) + ":fits"), kOk);
  EXPECT_EQ(value(r, "usage", 0), 1000 * kMiB) << "the driver holds exactly what was let through";
  EXPECT_NE(r.err.find("out of memory: container "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(std::string("device 0 (") + kUuid + ") quota 1073741824 used 629145600 request 629145600"),
            std::string::npos)
      << r.err;
}

TEST(CudaQuota, MemoryInfoReportsTheSliceNotTheCard) {
  Container c(2 * kGiB);
  const auto r = c.client({"init", "info", "alloc:" + bytes(512 * kMiB), "info:after", "info32", "total:0", "total32",
                           "info-null"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(value(r, "info", 0), 2 * kGiB);
  EXPECT_EQ(value(r, "info", 1), 2 * kGiB);
  EXPECT_EQ(value(r, "info:after", 0), 2 * kGiB - 512 * kMiB);
  EXPECT_EQ(value(r, "info:after", 1), 2 * kGiB);
  EXPECT_EQ(value(r, "info32", 1), 2 * kGiB);
  EXPECT_EQ(value(r, "total:0", 0), 2 * kGiB);
  EXPECT_EQ(value(r, "total32", 0), 2 * kGiB);
  EXPECT_EQ(code(r, "info-null"), kOk) << "a NULL free pointer stays the driver's business";
  EXPECT_EQ(value(r, "info-null", 0), 2 * kGiB);
}

TEST(CudaQuota, WithoutAQuotaNothingIsWrappedOrLimited) {
  Container c(1 * kGiB);
  c.set("-" TESSERA_ENV_MEMORY_LIMIT_PREFIX "0");
  const auto r = c.client({"init", "alloc:" + bytes(3 * kGiB), "info", "pointer:cuMemAlloc:3020:0",
                           "pointer:cuGetProcAddress:12000:0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "alloc:" + bytes(3 * kGiB)), kOk);
  EXPECT_EQ(value(r, "info", 1), 80 * kGiB);
  EXPECT_EQ(find(r, "pointer:cuMemAlloc:3020:0")[2], "libcuda.so.1");
  EXPECT_EQ(find(r, "pointer:cuGetProcAddress:12000:0")[2], "libcuda.so.1");
  EXPECT_EQ(r.err, "");
}

// ------------------------------------------------------------------ which function a program gets

// Rule 3 of design §1, written out by hand: for a request (base name, CUDA
// version, flags) the variant the program must get, ours or the driver's.
struct Expect {
  const char* request;  // "name:version:flags"
  const char* file;
  const char* symbol;
};

constexpr const char* kLib = "libtessera-cuda.so";
constexpr const char* kDriver = "libcuda.so.1";

TEST(CudaQuota, EachRequestGetsTheWrapperOfExactlyTheVariantTheDriverChose) {
  const Expect cases[] = {
      {"cuMemAlloc:2000:0", kLib, "cuMemAlloc"},  // the 32-bit ABI keeps a 32-bit wrapper
      {"cuMemAlloc:3010:0", kLib, "cuMemAlloc"},
      {"cuMemAlloc:3020:0", kLib, "cuMemAlloc_v2"},
      {"cuMemAlloc:13000:0", kLib, "cuMemAlloc_v2"},
      {"cuMemAlloc:13000:1", kLib, "cuMemAlloc_v2"},
      {"cuMemAlloc:13000:2", kLib, "cuMemAlloc_v2"},  // no per-thread twin: the legacy one
      {"cuMemFree:2000:0", kLib, "cuMemFree"},
      {"cuMemFree:3020:0", kLib, "cuMemFree_v2"},
      {"cuMemAllocPitch:3020:0", kLib, "cuMemAllocPitch_v2"},
      {"cuMemAllocManaged:6000:0", kLib, "cuMemAllocManaged"},
      {"cuMemGetInfo:2000:0", kLib, "cuMemGetInfo"},
      {"cuMemGetInfo:3020:0", kLib, "cuMemGetInfo_v2"},
      {"cuDeviceTotalMem:3020:0", kLib, "cuDeviceTotalMem_v2"},
      {"cuCtxDestroy:2000:0", kLib, "cuCtxDestroy"},
      {"cuCtxDestroy:4000:0", kLib, "cuCtxDestroy_v2"},
      {"cuDevicePrimaryCtxRelease:7000:0", kLib, "cuDevicePrimaryCtxRelease"},
      {"cuDevicePrimaryCtxRelease:11000:0", kLib, "cuDevicePrimaryCtxRelease_v2"},
      {"cuDevicePrimaryCtxReset:11000:0", kLib, "cuDevicePrimaryCtxReset_v2"},
      {"cuMemCreate:10020:0", kLib, "cuMemCreate"},
      {"cuMemRelease:10020:0", kLib, "cuMemRelease"},
      {"cuMemMap:10020:0", kLib, "cuMemMap"},
      {"cuMemUnmap:10020:0", kLib, "cuMemUnmap"},
      {"cuArrayCreate:2000:0", kLib, "cuArrayCreate"},
      {"cuArrayCreate:3020:0", kLib, "cuArrayCreate_v2"},
      {"cuArray3DCreate:3020:0", kLib, "cuArray3DCreate_v2"},
      {"cuArrayDestroy:2000:0", kLib, "cuArrayDestroy"},
      {"cuMipmappedArrayCreate:5000:0", kLib, "cuMipmappedArrayCreate"},
      {"cuMemAllocAsync:11020:0", kLib, "cuMemAllocAsync"},
      {"cuMemAllocAsync:11020:1", kLib, "cuMemAllocAsync"},
      {"cuMemAllocAsync:11020:2", kLib, "cuMemAllocAsync_ptsz"},
      {"cuMemAllocAsync:13000:2", kLib, "cuMemAllocAsync_ptsz"},
      {"cuMemAllocFromPoolAsync:11020:2", kLib, "cuMemAllocFromPoolAsync_ptsz"},
      {"cuMemFreeAsync:11020:0", kLib, "cuMemFreeAsync"},
      {"cuMemFreeAsync:12000:2", kLib, "cuMemFreeAsync_ptsz"},
      {"cuMemPoolCreate:11020:0", kLib, "cuMemPoolCreate"},
      {"cuMemPoolTrimTo:11020:0", kLib, "cuMemPoolTrimTo"},
      {"cuMemPoolDestroy:11020:0", kLib, "cuMemPoolDestroy"},
      {"cuGetProcAddress:11030:0", kLib, "cuGetProcAddress"},
      {"cuGetProcAddress:12000:0", kLib, "cuGetProcAddress_v2"},
      // Not memory: the driver's own function, never a wrapper.
      {"cuCtxGetDevice:2000:0", kDriver, "cuCtxGetDevice"},
      {"cuCtxCreate:2000:0", kLib, "cuCtxCreate"},
      {"cuCtxCreate:3020:0", kLib, "cuCtxCreate_v2"},
      {"cuCtxCreate:11040:0", kLib, "cuCtxCreate_v3"},
      {"cuCtxCreate:12050:0", kLib, "cuCtxCreate_v4"},
      {"cuModuleLoadData:2000:0", kLib, "cuModuleLoadData"},
      {"cuModuleLoadDataEx:2010:0", kLib, "cuModuleLoadDataEx"},
      {"cuModuleUnload:2000:0", kLib, "cuModuleUnload"},
      {"cuGraphInstantiate:10000:0", kLib, "cuGraphInstantiate"},
      {"cuGraphInstantiate:11000:0", kLib, "cuGraphInstantiate_v2"},
      {"cuGraphInstantiateWithFlags:11040:0", kLib, "cuGraphInstantiateWithFlags"},
      {"cuGraphInstantiateWithParams:12000:2", kLib, "cuGraphInstantiateWithParams_ptsz"},
      {"cuGraphUpload:11010:0", kLib, "cuGraphUpload"},
      {"cuGraphLaunch:10000:2", kLib, "cuGraphLaunch_ptsz"},
      {"cuGraphExecDestroy:10000:0", kLib, "cuGraphExecDestroy"},
      {"cuDeviceGraphMemTrim:11040:0", kLib, "cuDeviceGraphMemTrim"},
      {"cuGraphAddMemAllocNode:11040:0", kDriver, "cuGraphAddMemAllocNode"},
      {"cuStreamCreate:2000:0", kDriver, "cuStreamCreate"},
      {"cuCtxPushCurrent:4000:0", kDriver, "cuCtxPushCurrent_v2"},
      {"cuLaunchKernel:4000:0", kDriver, "cuLaunchKernel"},
      {"cuLaunchKernel:7000:2", kDriver, "cuLaunchKernel_ptsz"},
      {"cuStreamSynchronize:7000:2", kDriver, "cuStreamSynchronize_ptsz"},
      {"cuMemcpyHtoD:3020:0", kDriver, "cuMemcpyHtoD_v2"},
      {"cuMemcpyHtoD:7000:2", kDriver, "cuMemcpyHtoD_v2_ptds"},
      {"cuGetExportTable:3000:0", kDriver, "cuGetExportTable"},
      {"cuMemPoolGetAttribute:11020:0", kDriver, "cuMemPoolGetAttribute"},
      {"cuMemAddressReserve:10020:0", kDriver, "cuMemAddressReserve"},
      {"cuDeviceGetMemPool:11020:0", kDriver, "cuDeviceGetMemPool"},
  };
  Container c(1 * kGiB);
  std::vector<std::string> steps;
  for (const auto& e : cases) steps.push_back(std::string("pointer:") + e.request);
  const auto r = c.client(steps);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& e : cases) {
    const Line l = find(r, std::string("pointer:") + e.request);
    ASSERT_EQ(l.size(), 4u);
    EXPECT_EQ(l[1], "0") << e.request;
    EXPECT_EQ(l[2], e.file) << e.request;
    EXPECT_EQ(l[3], e.symbol) << e.request;
  }
}

// The CUDA 13 runtime's 440 requests, with and without the library: the same
// codes and statuses, the same functions for everything but the rows the
// library wraps, and for those our wrapper of the same variant.
TEST(CudaQuota, TheRuntimesRequestsGetTheDriversAnswersExceptTheWrappedRows) {
  Container limited(1 * kGiB);
  Container plain(1 * kGiB);
  plain.set("-LD_PRELOAD");
  const std::string replay = "replay:" + tessera::testing::kSourceDir + "/tests/cuda_quota/data/cudart-13.0-requests.txt";
  const auto with = lines(limited.client({replay}).out);
  const auto without = lines(plain.client({replay}).out);
  ASSERT_EQ(with.size(), 440u);
  ASSERT_EQ(without.size(), with.size());
  int wrapped = 0;
  for (std::size_t i = 0; i < with.size(); ++i) {
    ASSERT_EQ(with[i].size(), 6u);
    EXPECT_EQ(with[i][1], without[i][1]) << with[i][1];  // request
    EXPECT_EQ(with[i][2], without[i][2]) << with[i][1];  // code
    EXPECT_EQ(with[i][3], without[i][3]) << with[i][1];  // status
    if (with[i][4] == kLib) {
      ++wrapped;
      EXPECT_EQ(with[i][5], without[i][5]) << "wrapper of another variant for " << with[i][1];
    } else {
      EXPECT_EQ(with[i][4], without[i][4]) << with[i][1];
      EXPECT_EQ(with[i][5], without[i][5]) << with[i][1];
    }
  }
  EXPECT_GE(wrapped, 12) << "cuMemAlloc, cuMemFree, cuMemGetInfo, cuDeviceTotalMem, ... are among the requests";
}

// ------------------------------------------------------------------ charging and freeing

TEST(CudaQuota, EveryFreeGivesBackWhatItsAllocationTook) {
  Container c(1 * kGiB);
  const auto r = c.client({"init", "alloc:" + bytes(100 * kMiB), "alloc32:" + bytes(50 * kMiB),
                           "managed:" + bytes(200 * kMiB), "pitch:1000:1000", "info:all", "usage:all", "free:0",
                           "free32:1", "free:2", "free:3", "info:none", "usage:none"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* step : {"free:0", "free32:1", "free:2", "free:3"}) EXPECT_EQ(code(r, step), kOk) << step;
  // What the ledger charged equals what the driver holds, pitch padding included.
  const std::uint64_t held = value(r, "usage:all", 0);
  const std::uint64_t pitch = value(r, "pitch:1000:1000", 1);
  EXPECT_GE(pitch, 1000u);
  EXPECT_EQ(held, 350 * kMiB + pitch * 1000);
  EXPECT_EQ(value(r, "info:all", 0), 1 * kGiB - held);
  EXPECT_EQ(value(r, "usage:none", 0), 0u);
  EXPECT_EQ(value(r, "info:none", 0), 1 * kGiB);
}

TEST(CudaQuota, DestroyingAContextReturnsItsMemory) {
  Container c(1 * kGiB);
  const auto r = c.client({"init", "ctx-create", "alloc:" + bytes(300 * kMiB), "ctx-destroy:0", "init:again",
                           "info", "alloc:" + bytes(900 * kMiB), "release-primary", "release-primary:last",
                           "init:third", "info:after-release", "usage"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "ctx-destroy:0"), kOk);
  EXPECT_EQ(value(r, "info", 0), 1 * kGiB) << "the destroyed context's 300 MiB were returned";
  EXPECT_EQ(code(r, "alloc:" + bytes(900 * kMiB)), kOk);
  EXPECT_EQ(code(r, "release-primary:last"), kOk);
  EXPECT_EQ(value(r, "info:after-release", 0), 1 * kGiB) << "the last primary release reset the context";
  EXPECT_EQ(value(r, "usage", 0), 0u);
}

TEST(CudaQuota, ResettingThePrimaryContextReturnsItsMemory) {
  Container c(1 * kGiB);
  const auto r = c.client({"init", "alloc:" + bytes(700 * kMiB), "reset-primary", "init:again", "info", "usage"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "reset-primary"), kOk);
  EXPECT_EQ(value(r, "usage", 0), 0u);
  EXPECT_EQ(value(r, "info", 0), 1 * kGiB);
}

// ------------------------------------------------------------------ one ledger per container

TEST(CudaQuota, TwoProcessesShareOneQuotaAndADeadOnesMemoryIsReclaimed) {
  Container c(1 * kGiB);
  auto holder = c.start({"init", "alloc:" + bytes(600 * kMiB), "await:" + c.path("go")}, "holder");
  ASSERT_TRUE(holder->wait_for_output("alloc:" + bytes(600 * kMiB) + " 0", 10000)) << holder->output();
  const auto second = c.client({"init", "info", "alloc:" + bytes(600 * kMiB), "alloc:" + bytes(400 * kMiB)});
  EXPECT_EQ(value(second, "info", 0), 1 * kGiB - 600 * kMiB) << "the other process's usage, live";
  EXPECT_EQ(value(second, "info", 1), 1 * kGiB);
  EXPECT_EQ(code(second, "alloc:" + bytes(600 * kMiB)), kOutOfMemory);
  EXPECT_EQ(code(second, "alloc:" + bytes(400 * kMiB)), kOk);
  holder->signal(SIGKILL);
  holder->wait(5000);
  const auto third = c.client({"init", "alloc:" + bytes(1 * kGiB), "usage"});
  EXPECT_EQ(code(third, "alloc:" + bytes(1 * kGiB)), kOk) << "the killed process's 600 MiB were reclaimed\n" << third.err;
}

// 64 processes allocating and freeing at once never hold more than the quota
// together, by the simulator's own high-water mark.
TEST(CudaQuota, SixtyFourRacingProcessesNeverExceedTheQuotaTogether) {
  Container c(1 * kGiB);
  std::vector<std::unique_ptr<Process>> racers;
  for (int i = 0; i < 64; ++i)
    racers.push_back(c.start({"init", "await:" + c.path("go"), "loop:200:" + bytes(100 * kMiB)}, "racer" + std::to_string(i)));
  c.touch("go");
  int refused = 0;
  for (auto& p : racers) {
    ASSERT_EQ(p->wait(60000), 0) << p->output();
    const auto out = lines(p->output());
    for (const auto& l : out)
      if (l[0] == "loop:200:" + bytes(100 * kMiB)) {
        refused += std::stoi(l[2]);
        EXPECT_EQ(l[3], "0") << "every refusal is OUT_OF_MEMORY";
      }
  }
  const auto r = c.client({"init", "usage"});
  EXPECT_LE(value(r, "usage", 2), 1 * kGiB) << "device high-water mark across all processes";
  EXPECT_EQ(value(r, "usage", 1), 0u);
  EXPECT_GT(refused, 0) << "64 x 100 MiB against 1 GiB must have been refused sometimes";
}

// ------------------------------------------------------------------ bad input

struct BadInput {
  const char* name;
  std::vector<std::string> env;  // applied with Container::set
  const char* message;
};

TEST(CudaQuota, BadInputGetsQuotaZeroAndAMessageNeverMoreMemory) {
  const BadInput cases[] = {
      {"suffix", {TESSERA_ENV_MEMORY_LIMIT_PREFIX "0=1G"}, "=\"1G\" is not a plain decimal number of bytes"},
      {"sign", {TESSERA_ENV_MEMORY_LIMIT_PREFIX "0=-1"}, "=\"-1\" is not a plain decimal"},
      {"empty", {TESSERA_ENV_MEMORY_LIMIT_PREFIX "0="}, "=\"\" is not a plain decimal"},
      {"space", {TESSERA_ENV_MEMORY_LIMIT_PREFIX "0= 1024"}, "=\" 1024\" is not a plain decimal"},
      {"hex", {TESSERA_ENV_MEMORY_LIMIT_PREFIX "0=0x400"}, "=\"0x400\" is not a plain decimal"},
      {"overflow", {TESSERA_ENV_MEMORY_LIMIT_PREFIX "0=18446744073709551616"}, "is not a plain decimal"},
      {"control characters", {TESSERA_ENV_MEMORY_LIMIT_PREFIX "0=1\x1b[2J"}, "=\"1\\x1b[2J\" is not"},
      {"above the device", {TESSERA_ENV_MEMORY_LIMIT_PREFIX "0=" + std::to_string(81 * kGiB)},
       "is above the device's memory (85899345920 bytes); it gets quota 0"},
      {"unnamed device", {"-" TESSERA_ENV_DEVICE_UUID_PREFIX "0"}, "no TESSERA_DEVICE_UUID_<k> names it"},
      {"wrong device", {TESSERA_ENV_DEVICE_UUID_PREFIX "0=" + std::string(kOther)}, "no TESSERA_DEVICE_UUID_<k> names it"},
      {"not a UUID", {TESSERA_ENV_DEVICE_UUID_PREFIX "0=GPU-xyz"}, "=\"GPU-xyz\" is not a GPU or MIG UUID"},
      {"no ledger directory", {"-" TESSERA_ENV_LEDGER_DIR}, "TESSERA_LEDGER_DIR is not set"},
      {"missing ledger directory", {TESSERA_ENV_LEDGER_DIR "=/nonexistent/tessera"}, "/nonexistent/tessera"},
  };
  for (const auto& bad : cases) {
    Container c(1 * kGiB);
    for (const auto& e : bad.env) c.set(e);
    const auto r = c.client({"init", "alloc:4096", "info", "usage"});
    ASSERT_EQ(r.exit_code, 0) << bad.name << "\n" << r.err;
    EXPECT_EQ(code(r, "alloc:4096"), kOutOfMemory) << bad.name;
    EXPECT_EQ(value(r, "info", 1), 0u) << bad.name << ": total is the quota, 0";
    EXPECT_EQ(value(r, "usage", 0), 0u) << bad.name;
    EXPECT_NE(r.err.find(bad.message), std::string::npos) << bad.name << ":\n" << r.err;
  }
}

TEST(CudaQuota, AnIndexWithoutADeviceIsIgnoredWithAWarning) {
  Container c(1 * kGiB);
  c.set(TESSERA_ENV_MEMORY_LIMIT_PREFIX "1=1024");
  c.set(TESSERA_ENV_DEVICE_UUID_PREFIX "1=" + std::string(kOther));
  c.set(TESSERA_ENV_MEMORY_LIMIT_PREFIX "x=5");
  const auto r = c.client({"init", "alloc:" + bytes(512 * kMiB), "info"});
  EXPECT_EQ(code(r, "alloc:" + bytes(512 * kMiB)), kOk);
  EXPECT_EQ(value(r, "info", 1), 1 * kGiB);
  EXPECT_NE(r.err.find(std::string("names ") + kOther + ", which is not visible"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ignoring \"TESSERA_DEVICE_MEMORY_LIMIT_x=5\""), std::string::npos) << r.err;
}

TEST(CudaQuota, AMigUuidNamesTheSameBytesAsCudaReports) {
  // CUDA reports 16 bytes; in MIG mode they are the MIG device's (design §4). The prefix is NVML's.
  Container c(1 * kGiB, "MIG-11111111-2222-3333-4444-555555555555:20G");
  c.set(TESSERA_ENV_DEVICE_UUID_PREFIX "0=MIG-11111111-2222-3333-4444-555555555555");
  const auto r = c.client({"init", "alloc:" + bytes(2 * kGiB), "info"});
  EXPECT_EQ(code(r, "alloc:" + bytes(2 * kGiB)), kOutOfMemory);
  EXPECT_EQ(value(r, "info", 1), 1 * kGiB);
}

TEST(CudaQuota, VirtualMemoryIsChargedAtCreateAndReturnedAtReleaseAndLastUnmap) {
  Container c(1 * kGiB);
  const std::string size = bytes(512 * kMiB);
  const auto r = c.client({"init", "create:" + size, "map:0:" + size, "create:" + size + ":again",
                           "create:" + bytes(256 * kMiB) + ":host", "release:0", "info:mapped", "unmap:1:" + size,
                           "info:unmapped", "usage"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "create:" + size), kOk);
  EXPECT_EQ(code(r, "map:0:" + size), kOk);
  EXPECT_EQ(code(r, "create:" + size + ":again"), kOk);  // exactly the quota
  EXPECT_EQ(code(r, "create:" + bytes(256 * kMiB) + ":host"), kOk) << "host memory is not the device's";
  EXPECT_EQ(value(r, "info:mapped", 0), 0u) << "released but still mapped: still charged";
  EXPECT_EQ(value(r, "info:unmapped", 0), 512 * kMiB) << "released and unmapped: returned";
  EXPECT_EQ(value(r, "usage", 0), 512 * kMiB) << "the simulator agrees";
}

// A device that does not exist is the driver's error to give
// (CUDA_ERROR_INVALID_DEVICE), not an out-of-memory of the quota's: a
// program that probes ordinals reads the answer the driver documents.
TEST(CudaQuota, AnOrdinalWithoutADeviceGetsTheDriversInvalidDevice) {
  constexpr int kInvalidDevice = 101;  // [CH] CUDA_ERROR_INVALID_DEVICE
  Container c(1 * kGiB);
  const auto r = c.client({"init", "create:" + bytes(2 * kMiB) + ":on:7", "create:" + bytes(2 * kMiB) + ":on:0", "usage"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "create:" + bytes(2 * kMiB) + ":on:7"), kInvalidDevice) << r.err;
  EXPECT_EQ(code(r, "create:" + bytes(2 * kMiB) + ":on:0"), kOk);
  EXPECT_EQ(value(r, "usage", 0), 2 * kMiB);
}

TEST(CudaQuota, VirtualMemoryPastTheQuotaIsRefused) {
  Container c(1 * kGiB);
  const auto r = c.client({"init", "create:" + bytes(768 * kMiB), "create:" + bytes(512 * kMiB), "usage"});
  EXPECT_EQ(code(r, "create:" + bytes(768 * kMiB)), kOk);
  EXPECT_EQ(code(r, "create:" + bytes(512 * kMiB)), kOutOfMemory);
  EXPECT_EQ(value(r, "usage", 0), 768 * kMiB);
}

TEST(CudaQuota, StreamOrderedMemoryIsChargedAsItsPoolGrows) {
  Container c(64 * kMiB);
  // 3 x 20 MiB from the default pool (granules of 2 MiB: 60 MiB reserved), then a fourth refused.
  const std::string mb20 = bytes(20 * kMiB);
  const auto r = c.client({"init", "async:" + mb20, "async:" + mb20 + ":b", "pool:" + mb20, "async:" + mb20 + ":refused",
                           "usage:full", "freeasync:0", "freeasync:1", "info:freed-unsynced", "sync", "info:synced",
                           "async:" + bytes(40 * kMiB), "usage"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "async:" + mb20), kOk);
  EXPECT_EQ(code(r, "async:" + mb20 + ":b"), kOk);
  EXPECT_EQ(code(r, "pool:" + mb20), kOk);
  EXPECT_EQ(code(r, "async:" + mb20 + ":refused"), kOutOfMemory);
  EXPECT_LE(value(r, "usage:full", 0), 64 * kMiB);
  // Freed memory stays in the pool until a synchronize releases it (threshold 0).
  EXPECT_EQ(value(r, "info:freed-unsynced", 0), 64 * kMiB - value(r, "usage:full", 0));
  EXPECT_EQ(value(r, "info:synced", 0), 64 * kMiB - 20 * kMiB) << "the pool released 40 MiB at the synchronize";
  EXPECT_EQ(code(r, "async:" + bytes(40 * kMiB)), kOk) << "released pool memory is usable again";
  EXPECT_LE(value(r, "usage", 2), 64 * kMiB) << "the simulator's high-water mark";
}

TEST(CudaQuota, ArraysAreChargedByTheirSizeAndSparseOnesNot) {
  Container c(64 * kMiB);
  // float4 elements, 16 bytes: 1024 x 1024 = 16 MiB; 3D 256^3 = 256 MiB (refused); sparse: nothing.
  const auto r = c.client({"init", "array:1024:1024", "array3d:256:256:256:0", "array3d:256:256:256:64",
                           "mipmap:1024:1024:3", "usage:made", "info:made", "destroy:0", "destroy-mipmap:2", "usage",
                           "info"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "array:1024:1024"), kOk);
  EXPECT_EQ(code(r, "array3d:256:256:256:0"), kOutOfMemory);
  EXPECT_EQ(code(r, "array3d:256:256:256:64"), kOk) << "sparse arrays hold no memory until mapped";
  EXPECT_EQ(code(r, "mipmap:1024:1024:3"), kOk);
  EXPECT_EQ(value(r, "info:made", 0), 64 * kMiB - value(r, "usage:made", 0)) << "charged as the driver holds";
  EXPECT_EQ(code(r, "destroy:0"), kOk);
  EXPECT_EQ(code(r, "destroy-mipmap:2"), kOk);
  EXPECT_EQ(value(r, "usage", 0), 0u);
  EXPECT_EQ(value(r, "info", 0), 64 * kMiB);
}

// A tenant who reads the driver's API: mipmapped arrays are charged as the
// driver allocates them ([CH] cuMipmappedArrayCreate): numMipmapLevels 0 is
// clamped to one level, a layered array keeps its layers at every level, and
// each level is its own allocation rounded to the granule. Created until
// refused, each kind never leaves the simulator holding more than the quota,
// and the quota's view is what the simulator holds.
TEST(CudaQuota, MipmappedArraysAreChargedAsTheDriverAllocatesThem) {
  struct Attack {
    std::string what, op;
    std::uint64_t each;  // what the simulated driver holds per array
  };
  for (const auto& a : {Attack{"numMipmapLevels 0 (one level)", "mipmap:1024:1024:0", 16 * kMiB},
                        Attack{"layered, 16 layers at every level", "mipmap:256:256:3:16:1", (16 + 4 + 2) * kMiB},
                        Attack{"seven small levels, each rounded", "mipmap:64:64:7", 7 * 2 * kMiB}}) {
    Container c(64 * kMiB);
    std::vector<std::string> steps{"init"};
    for (int i = 0; i < 8; ++i) steps.push_back(a.op + ":n" + std::to_string(i));
    steps.insert(steps.end(), {"usage", "info"});
    const auto r = c.client(steps);
    ASSERT_EQ(r.exit_code, 0) << a.what << ": " << r.err;
    std::uint64_t made = 0;
    for (int i = 0; i < 8; ++i) made += code(r, a.op + ":n" + std::to_string(i)) == kOk;
    const std::uint64_t held = value(r, "usage", 0);
    EXPECT_EQ(made, 64 * kMiB / a.each) << a.what;
    EXPECT_EQ(held, made * a.each) << a.what;
    EXPECT_LE(held, 64 * kMiB) << a.what << ": the tenant holds more than its quota";
    EXPECT_EQ(value(r, "info", 0), 64 * kMiB - held) << a.what << ": the quota's view is not what the driver holds";
  }
}

// NVML in the same process reports the slice too: the NVML simulator over a
// node whose GPU has the UUID the CUDA simulator reports.
TEST(CudaQuota, NvmlMemoryInfoInTheSameProcessReportsTheSlice) {
  TempDir node;
  const auto made = run({TESSERA_BIN, "sim", "create", node.path() + "/node", "--gpu", "A100-SXM4-80GB", "--count", "1"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const auto inventory = run({TESSERA_BIN, "inventory", "--sim", node.path() + "/node", "--json"});
  ASSERT_EQ(inventory.exit_code, 0) << inventory.err;
  const auto gpu = nlohmann::json::parse(inventory.out)["gpus"][0];
  const std::string uuid = gpu["uuid"];
  const std::uint64_t memory = gpu["memory"]["total_bytes"];
  Container c(2 * kGiB, uuid + ":" + std::to_string(memory));
  c.set(TESSERA_ENV_DEVICE_UUID_PREFIX "0=" + uuid);
  c.set("LD_LIBRARY_PATH=" TESSERA_CUDA_SIM_DIR ":" TESSERA_NVML_SIM_DIR);
  c.set("TESSERA_SIM=" + node.path() + "/node");
  const auto r = c.client({"init", "alloc:" + bytes(600 * kMiB), "nvml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Line l = find(r, "nvml");
  ASSERT_EQ(l.size(), 11u) << r.out;
  EXPECT_EQ(l[1], "0");
  EXPECT_EQ(std::stoull(l[2]), 2 * kGiB) << "v1 total";
  EXPECT_EQ(std::stoull(l[3]), 2 * kGiB - 600 * kMiB) << "v1 free";
  EXPECT_EQ(std::stoull(l[4]), 600 * kMiB) << "v1 used: the container's charge";
  EXPECT_EQ(l[5], "0");
  EXPECT_EQ(std::stoull(l[6]), 2 * kGiB) << "v2 total";
  EXPECT_EQ(std::stoull(l[7]), 2 * kGiB - 600 * kMiB) << "v2 free";
  EXPECT_EQ(std::stoull(l[8]), 600 * kMiB) << "v2 used";
  EXPECT_EQ(l[9], "0") << "v2 reserved";
  EXPECT_EQ(l[10], "0x2000028") << "v2 version kept";
}

// Processes SIGKILLed at random instants while allocating and freeing (some
// inside the ledger's lock, by chance) never wedge the others, and what they
// held comes back: afterwards one process can take the whole quota.
TEST(CudaQuota, ProcessesKilledAtRandomInstantsNeitherWedgeNorLeakTheQuota) {
  Container c(1 * kGiB);
  std::mt19937 random(20261201);
  std::vector<std::unique_ptr<Process>> loopers;
  for (int i = 0; i < 12; ++i)
    loopers.push_back(c.start({"init", "loop:100000000:" + bytes(90 * kMiB)}, "looper" + std::to_string(i)));
  // Killed while they allocate, not before: the simulator's high-water mark
  // shows allocations have begun (polled, with a bound, never a fixed sleep).
  auto allocating = [&] { return value(c.client({"init", "usage"}), "usage", 2) >= 90 * kMiB; };
  for (int polls = 0; polls < 1000 && !allocating(); ++polls) usleep(10000);
  ASSERT_TRUE(allocating()) << "no looper allocated within 10 s";
  for (auto& p : loopers) {
    usleep(std::uniform_int_distribution<useconds_t>(1000, 30000)(random));
    p->signal(SIGKILL);
    p->wait(5000);
  }
  const auto r = c.client({"init", "alloc:" + bytes(1 * kGiB), "usage", "info"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "alloc:" + bytes(1 * kGiB)), kOk) << "every killed process's charge was reclaimed\n" << r.err;
  EXPECT_EQ(value(r, "usage", 1), 1 * kGiB) << "the device holds only this process's allocation";
  EXPECT_LE(value(r, "usage", 2), 1 * kGiB) << "never more than the quota at any time";
  EXPECT_EQ(value(r, "info", 0), 0u);
}

// ------------------------------------------------------------------ every allocation path

// A pool that grows by more than the request (a real driver's step is its
// own): the growth is charged, and where it does not fit the quota the
// allocation is given back and refused, so the device never holds more.
TEST(CudaQuota, PoolGrowthInStepsBeyondTheChargeIsRefusedAndHandedBack) {
  Container c(48 * kMiB);
  c.set("TESSERA_SIM_CUDA_POOL_STEP=32M");
  const std::string mb20 = bytes(20 * kMiB);
  const auto r = c.client({"init", "async:" + bytes(kMiB), "usage:one-step", "async:" + mb20, "async:" + mb20 + ":next-step",
                           "usage", "info", "freeasync:0", "freeasync:1", "sync", "async:" + bytes(40 * kMiB), "usage:after"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "async:" + bytes(kMiB)), kOk);
  EXPECT_EQ(value(r, "usage:one-step", 0), 32 * kMiB) << "1 MiB asked, a 32 MiB step taken and charged";
  EXPECT_EQ(code(r, "async:" + mb20), kOk) << "fits the step already held";
  EXPECT_EQ(code(r, "async:" + mb20 + ":next-step"), kOutOfMemory) << "another step would pass 48 MiB";
  EXPECT_EQ(value(r, "usage", 0), 32 * kMiB) << "the refused step was handed back";
  EXPECT_LE(value(r, "usage", 2), 48 * kMiB + 32 * kMiB) << "the high-water mark: the step the driver took first";
  EXPECT_EQ(value(r, "info", 0), 16 * kMiB);
  EXPECT_EQ(code(r, "async:" + bytes(40 * kMiB)), kOutOfMemory) << "40 MiB need two steps: 64 MiB";
  EXPECT_EQ(value(r, "usage:after", 0), 0u);
  EXPECT_NE(r.err.find("out of memory: container"), std::string::npos) << r.err;

  Container big(512 * kMiB);
  big.set("TESSERA_SIM_CUDA_POOL_STEP=1G");
  const auto g = big.client({"init", "async:" + bytes(kMiB), "info", "usage"});
  EXPECT_EQ(code(g, "async:" + bytes(kMiB)), kOutOfMemory) << "a 1 GiB step never fits 512 MiB";
  EXPECT_EQ(value(g, "info", 0), 512 * kMiB);
  EXPECT_EQ(value(g, "usage", 0), 0u);
}

// A pool that keeps every free byte (release threshold UINT64_MAX) and grows
// in 1 GiB steps: a refused allocation's step is released whole, however the
// pool is told to keep memory, so new pools round after round hold nothing
// beyond the quota.
TEST(CudaQuota, ARefusedStepIsReleasedFromAPoolThatKeepsEverything) {
  Container c(1536 * kMiB);
  c.set("TESSERA_SIM_CUDA_POOL_STEP=1G");
  std::vector<std::string> steps = {"init", "mempool", "pool-keep:0", "pool-alloc:" + bytes(kMiB) + ":0"};
  for (int round = 0; round < 4; ++round) {
    const std::string pool = std::to_string(2 + round);  // handle of the round's pool (a refusal records none)
    steps.insert(steps.end(), {"mempool", "pool-keep:" + pool, "pool-alloc:" + bytes(kMiB) + ":" + pool + ":" + pool,
                               "usage:round" + pool});
  }
  const auto r = c.client(steps);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "pool-keep:0"), kOk);
  EXPECT_EQ(code(r, "pool-alloc:" + bytes(kMiB) + ":0"), kOk) << "one 1 GiB step fits 1.5 GiB";
  for (int round = 0; round < 4; ++round) {
    const std::string pool = std::to_string(2 + round);
    EXPECT_EQ(code(r, "pool-alloc:" + bytes(kMiB) + ":" + pool + ":" + pool), kOutOfMemory) << "round " << round;
    EXPECT_EQ(value(r, "usage:round" + pool, 0), 1 * kGiB) << "round " << round << ": the refused step was released\n" << r.err;
  }
}

// A second thread switches the device's current pool (cuDeviceSetMemPool,
// or CUDA 13's cuMemSetMemPool by location and type) between the default
// pool and another while this one allocates: every allocation is charged to
// the pool the driver took it from, so the device holds no more than the
// quota however the switches fall.
TEST(CudaQuota, SwitchingTheCurrentPoolWhileAllocatingTakesNothingPastTheQuota) {
  for (const std::string op : {"pool-race:3000", "pool-race-location:3000"}) {
    Container c(256 * kMiB);
    c.set("TESSERA_SIM_CUDA_POOL_STEP=32M");
    const auto r = c.client({"init", op, "usage"});
    ASSERT_EQ(r.exit_code, 0) << op << "\n" << r.err;
    EXPECT_EQ(code(r, op), kOk) << op;
    EXPECT_LE(value(r, op, 0), 256u) << op << ": 1 MiB each: no more than the quota's worth succeed";
    EXPECT_GT(value(r, op, 1), 0u) << op << ": the rest are refused";
    EXPECT_LE(value(r, "usage", 0), 256 * kMiB) << op << ": the device holds no more than the quota\n" << r.out << r.err;
  }
}

// The pool's own room needs no charge: a full quota does not refuse an
// allocation the pool already holds memory for.
TEST(CudaQuota, AnAllocationThePoolHasRoomForIsNotRefused) {
  Container c(32 * kMiB);
  c.set("TESSERA_SIM_CUDA_POOL_STEP=32M");
  const auto r = c.client({"init", "async:" + bytes(kMiB), "async:" + bytes(30 * kMiB), "usage"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "async:" + bytes(kMiB)), kOk);
  EXPECT_EQ(code(r, "async:" + bytes(30 * kMiB)), kOk) << "the quota is full, but the pool has the room";
  EXPECT_EQ(value(r, "usage", 0), 32 * kMiB);
}

// cuMemAllocAsync on a stream of another device than the current context's
// takes that device's memory, and is charged to it.
TEST(CudaQuota, AsyncAllocationsAreChargedToTheStreamsDevice) {
  constexpr const char* kSecond = "GPU-22222222-3333-4444-5555-666666666666";
  Container c(1 * kGiB, std::string(kUuid) + ":80G," + kSecond + ":80G");
  c.set(TESSERA_ENV_MEMORY_LIMIT_PREFIX "1=" + std::to_string(256 * kMiB));
  c.set(TESSERA_ENV_DEVICE_UUID_PREFIX "1=" + std::string(kSecond));
  const auto r = c.client({"init:1", "stream", "init", "async-on:" + bytes(512 * kMiB) + ":0",
                           "async-on:" + bytes(200 * kMiB) + ":0", "async:" + bytes(512 * kMiB), "usage:1", "usage"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "stream"), kOk);
  EXPECT_EQ(code(r, "async-on:" + bytes(512 * kMiB) + ":0"), kOutOfMemory) << "device 1's quota is 256 MiB\n" << r.err;
  EXPECT_EQ(code(r, "async-on:" + bytes(200 * kMiB) + ":0"), kOk);
  EXPECT_EQ(code(r, "async:" + bytes(512 * kMiB)), kOk) << "device 0, the current one, has its own 1 GiB";
  EXPECT_EQ(value(r, "usage:1", 0), 200 * kMiB);
  EXPECT_EQ(value(r, "usage", 0), 512 * kMiB);
}

// Graph memory: charged when an exec maps it (its first upload or launch, or
// an instantiation with UPLOAD), refused before it runs when it does not
// fit, returned when the exec is destroyed; explicit allocation nodes and
// allocations made under stream capture alike.
TEST(CudaQuota, GraphMemoryIsChargedWhenMappedAndReturnedWhenDestroyed) {
  Container c(64 * kMiB);
  // handles: 0 stream, 1 graph, 2 its 48 MiB allocation, 3 exec; 4 graph, 5 32 MiB, 6 exec
  const auto r = c.client({"init", "stream", "graph", "graph-alloc:1:" + bytes(48 * kMiB), "graph-free:1:2",
                           "instantiate:1", "usage:instantiated", "launch:3:0", "usage:launched", "launch:3:0:again",
                           "graph", "graph-alloc:4:" + bytes(32 * kMiB), "instantiate:4", "launch:6:0", "info",
                           "usage:refused", "exec-destroy:3", "usage:destroyed", "launch:6:0:now", "usage"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(value(r, "usage:instantiated", 0), 0u);
  EXPECT_EQ(code(r, "launch:3:0"), kOk);
  EXPECT_EQ(value(r, "usage:launched", 0), 48 * kMiB);
  EXPECT_EQ(code(r, "launch:3:0:again"), kOk) << "a replay maps nothing new";
  EXPECT_EQ(code(r, "launch:6:0"), kOutOfMemory) << "48 + 32 MiB pass 64 MiB\n" << r.err;
  EXPECT_EQ(value(r, "usage:refused", 0), 48 * kMiB) << "refused before it ran";
  EXPECT_EQ(value(r, "info", 0), 16 * kMiB);
  EXPECT_EQ(value(r, "usage:destroyed", 0), 0u);
  EXPECT_EQ(code(r, "launch:6:0:now"), kOk);
  EXPECT_EQ(value(r, "usage", 0), 32 * kMiB);
}

// A child forked after a graph launch owns none of its parent's graph
// memory: the parent's charge is not the child's to settle, so the child's
// own graph memory is charged in full, and with the parent's it fills the
// quota.
TEST(CudaQuota, AChildForkedAfterAGraphLaunchInheritsNoCharge) {
  Container c(64 * kMiB);
  // parent: 0 stream, 1 graph, 2 its 48 MiB allocation, 3 exec; child: 4 stream, 5 graph, 6 16 MiB, 7 exec
  const auto r = c.client({"init", "stream", "graph", "graph-alloc:1:" + bytes(48 * kMiB), "graph-free:1:2",
                           "instantiate:1", "launch:3:0", "fork", "init", "stream", "graph",
                           "graph-alloc:5:" + bytes(16 * kMiB), "instantiate:5", "launch:7:4", "usage:graphs",
                           "alloc:" + bytes(16 * kMiB) + ":child", "usage:child", "child-exit", "usage:parent"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "launch:3:0"), kOk);
  EXPECT_EQ(value(r, "fork", 0), 0u) << "the child exited cleanly\n" << r.out << r.err;
  EXPECT_EQ(code(r, "launch:7:4"), kOk) << "48 + 16 MiB fit 64 MiB\n" << r.out << r.err;
  EXPECT_EQ(value(r, "usage:graphs", 1), 64 * kMiB) << "the device's" << r.out;
  EXPECT_EQ(code(r, "alloc:" + bytes(16 * kMiB) + ":child"), kOutOfMemory) << "the quota is full\n" << r.out << r.err;
  EXPECT_EQ(value(r, "usage:child", 1), 64 * kMiB) << "the device holds no more than the quota\n" << r.out;
  EXPECT_EQ(value(r, "usage:parent", 1), 48 * kMiB) << "the child's graph went with it\n" << r.out;
}

// A visible device that no quota names refuses every allocation, graph
// memory too: a graph with an allocation node there is not instantiated
// (with or without upload), so it can never map that memory.
TEST(CudaQuota, GraphMemoryOnADeviceNoQuotaNamesIsRefused) {
  constexpr const char* kSecond = "GPU-22222222-3333-4444-5555-666666666666";
  Container c(1 * kGiB, std::string(kUuid) + ":80G," + kSecond + ":80G");
  // handles: 0 stream, 1 graph, 2 its 64 MiB allocation node on device 1; 3 an exec, were one made
  const auto r = c.client({"init", "stream", "graph", "graph-alloc:1:" + bytes(64 * kMiB) + ":1", "instantiate:1",
                           "instantiate-upload:1:0", "launch:3:0", "usage:1", "alloc:4096", "usage"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "graph-alloc:1:" + bytes(64 * kMiB) + ":1"), kOk) << "a node maps nothing";
  EXPECT_EQ(code(r, "instantiate:1"), kOutOfMemory) << r.err;
  EXPECT_EQ(code(r, "instantiate-upload:1:0"), kOutOfMemory) << r.err;
  EXPECT_EQ(value(r, "usage:1", 0), 0u) << "graph memory mapped on a device without a quota";
  EXPECT_NE(r.err.find("no quota can be enforced on this device"), std::string::npos) << r.err;
  EXPECT_EQ(code(r, "alloc:4096"), kOk) << "device 0 keeps its quota";
  EXPECT_EQ(value(r, "usage", 0), 4096u);
}

TEST(CudaQuota, CapturedAllocationsAreChargedWhenTheirGraphIsUploaded) {
  Container c(64 * kMiB);
  // handles: 0 stream, 1 captured 40 MiB, 2 graph, 3 exec (uploaded at instantiation); then 4, 5, 6 for 30 MiB
  const auto r = c.client({"init", "stream", "capture:0", "async-on:" + bytes(40 * kMiB) + ":0", "free-on:1:0",
                           "end-capture:0", "usage:captured", "instantiate-upload:2:0", "usage:uploaded", "launch:3:0",
                           "capture:0:b", "async-on:" + bytes(30 * kMiB) + ":0:b", "free-on:4:0:b", "end-capture:0:b",
                           "instantiate-upload:5:0", "graph-mem", "exec-destroy:3",
                           "instantiate-upload:5:0:again", "usage"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "async-on:" + bytes(40 * kMiB) + ":0"), kOk) << "captured: nothing taken yet";
  EXPECT_EQ(value(r, "usage:captured", 0), 0u);
  EXPECT_EQ(code(r, "instantiate-upload:2:0"), kOk);
  EXPECT_EQ(value(r, "usage:uploaded", 0), 40 * kMiB);
  EXPECT_EQ(code(r, "launch:3:0"), kOk);
  EXPECT_EQ(code(r, "instantiate-upload:5:0"), kOutOfMemory) << "40 + 30 MiB pass 64 MiB\n" << r.err;
  EXPECT_EQ(value(r, "graph-mem", 1), 40 * kMiB) << "the refused upload mapped nothing";
  EXPECT_EQ(code(r, "instantiate-upload:5:0:again"), kOk) << r.err;
  EXPECT_EQ(value(r, "usage", 0), 30 * kMiB);
}

// A process's first context has nothing to measure it through: the library
// measures one context of the device with a scratch context, once per
// container (the ledger keeps the figure for every later process); later
// contexts and every module are measured from the driver's free memory.
TEST(CudaQuota, EveryContextAndModuleIsMeasuredFromTheDriversFreeMemory) {
  Container c(1 * kGiB);
  c.set("TESSERA_SIM_CUDA_CONTEXT_BYTES=300M");
  c.set("TESSERA_SIM_CUDA_MODULE_BYTES=100M");
  const auto r = c.client({"init", "info", "ctx-create", "info:two", "module", "info:module", "alloc:" + bytes(400 * kMiB),
                           "ctx-destroy:0", "info:destroyed", "usage"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(value(r, "info", 0), 1 * kGiB - 300 * kMiB) << "the primary context counts";
  EXPECT_EQ(code(r, "ctx-create"), kOk);
  EXPECT_EQ(value(r, "info:two", 0), 1 * kGiB - 600 * kMiB);
  EXPECT_EQ(value(r, "info:module", 0), 1 * kGiB - 700 * kMiB);
  EXPECT_EQ(code(r, "alloc:" + bytes(400 * kMiB)), kOutOfMemory);
  EXPECT_EQ(value(r, "info:destroyed", 0), 1 * kGiB - 300 * kMiB) << "the context took its module with it";
  EXPECT_EQ(value(r, "usage", 0), 300 * kMiB) << "the primary context is all the device holds";
}

// A container whose modules take 16 MiB and 300 µs each to load: the module races' (below).
void with_slow_modules(Container& c) {
  c.set("TESSERA_SIM_CUDA_MODULE_BYTES=16M");
  c.set("TESSERA_SIM_CUDA_LOAD_US=300");
}

// What a module race of 64 loads left, read from its line and the "info" and "usage" steps after
// it: every module loaded is held, and charged (`what` freed the memory that could hide one).
// Returns the loads done.
std::uint64_t modules_loaded_and_charged(const RunResult& r, const std::string& race, const std::string& what) {
  const std::uint64_t loaded = value(r, race, 1);
  EXPECT_EQ(loaded + value(r, race, 2), 64u) << r.out;
  const std::uint64_t held = value(r, "usage", 0);
  const std::uint64_t charged = 2 * kGiB - value(r, "info", 0);
  EXPECT_EQ(held, loaded * 16 * kMiB) << "the modules, what " << what << " held freed\n" << r.out;
  EXPECT_GE(charged, held) << "a module " << what << " hid is held but not charged\n" << r.out;
  return loaded;
}

// A module load is measured as the drop of the driver's free memory across
// it; another thread's frees meanwhile would hide the module (the drop
// smaller by what they gave back). Here 64 allocations of 16 MiB are freed
// one by one while 64 modules of 16 MiB load, each taking 300 µs: every
// module is charged, however the frees fall, so the container is charged at
// least what the driver holds and cannot go past its quota.
TEST(CudaQuota, AnotherThreadsFreesDuringAModuleLoadDoNotHideIt) {
  Container c(2 * kGiB);
  with_slow_modules(c);
  const std::string race = "module-race:64:" + bytes(16 * kMiB);
  const auto r = c.client({"init", race, "info", "usage", "alloc:" + bytes(1 * kGiB + 32 * kMiB)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(code(r, race), kOk) << r.out;
  EXPECT_EQ(value(r, race, 0), 64u) << "the allocations to free";
  EXPECT_EQ(modules_loaded_and_charged(r, race, "the frees"), 64u) << "every module fits the quota";
  EXPECT_EQ(code(r, "alloc:" + bytes(1 * kGiB + 32 * kMiB)), kOutOfMemory) << "1 GiB of modules leaves less than this";
}

// The same race with the memory handed back by a primary context's reset on another thread
// (1 GiB of allocations in it) while modules load in a context created for them.
TEST(CudaQuota, APrimaryContextsResetDuringAModuleLoadDoesNotHideIt) {
  Container c(2 * kGiB);
  with_slow_modules(c);
  const std::string race = "module-race:64:" + bytes(16 * kMiB) + ":reset";
  const auto r = c.client({"init", race, "info", "usage"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(code(r, race), kOk) << r.out;
  EXPECT_EQ(value(r, race, 0), 64u) << "the allocations the reset frees";
  // A load measured from just after the reset's memory came back until its call returned is
  // charged that memory again (more, never less; returned with the module): it may be refused.
  EXPECT_GE(modules_loaded_and_charged(r, race, "the reset"), 62u) << r.out;
}

// The same race with VMM allocations whose handles are released, freed by their last unmap.
TEST(CudaQuota, ALastUnmapDuringAModuleLoadDoesNotHideIt) {
  Container c(2 * kGiB);
  with_slow_modules(c);
  const std::string race = "module-race:64:" + bytes(16 * kMiB) + ":unmap";
  const auto r = c.client({"init", race, "info", "usage", "alloc:" + bytes(1 * kGiB + 32 * kMiB)});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(code(r, race), kOk) << r.out;
  EXPECT_EQ(value(r, race, 0), 64u) << "the mappings to unmap";
  EXPECT_EQ(modules_loaded_and_charged(r, race, "the unmaps"), 64u) << "every module fits the quota";
  EXPECT_EQ(code(r, "alloc:" + bytes(1 * kGiB + 32 * kMiB)), kOutOfMemory) << "1 GiB of modules leaves less than this";
}

// The same race with graph memory a trim gives back: a graph's 1 GiB allocation, freed by its own
// free node at launch, stays reserved (and charged) until cuDeviceGraphMemTrim on another thread.
TEST(CudaQuota, AGraphMemoryTrimDuringAModuleLoadDoesNotHideIt) {
  Container c(2 * kGiB);
  with_slow_modules(c);
  const std::string race = "module-race:64:0:trim";
  const auto r = c.client({"init", "graph", "graph-alloc:0:" + bytes(1 * kGiB), "graph-free:0:1", "instantiate:0",
                           "launch:2:n", "graph-mem", race, "graph-mem", "info", "usage"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(code(r, race), kOk) << r.out;
  ASSERT_NE(r.out.find("graph-mem 0 0 " + std::to_string(1 * kGiB)), std::string::npos) << "1 GiB reserved, none used\n"
                                                                                       << r.out;
  EXPECT_NE(r.out.find("graph-mem 0 0 0\n"), std::string::npos) << "given back during the loads\n" << r.out;
  EXPECT_GE(modules_loaded_and_charged(r, race, "the trim"), 62u) << r.out;
}

// The same race across two processes of the container: one frees 64 allocations of 16 MiB
// while the other loads 64 modules of 16 MiB. The freeing process's frees are counted in the
// ledger, where the loading process's measurements see them.
TEST(CudaQuota, AnotherProcesssFreesDuringAModuleLoadDoNotHideIt) {
  Container c(2 * kGiB);
  with_slow_modules(c);
  std::vector<std::string> freer{"init"};
  for (int i = 0; i < 64; ++i) freer.push_back("alloc:" + bytes(16 * kMiB));
  const std::string free_each = "free-each:0:64:150";
  freer.insert(freer.end(), {"touch:" + c.path("allocated"), "await:" + c.path("go"), free_each, "touch:" + c.path("freed"),
                             "await:" + c.path("done")});
  auto first = c.start(freer, "freer");
  std::vector<std::string> loader{"init", "await:" + c.path("allocated"), "touch:" + c.path("go")};
  for (int i = 0; i < 64; ++i) loader.push_back("module");
  loader.insert(loader.end(), {"await:" + c.path("freed"), "info", "usage", "alloc:" + bytes(1 * kGiB + 32 * kMiB)});
  const auto r = c.client(loader);
  c.touch("done");
  ASSERT_EQ(first->wait(10000), 0) << first->output();
  ASSERT_NE(first->output().find(free_each + " 0 64"), std::string::npos) << "every allocation freed\n" << first->output();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The simulator shows another process's frees up to 5 ms late, so a load may be charged a free
  // it did not see (more, never less: a few modules are refused); what counts is that none is
  // held uncharged.
  std::uint64_t loaded = 0;
  for (std::size_t at = r.out.find("module 0 "); at != std::string::npos; at = r.out.find("module 0 ", at + 1)) ++loaded;
  EXPECT_GE(loaded, 32u) << r.out;
  const std::uint64_t held = value(r, "usage", 0);
  const std::uint64_t charged = 2 * kGiB - value(r, "info", 0);
  EXPECT_EQ(held, loaded * 16 * kMiB) << "the modules, the allocations freed";
  EXPECT_GE(charged, held) << "a module another process's frees hid is held but not charged\n" << r.out;
  EXPECT_LE(value(r, "usage", 2), 2 * kGiB) << "the device never held more than the quota";
}

// The probe: a 2 GiB quota on a simulated A100 with 512 MiB contexts.
// The first context is in the quota's view; a second process of the container
// is charged the figure the first measured (its own scratch context is not
// needed: the simulator's peak shows one context fewer).
TEST(CudaQuota, TheFirstContextOfEachProcessCountsInTheQuota) {
  Container c(2 * kGiB, std::string(kUuid) + ":80G");
  c.set("TESSERA_SIM_CUDA_CONTEXT_BYTES=512M");
  auto first = c.start({"init", "info", "await:" + c.path("second-done")}, "first");
  ASSERT_TRUE(first->wait_for_output("info 0 " + std::to_string(2 * kGiB - 512 * kMiB), 10000)) << first->output();
  const auto r = c.client({"init", "info", "alloc:" + bytes(1 * kGiB + 1), "alloc:" + bytes(1 * kGiB - 1), "usage"});
  c.touch("second-done");
  EXPECT_EQ(first->wait(10000), 0) << first->output();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(value(r, "info", 0), 1 * kGiB) << "two contexts of 512 MiB charged to the container";
  EXPECT_EQ(code(r, "alloc:" + bytes(1 * kGiB + 1)), kOutOfMemory);
  EXPECT_EQ(code(r, "alloc:" + bytes(1 * kGiB - 1)), kOk);
  EXPECT_LE(value(r, "usage", 1), 2 * kGiB) << "the device holds no more than the quota";
  EXPECT_LE(value(r, "usage", 2), 2 * kGiB + 512 * kMiB) << "one scratch context in the container's life, no more";
}

// Without any measurement (a driver that cannot make a scratch context) the
// node's `context=` figure is charged: see the limits-file cases.

// [CH] a destroyed pool keeps its memory until its last allocation is freed:
// five rounds of (create a pool, 800 MiB from it, destroy it) must not pass
// the quota, and the charge goes with the last free.
TEST(CudaQuota, ADestroyedPoolKeepsItsChargeUntilItsLastAllocationIsFreed) {
  Container c(2 * kGiB);
  c.set("TESSERA_SIM_CUDA_CONTEXT_BYTES=512M");
  const std::string mb800 = bytes(800 * kMiB);
  // Handles: pool 0, its allocation 1; later pools 2..5 (their allocations refused).
  std::vector<std::string> steps{"init", "mempool", "pool-alloc:" + mb800 + ":0", "pool-destroy:0"};
  for (int round = 1; round < 5; ++round) {
    const std::string p = std::to_string(round + 1);
    steps.insert(steps.end(), {"mempool", "pool-alloc:" + mb800 + ":" + p, "pool-destroy:" + p});
  }
  steps.insert(steps.end(), {"usage:looped", "info:looped", "freeasync:1", "sync", "info:freed", "usage"});
  const auto r = c.client(steps);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "pool-alloc:" + mb800 + ":0"), kOk);
  EXPECT_EQ(code(r, "pool-destroy:0"), kOk) << "a pool with an outstanding allocation is destroyed at once";
  for (int round = 1; round < 5; ++round)
    EXPECT_EQ(code(r, "pool-alloc:" + mb800 + ":" + std::to_string(round + 1)), kOutOfMemory) << "round " << round;
  EXPECT_LE(value(r, "usage:looped", 0), 2 * kGiB) << "the driver holds no more than the quota";
  EXPECT_EQ(value(r, "usage:looped", 0), 512 * kMiB + 800 * kMiB);
  EXPECT_EQ(value(r, "info:looped", 0), 2 * kGiB - 512 * kMiB - 800 * kMiB);
  EXPECT_EQ(value(r, "info:freed", 0), 2 * kGiB - 512 * kMiB) << "the last free took the pool's charge";
  EXPECT_EQ(value(r, "usage", 0), 512 * kMiB);
}

// [CH] cuMemRetainAllocationHandle is a reference: the memory lives (and is
// charged) after its creating handle is released and its mapping unmapped,
// until the retained handle is released too.
TEST(CudaQuota, RetainedVirtualMemoryStaysChargedUntilItsLastReference) {
  Container c(2 * kGiB);
  c.set("TESSERA_SIM_CUDA_CONTEXT_BYTES=512M");
  const std::string mb800 = bytes(800 * kMiB);
  // Handles: 0 the allocation, 1 its mapped address, 2 the retained handle, 3 its new mapping.
  std::vector<std::string> steps{"init", "create:" + mb800, "map:0:" + mb800, "release:0", "retain:1", "unmap:1:" + mb800,
                                 "info:retained", "map:2:" + mb800};
  for (int round = 1; round < 5; ++round) steps.push_back("create:" + mb800 + ":" + std::to_string(round));
  steps.insert(steps.end(), {"usage:looped", "unmap:3:" + mb800, "info:mapped-once", "release:2", "info:released",
                             "usage"});
  const auto r = c.client(steps);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "retain:1"), kOk);
  EXPECT_EQ(code(r, "unmap:1:" + mb800), kOk);
  EXPECT_EQ(value(r, "info:retained", 0), 2 * kGiB - 512 * kMiB - 800 * kMiB) << "the retained handle keeps it";
  EXPECT_EQ(code(r, "map:2:" + mb800), kOk);
  for (int round = 1; round < 5; ++round)
    EXPECT_EQ(code(r, "create:" + mb800 + ":" + std::to_string(round)), kOutOfMemory) << "round " << round;
  EXPECT_LE(value(r, "usage:looped", 0), 2 * kGiB);
  EXPECT_EQ(value(r, "info:mapped-once", 0), 2 * kGiB - 512 * kMiB - 800 * kMiB);
  EXPECT_EQ(value(r, "info:released", 0), 2 * kGiB - 512 * kMiB) << "no reference and no mapping: returned";
  EXPECT_EQ(value(r, "usage", 0), 512 * kMiB) << "the simulator freed it too";
}

// An import of a descriptor the process exported is another reference to the
// same charged allocation, not new memory and not a way around the charge.
TEST(CudaQuota, AnImportedHandleIsAReferenceToTheChargedAllocation) {
  Container c(2 * kGiB);
  c.set("TESSERA_SIM_CUDA_CONTEXT_BYTES=512M");
  const std::string mb800 = bytes(800 * kMiB);
  // Handles: 0 the allocation, 1 its descriptor, 2 the imported handle, 3 its mapping.
  const auto r = c.client({"init", "create:" + mb800 + ":fd", "export:0", "import:1", "release:0", "map:2:" + mb800,
                           "info:imported", "create:" + mb800, "usage:held", "unmap:3:" + mb800, "release:2",
                           "info:released", "usage"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "export:0"), kOk);
  EXPECT_EQ(code(r, "import:1"), kOk);
  EXPECT_EQ(code(r, "map:2:" + mb800), kOk) << "the imported handle maps the allocation";
  EXPECT_EQ(value(r, "info:imported", 0), 2 * kGiB - 512 * kMiB - 800 * kMiB);
  EXPECT_EQ(code(r, "create:" + mb800), kOutOfMemory);
  EXPECT_EQ(value(r, "usage:held", 0), 512 * kMiB + 800 * kMiB);
  EXPECT_EQ(value(r, "info:released", 0), 2 * kGiB - 512 * kMiB);
  EXPECT_EQ(value(r, "usage", 0), 512 * kMiB);
}

// What PyTorch's expandable segments do (create, reserve, map, set access,
// unmap, release) runs the same with and without the library.
TEST(CudaQuota, ExpandableSegmentsRunWithAndWithoutTheLibrary) {
  for (const bool with : {true, false}) {
    Container c(1 * kGiB);
    if (!with) c.set("-LD_PRELOAD");
    const std::string mb64 = bytes(64 * kMiB);
    const auto r = c.client({"init", "create:" + mb64, "map:0:" + mb64, "set-access:1:" + mb64, "usage:mapped",
                             "unmap:1:" + mb64, "release:0", "usage"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const std::string& step : std::vector<std::string>{"create:" + mb64, "map:0:" + mb64, "set-access:1:" + mb64,
                                                            "unmap:1:" + mb64, "release:0"})
      EXPECT_EQ(code(r, step), kOk) << step << (with ? " with" : " without") << " the library";
    EXPECT_EQ(value(r, "usage:mapped", 0), 64 * kMiB);
    EXPECT_EQ(value(r, "usage", 0), 0u);
  }
}

// cuLibraryLoadData (how CUDA 12+ runtimes load their kernels) is measured
// like a module and returned at cuLibraryUnload.
TEST(CudaQuota, LibrariesAreChargedLikeModules) {
  Container c(1 * kGiB);
  c.set("TESSERA_SIM_CUDA_MODULE_BYTES=100M");
  const auto r = c.client({"init", "library", "kernel:0:forward", "info:loaded", "alloc:" + bytes(1 * kGiB - 50 * kMiB),
                           "library-unload:0", "info:unloaded", "usage"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "library"), kOk);
  EXPECT_EQ(code(r, "kernel:0:forward"), kOk);
  EXPECT_EQ(value(r, "info:loaded", 0), 1 * kGiB - 100 * kMiB);
  EXPECT_EQ(code(r, "alloc:" + bytes(1 * kGiB - 50 * kMiB)), kOutOfMemory);
  EXPECT_EQ(code(r, "library-unload:0"), kOk);
  EXPECT_EQ(value(r, "info:unloaded", 0), 1 * kGiB);
  EXPECT_EQ(value(r, "usage", 0), 0u);
}

// A library loads into every context of the process (CUDA 12's context-
// independent loading), so its charge belongs to the library, not to the
// context current at the load: destroying that context, whose copy the
// driver frees, leaves the others' copies charged until the unload.
TEST(CudaQuota, ALibrarysChargeOutlivesTheContextItWasLoadedIn) {
  Container c(1 * kGiB);
  c.set("TESSERA_SIM_CUDA_MODULE_BYTES=100M");
  // handles: 0 a second context on device 0 (current), 1 the library
  const auto r = c.client({"init", "ctx-create:0", "library", "usage:loaded", "ctx-destroy:0", "usage:destroyed",
                           "alloc:" + bytes(1 * kGiB - 50 * kMiB), "usage", "library-unload:1", "usage:unloaded"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "library"), kOk);
  EXPECT_EQ(code(r, "ctx-destroy:0"), kOk);
  EXPECT_GE(value(r, "usage:destroyed", 0), 100 * kMiB) << "the primary context keeps its copy\n" << r.out;
  EXPECT_EQ(code(r, "alloc:" + bytes(1 * kGiB - 50 * kMiB)), kOutOfMemory) << "the copy still counts\n" << r.out << r.err;
  EXPECT_LE(value(r, "usage", 1), 1 * kGiB) << "the device holds no more than the quota\n" << r.out;
  EXPECT_EQ(code(r, "library-unload:1"), kOk);
}

// ... and on every device that has a context: the copy on device 1 is
// charged to device 1, though device 0's context was current at the load.
TEST(CudaQuota, ALibraryIsChargedOnEveryDeviceItLoadsInto) {
  constexpr const char* kSecond = "GPU-22222222-3333-4444-5555-666666666666";
  Container c(1 * kGiB, std::string(kUuid) + ":80G," + kSecond + ":80G");
  c.set(TESSERA_ENV_MEMORY_LIMIT_PREFIX "1=" + std::to_string(256 * kMiB));
  c.set(TESSERA_ENV_DEVICE_UUID_PREFIX "1=" + std::string(kSecond));
  c.set("TESSERA_SIM_CUDA_MODULE_BYTES=100M");
  const auto r = c.client({"init:1", "init", "library", "usage:1", "init:1:again", "alloc:" + bytes(200 * kMiB),
                           "usage:1:after", "library-unload:0", "alloc:" + bytes(200 * kMiB) + ":unloaded"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(code(r, "library"), kOk);
  EXPECT_EQ(value(r, "usage:1", 1), 100 * kMiB) << "device 1 holds its copy\n" << r.out;
  EXPECT_EQ(code(r, "alloc:" + bytes(200 * kMiB)), kOutOfMemory) << "100 + 200 MiB pass device 1's 256 MiB\n" << r.out;
  EXPECT_LE(value(r, "usage:1:after", 1), 256 * kMiB) << r.out;
  EXPECT_EQ(code(r, "library-unload:0"), kOk);
  EXPECT_EQ(code(r, "alloc:" + bytes(200 * kMiB) + ":unloaded"), kOk) << "both copies returned\n" << r.out << r.err;
}

}  // namespace
