// What the memory-quota library (libtessera-cuda.so) costs a CUDA program,
// against the unwrapped call in the same run (docs/design-memory-quotas.md §5):
//   1. an allocation and its free (cuMemAlloc_v2 + cuMemFree_v2), and the
//      stream-ordered pair, per call pair;
//   2. start-up: N processes, loaded and waiting, released together (one pipe
//      closed); each times cuInit, the primary context and the first
//      cuMemAlloc_v2 (with the library: reading the limits, opening the
//      ledger, claiming a slot, the first charge). Two figures: the process's
//      own (from the moment it is released to its first allocation) and from
//      the release (that plus the wait for a CPU, which on a small machine is
//      mostly the other N - 1 processes' work);
//   3. which functions a program gets for calls that must stay unwrapped.
// Children of this program load the simulated driver as CUDA's runtime does,
// alternately with and without the library in LD_PRELOAD. The simulated
// driver's own cost is the floor each figure is compared with.
//
// The ledger is the device plugin's (made before the children start, as
// Allocate makes it), and where this runs as root the wrapped children of a
// run share one container's mount namespace (held by a process of its own,
// as a container's init holds it; each child enters it as nsenter would)
// with the plugin's limits file at /run/tessera/limits, read-only, and the
// ledger at /run/tessera/ledger/ledger: the container's paths. Else
// (or with --env) the quota comes from the environment, and with
// --first-process-creates the first process of each run creates the ledger,
// as the library did before the plugin made it.
//
// Usage: bench_cuda_quota [--quick] [--startup-only] [--env] [--first-process-creates] [--library PATH]
//                         [--processes N --rounds R]   (start-up of N processes only, R rounds pooled)
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda_quota/env.h"
#include "cuda_quota/ledger.hpp"
#include "cuda_quota/limits.hpp"

namespace {

using CUresult = int;
using CUdeviceptr = unsigned long long;
using GetProc = CUresult (*)(const char*, void**, int, unsigned long long, int*);

constexpr const char* kUuid = "GPU-11111111-2222-3333-4444-555555555555";
constexpr const char* kKey = "bench-0123456789abcdef";
constexpr unsigned long long kQuota = 60ull << 30;

std::uint64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<std::uint64_t>(t.tv_sec) * 1000000000ull + static_cast<std::uint64_t>(t.tv_nsec);
}

// ---------------------------------------------------------------- the child side

struct Driver {
  GetProc gpa = nullptr;
  template <class F>
  F get(const char* name, int version, unsigned long long flags = 0) {
    void* p = nullptr;
    return gpa && gpa(name, &p, version, flags, nullptr) == 0 ? reinterpret_cast<F>(p) : nullptr;
  }
};

bool load(Driver& d) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) return false;
  d.gpa = reinterpret_cast<GetProc>(dlsym(h, "cuGetProcAddress_v2"));
  d.gpa = d.get<GetProc>("cuGetProcAddress", 12000);
  return d.gpa != nullptr;
}

bool init(Driver& d) {
  auto cu_init = d.get<CUresult (*)(unsigned)>("cuInit", 2000);
  auto retain = d.get<CUresult (*)(void**, int)>("cuDevicePrimaryCtxRetain", 7000);
  auto set_current = d.get<CUresult (*)(void*)>("cuCtxSetCurrent", 4000);
  void* ctx = nullptr;
  return cu_init && retain && set_current && cu_init(0) == 0 && retain(&ctx, 0) == 0 && set_current(ctx) == 0;
}

// Nanoseconds per alloc+free pair, best of 5 runs of `n`.
int child_pairs(bool async, long n) {
  Driver d;
  if (!load(d) || !init(d)) return 2;
  auto alloc = d.get<CUresult (*)(CUdeviceptr*, std::size_t)>("cuMemAlloc", 3020);
  auto mem_free = d.get<CUresult (*)(CUdeviceptr)>("cuMemFree", 3020);
  auto alloc_async = d.get<CUresult (*)(CUdeviceptr*, std::size_t, void*)>("cuMemAllocAsync", 11020);
  auto free_async = d.get<CUresult (*)(CUdeviceptr, void*)>("cuMemFreeAsync", 11020);
  if (async && (!alloc_async || !free_async)) {
    std::printf("-1\n");
    return 0;
  }
  if (!alloc || !mem_free) return 2;
  double best = 1e18;
  for (int round = 0; round < 5; ++round) {
    const std::uint64_t t0 = now_ns();
    for (long i = 0; i < n; ++i) {
      CUdeviceptr p = 0;
      if (async) {
        if (alloc_async(&p, 1 << 20, nullptr) != 0 || free_async(p, nullptr) != 0) return 3;
      } else if (alloc(&p, 1 << 20) != 0 || mem_free(p) != 0) {
        return 3;
      }
    }
    best = std::min(best, static_cast<double>(now_ns() - t0) / static_cast<double>(n));
  }
  std::printf("%.1f\n", best);
  return 0;
}

