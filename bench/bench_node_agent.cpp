// Label-driven MIG changes, measured on a simulated node of 8 A100-SXM4-80GB
// with one pod per device (or on some), through the real pieces: the MIG
// controller, NVML through the loader (simulated driver), the device plugin
// serving a fake kubelet, and pod-resources from that kubelet. Evicted pods
// leave at once (no grace period), so the times are tessera's own.
//
// For each change: how long from the label to mig.config.state=success, and
// to the kubelet seeing the new capacity; how many pods tessera evicted; how
// many NVIDIA's mig-manager would have disturbed (it stops every GPU client
// on the node for any change: every pod holding a GPU device).
// Usage: bench_node_agent [ROUNDS] (default 3)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/mig_controller.hpp"
#include "config/device_plugin.hpp"
#include "config/mig_parted.hpp"
#include "kubelet/fake_kubelet.hpp"
#include "nvml/session.hpp"
#include "plugin/node_inventory.hpp"
#include "plugin/plugin_manager.hpp"
#include "plugin/pod_resources.hpp"

namespace {

using namespace tessera;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const char* kConfigs = R"(version: v1
mig-configs:
  all-1g.10gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
  gpu0-two-3g:
    - devices: [0]
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
    - devices: [1, 2, 3, 4, 5, 6, 7]
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
  all-balanced:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
  all-3g.40gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 2}
)";

struct Api : agent::ClusterApi {
  sim::FakeKubelet* kubelet = nullptr;
  size_t evictions = 0;
  Result<void> set_label(const std::string&, const std::string&) override { return {}; }
  Result<agent::Eviction> evict(const agent::PodRef& pod) override {
    kubelet->remove_pod(pod.pod_namespace, pod.name);  // no grace period
    ++evictions;
    return agent::Eviction::evicted;
  }
  Result<void> event(const std::string&, const std::string&, const std::string&) override { return {}; }
};

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

size_t advertised(const sim::FakeKubelet& k) {
  size_t n = 0;
  for (const auto* r : {"nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb"})
    n += k.healthy_count(r);
  return n;
}

