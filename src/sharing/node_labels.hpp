// The Node labels NVIDIA's GPU feature discovery (GFD) writes, computed from
// what tessera knows, so that selectors written for GFD keep working on nodes
// tessera serves. Pure: values in, values out; the node agent diffs the result
// against the Node and patches. docs/node-labels.md lists every label, its
// value and the GFD rule it follows.
//
// The rules are GFD's as it stands in NVIDIA/k8s-device-plugin (where GFD now
// lives; internal/lm/*.go), re-expressed, not copied. Where tessera lacks the
// data, the label is left out rather than guessed:
//   nvidia.com/gpu.mode        PCI class of every GPU (sysfs); not in the Inventory
//   nvidia.com/gpu.clique      NVLink fabric cluster UUID and clique id; not read
//   nvidia.com/vgpu.*          vGPU host driver facts; not read
//   nvidia.com/gfd.timestamp   a time would change the labels on every pass
//   nvidia.com/gpu.machine     only when machine_type is given
//   cuda.* labels              only when the versions are given and well formed
//   gpu.memory                 only from NVML's total (GpuFacts) or a catalog figure
//                              that is not an estimate
//   MIG multiprocessors        only when the catalog's SM count is not an estimate
//   MIG engines.*              only when the catalog's row was observed on hardware
//   mig.capable                only when some GPU is known capable or all are known not
// A value Kubernetes would refuse (over 63 characters, a bad character) is
// left out and reported in NodeLabels::dropped: GFD writes it and NFD then
// drops it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/device_plugin.hpp"
#include "core/catalog.hpp"
#include "sharing/inventory.hpp"

namespace tessera::sharing {

// What NVML says of one GPU that the Inventory does not keep; each field
// empty or unset when the agent did not read it.
struct GpuFacts {
  std::string name;                 // nvmlDeviceGetName: "NVIDIA A100-SXM4-80GB"
  uint64_t memory_total_bytes = 0;  // nvmlDeviceGetMemoryInfo's total (the Inventory keeps total less reserved)
  std::optional<bool> mig_capable;  // nvmlDeviceGetMigMode answered (true) or said NOT_SUPPORTED (false)
};

struct LabelInputs {
  LabelInputs(const Inventory& inv, const config::DevicePluginConfig& cfg) : inventory(inv), config(cfg) {}

  const Inventory& inventory;
  const config::DevicePluginConfig& config;   // migStrategy and sharing, as the plugin serves them
  const Catalog* catalog = nullptr;           // per-profile facts; nullptr: Catalog::builtin()
  std::map<std::string, GpuFacts> gpu_facts;  // by GPU UUID
  std::string driver_version;       // nvmlSystemGetDriverVersion, "550.107.02"; empty: driver labels left out
  std::string cuda_driver_version;  // "12.4" (nvmlSystemGetCudaDriverVersion_v2); empty: CUDA labels left out
  std::string machine_type;         // what GFD reads from /sys/class/dmi/id/product_name; empty: left out
  // Written as nvidia.com/mig.config and nvidia.com/mig.config.state when not
  // empty. Neither is owned (owned_label): the GPU Operator, users and
  // mig-manager write them too, so an empty value never removes them.
  std::string mig_config;
  std::string mig_config_state;
};

struct NodeLabels {
  std::map<std::string, std::string> labels;  // key -> value, every one valid for Kubernetes
  std::vector<std::string> dropped;           // "key=value: why" for each label left out as invalid
};

[[nodiscard]] NodeLabels node_labels(const LabelInputs& inputs);

// Whether tessera manages `key`: the agent removes such a key when the Node
// has it and node_labels() no longer produces it (a stale mig-1g.10gb.* after
// a layout change, mig.strategy after a switch to none). The GFD names of
// node_labels() plus nvidia.com/mig-<profile>.<attribute> for any profile.
[[nodiscard]] bool owned_label(std::string_view key);

// The keys of `current` (the Node's labels) that are owned and absent from
// `wanted` (node_labels().labels): what the agent's patch deletes. Sorted.
[[nodiscard]] std::vector<std::string> stale_labels(const std::map<std::string, std::string>& current,
                                                    const std::map<std::string, std::string>& wanted);

// Kubernetes' label rules (apimachinery's IsQualifiedName and
// IsValidLabelValue): nullopt when valid, else why not.
[[nodiscard]] std::optional<std::string> label_key_problem(std::string_view key);
[[nodiscard]] std::optional<std::string> label_value_problem(std::string_view value);

// GFD's sanitise: characters other than letters, digits, '-', '_', '.' and
// spaces are removed, then runs of spaces become one '-' (and outer spaces go).
[[nodiscard]] std::string gfd_sanitise(std::string_view text);

// GFD's family for a compute capability: "ampere" for 8.0, "hopper" for 9.0,
// "undefined" for a major it does not know.
[[nodiscard]] std::string_view gfd_family(uint32_t major, uint32_t minor);

}  // namespace tessera::sharing