// Blocks on descriptor `fd` until the parent closes the pipe's other end,
// then times cuInit, the primary context and the first allocation. Prints
// "<own ns> <monotonic ns when done>".
int child_startup(int fd) {
  Driver d;
  if (!load(d)) return 2;
  char c = 0;
  if (read(fd, &c, 1) != 0) return 4;
  const std::uint64_t t0 = now_ns();
  if (!init(d)) return 2;
  auto alloc = d.get<CUresult (*)(CUdeviceptr*, std::size_t)>("cuMemAlloc", 3020);
  CUdeviceptr p = 0;
  if (!alloc || alloc(&p, 1 << 20) != 0) return 3;
  const std::uint64_t t1 = now_ns();
  std::printf("%llu %llu\n", static_cast<unsigned long long>(t1 - t0), static_cast<unsigned long long>(t1));
  return 0;
}

int child_pointers() {
  Driver d;
  if (!load(d)) return 2;
  const struct {
    const char* name;
    int version;
    unsigned long long flags;
  } calls[] = {{"cuLaunchKernel", 4000, 0},      {"cuLaunchKernel", 7000, 2},     {"cuMemcpyHtoD", 3020, 0},
               {"cuMemcpyHtoD", 7000, 2},        {"cuStreamSynchronize", 2000, 0}, {"cuCtxSynchronize", 2000, 0},
               {"cuCtxGetDevice", 2000, 0},      {"cuMemAlloc", 3020, 0},         {"cuMemFree", 3020, 0}};
  for (const auto& c : calls) {
    void* p = d.get<void*>(c.name, c.version, c.flags);
    Dl_info info{};
    const char* file = p && dladdr(p, &info) && info.dli_fname ? info.dli_fname : "-";
    const char* slash = std::strrchr(file, '/');
    std::printf("%s %d %llu %s %s\n", c.name, c.version, c.flags, slash ? slash + 1 : file,
                p && info.dli_sname ? info.dli_sname : "-");
  }
  return 0;
}

// ---------------------------------------------------------------- the parent side

struct Setup {
  std::string self, library, sim_dir, dir;
  bool file_mode = false;  // children in a mount namespace with the plugin's limits file
  bool plugin_ledger = true;  // the ledger made before the children start
};

// A container's quota files as the device plugin writes them at Allocate.
std::string quota_dir(const Setup& s, const std::string& name) {
  const std::string d = s.dir + "/" + name;
  mkdir(d.c_str(), s.plugin_ledger ? 0755 : 01777);
  chmod(d.c_str(), s.plugin_ledger ? 0755 : 01777);
  if (!s.plugin_ledger) return d;
  const tessera::quota::DeviceQuota device{kUuid, kQuota, 80ull << 30};
  const tessera::quota::Prepared p = tessera::quota::prepare_ledger({d, kKey, {&device, 1}});
  if (!p.ok) std::fprintf(stderr, "%s\n", p.message);
  tessera::quota::Limits l;
  l.device_count = 1;
  std::snprintf(l.key, sizeof l.key, "%s", kKey);
  std::snprintf(l.devices[0].uuid, sizeof l.devices[0].uuid, "%s", kUuid);
  l.devices[0].quota = kQuota;
  char text[tessera::quota::kLimitsMaxBytes + 1];
  const std::size_t n = tessera::quota::format_limits(l, text, sizeof text);
  const std::string path = d + "/" TESSERA_LIMITS_FILE_NAME;
  if (FILE* f = std::fopen(path.c_str(), "w")) {
    std::fwrite(text, 1, n, f);
    std::fclose(f);
  }
  return d;
}

