// `tessera mig apply` on simulated nodes: NVIDIA's default configs apply on
// every model they target; an NVML failure at any step leaves a journal from
// which the next apply converges; busy instances survive without --force.
// Every ordered pair of configs: mig_pairs_test.cpp.
#include "reconciler/apply_support.hpp"

namespace tessera {
namespace {

using nlohmann::json;
using testing::run;
using testing::TempDir;

TEST(MigApply, EveryDefaultConfigOnEveryModelItTargets) {
  size_t applied = 0;
  for (const auto& m : Catalog::builtin().models()) {
    SCOPED_TRACE(m.name);
    Node node(m.name);
    for (const auto& c : configs_for(m)) {
      auto r = node.apply(c.name);
      ASSERT_EQ(r.exit_code, 0) << c.name << "\n" << r.err << r.out;
      expect_matches(m, node, c);
      ++applied;
    }
  }
  EXPECT_GT(applied, 80u);
}

TEST(MigApply, SevenOneGToFourOneGPlusThreeGKeepsFourUuids) {
  testing::TempDir dir;
  auto file = dir.write("c.yaml", R"(version: v1
mig-configs:
  seven:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 7}
  mixed:
    - devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 4, "3g.40gb": 1}
)");
  Node node("A100-SXM4-80GB");
  auto first = run({kBin, "mig", "apply", "-f", file, "-c", "seven", "--sim", node.dir(), "--json"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  auto created = json::parse(first.out)["gpus"][0]["created"];
  ASSERT_EQ(created.size(), 7u);
  auto second = run({kBin, "mig", "apply", "-f", file, "-c", "mixed", "--sim", node.dir(), "--json"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  auto report = json::parse(second.out)["gpus"][0];
  ASSERT_EQ(report["kept"].size(), 4u);
  EXPECT_EQ(report["destroyed"].size(), 3u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(report["kept"][i], created[i]);  // slices 0-3 keep their UUIDs
}

// --dry-run prints the plan, says that nothing changed, and changes nothing.
TEST(MigApply, ADryRunSaysNothingChanged) {
  Node node("A100-SXM4-80GB");
  const auto before = node.inventory();
  auto dry = run({kBin, "mig", "apply", "-f", kDefaults, "-c", "all-1g.10gb", "--sim", node.dir(), "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("dry run: nothing changed; run without --dry-run to apply these operations"), std::string::npos)
      << dry.out;
  EXPECT_EQ(node.inventory(), before);
  auto plan = run({kBin, "mig", "plan", "-f", kDefaults, "-c", "all-1g.10gb", "--sim", node.dir()});
  EXPECT_EQ(plan.out.find("dry run"), std::string::npos) << "mig plan is a plan by its name: " << plan.out;
  auto applied = node.apply("all-1g.10gb");
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  EXPECT_NE(dry.out.find(std::to_string(json::parse(applied.out)["operations"].get<int>()) + " operations"), std::string::npos)
      << "the dry run planned what the apply did: " << dry.out;
  dry = run({kBin, "mig", "apply", "-f", kDefaults, "-c", "all-1g.10gb", "--sim", node.dir(), "--dry-run"});
  EXPECT_NE(dry.out.find("nothing to do"), std::string::npos) << dry.out;
  EXPECT_EQ(dry.out.find("dry run"), std::string::npos) << dry.out;
}

TEST(MigApply, IdempotentSecondApplyDoesNothing) {
  Node node("H100-SXM5-80GB", 2);
  ASSERT_EQ(node.apply("all-balanced").exit_code, 0);
  auto again = node.apply("all-balanced");
  ASSERT_EQ(again.exit_code, 0);
  EXPECT_EQ(json::parse(again.out)["operations"], 0);
}

TEST(MigApply, BusyInstancesNeedForceAndTheMessageNamesTheProcess) {
  const auto& m = *Catalog::builtin().find("A100-SXM4-80GB");
  Node node(m.name, 2);
  auto first = node.apply("all-1g.10gb");
  ASSERT_EQ(first.exit_code, 0);
  std::string busy = json::parse(first.out)["gpus"][0]["created"][5];  // the 1g at slice 5
  ASSERT_EQ(run({kBin, "sim", "process", node.dir(), "--pid", "4242", "--memory", "2GiB", "--mig-device", busy}).exit_code, 0);
  auto before = node.layout(m);
  const json gpu1 = node.inventory()["gpus"][1]["gpu_instances"];
  auto refused = node.apply("all-3g.40gb");
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("used by pid 4242"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("--force"), std::string::npos);
  EXPECT_EQ(node.layout(m), before);  // nothing changed
  // A config that keeps the busy instance goes ahead around it.
  auto around = node.apply("all-balanced");
  EXPECT_EQ(around.exit_code, 1) << "all-balanced needs slices 4-7 for its 3g";
  // --force plans around it, but the driver refuses to destroy a MIG device with processes
  // running: refused before the first step, naming it; nothing changed on any GPU.
  auto preview = run({kBin, "mig", "plan", "-f", kDefaults, "-c", "all-3g.40gb", "--sim", node.dir(), "--force"});
  EXPECT_EQ(preview.exit_code, 0) << "the plan for once the process stops: " << preview.err;
  EXPECT_NE(preview.err.find("an apply now would be refused:\n  GPU 0 instance"), std::string::npos) << preview.err;
  auto forced = node.apply("all-3g.40gb", {"--force"});
  EXPECT_EQ(forced.exit_code, 1);
  EXPECT_NE(forced.err.find("the driver refuses to destroy (NVML_ERROR_IN_USE), --force or not; nothing was changed"),
            std::string::npos)
      << forced.err;
  EXPECT_NE(forced.err.find(busy + " used by pid 4242"), std::string::npos) << forced.err;
  EXPECT_EQ(node.layout(m), before);
  EXPECT_EQ(node.inventory()["gpus"][1]["gpu_instances"], gpu1) << "GPU 1 is not re-cut either";
  ASSERT_EQ(run({kBin, "sim", "end-process", node.dir(), "--pid", "4242"}).exit_code, 0);
  EXPECT_EQ(node.apply("all-3g.40gb").exit_code, 0);
}

// A step the driver refuses halfway (here injected: GPU 1's first GPU instance, after GPU 0's
// seven): the report says what changed and what is still there, and the hint fits the cause.
TEST(MigApply, AFailureHalfwayIsReportedWithTheHintForItsCause) {
  for (const std::string error : {"NVML_ERROR_IN_USE", "NVML_ERROR_NO_PERMISSION"}) {
    SCOPED_TRACE(error);
    Node node("A100-SXM4-80GB", 2);
    ASSERT_EQ(node.apply("all-1g.10gb").exit_code, 0);
    ASSERT_EQ(run({kBin, "sim", "fault", node.dir(), "--function", "nvmlGpuInstanceDestroy", "--nth", "8", "--error", error})
                  .exit_code,
              0);
    auto r = node.apply("all-3g.40gb");
    EXPECT_EQ(r.exit_code, 1);
    auto report = json::parse(r.out);
    EXPECT_EQ(report["gpus"][0]["not_destroyed"].size(), 0u) << report.dump();
    // GPU 1: the first MIG device's compute instance went before its GPU instance was refused;
    // the other six are still there.
    EXPECT_EQ(report["gpus"][1]["destroyed"].size(), 1u) << report.dump();
    EXPECT_EQ(report["gpus"][1]["not_destroyed"].size(), 6u) << report.dump();
    EXPECT_EQ(report["gpus"][1]["operations_done"], 1) << report.dump();
    ASSERT_EQ(run({kBin, "mig", "apply", "-f", kDefaults, "-c", "all-1g.10gb", "--sim", node.dir()}).exit_code, 0);
    ASSERT_EQ(run({kBin, "sim", "fault", node.dir(), "--function", "nvmlGpuInstanceDestroy", "--nth", "8", "--error", error})
                  .exit_code,
              0);
    auto text = run({kBin, "mig", "apply", "-f", kDefaults, "-c", "all-3g.40gb", "--sim", node.dir()});
    EXPECT_EQ(text.exit_code, 1);
    EXPECT_NE(text.out.find("the node is half-applied: GPU 0 changed, GPU 1 partly changed ("), std::string::npos) << text.out;
    EXPECT_NE(text.out.find("GPU 1  NOT destroyed (still there)  MIG-"), std::string::npos) << text.out;
    const bool in_use = error == "NVML_ERROR_IN_USE";
    EXPECT_EQ(text.out.find("(a MIG device in use: stop its processes") != std::string::npos, in_use) << text.out;
    EXPECT_EQ(text.out.find("(a permission: run it as root on the host)") != std::string::npos, !in_use) << text.out;
    EXPECT_NE(text.out.find("then run `tessera mig apply -f " + kDefaults + " -c all-3g.40gb --sim " + node.dir() +
                            "` again: it changes only what still differs"),
              std::string::npos)
        << text.out;
    auto again = node.apply("all-3g.40gb");
    EXPECT_EQ(again.exit_code, 0) << again.err << again.out;
  }
}

TEST(MigApply, StateFileAndJournal) {
  Node node("A100-SXM4-80GB");
  ASSERT_EQ(node.apply("all-2g.20gb").exit_code, 0);
  std::ifstream state(node.dir() + "/tessera-state/mig.config.state");
  std::string value;
  state >> value;
  EXPECT_EQ(value, "success");
  std::ifstream journal(node.dir() + "/tessera-state/mig-journal.json");
  auto j = json::parse(journal);
  EXPECT_EQ(j["outcome"], "success");
  EXPECT_EQ(j["config_name"], "all-2g.20gb");
  EXPECT_EQ(j["steps"].size(), 7u);  // enable + 3 x (GI + CI)
}

TEST(MigApply, BadInputChangesNothing) {
  Node node("A100-SXM4-80GB");
  auto unknown = node.apply("all-1g.10gbb");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("has no config named 'all-1g.10gbb' (nearest: all-1g.10gb"), std::string::npos);
  // all-1g.5gb is an A100-40GB layout: not placeable on this GPU.
  auto wrong_gpu = node.apply("all-1g.5gb");
  EXPECT_EQ(wrong_gpu.exit_code, 1);
  EXPECT_NE(wrong_gpu.err.find("GPU 0 (A100-SXM4-80GB): A100-SXM4-80GB has no MIG profile '1g.5gb'"), std::string::npos)
      << wrong_gpu.err;
  EXPECT_FALSE(node.mig_enabled());
  auto no_name = run({kBin, "mig", "apply", "-f", kDefaults, "--sim", node.dir()});
  EXPECT_EQ(no_name.exit_code, 2);
  // An empty file names itself and why; the GPUs stay as they are and no state is written.
  TempDir files;
  auto empty = files.write("empty.yaml", "");
  auto r = run({kBin, "mig", "apply", "-f", empty, "-c", "all-1g.10gb", "--sim", node.dir()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(empty + ": error: the file is empty: no version and no mig-configs"), std::string::npos) << r.err;
  EXPECT_FALSE(node.mig_enabled());

  // A config whose only entry names an A100 (device-filter), on an H100 node:
  // not "nothing to do", and no state written.
  Node h100("H100-SXM5-80GB");
  auto a100_only = files.write("a100.yaml",
                               "version: v1\nmig-configs:\n  mixed-inference-a100:\n"
                               "    - devices: all\n      device-filter: [\"0x20B210DE\"]\n      mig-enabled: true\n"
                               "      mig-devices: {\"3g.40gb\": 2}\n");
  auto state = files.path() + "/state";
  r = run({kBin, "mig", "apply", "-f", a100_only, "-c", "mixed-inference-a100", "--sim", h100.dir(), "--state-dir", state});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find("config 'mixed-inference-a100' selects none of this node's GPUs: GPU 0 (H100-SXM5-80GB) (PCI id "),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("nothing to do"), std::string::npos) << r.out;
  EXPECT_FALSE(h100.mig_enabled());
}

}  // namespace
}  // namespace tessera
