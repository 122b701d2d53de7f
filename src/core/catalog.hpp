// The GPU catalog: the MIG geometry of every GPU model tessera knows, as
// values. The facts live in catalog_data.cpp, generated from the project's
// reference table (see tools/gen_catalog.py); this header says what they are
// and how to look them up.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

// A GPU-instance placement, in memory-slice units (NVML's
// nvmlGpuInstancePlacement_t); a compute-instance placement, in compute-slice
// units inside its GPU instance.
struct Placement {
  uint32_t start = 0;
  uint32_t size = 0;
  uint32_t end() const { return start + size; }
  friend bool operator==(const Placement&, const Placement&) = default;
};

struct Engines {
  uint32_t copy = 0;
  uint32_t decoders = 0;
  uint32_t encoders = 0;
  uint32_t jpegs = 0;
  uint32_t ofas = 0;
};

struct ComputeInstanceProfile {
  std::string name;          // "3g.40gb", "1c.3g.40gb"
  uint32_t nvml_index = 0;   // NVML_COMPUTE_INSTANCE_PROFILE_* value
  uint32_t profile_id = 0;   // nvmlComputeInstanceProfileInfo_t.id
  uint32_t slices = 0;       // compute slices
  uint32_t sm_count = 0;     // 0 = unknown
  uint32_t max_count = 0;
  bool is_default = false;   // the CI that spans the whole GI
  std::vector<Placement> placements;
};

struct GpuInstanceProfile {
  std::string name;          // "1g.10gb", "1g.10gb+me"
  uint32_t nvml_index = 0;   // NVML_GPU_INSTANCE_PROFILE_* value passed to NVML
  uint32_t profile_id = 0;   // nvmlGpuInstanceProfileInfo_t.id, nvidia-smi's "ID"
  uint32_t slices = 0;       // compute slices ("Ng")
  uint32_t memory_slices = 0;
  uint64_t memory_mib = 0;
  bool memory_estimated = false;  // not in the sources; derived from the GPU's memory
  uint32_t sm_count = 0;
  bool sm_estimated = false;
  Engines engines;
  bool p2p = false;
  uint32_t max_count = 0;
  std::vector<Placement> placements;
  std::vector<ComputeInstanceProfile> compute_profiles;
  std::string evidence;

  // Whether a GPU instance of this profile may start at `start`.
  bool allows_start(uint32_t start) const;
  const ComputeInstanceProfile* default_compute_profile() const;
};

struct GpuModel {
  std::string name;          // catalog key, e.g. "A100-SXM4-80GB"
  std::string nvml_name;     // what nvmlDeviceGetName returns
  uint32_t pci_device_id = 0;         // e.g. 0x20B210DE (device << 16 | vendor)
  std::vector<uint32_t> alias_pci_ids;  // other boards with the same MIG geometry
  std::vector<std::string> aliases;     // short names accepted on the command line
  std::string architecture;
  std::string compute_capability;
  uint64_t memory_mib = 0;
  bool memory_estimated = false;
  uint32_t sm_count = 0;
  bool sm_estimated = false;
  uint32_t memory_slices = 0;
  uint32_t compute_slices = 0;
  uint32_t max_instances = 0;
  std::string confidence;
  std::string source;
  std::vector<GpuInstanceProfile> profiles;

  const GpuInstanceProfile* profile(std::string_view name) const;
  const GpuInstanceProfile* profile_by_id(uint32_t profile_id) const;
  const GpuInstanceProfile* profile_by_nvml_index(uint32_t nvml_index) const;
  bool matches_pci_id(uint32_t pci_id) const;
};

class Catalog {
 public:
  explicit Catalog(std::vector<GpuModel> models);

  // The facts compiled into tessera.
  static const Catalog& builtin();

  std::span<const GpuModel> models() const { return models_; }
  // By catalog name, NVML name or alias; case-insensitive.
  const GpuModel* find(std::string_view name) const;
  // By PCI device id, including boards that share a model's MIG geometry.
  const GpuModel* find_by_pci_id(uint32_t pci_id) const;
  // Names closest to `name` (edit distance), for "did you mean" messages.
  std::vector<std::string> nearest_names(std::string_view name, size_t count = 3) const;

 private:
  std::vector<GpuModel> models_;
};

// "0x20B210DE" (any case, 0x optional) -> 0x20B210DE.
std::optional<uint32_t> parse_pci_id(std::string_view text);
std::string format_pci_id(uint32_t pci_id);

// NVIDIA's device plugin names a MIG profile's resource nvidia.com/mig-<profile>, with '+' written
// '.' because a resource name cannot hold '+' (1g.10gb+me -> nvidia.com/mig-1g.10gb.me).
std::string mig_resource_name(std::string_view profile);
// The profile that a nvidia.com/mig-<...> name stands for (1g.10gb.me -> 1g.10gb+me: what follows
// the memory size's "gb" was the profile's '+'); nullopt for any other name.
std::optional<std::string> mig_profile_of_resource(std::string_view resource);

// The generated table (catalog_data.cpp).
std::vector<GpuModel> builtin_gpu_models();

// Candidates from `names` nearest to `wanted`, best first: those starting
// with it (case aside), then those containing it, then the rest, each group
// by edit distance.
std::vector<std::string> nearest(std::string_view wanted, std::span<const std::string> names, size_t count);

}  // namespace tessera