std::vector<std::string> environment(const Setup& s, bool wrapped, const std::string& ledger) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0 && std::strncmp(*e, "TESSERA_", 8) != 0) env.emplace_back(*e);
  env.push_back("LD_LIBRARY_PATH=" + s.sim_dir);
  env.push_back(std::string("TESSERA_SIM_CUDA_DEVICES=") + kUuid + ":80G");
  if (wrapped) {  // as Allocate sets it
    env.push_back("LD_PRELOAD=" + s.library);
    env.push_back(std::string("TESSERA_DEVICE_UUID_0=") + kUuid);
    env.push_back("TESSERA_DEVICE_MEMORY_LIMIT_0=" + std::to_string(kQuota));
    env.push_back(std::string("TESSERA_LEDGER_KEY=") + kKey);
    if (s.file_mode) {
      env.push_back("TESSERA_LEDGER_DIR=" TESSERA_CONTAINER_LEDGER_DIR);
      env.push_back(TESSERA_ENV_LIMITS_FILE "=" TESSERA_CONTAINER_LIMITS_FILE);
    } else {
      env.push_back("TESSERA_LEDGER_DIR=" + ledger);
    }
  }
  return env;
}

struct Child {
  pid_t pid = -1;
  int out = -1;
};

// In the child, before exec: the container's mounts of `quota` (a directory
// made by quota_dir). Only system calls; false when they cannot be made.
bool enter_container(const std::string& limits, const std::string& ledger) {
  if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return false;
  if (mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) return false;
  mkdir("/run/tessera", 0755);
  mkdir(TESSERA_CONTAINER_LEDGER_DIR, 0755);
  for (const char* p : {TESSERA_CONTAINER_LIMITS_FILE, TESSERA_CONTAINER_LEDGER_FILE}) {
    const int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    close(fd);
  }
  return mount(limits.c_str(), TESSERA_CONTAINER_LIMITS_FILE, nullptr, MS_BIND, nullptr) == 0 &&
         mount(nullptr, TESSERA_CONTAINER_LIMITS_FILE, nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) == 0 &&
         mount(ledger.c_str(), TESSERA_CONTAINER_LEDGER_FILE, nullptr, MS_BIND, nullptr) == 0;
}

// A container of the quota files in `quota` (a directory made by
// quota_dir): a process that made the mount namespace and holds it.
struct Container {
  pid_t holder = -1;
  int ns = -1;  // its mount namespace
  Container() = default;
  Container(const Setup& s, const std::string& quota) {
    if (!s.file_mode || quota.empty()) return;
    const std::string limits = quota + "/" TESSERA_LIMITS_FILE_NAME, ledger = quota + "/" TESSERA_LEDGER_FILE_NAME;
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) return;
    holder = fork();
    if (holder == 0) {
      const char ok = enter_container(limits, ledger) ? '1' : '0';
      if (write(ready[1], &ok, 1) != 1) _exit(1);
      pause();
      _exit(0);
    }
    close(ready[1]);
    char ok = '0';
    if (read(ready[0], &ok, 1) != 1 || ok != '1') ok = '0';
    close(ready[0]);
    if (ok == '1') ns = open(("/proc/" + std::to_string(holder) + "/ns/mnt").c_str(), O_RDONLY | O_CLOEXEC);
  }
  ~Container() {
    if (ns >= 0) close(ns);
    if (holder > 0) {
      kill(holder, SIGKILL);
      waitpid(holder, nullptr, 0);
    }
  }
  Container(const Container&) = delete;
  Container& operator=(const Container&) = delete;
};

