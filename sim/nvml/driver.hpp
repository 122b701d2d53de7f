// The simulated driver's per-process half: NVML's init count, the node store
// opened by nvmlInit_v2 (directory from TESSERA_SIM), and the handles
// given out. Handles are interned by what they name (a GPU index, or the
// never-reused uid of an instance), so asking twice gives the same pointer,
// and a handle to a destroyed instance stays invalid. This is a C library's
// state, hence one per process; every entry point takes its mutex. The node
// directory is read at the first nvmlInit_v2, so a process uses one node
// until its last nvmlShutdown.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>

#include "mig_engine.hpp"
#include "node_store.hpp"
#include "nvml/abi.hpp"
#include "nvml/functions.hpp"

// Declares every entry point with the loader's signatures, so a definition
// below that disagrees fails to compile.
namespace tessera::nvml::abi {
extern "C" {
#define TESSERA_SIM_DECLARE(ret, name, params) ret name params;
TESSERA_NVML_FUNCTIONS(TESSERA_SIM_DECLARE, TESSERA_SIM_DECLARE)
#undef TESSERA_SIM_DECLARE
}
}  // namespace tessera::nvml::abi

// The older and unversioned entry points a real libnvidia-ml.so.1 exports
// beside the ones tessera binds, for outside clients that dlsym them by name
// (HAMi-core's interposer, programs built against an old nvml.h). Source:
// nvml.h, the declarations under `#ifdef NVML_NO_UNVERSIONED_FUNC_DEFS` (NVML
// 12.2 and 13.3 headers), and the 11.0 header for the layouts older entry
// points write. Declared here so a definition that drifts fails to compile.
namespace tessera::sim::compat {

using namespace nvml::abi;

// nvml.h nvmlProcessInfo_v1_t: what nvmlDeviceGet*RunningProcesses (v1) fill, 16 bytes.
struct nvmlProcessInfo_v1_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
};
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16);

// nvml.h (11.0) nvmlComputeInstanceInfo_t before `placement` was added, 24
// bytes: what nvmlComputeInstanceGetInfo (v1) writes (facts 1.5 #1).
struct nvmlComputeInstanceInfo_v1_t {
  nvmlDevice_t device;
  nvmlGpuInstance_t gpuInstance;
  unsigned int id;
  unsigned int profileId;
};
static_assert(sizeof(nvmlComputeInstanceInfo_v1_t) == 24);

// nvmlEventData_t before gpuInstanceId/computeInstanceId: what nvmlEventSetWait
// (v1) fills, 24 bytes; _v2 fills the instance ids too (facts 1.2).
struct nvmlEventData_v1_t {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;
};
static_assert(sizeof(nvmlEventData_v1_t) == 24);

// nvml.h nvmlProcessUtilizationSample_t (nvmlDeviceGetProcessUtilization), 32 bytes.
struct nvmlProcessUtilizationSample_t {
  unsigned int pid;
  unsigned long long timeStamp;  // CPU timestamp, microseconds
  unsigned int smUtil;
  unsigned int memUtil;
  unsigned int encUtil;
  unsigned int decUtil;
};
static_assert(sizeof(nvmlProcessUtilizationSample_t) == 32);

extern "C" {
nvmlReturn_t nvmlInit(void);
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* cudaDriverVersion);
nvmlReturn_t nvmlDeviceGetCount(unsigned int* deviceCount);
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char* pciBusId, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char* pciBusId, nvmlDevice_t* device);
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t* pci);
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci);
nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t device, unsigned int link, nvmlPciInfo_t* pci);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* infoCount,
                                                  nvmlProcessInfo_v1_t* infos);
nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t* utilization,
                                             unsigned int* processSamplesCount, unsigned long long lastSeenTimeStamp);
nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_v1_t* data, unsigned int timeoutms);
nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t computeInstance, nvmlComputeInstanceInfo_v1_t* info);
nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements(nvmlDevice_t device, unsigned int profileId,
                                                        nvmlGpuInstancePlacement_t* placements, unsigned int* count);
}

}  // namespace tessera::sim::compat

