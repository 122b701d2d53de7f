// Latency of individual NVML calls through tessera's loader and wrapper, as
// percentiles over many calls: `nvml_latency [--library PATH] [--calls N]`.
// Strictly read-only, so it is safe on a production GPU (scripts/
// device-check.sh runs it); with the simulator's library (and TESSERA_SIM)
// it measures the simulator. Prints one JSON object.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nvml/inventory.hpp"
#include "nvml/session.hpp"

namespace {

using namespace tessera;
using namespace tessera::nvml::abi;
using Clock = std::chrono::steady_clock;

nlohmann::json measure(const std::string& name, size_t calls, const std::function<bool()>& call) {
  std::vector<int64_t> ns;
  ns.reserve(calls);
  size_t errors = 0;
  for (size_t i = 0; i < calls; ++i) {
    auto t0 = Clock::now();
    bool ok = call();
    auto t1 = Clock::now();
    ns.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
    if (!ok) ++errors;
  }
  std::sort(ns.begin(), ns.end());
  auto pct = [&](double p) {
    return ns[std::min(ns.size() - 1, static_cast<size_t>(p * static_cast<double>(ns.size())))];
  };
  return {{"call", name},        {"calls", calls},      {"errors", errors},
          {"p50_ns", pct(0.50)}, {"p99_ns", pct(0.99)}, {"max_ns", ns.back()}};
}

}  // namespace

int main(int argc, char** argv) {
  std::string library = std::string(nvml::kDefaultLibrary);
  size_t calls = 10000;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--library") && i + 1 < argc)
      library = argv[++i];
    else if (!std::strcmp(argv[i], "--calls") && i + 1 < argc)
      calls = std::strtoul(argv[++i], nullptr, 10);
    else {
      std::cerr << "usage: nvml_latency [--library PATH] [--calls N]\n";
      return 2;
    }
  }
  if (calls == 0) calls = 1;
  auto lib = nvml::Library::open(library);
  if (!lib) {
    std::cerr << "nvml_latency: " << lib.error().message << '\n';
    return 1;
  }
  auto session = nvml::Session::open(std::move(*lib));
  if (!session) {
    std::cerr << "nvml_latency: " << session.error().message() << '\n';
    return 1;
  }
  const auto& api = session->api();
  auto gpu = session->device(0);
  if (!gpu) {
    std::cerr << "nvml_latency: " << gpu.error().message() << '\n';
    return 1;
  }
  nvmlDevice_t h = gpu->handle();
  auto results = nlohmann::json::array();
  results.push_back(measure("nvmlDeviceGetCount_v2", calls, [&] {
    unsigned int n = 0;
    return api.nvmlDeviceGetCount_v2(&n) == NVML_SUCCESS;
  }));
  results.push_back(measure("nvmlDeviceGetHandleByIndex_v2", calls, [&] {
    nvmlDevice_t d = nullptr;
    return api.nvmlDeviceGetHandleByIndex_v2(0, &d) == NVML_SUCCESS;
  }));
  results.push_back(measure("nvmlDeviceGetUUID", calls, [&] {
    char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    return api.nvmlDeviceGetUUID(h, buf, sizeof buf) == NVML_SUCCESS;
  }));
  results.push_back(measure("nvmlDeviceGetMemoryInfo", calls, [&] {
    nvmlMemory_t m{};
    return api.nvmlDeviceGetMemoryInfo(h, &m) == NVML_SUCCESS;
  }));
  if (api.nvmlDeviceGetMemoryInfo_v2)
    results.push_back(measure("nvmlDeviceGetMemoryInfo_v2", calls, [&] {
      nvmlMemory_v2_t m{};
      m.version = nvmlMemory_v2;
      return api.nvmlDeviceGetMemoryInfo_v2(h, &m) == NVML_SUCCESS;
    }));
  results.push_back(measure("nvmlDeviceGetUtilizationRates", calls, [&] {
    nvmlUtilization_t u{};
    return api.nvmlDeviceGetUtilizationRates(h, &u) == NVML_SUCCESS;
  }));
  results.push_back(measure("nvmlDeviceGetMigMode", calls, [&] {
    unsigned int c = 0, p = 0;
    return api.nvmlDeviceGetMigMode(h, &c, &p) == NVML_SUCCESS;
  }));
  results.push_back(measure("nvmlDeviceGetGpuInstanceProfileInfo", calls, [&] {
    nvmlGpuInstanceProfileInfo_t info{};
    return api.nvmlDeviceGetGpuInstanceProfileInfo(h, NVML_GPU_INSTANCE_PROFILE_1_SLICE, &info) == NVML_SUCCESS;
  }));
  results.push_back(
      measure("wrapper Device::compute_processes", calls, [&] { return gpu->compute_processes().has_value(); }));
  results.push_back(measure("wrapper Device::memory_info", calls, [&] { return gpu->memory_info().has_value(); }));
  if (auto migs = gpu->mig_devices(); migs && !migs->empty()) {
    auto mig = migs->front();
    results.push_back(measure("wrapper MIG Device::memory_info", calls, [&] { return mig.memory_info().has_value(); }));
  }
  size_t inventory_calls = std::max<size_t>(1, calls / 100);
  results.push_back(measure("wrapper collect_inventory (whole node)", inventory_calls,
                            [&] { return nvml::collect_inventory(*session).has_value(); }));
  nlohmann::json out = {{"library", library}, {"results", results}};
  if (auto v = session->driver_version()) out["driver_version"] = *v;
  std::cout << out.dump(2) << '\n';
  return 0;
}
