// `tessera exporter` as a node runs it: the built program on a simulated node
// (8 H100s in mixed MIG layouts made by `tessera mig apply`), pods placed by
// the kubelet peer through the real `tessera plugin` (whole GPUs, MIG
// devices, time-sliced and MPS replicas), replica ledgers made with the quota
// library's own ledger code, scraped over HTTP and checked against the
// simulator's state and by promtool.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "cuda_quota/ledger.hpp"
#include "kubelet/fake_kubelet.hpp"
#include "support/run.hpp"

namespace tessera {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using testing::Process;
using testing::run;
using testing::TempDir;

const std::string kBin = TESSERA_BIN;
constexpr uint64_t kGiB = 1ULL << 30;

// --- the text format, parsed for checking ---

struct Series {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

std::vector<Series> parse(const std::string& text) {
  std::vector<Series> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty() || line[0] == '#') continue;
    Series s;
    size_t i = line.find_first_of("{ ");
    s.name = line.substr(0, i);
    if (line[i] == '{') {
      ++i;
      while (line[i] != '}') {
        size_t eq = line.find('=', i);
        std::string key = line.substr(i, eq - i);
        std::string value;
        size_t j = eq + 2;  // past ="
        for (; line[j] != '"'; ++j) {
          if (line[j] == '\\') {
            ++j;
            value += line[j] == 'n' ? '\n' : line[j];
          } else {
            value += line[j];
          }
        }
        s.labels[key] = value;
        i = j + 1;
        if (line[i] == ',') ++i;
      }
      ++i;
    }
    s.value = std::stod(line.substr(i + 1));
    out.push_back(s);
  }
  return out;
}

std::vector<Series> select(const std::vector<Series>& all, const std::string& name,
                           const std::map<std::string, std::string>& match = {}) {
  std::vector<Series> out;
  for (const auto& s : all) {
    if (s.name != name) continue;
    bool ok = true;
    for (const auto& [k, v] : match) {
      auto it = s.labels.find(k);
      if (v.empty() ? it != s.labels.end() : (it == s.labels.end() || it->second != v)) ok = false;
    }
    if (ok) out.push_back(s);
  }
  return out;
}

// The one value of the series matching `match` ("" as a value: the label is absent).
double value_of(const std::vector<Series>& all, const std::string& name, const std::map<std::string, std::string>& match) {
  auto found = select(all, name, match);
  EXPECT_EQ(found.size(), 1u) << name << " with " << json(match).dump();
  return found.empty() ? -1 : found.front().value;
}

// promtool check metrics: clean except for dcgm-exporter's camelCase label
// `modelName`, which promtool's lint names and which existing dashboards use.
void expect_promtool_clean(const TempDir& dir, const std::string& text) {
  const std::string promtool = TESSERA_PROMTOOL;
  ASSERT_FALSE(promtool.empty() || promtool.ends_with("NOTFOUND")) << "promtool is not installed: scripts/setup.sh installs it";
  auto as_is = run({promtool, "check", "metrics"}, text);
  std::istringstream lines(as_is.err + as_is.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    EXPECT_NE(line.find("label names should be written in 'snake_case' not 'camelCase'"), std::string::npos) << line;
  }
  EXPECT_TRUE(as_is.exit_code == 0 || as_is.exit_code == 3) << as_is.exit_code;  // 3: lint findings only
  auto renamed = std::regex_replace(text, std::regex(",modelName=\""), ",model_name=\"");
  auto strict = run({promtool, "check", "metrics"}, renamed);
  EXPECT_EQ(strict.exit_code, 0) << strict.out << strict.err;
  (void)dir;
}

// --- the node, the kubelet peer and the programs ---

std::string get(int port, const std::string& path, int* status = nullptr) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(2);
  client.set_read_timeout(5);
  auto res = client.Get(path.c_str());
  if (status) *status = res ? res->status : -1;
  return res ? res->body : std::string();
}

struct Node {
  TempDir dir;
  std::string node = dir.path() + "/node";
  std::string kubelet_dir = dir.path() + "/device-plugins";
  std::string pod_resources = dir.path() + "/pod-resources/kubelet.sock";
  std::string ledger_root = dir.path() + "/ledgers";
  sim::FakeKubelet kubelet{kubelet_dir};

