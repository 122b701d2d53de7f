// `tessera fleet run`'s cost per poll on a big cluster: the real binary against
// an API server of this benchmark's own (httplib) that serves N nodes of 8
// A100-80GB and M pods (a share of them asking for MIG devices, the rest
// CPU-only; each pod with the fields a real pod carries: managedFields,
// volumes, env, status conditions), paged as the API server pages a list
// (limit/continue). The controller polls every second and plans nothing
// (--pending-after is an hour), three ways: listing Nodes and Pods at every
// poll (--no-watch); keeping them by list-and-watch (the default) on a cluster
// that does not change; and by list-and-watch with `--changes` pods changed a
// second (each a MODIFIED event). Each poll reads its ConfigMaps. Measured
// from /proc: CPU seconds per poll, the peak RSS. The floor of a full list,
// measured in the same run: scanning every page's JSON once in this process
// (nlohmann's accept, nothing built), the least any reader of the lists must
// do; beside it, one plain parse of every page into a DOM.
//
//   bench_fleet_poll [--nodes N] [--pods M] [--polls K] [--changes C]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using json = nlohmann::json;

namespace {

const char* kMigConfig = "version: v1\nmig-configs:\n  all-1g:\n    - devices: all\n      mig-enabled: true\n"
                         "      mig-devices: {\"1g.10gb\": 7}\n";

std::string node_json(int n) {
  char name[32];
  std::snprintf(name, sizeof name, "gpu-%04d", n);
  json labels = {{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}, {"nvidia.com/gpu.count", "8"},
                 {"nvidia.com/mig.config", "all-1g"}, {"nvidia.com/mig.config.state", "success"},
                 {"kubernetes.io/hostname", name}, {"topology.kubernetes.io/zone", "zone-" + std::to_string(n % 3)}};
  for (int k = 0; k < 30; ++k) labels["feature.node.kubernetes.io/cpu-" + std::to_string(k)] = "true";
  json images = json::array();
  for (int k = 0; k < 20; ++k) images.push_back({{"names", {"registry.example/app-" + std::to_string(k) + ":v1"}}, {"sizeBytes", 123456789}});
  return json{{"kind", "Node"},
              {"apiVersion", "v1"},
              {"metadata", {{"name", name}, {"uid", "uid-" + std::string(name)}, {"labels", labels},
                            {"managedFields", json::array({{{"manager", "kubelet"}, {"operation", "Update"}}})}}},
              {"spec", {{"podCIDR", "10.0.0.0/24"}}},
              {"status", {{"conditions", json::array({{{"type", "MemoryPressure"}, {"status", "False"}}, {{"type", "Ready"}, {"status", "True"}}})},
                          {"images", images},
                          {"capacity", {{"cpu", "128"}, {"memory", "2Ti"}, {"nvidia.com/mig-1g.10gb", "56"}}}}}}
      .dump();
}

std::string pod_json(int i, int nodes, bool gpu, bool running, int generation = 0) {
  json limits = {{"cpu", "4"}, {"memory", "16Gi"}};
  if (gpu) limits["nvidia.com/mig-1g.10gb"] = "1";
  json env = json::array();
  for (int k = 0; k < 15; ++k) env.push_back({{"name", "SETTING_" + std::to_string(k)}, {"value", "value-" + std::to_string(k)}});
  json pod = {{"kind", "Pod"},
              {"apiVersion", "v1"},
              {"metadata", {{"name", "job-" + std::to_string(i)}, {"namespace", "team-" + std::to_string(i % 40)},
                            {"uid", "pod-uid-" + std::to_string(i)}, {"creationTimestamp", "2026-12-01T00:00:00Z"},
                            {"resourceVersion", std::to_string(7 + generation)},
                            {"labels", {{"app", "svc-" + std::to_string(i % 300)}, {"pod-template-hash", "5d8f7c"},
                                        {"generation", std::to_string(generation)}}},
                            {"ownerReferences", json::array({{{"apiVersion", "apps/v1"}, {"kind", "ReplicaSet"}, {"controller", true},
                                                              {"name", "svc-" + std::to_string(i % 300) + "-5d8f7c"},
                                                              {"uid", "rs-uid-" + std::to_string(i % 300)}}})},
                            {"managedFields", json::array({{{"manager", "kube-controller-manager"}, {"operation", "Update"}},
                                                           {{"manager", "kubelet"}, {"operation", "Update"}}})}}},
              {"spec", {{"containers", json::array({{{"name", "main"}, {"image", "registry.example/app:v1"}, {"env", env},
                                                     {"resources", {{"limits", limits}, {"requests", limits}}},
                                                     {"volumeMounts", json::array({{{"name", "data"}, {"mountPath", "/data"}}})}}})},
                        {"volumes", json::array({{{"name", "data"}, {"emptyDir", json::object()}}})},
                        {"tolerations", json::array({{{"key", "node.kubernetes.io/not-ready"}, {"operator", "Exists"}, {"effect", "NoExecute"}}})}}},
              {"status", {{"phase", running ? "Running" : "Pending"},
                          {"conditions", json::array({{{"type", "Ready"}, {"status", running ? "True" : "False"}}})}}}};
  if (running) {
    char name[32];
    std::snprintf(name, sizeof name, "gpu-%04d", i % nodes);
    pod["spec"]["nodeName"] = name;
  }
  return pod.dump();
}

// A List page of items [from, from + limit), with a continue token when more follow.
std::string page(const std::vector<std::string>& items, const char* kind, size_t from, size_t limit, size_t& bytes) {
  std::string out = std::string("{\"kind\":\"") + kind + "\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"7\"";
  const size_t end = limit == 0 ? items.size() : std::min(items.size(), from + limit);
  if (end < items.size()) out += ",\"continue\":\"" + std::to_string(end) + "\"";
  out += "},\"items\":[";
  for (size_t i = from; i < end; ++i) out += (i > from ? "," : "") + items[i];
  out += "]}";
  bytes += out.size();
  return out;
}

struct Usage {
  double cpu = 0;       // user + system seconds
  long peak_kib = 0;    // VmHWM
};

Usage usage_of(pid_t pid) {
  Usage u;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  auto close = text.rfind(')');
  std::istringstream rest(close == std::string::npos ? "" : text.substr(close + 2));
  std::vector<std::string> f;
  for (std::string w; rest >> w;) f.push_back(w);
  if (f.size() > 13) u.cpu = double(std::stol(f[11]) + std::stol(f[12])) / double(sysconf(_SC_CLK_TCK));
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM:", 0) == 0) u.peak_kib = std::stol(line.substr(6));
  return u;
}

}  // namespace

