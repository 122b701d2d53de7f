// MPS daemon death to Unhealthy on ListAndWatch: `tessera plugin` on a
// simulated 2 x A100 node with 4 MPS shares per GPU, the kubelet peer in this
// process, the simulated nvidia-cuda-mps-control as the daemons. Each trial
// SIGKILLs one GPU's control daemon and times the kill to the moment the
// kubelet peer's ListAndWatch list shows that GPU's four shares Unhealthy,
// then waits for all eight Healthy again (the daemon restarted) and a random
// 0-2 s (so that a kill falls anywhere in a polling period) before the next.
// Modes:
//   plugin  `tessera plugin --mps-control SIM`: the daemons are the plugin's
//           own children (docs/design-mps.md, "in-process");
//   host    `tessera mps-host --mps-control SIM` owns the daemons and
//           `tessera plugin --mps-host SOCKET` follows them.
// The kill is the bench's own act on the pid the simulated daemon records in
// its state file. Prints a table of p50/p90/p99/max; exits non-zero when a
// trial fails.
//   Usage: bench_mps [--trials N] [--modes plugin,host] [--tessera BIN] [--mps-control BIN]
// --tessera and --mps-control default to this build's; naming an older build's
// pair measures that one (how the 2 s poll before pidfds was measured).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "child.hpp"
#include "kubelet/fake_kubelet.hpp"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using tessera::sim::AdvertisedDevice;


using tessera::bench::Child;
using tessera::bench::run;

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// The pid the simulated daemon in `pipe` recorded ("pid": N), or -1.
pid_t daemon_pid(const std::string& pipe) {
  std::ifstream in(pipe + "/tessera-sim-mps.json");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  auto at = text.find("\"pid\":");
  if (at == std::string::npos) return -1;
  return static_cast<pid_t>(std::strtol(text.c_str() + at + 6, nullptr, 10));
}

bool running(pid_t pid) {
  if (pid <= 0 || kill(pid, 0) != 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  auto close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] != 'Z';
}

size_t count(const std::vector<AdvertisedDevice>& d, const std::string& prefix, const std::string& health) {
  return static_cast<size_t>(std::count_if(d.begin(), d.end(), [&](const AdvertisedDevice& x) {
    return x.health == health && x.id.starts_with(prefix);
  }));
}

struct Options {
  int trials = 20;
  std::vector<std::string> modes{"plugin", "host"};
  std::string tessera = TESSERA_BIN;
  std::string control = TESSERA_MPS_CONTROL_SIM;
};

