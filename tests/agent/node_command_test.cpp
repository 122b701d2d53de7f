// `tessera node` as a process: a simulated node, the kubelet peer and a fake
// API server in this process. The label on the fake Node drives MIG changes;
// evicted pods leave the kubelet's pod-resources list once the API server has
// deleted them, as a kubelet's do.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "kube/fake_apiserver.hpp"
#include "kubelet/fake_kubelet.hpp"
#include "support/run.hpp"

namespace tessera {
namespace {

using namespace std::chrono_literals;
using kube::testing::FakeApiServer;
using testing::Process;
using testing::run;
using testing::TempDir;

const std::string kBin = TESSERA_BIN;
const std::string kNode = "gpu-node-1";

const char* kMigConfigs = R"(version: v1
mig-configs:
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
  gpu0-two-3g:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
    - devices: [1]
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
)";

struct Node {
  TempDir dir;
  std::string node = dir.path() + "/node";
  std::string kubelet_dir = dir.path() + "/device-plugins";
  std::string pod_resources = dir.path() + "/pod-resources/kubelet.sock";
  sim::FakeKubelet kubelet{kubelet_dir};

  Node() {
    auto r = run({kBin, "sim", "create", node, "--gpu", "A100-SXM4-80GB", "--count", "2"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::filesystem::create_directories(kubelet_dir);
    EXPECT_TRUE(kubelet.start());
    EXPECT_TRUE(kubelet.serve_pod_resources(pod_resources));
    dir.write("dp.yaml", "version: v1\nflags:\n  migStrategy: mixed\n");
    dir.write("mig.yaml", kMigConfigs);
  }
  std::string kubeconfig(const std::string& server) {
    return dir.write("kubeconfig", "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: \"" + server +
                                       "\"}}]\nusers: [{name: u, user: {token: t0k3n}}]\n"
                                       "contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n");
  }
  std::unique_ptr<Process> start(const std::string& kubeconfig_file, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv{kBin, "node", "--node-name", kNode, "--kubeconfig", kubeconfig_file,
                                  "--sim", node, "--kubelet-dir", kubelet_dir, "--pod-resources", pod_resources,
                                  "--config-file", dir.path() + "/dp.yaml", "--mig-config", dir.path() + "/mig.yaml",
                                  "--state-dir", dir.path() + "/state", "--quota-ledger-root", dir.path() + "/ledgers",
                                  "--quota-library-dir", dir.path() + "/lib", "--log-level", "info",
                                  "--allow-insecure-http"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<Process>(argv, dir.path() + "/node.log");
  }
};

std::string label(const FakeApiServer& api, const std::string& key) {
  auto n = api.node(kNode);
  const auto& labels = n["metadata"]["labels"];
  return labels.contains(key) ? labels[key].get<std::string>() : std::string();
}

// Polls `pred` for up to `limit`.
template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 10s) {
  auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(20ms);
  }
  return pred();
}

bool has_event(const FakeApiServer& api, const std::string& reason, const std::string& text) {
  for (const auto& e : api.events())
    if (e.value("reason", "") == reason && e.value("message", "").find(text) != std::string::npos) return true;
  return false;
}

TEST(NodeCommand, TheLabelDrivesMigChangesThatEvictOnlyThePodsInTheWay) {
  Node n;
  FakeApiServer api;
  api.require_token("t0k3n");
  api.add_node(kNode, {{"nvidia.com/mig.config", "all-1g.10gb"}});
  auto agent = n.start(n.kubeconfig(api.url()));
  ASSERT_TRUE(eventually([&] { return label(api, "nvidia.com/mig.config.state") == "success"; })) << agent->output();
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/mig-1g.10gb", [](const auto& d) { return d.size() == 14; }, 10s))
      << agent->output();
  // GPU feature discovery's labels.
  EXPECT_TRUE(eventually([&] { return label(api, "nvidia.com/mig-1g.10gb.count") == "14"; })) << agent->output();
  EXPECT_EQ(label(api, "nvidia.com/mig.strategy"), "mixed");
  EXPECT_EQ(label(api, "nvidia.com/gpu.count"), "2");

  // A pod on every 1g.10gb: allocated through the kubelet, known to the API server.
  auto devices = n.kubelet.devices("nvidia.com/mig-1g.10gb");
  ASSERT_EQ(devices.size(), 14u);
  std::map<std::string, std::string> pod_device;
  for (size_t i = 0; i < devices.size(); ++i) {
    std::string pod = "p" + std::to_string(i);
    ASSERT_TRUE(n.kubelet.allocate({"team", pod, "main"}, "nvidia.com/mig-1g.10gb", {devices[i].id}));
    api.add_pod("team", pod, kNode);
    pod_device[pod] = devices[i].id;
  }
  api.set_node_label(kNode, "nvidia.com/mig.config", "gpu0-two-3g");
  // The kubelet lets evicted pods go.
  auto kubelet_turn = [&] {
    for (const auto& [pod, id] : pod_device)
      if (!api.has_pod("team", pod)) n.kubelet.remove_pod("team", pod);
  };
  ASSERT_TRUE(eventually([&] {
    kubelet_turn();
    return label(api, "nvidia.com/mig.config.state") == "success" && label(api, "nvidia.com/mig-3g.40gb.count") == "2";
  }, 20s)) << agent->output();
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/mig-3g.40gb", [](const auto& d) { return d.size() == 2; }, 5s));
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/mig-1g.10gb", [](const auto& d) { return d.size() == 7; }, 5s));
  // Exactly GPU 0's seven pods were evicted; GPU 1's are where they were.
  size_t evicted = 0;
  for (const auto& [pod, id] : pod_device) evicted += !api.has_pod("team", pod);
  EXPECT_EQ(evicted, 7u);
  EXPECT_TRUE(eventually([&] { return has_event(api, "MigConfigApplied", "gpu0-two-3g applied"); })) << agent->output();
  EXPECT_EQ(label(api, "nvidia.com/mig-1g.10gb.count"), "7");

  const std::string socket = n.kubelet_dir + "/tessera-nvidia.com_mig-1g.10gb.sock";
  EXPECT_TRUE(std::filesystem::exists(socket));
  agent->signal(SIGTERM);
  EXPECT_EQ(agent->wait(10000), 0) << agent->output();
  EXPECT_FALSE(std::filesystem::exists(socket)) << "SIGTERM removes the sockets";
}

TEST(NodeCommand, AnUnknownConfigEndsFailedWithAnEvent) {
  Node n;
  FakeApiServer api;
  api.add_node(kNode, {{"nvidia.com/mig.config", "all-1g.10gbb"}});
  auto agent = n.start(n.kubeconfig(api.url()));
  ASSERT_TRUE(eventually([&] { return label(api, "nvidia.com/mig.config.state") == "failed"; })) << agent->output();
  // The state label is written first and the Event posted after it: wait for the Event, as a user would.
  EXPECT_TRUE(eventually([&] { return has_event(api, "MigConfigFailed", "no config named"); })) << agent->output();
  // The clear-text token this test allows is warned about, once.
  const auto out = agent->output();
  const auto warning = out.find("goes over http:// in clear text (--allow-insecure-http)");
  EXPECT_NE(warning, std::string::npos) << out;
  EXPECT_EQ(out.find("goes over http:// in clear text", warning + 1), std::string::npos) << out;
  // The device plugin serves the node as it is meanwhile.
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 2; }, 5s));
  agent->signal(SIGTERM);
  EXPECT_EQ(agent->wait(10000), 0);
}

