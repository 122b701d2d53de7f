// The simulated nvidia-cuda-mps-control (sim/mps) through the command line a
// supervisor uses on a node: `-d` with CUDA_MPS_PIPE_DIRECTORY and
// CUDA_MPS_LOG_DIRECTORY, commands on the client's stdin, replies on its
// stdout; and the simulator's hooks: the state file, the hang and fail-start
// switches, a daemon killed by its pid.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "support/run.hpp"

namespace {

using nlohmann::json;
using tessera::testing::Process;
using tessera::testing::run;
using tessera::testing::RunResult;
using tessera::testing::TempDir;

const std::string kBin = TESSERA_MPS_CONTROL_SIM;

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Alive and not a zombie waiting for a parent that does not reap.
bool alive(int pid) { return tessera::testing::process_running(pid); }

bool gone_within(int pid, int ms) {
  for (int waited = 0; waited <= ms; waited += 20) {
    if (!alive(pid)) return true;
    ::usleep(20000);
  }
  return false;
}

class MpsSim : public ::testing::Test {
 protected:
  void SetUp() override {
    // A client that finds no daemon exits without reading its stdin; writing
    // that stdin must not kill the test.
    ::signal(SIGPIPE, SIG_IGN);
    pipe_ = root_.path() + "/pipe";
    log_ = root_.path() + "/log";
    std::filesystem::create_directories(pipe_);
    std::filesystem::create_directories(log_);
  }

  void TearDown() override {
    if (HasFailure()) {  // what the daemon saw, for a failure that does not repeat
      std::cerr << "control.log:\n" << read_file(log_ + "/control.log") << "state:\n"
                << read_file(pipe_ + "/tessera-sim-mps.json");
    }
    for (int pid : daemons_)
      if (alive(pid)) ::kill(pid, SIGKILL);
  }

  // The MPS variables, and the driver's programs (the simulated
  // nvidia-cuda-mps-server beside the control program) on PATH, as on a node;
  // an entry of `extra` wins.
  std::vector<std::string> env(std::vector<std::string> extra = {}) const {
    auto given = [&](const std::string& name) {
      return std::any_of(extra.begin(), extra.end(), [&](const std::string& e) { return e.starts_with(name + "="); });
    };
    if (!given("PATH")) {
      const char* path = std::getenv("PATH");
      extra.push_back("PATH=" + std::filesystem::path(kBin).parent_path().string() + (path ? ":" + std::string(path) : ""));
    }
    extra.push_back("CUDA_MPS_PIPE_DIRECTORY=" + pipe_);
    extra.push_back("CUDA_MPS_LOG_DIRECTORY=" + log_);
    return extra;
  }

  // `nvidia-cuda-mps-control -d`; remembers the daemon for clean-up.
  RunResult start(std::vector<std::string> extra = {}) {
    RunResult r = run({kBin, "-d"}, "", env(std::move(extra)));
    if (r.exit_code == 0) daemons_.push_back(daemon_pid());
    return r;
  }

  RunResult client(const std::string& input) const { return run({kBin}, input, env()); }

  json state() const { return json::parse(read_file(pipe_ + "/tessera-sim-mps.json")); }
  int daemon_pid() const { return state().at("pid").get<int>(); }
  std::string control_log() const { return read_file(log_ + "/control.log"); }

