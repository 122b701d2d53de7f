// The MPS supervisor through the path it takes on a node: the (simulated)
// nvidia-cuda-mps-control, started with -d and talked to through its client,
// in real directories. What a daemon was told is read from the simulator's
// own state file, never from the supervisor.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "mps/supervisor.hpp"
#include "support/run.hpp"

namespace {

using namespace std::chrono_literals;
using tessera::mps::Clock;
using tessera::mps::DaemonSpec;
using tessera::mps::Supervisor;
using tessera::mps::SupervisorOptions;
using tessera::testing::TempDir;

constexpr const char* kGpu = "GPU-11111111-2222-3333-4444-555555555555";
constexpr const char* kMig = "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";

SupervisorOptions options(std::chrono::milliseconds timeout = 3000ms) {
  SupervisorOptions o;
  o.control.binary = TESSERA_MPS_CONTROL_SIM;
  o.control.timeout = timeout;
  o.check_interval = 2s;
  o.backoff_min = 1s;
  o.backoff_max = 8s;
  return o;
}

DaemonSpec spec(const TempDir& root, const std::string& uuid, std::uint64_t mib, std::uint32_t percent) {
  DaemonSpec s;
  s.uuid = uuid;
  s.resource = "nvidia.com/gpu";
  s.dirs = {root.path() + "/nvidia.com_gpu/" + uuid + "/pipe", root.path() + "/nvidia.com_gpu/" + uuid + "/log"};
  s.pinned_mem_limit_mib = mib;
  s.active_thread_percentage = percent;
  return s;
}

// What the simulated daemon recorded (its own state file), or null.
nlohmann::json state(const DaemonSpec& s) {
  std::ifstream in(s.dirs.pipe + "/tessera-sim-mps.json");
  if (!in) return nullptr;
  return nlohmann::json::parse(in, nullptr, false);
}

pid_t pid_of(const DaemonSpec& s) { return tessera::mps::daemon_pid(s.dirs); }

bool gone(pid_t pid) { return tessera::testing::process_stops(pid); }

class MpsSupervisor : public ::testing::Test {
 protected:
  void TearDown() override {
    // Whatever a failing test left: no daemon outlives the test.
    for (const auto& e : std::filesystem::recursive_directory_iterator(root.path()))
      if (e.path().filename() == "nvidia-cuda-mps-control.pid") {
        std::ifstream in(e.path());
        pid_t pid = -1;
        if (in >> pid && pid > 1) ::kill(pid, SIGKILL);
      }
    ::unsetenv("TESSERA_SIM_MPS_HANG");
  }
  TempDir root;
};

TEST_F(MpsSupervisor, StartsOneDaemonPerDeviceWithItsDirectoriesAndLimits) {
  Supervisor sup(options());
  const auto gpu = spec(root, kGpu, 20096, 25), mig = spec(root, kMig, 4864, 50);
  sup.set({gpu, mig});
  EXPECT_EQ(sup.down(), (std::set<std::string>{kGpu, kMig})) << "not started before the first tick";
  const auto t0 = Clock::now();
  EXPECT_TRUE(sup.tick(t0));
  EXPECT_TRUE(sup.healthy(kGpu)) << sup.last_error(kGpu);
  EXPECT_TRUE(sup.healthy(kMig)) << sup.last_error(kMig);
  for (const auto& [s, mib, percent] : {std::tuple{gpu, "20096M", 25.0}, std::tuple{mig, "4864M", 50.0}}) {
    const auto st = state(s);
    ASSERT_TRUE(st.is_object()) << s.dirs.pipe;
    EXPECT_EQ(st["cuda_visible_devices"], s.uuid) << "one daemon per device, the device alone visible";
    EXPECT_EQ(st["pipe_directory"], s.dirs.pipe);
    EXPECT_EQ(st["log_directory"], s.dirs.log);
    EXPECT_EQ(st["default_device_pinned_mem_limits"]["0"]["value"], mib) << st.dump();
    EXPECT_EQ(st["default_active_thread_percentage"].get<double>(), percent);
    EXPECT_TRUE(std::filesystem::exists(s.dirs.log + "/control.log"));
    EXPECT_GT(pid_of(s), 0);
  }
  EXPECT_NE(pid_of(gpu), pid_of(mig));
  // A check finds both answering: nothing changes.
  EXPECT_FALSE(sup.tick(t0 + 2s));
  EXPECT_TRUE(sup.down().empty());
}

TEST_F(MpsSupervisor, RestartsAKilledDaemonAfterItsBackoff) {
  Supervisor sup(options());
  const auto gpu = spec(root, kGpu, 1024, 50);
  sup.set({gpu});
  const auto t0 = Clock::now();
  sup.tick(t0);
  ASSERT_TRUE(sup.healthy(kGpu)) << sup.last_error(kGpu);
  const pid_t first = pid_of(gpu);
  ASSERT_GT(first, 0);
  ::kill(first, SIGKILL);
  ASSERT_TRUE(gone(first));
  EXPECT_FALSE(sup.tick(t0 + 1s)) << "checked only every 2 s";
  EXPECT_TRUE(sup.healthy(kGpu));
  EXPECT_TRUE(sup.tick(t0 + 2s)) << "the check finds it gone";
  EXPECT_FALSE(sup.healthy(kGpu));
  EXPECT_EQ(sup.down(), std::set<std::string>{kGpu});
  EXPECT_NE(sup.last_error(kGpu), "");
  // Backoff: 1 s after the failure, not sooner.
  EXPECT_FALSE(sup.tick(t0 + 2s + 900ms));
  EXPECT_EQ(pid_of(gpu), -1) << "no restart before the backoff";
  EXPECT_TRUE(sup.tick(t0 + 3s));
  EXPECT_TRUE(sup.healthy(kGpu)) << sup.last_error(kGpu);
  const pid_t second = pid_of(gpu);
  EXPECT_GT(second, 0);
  EXPECT_NE(second, first);
  EXPECT_EQ(state(gpu)["default_device_pinned_mem_limits"]["0"]["value"], "1024M") << "the limits are set again";
}

TEST_F(MpsSupervisor, ADaemonThatCannotStartBacksOffDoubling) {
  auto o = options();
  o.control.binary = root.path() + "/no-such-control";
  Supervisor sup(o);
  sup.set({spec(root, kGpu, 1024, 50)});
  const auto t0 = Clock::now();
  sup.tick(t0);
  EXPECT_FALSE(sup.healthy(kGpu));
  EXPECT_NE(sup.last_error(kGpu).find("cannot run the MPS control program '" + root.path() + "/no-such-control'"),
            std::string::npos)
      << sup.last_error(kGpu);
  EXPECT_EQ(sup.failures(kGpu), 1u);
  // Tries again 1 s later, then 2 s, 4 s, and 8 s apart (the maximum): a tick
  // before a try is due does nothing.
  const std::pair<std::chrono::milliseconds, unsigned> ticks[] = {
      {900ms, 1}, {1000ms, 2}, {2900ms, 2}, {3000ms, 3}, {6900ms, 3}, {7000ms, 4}, {14900ms, 4}, {15000ms, 5},
      {22900ms, 5}, {23000ms, 6}};
  for (const auto& [at, failures] : ticks) {
    sup.tick(t0 + at);
    EXPECT_EQ(sup.failures(kGpu), failures) << "at +" << at.count() << " ms";
  }
  EXPECT_FALSE(sup.healthy(kGpu));
}

TEST_F(MpsSupervisor, AConfigChangeStopsOnlyTheDaemonsNoLongerWanted) {
  Supervisor sup(options());
  const auto gpu = spec(root, kGpu, 1024, 50), mig = spec(root, kMig, 512, 50);
  sup.set({gpu, mig});
  const auto t0 = Clock::now();
  sup.tick(t0);
  ASSERT_TRUE(sup.healthy(kGpu) && sup.healthy(kMig));
  const pid_t gpu_pid = pid_of(gpu), mig_pid = pid_of(mig);
  sup.set({gpu});
  EXPECT_TRUE(gone(mig_pid)) << "the MIG device's daemon was told to quit";
  EXPECT_FALSE(sup.healthy(kMig));
  EXPECT_EQ(pid_of(gpu), gpu_pid) << "the kept daemon is untouched";
  // New limits for the kept device: its daemon is restarted with them.
  auto changed = gpu;
  changed.pinned_mem_limit_mib = 2048;
  sup.set({changed});
  EXPECT_TRUE(gone(gpu_pid));
  sup.tick(t0 + 1s);
  EXPECT_TRUE(sup.healthy(kGpu)) << sup.last_error(kGpu);
  EXPECT_EQ(state(gpu)["default_device_pinned_mem_limits"]["0"]["value"], "2048M");
  const pid_t last = pid_of(gpu);
  sup.stop();
  EXPECT_TRUE(gone(last)) << "stop() leaves no daemon running";
  EXPECT_TRUE(sup.down().empty());
}

TEST_F(MpsSupervisor, ADaemonThatNeverAnswersIsDownAndOthersAreUnaffected) {
  Supervisor sup(options(500ms));
  const auto gpu = spec(root, kGpu, 1024, 50);
  sup.set({gpu});
  const auto t0 = Clock::now();
  sup.tick(t0);
  ASSERT_TRUE(sup.healthy(kGpu)) << sup.last_error(kGpu);
  // A second device whose daemon hangs from the start.
  ::setenv("TESSERA_SIM_MPS_HANG", "1", 1);
  const auto mig = spec(root, kMig, 512, 50);
  sup.set({gpu, mig});
  const auto started = Clock::now();
  sup.tick(t0 + 1s);
  ::unsetenv("TESSERA_SIM_MPS_HANG");
  EXPECT_LT(Clock::now() - started, 5s) << "bounded by the command timeout";
  EXPECT_FALSE(sup.healthy(kMig));
  EXPECT_NE(sup.last_error(kMig).find("did not answer"), std::string::npos) << sup.last_error(kMig);
  EXPECT_TRUE(sup.healthy(kGpu));
  // The next attempt kills the hung daemon (by its pid) and starts a good one.
  const pid_t hung = pid_of(mig);
  sup.tick(t0 + 3s);
  EXPECT_TRUE(sup.healthy(kMig)) << sup.last_error(kMig);
  if (hung > 0) {
    EXPECT_TRUE(gone(hung));
  }
}

TEST_F(MpsSupervisor, AnUnusableMpsRootIsAClearErrorForItsDevicesOnly) {
  Supervisor sup(options());
  // A file where the resource's directory must go.
  std::ofstream(root.path() + "/blocked") << "in the way";
  auto blocked = spec(root, kMig, 512, 50);
  blocked.dirs = {root.path() + "/blocked/pipe", root.path() + "/blocked/log"};
  const auto gpu = spec(root, kGpu, 1024, 50);
  sup.set({gpu, blocked});
  sup.tick(Clock::now());
  EXPECT_FALSE(sup.healthy(kMig));
  EXPECT_EQ(sup.last_error(kMig).rfind("cannot create " + root.path() + "/blocked/pipe: ", 0), 0u)
      << sup.last_error(kMig);
  EXPECT_TRUE(sup.healthy(kGpu)) << sup.last_error(kGpu);
}

TEST_F(MpsSupervisor, APipeDirectoryTooLongForTheDaemonsSocketIsRefused) {
  Supervisor sup(options());
  auto deep = spec(root, kGpu, 1024, 50);
  deep.dirs.pipe = root.path() + "/" + std::string(100, 'd') + "/pipe";
  sup.set({deep});
  sup.tick(Clock::now());
  EXPECT_FALSE(sup.healthy(kGpu));
  EXPECT_NE(sup.last_error(kGpu).find("is too long"), std::string::npos) << sup.last_error(kGpu);
  EXPECT_NE(sup.last_error(kGpu).find("choose a shorter mpsRoot"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(deep.dirs.pipe)) << "refused before anything was made";
}

TEST_F(MpsSupervisor, ADaemonAlreadyAnsweringIsKeptNotStartedTwice) {
  const auto gpu = spec(root, kGpu, 1024, 50);
  pid_t first = -1;
  {
    Supervisor sup(options());
    sup.set({gpu});
    sup.tick(Clock::now());
    ASSERT_TRUE(sup.healthy(kGpu));
    first = pid_of(gpu);
  }
  EXPECT_TRUE(gone(first)) << "a supervisor that goes away quits its daemons";
  // One started by hand, as a tessera that crashed would leave it, then supervised.
  std::filesystem::create_directories(gpu.dirs.pipe);
  std::filesystem::create_directories(gpu.dirs.log);
  auto started = tessera::mps::start_daemon(options().control, gpu.dirs, kGpu);
  ASSERT_TRUE(started) << started.error().message;
  const pid_t left = pid_of(gpu);
  Supervisor sup(options());
  sup.set({gpu});
  sup.tick(Clock::now());
  EXPECT_TRUE(sup.healthy(kGpu)) << sup.last_error(kGpu);
  EXPECT_EQ(pid_of(gpu), left) << "adopted, not killed and started again";
  EXPECT_EQ(state(gpu)["default_device_pinned_mem_limits"]["0"]["value"], "1024M") << "its limits set";
}

}  // namespace
