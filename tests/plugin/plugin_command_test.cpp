// `tessera plugin` as the node agent runs it: against a simulated node, with
// the kubelet peer in this process.
#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "nvml/session.hpp"
#include "sharing/allocate.hpp"

#include "kubelet/fake_kubelet.hpp"
#include "support/run.hpp"
#include "support/sim_nvml.hpp"

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
  std::string ledger_root = dir.path() + "/ledgers";
  sim::FakeKubelet kubelet{kubelet_dir};
  // The quota library's host paths, inside the test's directory.
  std::vector<std::string> quota_args() const {
    return {"--quota-library-dir", dir.path() + "/lib", "--quota-ledger-root", ledger_root};
  }

  explicit SimNode(const std::string& count = "2") {
    auto r = run({kBin, "sim", "create", node, "--gpu", "A100-SXM4-80GB", "--count", count});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::filesystem::create_directories(kubelet_dir);
    EXPECT_TRUE(kubelet.start());
  }
  void sim(std::vector<std::string> args) const {
    args.insert(args.begin(), {kBin, "sim"});
    args.insert(args.begin() + 3, node);
    auto r = run(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  void mig_apply(const std::string& config_file, const std::string& name) const {
    auto r = run({kBin, "mig", "apply", "-f", config_file, "-c", name, "--sim", node});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
};

size_t count_health(const std::vector<sim::AdvertisedDevice>& d, const std::string& health) {
  return static_cast<size_t>(std::count_if(d.begin(), d.end(), [&](const auto& x) { return x.health == health; }));
}

// CPU seconds (user + system) a process used so far, from /proc/PID/stat.
double cpu_seconds(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string f;
  double ticks = 0;
  for (int i = 3; fields >> f && i <= 15; ++i)
    if (i == 14 || i == 15) ticks += std::stod(f);  // utime, stime
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// `tessera plugin` on the node with `config_yaml`, `extra` arguments and info
// logs, once it says it is ready.
std::unique_ptr<Process> start_plugin(SimNode& n, const std::string& config_yaml,
                                      const std::vector<std::string>& extra) {
  auto config = n.dir.write("dp.yaml", config_yaml);
  std::vector<std::string> argv{kBin, "plugin", "--config", config, "--sim", n.node, "--kubelet-dir", n.kubelet_dir,
                                "--log-level", "info"};
  auto quota = n.quota_args();
  argv.insert(argv.end(), quota.begin(), quota.end());
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto plugin = std::make_unique<Process>(argv, n.dir.path() + "/plugin.log");
  EXPECT_TRUE(plugin->wait_for_output("ready", 10000)) << plugin->output();
  return plugin;
}

// The same on the node's two whole GPUs, once both are advertised Healthy.
std::unique_ptr<Process> start_whole_gpu_plugin(SimNode& n, const std::vector<std::string>& extra) {
  auto plugin = start_plugin(n, "version: v1\n", extra);
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return count_health(d, "Healthy") == 2; }, 5s));
  return plugin;
}

const char* kMigConfigs = R"(version: v1
mig-configs:
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
  two-3g:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
  four-1g-one-3g:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 4, "3g.40gb": 1}
)";

