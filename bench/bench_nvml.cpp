// What an NVML call costs through the simulator: the raw C entry points and
// the C++ wrapper, for reads (served from the parsed node, one stat() per
// call to notice other processes' writes) and for writes (flock, JSON, and an
// atomic rename). The node: 8 H100-80GB in MIG mode, each cut into seven
// 1g.10gb MIG devices (the last GPU six), with a process on each.
#include <benchmark/benchmark.h>
#include <dlfcn.h>
#include <stdlib.h>

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "nvml/inventory.hpp"
#include "nvml/session.hpp"

namespace {

using namespace tessera;
using namespace tessera::nvml::abi;

struct Bench {
  std::string dir;
  std::optional<nvml::Session> session;
  std::vector<nvml::Device> gpus;
  std::vector<nvml::Device> migs;
};
Bench* bench = nullptr;

bool control(const nlohmann::json& request) {
  void* h = dlopen(TESSERA_SIM_LIBRARY, RTLD_NOW | RTLD_LOCAL);
  if (!h) return false;
  auto fn = reinterpret_cast<int (*)(const char*, char**)>(dlsym(h, "tesseraSimControl"));
  auto release = reinterpret_cast<void (*)(char*)>(dlsym(h, "tesseraSimFree"));
  char* reply = nullptr;
  int rc = fn(request.dump().c_str(), &reply);
  if (rc != 0) std::cerr << reply << '\n';
  release(reply);
  dlclose(h);
  return rc == 0;
}

bool set_up(Bench& b) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "tessera-bench-nvml-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) return false;
  b.dir = tmpl + "/node";
  if (!control({{"op", "create"}, {"dir", b.dir}, {"gpu", "H100-80GB"}, {"count", 8}, {"mig", true}})) return false;
  setenv("TESSERA_SIM", b.dir.c_str(), 1);
  auto lib = nvml::Library::open(TESSERA_SIM_LIBRARY);
  if (!lib) return false;
  auto s = nvml::Session::open(std::move(*lib));
  if (!s) return false;
  b.session.emplace(std::move(*s));
  uint32_t pid = 1000;
  for (uint32_t i = 0; i < 8; ++i) {
    auto gpu = b.session->device(i);
    if (!gpu) return false;
    b.gpus.push_back(*gpu);
    for (int k = 0; k < (i == 7 ? 6 : 7); ++k) {
      auto gi = gpu->create_gpu_instance(19);  // 1g.10gb
      if (!gi || !gi->create_compute_instance(0)) return false;
    }
    auto migs = gpu->mig_devices();
    if (!migs) return false;
    for (const auto& m : *migs) {
      b.migs.push_back(m);
      if (!control({{"op", "process"},
                    {"dir", b.dir},
                    {"pid", pid++},
                    {"mig_device", *m.uuid()},
                    {"memory_bytes", 1 << 30}}))
        return false;
    }
  }
  return true;
}

void RawDeviceCount(benchmark::State& state) {
  const auto& api = bench->session->api();
  unsigned int n = 0;
  for (auto _ : state) benchmark::DoNotOptimize(api.nvmlDeviceGetCount_v2(&n));
}
BENCHMARK(RawDeviceCount);

void RawHandleByIndex(benchmark::State& state) {
  const auto& api = bench->session->api();
  nvmlDevice_t d = nullptr;
  for (auto _ : state) benchmark::DoNotOptimize(api.nvmlDeviceGetHandleByIndex_v2(3, &d));
}
BENCHMARK(RawHandleByIndex);

void RawMemoryInfoV2(benchmark::State& state) {
  const auto& api = bench->session->api();
  nvmlMemory_v2_t m{};
  for (auto _ : state) {
    m.version = nvmlMemory_v2;
    benchmark::DoNotOptimize(api.nvmlDeviceGetMemoryInfo_v2(bench->gpus[0].handle(), &m));
  }
}
BENCHMARK(RawMemoryInfoV2);

void WrapperDeviceCount(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(bench->session->device_count());
}
BENCHMARK(WrapperDeviceCount);

void WrapperMemoryInfo(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(bench->gpus[0].memory_info());
}
BENCHMARK(WrapperMemoryInfo);

void WrapperMigMemoryInfo(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(bench->migs[10].memory_info());
}
BENCHMARK(WrapperMigMemoryInfo);

void WrapperMigUuid(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(bench->migs[10].uuid());
}
BENCHMARK(WrapperMigUuid);

void WrapperComputeProcesses(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(bench->gpus[1].compute_processes());
}
BENCHMARK(WrapperComputeProcesses);

void WrapperMigDevices(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(bench->gpus[2].mig_devices());
}
BENCHMARK(WrapperMigDevices);

// The whole node: 8 GPUs, 55 GPU and compute instances, 55 MIG devices.
void WrapperInventory(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(nvml::collect_inventory(*bench->session));
}
BENCHMARK(WrapperInventory)->Unit(benchmark::kMicrosecond);

// A write and its undo: GPU instance create + destroy (each a locked
// read-modify-write of the node file).
void WrapperCreateDestroyGpuInstance(benchmark::State& state) {
  auto gpu = bench->gpus[7];  // left with one free 1g.10gb placement
  for (auto _ : state) {
    auto gi = gpu.create_gpu_instance(19);
    if (!gi) {
      state.SkipWithError(gi.error().message().c_str());
      break;
    }
    benchmark::DoNotOptimize(gi->destroy());
  }
}
BENCHMARK(WrapperCreateDestroyGpuInstance)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  Bench b;
  bench = &b;
  if (!set_up(b)) {
    std::cerr << "bench_nvml: cannot set up the simulated node\n";
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  b.gpus.clear();
  b.migs.clear();
  b.session.reset();
  std::error_code ec;
  std::filesystem::remove_all(std::filesystem::path(b.dir).parent_path(), ec);
  return 0;
}
