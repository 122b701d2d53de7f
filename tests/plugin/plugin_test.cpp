// The device plugin against the kubelet peer: registration, ListAndWatch,
// Allocate, health updates and kubelet restarts, over real unix sockets.
#include <gtest/gtest.h>

#include <dirent.h>

#include <filesystem>
#include <thread>

#include "kubelet/fake_kubelet.hpp"
#include "plugin/plugin_manager.hpp"
#include "sharing/fixtures.hpp"
#include "support/run.hpp"

namespace tessera::plugin {
namespace {

using namespace std::chrono_literals;
using sharing::testing::parse;
using sharing::testing::two_gpu_node;

size_t open_fds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

struct Node {
  tessera::testing::TempDir dir;
  sim::FakeKubelet kubelet{dir.path()};
  std::unique_ptr<PluginManager> plugin;

  explicit Node(const std::string& config_yaml, bool start_kubelet = true) {
    if (start_kubelet) { EXPECT_TRUE(kubelet.start()); }
    PluginOptions opts;
    opts.kubelet_dir = dir.path();
    opts.config = parse(config_yaml);
    opts.health.recovery = 300ms;
    plugin = std::make_unique<PluginManager>(opts);
  }
};

TEST(Plugin, MixedStrategyRegistersEachProfile) {
  Node node("version: v1\nflags: {migStrategy: mixed}\n");
  ASSERT_TRUE(node.plugin->start(two_gpu_node()));
  ASSERT_TRUE(node.kubelet.wait_for_registrations(3, 5s));
  std::set<std::string> names;
  for (const auto& r : node.kubelet.registrations()) {
    EXPECT_EQ(r.version, "v1beta1");
    EXPECT_TRUE(r.preferred_allocation);
    names.insert(r.resource);
  }
  EXPECT_EQ(names, (std::set<std::string>{"nvidia.com/gpu", "nvidia.com/mig-1g.20gb", "nvidia.com/mig-3g.40gb"}));
  EXPECT_TRUE(node.kubelet.wait_for("nvidia.com/mig-1g.20gb", [](const auto& d) { return d.size() == 2; }, 5s));
  auto a = node.kubelet.allocate("nvidia.com/mig-1g.20gb", {"MIG-b"});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), "MIG-b");
}

TEST(Plugin, TimeSlicingAdvertisesReplicasWithQuota) {
  Node node(R"(version: v1
sharing:
  timeSlicing:
    renameByDefault: true
    resources: [{name: nvidia.com/gpu, replicas: 4}]
)");
  ASSERT_TRUE(node.plugin->start(two_gpu_node()));
  ASSERT_TRUE(node.kubelet.wait_for("nvidia.com/gpu.shared", [](const auto& d) { return d.size() == 8; }, 5s));
  auto a = node.kubelet.allocate("nvidia.com/gpu.shared", {"GPU-1111::3"});
  ASSERT_TRUE(a);
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), "GPU-1111");
  EXPECT_EQ(a->envs.at("TESSERA_DEVICE_MEMORY_LIMIT_0"), std::to_string(20ull << 30));
  auto p = node.kubelet.preferred("nvidia.com/gpu.shared", {"GPU-0000::0", "GPU-1111::0", "GPU-1111::1"}, {}, 1);
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->size(), 1u);
}

TEST(Plugin, BadRequestsAreGrpcErrorsThatSayWhy) {
  Node node("version: v1\nsharing:\n  mps:\n    resources: [{name: nvidia.com/gpu, replicas: 2}]\n");
  ASSERT_TRUE(node.plugin->start(two_gpu_node()));
  ASSERT_TRUE(node.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 4; }, 5s));
  auto unknown = node.kubelet.allocate("nvidia.com/gpu", {"GPU-dead::0"});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().message, "nvidia.com/gpu: unknown device id 'GPU-dead::0'");
  auto two = node.kubelet.allocate("nvidia.com/gpu", {"GPU-0000::0", "GPU-0000::1"});
  ASSERT_FALSE(two);
  EXPECT_EQ(two.error().message, "nvidia.com/gpu: maximum request size for shared resources is 1 (asked for 2)");
  // The plugin keeps serving after the bad requests.
  EXPECT_TRUE(node.kubelet.allocate("nvidia.com/gpu", {"GPU-0000::1"}));
  auto too_many = node.kubelet.preferred("nvidia.com/gpu", {"GPU-0000::0"}, {}, 3);
  ASSERT_FALSE(too_many);
  EXPECT_NE(too_many.error().message.find("cannot choose 3 of 1 available devices"), std::string::npos);
}

