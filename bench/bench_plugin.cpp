// Device-plugin latencies through real unix sockets, with the kubelet peer:
//   Allocate p50/p99 at 1, 16 and 64 concurrent callers on an 8-GPU node
//   with 56 MIG devices, next to the floor measured in the same run: a bare
//   gRPC unary call (empty request, empty reply) over the same kind of unix
//   socket, server and client; time from an XID injected into a simulated
//   node to the Unhealthy update seen on ListAndWatch, through the driver's
//   event path (NVML event wait, health, ListAndWatch); a soak of steady
//   allocations with memory and open files sampled. Prints tables; exits
//   non-zero when any request or trial fails.
//   Usage: bench_plugin [--soak-seconds N] [--rate-per-minute R]
#include <dlfcn.h>
#include <grpcpp/grpcpp.h>
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
#include "plugin/event_watch.hpp"
#include "plugin/node_inventory.hpp"
#include "plugin/plugin_manager.hpp"
#include "plugin/proto/deviceplugin_v1beta1.grpc.pb.h"

namespace {

using namespace tessera;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

sharing::Inventory eight_gpus_56_migs() {
  sharing::Inventory inv;
  for (uint32_t g = 0; g < 8; ++g) {
    sharing::Gpu gpu{g, "GPU-" + std::to_string(1000 + g), "A100-SXM4-80GB", "", 80ull << 30, true, {}, {}, 0, g};
    for (uint32_t m = 0; m < 7; ++m)
      gpu.mig_devices.push_back({"MIG-" + std::to_string(g) + "-" + std::to_string(m), "1g.10gb", 7 + m, 0, m,
                                 9728ull << 20, true, m});
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

// The floor: a server whose one method answers an empty message with an empty
// message, built like the plugin's (ServerBuilder, unix socket), and a client
// built like the kubelet peer's (one shared stub, a deadline per call).
class BareService final : public v1beta1::DevicePlugin::Service {
  grpc::Status GetDevicePluginOptions(grpc::ServerContext*, const v1beta1::Empty*,
                                      v1beta1::DevicePluginOptions*) override {
    return grpc::Status::OK;
  }
};

struct Floor {
  BareService service;
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub;

  explicit Floor(const std::string& socket) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + socket, grpc::InsecureServerCredentials());
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    stub = v1beta1::DevicePlugin::NewStub(
        grpc::CreateCustomChannel("unix://" + socket, grpc::InsecureChannelCredentials(), args));
  }
  ~Floor() {
    if (server) server->Shutdown(std::chrono::system_clock::now() + 1s);
  }
  bool call() const {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 5s);
    v1beta1::DevicePluginOptions out;
    return stub->GetDevicePluginOptions(&ctx, v1beta1::Empty{}, &out).ok();
  }
};

struct Latency {
  double p50 = 0, p99 = 0, per_second = 0;
  size_t count = 0;
  bool ok = true;
  std::vector<double> samples;  // microseconds
  double seconds = 0;
};

// Several rounds as one: percentiles over every sample.
Latency merge(const std::vector<Latency>& rounds) {
  Latency out;
  for (const auto& r : rounds) {
    out.samples.insert(out.samples.end(), r.samples.begin(), r.samples.end());
    out.seconds += r.seconds;
    out.ok = out.ok && r.ok;
  }
  out.count = out.samples.size();
  out.p50 = percentile(out.samples, 0.5);
  out.p99 = percentile(out.samples, 0.99);
  out.per_second = static_cast<double>(out.count) / out.seconds;
  return out;
}

// `concurrency` threads each making `per_thread` calls of `one(thread, i)`.
template <class Call>
Latency measure(int concurrency, int per_thread, const Call& one) {
  std::vector<std::vector<double>> lat(static_cast<size_t>(concurrency));
  std::atomic<bool> ok{true};
  std::vector<std::thread> threads;
  auto t0 = Clock::now();
  for (int t = 0; t < concurrency; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < per_thread; ++i) {
        auto s = Clock::now();
        if (!one(t, i)) ok = false;
        lat[static_cast<size_t>(t)].push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
      }
    });
  for (auto& th : threads) th.join();
  double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  Latency out{percentile(all, 0.5), percentile(all, 0.99), static_cast<double>(all.size()) / secs, all.size(),
              ok.load(), {}, secs};
  out.samples = std::move(all);
  return out;
}

