// Simulated NVML: initialisation, system queries and whole-device queries,
// under the names tessera binds and the older ones other clients use.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "driver.hpp"
#include "nvml/functions.hpp"

using namespace tessera::sim;
using namespace tessera::sim::compat;

namespace {

uint64_t used_bytes(const Node& node, uint32_t gpu, int64_t gi) {
  uint64_t used = 0;
  for (const auto& p : node.processes)
    if (p.gpu == gpu && (gi < 0 || p.gpu_instance == gi)) used += p.memory_bytes;
  return used;
}

// Total, used and reserved bytes of a GPU or of a MIG device (its GPU
// instance's memory). A whole GPU's `used` includes what the driver reserves.
void memory_of(const Node& node, const DeviceRef& ref, uint64_t& total, uint64_t& used, uint64_t& reserved) {
  reserved = 0;
  const auto& model = model_of(node.gpus[ref.gpu]);
  if (ref.is_mig()) {
    const auto* p = model.profile_by_id(ref.gi->profile_id);
    total = (p ? hw::profile_memory_mib(model, *p, node.driver_version) : 0) * kMiB;
    used = used_bytes(node, ref.gpu, ref.gi->id);
  } else {
    total = model.memory_mib * kMiB;
    reserved = node.gpus[ref.gpu].reserved_mib * kMiB;
    used = reserved + used_bytes(node, ref.gpu, -1);
  }
  if (used > total) used = total;
}

void fill_pci(const Node& node, uint32_t gpu, nvmlPciInfo_t* pci) {
  const auto& g = node.gpus[gpu];
  std::memset(pci, 0, sizeof *pci);
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", g.bus);
  std::snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", g.bus);
  pci->domain = 0;
  pci->bus = g.bus;
  pci->device = 0;
  pci->pciDeviceId = model_of(g).pci_device_id;
  pci->pciSubSystemId = 0x147F10DE;
}

// NVLink links per GPU (hardware.cpp).
unsigned int nvlink_count(const hw::Gpu& model) { return model.nvlinks; }

}  // namespace

namespace {

// nvmlInit_v2 and nvmlInit (v1) share one reference count; v1 initialised every
// GPU at once (nvml.h, nvmlInit_v2), which a simulated GPU never fails.
nvmlReturn_t init(const char* function) {
  auto& d = driver();
  std::lock_guard lock(d.mu);
  if (d.init_count == 0) {
    // The node directory: TESSERA_SIM, the variable `--sim DIR` of the command line stands for.
    const char* dir = std::getenv("TESSERA_SIM");
    if (!dir || !*dir) return NVML_ERROR_DRIVER_NOT_LOADED;
    auto store = NodeStore::open(dir);
    if (!store) return NVML_ERROR_DRIVER_NOT_LOADED;
    d.store = std::move(*store);
  }
  auto node = d.store->read();
  Return r = node ? d.inject_fault(function, **node) : NVML_ERROR_UNKNOWN;
  if (r != NVML_SUCCESS) {
    if (d.init_count == 0) d.reset();
    return r;
  }
  ++d.init_count;
  return NVML_SUCCESS;
}

}  // namespace

TESSERA_SIM_EXPORT nvmlReturn_t nvmlInit_v2(void) { return init("nvmlInit_v2"); }

TESSERA_SIM_EXPORT nvmlReturn_t nvmlInit(void) { return init("nvmlInit"); }

TESSERA_SIM_EXPORT nvmlReturn_t nvmlShutdown(void) {
  auto& d = driver();
  std::lock_guard lock(d.mu);
  if (d.init_count == 0) return NVML_ERROR_UNINITIALIZED;
  auto node = d.store->read();
  if (!node) return NVML_ERROR_UNKNOWN;
  if (Return r = d.inject_fault("nvmlShutdown", **node); r != NVML_SUCCESS) return r;
  if (--d.init_count == 0) d.reset();
  return NVML_SUCCESS;
}

