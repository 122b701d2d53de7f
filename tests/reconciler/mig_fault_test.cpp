// Fault injection for `tessera mig apply`: kept apart (and labelled slow)
// because it runs the real program a few thousand times.
#include "reconciler/apply_support.hpp"

namespace tessera {
namespace {

using nlohmann::json;
using testing::run;

// For each NVML call that changes or looks up MIG state during a transition,
// fail its Nth call once (N = 1, 2, ... until the call is not reached): the
// failed apply leaves a journal; the next apply converges with no orphan.
TEST(MigApply, AnyFailedNvmlCallIsCompletedByTheNextApply) {
  const auto& m = *Catalog::builtin().find("A100-SXM4-80GB");
  auto configs = configs_for(m);
  auto find = [&](const std::string& name) {
    return *std::find_if(configs.begin(), configs.end(), [&](const auto& c) { return c.name == name; });
  };
  const std::vector<std::pair<std::string, std::string>> transitions{
      {"all-disabled", "all-3g.40gb"}, {"all-1g.10gb", "all-balanced"}, {"all-balanced", "all-disabled"}};
  const std::vector<std::string> functions{
      "nvmlDeviceSetMigMode",          "nvmlDeviceGetGpuInstanceProfileInfo",   "nvmlDeviceGetGpuInstanceProfileInfoV",
      "nvmlDeviceCreateGpuInstanceWithPlacement", "nvmlGpuInstanceGetInfo",   "nvmlDeviceGetGpuInstanceById",
      "nvmlGpuInstanceGetComputeInstanceProfileInfo", "nvmlGpuInstanceCreateComputeInstance",
      "nvmlGpuInstanceGetComputeInstances", "nvmlComputeInstanceDestroy", "nvmlGpuInstanceDestroy"};
  size_t injected = 0, failed_applies = 0;
  for (const auto& [from, to] : transitions) {
    for (const auto& fn : functions) {
      for (int nth = 1; nth < 40; ++nth) {
        SCOPED_TRACE(from + " -> " + to + ", " + fn + " call " + std::to_string(nth));
        Node node(m.name);
        ASSERT_EQ(node.apply(from).exit_code, 0);
        ASSERT_EQ(run({kBin, "sim", "fault", node.dir(), "--function", fn, "--nth", std::to_string(nth), "--error",
                       "NVML_ERROR_UNKNOWN"}).exit_code, 0);
        auto broken = node.apply(to);
        auto show = json::parse(run({kBin, "sim", "show", node.dir()}).out);
        bool reached = show["faults"].empty();
        if (!reached) break;  // this call happens fewer than nth times
        ++injected;
        if (broken.exit_code != 0) {
          ++failed_applies;
          std::ifstream jf(node.dir() + "/tessera-state/mig-journal.json");
          if (jf) {
            auto j = json::parse(jf);
            EXPECT_EQ(j["outcome"], "failed");
            bool named = j["error"].get<std::string>().find("NVML_ERROR_UNKNOWN") != std::string::npos;
            for (const auto& s : j["steps"])
              named = named || (s["status"] == "failed" && s["detail"].get<std::string>().find("NVML_ERROR_UNKNOWN") != std::string::npos);
            EXPECT_TRUE(named) << j.dump(2);
          }
        }
        auto healed = node.apply(to);
        ASSERT_EQ(healed.exit_code, 0) << healed.err << healed.out;
        expect_matches(m, node, find(to));
      }
    }
  }
  EXPECT_GT(injected, 30u);
  EXPECT_GT(failed_applies, 10u);
}

}  // namespace
}  // namespace tessera