// The simulator's control entry point (tesseraSimControl), for making a node
// and injecting events the way `tessera sim` does.
struct SimControl {
  void* handle = dlopen(TESSERA_SIM_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  int (*control)(const char*, char**) = nullptr;
  void (*release)(char*) = nullptr;
  SimControl() {
    if (!handle) return;
    control = reinterpret_cast<int (*)(const char*, char**)>(dlsym(handle, "tesseraSimControl"));
    release = reinterpret_cast<void (*)(char*)>(dlsym(handle, "tesseraSimFree"));
  }
  ~SimControl() {
    if (handle) dlclose(handle);
  }
  bool operator()(const std::string& request) const {
    if (!control || !release) return false;
    char* reply = nullptr;
    int rc = control(request.c_str(), &reply);
    if (rc != 0) std::fprintf(stderr, "simulator: %s\n", reply ? reply : "?");
    release(reply);
    return rc == 0;
  }
};

// XID 79 injected into a simulated 8-GPU node, seen as Unhealthy on
// ListAndWatch: the simulated driver's event queue, nvmlEventSetWait in the
// plugin's event watch, the health tracker, the device state, the gRPC stream.
// Returns false when a trial fails.
bool xid_through_the_driver(const std::filesystem::path& dir) {
  std::string node = (dir / "node").string();
  SimControl sim;
  if (!sim(R"({"op": "create", "dir": ")" + node + R"(", "gpu": "A100-SXM4-80GB", "count": 8})")) return false;
  setenv("TESSERA_SIM", node.c_str(), 1);
  auto lib = nvml::Library::open(TESSERA_SIM_LIBRARY);
  if (!lib) return false;
  auto session = nvml::Session::open(std::move(*lib));
  if (!session) return false;
  auto inventory = plugin::read_node_inventory(*session);
  if (!inventory) return false;
  auto kubelet_dir = dir / "xid-kubelet";
  std::filesystem::create_directories(kubelet_dir);
  sim::FakeKubelet kubelet(kubelet_dir.string());
  if (!kubelet.start()) return false;
  plugin::PluginOptions opts;
  opts.kubelet_dir = kubelet_dir.string();
  config::Diagnostics d;
  opts.config = *config::parse_device_plugin_config(
      "version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 4}]\n", "bench.yaml", d);
  opts.health.recovery = 1h;
  opts.gpu_answers = plugin::nvml_gpu_probe(*session);
  plugin::PluginManager manager(opts);
  if (!manager.start(*inventory)) return false;
  std::vector<uint32_t> gpus;
  for (const auto& g : inventory->gpus) gpus.push_back(g.index);
  plugin::EventSinks sinks;
  std::atomic<int64_t> sink_seen_ns{0};  // when the plugin's event watch handed the XID on
  sinks.health = [&](const sharing::HealthEvent& e) {
    sink_seen_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
    manager.on_event(e);
  };
  auto watch = plugin::EventWatch::start(*session, gpus, std::move(sinks));
  if (!watch) return false;
  const std::string res = "nvidia.com/gpu";
  if (!kubelet.wait_for(res, [](const auto& devs) { return devs.size() == 32; }, 10s)) return false;

  // The floor: a bare waiter on the same simulated driver (its own event set,
  // nvmlEventSetWait in a loop), which sees the XID with no plugin between.
  auto raw_set = session->create_event_set();
  if (!raw_set) return false;
  for (const auto& g : inventory->gpus) {
    auto dev = session->device(g.index);
    if (!dev || !raw_set->add(*dev, nvml::abi::nvmlEventTypeXidCriticalError)) return false;
  }
  std::atomic<bool> stop_raw{false};
  std::atomic<int64_t> raw_seen_ns{0};
  std::thread raw([&] {
    while (!stop_raw) {
      auto ev = raw_set->wait(100);
      if (ev && ev->type == nvml::abi::nvmlEventTypeXidCriticalError)
        raw_seen_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
    }
  });
  struct JoinRaw {
    std::atomic<bool>& stop;
    std::thread& t;
    ~JoinRaw() {
      stop = true;
      t.join();
    }
  } join_raw{stop_raw, raw};

  std::printf("\nXID 79 injected into the simulated node to Unhealthy on ListAndWatch (8 GPUs x 4 replicas),\n"
              "next to a bare nvmlEventSetWait loop on the same driver; watch = when the plugin's event watch\n"
              "handed the XID to the health tracker\n");
  std::printf("%-6s %12s %12s %12s\n", "trial", "bare_us", "watch_us", "plugin_us");
  std::vector<double> xid, floor_us, watch_us;
  bool all_ok = true;
  for (int trial = 0; trial < 20; ++trial) {
    uint32_t gpu = static_cast<uint32_t>(trial % 8);
    std::string uuid = inventory->gpus[gpu].uuid;
    raw_seen_ns = 0;
    sink_seen_ns = 0;
    auto s = Clock::now();
    if (!sim(R"({"op": "event", "dir": ")" + node + R"(", "gpu": )" + std::to_string(gpu) +
             R"(, "kind": "xid", "xid": 79})"))
      return false;
    bool ok = kubelet.wait_for(res, [&](const auto& devs) {
      return std::count_if(devs.begin(), devs.end(), [&](const auto& x) {
               return x.id.rfind(uuid, 0) == 0 && x.health == "Unhealthy";
             }) == 4;
    }, 5s);
    double us = std::chrono::duration<double, std::micro>(Clock::now() - s).count();
    if (!ok) {
      std::printf("%-6d %12s\n", trial, "FAILED");
      all_ok = false;
      continue;
    }
    xid.push_back(us);
    for (int i = 0; i < 100 && raw_seen_ns == 0; ++i) std::this_thread::sleep_for(10ms);
    const int64_t start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(s.time_since_epoch()).count();
    double bare_us = raw_seen_ns == 0 ? -1 : static_cast<double>(raw_seen_ns - start_ns) / 1000.0;
    double sink_us = static_cast<double>(sink_seen_ns - start_ns) / 1000.0;
    watch_us.push_back(sink_us);
    if (bare_us < 0) {
      std::printf("%-6d %12s\n", trial, "BARE-MISSED");
      all_ok = false;
    } else {
      floor_us.push_back(bare_us);
    }
    manager.tick(sharing::Clock::now() + 2h);  // quiet long enough, and the GPU answers: recovered
    if (!kubelet.wait_for(res, [](const auto& devs) {
          return std::all_of(devs.begin(), devs.end(), [](const auto& x) { return x.health == "Healthy"; });
        }, 5s)) {
      std::printf("%-6d %12s\n", trial, "NO-RECOVERY");
      all_ok = false;
    }
    if (trial < 5) std::printf("%-6d %12.0f %12.0f %12.0f\n", trial, bare_us, sink_us, us);
  }
  if (!xid.empty() && !floor_us.empty())
    std::printf("p50: bare %.0f us, watch %.0f us, plugin %.0f us (ratio to bare %.2f); p99: bare %.0f, watch %.0f, "
                "plugin %.0f us; %zu trials\n",
                percentile(floor_us, 0.5), percentile(watch_us, 0.5), percentile(xid, 0.5),
                percentile(xid, 0.5) / percentile(floor_us, 0.5), percentile(floor_us, 0.99),
                percentile(watch_us, 0.99), percentile(xid, 0.99), xid.size());
  watch->reset();
  manager.stop();
  kubelet.stop();
  return all_ok && xid.size() == 20;
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

  Floor floor((dir / "bare.sock").string());
  if (!floor.call()) {
    std::fprintf(stderr, "the bare gRPC server does not answer\n");
    return 1;
  }
  std::printf("Allocate (%s, 56 devices, one device per request) vs a bare gRPC unary call, unix sockets\n",
              res.c_str());
  std::printf("%-12s %9s %10s %10s %10s %10s %9s %9s %12s\n", "concurrency", "requests", "bare_p50", "bare_p99",
              "alloc_p50", "alloc_p99", "p50_ratio", "p99_ratio", "allocs/s");
  bool failed = false;
  auto bare_call = [&](int, int) { return floor.call(); };
  auto alloc_call = [&](int t, int i) {
    std::string id = "MIG-" + std::to_string((t + i) % 8) + "-" + std::to_string(i % 7);
    return kubelet.allocate(res, {id}).has_value();
  };
  for (int concurrency : {1, 16, 64}) {
    // Warm both paths, then alternate rounds so drift in the machine's state
    // (frequency, other load) falls on both alike.
    measure(concurrency, 50, bare_call);
    measure(concurrency, 50, alloc_call);
    const int rounds = 4;
    const int per_thread = (concurrency == 1 ? 4000 : 8000 / concurrency + 50) / rounds;
    std::vector<Latency> bares, allocs;
    for (int r = 0; r < rounds; ++r) {
      bares.push_back(measure(concurrency, per_thread, bare_call));
      allocs.push_back(measure(concurrency, per_thread, alloc_call));
    }
    auto bare = merge(bares), alloc = merge(allocs);
    failed |= !bare.ok || !alloc.ok;
    std::printf("%-12d %9zu %10.0f %10.0f %10.0f %10.0f %9.2f %9.2f %12.0f\n", concurrency, alloc.count, bare.p50,
                bare.p99, alloc.p50, alloc.p99, alloc.p50 / bare.p50, alloc.p99 / bare.p99, alloc.per_second);
  }
  if (failed) {
    std::fprintf(stderr, "a request failed\n");
    return 1;
  }

  if (!xid_through_the_driver(dir)) {
    std::fprintf(stderr, "XID trials failed\n");
    return 1;
  }

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
