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

#include "core/text.hpp"
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

  explicit SimNode(const std::string& count = "2", const std::vector<std::string>& create_args = {}) {
    std::vector<std::string> argv{kBin, "sim", "create", node, "--gpu", "A100-SXM4-80GB", "--count", count};
    argv.insert(argv.end(), create_args.begin(), create_args.end());
    auto r = run(argv);
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
  const std::string text = tessera::testing::proc_stat(pid);
  if (text.rfind(')') == std::string::npos) return 0;
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
  std::vector<std::string> argv{kBin, "plugin", "--config-file", config, "--sim", n.node, "--kubelet-dir", n.kubelet_dir,
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
  Process plugin({kBin, "plugin", "--config-file", config, "--sim", n.node, "--kubelet-dir", n.kubelet_dir,
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
  // The quota library and the container's limits file and ledger, made before the answer.
  EXPECT_EQ(a->envs.at("LD_PRELOAD"), "/usr/local/tessera/lib/libtessera-cuda.so");
  EXPECT_EQ(a->envs.at("TESSERA_LEDGER_DIR"), "/run/tessera/ledger");
  EXPECT_EQ(a->envs.at("TESSERA_DEVICE_UUID_0").rfind("GPU-", 0), 0u);
  auto ledger_dir = n.ledger_root + "/" + a->envs.at("TESSERA_LEDGER_KEY");
  EXPECT_EQ(a->mounts, (std::vector<std::pair<std::string, std::string>>{
                           {n.dir.path() + "/lib", "/usr/local/tessera/lib"},
                           {ledger_dir + "/ledger", "/run/tessera/ledger/ledger"},
                           {ledger_dir + "/limits", "/run/tessera/limits"},
                           {n.ledger_root + "/ld.so.preload", "/etc/ld.so.preload"}}));
  namespace fs = std::filesystem;
  EXPECT_EQ(fs::status(ledger_dir).permissions(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                                      fs::perms::others_read | fs::perms::others_exec);
  EXPECT_TRUE(fs::is_regular_file(ledger_dir + "/ledger"));
  EXPECT_TRUE(fs::is_regular_file(ledger_dir + "/limits"));

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
  auto r = run({kBin, "plugin", "--config-file", config, "--sim", n.node, "--kubelet-dir", n.kubelet_dir});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(config + ":3:16: error: flags.migStrategy: got 'sometimes' (allowed: none, single, mixed)"),
            std::string::npos)
      << r.err;
}

TEST(PluginCommand, SighupReloadsTheConfig) {
  SimNode n;
  auto config = n.dir.write("dp.yaml", "version: v1\n");
  Process plugin({kBin, "plugin", "--config-file", config, "--sim", n.node, "--kubelet-dir", n.kubelet_dir,
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
  Process plugin({kBin, "plugin", "--config-file", (mount / "config.yaml").string(), "--sim", n.node, "--kubelet-dir",
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
    ASSERT_TRUE(std::filesystem::exists("/usr/bin/setpriv")) << "root without setpriv (util-linux): scripts/setup.sh installs it";
    const std::string caps = "-dac_override,-dac_read_search,-fowner";
    prefix = {"/usr/bin/setpriv", "--inh-caps=" + caps, "--bounding-set=" + caps, "--"};
  }
  auto config = n.dir.write("dp.yaml", "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 2}]\n");
  auto argv = prefix;
  argv.insert(argv.end(), {kBin, "plugin", "--config-file", config, "--sim", n.node, "--kubelet-dir", n.kubelet_dir,
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
  const auto within = 1s * testing::kSlowdown;  // a second as shipped; the sanitizer build is slower
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/mig-1g.10gb", [](const auto& d) { return d.size() == 4; }, within))
      << plugin.output();
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/mig-3g.40gb", [](const auto& d) { return d.size() == 1; }, within))
      << plugin.output();
  EXPECT_LT(std::chrono::steady_clock::now() - applied, within);
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

// The daemons of `tessera mps-host`, a process of their own: the plugin says
// which it wants; they are the host's children, outlive a plugin that stops
// (an upgrade), with their clients, and the next plugin adopts them as they
// are; a death reaches the shares through the host at once; a host that
// stops takes its daemons and the plugin says so.
using tessera::testing::parent_of;

TEST(PluginCommand, MpsDaemonsOfTheHostOutliveThePluginAndTheNextOneAdoptsThem) {
  SimNode n;
  const std::string root = n.dir.path() + "/mps", socket = n.dir.path() + "/host/mps-host.sock";
  Process host({kBin, "mps-host", "--socket", socket, "--mps-control", TESSERA_MPS_CONTROL_SIM, "--log-level", "info"},
               n.dir.path() + "/mps-host.log");
  ASSERT_TRUE(host.wait_for_output("tessera mps-host: ready: " + socket, 10000)) << host.output();
  auto plugin = start_plugin(n, mps_config(root), {"--mps-host", socket});
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return count_health(d, "Healthy") == 8; }, 10s))
      << plugin->output() << host.output();
  std::set<std::string> gpus;
  for (const auto& d : n.kubelet.devices("nvidia.com/gpu")) gpus.insert(d.id.substr(0, d.id.find("::")));
  ASSERT_EQ(gpus.size(), 2u);
  std::map<std::string, pid_t> pids;
  for (const auto& uuid : gpus) {
    const std::string pipe = root + "/" + uuid + "/pipe";
    pids[uuid] = daemon_pid(pipe);
    EXPECT_TRUE(running(pids[uuid]));
    EXPECT_EQ(parent_of(pids[uuid]), host.pid()) << "the host's child, not the plugin's";
    std::ifstream in(pipe + "/tessera-sim-mps.json");
    const auto state = nlohmann::json::parse(in);
    EXPECT_EQ(state["default_device_pinned_mem_limits"]["0"]["value"], std::to_string((81920 - 491) / 4) + "M");
    EXPECT_EQ(state["default_active_thread_percentage"].get<double>(), 25.0);
  }
  const std::string uuid = *gpus.begin(), pipe = root + "/" + uuid + "/pipe";
  // A client of the first GPU's daemon, through the pipe directory Allocate hands out.
  Process client({TESSERA_MPS_CONTROL_SIM, "--tessera-sim-client"}, n.dir.path() + "/client.out",
                 {"CUDA_MPS_PIPE_DIRECTORY=" + pipe});
  ASSERT_TRUE(client.wait_for_output("MPS server", 5000)) << client.output();
  // The plugin stops, as an upgrade stops it: every daemon and the client stay.
  plugin->signal(SIGTERM);
  ASSERT_EQ(plugin->wait(10000), 0) << plugin->output();
  std::this_thread::sleep_for(300ms);
  for (const auto& [g, pid] : pids) EXPECT_TRUE(running(pid)) << g << ": the daemon outlives the plugin";
  EXPECT_TRUE(running(client.pid()));
  // The next plugin adopts them: the same pids, Healthy at once.
  auto next = start_plugin(n, mps_config(root), {"--mps-host", socket});
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return count_health(d, "Healthy") == 8; }, 10s))
      << next->output();
  // (The fake kubelet still lists the last plugin's devices until the next one
  // registers, so the adoption is waited for in the next plugin's own log.)
  for (const auto& [g, pid] : pids) {
    EXPECT_TRUE(next->wait_for_output(
        "MPS daemon for " + g + " (nvidia.com/gpu): adopted from tessera mps-host: pid " + std::to_string(pid), 10000))
        << next->output();
    EXPECT_EQ(daemon_pid(root + "/" + g + "/pipe"), pid) << g << ": adopted, not started again";
  }
  EXPECT_TRUE(running(client.pid()));
  EXPECT_EQ(client.output().find("lost"), std::string::npos) << client.output();
  // Its daemon dies: the host sees it at once, the shares follow, it comes back.
  const auto t0 = std::chrono::steady_clock::now();
  ::kill(pids[uuid], SIGKILL);
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [&](const auto& d) {
    return std::count_if(d.begin(), d.end(), [&](const auto& x) {
             return x.health == "Unhealthy" && x.id.starts_with(uuid);
           }) == 4 && count_health(d, "Healthy") == 4;
  }, 5s)) << next->output();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s) << "an event, not a poll (bench_mps measures it)";
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return count_health(d, "Healthy") == 8; }, 10s))
      << next->output();
  const pid_t restarted = daemon_pid(pipe);
  EXPECT_NE(restarted, pids[uuid]);
  EXPECT_EQ(parent_of(restarted), host.pid());
  EXPECT_EQ(client.wait(5000), 1) << "its client lost the daemon that died: " << client.output();
  // The host stops (its pod deleted): it quits its daemons, and the plugin says so.
  host.signal(SIGTERM);
  ASSERT_EQ(host.wait(10000), 0) << host.output();
  for (const auto& g : gpus) EXPECT_TRUE(stops(daemon_pid(root + "/" + g + "/pipe"))) << g;
  EXPECT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return count_health(d, "Unhealthy") == 8; }, 5s))
      << next->output();
  EXPECT_TRUE(next->wait_for_output("lost tessera mps-host at " + socket, 3000)) << next->output();
  next->signal(SIGTERM);
  EXPECT_EQ(next->wait(10000), 0) << next->output();
}

