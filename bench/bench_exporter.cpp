// tessera exporter's costs on simulated nodes, as a table (not pass/fail):
//   - the running `tessera exporter` process: scrape latency (p50/p99 over
//     HTTP on loopback), its CPU per scrape (from /proc, the server alone),
//     its RSS and peak RSS after the scrapes;
//   - the sampler in this process (the same library, same NVML simulator):
//     CPU per interval (thread CPU time of one sample, the GPM window's sleep
//     excluded) and wall time per sample.
// Two nodes: 8 H100 x 7 MIG devices (56 MIG devices); 8 whole H100s
// time-sliced 8 ways with the 64 replicas held by 64 containers, each with a
// quota ledger (pods placed through `tessera plugin` and the kubelet peer).
// Targets (docs/metrics.md): under 2 ms per scrape, under 20 MiB RSS.
//   Usage: bench_exporter [--scrapes N]
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child.hpp"
#include "cuda_quota/ledger.hpp"
#include "exporter/sampler.hpp"
#include "kubelet/fake_kubelet.hpp"
#include "nvml/library.hpp"
#include "nvml/session.hpp"

extern char** environ;

namespace {

using namespace tessera;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const std::string kBin = TESSERA_BIN;


using tessera::bench::Child;
using tessera::bench::run;

double cpu_seconds(pid_t pid) {  // utime + stime
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  std::istringstream fields(text.substr(text.rfind(')') + 2));
  std::string f;
  double ticks = 0;
  for (int i = 3; fields >> f && i <= 15; ++i)
    if (i == 14 || i == 15) ticks += std::stod(f);
  return ticks / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double status_mib(pid_t pid, const std::string& key) {  // VmRSS, VmHWM
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(key + ":")) return std::stod(line.substr(key.size() + 1)) / 1024.0;
  return -1;
}

double thread_cpu() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

struct Row {
  std::string node;
  size_t series = 0;
  size_t bytes = 0;
  double p50_ms = 0, p99_ms = 0, cpu_ms_per_scrape = 0, rss_mib = 0, hwm_mib = 0, anon_mib = 0;
  double sample_cpu_ms = 0, sample_wall_ms = 0;
  double changes_rss_mib = -1;  // after the MIG layout changes (the MIG node only)
};

// The sampler in process: mean thread CPU and wall time of `n` samples.
void measure_sampler(const std::string& node, const std::string& pod_resources, const std::string& ledger_root,
                     Row& row) {
  setenv("TESSERA_SIM", node.c_str(), 1);
  auto lib = nvml::Library::open(TESSERA_SIM_LIBRARY);
  if (!lib) return;
  auto session = nvml::Session::open(*lib);
  // The simulator reads TESSERA_SIM at nvmlInit only; it is also --sim's variable,
  // which would steer the next `tessera sim create` to this node.
  unsetenv("TESSERA_SIM");
  if (!session) return;
  exporter::SamplerOptions o;
  o.interval = 10s;
  o.gpm_window = 100ms;
  o.pod_resources_socket = pod_resources;
  o.ledger_root = ledger_root;
  o.hostname = "bench";
  exporter::Sampler sampler(std::move(*session), o);
  sampler.sample_once();  // first: identities, GPM buffers
  const int n = 10;
  double cpu = 0, wall = 0;
  for (int i = 0; i < n; ++i) {
    double c0 = thread_cpu();
    auto t0 = Clock::now();
    sampler.sample_once();
    wall += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    cpu += (thread_cpu() - c0) * 1000;
  }
  row.sample_cpu_ms = cpu / n;
  row.sample_wall_ms = wall / n;
}

// RSS after `changes` MIG layout changes, each seen by the exporter (the
// number of MIG series moves), with an Xid on a MIG device of every layout:
// what it holds per device (names, Xid counts, GPM buffers) must go with the
// devices, so RSS stays flat.
void measure_changes(const std::string& dir, const std::string& node, int changes, Row& row) {
  std::ofstream(dir + "/alternate.yaml") << "version: v1\nmig-configs:\n"
                                            "  all-1g:\n    - devices: all\n      mig-enabled: true\n"
                                            "      mig-devices: {\"1g.10gb\": 7}\n"
                                            "  all-3g:\n    - devices: all\n      mig-enabled: true\n"
                                            "      mig-devices: {\"3g.40gb\": 2}\n";
  Child exporter({kBin, "exporter", "--sim", node, "--listen", "127.0.0.1:0", "--interval", "0.3", "--gpm-window",
                  "0.1", "--hostname", "bench", "--pod-resources", ""},
                 dir + "/exporter-changes.log");
  if (!exporter.wait_for("/metrics (every", 20000)) return;
  std::smatch m;
  auto out = exporter.output();
  if (!std::regex_search(out, m, std::regex("127.0.0.1:([0-9]+)/metrics"))) return;
  httplib::Client client("127.0.0.1", std::stoi(m[1]));
  auto mig_series = [&] {
    auto r = client.Get("/metrics");
    if (!r) return size_t{0};
    size_t n = 0;
    std::istringstream lines(r->body);
    for (std::string line; std::getline(lines, line);)
      n += line.starts_with("DCGM_FI_DEV_FB_USED{") && line.find("GPU_I_ID=\"") != std::string::npos;
    return n;
  };
  for (int i = 0; i < changes; ++i) {
    const bool small = i % 2 == 1;
    run({kBin, "mig", "apply", "-f", dir + "/alternate.yaml", "-c", small ? "all-1g" : "all-3g", "--sim", node});
    run({kBin, "sim", "event", node, "--gpu", "0", "--gpu-instance", small ? "7" : "1", "--xid", "31"});
    const size_t want = small ? 56 : 16;
    for (int t = 0; t < 100 && mig_series() != want; ++t) std::this_thread::sleep_for(50ms);
  }
  for (int i = 0; i < 20; ++i) client.Get("/metrics");
  row.changes_rss_mib = status_mib(exporter.pid, "VmRSS");
}

// The running exporter: latency and CPU per scrape, RSS.
void measure_process(const std::string& dir, const std::string& node, const std::vector<std::string>& extra,
                     int scrapes, Row& row) {
  std::vector<std::string> argv{kBin, "exporter", "--sim", node, "--listen", "127.0.0.1:0", "--interval", "10",
                                "--gpm-window", "0.1", "--hostname", "bench"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  Child exporter(argv, dir + "/exporter.log");
  if (!exporter.wait_for("/metrics (every", 20000)) {
    std::fprintf(stderr, "exporter did not start:\n%s\n", exporter.output().c_str());
    return;
  }
  std::smatch m;
  auto out = exporter.output();
  if (!std::regex_search(out, m, std::regex("127.0.0.1:([0-9]+)/metrics"))) return;
  httplib::Client client("127.0.0.1", std::stoi(m[1]));
  client.set_keep_alive(true);
  std::string body;
  for (int i = 0; i < 20; ++i)  // warm-up
    if (auto r = client.Get("/metrics")) body = r->body;
  std::vector<double> ms;
  double cpu0 = cpu_seconds(exporter.pid);
  for (int i = 0; i < scrapes; ++i) {
    auto t0 = Clock::now();
    auto r = client.Get("/metrics");
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    if (!r || r->status != 200) {
      std::fprintf(stderr, "scrape %d failed\n", i);
      return;
    }
  }
  double cpu1 = cpu_seconds(exporter.pid);
  row.bytes = body.size();
  row.series = static_cast<size_t>(std::count(body.begin(), body.end(), '\n')) -
               2 * static_cast<size_t>(std::count(body.begin(), body.end(), '#') / 2);
  row.p50_ms = percentile(ms, 0.5);
  row.p99_ms = percentile(ms, 0.99);
  row.cpu_ms_per_scrape = (cpu1 - cpu0) * 1000 / scrapes;
  row.rss_mib = status_mib(exporter.pid, "VmRSS");
  row.hwm_mib = status_mib(exporter.pid, "VmHWM");
  row.anon_mib = status_mib(exporter.pid, "RssAnon");  // the rest is mapped files: libraries, shared
}

}  // namespace

int main(int argc, char** argv) {
  int scrapes = 1000, changes = 100;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--scrapes") scrapes = std::atoi(argv[i + 1]);
    if (std::string(argv[i]) == "--changes") changes = std::atoi(argv[i + 1]);
  }
  char tmpl[] = "/tmp/bench-exporter-XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  std::vector<Row> rows;

