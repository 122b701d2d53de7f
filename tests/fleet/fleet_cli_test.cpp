// `tessera fleet plan` as a user runs it: the JSON contract, text, yaml, SVG, bad input and exit codes.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <thread>

#include "fleet/helpers.hpp"
#include "kube/fake_apiserver.hpp"
#include "support/run.hpp"

namespace tessera::fleet::testing {
namespace {

using tessera::testing::run;
using tessera::testing::TempDir;

json snapshot() {
  return list({node("a", "NVIDIA-A100-SXM4-80GB", 2, "all-1g.10gb"), node("h", "NVIDIA-H100-80GB-HBM3", 1, "all-disabled"),
               pod("r0", "1g.10gb", 1, "a"), pod("r1", "1g.10gb", 1, "a"), pod("w", "gpu", 1, "h"), pod("big", "3g.40gb", 1),
               pod("s", "1g.10gb", 1)});
}

// A file that cannot be written is named with the system's reason.
TEST(FleetCli, AnSvgThatCannotBeWrittenSaysWhy) {
  const std::string dir = std::string(TESSERA_SOURCE_DIR) + "/examples/fleet/";
  auto r = run({TESSERA_BIN, "fleet", "plan", "--snapshot", dir + "snapshot.json", "--mig-config", dir + "mig-config.yaml",
                "--svg", "/nonexistent-dir/plan.svg"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "tessera fleet plan: cannot write /nonexistent-dir/plan.svg: No such file or directory\n");
}

// The example in examples/fleet, as its README says: the cordoned node left alone, the pinned pod
// unserved with its reason.
TEST(FleetCli, TheExampleSnapshotPlansAsItsReadmeSays) {
  const std::string dir = std::string(TESSERA_SOURCE_DIR) + "/examples/fleet/";
  auto r = run({TESSERA_BIN, "fleet", "plan", "--snapshot", dir + "snapshot.json", "--mig-config", dir + "mig-config.yaml",
                "--output", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("--output json is now --json"), std::string::npos) << "the old spelling, warned: " << r.err;
  json doc = json::parse(r.out);
  EXPECT_EQ(doc["placements"]["d/free"], "open");
  EXPECT_EQ(doc["unserved"], json::array({"d/pinned"}));
  EXPECT_EQ(doc["unserved_reasons"]["d/pinned"], "no room: no free whole GPU on a node it admits");
  for (const auto& n : doc["nodes"]) {
    if (n["name"] != "open") {
      EXPECT_FALSE(n["changed"].get<bool>()) << n["name"];
    }
  }
  EXPECT_EQ(doc["objective"]["evicted"], 0);
}

TEST(FleetCli, JsonIsTheContract) {
  TempDir dir;
  std::string snap = dir.write("snap.json", snapshot().dump());
  std::string mig = dir.write("mig.yaml", kMigConfigs);
  auto r = run({TESSERA_BIN, "fleet", "plan", "--snapshot", snap, "--mig-config", mig, "--json", "--svg", dir.path() + "/p.svg"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  EXPECT_EQ(doc["status"], "optimal");
  EXPECT_EQ(doc["objective"], json({{"unserved", 0}, {"evicted", 0}, {"changed_gpus", 1}, {"gpus_used", 2}}));
  EXPECT_EQ(doc["gap"], 0.0);
  ASSERT_EQ(doc["nodes"].size(), 2u);
  const json& a = doc["nodes"][0];
  EXPECT_EQ(a["name"], "a");
  EXPECT_TRUE(a["changed"].get<bool>());
  EXPECT_EQ(a["evict"], json::array());
  EXPECT_EQ(doc["nodes"][1]["gpus"][0], json({{"index", 0}, {"mig", nullptr}}));
  EXPECT_EQ(doc["nodes"][1]["mig.config"], "all-disabled");
  EXPECT_EQ(doc["placements"].size(), 5u) << "every pod served, running or pending";
  EXPECT_EQ(doc["placements"]["ml/big"], "a");
  EXPECT_EQ(doc["unserved"], json::array());
  std::string cfg = a["mig.config"];
  EXPECT_TRUE(doc["mig-parted"]["mig-configs"].contains(cfg));
  EXPECT_TRUE(doc["mig-parted"]["mig-configs"].contains("all-disabled"));
  EXPECT_EQ(doc["mig-parted"]["version"], "v1");
  EXPECT_EQ(doc["rollout"], json::array({json::array({"a"})}));
  EXPECT_EQ(doc["hash"].get<std::string>().size(), 16u);
  std::ifstream svg(dir.path() + "/p.svg");
  std::string text((std::istreambuf_iterator<char>(svg)), {});
  EXPECT_TRUE(text.starts_with("<svg")) << text.substr(0, 40);

  auto t = run({TESSERA_BIN, "fleet", "plan", "--snapshot", snap, "--mig-config", mig});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("fleet plan: optimal"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("pods unserved"), std::string::npos);
  auto y = run({TESSERA_BIN, "fleet", "plan", "--snapshot", snap, "--mig-config", mig, "--yaml"});
  ASSERT_EQ(y.exit_code, 0) << y.err;
  EXPECT_NE(y.out.find("\nstatus: \"optimal\""), std::string::npos) << "keys plain, values quoted: " << y.out.substr(0, 200);
  EXPECT_EQ(y.out.find("\"status\":"), std::string::npos) << y.out.substr(0, 200);
}

TEST(FleetCli, BadInput) {
  TempDir dir;
  std::string mig = dir.write("mig.yaml", kMigConfigs);
  std::string notlist = dir.write("n.json", R"({"kind": "Pod", "metadata": {"name": "x"}})");
  auto r = run({TESSERA_BIN, "fleet", "plan", "--snapshot", notlist, "--mig-config", mig});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "tessera fleet plan: " + notlist + ": not a Kubernetes List (kind 'Pod'; expected kind List with items, as "
                   "`kubectl get nodes,pods -A -o json` prints)\n");
  std::string unknown = dir.write("u.json", list({node("a", "NVIDIA-A100-SXM4-80GB", 1, "nope")}).dump());
  // One node's bad label stops that node, said, not the plan.
  r = run({TESSERA_BIN, "fleet", "plan", "--snapshot", unknown, "--mig-config", mig});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("warning: Node a: nvidia.com/mig.config='nope' is not a config in " + mig), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the node is left out of the plan"), std::string::npos) << r.out;
  r = run({TESSERA_BIN, "fleet", "plan", "--mig-config", mig});
  EXPECT_EQ(r.exit_code, 2);
  r = run({TESSERA_BIN, "fleet", "plan", "--snapshot", dir.write("j.json", "{"), "--mig-config", mig});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("not JSON"), std::string::npos);
}

}  // namespace
}  // namespace tessera::fleet::testing

namespace tessera::fleet::testing {
namespace {

// --from-cluster: the Nodes and Pods from the API server, and without --mig-config the mig-parted
// ConfigMap the node agents read.
TEST(FleetCli, FromTheCluster) {
  tessera::kube::testing::FakeApiServer server;
  server.add_node("gpu-1", {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}, {"nvidia.com/gpu.count", "2"},
                            {"nvidia.com/mig.config", "all-1g.10gb"}});
  server.add_node("cpu-1");
  server.add_pod("ml", "plain", "gpu-1");  // asks for no GPU: not the planner's
  server.put_configmap("tessera", "tessera-mig-config", {{"config.yaml", kMigConfigs}});
  TempDir dir;
  std::string kubeconfig = dir.write("kubeconfig", "apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: c\n  cluster:\n"
                                                   "    server: " + server.url() + "\ncontexts:\n- name: t\n  context:\n    cluster: c\n"
                                                   "    user: u\nusers:\n- name: u\n  user: {}\n");
  auto r = run({TESSERA_BIN, "fleet", "plan", "--from-cluster", "--kubeconfig", kubeconfig, "--namespace", "tessera", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json doc = json::parse(r.out);
  ASSERT_EQ(doc["nodes"].size(), 1u);
  EXPECT_EQ(doc["nodes"][0]["name"], "gpu-1");
  EXPECT_EQ(doc["nodes"][0]["mig.config"], "all-1g.10gb");
  EXPECT_EQ(doc["status"], "optimal");
  auto missing = run({TESSERA_BIN, "fleet", "plan", "--from-cluster", "--kubeconfig", kubeconfig, "--namespace", "other"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("configmaps \"tessera-mig-config\" not found"), std::string::npos) << missing.err;
}

// SIGTERM stops `fleet run` within 2 s, also in the middle of a step (here an API server that
// answers 503 with Retry-After: 10, which the client waits out inside the step).
TEST(FleetCli, RunStopsWithinTwoSecondsOfSigterm) {
  tessera::kube::testing::FakeApiServer server;
  server.add_node("gpu-1", {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}, {"nvidia.com/gpu.count", "1"},
                            {"nvidia.com/mig.config", "all-1g.10gb"}});
  server.put_configmap("tessera", "tessera-mig-config", {{"config.yaml", kMigConfigs}});
  TempDir dir;
  std::string kubeconfig = dir.write("kubeconfig", "apiVersion: v1\nkind: Config\ncurrent-context: t\nclusters:\n- name: c\n  cluster:\n"
                                                   "    server: " + server.url() + "\ncontexts:\n- name: t\n  context:\n    cluster: c\n"
                                                   "    user: u\nusers:\n- name: u\n  user: {}\n");
  tessera::testing::Process controller({TESSERA_BIN, "fleet", "run", "--kubeconfig", kubeconfig, "--namespace", "tessera", "--poll", "0.5"},
              dir.path() + "/run.log");
  for (int i = 0; i < 200 && server.request_count() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_GT(server.request_count(), 0u) << controller.output();
  server.fail_next(1000, 503, "10");
  const size_t before = server.request_count();
  for (int i = 0; i < 100 && server.request_count() == before; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_GT(server.request_count(), before) << "the controller looked again";
  const auto sent = std::chrono::steady_clock::now();
  controller.signal(SIGTERM);
  EXPECT_EQ(controller.wait(5000), 0) << controller.output();
  EXPECT_LT(std::chrono::steady_clock::now() - sent, std::chrono::milliseconds(2000)) << controller.output();
  EXPECT_NE(controller.output().find("tessera fleet run: stopped"), std::string::npos) << controller.output();
}

}  // namespace
}  // namespace tessera::fleet::testing