TEST(PluginCommand, MpsHostSaysWhatItDoesAndRefusesASecondHost) {
  auto help = run({kBin, "mps-host", "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  for (const char* text : {"--socket", "--mps-control", "--check-interval", "pidfd", "outlive"})
    EXPECT_NE(help.out.find(text), std::string::npos) << text << " in\n" << help.out;
  TempDir dir;
  const std::string socket = dir.path() + "/mps-host.sock";
  Process host({kBin, "mps-host", "--socket", socket, "--mps-control", TESSERA_MPS_CONTROL_SIM}, dir.path() + "/1.log");
  ASSERT_TRUE(host.wait_for_output("ready", 10000)) << host.output();
  auto second = run({kBin, "mps-host", "--socket", socket, "--mps-control", TESSERA_MPS_CONTROL_SIM});
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("another tessera mps-host answers on " + socket), std::string::npos) << second.err;
  host.signal(SIGTERM);
  EXPECT_EQ(host.wait(10000), 0) << host.output();
}

// ---------------------------------------------------------------- CDI
// The test is the container runtime here: it resolves a qualified CDI name
// ("vendor/class=name") the way the CDI specification says, by the spec in
// the directory whose kind is vendor/class and its device of that name, and
// collects what the device and the spec give the container.
struct Resolved {
  std::vector<std::string> device_nodes;  // container paths
  std::vector<std::string> host_nodes;
  std::vector<std::string> mounts;        // container paths
};
std::optional<Resolved> resolve_cdi(const std::string& dir, const std::string& qualified) {
  auto eq = qualified.find('=');
  if (eq == std::string::npos) return std::nullopt;
  const std::string kind = qualified.substr(0, eq), name = qualified.substr(eq + 1);
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().extension() != ".json") continue;
    std::ifstream in(f.path());
    auto spec = nlohmann::json::parse(in);
    if (spec.value("kind", "") != kind) continue;
    EXPECT_GE(spec.value("cdiVersion", ""), std::string("0.6.0")) << f.path();
    for (const auto& d : spec["devices"]) {
      if (d["name"] != name) continue;
      Resolved r;
      const nlohmann::json none = nlohmann::json::object();
      for (const nlohmann::json* edits : {spec.contains("containerEdits") ? &spec["containerEdits"] : &none,
                                          d.contains("containerEdits") ? &d["containerEdits"] : &none}) {
        for (const auto& n : edits->value("deviceNodes", nlohmann::json::array())) {
          r.device_nodes.push_back(n["path"]);
          r.host_nodes.push_back(n["hostPath"]);
        }
        for (const auto& m : edits->value("mounts", nlohmann::json::array())) r.mounts.push_back(m["containerPath"]);
      }
      return r;
    }
  }
  return std::nullopt;
}