// One mode's trials: the milliseconds from each kill to Unhealthy, and to Healthy again.
bool measure(const Options& o, const std::string& mode, std::vector<double>& down_ms, std::vector<double>& up_ms) {
  // Short: the daemons' sockets must fit a unix socket path.
  char tmpl[] = "/tmp/bench-mps-XXXXXX";
  if (!mkdtemp(tmpl)) return false;
  const std::filesystem::path dir = tmpl;
  const std::string node = dir / "node", kubelet_dir = dir / "kubelet", root = dir / "mps";
  bool ok = run({o.tessera, "sim", "create", node, "--gpu", "A100-SXM4-80GB", "--count", "2"}) == 0;
  std::filesystem::create_directories(kubelet_dir);
  tessera::sim::FakeKubelet kubelet(kubelet_dir);
  ok = ok && kubelet.start().has_value();
  {
    std::ofstream(dir / "dp.yaml") << "version: v1\nflags: {mpsRoot: " << root
                                   << "}\nsharing:\n  mps:\n    resources: [{name: nvidia.com/gpu, replicas: 4}]\n";
  }
  std::vector<std::string> plugin{o.tessera, "plugin", "--config", dir / "dp.yaml", "--sim", node,
                                  "--kubelet-dir", kubelet_dir, "--log-level", "info", "--no-quota-library"};
  std::unique_ptr<Child> host;
  if (mode == "host") {
    const std::string socket = dir / "host" / "mps-host.sock";
    host = std::make_unique<Child>(std::vector<std::string>{o.tessera, "mps-host", "--socket", socket, "--mps-control",
                                                            o.control, "--log-level", "info"},
                                   dir / "mps-host.log");
    ok = ok && host->wait_for("ready", 10000);
    plugin.insert(plugin.end(), {"--mps-host", socket});
  } else {
    plugin.insert(plugin.end(), {"--mps-control", o.control});
  }
  Child p(plugin, dir / "plugin.log");
  ok = ok && kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return count(d, "", "Healthy") == 8; }, 15s);
  if (!ok) {
    std::fprintf(stderr, "%s: no 8 Healthy MPS shares to start with\n%s\n%s", mode.c_str(), p.output().c_str(),
                 host ? host->output().c_str() : "");
    std::filesystem::remove_all(dir);
    return false;
  }
  std::set<std::string> gpus;
  for (const auto& d : kubelet.devices("nvidia.com/gpu")) gpus.insert(d.id.substr(0, d.id.find("::")));
  const std::vector<std::string> uuids(gpus.begin(), gpus.end());
  std::mt19937 rng(20261202);
  std::uniform_int_distribution<int> jitter(0, 2000);
  for (int t = 0; t < o.trials && ok; ++t) {
    const std::string& uuid = uuids[static_cast<size_t>(t) % uuids.size()];
    const std::string pipe = root + "/" + uuid + "/pipe";
    const pid_t victim = daemon_pid(pipe);
    if (!running(victim)) {
      std::fprintf(stderr, "%s: trial %d: no running daemon for %s\n", mode.c_str(), t, uuid.c_str());
      ok = false;
      break;
    }
    // At a random point of any polling period (2 s before pidfds), not in step with the restart.
    std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng)));
    const auto t0 = Clock::now();
    kill(victim, SIGKILL);
    const bool down = kubelet.wait_for("nvidia.com/gpu", [&](const auto& d) { return count(d, uuid, "Unhealthy") == 4; },
                                       15s);
    const auto t1 = Clock::now();
    const bool up = kubelet.wait_for("nvidia.com/gpu", [](const auto& d) { return count(d, "", "Healthy") == 8; }, 30s);
    const auto t2 = Clock::now();
    if (!down || !up) {
      std::fprintf(stderr, "%s: trial %d: %s\n%s", mode.c_str(), t, down ? "never Healthy again" : "never Unhealthy",
                   p.output().c_str());
      ok = false;
      break;
    }
    down_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    up_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t0).count());
    // The next kill must find the restarted daemon, not its predecessor's record.
    for (int i = 0; i < 250 && (daemon_pid(pipe) == victim || !running(daemon_pid(pipe))); ++i)
      std::this_thread::sleep_for(20ms);
  }
  p.stop();
  if (host) host->stop();
  kubelet.stop();
  std::filesystem::remove_all(dir);
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  // A tessera from elsewhere (an older build) finds the simulated NVML through this.
  ::setenv("TESSERA_SIM_LIBRARY", TESSERA_SIM_LIBRARY, 0);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "bench_mps: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--trials") o.trials = std::max(1, std::atoi(next().c_str()));
    else if (a == "--tessera") o.tessera = next();
    else if (a == "--mps-control") o.control = next();
    else if (a == "--modes") {
      o.modes.clear();
      std::stringstream in(next());
      for (std::string m; std::getline(in, m, ',');) o.modes.push_back(m);
    } else {
      std::fprintf(stderr, "usage: bench_mps [--trials N] [--modes plugin,host] [--tessera BIN] [--mps-control BIN]\n");
      return 2;
    }
  }
  std::printf("MPS control daemon SIGKILLed to its GPU's 4 shares Unhealthy on ListAndWatch, and to all 8 Healthy\n"
              "again (restarted after the 1 s backoff); %d trials per mode, 2 simulated A100-80GB, %s\n\n",
              o.trials, o.tessera.c_str());
  std::printf("| mode | down p50 | down p90 | down p99 | down max | back p50 | trials |\n"
              "|---|---|---|---|---|---|---|\n");
  bool all_ok = true;
  for (const auto& mode : o.modes) {
    if (mode != "plugin" && mode != "host") {
      std::fprintf(stderr, "bench_mps: unknown mode %s\n", mode.c_str());
      return 2;
    }
    std::vector<double> down, up;
    const bool ok = measure(o, mode, down, up);
    all_ok = all_ok && ok;
    if (down.empty()) {
      std::printf("| %s | - | - | - | - | - | 0 |\n", mode.c_str());
      continue;
    }
    std::printf("| %s | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %.0f ms | %zu |\n", mode.c_str(), percentile(down, 0.5),
                percentile(down, 0.9), percentile(down, 0.99), *std::max_element(down.begin(), down.end()),
                percentile(up, 0.5), down.size());
    std::fflush(stdout);
  }
  return all_ok ? 0 : 1;
}
