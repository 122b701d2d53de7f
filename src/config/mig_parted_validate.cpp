#include "config/mig_parted_validate.hpp"
#include "core/text.hpp"

#include <algorithm>
#include <climits>
#include <set>

namespace tessera::config {
namespace {

// The model's profile a mig-devices key names, matched as mig-parted matches
// profiles: by go-nvlib's normal form (1c.1g.10gb is 1g.10gb), attributes exactly.
const GpuInstanceProfile* find_profile(const GpuModel& model, const MigDeviceCount& d) {
  const auto* p = model.profile(d.canonical);
  return p && p->name == d.canonical ? p : nullptr;
}

bool model_has_all(const GpuModel& model, const MigConfigEntry& entry) {
  return std::all_of(entry.mig_devices.begin(), entry.mig_devices.end(),
                     [&](const MigDeviceCount& d) { return find_profile(model, d) != nullptr; });
}

std::string profile_names(const GpuModel& model) {
  std::string out;
  for (const auto& p : model.profiles) out += (out.empty() ? "" : ", ") + p.name;
  return out;
}

// Checks one entry on one model; reports at the most precise place. The
// catalog checks go beyond what mig-parted checks when it reads a file: they
// are errors when the user names the GPU (--gpu), warnings otherwise.
EntryCheck check_on(const MigConfig& config, size_t index, const MigConfigEntry& entry, const GpuModel& model,
                    bool as_errors, Diagnostics& diags) {
  auto report = [&](SourceLocation where, std::string field, std::string message) {
    if (as_errors) diags.error(std::move(where), std::move(field), std::move(message));
    else diags.warning(std::move(where), std::move(field), std::move(message));
  };
  EntryCheck check{config.name, index, model.name, true, ""};
  if (!entry.mig_enabled) {
    check.detail = "MIG disabled";
    return check;
  }
  for (const auto& d : entry.mig_devices) {
    const auto* p = find_profile(model, d);
    std::string field = entry.field + ".mig-devices." + d.profile;
    if (!p) {
      std::vector<std::string> names;
      for (const auto& q : model.profiles) names.push_back(q.name);
      std::string hint = join(nearest(d.profile, names, 3));
      diags.error(d.where, field, model.name + " has no MIG profile " + quote(d.profile) + " (nearest: " + hint +
                                      "; all: " + profile_names(model) + ")");
      check.ok = false;
    } else if (d.count > p->max_count) {
      report(d.where, field, "count " + std::to_string(d.count) + " is over the maximum of " +
                                      std::to_string(p->max_count) + " for " + p->name + " on " + model.name);
      check.ok = false;
    }
  }
  if (!check.ok) return check;
  auto placed = place_counts(model, entry_counts(entry));
  if (!placed) {
    report(entry.mig_devices_where, entry.field + ".mig-devices", placed.error().message);
    check.ok = false;
    check.detail = placed.error().message;
    return check;
  }
  check.detail = placed->empty() ? "MIG enabled, no instances" : describe_layout(model, *placed);
  return check;
}

}  // namespace

bool entry_applies_to(const MigConfigEntry& entry, const GpuModel& model) {
  if (!entry.has_device_filter) return true;
  // The catalog knows no subsystem ids: a "device:subsystem" filter targets the device's model.
  return std::any_of(entry.device_filter.begin(), entry.device_filter.end(),
                     [&](const DeviceFilter& f) { return model.matches_pci_id(f.device_id); });
}

std::vector<const GpuModel*> entry_targets(const MigConfigEntry& entry, const Catalog& catalog) {
  std::vector<const GpuModel*> out;
  for (const auto& m : catalog.models()) {
    if (entry.has_device_filter) {
      if (entry_applies_to(entry, m)) out.push_back(&m);
    } else if (model_has_all(m, entry)) {
      out.push_back(&m);
    }
  }
  return out;
}

ProfileCounts entry_counts(const MigConfigEntry& entry) {
  ProfileCounts counts;
  for (const auto& d : entry.mig_devices)
    if (d.count > 0) {  // equivalent keys (1g.10gb, 1c.1g.10gb) add up, as in mig-parted; saturating
      auto& c = counts[d.canonical];
      c = UINT32_MAX - c < d.count ? UINT32_MAX : c + d.count;
    }
  return counts;
}

std::vector<EntryCheck> validate_mig_parted(const MigPartedConfig& config, const Catalog& catalog,
                                            const MigValidateOptions& options, Diagnostics& diags) {
  std::vector<EntryCheck> checks;
  const MigConfig* only = nullptr;
  if (options.config_name) {
    only = config.find(*options.config_name);
    if (!only) {
      std::vector<std::string> names;
      for (const auto& c : config.configs) names.push_back(c.name);
      std::string hint = join(nearest(*options.config_name, names, 3));
      diags.error({config.file, 0, 0}, "mig-configs", "no config named " + quote(*options.config_name) + " (nearest: " + hint + ")");
      return checks;
    }
  }
  // Profiles no catalog GPU knows: warn once per name.
  std::set<std::string> warned_profiles;
  for (const auto& mc : config.configs) {
    if (only && &mc != only) continue;
    bool applies = false;
    for (size_t i = 0; i < mc.entries.size(); ++i) {
      const auto& entry = mc.entries[i];
      if (options.gpu) {
        if (entry_applies_to(entry, *options.gpu)) {
          applies = true;
          checks.push_back(check_on(mc, i, entry, *options.gpu, true, diags));
        }
        continue;
      }
      bool filters_known = true;
      for (const auto& f : entry.device_filter)
        if (!catalog.find_by_pci_id(f.device_id)) {
          filters_known = false;
          diags.warning(entry.filter_where, entry.field + ".device-filter",
                        "PCI device id " + format_pci_id(f.device_id) + " is not in the GPU catalog; not checked for it");
        }
      bool all_known = true;
      for (const auto& d : entry.mig_devices) {
        bool known = std::any_of(catalog.models().begin(), catalog.models().end(),
                                 [&](const GpuModel& m) { return find_profile(m, d) != nullptr; });
        all_known = all_known && known;
        if (!known && warned_profiles.insert(d.profile).second)
          diags.warning(d.where, entry.field + ".mig-devices." + d.profile,
                        "profile " + quote(d.profile) + " is not known for any GPU in the catalog; not checked");
      }
      const auto targets = entry_targets(entry, catalog);
      // Every profile is some catalogued GPU's, but no one GPU has them all
      // (a 1g.10gb of an A100 beside a 1g.12gb of an H100): nothing checks
      // it, and on every GPU the catalog knows mig-parted would refuse it.
      if (targets.empty() && all_known && filters_known && entry.mig_enabled && !entry.mig_devices.empty()) {
        std::string owners;
        for (const auto& d : entry.mig_devices) {
          std::vector<std::string> models;
          for (const auto& m : catalog.models())
            if (find_profile(m, d)) models.push_back(m.name);
          owners += (owners.empty() ? "" : "; ") + d.profile + ": " + join(models);
        }
        diags.warning(entry.mig_devices_where, entry.field + ".mig-devices",
                      "no GPU in the catalog" + std::string(entry.device_filter.empty() ? "" : " that its device-filter names") +
                          " has all of these profiles (" + owners + "): it applies on none, and mig-parted would refuse it on each");
      }
      for (const auto* model : targets) checks.push_back(check_on(mc, i, entry, *model, false, diags));
    }
    // The config asked for, on the GPU asked for, and no entry selects it:
    // applied there it would change nothing (`mig apply` refuses it).
    if (options.gpu && only && !applies)
      diags.warning(mc.where, "mig-configs." + mc.name,
                    "no entry of config " + quote(mc.name) + " applies to " + options.gpu->name +
                        " (their devices and device-filter name other GPUs): applied there it changes nothing");
  }
  return checks;
}

}  // namespace tessera::config
