#include "config/mig_parted.hpp"

#include <gtest/gtest.h>

#include "config/mig_parted_validate.hpp"
#include "core/mig_layout.hpp"
#include "support/data.hpp"

namespace tessera::config {
namespace {

using testing::kNvidiaMigDefaults;

std::string errors_of(const Diagnostics& d) {
  std::string out;
  for (const auto& i : d.items()) out += format(i) + "\n";
  return out;
}

// Both of NVIDIA's default files validate, entry by entry, on every catalog
// GPU they target; and each entry's layout is placeable with the catalog's rules.
class NvidiaDefaults : public ::testing::TestWithParam<const char*> {};

TEST_P(NvidiaDefaults, ValidateEntryByEntry) {
  Diagnostics diags;
  auto cfg = load_mig_parted(testing::kSourceDir + "/" + GetParam(), diags);
  ASSERT_TRUE(cfg) << errors_of(diags);
  auto checks = validate_mig_parted(*cfg, Catalog::builtin(), {}, diags);
  EXPECT_FALSE(diags.has_errors()) << errors_of(diags);
  EXPECT_GT(cfg->configs.size(), 50u);
  std::set<std::string> gpus;
  for (const auto& c : checks) {
    EXPECT_TRUE(c.ok) << c.config << " on " << c.gpu << ": " << c.detail;
    gpus.insert(c.gpu);
  }
  // Every catalog model is targeted by at least one entry.
  EXPECT_EQ(gpus.size(), Catalog::builtin().models().size());
  for (const auto& mc : cfg->configs)
    for (const auto& e : mc.entries)
      for (const auto* m : entry_targets(e, Catalog::builtin())) {
        auto placed = place_counts(*m, entry_counts(e));
        ASSERT_TRUE(placed) << mc.name << " on " << m->name;
        EXPECT_TRUE(check_layout(*m, *placed)) << mc.name << " on " << m->name;
      }
}

INSTANTIATE_TEST_SUITE_P(Files, NvidiaDefaults,
                         ::testing::Values("third_party/nvidia-mig-parted/config-default.yaml",
                                           "third_party/nvidia-gpu-operator/0400_configmap.yaml"));

TEST(MigParted, ParsesEntries) {
  Diagnostics diags;
  auto cfg = parse_mig_parted(R"(version: v1
mig-configs:
  mixed:
    - device-filter: "0x20B210DE"
      devices: [0, 1]
      mig-enabled: true
      mig-devices:
        "1g.10gb": 4
        "3g.40gb": 1
    - devices: all
      mig-enabled: false
)", "t.yaml", diags);
  ASSERT_TRUE(cfg) << errors_of(diags);
  const auto* mc = cfg->find("mixed");
  ASSERT_NE(mc, nullptr);
  ASSERT_EQ(mc->entries.size(), 2u);
  EXPECT_TRUE(mc->entries[0].has_device_filter);
  ASSERT_EQ(mc->entries[0].device_filter.size(), 1u);
  EXPECT_EQ(mc->entries[0].device_filter[0].device_id, 0x20B210DEu);
  EXPECT_FALSE(mc->entries[0].device_filter[0].subsystem_id);
  EXPECT_FALSE(mc->entries[0].devices.all);
  EXPECT_TRUE(mc->entries[0].devices.selects(1));
  EXPECT_FALSE(mc->entries[0].devices.selects(2));
  ASSERT_EQ(mc->entries[0].mig_devices.size(), 2u);
  EXPECT_EQ(mc->entries[0].mig_devices[1].profile, "3g.40gb");
  EXPECT_EQ(mc->entries[0].mig_devices[1].where.line, 9);
  EXPECT_TRUE(mc->entries[1].devices.all);
  EXPECT_FALSE(mc->entries[1].mig_enabled);
  EXPECT_EQ(entry_counts(mc->entries[0]), (ProfileCounts{{"1g.10gb", 4}, {"3g.40gb", 1}}));
}

TEST(MigParted, ConfigMapLocationsPointIntoTheOuterFile) {
  Diagnostics diags;
  auto cfg = parse_mig_parted(R"(apiVersion: v1
kind: ConfigMap
metadata:
  name: x
data:
  config.yaml: |
    version: v1
    mig-configs:
      bad:
        - devices: all
          mig-enabled: true
          mig-devices:
            "1g.10gb": -1
)", "cm.yaml", diags);
  EXPECT_FALSE(cfg);
  ASSERT_EQ(diags.items().size(), 1u);
  EXPECT_EQ(format(diags.items()[0]),
            "cm.yaml:13:24: error: mig-configs.bad[0].mig-devices.1g.10gb: -1 is out of range (allowed: 0 or more)");
}

TEST(MigPartedValidate, SeedMixedInferenceOnA100NamesNearestProfiles) {
  Diagnostics diags;
  auto cfg = parse_mig_parted(R"(version: v1
mig-configs:
  all-1g.20gb:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.20gb": 4}
  mixed-inference:
    - devices: all
      mig-enabled: true
      mig-devices: {"2g.40gb": 1, "1g.20gb": 2}
)", "seed.yaml", diags);
  ASSERT_TRUE(cfg);
  // Without --gpu: 2g.40gb is unknown to every catalog GPU: a warning.
  validate_mig_parted(*cfg, Catalog::builtin(), {}, diags);
  EXPECT_FALSE(diags.has_errors()) << errors_of(diags);
  ASSERT_EQ(diags.items().size(), 1u);
  EXPECT_EQ(diags.items()[0].severity, Severity::warning);
  // With --gpu A100-80GB: an error naming the nearest valid profiles.
  Diagnostics strict;
  MigValidateOptions opts;
  opts.gpu = Catalog::builtin().find("A100-80GB");
  auto checks = validate_mig_parted(*cfg, Catalog::builtin(), opts, strict);
  ASSERT_EQ(strict.error_count(), 1u) << errors_of(strict);
  EXPECT_EQ(format(strict.items()[0]),
            "seed.yaml:10:32: error: mig-configs.mixed-inference[0].mig-devices.2g.40gb: A100-SXM4-80GB has no MIG "
            "profile '2g.40gb' (nearest: 2g.20gb, 3g.40gb, 4g.40gb; all: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, "
            "3g.40gb, 4g.40gb, 7g.80gb)");
  ASSERT_EQ(checks.size(), 2u);
  EXPECT_TRUE(checks[0].ok);
  EXPECT_FALSE(checks[1].ok);
}

TEST(MigPartedValidate, UnplaceableSetOnFilteredGpu) {
  Diagnostics diags;
  auto cfg = parse_mig_parted(R"(version: v1
mig-configs:
  too-much:
    - device-filter: ["0x20B210DE"]
      devices: all
      mig-enabled: true
      mig-devices: {"3g.40gb": 2, "1g.10gb": 1}
)", "u.yaml", diags);
  ASSERT_TRUE(cfg);
  // mig-parted accepts the file; without --gpu the catalog's doubt is a warning.
  validate_mig_parted(*cfg, Catalog::builtin(), {}, diags);
  EXPECT_EQ(diags.error_count(), 0u);
  ASSERT_EQ(diags.items().size(), 1u);
  EXPECT_EQ(format(diags.items()[0]),
            "u.yaml:7:20: warning: mig-configs.too-much[0].mig-devices: 1x1g.10gb + 2x3g.40gb cannot be placed on one "
            "A100-SXM4-80GB: no placement of these instances avoids overlapping memory slices");
  // With --gpu the user names the target: an error.
  Diagnostics on_gpu;
  MigValidateOptions opts;
  opts.gpu = Catalog::builtin().find("A100-80GB");
  validate_mig_parted(*cfg, Catalog::builtin(), opts, on_gpu);
  ASSERT_EQ(on_gpu.error_count(), 1u);
  EXPECT_EQ(format(on_gpu.items()[0]),
            "u.yaml:7:20: error: mig-configs.too-much[0].mig-devices: 1x1g.10gb + 2x3g.40gb cannot be placed on one "
            "A100-SXM4-80GB: no placement of these instances avoids overlapping memory slices");
}

TEST(MigPartedValidate, UnknownConfigNameSuggests) {
  Diagnostics diags;
  auto cfg = load_mig_parted(kNvidiaMigDefaults, diags);
  ASSERT_TRUE(cfg);
  MigValidateOptions opts;
  opts.config_name = "all-1g.10gbb";
  validate_mig_parted(*cfg, Catalog::builtin(), opts, diags);
  ASSERT_TRUE(diags.has_errors());
  EXPECT_NE(format(diags.items().back()).find("no config named 'all-1g.10gbb' (nearest: all-1g.10gb"), std::string::npos);
}

}  // namespace
}  // namespace tessera::config