TEST(PluginCommand, TimeSlicedReplicasXidRecoveryAndCleanStop) {
  SimNode n;
  auto config = n.dir.write("dp.yaml", R"(version: v1
sharing:
  timeSlicing:
    resources: [{name: nvidia.com/gpu, replicas: 4}]
)");
  Process plugin({kBin, "plugin", "--config", config, "--sim", n.node, "--kubelet-dir", n.kubelet_dir,
                  "--health-recovery", "1", "--log-level", "info", "--quota-library-dir", n.dir.path() + "/lib",
                  "--quota-ledger-root", n.ledger_root},
                 n.dir.path() + "/plugin.log");
  ASSERT_TRUE(plugin.wait_for_output("tessera plugin: ready: nvidia.com/gpu", 10000)) << plugin.output();
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 8; }, 5s));
  auto devices = n.kubelet.devices("nvidia.com/gpu");
  auto a = n.kubelet.allocate("nvidia.com/gpu", {devices[0].id});
  ASSERT_TRUE(a) << a.error().message;
  // A quarter of what the driver says is usable: 81920 MiB less the 491 MiB
  // the simulated A100-80GB reserves, not a quarter of the whole 80 GiB.
  EXPECT_EQ(a->envs.at("TESSERA_DEVICE_MEMORY_LIMIT_0"), std::to_string(((81920ull - 491) << 20) / 4));
  // The quota library and the container's ledger directory, made before the answer.
  EXPECT_EQ(a->envs.at("LD_PRELOAD"), "/usr/local/tessera/lib/libtessera-cuda.so");
  EXPECT_EQ(a->envs.at("TESSERA_LEDGER_DIR"), "/run/tessera/ledger");
  EXPECT_EQ(a->envs.at("TESSERA_DEVICE_UUID_0").rfind("GPU-", 0), 0u);
  auto ledger_dir = n.ledger_root + "/" + a->envs.at("TESSERA_LEDGER_KEY");
  EXPECT_EQ(a->mounts, (std::vector<std::pair<std::string, std::string>>{
                           {n.dir.path() + "/lib", "/usr/local/tessera/lib"},
                           {ledger_dir, "/run/tessera/ledger"},
                           {n.ledger_root + "/ld.so.preload", "/etc/ld.so.preload"}}));
  EXPECT_EQ(std::filesystem::status(ledger_dir).permissions(), std::filesystem::perms::all | std::filesystem::perms::sticky_bit);

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
  Process plugin({kBin, "plugin", "--config", config, "--sim", n.node, "--kubelet-dir", n.kubelet_dir,
                  "--quota-ledger-root", n.ledger_root},
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
  // Nor does an empty one (a file caught mid-write, or emptied by mistake).
  n.dir.write("dp.yaml", "");
  plugin.signal(SIGHUP);
  EXPECT_TRUE(plugin.wait_for_output("is empty; still serving the previous one", 3000)) << plugin.output();
  EXPECT_EQ(n.kubelet.devices("nvidia.com/gpu").size(), 6u);
  plugin.signal(SIGTERM);
  EXPECT_EQ(plugin.wait(5000), 0);
}

// A mounted ConfigMap is updated by the kubelet without a signal: the new
// files go into a fresh directory and the `..data` symlink is renamed over
// (the atomic writer of kubelet's configmap volumes). The plugin reloads on
// that; a touch that changes no text does not reload.
TEST(PluginCommand, AConfigMapUpdateReloadsWithoutASignal) {
  SimNode n;
  namespace fs = std::filesystem;
  const fs::path mount = n.dir.path() + "/configmap";
  auto publish = [&](const std::string& version, const std::string& text) {
    fs::create_directories(mount / version);
    std::ofstream(mount / version / "config.yaml") << text;
    fs::create_directory_symlink(version, mount / "..data_tmp");
    fs::rename(mount / "..data_tmp", mount / "..data");
  };
  publish("..v1", "version: v1\n");
  fs::create_symlink("..data/config.yaml", mount / "config.yaml");
  Process plugin({kBin, "plugin", "--config", (mount / "config.yaml").string(), "--sim", n.node, "--kubelet-dir",
                  n.kubelet_dir, "--quota-ledger-root", n.ledger_root, "--log-level", "info"},
                 n.dir.path() + "/plugin.log");
  ASSERT_TRUE(plugin.wait_for_output("ready", 10000)) << plugin.output();
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 2; }, 5s));
  publish("..v2", "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 3}]\n");
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 6; }, 5s)) << plugin.output();
  EXPECT_EQ(occurrences(plugin.output(), "the config file changed"), 1u) << plugin.output();
  publish("..v3", "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 3}]\n");
  std::this_thread::sleep_for(700ms);
  EXPECT_EQ(occurrences(plugin.output(), "the config file changed"), 1u) << "the same text again: " << plugin.output();
  plugin.signal(SIGTERM);
  EXPECT_EQ(plugin.wait(5000), 0);
}