  Node(const std::string& model, int count) {
    auto r = run({kBin, "sim", "create", node, "--gpu", model, "--count", std::to_string(count)});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::filesystem::create_directories(kubelet_dir);
    std::filesystem::create_directories(dir.path() + "/pod-resources");
    EXPECT_TRUE(kubelet.start());
  }
  void sim(std::vector<std::string> args) const {
    args.insert(args.begin(), {kBin, "sim"});
    args.insert(args.begin() + 3, node);
    auto r = run(args);
    ASSERT_EQ(r.exit_code, 0) << json(args).dump() << ": " << r.err;
  }
  json show() const {
    auto r = run({kBin, "sim", "show", node});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out);
  }
  // `tessera plugin` with `config`, until `stop()`.
  std::unique_ptr<Process> plugin(const std::string& config, const std::vector<std::string>& extra = {}) const {
    auto file = dir.write("dp-" + std::to_string(std::hash<std::string>{}(config)) + ".yaml", config);
    std::vector<std::string> argv{kBin, "plugin", "--config-file", file, "--sim", node, "--kubelet-dir", kubelet_dir,
                                  "--log-level", "info", "--quota-library-dir", dir.path() + "/lib",
                                  "--quota-ledger-root", ledger_root};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto p = std::make_unique<Process>(argv, dir.path() + "/plugin-" + std::to_string(std::rand()) + ".log");
    EXPECT_TRUE(p->wait_for_output("ready", 10000)) << p->output();
    return p;
  }
};

struct Exporter {
  std::unique_ptr<Process> process;
  int port = 0;
  Exporter(const Node& n, std::vector<std::string> extra, double interval = 0.4) {
    std::vector<std::string> argv{kBin, "exporter", "--sim", n.node, "--listen", "127.0.0.1:0", "--interval",
                                  std::to_string(interval), "--gpm-window", "0.1", "--hostname", "node-7",
                                  "--log-level", "info"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    process = std::make_unique<Process>(argv, n.dir.path() + "/exporter-" + std::to_string(std::rand()) + ".log");
    EXPECT_TRUE(process->wait_for_output("/metrics (every", 15000)) << process->output();
    std::smatch m;
    auto out = process->output();
    if (std::regex_search(out, m, std::regex("listening on http://127.0.0.1:([0-9]+)/metrics"))) port = std::stoi(m[1]);
    EXPECT_GT(port, 0) << out;
  }
  std::string metrics() const { return get(port, "/metrics"); }
  // Scrapes until `pred` holds (or 10 s pass); returns the last text.
  std::string wait_for(const std::function<bool(const std::vector<Series>&)>& pred) const {
    std::string text;
    for (int i = 0; i < 200; ++i) {
      text = metrics();
      if (pred(parse(text))) return text;
      std::this_thread::sleep_for(50ms);
    }
    ADD_FAILURE() << "condition not met; last scrape:\n" << text.substr(0, 4000);
    return text;
  }
  int stop() {
    process->signal(SIGTERM);
    return process->wait(10000);
  }
};

std::string mig_uuid(const json& gpu, size_t gi) { return gpu["gpu_instances"][gi]["compute_instances"][0]["uuid"]; }

struct Held {
  std::string pod_namespace, pod, container, replica;
  uint64_t charged = 0, quota = 0;
  std::string directory{}, uuid{};  // its container's ledger directory and device
};

// A container's ledger, made as the quota library makes it in the container,
// holding `bytes`.
std::unique_ptr<quota::Ledger> make_ledger(const Node& n, const sim::Allocation& a, uint64_t bytes, Held& held) {
  auto ledger = std::make_unique<quota::Ledger>();
  const std::string key = a.envs.at("TESSERA_LEDGER_KEY");
  const std::string uuid = a.envs.at("TESSERA_DEVICE_UUID_0");
  held.quota = std::stoull(a.envs.at("TESSERA_DEVICE_MEMORY_LIMIT_0"));
  quota::DeviceQuota device{uuid, held.quota, 80 * kGiB};
  const std::string directory = n.ledger_root + "/" + key;
  quota::OpenOptions options{directory, key, {&device, 1}};
  EXPECT_TRUE(ledger->open(options)) << ledger->message();
  EXPECT_EQ(ledger->charge(0, bytes).status, quota::Status::ok);
  held.charged = bytes;
  held.directory = directory;
  held.uuid = uuid;
  return ledger;
}

const char* kMigLayout = R"(version: v1
mig-configs:
  mixed8:
    - devices: [0, 1]
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
    - devices: [2, 3]
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
    - devices: [4]
      mig-enabled: true
      mig-devices: {"1g.10gb": 4, "3g.40gb": 1}
    - devices: [5, 6, 7]
      mig-enabled: false
)";