// `in`: a descriptor the child keeps (its release pipe), -1 for none.
Child spawn(const Setup& s, const std::vector<std::string>& args, const std::vector<std::string>& env,
            const Container& container, int in = -1) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return {};
  std::vector<char*> argv{const_cast<char*>(s.self.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const bool contain = s.file_mode && container.ns >= 0;
  const pid_t pid = fork();
  if (pid == 0) {
    if (contain && setns(container.ns, CLONE_NEWNS) != 0) {  // before the dup2s: its descriptor may be 3
      std::fprintf(stderr, "bench: cannot enter the container: %s\n", std::strerror(errno));
      _exit(126);
    }
    dup2(fds[1], STDOUT_FILENO);
    if (in == 3) fcntl(3, F_SETFD, 0);  // kept across exec
    else if (in >= 0) dup2(in, 3);      // dup2 clears close-on-exec
    execve(s.self.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  close(fds[1]);
  return {pid, fds[0]};
}

std::string finish(Child c) {
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(c.out, buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  close(c.out);
  int status = 0;
  waitpid(c.pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) std::fprintf(stderr, "child failed: status %d\n", status);
  return out;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

void pairs(const Setup& s, bool async, long n) {
  std::vector<double> plain, wrapped;
  for (int round = 0; round < 6; ++round) {  // alternate, so drift hits both
    for (bool w : {false, true}) {
      const std::string quota = w ? quota_dir(s, "pairs" + std::to_string(round) + (async ? "a" : "s")) : "";
      const Container container(s, quota);
      const double ns = std::atof(finish(spawn(s, {"--child-pairs", async ? "async" : "sync", std::to_string(n)},
                                               environment(s, w, quota), container))
                                      .c_str());
      (w ? wrapped : plain).push_back(ns);
    }
  }
  const double p = percentile(plain, 0.5), w = percentile(wrapped, 0.5);
  std::printf("| %-38s | %10.0f | %10.0f | %10.0f | %6.2f |\n",
              async ? "cuMemAllocAsync + cuMemFreeAsync" : "cuMemAlloc_v2 + cuMemFree_v2", p, w, w - p, w / p);
}

struct StartupFigures {
  std::vector<double> own, from_release;  // µs
};

StartupFigures startup_round(const Setup& s, int processes, bool wrapped, const std::string& tag) {
  StartupFigures f;
  const std::string quota = wrapped ? quota_dir(s, "start" + tag) : "";
  const Container container(s, quota);
  int release[2];
  if (pipe2(release, O_CLOEXEC) != 0) return f;
  std::vector<Child> children;
  for (int i = 0; i < processes; ++i)
    children.push_back(spawn(s, {"--child-startup", "3"}, environment(s, wrapped, quota), container, release[0]));
  close(release[0]);
  usleep(200000 + 3000 * static_cast<useconds_t>(processes));  // let every child load and block
  const std::uint64_t released = now_ns();
  close(release[1]);
  for (auto& c : children) {
    unsigned long long own = 0, done = 0;
    if (std::sscanf(finish(c).c_str(), "%llu %llu", &own, &done) != 2) continue;
    f.own.push_back(static_cast<double>(own) / 1000.0);
    f.from_release.push_back(static_cast<double>(done - released) / 1000.0);
  }
  return f;
}

void startup(const Setup& s, int processes, int rounds) {
  StartupFigures all[2];
  for (int round = 0; round < rounds; ++round)
    for (bool w : {false, true}) {  // alternate, so drift hits both
      const auto f = startup_round(s, processes, w, std::to_string(processes) + "-" + std::to_string(round));
      all[w].own.insert(all[w].own.end(), f.own.begin(), f.own.end());
      all[w].from_release.insert(all[w].from_release.end(), f.from_release.begin(), f.from_release.end());
    }
  std::printf("| %9d | %7zu | %8.0f | %8.0f | %8.0f | %8.0f | %8.0f | %8.0f | %8.0f | %8.0f |\n", processes,
              all[1].own.size(), percentile(all[0].own, 0.5), percentile(all[0].own, 0.99), percentile(all[1].own, 0.5),
              percentile(all[1].own, 0.99), percentile(all[0].from_release, 0.5),
              percentile(all[0].from_release, 0.99), percentile(all[1].from_release, 0.5),
              percentile(all[1].from_release, 0.99));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && !std::strcmp(argv[1], "--child-pairs")) return child_pairs(!std::strcmp(argv[2], "async"), std::atol(argv[3]));
  if (argc >= 3 && !std::strcmp(argv[1], "--child-startup")) return child_startup(std::atoi(argv[2]));
  if (argc >= 2 && !std::strcmp(argv[1], "--child-pointers")) return child_pointers();
  bool quick = false, startup_only = false, env_mode = false;
  int only_processes = 0, only_rounds = 5;
  Setup s;
  s.library = TESSERA_CUDA_QUOTA_LIBRARY;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--startup-only") startup_only = true;
    else if (a == "--env") env_mode = true;
    else if (a == "--first-process-creates") s.plugin_ledger = false, env_mode = true;
    else if (a == "--library" && i + 1 < argc) s.library = argv[++i];
    else if (a == "--processes" && i + 1 < argc) only_processes = std::atoi(argv[++i]), startup_only = true;
    else if (a == "--rounds" && i + 1 < argc) only_rounds = std::max(1, std::atoi(argv[++i]));
    else {
      std::fprintf(stderr,
                   "usage: %s [--quick] [--startup-only] [--env] [--first-process-creates] [--library PATH] "
                   "[--processes N --rounds R]\n",
                   argv[0]);
      return 2;
    }
  }
  char self[4096] = {};
  if (readlink("/proc/self/exe", self, sizeof self - 1) <= 0) return 1;
  s.self = self;
  s.sim_dir = TESSERA_CUDA_SIM_DIR;
  char tmpl[] = "/tmp/tessera-bench-cuda-quota-XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  chmod(tmpl, 0755);
  s.dir = tmpl;
  s.file_mode = !env_mode && geteuid() == 0;
  if (s.file_mode) {  // can this machine make the containers?
    const std::string quota = quota_dir(s, "probe");
    const Container container(s, quota);
    Child c = spawn(s, {"--child-pointers"}, environment(s, true, quota), container);
    int status = 0;
    char buf[4096];
    while (read(c.out, buf, sizeof buf) > 0) {
    }
    close(c.out);
    waitpid(c.pid, &status, 0);
    s.file_mode = container.ns >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  utsname host{};
  uname(&host);
  std::printf("Library %s; %ld CPUs (%s %s); quota from %s; ledger %s\n\n", s.library.c_str(), sysconf(_SC_NPROCESSORS_ONLN),
              host.sysname, host.release,
              s.file_mode ? "the plugin's limits file, in a container's mount namespace"
                          : "the environment (no limits file)",
              s.plugin_ledger ? "made by the plugin before the processes start" : "made by the first process");

  const long n = quick ? 2000 : 20000;
  if (!startup_only) {
    std::printf("Cost per call pair over the simulated driver (ns; median of 6 children, each the best of 5 x %ld "
                "pairs)\n\n", n);
    std::printf("| %-38s | %10s | %10s | %10s | %6s |\n", "call pair", "unwrapped", "wrapped", "added", "ratio");
    std::printf("|%s|%s|%s|%s|%s|\n", std::string(40, '-').c_str(), std::string(12, '-').c_str(),
                std::string(12, '-').c_str(), std::string(12, '-').c_str(), std::string(8, '-').c_str());
    pairs(s, false, n);
    pairs(s, true, n);
    std::printf("\n");
  }

  std::printf("Start-up: cuInit + primary context + first cuMemAlloc_v2, N processes released together (µs; own: from "
              "the process's release to its first allocation; from release: the same seen from outside, waiting for a "
              "CPU included)\n\n");
  std::printf("| %9s | %7s | %8s | %8s | %8s | %8s | %8s | %8s | %8s | %8s |\n", "processes", "samples", "own p50",
              "own p99", "lib p50", "lib p99", "rel p50", "rel p99", "lib p50", "lib p99");
  std::printf("|-----------|---------|----------|----------|----------|----------|----------|----------|----------|"
              "----------|\n");
  const struct {
    int processes, rounds;
  } sizes[] = {{1, 20}, {16, 8}, {64, 5}, {256, 2}};
  if (only_processes > 0) {
    startup(s, only_processes, only_rounds);
  } else {
    for (const auto& size : sizes) {
      if (quick && size.processes > 64) break;
      startup(s, size.processes, quick ? std::max(1, size.rounds / 2) : size.rounds);
    }
  }

  if (!startup_only) {
    std::printf("\nFunctions a program gets with the library loaded (file, symbol)\n\n");
    const std::string quota = quota_dir(s, "pointers");
    const Container container(s, quota);
    std::printf("%s", finish(spawn(s, {"--child-pointers"}, environment(s, true, quota), container)).c_str());
  }
  std::string cleanup = "rm -rf '" + s.dir + "'";
  return std::system(cleanup.c_str()) == 0 ? 0 : 1;
}