// A ledger root the plugin cannot write fails Allocate for a replica with a
// quota, naming the directory and why; --no-quota-library hands out the
// limits alone and needs no directory. Run without the capability to
// override file permissions, as a root test run would otherwise write anyway.
TEST(PluginCommand, UnwritableLedgerRootFailsAllocateUnlessTheLibraryIsOff) {
  SimNode n;
  std::filesystem::create_directories(n.ledger_root);
  std::filesystem::permissions(n.ledger_root, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec |
                                                  std::filesystem::perms::group_read | std::filesystem::perms::group_exec |
                                                  std::filesystem::perms::others_read | std::filesystem::perms::others_exec);
  std::vector<std::string> prefix;
  if (geteuid() == 0) {
    if (!std::filesystem::exists("/usr/bin/setpriv")) GTEST_SKIP() << "root without setpriv: cannot make a directory unwritable";
    const std::string caps = "-dac_override,-dac_read_search,-fowner";
    prefix = {"/usr/bin/setpriv", "--inh-caps=" + caps, "--bounding-set=" + caps, "--"};
  }
  auto config = n.dir.write("dp.yaml", "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 2}]\n");
  auto argv = prefix;
  argv.insert(argv.end(), {kBin, "plugin", "--config", config, "--sim", n.node, "--kubelet-dir", n.kubelet_dir,
                           "--log-level", "info"});
  auto quota = n.quota_args();
  argv.insert(argv.end(), quota.begin(), quota.end());
  {
    Process plugin(argv, n.dir.path() + "/plugin.log");
    ASSERT_TRUE(plugin.wait_for_output("ready", 10000)) << plugin.output();
    ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 4; }, 5s));
    auto devices = n.kubelet.devices("nvidia.com/gpu");
    auto refused = n.kubelet.allocate("nvidia.com/gpu", {devices[0].id});
    ASSERT_FALSE(refused);
    std::vector<std::string> ids{devices[0].id};
    auto dir = n.ledger_root + "/" + sharing::ledger_key("nvidia.com/gpu", ids);
    EXPECT_EQ(refused.error().message, "cannot prepare the quota ledger directory " + dir + ": " + n.ledger_root +
                                           " is not writable (Permission denied)");
    EXPECT_TRUE(plugin.wait_for_output(refused.error().message, 2000)) << plugin.output();  // and logged
    plugin.signal(SIGTERM);
    EXPECT_EQ(plugin.wait(5000), 0) << plugin.output();
  }
  argv.push_back("--no-quota-library");
  Process plugin(argv, n.dir.path() + "/plugin-off.log");
  ASSERT_TRUE(plugin.wait_for_output("ready", 10000)) << plugin.output();
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 4; }, 5s));
  auto devices = n.kubelet.devices("nvidia.com/gpu");
  auto a = n.kubelet.allocate("nvidia.com/gpu", {devices[0].id});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_TRUE(a->envs.contains("TESSERA_DEVICE_MEMORY_LIMIT_0"));
  EXPECT_FALSE(a->envs.contains("LD_PRELOAD"));
  EXPECT_TRUE(a->mounts.empty());
  plugin.signal(SIGTERM);
  EXPECT_EQ(plugin.wait(5000), 0) << plugin.output();
}

// XID 79 and silence: the GPU fell off the bus. Its devices stay Unhealthy
// past the recovery period while it does not answer, and come back once a
// reset makes it answer again.
TEST(PluginCommand, LostGpuStaysUnhealthyUntilItAnswers) {
  SimNode n;
  auto started = start_whole_gpu_plugin(n, {"--health-recovery", "1"});
  auto& plugin = *started;
  n.sim({"event", "--gpu", "0", "--lost"});
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return count_health(d, "Unhealthy") == 1; }, 3s))
      << plugin.output();
  // Three recovery periods of silence: still Unhealthy, said once.
  std::this_thread::sleep_for(3s);
  EXPECT_EQ(n.kubelet.healthy_count("nvidia.com/gpu"), 1u) << plugin.output();
  EXPECT_EQ(occurrences(plugin.output(), "does not answer"), 1u) << plugin.output();
  n.sim({"reset", "--gpu", "0"});
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return count_health(d, "Healthy") == 2; }, 5s))
      << plugin.output();
  EXPECT_TRUE(plugin.wait_for_output("answers again", 1000)) << plugin.output();
  plugin.signal(SIGTERM);
  EXPECT_EQ(plugin.wait(5000), 0) << plugin.output();
}