TEST(Plugin, XidMakesDevicesUnhealthyAndTheyComeBack) {
  Node node("version: v1\nflags: {migStrategy: mixed}\n");
  ASSERT_TRUE(node.plugin->start(two_gpu_node()));
  ASSERT_TRUE(node.kubelet.wait_for("nvidia.com/mig-1g.20gb", [](const auto& d) { return d.size() == 2; }, 5s));
  auto t0 = sharing::Clock::now();
  node.plugin->on_event({sharing::HealthEvent::Kind::xid, 79, "GPU-1111", std::nullopt, std::nullopt, t0});
  auto unhealthy = [](const auto& d) {
    return !d.empty() && std::all_of(d.begin(), d.end(), [](const auto& x) { return x.health == "Unhealthy"; });
  };
  EXPECT_TRUE(node.kubelet.wait_for("nvidia.com/mig-1g.20gb", unhealthy, 2s));
  EXPECT_TRUE(node.kubelet.wait_for("nvidia.com/mig-3g.40gb", unhealthy, 2s));
  EXPECT_EQ(node.kubelet.healthy_count("nvidia.com/gpu"), 1u);  // GPU 0 is fine
  node.plugin->tick(t0 + 1s);                                    // quiet for longer than recovery
  EXPECT_TRUE(node.kubelet.wait_for("nvidia.com/mig-1g.20gb", [](const auto& d) {
    return d.size() == 2 && d[0].health == "Healthy" && d[1].health == "Healthy";
  }, 2s));
}

TEST(Plugin, ReRegistersAfterKubeletRestartsWithoutLeaking) {
  Node node("version: v1\n");
  ASSERT_TRUE(node.plugin->start(two_gpu_node()));
  ASSERT_TRUE(node.kubelet.wait_for_registrations(1, 5s));
  size_t fds_before = 0;
  for (int i = 0; i < 100; ++i) {
    node.kubelet.stop();
    auto restarted = std::chrono::steady_clock::now();
    ASSERT_TRUE(node.kubelet.start(/*clear_dir=*/true));
    ASSERT_TRUE(node.kubelet.wait_for_registrations(static_cast<size_t>(i) + 2, 1s)) << "restart " << i;
    EXPECT_LT(std::chrono::steady_clock::now() - restarted, 1s);
    ASSERT_TRUE(node.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 2; }, 2s));
    if (i == 9) fds_before = open_fds();
  }
  // No growth in open files across the last 90 restarts: once connections in
  // flight settle, the count is back near where it was. A leak of even one
  // descriptor per restart would add 90; gRPC's pollers and connections being
  // torn down account for a few either way, more on a loaded machine.
  auto settled = std::chrono::steady_clock::now() + 5s;
  while (open_fds() > fds_before + 12 && std::chrono::steady_clock::now() < settled) std::this_thread::sleep_for(50ms);
  EXPECT_LE(open_fds(), fds_before + 12);
}

TEST(Plugin, MissingKubeletIsRetriedWhenItAppears) {
  Node node("version: v1\n", /*start_kubelet=*/false);
  ASSERT_TRUE(node.plugin->start(two_gpu_node()));  // serves even without a kubelet
  EXPECT_EQ(node.plugin->registrations(), 0u);
  ASSERT_TRUE(node.kubelet.start());
  EXPECT_TRUE(node.kubelet.wait_for_registrations(1, 2s));
}

TEST(Plugin, KubeletSocketThatIsNotASocket) {
  tessera::testing::TempDir dir;
  dir.write("kubelet.sock", "not a socket");
  auto r = register_resource(dir.path() + "/kubelet.sock", "x.sock", "nvidia.com/gpu", 500ms);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message, dir.path() + "/kubelet.sock is not a socket");
  auto missing = register_resource(dir.path() + "/nope.sock", "x.sock", "nvidia.com/gpu", 500ms);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("does not exist (is the kubelet running?)"), std::string::npos);
}

TEST(Plugin, ReloadKeepsServingResourcesThatRemain) {
  Node node("version: v1\nflags: {migStrategy: mixed}\n");
  ASSERT_TRUE(node.plugin->start(two_gpu_node()));
  ASSERT_TRUE(node.kubelet.wait_for("nvidia.com/mig-3g.40gb", [](const auto& d) { return d.size() == 1; }, 5s));
  size_t before = node.kubelet.registration_count();
  ASSERT_TRUE(node.plugin->reload(parse(R"(version: v1
flags: {migStrategy: mixed}
sharing:
  timeSlicing:
    resources: [{name: nvidia.com/mig-3g.40gb, replicas: 3}]
)")));
  // Same resource names: no new registration, the open stream sees the replicas.
  EXPECT_TRUE(node.kubelet.wait_for("nvidia.com/mig-3g.40gb", [](const auto& d) { return d.size() == 3; }, 5s));
  EXPECT_EQ(node.kubelet.registration_count(), before);
  EXPECT_TRUE(node.kubelet.allocate("nvidia.com/mig-1g.20gb", {"MIG-a"}));
}

TEST(Plugin, StopRemovesSockets) {
  Node node("version: v1\nflags: {migStrategy: mixed}\n");
  ASSERT_TRUE(node.plugin->start(two_gpu_node()));
  ASSERT_TRUE(node.kubelet.wait_for_registrations(3, 5s));
  node.plugin->stop();
  size_t plugin_sockets = 0;
  for (const auto& e : std::filesystem::directory_iterator(node.dir.path()))
    plugin_sockets += e.path().filename().string().rfind("tessera-", 0) == 0;
  EXPECT_EQ(plugin_sockets, 0u);
}

}  // namespace
}  // namespace tessera::plugin
