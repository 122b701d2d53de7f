// A ResourceClaim as the DRA driver reads it at prepare time: which of this
// node's devices the scheduler allocated to it (status.allocation), the
// memory share it took of a shareable device (consumedCapacity), and the
// opaque configuration meant for this driver, in NVIDIA's format
// (resource.nvidia.com/v1beta1 GpuConfig and MigDeviceConfig; their
// `sharing` block), so claims written for NVIDIA's driver work unchanged.
// Pure: parsing and validation only; every error says which claim, which
// field and why.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace tessera::dra {

inline constexpr const char* kNvidiaConfigApiVersion = "resource.nvidia.com/v1beta1";

// NVIDIA's TimeSlicingConfig intervals; the index is the level
// `nvidia-smi compute-policy --set-timeslice` takes (0=DEFAULT, 1=SHORT,
// 2=MEDIUM, 3=LONG; NVIDIA, "Improving GPU Utilization in Kubernetes").
inline constexpr std::string_view kTimeSliceIntervals[] = {"Default", "Short", "Medium", "Long"};

struct SharingConfig {
  enum class Strategy { none, time_slicing, mps } strategy = Strategy::none;
  // TimeSlicing: the interval asked for (an index into kTimeSliceIntervals),
  // none when the config names none. It is the whole GPU's policy.
  std::optional<uint32_t> timeslice;
  // MPS (NVIDIA's MpsConfig): the clients' active thread percentage and
  // pinned device memory limit, for every device or per device (by UUID or
  // by index among the claim's devices).
  std::optional<uint32_t> active_thread_percentage;
  std::optional<uint64_t> pinned_memory_limit;
  std::map<std::string, uint64_t> per_device_pinned_memory_limit;
  bool multi_user = false;
  friend bool operator==(const SharingConfig&, const SharingConfig&) = default;
};

struct DeviceConfig {
  enum class Kind { gpu, mig } kind = Kind::gpu;  // GpuConfig or MigDeviceConfig
  SharingConfig sharing;
  friend bool operator==(const DeviceConfig&, const DeviceConfig&) = default;
};

// Parses one opaque `parameters` object. Unknown fields, wrong types, an
// unknown kind or strategy, a percentage outside 1..100 and a limit that is
// not a positive quantity are errors.
[[nodiscard]] Result<DeviceConfig> parse_device_config(const nlohmann::json& parameters);

struct AllocatedDevice {
  std::string request;  // the claim's request ("gpu", or "gpu/small" for a subrequest)
  std::string pool;
  std::string device;
  std::optional<std::string> share_id;   // set when the device is allocated to many claims
  std::optional<uint64_t> memory_bytes;  // consumedCapacity.memory
  std::optional<DeviceConfig> config;    // the config that applies to its request, if any
  // Admin access (resource.k8s.io/v1, GA in 1.36: allowed only in namespaces
  // labelled resource.kubernetes.io/admin-access, which the API server
  // checks): the device is given for monitoring or maintenance, shared with
  // whatever ordinary claims hold it, and never counted as their user.
  bool admin = false;
};

struct ClaimAllocation {
  std::string uid;
  std::string claim_namespace;
  std::string name;
  std::vector<AllocatedDevice> devices;  // this driver's devices in this node's pool only
};

// Reads `claim` (a ResourceClaim object) for `driver` and `pool`. Errors: the
// claim is not allocated, its UID is not `expected_uid` (the claim was
// deleted and created again), or an opaque config for this driver cannot be
// read. Configs apply in order, class configs before the claim's own, each
// to its requests (all when it names none); the last that applies wins.
[[nodiscard]] Result<ClaimAllocation> read_allocation(const nlohmann::json& claim, const std::string& driver,
                                                      const std::string& pool, const std::string& expected_uid);

}  // namespace tessera::dra
