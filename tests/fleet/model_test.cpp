// The model against the exhaustive search of brute_force.hpp on tiny fleets:
// every level of the objective equal, the plan checked by the independent
// checker, and the cases that make a layout planner go wrong.
#include <gtest/gtest.h>

#include <random>
#include <tuple>

#include "fleet/brute_force.hpp"
#include "fleet/helpers.hpp"

namespace tessera::fleet::testing {
namespace {

std::string describe(const Objective& o) {
  std::string waiting;
  for (int64_t w : o.waiting) waiting += (waiting.empty() ? "waiting " : "/") + std::to_string(w);
  return (waiting.empty() ? "" : waiting + ", ") + "unserved " + std::to_string(o.unserved) + ", evicted " + std::to_string(o.evicted) + ", changed " +
         std::to_string(o.changed_gpus) + ", used " + std::to_string(o.gpus_used);
}

FleetPlan solve_and_check(const Fleet& f, PlanOptions options = {}) {
  options.seconds = 20;
  FleetPlan plan = plan_fleet(f.problem, options);
  auto ok = check_fleet_plan(f.problem, plan, options);
  EXPECT_TRUE(ok) << ok.error().message;
  return plan;
}

void expect_oracle(const Fleet& f, PlanOptions options = {}) {
  FleetPlan plan = solve_and_check(f, options);
  Objective want = brute_force(f.problem, options.max_evictions);
  EXPECT_EQ(describe(plan.objective), describe(want));
  EXPECT_EQ(plan.status, "optimal");
  EXPECT_EQ(describe(plan.bound), describe(plan.objective));
}

// A 4g.40gb starts only at slice 0. Pods on the 1g instances at 4, 5 and 6
// leave room for it once the idle 1g instances at 0-3 go: no eviction.
TEST(FleetModel, ALargeProfileFitsOnceIdleSmallInstancesMove) {
  json ann = {{"gpus", json::array({{{"index", 0}, {"mig", true}, {"instances", json::array()}}})}};
  for (int s = 0; s < 7; ++s) {
    json inst = {{"profile", "1g.10gb"}, {"start", s}};
    if (s >= 4) inst["pod"] = "ml/run-" + std::to_string(s);
    ann["gpus"][0]["instances"].push_back(inst);
  }
  auto f = fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb", ann), pod("run-4", "1g.10gb", 1, "a"),
                     pod("run-5", "1g.10gb", 1, "a"), pod("run-6", "1g.10gb", 1, "a"), pod("big", "4g.40gb", 1)});
  ASSERT_TRUE(f.problem.nodes[0].placements_known);
  FleetPlan plan = solve_and_check(f);
  EXPECT_EQ(describe(plan.objective), "unserved 0, evicted 0, changed 1, used 1");
  EXPECT_EQ(describe(plan.objective), describe(brute_force(f.problem)));
  ASSERT_EQ(plan.gpus[0].layout.size(), 4u);
  EXPECT_EQ(plan.gpus[0].layout[0].start, 0u);
  EXPECT_EQ(f.problem.gpus[0].model->profiles[plan.gpus[0].layout[0].profile].name, "4g.40gb");
}

// Without the annotation the pods are counted onto the first instances (0, 1, 2):
// the 4g.40gb then costs evictions, and the oracle agrees on the same facts.
TEST(FleetModel, WithoutPlacementsPodsCountOntoTheFirstInstances) {
  auto f = fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"), pod("run-4", "1g.10gb", 1, "a"),
                     pod("run-5", "1g.10gb", 1, "a"), pod("run-6", "1g.10gb", 1, "a"), pod("big", "4g.40gb", 1)});
  EXPECT_FALSE(f.problem.nodes[0].placements_known);
  expect_oracle(f);
}

// A running 3g.40gb at slice 0 pins that half: one pending 2g.20gb fits
// beside it. Both fit only if the 3g.40gb pod leaves and comes back on a
// 3g.40gb at slice 4 (2g@0, 2g@2, 3g@4): served beats not evicting. With
// --max-evictions 0 the pod pins the layout and one 2g.20gb waits.
TEST(FleetModel, RunningPodsPinTheLayout) {
  auto f = fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-3g.40gb"), pod("keep", "3g.40gb", 1, "a"),
                     pod("p1", "2g.20gb", 1), pod("p2", "2g.20gb", 1)});
  FleetPlan plan = solve_and_check(f);
  EXPECT_EQ(describe(plan.objective), "unserved 0, evicted 1, changed 1, used 1");
  expect_oracle(f);
  PlanOptions pinned;
  pinned.max_evictions = 0;
  plan = solve_and_check(f, pinned);
  EXPECT_EQ(describe(plan.objective), "unserved 1, evicted 0, changed 1, used 1");
  expect_oracle(f, pinned);
}

// The same fleet with the running pod bare (no owner: nothing recreates it
// once evicted): the plan never evicts it, so its GPU stays as it is and
// both 2g.20gb wait, said in a warning.
TEST(FleetModel, ABarePodIsNeverEvicted) {
  auto f = fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-3g.40gb"), bare_pod("keep", "3g.40gb", 1, "a"),
                     pod("p1", "2g.20gb", 1), pod("p2", "2g.20gb", 1)});
  FleetPlan plan = solve_and_check(f);
  EXPECT_EQ(describe(plan.objective), "unserved 2, evicted 0, changed 0, used 1");
  std::string warnings;
  for (const auto& w : f.problem.warnings) warnings += w + "\n";
  EXPECT_NE(warnings.find("Pod ml/keep on a has no owner (nothing recreates it after an eviction)"), std::string::npos)
      << warnings;
  expect_oracle(f);
}