// nvmlEventSetWait failing with GPU_IS_LOST: every watched GPU turns
// Unhealthy, the failure is logged once, the wait is retried with backoff,
// and the devices recover when the driver answers again.
TEST(PluginCommand, FailingEventWaitMarksGpusUnhealthyOnceAndRecovers) {
  SimNode n;
  auto started = start_whole_gpu_plugin(n, {"--health-recovery", "1"});
  auto& plugin = *started;
  n.sim({"fault", "--function", "nvmlEventSetWait_v2", "--error", "NVML_ERROR_GPU_IS_LOST", "--times", "3"});
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return count_health(d, "Unhealthy") == 2; }, 3s))
      << plugin.output();
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return count_health(d, "Healthy") == 2; }, 8s))
      << plugin.output();
  EXPECT_TRUE(plugin.wait_for_output("works again after 3 failed waits", 3000)) << plugin.output();
  auto log = plugin.output();
  EXPECT_EQ(occurrences(log, "NVML event wait failed"), 1u) << log;
  EXPECT_NE(log.find("NVML_ERROR_GPU_IS_LOST"), std::string::npos) << log;
  EXPECT_EQ(occurrences(log, "works again after 3 failed waits"), 1u) << log;
  // Healthy only once the watch works again: the failure held through each backoff.
  EXPECT_LT(log.find("works again"), log.find("devices back to Healthy")) << log;
  plugin.signal(SIGTERM);
  EXPECT_EQ(plugin.wait(5000), 0) << plugin.output();
}

// The driver gone for good (the simulated node's directory removed): the
// plugin marks everything Unhealthy and waits with backoff instead of
// spinning. Before, it used 30% of a core doing thousands of calls a second.
TEST(PluginCommand, DeadDriverDoesNotSpin) {
  SimNode n;
  auto started = start_whole_gpu_plugin(n, {});
  auto& plugin = *started;
  std::filesystem::rename(n.node, n.dir.path() + "/gone");
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return count_health(d, "Unhealthy") == 2; }, 3s))
      << plugin.output();
  double before = cpu_seconds(plugin.pid());
  std::this_thread::sleep_for(4s);
  double used = cpu_seconds(plugin.pid()) - before;
  EXPECT_LT(used, 0.2) << "CPU seconds in 4 s with the driver gone; " << plugin.output();
  EXPECT_EQ(occurrences(plugin.output(), "NVML event wait failed"), 1u) << plugin.output();
  plugin.signal(SIGTERM);
  EXPECT_EQ(plugin.wait(5000), 0) << plugin.output();
}

// MIG configuration change events: instances destroyed by `mig apply`
// leave ListAndWatch within a second, not at the next inventory refresh.
TEST(PluginCommand, MigChangesReachTheKubeletWithinASecond) {
  SimNode n("1");
  auto migs = n.dir.write("mig.yaml", kMigConfigs);
  n.mig_apply(migs, "all-1g.10gb");
  auto started = start_plugin(n, "version: v1\nflags: {migStrategy: mixed}\n", {"--inventory-interval", "300"});
  auto& plugin = *started;
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/mig-1g.10gb", [](const auto& d) { return d.size() == 7; }, 5s));
  n.mig_apply(migs, "four-1g-one-3g");
  auto applied = std::chrono::steady_clock::now();
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/mig-1g.10gb", [](const auto& d) { return d.size() == 4; }, 1s))
      << plugin.output();
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/mig-3g.40gb", [](const auto& d) { return d.size() == 1; }, 1s))
      << plugin.output();
  EXPECT_LT(std::chrono::steady_clock::now() - applied, 1s);
  plugin.signal(SIGTERM);
  EXPECT_EQ(plugin.wait(5000), 0) << plugin.output();
}

