// The MPS supervisor through the path it takes on a node: the (simulated)
// nvidia-cuda-mps-control, started with -f as the supervisor's child and
// talked to through its client, in real directories, on real time. What a
// daemon was told, which servers and clients it has and which limits they
// got are read from the simulator's own state file, never from the
// supervisor; the pid a test kills is the one the simulator recorded.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "mps/supervisor.hpp"
#include "support/run.hpp"
#include "support/sim_mps.hpp"

namespace {

using namespace std::chrono_literals;
using tessera::mps::Clock;
using tessera::mps::DaemonSpec;
using tessera::mps::Supervisor;
using tessera::mps::SupervisorOptions;
using tessera::testing::Process;
using tessera::testing::TempDir;

constexpr const char* kGpu = "GPU-11111111-2222-3333-4444-555555555555";
constexpr const char* kMig = "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";
const std::string kSim = TESSERA_MPS_CONTROL_SIM;

SupervisorOptions options(std::chrono::milliseconds timeout = 3000ms) {
  SupervisorOptions o;
  o.control.binary = kSim;
  o.control.timeout = timeout;
  o.check_interval = 2s;
  o.backoff_min = 200ms;
  o.backoff_max = 1600ms;
  o.quit_grace = 1s;
  return o;
}

DaemonSpec spec(const TempDir& root, const std::string& uuid, std::uint64_t mib, std::uint32_t percent) {
  DaemonSpec s;
  s.uuid = uuid;
  s.resource = "nvidia.com/gpu";
  s.dirs = {root.path() + "/" + uuid + "/pipe", root.path() + "/" + uuid + "/log"};
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

// The pid the simulated daemon recorded, when it is running.
pid_t sim_pid(const DaemonSpec& s) {
  const auto st = state(s);
  if (!st.is_object() || !st.value("running", false)) return -1;
  const pid_t pid = st.value("pid", -1);
  return tessera::testing::process_running(pid) ? pid : -1;
}

using tessera::testing::parent_of;

bool gone(pid_t pid) { return tessera::testing::process_stops(pid); }

// Waits until `pred` holds, woken by the supervisor's changes (and every 5 ms).
bool wait_until(const Supervisor& sup, const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    pollfd p{sup.changed_fd(), POLLIN, 0};
    ::poll(&p, 1, 5);
  }
  return true;
}

bool wait_for(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

// A simulated CUDA client of the daemon in `s`'s pipe directory.
std::unique_ptr<Process> client(const TempDir& root, const DaemonSpec& s, const std::string& name) {
  auto p = std::make_unique<Process>(std::vector<std::string>{kSim, "--tessera-sim-client"}, root.path() + "/" + name,
                                     std::vector<std::string>{"CUDA_MPS_PIPE_DIRECTORY=" + s.dirs.pipe});
  EXPECT_TRUE(p->wait_for_output("MPS server", 5000)) << p->output();
  return p;
}

class MpsSupervisor : public ::testing::Test {
 protected:
  void TearDown() override { tessera::testing::kill_simulated_mps_daemons(root.path()); }
  TempDir root;
};

TEST_F(MpsSupervisor, StartsOneDaemonPerDeviceAsItsChildWithItsDirectoriesAndLimits) {
  Supervisor sup(options());
  const auto gpu = spec(root, kGpu, 20096, 25), mig = spec(root, kMig, 4864, 50);
  const auto t0 = Clock::now();
  sup.want({gpu, mig});
  EXPECT_LT(Clock::now() - t0, 50ms) << "want() starts nothing itself";
  ASSERT_TRUE(wait_until(sup, [&] { return sup.healthy(kGpu) && sup.healthy(kMig); }, 10s))
      << sup.status(kGpu).error << " / " << sup.status(kMig).error;
  for (const auto& [s, mib, percent] : {std::tuple{gpu, "20096M", 25.0}, std::tuple{mig, "4864M", 50.0}}) {
    const auto st = state(s);
    ASSERT_TRUE(st.is_object()) << s.dirs.pipe;
    EXPECT_EQ(st["cuda_visible_devices"], s.uuid) << "one daemon per device, the device alone visible";
    EXPECT_EQ(st["pipe_directory"], s.dirs.pipe);
    EXPECT_EQ(st["log_directory"], s.dirs.log);
    EXPECT_EQ(st["default_device_pinned_mem_limits"]["0"]["value"], mib) << st.dump();
    EXPECT_EQ(st["default_active_thread_percentage"].get<double>(), percent);
    EXPECT_TRUE(std::filesystem::exists(s.dirs.log + "/control.log"));
    const auto status = sup.status(s.uuid);
    EXPECT_EQ(status.pid, st["pid"].get<pid_t>()) << "the supervisor's pid is the daemon's own";
    EXPECT_EQ(parent_of(status.pid), ::getpid()) << "started in the foreground: the supervisor's child";
    EXPECT_NE(status.limits.find(mib), std::string::npos) << status.limits << ": read back";
    EXPECT_FALSE(status.since.empty());
  }
  EXPECT_NE(sup.status(kGpu).pid, sup.status(kMig).pid);
  EXPECT_TRUE(sup.down().empty());
}

TEST_F(MpsSupervisor, ADeadDaemonIsSeenAtOnceThroughItsPidfdAndRestartedAfterItsBackoff) {
  auto o = options();
  o.check_interval = 60s;  // no check could see it: only the pidfd
  Supervisor sup(o);
  const auto gpu = spec(root, kGpu, 1024, 50);
  sup.want({gpu});
  ASSERT_TRUE(wait_until(sup, [&] { return sup.healthy(kGpu); }, 10s)) << sup.status(kGpu).error;
  const pid_t first = sup.status(kGpu).pid;
  ASSERT_EQ(first, sim_pid(gpu));
  const auto t0 = Clock::now();
  ::kill(first, SIGKILL);
  ASSERT_TRUE(wait_until(sup, [&] { return !sup.healthy(kGpu); }, 2s));
  const auto seen = Clock::now() - t0;
  EXPECT_LT(seen, 100ms) << "seen after " << std::chrono::duration<double, std::milli>(seen).count() << " ms";
  const auto down = sup.status(kGpu);
  EXPECT_NE(down.error.find("(pid " + std::to_string(first) + ") was killed by signal 9"), std::string::npos)
      << down.error;
  EXPECT_EQ(down.retry_in_ms, 200) << "the first backoff";
  EXPECT_EQ(down.failures, 1u);
  // Started again once the backoff passed, with its limits set again.
  ASSERT_TRUE(wait_until(sup, [&] { return sup.healthy(kGpu); }, 5s)) << sup.status(kGpu).error;
  EXPECT_GE(Clock::now() - t0, 200ms) << "not before the backoff";
  const pid_t second = sup.status(kGpu).pid;
  EXPECT_NE(second, first);
  EXPECT_EQ(second, sim_pid(gpu));
  EXPECT_EQ(state(gpu)["default_device_pinned_mem_limits"]["0"]["value"], "1024M") << "the limits are set again";
}

TEST_F(MpsSupervisor, ADaemonThatCannotStartBacksOffDoubling) {
  auto o = options();
  o.control.binary = root.path() + "/no-such-control";
  Supervisor sup(o);
  sup.want({spec(root, kGpu, 1024, 50)});
  // Tries again 200 ms later, then 400, 800 and 1600 ms apart (the maximum).
  const std::pair<unsigned, std::int64_t> steps[] = {{1, 200}, {2, 400}, {3, 800}, {4, 1600}, {5, 1600}};
  for (const auto& [failures, backoff] : steps) {
    ASSERT_TRUE(wait_until(sup, [&] { return sup.status(kGpu).failures >= failures; }, 5s)) << failures;
    const auto s = sup.status(kGpu);
    EXPECT_EQ(s.failures, failures);
    EXPECT_EQ(s.retry_in_ms, backoff) << "after " << failures << " failures";
    EXPECT_FALSE(s.up);
  }
  EXPECT_NE(sup.status(kGpu).error.find("cannot run the MPS control program '" + root.path() + "/no-such-control'"),
            std::string::npos)
      << sup.status(kGpu).error;
}

TEST_F(MpsSupervisor, AHungDaemonDelaysNothingElse) {
  auto o = options(500ms);
  o.check_interval = 200ms;
  Supervisor sup(o);
  const auto gpu = spec(root, kGpu, 1024, 50), mig = spec(root, kMig, 512, 50);
  sup.want({gpu, mig});
  ASSERT_TRUE(wait_until(sup, [&] { return sup.healthy(kGpu) && sup.healthy(kMig); }, 10s));
  const pid_t hung = sup.status(kGpu).pid, other = sup.status(kMig).pid;
  // The GPU's daemon stops answering (it still runs: only its commands hang).
  const size_t commands_before = state(gpu)["commands"].size();
  std::ofstream(gpu.dirs.pipe + "/tessera-sim-mps.hang") << "";
  // Its next check is under way once the daemon has taken (and not answered) a command.
  ASSERT_TRUE(wait_until(sup, [&] { return state(gpu)["commands"].size() > commands_before; }, 5s));
  // Meanwhile the MIG device's daemon dies: seen before the hung check's
  // 500 ms deadline (bounds with room for two busy cores), not after it.
  const auto t0 = Clock::now();
  ::kill(other, SIGKILL);
  ASSERT_TRUE(wait_until(sup, [&] { return !sup.healthy(kMig); }, 2s));
  EXPECT_LT(Clock::now() - t0, 400ms);
  // And a new config is taken at once.
  auto changed = gpu;
  changed.active_thread_percentage = 25;
  const auto t1 = Clock::now();
  sup.want({changed, mig});
  EXPECT_LT(Clock::now() - t1, 250ms) << "want() does not wait for the hung daemon";
  // The hung one is down once its deadline passed, and killed: it was the supervisor's child.
  ASSERT_TRUE(wait_until(sup, [&] { return !sup.healthy(kGpu); }, 5s));
  EXPECT_NE(sup.status(kGpu).error.find("did not answer"), std::string::npos) << sup.status(kGpu).error;
  EXPECT_TRUE(gone(hung));
  ::unlink((gpu.dirs.pipe + "/tessera-sim-mps.hang").c_str());
  ASSERT_TRUE(wait_until(sup, [&] { return sup.healthy(kGpu) && sup.healthy(kMig); }, 10s))
      << sup.status(kGpu).error << " / " << sup.status(kMig).error;
  EXPECT_NE(sup.status(kGpu).pid, hung);
  EXPECT_EQ(state(gpu)["default_active_thread_percentage"].get<double>(), 25.0) << "started with the new limits";
}

TEST_F(MpsSupervisor, APidFileNamingAnotherProcessIsNeverKilled) {
  // A process named like the control program, whose pid a tenant writes into
  // the pid file of the pipe directory it was given (read-write).
  const std::string decoy_bin = root.path() + "/nvidia-cuda-mps-control";
  std::filesystem::create_symlink("/bin/sleep", decoy_bin);
  Process decoy({decoy_bin, "60"}, root.path() + "/decoy.out");
  auto o = options(300ms);
  o.check_interval = 100ms;
  Supervisor sup(o);
  const auto gpu = spec(root, kGpu, 1024, 50);
  sup.want({gpu});
  ASSERT_TRUE(wait_until(sup, [&] { return sup.healthy(kGpu); }, 10s));
  const pid_t real = sup.status(kGpu).pid;
  std::ofstream(gpu.dirs.pipe + "/nvidia-cuda-mps-control.pid", std::ios::trunc) << decoy.pid() << "\n";
  std::ofstream(gpu.dirs.pipe + "/tessera-sim-mps.hang") << "";
  ASSERT_TRUE(wait_until(sup, [&] { return !sup.healthy(kGpu); }, 5s));
  ::unlink((gpu.dirs.pipe + "/tessera-sim-mps.hang").c_str());
  ASSERT_TRUE(wait_until(sup, [&] { return sup.healthy(kGpu); }, 10s)) << sup.status(kGpu).error;
  EXPECT_TRUE(gone(real)) << "the hung daemon, its own child, was killed";
  EXPECT_TRUE(tessera::testing::process_running(decoy.pid())) << "the pid in the file was not";
  sup.stop();
  EXPECT_TRUE(tessera::testing::process_running(decoy.pid())) << "nor on stop";
}

// A control daemon the supervisor did not start (a squatter, or one left by a
// tessera that was SIGKILLed) answering in the pipe directory: never killed,
// but it loses the directory, and the supervisor's own daemon serves it; the
// status names the squatter's pid.
TEST_F(MpsSupervisor, ASquatterLosesThePipeDirectoryButIsNeverKilled) {
  const auto gpu = spec(root, kGpu, 1024, 50);
  std::filesystem::create_directories(gpu.dirs.pipe);
  std::filesystem::create_directories(gpu.dirs.log);
  // The squatter: a control daemon in the foreground, answering in the directory.
  tessera::testing::Process squatter({kSim, "-f"}, root.path() + "/squatter.log",
                                     {"CUDA_MPS_PIPE_DIRECTORY=" + gpu.dirs.pipe, "CUDA_MPS_LOG_DIRECTORY=" + gpu.dirs.log});
  const pid_t foreign = squatter.pid();
  ASSERT_TRUE(wait_for([&] { return sim_pid(gpu) == foreign; }, 10s)) << squatter.output();
  Supervisor sup(options());
  sup.want({gpu});
  ASSERT_TRUE(wait_until(sup, [&] { return sup.healthy(kGpu); }, 10s)) << sup.status(kGpu).error;
  const auto s = sup.status(kGpu);
  EXPECT_NE(s.pid, foreign);
  EXPECT_EQ(parent_of(s.pid), ::getpid()) << "its own child serves the directory";
  EXPECT_NE(s.note.find("did not start"), std::string::npos) << s.note;
  EXPECT_NE(s.note.find("pid " + std::to_string(foreign)), std::string::npos) << s.note;
  EXPECT_TRUE(tessera::testing::process_running(foreign)) << "never killed from here";
  EXPECT_EQ(sim_pid(gpu), s.pid) << "clients of the directory reach the supervisor's daemon";
}

TEST_F(MpsSupervisor, ALimitChangeReachesNewClientsWithoutQuittingADaemonWithClients) {
  Supervisor sup(options());
  const auto gpu = spec(root, kGpu, 2048, 50);
  sup.want({gpu});
  ASSERT_TRUE(wait_until(sup, [&] { return sup.healthy(kGpu); }, 10s));
  const pid_t daemon = sup.status(kGpu).pid;
  auto first = client(root, gpu, "client-1.out");
  ASSERT_EQ(state(gpu)["clients"].size(), 1u);
  const int server = state(gpu)["servers"][0]["pid"].get<int>();
  // New limits while a client runs.
  auto changed = gpu;
  changed.pinned_mem_limit_mib = 1024;
  changed.active_thread_percentage = 25;
  sup.want({changed});
  ASSERT_TRUE(wait_until(sup, [&] { return !sup.status(kGpu).note.empty(); }, 10s));
  const auto s = sup.status(kGpu);
  EXPECT_TRUE(s.up);
  EXPECT_EQ(s.pid, daemon) << "not restarted";
  EXPECT_NE(s.note.find("without a restart"), std::string::npos) << s.note;
  EXPECT_NE(s.note.find("1 client(s) connected before keep theirs"), std::string::npos) << s.note;
  EXPECT_EQ(s.clients, 1);
  EXPECT_TRUE(tessera::testing::process_running(first->pid())) << "its client kept its daemon";
  auto st = state(gpu);
  EXPECT_EQ(st["default_device_pinned_mem_limits"]["0"]["value"], "1024M") << "for servers to come";
  EXPECT_EQ(st["default_active_thread_percentage"].get<double>(), 25.0);
  ASSERT_EQ(st["servers"].size(), 1u);
  EXPECT_EQ(st["servers"][0]["pid"].get<int>(), server);
  EXPECT_EQ(st["servers"][0]["device_pinned_mem_limits"]["0"], "1024M") << "its running server, for new clients";
  EXPECT_EQ(st["servers"][0]["active_thread_percentage"].get<double>(), 25.0);
  EXPECT_EQ(st["clients"][0]["device_pinned_mem_limits"]["0"], "2048M") << "the client connected before keeps its";
  // A client that connects now gets the new limits.
  auto second = client(root, gpu, "client-2.out");
  st = state(gpu);
  ASSERT_EQ(st["clients"].size(), 2u);
  EXPECT_EQ(st["clients"][1]["device_pinned_mem_limits"]["0"], "1024M");
  EXPECT_EQ(st["clients"][1]["active_thread_percentage"].get<double>(), 25.0);
  EXPECT_EQ(sim_pid(gpu), daemon);
}

// The driver's own programs from a driver root that is on nobody's PATH (a
// node with no NVIDIA runtime, the root mounted into tessera's container):
// the daemon finds nvidia-cuda-mps-server beside its control program, so a
// client gets a server, and the servers load the driver's libraries from the
// driver root's library directory.
TEST_F(MpsSupervisor, TheDriverRootsControlProgramFindsItsServerAndLibraries) {
  const std::string bin = root.path() + "/driver-root/usr/bin", lib = root.path() + "/driver-root/usr/lib64";
  std::filesystem::create_directories(bin);
  std::filesystem::create_directories(lib);
  for (const char* program : {"nvidia-cuda-mps-control", "nvidia-cuda-mps-server"})
    std::filesystem::copy_file(std::filesystem::path(kSim).parent_path() / program, bin + "/" + program);
  const char* path = std::getenv("PATH");
  ASSERT_TRUE(path == nullptr || std::string(path).find(std::filesystem::path(kSim).parent_path().string()) == std::string::npos)
      << "the simulator's directory is on this test's PATH: the test would prove nothing";
  auto o = options();
  o.control.binary = bin + "/nvidia-cuda-mps-control";
  o.control.library_dir = lib;
  Supervisor sup(o);
  const auto gpu = spec(root, kGpu, 2048, 50);
  sup.want({gpu});
  ASSERT_TRUE(wait_until(sup, [&] { return sup.healthy(kGpu); }, 10s)) << sup.status(kGpu).error;
  const std::string seen = state(gpu)["ld_library_path"].get<std::string>();
  EXPECT_TRUE(seen == lib || seen.starts_with(lib + ":")) << seen;
  auto first = client(root, gpu, "client-1.out");
  ASSERT_EQ(state(gpu)["servers"].size(), 1u) << "no server: " << first->output();
  const int server = state(gpu)["servers"][0]["pid"].get<int>();
  std::error_code ec;
  EXPECT_EQ(std::filesystem::read_symlink("/proc/" + std::to_string(server) + "/exe", ec).string(),
            bin + "/nvidia-cuda-mps-server");
}

TEST_F(MpsSupervisor, AChangeThatNeedsARestartIsSaidAndWaitsWhileClientsUseTheDaemon) {
  Supervisor sup(options());
  const auto gpu = spec(root, kGpu, 2048, 50);
  sup.want({gpu});
  ASSERT_TRUE(wait_until(sup, [&] { return sup.healthy(kGpu); }, 10s));
  const pid_t daemon = sup.status(kGpu).pid;
  auto user = client(root, gpu, "client.out");
  // No pinned limit any more: no command takes one off a running daemon.
  auto unlimited = gpu;
  unlimited.pinned_mem_limit_mib = 0;
  sup.want({unlimited});
  ASSERT_TRUE(wait_until(sup, [&] { return !sup.status(kGpu).note.empty(); }, 10s));
  const auto s = sup.status(kGpu);
  EXPECT_NE(s.note.find("need a restart"), std::string::npos) << s.note;
  EXPECT_NE(s.note.find("it has 1 client(s), so it is not restarted"), std::string::npos) << s.note;
  EXPECT_EQ(s.pid, daemon);
  EXPECT_TRUE(s.up);
  EXPECT_TRUE(tessera::testing::process_running(user->pid()));
  // Without clients the restart costs nothing, and is done.
  user->signal(SIGTERM);
  ASSERT_EQ(user->wait(5000), 0);
  ASSERT_TRUE(wait_for([&] { return state(gpu)["clients"].empty(); }, 5s));
  auto tighter = unlimited;
  tighter.active_thread_percentage = 20;
  sup.want({tighter});
  ASSERT_TRUE(wait_until(sup, [&] { return sup.healthy(kGpu) && sup.status(kGpu).pid != daemon; }, 10s))
      << sup.status(kGpu).note << sup.status(kGpu).error;
  EXPECT_TRUE(gone(daemon));
  EXPECT_TRUE(state(gpu)["default_device_pinned_mem_limits"].empty()) << "started without one";
  EXPECT_EQ(state(gpu)["default_active_thread_percentage"].get<double>(), 20.0);
}

TEST_F(MpsSupervisor, AConfigChangeStopsOnlyTheDaemonsNoLongerWanted) {
  Supervisor sup(options());
  const auto gpu = spec(root, kGpu, 1024, 50), mig = spec(root, kMig, 512, 50);
  sup.want({gpu, mig});
  ASSERT_TRUE(wait_until(sup, [&] { return sup.healthy(kGpu) && sup.healthy(kMig); }, 10s));
  const pid_t gpu_pid = sup.status(kGpu).pid, mig_pid = sup.status(kMig).pid;
  sup.want({gpu});
  EXPECT_TRUE(gone(mig_pid)) << "the MIG device's daemon was told to quit";
  EXPECT_FALSE(sup.healthy(kMig));
  EXPECT_EQ(sup.status(kGpu).pid, gpu_pid) << "the kept daemon is untouched";
  EXPECT_TRUE(state(mig)["commands"].back() == "quit") << state(mig).dump();
  // Wanted again: a new daemon on the same directories.
  sup.want({gpu, mig});
  ASSERT_TRUE(wait_until(sup, [&] { return sup.healthy(kMig); }, 10s)) << sup.status(kMig).error;
  EXPECT_NE(sup.status(kMig).pid, mig_pid);
  const pid_t last = sup.status(kGpu).pid, last_mig = sup.status(kMig).pid;
  sup.stop();
  EXPECT_TRUE(gone(last)) << "stop() leaves no daemon running";
  EXPECT_TRUE(gone(last_mig));
  EXPECT_TRUE(sup.status().empty());
}

// multiUser (-M) is fixed when a daemon starts: wanting the other mode
// replaces that device's daemon and no other.
TEST_F(MpsSupervisor, MultiUserModeStartsTheDaemonWithMAndAChangeReplacesIt) {
  Supervisor sup(options());
  auto gpu = spec(root, kGpu, 1024, 50), mig = spec(root, kMig, 512, 50);
  gpu.multi_user = true;
  sup.want({gpu, mig});
  ASSERT_TRUE(wait_until(sup, [&] { return sup.healthy(kGpu) && sup.healthy(kMig); }, 10s));
  EXPECT_TRUE(state(gpu)["multi_user"].get<bool>()) << state(gpu).dump();
  EXPECT_FALSE(state(mig)["multi_user"].get<bool>()) << state(mig).dump();
  const pid_t gpu_pid = sup.status(kGpu).pid, mig_pid = sup.status(kMig).pid;
  gpu.multi_user = false;
  sup.want({gpu, mig});
  EXPECT_TRUE(gone(gpu_pid)) << "the multi-user daemon was told to quit";
  ASSERT_TRUE(wait_until(sup, [&] { return sup.healthy(kGpu) && sup.status(kGpu).pid != gpu_pid; }, 10s))
      << sup.status(kGpu).error;
  EXPECT_FALSE(state(gpu)["multi_user"].get<bool>()) << state(gpu).dump();
  EXPECT_EQ(sup.status(kMig).pid, mig_pid) << "the other device's daemon is untouched";
  sup.stop();
}

TEST_F(MpsSupervisor, AnUnusableMpsRootIsAClearErrorForItsDevicesOnly) {
  Supervisor sup(options());
  // A file where the device's directory must go.
  std::ofstream(root.path() + "/blocked") << "in the way";
  auto blocked = spec(root, kMig, 512, 50);
  blocked.dirs = {root.path() + "/blocked/pipe", root.path() + "/blocked/log"};
  const auto gpu = spec(root, kGpu, 1024, 50);
  sup.want({gpu, blocked});
  ASSERT_TRUE(wait_until(sup, [&] { return sup.healthy(kGpu) && sup.status(kMig).failures > 0; }, 10s));
  EXPECT_FALSE(sup.healthy(kMig));
  EXPECT_EQ(sup.status(kMig).error.rfind("cannot create " + root.path() + "/blocked/pipe: ", 0), 0u)
      << sup.status(kMig).error;
}

TEST_F(MpsSupervisor, APipeDirectoryTooLongForTheDaemonsSocketIsRefused) {
  Supervisor sup(options());
  auto deep = spec(root, kGpu, 1024, 50);
  deep.dirs.pipe = root.path() + "/" + std::string(100, 'd') + "/pipe";
  sup.want({deep});
  ASSERT_TRUE(wait_until(sup, [&] { return sup.status(kGpu).failures > 0; }, 5s));
  EXPECT_NE(sup.status(kGpu).error.find("is too long"), std::string::npos) << sup.status(kGpu).error;
  EXPECT_NE(sup.status(kGpu).error.find("choose a shorter mpsRoot"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(deep.dirs.pipe)) << "refused before anything was made";
}

}  // namespace