// A bare pod on several whole GPUs of a node whose placements are a guess keeps the node as it is:
// its GPUs are no block that could be evicted and re-cut, though three waiting 7g.80gb pods would
// then be served (the plan once changed them, and the checker refused it).
TEST(FleetModel, ABarePodOnSeveralWholeGpusKeepsItsNode) {
  auto f = fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 3, "all-disabled"), bare_pod("keep", "gpu", 2, "a"),
                     node("b", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled"), pod("big-1", "7g.80gb", 1),
                     pod("big-2", "7g.80gb", 1), pod("big-3", "7g.80gb", 1)});
  ASSERT_TRUE(f.problem.nodes[0].frozen);
  FleetPlan plan = solve_and_check(f);
  EXPECT_EQ(describe(plan.objective), "unserved 2, evicted 0, changed 1, used 3");
  for (int g : f.problem.nodes[0].gpus) EXPECT_FALSE(plan.gpus[size_t(g)].changed);
  expect_oracle(f);
}

// A PodDisruptionBudget that allows no disruption keeps its pod: of two
// running pods either of which could make room for the waiting 7g.80gb (and
// move to the other GPU's free 3g.40gb), the plan evicts the one no budget
// guards; with both guarded (two budgets select them), none, and the big pod waits.
TEST(FleetModel, APodItsBudgetGuardsIsNotTheVictim) {
  for (const char* guarded : {"on-a", "on-b"}) {
    const std::string other = std::string(guarded) == "on-a" ? "on-b" : "on-a";
    // The layout annotation names where each pod runs: a guarded pod keeps its GPU, and its node takes pods.
    auto holds = [](const std::string& pod) {
      return json{{"gpus", json::array({{{"index", 0}, {"mig", true},
                                         {"instances", json::array({{{"profile", "3g.40gb"}, {"start", 0}, {"pod", pod}},
                                                                    {{"profile", "3g.40gb"}, {"start", 4}}})}}})}};
    };
    auto f = fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-3g.40gb", holds("ml/on-a")),
                       node("b", "NVIDIA-A100-SXM4-80GB", 1, "all-3g.40gb", holds("ml/on-b")),
                       labelled(pod("on-a", "3g.40gb", 1, "a"), std::string(guarded) == "on-a" ? "guarded" : "free"),
                       labelled(pod("on-b", "3g.40gb", 1, "b"), std::string(guarded) == "on-b" ? "guarded" : "free"),
                       budget("keep", "guarded", 0), pod("big", "7g.80gb", 1)});
    FleetPlan plan = solve_and_check(f);
    EXPECT_EQ(describe(plan.objective), "unserved 0, evicted 1, changed 1, used 2") << guarded;
    std::vector<std::string> evicted;
    for (size_t i = 0; i < plan.evicted.size(); ++i)
      if (plan.evicted[i]) evicted.push_back(f.problem.pods[i].id);
    EXPECT_EQ(evicted, std::vector<std::string>{"ml/" + other}) << guarded;
    expect_oracle(f);
  }
  auto both = fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-3g.40gb"), labelled(pod("on-a", "3g.40gb", 1, "a"), "guarded"),
                        labelled(pod("on-a2", "3g.40gb", 1, "a"), "guarded"), budget("keep", "guarded", 1),
                        budget("also", "guarded", 5, {{"selector", {{"matchLabels", {{"app", "guarded"}}}}}}),
                        pod("big", "7g.80gb", 1)});
  FleetPlan none = solve_and_check(both);
  EXPECT_EQ(describe(none.objective), "unserved 1, evicted 0, changed 0, used 1") << "two budgets select them: the API refuses";
}

// Priority as preemption applies it: a pod is evicted only for a pod of
// higher priority. A system-cluster-critical pod is never evicted to serve a
// priority -10 pod; of two that could make room, the one below the waiting
// pod's priority goes; a waiting pod above both may take either's room.
TEST(FleetModel, APodIsNotEvictedForALowerPriorityOne) {
  auto holds = [](const std::string& pod) {
    return json{{"gpus", json::array({{{"index", 0}, {"mig", true},
                                       {"instances", json::array({{{"profile", "3g.40gb"}, {"start", 0}, {"pod", pod}},
                                                                  {{"profile", "3g.40gb"}, {"start", 4}}})}}})}};
  };
  auto prio = [](json pod, int64_t priority) {
    pod["spec"]["priority"] = priority;
    return pod;
  };
  auto fleet = [&](int64_t on_a, int64_t on_b, int64_t big) {
    return fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-3g.40gb", holds("ml/on-a")),
                     node("b", "NVIDIA-A100-SXM4-80GB", 1, "all-3g.40gb", holds("ml/on-b")),
                     prio(pod("on-a", "3g.40gb", 1, "a"), on_a), prio(pod("on-b", "3g.40gb", 1, "b"), on_b),
                     prio(pod("big", "7g.80gb", 1), big)});
  };
  auto evicted = [](const Fleet& f, const FleetPlan& plan) {
    std::vector<std::string> out;
    for (size_t i = 0; i < plan.evicted.size(); ++i)
      if (plan.evicted[i]) out.push_back(f.problem.pods[i].id);
    return out;
  };
  auto critical = fleet(2000000000, 2000000000, -10);
  FleetPlan kept = solve_and_check(critical);
  EXPECT_EQ(describe(kept.objective), "unserved 1, evicted 0, changed 0, used 2");
  std::string warnings;
  for (const auto& w : critical.problem.warnings) warnings += w + "\n";
  EXPECT_NE(warnings.find("2 running pod(s) have a priority above every waiting pod's (at most -10)"), std::string::npos)
      << warnings;
  for (auto [a, b, victim] : {std::tuple{100, 0, "ml/on-b"}, std::tuple{0, 100, "ml/on-a"}}) {
    auto f = fleet(a, b, 50);
    FleetPlan plan = solve_and_check(f);
    EXPECT_EQ(describe(plan.objective), "waiting 0/1, unserved 0, evicted 1, changed 1, used 2") << victim;
    EXPECT_EQ(evicted(f, plan), std::vector<std::string>{victim});
    expect_oracle(f);
  }
  FleetPlan above = solve_and_check(fleet(100, 100, 1000));
  EXPECT_EQ(describe(above.objective), "waiting 0/1, unserved 0, evicted 1, changed 1, used 2");
}

