// Device-plugin latencies through real unix sockets, with the kubelet peer:
//   Allocate p50/p99 at 1, 16 and 64 concurrent callers on an 8-GPU node
//   with 56 MIG devices; time from an injected XID to the Unhealthy update
//   seen on ListAndWatch; a soak of steady allocations with memory and open
//   files sampled. Prints tables. Usage: bench_plugin [--soak-seconds N] [--rate-per-minute R]
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "kubelet/fake_kubelet.hpp"
#include "plugin/plugin_manager.hpp"

namespace {

using namespace tessera;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

sharing::Inventory eight_gpus_56_migs() {
  sharing::Inventory inv;
  for (uint32_t g = 0; g < 8; ++g) {
    sharing::Gpu gpu{g, "GPU-" + std::to_string(1000 + g), "A100-SXM4-80GB", "", 80ull << 30, true, {}, {}};
    for (uint32_t m = 0; m < 7; ++m)
      gpu.mig_devices.push_back({"MIG-" + std::to_string(g) + "-" + std::to_string(m), "1g.10gb", 7 + m, 0, m,
                                 9728ull << 20, true});
    inv.gpus.push_back(gpu);
  }
  return inv;
}

config::DevicePluginConfig mixed() {
  config::Diagnostics d;
  return *config::parse_device_plugin_config("version: v1\nflags: {migStrategy: mixed}\n", "bench.yaml", d);
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

size_t rss_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoul(line.c_str() + 6, nullptr, 10);
  return 0;
}

size_t open_fds() {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  int soak_seconds = 60;
  int rate_per_minute = 1000;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--soak-seconds") soak_seconds = std::atoi(argv[i + 1]);
    else if (a == "--rate-per-minute") rate_per_minute = std::atoi(argv[i + 1]);
  }
  spdlog::set_level(spdlog::level::err);
  auto dir = std::filesystem::temp_directory_path() / ("tessera-bench-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  // Removed on every way out, after the kubelet and plugin (declared later) are gone.
  struct RemoveOnExit {
    std::filesystem::path path;
    ~RemoveOnExit() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_dir{dir};
  sim::FakeKubelet kubelet(dir.string());
  if (!kubelet.start()) return 1;
  plugin::PluginOptions opts;
  opts.kubelet_dir = dir.string();
  opts.config = mixed();
  opts.health.recovery = 1h;
  plugin::PluginManager manager(opts);
  if (!manager.start(eight_gpus_56_migs())) return 1;
  const std::string res = "nvidia.com/mig-1g.10gb";
  if (!kubelet.wait_for(res, [](const auto& d) { return d.size() == 56; }, 10s)) {
    std::fprintf(stderr, "plugin did not advertise 56 devices\n");
    return 1;
  }

  std::printf("Allocate latency (%s, 56 devices, one device per request, unix socket gRPC)\n", res.c_str());
  std::printf("%-12s %10s %10s %10s %12s\n", "concurrency", "requests", "p50_us", "p99_us", "throughput/s");
  for (int concurrency : {1, 16, 64}) {
    const int per_thread = concurrency == 1 ? 2000 : 4000 / concurrency + 50;
    std::vector<std::vector<double>> lat(static_cast<size_t>(concurrency));
    std::vector<std::thread> threads;
    auto t0 = Clock::now();
    for (int t = 0; t < concurrency; ++t)
      threads.emplace_back([&, t] {
        for (int i = 0; i < per_thread; ++i) {
          std::string id = "MIG-" + std::to_string((t + i) % 8) + "-" + std::to_string(i % 7);
          auto s = Clock::now();
          auto a = kubelet.allocate(res, {id});
          if (!a) std::abort();
          lat[static_cast<size_t>(t)].push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
        }
      });
    for (auto& th : threads) th.join();
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<double> all;
    for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
    std::printf("%-12d %10zu %10.0f %10.0f %12.0f\n", concurrency, all.size(), percentile(all, 0.5),
                percentile(all, 0.99), static_cast<double>(all.size()) / secs);
  }

  std::printf("\nXID 79 to Unhealthy on ListAndWatch (GPU with 7 MIG devices)\n");
  std::printf("%-6s %12s\n", "trial", "latency_us");
  std::vector<double> xid;
  for (int trial = 0; trial < 20; ++trial) {
    auto gpu = "GPU-" + std::to_string(1000 + trial % 8);
    auto mig_prefix = "MIG-" + std::to_string(trial % 8) + "-";
    auto s = Clock::now();
    manager.on_event({sharing::HealthEvent::Kind::xid, 79, gpu, std::nullopt, std::nullopt, sharing::Clock::now()});
    bool ok = kubelet.wait_for(res, [&](const auto& d) {
      return std::count_if(d.begin(), d.end(), [&](const auto& x) {
               return x.id.rfind(mig_prefix, 0) == 0 && x.health == "Unhealthy";
             }) == 7;
    }, 5s);
    double us = std::chrono::duration<double, std::micro>(Clock::now() - s).count();
    if (!ok) us = -1;
    xid.push_back(us);
    manager.tick(sharing::Clock::now() + 2h);  // recover before the next trial
    kubelet.wait_for(res, [](const auto& d) {
      return std::all_of(d.begin(), d.end(), [](const auto& x) { return x.health == "Healthy"; });
    }, 5s);
    if (trial < 5) std::printf("%-6d %12.0f\n", trial, us);
  }
  std::printf("p50 %.0f us, p99 %.0f us over %zu trials\n", percentile(xid, 0.5), percentile(xid, 0.99), xid.size());

  std::printf("\nSoak: %d allocations a minute for %d s\n", rate_per_minute, soak_seconds);
  std::printf("%-8s %12s %10s %8s\n", "elapsed", "allocations", "rss_kib", "fds");
  auto start = Clock::now();
  auto interval = std::chrono::microseconds(60'000'000 / std::max(rate_per_minute, 1));
  size_t done = 0;
  auto next_report = start;
  size_t rss_first = 0, fds_first = 0, rss_last = 0, fds_last = 0;
  while (Clock::now() - start < std::chrono::seconds(soak_seconds)) {
    std::string id = "MIG-" + std::to_string(done % 8) + "-" + std::to_string(done % 7);
    if (!kubelet.allocate(res, {id})) return 1;
    ++done;
    if (Clock::now() >= next_report) {
      rss_last = rss_kib();
      fds_last = open_fds();
      if (!rss_first) { rss_first = rss_last; fds_first = fds_last; }
      std::printf("%-8.0f %12zu %10zu %8zu\n", std::chrono::duration<double>(Clock::now() - start).count(), done,
                  rss_last, fds_last);
      std::fflush(stdout);
      next_report += std::chrono::seconds(std::max(soak_seconds / 10, 1));
    }
    std::this_thread::sleep_until(start + interval * static_cast<long>(done));
  }
  std::printf("rss %zu -> %zu KiB, open files %zu -> %zu\n", rss_first, rss_kib(), fds_first, open_fds());
  manager.stop();
  kubelet.stop();
  return 0;
}