struct Row {
  std::string change;
  size_t pods = 0, evicted = 0, stop_all = 0;
  std::vector<double> to_success, to_capacity;
};

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 3;
  namespace fs = std::filesystem;
  config::Diagnostics diags;
  auto configs = config::parse_mig_parted(kConfigs, "bench.yaml", diags);
  auto plugin_config = config::parse_device_plugin_config("version: v1\nflags: {migStrategy: mixed}\n", "dp.yaml", diags);
  if (!configs || !plugin_config) return 1;
  std::vector<Row> rows;
  // (from, to, which devices hold a pod: slice starts, or all)
  struct Case {
    std::string from, to;
    std::set<uint32_t> held;  // placements with a pod; empty: every device
  };
  const std::vector<Case> cases{{"all-1g.10gb", "gpu0-two-3g", {}},
                                {"all-1g.10gb", "all-balanced", {}},
                                {"all-1g.10gb", "all-balanced", {0, 1, 2}},
                                {"all-1g.10gb", "all-3g.40gb", {0, 4}}};
  for (const auto& c : cases) {
    Row row;
    row.change = c.from + " -> " + c.to + (c.held.empty() ? " (pod on every device)" : " (pods on 1g at " + [&] {
      std::string s;
      for (auto p : c.held) s += (s.empty() ? "" : ",") + std::to_string(p);
      return s;
    }() + ")");
    for (int round = 0; round < rounds; ++round) {
      auto dir = fs::temp_directory_path() / ("tessera-bench-agent-" + std::to_string(getpid()));
      fs::remove_all(dir);
      fs::create_directories(dir / "kubelet");
      std::string node = (dir / "node").string();
      std::string create = std::string(TESSERA_BIN) + " sim create " + node + " --gpu A100-SXM4-80GB --count 8 >/dev/null";
      if (std::system(create.c_str()) != 0) return 1;
      ::setenv("TESSERA_SIM", node.c_str(), 1);
      auto lib = nvml::Library::open(TESSERA_SIM_LIBRARY);
      if (!lib) return 1;
      auto session = nvml::Session::open(std::move(*lib));
      // The simulator reads TESSERA_SIM at nvmlInit only; it is also --sim's variable,
      // which would steer the next round's `tessera sim create` to this node.
      ::unsetenv("TESSERA_SIM");
      if (!session) return 1;
      sim::FakeKubelet kubelet((dir / "kubelet").string());
      if (!kubelet.start()) return 1;
      const std::string pr_socket = (dir / "pod-resources.sock").string();
      if (!kubelet.serve_pod_resources(pr_socket)) return 1;
      auto inventory = plugin::read_node_inventory(*session);
      if (!inventory) return 1;
      plugin::PluginOptions opts;
      opts.kubelet_dir = (dir / "kubelet").string();
      opts.config = *plugin_config;
      opts.quota.inject = false;
      plugin::PluginManager manager(opts);
      if (!manager.start(*inventory)) return 1;
      Api api;
      api.kubelet = &kubelet;
      agent::NodeHooks hooks;
      hooks.pod_devices = [&] { return plugin::list_pod_resources(pr_socket, 2s); };
      hooks.advertised = [&] { return manager.state()->snapshot()->resources; };
      hooks.withdraw = [&](std::set<std::string> uuids) { manager.withdraw(std::move(uuids)); };
      hooks.layout_changed = [&]() -> Result<void> {
        auto inv = plugin::read_node_inventory(*session);
        if (!inv) return unexpected(inv.error());
        return manager.update_inventory(std::move(*inv));
      };
      agent::MigControllerOptions options;
      options.config_file = "bench.yaml";
      options.configs = *configs;
      options.poll_interval = 1ms;
      agent::MigController controller(*session, api, hooks, reconciler::JournalFile((dir / "state").string()), options);
      auto settle = [&] {
        while (true) {
          controller.step(Clock::now());
          if (controller.phase() == agent::Phase::idle) return;
          std::this_thread::sleep_for(1ms);
        }
      };
      controller.set_desired(c.from);
      settle();
      kubelet.wait_for("nvidia.com/mig-1g.10gb", [](const auto& d) { return d.size() == 56; }, 10s);
      // Pods on the chosen devices, allocated through the kubelet.
      size_t pods = 0;
      const auto served = manager.inventory();
      for (const auto& r : manager.state()->snapshot()->resources)
        for (const auto& d : r.devices) {
          const auto* gpu = served.find_gpu(d.gpu_uuid);
          uint32_t start = 0;
          if (gpu)
            for (const auto& m : gpu->mig_devices)
              if (m.uuid == d.physical_uuid) start = m.start;
          if (!c.held.empty() && !c.held.contains(start)) continue;
          if (!kubelet.allocate({"bench", "pod-" + std::to_string(pods), "main"}, r.name, {d.id})) {
            std::fprintf(stderr, "allocating %s failed\n", d.id.c_str());
            return 1;
          }
          ++pods;
        }
      size_t before = api.evictions;
      auto t0 = Clock::now();
      controller.set_desired(c.to);
      settle();
      auto t1 = Clock::now();
      const auto& last = controller.history().back();
      if (last.state != "success") {
        std::fprintf(stderr, "%s failed: %s\n", c.to.c_str(), last.reason.c_str());
        return 1;
      }
      // The new capacity as the kubelet sees it: every device of the new layout advertised Healthy.
      size_t want = 0;
      for (const auto& r : manager.state()->snapshot()->resources) want += r.devices.size();
      while (advertised(kubelet) != want && Clock::now() - t1 < 10s) std::this_thread::sleep_for(100us);
      auto t2 = Clock::now();
      row.pods = pods;
      row.evicted = api.evictions - before;
      row.stop_all = pods;  // every pod on the node holds a GPU device
      row.to_success.push_back(ms(t1 - t0));
      row.to_capacity.push_back(ms(t2 - t0));
      manager.stop();
      kubelet.stop();
      fs::remove_all(dir);
    }
    rows.push_back(row);
  }
  std::printf("Label change to new capacity, 8 x A100-SXM4-80GB (simulated driver), %d rounds, median\n\n", rounds);
  std::printf("| change | pods | evicted by tessera | disturbed by stopping every GPU client | label to success (ms) | label to kubelet capacity (ms) |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (auto& r : rows) {
    std::sort(r.to_success.begin(), r.to_success.end());
    std::sort(r.to_capacity.begin(), r.to_capacity.end());
    std::printf("| %s | %zu | %zu | %zu | %.1f | %.1f |\n", r.change.c_str(), r.pods, r.evicted, r.stop_all,
                r.to_success[r.to_success.size() / 2], r.to_capacity[r.to_capacity.size() / 2]);
  }
  return 0;
}
