// The quota library on a real GPU, through the CUDA runtime only (for
// scripts/device-check-quota.sh). Prints one `key value...` line per fact:
//   info FREE TOTAL            cudaMemGetInfo
//   fill N BYTES ERROR         cudaMalloc of CHUNK bytes until it fails (at most LIMIT bytes)
//   async N BYTES ERROR        the same with cudaMallocAsync on the default stream
//   cost NS                    ns per cudaMalloc+cudaFree pair of 1 MiB (best of 5 x 2000)
//   entry NAME FILE SYMBOL     which function cudaGetDriverEntryPointByVersion gives for cuMemAlloc
//   hold BYTES                 allocates BYTES, prints, waits until PATH exists
// Usage: quota_probe info | fill CHUNK LIMIT | async CHUNK LIMIT | cost | entry | hold BYTES PATH
// It never changes a GPU setting; everything it allocates is freed before it exits.
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static double now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* what = argv[1];
  size_t free_bytes = 0, total = 0;
  cudaError_t e = cudaMemGetInfo(&free_bytes, &total);
  if (e != cudaSuccess) {
    std::printf("error %d %s\n", e, cudaGetErrorString(e));
    return 1;
  }
  if (!std::strcmp(what, "info")) {
    std::printf("info %zu %zu\n", free_bytes, total);
  } else if (!std::strcmp(what, "fill") || !std::strcmp(what, "async")) {
    const size_t chunk = std::strtoull(argv[2], nullptr, 0), limit = std::strtoull(argv[3], nullptr, 0);
    const bool async = !std::strcmp(what, "async");
    std::vector<void*> held;
    size_t bytes = 0;
    cudaError_t last = cudaSuccess;
    while (bytes + chunk <= limit) {
      void* p = nullptr;
      last = async ? cudaMallocAsync(&p, chunk, 0) : cudaMalloc(&p, chunk);
      if (last != cudaSuccess) break;
      held.push_back(p);
      bytes += chunk;
    }
    cudaGetLastError();  // clear the sticky-free error state of a failed allocation
    std::printf("%s %zu %zu %d\n", what, held.size(), bytes, static_cast<int>(last));
    for (void* p : held) async ? cudaFreeAsync(p, 0) : cudaFree(p);
    cudaDeviceSynchronize();
  } else if (!std::strcmp(what, "cost")) {
    double best = 1e18;
    for (int round = 0; round < 5; ++round) {
      const double t0 = now_ns();
      for (int i = 0; i < 2000; ++i) {
        void* p = nullptr;
        if (cudaMalloc(&p, 1 << 20) != cudaSuccess || cudaFree(p) != cudaSuccess) return 3;
      }
      const double per = (now_ns() - t0) / 2000;
      if (per < best) best = per;
    }
    std::printf("cost %.0f\n", best);
  } else if (!std::strcmp(what, "entry")) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult status{};
    e = cudaGetDriverEntryPointByVersion("cuMemAlloc", &fn, 12000, cudaEnableDefault, &status);
    Dl_info info{};
    const char* file = fn && dladdr(fn, &info) && info.dli_fname ? info.dli_fname : "-";
    std::printf("entry cuMemAlloc %s %s\n", file, fn && info.dli_sname ? info.dli_sname : "-");
  } else if (!std::strcmp(what, "hold")) {
    void* p = nullptr;
    e = cudaMalloc(&p, std::strtoull(argv[2], nullptr, 0));
    std::printf("hold %d\n", static_cast<int>(e));
    std::fflush(stdout);
    for (int i = 0; i < 600 && access(argv[3], F_OK) != 0; ++i) usleep(100000);
    if (e == cudaSuccess) cudaFree(p);
  }
  return 0;
}
