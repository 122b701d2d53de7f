// The NVML shared library, loaded: a dlopen handle that owns the table of
// entry points bound from it. Loading fails as a whole, with a message that
// names the library and the first missing required symbol, so a too-old or
// foreign library never half-works.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "nvml/functions.hpp"

namespace tessera::nvml {

// The entry points, one member per symbol of TESSERA_NVML_FUNCTIONS. An
// OPTIONAL member is null when the driver lacks it.
struct Api {
  using nvmlReturn_t = abi::nvmlReturn_t;
  using nvmlDevice_t = abi::nvmlDevice_t;
  using nvmlGpuInstance_t = abi::nvmlGpuInstance_t;
  using nvmlComputeInstance_t = abi::nvmlComputeInstance_t;
  using nvmlEventSet_t = abi::nvmlEventSet_t;
  using nvmlGpmSample_t = abi::nvmlGpmSample_t;
  using nvmlMemory_t = abi::nvmlMemory_t;
  using nvmlMemory_v2_t = abi::nvmlMemory_v2_t;
  using nvmlUtilization_t = abi::nvmlUtilization_t;
  using nvmlPciInfo_t = abi::nvmlPciInfo_t;
  using nvmlDeviceArchitecture_t = abi::nvmlDeviceArchitecture_t;
  using nvmlBrandType_t = abi::nvmlBrandType_t;
  using nvmlGpuInstanceProfileInfo_t = abi::nvmlGpuInstanceProfileInfo_t;
  using nvmlGpuInstanceProfileInfo_v2_t = abi::nvmlGpuInstanceProfileInfo_v2_t;
  using nvmlGpuInstancePlacement_t = abi::nvmlGpuInstancePlacement_t;
  using nvmlGpuInstanceInfo_t = abi::nvmlGpuInstanceInfo_t;
  using nvmlComputeInstanceProfileInfo_t = abi::nvmlComputeInstanceProfileInfo_t;
  using nvmlComputeInstanceInfo_t = abi::nvmlComputeInstanceInfo_t;
  using nvmlProcessInfo_t = abi::nvmlProcessInfo_t;
  using nvmlSetMemoryLimits_v1_t = abi::nvmlSetMemoryLimits_v1_t;
  using nvmlGetMemoryLimits_v1_t = abi::nvmlGetMemoryLimits_v1_t;
  using nvmlGpuTopologyLevel_t = abi::nvmlGpuTopologyLevel_t;
  using nvmlEnableState_t = abi::nvmlEnableState_t;
  using nvmlEventData_t = abi::nvmlEventData_t;
  using nvmlGpmSupport_t = abi::nvmlGpmSupport_t;
  using nvmlGpmMetricsGet_t = abi::nvmlGpmMetricsGet_t;
  using nvmlTemperatureSensors_t = abi::nvmlTemperatureSensors_t;
  using nvmlClockType_t = abi::nvmlClockType_t;
  using nvmlMemoryErrorType_t = abi::nvmlMemoryErrorType_t;
  using nvmlEccCounterType_t = abi::nvmlEccCounterType_t;

#define TESSERA_NVML_MEMBER(ret, name, params) ret(*name) params = nullptr;
  TESSERA_NVML_FUNCTIONS(TESSERA_NVML_MEMBER, TESSERA_NVML_MEMBER)
#undef TESSERA_NVML_MEMBER
};

struct SymbolSpec {
  std::string_view name;
  bool required = true;
};

// Every symbol the loader binds, in the order of TESSERA_NVML_FUNCTIONS.
const std::vector<SymbolSpec>& bound_symbols();

// The soname the driver installs; dlopen searches the usual library path.
inline constexpr std::string_view kDefaultLibrary = "libnvidia-ml.so.1";

class Library {
 public:
  // dlopens `path` (a soname or a file) and binds every symbol. Errors:
  // not_found when the library cannot be loaded (the message carries
  // dlerror's text), unsupported when a required symbol is missing.
  [[nodiscard]] static tessera::Result<std::shared_ptr<const Library>> open(const std::string& path);

  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  ~Library();

  const Api& api() const { return api_; }
  const std::string& path() const { return path_; }
  // Looks up any symbol in the library (for tests and diagnostics).
  void* symbol(const char* name) const;

 private:
  Library(void* handle, std::string path) : handle_(handle), path_(std::move(path)) {}
  void* handle_ = nullptr;
  std::string path_;
  Api api_;
};

}  // namespace tessera::nvml
