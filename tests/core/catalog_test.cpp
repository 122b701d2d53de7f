#include "core/catalog.hpp"
#include "core/text.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

#include "support/data.hpp"

namespace tessera {
namespace {

nlohmann::json reference() {
  std::ifstream in(testing::kMigProfiles);
  EXPECT_TRUE(in.good()) << "reference data missing: " << testing::kMigProfiles;
  return nlohmann::json::parse(in);
}

// The generated table must say exactly what the reference table says
// (values the reference leaves null are estimated and flagged instead).
TEST(Catalog, MatchesReferenceTable) {
  auto ref = reference();
  const auto& catalog = Catalog::builtin();
  ASSERT_EQ(catalog.models().size(), ref["gpus"].size());
  for (const auto& g : ref["gpus"]) {
    SCOPED_TRACE(g["name"].get<std::string>());
    const auto* m = catalog.find(g["name"].get<std::string>());
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(format_pci_id(m->pci_device_id), g["pci_device_id"].get<std::string>());
    if (!g["memory_mib"].is_null()) {
      EXPECT_EQ(m->memory_mib, g["memory_mib"].get<uint64_t>());
      EXPECT_FALSE(m->memory_estimated);
    } else {
      EXPECT_TRUE(m->memory_estimated);
    }
    if (!g["sm_count"].is_null()) { EXPECT_EQ(m->sm_count, g["sm_count"].get<uint32_t>()); }
    EXPECT_EQ(m->memory_slices, g["memory_slices"].get<uint32_t>());
    EXPECT_EQ(m->compute_slices, g["compute_slices"].get<uint32_t>());
    EXPECT_EQ(m->max_instances, g["max_instances"].get<uint32_t>());
    ASSERT_EQ(m->profiles.size(), g["gi_profiles"].size());
    for (const auto& p : g["gi_profiles"]) {
      SCOPED_TRACE(p["name"].get<std::string>());
      const auto* gp = m->profile(p["name"].get<std::string>());
      ASSERT_NE(gp, nullptr);
      EXPECT_EQ(gp->nvml_index, p["nvml_id_value"].get<uint32_t>());
      EXPECT_EQ(gp->profile_id, p["profile_id"].get<uint32_t>());
      EXPECT_EQ(gp->slices, p["slices"].get<uint32_t>());
      EXPECT_EQ(gp->memory_slices, p["memory_slices"].get<uint32_t>());
      EXPECT_EQ(gp->max_count, p["max_count"].get<uint32_t>());
      if (!p["memory_mib"].is_null()) { EXPECT_EQ(gp->memory_mib, p["memory_mib"].get<uint64_t>()); }
      else { EXPECT_TRUE(gp->memory_estimated); }
      if (!p["sm_count"].is_null()) { EXPECT_EQ(gp->sm_count, p["sm_count"].get<uint32_t>()); }
      else { EXPECT_TRUE(gp->sm_estimated); }
      ASSERT_EQ(gp->placements.size(), p["placements"].size());
      for (size_t i = 0; i < gp->placements.size(); ++i) {
        EXPECT_EQ(gp->placements[i].start, p["placements"][i]["start"].get<uint32_t>());
        EXPECT_EQ(gp->placements[i].size, p["placements"][i]["size"].get<uint32_t>());
      }
      const auto& cis = g["ci_profiles"][p["name"].get<std::string>()];
      ASSERT_EQ(gp->compute_profiles.size(), cis.size());
      for (size_t i = 0; i < cis.size(); ++i) {
        EXPECT_EQ(gp->compute_profiles[i].name, cis[i]["name"].get<std::string>());
        EXPECT_EQ(gp->compute_profiles[i].profile_id, cis[i]["profile_id"].get<uint32_t>());
        EXPECT_EQ(gp->compute_profiles[i].max_count, cis[i]["max_count"].get<uint32_t>());
        EXPECT_EQ(gp->compute_profiles[i].is_default, cis[i]["is_default"].get<bool>());
      }
    }
  }
}

TEST(Catalog, EstimatesAreConsistent) {
  for (const auto& m : Catalog::builtin().models()) {
    SCOPED_TRACE(m.name);
    EXPECT_GT(m.memory_mib, 0u);
    for (const auto& p : m.profiles) {
      EXPECT_GT(p.memory_mib, 0u) << p.name;
      EXPECT_LE(p.memory_mib, m.memory_mib) << p.name;
      EXPECT_NE(p.default_compute_profile(), nullptr) << p.name << " has no full-instance compute profile";
    }
  }
}

TEST(Catalog, FindsByNameAliasNvmlNameAndPciId) {
  const auto& c = Catalog::builtin();
  ASSERT_NE(c.find("A100-SXM4-80GB"), nullptr);
  EXPECT_EQ(c.find("a100-sxm4-80gb"), c.find("A100-SXM4-80GB"));
  EXPECT_EQ(c.find("A100-80GB"), c.find("A100-SXM4-80GB"));
  EXPECT_EQ(c.find("NVIDIA A100-SXM4-80GB"), c.find("A100-SXM4-80GB"));
  EXPECT_EQ(c.find("H100-80GB")->name, "H100-SXM5-80GB");
  EXPECT_EQ(c.find("H200")->name, "H200-SXM-141GB");
  EXPECT_EQ(c.find("V100"), nullptr);
  // The PCIe 80 GB board shares the SXM4 board's MIG geometry.
  EXPECT_EQ(c.find_by_pci_id(0x20B510DE), c.find("A100-SXM4-80GB"));
  EXPECT_EQ(c.find_by_pci_id(0x20B710DE)->name, "A30-24GB");
  EXPECT_EQ(c.find_by_pci_id(0x12345678), nullptr);
}

TEST(Catalog, ProfileLookups) {
  const auto* m = Catalog::builtin().find("A100-SXM4-80GB");
  ASSERT_NE(m, nullptr);
  const auto* p = m->profile("3g.40gb");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->profile_id, 9u);
  EXPECT_EQ(p->nvml_index, 2u);
  EXPECT_EQ(m->profile_by_id(19)->name, "1g.10gb");
  EXPECT_EQ(m->profile_by_nvml_index(9)->name, "1g.20gb");  // 1_SLICE_REV2
  EXPECT_EQ(m->profile("1g.10gb+me")->max_count, 1u);
  EXPECT_EQ(m->profile("2g.40gb"), nullptr);
  EXPECT_TRUE(p->allows_start(4));
  EXPECT_FALSE(p->allows_start(2));
}

TEST(Catalog, NearestNames) {
  auto n = Catalog::builtin().nearest_names("A100-SXM4-80G", 1);
  ASSERT_EQ(n.size(), 1u);
  EXPECT_EQ(n[0], "A100-SXM4-80GB");
  // A short name suggests the models it is short for, not the nearest by edits (GB200, A30-24GB).
  auto h100 = Catalog::builtin().nearest_names("H100", 3);
  ASSERT_EQ(h100.size(), 3u);
  for (const auto& name : h100) EXPECT_TRUE(name.starts_with("H100-")) << name;
  EXPECT_EQ(Catalog::builtin().nearest_names("h200", 1), std::vector<std::string>{"H200-SXM-141GB"});
}

TEST(Text, CountedSaysOneWithoutAnS) {
  EXPECT_EQ(counted(1, "error"), "1 error");
  EXPECT_EQ(counted(0, "error"), "0 errors");
  EXPECT_EQ(counted(2, "GPU"), "2 GPUs");
  EXPECT_EQ(counted(1, "entry check"), "1 entry check");
}

TEST(Catalog, MigResourceNamesAreTheDevicePluginsAndReadBack) {
  EXPECT_EQ(mig_resource_name("1g.10gb"), "nvidia.com/mig-1g.10gb");
  EXPECT_EQ(mig_resource_name("1g.10gb+me"), "nvidia.com/mig-1g.10gb.me");
  EXPECT_EQ(mig_resource_name("1g.23gb+me.all"), "nvidia.com/mig-1g.23gb.me.all");
  EXPECT_EQ(mig_profile_of_resource("nvidia.com/mig-1c.2g.12gb.me"), "1c.2g.12gb+me");
  EXPECT_EQ(mig_profile_of_resource("nvidia.com/mig-1g.23gb-me"), "1g.23gb-me");
  EXPECT_EQ(mig_profile_of_resource("nvidia.com/gpu"), std::nullopt);
  EXPECT_EQ(mig_profile_of_resource("nvidia.com/mig-"), std::nullopt);
  EXPECT_EQ(mig_profile_of_resource("example.com/mig-1g.10gb"), std::nullopt);
  // Every profile of every catalogued GPU, GPU and compute instances alike, reads back as itself.
  size_t names = 0;
  for (const auto& model : Catalog::builtin().models())
    for (const auto& gi : model.profiles) {
      EXPECT_EQ(mig_profile_of_resource(mig_resource_name(gi.name)), gi.name) << model.name;
      for (const auto& ci : gi.compute_profiles)
        EXPECT_EQ(mig_profile_of_resource(mig_resource_name(ci.name)), ci.name) << model.name;
      ++names;
    }
  EXPECT_GT(names, 50u);
}

TEST(Catalog, PciIdParsing) {
  EXPECT_EQ(parse_pci_id("0x20B210DE"), 0x20B210DEu);
  EXPECT_EQ(parse_pci_id("0x20b210de"), 0x20B210DEu);
  EXPECT_EQ(parse_pci_id("20B210DE"), 0x20B210DEu);
  EXPECT_FALSE(parse_pci_id("0x"));
  EXPECT_FALSE(parse_pci_id("0x20B210DE00"));
  EXPECT_FALSE(parse_pci_id("0xZZ"));
  EXPECT_FALSE(parse_pci_id(""));
  EXPECT_EQ(format_pci_id(0x20B210DE), "0x20B210DE");
}

}  // namespace
}  // namespace tessera