// The mig-parted file is read again when it changes (a ConfigMap update): a
// name that failed because the file lacked it is applied once it is there;
// an invalid file is reported and the one read before kept.
TEST(NodeCommand, AChangedMigConfigFileIsReadAgain) {
  Node n;
  FakeApiServer api;
  api.add_node(kNode, {{"nvidia.com/mig.config", "all-3g.40gb"}});
  auto agent = n.start(n.kubeconfig(api.url()));
  ASSERT_TRUE(eventually([&] { return label(api, "nvidia.com/mig.config.state") == "failed"; })) << agent->output();
  n.dir.write("mig.yaml", "version: v1\nmig-configs:\n  broken: [\n");
  EXPECT_TRUE(agent->wait_for_output("changed but is invalid; keeping the config read before", 10000))
      << agent->output();
  n.dir.write("mig.yaml", std::string(kMigConfigs) +
                              "  all-3g.40gb:\n    - devices: all\n      mig-enabled: true\n"
                              "      mig-devices: {\"3g.40gb\": 2}\n");
  EXPECT_TRUE(eventually([&] { return label(api, "nvidia.com/mig.config.state") == "success"; }, 15s))
      << agent->output();
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/mig-3g.40gb", [](const auto& d) { return d.size() == 4; }, 5s));
  agent->signal(SIGTERM);
  EXPECT_EQ(agent->wait(10000), 0);
}

