// `tessera mps-host`'s protocol, both ends in this process over a real unix
// socket, with the simulated control program as the daemons: daemons that
// outlive the client that asked for them and are adopted by the next one,
// deaths reported as events, a client without a host, a host that goes.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "mps/host.hpp"
#include "support/run.hpp"
#include "support/sim_mps.hpp"

namespace {

using namespace std::chrono_literals;
using tessera::mps::Clock;
using tessera::mps::DaemonSpec;
using tessera::mps::DaemonStatus;
using tessera::mps::HostClient;
using tessera::mps::HostOptions;
using tessera::mps::HostServer;
using tessera::testing::TempDir;

constexpr const char* kGpu = "GPU-11111111-2222-3333-4444-555555555555";
constexpr const char* kMig = "MIG-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee";

DaemonSpec spec(const TempDir& root, const std::string& uuid, std::uint64_t mib, std::uint32_t percent) {
  DaemonSpec s;
  s.uuid = uuid;
  s.resource = "nvidia.com/gpu";
  s.dirs = {root.path() + "/mps/" + uuid + "/pipe", root.path() + "/mps/" + uuid + "/log"};
  s.pinned_mem_limit_mib = mib;
  s.active_thread_percentage = percent;
  return s;
}

HostOptions host_options(const TempDir& root) {
  HostOptions o;
  o.socket = root.path() + "/host/mps-host.sock";
  o.supervisor.control.binary = TESSERA_MPS_CONTROL_SIM;
  o.supervisor.control.timeout = 3s;
  o.supervisor.backoff_min = 200ms;
  o.supervisor.backoff_max = 1s;
  o.supervisor.quit_grace = 1s;
  return o;
}

nlohmann::json state(const DaemonSpec& s) {
  std::ifstream in(s.dirs.pipe + "/tessera-sim-mps.json");
  if (!in) return nullptr;
  return nlohmann::json::parse(in, nullptr, false);
}

bool running(pid_t pid) { return tessera::testing::process_running(pid); }

// Waits until `pred` holds, woken by the client's changes (and every 5 ms).
bool wait_until(const tessera::mps::Daemons& d, const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!pred()) {
    if (Clock::now() >= deadline) return false;
    pollfd p{d.changed_fd(), POLLIN, 0};
    ::poll(&p, 1, 5);
  }
  return true;
}

DaemonStatus status_of(const tessera::mps::Daemons& d, const std::string& uuid) {
  for (const auto& s : d.status())
    if (s.spec.uuid == uuid) return s;
  return {};
}

class MpsHost : public ::testing::Test {
 protected:
  void TearDown() override { tessera::testing::kill_simulated_mps_daemons(root.path()); }
  TempDir root;
};

TEST(MpsHostWire, RequestsAndStatesRoundTrip) {
  DaemonSpec a{"GPU-1", "nvidia.com/gpu", {"/run/nvidia/mps/GPU-1/pipe", "/run/nvidia/mps/GPU-1/log"}, 20357, 25, true};
  auto want = tessera::mps::decode_want(tessera::mps::encode_want({a}));
  ASSERT_TRUE(want) << want.error().message;
  ASSERT_EQ(want->size(), 1u);
  EXPECT_EQ((*want)[0], a);
  DaemonStatus s;
  s.spec = a;
  s.up = true;
  s.pid = 4242;
  s.since = "2026-12-02T10:11:12";
  s.limits = "20357M pinned per client, 25.0% of threads";
  s.clients = 3;
  s.note = "limits changed";
  DaemonStatus down;
  down.spec = a;
  down.spec.uuid = "GPU-2";
  down.error = "the MPS control daemon (pid 7) was killed by signal 9 (Killed)";
  down.failures = 2;
  down.retry_in_ms = 2000;
  const std::string line = tessera::mps::encode_status({s, down});
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "one document, one line";
  auto back = tessera::mps::decode_status(line);
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_EQ(back->size(), 2u);
  EXPECT_EQ((*back)[0], s);
  EXPECT_EQ((*back)[1], down);
  EXPECT_FALSE(tessera::mps::decode_want("{\"want\": 3}"));
  EXPECT_FALSE(tessera::mps::decode_want("{\"want\": [{\"uuid\": \"GPU-1\"}]}")) << "no directories";
  EXPECT_FALSE(tessera::mps::decode_want("not json"));
  auto refused = tessera::mps::decode_status("{\"error\": \"bad\"}");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("bad"), std::string::npos);
}