// The simulated node's directory as a driver root: the driver's libraries
// where a distribution puts them (the simulator's device nodes and MIG
// capabilities are there already).
std::vector<std::string> cdi_args(SimNode& n, const std::string& specs) {
  std::filesystem::create_directories(n.node + "/usr/lib/x86_64-linux-gnu");
  std::ofstream(n.node + "/usr/lib/x86_64-linux-gnu/libcuda.so.550.90.07") << "not a library";
  std::error_code ec;  // made once per node
  std::filesystem::create_symlink("libcuda.so.550.90.07", n.node + "/usr/lib/x86_64-linux-gnu/libcuda.so.1", ec);
  std::ofstream(n.node + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1") << "not a library";
  return {"--cdi-spec-dir", specs, "--driver-root", "/host-driver", "--container-driver-root", n.node};
}

// cdi-cri for two GPUs: two legal names, each defined in a spec in
// --cdi-spec-dir with its own device node, the control nodes and the
// driver's libraries (host paths under the driver root); envvar beside it.
TEST(PluginCommand, CdiCriHandsOutOneDefinedNamePerDevice) {
  SimNode n;
  const std::string specs = n.dir.path() + "/cdi";
  auto plugin = start_plugin(n, "version: v1\nflags: {plugin: {deviceListStrategy: [envvar, cdi-cri]}}\n", cdi_args(n, specs));
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 2; }, 5s)) << plugin->output();
  auto devices = n.kubelet.devices("nvidia.com/gpu");
  auto a = n.kubelet.allocate("nvidia.com/gpu", {devices[0].id, devices[1].id});
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_EQ(a->cdi_devices.size(), 2u);
  std::set<std::string> nodes;
  for (const auto& name : a->cdi_devices) {
    EXPECT_TRUE(name.starts_with("k8s.device-plugin.nvidia.com/gpu=GPU-")) << name;
    EXPECT_EQ(name.find(','), std::string::npos) << name;
    auto r = resolve_cdi(specs, name);
    ASSERT_TRUE(r) << name << " is defined by no spec in " << specs;
    EXPECT_NE(std::find(r->mounts.begin(), r->mounts.end(), "/usr/lib/x86_64-linux-gnu/libcuda.so.1"), r->mounts.end());
    for (size_t i = 0; i < r->device_nodes.size(); ++i) {
      EXPECT_EQ(r->host_nodes[i], "/host-driver" + r->device_nodes[i]);
      if (r->device_nodes[i].starts_with("/dev/nvidia") && r->device_nodes[i] != "/dev/nvidiactl") nodes.insert(r->device_nodes[i]);
    }
  }
  EXPECT_EQ(nodes, (std::set<std::string>{"/dev/nvidia0", "/dev/nvidia1"}));
  EXPECT_EQ(a->envs.at("NVIDIA_VISIBLE_DEVICES"), devices[0].id + "," + devices[1].id);
  // Nothing but the two spec files, no temporary left.
  std::set<std::string> files;
  for (const auto& f : std::filesystem::directory_iterator(specs)) files.insert(f.path().filename());
  EXPECT_EQ(files, (std::set<std::string>{"k8s.device-plugin.nvidia.com-gpu.json"}));
  plugin->signal(SIGTERM);
  EXPECT_EQ(plugin->wait(5000), 0) << plugin->output();
}