// The GPU Operator's way of giving node kinds their own device-plugin
// config: a directory of named configs (its ConfigMap) and the Node label
// nvidia.com/device-plugin.config naming one. Served from the start as the
// label says, switched when it changes; a name the directory lacks is said
// and changes nothing; without the label, the default named.
TEST(NodeCommand, TheNodesLabelChoosesItsDevicePluginConfig) {
  Node n;
  FakeApiServer api;
  api.add_node(kNode, {{"nvidia.com/device-plugin.config", "shared"}});
  const std::string dir = n.dir.path() + "/dp-configs";
  std::filesystem::create_directories(dir);
  n.dir.write("dp-configs/whole", "version: v1\n");
  n.dir.write("dp-configs/shared", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                                   "    - name: nvidia.com/gpu\n      replicas: 4\n");
  std::vector<std::string> argv{kBin, "node", "--node-name", kNode, "--kubeconfig", n.kubeconfig(api.url()),
                                "--sim", n.node, "--kubelet-dir", n.kubelet_dir, "--pod-resources", n.pod_resources,
                                "--device-plugin-configs", dir, "--device-plugin-default-config", "whole",
                                "--quota-ledger-root", n.dir.path() + "/ledgers", "--quota-library-dir",
                                n.dir.path() + "/lib", "--log-level", "info", "--allow-insecure-http"};
  Process agent(argv, n.dir.path() + "/node.log");
  auto gpus = [&](size_t count) {
    return n.kubelet.wait_for("nvidia.com/gpu", [count](const auto& d) { return d.size() == count; }, 10s);
  };
  ASSERT_TRUE(gpus(8)) << agent.output();  // 2 GPUs x 4 replicas
  EXPECT_NE(agent.output().find("the Node's label nvidia.com/device-plugin.config chose the device-plugin config 'shared'"),
            std::string::npos)
      << agent.output();
  api.set_node_label(kNode, "nvidia.com/device-plugin.config", "whole");
  EXPECT_TRUE(gpus(2)) << agent.output();
  api.set_node_label(kNode, "nvidia.com/device-plugin.config", "nosuch");
  EXPECT_TRUE(agent.wait_for_output("names the device-plugin config 'nosuch', which " + dir +
                                        " does not have (it has: shared, whole); still serving the config served before",
                                    10000))
      << agent.output();
  EXPECT_TRUE(gpus(2));
  n.dir.write("dp-configs/whole", "version: v1\nsharing:\n  timeSlicing:\n    resources:\n"
                                  "    - name: nvidia.com/gpu\n      replicas: 2\n");
  api.set_node_label(kNode, "nvidia.com/device-plugin.config", std::nullopt);  // the default: whole, as now written
  EXPECT_TRUE(gpus(4)) << agent.output();
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait(10000), 0);
  // Started with a label naming no config: said, and an unlabelled node's config served meanwhile.
  api.set_node_label(kNode, "nvidia.com/device-plugin.config", "nosuch");
  Process again(argv, n.dir.path() + "/node-again.log");
  EXPECT_TRUE(again.wait_for_output("names the device-plugin config 'nosuch', which " + dir +
                                        " does not have (it has: shared, whole); serving the config of a node without "
                                        "the label until it names one",
                                    10000))
      << again.output();
  EXPECT_TRUE(again.wait_for_output("no label: --device-plugin-default-config chose the device-plugin config 'whole'", 10000))
      << again.output();
  api.set_node_label(kNode, "nvidia.com/device-plugin.config", "shared");
  EXPECT_TRUE(gpus(8)) << again.output();
  again.signal(SIGTERM);
  EXPECT_EQ(again.wait(10000), 0);
  // Bad use is said before anything starts.
  auto both = run({kBin, "node", "--node-name", kNode, "--device-plugin-configs", dir, "--config-file", dir + "/whole"});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("--device-plugin-configs and --config-file both name the device-plugin config"), std::string::npos)
      << both.err;
  auto default_alone = run({kBin, "node", "--node-name", kNode, "--device-plugin-default-config", "whole"});
  EXPECT_EQ(default_alone.exit_code, 2);
  EXPECT_NE(default_alone.err.find("--device-plugin-default-config names a config of --device-plugin-configs, which is "
                                   "not given"),
            std::string::npos)
      << default_alone.err;
  auto missing = run({kBin, "node", "--node-name", kNode, "--kubeconfig", n.kubeconfig(api.url()), "--sim", n.node,
                      "--device-plugin-configs", n.dir.path() + "/nowhere", "--allow-insecure-http"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("not a directory"), std::string::npos) << missing.err;
}