  {  // 8 x 7 MIG devices
    Row row{"8 H100 x 7 MIG (56 MIG devices)"};
    const std::string node = dir + "/mig";
    run({kBin, "sim", "create", node, "--gpu", "H100-80GB", "--count", "8"});
    std::ofstream(dir + "/mig.yaml") << "version: v1\nmig-configs:\n  all-1g:\n    - devices: all\n"
                                        "      mig-enabled: true\n      mig-devices: {\"1g.10gb\": 7}\n";
    run({kBin, "mig", "apply", "-f", dir + "/mig.yaml", "-c", "all-1g", "--sim", node});
    measure_process(dir, node, {"--pod-resources", ""}, scrapes, row);
    measure_sampler(node, "", "", row);
    measure_changes(dir, node, changes, row);
    rows.push_back(row);
  }
  {  // 64 time-sliced replicas in 64 containers, each with a ledger
    Row row{"8 H100 x 8 time-sliced (64 replicas, 64 pods)"};
    const std::string node = dir + "/ts", kubelet_dir = dir + "/device-plugins", ledgers = dir + "/ledgers";
    const std::string pod_resources = dir + "/pod-resources.sock";
    run({kBin, "sim", "create", node, "--gpu", "H100-80GB", "--count", "8"});
    std::filesystem::create_directories(kubelet_dir);
    sim::FakeKubelet kubelet(kubelet_dir);
    if (!kubelet.start() || !kubelet.serve_pod_resources(pod_resources)) {
      std::fprintf(stderr, "the kubelet peer did not start\n");
      return 1;
    }
    std::ofstream(dir + "/ts.yaml")
        << "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 8}]\n";
    std::vector<std::unique_ptr<quota::Ledger>> held;
    {
      Child plugin({kBin, "plugin", "--config", dir + "/ts.yaml", "--sim", node, "--kubelet-dir", kubelet_dir,
                    "--log-level", "info", "--quota-library-dir", dir + "/lib", "--quota-ledger-root", ledgers},
                   dir + "/plugin.log");
      if (!plugin.wait_for("ready", 15000) ||
          !kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return d.size() == 64; }, 10s)) {
        std::fprintf(stderr, "plugin did not advertise 64 replicas\n");
        return 1;
      }
      auto devices = kubelet.devices("nvidia.com/gpu");
      for (size_t i = 0; i < devices.size(); ++i) {
        auto a = kubelet.allocate({"bench", "pod-" + std::to_string(i), "main"}, "nvidia.com/gpu", {devices[i].id});
        if (!a) {
          std::fprintf(stderr, "allocate %s: %s\n", devices[i].id.c_str(), a.error().message.c_str());
          return 1;
        }
        auto ledger = std::make_unique<quota::Ledger>();
        const std::string key = a->envs.at("TESSERA_LEDGER_KEY");
        quota::DeviceQuota d{a->envs.at("TESSERA_DEVICE_UUID_0"),
                             std::stoull(a->envs.at("TESSERA_DEVICE_MEMORY_LIMIT_0")), 80ULL << 30};
        const std::string ledger_dir = ledgers + "/" + key;
        quota::OpenOptions options{ledger_dir, key, {&d, 1}};
        if (!ledger->open(options)) {
          std::fprintf(stderr, "%s\n", ledger->message());
          return 1;
        }
        (void)ledger->charge(0, (i + 1) << 20);
        held.push_back(std::move(ledger));
      }
    }
    measure_process(dir, node, {"--pod-resources", pod_resources, "--ledger-root", ledgers}, scrapes, row);
    measure_sampler(node, pod_resources, ledgers, row);
    rows.push_back(row);
    kubelet.stop();
  }

  std::printf("tessera exporter, %d scrapes per node over loopback HTTP (keep-alive), simulated NVML\n\n", scrapes);
  std::printf("%-46s %7s %8s %9s %9s %12s %8s %9s %9s %14s %14s %14s\n", "node", "series", "bytes", "p50 ms", "p99 ms",
              "CPU ms/scr", "RSS MiB", "anon MiB", "peak MiB", "sample CPU ms", "sample wall ms", "RSS/changes");
  for (const auto& r : rows) {
    char changed[32] = "-";
    if (r.changes_rss_mib >= 0) std::snprintf(changed, sizeof changed, "%.1f", r.changes_rss_mib);
    std::printf("%-46s %7zu %8zu %9.3f %9.3f %12.4f %8.1f %9.1f %9.1f %14.2f %14.2f %14s\n", r.node.c_str(), r.series,
                r.bytes, r.p50_ms, r.p99_ms, r.cpu_ms_per_scrape, r.rss_mib, r.anon_mib, r.hwm_mib, r.sample_cpu_ms,
                r.sample_wall_ms, changed);
  }
  std::printf("\nRSS MiB is after the scrapes; RSS/changes after %d MIG layout changes (all-1g and all-3g in turn,\n"
              "each seen in /metrics, an Xid on a MIG device of each layout) in an exporter sampling every 0.3 s.\n",
              changes);
  std::printf("\nTargets: under 2 ms per scrape, under 20 MiB RSS. CPU per scrape is the exporter process's\n"
              "utime+stime over the scrapes; sample CPU is one sample's thread CPU time in this process (the\n"
              "simulated driver's work included, the 0.1 s GPM window's sleep not).\n");
  std::filesystem::remove_all(dir);
  return 0;
}