// --device-list-strategy replaces the config's own (envvar here), as NVIDIA's plugin's flag does:
// the chart's way to turn CDI on for configs it does not write. A bad name is refused.
TEST(PluginCommand, TheDeviceListStrategyOptionReplacesTheConfigs) {
  SimNode n;
  const std::string specs = n.dir.path() + "/cdi";
  auto args = cdi_args(n, specs);
  args.insert(args.end(), {"--device-list-strategy", "cdi-cri"});
  auto plugin = start_plugin(n, "version: v1\nflags: {plugin: {deviceListStrategy: envvar}}\n", args);
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 2; }, 5s)) << plugin->output();
  auto devices = n.kubelet.devices("nvidia.com/gpu");
  auto a = n.kubelet.allocate("nvidia.com/gpu", {devices[0].id});
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_EQ(a->cdi_devices.size(), 1u);
  EXPECT_TRUE(resolve_cdi(specs, a->cdi_devices[0])) << a->cdi_devices[0];
  EXPECT_FALSE(a->envs.contains("NVIDIA_VISIBLE_DEVICES")) << "envvar is replaced, not added to";
  plugin->signal(SIGTERM);
  EXPECT_EQ(plugin->wait(5000), 0) << plugin->output();

  auto bad = run({kBin, "plugin", "--device-list-strategy", "cdi"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--device-list-strategy"), std::string::npos) << bad.err;
}

// A MIG change: the new MIG devices' names resolve by the time the kubelet
// sees them, with their capability nodes; the destroyed ones' names are gone.
TEST(PluginCommand, CdiSpecsFollowTheMigLayout) {
  SimNode n("1");
  const std::string specs = n.dir.path() + "/cdi";
  auto migs = n.dir.write("mig.yaml", kMigConfigs);
  n.mig_apply(migs, "two-3g");
  // An earlier release's spec of MIG devices: its names are the GPU spec's
  // now, so it goes.
  std::filesystem::create_directories(specs);
  std::ofstream(specs + "/k8s.device-plugin.nvidia.com-mig.json") << "{}";
  auto args = cdi_args(n, specs);
  args.insert(args.end(), {"--inventory-interval", "300"});
  auto plugin = start_plugin(n, "version: v1\nflags: {migStrategy: mixed, plugin: {deviceListStrategy: cdi-cri}}\n", args);
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/mig-3g.40gb", [](const auto& d) { return d.size() == 2; }, 5s));
  auto before = n.kubelet.devices("nvidia.com/mig-3g.40gb");
  std::set<std::string> files;
  for (const auto& f : std::filesystem::directory_iterator(specs)) files.insert(f.path().filename());
  EXPECT_EQ(files, (std::set<std::string>{"k8s.device-plugin.nvidia.com-gpu.json"}));
  n.mig_apply(migs, "all-1g.10gb");
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/mig-1g.10gb", [](const auto& d) { return d.size() == 7; }, 5s))
      << plugin->output();
  for (const auto& d : n.kubelet.devices("nvidia.com/mig-1g.10gb")) {
    auto r = resolve_cdi(specs, "k8s.device-plugin.nvidia.com/gpu=" + d.id);
    ASSERT_TRUE(r) << d.id;
    // nvidiactl from the driver's major (the node has no nvidia-uvm until
    // nvidia_uvm loads), then the GPU's node and the two capabilities.
    ASSERT_EQ(r->device_nodes.size(), 4u) << d.id << ": " << join(r->device_nodes);
    EXPECT_EQ(r->device_nodes[0], "/dev/nvidiactl");
    EXPECT_EQ(r->device_nodes[1], "/dev/nvidia0");
    EXPECT_TRUE(r->device_nodes[2].starts_with("/dev/nvidia-caps/nvidia-cap")) << r->device_nodes[2];
    EXPECT_TRUE(r->device_nodes[3].starts_with("/dev/nvidia-caps/nvidia-cap")) << r->device_nodes[3];
  }
  for (const auto& d : before) EXPECT_FALSE(resolve_cdi(specs, "k8s.device-plugin.nvidia.com/gpu=" + d.id)) << d.id;
  auto a = n.kubelet.allocate("nvidia.com/mig-1g.10gb", {n.kubelet.devices("nvidia.com/mig-1g.10gb")[3].id});
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_EQ(a->cdi_devices.size(), 1u);
  EXPECT_TRUE(resolve_cdi(specs, a->cdi_devices[0])) << a->cdi_devices[0];
  plugin->signal(SIGTERM);
  EXPECT_EQ(plugin->wait(5000), 0) << plugin->output();
}

// The driver as nvidia-ctk finds it: beside the sonames, every compute and
// utility library of the installed version (libcuda.so.1's file names it),
// at its own path, the GSP firmware of that version, and nothing of another
// version or another driver component.
TEST(PluginCommand, CdiSpecsMountTheInstalledDriversVersionedFiles) {
  SimNode n("1");
  const std::string specs = n.dir.path() + "/cdi";
  auto args = cdi_args(n, specs);
  const std::string lib = n.node + "/usr/lib/x86_64-linux-gnu/";
  for (const char* f : {"libnvidia-pkcs11.so.550.90.07", "libnvidia-nscq.so.550.90.07", "libnvidia-gpucomp.so.550.90.07",
                        "libnvidia-nscq.so.535.104.05", "libnvidia-glcore.so.550.90.07", "libnvidia-pkcs11.so.550.90.07.bak"})
    std::ofstream(lib + f) << "not a library";
  std::filesystem::create_directories(n.node + "/lib/firmware/nvidia/550.90.07");
  std::filesystem::create_directories(n.node + "/lib/firmware/nvidia/535.104.05");
  for (const char* f : {"550.90.07/gsp_ga10x.bin", "550.90.07/gsp_tu10x.bin", "550.90.07/README", "535.104.05/gsp_ga10x.bin"})
    std::ofstream(n.node + "/lib/firmware/nvidia/" + f) << "firmware";
  auto plugin = start_plugin(n, "version: v1\nflags: {plugin: {deviceListStrategy: cdi-cri}}\n", args);
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 1; }, 5s)) << plugin->output();
  std::ifstream in(specs + "/k8s.device-plugin.nvidia.com-gpu.json");
  const auto spec = nlohmann::json::parse(in);
  std::map<std::string, std::string> mounts;  // container path -> host path
  for (const auto& m : spec["containerEdits"]["mounts"]) mounts[m["containerPath"]] = m["hostPath"];
  const std::string d = "/usr/lib/x86_64-linux-gnu/";
  const std::map<std::string, std::string> want = {
      {d + "libcuda.so.1", "/host-driver" + d + "libcuda.so.550.90.07"},
      {d + "libnvidia-ml.so.1", "/host-driver" + d + "libnvidia-ml.so.1"},
      {d + "libnvidia-gpucomp.so.550.90.07", "/host-driver" + d + "libnvidia-gpucomp.so.550.90.07"},
      {d + "libnvidia-nscq.so.550.90.07", "/host-driver" + d + "libnvidia-nscq.so.550.90.07"},
      {d + "libnvidia-pkcs11.so.550.90.07", "/host-driver" + d + "libnvidia-pkcs11.so.550.90.07"},
      {"/lib/firmware/nvidia/550.90.07/gsp_ga10x.bin", "/host-driver/lib/firmware/nvidia/550.90.07/gsp_ga10x.bin"},
      {"/lib/firmware/nvidia/550.90.07/gsp_tu10x.bin", "/host-driver/lib/firmware/nvidia/550.90.07/gsp_tu10x.bin"}};
  for (const auto& [path, host] : mounts)
    if (!path.starts_with("/usr/bin/")) {
      EXPECT_EQ(want.count(path), 1u) << path << " is mounted";
    }
  for (const auto& [path, host] : want) {
    ASSERT_EQ(mounts.count(path), 1u) << path << " is not mounted: " << spec["containerEdits"]["mounts"].dump();
    EXPECT_EQ(mounts.at(path), host);
  }
  plugin->signal(SIGTERM);
  EXPECT_EQ(plugin->wait(5000), 0) << plugin->output();
}