// Pending pods are served in priority order, as the scheduler's queue takes them: an idle GPU
// is cut for the one priority-1,000,000 pod that needs all of it, not for two priority-0 pods
// that would make the plan's count of unserved pods smaller.
TEST(FleetModel, PendingPodsAreServedHighestPriorityFirst) {
  auto prio = [](json pod, int64_t priority) {
    pod["spec"]["priority"] = priority;
    return pod;
  };
  auto f = fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-3g.40gb"), prio(pod("small-1", "3g.40gb", 1), 0),
                     prio(pod("small-2", "3g.40gb", 1), 0), prio(pod("big", "7g.80gb", 1), 1000000)});
  ASSERT_EQ(f.problem.priorities, (std::vector<int64_t>{1000000, 0}));
  FleetPlan plan = solve_and_check(f);
  EXPECT_EQ(describe(plan.objective), "waiting 0/2, unserved 2, evicted 0, changed 1, used 1");
  EXPECT_EQ(plan.status, "optimal");
  for (size_t i = 0; i < f.problem.pods.size(); ++i)
    EXPECT_EQ(plan.placement[i] >= 0, f.problem.pods[i].id == "ml/big") << f.problem.pods[i].id;
  expect_oracle(f);
  const std::string text = plan_text(f.problem, plan);
  EXPECT_NE(text.find("priority 1000000 (1 pending, 0 running): 0 left pending or evicted (bound 0)"), std::string::npos) << text;
  EXPECT_NE(text.find("priority 0 (2 pending, 0 running): 2 left pending or evicted (bound 2)"), std::string::npos) << text;
  EXPECT_EQ(plan_json(f.problem, plan)["objective"]["waiting"].dump(),
            R"([{"pending_or_evicted":0,"priority":1000000},{"pending_or_evicted":2,"priority":0}])");
  // Preemption: a running priority-0 pod is evicted for the pending priority-1,000,000 one, though
  // nothing serves it again (one pod unserved either way).
  auto busy = fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-3g.40gb"), prio(pod("low", "3g.40gb", 1, "a"), 0),
                        prio(pod("big", "7g.80gb", 1), 1000000)});
  ASSERT_EQ(busy.problem.priorities, (std::vector<int64_t>{1000000, 0}));
  FleetPlan preempted = solve_and_check(busy);
  EXPECT_EQ(describe(preempted.objective), "waiting 0/1, unserved 1, evicted 1, changed 1, used 1");
  expect_oracle(busy);
  // But never for a pod of its own priority: evicting "low" for "whole" (both 0) only trades one
  // waiting pod for another, however a third pod's priority sets the levels.
  auto level = fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-3g.40gb"), prio(pod("low", "3g.40gb", 1, "a"), 0),
                         prio(pod("whole", "7g.80gb", 1), 0), prio(pod("nowhere", "1g.5gb", 1), 100)});
  ASSERT_EQ(level.problem.priorities, (std::vector<int64_t>{100, 0}));
  EXPECT_EQ(describe(solve_and_check(level).objective), "waiting 1/1, unserved 2, evicted 0, changed 0, used 1");
  expect_oracle(level);
  // One priority among the pending pods: the plan is as it was, the most pods served.
  auto same = fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-3g.40gb"), prio(pod("small-1", "3g.40gb", 1), 7),
                        prio(pod("small-2", "3g.40gb", 1), 7), prio(pod("big", "7g.80gb", 1), 7)});
  EXPECT_TRUE(same.problem.priorities.empty());
  EXPECT_EQ(describe(solve_and_check(same).objective), "unserved 1, evicted 0, changed 0, used 1");
}