// Exported NVML entry points: default visibility in a library built with
// -fvisibility=hidden, C linkage.
#define TESSERA_SIM_EXPORT extern "C" __attribute__((visibility("default")))

namespace tessera::sim {

using namespace nvml::abi;

enum class HandleKind : uint32_t { gpu, mig_device, gpu_instance, compute_instance };

constexpr uint32_t kHandleMagic = 0x7E55E2A1;

struct SimHandle {
  uint32_t magic = kHandleMagic;
  HandleKind kind = HandleKind::gpu;
  uint32_t gpu = 0;
  uint64_t uid = 0;  // GPU instance uid, or compute instance uid for MIG devices
};

struct SimEventSet {
  uint32_t magic = kHandleMagic;
  std::map<uint32_t, unsigned long long> registered;  // GPU index -> event types
  uint64_t last_seq = 0;
};

struct SimGpmSample {
  uint32_t magic = kHandleMagic;
  bool taken = false;
  uint32_t gpu = 0;
  int64_t gpu_instance = -1;
  Activity activity;
  uint64_t taken_ns = 0;
};

// A device handle resolved against the current node.
struct DeviceRef {
  uint32_t gpu = 0;
  const SimGpuInstance* gi = nullptr;      // set for MIG devices
  const SimComputeInstance* ci = nullptr;  // set for MIG devices
  bool is_mig() const { return ci != nullptr; }
};

class Driver {
 public:
  Driver() = default;
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;
  ~Driver();

  std::mutex mu;
  int init_count = 0;
  std::unique_ptr<NodeStore> store;
  std::set<SimEventSet*> event_sets;
  std::set<SimGpmSample*> gpm_samples;
  // NVML entry points called in this process, by name (for benchmarks).
  std::map<std::string, uint64_t> calls;

  SimHandle* intern(HandleKind kind, uint32_t gpu, uint64_t uid);
  nvmlDevice_t gpu_handle(uint32_t gpu) { return reinterpret_cast<nvmlDevice_t>(intern(HandleKind::gpu, gpu, 0)); }
  // Drops every handle and object (on the last nvmlShutdown).
  void reset();

  // NVML_SUCCESS, or the error a planned fault makes this call return;
  // `current` is the node as just read (most calls have no fault planned).
  Return inject_fault(const char* function, const Node& current);
  // Applies `change` under the node lock; writes the node back when it
  // returns NVML_SUCCESS. A crash fault of this call ends the process then.
  Return mutate(const std::function<Return(Node&)>& change);
  // A crash fault fired on the call in progress: mutate() exits after its change.
  bool crash_after_change = false;

 private:
  std::map<std::tuple<HandleKind, uint32_t, uint64_t>, std::unique_ptr<SimHandle>> handles_;
};

Driver& driver();

// Resolves a device handle: a whole GPU or a live MIG device.
Return resolve_device(const Node& node, nvmlDevice_t device, DeviceRef& out);
// Resolves a whole-GPU handle only (INVALID_ARGUMENT for a MIG device).
Return resolve_gpu(const Node& node, nvmlDevice_t device, uint32_t& gpu);
Return resolve_gpu_instance(const Node& node, nvmlGpuInstance_t handle, uint32_t& gpu, const SimGpuInstance*& gi);
Return resolve_compute_instance(const Node& node, nvmlComputeInstance_t handle, uint32_t& gpu, ComputeRef& ref);

// The common frame of an entry point: initialised, fault plan, current node.
template <class Body>
Return call(const char* function, Body&& body) {
  auto& d = driver();
  std::lock_guard lock(d.mu);
  if (d.init_count == 0 || !d.store) return NVML_ERROR_UNINITIALIZED;
  ++d.calls[function];
  auto node = d.store->read();
  if (!node) return NVML_ERROR_UNKNOWN;
  if (Return r = d.inject_fault(function, **node); r != NVML_SUCCESS) return r;
  return body(d, **node);
}

// Copies `text` into an NVML string buffer; INSUFFICIENT_SIZE when it does not fit.
Return copy_string(const std::string& text, char* buffer, unsigned int length);

constexpr uint64_t kMiB = 1024ULL * 1024ULL;

}  // namespace tessera::sim