// A Node name the API server does not know is an error said on every try,
// not an outage reported once.
TEST(NodeCommand, ANodeThatDoesNotExistIsSaid) {
  Node n;
  FakeApiServer api;
  auto agent = n.start(n.kubeconfig(api.url()));
  EXPECT_TRUE(agent->wait_for_output("the API server has no Node named " + kNode + " (check --node-name or NODE_NAME",
                                     10000))
      << agent->output();
  agent->signal(SIGTERM);
  EXPECT_EQ(agent->wait(10000), 0);
}

// Without --kubeconfig or KUBECONFIG, outside a pod, ~/.kube/config is read, as kubectl reads it.
TEST(NodeCommand, TheUsersKubeconfigIsTheDefaultOutsideAPod) {
  Node n;
  FakeApiServer api;
  const std::string home = n.dir.path() + "/home";
  std::filesystem::create_directories(home + "/.kube");
  std::filesystem::copy_file(n.kubeconfig(api.url()), home + "/.kube/config");
  Process agent({kBin, "node", "--node-name", kNode, "--sim", n.node, "--kubelet-dir", n.kubelet_dir,
                 "--pod-resources", n.pod_resources, "--quota-ledger-root", n.dir.path() + "/ledgers",
                 "--quota-library-dir", n.dir.path() + "/lib", "--allow-insecure-http"},
                n.dir.path() + "/node.log", {"HOME=" + home, "KUBECONFIG=", "KUBERNETES_SERVICE_HOST="});
  EXPECT_TRUE(agent.wait_for_output("the API server has no Node named " + kNode, 10000)) << agent.output();
  EXPECT_GT(api.request_count(), 0u) << "it talked to the server ~/.kube/config names";
  agent.signal(SIGTERM);
  EXPECT_EQ(agent.wait(10000), 0);
}

// Started while the API server is away: devices are served at once, the
// agent waits with backoff (no busy loop, one warning), and once the API
// server is up it takes the label.
TEST(NodeCommand, AnApiServerThatIsAwayIsWaitedForWithoutSpinning) {
  Node n;
  int port = 0;
  {
    FakeApiServer probe;
    port = probe.port();
  }
  const std::string url = "http://127.0.0.1:" + std::to_string(port);
  auto agent = n.start(n.kubeconfig(url));
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 2; }, 10s))
      << agent->output();
  std::this_thread::sleep_for(3s);
  const std::string out = agent->output();
  EXPECT_NE(out.find("cannot read Node " + kNode), std::string::npos) << out;
  size_t warnings = 0;
  for (auto at = out.find("cannot read Node"); at != std::string::npos; at = out.find("cannot read Node", at + 1))
    ++warnings;
  EXPECT_EQ(warnings, 1u) << "one warning per outage: " << out;
  kube::testing::FakeOptions options;
  options.port = port;
  FakeApiServer api(options);
  api.add_node(kNode, {{"nvidia.com/mig.config", "all-1g.10gb"}});
  EXPECT_TRUE(eventually([&] { return label(api, "nvidia.com/mig.config.state") == "success"; }, 40s))
      << agent->output();
  EXPECT_LT(api.request_count(), 60u) << "requests while the API server was back for a few seconds";
  agent->signal(SIGTERM);
  EXPECT_EQ(agent->wait(10000), 0);
}

// With --metrics-listen the exporter runs in the agent: /metrics names the Node as Hostname.
TEST(NodeCommand, MetricsListenServesTheExporter) {
  Node n;
  FakeApiServer api;
  api.add_node(kNode);
  auto agent = n.start(n.kubeconfig(api.url()), {"--metrics-listen", "127.0.0.1:0", "--metrics-interval", "0.2"});
  ASSERT_TRUE(agent->wait_for_output("/metrics", 10000)) << agent->output();
  auto out = agent->output();
  auto at = out.find("metrics on http://127.0.0.1:");
  ASSERT_NE(at, std::string::npos) << out;
  int port = std::atoi(out.c_str() + at + std::string("metrics on http://127.0.0.1:").size());
  ASSERT_GT(port, 0) << out;
  httplib::Client client("127.0.0.1", port);
  auto res = client.Get("/metrics");
  ASSERT_TRUE(res) << httplib::to_string(res.error());
  EXPECT_EQ(res->status, 200);
  EXPECT_NE(res->body.find("DCGM_FI_DEV_FB_USED{"), std::string::npos) << res->body.substr(0, 400);
  EXPECT_NE(res->body.find("Hostname=\"" + kNode + "\""), std::string::npos) << res->body.substr(0, 400);
  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  agent->signal(SIGTERM);
  EXPECT_EQ(agent->wait(10000), 0) << agent->output();
}