// The numbers the simulated kernel gives: its proc/devices majors and the
// driver's MIG minor table, read as the test's own (never tessera's code).
std::map<std::string, uint32_t> sim_majors(const std::string& node) {
  std::ifstream in(node + "/proc/devices");
  std::map<std::string, uint32_t> out;
  std::string line;
  bool character = false;
  while (std::getline(in, line)) {
    if (line.ends_with("devices:")) character = line.starts_with("Character");
    std::istringstream words(line);
    uint32_t major = 0;
    std::string name;
    if (character && words >> major >> name) out[name] = major;
  }
  return out;
}

// A node as a driver install leaves it: an A100 in MIG (all-1g.10gb), dev/
// holding only what the driver makes (nvidia0, nvidiactl; stand-ins here),
// no capability node, no nvidia-uvm. Every device node the specs give each
// of the 7 MIG devices handed out, and nvidia-uvm once nvidia_uvm is
// loaded, either exists on the host or is a character device with the
// kernel's major and minor, which the runtime makes in the container.
TEST(PluginCommand, EveryNodeOfAMigDeviceIsOnTheHostOrDescribedAsACharacterDevice) {
  SimNode n("1");
  const std::string specs = n.dir.path() + "/cdi";
  n.mig_apply(n.dir.write("mig.yaml", kMigConfigs), "all-1g.10gb");
  std::filesystem::create_directories(n.node + "/dev");
  for (const char* made : {"nvidia0", "nvidiactl"}) std::ofstream(n.node + "/dev/" + made) << "";
  std::map<std::string, uint32_t> cap_minor;  // "/dev/nvidia-caps/nvidia-cap<N>" by the table
  {
    std::ifstream table(n.node + "/proc/driver/nvidia-caps/mig-minors");
    std::string what;
    uint32_t minor = 0;
    while (table >> what >> minor) cap_minor["/dev/nvidia-caps/nvidia-cap" + std::to_string(minor)] = minor;
    ASSERT_FALSE(cap_minor.empty());
  }
  auto check = [&](const std::string& dir, bool uvm_loaded) {
    const auto majors = sim_majors(n.node);
    ASSERT_EQ(majors.count("nvidia-uvm"), uvm_loaded ? 1u : 0u);
    // What each node must be: its major and minor by the kernel's rules.
    auto expected = [&](const std::string& path) -> std::optional<std::pair<uint32_t, uint32_t>> {
      if (path == "/dev/nvidiactl") return std::pair{majors.at("nvidia-frontend"), 255u};
      if (path == "/dev/nvidia0") return std::pair{majors.at("nvidia-frontend"), 0u};
      if (path == "/dev/nvidia-uvm") return std::pair{majors.at("nvidia-uvm"), 0u};
      if (path == "/dev/nvidia-uvm-tools") return std::pair{majors.at("nvidia-uvm"), 1u};
      if (cap_minor.count(path)) return std::pair{majors.at("nvidia-caps"), cap_minor.at(path)};
      return std::nullopt;
    };
    std::ifstream in(dir + "/k8s.device-plugin.nvidia.com-gpu.json");
    ASSERT_TRUE(in) << dir;
    const auto spec = nlohmann::json::parse(in);
    std::set<std::string> control;
    for (const auto& node : spec["containerEdits"].value("deviceNodes", nlohmann::json::array()))
      control.insert(node["path"].get<std::string>());
    EXPECT_EQ(control.count("/dev/nvidia-uvm"), uvm_loaded ? 1u : 0u) << spec["containerEdits"].dump();
    EXPECT_EQ(control.count("/dev/nvidia-uvm-tools"), uvm_loaded ? 1u : 0u);
    EXPECT_EQ(control.count("/dev/nvidiactl"), 1u);
    size_t migs = 0;
    for (const auto& d : spec["devices"]) {
      const std::string name = d["name"];
      if (!name.starts_with("MIG-")) continue;
      ++migs;
      size_t caps = 0;
      auto nodes = spec["containerEdits"].value("deviceNodes", nlohmann::json::array());
      for (const auto& node : d["containerEdits"]["deviceNodes"]) nodes.push_back(node);
      for (const auto& node : nodes) {
        const std::string path = node["path"];
        caps += path.starts_with("/dev/nvidia-caps/");
        const auto want = expected(path);
        ASSERT_TRUE(want) << name << " names " << path << ", which the driver does not make";
        const bool on_host = std::filesystem::exists(n.node + path);
        const bool described = node.value("type", "") == "c" && node.contains("major") && node.contains("minor");
        EXPECT_TRUE(on_host || described) << name << ": " << node.dump();
        if (described) {
          EXPECT_EQ(std::pair(node["major"].get<uint32_t>(), node["minor"].get<uint32_t>()), *want) << node.dump();
        }
      }
      EXPECT_EQ(caps, 2u) << name;
    }
    EXPECT_EQ(migs, 7u);
  };
  auto plugin = start_plugin(n, "version: v1\nflags: {migStrategy: mixed, plugin: {deviceListStrategy: cdi-cri}}\n",
                             cdi_args(n, specs));
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/mig-1g.10gb", [](const auto& d) { return d.size() == 7; }, 5s))
      << plugin->output();
  check(specs, false);
  EXPECT_TRUE(plugin->wait_for_output("nvidia_uvm not loaded", 2000)) << plugin->output();
  plugin->signal(SIGTERM);
  EXPECT_EQ(plugin->wait(5000), 0) << plugin->output();
  // nvidia_uvm loaded (no node made): the next start's specs describe it.
  n.sim({"modprobe", "nvidia-uvm"});
  const std::string again = n.dir.path() + "/cdi-again";
  plugin = start_plugin(n, "version: v1\nflags: {migStrategy: mixed, plugin: {deviceListStrategy: cdi-cri}}\n",
                        cdi_args(n, again));
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/mig-1g.10gb", [](const auto& d) { return d.size() == 7; }, 5s));
  check(again, true);
  EXPECT_FALSE(std::filesystem::exists(n.node + "/dev/nvidia-uvm"));
  plugin->signal(SIGTERM);
  EXPECT_EQ(plugin->wait(5000), 0) << plugin->output();
}

