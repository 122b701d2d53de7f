// `tessera pods` against the kubelet peer's pod-resources socket.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "plugin/pod_fixture.hpp"

namespace tessera {
namespace {

using namespace std::chrono_literals;
using plugin::testing::AllocatedNode;
using plugin::testing::PlainSocket;
using tessera::testing::run;

const std::string kBin = TESSERA_BIN;

TEST(PodsCommand, TableShowsWhoHoldsWhichDevice) {
  AllocatedNode node;
  auto r = run({kBin, "pods", "--socket", node.pod_resources});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "NAMESPACE  POD      CONTAINER  RESOURCE                DEVICES\n"
            "default    embed-1  main       nvidia.com/mig-1g.20gb  MIG-a,MIG-b\n"
            "ml         llm-0    server     nvidia.com/gpu          GPU-0000\n"
            "ml         llm-0    sidecar    nvidia.com/mig-3g.40gb  MIG-c\n");
  EXPECT_EQ(r.err, "");
}

TEST(PodsCommand, JsonHasOneEntryPerContainerAndResource) {
  AllocatedNode node;
  auto r = run({kBin, "pods", "--socket", node.pod_resources, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j.size(), 3u) << r.out;
  EXPECT_EQ(j[0], nlohmann::json({{"namespace", "default"},
                                  {"pod", "embed-1"},
                                  {"container", "main"},
                                  {"resource", "nvidia.com/mig-1g.20gb"},
                                  {"devices", {"MIG-a", "MIG-b"}}}));
  EXPECT_EQ(j[1]["namespace"], "ml");
  EXPECT_EQ(j[1]["pod"], "llm-0");
  EXPECT_EQ(j[1]["container"], "server");
  EXPECT_EQ(j[1]["devices"], nlohmann::json({"GPU-0000"}));
}

TEST(PodsCommand, ResourcePrefixFilters) {
  AllocatedNode node;
  auto mig = run({kBin, "pods", "--socket", node.pod_resources, "--resource-prefix", "nvidia.com/mig-"});
  ASSERT_EQ(mig.exit_code, 0) << mig.err;
  EXPECT_EQ(mig.out,
            "NAMESPACE  POD      CONTAINER  RESOURCE                DEVICES\n"
            "default    embed-1  main       nvidia.com/mig-1g.20gb  MIG-a,MIG-b\n"
            "ml         llm-0    sidecar    nvidia.com/mig-3g.40gb  MIG-c\n");

  auto whole = run({kBin, "pods", "--socket", node.pod_resources, "--json", "--resource-prefix", "nvidia.com/gpu"});
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  auto j = nlohmann::json::parse(whole.out);
  ASSERT_EQ(j.size(), 1u) << whole.out;
  EXPECT_EQ(j[0]["container"], "server");

  auto all = run({kBin, "pods", "--socket", node.pod_resources, "--json", "--resource-prefix", ""});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(nlohmann::json::parse(all.out).size(), 3u);

  // No container holds a matching resource: just the header.
  auto none = run({kBin, "pods", "--socket", node.pod_resources, "--resource-prefix", "amd.com/"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  EXPECT_EQ(none.out, "NAMESPACE  POD  CONTAINER  RESOURCE  DEVICES\n");
}

TEST(PodsCommand, MissingSocketIsAnErrorThatSaysWhy) {
  tessera::testing::TempDir dir;
  auto path = dir.path() + "/pod-resources/kubelet.sock";
  auto r = run({kBin, "pods", "--socket", path});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("tessera pods: " + path + " does not exist: is the kubelet running with the pod-resources API?",
                        0),
            0u)
      << r.err;
}

TEST(PodsCommand, SocketThatIsNotGrpcFailsWithinTheTimeout) {
  tessera::testing::TempDir dir;
  for (bool hang_up : {true, false}) {
    auto path = dir.path() + (hang_up ? "/hangs-up.sock" : "/silent.sock");
    PlainSocket plain(path, hang_up);
    auto start = std::chrono::steady_clock::now();
    auto r = run({kBin, "pods", "--socket", path, "--timeout", "1"});
    EXPECT_LT(std::chrono::steady_clock::now() - start, 4s) << path;
    EXPECT_EQ(r.exit_code, 1) << path;
    EXPECT_EQ(r.err.rfind("tessera pods: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(path), std::string::npos) << r.err;
  }
}

TEST(PodsCommand, HelpNamesTheOptions) {
  auto r = run({kBin, "pods", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* word : {"--socket", "/var/lib/kubelet/pod-resources/kubelet.sock", "--resource-prefix",
                           "nvidia.com/", "--json", "--timeout", "pod-resources"})
    EXPECT_NE(r.out.find(word), std::string::npos) << word;
  auto bad = run({kBin, "pods", "--timeout", "0"});
  EXPECT_EQ(bad.exit_code, 2);
}

}  // namespace
}  // namespace tessera