// One way of running the controller, measured.
struct Run {
  const char* how;
  bool watch;
  int changes;  // pods changed a second (watch only)
};

int main(int argc, char** argv) {
  int nodes = 1500, pods = 30000, polls = 5, changes = 10;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&] { return i + 1 < argc ? std::atoi(argv[++i]) : 0; };
    if (a == "--nodes") nodes = next();
    else if (a == "--pods") pods = next();
    else if (a == "--polls") polls = next();
    else if (a == "--changes") changes = next();
    else {
      std::cerr << "usage: bench_fleet_poll [--nodes N] [--pods M] [--polls K] [--changes C]\n";
      return 2;
    }
  }
  if (nodes < 1 || pods < 1 || polls < 1 || changes < 1) {
    std::cerr << "bench_fleet_poll: --nodes, --pods, --polls and --changes must be 1 or more\n";
    return 2;
  }
  std::vector<std::string> node_items, pod_items;
  std::vector<bool> pod_gpu;
  for (int n = 0; n < nodes; ++n) node_items.push_back(node_json(n));
  std::mt19937 rng(1);
  int gpu_pods = 0;
  for (int i = 0; i < pods; ++i) {
    const bool gpu = rng() % 5 < 3;  // three in five ask for a MIG device
    gpu_pods += gpu;
    pod_gpu.push_back(gpu);
    pod_items.push_back(pod_json(i, nodes, gpu, gpu ? i % 7 != 0 : true));
  }

  httplib::Server server;
  std::atomic<int> polls_seen{0};
  std::atomic<size_t> served{0};
  std::atomic<int> changes_per_second{0};
  std::atomic<bool> closing{false};
  std::atomic<int> run_id{0};  // a watch of an earlier run (its controller killed) ends
  // A watch: nothing while the cluster rests; with changes, a MODIFIED pod every 1/C s. Ends at
  // timeoutSeconds (or when the benchmark ends).
  auto watcher = [&](const httplib::Request& req, httplib::Response& res, bool pod_watch) {
    const int seconds = req.has_param("timeoutSeconds") ? std::stoi(req.get_param_value("timeoutSeconds")) : 60;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    auto generation = std::make_shared<int>(0);
    const int run = run_id.load();
    res.set_chunked_content_provider("application/json", [&, deadline, pod_watch, generation, run](size_t, httplib::DataSink& sink) {
      const int rate = changes_per_second.load();
      std::this_thread::sleep_for(std::chrono::milliseconds(pod_watch && rate > 0 ? 1000 / rate : 50));
      if (closing || run != run_id.load() || std::chrono::steady_clock::now() >= deadline) {
        sink.done();
        return true;
      }
      if (pod_watch && rate > 0) {
        const int i = int(unsigned(++*generation) * 7919u % unsigned(pod_items.size()));
        std::string line = "{\"type\":\"MODIFIED\",\"object\":" +
                           pod_json(i, nodes, pod_gpu[size_t(i)], pod_gpu[size_t(i)] ? i % 7 != 0 : true, *generation) + "}\n";
        served += line.size();
        return sink.write(line.data(), line.size());
      }
      return true;
    });
  };
  auto lister = [&](const std::vector<std::string>& items, const char* kind, bool pod_watch) {
    return [&, kind, pod_watch](const httplib::Request& req, httplib::Response& res) {
      if (req.get_param_value("watch") == "true") return watcher(req, res, pod_watch);
      size_t from = req.has_param("continue") ? std::stoul(req.get_param_value("continue")) : 0;
      size_t limit = req.has_param("limit") ? std::stoul(req.get_param_value("limit")) : 0;
      size_t bytes = 0;
      res.set_content(page(items, kind, from, limit, bytes), "application/json");
      served += bytes;
    };
  };
  const std::vector<std::string> no_items;
  server.Get("/api/v1/nodes", lister(node_items, "NodeList", false));
  server.Get("/api/v1/pods", lister(pod_items, "PodList", true));
  server.Get("/apis/policy/v1/poddisruptionbudgets", lister(no_items, "PodDisruptionBudgetList", false));
  // No resource.k8s.io: a cluster without DRA (404), as httplib answers an unknown path.
  server.Get(R"(/api/v1/namespaces/tessera/configmaps/([^/]+))", [&](const httplib::Request& req, httplib::Response& res) {
    if (req.matches[1] == "tessera-mig-config") {
      ++polls_seen;  // each poll reads it once
      res.set_content(json{{"kind", "ConfigMap"}, {"metadata", {{"name", "tessera-mig-config"}}}, {"data", {{"config.yaml", kMigConfig}}}}.dump(),
                      "application/json");
      return;
    }
    res.status = 404;
    res.set_content(R"({"kind":"Status","status":"Failure","reason":"NotFound","code":404})", "application/json");
  });
  server.Post(R"(/api/v1/namespaces/tessera/events)", [](const httplib::Request&, httplib::Response& res) {
    res.status = 201;
    res.set_content("{}", "application/json");
  });
  server.new_task_queue = [] { return new httplib::ThreadPool(16); };  // four watches held open, and the rest
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { server.listen_after_bind(); });

  const auto dir = std::filesystem::temp_directory_path() / ("bench-fleet-poll-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string kubeconfig = (dir / "kubeconfig").string();
  std::ofstream(kubeconfig) << "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:"
                            << port << "\nusers:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
                            << "current-context: x\n";
  // The floors, in this process, on the same pages: every page scanned once (json::accept: each
  // byte lexed, nothing built; the least any reader of the lists must do), and every page parsed
  // once into a DOM (what a plain reader does before it reads a field).
  std::vector<std::string> pages;
  {
    size_t b = 0;
    for (size_t from = 0; from < node_items.size(); from += 500) pages.push_back(page(node_items, "NodeList", from, 500, b));
    for (size_t from = 0; from < pod_items.size(); from += 500) pages.push_back(page(pod_items, "PodList", from, 500, b));
  }
  auto seconds_of = [](auto&& work) {
    auto t0 = std::chrono::steady_clock::now();
    work();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  bool pages_ok = true;
  const double floor_s = seconds_of([&] {
    for (const auto& text : pages) pages_ok = json::accept(text) && pages_ok;
  });
  size_t parsed_items = 0;
  const double dom_s = seconds_of([&] {
    for (const auto& text : pages) parsed_items += json::parse(text)["items"].size();
  });
  if (!pages_ok || parsed_items != node_items.size() + pod_items.size()) return 1;
  pages.clear();
  pages.shrink_to_fit();

  std::printf("| how the controller reads the cluster | nodes | pods (GPU) | JSON served per poll | CPU per poll | "
              "floor: scan a full list once | ratio | a DOM parse | peak RSS |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|\n");
  const std::string changing = "list-and-watch, " + std::to_string(changes) + " pods changed a second";
  const Run runs[] = {{"a full list every poll (--no-watch)", false, 0},
                      {"list-and-watch, nothing changes", true, 0},
                      {changing.c_str(), true, changes}};
  int failed = 0;
  for (const Run& r : runs) {
    changes_per_second = r.changes;
    const int seen_before = polls_seen.load();
    std::fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
      const std::string log = (dir / "controller.log").string();
      if (std::freopen(log.c_str(), "w", stderr) == nullptr || std::freopen("/dev/null", "w", stdout) == nullptr) _exit(127);
      std::vector<const char*> argv{"tessera", "fleet", "run", "--kubeconfig", kubeconfig.c_str(), "--allow-insecure-http",
                                    "--namespace", "tessera", "--poll", "1", "--pending-after", "3600"};
      if (!r.watch) argv.push_back("--no-watch");
      argv.push_back(nullptr);
      execv(TESSERA_BIN, const_cast<char* const*>(argv.data()));
      _exit(127);
    }
    // Polls 1 and 2 warm up (the process starts, libraries load, the first list); 3.. are measured.
    auto wait_for_poll = [&](int n) {
      for (int k = 0; k < 600 && polls_seen.load() - seen_before < n; ++k) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      return polls_seen.load() - seen_before >= n;
    };
    bool ok = wait_for_poll(2);
    Usage start = usage_of(child);
    const size_t served_start = served.load();
    ok = ok && wait_for_poll(2 + polls);
    Usage end = usage_of(child);
    const size_t served_end = served.load();
    kill(child, SIGTERM);
    int status = 0;
    waitpid(child, &status, 0);
    ++run_id;
    if (!ok) {
      std::cerr << "bench_fleet_poll: " << r.how << ": the controller did not poll " << polls + 2 << " times in a minute each\n";
      std::ifstream log(dir / "controller.log");
      std::cerr << log.rdbuf();
      ++failed;
      continue;
    }
    const double per_poll = (end.cpu - start.cpu) / polls;
    std::printf("| %s | %d | %d (%d) | %.2f MiB | %.3f s | %.3f s | %.2f | %.3f s | %.0f MiB |\n", r.how, nodes, pods, gpu_pods,
                double(served_end - served_start) / polls / 1048576.0, per_poll, floor_s, per_poll / floor_s, dom_s,
                double(end.peak_kib) / 1024.0);
    std::fflush(stdout);
  }
  closing = true;
  server.stop();
  serving.join();
  std::filesystem::remove_all(dir);
  return failed == 0 ? 0 : 1;
}