  TempDir root_;
  std::string pipe_, log_;
  std::vector<int> daemons_;
};

TEST_F(MpsSim, StartsInTheBackgroundAndQuits) {
  RunResult r = start();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  int pid = daemon_pid();
  EXPECT_TRUE(alive(pid));
  EXPECT_TRUE(state().at("running").get<bool>());
  EXPECT_EQ(read_file(pipe_ + "/nvidia-cuda-mps-control.pid"), std::to_string(pid) + "\n");
  EXPECT_FALSE(std::filesystem::exists(pipe_ + "/control")) << "the real daemon's socket name stays free";

  RunResult q = client("quit\n");
  EXPECT_EQ(q.exit_code, 0) << q.err;
  EXPECT_EQ(q.out, "");
  EXPECT_TRUE(gone_within(pid, 5000));
  json s = state();
  EXPECT_FALSE(s.at("running").get<bool>());
  EXPECT_EQ(s.at("commands"), json::array({"quit"}));
  EXPECT_FALSE(std::filesystem::exists(pipe_ + "/nvidia-cuda-mps-control.pid"));
  EXPECT_FALSE(std::filesystem::exists(pipe_ + "/tessera-sim-mps.sock"));
}

TEST_F(MpsSim, ForegroundDaemonPrintsItsLogAndQuits) {
  Process daemon({kBin, "-f"}, root_.path() + "/fg.out", env());
  ASSERT_TRUE(daemon.wait_for_output("Starting control daemon using socket", 5000)) << daemon.output();
  EXPECT_EQ(daemon_pid(), daemon.pid());
  EXPECT_EQ(client("quit\n").exit_code, 0);
  EXPECT_EQ(daemon.wait(5000), 0);
  EXPECT_NE(daemon.output().find("Exit with status 0"), std::string::npos);
}

TEST_F(MpsSim, RefusesASecondDaemonOnTheSamePipeDirectory) {
  ASSERT_EQ(start().exit_code, 0);
  int first = daemon_pid();
  RunResult second = run({kBin, "-d"}, "", env());
  EXPECT_NE(second.exit_code, 0);
  EXPECT_NE(second.err.find("An instance of this daemon is already running"), std::string::npos) << second.err;
  EXPECT_NE(second.err.find(std::to_string(first)), std::string::npos) << second.err;
  EXPECT_TRUE(alive(first));
  EXPECT_EQ(daemon_pid(), first);
  EXPECT_EQ(client("get_default_active_thread_percentage\n").out, "100.0\n");
}

TEST_F(MpsSim, ThreadPercentageIsSetAndReadBack) {
  ASSERT_EQ(start().exit_code, 0);
  RunResult r = client("get_default_active_thread_percentage\nset_default_active_thread_percentage 25\n"
                       "get_default_active_thread_percentage\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "100.0\n25.0\n");
  json s = state();
  EXPECT_EQ(s.at("default_active_thread_percentage").get<double>(), 25.0);
  EXPECT_TRUE(s.at("default_active_thread_percentage_set").get<bool>());
  EXPECT_EQ(client("set_default_active_thread_percentage 12.5\nget_default_active_thread_percentage\n").out,
            "12.5\n");
}

TEST_F(MpsSim, PinnedMemoryLimitsAreSetPerDeviceAndReadBack) {
  ASSERT_EQ(start().exit_code, 0);
  RunResult r = client("set_default_device_pinned_mem_limit 0 2G\nset_default_device_pinned_mem_limit 1 512M\n"
                       "get_default_device_pinned_mem_limit 0\nget_default_device_pinned_mem_limit 1\n"
                       "get_default_device_pinned_mem_limit 2\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "2G\n512M\n0\n");
  json limits = state().at("default_device_pinned_mem_limits");
  EXPECT_EQ(limits.at("0").at("value"), "2G");
  EXPECT_EQ(limits.at("0").at("bytes").get<std::uint64_t>(), 2ULL << 30);
  EXPECT_EQ(limits.at("1").at("bytes").get<std::uint64_t>(), 512ULL << 20);
  EXPECT_EQ(client("set_default_device_pinned_mem_limit 0 1024MB\nget_default_device_pinned_mem_limit 0\n").out,
            "1024MB\n");
  EXPECT_EQ(state().at("default_device_pinned_mem_limits").at("0").at("bytes").get<std::uint64_t>(), 1ULL << 30);
}

// NVIDIA's device plugin writes one command with no newline and closes stdin.
TEST_F(MpsSim, CommandWithoutTrailingNewlineIsServed) {
  ASSERT_EQ(start().exit_code, 0);
  EXPECT_EQ(client("set_default_device_pinned_mem_limit 0 4606M").out, "");
  RunResult r = client("get_default_device_pinned_mem_limit 0");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "4606M\n");
}

TEST_F(MpsSim, BadValuesAreRejectedAndChangeNothing) {
  ASSERT_EQ(start().exit_code, 0);
  for (const char* bad : {"0", "101", "abc", "-5", "50%", "1e2"}) {
    RunResult r = client(std::string("set_default_active_thread_percentage ") + bad + "\n");
    EXPECT_EQ(r.exit_code, 0) << bad;
    EXPECT_NE(r.out.find("Invalid active thread percentage"), std::string::npos) << bad << ": " << r.out;
  }
  for (const char* bad : {"2X", "-1G", "G", "2g", "1.5G", "2 G", "99999999999999999T"}) {
    RunResult r = client(std::string("set_default_device_pinned_mem_limit 0 ") + bad + "\n");
    EXPECT_FALSE(r.out.empty()) << bad;
  }
  EXPECT_NE(client("set_default_device_pinned_mem_limit 0 2X\n").out.find("Invalid memory limit 2X"),
            std::string::npos);
  EXPECT_NE(client("set_default_device_pinned_mem_limit x 2G\n").out.find("Invalid device x"), std::string::npos);
  EXPECT_EQ(client("set_default_device_pinned_mem_limit 0\n").out,
            "Usage: set_default_device_pinned_mem_limit <dev> <value>\n");
  EXPECT_EQ(client("start_server -uid abc\n").out, "Usage: start_server -uid <user id>\n");
  json s = state();
  EXPECT_EQ(s.at("default_active_thread_percentage").get<double>(), 100.0);
  EXPECT_FALSE(s.at("default_active_thread_percentage_set").get<bool>());
  EXPECT_TRUE(s.at("default_device_pinned_mem_limits").empty());
  EXPECT_EQ(client("get_default_active_thread_percentage\n").out, "100.0\n");
}

TEST_F(MpsSim, UnknownAndUnmodelledCommands) {
  ASSERT_EQ(start().exit_code, 0);
  EXPECT_EQ(client("frobnicate 1\n").out, "Unrecognized command: frobnicate\n");
  EXPECT_NE(client("get_server_status 1\n").out.find("does not model"), std::string::npos);
  EXPECT_EQ(client("\n   \n").out, "");  // blank lines are skipped
}

TEST_F(MpsSim, ServersStartPerUserAndStopWithTheDaemon) {
  ASSERT_EQ(start().exit_code, 0);
  EXPECT_EQ(client("get_server_list\n").out, "");
  EXPECT_EQ(client("start_server -uid 1000\nstart_server -uid 1000\n").out, "");
  json servers = state().at("servers");
  ASSERT_EQ(servers.size(), 1u);
  int server = servers[0].at("pid").get<int>();
  EXPECT_EQ(servers[0].at("uid").get<long>(), 1000);
  EXPECT_TRUE(alive(server));
  EXPECT_EQ(client("get_server_list\n").out, std::to_string(server) + "\n");
  EXPECT_EQ(client("quit\n").exit_code, 0);
  EXPECT_TRUE(gone_within(server, 5000));
  std::string log = control_log();
  EXPECT_NE(log.find("Starting new server " + std::to_string(server) + " for user 1000"), std::string::npos);
  EXPECT_NE(log.find("NEW SERVER " + std::to_string(server) + ": Ready"), std::string::npos);
}

// The server is nvidia-cuda-mps-server from the daemon's PATH: a daemon
// started without the driver's directory there (k8s-device-plugin #1614)
// starts none, says why in its log, and its client gets no server.
TEST_F(MpsSim, AServerComesFromTheDaemonsPath) {
  TempDir empty;
  ASSERT_EQ(start({"PATH=" + empty.path()}).exit_code, 0);
  EXPECT_EQ(client("start_server -uid 1000\n").out, "");
  EXPECT_EQ(state().at("servers").size(), 0u);
  EXPECT_NE(control_log().find("Failed to start server for user 1000: cannot run nvidia-cuda-mps-server (PATH " +
                               empty.path() + "): No such file or directory"),
            std::string::npos)
      << control_log();
  RunResult r = run({kBin, "--tessera-sim-client"}, "", env());
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_EQ(state().at("clients").size(), 0u);
  EXPECT_EQ(client("quit\n").exit_code, 0);
}

// A CUDA client (the simulator's stand-in, --tessera-sim-client): the daemon
// starts a server for its user and gives it the server's limits, lowered by
// the client's own variables (MPS docs, CUDA_MPS_PINNED_DEVICE_MEM_LIMIT:
// a higher value than the server's "will be ineffective").
TEST_F(MpsSim, ClientsGetAServerAndItsLimits) {
  ASSERT_EQ(start().exit_code, 0);
  ASSERT_EQ(client("set_default_device_pinned_mem_limit 0 2G\nset_default_active_thread_percentage 50\n").out, "");
  Process first({kBin, "--tessera-sim-client"}, root_.path() + "/c1.out",
                env({"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=30", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4G"}));
  ASSERT_TRUE(first.wait_for_output("MPS server", 5000)) << first.output();
  json s = state();
  ASSERT_EQ(s.at("servers").size(), 1u);
  const int server = s["servers"][0]["pid"].get<int>();
  EXPECT_EQ(s["servers"][0]["uid"].get<long>(), static_cast<long>(::getuid()));
  EXPECT_EQ(s["servers"][0]["device_pinned_mem_limits"]["0"], "2G") << "the defaults when it started";
  ASSERT_EQ(s.at("clients").size(), 1u);
  EXPECT_EQ(s["clients"][0]["pid"].get<int>(), first.pid()) << "as the daemon sees it";
  EXPECT_EQ(s["clients"][0]["reported_pid"].get<int>(), first.pid()) << "as it says (the same namespace here)";
  EXPECT_EQ(s["clients"][0]["server"].get<int>(), server);
  EXPECT_EQ(s["clients"][0]["active_thread_percentage"].get<double>(), 30.0) << "its own, lower";
  EXPECT_EQ(s["clients"][0]["device_pinned_mem_limits"]["0"], "2G") << "its own 4G is higher: ineffective";
  EXPECT_NE(first.output().find("MPS server " + std::to_string(server) + ", active thread percentage 30.0, "
                                "pinned device memory limit 0=2G"),
            std::string::npos)
      << first.output();
  EXPECT_EQ(client("get_client_list " + std::to_string(server) + "\n").out, std::to_string(first.pid()) + "\n");
  EXPECT_NE(control_log().find("NEW CLIENT " + std::to_string(first.pid())), std::string::npos);
  // The client goes: it leaves the list.
  first.signal(SIGTERM);
  EXPECT_EQ(first.wait(5000), 0);
  for (int i = 0; i < 100 && !state().at("clients").empty(); ++i) ::usleep(20000);
  EXPECT_TRUE(state().at("clients").empty());
  EXPECT_EQ(client("get_client_list " + std::to_string(server) + "\n").out, "");
}

// set_default_* reach only servers started later; set_*(PID) reach a running
// server's clients that connect afterwards, never those connected before
// (MPS docs, "Legacy MPS v2 Interface").
TEST_F(MpsSim, LimitChangesReachNewServersAndNewClientsOnly) {
  ASSERT_EQ(start().exit_code, 0);
  ASSERT_EQ(client("set_default_device_pinned_mem_limit 0 2G\n").out, "");
  Process first({kBin, "--tessera-sim-client"}, root_.path() + "/c1.out", env());
  ASSERT_TRUE(first.wait_for_output("MPS server", 5000)) << first.output();
  const std::string server = std::to_string(state()["servers"][0]["pid"].get<int>());
  ASSERT_EQ(client("set_default_device_pinned_mem_limit 0 1G\nset_default_active_thread_percentage 40\n").out, "");
  EXPECT_EQ(client("get_device_pinned_mem_limit " + server + " 0\n").out, "2G\n") << "a running server keeps its";
  EXPECT_EQ(client("get_active_thread_percentage " + server + "\n").out, "100.0\n");
  EXPECT_EQ(client("set_device_pinned_mem_limit " + server + " 0 512M\nset_active_thread_percentage " + server +
                   " 25\n").out,
            "");
  EXPECT_EQ(client("get_device_pinned_mem_limit " + server + " 0\n").out, "512M\n");
  EXPECT_EQ(client("get_active_thread_percentage " + server + "\n").out, "25.0\n");
  Process second({kBin, "--tessera-sim-client"}, root_.path() + "/c2.out", env());
  ASSERT_TRUE(second.wait_for_output("MPS server", 5000)) << second.output();
  json s = state();
  ASSERT_EQ(s.at("clients").size(), 2u);
  EXPECT_EQ(s["clients"][0]["device_pinned_mem_limits"]["0"], "2G") << "connected before: unaffected";
  EXPECT_EQ(s["clients"][0]["active_thread_percentage"].get<double>(), 100.0);
  EXPECT_EQ(s["clients"][1]["device_pinned_mem_limits"]["0"], "512M");
  EXPECT_EQ(s["clients"][1]["active_thread_percentage"].get<double>(), 25.0);
  // Per-server commands name a server that exists, and a device the daemon has.
  EXPECT_EQ(client("get_active_thread_percentage 1\n").out, "Invalid server PID 1: no such MPS server\n");
  EXPECT_EQ(client("set_device_pinned_mem_limit " + server + " 0 lots\n").out,
            "Invalid memory limit lots: expected a number with a unit, e.g. 512M or 2G\n");
  EXPECT_EQ(client("get_client_list\n").out, "Usage: get_client_list <server PID>\n");
  // The daemon quits: its clients lose it.
  EXPECT_EQ(client("quit\n").exit_code, 0);
  EXPECT_EQ(first.wait(5000), 1);
  EXPECT_NE(first.output().find("lost its MPS server"), std::string::npos) << first.output();
  EXPECT_EQ(second.wait(5000), 1);
}

TEST_F(MpsSim, AClientWithoutADaemonSaysSo) {
  RunResult r = run({kBin, "--tessera-sim-client"}, "", env());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "Cannot find MPS control daemon process\n");
}

TEST_F(MpsSim, KilledServerLeavesTheList) {
  ASSERT_EQ(start().exit_code, 0);
  client("start_server -uid 0\n");
  int server = state().at("servers")[0].at("pid").get<int>();
  ::kill(server, SIGKILL);
  for (int i = 0; i < 100 && !state().at("servers").empty(); ++i) ::usleep(50000);
  EXPECT_EQ(client("get_server_list\n").out, "");
  EXPECT_NE(control_log().find("Server " + std::to_string(server) + " exited with status 137"), std::string::npos);
}

TEST_F(MpsSim, ClientWithoutADaemonFails) {
  RunResult r = client("get_server_list\n");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err, "Cannot find MPS control daemon process\n");
  EXPECT_EQ(r.out, "");
}

TEST_F(MpsSim, QuitWithATimeoutIsRecorded) {
  ASSERT_EQ(start().exit_code, 0);
  int pid = daemon_pid();
  EXPECT_EQ(client("quit -t 7\n").exit_code, 0);
  EXPECT_TRUE(gone_within(pid, 5000));
  EXPECT_EQ(state().at("quit_timeout").get<long>(), 7);
}

TEST_F(MpsSim, KilledDaemonIsReplacedOnTheSameDirectories) {
  ASSERT_EQ(start().exit_code, 0);
  int first = daemon_pid();
  client("set_default_active_thread_percentage 50\n");
  ASSERT_EQ(::kill(first, SIGKILL), 0);
  ASSERT_TRUE(gone_within(first, 5000));
  // Its socket and pid file are left behind; a client finds no daemon.
  EXPECT_TRUE(std::filesystem::exists(pipe_ + "/tessera-sim-mps.sock"));
  EXPECT_TRUE(std::filesystem::exists(pipe_ + "/nvidia-cuda-mps-control.pid"));
  RunResult none = client("get_server_list\n");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_EQ(none.err, "Cannot find MPS control daemon process\n");

  RunResult again = start();
  ASSERT_EQ(again.exit_code, 0) << again.err;
  int second = daemon_pid();
  EXPECT_NE(second, first);
  EXPECT_TRUE(alive(second));
  EXPECT_EQ(read_file(pipe_ + "/nvidia-cuda-mps-control.pid"), std::to_string(second) + "\n");
  EXPECT_EQ(client("get_default_active_thread_percentage\n").out, "100.0\n");  // a new daemon starts afresh
  EXPECT_EQ(client("quit\n").exit_code, 0);
  EXPECT_TRUE(gone_within(second, 5000));
}

TEST_F(MpsSim, HangHookAcceptsButNeverAnswers) {
  ASSERT_EQ(start({"TESSERA_SIM_MPS_HANG=1"}).exit_code, 0);
  EXPECT_TRUE(state().at("hang").get<bool>());
  // The client blocks, as a real one facing a wedged daemon; the caller's timeout ends it.
  Process hung({"/bin/sh", "-c", "echo get_default_active_thread_percentage | exec \"$0\"", kBin},
               root_.path() + "/client.out", env());
  EXPECT_EQ(hung.wait(1500), -1) << "the client returned: " << hung.output();
  hung.signal(SIGKILL);
  hung.wait(2000);
  EXPECT_EQ(state().at("commands"), json::array({"get_default_active_thread_percentage"}));
  EXPECT_EQ(control_log().find("Cmd:"), std::string::npos);
}

TEST_F(MpsSim, HangFileTurnsARunningDaemonSilent) {
  ASSERT_EQ(start().exit_code, 0);
  EXPECT_EQ(client("get_default_active_thread_percentage\n").out, "100.0\n");
  std::ofstream(pipe_ + "/tessera-sim-mps.hang") << "";
  Process hung({"/bin/sh", "-c", "echo get_server_list | exec \"$0\"", kBin}, root_.path() + "/client.out", env());
  EXPECT_EQ(hung.wait(1500), -1);
  hung.signal(SIGKILL);
  hung.wait(2000);
  std::filesystem::remove(pipe_ + "/tessera-sim-mps.hang");
  EXPECT_EQ(client("get_server_list\n").exit_code, 0);
}

TEST_F(MpsSim, FailStartHookRefusesToStart) {
  RunResult r = run({kBin, "-d"}, "", env({"TESSERA_SIM_MPS_FAIL_START=driver not loaded"}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("driver not loaded"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(pipe_ + "/tessera-sim-mps.json"));
  EXPECT_FALSE(std::filesystem::exists(pipe_ + "/tessera-sim-mps.sock"));
  EXPECT_NE(client("get_server_list\n").exit_code, 0);
}

TEST_F(MpsSim, MissingDirectoriesAreReported) {
  std::string missing = root_.path() + "/nowhere";
  RunResult r = run({kBin, "-d"}, "", {"CUDA_MPS_PIPE_DIRECTORY=" + missing, "CUDA_MPS_LOG_DIRECTORY=" + log_});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("CUDA_MPS_PIPE_DIRECTORY " + missing + ": No such file or directory"), std::string::npos)
      << r.err;
  r = run({kBin, "-d"}, "", {"CUDA_MPS_PIPE_DIRECTORY=" + pipe_, "CUDA_MPS_LOG_DIRECTORY=" + missing});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("CUDA_MPS_LOG_DIRECTORY " + missing + ": No such file or directory"), std::string::npos)
      << r.err;
  std::string file = root_.write("plain", "x");
  r = run({kBin, "-d"}, "", {"CUDA_MPS_PIPE_DIRECTORY=" + file, "CUDA_MPS_LOG_DIRECTORY=" + log_});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("not a directory"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(pipe_ + "/tessera-sim-mps.json"));
}

// -M (as NVIDIA's DRA driver starts the daemon for multiUser): one server for
// clients of every user. Another user's client needs root to start here,
// which the project's test runs have.
TEST_F(MpsSim, MultiUserDaemonSharesOneServerBetweenUsers) {
  RunResult r = run({kBin, "-d", "-M"}, "", env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  daemons_.push_back(daemon_pid());
  EXPECT_TRUE(state().at("multi_user").get<bool>());
  EXPECT_NE(run({kBin, "-M"}, "", env()).exit_code, 0) << "-M alone starts nothing";
  Process first({kBin, "--tessera-sim-client"}, root_.path() + "/c1.out", env());
  ASSERT_TRUE(first.wait_for_output("MPS server", 5000)) << first.output();
  ASSERT_EQ(::geteuid(), 0u) << "a client of another user needs a root test run";
  ::chmod(root_.path().c_str(), 0755);
  ::chmod(pipe_.c_str(), 0777);
  Process other({"/usr/bin/setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", kBin,
                 "--tessera-sim-client"},
                root_.path() + "/c2.out", env());
  ASSERT_TRUE(other.wait_for_output("MPS server", 5000)) << other.output();
  json s = state();
  ASSERT_EQ(s.at("servers").size(), 1u) << s.dump(2);
  ASSERT_EQ(s.at("clients").size(), 2u) << s.dump(2);
  EXPECT_EQ(s["clients"][0]["server"], s["clients"][1]["server"]);
  EXPECT_EQ(s["clients"][1]["uid"].get<long>(), 65534);
  other.signal(SIGTERM);
  first.signal(SIGTERM);
  EXPECT_EQ(other.wait(5000), 0);
  EXPECT_EQ(first.wait(5000), 0);
  EXPECT_EQ(client("quit\n").exit_code, 0);
}

TEST_F(MpsSim, UnwritableDirectoriesAreReported) {
  // /proc/self takes no new files, whoever runs the test (root included).
  RunResult r = run({kBin, "-d"}, "", {"CUDA_MPS_PIPE_DIRECTORY=/proc/self", "CUDA_MPS_LOG_DIRECTORY=" + log_});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("/proc/self"), std::string::npos) << r.err;
  r = run({kBin, "-d"}, "", {"CUDA_MPS_PIPE_DIRECTORY=" + pipe_, "CUDA_MPS_LOG_DIRECTORY=/proc/self"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("/proc/self"), std::string::npos) << r.err;
  EXPECT_NE(client("get_server_list\n").exit_code, 0) << "no daemon was left running";
  if (::geteuid() != 0) {
    ::chmod(log_.c_str(), 0555);
    r = run({kBin, "-d"}, "", env());
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("not writable"), std::string::npos) << r.err;
    ::chmod(log_.c_str(), 0755);
  }
}

TEST_F(MpsSim, ControlLogLinesFollowTheRealFormat) {
  ASSERT_EQ(start().exit_code, 0);
  int pid = daemon_pid();
  client("get_default_active_thread_percentage\n");
  client("set_default_device_pinned_mem_limit 0 2G\n");
  client("quit\n");
  ASSERT_TRUE(gone_within(pid, 5000));
  std::string log = control_log();
  std::vector<std::string> messages;
  std::regex line(R"(^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} Control ([ \d]{5,})\] (.*)$)");
  std::istringstream in(log);
  for (std::string l; std::getline(in, l);) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(l, m, line)) << l;
    EXPECT_EQ(std::stoi(m[1].str()), pid) << l;
    messages.push_back(m[2].str());
  }
  std::vector<std::string> expected{
      "Starting control daemon using socket " + pipe_ + "/tessera-sim-mps.sock",
      "To connect CUDA applications to this daemon, set env CUDA_MPS_PIPE_DIRECTORY=" + pipe_,
      "CUDA MPS Control binary version: 13000 (tessera simulator)",
      "Accepting connection...",
      "NEW UI",
      "Cmd:get_default_active_thread_percentage",
      "100.0",
      "UI closed",
      "Accepting connection...",
      "NEW UI",
      "Cmd:set_default_device_pinned_mem_limit 0 2G",
      "UI closed",
      "Accepting connection...",
      "NEW UI",
      "Cmd:quit",
      "Exit with status 0",
  };
  EXPECT_EQ(messages, expected);
}

TEST_F(MpsSim, RecordsTheDevicesItWasStartedFor) {
  const std::string mig = "MIG-1b2c3d4e-0000-5555-aaaa-0123456789ab";
  ASSERT_EQ(start({"CUDA_VISIBLE_DEVICES=" + mig}).exit_code, 0);
  json s = state();
  EXPECT_EQ(s.at("cuda_visible_devices"), mig);
  EXPECT_EQ(s.at("visible_devices"), json::array({mig}));
  EXPECT_EQ(client("set_default_device_pinned_mem_limit 0 10G\n").out, "");
  EXPECT_EQ(client("set_default_device_pinned_mem_limit " + mig + " 10G\n").out, "");
  EXPECT_EQ(client("set_default_device_pinned_mem_limit MIG-1b2c 5G\n").out, "");  // a UUID's leading characters
  EXPECT_NE(client("set_default_device_pinned_mem_limit 1 10G\n").out.find("Invalid device 1"), std::string::npos);
  EXPECT_NE(client("set_default_device_pinned_mem_limit GPU-ffff 10G\n").out.find("not among CUDA_VISIBLE_DEVICES"),
            std::string::npos);
  EXPECT_EQ(state().at("default_device_pinned_mem_limits").size(), 3u);
}

TEST_F(MpsSim, DaemonStartedWithoutVisibleDevicesRecordsNull) {
  // The runner's own CUDA_VISIBLE_DEVICES, if any, would be inherited: only check when it has none.
  if (std::getenv("CUDA_VISIBLE_DEVICES")) GTEST_SKIP() << "CUDA_VISIBLE_DEVICES is set for the test run";
  ASSERT_EQ(start().exit_code, 0);
  EXPECT_TRUE(state().at("cuda_visible_devices").is_null());
  EXPECT_EQ(client("set_default_device_pinned_mem_limit 3 1G\n").out, "");
}

TEST_F(MpsSim, SigtermStopsTheDaemonCleanly) {
  ASSERT_EQ(start().exit_code, 0);
  int pid = daemon_pid();
  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  ASSERT_TRUE(gone_within(pid, 5000));
  EXPECT_FALSE(state().at("running").get<bool>());
  EXPECT_NE(control_log().find("Exit with status 0"), std::string::npos);
  EXPECT_EQ(start().exit_code, 0);
}

}  // namespace
