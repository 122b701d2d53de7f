// The DRA driver's model of a node, as pure values: the ResourceSlices'
// counter sets and devices (one device per whole GPU and per legal MIG
// profile x placement, each consuming its GPU's counters, so the scheduler
// never hands out two that overlap), the order they are listed in, and the
// attributes and capacities NVIDIA's DRA driver publishes, so claims written
// for it match unchanged. No I/O: the DRA adapter (src/dra) reads the GPUs,
// publishes the slices and prepares claims.
//
// The counter model is exact for tessera's catalog (docs/design-dra.md): per
// GPU one counter per memory slice (a placement consumes the slices it
// covers), the compute slices, the GPU-instance limit, and one counter per
// profile whose own limit binds (the media-engine variants). A set of
// devices fits the counters if and only if core's check_layout accepts it
// (tests/sharing/dra_test.cpp checks every subset on the A100 and H100).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/catalog.hpp"
#include "core/error.hpp"
#include "core/mig_layout.hpp"

namespace tessera::sharing::dra {

inline constexpr const char* kDefaultDriver = "gpu.nvidia.com";

struct Taint {
  std::string key;
  std::string value;
  std::string effect;  // NoSchedule, NoExecute
  friend bool operator==(const Taint&, const Taint&) = default;
};

// What the driver knows of one GPU.
struct Gpu {
  uint32_t index = 0;
  uint32_t minor = 0;
  std::string uuid;
  const GpuModel* model = nullptr;  // null: a model the catalog lacks (served whole only)
  std::string product_name;         // NVML's name, "NVIDIA A100-SXM4-80GB"
  std::string driver_version;       // "550.90.07"
  std::string cuda_driver_version;  // "12.4"
  // As the driver reports them (NVML), for any GPU; empty: ask the catalog.
  std::string architecture;         // "Hopper", "Ada Lovelace"
  std::string compute_capability;   // "9.0"
  std::string brand;                // "Nvidia"; empty: not published
  // Per catalog profile index, the profile as the driver reports it (NVML's profile info): drivers
  // differ, the catalog estimates some figures, and a MIG device's capacities are what its driver
  // gives. Absent: the catalog's figures.
  struct ReportedProfile {
    uint64_t memory_mib = 0;       // 0: the catalog's (a driver that reports none)
    uint32_t multiprocessors = 0;  // 0: the catalog's
    Engines engines;               // copy, decoders, encoders, JPEG, OFA: as reported, 0 included
  };
  std::map<uint32_t, ReportedProfile> reported_profiles;
  std::string pci_bus_id;           // "0000:07:00.0"
  std::string pcie_root;            // its PCIe root complex, "pci0000:00" (sysfs); empty: unknown
  std::optional<int64_t> numa_node; // its NUMA node (sysfs); none: unknown or none
  uint64_t memory_bytes = 0;
  bool mig_enabled = false;
  // MIG mode can be switched at prepare without a GPU reset (Hopper and
  // newer); otherwise the GPU is served only as it is now (MIG devices when
  // MIG is on, the whole GPU when off).
  bool mig_mode_switchable = false;
  // Health, as device taints (the adapter decides keys and effects from
  // NVML's events): on every device of the GPU, and on one MIG instance's.
  std::vector<Taint> taints;
  std::map<PlacedInstance, std::vector<Taint>> instance_taints;
};

// A device attribute: string, int, bool or version (semver "8.0.0").
struct Version {
  std::string value;
  friend bool operator==(const Version&, const Version&) = default;
};
using Attribute = std::variant<std::string, int64_t, bool, Version>;

struct Counter {
  std::string name;
  int64_t value = 0;
  friend bool operator==(const Counter&, const Counter&) = default;
};

struct CounterSet {
  std::string name;  // "gpu-<minor>-counter-set"
  std::vector<Counter> counters;
};


struct Device {
  std::string name;  // "gpu-0", "gpu-0-mig-1g10gb-19-3"
  uint32_t gpu = 0;  // index into the node's GPUs
  std::optional<PlacedInstance> mig;  // the profile and start a MIG device cuts
  bool fixed = false;                 // an instance that exists and was not cut by tessera
  std::map<std::string, Attribute> attributes;  // without the driver's domain ("type", "uuid", ...)
  std::map<std::string, uint64_t> capacity;     // "memory" in bytes; "multiprocessors", ... counts
  std::string counter_set;
  std::vector<Counter> consumes;
  bool allow_multiple_allocations = false;  // memory shares (consumable capacity)
  std::vector<Taint> taints;
};

enum class Order {
  // Best fit, least damage: the fullest GPU first; within a GPU the placement
  // that leaves the most larger placements free, small profiles from the end.
  // Depends on what is taken, so the slices are listed again after a change.
  tessera,
  // GPU by GPU, each profile's placements by start (NVIDIA's driver's order).
  by_start,
};

// NVIDIA's consumable-shares modes (dra-driver-nvidia-gpu --consumable-shares,
// consumable_shares.go): how claims ask for a shareable device.
//  - memory: each claim takes `memory` in 1 MiB steps, by default all of it;
//  - unlimited: `memory` by default 0, so any number of claims fit;
//  - count: as unlimited, plus a `shares` capacity of `count`, one per claim
//    by default, so at most `count` claims share the device.
struct SharesMode {
  enum class Kind { memory, unlimited, count } kind = Kind::memory;
  uint32_t count = 0;
  friend bool operator==(const SharesMode&, const SharesMode&) = default;
};
// "memory", "unlimited" or a whole number from 1 to 65535.
[[nodiscard]] Result<SharesMode> parse_shares_mode(const std::string& text);
std::string to_string(const SharesMode& mode);

struct PoolOptions {
  Order order = Order::tessera;
  bool memory_shares = false;  // whole GPUs and MIG devices offer `memory` to many claims
  uint64_t share_step_bytes = 1ull << 20;  // the smallest share: 1 MiB
};

// "1g.10gb+me" -> "1g10gb-me", as in NVIDIA's device names (dra-driver-nvidia-gpu
// cmd/gpu-kubelet-plugin: the profile without dots, made RFC 1123).
std::string profile_token(const std::string& profile);

// What is taken on a GPU: the GPU instances that exist or are promised to a
// claim, as profile (index into the model) and start; kWholeGpuProfile marks
// the whole GPU given to a claim.
using Taken = std::vector<PlacedInstance>;
inline constexpr uint32_t kWholeGpuProfile = UINT32_MAX;

// The counter set of one GPU (none for a model the catalog lacks), less
// what `fixed` instances consume: instances found on the GPU that tessera did
// not cut (made by mig-parted before, or by hand) hold their slices, so the
// scheduler never hands out a placement that overlaps them.
std::optional<CounterSet> counter_set(const Gpu& gpu, const Taken& fixed = {});


// Every device of the node, in the order the scheduler should meet them:
// `taken[i]` is what claims hold or were promised on GPU i, `fixed[i]` the
// instances found there that tessera did not cut. A GPU's MIG devices are
// listed only where MIG is on or can be turned on; its whole-GPU device only
// where MIG is off or can be turned off, and no fixed instance is in the
// way. A fixed instance is listed as it is, consuming no counters (its
// slices are already out of the counter set); placements that overlap it
// are left out. Devices carry their GPU's taints and their instance's.
std::vector<Device> devices(const std::vector<Gpu>& gpus, const std::vector<Taken>& taken, const PoolOptions& options,
                            const std::vector<Taken>& fixed = {});

// What an API server without partitionable devices can be given safely
// (Kubernetes 1.34 and 1.35 unless the DRAPartitionableDevices and
// DRAConsumableCapacity gates are on: the server drops sharedCounters,
// consumesCounters and allowMultipleAllocations, and every placement would
// look independent): whole GPUs on which no existing MIG instance is listed,
// and the MIG instances that exist (`fixed`), none consuming counters or
// taking more than one claim. MIG placements to cut are left out.
std::vector<Device> without_partitions(const std::vector<Device>& devices);

// Whether `device` can be added to what is taken on its GPU: the counters it
// consumes are all still there (what the scheduler checks).
bool fits(const Gpu& gpu, const Device& device, const Taken& taken);

// The counter consumption of a MIG profile at a start (for tests and the
// benchmark's scheduler model).
std::vector<Counter> consumption(const GpuModel& model, const PlacedInstance& instance);

}  // namespace tessera::sharing::dra
