// The simulated driver's MIG rules, applied to a Node: which GPU and compute
// instances may be created where, and what NVML returns when they may not.
// The profiles' facts (placements, slices, limits) are the simulator's own
// hardware table (hardware.hpp); the rules that combine them are its own
// slice-occupancy code, never tessera's layout functions. An unknown profile or a
// placement the profile cannot take is NVML_ERROR_INVALID_ARGUMENT, a
// placement that is taken or a GPU that is full INSUFFICIENT_RESOURCES,
// destroying something in use IN_USE, MIG calls on a GPU not in MIG mode
// NOT_SUPPORTED.
#pragma once

#include <cstdint>
#include <optional>

#include "hardware.hpp"
#include "node.hpp"
#include "nvml/abi.hpp"

namespace tessera::sim {

using Return = nvml::abi::nvmlReturn_t;

SimGpuInstance* find_gpu_instance(Node& node, uint32_t gpu, uint64_t uid);
const SimGpuInstance* find_gpu_instance(const Node& node, uint32_t gpu, uint64_t uid);
// The compute instance with `uid` and the GPU instance that holds it.
struct ComputeRef {
  const SimGpuInstance* gi = nullptr;
  const SimComputeInstance* ci = nullptr;
};
ComputeRef find_compute_instance(const Node& node, uint32_t gpu, uint64_t uid);

[[nodiscard]] Return create_gpu_instance(Node& node, uint32_t gpu, uint32_t profile_id,
                                         std::optional<Placement> placement, uint64_t& uid);
[[nodiscard]] Return destroy_gpu_instance(Node& node, uint32_t gpu, uint64_t uid);
uint32_t remaining_capacity(const Node& node, uint32_t gpu, uint32_t profile_id);

[[nodiscard]] Return create_compute_instance(Node& node, uint32_t gpu, uint64_t gi_uid, uint32_t profile_id,
                                             uint64_t& uid);
[[nodiscard]] Return destroy_compute_instance(Node& node, uint32_t gpu, uint64_t ci_uid);
uint32_t remaining_compute_capacity(const Node& node, uint32_t gpu, uint64_t gi_uid, uint32_t profile_id);

// Enabling or disabling MIG: applied at once on an idle GPU, left pending
// (activation IN_USE) while processes run; disabling with instances left is IN_USE.
[[nodiscard]] Return set_mig_mode(Node& node, uint32_t gpu, bool enable, Return& activation);
// A GPU reset: applies a pending MIG mode; IN_USE while processes run.
[[nodiscard]] Return reset_gpu(Node& node, uint32_t gpu);
// The node rebooted: every process ends; MIG instances, memory limits, the
// time-slice policy and the ECC volatile counts are gone (the driver keeps
// none across a boot); a lost GPU is back. MIG mode is off again: current
// drivers keep no MIG mode across a reboot (NVIDIA MIG User Guide, "Enable
// MIG Mode": no status bit in the InfoROM any more; hence mig-parted's boot
// service; k8s-device-plugin issue #343).
void reboot_node(Node& node);

// Processes on a GPU, a GPU instance (gi >= 0) or a compute instance (ci >= 0 too).
bool has_processes(const Node& node, uint32_t gpu, int64_t gi = -1, int64_t ci = -1);

}  // namespace tessera::sim
