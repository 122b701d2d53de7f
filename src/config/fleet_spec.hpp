// tessera's fleet spec: the GPUs available and the services to place on
// them, read strictly (every error names file, line and field):
//
//   fleet:
//     - gpu: A100-SXM4-80GB     # catalog model (name, NVML name or alias)
//       count: 64               # optional: omitted = as many as needed
//       current:                # optional: how GPUs 0, 1, ... are cut now ({} = MIG off);
//         - {3g.40gb: 2}        #   the planner keeps as many of them as it can
//         - {}
//   services:
//     - name: chat-llama3-8b
//       memory: 32.5GiB         # need per replica
//       replicas: 3             # or demand + capacity
//       isolation: dedicated    # dedicated | shared | best-effort
//       gpus: 1                 # >1 = tensor parallel over whole GPUs
//       compute: 0.5            # shared/best-effort only: share of the slice's SMs
//
// `capacity` maps a MIG profile name (or `gpu`, a whole GPU without MIG) to the
// rate one instance serves. With only `gpu` given, each profile is credited the
// whole-GPU rate times its share of the memory slices (LLM decode is bound by
// memory bandwidth, and a slice gets the bandwidth of its memory slices: on an
// A100-80GB 1g.10gb has 1/8, 3g.40gb and 4g.40gb both 4/8; NVIDIA MIG User
// Guide, "Supported MIG Profiles", Fraction of Memory column).
//
// Also reads a CSV of services (columns of data/workloads/llm-mix-37.csv:
// service, mem_need_GiB, demand, full_A100_capacity, smallest_A100_profile), with
// no fleet: the caller names the GPU model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/diagnostics.hpp"
#include "core/catalog.hpp"
#include "core/mig_layout.hpp"

namespace tessera::config {

enum class Isolation { dedicated, shared, best_effort };
std::string_view to_string(Isolation isolation);

// The capacity key for a whole GPU without MIG.
inline constexpr std::string_view kWholeGpuKey = "gpu";

struct CapacitySpec {
  std::string profile;  // a MIG profile name, or kWholeGpuKey
  double rate = 0;      // 0 = unusable
  SourceLocation where;
};

struct ServiceSpec {
  std::string name;
  SourceLocation where;
  std::string field;  // "services[3]"
  uint64_t memory_bytes = 0;
  std::optional<uint32_t> replicas;
  std::optional<double> demand;
  std::vector<CapacitySpec> capacity;
  Isolation isolation = Isolation::dedicated;
  uint32_t gpus = 1;
  bool gpus_auto = false;          // CSV "multi-GPU": the planner picks the tensor-parallel width
  bool capacity_per_gpu = false;   // CSV: the whole-GPU rate is per GPU, so a replica over k GPUs serves k times it
  std::optional<double> compute;   // (0, 1]
};

// How one GPU is cut now, as a mig-parted mig-devices map (empty = MIG off).
struct CurrentLayout {
  ProfileCounts counts;
  MigLayout placed;  // a placement of `counts`, checked against the catalog
  SourceLocation where;
};

struct FleetGpuSpec {
  const GpuModel* model = nullptr;
  SourceLocation where;
  std::string field;  // "fleet[0]"
  std::optional<uint32_t> count;
  std::vector<CurrentLayout> current;  // per GPU, in device order
};

struct FleetSpec {
  std::string file;
  std::vector<FleetGpuSpec> fleet;
  std::vector<ServiceSpec> services;
};

// Limits that reject absurd inputs before any planning.
constexpr int64_t kMaxReplicas = 1'000'000;
constexpr int64_t kMaxFleetCount = 1'000'000;
constexpr int64_t kMaxTensorParallel = 64;
constexpr uint64_t kMaxServiceMemory = uint64_t{64} << 40;  // 64 TiB
constexpr double kMaxRate = 1e12;

// Parses a YAML spec; returns a value only when there were no errors.
std::optional<FleetSpec> parse_fleet_spec(std::string_view text, const std::string& file, const Catalog& catalog,
                                          Diagnostics& diags);

// Parses a CSV of services (header line first). The fleet is left empty.
std::optional<FleetSpec> parse_service_csv(std::string_view text, const std::string& file, Diagnostics& diags);

// Reads `path` ('-' = standard input): CSV when it ends in .csv, YAML otherwise.
std::optional<FleetSpec> load_fleet_spec(const std::string& path, const Catalog& catalog, Diagnostics& diags);

}  // namespace tessera::config
