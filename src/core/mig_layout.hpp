// MIG layouts: which sets of GPU instances fit one GPU together, where a
// requested multiset of profiles can be placed, and every maximal layout of a
// GPU model. The rules are the hardware's: placements from the catalog, no
// two instances on the same memory slice, each profile within its max count,
// compute slices and the instance count within the GPU's, and the engines the
// instances hold (copy, decoder, encoder, JPEG, OFA) within the GPU's: an A30
// has one JPEG and one OFA engine, so 1g.6gb+me and 2g.12gb+me never run
// together (MIG User Guide, "Supported MIG Profiles": each profile's engines).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/catalog.hpp"
#include "core/error.hpp"

namespace tessera {

// One GPU instance on a GPU: a profile (index into GpuModel::profiles) at a
// start, in memory slices.
struct PlacedInstance {
  uint32_t profile = 0;
  uint32_t start = 0;
  friend auto operator<=>(const PlacedInstance&, const PlacedInstance&) = default;
};

using MigLayout = std::vector<PlacedInstance>;

// Profile name -> number of instances, as in a mig-parted `mig-devices` map.
using ProfileCounts = std::map<std::string, uint32_t>;

// Every kind of engine, as a member of Engines.
inline constexpr uint32_t Engines::*kEngineKinds[] = {&Engines::copy, &Engines::decoders, &Engines::encoders,
                                                      &Engines::jpegs, &Engines::ofas};
// The total engine_totals gives a kind it does not count.
inline constexpr uint32_t kUncountedEngines = std::numeric_limits<uint32_t>::max();

// The engines of the whole GPU: each kind's count in the profile spanning it
// (7g.80gb), which holds every engine. A kind some other profile holds more
// of (a gap in the sources, as for B200's larger profiles) is not counted:
// kUncountedEngines, as is every kind of a model without such a profile.
Engines engine_totals(const GpuModel& model);

// Ok when the instances fit one GPU of `model` together; otherwise an error
// that names the first rule broken.
[[nodiscard]] Result<void> check_layout(const GpuModel& model, std::span<const PlacedInstance> layout);

// Places `wanted` (profile indices, repeats allowed) around the instances in
// `fixed`, which stay where they are. Returns the new instances only, or
// nothing when no placement exists. Deterministic: lowest starts first,
// largest profiles placed first.
std::optional<MigLayout> place_profiles(const GpuModel& model, std::span<const uint32_t> wanted,
                                        std::span<const PlacedInstance> fixed = {});

// Resolves names and places the multiset; errors name an unknown profile
// (with the nearest valid names), a count over the profile's maximum, or a
// set that no placement fits.
[[nodiscard]] Result<MigLayout> place_counts(const GpuModel& model, const ProfileCounts& counts);

struct LayoutOptions {
  // Include the media-engine variants (1g.10gb+me, ...) which duplicate a
  // base profile's slices. Off for planning: inference does not need them.
  bool include_media_variants = true;
};

// Every maximal layout of `model`: valid, and no instance of any (included)
// profile can be added at any placement. Each layout is sorted.
std::vector<MigLayout> maximal_layouts(const GpuModel& model, LayoutOptions options = {});

// The distinct profile multisets of `layouts`, each sorted by profile index.
std::vector<std::vector<uint32_t>> distinct_profile_sets(std::span<const MigLayout> layouts);

// A media-engine variant ("+me", "+gfx", "-me"): same slices as a base profile.
bool is_media_variant(const GpuInstanceProfile& profile);

// "1g.10gb@0 1g.10gb@1 3g.40gb@4"
std::string describe_layout(const GpuModel& model, std::span<const PlacedInstance> layout);

}  // namespace tessera