// NodeResourcesFit: a pod goes only where its cpu, memory and one more pod fit what the node's
// allocatable leaves; no GPU is re-cut for a pod no node has the cpu for, and pods placed together
// on a node fit together.
TEST(FleetModel, PodsArePlacedOnlyWhereTheirCpuAndMemoryFit) {
  // The device plugin's resources are there too, as its layout offers them.
  auto with_room = [](json n, const std::string& devices, const std::string& count, const std::string& cpu,
                      const std::string& pods = "110") {
    n["status"]["allocatable"] = {{"cpu", cpu}, {"memory", "1000Gi"}, {"pods", pods}, {devices, count}};
    return n;
  };
  auto asking = [](json pod, const std::string& cpu) {
    pod["spec"]["containers"][0]["resources"]["requests"] = {{"cpu", cpu}, {"memory", "8Gi"}};
    return pod;
  };
  auto served = [](const Fleet& f, const FleetPlan& plan) {
    std::map<std::string, std::string> where;
    for (size_t i = 0; i < f.problem.pods.size(); ++i)
      where[f.problem.pods[i].id] = plan.placement[i] < 0 ? "-" : f.problem.nodes[size_t(plan.placement[i])].name;
    return where;
  };
  // A 1,000-CPU pod: no node has the room, so nothing is re-cut for it.
  auto huge = fleet_of({with_room(node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"), "nvidia.com/mig-1g.10gb", "7", "64"), asking(pod("huge", "7g.80gb", 1), "1000")});
  FleetPlan none = solve_and_check(huge);
  EXPECT_EQ(describe(none.objective), "unserved 1, evicted 0, changed 0, used 0");
  EXPECT_EQ(unserved_reason(huge.problem, 0),
            "no node with 7g.80gb that takes it has the room for its cpu request (status.allocatable less what the pods there ask)");
  // Node a has 8 CPUs, 2 taken by a pod without a GPU: of three 4-CPU pods one fits there, one on b.
  json web = asking(pod("web", "gpu", 0, "a"), "2");
  auto three = fleet_of({with_room(node("a", "NVIDIA-A100-SXM4-80GB", 2, "all-disabled"), "nvidia.com/gpu", "2", "8"),
                         with_room(node("b", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled"), "nvidia.com/gpu", "1", "16"), web,
                         asking(pod("p1", "gpu", 1), "4"), asking(pod("p2", "gpu", 1), "4"), asking(pod("p3", "gpu", 1), "4")});
  FleetPlan plan = solve_and_check(three);
  EXPECT_EQ(plan.objective.unserved, 1);
  std::map<std::string, int> per_node;
  for (const auto& [pod, n] : served(three, plan)) ++per_node[n];
  EXPECT_EQ(per_node, (std::map<std::string, int>{{"-", 1}, {"a", 1}, {"b", 1}}));
  // The checker refuses the two on a together.
  for (size_t i = 0; i < three.problem.pods.size(); ++i) {
    if (plan.placement[i] >= 0) continue;
    FleetPlan crowded = plan;
    for (int g : three.problem.nodes[0].gpus)
      if (crowded.gpus[size_t(g)].layout[0].pod < 0 && crowded.placement[i] < 0) {
        crowded.gpus[size_t(g)].layout[0].pod = int(i);
        crowded.placement[i] = 0;
        --crowded.objective.unserved;
      }
    auto ok = check_fleet_plan(three.problem, crowded);
    ASSERT_FALSE(ok);
    EXPECT_EQ(ok.error().message.substr(ok.error().message.find("node a")),
              "node a: the pods placed there ask for more cpu than it has allocatable");
  }
  // Without allocatable (a hand-made snapshot) nothing is fitted: all three are served.
  auto unfitted = fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 2, "all-disabled"), node("b", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled"),
                            web, asking(pod("p1", "gpu", 1), "4"), asking(pod("p2", "gpu", 1), "4"), asking(pod("p3", "gpu", 1), "4")});
  EXPECT_EQ(solve_and_check(unfitted).objective.unserved, 0);
  // A node full of pods (allocatable pods 1, one running) takes no more.
  auto full = fleet_of({with_room(node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled"), "nvidia.com/gpu", "1", "64", "1"), web, asking(pod("p", "gpu", 1), "1")});
  EXPECT_EQ(describe(solve_and_check(full).objective), "unserved 1, evicted 0, changed 0, used 0");
  EXPECT_EQ(unserved_reason(full.problem, 0),
            "no node with gpu that takes it has room for one more pod (status.allocatable pods, all running)");
}

// What the device plugin serves now (status.allocatable, healthy devices only) decides what a
// node can take: two of node a's seven 1g.10gb unhealthy, or no plugin serving at all, and the
// pending pod goes to b, whose GPU is re-cut for it, rather than to a's free instances; node a is
// kept as it is. A node serving all of its layout takes the pod where it is; an unreadable count is
// not compared.
TEST(FleetModel, ANodeIsPlannedOnlyForTheDevicesItsPluginServes) {
  auto serving = [](json n, json devices) {
    n["status"]["allocatable"] = {{"cpu", "64"}, {"memory", "1000Gi"}, {"pods", "110"}};
    for (auto it = devices.begin(); it != devices.end(); ++it) n["status"]["allocatable"][it.key()] = it.value();
    return n;
  };
  auto plan_for = [&](json a_devices) {
    auto f = fleet_of({serving(node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"), a_devices),
                       serving(node("b", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled"), {{"nvidia.com/gpu", "1"}}), pod("p", "1g.10gb", 1)});
    FleetPlan plan = solve_and_check(f);
    std::string warnings;
    for (const auto& w : f.problem.warnings) warnings += w + "\n";
    return std::tuple(describe(plan.objective), plan.placement[0] < 0 ? "-" : f.problem.nodes[size_t(plan.placement[0])].name, warnings,
                      f.problem.nodes[0].accepts_pods());
  };
  EXPECT_EQ(plan_for({{"nvidia.com/mig-1g.10gb", "7"}}), std::tuple("unserved 0, evicted 0, changed 0, used 1", "a", "", true));
  EXPECT_EQ(plan_for({{"nvidia.com/mig-1g.10gb", "5"}}),
            std::tuple("unserved 0, evicted 0, changed 1, used 1", "b",
                       "Node a: status.allocatable nvidia.com/mig-1g.10gb is 5 where its layout offers 7 (some unhealthy or not yet "
                       "served); the node is kept as it is and takes no new pod in this plan\n",
                       false));
  EXPECT_EQ(plan_for(json::object()),
            std::tuple("unserved 0, evicted 0, changed 1, used 1", "b",
                       "Node a: status.allocatable nvidia.com/mig-1g.10gb is 0 where its layout offers 7 (no device plugin serves "
                       "them now); the node is kept as it is and takes no new pod in this plan\n",
                       false));
  // More than the layout (another plugin's resources beside it) is not a problem.
  EXPECT_EQ(std::get<1>(plan_for({{"nvidia.com/mig-1g.10gb", "7"}, {"nvidia.com/gpu", "2"}})), "a");
  EXPECT_EQ(plan_for({{"nvidia.com/mig-1g.10gb", "seven"}}),
            std::tuple("unserved 0, evicted 0, changed 0, used 1", "a",
                       "Node a: status.allocatable.nvidia.com/mig-1g.10gb 'seven' is not a whole number of devices; it is not "
                       "compared with the node's layout\n",
                       true));
}

// GPUs that ResourceClaims hold through the GPU DRA driver look free to the device plugin's count:
// a node holding any is kept as it is, and says why. A claim of another driver, or one not
// allocated, holds no GPU; one whose node cannot be told is said.
TEST(FleetModel, ANodeWithGpusHeldByResourceClaimsIsKeptAsItIs) {
  auto claim = [](const std::string& name, const std::string& driver, const std::string& on) {
    json c = {{"apiVersion", "resource.k8s.io/v1"}, {"kind", "ResourceClaim"}, {"metadata", {{"name", name}, {"namespace", "ml"}}}};
    if (on.empty()) return c;
    json result = {{"request", "gpu"}, {"driver", driver}, {"pool", on}, {"device", "gpu-0"}};
    json field = {{"key", "metadata.name"}, {"operator", "In"}, {"values", {on}}};
    json term = {{"matchFields", json::array({field})}};
    c["status"]["allocation"] = {{"devices", {{"results", json::array({result})}}},
                                 {"nodeSelector", {{"nodeSelectorTerms", json::array({term})}}}};
    return c;
  };
  auto plan_for = [&](std::vector<json> claims) {
    std::vector<json> items = {node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled"),
                               node("b", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled"), pod("p", "1g.10gb", 1)};
    items.insert(items.end(), claims.begin(), claims.end());
    auto f = fleet_of(items);
    FleetPlan plan = solve_and_check(f);
    std::string warnings;
    for (const auto& w : f.problem.warnings) warnings += w + "\n";
    return std::pair(plan.placement[0] < 0 ? "-" : f.problem.nodes[size_t(plan.placement[0])].name, warnings);
  };
  const std::string kept = "; which GPUs DRA holds is not told apart from free ones: the node is kept as it is and takes no new "
                           "pod in this plan\n";
  EXPECT_EQ(plan_for({claim("c", "gpu.nvidia.com", "a")}),
            std::pair(std::string("b"), "Node a: ResourceClaim ml/c holds 'gpu-0' of gpu.nvidia.com" + kept));
  EXPECT_EQ(plan_for({claim("c", "gpu.nvidia.com", "b"), claim("d", "gpu.nvidia.com", "b")}),
            std::pair(std::string("a"), "Node b: ResourceClaim ml/c holds 'gpu-0' of gpu.nvidia.com (and 1 more)" + kept));
  EXPECT_EQ(plan_for({claim("c", "gpu.nvidia.com", "a"), claim("d", "gpu.nvidia.com", "b")}).first, "-");
  // Another driver's devices (a NIC's) and a claim not allocated hold no GPU.
  EXPECT_EQ(plan_for({claim("n", "net.example.com", "a"), claim("n2", "net.example.com", "b"), claim("w", "", "")}).second, "");
  // No node selector: the pool names the node.
  json pooled = claim("c", "gpu.nvidia.com", "a");
  pooled["status"]["allocation"].erase("nodeSelector");
  EXPECT_EQ(plan_for({pooled}).first, "b");
  json unreadable = claim("c", "gpu.nvidia.com", "a");
  unreadable["status"]["allocation"]["devices"]["results"] = "gpu-0";
  EXPECT_EQ(plan_for({unreadable}).second,
            "ResourceClaim ml/c: status.allocation.devices.results is not a list; the GPUs it may hold are not known\n");
  // tessera's DRA driver renamed (`tessera dra --driver-name gpu.example.com`): its claims hold GPUs
  // once named, and then NVIDIA's name no longer counts unless named too.
  const std::vector<json> renamed = {node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled"),
                                     node("b", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled"), pod("p", "1g.10gb", 1),
                                     claim("c", "gpu.example.com", "a")};
  auto held_nodes = [&](const std::vector<std::string>& drivers) {
    auto snap = parse_snapshot(list(renamed), "test", drivers);
    EXPECT_TRUE(snap.has_value());
    std::string held;
    for (const auto& n : snap->nodes)
      if (!n.dra_devices.empty()) held += n.name + ": " + n.dra_devices.front() + "\n";
    return held;
  };
  EXPECT_EQ(held_nodes({}), "") << "by default only gpu.nvidia.com holds GPUs";
  EXPECT_EQ(held_nodes({"gpu.example.com"}), "a: ResourceClaim ml/c holds 'gpu-0' of gpu.example.com\n");
  EXPECT_EQ(held_nodes({"gpu.nvidia.com", "gpu.example.com"}), "a: ResourceClaim ml/c holds 'gpu-0' of gpu.example.com\n");
  // A claim is a fact the plan depends on: its hash changes with it.
  auto hash = [&](std::vector<json> items) { return parse_snapshot(list(items), "test")->hash; };
  const json a = node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled");
  EXPECT_NE(hash({a}), hash({a, claim("c", "gpu.nvidia.com", "a")}));
}

// Two products: 1g.10gb is a resource of both the A100-80GB and the H100; the
// pending 1g.10gb pods go where the change costs least.
TEST(FleetModel, TwoProducts) {
  auto f = fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled"), node("h", "NVIDIA-H100-80GB-HBM3", 1, "all-1g.10gb"),
                     pod("w", "gpu", 1, "a"), pod("s1", "1g.10gb", 1), pod("s2", "1g.10gb", 1), pod("b", "3g.40gb", 1)});
  expect_oracle(f);
}

TEST(FleetModel, MaxEvictionsIsAConstraint) {
  auto f = fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"), pod("r0", "1g.10gb", 1, "a"),
                     pod("r1", "1g.10gb", 1, "a"), pod("big", "7g.80gb", 1)});
  PlanOptions none;
  expect_oracle(f, none);
  PlanOptions capped;
  capped.max_evictions = 0;
  FleetPlan plan = solve_and_check(f, capped);
  EXPECT_EQ(plan.objective.evicted, 0);
  EXPECT_EQ(plan.objective.unserved, 1);
  expect_oracle(f, capped);
}

// A pod on two whole GPUs is kept only if both stay whole.
TEST(FleetModel, PodsOnSeveralGpus) {
  auto f = fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 2, "all-disabled"), pod("tp", "gpu", 2, "a"),
                     pod("s1", "1g.10gb", 1), pod("s2", "3g.40gb", 1)});
  expect_oracle(f);
  auto g = fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 2, "all-1g.10gb"), pod("two", "1g.10gb", 2, "a"),
                     pod("w", "gpu", 1), pod("x", "4g.40gb", 1)});
  expect_oracle(g);
}

TEST(FleetModel, NothingPendingChangesNothing) {
  auto f = fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 2, "all-1g.10gb"), pod("r0", "1g.10gb", 1, "a")});
  FleetPlan plan = solve_and_check(f);
  EXPECT_EQ(describe(plan.objective), "unserved 0, evicted 0, changed 0, used 1");
  EXPECT_TRUE(plan.rollout.empty());
  EXPECT_EQ(plan.node_config[0], "all-1g.10gb");
}

json cordoned(json n) {
  n["spec"]["unschedulable"] = true;
  return n;
}
json not_ready(json n) {
  n["status"]["conditions"] = json::array({{{"type", "Ready"}, {"status", "False"}}});
  return n;
}
json tainted(json n, const std::string& key) {
  n["spec"]["taints"] = json::array({{{"key", key}, {"value", "x"}, {"effect", "NoSchedule"}}});
  return n;
}
json labelled(json n, const std::string& key, const std::string& value) {
  n["metadata"]["labels"][key] = value;
  return n;
}
json selecting(json p, const std::string& key, const std::string& value) {
  p["spec"]["nodeSelector"] = {{key, value}};
  return p;
}

// The scheduler's rules: a node that is cordoned, not Ready, or tainted
// against every pod is never changed and offers nothing; a pod with a node
// selector lands only on a node it selects. Each against the oracle, which
// applies the same rules its own way.
TEST(FleetModel, CordonedAndNotReadyNodesAreNeitherChangedNorFilled) {
  // The only room for the pending 3g.40gb is on the cordoned node (idle, MIG off) or by
  // evicting on the open one; the cordoned and the NotReady node stay as they are.
  auto f = fleet_of({cordoned(node("c", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled")),
                     not_ready(node("r", "NVIDIA-A100-SXM4-80GB", 1, "all-3g.40gb")),
                     node("o", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"), pod("run", "1g.10gb", 1, "o"),
                     pod("big", "3g.40gb", 1)});
  // Nodes sort by name (c, o, r), one GPU each; pods by id (big, run).
  ASSERT_FALSE(f.problem.nodes[0].accepts_pods());
  ASSERT_FALSE(f.problem.nodes[2].accepts_pods());
  FleetPlan plan = solve_and_check(f);
  EXPECT_FALSE(plan.gpus[0].changed);
  EXPECT_FALSE(plan.gpus[2].changed);
  EXPECT_EQ(plan.placement[0], 1);  // big on the open node, next to run or in its place
  EXPECT_EQ(describe(plan.objective), describe(brute_force(f.problem)));
}

TEST(FleetModel, APodGoesOnlyWhereItsSelectorAndTolerationsLetIt) {
  // "pinned" selects zone a, whose node is full; the zone b node has room, and a node tainted
  // against everyone has room too: pinned stays unserved, "free" takes zone b.
  auto f = fleet_of({labelled(node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled"), "zone", "a"),
                     labelled(node("b", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled"), "zone", "b"),
                     tainted(node("t", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled"), "dedicated"),
                     pod("run", "gpu", 1, "a"), selecting(pod("pinned", "gpu", 1), "zone", "a"), pod("free", "gpu", 1)});
  ASSERT_TRUE(f.problem.pods[1].constrained);  // pods sort by id: free, pinned, run
  FleetPlan plan = solve_and_check(f);
  EXPECT_EQ(plan.placement[0], 1);   // free on b
  EXPECT_EQ(plan.placement[1], -1);  // pinned: its only node is full
  EXPECT_EQ(describe(plan.objective), "unserved 1, evicted 0, changed 0, used 2");
  EXPECT_EQ(describe(plan.objective), describe(brute_force(f.problem)));
  // A toleration opens the tainted node; a selector of zone b serves the pinned pod there.
  auto g = fleet_of({labelled(node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled"), "zone", "a"),
                     tainted(node("t", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled"), "dedicated"),
                     pod("run", "gpu", 1, "a"), [] {
                       json p = pod("tolerant", "gpu", 1);
                       p["spec"]["tolerations"] = json::array({{{"key", "dedicated"}, {"operator", "Exists"}}});
                       return p;
                     }()});
  FleetPlan served = solve_and_check(g);
  EXPECT_EQ(describe(served.objective), "unserved 0, evicted 0, changed 0, used 2");
  EXPECT_EQ(describe(served.objective), describe(brute_force(g.problem)));
}

// The case of a pod pinned to a full node, with the only other GPU node
// cordoned, tainted and not Ready and running a pod: nothing is served
// elsewhere, nothing is evicted there.
TEST(FleetModel, APinnedPodIsNotServedOnANodeThatWouldRefuseIt) {
  auto bad = not_ready(cordoned(tainted(labelled(node("z", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"), "zone", "b"), "maintenance")));
  auto f = fleet_of({labelled(node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-disabled"), "zone", "a"), bad,
                     pod("full", "gpu", 1, "a"), pod("other", "1g.10gb", 1, "z"), selecting(pod("pinned", "gpu", 1), "zone", "a")});
  FleetPlan plan = solve_and_check(f);
  EXPECT_EQ(describe(plan.objective), describe(brute_force(f.problem)));
  EXPECT_FALSE(plan.gpus[1].changed);
  EXPECT_EQ(plan.objective.evicted, 0);
  EXPECT_EQ(plan.objective.unserved, 1);
}

// Media-engine profiles are planned like the others: a node with a 1g.10gb+me
// instance is a plan (not an internal error), a pending +me pod is served on
// it, and nothing changes where nothing pending needs it. Names as the device
// plugin gives them (no '+' in a resource name): the pod asks for
// nvidia.com/mig-1g.10gb.me, and the node's allocatable lists it so.
config::MigPartedConfig media_engine_config() {
  config::Diagnostics d;
  auto cfg = config::parse_mig_parted("version: v1\nmig-configs:\n  me:\n    - devices: all\n      mig-enabled: true\n"
                                      "      mig-devices:\n        \"1g.10gb+me\": 1\n        \"1g.10gb\": 5\n",
                                      "me.yaml", d);
  EXPECT_TRUE(cfg && !d.has_errors());
  return cfg ? *cfg : config::MigPartedConfig{};
}

TEST(FleetModel, MediaEngineProfilesArePlannedLikeTheOthers) {
  Fleet f;
  f.cfg = media_engine_config();
  json a = node("a", "NVIDIA-A100-SXM4-80GB", 1, "me");
  a["status"]["allocatable"] = {{"nvidia.com/mig-1g.10gb.me", "1"}, {"nvidia.com/mig-1g.10gb", "5"}};
  auto snap = parse_snapshot(list({a, pod("media", "1g.10gb.me", 1), pod("run", "1g.10gb", 1, "a")}), "test");
  ASSERT_TRUE(snap);
  auto p = build_problem(*snap, f.cfg);
  ASSERT_TRUE(p) << p.error().message;
  f.problem = std::move(*p);
  f.problem.configs = &f.cfg;
  EXPECT_TRUE(f.problem.media_engines);
  EXPECT_EQ(f.problem.resources[size_t(f.problem.pods[0].resource)], "1g.10gb+me");
  EXPECT_TRUE(f.problem.warnings.empty()) << f.problem.warnings.front();
  EXPECT_TRUE(f.problem.nodes[0].accepts_pods());
  FleetPlan plan = solve_and_check(f);
  EXPECT_EQ(describe(plan.objective), "unserved 0, evicted 0, changed 0, used 1");
  EXPECT_EQ(plan.placement[0], 0);
}

// A shared media-engine profile's replicas label is named as the plugin names its resource.
TEST(FleetModel, AMediaEngineProfilesReplicasLabelIsRead) {
  const auto cfg = media_engine_config();
  json a = node("a", "NVIDIA-A100-SXM4-80GB", 1, "me");
  a["metadata"]["labels"]["nvidia.com/mig-1g.10gb.me.replicas"] = "3";
  auto snap = parse_snapshot(list({a}), "test");
  ASSERT_TRUE(snap);
  auto p = build_problem(*snap, cfg);
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->gpus.size(), 1u);
  EXPECT_EQ(p->gpus[0].instances.size(), 3u + 5u) << "the 1g.10gb+me three times, each 1g.10gb once";
}

// A running pod the layout annotation does not name still holds a device on its node: it is
// counted onto a free instance there (never the one the annotation gives another pod), so a plan
// that changes the node evicts it. A pod that does not fit at all keeps its node as it is.
TEST(FleetModel, ARunningPodTheAnnotationDoesNotNameStillHoldsADevice) {
  json ann = {{"gpus", json::array({{{"index", 0}, {"mig", true}, {"instances", json::array()}}})}};
  for (int s = 0; s < 7; ++s) {
    json inst = {{"profile", "1g.10gb"}, {"start", s}};
    if (s == 0) inst["pod"] = "ml/named";
    ann["gpus"][0]["instances"].push_back(inst);
  }
  auto f = fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb", ann), pod("named", "1g.10gb", 1, "a"),
                     pod("unnamed", "1g.10gb", 1, "a"), pod("whole", "gpu", 1)});
  // Pods sort by id: named, unnamed, whole.
  ASSERT_TRUE(f.problem.pods[1].running());
  ASSERT_EQ(f.problem.pods[1].holds.size(), 1u);
  EXPECT_NE(f.problem.pods[1].holds[0], f.problem.pods[0].holds[0]);
  FleetPlan plan = solve_and_check(f);
  EXPECT_EQ(describe(plan.objective), describe(brute_force(f.problem)));
  EXPECT_EQ(plan.objective.evicted, plan.placement[2] >= 0 ? 2 : 0) << "the whole GPU costs both pods on it";

  auto g = fleet_of({node("a", "NVIDIA-A100-SXM4-80GB", 1, "all-3g.40gb"), pod("huge", "7g.80gb", 1, "a"),
                     pod("small", "1g.10gb", 1)});
  EXPECT_TRUE(g.problem.nodes[0].frozen);
  EXPECT_TRUE(g.problem.pods.size() == 1u && !g.problem.pods[0].running()) << "huge is left out, small pending";
  FleetPlan kept = solve_and_check(g);
  EXPECT_FALSE(kept.gpus[0].changed);
  EXPECT_EQ(kept.objective.unserved, 1);
}

// Waves hold at most a share of the fleet's nodes (the command's default: 10 %), at least one.
TEST(FleetModel, WavesHoldAShareOfTheFleet) {
  std::vector<json> items;
  for (int i = 0; i < 12; ++i) {
    items.push_back(node("n" + std::to_string(10 + i), "NVIDIA-A100-SXM4-80GB", 1, "all-1g.10gb"));
    items.push_back(pod("w" + std::to_string(10 + i), "gpu", 1));
  }
  auto f = fleet_of(items);
  PlanOptions o;
  o.max_wave_share = 0.1;
  FleetPlan plan = solve_and_check(f, o);
  EXPECT_EQ(plan.objective.changed_gpus, 12);
  ASSERT_EQ(plan.rollout.size(), 6u);
  for (const auto& wave : plan.rollout) EXPECT_EQ(wave.size(), 2u);
  o.max_wave_share = 0.01;  // a share under one node is one node
  EXPECT_EQ(solve_and_check(f, o).rollout.size(), 12u);
}

// Random tiny fleets: 2-3 nodes of one GPU each (A100-80GB, H100, A30), a few
// running and pending pods; every level equal to the exhaustive search's.
TEST(FleetModel, RandomTinyFleetsMatchTheExhaustiveSearch) {
  std::mt19937 rng(7);
  const std::vector<std::pair<std::string, std::vector<std::string>>> products = {
      {"NVIDIA-A100-SXM4-80GB", {"all-1g.10gb", "all-3g.40gb", "all-balanced", "all-disabled"}},
      {"NVIDIA-H100-80GB-HBM3", {"all-1g.10gb", "all-balanced", "all-disabled"}},
      {"NVIDIA-A30", {"a30-1g", "all-disabled"}}};
  const std::vector<std::string> resources = {"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "gpu", "1g.6gb", "2g.12gb"};
  int cases = 0;
  for (int round = 0; round < 30; ++round) {
    json items = json::array();
    int nodes = 2 + int(rng() % 2);
    std::vector<std::string> names;
    for (int n = 0; n < nodes; ++n) {
      // At most one node without the A30's small table, so the search stays small.
      const auto& [product, cfgs] = products[n == 2 ? 2 : rng() % 2];
      std::string name = "n" + std::to_string(n);
      items.push_back(node(name, product, 1, cfgs[rng() % cfgs.size()]));
      names.push_back(name);
    }
    int running = int(rng() % 3), pending = 1 + int(rng() % 3);
    for (int i = 0; i < running; ++i)
      items.push_back(pod("r" + std::to_string(i), resources[rng() % resources.size()], 1, names[rng() % names.size()]));
    for (int i = 0; i < pending; ++i) items.push_back(pod("p" + std::to_string(i), resources[rng() % resources.size()], 1));
    auto f = fleet_of(items);
    SCOPED_TRACE(items.dump());
    expect_oracle(f);
    ++cases;
  }
  EXPECT_EQ(cases, 30);
}

// The same with priorities: pending pods of two or three priorities, running pods of some; the
// levels of each priority's pending pods too equal to the exhaustive search's.
TEST(FleetModel, RandomTinyFleetsWithPrioritiesMatchTheExhaustiveSearch) {
  std::mt19937 rng(11);
  const std::vector<std::string> configs = {"all-1g.10gb", "all-3g.40gb", "all-balanced", "all-disabled"};
  const std::vector<std::string> resources = {"1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "gpu"};
  auto prio = [](json pod, int64_t priority) {
    pod["spec"]["priority"] = priority;
    return pod;
  };
  int tiered = 0;
  for (int round = 0; round < 30; ++round) {
    json items = json::array();
    for (int n = 0; n < 2; ++n)
      items.push_back(node("n" + std::to_string(n), "NVIDIA-A100-SXM4-80GB", 1, configs[rng() % configs.size()]));
    int running = int(rng() % 3), pending = 2 + int(rng() % 3);
    for (int i = 0; i < running; ++i)
      items.push_back(prio(pod("r" + std::to_string(i), resources[rng() % resources.size()], 1, "n" + std::to_string(rng() % 2)),
                           int64_t(rng() % 3) * 50));
    for (int i = 0; i < pending; ++i)
      items.push_back(prio(pod("p" + std::to_string(i), resources[rng() % resources.size()], 1), int64_t(rng() % 3) * 50));
    auto f = fleet_of(items);
    SCOPED_TRACE(items.dump());
    expect_oracle(f);
    tiered += !f.problem.priorities.empty();
  }
  EXPECT_GE(tiered, 20);
}

}  // namespace
}  // namespace tessera::fleet::testing