// A metrics port that cannot be bound stops the agent (its probes would ask there).
TEST(NodeCommand, AMetricsPortInUseStopsTheAgent) {
  Node n;
  FakeApiServer api;  // holds a port
  api.add_node(kNode);
  auto r = run({kBin, "node", "--node-name", kNode, "--kubeconfig", n.kubeconfig(api.url()), "--sim", n.node,
                "--kubelet-dir", n.kubelet_dir, "--allow-insecure-http", "--metrics-listen",
                "127.0.0.1:" + std::to_string(api.port()),
                "--quota-ledger-root", n.dir.path() + "/ledgers", "--quota-library-dir", n.dir.path() + "/lib"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("tessera node: no metrics: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(std::to_string(api.port())), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(n.kubelet_dir + "/tessera-nvidia.com_gpu.sock")) << "its sockets are removed";
}

TEST(NodeCommand, BadInputIsRefusedBeforeAnythingIsServed) {
  Node n;
  FakeApiServer api;
  api.add_node(kNode);
  auto kubeconfig = n.kubeconfig(api.url());
  // No Node name.
  auto r = run({kBin, "node", "--kubeconfig", kubeconfig, "--sim", n.node, "--kubelet-dir", n.kubelet_dir},
               "", {"NODE_NAME="});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("no Node name"), std::string::npos) << r.err;
  // A kubeconfig that is not there, named with the reason.
  r = run({kBin, "node", "--node-name", kNode, "--kubeconfig", n.dir.path() + "/missing", "--sim", n.node,
           "--kubelet-dir", n.kubelet_dir});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(n.dir.path() + "/missing"), std::string::npos) << r.err;
  // A token for an http:// server: refused, naming the kubeconfig, unless a test allows it.
  r = run({kBin, "node", "--node-name", kNode, "--kubeconfig", kubeconfig, "--sim", n.node, "--kubelet-dir",
           n.kubelet_dir});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("(kubeconfig " + kubeconfig), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("a bearer token would go over http:// in clear text; use https://"), std::string::npos) << r.err;
  // A mig-parted config with an error, with its line.
  auto broken = n.dir.write("broken.yaml", "version: v1\nmig-configs:\n  x:\n    - devices: all\n      mig-enabled: maybe\n");
  r = run({kBin, "node", "--node-name", kNode, "--kubeconfig", kubeconfig, "--mig-config", broken, "--sim", n.node,
           "--kubelet-dir", n.kubelet_dir});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("broken.yaml:5"), std::string::npos) << r.err;
  // An empty mig-parted file: no configs to apply, refused as mig-parted refuses it.
  auto empty = n.dir.write("empty.yaml", "");
  r = run({kBin, "node", "--node-name", kNode, "--kubeconfig", kubeconfig, "--mig-config", empty, "--sim", n.node,
           "--kubelet-dir", n.kubelet_dir});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("empty.yaml: error: the file is empty: no version and no mig-configs"), std::string::npos)
      << r.err;
  // A listen address that is not one.
  r = run({kBin, "node", "--node-name", kNode, "--kubeconfig", kubeconfig, "--allow-insecure-http", "--metrics-listen",
           "localhost", "--sim", n.node, "--kubelet-dir", n.kubelet_dir});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--metrics-listen 'localhost': expected HOST:PORT"), std::string::npos) << r.err;
  // KUBECONFIG listing several files (kubectl merges them; tessera reads one).
  r = run({kBin, "node", "--node-name", kNode, "--sim", n.node, "--kubelet-dir", n.kubelet_dir}, "",
          {"KUBECONFIG=" + kubeconfig + ":" + kubeconfig});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("KUBECONFIG names several files"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pass --kubeconfig FILE"), std::string::npos) << r.err;
  // No flag, no KUBECONFIG, not in a pod, no ~/.kube/config: the error names every way to give credentials.
  const std::string home = n.node + "/home";
  r = run({kBin, "node", "--node-name", kNode, "--sim", n.node, "--kubelet-dir", n.kubelet_dir}, "",
          {"HOME=" + home, "KUBECONFIG=", "KUBERNETES_SERVICE_HOST="});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no Kubernetes credentials: pass --kubeconfig FILE, set KUBECONFIG, or create ~/.kube/config"),
            std::string::npos)
      << r.err;
  // Nothing was served, and the API server was not asked to change anything.
  EXPECT_TRUE(n.kubelet.registrations().empty());
  for (const auto& req : api.requests()) EXPECT_EQ(req.method, "GET") << req.path;
}

}  // namespace
}  // namespace tessera
