// Checks a mig-parted config against the GPU catalog: does each entry fit
// the GPUs it can apply to?
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/diagnostics.hpp"
#include "config/mig_parted.hpp"
#include "core/catalog.hpp"
#include "core/mig_layout.hpp"

namespace tessera::config {

struct MigValidateOptions {
  std::optional<std::string> config_name;  // only this config
  const GpuModel* gpu = nullptr;           // every entry that applies to this GPU must be valid on it
};

// Which catalog models an entry targets: those its device-filter selects, or,
// without a filter, every model that has all of its profiles.
std::vector<const GpuModel*> entry_targets(const MigConfigEntry& entry, const Catalog& catalog);

// Whether the entry would apply to a GPU of `model` (its filter matches, or it has none).
bool entry_applies_to(const MigConfigEntry& entry, const GpuModel& model);

// The entry's mig-devices as profile counts.
ProfileCounts entry_counts(const MigConfigEntry& entry);

// Result per (config, entry, model) checked; used for reports.
struct EntryCheck {
  std::string config;
  size_t entry = 0;
  std::string gpu;
  bool ok = true;
  std::string detail;  // the layout placed, or why it does not fit
};

std::vector<EntryCheck> validate_mig_parted(const MigPartedConfig& config, const Catalog& catalog,
                                            const MigValidateOptions& options, Diagnostics& diags);

}  // namespace tessera::config