TEST(Exporter, EightGpusMixedMigReplicasAndPodsMatchTheSimulator) {
  Node n("H100-80GB", 8);
  auto apply = run({kBin, "mig", "apply", "-f", n.dir.write("mig.yaml", kMigLayout), "-c", "mixed8", "--sim", n.node});
  ASSERT_EQ(apply.exit_code, 0) << apply.out << apply.err;
  json state = n.show();
  const auto& gpus = state["gpus"];
  ASSERT_EQ(gpus.size(), 8u);
  ASSERT_EQ(gpus[0]["gpu_instances"].size(), 7u);
  ASSERT_EQ(gpus[4]["gpu_instances"].size(), 5u);

  // Pods: a whole GPU and a MIG device; then time-sliced GPUs and MIG devices;
  // then MPS shares of a MIG device (the kubelet keeps what it allocated).
  std::vector<std::unique_ptr<quota::Ledger>> ledgers;
  std::vector<Held> held;
  ASSERT_TRUE(n.kubelet.serve_pod_resources(n.pod_resources));
  const std::string gpu5 = gpus[5]["uuid"], gpu6 = gpus[6]["uuid"], gpu7 = gpus[7]["uuid"];
  const std::string mig2 = mig_uuid(gpus[2], 0), mig0 = mig_uuid(gpus[0], 0), mig3 = mig_uuid(gpus[3], 0);
  {
    auto plugin = n.plugin("version: v1\nflags: {migStrategy: mixed}\n");
    ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/mig-3g.40gb", [](const auto& d) { return d.size() == 5; }, 5s));
    ASSERT_TRUE(n.kubelet.allocate({"ml", "llm-0", "server"}, "nvidia.com/gpu", {gpu5}));
    ASSERT_TRUE(n.kubelet.allocate({"ml", "llm-0", "sidecar"}, "nvidia.com/mig-3g.40gb", {mig2}));
    plugin->signal(SIGTERM);
    EXPECT_EQ(plugin->wait(10000), 0);
  }
  {
    auto plugin = n.plugin(
        "version: v1\nflags: {migStrategy: mixed}\nsharing:\n  timeSlicing:\n    resources:\n"
        "      - {name: nvidia.com/gpu, replicas: 4}\n      - {name: nvidia.com/mig-1g.10gb, replicas: 2}\n");
    ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/mig-1g.10gb", [](const auto& d) { return d.size() == 36; }, 5s));
    ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 12; }, 5s));
    struct Want {
      sim::ContainerRef who;
      std::string resource, id;
      uint64_t bytes;
    };
    for (const Want& w : {Want{{"team-a", "chat-0", "main"}, "nvidia.com/gpu", gpu6 + "::0", 1 * kGiB},
                          Want{{"team-b", "chat-1", "main"}, "nvidia.com/gpu", gpu6 + "::1", 3 * kGiB},
                          Want{{"team-a", "embed-0", "main"}, "nvidia.com/mig-1g.10gb", mig0 + "::0", kGiB / 2},
                          Want{{"team-b", "embed-1", "main"}, "nvidia.com/mig-1g.10gb", mig0 + "::1", 2 * kGiB}}) {
      auto a = n.kubelet.allocate(w.who, w.resource, {w.id});
      ASSERT_TRUE(a) << a.error().message;
      Held h{w.who.pod_namespace, w.who.pod, w.who.container, w.id};
      ledgers.push_back(make_ledger(n, *a, w.bytes, h));
      held.push_back(h);
    }
    plugin->signal(SIGTERM);
    EXPECT_EQ(plugin->wait(10000), 0);
  }
  {
    auto plugin = n.plugin("version: v1\nflags: {migStrategy: mixed, mpsRoot: " + n.dir.path() +
                               "/mps}\nsharing:\n  mps:\n    resources: [{name: nvidia.com/mig-3g.40gb, replicas: 2}]\n",
                           {"--mps-control", TESSERA_MPS_CONTROL_SIM});
    ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/mig-3g.40gb", [](const auto& d) { return d.size() == 10; }, 5s));
    auto a = n.kubelet.allocate({"team-c", "mps-0", "main"}, "nvidia.com/mig-3g.40gb", {mig3 + "::0"});
    ASSERT_TRUE(a) << a.error().message;
    Held h{"team-c", "mps-0", "main", mig3 + "::0"};
    ledgers.push_back(make_ledger(n, *a, 5 * kGiB, h));
    held.push_back(h);
    plugin->signal(SIGTERM);
    EXPECT_EQ(plugin->wait(10000), 0);
  }

  // The node's state: memory held, sensors and GPM activity.
  n.sim({"process", "--pid", "100", "--memory", "2GiB", "--mig-device", mig0});
  n.sim({"process", "--pid", "101", "--memory", "6GiB", "--gpu", "7"});
  for (int i = 0; i < 8; ++i)
    n.sim({"activity", "--gpu", std::to_string(i), "--temperature", std::to_string(40 + i), "--power-mw",
           std::to_string(300500 + 1000 * i), "--sm-clock", std::to_string(1000 + i), "--mem-clock",
           std::to_string(2000 + i)});
  n.sim({"activity", "--gpu", "7", "--sm-util", "40", "--sm-occupancy", "20", "--dram-bw", "30", "--graphics-util",
         "50", "--tensor-util", "12.5"});
  const uint32_t gi0 = gpus[0]["gpu_instances"][0]["id"];
  n.sim({"activity", "--gpu", "0", "--gpu-instance", std::to_string(gi0), "--sm-util", "80", "--graphics-util",
         "90", "--tensor-util", "60"});
  for (const char* ecc : {"single", "single", "double"}) n.sim({"event", "--gpu", "6", "--ecc", ecc});
  state = n.show();

  Exporter e(n, {"--pod-resources", n.pod_resources, "--quota-ledger-root", n.ledger_root});
  // Xid events come after the exporter registered for them, as on a node.
  n.sim({"event", "--gpu", "7", "--xid", "48"});
  n.sim({"event", "--gpu", "0", "--xid", "94", "--gpu-instance", std::to_string(gi0)});
  auto text = e.wait_for([](const auto& s) { return select(s, "tessera_xid_errors_total").size() == 2; });
  auto all = parse(text);
  expect_promtool_clean(n.dir, text);

  // One series per GPU and per MIG device: 8 + 7 + 7 + 2 + 2 + 5.
  EXPECT_EQ(select(all, "DCGM_FI_DEV_FB_USED").size(), 31u);
  EXPECT_EQ(select(all, "tessera_device_up").size(), 31u);
  EXPECT_EQ(select(all, "tessera_device_up", {{"gpu", ""}}).size(), 0u);
  for (const auto& s : select(all, "tessera_device_up")) EXPECT_EQ(s.value, 1) << json(s.labels).dump();

  const char* layout[] = {"1g.10gb", "1g.10gb", "3g.40gb", "3g.40gb", "", "", "", ""};
  for (size_t i = 0; i < 8; ++i) {
    const auto& g = state["gpus"][i];
    char bus[32];
    std::snprintf(bus, sizeof bus, "00000000:%02X:00.0", g["bus"].get<unsigned>());
    std::map<std::string, std::string> whole{{"gpu", std::to_string(i)},
                                             {"UUID", g["uuid"]},
                                             {"pci_bus_id", bus},
                                             {"device", "nvidia" + std::to_string(g["minor"].get<unsigned>())},
                                             {"Hostname", "node-7"},
                                             {"GPU_I_ID", ""}};
    SCOPED_TRACE("GPU " + std::to_string(i));
    EXPECT_EQ(value_of(all, "DCGM_FI_DEV_GPU_TEMP", whole), 40 + i);
    EXPECT_EQ(value_of(all, "DCGM_FI_DEV_POWER_USAGE", whole), 300.5 + i);
    EXPECT_EQ(value_of(all, "DCGM_FI_DEV_SM_CLOCK", whole), 1000 + i);
    EXPECT_EQ(value_of(all, "DCGM_FI_DEV_MEM_CLOCK", whole), 2000 + i);
    EXPECT_EQ(value_of(all, "DCGM_FI_DEV_FB_RESERVED", whole), g["reserved_mib"].get<double>());
    double total = value_of(all, "DCGM_FI_DEV_FB_TOTAL", whole);
    EXPECT_EQ(value_of(all, "DCGM_FI_DEV_FB_USED", whole) + value_of(all, "DCGM_FI_DEV_FB_FREE", whole) +
                  value_of(all, "DCGM_FI_DEV_FB_RESERVED", whole),
              total);
    EXPECT_EQ(value_of(all, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", whole), g["ecc_corrected"].get<double>());
    EXPECT_EQ(value_of(all, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", whole), g["ecc_uncorrected"].get<double>());
    auto model = select(all, "DCGM_FI_DEV_GPU_TEMP", whole).at(0).labels.at("modelName");
    EXPECT_NE(model.find("H100"), std::string::npos) << model;
    // Each MIG device: its own GPU instance id, the layout's profile, the parent's identity labels.
    for (const auto& gi : g["gpu_instances"]) {
      auto mig = whole;
      mig["GPU_I_ID"] = std::to_string(gi["id"].get<unsigned>());
      if (i != 4) mig["GPU_I_PROFILE"] = layout[i];  // GPU 4 holds both profiles: counted below
      mig["modelName"] = model;
      double used = 0;
      for (const auto& p : state["processes"])
        if (p["gpu"] == i && p["gpu_instance"] == gi["id"]) used += p["memory_bytes"].get<double>() / (1 << 20);
      EXPECT_EQ(value_of(all, "DCGM_FI_DEV_FB_USED", mig), used);
      EXPECT_EQ(value_of(all, "DCGM_FI_DEV_FB_USED", mig) + value_of(all, "DCGM_FI_DEV_FB_FREE", mig),
                value_of(all, "DCGM_FI_DEV_FB_TOTAL", mig));
      // Sensors belong to the whole GPU.
      EXPECT_EQ(select(all, "DCGM_FI_DEV_GPU_TEMP", mig).size(), 0u);
    }
  }
  EXPECT_EQ(select(all, "DCGM_FI_DEV_FB_USED", {{"gpu", "0"}, {"GPU_I_ID", std::to_string(gi0)}}).at(0).value, 2048);
  EXPECT_EQ(value_of(all, "DCGM_FI_DEV_FB_USED", {{"gpu", "7"}}), 6144);
  EXPECT_EQ(select(all, "DCGM_FI_DEV_FB_USED", {{"gpu", "4"}, {"GPU_I_PROFILE", "3g.40gb"}}).size(), 1u);
  EXPECT_EQ(select(all, "DCGM_FI_DEV_FB_USED", {{"gpu", "4"}, {"GPU_I_PROFILE", "1g.10gb"}}).size(), 4u);

  // GPM on Hopper: ratios of what the simulator was told, per GPU and per MIG device.
  std::map<std::string, std::string> g7{{"gpu", "7"}};
  EXPECT_DOUBLE_EQ(value_of(all, "DCGM_FI_PROF_SM_ACTIVE", g7), 0.4);
  EXPECT_DOUBLE_EQ(value_of(all, "DCGM_FI_PROF_SM_OCCUPANCY", g7), 0.2);
  EXPECT_DOUBLE_EQ(value_of(all, "DCGM_FI_PROF_DRAM_ACTIVE", g7), 0.3);
  EXPECT_DOUBLE_EQ(value_of(all, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", g7), 0.5);
  EXPECT_DOUBLE_EQ(value_of(all, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", g7), 0.125);
  std::map<std::string, std::string> m0{{"gpu", "0"}, {"GPU_I_ID", std::to_string(gi0)}};
  EXPECT_DOUBLE_EQ(value_of(all, "DCGM_FI_PROF_SM_ACTIVE", m0), 0.8);
  EXPECT_DOUBLE_EQ(value_of(all, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", m0), 0.9);
  EXPECT_DOUBLE_EQ(value_of(all, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", m0), 0.6);
  EXPECT_EQ(select(all, "DCGM_FI_PROF_SM_ACTIVE").size(), 31u);

  // Xid by event: the whole GPU's, and the MIG device's whose GPU instance the event named.
  EXPECT_EQ(value_of(all, "DCGM_FI_DEV_XID_ERRORS", {{"gpu", "7"}, {"err_code", "48"}}), 48);
  EXPECT_EQ(value_of(all, "tessera_xid_errors_total", {{"gpu", "7"}, {"xid", "48"}}), 1);
  EXPECT_EQ(value_of(all, "tessera_xid_errors_total", {{"gpu", "0"}, {"GPU_I_ID", std::to_string(gi0)}, {"xid", "94"}}),
            1);
  EXPECT_EQ(value_of(all, "DCGM_FI_DEV_XID_ERRORS", {{"gpu", "0"}, {"GPU_I_ID", ""}}), 0);

  // Pod labels: the whole GPU and the MIG device held whole carry their container's.
  EXPECT_EQ(value_of(all, "DCGM_FI_DEV_GPU_TEMP", {{"gpu", "5"}, {"pod", "llm-0"}, {"namespace", "ml"},
                                                   {"container", "server"}}),
            45);
  const uint32_t gi2 = state["gpus"][2]["gpu_instances"][0]["id"];
  EXPECT_EQ(select(all, "DCGM_FI_DEV_FB_TOTAL",
                   {{"gpu", "2"}, {"GPU_I_ID", std::to_string(gi2)}, {"pod", "llm-0"}, {"container", "sidecar"}})
                .size(),
            1u);
  // Shared devices carry no pod: their value is not one pod's.
  EXPECT_EQ(select(all, "DCGM_FI_DEV_GPU_TEMP", {{"gpu", "6"}, {"pod", ""}}).size(), 1u);
  EXPECT_EQ(select(all, "DCGM_FI_DEV_FB_USED", {{"gpu", "0"}, {"GPU_I_ID", std::to_string(gi0)}, {"pod", ""}}).size(),
            1u);
  EXPECT_EQ(select(all, "DCGM_FI_DEV_FB_USED", {{"pod", "chat-0"}}).size(), 0u);
  size_t with_pod = 0;
  for (const auto& s : select(all, "DCGM_FI_DEV_FB_USED")) with_pod += s.labels.contains("pod");
  EXPECT_EQ(with_pod, 2u);

  // One series per replica, each from its own container's ledger.
  EXPECT_EQ(select(all, "tessera_replica_memory_used_bytes").size(), held.size());
  for (const auto& h : held) {
    SCOPED_TRACE(h.replica);
    std::map<std::string, std::string> m{
        {"replica", h.replica}, {"pod", h.pod}, {"namespace", h.pod_namespace}, {"container", h.container}};
    EXPECT_EQ(value_of(all, "tessera_replica_memory_used_bytes", m), static_cast<double>(h.charged));
    EXPECT_EQ(value_of(all, "tessera_replica_memory_quota_bytes", m), static_cast<double>(h.quota));
    m["backend"] = "library";
    EXPECT_EQ(value_of(all, "tessera_replica_memory_quota_backend", m), 1) << "no memory hook ran";
  }
  EXPECT_EQ(select(all, "tessera_replica_memory_quota_backend").size(), held.size());
  EXPECT_EQ(select(all, "tessera_replica_memory_used_bytes", {{"replica", gpu6 + "::0"}, {"UUID", gpu6}, {"GPU_I_ID", ""}})
                .size(),
            1u);
  EXPECT_EQ(select(all, "tessera_replica_memory_used_bytes",
                   {{"replica", mig0 + "::1"}, {"UUID", state["gpus"][0]["uuid"]}, {"GPU_I_ID", std::to_string(gi0)},
                    {"GPU_I_PROFILE", "1g.10gb"}})
                .size(),
            1u);
  // The memory hook's record, once written, says the driver holds a whole
  // GPU's replica; a record that is not one is said and changes nothing.
  const auto whole = std::ranges::find_if(held, [&](const Held& h) { return h.replica == gpu6 + "::0"; });
  ASSERT_NE(whole, held.end());
  std::ofstream(whole->directory + "/driver-limits")
      << "tessera-driver-limits 1\n" << whole->uuid << " " << whole->quota << " /sys/fs/cgroup/kubepods/pod-a/c1\n";
  e.wait_for([&](const auto& s) {
    return select(s, "tessera_replica_memory_quota_backend", {{"replica", whole->replica}, {"backend", "driver"}})
               .size() == 1;
  });
  const auto other = std::ranges::find_if(held, [&](const Held& h) { return h.replica == mig3 + "::0"; });
  ASSERT_NE(other, held.end());
  std::ofstream(other->directory + "/driver-limits") << "tessera-driver-limits 1\nnonsense\n";
  EXPECT_TRUE(e.process->wait_for_output("memory hook record", 5000)) << e.process->output();
  const double seen = value_of(parse(get(e.port, "/metrics")), "tessera_sampler_last_success_timestamp_seconds", {});
  const auto after = parse(e.wait_for([&](const auto& s) {
    return value_of(s, "tessera_sampler_last_success_timestamp_seconds", {}) > seen;
  }));
  EXPECT_EQ(select(after, "tessera_replica_memory_quota_backend", {{"replica", other->replica}, {"backend", "library"}})
                .size(),
            1u);
  std::filesystem::remove(other->directory + "/driver-limits");
  // A container's charge shows at the next sample.
  ledgers[0]->charge(0, kGiB);
  e.wait_for([&](const auto& s) {
    auto r = select(s, "tessera_replica_memory_used_bytes", {{"replica", held[0].replica}});
    return r.size() == 1 && r[0].value == static_cast<double>(2 * kGiB);
  });

  EXPECT_EQ(value_of(all, "tessera_exporter_info", {}), 1);
  EXPECT_GT(value_of(all, "tessera_sampler_last_success_timestamp_seconds", {}), 1.7e9);
  EXPECT_GT(value_of(all, "tessera_sampler_duration_seconds", {}), 0.09);  // the GPM window is inside it

  // A GPU falls off the bus: its series and its MIG devices' go to tessera_device_up 0, the rest flow.
  n.sim({"event", "--gpu", "4", "--lost"});
  text = e.wait_for([](const auto& s) {
    return value_of(s, "tessera_device_up", {{"gpu", "4"}, {"GPU_I_ID", ""}}) == 0 &&
           select(s, "tessera_xid_errors_total", {{"gpu", "4"}, {"xid", "79"}}).size() == 1;
  });
  all = parse(text);
  for (const auto& s : select(all, "tessera_device_up"))
    EXPECT_EQ(s.value, s.labels.at("gpu") == "4" ? 0 : 1) << json(s.labels).dump();
  EXPECT_EQ(select(all, "tessera_device_up", {{"gpu", "4"}}).size(), 6u);
  EXPECT_EQ(select(all, "DCGM_FI_DEV_GPU_TEMP").size(), 7u);
  EXPECT_EQ(value_of(all, "DCGM_FI_DEV_GPU_TEMP", {{"gpu", "3"}}), 43);
  expect_promtool_clean(n.dir, text);
  EXPECT_TRUE(e.process->wait_for_output("NVML_ERROR_GPU_IS_LOST", 5000)) << e.process->output();
  EXPECT_NE(e.process->output().find(state["gpus"][4]["uuid"].get<std::string>() + ": nvml"), std::string::npos)
      << e.process->output();

  int status = 0;
  EXPECT_EQ(get(e.port, "/healthz", &status), "ok\n");
  EXPECT_EQ(status, 200);
  EXPECT_EQ(e.stop(), 0);
  EXPECT_NE(e.process->output().find("tessera exporter: stopped"), std::string::npos);
}

// A GPU already off the bus when the exporter starts has never been read:
// its down series still name the node (Hostname), so that the device-down
// alert says where it is.
TEST(Exporter, AGpuLostBeforeTheStartStillNamesItsNode) {
  Node n("A100-SXM4-80GB", 2);
  n.sim({"event", "--gpu", "1", "--lost"});
  Exporter e(n, {"--quota-ledger-root", n.ledger_root});
  auto all = parse(e.wait_for([](const auto& s) { return select(s, "tessera_device_up", {{"gpu", "1"}}).size() == 1; }));
  const auto down = select(all, "tessera_device_up", {{"gpu", "1"}});
  ASSERT_EQ(down.size(), 1u);
  EXPECT_EQ(down[0].value, 0);
  EXPECT_EQ(down[0].labels.count("Hostname") ? down[0].labels.at("Hostname") : "", "node-7") << json(down[0].labels).dump();
  EXPECT_EQ(value_of(all, "tessera_device_up", {{"gpu", "0"}, {"Hostname", "node-7"}}), 1);
  EXPECT_EQ(e.stop(), 0);
}

TEST(Exporter, PodResourcesAbsentOrHangingCostOnlyPodLabels) {
  Node n("A100-SXM4-80GB", 2);
  {
    Exporter e(n, {"--pod-resources", n.dir.path() + "/absent.sock", "--quota-ledger-root", n.ledger_root});
    EXPECT_TRUE(e.process->wait_for_output("absent.sock does not exist", 5000)) << e.process->output();
    auto all = parse(e.metrics());
    EXPECT_EQ(select(all, "DCGM_FI_DEV_FB_USED", {{"pod", ""}}).size(), 2u);
    // Ampere has no GPM: those series are left out, never made up.
    EXPECT_EQ(select(all, "DCGM_FI_PROF_SM_ACTIVE").size(), 0u);
    EXPECT_EQ(select(all, "DCGM_FI_PROF_GR_ENGINE_ACTIVE").size(), 0u);
    EXPECT_EQ(select(all, "DCGM_FI_DEV_GPU_TEMP").size(), 2u);
    EXPECT_EQ(e.stop(), 0);
    // Said once, not every interval.
    auto out = e.process->output();
    EXPECT_EQ(out.find("does not exist"), out.rfind("does not exist")) << out;
  }
  {
    // A socket that listens and never answers: each sample waits at most the deadline.
    const std::string path = n.dir.path() + "/hang.sock";
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(listen(fd, 64), 0);
    Exporter e(n, {"--pod-resources", path, "--pod-resources-timeout", "0.3"}, 0.5);
    EXPECT_TRUE(e.process->wait_for_output("pod-resources", 5000)) << e.process->output();
    double first = value_of(parse(e.metrics()), "tessera_sampler_last_success_timestamp_seconds", {});
    auto text = e.wait_for([&](const auto& s) {
      return value_of(s, "tessera_sampler_last_success_timestamp_seconds", {}) > first;
    });
    auto all = parse(text);
    EXPECT_LT(value_of(all, "tessera_sampler_duration_seconds", {}), 1.0);
    EXPECT_EQ(select(all, "DCGM_FI_DEV_FB_USED", {{"pod", ""}}).size(), 2u);
    EXPECT_EQ(e.stop(), 0);
    close(fd);
  }
}

TEST(Exporter, OneFailingNvmlCallMarksThatGpuDownAndTheOthersFlow) {
  Node n("A100-SXM4-80GB", 3);
  Exporter e(n, {"--pod-resources", ""}, 0.3);
  // The next nvmlDeviceGetPowerUsage fails: GPU 0's, in the next sample.
  n.sim({"fault", "--function", "nvmlDeviceGetPowerUsage", "--error", "NVML_ERROR_UNKNOWN"});
  auto text = e.wait_for([](const auto& s) { return value_of(s, "tessera_device_up", {{"gpu", "0"}}) == 0; });
  auto all = parse(text);
  EXPECT_EQ(value_of(all, "tessera_device_up", {{"gpu", "1"}}), 1);
  EXPECT_EQ(value_of(all, "tessera_device_up", {{"gpu", "2"}}), 1);
  EXPECT_EQ(select(all, "DCGM_FI_DEV_POWER_USAGE").size(), 2u);
  EXPECT_EQ(value_of(all, "DCGM_FI_DEV_GPU_TEMP", {{"gpu", "0"}}), 33);  // what it did read
  EXPECT_TRUE(e.process->wait_for_output("nvmlDeviceGetPowerUsage", 5000)) << e.process->output();
  // The fault was one call: the GPU answers again at the next sample.
  e.wait_for([](const auto& s) { return value_of(s, "tessera_device_up", {{"gpu", "0"}}) == 1; });
  EXPECT_TRUE(e.process->wait_for_output("answers again", 5000)) << e.process->output();
  EXPECT_EQ(e.stop(), 0);
}

TEST(Exporter, APortInUseOrABadAddressIsAClearError) {
  Node n("A100-SXM4-80GB", 1);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 4), 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const std::string taken = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  auto r = run({kBin, "exporter", "--sim", n.node, "--listen", taken, "--pod-resources", ""});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "tessera exporter: cannot listen on " + taken + ": the port is in use\n");
  close(fd);

  r = run({kBin, "exporter", "--sim", n.node, "--listen", "localhost"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("expected HOST:PORT"), std::string::npos) << r.err;
  r = run({kBin, "exporter", "--sim", n.node, "--listen", "127.0.0.1:99999"});
  EXPECT_EQ(r.exit_code, 2);
  r = run({kBin, "exporter", "--sim", n.node, "--interval", "0"});
  EXPECT_EQ(r.exit_code, 2);
  r = run({kBin, "exporter", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("dcgm-exporter's names"), std::string::npos);
}

}  // namespace
}  // namespace tessera