// Every code of nvmlReturn_t, since a planned fault may return any of them.
TESSERA_SIM_EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires a reset";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system blocked the request";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "NVML and driver versions do not match";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_VGPU_ECC_NOT_SUPPORTED: return "vGPU operation not available while ECC is enabled";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient resources";
    case NVML_ERROR_FREQ_NOT_SUPPORTED: return "Frequency not supported";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Struct version mismatch";
    case NVML_ERROR_DEPRECATED: return "Deprecated";
    case NVML_ERROR_NOT_READY: return "Not ready";
    case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
    case NVML_ERROR_INVALID_STATE: return "Invalid state";
    case NVML_ERROR_RESET_TYPE_NOT_SUPPORTED: return "Reset type not supported";
    case NVML_ERROR_UNKNOWN: return "Unknown Error";
  }
  return "Unknown Error";
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  return call("nvmlSystemGetDriverVersion",
              [&](Driver&, const Node& node) { return copy_string(node.driver_version, version, length); });
}

namespace {

nvmlReturn_t cuda_driver_version(const char* function, int* cudaDriverVersion) {
  return call(function, [&](Driver&, const Node& node) {
    if (!cudaDriverVersion) return NVML_ERROR_INVALID_ARGUMENT;
    *cudaDriverVersion = node.cuda_version;
    return NVML_SUCCESS;
  });
}

}  // namespace

TESSERA_SIM_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* cudaDriverVersion) {
  return cuda_driver_version("nvmlSystemGetCudaDriverVersion_v2", cudaDriverVersion);
}

// v1 answers with a version it knows even without libcuda (facts 1.2); the simulated node has one.
TESSERA_SIM_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* cudaDriverVersion) {
  return cuda_driver_version("nvmlSystemGetCudaDriverVersion", cudaDriverVersion);
}

