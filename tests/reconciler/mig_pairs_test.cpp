// Every ordered pair of NVIDIA's default configs converges with the fewest
// destroyed instances, checked against a brute-force search. The models come
// from the build (TESSERA_PAIR_MODELS): see CMakeLists.txt.
#include "reconciler/apply_support.hpp"
#include "support/mig_brute_force.hpp"

namespace tessera {
namespace {

using nlohmann::json;

class ConfigPairs : public ::testing::TestWithParam<const char*> {};

TEST_P(ConfigPairs, ConvergeAndDestroyTheMinimum) {
  const auto& m = *Catalog::builtin().find(GetParam());
  auto configs = configs_for(m);
  ASSERT_GE(configs.size(), 8u);
  size_t pairs = 0;
  for (const auto& from : configs) {
    Node node(m.name);
    ASSERT_EQ(node.apply(from.name).exit_code, 0);
    auto start = node.layout(m);
    for (const auto& to : configs) {
      SCOPED_TRACE(from.name + " -> " + to.name);
      auto r = node.apply(to.name);
      ASSERT_EQ(r.exit_code, 0) << r.err;
      auto report = json::parse(r.out);
      expect_matches(m, node, to);
      std::vector<uint32_t> wanted;
      for (const auto& [name, count] : to.counts)
        wanted.insert(wanted.end(), count, static_cast<uint32_t>(m.profile(name) - m.profiles.data()));
      size_t minimum = to.enabled ? testing::brute_force_min_destroyed(m, start, wanted) : start.size();
      EXPECT_EQ(report["gpus"][0]["destroyed"].size(), minimum);
      // Back to `from` for the next pair (a transition too, checked the same way).
      ASSERT_EQ(node.apply(from.name).exit_code, 0);
      expect_matches(m, node, from);
      start = node.layout(m);
      ++pairs;
    }
  }
  EXPECT_EQ(pairs, configs.size() * configs.size());
}

INSTANTIATE_TEST_SUITE_P(Models, ConfigPairs, ::testing::Values(TESSERA_PAIR_MODELS));

}  // namespace
}  // namespace tessera
