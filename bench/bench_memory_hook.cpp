// tessera-memory-hook as the container runtime runs it (a CDI createContainer
// hook: the OCI state on stdin, waited on before the container starts): the
// time from spawning it to its exit, which the container's start waits for,
// on a simulated R615 node (the driver's memory-limit calls), for shares of 1
// and 8 whole GPUs. The floor, measured in the same run: spawning /bin/true
// with the same state on stdin, the least any hook costs.
//
//   bench_memory_hook [--runs N]     (default 200 per row)
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

extern char** environ;

namespace {

namespace fs = std::filesystem;

const std::string kTessera = TESSERA_BIN;
const std::string kHook = TESSERA_MEMORY_HOOK;
const std::string kSimLibrary = TESSERA_SIM_LIBRARY;
constexpr const char* kState = R"({"ociVersion":"1.2.1","id":"c1","status":"created","pid":4242,"bundle":"/b"})";

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string run_output(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  ::pclose(p);
  return out;
}

// Spawns argv with `input` on its stdin and its output discarded; returns the
// microseconds to its exit, or -1 when it failed.
double spawn_and_wait(const std::vector<std::string>& argv, const std::vector<std::string>& env) {
  int in[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args, envp;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  ::close(in[0]);
  if (rc != 0) {
    ::close(in[1]);
    return -1;
  }
  const size_t n = std::strlen(kState);
  // /bin/true may exit before reading: EPIPE then (SIGPIPE is ignored), as a runtime sees it.
  const ssize_t w = ::write(in[1], kState, n);
  const bool written = w == static_cast<ssize_t>(n) || (w < 0 && errno == EPIPE);
  ::close(in[1]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const auto t1 = std::chrono::steady_clock::now();
  if (!written || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
  return std::chrono::duration<double, std::micro>(t1 - t0).count();
}

struct Row {
  std::string name;
  std::vector<double> us;
};

double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  int runs = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--runs N]\n", argv[0]);
      return 2;
    }
  }
  if (runs < 10) {
    std::fprintf(stderr, "bench_memory_hook: --runs must be at least 10\n");
    return 2;
  }
  char tmpl[] = "/tmp/tessera-bench-memory-hook-XXXXXX";
  if (!::mkdtemp(tmpl)) return 1;
  const std::string dir = tmpl;
  const std::string sim = dir + "/sim", proc = dir + "/proc", cgroups = dir + "/cgroup";
  if (std::system((kTessera + " sim create " + sim + " --gpu H100-SXM5-80GB --count 8 --driver-version 615.71.09 >/dev/null")
                      .c_str()) != 0) {
    std::fprintf(stderr, "bench_memory_hook: tessera sim create failed\n");
    return 1;
  }
  std::vector<std::string> uuids;
  const auto inventory = nlohmann::json::parse(run_output(kTessera + " inventory --json --sim " + sim), nullptr, false);
  if (inventory.is_object() && inventory.contains("gpus"))
    for (const auto& gpu : inventory["gpus"]) uuids.push_back(gpu.value("uuid", ""));
  if (uuids.size() != 8) {
    std::fprintf(stderr, "bench_memory_hook: tessera inventory listed %zu GPUs, expected 8\n", uuids.size());
    return 1;
  }
  fs::create_directories(proc + "/4242");
  fs::create_directories(cgroups + "/kubepods/pod-a/ctr-1");
  write_text(cgroups + "/cgroup.controllers", "cpuset cpu io memory pids misc dmem\n");
  write_text(proc + "/4242/cgroup", "0::/kubepods/pod-a/ctr-1\n");

  const std::vector<std::string> env = {"TESSERA_SIM=" + sim, "PATH=/usr/bin:/bin"};
  std::vector<Row> rows;
  rows.push_back({"floor: /bin/true, the state on stdin", {}});
  for (size_t gpus : {size_t{1}, size_t{8}}) {
    rows.push_back({"hook, a share of " + std::to_string(gpus) + " whole GPU" + (gpus > 1 ? "s" : ""), {}});
  }
  auto limits_file = [&](size_t gpus) {
    const std::string ledger = dir + "/ledgers/share-" + std::to_string(gpus);
    fs::create_directories(ledger);
    std::string text = "tessera-limits 1\nkey nvidia.com_gpu-0123456789abcdef\n";
    for (size_t k = 0; k < gpus; ++k) text += std::to_string(k) + " " + uuids[k] + " " + std::to_string(10ULL << 30) + "\n";
    write_text(ledger + "/limits", text);
    return ledger + "/limits";
  };
  const std::string one = limits_file(1), eight = limits_file(8);
  auto hook_argv = [&](const std::string& limits) {
    return std::vector<std::string>{kHook, "--limits", limits, "--nvml", kSimLibrary, "--cgroup-root", cgroups,
                                    "--proc-root", proc};
  };
  // Interleaved, so that a busy moment of the machine falls on every row alike.
  for (int r = 0; r < runs; ++r) {
    const std::vector<std::string>* argvs[] = {nullptr, nullptr, nullptr};
    const std::vector<std::string> t = {"/bin/true"}, h1 = hook_argv(one), h8 = hook_argv(eight);
    argvs[0] = &t;
    argvs[1] = &h1;
    argvs[2] = &h8;
    for (size_t k = 0; k < rows.size(); ++k) {
      const double us = spawn_and_wait(*argvs[k], env);
      if (us < 0) {
        std::fprintf(stderr, "bench_memory_hook: %s failed (run %d); see %s\n", rows[k].name.c_str(), r, dir.c_str());
        return 1;
      }
      rows[k].us.push_back(us);
    }
  }
  // The hook must have done its work: the driver-limits record names every GPU.
  std::ifstream record(dir + "/ledgers/share-8/driver-limits");
  const std::string recorded((std::istreambuf_iterator<char>(record)), {});
  for (const auto& u : uuids)
    if (recorded.find(u) == std::string::npos) {
      std::fprintf(stderr, "bench_memory_hook: the record does not name %s:\n%s", u.c_str(), recorded.c_str());
      return 1;
    }

  utsname host{};
  ::uname(&host);
  std::printf("tessera-memory-hook, spawn to exit (µs; %d runs each, interleaved; %ld CPUs, %s %s; simulated NVML, "
              "R615, 8 x H100-SXM5-80GB)\n\n",
              runs, ::sysconf(_SC_NPROCESSORS_ONLN), host.sysname, host.release);
  std::printf("| %-40s | %8s | %8s | %8s | %15s |\n", "case", "p50", "p99", "max", "p50 / floor p50");
  std::printf("|%s|%s|%s|%s|%s|\n", std::string(42, '-').c_str(), std::string(10, '-').c_str(),
              std::string(10, '-').c_str(), std::string(10, '-').c_str(), std::string(17, '-').c_str());
  const double floor50 = percentile(rows[0].us, 0.5);
  for (const auto& row : rows)
    std::printf("| %-40s | %8.0f | %8.0f | %8.0f | %15.1f |\n", row.name.c_str(), percentile(row.us, 0.5),
                percentile(row.us, 0.99), *std::max_element(row.us.begin(), row.us.end()),
                percentile(row.us, 0.5) / floor50);
  fs::remove_all(dir);
  return 0;
}
