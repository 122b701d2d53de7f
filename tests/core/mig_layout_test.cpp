#include "core/mig_layout.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace tessera {
namespace {

const GpuModel& model(const char* name) {
  const auto* m = Catalog::builtin().find(name);
  EXPECT_NE(m, nullptr) << name;
  return *m;
}

uint32_t idx(const GpuModel& m, const char* profile) {
  const auto* p = m.profile(profile);
  EXPECT_NE(p, nullptr) << profile;
  return static_cast<uint32_t>(p - m.profiles.data());
}

struct LayoutCase {
  const char* description;
  const char* gpu;
  std::vector<std::pair<const char*, uint32_t>> instances;
  bool valid;
  const char* error_part;
  friend void PrintTo(const LayoutCase& c, std::ostream* os) { *os << c.description; }
};

class CheckLayout : public ::testing::TestWithParam<LayoutCase> {};

TEST_P(CheckLayout, FollowsTheHardwareRules) {
  const auto& c = GetParam();
  const auto& m = model(c.gpu);
  MigLayout layout;
  for (auto [p, start] : c.instances) layout.push_back({idx(m, p), start});
  auto r = check_layout(m, layout);
  EXPECT_EQ(r.has_value(), c.valid) << c.description;
  if (!c.valid && !r) { EXPECT_NE(r.error().message.find(c.error_part), std::string::npos) << r.error().message; }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CheckLayout,
    ::testing::Values(
        LayoutCase{"seven 1g", "A100-80GB", {{"1g.10gb", 0}, {"1g.10gb", 1}, {"1g.10gb", 2}, {"1g.10gb", 3}, {"1g.10gb", 4}, {"1g.10gb", 5}, {"1g.10gb", 6}}, true, ""},
        LayoutCase{"3g at 4 plus four 1g", "A100-80GB", {{"3g.40gb", 4}, {"1g.10gb", 0}, {"1g.10gb", 1}, {"1g.10gb", 2}, {"1g.10gb", 3}}, true, ""},
        LayoutCase{"overlap", "A100-80GB", {{"3g.40gb", 0}, {"1g.10gb", 3}}, false, "overlaps"},
        LayoutCase{"bad start", "A100-80GB", {{"3g.40gb", 2}}, false, "cannot start at memory slice 2"},
        LayoutCase{"1g.10gb cannot use slice 7", "A100-80GB", {{"1g.10gb", 7}}, false, "cannot start"},
        LayoutCase{"over max count", "A100-80GB", {{"1g.10gb+me", 0}, {"1g.10gb+me", 1}}, false, "more than 1 instances"},
        LayoutCase{"4g + 3g use all compute", "A100-80GB", {{"4g.40gb", 0}, {"3g.40gb", 4}}, true, ""},
        LayoutCase{"three 2g and a 1g.20gb", "H100-80GB", {{"2g.20gb", 0}, {"2g.20gb", 2}, {"2g.20gb", 4}, {"1g.20gb", 6}}, true, ""},
        LayoutCase{"compute over 7", "H100-80GB", {{"4g.40gb", 0}, {"2g.20gb", 4}, {"2g.20gb", 6}}, false, "cannot start"},
        LayoutCase{"A30 two 2g", "A30", {{"2g.12gb", 0}, {"2g.12gb", 2}}, true, ""},
        LayoutCase{"A30 4g plus 1g overlaps", "A30", {{"4g.24gb", 0}, {"1g.6gb", 3}}, false, "needs 5 compute slices"},
        LayoutCase{"A30 2g plus 1g overlaps", "A30", {{"2g.12gb", 2}, {"1g.6gb", 3}}, false, "overlaps"},
        // The A30 has one JPEG and one OFA engine, and each +me profile holds both.
        LayoutCase{"A30 two media-engine instances", "A30", {{"1g.6gb+me", 0}, {"2g.12gb+me", 2}}, false,
                   "needs engines the other instances hold (the GPU has 4 copy, 4 decoder, 0 encoder, 1 JPEG, 1 OFA"},
        LayoutCase{"A30 one media-engine instance", "A30", {{"1g.6gb+me", 0}, {"1g.6gb", 1}, {"2g.12gb", 2}}, true, ""}));

TEST(PlaceProfiles, ThreeGPlusFourOneGNeedsTheThreeGAtFour) {
  const auto& m = model("A100-SXM4-80GB");
  auto r = place_counts(m, {{"3g.40gb", 1}, {"1g.10gb", 4}});
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_TRUE(check_layout(m, *r));
  auto three = std::find_if(r->begin(), r->end(), [&](const PlacedInstance& i) { return i.profile == idx(m, "3g.40gb"); });
  ASSERT_NE(three, r->end());
  EXPECT_EQ(three->start, 4u);
  // One more 1g does not fit anywhere.
  auto five = place_counts(m, {{"3g.40gb", 1}, {"1g.10gb", 5}});
  ASSERT_FALSE(five);
  EXPECT_NE(five.error().message.find("cannot be placed"), std::string::npos);
}

TEST(PlaceProfiles, AroundFixedInstances) {
  const auto& m = model("A100-SXM4-80GB");
  // A 1g at slice 5 keeps the right half from taking a 3g.
  std::vector<PlacedInstance> fixed{{idx(m, "1g.10gb"), 5}};
  std::vector<uint32_t> want{idx(m, "3g.40gb")};
  auto r = place_profiles(m, want, fixed);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->at(0).start, 0u);
  std::vector<uint32_t> two{idx(m, "3g.40gb"), idx(m, "3g.40gb")};
  EXPECT_FALSE(place_profiles(m, two, fixed));
}