// `tessera sim reboot`: what a node is after a reboot. Processes end, MIG
// mode is off (drivers keep none across a boot), nvidia_uvm is not loaded,
// and the boot id is new.
TEST(SimCommand, ARebootLeavesTheNodeAsABootDoes) {
  SimNode n("1", {"--mig"});
  auto text = [](const std::string& path) {
    std::ifstream in(path);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  };
  const std::string boot_file = n.node + "/proc/sys/kernel/random/boot_id";
  const std::string boot = text(boot_file);
  ASSERT_EQ(boot.size(), 37u) << "not a UUID and a newline: " << boot;
  n.sim({"modprobe", "nvidia-uvm"});
  ASSERT_NE(text(n.node + "/proc/devices").find("nvidia-uvm"), std::string::npos);
  n.sim({"reboot"});
  EXPECT_NE(text(boot_file), boot);
  EXPECT_EQ(text(boot_file).size(), 37u);
  EXPECT_EQ(text(n.node + "/proc/devices").find("nvidia-uvm"), std::string::npos) << "nvidia_uvm survived the reboot";
  auto shown = run({kBin, "sim", "show", n.node});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  const auto gpu = nlohmann::json::parse(shown.out)["gpus"][0];
  EXPECT_FALSE(gpu["mig_current"].get<bool>()) << "MIG mode survived the reboot";
  EXPECT_TRUE(gpu["gpu_instances"].empty());
  auto bad = run({kBin, "sim", "reboot", n.dir.path() + "/no-node"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("is not a simulated node"), std::string::npos) << bad.err;
}

// The environment of a CDI device as the runtime applies it: the spec's
// edits, then the device's.
std::vector<std::string> cdi_env(const std::string& dir, const std::string& kind) {
  std::vector<std::string> env;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    if (f.path().extension() != ".json") continue;
    std::ifstream in(f.path());
    auto spec = nlohmann::json::parse(in);
    if (spec.value("kind", "") != kind) continue;
    for (const auto& e : spec["containerEdits"].value("env", nlohmann::json::array())) env.push_back(e);
  }
  return env;
}

// A replica's CDI name stays defined while its GPU is there: across a reload
// that lowers the replica count and across a restart with the lower count
// (the kubelet replays a restarting container's saved CDI names), with the
// GPU's nodes; a name whose count was never handed out is not invented. Every
// spec sets NVIDIA_VISIBLE_DEVICES=void, so the NVIDIA runtime, were it the
// default, would add no device of its own.
TEST(PluginCommand, CdiReplicaNamesOutliveAReloadThatLowersTheReplicas) {
  SimNode n;
  const std::string specs = n.dir.path() + "/cdi";
  auto shared = [](int replicas) {
    return "version: v1\nflags: {plugin: {deviceListStrategy: cdi-cri}}\nsharing:\n  timeSlicing:\n    resources: "
           "[{name: nvidia.com/gpu, replicas: " + std::to_string(replicas) + "}]\n";
  };
  auto args = cdi_args(n, specs);
  auto plugin = start_plugin(n, shared(4), args);
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 8; }, 5s)) << plugin->output();
  std::string fourth;
  for (const auto& d : n.kubelet.devices("nvidia.com/gpu"))
    if (d.id.ends_with("::3")) fourth = d.id;
  ASSERT_FALSE(fourth.empty());
  auto a = n.kubelet.allocate("nvidia.com/gpu", {fourth});
  ASSERT_TRUE(a) << a.error().message;
  ASSERT_EQ(a->cdi_devices.size(), 1u);
  const std::string name = a->cdi_devices[0];
  EXPECT_EQ(name, "k8s.device-plugin.nvidia.com/gpu=" + fourth);
  EXPECT_EQ(cdi_env(specs, "k8s.device-plugin.nvidia.com/gpu"), std::vector<std::string>{"NVIDIA_VISIBLE_DEVICES=void"});
  auto before = resolve_cdi(specs, name);
  ASSERT_TRUE(before);

  n.dir.write("dp.yaml", shared(2));
  plugin->signal(SIGHUP);
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 4; }, 5s)) << plugin->output();
  auto after = resolve_cdi(specs, name);
  ASSERT_TRUE(after) << name << " no longer resolves after the reload";
  EXPECT_EQ(after->device_nodes, before->device_nodes);
  EXPECT_EQ(after->mounts, before->mounts);
  plugin->signal(SIGTERM);
  ASSERT_EQ(plugin->wait(5000), 0) << plugin->output();

  // A restart with two replicas: the name is still there; one never handed
  // out with a higher count (::7) is not.
  plugin = start_plugin(n, shared(2), args);
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 4; }, 5s)) << plugin->output();
  EXPECT_TRUE(resolve_cdi(specs, name)) << name << " no longer resolves after a restart";
  EXPECT_FALSE(resolve_cdi(specs, "k8s.device-plugin.nvidia.com/gpu=" + fourth.substr(0, fourth.size() - 1) + "7"));
  plugin->signal(SIGTERM);
  EXPECT_EQ(plugin->wait(5000), 0) << plugin->output();
}

