// Every strategy and node: the single MIG strategy, shared replicas (time-slicing
// or MPS, renamed or not), boards the catalog groups with a model, and a whole-GPU
// pod that waits behind small pods. Each plan checked by the checker and, where
// the fleet is tiny, against the exhaustive search.
#include <gtest/gtest.h>

#include "fleet/brute_force.hpp"
#include "fleet/helpers.hpp"

namespace tessera::fleet::testing {
namespace {

std::string describe(const Objective& o) {
  return "unserved " + std::to_string(o.unserved) + ", evicted " + std::to_string(o.evicted) + ", changed " +
         std::to_string(o.changed_gpus) + ", used " + std::to_string(o.gpus_used);
}

FleetPlan solve_and_check(const Fleet& f) {
  PlanOptions options;
  options.seconds = 20;
  FleetPlan plan = plan_fleet(f.problem, options);
  auto ok = check_fleet_plan(f.problem, plan, options);
  EXPECT_TRUE(ok) << ok.error().message;
  return plan;
}

json with_labels(json n, const std::map<std::string, std::string>& labels) {
  for (const auto& [k, v] : labels) n["metadata"]["labels"][k] = v;
  return n;
}

// A pod asking for an extended resource by its full name.
json asking(const std::string& name, const std::string& key, int count, const std::string& on = "") {
  json p = pod(name, "gpu", count, on);
  p["spec"]["containers"][0]["resources"]["limits"] = {{key, std::to_string(count)}};
  return p;
}

int pod_index(const Problem& p, const std::string& id) {
  for (size_t i = 0; i < p.pods.size(); ++i)
    if (p.pods[i].id == id) return int(i);
  return -1;
}

// GFD under the single strategy: gpu.product "...-MIG-1g.10gb", gpu.count = 14 MIG devices
// (two GPUs of seven), pods asking nvidia.com/gpu hold one each. Nothing is pending-by-mistake,
// nothing goes MIG-off, and a pending nvidia.com/gpu pod is served where the scheduler would put
// it: on a free MIG device of that node.
TEST(FleetStrategy, TheSingleStrategyCountsMigDevicesAsNvidiaGpu) {
  json single = with_labels(node("s", "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", 14, "all-1g.10gb"),
                            {{"nvidia.com/mig.strategy", "single"}});
  auto f = fleet_of({single, pod("r1", "gpu", 1, "s"), pod("r2", "gpu", 1, "s"), pod("r3", "gpu", 1, "s"),
                     pod("wait", "gpu", 1), pod("big", "3g.40gb", 1)});
  ASSERT_EQ(f.problem.gpus.size(), 2u) << "14 MIG devices of 7 per GPU are two GPUs";
  EXPECT_TRUE(f.problem.gpus[0].mig && f.problem.gpus[0].single && f.problem.gpus[0].fixed);
  EXPECT_EQ(f.problem.gpus[0].instances.size(), 7u);
  for (const char* r : {"ml/r1", "ml/r2", "ml/r3"}) EXPECT_TRUE(f.problem.pods[size_t(pod_index(f.problem, r))].running()) << r;
  FleetPlan plan = solve_and_check(f);
  EXPECT_EQ(describe(plan.objective), "unserved 1, evicted 0, changed 0, used 1");
  EXPECT_EQ(plan.placement[size_t(pod_index(f.problem, "ml/wait"))], 0);
  const int big = pod_index(f.problem, "ml/big");
  EXPECT_EQ(plan.placement[size_t(big)], -1);
  EXPECT_EQ(unserved_reason(f.problem, big), "no GPU in the fleet has the profile 3g.40gb")
      << "a single-strategy node advertises no nvidia.com/mig-* resource";
  EXPECT_EQ(describe(plan.objective), describe(brute_force(f.problem)));
}

// Without the config label the product's profile and the most instances of it that fit give
// the GPU count; the strategy label alone with a plain product name is read the same way.
TEST(FleetStrategy, TheSingleStrategyWithoutAConfigLabel) {
  auto f = fleet_of({node("s", "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb", 4, ""), pod("r", "gpu", 2, "s")});
  ASSERT_EQ(f.problem.gpus.size(), 2u);
  EXPECT_EQ(f.problem.gpus[0].instances.size(), 2u);
  EXPECT_TRUE(f.problem.pods[0].running());
  FleetPlan plan = solve_and_check(f);
  EXPECT_EQ(plan.objective.changed_gpus, 0);
  EXPECT_EQ(plan.objective.unserved, 0);
}

// Time-slicing with renameByDefault: each device is nvidia.com/gpu.shared, four replicas of it.
// Five pods fit where four replicas and a fifth device are; the sixth waits, with a reason that
// names the shared resource. No phantom demand, no MIG change on a shared node.
TEST(FleetStrategy, RenamedReplicasServeSeveralPodsPerDevice) {
  json shared = with_labels(node("t", "NVIDIA-A100-SXM4-80GB", 2, "all-disabled"), {{"nvidia.com/gpu.replicas", "4"}});
  std::vector<json> items = {shared, node("m", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb")};
  for (int i = 0; i < 3; ++i) items.push_back(asking("run" + std::to_string(i), "nvidia.com/gpu.shared", 1, "t"));
  for (int i = 0; i < 6; ++i) items.push_back(asking("new" + std::to_string(i), "nvidia.com/gpu.shared", 1));
  items.push_back(pod("small", "1g.10gb", 1));
  auto f = fleet_of(items);
  ASSERT_EQ(f.problem.nodes.size(), 2u);
  EXPECT_EQ(f.problem.gpus[f.problem.nodes[1].gpus[0]].instances.size(), 4u) << "one device, four replicas";
  EXPECT_EQ(f.problem.gpus[f.problem.nodes[1].gpus[0]].renamed, std::set<std::string>{"gpu"});
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(f.problem.pods[size_t(pod_index(f.problem, "ml/run" + std::to_string(i)))].running());
  FleetPlan plan = solve_and_check(f);
  EXPECT_EQ(describe(plan.objective), "unserved 1, evicted 0, changed 0, used 3");
  int waiting = -1;
  for (size_t i = 0; i < f.problem.pods.size(); ++i)
    if (plan.placement[i] < 0) waiting = int(i);
  ASSERT_GE(waiting, 0);
  EXPECT_EQ(unserved_reason(f.problem, waiting), "no room: no free nvidia.com/gpu.shared replica on a node that takes pods");
  EXPECT_EQ(describe(plan.objective), describe(brute_force(f.problem)));
}

// Not renamed (GFD's "-SHARED" product): replicas keep the resource's name, so nvidia.com/gpu
// pods fill them, several per GPU; MIG devices shared the same way are nvidia.com/mig-<profile>.
TEST(FleetStrategy, ReplicasThatKeepTheirNameAndSharedMigDevices) {
  json ts = with_labels(node("t", "NVIDIA-A100-SXM4-80GB-SHARED", 1, "all-disabled"), {{"nvidia.com/gpu.replicas", "3"}});
  json mig = with_labels(node("m", "NVIDIA-A100-SXM4-80GB-SHARED", 1, "all-3g.40gb"), {{"nvidia.com/gpu.replicas", "2"}});
  auto f = fleet_of({ts, mig, pod("a", "gpu", 1, "t"), pod("b", "gpu", 1, "t"), pod("c", "gpu", 1),
                     pod("d", "gpu", 1), pod("x", "3g.40gb", 1, "m"), pod("y", "3g.40gb", 1), pod("z", "3g.40gb", 1),
                     pod("w", "3g.40gb", 1), pod("v", "3g.40gb", 1)});
  EXPECT_EQ(f.problem.gpus[f.problem.nodes[0].gpus[0]].instances.size(), 4u) << "two 3g.40gb, two replicas each";
  EXPECT_TRUE(f.problem.gpus[f.problem.nodes[0].gpus[0]].renamed.empty());
  FleetPlan plan = solve_and_check(f);
  EXPECT_EQ(describe(plan.objective), "unserved 2, evicted 0, changed 0, used 2");
  EXPECT_EQ(describe(plan.objective), describe(brute_force(f.problem)));
}

// Under the mixed strategy each profile's replicas are its own label (mig-<profile>.replicas);
// gpu.replicas=0, as a labeller writes it for a resource without devices, means not shared.
TEST(FleetStrategy, ReplicasPerMigProfile) {
  json n = with_labels(node("m", "NVIDIA-A100-SXM4-80GB", 1, "all-balanced"),
                       {{"nvidia.com/gpu.replicas", "0"}, {"nvidia.com/mig-1g.10gb.replicas", "3"}});
  std::vector<json> items = {n};
  for (int i = 0; i < 7; ++i) items.push_back(asking("s" + std::to_string(i), "nvidia.com/mig-1g.10gb.shared", 1));
  items.push_back(pod("b", "3g.40gb", 1));
  auto f = fleet_of(items);
  const Gpu& g = f.problem.gpus[0];
  EXPECT_EQ(g.instances.size(), 2u * 3u + 1u + 1u) << "two 1g.10gb of three replicas, a 2g.20gb and a 3g.40gb once";
  EXPECT_TRUE(g.fixed);
  FleetPlan plan = solve_and_check(f);
  EXPECT_EQ(describe(plan.objective), "unserved 1, evicted 0, changed 0, used 1")
      << "six replicas for seven pods; the 3g.40gb, not shared, keeps its name";
  EXPECT_EQ(g.renamed, std::set<std::string>{"1g.10gb"});
  json doc = plan_json(f.problem, plan);
  EXPECT_EQ(doc["nodes"][0]["gpus"][0]["mig"], json({{"1g.10gb", 2}, {"2g.20gb", 1}, {"3g.40gb", 1}}));
}

// The node agent names every holder of a shared device ("pods"); they take its replicas in turn.
TEST(FleetStrategy, TheAnnotationNamesEveryHolderOfASharedDevice) {
  json ann = {{"gpus", json::array({{{"index", 0}, {"mig", false}, {"pod", "ml/a"}, {"pods", {"ml/a", "ml/b"}}}})}};
  json ts = with_labels(node("t", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled", ann), {{"nvidia.com/gpu.replicas", "2"}});
  auto f = fleet_of({ts, asking("a", "nvidia.com/gpu.shared", 1, "t"), asking("b", "nvidia.com/gpu.shared", 1, "t"),
                     asking("c", "nvidia.com/gpu.shared", 1)});
  ASSERT_TRUE(f.problem.nodes[0].placements_known);
  EXPECT_FALSE(f.problem.nodes[0].frozen);
  EXPECT_TRUE(f.problem.pods[0].running() && f.problem.pods[1].running());
  EXPECT_NE(f.problem.pods[0].holds, f.problem.pods[1].holds);
  FleetPlan plan = solve_and_check(f);
  EXPECT_EQ(plan.objective.unserved, 1);
}

// GFD names boards by their NVML names, spaces as dashes: the A100 PCIe boards share the SXM4
// models' MIG geometry and are planned with it (not as whole GPUs that never change).
TEST(FleetStrategy, PcieBoardsArePlannedWithTheirModelsGeometry) {
  const auto& catalog = Catalog::builtin();
  for (const auto& [label, model] : std::vector<std::pair<std::string, std::string>>{
           {"NVIDIA-A100-PCIE-40GB", "A100-SXM4-40GB"},
           {"NVIDIA-A100-80GB-PCIe", "A100-SXM4-80GB"},
           {"NVIDIA-A100-80GB-PCIe-MIG-1g.10gb", "A100-SXM4-80GB"},
           {"NVIDIA-H200-NVL", "H200-SXM-141GB"},
           {"NVIDIA-H100-PCIe", "H100-PCIe-80GB"}}) {
    const GpuModel* m = find_product(catalog, label);
    ASSERT_NE(m, nullptr) << label;
    EXPECT_EQ(m->name, model) << label;
  }
  auto f = fleet_of({node("p", "NVIDIA-A100-80GB-PCIe", 1, "all-disabled"), pod("s1", "1g.10gb", 1), pod("s2", "2g.20gb", 1)});
  EXPECT_TRUE(f.problem.warnings.empty());
  FleetPlan plan = solve_and_check(f);
  EXPECT_EQ(describe(plan.objective), "unserved 0, evicted 0, changed 1, used 1");
}

// A whole-GPU pod waits while every GPU holds one small pod (a fleet a seventh used): the plan
// evicts one small pod, turns its GPU whole, and places the small pod again on another GPU.
TEST(FleetStrategy, AWholeGpuPodBlockedBySmallPodsIsServed) {
  std::vector<json> items;
  for (int n = 0; n < 2; ++n) {
    const std::string name = "n" + std::to_string(n);
    items.push_back(node(name, "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"));
    items.push_back(pod("small" + std::to_string(n), "1g.10gb", 1, name));
  }
  items.push_back(pod("whole", "gpu", 1));
  auto f = fleet_of(items);
  FleetPlan plan = solve_and_check(f);
  EXPECT_EQ(describe(plan.objective), "unserved 0, evicted 1, changed 1, used 2");
  EXPECT_EQ(describe(plan.objective), describe(brute_force(f.problem)));
  EXPECT_EQ(plan.status, "optimal");
  // Two whole-GPU pods on two nodes of two GPUs each, each GPU holding one small pod (the layout
  // annotation says so; counted without it, both pods of a node would sit on its first GPU).
  std::vector<json> more;
  for (int n = 0; n < 2; ++n) {
    const std::string name = "m" + std::to_string(n);
    json ann = {{"gpus", json::array()}};
    for (int k = 0; k < 2; ++k) {
      json insts = json::array();
      for (int s = 0; s < 7; ++s) {
        json inst = {{"profile", "1g.10gb"}, {"start", s}};
        if (s == 3) inst["pod"] = "ml/s" + std::to_string(n) + std::to_string(k);
        insts.push_back(inst);
      }
      ann["gpus"].push_back({{"index", k}, {"mig", true}, {"instances", insts}});
    }
    more.push_back(node(name, "NVIDIA-A100-SXM4-80GB", 2, "all-1g.10gb", ann));
    for (int k = 0; k < 2; ++k) more.push_back(pod("s" + std::to_string(n) + std::to_string(k), "1g.10gb", 1, name));
  }
  more.push_back(pod("w0", "gpu", 1));
  more.push_back(pod("w1", "gpu", 1));
  auto g = fleet_of(more);
  FleetPlan two = solve_and_check(g);
  EXPECT_EQ(describe(two.objective), "unserved 0, evicted 2, changed 2, used 4");
}

}  // namespace
}  // namespace tessera::fleet::testing