// deviceIDStrategy index: "<gpu>:<n>" must be NVML's MIG device index n, the
// one the container runtime resolves, for every advertised MIG device, in a
// layout where NVML's order differs from placement order.
TEST(PluginCommand, IndexIdsNameTheNvmlMigDeviceOfTheAllocatedUuid) {
  SimNode n("1");
  auto migs = n.dir.write("mig.yaml", kMigConfigs);
  // The kept 3g.40gb (at slice 4) has GPU instance id 2; the new 1g.10gb
  // get ids 1, 3, 4, 5: NVML numbers the 3g second, placement puts it last.
  n.mig_apply(migs, "all-1g.10gb");
  n.mig_apply(migs, "two-3g");
  n.mig_apply(migs, "four-1g-one-3g");
  auto started = start_plugin(n, "version: v1\nflags: {migStrategy: mixed, plugin: {deviceIDStrategy: index}}\n", {});
  auto& plugin = *started;
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/mig-1g.10gb", [](const auto& d) { return d.size() == 4; }, 5s));
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/mig-3g.40gb", [](const auto& d) { return d.size() == 1; }, 5s));

  // The driver's own answer: MIG device UUID by NVML index, and by placement.
  auto session = testing::open_simulated_nvml(TESSERA_SIM_LIBRARY, n.node);
  ASSERT_TRUE(session) << session.error().message;
  const auto& api = session->api();
  nvml::abi::nvmlDevice_t gpu = nullptr;
  ASSERT_EQ(api.nvmlDeviceGetHandleByIndex_v2(0, &gpu), nvml::abi::NVML_SUCCESS);
  std::map<std::string, unsigned> nvml_index;  // MIG UUID -> index
  for (unsigned i = 0; i < 7; ++i) {
    nvml::abi::nvmlDevice_t mig = nullptr;
    if (api.nvmlDeviceGetMigDeviceHandleByIndex(gpu, i, &mig) != nvml::abi::NVML_SUCCESS) continue;
    char uuid[96] = {};
    ASSERT_EQ(api.nvmlDeviceGetUUID(mig, uuid, sizeof uuid), nvml::abi::NVML_SUCCESS);
    nvml_index[uuid] = i;
  }
  ASSERT_EQ(nvml_index.size(), 5u);

  auto inv = nlohmann::json::parse(run({kBin, "inventory", "--json", "--sim", n.node}).out);
  std::vector<std::pair<unsigned, std::string>> by_start;  // placement start, MIG UUID
  for (const auto& m : inv["gpus"][0]["mig_devices"])
    for (const auto& gi : inv["gpus"][0]["gpu_instances"])
      if (gi["id"] == m["gpu_instance"]) by_start.emplace_back(gi["placement"]["start"].get<unsigned>(), m["uuid"]);
  std::sort(by_start.begin(), by_start.end());
  bool orders_differ = false;
  for (size_t rank = 0; rank < by_start.size(); ++rank) orders_differ |= nvml_index[by_start[rank].second] != rank;
  ASSERT_TRUE(orders_differ) << "the layout must number MIG devices differently from placement order";

  for (const std::string resource : {"nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"})
    for (const auto& d : n.kubelet.devices(resource)) {
      auto a = n.kubelet.allocate(resource, {d.id});
      ASSERT_TRUE(a) << a.error().message;
      EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), "0:" + std::to_string(nvml_index.at(d.id))) << d.id;
    }
  plugin.signal(SIGTERM);
  EXPECT_EQ(plugin.wait(5000), 0) << plugin.output();
}

// --- MPS: one supervised control daemon per device (docs/design-mps.md) ---