TEST_F(MpsHost, DaemonsOutliveTheirClientAndTheNextOneAdoptsThem) {
  auto host = HostServer::start(host_options(root));
  ASSERT_TRUE(host) << host.error().message;
  const std::string socket = (*host)->socket();
  EXPECT_EQ(std::filesystem::status(std::filesystem::path(socket).parent_path()).permissions() &
                std::filesystem::perms::all,
            std::filesystem::perms::owner_all)
      << "the socket's directory is private";
  const auto gpu = spec(root, kGpu, 20357, 25), mig = spec(root, kMig, 4864, 50);
  pid_t gpu_pid = -1, mig_pid = -1;
  {
    HostClient first(socket);
    first.want({gpu, mig});
    ASSERT_TRUE(wait_until(first, [&] { return first.up().size() == 2; }, 10s))
        << status_of(first, kGpu).error << " / " << status_of(first, kMig).error;
    gpu_pid = status_of(first, kGpu).pid;
    mig_pid = status_of(first, kMig).pid;
    EXPECT_EQ(gpu_pid, state(gpu)["pid"].get<pid_t>());
    EXPECT_EQ(state(gpu)["default_device_pinned_mem_limits"]["0"]["value"], "20357M");
    first.shutdown();  // the plugin stops, or is upgraded
  }
  // The host has seen the client go (its connection closed): the daemons outlive it.
  const auto gone_by = Clock::now() + 5s;
  while ((*host)->connections() != 0 && Clock::now() < gone_by) std::this_thread::sleep_for(5ms);
  ASSERT_EQ((*host)->connections(), 0u) << "the host never saw its client go";
  EXPECT_TRUE(running(gpu_pid) && running(mig_pid)) << "the daemons outlive the client";
  EXPECT_TRUE((*host)->supervisor().healthy(kGpu));
  const size_t commands_before = state(gpu)["commands"].size();
  // The next client: the same daemons, same pids, their limits read back.
  HostClient second(socket);
  second.want({gpu, mig});
  ASSERT_TRUE(wait_until(second, [&] { return second.up().size() == 2; }, 5s)) << status_of(second, kGpu).error;
  EXPECT_EQ(status_of(second, kGpu).pid, gpu_pid) << "adopted, not started again";
  EXPECT_EQ(status_of(second, kMig).pid, mig_pid);
  EXPECT_NE(status_of(second, kGpu).limits.find("20357M"), std::string::npos) << status_of(second, kGpu).limits;
  // Its first want has the kept daemons' limits read back (and their clients counted).
  auto read_back = [&] {
    const auto commands = state(gpu)["commands"];
    return commands.size() > commands_before &&
           std::find(commands.begin() + static_cast<long>(commands_before), commands.end(), "get_server_list") !=
               commands.end();
  };
  const auto deadline = Clock::now() + 5s;
  while (!read_back() && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  EXPECT_TRUE(read_back()) << state(gpu)["commands"].dump();
  const auto commands = state(gpu)["commands"];
  EXPECT_NE(std::find(commands.begin() + static_cast<long>(commands_before), commands.end(),
                      "get_default_device_pinned_mem_limit 0"),
            commands.end());
  EXPECT_EQ(std::find(commands.begin() + static_cast<long>(commands_before), commands.end(), "quit"), commands.end());
  EXPECT_EQ(state(gpu)["pid"].get<pid_t>(), gpu_pid);
}

TEST_F(MpsHost, ADaemonsDeathReachesTheClientAsAnEventWithin100ms) {
  auto host = HostServer::start(host_options(root));
  ASSERT_TRUE(host) << host.error().message;
  HostClient client((*host)->socket());
  const auto gpu = spec(root, kGpu, 1024, 50);
  client.want({gpu});
  ASSERT_TRUE(wait_until(client, [&] { return client.up().size() == 1; }, 10s)) << status_of(client, kGpu).error;
  const pid_t pid = status_of(client, kGpu).pid;
  const auto t0 = Clock::now();
  ::kill(pid, SIGKILL);
  ASSERT_TRUE(wait_until(client, [&] { return client.up().empty(); }, 2s));
  const auto seen = Clock::now() - t0;
  EXPECT_LT(seen, 100ms) << std::chrono::duration<double, std::milli>(seen).count() << " ms";
  EXPECT_NE(status_of(client, kGpu).error.find("killed by signal 9"), std::string::npos)
      << status_of(client, kGpu).error;
  ASSERT_TRUE(wait_until(client, [&] { return client.up().size() == 1; }, 5s)) << "restarted by the host";
  EXPECT_NE(status_of(client, kGpu).pid, pid);
}

TEST_F(MpsHost, AClientWithoutAHostSaysWhyAndConnectsOnceItComes) {
  const auto options = host_options(root);
  HostClient client(options.socket);
  const auto gpu = spec(root, kGpu, 1024, 50);
  client.want({gpu});
  ASSERT_TRUE(wait_until(client, [&] { return status_of(client, kGpu).error.find("cannot reach") != std::string::npos; },
                         2s))
      << status_of(client, kGpu).error;
  EXPECT_NE(status_of(client, kGpu).error.find(options.socket), std::string::npos);
  EXPECT_TRUE(client.up().empty());
  auto host = HostServer::start(options);
  ASSERT_TRUE(host) << host.error().message;
  ASSERT_TRUE(wait_until(client, [&] { return client.up().size() == 1; }, 10s)) << status_of(client, kGpu).error;
  EXPECT_TRUE(client.connected());
}

TEST_F(MpsHost, AHostThatStopsTakesItsDaemonsAndItsClientsSeeIt) {
  auto host = HostServer::start(host_options(root));
  ASSERT_TRUE(host) << host.error().message;
  HostClient client((*host)->socket());
  const auto gpu = spec(root, kGpu, 1024, 50);
  client.want({gpu});
  ASSERT_TRUE(wait_until(client, [&] { return client.up().size() == 1; }, 10s));
  const pid_t pid = status_of(client, kGpu).pid;
  (*host)->stop();
  EXPECT_FALSE(running(pid));
  EXPECT_FALSE(std::filesystem::exists((*host)->socket())) << "its socket goes with it";
  ASSERT_TRUE(wait_until(client, [&] { return !client.connected(); }, 2s));
  EXPECT_TRUE(client.up().empty());
}

TEST_F(MpsHost, AnEmptyWantStopsTheDaemonsASecondHostIsRefusedAndBadRequestsAreAnswered) {
  const auto options = host_options(root);
  auto host = HostServer::start(options);
  ASSERT_TRUE(host) << host.error().message;
  auto again = HostServer::start(options);
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message.find("another tessera mps-host answers on " + options.socket), std::string::npos);
  HostClient client(options.socket);
  const auto gpu = spec(root, kGpu, 1024, 50);
  client.want({gpu});
  ASSERT_TRUE(wait_until(client, [&] { return client.up().size() == 1; }, 10s));
  const pid_t pid = status_of(client, kGpu).pid;
  client.want({});  // a config without MPS
  ASSERT_TRUE(tessera::testing::process_stops(pid)) << "no longer wanted: quit";
  EXPECT_EQ(state(gpu)["commands"].back(), "quit");
  // A request it cannot read gets an answer saying so.
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, options.socket.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_GT(::send(fd, "hello\n", 6, MSG_NOSIGNAL), 0);
  std::string got;
  const auto deadline = Clock::now() + 3s;
  while (got.find("\"error\"") == std::string::npos && Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  EXPECT_NE(got.find("\"daemons\""), std::string::npos) << "the state first: " << got;
  EXPECT_NE(got.find("not a request"), std::string::npos) << got;
}

}  // namespace