// nvml.h, nvmlDeviceGetCount_v2: v1 leaves out devices NVML may not talk to
// and _v2 counts them; every simulated GPU is accessible, so both count all.
namespace {

nvmlReturn_t device_count(const char* function, unsigned int* deviceCount) {
  return call(function, [&](Driver&, const Node& node) {
    if (!deviceCount) return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = static_cast<unsigned int>(node.gpus.size());
    return NVML_SUCCESS;
  });
}

nvmlReturn_t handle_by_index(const char* function, unsigned int index, nvmlDevice_t* device) {
  return call(function, [&](Driver& d, const Node& node) {
    if (!device || index >= node.gpus.size()) return NVML_ERROR_INVALID_ARGUMENT;
    *device = d.gpu_handle(index);
    return NVML_SUCCESS;
  });
}

// nvml.h, nvmlDeviceGetHandleByPciBusId_v2: "domain:bus:device.function",
// "domain:bus:device" or "bus:device.function", all hexadecimal.
bool parse_bus_id(const char* text, unsigned int& domain, unsigned int& bus, unsigned int& device,
                  unsigned int& function) {
  int used = 0;
  size_t length = std::strlen(text);
  domain = function = 0;
  if (std::sscanf(text, "%x:%x:%x.%x%n", &domain, &bus, &device, &function, &used) == 4 &&
      static_cast<size_t>(used) == length)
    return true;
  domain = function = 0;
  used = 0;
  if (std::sscanf(text, "%x:%x:%x%n", &domain, &bus, &device, &used) == 3 && static_cast<size_t>(used) == length)
    return true;
  domain = function = 0;
  used = 0;
  return std::sscanf(text, "%x:%x.%x%n", &bus, &device, &function, &used) == 3 &&
         static_cast<size_t>(used) == length;
}

// v1 differs only for devices the caller may not use (NOT_FOUND rather than
// NO_PERMISSION, nvml.h): none here.
nvmlReturn_t handle_by_bus_id(const char* function, const char* pciBusId, nvmlDevice_t* device) {
  return call(function, [&](Driver& d, const Node& node) {
    unsigned int domain = 0, bus = 0, dev = 0, fn = 0;
    if (!pciBusId || !device || !parse_bus_id(pciBusId, domain, bus, dev, fn)) return NVML_ERROR_INVALID_ARGUMENT;
    for (uint32_t i = 0; i < node.gpus.size(); ++i) {
      if (domain != 0 || node.gpus[i].bus != bus || dev != 0 || fn != 0) continue;
      if (node.gpus[i].lost) return NVML_ERROR_GPU_IS_LOST;
      *device = d.gpu_handle(i);
      return NVML_SUCCESS;
    }
    return NVML_ERROR_NOT_FOUND;
  });
}

}  // namespace

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  return device_count("nvmlDeviceGetCount_v2", deviceCount);
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int* deviceCount) {
  return device_count("nvmlDeviceGetCount", deviceCount);
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  return handle_by_index("nvmlDeviceGetHandleByIndex_v2", index, device);
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return handle_by_index("nvmlDeviceGetHandleByIndex", index, device);
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* pciBusId, nvmlDevice_t* device) {
  return handle_by_bus_id("nvmlDeviceGetHandleByPciBusId_v2", pciBusId, device);
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char* pciBusId, nvmlDevice_t* device) {
  return handle_by_bus_id("nvmlDeviceGetHandleByPciBusId", pciBusId, device);
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  return call("nvmlDeviceGetHandleByUUID", [&](Driver& d, const Node& node) {
    if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (uint32_t i = 0; i < node.gpus.size(); ++i) {
      if (node.gpus[i].uuid == uuid) {
        *device = d.gpu_handle(i);
        return NVML_SUCCESS;
      }
      // MIG UUIDs give MIG device handles (facts 1.2).
      for (const auto& gi : node.gpus[i].gpu_instances)
        for (const auto& ci : gi.compute_instances)
          if (ci.uuid == uuid) {
            *device = reinterpret_cast<nvmlDevice_t>(d.intern(HandleKind::mig_device, i, ci.uid));
            return NVML_SUCCESS;
          }
    }
    return NVML_ERROR_NOT_FOUND;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  return call("nvmlDeviceGetName", [&](Driver&, const Node& node) {
    DeviceRef ref;
    if (Return r = resolve_device(node, device, ref); r != NVML_SUCCESS) return r;
    const auto& model = model_of(node.gpus[ref.gpu]);
    std::string text = model.nvml_name;
    if (ref.is_mig())
      if (const auto* p = model.profile_by_id(ref.gi->profile_id)) text += " MIG " + p->name;
    return copy_string(text, name, length);
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  return call("nvmlDeviceGetUUID", [&](Driver&, const Node& node) {
    DeviceRef ref;
    if (Return r = resolve_device(node, device, ref); r != NVML_SUCCESS) return r;
    return copy_string(ref.is_mig() ? ref.ci->uuid : node.gpus[ref.gpu].uuid, uuid, length);
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int* minorNumber) {
  return call("nvmlDeviceGetMinorNumber", [&](Driver&, const Node& node) {
    uint32_t gpu = 0;
    if (Return r = resolve_gpu(node, device, gpu); r != NVML_SUCCESS) return r;
    if (!minorNumber) return NVML_ERROR_INVALID_ARGUMENT;
    *minorNumber = node.gpus[gpu].minor;
    return NVML_SUCCESS;
  });
}

// nvml.h declares v1, _v2 and _v3 with the same nvmlPciInfo_t.
namespace {

nvmlReturn_t pci_info(const char* function, nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return call(function, [&](Driver&, const Node& node) {
    DeviceRef ref;
    if (Return r = resolve_device(node, device, ref); r != NVML_SUCCESS) return r;
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    fill_pci(node, ref.gpu, pci);
    return NVML_SUCCESS;
  });
}

}  // namespace

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return pci_info("nvmlDeviceGetPciInfo_v3", device, pci);
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return pci_info("nvmlDeviceGetPciInfo_v2", device, pci);
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return pci_info("nvmlDeviceGetPciInfo", device, pci);
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  return call("nvmlDeviceGetMemoryInfo", [&](Driver&, const Node& node) {
    DeviceRef ref;
    if (Return r = resolve_device(node, device, ref); r != NVML_SUCCESS) return r;
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    uint64_t total = 0, used = 0, reserved = 0;
    memory_of(node, ref, total, used, reserved);
    *memory = nvmlMemory_t{total, total - used, used};
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  return call("nvmlDeviceGetMemoryInfo_v2", [&](Driver&, const Node& node) {
    DeviceRef ref;
    if (Return r = resolve_device(node, device, ref); r != NVML_SUCCESS) return r;
    if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
    // The trap of nvidia-settings #78: the version is sizeof | 2 << 24, not 2.
    if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    uint64_t total = 0, used = 0, reserved = 0;
    memory_of(node, ref, total, used, reserved);
    memory->total = total;
    memory->reserved = reserved;
    memory->free = total - used;
    memory->used = used;
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  return call("nvmlDeviceGetUtilizationRates", [&](Driver&, const Node& node) {
    DeviceRef ref;
    if (Return r = resolve_device(node, device, ref); r != NVML_SUCCESS) return r;
    if (ref.is_mig()) return NVML_ERROR_NOT_SUPPORTED;  // per-instance activity is GPM's job
    if (!utilization) return NVML_ERROR_INVALID_ARGUMENT;
    *utilization = nvmlUtilization_t{node.gpus[ref.gpu].gpu_util, node.gpus[ref.gpu].memory_util};
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t* arch) {
  return call("nvmlDeviceGetArchitecture", [&](Driver&, const Node& node) {
    DeviceRef ref;
    if (Return r = resolve_device(node, device, ref); r != NVML_SUCCESS) return r;
    if (!arch) return NVML_ERROR_INVALID_ARGUMENT;
    *arch = model_of(node.gpus[ref.gpu]).architecture;
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) {
  return call("nvmlDeviceGetCudaComputeCapability", [&](Driver&, const Node& node) {
    DeviceRef ref;
    if (Return r = resolve_device(node, device, ref); r != NVML_SUCCESS) return r;
    if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
    const auto& model = model_of(node.gpus[ref.gpu]);
    *major = model.cc_major;
    *minor = model.cc_minor;
    return NVML_SUCCESS;
  });
}

// Every model here is a data-center part, which drivers of R520 and later
// report as NVML_BRAND_NVIDIA ("Product Brand: NVIDIA" in `nvidia-smi -q`);
// a MIG device answers for its GPU.
TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t* type) {
  return call("nvmlDeviceGetBrand", [&](Driver&, const Node& node) {
    DeviceRef ref;
    if (Return r = resolve_device(node, device, ref); r != NVML_SUCCESS) return r;
    if (!type) return NVML_ERROR_INVALID_ARGUMENT;
    *type = NVML_BRAND_NVIDIA;
    return NVML_SUCCESS;
  });
}

// Sensors and ECC counters belong to the whole GPU: MIG device handles get
// NOT_SUPPORTED, as on real drivers.
namespace {

template <class Read>
nvmlReturn_t whole_gpu_value(const char* function, nvmlDevice_t device, Read&& read) {
  return call(function, [&](Driver&, const Node& node) {
    DeviceRef ref;
    if (Return r = resolve_device(node, device, ref); r != NVML_SUCCESS) return r;
    if (ref.is_mig()) return NVML_ERROR_NOT_SUPPORTED;
    return read(node.gpus[ref.gpu]);
  });
}

}  // namespace

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                                         unsigned int* temp) {
  return whole_gpu_value("nvmlDeviceGetTemperature", device, [&](const SimGpu& g) {
    if (!temp || sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    *temp = g.temperature_c;
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* power) {
  return whole_gpu_value("nvmlDeviceGetPowerUsage", device, [&](const SimGpu& g) {
    if (!power) return NVML_ERROR_INVALID_ARGUMENT;
    *power = g.power_mw;
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                                       unsigned int* clock) {
  return whole_gpu_value("nvmlDeviceGetClockInfo", device, [&](const SimGpu& g) {
    if (!clock) return NVML_ERROR_INVALID_ARGUMENT;
    switch (type) {
      case NVML_CLOCK_GRAPHICS:
      case NVML_CLOCK_SM: *clock = g.sm_clock_mhz; return NVML_SUCCESS;
      case NVML_CLOCK_MEM: *clock = g.mem_clock_mhz; return NVML_SUCCESS;
      case NVML_CLOCK_VIDEO: return NVML_ERROR_NOT_SUPPORTED;
    }
    return NVML_ERROR_INVALID_ARGUMENT;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                                            nvmlEccCounterType_t counterType,
                                                            unsigned long long* eccCounts) {
  return whole_gpu_value("nvmlDeviceGetTotalEccErrors", device, [&](const SimGpu& g) {
    if (!eccCounts || counterType < NVML_VOLATILE_ECC || counterType > NVML_AGGREGATE_ECC)
      return NVML_ERROR_INVALID_ARGUMENT;
    // No reboots here: aggregate equals volatile.
    if (errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED)
      *eccCounts = g.ecc_corrected;
    else if (errorType == NVML_MEMORY_ERROR_TYPE_UNCORRECTED)
      *eccCounts = g.ecc_uncorrected;
    else
      return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
  });
}

namespace {

// The running-process calls differ in the entry they write: v1 pid and
// memory (nvmlProcessInfo_v1_t, 16 bytes), _v2 and _v3 those plus the GPU and
// compute instance ids (nvmlProcessInfo_t, 24 bytes).
template <class Info, class Make>
nvmlReturn_t running_processes(const char* function, nvmlDevice_t device, unsigned int* infoCount, Info* infos,
                               Make make) {
  return call(function, [&](Driver&, const Node& node) {
    DeviceRef ref;
    if (Return r = resolve_device(node, device, ref); r != NVML_SUCCESS) return r;
    if (!infoCount) return NVML_ERROR_INVALID_ARGUMENT;
    std::vector<Info> found;
    for (const auto& p : node.processes) {
      if (p.gpu != ref.gpu) continue;
      if (ref.is_mig() && p.gpu_instance != ref.gi->id) continue;
      found.push_back(make(p));
    }
    unsigned int capacity = *infoCount;
    *infoCount = static_cast<unsigned int>(found.size());
    if (found.size() > capacity) return NVML_ERROR_INSUFFICIENT_SIZE;
    if (!found.empty() && !infos) return NVML_ERROR_INVALID_ARGUMENT;
    for (size_t i = 0; i < found.size(); ++i) infos[i] = found[i];  // the caller's stride: sizeof(Info)
    return NVML_SUCCESS;
  });
}

nvmlProcessInfo_t process_info(const SimProcess& p) {
  return nvmlProcessInfo_t{
      p.pid, p.memory_bytes, p.gpu_instance < 0 ? NVML_INSTANCE_ID_NONE : static_cast<unsigned int>(p.gpu_instance),
      p.compute_instance < 0 ? NVML_INSTANCE_ID_NONE : static_cast<unsigned int>(p.compute_instance)};
}

nvmlProcessInfo_v1_t process_info_v1(const SimProcess& p) { return nvmlProcessInfo_v1_t{p.pid, p.memory_bytes}; }

}  // namespace

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* infoCount,
                                                                        nvmlProcessInfo_t* infos) {
  return running_processes("nvmlDeviceGetComputeRunningProcesses_v3", device, infoCount, infos, process_info);
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* infoCount,
                                                                        nvmlProcessInfo_t* infos) {
  return running_processes("nvmlDeviceGetComputeRunningProcesses_v2", device, infoCount, infos, process_info);
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* infoCount,
                                                                     nvmlProcessInfo_v1_t* infos) {
  return running_processes("nvmlDeviceGetComputeRunningProcesses", device, infoCount, infos, process_info_v1);
}

// nvml.h, nvmlDeviceGetProcessUtilization: one sample per running process
// with non-zero utilisation in the last sample period, newer than
// lastSeenTimeStamp (CPU time, microseconds); NOT_FOUND when there is none;
// with `utilization` NULL, the count needed; not supported in MIG mode. The
// simulated GPU's utilisation is shared evenly by its processes, in periods
// of 1/6 s (the shortest nvml.h gives for a utilisation sample period).
TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                                nvmlProcessUtilizationSample_t* utilization,
                                                                unsigned int* processSamplesCount,
                                                                unsigned long long lastSeenTimeStamp) {
  return call("nvmlDeviceGetProcessUtilization", [&](Driver&, const Node& node) {
    DeviceRef ref;
    if (Return r = resolve_device(node, device, ref); r != NVML_SUCCESS) return r;
    const auto& g = node.gpus[ref.gpu];
    if (ref.is_mig() || g.mig_current) return NVML_ERROR_NOT_SUPPORTED;
    if (!processSamplesCount) return NVML_ERROR_INVALID_ARGUMENT;
    constexpr unsigned long long kPeriodUs = 1000000 / 6;
    auto now_us = static_cast<unsigned long long>(std::chrono::duration_cast<std::chrono::microseconds>(
                                                      std::chrono::system_clock::now().time_since_epoch())
                                                      .count());
    unsigned long long stamp = now_us / kPeriodUs * kPeriodUs;
    std::vector<uint32_t> pids;
    for (const auto& p : node.processes)
      if (p.gpu == ref.gpu) pids.push_back(p.pid);
    std::vector<nvmlProcessUtilizationSample_t> samples;
    auto n = static_cast<unsigned int>(pids.size());
    for (unsigned int i = 0; i < n && stamp > lastSeenTimeStamp; ++i) {
      // An even share, the remainder to the first processes.
      unsigned int sm = g.gpu_util / n + (i < g.gpu_util % n ? 1 : 0);
      unsigned int mem = g.memory_util / n + (i < g.memory_util % n ? 1 : 0);
      if (sm == 0 && mem == 0) continue;
      samples.push_back(nvmlProcessUtilizationSample_t{pids[i], stamp, sm, mem, 0, 0});
    }
    if (samples.empty()) {
      *processSamplesCount = 0;
      return NVML_ERROR_NOT_FOUND;
    }
    unsigned int capacity = utilization ? *processSamplesCount : 0;
    *processSamplesCount = static_cast<unsigned int>(samples.size());
    if (samples.size() > capacity) return NVML_ERROR_INSUFFICIENT_SIZE;
    for (size_t i = 0; i < samples.size(); ++i) utilization[i] = samples[i];
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetTopologyCommonAncestor(nvmlDevice_t device1, nvmlDevice_t device2,
                                                                    nvmlGpuTopologyLevel_t* pathInfo) {
  return call("nvmlDeviceGetTopologyCommonAncestor", [&](Driver&, const Node& node) {
    uint32_t a = 0, b = 0;
    if (Return r = resolve_gpu(node, device1, a); r != NVML_SUCCESS) return r;
    if (Return r = resolve_gpu(node, device2, b); r != NVML_SUCCESS) return r;
    if (!pathInfo) return NVML_ERROR_INVALID_ARGUMENT;
    // An HGX board: GPU pairs share a PCIe switch, each half of the board
    // hangs off one CPU socket.
    if (a == b)
      *pathInfo = NVML_TOPOLOGY_INTERNAL;
    else if (a / 2 == b / 2)
      *pathInfo = NVML_TOPOLOGY_SINGLE;
    else if (a / 4 == b / 4)
      *pathInfo = NVML_TOPOLOGY_NODE;
    else
      *pathInfo = NVML_TOPOLOGY_SYSTEM;
    return NVML_SUCCESS;
  });
}

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                                         nvmlEnableState_t* isActive) {
  return call("nvmlDeviceGetNvLinkState", [&](Driver&, const Node& node) {
    uint32_t gpu = 0;
    if (Return r = resolve_gpu(node, device, gpu); r != NVML_SUCCESS) return r;
    if (!isActive || link >= nvlink_count(model_of(node.gpus[gpu]))) return NVML_ERROR_INVALID_ARGUMENT;
    *isActive = node.gpus[gpu].nvlink_peers.empty() ? NVML_FEATURE_DISABLED : NVML_FEATURE_ENABLED;
    return NVML_SUCCESS;
  });
}

namespace {

nvmlReturn_t nvlink_remote_pci(const char* function, nvmlDevice_t device, unsigned int link, nvmlPciInfo_t* pci) {
  return call(function, [&](Driver&, const Node& node) {
    uint32_t gpu = 0;
    if (Return r = resolve_gpu(node, device, gpu); r != NVML_SUCCESS) return r;
    const auto& peers = node.gpus[gpu].nvlink_peers;
    if (!pci || link >= nvlink_count(model_of(node.gpus[gpu]))) return NVML_ERROR_INVALID_ARGUMENT;
    if (peers.empty()) return NVML_ERROR_NOT_SUPPORTED;
    // Links spread round-robin over the peers.
    fill_pci(node, peers[link % peers.size()], pci);
    return NVML_SUCCESS;
  });
}

}  // namespace

TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                                    nvmlPciInfo_t* pci) {
  return nvlink_remote_pci("nvmlDeviceGetNvLinkRemotePciInfo_v2", device, link, pci);
}

// nvml.h declares v1 with the same nvmlPciInfo_t.
TESSERA_SIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned int link,
                                                                 nvmlPciInfo_t* pci) {
  return nvlink_remote_pci("nvmlDeviceGetNvLinkRemotePciInfo", device, link, pci);
}
