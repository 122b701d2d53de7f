// `tessera plugin` as the node agent runs it: against a simulated node, with
// the kubelet peer in this process.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>

#include "kubelet/fake_kubelet.hpp"
#include "support/run.hpp"

namespace tessera {
namespace {

using namespace std::chrono_literals;
using testing::Process;
using testing::run;
using testing::TempDir;

const std::string kBin = TESSERA_BIN;

struct SimNode {
  TempDir dir;
  std::string node = dir.path() + "/node";
  std::string kubelet_dir = dir.path() + "/device-plugins";
  sim::FakeKubelet kubelet{kubelet_dir};

  SimNode() {
    auto r = run({kBin, "sim", "create", node, "--gpu", "A100-SXM4-80GB", "--count", "2"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::filesystem::create_directories(kubelet_dir);
    EXPECT_TRUE(kubelet.start());
  }
};

TEST(PluginCommand, TimeSlicedReplicasXidRecoveryAndCleanStop) {
  SimNode n;
  auto config = n.dir.write("dp.yaml", R"(version: v1
sharing:
  timeSlicing:
    resources: [{name: nvidia.com/gpu, replicas: 4}]
)");
  Process plugin({kBin, "plugin", "--config", config, "--sim", n.node, "--kubelet-dir", n.kubelet_dir,
                  "--health-recovery", "1"},
                 n.dir.path() + "/plugin.log");
  ASSERT_TRUE(plugin.wait_for_output("tessera plugin: ready: nvidia.com/gpu", 10000)) << plugin.output();
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 8; }, 5s));
  auto devices = n.kubelet.devices("nvidia.com/gpu");
  auto a = n.kubelet.allocate("nvidia.com/gpu", {devices[0].id});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->envs.at("TESSERA_DEVICE_MEMORY_LIMIT_0"), std::to_string((80ull << 30) / 4));

  // XID 79 on GPU 0: its four replicas turn Unhealthy, then recover.
  auto ev = run({kBin, "sim", "event", n.node, "--gpu", "0", "--xid", "79"});
  ASSERT_EQ(ev.exit_code, 0) << ev.err;
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) {
    return std::count_if(d.begin(), d.end(), [](const auto& x) { return x.health == "Unhealthy"; }) == 4;
  }, 3s)) << plugin.output();
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) {
    return std::count_if(d.begin(), d.end(), [](const auto& x) { return x.health == "Healthy"; }) == 8;
  }, 5s)) << plugin.output();
  // An application XID changes nothing.
  ASSERT_EQ(run({kBin, "sim", "event", n.node, "--gpu", "1", "--xid", "13"}).exit_code, 0);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(n.kubelet.healthy_count("nvidia.com/gpu"), 8u);

  plugin.signal(SIGTERM);
  EXPECT_EQ(plugin.wait(5000), 0) << plugin.output();
  for (const auto& e : std::filesystem::directory_iterator(n.kubelet_dir))
    EXPECT_EQ(e.path().filename().string().rfind("tessera-", 0), std::string::npos) << e.path();
}

TEST(PluginCommand, InvalidConfigExitsWithTheMessage) {
  SimNode n;
  auto config = n.dir.write("bad.yaml", "version: v1\nflags:\n  migStrategy: sometimes\n");
  auto r = run({kBin, "plugin", "--config", config, "--sim", n.node, "--kubelet-dir", n.kubelet_dir});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(config + ":3:16: error: flags.migStrategy: got 'sometimes' (allowed: none, single, mixed)"),
            std::string::npos)
      << r.err;
}

TEST(PluginCommand, SighupReloadsTheConfig) {
  SimNode n;
  auto config = n.dir.write("dp.yaml", "version: v1\n");
  Process plugin({kBin, "plugin", "--config", config, "--sim", n.node, "--kubelet-dir", n.kubelet_dir},
                 n.dir.path() + "/plugin.log");
  ASSERT_TRUE(plugin.wait_for_output("ready", 10000)) << plugin.output();
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 2; }, 5s));
  n.dir.write("dp.yaml", "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 3}]\n");
  plugin.signal(SIGHUP);
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 6; }, 5s)) << plugin.output();
  // A broken config on reload keeps the previous one serving.
  n.dir.write("dp.yaml", "version: v9\n");
  plugin.signal(SIGHUP);
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(n.kubelet.devices("nvidia.com/gpu").size(), 6u);
  EXPECT_TRUE(plugin.wait_for_output("unknown version 'v9'", 3000)) << plugin.output();
  plugin.signal(SIGTERM);
  EXPECT_EQ(plugin.wait(5000), 0);
}

}  // namespace
}  // namespace tessera
