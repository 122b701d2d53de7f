#include "sharing/node_labels.hpp"

#include <gtest/gtest.h>

#include "sharing/fixtures.hpp"

namespace tessera::sharing {
namespace {

using Labels = std::map<std::string, std::string>;
using testing::parse;
using testing::two_gpu_node;

constexpr uint64_t kMiB = 1ull << 20;

Gpu gpu(uint32_t index, std::string model, uint32_t cc, bool mig = false) {
  Gpu g;
  g.index = index;
  g.uuid = "GPU-" + std::to_string(index);
  g.model = std::move(model);
  g.pci_bus_id = "00000000:0" + std::to_string(index) + ":00.0";
  g.memory_bytes = 79000 * kMiB;  // usable, total less reserved: not what gpu.memory shows
  g.mig_enabled = mig;
  g.compute_capability = cc;
  return g;
}

MigDevice mig(const Gpu& g, uint32_t n, std::string profile, uint64_t mib, uint32_t start) {
  MigDevice m;
  m.uuid = "MIG-" + std::to_string(g.index) + "-" + std::to_string(n);
  m.profile = std::move(profile);
  m.gi_id = n + 1;
  m.start = start;
  m.memory_bytes = mib * kMiB;
  m.nvml_index = n;
  return m;
}

// Eight A100-SXM4-80GB, each cut into seven 1g.10gb when `cut`.
Inventory a100_node(bool cut) {
  Inventory inv;
  for (uint32_t i = 0; i < 8; ++i) {
    Gpu g = gpu(i, "A100-SXM4-80GB", 80, cut);
    if (cut)
      for (uint32_t n = 0; n < 7; ++n) g.mig_devices.push_back(mig(g, n, "1g.10gb", 9728, n));
    inv.gpus.push_back(g);
  }
  return inv;
}

// Every label any test produces is one Kubernetes accepts, and one the
// removal rule owns (besides mig-manager's two, which are never removed).
NodeLabels run(const LabelInputs& in) {
  NodeLabels out = node_labels(in);
  for (const auto& [k, v] : out.labels) {
    EXPECT_EQ(label_key_problem(k), std::nullopt) << k;
    EXPECT_EQ(label_value_problem(v), std::nullopt) << k << "=" << v;
    EXPECT_TRUE(owned_label(k) || k == "nvidia.com/mig.config" || k == "nvidia.com/mig.config.state") << k;
  }
  return out;
}

Labels labels(const Inventory& inv, const config::DevicePluginConfig& config, std::string driver = "",
              std::string cuda = "") {
  LabelInputs in(inv, config);
  in.driver_version = std::move(driver);
  in.cuda_driver_version = std::move(cuda);
  return run(in).labels;
}

// The labels whose key starts with `prefix`.
Labels with_prefix(const Labels& all, std::string_view prefix) {
  Labels out;
  for (const auto& [k, v] : all)
    if (k.starts_with(prefix)) out.emplace(k, v);
  return out;
}

// Whole GPUs, no sharing: every label, exactly. gpu.memory is the catalog's
// 81920 MiB (NVML's total), not the Inventory's usable memory.
TEST(NodeLabels, WholeGpusWithoutSharing) {
  auto inv = a100_node(false);
  EXPECT_EQ(labels(inv, parse("version: v1\n"), "550.107.02", "12.4"),
            (Labels{
                {"nvidia.com/cuda.driver.major", "550"},
                {"nvidia.com/cuda.driver.minor", "107"},
                {"nvidia.com/cuda.driver.rev", "02"},
                {"nvidia.com/cuda.driver-version.major", "550"},
                {"nvidia.com/cuda.driver-version.minor", "107"},
                {"nvidia.com/cuda.driver-version.revision", "02"},
                {"nvidia.com/cuda.driver-version.full", "550.107.02"},
                {"nvidia.com/cuda.runtime.major", "12"},
                {"nvidia.com/cuda.runtime.minor", "4"},
                {"nvidia.com/cuda.runtime-version.major", "12"},
                {"nvidia.com/cuda.runtime-version.minor", "4"},
                {"nvidia.com/cuda.runtime-version.full", "12.4"},
                {"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"},
                {"nvidia.com/gpu.count", "8"},
                {"nvidia.com/gpu.replicas", "1"},
                {"nvidia.com/gpu.sharing-strategy", "none"},
                {"nvidia.com/gpu.memory", "81920"},
                {"nvidia.com/gpu.family", "ampere"},
                {"nvidia.com/gpu.compute.major", "8"},
                {"nvidia.com/gpu.compute.minor", "0"},
                {"nvidia.com/mig.capable", "true"},
                {"nvidia.com/mps.capable", "false"},
            }));
}

// What the agent read from NVML beats the catalog: the name as the driver
// spells it, the total memory, the machine type (sanitised).
TEST(NodeLabels, AgentFactsBeatTheCatalog) {
  auto inv = a100_node(false);
  auto config = parse("version: v1\n");
  LabelInputs in(inv, config);
  in.machine_type = "DGX A100 (rev 2)";
  for (const auto& g : inv.gpus) in.gpu_facts[g.uuid] = GpuFacts{"A100-SXM4-80GB", 81251 * kMiB + 12345, true};
  auto out = run(in).labels;
  EXPECT_EQ(out.at("nvidia.com/gpu.product"), "A100-SXM4-80GB");
  EXPECT_EQ(out.at("nvidia.com/gpu.memory"), "81251");
  EXPECT_EQ(out.at("nvidia.com/gpu.machine"), "DGX-A100-rev-2");
}

TEST(NodeLabels, TimeSlicingUnrenamedGetsSharedSuffix) {
  auto out = labels(a100_node(false), parse(R"(version: v1
sharing:
  timeSlicing:
    resources: [{name: nvidia.com/gpu, replicas: 4}]
)"));
  EXPECT_EQ(with_prefix(out, "nvidia.com/gpu."), (Labels{
                                                     {"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB-SHARED"},
                                                     {"nvidia.com/gpu.count", "8"},
                                                     {"nvidia.com/gpu.replicas", "4"},
                                                     {"nvidia.com/gpu.sharing-strategy", "time-slicing"},
                                                     {"nvidia.com/gpu.memory", "81920"},
                                                     {"nvidia.com/gpu.family", "ampere"},
                                                     {"nvidia.com/gpu.compute.major", "8"},
                                                     {"nvidia.com/gpu.compute.minor", "0"},
                                                 }));
  EXPECT_EQ(out.at("nvidia.com/mps.capable"), "false");
}

// A rename (explicit or renameByDefault) drops the suffix; the keys stay those
// of the resource's own name, nvidia.com/gpu.*, and replicas stays the count.
TEST(NodeLabels, TimeSlicingRenamedKeepsPlainProduct) {
  for (const char* sharing : {"    resources: [{name: nvidia.com/gpu, replicas: 4, rename: nvidia.com/gpu.ts}]\n",
                              "    renameByDefault: true\n    resources: [{name: nvidia.com/gpu, replicas: 4}]\n"}) {
    auto out = labels(a100_node(false), parse(std::string("version: v1\nsharing:\n  timeSlicing:\n") + sharing));
    EXPECT_EQ(out.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB") << sharing;
    EXPECT_EQ(out.at("nvidia.com/gpu.replicas"), "4") << sharing;
    EXPECT_EQ(out.at("nvidia.com/gpu.sharing-strategy"), "time-slicing") << sharing;
    EXPECT_EQ(out.count("nvidia.com/gpu.ts.replicas") + out.count("nvidia.com/gpu.shared.replicas"), 0u);
  }
}

// A sharing entry for another resource shares nothing here
// (internal/lm/resource_test.go, "time-slicing ignores non-matching resource").
TEST(NodeLabels, SharingOfAnotherResourceLeavesGpusAlone) {
  auto out = labels(a100_node(false), parse(R"(version: v1
sharing:
  timeSlicing:
    resources: [{name: nvidia.com/mig-1g.10gb, replicas: 2}]
)"));
  EXPECT_EQ(out.at("nvidia.com/gpu.replicas"), "1");
  EXPECT_EQ(out.at("nvidia.com/gpu.sharing-strategy"), "none");
  EXPECT_EQ(out.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB");
}

TEST(NodeLabels, Mps) {
  auto out = labels(a100_node(false), parse(R"(version: v1
sharing:
  mps:
    resources: [{name: nvidia.com/gpu, replicas: 8}]
)"));
  EXPECT_EQ(out.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB-SHARED");
  EXPECT_EQ(out.at("nvidia.com/gpu.replicas"), "8");
  EXPECT_EQ(out.at("nvidia.com/gpu.sharing-strategy"), "mps");
  EXPECT_EQ(out.at("nvidia.com/gpu.count"), "8");
  EXPECT_EQ(out.at("nvidia.com/mps.capable"), "true");
}

// A config the plugin refuses for this node (more MPS clients than a Volta
// daemon serves) still gets labels, by GFD's rule: the entry with the name.
TEST(NodeLabels, RefusedSharingFallsBackToGfdsRule) {
  Inventory inv;
  inv.gpus = {gpu(0, "Tesla V100-SXM2-16GB", 70), gpu(1, "Tesla V100-SXM2-16GB", 70)};
  auto out = labels(inv, parse("version: v1\nsharing:\n  mps:\n    resources: [{name: nvidia.com/gpu, replicas: 20}]\n"));
  EXPECT_EQ(out.at("nvidia.com/gpu.replicas"), "20");
  EXPECT_EQ(out.at("nvidia.com/gpu.product"), "Tesla-V100-SXM2-16GB-SHARED");
  EXPECT_EQ(out.at("nvidia.com/gpu.family"), "volta");
  EXPECT_EQ(out.at("nvidia.com/mig.capable"), "false");  // compute capability 7.0: before MIG
  EXPECT_EQ(out.count("nvidia.com/gpu.memory"), 0u);     // neither NVML's total nor the catalog's
}

// Single: the nvidia.com/gpu labels describe the MIG devices; the
// architecture labels stay the GPUs'.
TEST(NodeLabels, MigSingle) {
  auto out = labels(a100_node(true), parse("version: v1\nflags: {migStrategy: single}\n"));
  EXPECT_EQ(with_prefix(out, "nvidia.com/gpu."), (Labels{
                                                     {"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb"},
                                                     {"nvidia.com/gpu.count", "56"},
                                                     {"nvidia.com/gpu.replicas", "1"},
                                                     {"nvidia.com/gpu.sharing-strategy", "none"},
                                                     {"nvidia.com/gpu.memory", "9728"},
                                                     {"nvidia.com/gpu.multiprocessors", "14"},
                                                     {"nvidia.com/gpu.slices.gi", "1"},
                                                     {"nvidia.com/gpu.slices.ci", "1"},
                                                     {"nvidia.com/gpu.engines.copy", "1"},
                                                     {"nvidia.com/gpu.engines.decoder", "0"},
                                                     {"nvidia.com/gpu.engines.encoder", "0"},
                                                     {"nvidia.com/gpu.engines.jpeg", "0"},
                                                     {"nvidia.com/gpu.engines.ofa", "0"},
                                                     {"nvidia.com/gpu.family", "ampere"},
                                                     {"nvidia.com/gpu.compute.major", "8"},
                                                     {"nvidia.com/gpu.compute.minor", "0"},
                                                 }));
  EXPECT_EQ(out.at("nvidia.com/mig.strategy"), "single");
  EXPECT_EQ(out.at("nvidia.com/mig.capable"), "true");
}

TEST(NodeLabels, MigSingleShared) {
  auto out = labels(a100_node(true), parse(R"(version: v1
flags: {migStrategy: single}
sharing:
  timeSlicing:
    resources: [{name: nvidia.com/gpu, replicas: 3}]
)"));
  EXPECT_EQ(out.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-SHARED");
  EXPECT_EQ(out.at("nvidia.com/gpu.replicas"), "3");
  EXPECT_EQ(out.at("nvidia.com/gpu.sharing-strategy"), "time-slicing");
  EXPECT_EQ(out.at("nvidia.com/gpu.count"), "56");
}

// Mixed: per-profile labels with counts; the whole-GPU labels count every GPU
// of the name, MIG or not, and take their sharing from the one without MIG.
// 1g.20gb's engine counts were inferred in the catalog, not observed: left out.
TEST(NodeLabels, MigMixed) {
  auto out = labels(two_gpu_node(), parse(R"(version: v1
flags: {migStrategy: mixed}
sharing:
  timeSlicing:
    resources: [{name: nvidia.com/mig-1g.20gb, replicas: 2}]
)"));
  EXPECT_EQ(with_prefix(out, "nvidia.com/mig-"),
            (Labels{
                {"nvidia.com/mig-1g.20gb.product", "NVIDIA-A100-SXM4-80GB-MIG-1g.20gb-SHARED"},
                {"nvidia.com/mig-1g.20gb.count", "2"},
                {"nvidia.com/mig-1g.20gb.replicas", "2"},
                {"nvidia.com/mig-1g.20gb.sharing-strategy", "time-slicing"},
                {"nvidia.com/mig-1g.20gb.memory", "19968"},
                {"nvidia.com/mig-1g.20gb.multiprocessors", "14"},
                {"nvidia.com/mig-1g.20gb.slices.gi", "1"},
                {"nvidia.com/mig-1g.20gb.slices.ci", "1"},
                {"nvidia.com/mig-3g.40gb.product", "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb"},
                {"nvidia.com/mig-3g.40gb.count", "1"},
                {"nvidia.com/mig-3g.40gb.replicas", "1"},
                {"nvidia.com/mig-3g.40gb.sharing-strategy", "none"},
                {"nvidia.com/mig-3g.40gb.memory", "40192"},
                {"nvidia.com/mig-3g.40gb.multiprocessors", "42"},
                {"nvidia.com/mig-3g.40gb.slices.gi", "3"},
                {"nvidia.com/mig-3g.40gb.slices.ci", "3"},
                {"nvidia.com/mig-3g.40gb.engines.copy", "3"},
                {"nvidia.com/mig-3g.40gb.engines.decoder", "2"},
                {"nvidia.com/mig-3g.40gb.engines.encoder", "0"},
                {"nvidia.com/mig-3g.40gb.engines.jpeg", "0"},
                {"nvidia.com/mig-3g.40gb.engines.ofa", "0"},
            }));
  EXPECT_EQ(out.at("nvidia.com/gpu.count"), "2");
  EXPECT_EQ(out.at("nvidia.com/gpu.replicas"), "1");
  EXPECT_EQ(out.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(out.at("nvidia.com/mig.strategy"), "mixed");
  EXPECT_EQ(out.count("nvidia.com/gpu.multiprocessors"), 0u);
}

// "+me" becomes ".me" in the type, the resource and the keys.
TEST(NodeLabels, MigMixedMediaExtensions) {
  Inventory inv;
  Gpu g = gpu(0, "A100-SXM4-80GB", 80, true);
  g.mig_devices = {mig(g, 0, "1g.10gb+me", 9728, 0), mig(g, 1, "1g.10gb", 9728, 1)};
  inv.gpus = {g};
  auto out = labels(inv, parse("version: v1\nflags: {migStrategy: mixed}\n"));
  EXPECT_EQ(out.at("nvidia.com/mig-1g.10gb.me.product"), "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb.me");
  EXPECT_EQ(out.at("nvidia.com/mig-1g.10gb.me.count"), "1");
  EXPECT_EQ(out.at("nvidia.com/mig-1g.10gb.me.engines.ofa"), "1");
  EXPECT_EQ(out.at("nvidia.com/mig-1g.10gb.count"), "1");
  // A GPU with MIG on and no GPU without: whole-GPU labels with sharing off, replicas 0.
  EXPECT_EQ(out.at("nvidia.com/gpu.replicas"), "0");
  EXPECT_EQ(out.at("nvidia.com/gpu.count"), "1");
}

// A device whose compute instance is smaller than its GPU instance has a
// name tessera does not know: mixed leaves it out, single calls it a second type.
TEST(NodeLabels, PartialComputeInstances) {
  Inventory inv;
  Gpu g = gpu(0, "A100-SXM4-80GB", 80, true);
  g.mig_devices = {mig(g, 0, "1g.10gb", 9728, 0), mig(g, 1, "2g.20gb", 19968, 2)};
  g.mig_devices[1].full_instance = false;
  inv.gpus = {g};
  auto mixed = labels(inv, parse("version: v1\nflags: {migStrategy: mixed}\n"));
  EXPECT_EQ(mixed.at("nvidia.com/mig-1g.10gb.count"), "1");
  EXPECT_EQ(mixed.count("nvidia.com/mig-2g.20gb.count"), 0u);
  auto single = labels(inv, parse("version: v1\nflags: {migStrategy: single}\n"));
  EXPECT_EQ(single.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB-MIG-INVALID");
}

// GPUs with and without MIG on one node. Single is invalid there: GFD's
// INVALID labels over the whole-GPU ones. None and mixed label whole GPUs.
TEST(NodeLabels, MixedMigAndWholeGpus) {
  auto single = labels(two_gpu_node(), parse("version: v1\nflags: {migStrategy: single}\n"));
  EXPECT_EQ(with_prefix(single, "nvidia.com/gpu."), (Labels{
                                                        {"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB-MIG-INVALID"},
                                                        {"nvidia.com/gpu.count", "0"},
                                                        {"nvidia.com/gpu.replicas", "0"},
                                                        {"nvidia.com/gpu.sharing-strategy", ""},
                                                        {"nvidia.com/gpu.memory", "0"},
                                                        {"nvidia.com/gpu.family", "ampere"},
                                                        {"nvidia.com/gpu.compute.major", "8"},
                                                        {"nvidia.com/gpu.compute.minor", "0"},
                                                    }));
  EXPECT_EQ(single.at("nvidia.com/mig.strategy"), "single");
  EXPECT_EQ(with_prefix(single, "nvidia.com/mig-"), Labels{});

  auto none = labels(two_gpu_node(), parse(R"(version: v1
sharing:
  timeSlicing:
    resources: [{name: nvidia.com/gpu, replicas: 2}]
)"));
  EXPECT_EQ(none.at("nvidia.com/gpu.count"), "2");
  EXPECT_EQ(none.at("nvidia.com/gpu.replicas"), "2");
  EXPECT_EQ(none.at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB-SHARED");
  EXPECT_EQ(none.count("nvidia.com/mig.strategy"), 0u);
  EXPECT_EQ(with_prefix(none, "nvidia.com/mig-"), Labels{});
}

// Several models: the lowest-indexed GPU without MIG names the set; the
// count is that name's GPUs.
TEST(NodeLabels, SeveralModels) {
  Inventory inv;
  inv.gpus = {gpu(0, "H100-SXM5-80GB", 90, true), gpu(1, "NVIDIA L4", 89), gpu(2, "NVIDIA L4", 89)};
  auto out = labels(inv, parse("version: v1\nflags: {migStrategy: mixed}\n"));
  EXPECT_EQ(out.at("nvidia.com/gpu.product"), "NVIDIA-L4");
  EXPECT_EQ(out.at("nvidia.com/gpu.count"), "2");
  EXPECT_EQ(out.at("nvidia.com/gpu.family"), "ada-lovelace");
  EXPECT_EQ(out.at("nvidia.com/mig.capable"), "true");  // the H100
}

TEST(NodeLabels, EmptyInventoryHasNoGfdLabels) {
  Inventory inv;
  auto config = parse("version: v1\nflags: {migStrategy: mixed}\n");
  EXPECT_EQ(labels(inv, config, "550.107.02", "12.4"), Labels{});
  LabelInputs in(inv, config);
  in.mig_config = "all-disabled";
  in.mig_config_state = "success";
  EXPECT_EQ(run(in).labels,
            (Labels{{"nvidia.com/mig.config", "all-disabled"}, {"nvidia.com/mig.config.state", "success"}}));
}

TEST(NodeLabels, VersionFormats) {
  auto inv = a100_node(false);
  auto config = parse("version: v1\n");
  auto two = labels(inv, config, "535.54", "12.2");
  EXPECT_EQ(two.at("nvidia.com/cuda.driver-version.revision"), "");  // GFD writes it empty
  EXPECT_EQ(two.at("nvidia.com/cuda.driver.rev"), "");
  EXPECT_EQ(two.at("nvidia.com/cuda.driver-version.full"), "535.54");
  for (const char* bad : {"550", "1.2.3.4", ""}) {
    auto out = labels(inv, config, bad, "twelve");
    EXPECT_EQ(with_prefix(out, "nvidia.com/cuda."), Labels{}) << bad;
  }
}

TEST(NodeLabels, MigCapableOnlyWhenKnown) {
  auto config = parse("version: v1\n");
  Inventory t4;
  t4.gpus = {gpu(0, "Tesla T4", 75)};
  EXPECT_EQ(labels(t4, config).at("nvidia.com/mig.capable"), "false");
  Inventory l4;
  l4.gpus = {gpu(0, "NVIDIA L4", 89)};
  EXPECT_EQ(labels(l4, config).count("nvidia.com/mig.capable"), 0u);  // Ada, unknown to the catalog
  LabelInputs in(l4, config);
  in.gpu_facts["GPU-0"].mig_capable = false;
  EXPECT_EQ(run(in).labels.at("nvidia.com/mig.capable"), "false");
}

// A value over 63 characters is left out and reported, as NFD drops it.
TEST(NodeLabels, InvalidValuesAreDroppedAndReported) {
  Inventory inv;
  Gpu g = gpu(0, "RTX PRO 6000", 120, true);
  g.mig_devices = {mig(g, 0, "1g.24gb+gfx", 24000, 0)};
  inv.gpus = {g};
  auto config = parse(R"(version: v1
flags: {migStrategy: mixed}
sharing:
  timeSlicing:
    resources: [{name: nvidia.com/mig-1g.24gb.gfx, replicas: 2}]
)");
  LabelInputs in(inv, config);
  in.gpu_facts["GPU-0"].name = "NVIDIA RTX PRO 6000 Blackwell Server Edition";
  auto out = run(in);
  EXPECT_EQ(out.labels.count("nvidia.com/mig-1g.24gb.gfx.product"), 0u);
  ASSERT_EQ(out.dropped.size(), 1u);
  EXPECT_TRUE(out.dropped[0].starts_with("nvidia.com/mig-1g.24gb.gfx.product=NVIDIA-RTX-PRO-6000-Blackwell"))
      << out.dropped[0];
  EXPECT_NE(out.dropped[0].find("67 characters, over 63"), std::string::npos) << out.dropped[0];
  EXPECT_EQ(out.labels.at("nvidia.com/mig-1g.24gb.gfx.count"), "1");
  EXPECT_EQ(out.labels.at("nvidia.com/gpu.family"), "blackwell");
}

// internal/lm/mig-strategy_test.go, TestMigStrategyNoneLabels, "sharing is
// applied to MIG device and non-MIG device": a GPU named MOCKMODEL with MIG
// on (compute capability read as 0) and one without (8.0), 300 MiB each,
// time-slicing nvidia.com/gpu x2 under strategy none.
TEST(NodeLabels, GfdCaseNoneWithMigAndWholeGpu) {
  Inventory inv;
  inv.gpus = {gpu(0, "MOCKMODEL", 0, true), gpu(1, "MOCKMODEL", 80)};
  auto config = parse("version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 2}]\n");
  LabelInputs in(inv, config);
  for (const auto& g : inv.gpus) in.gpu_facts[g.uuid].memory_total_bytes = 300 * kMiB;
  EXPECT_EQ(with_prefix(run(in).labels, "nvidia.com/gpu."), (Labels{
                                                                {"nvidia.com/gpu.compute.major", "8"},
                                                                {"nvidia.com/gpu.compute.minor", "0"},
                                                                {"nvidia.com/gpu.family", "ampere"},
                                                                {"nvidia.com/gpu.count", "2"},
                                                                {"nvidia.com/gpu.replicas", "2"},
                                                                {"nvidia.com/gpu.sharing-strategy", "time-slicing"},
                                                                {"nvidia.com/gpu.memory", "300"},
                                                                {"nvidia.com/gpu.product", "MOCKMODEL-SHARED"},
                                                            }));
}

// Same file, "sharing is not applied to multiple MIG device; replicas is zero".
TEST(NodeLabels, GfdCaseNoneWithMigGpusOnly) {
  Inventory inv;
  inv.gpus = {gpu(0, "MOCKMODEL", 0, true), gpu(1, "MOCKMODEL", 0, true)};
  auto config = parse("version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 2}]\n");
  LabelInputs in(inv, config);
  for (const auto& g : inv.gpus) in.gpu_facts[g.uuid].memory_total_bytes = 300 * kMiB;
  EXPECT_EQ(with_prefix(run(in).labels, "nvidia.com/gpu."), (Labels{
                                                                {"nvidia.com/gpu.count", "2"},
                                                                {"nvidia.com/gpu.replicas", "0"},
                                                                {"nvidia.com/gpu.sharing-strategy", "none"},
                                                                {"nvidia.com/gpu.memory", "300"},
                                                                {"nvidia.com/gpu.product", "MOCKMODEL"},
                                                            }));
}

// Same file, TestMigStrategySingleLabels, "mixed mig enabled and disabled
// returns invalid config".
TEST(NodeLabels, GfdCaseSingleInvalid) {
  Inventory inv;
  Gpu with_mig = gpu(0, "MOCKMODEL", 0, true);
  with_mig.mig_devices = {mig(with_mig, 0, "1g.100gb", 100, 0)};
  inv.gpus = {with_mig, gpu(1, "MOCKMODEL", 80)};
  auto config = parse("version: v1\nflags: {migStrategy: single}\n");
  LabelInputs in(inv, config);
  for (const auto& g : inv.gpus) in.gpu_facts[g.uuid].memory_total_bytes = 300 * kMiB;
  auto out = run(in).labels;
  Labels gfd_keys;
  for (const auto& [k, v] : out)
    if (k.starts_with("nvidia.com/gpu.") || k == "nvidia.com/mig.strategy") gfd_keys.emplace(k, v);
  EXPECT_EQ(gfd_keys, (Labels{
                          {"nvidia.com/gpu.compute.major", "8"},
                          {"nvidia.com/gpu.compute.minor", "0"},
                          {"nvidia.com/gpu.family", "ampere"},
                          {"nvidia.com/gpu.count", "0"},
                          {"nvidia.com/gpu.replicas", "0"},
                          {"nvidia.com/gpu.sharing-strategy", ""},
                          {"nvidia.com/gpu.memory", "0"},
                          {"nvidia.com/gpu.product", "MOCKMODEL-MIG-INVALID"},
                          {"nvidia.com/mig.strategy", "single"},
                      }));
}

// docs/gpu-feature-discovery/README.md, MIG 'single' example: 8 GPUs of 7
// MIG devices each, A100-SXM4-40GB-MIG-1g.5gb, 56, 14 multiprocessors, one
// slice each (the README's memory and engine figures are illustrative; these
// are the catalog's and the driver's). The older drivers' name has no "NVIDIA ".
TEST(NodeLabels, GfdReadmeSingleExample) {
  Inventory inv;
  for (uint32_t i = 0; i < 8; ++i) {
    Gpu g = gpu(i, "A100-SXM4-40GB", 80, true);
    for (uint32_t n = 0; n < 7; ++n) g.mig_devices.push_back(mig(g, n, "1g.5gb", 4864, n));
    inv.gpus.push_back(g);
  }
  auto config = parse("version: v1\nflags: {migStrategy: single}\n");
  LabelInputs in(inv, config);
  for (const auto& g : inv.gpus) in.gpu_facts[g.uuid].name = "A100-SXM4-40GB";
  auto out = run(in).labels;
  EXPECT_EQ(out.at("nvidia.com/mig.strategy"), "single");
  EXPECT_EQ(out.at("nvidia.com/gpu.product"), "A100-SXM4-40GB-MIG-1g.5gb");
  EXPECT_EQ(out.at("nvidia.com/gpu.count"), "56");
  EXPECT_EQ(out.at("nvidia.com/gpu.multiprocessors"), "14");
  EXPECT_EQ(out.at("nvidia.com/gpu.slices.gi"), "1");
  EXPECT_EQ(out.at("nvidia.com/gpu.slices.ci"), "1");
  EXPECT_EQ(out.at("nvidia.com/gpu.memory"), "4864");
}

// internal/lm/resource_test.go, TestSanitise, re-expressed.
TEST(NodeLabels, Sanitise) {
  EXPECT_EQ(gfd_sanitise("a space separated string"), "a-space-separated-string");
  EXPECT_EQ(gfd_sanitise("some(thing)else"), "somethingelse");
  EXPECT_EQ(gfd_sanitise("some ( thing )else"), "some-thing-else");
  EXPECT_EQ(gfd_sanitise("NVIDIA-TITAN-X-(Pascal)"), "NVIDIA-TITAN-X-Pascal");
  EXPECT_EQ(gfd_sanitise(" input  with multiple   spaces   "), "input-with-multiple-spaces");
  EXPECT_EQ(gfd_sanitise("some [ / thing / ]else"), "some-thing-else");
  EXPECT_EQ(gfd_sanitise("some-thing.else_new"), "some-thing.else_new");
  EXPECT_EQ(gfd_sanitise("NVIDIA H100 80GB HBM3"), "NVIDIA-H100-80GB-HBM3");
}

TEST(NodeLabels, Families) {
  EXPECT_EQ(gfd_family(7, 0), "volta");
  EXPECT_EQ(gfd_family(7, 5), "turing");
  EXPECT_EQ(gfd_family(8, 0), "ampere");
  EXPECT_EQ(gfd_family(8, 6), "ampere");
  EXPECT_EQ(gfd_family(8, 9), "ada-lovelace");
  EXPECT_EQ(gfd_family(9, 0), "hopper");
  EXPECT_EQ(gfd_family(10, 0), "blackwell");
  EXPECT_EQ(gfd_family(12, 0), "blackwell");
  EXPECT_EQ(gfd_family(11, 0), "undefined");
  EXPECT_EQ(gfd_family(13, 0), "rubin");
  EXPECT_EQ(gfd_family(6, 1), "pascal");
}

TEST(NodeLabels, KubernetesRules) {
  EXPECT_EQ(label_key_problem("nvidia.com/gpu.product"), std::nullopt);
  EXPECT_EQ(label_key_problem("plain"), std::nullopt);
  EXPECT_NE(label_key_problem("Nvidia.com/x"), std::nullopt);
  EXPECT_NE(label_key_problem("nvidia.com/"), std::nullopt);
  EXPECT_NE(label_key_problem("a/b/c"), std::nullopt);
  EXPECT_NE(label_key_problem("nvidia.com/-x"), std::nullopt);
  EXPECT_NE(label_key_problem("nvidia.com/" + std::string(64, 'a')), std::nullopt);
  EXPECT_EQ(label_key_problem("nvidia.com/" + std::string(63, 'a')), std::nullopt);
  EXPECT_EQ(label_value_problem(""), std::nullopt);
  EXPECT_EQ(label_value_problem("A100-SXM4_80GB.x"), std::nullopt);
  EXPECT_EQ(label_value_problem(std::string(63, 'x')), std::nullopt);
  EXPECT_NE(label_value_problem(std::string(64, 'x')), std::nullopt);
  EXPECT_NE(label_value_problem("-x"), std::nullopt);
  EXPECT_NE(label_value_problem("x."), std::nullopt);
  EXPECT_NE(label_value_problem("a b"), std::nullopt);
  EXPECT_NE(label_value_problem("a/b"), std::nullopt);
}

TEST(NodeLabels, OwnedLabelsAndStaleOnes) {
  for (const char* key : {"nvidia.com/gpu.product", "nvidia.com/gpu.engines.ofa", "nvidia.com/mig.strategy",
                          "nvidia.com/mig.capable", "nvidia.com/cuda.driver.rev", "nvidia.com/mig-1g.10gb.count",
                          "nvidia.com/mig-1g.10gb.me.engines.jpeg", "nvidia.com/mig-1c.2g.20gb.product",
                          "nvidia.com/mig-7g.141gb.sharing-strategy", "nvidia.com/gpu.machine"})
    EXPECT_TRUE(owned_label(key)) << key;
  for (const char* key : {"nvidia.com/mig.config", "nvidia.com/mig.config.state", "nvidia.com/gpu.mode",
                          "nvidia.com/gpu.clique", "nvidia.com/gfd.timestamp", "nvidia.com/vgpu.present",
                          "nvidia.com/gpu.deploy.device-plugin", "nvidia.com/device-plugin.config",
                          "nvidia.com/mig-foo.count", "nvidia.com/mig-1g.10gb.colour", "example.com/gpu.product",
                          "nvidia.com/gpu.shared.replicas", "nvidia.com/gpu"})
    EXPECT_FALSE(owned_label(key)) << key;

  // After a layout change from 1g.10gb to 3g.40gb, and a switch of sharing.
  auto before = labels(a100_node(true), parse("version: v1\nflags: {migStrategy: mixed}\n"));
  Inventory inv = a100_node(false);
  inv.gpus[0].mig_enabled = true;
  inv.gpus[0].mig_devices = {mig(inv.gpus[0], 0, "3g.40gb", 40192, 0)};
  auto after = labels(inv, parse("version: v1\nflags: {migStrategy: mixed}\n"));
  auto current = before;
  current["nvidia.com/mig.config"] = "all-1g.10gb";
  current["nvidia.com/gpu.deploy.device-plugin"] = "true";
  auto stale = stale_labels(current, after);
  std::vector<std::string> want;
  for (const auto& [k, v] : before)
    if (k.starts_with("nvidia.com/mig-1g.10gb.")) want.push_back(k);
  EXPECT_EQ(stale, want);
  EXPECT_EQ(after.at("nvidia.com/mig-3g.40gb.count"), "1");
}

// The same checks (in run) over every strategy and sharing on three nodes.
TEST(NodeLabels, EveryProducedLabelIsValidAndOwned) {
  const std::vector<Inventory> nodes = {a100_node(false), a100_node(true), two_gpu_node()};
  size_t produced = 0;
  for (const char* strategy : {"none", "single", "mixed"})
    for (const char* sharing : {"", "sharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 4}]\n",
                                "sharing:\n  mps:\n    resources: [{name: nvidia.com/gpu, replicas: 4}]\n",
                                "sharing:\n  timeSlicing:\n    renameByDefault: true\n"
                                "    resources: [{name: nvidia.com/mig-1g.10gb, replicas: 2}]\n"})
      for (const auto& inv : nodes) {
        auto config = parse(std::string("version: v1\nflags: {migStrategy: ") + strategy + "}\n" + sharing);
        LabelInputs in(inv, config);
        in.driver_version = "550.107.02";
        in.cuda_driver_version = "12.4";
        in.machine_type = "DGX A100";
        in.mig_config = "all-balanced";
        in.mig_config_state = "success";
        auto out = run(in);
        EXPECT_EQ(out.dropped, std::vector<std::string>{}) << strategy << " " << sharing;
        produced += out.labels.size();
      }
  EXPECT_GT(produced, 500u);
}

}  // namespace
}  // namespace tessera::sharing
