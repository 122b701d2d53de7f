// The pod-resources v1 client against the kubelet peer, over real unix sockets.
#include "plugin/pod_resources.hpp"

#include <gtest/gtest.h>

#include "plugin/pod_fixture.hpp"

namespace tessera::plugin {
namespace {

using namespace std::chrono_literals;
using testing::AllocatedNode;
using testing::PlainSocket;

const ResourceDevices* find(const std::vector<ResourceDevices>& rs, const std::string& resource) {
  for (const auto& r : rs)
    if (r.resource == resource) return &r;
  return nullptr;
}

// `c` is named `name` and holds exactly `ids` of one resource.
void expect_holds(const ContainerDevices& c, const std::string& name, const std::string& resource,
                  const std::vector<std::string>& ids) {
  EXPECT_EQ(c.name, name);
  ASSERT_EQ(c.resources.size(), 1u) << name;
  EXPECT_EQ(c.resources[0].resource, resource) << name;
  EXPECT_EQ(c.resources[0].ids, ids) << name;
}

TEST(PodResources, ListReportsEachContainersDevices) {
  AllocatedNode node;
  auto pods = list_pod_resources(node.pod_resources, 5s);
  ASSERT_TRUE(pods) << pods.error().message;
  ASSERT_EQ(pods->size(), 2u);
  // The fake answers in (namespace, pod, container) order.
  const auto& embed = (*pods)[0];
  EXPECT_EQ(embed.pod_namespace, "default");
  EXPECT_EQ(embed.name, "embed-1");
  ASSERT_EQ(embed.containers.size(), 1u);
  expect_holds(embed.containers[0], "main", "nvidia.com/mig-1g.20gb", {"MIG-a", "MIG-b"});

  const auto& llm = (*pods)[1];
  EXPECT_EQ(llm.pod_namespace, "ml");
  EXPECT_EQ(llm.name, "llm-0");
  ASSERT_EQ(llm.containers.size(), 2u);
  expect_holds(llm.containers[0], "server", "nvidia.com/gpu", {"GPU-0000"});
  expect_holds(llm.containers[1], "sidecar", "nvidia.com/mig-3g.40gb", {"MIG-c"});
}

// A container's later allocation of another resource is listed beside the first.
TEST(PodResources, ContainerWithTwoResources) {
  AllocatedNode node;
  node.give({"ml", "llm-0", "server"}, "nvidia.com/mig-1g.20gb", {"MIG-a"});
  auto pods = list_pod_resources(node.pod_resources, 5s);
  ASSERT_TRUE(pods) << pods.error().message;
  ASSERT_EQ(pods->size(), 2u);
  const auto& server = (*pods)[1].containers.at(0);
  ASSERT_EQ(server.name, "server");
  ASSERT_EQ(server.resources.size(), 2u);
  auto* gpu = find(server.resources, "nvidia.com/gpu");
  auto* mig = find(server.resources, "nvidia.com/mig-1g.20gb");
  ASSERT_TRUE(gpu && mig);
  EXPECT_EQ(gpu->ids, std::vector<std::string>{"GPU-0000"});
  EXPECT_EQ(mig->ids, std::vector<std::string>{"MIG-a"});
}

TEST(PodResources, AllocationThePluginRefusesIsNotReported) {
  AllocatedNode node;
  auto refused = node.kubelet.allocate({"ml", "llm-1", "server"}, "nvidia.com/gpu", {"GPU-9999"});
  ASSERT_FALSE(refused);
  auto pods = list_pod_resources(node.pod_resources, 5s);
  ASSERT_TRUE(pods) << pods.error().message;
  for (const auto& p : *pods) EXPECT_NE(p.name, "llm-1");
}

TEST(PodResources, EmptyNodeListsNothing) {
  tessera::testing::TempDir dir;
  sim::FakeKubelet kubelet(dir.path() + "/device-plugins");
  ASSERT_TRUE(kubelet.serve_pod_resources(dir.path() + "/pod-resources/kubelet.sock"));
  auto pods = list_pod_resources(dir.path() + "/pod-resources/kubelet.sock", 5s);
  ASSERT_TRUE(pods) << pods.error().message;
  EXPECT_TRUE(pods->empty());
}

// A 1.20 kubelet serves List only: GetAllocatableResources is a clear "unsupported".
TEST(PodResources, GetAllocatableResourcesFromA120KubeletIsUnsupported) {
  AllocatedNode node;
  auto r = allocatable_devices(node.pod_resources, 5s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::unsupported);
  EXPECT_EQ(r.error().message, node.pod_resources +
                                   " does not implement v1.PodResourcesLister/GetAllocatableResources (the "
                                   "kubelet serves it since Kubernetes 1.21)");
}

TEST(PodResources, MissingSocketSaysSo) {
  tessera::testing::TempDir dir;
  auto path = dir.path() + "/pod-resources/kubelet.sock";
  auto r = list_pod_resources(path, 5s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::not_found);
  EXPECT_EQ(r.error().message.rfind(path + " does not exist: is the kubelet running with the pod-resources API?", 0),
            0u)
      << r.error().message;
}

TEST(PodResources, FileThatIsNotASocket) {
  tessera::testing::TempDir dir;
  auto path = dir.write("kubelet.sock", "");
  auto r = list_pod_resources(path, 5s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::invalid_argument);
  EXPECT_EQ(r.error().message, path + " is not a socket");
}

TEST(PodResources, StaleSocketIsRefusedAtOnce) {
  tessera::testing::TempDir dir;
  auto path = dir.path() + "/kubelet.sock";
  { PlainSocket gone(path, false); }  // closed, its file left behind: nothing accepts
  auto start = std::chrono::steady_clock::now();
  auto r = list_pod_resources(path, 5s);
  ASSERT_FALSE(r);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 2s);
  EXPECT_EQ(r.error().code, Errc::io);
  EXPECT_EQ(r.error().message.rfind("cannot connect to " + path + ": ", 0), 0u) << r.error().message;
}

TEST(PodResources, SocketThatHangsUpIsAnErrorNotAHang) {
  tessera::testing::TempDir dir;
  auto path = dir.path() + "/kubelet.sock";
  PlainSocket plain(path, true);
  auto start = std::chrono::steady_clock::now();
  auto r = list_pod_resources(path, 1s);
  ASSERT_FALSE(r);
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_EQ(r.error().code, Errc::io);
  EXPECT_NE(r.error().message.find(path), std::string::npos) << r.error().message;
}

TEST(PodResources, SocketThatNeverAnswersTimesOut) {
  tessera::testing::TempDir dir;
  auto path = dir.path() + "/kubelet.sock";
  PlainSocket silent(path, false);
  auto start = std::chrono::steady_clock::now();
  auto r = list_pod_resources(path, 500ms);
  ASSERT_FALSE(r);
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, 400ms);
  EXPECT_LT(took, 3s);
  EXPECT_EQ(r.error().message,
            "no answer from " + path + " within 500 ms (is it the kubelet's pod-resources socket?)");
}

// The device-plugin socket is a gRPC server, but not this service.
TEST(PodResources, OtherGrpcServerIsUnimplemented) {
  AllocatedNode node;
  auto socket = node.device_plugins + "/kubelet.sock";
  auto r = list_pod_resources(socket, 5s);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, Errc::unsupported);
  EXPECT_EQ(r.error().message, socket +
                                   " does not implement v1.PodResourcesLister/List (the kubelet serves "
                                   "pod-resources v1 since Kubernetes 1.20)");
}

}  // namespace
}  // namespace tessera::plugin