// Bad input: each a precise error before anything is served, nothing written.
TEST(PluginCommand, CdiBadInputIsRefusedBeforeAnythingIsServed) {
  SimNode n;
  const std::string config = n.dir.write("cdi.yaml", "version: v1\nflags: {plugin: {deviceListStrategy: cdi-cri}}\n");
  auto base = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv{kBin, "plugin", "--config-file", config, "--sim", n.node, "--kubelet-dir", n.kubelet_dir};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run(argv);
  };
  // A driver root without the driver's libraries.
  auto r = base({"--cdi-spec-dir", n.dir.path() + "/cdi", "--driver-root", n.dir.path() + "/empty-root"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("driver root '" + n.dir.path() + "/empty-root' holds neither libcuda.so.1 nor libnvidia-ml.so.1"),
            std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(n.dir.path() + "/cdi"));
  // A spec directory that cannot be made.
  auto args = cdi_args(n, n.dir.write("a-file", "x") + "/cdi");
  r = base(args);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("cannot create the CDI spec directory " + n.dir.path() + "/a-file/cdi"), std::string::npos) << r.err;
  // A vendor that is not a legal CDI name.
  args = cdi_args(n, n.dir.path() + "/cdi2");
  args.insert(args.end(), {"--cdi-vendor", "nvidia.com/x"});
  r = base(args);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--cdi-vendor: CDI vendor 'nvidia.com/x' has the character '/'"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(n.dir.path() + "/cdi2"));
  // A hook path the runtime could not run from the host's root.
  args = cdi_args(n, n.dir.path() + "/cdi3");
  args.insert(args.end(), {"--cdi-hook", "lib/tessera-cdi-hook"});
  r = base(args);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--cdi-hook: not an absolute path: lib/tessera-cdi-hook"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(n.dir.path() + "/cdi3"));
  EXPECT_TRUE(n.kubelet.registrations().empty());
}