// The pid a (simulated) control daemon wrote in its pipe directory.
pid_t daemon_pid(const std::string& pipe_dir) {
  std::ifstream in(pipe_dir + "/nvidia-cuda-mps-control.pid");
  pid_t pid = -1;
  return in >> pid ? pid : -1;
}

bool running(pid_t pid) { return testing::process_running(pid); }
bool stops(pid_t pid) { return testing::process_stops(pid); }

std::string mps_config(const std::string& root) {
  return "version: v1\nflags: {mpsRoot: " + root + "}\nsharing:\n  mps:\n    resources: [{name: nvidia.com/gpu, replicas: 4}]\n";
}

TEST(PluginCommand, MpsSharesHaveADaemonPerGpuAndFollowItsHealth) {
  SimNode n;
  const std::string root = n.dir.path() + "/mps";
  auto plugin = start_plugin(n, mps_config(root), {"--mps-control", TESSERA_MPS_CONTROL_SIM});
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return count_health(d, "Healthy") == 8; }, 5s))
      << plugin->output();
  // One daemon per GPU, each told its clients' share: a quarter of the usable
  // memory (81920 MiB less the 491 MiB the simulated A100 reserves), 25% of threads.
  auto devices = n.kubelet.devices("nvidia.com/gpu");
  std::set<std::string> gpus;
  for (const auto& d : devices) gpus.insert(d.id.substr(0, d.id.find("::")));
  ASSERT_EQ(gpus.size(), 2u);
  std::map<std::string, pid_t> pids;
  for (const auto& uuid : gpus) {
    const std::string pipe = root + "/" + uuid + "/pipe";
    std::ifstream in(pipe + "/tessera-sim-mps.json");
    ASSERT_TRUE(in) << pipe;
    const auto state = nlohmann::json::parse(in);
    EXPECT_EQ(state["cuda_visible_devices"], uuid);
    EXPECT_EQ(state["default_device_pinned_mem_limits"]["0"]["value"], std::to_string((81920 - 491) / 4) + "M");
    EXPECT_EQ(state["default_active_thread_percentage"].get<double>(), 25.0);
    pids[uuid] = daemon_pid(pipe);
    EXPECT_TRUE(running(pids[uuid]));
  }
  // Allocate hands out the pipe directory of the device's own daemon.
  auto a = n.kubelet.allocate("nvidia.com/gpu", {devices[0].id});
  ASSERT_TRUE(a) << a.error().message;
  const std::string uuid = devices[0].id.substr(0, devices[0].id.find("::"));
  EXPECT_EQ(a->envs.at("CUDA_MPS_PIPE_DIRECTORY"), "/mps/nvidia.com_gpu/pipe");
  EXPECT_EQ(a->envs.at("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"), "25");
  EXPECT_NE(std::find(a->mounts.begin(), a->mounts.end(),
                      std::pair<std::string, std::string>{root + "/" + uuid + "/pipe",
                                                          "/mps/nvidia.com_gpu/pipe"}),
            a->mounts.end());
  // Its daemon dies: that GPU's four shares go Unhealthy within a check, the
  // other GPU's stay; the supervisor starts a new daemon and they come back.
  ::kill(pids[uuid], SIGKILL);
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [&](const auto& d) {
    return std::count_if(d.begin(), d.end(), [&](const auto& x) {
             return x.health == "Unhealthy" && x.id.starts_with(uuid);
           }) == 4 && count_health(d, "Healthy") == 4;
  }, 5s)) << plugin->output();
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return count_health(d, "Healthy") == 8; }, 5s))
      << plugin->output();
  const pid_t restarted = daemon_pid(root + "/" + uuid + "/pipe");
  EXPECT_TRUE(running(restarted));
  EXPECT_NE(restarted, pids[uuid]);
  // SIGTERM: the plugin stops and no daemon is left running.
  plugin->signal(SIGTERM);
  EXPECT_EQ(plugin->wait(10000), 0) << plugin->output();
  for (const auto& g : gpus) EXPECT_TRUE(stops(daemon_pid(root + "/" + g + "/pipe"))) << g;
  EXPECT_NE(plugin->output().find("MPS control daemon down for " + uuid), std::string::npos) << plugin->output();
}