TEST(PlaceCounts, ErrorsNameTheProblem) {
  const auto& m = model("A100-SXM4-80GB");
  auto unknown = place_counts(m, {{"2g.40gb", 1}});
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, Errc::not_found);
  EXPECT_NE(unknown.error().message.find("no MIG profile '2g.40gb'"), std::string::npos);
  EXPECT_NE(unknown.error().message.find("2g.20gb"), std::string::npos);  // a nearest name
  auto over = place_counts(m, {{"1g.10gb", 8}});
  ASSERT_FALSE(over);
  EXPECT_NE(over.error().message.find("over the maximum of 7"), std::string::npos);
  auto compute = place_counts(m, {{"4g.40gb", 1}, {"2g.20gb", 2}});
  ASSERT_FALSE(compute);
  EXPECT_NE(compute.error().message.find("8 compute slices"), std::string::npos);
  auto media = place_counts(model("A30"), {{"1g.6gb+me", 1}, {"2g.12gb+me", 1}});
  ASSERT_FALSE(media);
  EXPECT_NE(media.error().message.find("2 JPEG, 2 OFA engines, the GPU has 4 copy, 4 decoder, 0 encoder, 1 JPEG, 1 OFA"),
            std::string::npos)
      << media.error().message;
  auto empty = place_counts(m, {});
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

// An independent enumeration: every subset of (profile, start) candidates,
// checked with check_layout, kept when nothing can be added.
std::vector<MigLayout> brute_force_maximal(const GpuModel& m, bool media) {
  std::vector<PlacedInstance> candidates;
  for (uint32_t p = 0; p < m.profiles.size(); ++p) {
    if (!media && is_media_variant(m.profiles[p])) continue;
    for (const auto& pl : m.profiles[p].placements) candidates.push_back({p, pl.start});
  }
  // Include/exclude each candidate in turn; a set that breaks a rule cannot
  // become valid by adding more, so that branch stops.
  std::vector<MigLayout> valid;
  MigLayout current;
  auto visit = [&](auto&& self, size_t i) -> void {
    if (i == candidates.size()) {
      if (!current.empty()) valid.push_back(current);
      return;
    }
    self(self, i + 1);
    current.push_back(candidates[i]);
    if (check_layout(m, current)) self(self, i + 1);
    current.pop_back();
  };
  visit(visit, 0);
  std::vector<MigLayout> maximal;
  for (const auto& l : valid) {
    bool extendable = false;
    for (const auto& c : candidates) {
      if (std::find(l.begin(), l.end(), c) != l.end()) continue;
      MigLayout bigger = l;
      bigger.push_back(c);
      if (check_layout(m, bigger)) { extendable = true; break; }
    }
    if (!extendable) {
      auto sorted = l;
      std::sort(sorted.begin(), sorted.end());
      maximal.push_back(sorted);
    }
  }
  std::sort(maximal.begin(), maximal.end());
  return maximal;
}

TEST(MaximalLayouts, HandCountForA100AndH100) {
  // Derived by hand from the placement table (memory slices 0-7, pairs
  // P0..P3, 7 compute slices), base profiles only:
  //   7g alone                                   1
  //   4g@0 + right half within 3 compute slices  7  (3g@4; 2g|1g1g|1g.20gb at 4 x 1g.20gb|1g at 6)
  //   3g@0 + right half                          7  (3g@4; {2g,1g.20gb,1g+1g} at 4 x {1g.20gb,1g} at 6)
  //   3g@4 + left pairs each full                9  ({2g,1g.20gb,1g+1g}^2)
  //   no 3g/4g/7g: pairs 0-2 full, pair 3 used  54  (3^3 x 2)
  // = 78.
  for (const char* gpu : {"A100-SXM4-80GB", "H100-SXM5-80GB"}) {
    const auto& m = model(gpu);
    EXPECT_EQ(maximal_layouts(m, {.include_media_variants = false}).size(), 78u) << gpu;
  }
}

TEST(MaximalLayouts, EqualBruteForceOnEveryModel) {
  for (const auto& m : Catalog::builtin().models()) {
    for (bool media : {false, true}) {
      SCOPED_TRACE(m.name + (media ? " with media variants" : ""));
      auto fast = maximal_layouts(m, {.include_media_variants = media});
      auto slow = brute_force_maximal(m, media);
      EXPECT_EQ(fast, slow);
      for (const auto& l : fast) { EXPECT_TRUE(check_layout(m, l)); }
    }
  }
}

TEST(MaximalLayouts, DistinctProfileSets) {
  const auto& m = model("A100-SXM4-80GB");
  auto layouts = maximal_layouts(m, {.include_media_variants = false});
  auto sets = distinct_profile_sets(layouts);
  EXPECT_LT(sets.size(), layouts.size());
  // Every set can be placed again from its counts alone.
  for (const auto& s : sets) { EXPECT_TRUE(place_profiles(m, s)) << describe_layout(m, {}); }
}

}  // namespace
}  // namespace tessera