// ---------------------------------------------------------------- the quota's driver backend
// With --memory-hook and cdi-cri, a shared replica's container also gets its
// own CDI device, defined before Allocate answers, whose createRuntime hook
// names the container's limits file (and a poststop hook clears it). The test is the runtime: it runs the
// hook as the spec says (its path, args and env; the host's proc and cgroup
// trees replaced by the test's own, as a host with cgroup v2 would have
// them), and the simulated driver then holds the container's cgroup to the
// replica's share. Without a CDI strategy no such device is handed out.
TEST(PluginCommand, TheMemoryHookRidesOnTheContainersOwnCdiDevice) {
  SimNode n("2", {"--driver-version", "615.71.09"});
  const std::string specs = n.dir.path() + "/cdi";
  auto args = cdi_args(n, specs);
  args.insert(args.end(), {"--memory-hook", TESSERA_MEMORY_HOOK});
  auto plugin = start_plugin(n,
                             "version: v1\nflags: {plugin: {deviceListStrategy: [envvar, cdi-cri]}}\n"
                             "sharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 4}]\n",
                             args);
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 8; }, 5s)) << plugin->output();
  const std::string id = n.kubelet.devices("nvidia.com/gpu")[0].id;
  auto a = n.kubelet.allocate("nvidia.com/gpu", {id});
  ASSERT_TRUE(a) << a.error().message;
  const std::vector<std::string> ids{id};
  const std::string key = sharing::ledger_key("nvidia.com/gpu", ids);
  ASSERT_EQ(a->cdi_devices.size(), 2u);
  EXPECT_EQ(a->cdi_devices[1], "tessera.dev/quota=" + key);
  // The spec that defines it, written before the answer.
  std::ifstream in(specs + "/tessera.dev-quota_" + key + ".json");
  ASSERT_TRUE(in) << "no spec for " << a->cdi_devices[1];
  const auto spec = nlohmann::json::parse(in);
  EXPECT_EQ(spec["kind"], "tessera.dev/quota");
  ASSERT_EQ(spec["devices"].size(), 1u);
  EXPECT_EQ(spec["devices"][0]["name"], key);
  const auto& hooks = spec["devices"][0]["containerEdits"]["hooks"];
  ASSERT_EQ(hooks.size(), 2u);
  EXPECT_EQ(hooks[0]["hookName"], "createRuntime");
  EXPECT_EQ(hooks[1]["hookName"], "poststop");
  EXPECT_EQ(hooks[0]["path"], TESSERA_MEMORY_HOOK);
  const auto hook_args = hooks[0]["args"].get<std::vector<std::string>>();
  const std::string limits = n.ledger_root + "/" + key + "/limits";
  ASSERT_GE(hook_args.size(), 3u);
  EXPECT_EQ(hook_args[1], "--limits");
  EXPECT_EQ(hook_args[2], limits);

  // The runtime runs it for the container: pid 4242 in its own cgroup.
  const std::string proc = n.dir.path() + "/proc", cgroups = n.dir.path() + "/cgroup";
  const std::string cgroup = cgroups + "/kubepods.slice/pod-a/cri-containerd-1.scope";
  std::filesystem::create_directories(proc + "/4242");
  std::filesystem::create_directories(cgroup);
  std::ofstream(cgroups + "/cgroup.controllers") << "cpu memory pids dmem\n";
  std::ofstream(proc + "/4242/cgroup") << "0::/kubepods.slice/pod-a/cri-containerd-1.scope\n";
  std::vector<std::string> argv{hooks[0]["path"].get<std::string>()};
  argv.insert(argv.end(), hook_args.begin() + 1, hook_args.end());
  argv.insert(argv.end(), {"--proc-root", proc, "--cgroup-root", cgroups});
  auto env = hooks[0].value("env", std::vector<std::string>{});
  env.push_back(testing::kLateSanitizerEnv);
  const auto hook = run(argv, R"({"ociVersion":"1.2.1","id":"1","status":"created","pid":4242,"bundle":"/b"})", env);
  ASSERT_EQ(hook.exit_code, 0) << hook.err;
  // The driver holds it: the inventory reads the limit back through NVML.
  auto inv = run({kBin, "inventory", "--sim", n.node, "--quota-ledger-root", n.ledger_root, "--json"});
  ASSERT_EQ(inv.exit_code, 0) << inv.err;
  const auto shares = nlohmann::json::parse(inv.out)["shares"];
  ASSERT_EQ(shares.size(), 1u) << inv.out;
  EXPECT_EQ(shares[0]["key"], key);
  EXPECT_EQ(shares[0]["devices"][0]["backend"], "driver") << inv.out;
  EXPECT_EQ(shares[0]["devices"][0]["cgroup"], cgroup);
  EXPECT_EQ(shares[0]["devices"][0]["quota_bytes"], std::stoull(a->envs.at("TESSERA_DEVICE_MEMORY_LIMIT_0")));
  // Allocated again (a new container of the same replica): the old record goes.
  a = n.kubelet.allocate("nvidia.com/gpu", {id});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_FALSE(std::filesystem::exists(n.ledger_root + "/" + key + "/driver-limits"));
  plugin->signal(SIGTERM);
  EXPECT_EQ(plugin->wait(5000), 0) << plugin->output();

  // envvar alone: the runtime would run no hook, so none is handed out.
  auto envvar = start_plugin(n, "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 4}]\n",
                             {"--memory-hook", TESSERA_MEMORY_HOOK});
  ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 8; }, 5s)) << envvar->output();
  a = n.kubelet.allocate("nvidia.com/gpu", {n.kubelet.devices("nvidia.com/gpu")[1].id});
  ASSERT_TRUE(a) << a.error().message;
  EXPECT_TRUE(a->cdi_devices.empty());
  EXPECT_TRUE(a->envs.contains("LD_PRELOAD")) << "the library holds it";
  envvar->signal(SIGTERM);
  EXPECT_EQ(envvar->wait(5000), 0) << envvar->output();
}

// The hook runs on the host, so it names NVML as the host sees it: a library
// the plugin loads from its mount of the driver root (--nvml-library under
// --container-driver-root) is the host's driver root's. One elsewhere is
// named as it is.
TEST(PluginCommand, TheMemoryHookNamesNvmlByItsHostPath) {
  SimNode n("1");
  const std::string specs = n.dir.path() + "/cdi";
  const std::string config =
      "version: v1\nflags: {plugin: {deviceListStrategy: cdi-cri}}\n"
      "sharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 2}]\n";
  for (const auto& [library, want] : std::vector<std::pair<std::string, std::string>>{
           {n.node + "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/host-driver/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"},
           {"/opt/nvml/libnvidia-ml.so.1", "/opt/nvml/libnvidia-ml.so.1"}}) {
    auto args = cdi_args(n, specs);
    args.insert(args.end(), {"--memory-hook", TESSERA_MEMORY_HOOK, "--nvml-library", library});
    auto plugin = start_plugin(n, config, args);
    ASSERT_TRUE(n.kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 2; }, 5s)) << plugin->output();
    const std::string id = n.kubelet.devices("nvidia.com/gpu")[0].id;
    auto a = n.kubelet.allocate("nvidia.com/gpu", {id});
    ASSERT_TRUE(a) << a.error().message;
    const std::string key = sharing::ledger_key("nvidia.com/gpu", std::vector<std::string>{id});
    std::ifstream in(specs + "/tessera.dev-quota_" + key + ".json");
    ASSERT_TRUE(in) << "no quota spec for " << key;
    const auto hooks = nlohmann::json::parse(in)["devices"][0]["containerEdits"]["hooks"];
    ASSERT_EQ(hooks.size(), 2u);
    for (const auto& hook : hooks) {
      const auto hook_args = hook["args"].get<std::vector<std::string>>();
      const auto nvml = std::find(hook_args.begin(), hook_args.end(), "--nvml");
      ASSERT_NE(nvml, hook_args.end()) << hook.dump();
      ASSERT_NE(nvml + 1, hook_args.end());
      EXPECT_EQ(nvml[1], want) << hook.dump();
    }
    plugin->signal(SIGTERM);
    EXPECT_EQ(plugin->wait(5000), 0) << plugin->output();
  }
}

}  // namespace
}  // namespace tessera
