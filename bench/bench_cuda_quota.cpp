// What the memory-quota library (libtessera-cuda.so) costs a CUDA program,
// against the unwrapped call in the same run (docs/design-memory-quotas.md §5):
//   1. an allocation and its free (cuMemAlloc_v2 + cuMemFree_v2), and the
//      stream-ordered pair where the driver has it, per call pair;
//   2. start-up to the first allocation for 1, 16, 64 and 256 processes
//      released together on one ledger (the library's first call opens the
//      ledger and claims a slot);
//   3. which functions a program gets for calls that must stay unwrapped.
// Children of this program load the simulated driver as CUDA's runtime does,
// alternately with and without the library in LD_PRELOAD. The simulated
// driver's own cost is the floor each figure is compared with.
//
// Usage: bench_cuda_quota [--quick]
#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using CUresult = int;
using CUdeviceptr = unsigned long long;
using GetProc = CUresult (*)(const char*, void**, int, unsigned long long, int*);

constexpr const char* kUuid = "GPU-11111111-2222-3333-4444-555555555555";

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

// Waits for the go file, then times cuInit, the primary context and the first
// allocation (with the library, that call opens the ledger and claims a slot).
int child_startup(const char* go) {
  Driver d;
  if (!load(d)) return 2;
  while (access(go, F_OK) != 0) usleep(100);
  const std::uint64_t t0 = now_ns();
  if (!init(d)) return 2;
  auto alloc = d.get<CUresult (*)(CUdeviceptr*, std::size_t)>("cuMemAlloc", 3020);
  CUdeviceptr p = 0;
  if (!alloc || alloc(&p, 1 << 20) != 0) return 3;
  std::printf("%llu\n", static_cast<unsigned long long>(now_ns() - t0));
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
};

std::vector<std::string> environment(const Setup& s, bool wrapped, const std::string& ledger) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "LD_PRELOAD=", 11) != 0 && std::strncmp(*e, "TESSERA_", 8) != 0) env.emplace_back(*e);
  env.push_back("LD_LIBRARY_PATH=" + s.sim_dir);
  env.push_back(std::string("TESSERA_SIM_CUDA_DEVICES=") + kUuid + ":80G");
  if (wrapped) {
    env.push_back("LD_PRELOAD=" + s.library);
    env.push_back(std::string("TESSERA_DEVICE_UUID_0=") + kUuid);
    env.push_back("TESSERA_DEVICE_MEMORY_LIMIT_0=" + std::to_string(60ull << 30));
    env.push_back("TESSERA_LEDGER_DIR=" + ledger);
  }
  return env;
}

struct Child {
  pid_t pid = -1;
  int out = -1;
};

Child spawn(const Setup& s, const std::vector<std::string>& args, const std::vector<std::string>& env) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv{const_cast<char*>(s.self.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
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

std::string fresh_dir(const Setup& s, const std::string& name) {
  const std::string d = s.dir + "/" + name;
  mkdir(d.c_str(), 01777);
  return d;
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
      const std::string ledger = fresh_dir(s, "pairs" + std::to_string(round) + (async ? "a" : "s") + (w ? "w" : "p"));
      const double ns = std::atof(finish(spawn(s, {"--child-pairs", async ? "async" : "sync", std::to_string(n)},
                                               environment(s, w, ledger))).c_str());
      (w ? wrapped : plain).push_back(ns);
    }
  }
  const double p = percentile(plain, 0.5), w = percentile(wrapped, 0.5);
  if (p < 0) {
    std::printf("| %-38s | %10s | %10s | %10s | %6s |\n", async ? "cuMemAllocAsync + cuMemFreeAsync" : "", "n/a", "n/a",
                "n/a", "n/a");
    return;
  }
  std::printf("| %-38s | %10.0f | %10.0f | %10.0f | %6.2f |\n",
              async ? "cuMemAllocAsync + cuMemFreeAsync" : "cuMemAlloc_v2 + cuMemFree_v2", p, w, w - p, w / p);
}

void startup(const Setup& s, int processes, int round) {
  std::vector<double> result[2];
  for (bool w : {false, true}) {
    const std::string tag = std::to_string(processes) + "-" + std::to_string(round) + (w ? "w" : "p");
    const std::string ledger = fresh_dir(s, "start" + tag);
    const std::string go = s.dir + "/go" + tag;
    std::vector<Child> children;
    for (int i = 0; i < processes; ++i) children.push_back(spawn(s, {"--child-startup", go}, environment(s, w, ledger)));
    usleep(200000 + 2000 * static_cast<useconds_t>(processes));  // let every child reach its wait
    FILE* f = std::fopen(go.c_str(), "w");
    if (f) std::fclose(f);
    for (auto& c : children) result[w].push_back(std::atof(finish(c).c_str()) / 1000.0);
  }
  std::printf("| %9d | %8.0f | %8.0f | %8.0f | %8.0f | %8.0f | %8.0f |\n", processes, percentile(result[0], 0.5),
              percentile(result[0], 0.95), percentile(result[0], 1.0), percentile(result[1], 0.5),
              percentile(result[1], 0.95), percentile(result[1], 1.0));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 4 && !std::strcmp(argv[1], "--child-pairs")) return child_pairs(!std::strcmp(argv[2], "async"), std::atol(argv[3]));
  if (argc >= 3 && !std::strcmp(argv[1], "--child-startup")) return child_startup(argv[2]);
  if (argc >= 2 && !std::strcmp(argv[1], "--child-pointers")) return child_pointers();
  const bool quick = argc >= 2 && !std::strcmp(argv[1], "--quick");

  Setup s;
  char self[4096] = {};
  if (readlink("/proc/self/exe", self, sizeof self - 1) <= 0) return 1;
  s.self = self;
  s.library = TESSERA_CUDA_QUOTA_LIBRARY;
  s.sim_dir = TESSERA_CUDA_SIM_DIR;
  char tmpl[] = "/tmp/tessera-bench-cuda-quota-XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  s.dir = tmpl;

  std::printf("Memory-quota library cost over the simulated driver (ns per alloc+free pair, median of 6 children, "
              "each the best of 5 x %d pairs)\n\n", quick ? 2000 : 20000);
  std::printf("| %-38s | %10s | %10s | %10s | %6s |\n", "call pair", "unwrapped", "wrapped", "added", "ratio");
  std::printf("|%s|%s|%s|%s|%s|\n", std::string(40, '-').c_str(), std::string(12, '-').c_str(),
              std::string(12, '-').c_str(), std::string(12, '-').c_str(), std::string(8, '-').c_str());
  pairs(s, false, quick ? 2000 : 20000);
  pairs(s, true, quick ? 2000 : 20000);

  std::printf("\nStart-up: cuInit + primary context + first cuMemAlloc_v2, processes released together on one ledger "
              "(µs)\n\n");
  std::printf("| %9s | %8s | %8s | %8s | %8s | %8s | %8s |\n", "processes", "p50", "p95", "max", "p50 lib", "p95 lib",
              "max lib");
  std::printf("|-----------|----------|----------|----------|----------|----------|----------|\n");
  for (int n : {1, 16, 64, 256}) {
    if (quick && n > 64) break;
    startup(s, n, 0);
  }

  std::printf("\nFunctions a program gets with the library loaded (file, symbol)\n\n");
  const std::string ledger = fresh_dir(s, "pointers");
  std::printf("%s", finish(spawn(s, {"--child-pointers"}, environment(s, true, ledger))).c_str());
  std::string cleanup = "rm -rf '" + s.dir + "'";
  return std::system(cleanup.c_str()) == 0 ? 0 : 1;
}