// A config reload that drops MPS stops the daemons; bad dependencies leave the
// shares Unhealthy with a message, and the plugin keeps serving.
TEST(PluginCommand, MpsWithoutAControlProgramKeepsSharesUnhealthyAndSaysWhy) {
  SimNode n;
  const std::string root = n.dir.path() + "/mps";
  auto plugin = start_plugin(n, mps_config(root), {"--mps-control", n.dir.path() + "/missing-mps-control"});
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return count_health(d, "Unhealthy") == 8; }, 5s))
      << plugin->output();
  EXPECT_TRUE(plugin->wait_for_output("cannot run the MPS control program '" + n.dir.path() + "/missing-mps-control'",
                                      3000))
      << plugin->output();
  plugin->signal(SIGTERM);
  EXPECT_EQ(plugin->wait(10000), 0) << plugin->output();
}

TEST(PluginCommand, MpsDaemonsStopWhenAReloadDropsMps) {
  SimNode n;
  const std::string root = n.dir.path() + "/mps";
  auto plugin = start_plugin(n, mps_config(root), {"--mps-control", TESSERA_MPS_CONTROL_SIM});
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return count_health(d, "Healthy") == 8; }, 5s))
      << plugin->output();
  std::vector<pid_t> pids;
  for (const auto& e : std::filesystem::directory_iterator(root))
    if (e.path().filename().string().starts_with("GPU-")) pids.push_back(daemon_pid(e.path().string() + "/pipe"));
  ASSERT_EQ(pids.size(), 2u);
  n.dir.write("dp.yaml", "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 2}]\n");
  plugin->signal(SIGHUP);
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return count_health(d, "Healthy") == 4; }, 5s))
      << plugin->output();
  for (pid_t pid : pids) EXPECT_TRUE(stops(pid)) << "daemon " << pid << " was told to quit";
  plugin->signal(SIGTERM);
  EXPECT_EQ(plugin->wait(10000), 0) << plugin->output();
}

// MPS inside MIG: one daemon per MIG device, started for that MIG device alone.
TEST(PluginCommand, MpsInsideMigRunsADaemonPerMigDevice) {
  SimNode n("1");
  n.mig_apply(n.dir.write("mig.yaml", kMigConfigs), "two-3g");
  const std::string root = n.dir.path() + "/mps";
  auto plugin = start_plugin(n, "version: v1\nflags: {migStrategy: mixed, mpsRoot: " + root +
                                    "}\nsharing:\n  mps:\n    resources: [{name: nvidia.com/mig-3g.40gb, replicas: 2}]\n",
                             {"--mps-control", TESSERA_MPS_CONTROL_SIM});
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/mig-3g.40gb", [](const auto& d) { return count_health(d, "Healthy") == 4; },
                                 5s))
      << plugin->output();
  std::set<std::string> migs;
  for (const auto& d : n.kubelet.devices("nvidia.com/mig-3g.40gb")) migs.insert(d.id.substr(0, d.id.find("::")));
  ASSERT_EQ(migs.size(), 2u);
  for (const auto& uuid : migs) {
    EXPECT_EQ(uuid.rfind("MIG-", 0), 0u);
    std::ifstream in(root + "/" + uuid + "/pipe/tessera-sim-mps.json");
    ASSERT_TRUE(in) << uuid;
    const auto state = nlohmann::json::parse(in);
    EXPECT_EQ(state["cuda_visible_devices"], uuid) << "the daemon sees its MIG device alone";
    EXPECT_EQ(state["default_active_thread_percentage"].get<double>(), 50.0);
  }
  plugin->signal(SIGTERM);
  EXPECT_EQ(plugin->wait(10000), 0) << plugin->output();
  for (const auto& uuid : migs) EXPECT_TRUE(stops(daemon_pid(root + "/" + uuid + "/pipe"))) << uuid;
}

}  // namespace
}  // namespace tessera
