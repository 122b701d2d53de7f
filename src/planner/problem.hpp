// The planning problem as values: the slices each GPU model can be cut into
// (units), the ways to cut one GPU (layout choices), the services, and the
// services grouped into interchangeable replicas. Built from a fleet spec and
// the catalog; a service that fits nowhere is reported here, with why.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/diagnostics.hpp"
#include "config/fleet_spec.hpp"
#include "core/catalog.hpp"
#include "core/mig_layout.hpp"

namespace tessera::planner {

using config::Isolation;

// A unit's profile when the GPU runs without MIG, as one whole device.
constexpr int kWholeGpu = -1;

struct GpuType {
  const GpuModel* model = nullptr;
  std::optional<uint32_t> count;  // nothing = as many as needed
  config::SourceLocation where;
  std::string field;         // "fleet[0]"
  std::vector<int> current;  // per device: the layout choice it has now; -1 = none the planner offers
};

// One kind of slice: a MIG profile of a GPU model, or the whole GPU.
struct Unit {
  int gpu_type = 0;
  int profile = kWholeGpu;  // index into GpuModel::profiles
  std::string name;         // "3g.40gb", or "gpu"
  uint64_t memory_mib = 0;
  uint32_t memory_slices = 0;
  uint32_t compute_slices = 0;
};

// One way to cut a GPU: a placeable layout and the units it yields.
struct LayoutChoice {
  int gpu_type = 0;
  bool mig_enabled = true;
  MigLayout layout;                            // empty when MIG is off
  std::vector<std::pair<int, uint32_t>> units;  // (unit index, count)
  std::string name;                            // "1g.10gb-x2.2g.20gb-x1.3g.40gb-x1", or "whole"
};

struct Service {
  std::string name;
  config::SourceLocation where;
  std::string field;
  uint64_t memory_mib = 0;  // per GPU it runs on (memory / gpus)
  Isolation isolation = Isolation::dedicated;
  uint32_t gpus = 1;
  std::optional<uint32_t> replicas;
  std::optional<double> demand;
  std::vector<double> capacity;  // per unit; used with demand
  double compute = 0;            // share of the slice's SMs (shared/best-effort); 0 = none asked
};

// Dedicated replicas that may swap places: fixed replicas of services with the
// same tensor-parallel width and the same set of units they fit; or one
// service served by rate.
struct DedicatedGroup {
  std::vector<int> services;
  uint32_t gpus = 1;
  std::vector<bool> fits;  // per unit
  uint32_t replicas = 0;   // fixed total, when !demand
  std::optional<double> demand;
  std::vector<double> capacity;  // per unit, when demand
};

// Shared or best-effort replicas that may swap places.
struct ShareType {
  Isolation isolation = Isolation::shared;
  uint64_t memory_mib = 0;
  double compute = 0;
  std::vector<int> services;
  uint32_t replicas = 0;
};

// A fill of one unit with shared (MPS) or best-effort (time-sliced) replicas.
struct Pattern {
  int unit = 0;
  Isolation isolation = Isolation::shared;
  std::vector<std::pair<int, uint32_t>> types;  // (share type, count)
};

// Which layouts each GPU may take: every maximal one, or a baseline's.
enum class LayoutSet { maximal, uniform_smallest, balanced };

struct ProblemOptions {
  LayoutSet layouts = LayoutSet::maximal;
  bool whole_gpu = true;  // offer MIG-off GPUs
  size_t max_patterns = 20000;
};

struct Problem {
  std::vector<GpuType> gpu_types;
  std::vector<Unit> units;
  std::vector<LayoutChoice> layouts;
  std::vector<Service> services;
  std::vector<DedicatedGroup> groups;
  std::vector<ShareType> share_types;
  std::vector<Pattern> patterns;
  bool patterns_complete = true;  // false: enumeration stopped at max_patterns

  uint64_t replica_count() const;
  // GPUs cut with each layout choice now (from the fleet's current layouts).
  std::vector<uint32_t> current_counts() const;
  bool has_current() const;
};

// MPS serves at most 48 clients per GPU or MIG instance (NVIDIA MPS docs, "Limitations").
constexpr uint32_t kMaxMpsClients = 48;
constexpr uint32_t kMaxTimeSlices = 64;

// Builds the problem; reports services that fit nowhere (and why) into
// `diags`. Returns a value only when there were no errors.
std::optional<Problem> build_problem(const config::FleetSpec& spec, const ProblemOptions& options,
                                     config::Diagnostics& diags);

// The GPU instance profile names and counts of a layout choice ("whole" = MIG off).
std::string layout_name(const GpuModel& model, const std::vector<uint32_t>& profiles);

}  // namespace tessera::planner
