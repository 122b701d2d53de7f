// One sample of a node, as the exporter shows it: per GPU and per MIG device
// the labels dcgm-exporter gives it and the values NVML gave this interval,
// per shared replica what its container's ledger holds, and the sampler's own
// figures. Plain values: rendering and tests read them without NVML.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera::exporter {

// Who holds a device, from the kubelet's pod-resources API.
struct Owner {
  std::string pod;
  std::string pod_namespace;
  std::string container;
};

// The labels of a GPU or MIG device's series (dcgm-exporter's names in
// docs/metrics.md). For a MIG device, everything but the GPU_I_* labels is
// its parent GPU's.
struct DeviceLabels {
  uint32_t gpu = 0;         // the GPU's NVML index
  std::string uuid;         // the GPU's UUID (the parent's for a MIG device)
  std::string pci_bus_id;   // "00000000:07:00.0"
  std::string device;       // "nvidia<minor>"
  std::string model_name;   // NVML's name of the GPU, "NVIDIA A100-SXM4-80GB"
  std::string hostname;
  bool mig = false;
  std::string mig_profile;  // "1g.10gb"
  uint32_t gpu_instance_id = 0;
  std::string device_uuid;  // the GPU's or MIG device's own UUID (attribution; not a label)
};

struct DeviceSample {
  DeviceLabels labels;
  bool up = true;  // false: an NVML call for this device failed this interval
  std::optional<Owner> owner;
  // Framebuffer, MiB (floor of bytes / 2^20); used excludes what the driver reserves.
  std::optional<uint64_t> fb_used_mib, fb_free_mib, fb_total_mib, fb_reserved_mib;
  // GPM ratios 0-1 between the interval's two samples (Hopper and newer).
  std::optional<double> gr_engine_active, sm_active, sm_occupancy, dram_active, tensor_active;
  // Whole GPUs only.
  std::optional<uint32_t> temperature_c;
  std::optional<double> power_w;
  std::optional<uint32_t> sm_clock_mhz, mem_clock_mhz;
  std::optional<uint64_t> ecc_sbe_volatile, ecc_dbe_volatile;
  // Xid events seen since the exporter started (by NVML's event set); a MIG
  // device's are those whose event named its GPU instance.
  std::optional<uint64_t> last_xid;
  std::map<uint64_t, uint64_t> xid_counts;
};

// One series of a time-sliced or MPS replica held by a container.
struct ReplicaSample {
  DeviceLabels labels;   // the device the replica is a share of
  std::string replica;   // "<uuid>::<n>"; the container's replicas of one device, comma-joined, if several
  Owner owner;
  uint64_t used_bytes = 0;
  uint64_t quota_bytes = 0;
  // Held by the driver's own memory limit (the memory hook's record), not
  // only by the quota library.
  bool driver_enforced = false;
};

struct Sample {
  std::vector<DeviceSample> devices;
  std::vector<ReplicaSample> replicas;
  // Unix time of the last sample that read the device list; 0 before the first.
  double last_success_unix = 0;
  double duration_seconds = 0;
};

}  // namespace tessera::exporter
