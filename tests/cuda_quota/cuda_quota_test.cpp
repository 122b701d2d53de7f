// libtessera-cuda.so in real processes (docs/design-memory-quotas.md §5): each
// case runs cuda_client, which loads the driver as CUDA 13's runtime does,
// with the library in LD_PRELOAD and the simulated driver as libcuda.so.1.
// What the program sees comes from the client's output; what the device
// really holds comes from the simulator's own accounting (`usage`), never
// from the library.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "cuda_quota/env.h"
#include "support/run.hpp"

namespace {

using tessera::testing::Process;
using tessera::testing::run;
using tessera::testing::RunResult;
using tessera::testing::TempDir;

constexpr std::uint64_t kMiB = 1ULL << 20, kGiB = 1ULL << 30;
constexpr const char* kUuid = "GPU-11111111-2222-3333-4444-555555555555";
constexpr const char* kOther = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
constexpr int kOk = 0, kOutOfMemory = 2;

// One output line of the client, split into words: {step, code, values...}.
using Line = std::vector<std::string>;

std::vector<Line> lines(const std::string& out) {
  std::vector<Line> result;
  std::istringstream in(out);
  std::string text;
  while (std::getline(in, text)) {
    std::istringstream words(text);
    Line line;
    for (std::string w; words >> w;) line.push_back(w);
    if (!line.empty()) result.push_back(line);
  }
  return result;
}

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
        // ASan insists on coming first among preloads unless told otherwise (google/sanitizers #786).
        "ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0",
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

// The line of `step` in a run's output (the first one when a step repeats).
Line find(const RunResult& r, const std::string& step) {
  for (const auto& l : lines(r.out))
    if (l[0] == step) return l;
  ADD_FAILURE() << "no line for " << step << " in:\n" << r.out << "\nstderr:\n" << r.err;
  return Line{step, "-99", "0", "0", "0", "0"};
}

int code(const RunResult& r, const std::string& step) { return std::stoi(find(r, step)[1]); }
std::uint64_t value(const RunResult& r, const std::string& step, std::size_t i) {
  const Line l = find(r, step);
  return i + 2 < l.size() ? std::stoull(l[i + 2]) : ~0ULL;
}

std::string bytes(std::uint64_t n) { return std::to_string(n); }

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

}  // namespace
