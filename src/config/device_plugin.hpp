// NVIDIA k8s-device-plugin's config file (version v1): flags and sharing
// (time-slicing or MPS replicas), read as NVIDIA's api/config/v1 reads it:
// what it accepts is accepted, what it rejects (including the checks its
// plugin makes at start: imex channel ids, deviceDiscoveryStrategy, an empty
// mpsRoot with MPS) is rejected; what it ignores or what will share nothing
// (an unknown field, a name that matches no resource) is a warning. Defaults
// as NVIDIA documents them; beyond NVIDIA, `rename` and `devices` per
// replicated resource are honoured (its plugin strips them), so replica
// counts can differ per GPU or MIG profile.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/diagnostics.hpp"

namespace tessera::config {

enum class MigStrategy { none, single, mixed };
enum class DeviceListStrategy { envvar, volume_mounts, cdi_annotations, cdi_cri };
enum class DeviceIdStrategy { uuid, index };
enum class SharedAllocationPolicy { distributed, packed };

std::string_view to_string(MigStrategy s);
std::string_view to_string(DeviceListStrategy s);
std::string_view to_string(DeviceIdStrategy s);
// The strategy `name` names as a config writes it ("cdi-cri"); nullopt for another name.
std::optional<DeviceListStrategy> device_list_strategy_named(std::string_view name);
// Every strategy's name, in the order NVIDIA's plugin documents them.
std::vector<std::string> device_list_strategy_names();

// Which devices a replicated resource covers: all, the first N, or a list of
// GPU indices, "gpu:mig" indices, GPU-/MIG- UUIDs.
struct ReplicatedDevices {
  bool all = true;
  std::optional<uint32_t> count;
  std::vector<std::string> ids;
};

struct ReplicatedResource {
  std::string name;    // normalised: "nvidia.com/gpu", "nvidia.com/mig-1g.10gb"
  uint32_t replicas = 0;
  std::string rename;  // empty = by renameByDefault
  ReplicatedDevices devices;
  SourceLocation where;
};

struct SharingSpec {
  bool rename_by_default = false;
  bool fail_requests_greater_than_one = false;
  std::vector<ReplicatedResource> resources;
};

struct PluginFlags {
  bool pass_device_specs = false;
  std::vector<DeviceListStrategy> device_list_strategy{DeviceListStrategy::envvar};
  DeviceIdStrategy device_id_strategy = DeviceIdStrategy::uuid;
  std::string cdi_annotation_prefix = "cdi.k8s.io/";
  std::string nvidia_ctk_path = "/usr/bin/nvidia-ctk";
  std::string container_driver_root = "/driver-root";
  SharedAllocationPolicy shared_allocation_policy = SharedAllocationPolicy::distributed;
};

struct DevicePluginConfig {
  std::string file;
  MigStrategy mig_strategy = MigStrategy::none;
  bool fail_on_init_error = true;
  std::string mps_root = "/run/nvidia/mps";
  std::string nvidia_driver_root = "/";
  std::string nvidia_dev_root;  // defaults to nvidia_driver_root
  bool gdrcopy_enabled = false;
  bool gds_enabled = false;
  bool mofed_enabled = false;
  PluginFlags plugin;
  std::optional<SharingSpec> time_slicing;
  std::optional<SharingSpec> mps;

  // The sharing in force (at most one of the two has resources).
  const SharingSpec* sharing() const;
  bool uses_mps() const { return mps && !mps->resources.empty(); }
};

// Limits, tessera's own (NVIDIA's reader has none; its MPS daemon refuses
// more than 48 clients per GPU): replicas for time-slicing, bounded because
// every replica becomes a device; MPS supports at most 48 clients per GPU on
// Volta and later (NVIDIA MPS documentation, "Limitations").
constexpr int64_t kMaxTimeSlicingReplicas = 1024;
constexpr int64_t kMaxMpsReplicas = 48;

// NVIDIA's NewResourceName: "gpu" -> "nvidia.com/gpu"; the name after
// nvidia.com/ is a lower-case DNS subdomain, the whole at most 63 characters.
std::optional<std::string> normalise_resource_name(std::string_view name, std::string& why);

std::optional<DevicePluginConfig> parse_device_plugin_config(std::string_view text, const std::string& file,
                                                             Diagnostics& diags);
std::optional<DevicePluginConfig> load_device_plugin_config(const std::string& path, Diagnostics& diags);

// What `tessera config validate` checks, stricter than what the plugin
// reads: the file must be a device-plugin config, or a ConfigMap holding
// some (each data key read as one, named "<file>:data.<key>", as the GPU
// Operator's and NVIDIA's chart's ConfigMaps hold them). An empty file, a
// file of several YAML documents (NVIDIA's plugin reads the first alone),
// another Kubernetes object, a mig-parted config or a map with none of a
// config's fields is an error saying what it looks like. The configs read.
std::vector<DevicePluginConfig> validate_device_plugin_file(const std::string& path, Diagnostics& diags);

}  // namespace tessera::config
