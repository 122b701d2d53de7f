// A simulated GPU node, as data: the topology (fixed when the node is
// created) and the driver's state (MIG mode, GPU and compute instances,
// processes, pending events, the fault plan). Serialised as one JSON file in
// the node's directory; see node_store.hpp for how processes share it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.hpp"  // Result and Errc only (header-only; the simulator links no tessera code)
#include "hardware.hpp"

namespace tessera::sim {

// Synthetic activity, in percent (GPM metrics and utilisation).
struct Activity {
  double sm_util = 0;
  double sm_occupancy = 0;
  double dram_bw_util = 0;
  double graphics_util = 0;
  double tensor_util = 0;
};

struct SimComputeInstance {
  uint64_t uid = 0;  // never reused, so stale handles stay stale
  uint32_t id = 0;
  uint32_t profile_id = 0;
  uint32_t start = 0;  // compute slices inside the GPU instance
  uint32_t size = 0;
  std::string uuid;  // the MIG device's "MIG-..."
};

struct SimGpuInstance {
  uint64_t uid = 0;
  uint32_t id = 0;
  uint32_t profile_id = 0;
  uint32_t start = 0;  // memory slices
  uint32_t size = 0;
  Activity activity;
  std::vector<SimComputeInstance> compute_instances;
};

// A driver-enforced memory limit of one cgroup partition on a GPU (R615+):
// what nvmlDeviceSetMemoryLimits_v1 recorded for the cgroup directory.
struct SimMemoryLimit {
  std::string name_space;  // the cgroup's directory, as given
  uint64_t soft = 0;
  uint64_t hard = 0;
};

struct SimGpu {
  std::string model;  // the model's name in the simulator's hardware table (hardware.hpp)
  std::string uuid;
  uint32_t bus = 0;
  uint32_t minor = 0;
  std::vector<uint32_t> nvlink_peers;  // GPU indices
  bool mig_current = false;
  bool mig_pending = false;
  uint32_t gpu_util = 0;
  uint32_t memory_util = 0;
  Activity activity;
  std::vector<SimGpuInstance> gpu_instances;
  // Fallen off the bus: every call on the GPU or its MIG devices returns
  // NVML_ERROR_GPU_IS_LOST until a reset.
  bool lost = false;
  // Memory the driver keeps for itself on a whole GPU: reported as
  // `reserved` (and inside `used`) by nvmlDeviceGetMemoryInfo_v2, as real
  // drivers report hundreds of MiB (R510+).
  uint64_t reserved_mib = 0;
  // Sensors of the whole GPU (idle values of an A100 SXM; set with the
  // control call's "activity").
  uint32_t temperature_c = 33;
  uint32_t power_mw = 62000;
  uint32_t sm_clock_mhz = 1410;
  uint32_t mem_clock_mhz = 1593;
  // Volatile ECC error counts: each ECC event raised adds one.
  uint64_t ecc_corrected = 0;
  uint64_t ecc_uncorrected = 0;
  std::vector<SimMemoryLimit> memory_limits;
  // The compute time-slice policy `nvidia-smi compute-policy --set-timeslice`
  // sets: 0 default, 1 short, 2 medium, 3 long (sim/nvml/smi.cpp).
  uint32_t compute_timeslice = 0;
};

// Instance ids are -1 for a process on a whole GPU.
struct SimProcess {
  uint32_t pid = 0;
  uint32_t gpu = 0;
  int64_t gpu_instance = -1;
  int64_t compute_instance = -1;
  uint64_t memory_bytes = 0;
};

struct SimEvent {
  uint64_t seq = 0;
  uint32_t gpu = 0;
  uint64_t type = 0;
  uint64_t data = 0;
  int64_t gpu_instance = -1;
  int64_t compute_instance = -1;
};

// Calls number nth .. nth + times - 1 of `function` (counted across every
// process using the node) return `error`.
struct SimFault {
  std::string function;
  uint32_t nth = 1;
  uint32_t times = 1;
  uint32_t calls = 0;
  int error = 999;
  // Instead of an error: the call makes its change, then the calling process
  // dies at once (exit status 137, as if SIGKILLed), before it can record
  // what it did. Only for calls that change the node (control.cpp checks).
  bool crash = false;
};

struct Node {
  uint64_t seed = 0;
  std::string driver_version = "550.90.07";
  int cuda_version = 12040;
  std::vector<SimGpu> gpus;
  std::vector<SimProcess> processes;
  std::vector<SimEvent> events;
  uint64_t next_event_seq = 1;
  uint64_t next_uid = 1;
  uint64_t mig_uuids_issued = 0;
  std::vector<SimFault> faults;
  // False: the caller is not root; MIG changes return NVML_ERROR_NO_PERMISSION
  // as the real driver does for unprivileged processes.
  bool privileged = true;
};

struct NodeSpec {
  std::string gpu;  // model name, NVML name or alias (hardware.hpp)
  uint32_t count = 1;
  bool nvlink_all = false;
  bool mig = false;  // start with MIG mode enabled
  uint64_t seed = 1;
  bool privileged = true;
};

// A fresh node of the simulator's hardware table; errors name an unknown model or bad count.
[[nodiscard]] Result<Node> make_node(const NodeSpec& spec);

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", the same for the same inputs.
std::string make_uuid(const char* prefix, uint64_t seed, uint64_t salt, uint64_t index);
// The next MIG device UUID of `node` (advances its counter).
std::string next_mig_uuid(Node& node);

// The hardware model of a simulated GPU (found when the node was created).
const hw::Gpu& model_of(const SimGpu& gpu);

std::string to_json_text(const Node& node);
[[nodiscard]] Result<Node> node_from_json_text(const std::string& text);

// Appends an event, keeping the most recent few hundred.
void push_event(Node& node, uint32_t gpu, uint64_t type, uint64_t data, int64_t gi = -1, int64_t ci = -1);

}  // namespace tessera::sim
